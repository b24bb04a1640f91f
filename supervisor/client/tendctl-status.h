/* SPDX-License-Identifier: MIT */
/*
 * `tendctl status NAME…` as an operator reads it (tendctl-status.c).
 * Single-threaded.
 */
#pragma once

#include "tendctl-units.h"

/* status NAME…: each unit of u (fetched on fd, its logs read there too)
 * displayed; the exit status (0 all active, 3 one is not, 4 one unknown). */
int verb_status(const struct args *a, int fd, struct units *u);
