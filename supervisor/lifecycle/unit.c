/* SPDX-License-Identifier: MIT */
/*
 * The unit state machine (SPEC §4); unit.h lists the states, phases and
 * events. Transitions are the functions enter_*(); each event handler is a
 * switch on the phase.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "notify.h"
#include "signal-util.h"
#include "unit.h"

/* ---- names ---- */

static const char *const state_names[_UNIT_STATE_MAX] = {
        [UNIT_INACTIVE] = "inactive", [UNIT_STARTING] = "starting", [UNIT_RUNNING] = "running",
        [UNIT_STOPPING] = "stopping", [UNIT_FAILED] = "failed",     [UNIT_BACKOFF] = "backoff",
};

static const char *const result_names[_UNIT_RESULT_MAX] = {
        [UNIT_RESULT_SUCCESS] = "success",         [UNIT_RESULT_EXIT_CODE] = "exit-code",
        [UNIT_RESULT_SIGNAL] = "signal",           [UNIT_RESULT_TIMEOUT] = "timeout",
        [UNIT_RESULT_WATCHDOG] = "watchdog",       [UNIT_RESULT_START_LIMIT] = "start-limit",
        [UNIT_RESULT_EXEC_FAILED] = "exec-failed", [UNIT_RESULT_DEPENDENCY] = "dependency",
        [UNIT_RESULT_RESOURCES] = "resources",
};

const char *unit_state_to_string(enum unit_state s) {
        return s < _UNIT_STATE_MAX ? state_names[s] : NULL;
}

const char *unit_result_to_string(enum unit_result r) {
        return r < _UNIT_RESULT_MAX ? result_names[r] : NULL;
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
        if (u->ops->answered)
                u->ops->answered(u->userdata, u);
}

static void answer_flight(struct unit *u, bool ok) {
        answer_flight_why(u, ok, NULL);
}

/* ---- helpers ---- */

static usec_t now(struct unit *u) {
        return u->ops->now(u->userdata);
}

static void set_state(struct unit *u, enum unit_state s, enum unit_phase p) {
        u->phase = p;
        if (u->state != s) {
                u->state = s;
                u->since_monotonic = now(u);
                u->since_realtime = now_usec(CLOCK_REALTIME);
                log_debug("%s: %s", u->name, unit_state_to_string(s));
        }
        u->ops->changed(u->userdata, u);
}

static void arm(struct unit *u, usec_t timeout) {
        usec_t t = now(u);
        u->deadline = timeout == USEC_INFINITY || timeout > USEC_INFINITY - t ? USEC_INFINITY : t + timeout;
        u->ops->arm(u->userdata, u, u->deadline);
}

static void disarm(struct unit *u) {
        u->deadline = USEC_INFINITY;
        u->ops->arm(u->userdata, u, USEC_INFINITY);
}

static void set_main(struct unit *u, struct exit_process *p) {
        exit_process_unref(u->main);
        u->main = p;
        u->main_pid = p ? exit_process_pid(p) : 0;
        u->ops->main_pid_changed(u->userdata, u, u->main_pid);
}

/* systemd's clean exit: code 0 or SuccessExitStatus=; for non-oneshot units
 * also SIGHUP, SIGINT, SIGTERM and SIGPIPE. */
static bool exit_is_clean(const struct unit *u, const struct exit_reason *r) {
        const struct unit_exit_status_set *ok = &unit_file_exit_statuses(u->file)->success;
        if (r->kind == EXIT_REASON_EXITED)
                return r->status == 0 || unit_exit_status_set_has_code(ok, r->status);
        if (unit_exit_status_set_has_signal(ok, r->status))
                return true;
        return u->file->type != UNIT_TYPE_ONESHOT &&
               (r->status == SIGHUP || r->status == SIGINT || r->status == SIGTERM || r->status == SIGPIPE);
}

static enum unit_result result_of_exit(const struct unit *u, const struct exit_reason *r) {
        if (exit_is_clean(u, r))
                return UNIT_RESULT_SUCCESS;
        return r->kind == EXIT_REASON_EXITED ? UNIT_RESULT_EXIT_CODE : UNIT_RESULT_SIGNAL;
}

static const struct unit_command *command(const struct unit_command_list *l, size_t i) {
        return i < l->n ? &l->commands[i] : NULL;
}

/* ---- the watchdog lease (SPEC §4 "Watchdog") ---- */

usec_t unit_watchdog_usec(const struct unit_file *f) {
        return f->watchdog == USEC_INFINITY ? 0 : f->watchdog;
}

/* Creates the lease (entering RUNNING) or renews it (WATCHDOG=1). */
static void watchdog_renew(struct unit *u) {
        usec_t ttl = unit_watchdog_usec(u->file);
        if (ttl == 0 || !u->main)
                return;
        int k = u->ops->watchdog(u->userdata, u, ttl);
        if (k < 0)
                log_warning_errno(k, "%s: watchdog lease not written: %s", u->name, strerror(-k));
        else
                u->watchdog_held = true; /* 0: expired; the expiry is on its way */
}

/* Leaving RUNNING: tend's own delete (cause `deleted`), never a failure. */
static void watchdog_release(struct unit *u) {
        if (!u->watchdog_held)
                return;
        u->watchdog_held = false;
        (void) u->ops->watchdog(u->userdata, u, 0);
}

/* ---- restart policy (SPEC §4 "Restart") ---- */

