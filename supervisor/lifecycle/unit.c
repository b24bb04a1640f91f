/* SPDX-License-Identifier: MIT */
/*
 * The unit state machine (SPEC §4); unit.h lists the positions, the events,
 * the invariants and how an event runs. Here: the position table, the
 * change queue and the queued requests, then the transitions, then the
 * events. Notifications and the watchdog are in unit-notify.c, the restart
 * policy and the start limit in unit-policy.c.
 */
#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "signal-util.h"
#include "unit-internal.h"

void unit_sm_arm(struct unit *u, usec_t timeout) {
        usec_t t = unit_sm_now(u);
        u->deadline = timeout == USEC_INFINITY || timeout > USEC_INFINITY - t ? USEC_INFINITY : t + timeout;
        u->ops->arm(u->userdata, u, u->deadline);
}

void unit_sm_disarm(struct unit *u) {
        u->deadline = USEC_INFINITY;
        u->ops->arm(u->userdata, u, USEC_INFINITY);
}

void unit_sm_set_main(struct unit *u, struct exit_process *p) {
        exit_process_unref(u->main);
        u->main = p;
        u->main_pid = p ? exit_process_pid(p) : 0;
        u->ops->main_pid_changed(u->userdata, u, u->main_pid);
}

static const struct unit_command *command(const struct unit_command_list *l, size_t i) {
        return i < l->n ? &l->commands[i] : NULL;
}

/* ---- outcomes (SPEC §2.3) ---- */

static int outcome_copy(const void *outcome, void **ret_copy, void *userdata) {
        struct unit_outcome *c = malloc(sizeof *c);
        if (!c)
                return -ENOMEM;
        *c = *(const struct unit_outcome *) outcome;
        *ret_copy = c;
        return 0;
}

static void outcome_free(void *outcome, void *userdata) {
        free(outcome);
}

const sf_outcome_ops unit_outcome_ops = { .copy = outcome_copy, .free = outcome_free };

/* Answers the current flight, if any, and ends the work's share of it;
 * reason (may be NULL) says why it is not ok beyond the result. */
static void answer_flight_why(struct unit *u, bool ok, const char *reason) {
        if (!u->resolution)
                return;
        struct unit_outcome *o = malloc(sizeof *o);
        if (o) {
                *o = (struct unit_outcome) { .ok = ok, .main_pid = u->main_pid, .result = u->result };
                snprintf(o->reason, sizeof o->reason, "%s", reason ? reason : "");
                if (sf_resolution_answer_take(u->resolution, o) < 0)
                        free(o);
        }
        /* Without an answer (out of memory) freeing it answers `abandoned`. */
        u->resolution = sf_resolution_free(u->resolution);
        unit_sm_queue_change(u, UNIT_CHANGE_ANSWERED, UNIT_ACTION_NONE, 0);
}

static void answer_flight(struct unit *u, bool ok) {
        answer_flight_why(u, ok, NULL);
}

/* ---- the end of a run ---- */

static void begin_start(struct unit *u);

static void enter_dead(struct unit *u) {
        unit_sm_disarm(u);
        unit_sm_watchdog_release(u);
        bool ok = u->result == UNIT_RESULT_SUCCESS;
        /* An explicit restart goes straight on to its start (a queued
         * request): a dead state published in between would end a `tendctl
         * stop` waiting for "inactive" while the stop it queued behind the
         * restart (SPEC §2.3) is still to come. */
        if (u->queued & UNIT_QUEUED_RESTART)
                unit_sm_move(u, UNIT_POS_WAIT_RESTART);
        else
                unit_sm_set_pos(u, ok ? UNIT_POS_INACTIVE : UNIT_POS_FAILED);
        answer_flight(u, false);
        if (!ok)
                log_warning("%s: failed with result '%s'", u->name, unit_result_to_string(u->result));
        unit_action action = ok ? u->file->success_action : u->file->failure_action;
        if (action != UNIT_ACTION_NONE && u->want_up) {
                int status = u->has_last_exit ? exit_reason_to_shell_status(&u->last_exit) : (ok ? 0 : 1);
                unit_sm_queue_change(u, UNIT_CHANGE_ACTION, action, status);
        }
}

static void enter_backoff_or_dead(struct unit *u) {
        unit_sm_disarm(u);
        if (!unit_sm_restart_wanted(u)) {
                enter_dead(u);
                return;
        }
        unit_sm_set_pos(u, UNIT_POS_BACKOFF);
        u->queued |= UNIT_QUEUED_BACKOFF; /* the restart's flight, after the event */
}

