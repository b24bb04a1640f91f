/* SPDX-License-Identifier: MIT */
/*
 * reexec: a unit's position and history carried across `tendctl
 * daemon-reexec` (docs/tend.8.md "RE-EXECUTING"). The old tend reads them
 * with unit_saved_get(); the new one puts them back with unit_restore()
 * before its loop runs, so nothing is started, stopped or counted again.
 * Only settled positions are carried (unit_restorable()): INACTIVE, FAILED,
 * RUNNING without a control process, BACKOFF; the old tend waits for the
 * others to settle. Single-threaded (tend's loop).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "libexit.h"
#include "time-util.h"
#include "unit.h"

#define UNIT_SAVED_STARTS_MAX 64u /* start-limit history kept (StartLimitBurst+1, capped) */

struct unit_saved {
        enum unit_pos pos;
        enum unit_result result;
        bool want_up, finished, has_last_exit, watchdog_held;
        struct exit_reason last_exit;
        pid_t main_pid;                  /* 0: none */
        usec_t since_realtime, since_monotonic;
        usec_t deadline;                 /* absolute CLOCK_MONOTONIC µs, USEC_INFINITY: none */
        uint64_t restarts;
        unsigned restart_step;
        unsigned n_starts;               /* start-limit history, oldest first (µs, CLOCK_MONOTONIC) */
        usec_t starts[UNIT_SAVED_STARTS_MAX];
        const char *status_text;         /* borrowed (the unit's, or the parsed state's); NULL: none */
};

/* Whether u is in a position that can be carried across a re-exec (above).
 * *why (static text) says what it waits for when not. */
bool unit_restorable(const struct unit *u, const char **why);

/* Fills *ret from u (its strings borrowed from u). */
void unit_saved_get(const struct unit *u, struct unit_saved *ret);

/* Puts s back into u, a unit freshly made (INACTIVE, no process): main is
 * its main process tracked again (a new reference taken; NULL when none),
 * resolution the restart flight a BACKOFF unit holds (taken; NULL
 * otherwise). The deadline is re-armed through ops->arm at its absolute
 * time; a watchdog lease is made anew (ops->watchdog, its period from now);
 * the record is queued as a change (ops->changed runs at once).
 * 0, -EINVAL (a position unit_restorable() refuses), -ENOMEM. */
int unit_restore(struct unit *u, const struct unit_saved *s, struct exit_process *main, sf_resolution *resolution);
