/* SPDX-License-Identifier: MIT */
/*
 * The verbs answered from the units' properties, systemctl's
 * (tendctl-show.c). Single-threaded.
 */
#pragma once

#include "tendctl-verbs.h"

/* The verbs answered from the units' properties (show, is-active, is-failed,
 * is-enabled, cat, list-dependencies, status NAME…, try-restart,
 * reload-or-restart): runs the verb on fd, returns the exit status. */
int run_show_verb(const struct args *a, int fd);