/* The stop sequence is done: nothing of the unit runs any more. */
static void stop_finished(struct unit *u) {
        /* SPEC §4 "Stop": KillMode=process leaves the rest; say so. */
        if (u->file->kill_mode == UNIT_KILL_PROCESS && u->ops->populated(u->userdata, u) > 0)
                log_warning("%s: processes of the unit are left running (KillMode=process)", u->name);
        if (u->want_up && !(u->queued & UNIT_QUEUED_RESTART))
                enter_backoff_or_dead(u);
        else
                enter_dead(u);
}

/* Whether the processes the current KillMode= waits for are gone. */
static bool stop_complete(struct unit *u) {
        if (u->main || u->control)
                return false;
        if (u->file->kill_mode == UNIT_KILL_PROCESS)
                return true;
        int k = u->ops->populated(u->userdata, u);
        return k <= 0;
}

static void signal_for_kill_mode(struct unit *u, int sig, bool final) {
        char b[24];
        bool all = u->file->kill_mode == UNIT_KILL_CONTROL_GROUP ||
                   (u->file->kill_mode == UNIT_KILL_MIXED && final);
        if (all) {
                int k = u->ops->signal_all(u->userdata, u, sig);
                if (k < 0)
                        log_warning_errno(k, "%s: sending %s: %m", u->name, signal_to_string(sig, b));
                if (!final)
                        (void) u->ops->signal_all(u->userdata, u, SIGCONT);
                return;
        }
        if (u->main) {
                (void) exit_process_signal(u->main, sig);
                if (!final)
                        (void) exit_process_signal(u->main, SIGCONT);
        }
        if (u->control) /* a control process is never left behind */
                (void) exit_process_signal(u->control, sig);
}

void unit_sm_enter_stop_signal_as(struct unit *u, int sig, bool final) {
        if (final && !u->file->send_sigkill) {
                log_warning("%s: processes survive the stop (SendSIGKILL=no)", u->name);
                stop_finished(u);
                return;
        }
        signal_for_kill_mode(u, sig, final);
        unit_sm_set_pos(u, final ? UNIT_POS_STOP_SIGKILL : UNIT_POS_STOP_SIGTERM);
        if (stop_complete(u)) {
                stop_finished(u);
                return;
        }
        unit_sm_arm(u, u->file->timeout_stop);
}

static void enter_stop_signal(struct unit *u, bool final) {
        unit_sm_enter_stop_signal_as(u, final ? u->file->final_kill_signal : u->file->kill_signal, final);
}

static void run_next(struct unit *u);

/* Runs ExecStop= if the start job was done (ran), then the signals. */
static void enter_stop_ran(struct unit *u, bool ran) {
        unit_sm_disarm(u);
        unit_sm_watchdog_release(u);
        if (u->control) {
                /* A start's control process is part of what is stopped. */
                (void) exit_process_signal(u->control, u->file->kill_signal);
        }
        if (ran && u->file->exec_stop.n > 0 && !u->control) {
                u->cmd_index = 0;
                unit_sm_set_pos(u, UNIT_POS_STOP_CMD);
                run_next(u);
                return;
        }
        enter_stop_signal(u, false);
}

static void enter_stop(struct unit *u) {
        enter_stop_ran(u, unit_sm_row(u)->ran);
}

/* A start failed before the unit ran: record why, then stop what is left. */
static void start_failed(struct unit *u, enum unit_result result) {
        u->result = result;
        answer_flight(u, false);
        enter_stop(u);
}

/* ---- starting ---- */

static void enter_running(struct unit *u) {
        unit_sm_disarm(u); /* TimeoutStartSec= no longer applies */
        unit_sm_set_pos(u, UNIT_POS_RUNNING);
        unit_sm_watchdog_renew(u); /* the lease exists from here (SPEC §4) */
        answer_flight(u, true);
}

/* Every command of the start ran, ExecStartPost= included. A oneshot
 * without RemainAfterExit= is then done: nothing to restart. */
static void start_commands_done(struct unit *u) {
        if (u->file->type != UNIT_TYPE_ONESHOT || u->file->remain_after_exit) {
                enter_running(u);
                return;
        }
        u->finished = true;
        answer_flight(u, true);
        enter_stop_ran(u, true);
}

/* The start job is done for the unit's Type= (SPEC §4 "Start jobs"), after
 * ExecStartPost= (a oneshot's too, with or without RemainAfterExit=). */
void unit_sm_main_started(struct unit *u) {
        if (u->file->exec_start_post.n > 0) {
                u->cmd_index = 0;
                unit_sm_set_pos(u, UNIT_POS_START_POST);
                run_next(u);
                return;
        }
        start_commands_done(u);
}

