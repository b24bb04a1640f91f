/* SPDX-License-Identifier: MIT */
/*
 * reexec: `tendctl daemon-reexec` and SIGUSR2 (SPEC §1's table, tend(8)
 * "RE-EXECUTING"). The old tend waits until every unit is in a settled
 * position (at most REEXEC_SETTLE_USEC), asks the new binary whether it
 * reads this state format (`BINARY --check-state-version N`), writes its
 * state as one JSON document into a memfd, clears O_CLOEXEC on the memfd and
 * on the fds the state names (the control socket and its connections, the
 * read ends of the units' log pipes that exist, the notify sockets: they
 * keep their numbers through execve, so the state names them by number; no
 * cgroup fd: those are opened per call), and executes the binary at the path it was started from
 * (resolved at start: a binary replaced on disk is the one run). The pid
 * stays: every unit's processes stay tend's children, and one that exits
 * meanwhile stays a zombie, reaped by the new tend with its status.
 * The new tend finds the memfd in $TEND_REEXEC_STATE_FD, loads DIR as at
 * any start, and instead of starting the units the state names puts each
 * back (position, counts, times, start-limit history, main process tracked
 * again by pid, log pipes, ring).
 * Single-threaded (tend's loop). Only the manager's files include this.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "manager-internal.h"

/* The state format this tend writes; it reads 1 … this. 2 (issue 19's fd
 * budget): a log pipe is its read end only ("rfd"), a unit without a pipe
 * has none — a tend of format 1 would adopt a pipe without a write end and
 * spawn with fd -1, so it must refuse. 1: every unit's pipes, both ends
 * ("wfd" too: the reader of 1 closes it, the next spawn opens one). */
#define TEND_STATE_VERSION 2
/* How long a re-exec waits for units in transition (starting, stopping) to settle. */
#define REEXEC_SETTLE_USEC (5 * USEC_PER_SEC)
/* The line `tend --check-state-version N` prints when it reads format N
 * (a printf format, N as %d); the old tend compares it exactly. */
#define REEXEC_CHECK_ANSWER "tend state format %d readable"
#define REEXEC_CHECK_ANSWER_TEXT "tend state format N readable"
/* How long the new binary gets to answer --check-state-version (its
 * child killed then: "no answer in time"); tend's loop runs on meanwhile. */
#define REEXEC_CHECK_TIMEOUT_MS 5000

/* Adds v to the state object o under key, taking v (NULL: out of memory).
 * 0, or -ENOMEM (v released). For the state's writers (reexec*.c). */
static inline int reexec_state_add(json_object *o, const char *key, json_object *v) {
        if (!v || json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

/* reexec.c: daemon-reexec asked (the control socket's op, or SIGUSR2): 0
 * when it is under way (or one is: this request shares it), or a negative
 * errno with why (size bytes) filled: -EOPNOTSUPP (combined mode),
 * -EBUSY (shutting down), -ENOENT (the path is gone), -ESTALE (a unit that
 * runs would not load from DIR now: the new tend could not resume it), or
 * the errno of spawning the check. Under way, nothing blocks the loop (QA
 * M1): `BINARY --check-state-version N` runs as a child tracked by the
 * reaper, its exit watched through the hub, killed after
 * REEXEC_CHECK_TIMEOUT_MS; then the units settle; then the exec. Every
 * later refusal (the binary's answer, its deadline, a unit that would not
 * settle or resume, a failed exec) is logged "not re-executing: WHY" and
 * given to control_server_reexec_abandoned(); a successful exec hands the
 * waiting requests over (control_server_handover_waiting()). */
int manager_reexec_request(struct manager *m, char *why, size_t size);

/* reexec.c: a check under way is killed and forgotten (the manager is
 * freed): nothing answered. */
void manager_reexec_cancel(struct manager *m);

/* reexec-restore.c: the previous tend's state, if this tend was started by
 * a re-exec: m->resumed set (1) or not (0); an unreadable state is an error
 * (logged: tend cannot know its units' processes). Before manager_setup(). */
int manager_resume_begin(struct manager *m);
/* manager_load_units() for a re-executed tend (QA L2): the messages of
 * loading DIR are held, then each is logged unless it is about a unit file
 * (or drop-in, or the unit by name) whose text is the one the previous tend
 * loaded (the state's file_text_size/hash): that tend logged it already. A
 * changed or new file is reported as at any load. Returns as
 * manager_load_units(). */
int manager_resume_load_units(struct manager *m);
/* The control socket's fd the state names, 0 when none. */
int manager_resume_control_fd(const struct manager *m);
/* After the units are loaded: each unit the state names is put back
 * (unit_data.resumed); the state is let go. Returns the number put back. */
size_t manager_resume_units(struct manager *m);