static bool restart_wanted(const struct unit *u) {
        const struct unit_file *f = u->file;
        if (!u->want_up || u->finished)
                return false;
        if (u->has_last_exit && u->result != UNIT_RESULT_START_LIMIT) {
                const struct exit_reason *r = &u->last_exit;
                const struct unit_exit_status_set *prevent = &unit_file_exit_statuses(f)->restart_prevent;
                if (r->kind == EXIT_REASON_EXITED && unit_exit_status_set_has_code(prevent, r->status))
                        return false;
                if (r->kind == EXIT_REASON_KILLED && unit_exit_status_set_has_signal(prevent, r->status))
                        return false;
        }
        bool clean = u->result == UNIT_RESULT_SUCCESS;
        bool unclean_signal = u->result == UNIT_RESULT_SIGNAL;
        bool timeout = u->result == UNIT_RESULT_TIMEOUT, watchdog = u->result == UNIT_RESULT_WATCHDOG;
        switch (f->restart) {
        case UNIT_RESTART_NO:
                return false;
        case UNIT_RESTART_ALWAYS:
                return true;
        case UNIT_RESTART_ON_SUCCESS:
                return clean;
        case UNIT_RESTART_ON_FAILURE:
                return !clean;
        case UNIT_RESTART_ON_ABNORMAL:
                return unclean_signal || timeout || watchdog;
        case UNIT_RESTART_ON_ABORT:
                return unclean_signal;
        case UNIT_RESTART_ON_WATCHDOG:
                return watchdog;
        }
        return false;
}

/* RestartSec= growing over RestartSteps= to RestartMaxDelaySec=, as systemd
 * does: geometric interpolation, delay(n) = sec · (max/sec)^(n/steps). */
static usec_t restart_delay(const struct unit *u) {
        const struct unit_file *f = u->file;
        usec_t sec = f->restart_sec, max = f->restart_max_delay;
        if (f->restart_steps == 0 || max == USEC_INFINITY || max <= sec || sec == 0)
                return sec;
        unsigned n = u->restart_step < f->restart_steps ? u->restart_step : f->restart_steps;
        double ratio = (double) max / (double) sec, d = (double) sec;
        for (unsigned i = 0; i < n; i++)
                d *= pow(ratio, 1.0 / f->restart_steps);
        usec_t v = (usec_t) (d + 0.5);
        return v > max ? max : v;
}

/* Records a start; false when it is one more than StartLimitBurst= within
 * StartLimitIntervalSec= (0 disables the limit). */
static bool start_limit_ok(struct unit *u) {
        const struct unit_file *f = u->file;
        if (f->start_limit_interval == 0 || f->start_limit_burst == 0)
                return true;
        unsigned cap = f->start_limit_burst + 1;
        if (!u->start_times) {
                u->start_times = calloc(cap, sizeof(usec_t));
                if (!u->start_times)
                        return true; /* out of memory: no limit rather than no start */
        }
        usec_t t = now(u);
        u->start_times[u->start_times_head] = t;
        u->start_times_head = (u->start_times_head + 1) % cap;
        if (u->n_start_times < cap)
                u->n_start_times++;
        if (u->n_start_times < cap)
                return true;
        /* The oldest of the last burst+1 starts is at start_times_head. */
        usec_t oldest = u->start_times[u->start_times_head];
        return t - oldest >= f->start_limit_interval;
}

static void start_limit_reset(struct unit *u) {
        u->n_start_times = 0;
        u->start_times_head = 0;
}

/* ---- the end of a run ---- */

static void enter_dead(struct unit *u);
static void enter_stop(struct unit *u);
static void begin_start(struct unit *u);
static void run_next(struct unit *u);

static void enter_backoff_or_dead(struct unit *u) {
        disarm(u);
        if (restart_wanted(u)) {
                set_state(u, UNIT_BACKOFF, PHASE_BACKOFF);
                u->ops->request_restart(u->userdata, u);
                return;
        }
        enter_dead(u);
}

static void enter_dead(struct unit *u) {
        disarm(u);
        watchdog_release(u);
        bool ok = u->result == UNIT_RESULT_SUCCESS;
        /* An explicit restart goes straight on to its start: a dead state
         * published in between would end a `tendctl stop` waiting for
         * "inactive" while the stop it queued behind the restart (SPEC §2.3)
         * is still to come. */
        if (u->restart_after_stop)
                u->phase = PHASE_DEAD;
        else
                set_state(u, ok ? UNIT_INACTIVE : UNIT_FAILED, PHASE_DEAD);
        answer_flight(u, false);
        if (!ok)
                log_warning("%s: failed with result '%s'", u->name, unit_result_to_string(u->result));
        unit_action action = ok ? u->file->success_action : u->file->failure_action;
        if (action != UNIT_ACTION_NONE && u->want_up) {
                int status = u->has_last_exit ? exit_reason_to_shell_status(&u->last_exit) : (ok ? 0 : 1);
                u->ops->action(u->userdata, u, action, status);
        }
        if (!u->restart_after_stop) {
                u->stop_queued = false; /* queued for a start that failed: nothing left to stop */
                return;
        }
        u->restart_after_stop = false;
        u->resolution = TAKE_PTR(u->pending_resolution);
        u->want_up = true;
        u->restarts++;
        begin_start(u);
}

