/* SPDX-License-Identifier: MIT */
/*
 * "Run CMD and exit with its status" (SPEC §1, §6; docs/tend.8.md "EXIT STATUS"):
 * the one implementation behind entrypoint mode (`tend -- CMD`) and combined
 * mode (`tend --config-dir DIR -- CMD`), so the two agree by construction on
 * how CMD is spawned, which status each outcome gives, and what is said.
 *
 * The caller owns the loop: it spawns CMD here, hands CMD's exec result to
 * cmd_run_exec_result() when the reaper announces it (EXIT_REAPER_EXEC_EVENTS,
 * exit_reaper_next_exec: nothing here blocks on the exec), and turns CMD's exit
 * into tend's status with cmd_run_exit_status().
 *
 * Single-threaded, as tend's loop; no function keeps a pointer it was given.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "libexit.h"

/* The statuses of SPEC §6 for a CMD that never ran. */
#define CMD_STATUS_NOT_FOUND 127      /* ENOENT, ENOTDIR: no such file on the way */
#define CMD_STATUS_NOT_EXECUTABLE 126 /* anything else: permissions, format, set-up */

/*
 * Pure. The status for an exec failure: error is the negative errno the child
 * failed with, stage its enum exit_spawn_stage. Not found (127) is ENOENT or
 * ENOTDIR at the exec itself (execvp's "not found": a path component missing
 * or not a directory); every other failure is 126.
 */
int cmd_run_exec_failure_status(int error, int stage);

/*
 * Pure. tend's status once CMD has exited: exec is CMD's exec status
 * (exit_process_exec_result: 0, -EINPROGRESS, or a negative errno at stage),
 * reason (borrowed, required) its exit. An exec failure gives
 * cmd_run_exec_failure_status(); otherwise the exit code, or 128 + N for
 * signal N.
 */
int cmd_run_status(int exec, int stage, const struct exit_reason *reason);

/*
 * Spawns CMD (argv borrowed for the call, argv[0] searched in PATH as execvp
 * does): in its own process group, made the terminal's foreground group if
 * tend's was (EXIT_SPAWN_FOREGROUND); every fd tend passes on reaches it at
 * its number (EXIT_SPAWN_KEEP_FDS); LISTEN_PID and WATCHDOG_PID rewritten to
 * its pid when they name tend's (SPEC §6). nofile_soft, when non-zero, is its
 * RLIMIT_NOFILE soft limit (SPEC §7: the one tend inherited). Returns 0 and
 * *ret_process (the caller's reference), or the spawn's negative errno,
 * already logged ("cannot start CMD: …"). An exec failure is no error here:
 * it arrives as CMD's exec result. beside_units (combined mode): the loop
 * serves units while CMD starts, so CMD never takes the vfork path
 * (EXIT_SPAWN_NO_VFORK): a slow exec (a binary on a hung mount) never
 * suspends tend. Entrypoint mode has nothing else to serve until CMD runs
 * and keeps the cheaper vfork.
 */
int cmd_run_spawn(struct exit_reaper *reaper, char *const *argv, uint64_t nofile_soft, bool beside_units,
                  struct exit_process **ret_process);

/*
 * As cmd_run_spawn(beside_units false), but with CMD left in tend's own
 * process group and session when same_group (DUMB_INIT_SETSID=0: no
 * EXIT_SPAWN_FOREGROUND, so no setpgid and no tcsetpgrp). Same returns.
 */
int cmd_run_spawn_in(struct exit_reaper *reaper, char *const *argv, bool same_group,
                     struct exit_process **ret_process);

/*
 * Reports CMD's exec result (process borrowed): an exec failure as an error
 * naming CMD and the reason ("CMD: No such file or directory"), a success
 * at debug level. Returns the exec status (0 or a negative errno).
 */
int cmd_run_exec_result(const char *name, const struct exit_process *process);

/*
 * Reports CMD's exit (process and reason borrowed): "CMD (pid N) exited with
 * code C" or "… killed by signal S", at info level. Returns tend's status,
 * cmd_run_status() of the process's exec status (known by then: the reaper
 * collects it before it publishes the exit) and reason.
 */
int cmd_run_exited(const char *name, const struct exit_process *process, const struct exit_reason *reason);
