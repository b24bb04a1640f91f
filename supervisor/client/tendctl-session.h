/* SPDX-License-Identifier: MIT */
/*
 * tend's own verbs' sessions (tendctl-session.c): one request, its answer's
 * messages read until the result (watch and logs -f until tend or the user
 * ends them). Single-threaded.
 */
#pragma once

#include "tendctl-verbs.h"

/* Sends a's request (a->cmd with a->names) on fd and reads its answer as
 * tend's own verbs do; returns the exit status. */
int run_session(const struct args *a, int fd);
