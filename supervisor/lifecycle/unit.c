/* SPDX-License-Identifier: MIT */
/*
 * The unit state machine (SPEC §4); unit.h lists the positions, the events,
 * the invariants and how an event runs. Here: the helpers the steps share,
 * the flight's answer, the queued requests and the event bracket, then the
 * events: each moves the position and names the step that follows, which
 * unit-steps.c's table runs. Notifications and the watchdog are in
 * unit-notify.c, the restart policy and the start limit in unit-policy.c,
 * the position table and the changes in unit-state.c.
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

const struct unit_command *unit_sm_command(const struct unit_command_list *l, size_t i) {
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

void unit_sm_answer_flight(struct unit *u, bool ok, const char *reason) {
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
        unit_sm_queue_step(u, UNIT_STEP_BEGIN_START);
}

/* Applies one queued request the position allows; false when none does. */
static bool apply_one_request(struct unit *u) {
        if (u->queued & UNIT_QUEUED_AUTO_RESTART) {
                /* After u's own start job exists, so that the dependents it
                 * restarts wait for it (SPEC §4 "Propagation"). */
                u->queued &= ~UNIT_QUEUED_AUTO_RESTART;
                u->ops->auto_restart(u->userdata, u);
                return true;
        }
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

/* Each queued request once, the steps it names run before the next. */
static void apply_requests(struct unit *u) {
        while (apply_one_request(u))
                unit_sm_run_steps(u);
}

void unit_sm_event_begin(struct unit *u) {
        /* Every step names its next one last, after its ops calls: an event
         * from inside a callback finds no step pending. */
        assert(u->next_step == UNIT_STEP_NONE);
        assert(u->event_depth < 255); /* its 8 bits (struct unit) */
        u->event_depth++;
        u->running_step = UNIT_STEP_NONE; /* the event, not that step, names what follows */
}

void unit_sm_event_end(struct unit *u) {
        assert(u->event_depth > 0);
        unit_sm_run_steps(u);
        if (u->event_depth > 1) { /* an event inside an event (a callback's) */
                u->event_depth--;
                return;
        }
        apply_requests(u);
        u->event_depth = 0;
        unit_sm_settle_file(u); /* a daemon-reload's file waiting for a fit */
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
                unit_sm_answer_flight(u, true, NULL);
                return;
        case UNIT_POS_BACKOFF:
                unit_sm_disarm(u);
                unit_sm_queue_step(u, UNIT_STEP_BEGIN_START);
                return;
        case UNIT_POS_INACTIVE:
        case UNIT_POS_FAILED:
                /* A start that is not an automatic restart (that comes from
                 * back-off) begins the steps anew, as systemd's n_restarts. */
                u->restart_step = 0;
                unit_sm_queue_step(u, UNIT_STEP_BEGIN_START);
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
                unit_sm_queue_step(u, UNIT_STEP_STOP);
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
                unit_sm_answer_flight(u, false, NULL);
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
                unit_sm_answer_flight(u, false, "stopped before it was up");
                unit_sm_queue_step(u, UNIT_STEP_STOP);
                return;
        }
        switch (u->pos) {
        case UNIT_POS_FAILED: /* stop of a failed unit leaves it failed */
                unit_sm_answer_flight(u, false, NULL);
                return;
        case UNIT_POS_INACTIVE:
                unit_sm_answer_flight(u, false, NULL);
                unit_sm_set_pos(u, UNIT_POS_INACTIVE);
                return;
        case UNIT_POS_BACKOFF:
                unit_sm_answer_flight(u, false, NULL);
                u->result = UNIT_RESULT_SUCCESS;
                unit_sm_queue_step(u, UNIT_STEP_DEAD);
                return;
        case UNIT_POS_STOP_CMD:
        case UNIT_POS_STOP_SIGTERM:
        case UNIT_POS_STOP_SIGKILL:
                return;
        default:
                unit_sm_queue_step(u, UNIT_STEP_STOP);
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
        unit_sm_queue_step(u, UNIT_STEP_START);
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
        unit_sm_answer_flight(u, false, why);
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
        unit_sm_queue_step(u, UNIT_STEP_RUN);
        unit_sm_event_end(u);
        return 0;
}

/* Whether u's pending file may become its file now: nothing runs (dead), or
 * the main process runs with no command list of u's walked by index
 * (RUNNING without a control process) and the new file keeps the running
 * instance's shape (Type=, RemainAfterExit=). */
static bool next_file_fits(const struct unit *u) {
        if (unit_is_dead(u))
                return true;
        const struct unit_file *n = u->next_file, *o = u->file;
        return u->pos == UNIT_POS_RUNNING && !u->control && n->type == o->type &&
               n->remain_after_exit == o->remain_after_exit;
}

void unit_sm_settle_file(struct unit *u) {
        if (!u->next_file || u->event_depth > 0 || !next_file_fits(u))
                return;
        bool dead = unit_is_dead(u);
        unit_sm_take_next_file(u);
        if (dead || !u->watchdog_held)
                return;
        /* As systemd: a held watchdog lease is re-armed with the new
         * WatchdogSec= (none: let go). */
        if (unit_watchdog_usec(u->file) == 0)
                unit_sm_watchdog_release(u);
        else
                unit_sm_watchdog_renew(u);
}

bool unit_set_next_file(struct unit *u, struct unit_file *f) {
        unit_file_free(u->next_file);
        u->next_file = f;
        unit_sm_settle_file(u);
        return u->next_file != NULL;
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
                unit_sm_start_failed(u, UNIT_RESULT_EXEC_FAILED);
                return;
        }
        if (u->file->type == UNIT_TYPE_ONESHOT) {
                bool ignore = u->file->exec_start.commands[u->cmd_index].flags & UNIT_COMMAND_IGNORE_FAILURE;
                if (!unit_sm_exit_is_clean(u, r) && !ignore) {
                        unit_sm_start_failed(u, unit_sm_result_of_exit(u, r));
                        return;
                }
                u->cmd_index++;
                unit_sm_queue_step(u, UNIT_STEP_RUN);
                return;
        }
        /* exec type dying before its exec status, notify type before its
         * READY=1: a failed start. */
        enum unit_result res = unit_sm_result_of_exit(u, r);
        unit_sm_start_failed(u, res == UNIT_RESULT_SUCCESS ? UNIT_RESULT_EXIT_CODE : res);
}

