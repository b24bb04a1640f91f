/* SPDX-License-Identifier: MIT */
/*
 * Between the files of the unit state machine (unit.c, unit-notify.c,
 * unit-policy.c); nothing else includes it. unit.h says how an event runs.
 */
#pragma once

#include "unit.h"

/* ---- unit-state.c: the position table and the changes ---- */

/* What a position means (unit.h's table), one row per position. */
struct unit_pos_row {
        const char *name;
        enum unit_state shown;   /* SPEC §4's word */
        enum unit_job_state job; /* the start job, as other units see it */
        bool settled;            /* SPEC §4 "Settled" */
        bool idle;               /* no process belongs here (dead or back-off) */
        bool down;               /* inactive or failed, no start job */
        bool waiting;            /* a start job waits for its dependencies */
        bool starting;           /* the start job runs (past its wait) */
        bool ran;                /* the start job was done: ExecStop= runs at the stop */
};
extern const struct unit_pos_row unit_pos_table[_UNIT_POS_MAX];

static inline const struct unit_pos_row *unit_sm_row(const struct unit *u) {
        return &unit_pos_table[u->pos];
}

/* Moves u to p and queues the change for the manager (its record). */
void unit_sm_set_pos(struct unit *u, enum unit_pos p);
/* A finer move that changes nothing shown (asserted): no record. */
void unit_sm_move(struct unit *u, enum unit_pos p);
/* Queues a change for the manager, with u's fields now (kind: UNIT_CHANGE_*). */
void unit_sm_queue_change(struct unit *u, int kind, unit_action action, int status);
/* Queues a change of u's record without a move (pid, STATUS=…). */
void unit_sm_queue_changed(struct unit *u);
/* Delivers the queued changes in order (ops->changed, answered, action). */
void unit_sm_deliver_changes(struct unit *u);
usec_t unit_sm_now(struct unit *u);

/* ---- unit.c: the machine's steps ---- */

/* Every public event runs between these: the last end applies the queued
 * requests, then delivers the queued changes to the manager. */
void unit_sm_event_begin(struct unit *u);
void unit_sm_event_end(struct unit *u);

/* Arms u's timer timeout µs from now (USEC_INFINITY: none). */
void unit_sm_arm(struct unit *u, usec_t timeout);
void unit_sm_disarm(struct unit *u);
/* p (taken, may be NULL) becomes u's main process. */
void unit_sm_set_main(struct unit *u, struct exit_process *p);
/* The start job is done for u's Type= (READY=1, exec, fork, oneshot). */
void unit_sm_main_started(struct unit *u);
/* Sends sig per KillMode= (the final kill signal when final) and waits. */
void unit_sm_enter_stop_signal_as(struct unit *u, int sig, bool final);

/* ---- unit-notify.c: the watchdog lease ---- */

/* Creates the lease (entering RUNNING) or renews it (WATCHDOG=1). */
void unit_sm_watchdog_renew(struct unit *u);
/* Leaving RUNNING: tend's own delete (cause `deleted`), never a failure. */
void unit_sm_watchdog_release(struct unit *u);

/* ---- unit-policy.c: exits, Restart=, the start limit (SPEC §4 "Restart") ---- */

bool unit_sm_exit_is_clean(const struct unit *u, const struct exit_reason *r);
enum unit_result unit_sm_result_of_exit(const struct unit *u, const struct exit_reason *r);
/* Whether the restart policy restarts u after its last run. */
bool unit_sm_restart_wanted(const struct unit *u);
/* The back-off delay for u's restart step, µs. */
usec_t unit_sm_restart_delay(const struct unit *u);
/* Records a start; false when it is over the start limit. */
bool unit_sm_start_limit_ok(struct unit *u);
void unit_sm_start_limit_reset(struct unit *u);