/* The commands the position runs, NULL where it runs none. */
static const struct unit_command_list *commands_of(const struct unit *u) {
        switch (u->pos) {
        case UNIT_POS_START_PRE:
                return &u->file->exec_start_pre;
        case UNIT_POS_START:
                return &u->file->exec_start;
        case UNIT_POS_START_POST:
                return &u->file->exec_start_post;
        case UNIT_POS_STOP_CMD:
                return &u->file->exec_stop;
        case UNIT_POS_RELOAD:
                return &u->file->exec_reload;
        default:
                return NULL;
        }
}

/* The position's commands all ran: its next step. */
static void commands_done(struct unit *u) {
        switch (u->pos) {
        case UNIT_POS_START_PRE:
                u->cmd_index = 0;
                unit_sm_move(u, UNIT_POS_START);
                run_next(u);
                return;
        case UNIT_POS_START: /* oneshot: every ExecStart= succeeded (or there was none) */
                unit_sm_main_started(u); /* ExecStartPost=, then done or running */
                return;
        case UNIT_POS_START_POST:
                start_commands_done(u);
                return;
        case UNIT_POS_STOP_CMD:
                enter_stop_signal(u, false);
                return;
        case UNIT_POS_RELOAD:
                unit_sm_set_pos(u, UNIT_POS_RUNNING);
                return;
        default:
                return;
        }
}

/* SPEC §2.3: the first fork of any of the unit's processes is the point of
 * no return of its flight. false when the flight was cancelled first: the
 * unit is back to inactive. */
static bool publish(struct unit *u) {
        if (!u->resolution || sf_resolution_begin_publishing(u->resolution) != -ECANCELED)
                return true;
        log_debug("%s: start cancelled before its first process", u->name);
        u->resolution = sf_resolution_free(u->resolution);
        u->result = UNIT_RESULT_SUCCESS;
        u->want_up = false;
        enter_dead(u);
        return false;
}

/* Spawns the position's command at cmd_index; moves on when none is left. */
static void run_next(struct unit *u) {
        const struct unit_command_list *l = commands_of(u);
        if (!l)
                return;
        const struct unit_command *cmd = command(l, u->cmd_index);
        if (!cmd) {
                commands_done(u);
                return;
        }
        if (!publish(u))
                return;
        bool main = u->pos == UNIT_POS_START;
        struct exit_process *p = NULL;
        int k = u->ops->spawn(u->userdata, u, cmd, main, &p);
        if (k < 0) { /* said by the spawn op */
                if (u->pos == UNIT_POS_STOP_CMD || u->pos == UNIT_POS_RELOAD) {
                        u->cmd_index++;
                        run_next(u);
                } else
                        start_failed(u, k == -ENOEXEC ? UNIT_RESULT_EXEC_FAILED : UNIT_RESULT_RESOURCES);
                return;
        }
        if (!main) {
                u->control = p;
                return;
        }
        unit_sm_set_main(u, p);
        if (u->file->type == UNIT_TYPE_SIMPLE) {
                unit_sm_main_started(u);
                return;
        }
        /* exec: started at the exec status; notify: at its READY=1
         * (unit_notify); oneshot: at its exit. The record shows the main
         * pid meanwhile. */
        unit_sm_queue_changed(u);
}

/* A new file takes effect where no process of the unit runs. The start-limit
 * ring is sized by StartLimitBurst=, which the new file may change. */
static void take_next_file(struct unit *u) {
        if (!u->next_file)
                return;
        unit_file_free(u->file);
        u->file = TAKE_PTR(u->next_file);
        free(u->start_times);
        u->start_times = NULL;
        unit_sm_start_limit_reset(u);
}

static void enter_start(struct unit *u) {
        take_next_file(u);
        if (!unit_sm_start_limit_ok(u)) {
                log_error("%s: start limit hit (more than %u starts within the interval): no more automatic restarts",
                          u->name, u->file->start_limit_burst);
                u->result = UNIT_RESULT_START_LIMIT;
                unit_sm_set_pos(u, UNIT_POS_FAILED);
                answer_flight(u, false);
                return;
        }
        u->result = UNIT_RESULT_SUCCESS;
        u->finished = false;
        u->cmd_index = 0; /* last_exit stays: the previous instance's, until this one exits */
        unit_sm_set_pos(u, UNIT_POS_START_PRE);
        unit_sm_arm(u, u->file->timeout_start);
        int k = u->ops->prepare(u->userdata, u);
        if (k < 0) {
                log_error_errno(k, "%s: cannot prepare its start: %m", u->name);
                start_failed(u, UNIT_RESULT_RESOURCES);
                return;
        }
        run_next(u);
}

