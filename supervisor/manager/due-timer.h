/* SPDX-License-Identifier: MIT */
/*
 * A unit's deadline timer, and deadlines already due (SPEC §8 restart
 * latency: RestartSec=0 restarts in the dispatch of the exit that caused
 * it, not a loop iteration later).
 *
 * A unit holds a timer source only while a deadline is armed (a running
 * unit has none: an sd-event source is 300 B, times 1,000 units). A deadline
 * already due when armed is a one-shot defer source (the next loop
 * iteration, no timerfd to program), unless due_timer_take_due() claims it
 * first: the exit's dispatch runs it at its end.
 *
 * The invariant (tests/unit/test-manager-due-timer.c): a deadline already
 * due when armed runs exactly once: at the end of the exit's dispatch
 * (due_timer_take_due true) or at the next iteration (the defer source's
 * handler), never both; a later deadline is a timer source that
 * due_timer_take_due never claims; arming again (or USEC_INFINITY) drops
 * what was armed.
 *
 * One per unit, zero-initialised; single-threaded (the loop's thread).
 */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "time-util.h"

struct due_timer {
        sd_event_source *source; /* while a deadline is armed */
        bool due;                /* source is the defer source of a deadline already due */
};

/* Arms the deadline (CLOCK_MONOTONIC; USEC_INFINITY: none), dropping what
 * was armed. now is the clock's current value (injected for the tests).
 * A due one calls on_due from a defer source, which must call
 * due_timer_dispatched() first; a later one calls on_time at the deadline
 * (accuracy 1 µs). userdata is the handlers' (borrowed). Safe from inside the
 * source's own handler. 0 or a negative errno of sd-event (nothing armed). */
int due_timer_arm(struct due_timer *t, sd_event *e, usec_t deadline, usec_t now, sd_event_time_handler_t on_time,
                  sd_event_handler_t on_due, void *userdata);

/* on_due runs: the deadline is no longer pending. */
void due_timer_dispatched(struct due_timer *t);

/* Claims a deadline that was due when armed and has not run yet: true (its
 * source dropped, the caller runs it now), else false. */
bool due_timer_take_due(struct due_timer *t);

/* Drops the source, if any. */
void due_timer_done(struct due_timer *t);
