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

/* reexec: remembers tend's command line (argv borrowed: main's) and the
 * path of the running binary, resolved now, for a later re-exec; and the
 * service manager's $NOTIFY_SOCKET / $WATCHDOG_* that the manager removes
 * from tend's environment at set-up, so the re-executed tend gets them
 * again. Call first thing in main(). */
void reexec_remember(int argc, char **argv);

/* reexec: `tend --check-state-version N`: 0 when this binary reads state
 * format N, printing the one line "tend state format N readable" (the old
 * tend checks it exactly: a binary that exits 0 is not enough), else 1,
 * printing "tend state format N not readable: this tend reads 1 to W"
 * (tend(8) "RE-EXECUTING"). */
int reexec_check_version(const char *arg);