/* The WAIT position for a start from p, showing what p shows. */
static enum unit_pos wait_pos_of(enum unit_pos p) {
        switch (p) {
        case UNIT_POS_FAILED:
                return UNIT_POS_WAIT_FAILED;
        case UNIT_POS_BACKOFF:
                return UNIT_POS_WAIT_BACKOFF;
        case UNIT_POS_WAIT_RESTART:
                return UNIT_POS_WAIT_RESTART;
        default:
                return UNIT_POS_WAIT_INACTIVE;
        }
}

/* Every start goes through its start job: it may wait for its dependencies
 * (SPEC §4 "Start jobs") in a WAIT position, showing the state it had. */
static void begin_start(struct unit *u) {
        unit_sm_move(u, wait_pos_of(u->pos));
        if (u->ops->start_job(u->userdata, u) != 0 && unit_is_waiting(u)) {
                /* Behind a restart's stop nothing new runs yet: the queued
                 * stop applies after the event. Else the old instance is
                 * gone: the restart waits, shown inactive. */
                if (u->pos == UNIT_POS_WAIT_RESTART && !(u->queued & UNIT_QUEUED_STOP))
                        unit_sm_set_pos(u, UNIT_POS_WAIT_INACTIVE);
                return;
        }
        if (unit_is_waiting(u))
                enter_start(u);
}

/* Back to where the WAIT position was entered from; the flight ends
 * unanswered. */
static void leave_wait(struct unit *u) {
        u->resolution = sf_resolution_free(u->resolution);
        u->queued &= ~UNIT_QUEUED_STOP;
        if (u->pos == UNIT_POS_WAIT_FAILED) {
                unit_sm_set_pos(u, UNIT_POS_FAILED);
                return;
        }
        /* From back-off or a restart nothing failed: the unit is stopped. */
        if (u->pos != UNIT_POS_WAIT_INACTIVE)
                u->result = UNIT_RESULT_SUCCESS;
        unit_sm_set_pos(u, UNIT_POS_INACTIVE);
}

/* ---- queued requests and the event bracket ---- */

static void stop(struct unit *u, bool flight_publishing);

/* An explicit restart's old instance is gone: its start, for its flight. */
static void restart_start(struct unit *u) {
        u->queued &= ~UNIT_QUEUED_RESTART;
        u->resolution = TAKE_PTR(u->next_resolution);
        u->want_up = true;
        u->restarts++;
        begin_start(u);
}

/* Applies one queued request the position allows; false when none does. */
static bool apply_one_request(struct unit *u) {
        if (u->queued & UNIT_QUEUED_RESTART) {
                /* A stop queued behind it waits for the restart's publication. */
                if (u->pos != UNIT_POS_WAIT_RESTART)
                        return false;
                restart_start(u);
                return true;
        }
        if (u->queued & UNIT_QUEUED_STOP) {
                /* The restart's new instance waits for itself (ExecStartPre=,
                 * READY=1, a oneshot's exit, its dependencies) or runs: as a
                 * stop arriving now would, it ends the publication and applies.
                 * A unit already down has nothing left to stop. */
                u->queued &= ~UNIT_QUEUED_STOP;
                if (!unit_is_down(u))
                        stop(u, true);
                return true;
        }
        if (u->queued & UNIT_QUEUED_BACKOFF) {
                u->queued &= ~UNIT_QUEUED_BACKOFF;
                if (u->pos == UNIT_POS_BACKOFF)
                        u->ops->request_restart(u->userdata, u);
                return true;
        }
        return false;
}

void unit_sm_event_begin(struct unit *u) {
        u->event_depth++;
}

void unit_sm_event_end(struct unit *u) {
        assert(u->event_depth > 0);
        if (u->event_depth > 1) { /* an event inside an event (a request's callback) */
                u->event_depth--;
                return;
        }
        while (apply_one_request(u))
                ;
        u->event_depth = 0;
        unit_sm_deliver_changes(u);
}

/* ---- events: start, stop, restart ---- */