/* The stop sequence is done: nothing of the unit runs any more. */
static void stop_finished(struct unit *u) {
        u->started = false;
        /* SPEC §4 "Stop": KillMode=process leaves the rest; say so. */
        if (u->file->kill_mode == UNIT_KILL_PROCESS && u->ops->populated(u->userdata, u) > 0)
                log_warning("%s: processes of the unit are left running (KillMode=process)", u->name);
        if (u->want_up && !u->restart_after_stop)
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
                        log_warning_errno(k, "%s: sending %s: %s", u->name, signal_to_string(sig, b), strerror(-k));
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

/* Sends sig per KillMode= (the final kill signal when final), then waits
 * TimeoutStopSec= for the processes KillMode= names. */
static void enter_stop_signal_as(struct unit *u, int sig, bool final) {
        if (final && !u->file->send_sigkill) {
                log_warning("%s: processes survive the stop (SendSIGKILL=no)", u->name);
                stop_finished(u);
                return;
        }
        signal_for_kill_mode(u, sig, final);
        set_state(u, UNIT_STOPPING, final ? PHASE_STOP_SIGKILL : PHASE_STOP_SIGTERM);
        if (stop_complete(u)) {
                stop_finished(u);
                return;
        }
        arm(u, u->file->timeout_stop);
}

static void enter_stop_signal(struct unit *u, bool final) {
        enter_stop_signal_as(u, final ? u->file->final_kill_signal : u->file->kill_signal, final);
}

/* Runs ExecStop=[cmd_index…] if the unit had started, then the signals. */
static void enter_stop(struct unit *u) {
        disarm(u);
        watchdog_release(u);
        if (u->control) {
                /* A start's control process is part of what is stopped. */
                (void) exit_process_signal(u->control, u->file->kill_signal);
        }
        if (u->started && u->file->exec_stop.n > 0 && !u->control) {
                u->cmd_index = 0;
                set_state(u, UNIT_STOPPING, PHASE_STOP_CMD);
                run_next(u);
                return;
        }
        enter_stop_signal(u, false);
}

/* A start failed before the unit ran: record why, then stop what is left. */
static void start_failed(struct unit *u, enum unit_result result) {
        u->result = result;
        answer_flight(u, false);
        enter_stop(u);
}

/* ---- starting ---- */

static void enter_running(struct unit *u) {
        u->started = true;
        disarm(u); /* TimeoutStartSec= no longer applies */
        set_state(u, UNIT_RUNNING, PHASE_RUNNING);
        watchdog_renew(u); /* the lease exists from here (SPEC §4) */
        answer_flight(u, true);
        if (u->stop_queued) {
                u->stop_queued = false;
                unit_stop(u, false);
        }
}

/* A oneshot without RemainAfterExit= whose commands all succeeded: done,
 * nothing to restart. */
static void oneshot_done(struct unit *u) {
        u->started = true;
        u->finished = true;
        answer_flight(u, true);
        enter_stop(u);
}

/* Every command of the start ran, ExecStartPost= included. */
static void start_commands_done(struct unit *u) {
        if (u->file->type == UNIT_TYPE_ONESHOT && !u->file->remain_after_exit)
                oneshot_done(u);
        else
                enter_running(u);
}

/* The start job is done for the unit's Type= (SPEC §4 "Start jobs"), after
 * ExecStartPost= (a oneshot's too, with or without RemainAfterExit=). */
static void main_started(struct unit *u) {
        if (u->file->exec_start_post.n > 0) {
                u->cmd_index = 0;
                set_state(u, UNIT_STARTING, PHASE_START_POST);
                run_next(u);
                return;
        }
        start_commands_done(u);
}

/* A stop queued behind a restart (SPEC §2.3) whose new instance now waits
 * for itself (ExecStartPre=, READY=1, a oneshot's exit): as a stop arriving
 * now would, it ends the publication and applies (unit_stop). */
static void apply_queued_stop(struct unit *u) {
        if (!u->stop_queued)
                return;
        u->stop_queued = false;
        unit_stop(u, true);
}

/* Spawns the command of the current phase at cmd_index; moves on when there
 * is none left. */
static void run_next(struct unit *u) {
        const struct unit_file *f = u->file;
        const struct unit_command *cmd = NULL;
        bool main = false;
        switch (u->phase) {
        case PHASE_START_PRE:
                cmd = command(&f->exec_start_pre, u->cmd_index);
                if (!cmd) {
                        u->cmd_index = 0;
                        u->phase = PHASE_START;
                        run_next(u);
                        return;
                }
                break;
        case PHASE_START:
                cmd = command(&f->exec_start, u->cmd_index);
                main = true;
                if (!cmd) { /* oneshot: every ExecStart= succeeded (or there was none) */
                        main_started(u); /* ExecStartPost=, then done or running */
                        return;
                }
                break;
        case PHASE_START_POST:
                cmd = command(&f->exec_start_post, u->cmd_index);
                if (!cmd) {
                        start_commands_done(u);
                        return;
                }
                break;
        case PHASE_STOP_CMD:
                cmd = command(&f->exec_stop, u->cmd_index);
                if (!cmd) {
                        enter_stop_signal(u, false);
                        return;
                }
                break;
        case PHASE_RELOAD:
                cmd = command(&f->exec_reload, u->cmd_index);
                if (!cmd) {
                        set_state(u, UNIT_RUNNING, PHASE_RUNNING);
                        return;
                }
                break;
        default:
                return;
        }

        /* SPEC §2.3: the first fork of any of the unit's processes is the
         * point of no return of its flight. */
        if (u->resolution && sf_resolution_begin_publishing(u->resolution) == -ECANCELED) {
                log_debug("%s: start cancelled before its first process", u->name);
                u->resolution = sf_resolution_free(u->resolution);
                u->result = UNIT_RESULT_SUCCESS;
                u->want_up = false;
                enter_dead(u);
                return;
        }

        struct exit_process *p = NULL;
        int k = u->ops->spawn(u->userdata, u, cmd, main, &p);
        if (k < 0) { /* said by the spawn op */
                enum unit_result r = k == -ENOEXEC ? UNIT_RESULT_EXEC_FAILED : UNIT_RESULT_RESOURCES;
                if (u->phase == PHASE_STOP_CMD || u->phase == PHASE_RELOAD) {
                        u->cmd_index++;
                        run_next(u);
                } else
                        start_failed(u, r);
                return;
        }
        if (!main) {
                u->control = p;
                apply_queued_stop(u);
                return;
        }
        set_main(u, p);
        if (f->type == UNIT_TYPE_SIMPLE) {
                main_started(u);
                return;
        }
        /* exec: started at the exec status; notify: at its READY=1
         * (unit_notify); oneshot: at its exit. The record shows the main
         * pid meanwhile. */
        u->ops->changed(u->userdata, u);
        apply_queued_stop(u);
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
        start_limit_reset(u);
}

static void enter_start(struct unit *u) {
        take_next_file(u);
        if (!start_limit_ok(u)) {
                u->stop_queued = false;
                log_error("%s: start limit hit (more than %u starts within the interval): no more automatic restarts",
                          u->name, u->file->start_limit_burst);
                u->result = UNIT_RESULT_START_LIMIT;
                set_state(u, UNIT_FAILED, PHASE_DEAD);
                answer_flight(u, false);
                return;
        }
        u->result = UNIT_RESULT_SUCCESS;
        u->started = false;
        u->finished = false;
        u->cmd_index = 0; /* last_exit stays: the previous instance's, until this one exits */
        set_state(u, UNIT_STARTING, PHASE_START_PRE);
        arm(u, u->file->timeout_start);
        int k = u->ops->prepare(u->userdata, u);
        if (k < 0) {
                log_error("%s: cannot prepare its start: %s", u->name, strerror(-k));
                start_failed(u, UNIT_RESULT_RESOURCES);
                return;
        }
        run_next(u);
}

/* Every start goes through its start job: it may wait for its dependencies
 * (SPEC §4 "Start jobs") in PHASE_WAIT, showing the state it had. */
static void begin_start(struct unit *u) {
        u->phase = PHASE_WAIT;
        if (u->ops->start_job(u->userdata, u) != 0 && u->phase == PHASE_WAIT) {
                if (u->stop_queued) /* behind a restart's stop: nothing new runs yet */
                        apply_queued_stop(u);
                else if (u->state == UNIT_STOPPING) /* a restart's old instance is gone */
                        set_state(u, UNIT_INACTIVE, PHASE_WAIT);
                return;
        }
        if (u->phase == PHASE_WAIT)
                enter_start(u);
}

void unit_dependencies_ready(struct unit *u) {
        if (u->phase == PHASE_WAIT)
                enter_start(u);
}

void unit_dependency_failed(struct unit *u, const char *why) {
        if (u->phase != PHASE_WAIT)
                return;
        log_error("%s: not started: %s", u->name, why);
        u->stop_queued = false;
        u->result = UNIT_RESULT_DEPENDENCY;
        set_state(u, UNIT_FAILED, PHASE_DEAD);
        answer_flight_why(u, false, why);
}

/* Back to where PHASE_WAIT was entered from (the state it shows says which);
 * the flight ends unanswered. */
static void leave_wait(struct unit *u) {
        u->resolution = sf_resolution_free(u->resolution);
        u->stop_queued = false;
        if (u->state == UNIT_BACKOFF && u->want_up) {
                /* The automatic restart waits its delay again. */
                set_state(u, UNIT_BACKOFF, PHASE_BACKOFF);
                u->ops->request_restart(u->userdata, u);
                return;
        }
        if (u->state == UNIT_STOPPING || u->state == UNIT_BACKOFF || u->state == UNIT_STARTING) {
                u->result = UNIT_RESULT_SUCCESS;
                set_state(u, UNIT_INACTIVE, PHASE_DEAD);
        } else
                set_state(u, u->state, PHASE_DEAD);
}

void unit_wait_cancelled(struct unit *u) {
        if (u->phase != PHASE_WAIT || !sf_resolution_is_cancelled(u->resolution))
                return;
        log_info("%s: start cancelled while it waited for its dependencies", u->name);
        u->want_up = false;
        leave_wait(u);
}

enum unit_job_state unit_job_state(const struct unit *u) {
        switch (u->phase) {
        case PHASE_WAIT:
        case PHASE_START_PRE:
        case PHASE_START:
        case PHASE_START_POST:
                return UNIT_JOB_PENDING;
        case PHASE_RUNNING:
        case PHASE_RELOAD:
                return UNIT_JOB_DONE;
        case PHASE_BACKOFF:
                return UNIT_JOB_FAILED;
        case PHASE_DEAD:
                if (u->state == UNIT_FAILED)
                        return UNIT_JOB_FAILED;
                return u->finished && u->result == UNIT_RESULT_SUCCESS ? UNIT_JOB_DONE : UNIT_JOB_NONE;
        default: /* the stop phases */
                return u->restart_after_stop ? UNIT_JOB_PENDING : UNIT_JOB_STOPPING;
        }
}

bool unit_is_waiting(const struct unit *u) {
        return u->phase == PHASE_WAIT;
}

/* ---- events ---- */

void unit_start(struct unit *u, sf_resolution *resolution, bool explicit_request) {
        if (explicit_request) {
                u->restart_step = 0;
                start_limit_reset(u);
        }
        u->want_up = true;
        if (u->resolution) {
                /* Cannot happen: one flight per unit. Keep the older work. */
                sf_resolution_free(resolution);
                return;
        }
        u->resolution = resolution;
        switch (u->phase) {
        case PHASE_RUNNING:
        case PHASE_RELOAD:
                answer_flight(u, true);
                return;
        case PHASE_DEAD:
                begin_start(u);
                return;
        case PHASE_BACKOFF:
                disarm(u);
                begin_start(u);
                return;
        case PHASE_STOP_NOTIFY:
        case PHASE_STOP_CMD:
        case PHASE_STOP_SIGTERM:
        case PHASE_STOP_SIGKILL:
                u->restart_after_stop = true;
                u->pending_resolution = TAKE_PTR(u->resolution);
                return;
        default: /* starting: the flight is this one */
                return;
        }
}

void unit_explicit_restart(struct unit *u, sf_resolution *resolution) {
        u->restart_step = 0;
        start_limit_reset(u);
        unit_propagated_restart(u, resolution);
}

void unit_propagated_restart(struct unit *u, sf_resolution *resolution) {
        if (u->phase == PHASE_WAIT) {
                /* Nothing runs yet: the start job already waiting is the restart. */
                if (!u->resolution)
                        u->resolution = resolution;
                else
                        sf_resolution_free(resolution);
                return;
        }
        if (u->phase == PHASE_DEAD || u->phase == PHASE_BACKOFF) {
                u->restarts += u->phase == PHASE_BACKOFF;
                unit_start(u, resolution, false);
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
                sf_resolution_free(u->pending_resolution);
                u->pending_resolution = resolution;
        }
        u->restart_after_stop = true;
        u->want_up = false;
        if (u->phase != PHASE_STOP_CMD && u->phase != PHASE_STOP_SIGTERM && u->phase != PHASE_STOP_SIGKILL)
                enter_stop(u);
}

void unit_stop(struct unit *u, bool flight_publishing) {
        u->want_up = false;
        if (u->phase == PHASE_WAIT) {
                /* Nothing was spawned: the stop wins, even over a restart's
                 * publishing flight, which is answered `failed`. */
                answer_flight(u, false);
                u->pending_resolution = sf_resolution_free(u->pending_resolution);
                u->restart_after_stop = false;
                leave_wait(u);
                return;
        }
        if (flight_publishing && u->restart_after_stop) {
                /* A restart past its point of no return (the old instance was
                 * signalled): it completes, then the stop applies (SPEC §2.3). */
                u->stop_queued = true;
                return;
        }
        u->pending_resolution = sf_resolution_free(u->pending_resolution);
        u->restart_after_stop = false;
        if (flight_publishing &&
            (u->phase == PHASE_START_PRE || u->phase == PHASE_START || u->phase == PHASE_START_POST)) {
                /* The start is past its point of no return, and what it
                 * waits for (READY=1, a oneshot's or ExecStartPre='s exit) may
                 * take up to TimeoutStartSec=: the stop completes the
                 * publication now — its waiters are answered that the start
                 * was stopped — and applies at once (docs/singleflight.md). */
                u->stop_queued = false;
                answer_flight_why(u, false, "stopped before it was up");
                enter_stop(u);
                return;
        }
        switch (u->phase) {
        case PHASE_DEAD:
                answer_flight(u, false);
                if (u->state == UNIT_FAILED) /* stop of a failed unit leaves it failed */
                        return;
                set_state(u, UNIT_INACTIVE, PHASE_DEAD);
                return;
        case PHASE_BACKOFF:
                answer_flight(u, false);
                u->result = UNIT_RESULT_SUCCESS;
                enter_dead(u);
                return;
        case PHASE_STOP_CMD:
        case PHASE_STOP_SIGTERM:
        case PHASE_STOP_SIGKILL:
                return;
        default:
                enter_stop(u);
        }
}

bool unit_abandon_flight(struct unit *u) {
        if (!u->resolution && !u->pending_resolution)
                return false;
        u->resolution = sf_resolution_free(u->resolution);
        u->pending_resolution = sf_resolution_free(u->pending_resolution);
        if (u->ops->answered)
                u->ops->answered(u->userdata, u);
        return true;
}

void unit_backoff_begin(struct unit *u, sf_resolution *resolution) {
        if (u->phase != PHASE_BACKOFF) {
                sf_resolution_free(resolution);
                return;
        }
        sf_resolution_free(u->resolution);
        u->resolution = resolution;
        usec_t delay = restart_delay(u);
        if (u->restart_step < UINT32_MAX)
                u->restart_step++;
        log_info("%s: restarting in %llums", u->name, (unsigned long long) (delay / USEC_PER_MSEC));
        arm(u, delay);
}

bool unit_set_next_file(struct unit *u, struct unit_file *f) {
        unit_file_free(u->next_file);
        u->next_file = f;
        if (unit_is_dead(u)) {
                take_next_file(u);
                return false;
        }
        switch (u->phase) {
        case PHASE_START_PRE:
        case PHASE_START:
        case PHASE_START_POST:
        case PHASE_RUNNING:
        case PHASE_RELOAD:
                return u->want_up;
        default: /* stopping: a restart's start, or the next one, takes it */
                return false;
        }
}

void unit_reset_failed(struct unit *u) {
        u->restart_step = 0;
        start_limit_reset(u);
        if (u->state == UNIT_FAILED && u->phase == PHASE_DEAD) {
                u->result = UNIT_RESULT_SUCCESS;
                set_state(u, UNIT_INACTIVE, PHASE_DEAD);
        }
}

/* Says which step before the exec of cmd (NULL: unknown) failed: the exec
 * itself, the working directory, or the process setup; the sandbox's steps
 * (the pre-exec hook) are named by the manager (sandbox_log_exec_failure). */
static void log_exec_failure(struct unit *u, const struct unit_command *cmd, int error, int stage) {
        switch (stage) {
        case EXIT_STAGE_EXEC:
                log_error("%s: cannot execute %s: %s", u->name, cmd ? cmd->path : "ExecStart=", strerror(-error));
                return;
        case EXIT_STAGE_CHDIR:
                log_error("%s: WorkingDirectory=%s: cannot enter it: %s", u->name,
                          u->file->working_directory ? u->file->working_directory : "~", strerror(-error));
                return;
        case EXIT_STAGE_SETUP:
        case EXIT_STAGE_FDS:
                log_error("%s: cannot set up %s (%s): %s", u->name, cmd ? cmd->path : "its process",
                          stage == EXIT_STAGE_FDS ? "fds" : "session, signals, cgroup", strerror(-error));
                return;
        default:
                return;
        }
}

static void main_exited(struct unit *u, const struct exit_reason *r) {
        u->has_last_exit = true;
        u->last_exit = *r;
        int stage = EXIT_STAGE_EXEC, exec = exit_process_exec_result(u->main, &stage);
        set_main(u, NULL);
        if (exec < 0 && exec != -EINPROGRESS)
                /* The one ExecStart= of a non-oneshot unit, or a oneshot's current one. */
                log_exec_failure(u, command(&u->file->exec_start, u->phase == PHASE_START ? u->cmd_index : 0),
                                 exec, stage);

        switch (u->phase) {
        case PHASE_START:
                if (exec < 0 && exec != -EINPROGRESS) {
                        start_failed(u, UNIT_RESULT_EXEC_FAILED);
                        return;
                }
                if (u->file->type == UNIT_TYPE_ONESHOT) {
                        if (!exit_is_clean(u, r) && !(u->file->exec_start.commands[u->cmd_index].flags & UNIT_COMMAND_IGNORE_FAILURE)) {
                                start_failed(u, result_of_exit(u, r));
                                return;
                        }
                        u->cmd_index++;
                        run_next(u);
                        return;
                }
                /* exec type dying before its exec status, notify type before
                 * its READY=1: a failed start. */
                start_failed(u, result_of_exit(u, r) == UNIT_RESULT_SUCCESS ? UNIT_RESULT_EXIT_CODE : result_of_exit(u, r));
                return;
        case PHASE_START_POST:
        case PHASE_RUNNING:
        case PHASE_RELOAD:
        case PHASE_STOP_NOTIFY:
                if (exec < 0 && exec != -EINPROGRESS)
                        u->result = UNIT_RESULT_EXEC_FAILED;
                else
                        u->result = result_of_exit(u, r);
                if (u->phase == PHASE_START_POST)
                        answer_flight(u, false);
                /* As systemd: ExecStop=, then the rest of the unit's processes
                 * per KillMode=, before the restart policy decides. */
                enter_stop(u);
                return;
        case PHASE_STOP_CMD:
                return; /* ExecStop= is still running: it decides */
        case PHASE_STOP_SIGTERM:
        case PHASE_STOP_SIGKILL:
                if (stop_complete(u))
                        stop_finished(u);
                return;
        default:
                return;
        }
}

static void control_exited(struct unit *u, const struct exit_reason *r) {
        const struct unit_command *cmd = NULL;
        switch (u->phase) {
        case PHASE_START_PRE:
                cmd = command(&u->file->exec_start_pre, u->cmd_index);
                break;
        case PHASE_START_POST:
                cmd = command(&u->file->exec_start_post, u->cmd_index);
                break;
        case PHASE_STOP_CMD:
                cmd = command(&u->file->exec_stop, u->cmd_index);
                break;
        case PHASE_RELOAD:
                cmd = command(&u->file->exec_reload, u->cmd_index);
                break;
        default:
                break;
        }
        int stage = EXIT_STAGE_EXEC, exec = exit_process_exec_result(u->control, &stage);
        bool exec_failed = exec < 0 && exec != -EINPROGRESS;
        u->control = exit_process_unref(u->control);
        bool ignore = cmd && (cmd->flags & UNIT_COMMAND_IGNORE_FAILURE);
        bool ok = (!exec_failed && exit_is_clean(u, r)) || ignore;
        if (exec_failed) /* said, as for the main process: the command and why */
                log_exec_failure(u, cmd, exec, stage);

        switch (u->phase) {
        case PHASE_START_PRE:
        case PHASE_START_POST:
                if (!ok) {
                        if (!exec_failed)
                                log_warning("%s: %s failed", u->name, cmd ? cmd->path : "a control process");
                        start_failed(u, exec_failed ? UNIT_RESULT_EXEC_FAILED : result_of_exit(u, r));
                        return;
                }
                u->cmd_index++;
                run_next(u);
                return;
        case PHASE_RELOAD:
                if (!ok) {
                        log_warning("%s: %s failed: reload stopped", u->name, cmd ? cmd->path : "ExecReload=");
                        set_state(u, UNIT_RUNNING, PHASE_RUNNING);
                        return;
                }
                u->cmd_index++;
                run_next(u);
                return;
        case PHASE_STOP_CMD:
                u->cmd_index++;
                run_next(u);
                return;
        case PHASE_STOP_SIGTERM:
        case PHASE_STOP_SIGKILL:
                if (stop_complete(u))
                        stop_finished(u);
                return;
        default:
                return;
        }
}

int unit_reload(struct unit *u) {
        if (u->file->exec_reload.n == 0)
                return -EOPNOTSUPP;
        if (u->phase != PHASE_RUNNING || u->control)
                return -EBUSY;
        u->cmd_index = 0;
        u->phase = PHASE_RELOAD;
        run_next(u);
        return 0;
}

void unit_process_exited(struct unit *u, struct exit_process *p, const struct exit_reason *r) {
        if (p == u->main)
                main_exited(u, r);
        else if (p == u->control)
                control_exited(u, r);
}

void unit_exec_result(struct unit *u, struct exit_process *p, int error) {
        /* A failure is logged by main_exited(): the exit may be handled
         * first, and a simple unit is already running here. */
        if (p != u->main || u->phase != PHASE_START || error < 0)
                return;
        if (u->file->type == UNIT_TYPE_EXEC)
                main_started(u);
}

void unit_timer_fired(struct unit *u) {
        switch (u->phase) {
        case PHASE_START_PRE:
        case PHASE_START:
        case PHASE_START_POST:
                log_warning("%s: start timed out", u->name);
                start_failed(u, UNIT_RESULT_TIMEOUT);
                return;
        case PHASE_RELOAD:
                return;
        case PHASE_STOP_NOTIFY:
                log_warning("%s: still running %s after STOPPING=1: stopping it", u->name, "TimeoutStopSec=");
                u->result = UNIT_RESULT_TIMEOUT;
                enter_stop(u);
                return;
        case PHASE_STOP_CMD:
                log_warning("%s: ExecStop= timed out", u->name);
                if (u->control)
                        (void) exit_process_signal(u->control, SIGKILL);
                enter_stop_signal(u, false);
                return;
        case PHASE_STOP_SIGTERM:
                log_warning("%s: still running %s after the stop signal: sending the final kill signal",
                            u->name, "TimeoutStopSec=");
                /* As systemd: a stop that needs the final kill signal timed out. */
                if (u->result == UNIT_RESULT_SUCCESS)
                        u->result = UNIT_RESULT_TIMEOUT;
                enter_stop_signal(u, true);
                return;
        case PHASE_STOP_SIGKILL:
                log_error("%s: processes survived the final kill signal; giving up on them", u->name);
                stop_finished(u);
                return;
        case PHASE_BACKOFF:
                u->restarts++;
                begin_start(u);
                /* After its own start job exists, so that the dependents it
                 * restarts wait for it (SPEC §4 "Propagation"). */
                u->ops->auto_restart(u->userdata, u);
                return;
        default:
                return;
        }
}

void unit_check_processes(struct unit *u) {
        if ((u->phase == PHASE_STOP_SIGTERM || u->phase == PHASE_STOP_SIGKILL) && stop_complete(u))
                stop_finished(u);
}

/* ---- notifications (SPEC §4 "Readiness and notify") ---- */

unit_notify_access unit_notify_access_effective(const struct unit_file *f) {
        bool needs = f->type == UNIT_TYPE_NOTIFY || unit_watchdog_usec(f) > 0;
        if (f->notify_access == UNIT_NOTIFY_ACCESS_DEFAULT || f->notify_access == UNIT_NOTIFY_ACCESS_NONE)
                return needs ? UNIT_NOTIFY_ACCESS_MAIN : UNIT_NOTIFY_ACCESS_NONE;
        return f->notify_access;
}

bool unit_notify_allowed(struct unit *u, pid_t pid, const char **ret_why) {
        bool main = pid > 0 && pid == u->main_pid;
        bool control = pid > 0 && u->control && exit_process_pid(u->control) == pid;
        const char *why = NULL;
        switch (unit_notify_access_effective(u->file)) {
        case UNIT_NOTIFY_ACCESS_MAIN:
                if (main)
                        return true;
                why = "NotifyAccess=main and it is not the main process";
                break;
        case UNIT_NOTIFY_ACCESS_EXEC:
                if (main || control)
                        return true;
                why = "NotifyAccess=exec and it is neither the main process nor an Exec*= process";
                break;
        case UNIT_NOTIFY_ACCESS_ALL:
                if (main || control || (pid > 0 && u->ops->contains(u->userdata, u, pid) > 0))
                        return true;
                why = "NotifyAccess=all and it is not a process of the unit";
                break;
        default:
                why = "NotifyAccess=none";
                break;
        }
        if (ret_why)
                *ret_why = why;
        return false;
}

static void notify_main_pid(struct unit *u, pid_t pid) {
        if (pid == u->main_pid)
                return;
        switch (u->phase) {
        case PHASE_START:
        case PHASE_START_POST:
        case PHASE_RUNNING:
        case PHASE_RELOAD:
        case PHASE_STOP_NOTIFY:
                break;
        default:
                log_debug("%s: MAINPID=%d ignored while %s", u->name, (int) pid, unit_state_to_string(u->state));
                return;
        }
        struct exit_process *p = NULL;
        int k = u->ops->adopt(u->userdata, u, pid, &p);
        if (k < 0) {
                log_warning("%s: MAINPID=%d ignored: %s", u->name, (int) pid,
                            k == -EPERM    ? "not a process of the unit"
                            : k == -ECHILD ? "not a child of tend, which can only follow a process it can wait for"
                            : k == -ESRCH  ? "no such process"
                                           : strerror(-k));
                return;
        }
        log_info("%s: main process is now %d (MAINPID=)", u->name, (int) pid);
        /* The old main process is no longer followed: its exit is not the
         * unit's; it stays a process of the unit for the stop. */
        set_main(u, p);
        u->ops->changed(u->userdata, u);
}

/* STATUS= (empty: cleared) and ERRNO=; true when the record changed. */
static bool notify_status(struct unit *u, const struct notify_message *m) {
        bool changed = false;
        if (m->status) {
                const char *text = *m->status ? m->status : NULL;
                if (!text != !u->status_text || (text && !streq(text, u->status_text))) {
                        char *copy = text ? strdup(text) : NULL;
                        if (copy || !text) {
                                free(u->status_text);
                                u->status_text = copy;
                                changed = true;
                        }
                }
        }
        if (m->has_errno && m->status_errno != u->status_errno) {
                u->status_errno = m->status_errno;
                if (m->status_errno)
                        log_info("%s: reports ERRNO=%d (%s)", u->name, m->status_errno, strerror(m->status_errno));
                changed = true;
        }
        return changed;
}

static void notify_ready(struct unit *u) {
        /* The start job of a Type=notify unit (SPEC §4 "Start jobs"); in
         * any other phase READY=1 changes nothing. */
        if (u->phase == PHASE_START && u->file->type == UNIT_TYPE_NOTIFY && u->main)
                main_started(u);
}

static void notify_stopping(struct unit *u) {
        if (u->phase != PHASE_RUNNING)
                return;
        watchdog_release(u);
        set_state(u, UNIT_STOPPING, PHASE_STOP_NOTIFY);
        arm(u, u->file->timeout_stop);
}

/* EXTEND_TIMEOUT_USEC=: the start or stop deadline becomes at least now + usec. */
static void notify_extend(struct unit *u, usec_t usec) {
        if (u->deadline == USEC_INFINITY)
                return;
        switch (u->phase) {
        case PHASE_START_PRE:
        case PHASE_START:
        case PHASE_START_POST:
        case PHASE_STOP_NOTIFY:
        case PHASE_STOP_CMD:
        case PHASE_STOP_SIGTERM:
        case PHASE_STOP_SIGKILL:
                break;
        default:
                return;
        }
        usec_t t = now(u);
        usec_t want = usec > USEC_INFINITY - 1 - t ? USEC_INFINITY - 1 : t + usec;
        if (want <= u->deadline)
                return;
        u->deadline = want;
        u->ops->arm(u->userdata, u, want);
}

/* Expiry or WATCHDOG=trigger: WatchdogSignal=, then the stop escalation. */
static void watchdog_fire(struct unit *u, const char *why) {
        if (u->phase != PHASE_RUNNING && u->phase != PHASE_RELOAD)
                return;
        char b[24];
        log_warning("%s: watchdog %s: sending %s", u->name, why, signal_to_string(u->file->watchdog_signal, b));
        watchdog_release(u);
        disarm(u);
        u->result = UNIT_RESULT_WATCHDOG;
        /* As systemd: no ExecStop=; the signal per KillMode=, then
         * TimeoutStopSec= and the final kill signal. */
        enter_stop_signal_as(u, u->file->watchdog_signal, false);
}

void unit_notify(struct unit *u, const struct notify_message *m) {
        if (m->main_pid)
                notify_main_pid(u, m->main_pid);
        if (notify_status(u, m))
                u->ops->changed(u->userdata, u);
        if (m->reloading)
                log_debug("%s: RELOADING=1", u->name);
        if (m->ready)
                notify_ready(u);
        if (m->stopping)
                notify_stopping(u);
        if (m->has_extend_timeout)
                notify_extend(u, m->extend_timeout_usec);
        if (m->watchdog_trigger)
                watchdog_fire(u, "triggered (WATCHDOG=trigger)");
        if (m->watchdog_ping && u->watchdog_held &&
            (u->phase == PHASE_RUNNING || u->phase == PHASE_RELOAD))
                watchdog_renew(u);
}

void unit_watchdog_expired(struct unit *u) {
        u->watchdog_held = false; /* gone: nothing to delete */
        char b[32];
        usec_t ms = unit_watchdog_usec(u->file) / USEC_PER_MSEC;
        snprintf(b, sizeof b, "timeout (%llums)", (unsigned long long) ms);
        watchdog_fire(u, b);
}

bool unit_is_settled(const struct unit *u) {
        return u->phase == PHASE_DEAD || u->phase == PHASE_RUNNING || u->phase == PHASE_RELOAD ||
               u->phase == PHASE_BACKOFF;
}

bool unit_is_dead(const struct unit *u) {
        return (u->phase == PHASE_DEAD || u->phase == PHASE_BACKOFF) && !u->main && !u->control;
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
        u->state = UNIT_INACTIVE;
        u->phase = PHASE_DEAD;
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
        sf_resolution_free(u->pending_resolution);
        unit_file_free(u->next_file);
        exit_process_unref(u->main);
        exit_process_unref(u->control);
        unit_file_free(u->file);
        free(u->start_times);
        free(u->status_text);
        free(u->name);
        free(u);
        return NULL;
}