static void main_exited(struct unit *u, const struct exit_reason *r) {
        u->has_last_exit = true;
        u->last_exit = *r;
        int stage = EXIT_STAGE_EXEC, exec = exit_process_exec_result(u->main, &stage);
        bool exec_failed = exec < 0 && exec != -EINPROGRESS;
        unsigned index = u->pos == UNIT_POS_START ? u->cmd_index : 0; /* a oneshot's current ExecStart= */
        const struct unit_command *cmd = unit_sm_command(&u->file->exec_start, index);
        if ((exec_failed || !unit_sm_exit_is_clean(u, r)) && cmd && !(cmd->flags & UNIT_COMMAND_IGNORE_FAILURE))
                unit_note_failure(u, &u->file->exec_start, index, exit_process_pid(u->main), r, /* pkg */
                                  exec_failed ? -exec : 0);
        unit_sm_set_main(u, NULL);
        if (exec_failed)
                /* The one ExecStart= of a non-oneshot unit, or a oneshot's current one. */
                log_exec_failure(u, unit_sm_command(&u->file->exec_start, u->pos == UNIT_POS_START ? u->cmd_index : 0),
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
                        unit_sm_answer_flight(u, false, NULL);
                /* As systemd: ExecStop=, then the rest of the unit's processes
                 * per KillMode=, before the restart policy decides. */
                unit_sm_queue_step(u, UNIT_STEP_STOP);
                return;
        case UNIT_POS_STOP_SIGTERM:
        case UNIT_POS_STOP_SIGKILL:
                unit_sm_stop_check(u);
                return;
        default: /* STOP_CMD: ExecStop= is still running, it decides */
                return;
        }
}

/* A control process's exit was ok: the next command of the position. */
static void control_next(struct unit *u) {
        u->cmd_index++;
        unit_sm_queue_step(u, UNIT_STEP_RUN);
}