static void start(struct unit *u, sf_resolution *resolution, bool explicit_request) {
        if (explicit_request) {
                u->restart_step = 0;
                unit_sm_start_limit_reset(u);
        }
        u->want_up = true;
        if (u->resolution) {
                /* Cannot happen: one flight per unit. Keep the older work. */
                sf_resolution_free(resolution);
                return;
        }
        u->resolution = resolution;
        switch (u->pos) {
        case UNIT_POS_RUNNING:
        case UNIT_POS_RELOAD:
                answer_flight(u, true);
                return;
        case UNIT_POS_BACKOFF:
                unit_sm_disarm(u);
                begin_start(u);
                return;
        case UNIT_POS_INACTIVE:
        case UNIT_POS_FAILED:
                begin_start(u);
                return;
        case UNIT_POS_STOP_NOTIFY:
        case UNIT_POS_STOP_CMD:
        case UNIT_POS_STOP_SIGTERM:
        case UNIT_POS_STOP_SIGKILL:
                u->queued |= UNIT_QUEUED_RESTART;
                sf_resolution_free(u->next_resolution);
                u->next_resolution = TAKE_PTR(u->resolution);
                return;
        default: /* starting or waiting: the flight is this one */
                return;
        }
}

void unit_start(struct unit *u, sf_resolution *resolution, bool explicit_request) {
        unit_sm_event_begin(u);
        start(u, resolution, explicit_request);
        unit_sm_event_end(u);
}

static bool is_stop_signalling(const struct unit *u) {
        return u->pos == UNIT_POS_STOP_CMD || u->pos == UNIT_POS_STOP_SIGTERM || u->pos == UNIT_POS_STOP_SIGKILL;
}

static void propagated_restart(struct unit *u, sf_resolution *resolution) {
        if (unit_is_waiting(u)) {
                /* Nothing runs yet: the start job already waiting is the restart. */
                if (!u->resolution)
                        u->resolution = resolution;
                else
                        sf_resolution_free(resolution);
                return;
        }
        if (unit_is_down(u) || u->pos == UNIT_POS_BACKOFF) {
                u->restarts += u->pos == UNIT_POS_BACKOFF;
                start(u, resolution, false);
                return;
        }
        /* The first signal to the old instance is the point of no return.
         * Without a flight of its own, the one in progress (if any) gets the
         * restart's outcome. */
        if (!resolution)
                resolution = TAKE_PTR(u->resolution);
        else if (sf_resolution_begin_publishing(resolution) == -ECANCELED) {
                sf_resolution_free(resolution);
                return;
        }
        if (resolution) {
                sf_resolution_free(u->next_resolution);
                u->next_resolution = resolution;
        }
        u->queued |= UNIT_QUEUED_RESTART;
        u->want_up = false;
        if (!is_stop_signalling(u))
                enter_stop(u);
}

void unit_propagated_restart(struct unit *u, sf_resolution *resolution) {
        unit_sm_event_begin(u);
        propagated_restart(u, resolution);
        unit_sm_event_end(u);
}

void unit_explicit_restart(struct unit *u, sf_resolution *resolution) {
        u->restart_step = 0;
        unit_sm_start_limit_reset(u);
        unit_propagated_restart(u, resolution);
}

static void stop(struct unit *u, bool flight_publishing) {
        u->want_up = false;
        if (unit_is_waiting(u)) {
                /* Nothing was spawned: the stop wins, even over a restart's
                 * publishing flight, which is answered `failed`. */
                answer_flight(u, false);
                u->next_resolution = sf_resolution_free(u->next_resolution);
                u->queued &= ~UNIT_QUEUED_RESTART;
                leave_wait(u);
                return;
        }
        if (flight_publishing && (u->queued & UNIT_QUEUED_RESTART)) {
                /* A restart past its point of no return (the old instance was
                 * signalled): it completes, then the stop applies (SPEC §2.3). */
                u->queued |= UNIT_QUEUED_STOP;
                return;
        }
        u->next_resolution = sf_resolution_free(u->next_resolution);
        u->queued &= ~UNIT_QUEUED_RESTART;
        if (flight_publishing && unit_sm_row(u)->starting) {
                /* The start is past its point of no return, and what it
                 * waits for (READY=1, a oneshot's or ExecStartPre='s exit) may
                 * take up to TimeoutStartSec=: the stop completes the
                 * publication now — its waiters are answered that the start
                 * was stopped — and applies at once (docs/singleflight.md). */
                u->queued &= ~UNIT_QUEUED_STOP;
                answer_flight_why(u, false, "stopped before it was up");
                enter_stop(u);
                return;
        }
        switch (u->pos) {
        case UNIT_POS_FAILED: /* stop of a failed unit leaves it failed */
                answer_flight(u, false);
                return;
        case UNIT_POS_INACTIVE:
                answer_flight(u, false);
                unit_sm_set_pos(u, UNIT_POS_INACTIVE);
                return;
        case UNIT_POS_BACKOFF:
                answer_flight(u, false);
                u->result = UNIT_RESULT_SUCCESS;
                enter_dead(u);
                return;
        case UNIT_POS_STOP_CMD:
        case UNIT_POS_STOP_SIGTERM:
        case UNIT_POS_STOP_SIGKILL:
                return;
        default:
                enter_stop(u);
        }
}

