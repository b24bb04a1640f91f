/* SPDX-License-Identifier: MIT */
/*
 * Service and combined modes (SPEC §1, §3, §4): tend --config-dir DIR [-- CMD].
 * The manager owns the units, the reaper, the single-flight table, the store,
 * the cgroup tree and the log streams, and wires them to one sd-event loop.
 */
#pragma once

#include <stddef.h>

#include "options.h"

/*
 * Runs until shutdown. inherited[0..n) are the fds tend inherited beyond
 * 0/1/2 (passed to CMD in combined mode, closed otherwise). Returns tend's
 * exit status: 0, the SuccessAction=/FailureAction= status, CMD's status in
 * combined mode, or 1 when tend itself could not run.
 */
int manager_run(const struct tend_options *opts, const int *inherited, size_t n_inherited);
