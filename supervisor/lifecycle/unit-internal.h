/* SPDX-License-Identifier: MIT */
/*
 * Between the files of the unit state machine (unit.c, unit-steps.c,
 * unit-state.c, unit-notify.c, unit-policy.c); nothing else includes it.
 * unit.h says how an event runs.
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

/* u->changes: the changes an event queued, in order (n of max). */
struct unit_changes {
        uint32_t n, max;
        struct unit_change v[];
};

/* u->start_times: a ring of the last StartLimitBurst+1 starts (µs, n of them
 * so far, the next written at head). */
struct unit_start_times {
        unsigned n, head;
        usec_t t[];
};

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

/* ---- unit.c: the event bracket and the helpers the steps share ---- */

/* Every public event runs between these: its end runs the steps it queued,
 * and the last end applies the queued requests (running their steps after
 * each), then delivers the queued changes to the manager. */
void unit_sm_event_begin(struct unit *u);
void unit_sm_event_end(struct unit *u);

/* Arms u's timer timeout µs from now (USEC_INFINITY: none). */
void unit_sm_arm(struct unit *u, usec_t timeout);
void unit_sm_disarm(struct unit *u);
/* p (taken, may be NULL) becomes u's main process. */
void unit_sm_set_main(struct unit *u, struct exit_process *p);
/* l's command i, NULL past the end. */
const struct unit_command *unit_sm_command(const struct unit_command_list *l, size_t i);
/* Answers u's flight, if any (ok, or not with reason: may be NULL), ends
 * the work's share of it and queues the change for the manager. */
void unit_sm_answer_flight(struct unit *u, bool ok, const char *reason);

/* ---- unit-steps.c: what follows an event, one table ---- */

/* Names the step that follows (asserts the slot is free and, inside a step,
 * that the table lets s follow it). */
void unit_sm_queue_step(struct unit *u, enum unit_step s);
/* Runs the queued steps until none is left. */
void unit_sm_run_steps(struct unit *u);
/* A start failed before the unit ran: the result, the answer, the stop. */
void unit_sm_start_failed(struct unit *u, enum unit_result result);
/* Whether the processes the current KillMode= waits for are gone. */
bool unit_sm_stop_complete(struct unit *u);
/* In the stop sequence, after a process of u went (or the stop signal was
 * sent): STOP_FINISHED when nothing is left to wait for, STOP_SIGKILL when
 * KillMode=mixed's main and control processes are gone but others are left. */
void unit_sm_stop_check(struct unit *u);
/* The commands u's position runs, NULL where it runs none. */
const struct unit_command_list *unit_sm_commands_of(const struct unit *u);
/* A daemon-reload's new file becomes u's (no process of u runs). */
void unit_sm_take_next_file(struct unit *u);
/* unit.c: u's pending file becomes its file if it fits u's position now
 * (unit_set_next_file()); run at each last event end and at the reload. */
void unit_sm_settle_file(struct unit *u);

/* cond: unit-conditions.c. At the start job's begin (a WAIT position): true
 * when u's Condition*=/Assert*= allow the start; else u was moved and its
 * flight answered (skipped: inactive, ok; an assert: inactive, not ok). */
bool unit_sm_conditions_met(struct unit *u);

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
/* Takes back the last start recorded: it never ran (out of fds). */
void unit_sm_start_limit_forget(struct unit *u);

/* ---- unit-forking.c: Type=forking's main process ---- */

/* The start process exited 0 (START): the main process is found (PIDFile=,
 * MAINPID=, the guess) and the start job is done, or the file is waited
 * for, or the start fails. */
void unit_sm_forking_started(struct unit *u);
/* Whether u waits for its PID file (START, the start process gone). */
bool unit_sm_forking_waits(const struct unit *u);
/* Whether a forking unit running without a main process has no process left. */
bool unit_sm_forking_ended(struct unit *u);