void unit_stop(struct unit *u, bool flight_publishing) {
        unit_sm_event_begin(u);
        stop(u, flight_publishing);
        unit_sm_event_end(u);
}

bool unit_abandon_flight(struct unit *u) {
        if (!u->resolution && !u->next_resolution)
                return false;
        unit_sm_event_begin(u);
        u->resolution = sf_resolution_free(u->resolution);
        u->next_resolution = sf_resolution_free(u->next_resolution);
        unit_sm_queue_change(u, UNIT_CHANGE_ANSWERED, UNIT_ACTION_NONE, 0);
        unit_sm_event_end(u);
        return true;
}

void unit_backoff_begin(struct unit *u, sf_resolution *resolution) {
        if (u->pos != UNIT_POS_BACKOFF) {
                sf_resolution_free(resolution);
                return;
        }
        sf_resolution_free(u->resolution);
        u->resolution = resolution;
        usec_t delay = unit_sm_restart_delay(u);
        if (u->restart_step < UINT32_MAX)
                u->restart_step++;
        log_info("%s: restarting in %llums", u->name, (unsigned long long) (delay / USEC_PER_MSEC));
        unit_sm_arm(u, delay);
}

/* ---- events: start jobs (SPEC §4 "Start jobs") ---- */

void unit_dependencies_ready(struct unit *u) {
        if (!unit_is_waiting(u))
                return;
        unit_sm_event_begin(u);
        enter_start(u);
        unit_sm_event_end(u);
}

void unit_dependency_failed(struct unit *u, const char *why) {
        if (!unit_is_waiting(u))
                return;
        unit_sm_event_begin(u);
        log_error("%s: not started: %s", u->name, why);
        u->queued &= ~UNIT_QUEUED_STOP;
        u->result = UNIT_RESULT_DEPENDENCY;
        unit_sm_set_pos(u, UNIT_POS_FAILED);
        answer_flight_why(u, false, why);
        unit_sm_event_end(u);
}

void unit_wait_cancelled(struct unit *u) {
        if (!unit_is_waiting(u) || !sf_resolution_is_cancelled(u->resolution))
                return;
        unit_sm_event_begin(u);
        log_info("%s: start cancelled while it waited for its dependencies", u->name);
        u->want_up = false;
        leave_wait(u);
        unit_sm_event_end(u);
}

/* ---- events: reload, a new file, reset-failed ---- */

int unit_reload(struct unit *u) {
        if (u->file->exec_reload.n == 0)
                return -EOPNOTSUPP;
        if (u->pos != UNIT_POS_RUNNING || u->control)
                return -EBUSY;
        unit_sm_event_begin(u);
        u->cmd_index = 0;
        unit_sm_move(u, UNIT_POS_RELOAD);
        run_next(u);
        unit_sm_event_end(u);
        return 0;
}

bool unit_set_next_file(struct unit *u, struct unit_file *f) {
        unit_file_free(u->next_file);
        u->next_file = f;
        if (unit_is_dead(u)) {
                take_next_file(u);
                return false;
        }
        /* Up with processes of the old file; stopping: a restart's start, or
         * the next one, takes it. */
        return (unit_sm_row(u)->starting || u->pos == UNIT_POS_RUNNING || u->pos == UNIT_POS_RELOAD) && u->want_up;
}

void unit_reset_failed(struct unit *u) {
        unit_sm_event_begin(u);
        u->restart_step = 0;
        unit_sm_start_limit_reset(u);
        if (u->pos == UNIT_POS_FAILED) {
                u->result = UNIT_RESULT_SUCCESS;
                unit_sm_set_pos(u, UNIT_POS_INACTIVE);
        }
        unit_sm_event_end(u);
}

/* ---- events: processes ---- */

/* Says which step before the exec of cmd (NULL: unknown) failed: the exec
 * itself, the working directory, or the process setup; the sandbox's steps
 * (the pre-exec hook) are named by the manager (sandbox_log_exec_failure). */
