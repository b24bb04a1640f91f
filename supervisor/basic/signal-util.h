/* SPDX-License-Identifier: MIT */
/* Signal names and the sets tend handles (SPEC §1 "Signals that reach tend itself"). */
#pragma once

#include <signal.h>
#include <stdbool.h>

/*
 * Parses "TERM", "SIGTERM", "sigterm", "15", "RTMIN+2", "RTMAX-1": the names
 * systemd 252 accepts (signal 29 is "IO"), case-insensitive, plus "POLL" for
 * 29 (glibc's and Docker's name). The same in the glibc and musl builds.
 * Returns the signal number (1.._NSIG-1), or -EINVAL. Thread-safe.
 */
int signal_from_string(const char *s);

/* "SIGTERM" (systemd's names: 29 is "SIGIO"); "SIGRTMIN+2" for real-time
 * signals; "signal 99" otherwise. Returns buf (at least 24 bytes), never NULL.
 * Thread-safe. */
const char *signal_to_string(int sig, char buf[static 24]);

/*
 * The signals an entrypoint forwards: every signal but SIGKILL, SIGSTOP,
 * SIGCHLD (only the reaper reads it), the synchronous faults (SEGV, BUS, ILL,
 * FPE, TRAP, SYS, ABRT: blocking them is undefined) and glibc's two internal
 * real-time signals. SIGTSTP/SIGTTIN/SIGTTOU are in it: tend blocks them for
 * itself, never stops, and forwards them.
 */
void signal_forward_set(sigset_t *ret_set);