static void control_exited(struct unit *u, const struct exit_reason *r) {
        const struct unit_command_list *l = unit_sm_commands_of(u);
        const struct unit_command *cmd = l ? unit_sm_command(l, u->cmd_index) : NULL;
        int stage = EXIT_STAGE_EXEC, exec = exit_process_exec_result(u->control, &stage);
        bool exec_failed = exec < 0 && exec != -EINPROGRESS;
        pid_t pid = exit_process_pid(u->control);
        u->control = exit_process_unref(u->control);
        bool ignore = cmd && (cmd->flags & UNIT_COMMAND_IGNORE_FAILURE);
        bool ok = (!exec_failed && unit_sm_exit_is_clean(u, r)) || ignore;
        if (!ok && cmd) /* pkg: status's "Process:" line */
                unit_note_failure(u, l, u->cmd_index, pid, r, exec_failed ? -exec : 0);
        if (exec_failed) /* said, as for the main process: the command and why */
                log_exec_failure(u, cmd, exec, stage);

        if (u->pos == UNIT_POS_START) { /* Type=forking's start process (unit-forking.c) */
                if (ok) { /* as systemd's ExecMainStatus: the last exit is the main process's */
                        unit_sm_forking_started(u);
                        return;
                }
                u->has_last_exit = true; /* a failed start's is its start process's */
                u->last_exit = *r;
        }
        switch (u->pos) {
        case UNIT_POS_START: /* failed as the other start commands */
        case UNIT_POS_START_PRE:
        case UNIT_POS_START_POST:
                if (ok) {
                        control_next(u);
                        return;
                }
                if (!exec_failed)
                        log_warning("%s: %s failed", u->name, cmd ? cmd->path : "a control process");
                unit_sm_start_failed(u, exec_failed ? UNIT_RESULT_EXEC_FAILED : unit_sm_result_of_exit(u, r));
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
                unit_sm_stop_check(u);
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
        unit_sm_queue_step(u, UNIT_STEP_MAIN_STARTED);
        unit_sm_event_end(u);
}

void unit_check_processes(struct unit *u) {
        if (unit_sm_forking_ended(u)) {
                /* A forking unit without a known main process ends with
                 * its last process, as systemd's cgroup-empty event. */
                unit_sm_event_begin(u);
                log_info("%s: no process of the unit is left", u->name);
                unit_sm_queue_step(u, UNIT_STEP_STOP);
                unit_sm_event_end(u);
                return;
        }
        bool signalled = u->pos == UNIT_POS_STOP_SIGTERM || u->pos == UNIT_POS_STOP_SIGKILL;
        if (!signalled || !unit_sm_stop_complete(u))
                return;
        unit_sm_event_begin(u);
        unit_sm_queue_step(u, UNIT_STEP_STOP_FINISHED);
        unit_sm_event_end(u);
}

/* ---- events: the deadline ---- */

static void stop_timed_out(struct unit *u) {
        switch (u->pos) {
        case UNIT_POS_STOP_NOTIFY:
                log_warning("%s: still running %s after STOPPING=1: stopping it", u->name, "TimeoutStopSec=");
                u->result = UNIT_RESULT_TIMEOUT;
                unit_sm_queue_step(u, UNIT_STEP_STOP);
                return;
        case UNIT_POS_STOP_CMD:
                log_warning("%s: ExecStop= still running after %s: killing it, then the stop signal", u->name,
                            "TimeoutStopSec=");
                /* As systemd (its SERVICE_STOP timeout): the stop timed out;
                 * the signals per KillMode= follow. */
                if (u->result == UNIT_RESULT_SUCCESS)
                        u->result = UNIT_RESULT_TIMEOUT;
                if (u->control)
                        (void) exit_process_signal(u->control, SIGKILL);
                unit_sm_queue_step(u, UNIT_STEP_STOP_SIGTERM);
                return;
        case UNIT_POS_STOP_SIGTERM:
                /* SendSIGKILL=no: no final kill signal (stop_signal() says so) */
                log_warning("%s: still running %s after the stop signal%s", u->name, "TimeoutStopSec=",
                            u->file->send_sigkill ? ": sending the final kill signal" : "");
                /* As systemd: a stop that needs the final kill signal timed out. */
                if (u->result == UNIT_RESULT_SUCCESS)
                        u->result = UNIT_RESULT_TIMEOUT;
                unit_sm_queue_step(u, UNIT_STEP_STOP_SIGKILL);
                return;
        case UNIT_POS_STOP_SIGKILL:
                log_error("%s: processes survived the final kill signal; giving up on them", u->name);
                unit_sm_queue_step(u, UNIT_STEP_STOP_FINISHED);
                return;
        default:
                return;
        }
}

static void timer_fired(struct unit *u) {
        if (unit_sm_row(u)->starting) {
                log_warning("%s: start timed out", u->name);
                unit_sm_start_failed(u, UNIT_RESULT_TIMEOUT);
                return;
        }
        if (u->pos != UNIT_POS_BACKOFF) {
                stop_timed_out(u);
                return;
        }
        u->restarts++;
        u->queued |= UNIT_QUEUED_AUTO_RESTART;
        unit_sm_queue_step(u, UNIT_STEP_BEGIN_START);
}

void unit_timer_fired(struct unit *u) {
        unit_sm_event_begin(u);
        timer_fired(u);
        unit_sm_event_end(u);
}

void unit_prepared(struct unit *u, int error) {
        bool waiting = u->preparing && u->pos == UNIT_POS_START_PRE && !u->control;
        u->preparing = false;
        if (!waiting)
                return;
        unit_sm_event_begin(u);
        if (error < 0) {
                log_error_errno(error, "%s: cannot prepare its start: %m", u->name);
                unit_sm_start_failed(u, UNIT_RESULT_RESOURCES);
        } else
                unit_sm_queue_step(u, UNIT_STEP_RUN);
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
        free(u->condition_text);
        free(u->name);
        free(u);
        return NULL;
}