static void log_exec_failure(struct unit *u, const struct unit_command *cmd, int error, int stage) {
        switch (stage) {
        case EXIT_STAGE_EXEC:
                log_error_errno(error, "%s: cannot execute %s: %m", u->name, cmd ? cmd->path : "ExecStart=");
                return;
        case EXIT_STAGE_CHDIR:
                log_error_errno(error, "%s: WorkingDirectory=%s: cannot enter it: %m", u->name,
                                u->file->working_directory ? u->file->working_directory : "~");
                return;
        case EXIT_STAGE_SETUP:
        case EXIT_STAGE_FDS:
                log_error_errno(error, "%s: cannot set up %s (%s): %m", u->name, cmd ? cmd->path : "its process",
                                stage == EXIT_STAGE_FDS ? "fds" : "session, signals, cgroup");
                return;
        default:
                return;
        }
}

/* The main process exited while its start job was not done (START). */
static void main_exited_starting(struct unit *u, const struct exit_reason *r, bool exec_failed) {
        if (exec_failed) {
                start_failed(u, UNIT_RESULT_EXEC_FAILED);
                return;
        }
        if (u->file->type == UNIT_TYPE_ONESHOT) {
                bool ignore = u->file->exec_start.commands[u->cmd_index].flags & UNIT_COMMAND_IGNORE_FAILURE;
                if (!unit_sm_exit_is_clean(u, r) && !ignore) {
                        start_failed(u, unit_sm_result_of_exit(u, r));
                        return;
                }
                u->cmd_index++;
                run_next(u);
                return;
        }
        /* exec type dying before its exec status, notify type before its
         * READY=1: a failed start. */
        enum unit_result res = unit_sm_result_of_exit(u, r);
        start_failed(u, res == UNIT_RESULT_SUCCESS ? UNIT_RESULT_EXIT_CODE : res);
}

static void main_exited(struct unit *u, const struct exit_reason *r) {
        u->has_last_exit = true;
        u->last_exit = *r;
        int stage = EXIT_STAGE_EXEC, exec = exit_process_exec_result(u->main, &stage);
        bool exec_failed = exec < 0 && exec != -EINPROGRESS;
        unit_sm_set_main(u, NULL);
        if (exec_failed)
                /* The one ExecStart= of a non-oneshot unit, or a oneshot's current one. */
                log_exec_failure(u, command(&u->file->exec_start, u->pos == UNIT_POS_START ? u->cmd_index : 0),
                                 exec, stage);

        switch (u->pos) {
        case UNIT_POS_START:
                main_exited_starting(u, r, exec_failed);
                return;
        case UNIT_POS_START_POST:
        case UNIT_POS_RUNNING:
        case UNIT_POS_RELOAD:
        case UNIT_POS_STOP_NOTIFY:
                u->result = exec_failed ? UNIT_RESULT_EXEC_FAILED : unit_sm_result_of_exit(u, r);
                if (u->pos == UNIT_POS_START_POST)
                        answer_flight(u, false);
                /* As systemd: ExecStop=, then the rest of the unit's processes
                 * per KillMode=, before the restart policy decides. */
                enter_stop(u);
                return;
        case UNIT_POS_STOP_SIGTERM:
        case UNIT_POS_STOP_SIGKILL:
                if (stop_complete(u))
                        stop_finished(u);
                return;
        default: /* STOP_CMD: ExecStop= is still running, it decides */
                return;
        }
}

/* A control process's exit was ok: the next command of the position. */
static void control_next(struct unit *u) {
        u->cmd_index++;
        run_next(u);
}

static void control_exited(struct unit *u, const struct exit_reason *r) {
        const struct unit_command_list *l = commands_of(u);
        const struct unit_command *cmd = l ? command(l, u->cmd_index) : NULL;
        int stage = EXIT_STAGE_EXEC, exec = exit_process_exec_result(u->control, &stage);
        bool exec_failed = exec < 0 && exec != -EINPROGRESS;
        u->control = exit_process_unref(u->control);
        bool ignore = cmd && (cmd->flags & UNIT_COMMAND_IGNORE_FAILURE);
        bool ok = (!exec_failed && unit_sm_exit_is_clean(u, r)) || ignore;
        if (exec_failed) /* said, as for the main process: the command and why */
                log_exec_failure(u, cmd, exec, stage);

        switch (u->pos) {
        case UNIT_POS_START_PRE:
        case UNIT_POS_START_POST:
                if (ok) {
                        control_next(u);
                        return;
                }
                if (!exec_failed)
                        log_warning("%s: %s failed", u->name, cmd ? cmd->path : "a control process");
                start_failed(u, exec_failed ? UNIT_RESULT_EXEC_FAILED : unit_sm_result_of_exit(u, r));
                return;
        case UNIT_POS_RELOAD:
                if (ok) {
                        control_next(u);
                        return;
                }
                log_warning("%s: %s failed: reload stopped", u->name, cmd ? cmd->path : "ExecReload=");
                unit_sm_set_pos(u, UNIT_POS_RUNNING);
                return;
        case UNIT_POS_STOP_CMD:
                control_next(u);
                return;
        case UNIT_POS_STOP_SIGTERM:
        case UNIT_POS_STOP_SIGKILL:
                if (stop_complete(u))
                        stop_finished(u);
                return;
        default:
                return;
        }
}

void unit_process_exited(struct unit *u, struct exit_process *p, const struct exit_reason *r) {
        unit_sm_event_begin(u);
        if (p == u->main)
                main_exited(u, r);
        else if (p == u->control)
                control_exited(u, r);
        unit_sm_event_end(u);
}

void unit_exec_result(struct unit *u, struct exit_process *p, int error) {
        /* A failure is logged by main_exited(): the exit may be handled
         * first, and a simple unit is already running here. */
        if (p != u->main || u->pos != UNIT_POS_START || error < 0 || u->file->type != UNIT_TYPE_EXEC)
                return;
        unit_sm_event_begin(u);
        unit_sm_main_started(u);
        unit_sm_event_end(u);
}

void unit_check_processes(struct unit *u) {
        bool signalled = u->pos == UNIT_POS_STOP_SIGTERM || u->pos == UNIT_POS_STOP_SIGKILL;
        if (!signalled || !stop_complete(u))
                return;
        unit_sm_event_begin(u);
        stop_finished(u);
        unit_sm_event_end(u);
}

/* ---- events: the deadline ---- */

static void stop_timed_out(struct unit *u) {
        switch (u->pos) {
        case UNIT_POS_STOP_NOTIFY:
                log_warning("%s: still running %s after STOPPING=1: stopping it", u->name, "TimeoutStopSec=");
                u->result = UNIT_RESULT_TIMEOUT;
                enter_stop(u);
                return;
        case UNIT_POS_STOP_CMD:
                log_warning("%s: ExecStop= timed out", u->name);
                if (u->control)
                        (void) exit_process_signal(u->control, SIGKILL);
                enter_stop_signal(u, false);
                return;
        case UNIT_POS_STOP_SIGTERM:
                log_warning("%s: still running %s after the stop signal: sending the final kill signal",
                            u->name, "TimeoutStopSec=");
                /* As systemd: a stop that needs the final kill signal timed out. */
                if (u->result == UNIT_RESULT_SUCCESS)
                        u->result = UNIT_RESULT_TIMEOUT;
                enter_stop_signal(u, true);
                return;
        case UNIT_POS_STOP_SIGKILL:
                log_error("%s: processes survived the final kill signal; giving up on them", u->name);
                stop_finished(u);
                return;
        default:
                return;
        }
}

static void timer_fired(struct unit *u) {
        if (unit_sm_row(u)->starting) {
                log_warning("%s: start timed out", u->name);
                start_failed(u, UNIT_RESULT_TIMEOUT);
                return;
        }
        if (u->pos != UNIT_POS_BACKOFF) {
                stop_timed_out(u);
                return;
        }
        u->restarts++;
        begin_start(u);
        /* After its own start job exists, so that the dependents it
         * restarts wait for it (SPEC §4 "Propagation"). */
        u->ops->auto_restart(u->userdata, u);
}

void unit_timer_fired(struct unit *u) {
        unit_sm_event_begin(u);
        timer_fired(u);
        unit_sm_event_end(u);
}

/* ---- life ---- */

int unit_new(struct unit_file *file, const struct unit_ops *ops, void *userdata, struct unit **ret) {
        struct unit *u = calloc(1, sizeof *u);
        if (!u)
                return -ENOMEM;
        u->name = strdup(file->name);
        if (!u->name) {
                free(u);
                return -ENOMEM;
        }
        u->file = file;
        u->ops = ops;
        u->userdata = userdata;
        u->pos = UNIT_POS_INACTIVE;
        u->deadline = USEC_INFINITY;
        u->since_monotonic = ops->now(userdata);
        u->since_realtime = now_usec(CLOCK_REALTIME);
        *ret = u;
        return 0;
}

struct unit *unit_free(struct unit *u) {
        if (!u)
                return NULL;
        sf_resolution_free(u->resolution);
        sf_resolution_free(u->next_resolution);
        unit_file_free(u->next_file);
        exit_process_unref(u->main);
        exit_process_unref(u->control);
        unit_file_free(u->file);
        free(u->start_times);
        free(u->changes);
        free(u->status_text);
        free(u->name);
        free(u);
        return NULL;
}
