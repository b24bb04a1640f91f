/* SPDX-License-Identifier: MIT */
/*
 * The unit state machine's steps (unit.h "How an event runs"): what follows
 * an event, one small function per step, listed in one table (steps[] at the
 * end). A step moves the position, does the new position's own effects
 * through struct unit_ops, and names at most one next step, as its last act;
 * unit_sm_run_steps() runs them until none is left. No step calls another,
 * so a reader checks the machine by reading the table: each row says which
 * steps may follow, and unit_sm_queue_step() asserts it.
 */
#include <assert.h>
#include <errno.h>
#include <signal.h>

#include "log.h"
#include "macro.h"
#include "signal-util.h"
#include "unit-internal.h"

/* ---- the end of a run ---- */

static void step_dead(struct unit *u) {
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
        unit_sm_answer_flight(u, false, NULL);
        if (!ok)
                log_warning("%s: failed with result '%s'", u->name, unit_result_to_string(u->result));
        unit_action action = ok ? u->file->success_action : u->file->failure_action;
        if (action != UNIT_ACTION_NONE && u->want_up) {
                int status = u->has_last_exit ? exit_reason_to_shell_status(&u->last_exit) : (ok ? 0 : 1);
                unit_sm_queue_change(u, UNIT_CHANGE_ACTION, action, status);
        }
}

static void step_backoff_or_dead(struct unit *u) {
        unit_sm_disarm(u);
        if (!unit_sm_restart_wanted(u)) {
                unit_sm_queue_step(u, UNIT_STEP_DEAD);
                return;
        }
        unit_sm_set_pos(u, UNIT_POS_BACKOFF);
        u->queued |= UNIT_QUEUED_BACKOFF; /* the restart's flight, after the event */
}

/* The stop sequence is done: nothing of the unit runs any more. */
static void step_stop_finished(struct unit *u) {
        /* SPEC §4 "Stop": KillMode=process leaves the rest; say so. */
        if (u->file->kill_mode == UNIT_KILL_PROCESS && u->ops->populated(u->userdata, u) > 0)
                log_warning("%s: processes of the unit are left running (KillMode=process)", u->name);
        if (u->want_up && !(u->queued & UNIT_QUEUED_RESTART))
                unit_sm_queue_step(u, UNIT_STEP_BACKOFF_OR_DEAD);
        else
                unit_sm_queue_step(u, UNIT_STEP_DEAD);
}

/* ---- the stop sequence (SPEC §4 "Stop") ---- */

bool unit_sm_stop_complete(struct unit *u) {
        if (u->main || u->control)
                return false;
        if (u->file->kill_mode == UNIT_KILL_PROCESS)
                return true;
        int k = u->ops->populated(u->userdata, u);
        return k <= 0;
}

/* KillMode=mixed's stop signal reaches the main and control processes
 * only: once both are gone nothing signalled is left to wait for, and the
 * rest get the final kill signal at once (systemd 252: unit_kill_context()
 * does not wait for the cgroup under mixed before SIGKILL; a main process
 * that exits during the stop leads to the final kill of the rest). */
static bool mixed_rest_only(const struct unit *u) {
        return u->file->kill_mode == UNIT_KILL_MIXED && u->pos == UNIT_POS_STOP_SIGTERM && !u->main && !u->control;
}

void unit_sm_stop_check(struct unit *u) {
        if (unit_sm_stop_complete(u))
                unit_sm_queue_step(u, UNIT_STEP_STOP_FINISHED);
        else if (mixed_rest_only(u))
                unit_sm_queue_step(u, UNIT_STEP_STOP_SIGKILL);
}

static void signal_for_kill_mode(struct unit *u, int sig, bool final) {
        char b[24];
        bool all = u->file->kill_mode == UNIT_KILL_CONTROL_GROUP ||
                   (u->file->kill_mode == UNIT_KILL_MIXED && final);
        if (all) {
                int k = u->ops->signal_all(u->userdata, u, sig);
                if (k < 0)
                        log_warning_errno(k, "%s: sending %s: %m", u->name, signal_to_string(sig, b));
                if (!final && unit_file_exec(u->file)->send_sighup) /* corpus: SendSIGHUP= */
                        (void) u->ops->signal_all(u->userdata, u, SIGHUP);
                if (!final)
                        (void) u->ops->signal_all(u->userdata, u, SIGCONT);
                return;
        }
        if (u->main) {
                (void) exit_process_signal(u->main, sig);
                if (!final && unit_file_exec(u->file)->send_sighup) /* corpus: SendSIGHUP= */
                        (void) exit_process_signal(u->main, SIGHUP);
                if (!final)
                        (void) exit_process_signal(u->main, SIGCONT);
        }
        if (u->control) /* a control process is never left behind */
                (void) exit_process_signal(u->control, sig);
}

/* Sends sig per KillMode= (the final kill signal when final) and waits
 * TimeoutStopSec= for the processes to go. */
static void stop_signal(struct unit *u, int sig, bool final) {
        if (final && !u->file->send_sigkill) {
                log_warning("%s: processes survive the stop (SendSIGKILL=no)", u->name);
                unit_sm_queue_step(u, UNIT_STEP_STOP_FINISHED);
                return;
        }
        signal_for_kill_mode(u, sig, final);
        unit_sm_set_pos(u, final ? UNIT_POS_STOP_SIGKILL : UNIT_POS_STOP_SIGTERM);
        if (unit_sm_stop_complete(u) || mixed_rest_only(u)) {
                unit_sm_stop_check(u);
                return;
        }
        unit_sm_arm(u, u->file->timeout_stop);
}

static void step_stop_sigterm(struct unit *u) {
        int restart_sig = unit_file_exec(u->file)->restart_kill_signal; /* corpus: RestartKillSignal= */
        stop_signal(u, restart_sig && (u->queued & UNIT_QUEUED_RESTART) ? restart_sig : u->file->kill_signal, false);
}

/* The watchdog's stop: as systemd, no ExecStop=, WatchdogSignal= first. */
static void step_stop_watchdog(struct unit *u) {
        stop_signal(u, u->file->watchdog_signal, false);
}

static void step_stop_sigkill(struct unit *u) {
        stop_signal(u, u->file->final_kill_signal, true);
}

/* The stop sequence's start: ExecStop= if the start job was done (the
 * position ran, or a oneshot finished its commands), then the signals. */
static void step_stop(struct unit *u) {
        bool ran = unit_sm_row(u)->ran || u->finished;
        unit_sm_disarm(u);
        unit_sm_watchdog_release(u);
        if (u->control) {
                /* A start's control process is part of what is stopped. */
                (void) exit_process_signal(u->control, u->file->kill_signal);
        }
        if (ran && u->file->exec_stop.n > 0 && !u->control) {
                u->cmd_index = 0;
                unit_sm_set_pos(u, UNIT_POS_STOP_CMD);
                /* TimeoutStopSec= bounds ExecStop= too (SPEC §4 "Stop"), as
                 * systemd: a hung one must not hold the stop forever. */
                unit_sm_arm(u, u->file->timeout_stop);
                unit_sm_queue_step(u, UNIT_STEP_RUN);
                return;
        }
        unit_sm_queue_step(u, UNIT_STEP_STOP_SIGTERM);
}

/* A start failed before the unit ran: record why, then stop what is left. */
void unit_sm_start_failed(struct unit *u, enum unit_result result) {
        u->result = result;
        unit_sm_answer_flight(u, false, NULL);
        unit_sm_queue_step(u, UNIT_STEP_STOP);
}

/* ---- starting ---- */

static void step_running(struct unit *u) {
        unit_sm_disarm(u); /* TimeoutStartSec= no longer applies */
        unit_sm_set_pos(u, UNIT_POS_RUNNING);
        unit_sm_watchdog_renew(u); /* the lease exists from here (SPEC §4) */
        unit_sm_answer_flight(u, true, NULL);
}

/* Every command of the start ran, ExecStartPost= included. A oneshot
 * without RemainAfterExit= is then done: nothing to restart. */
static void step_start_done(struct unit *u) {
        if (u->file->type != UNIT_TYPE_ONESHOT || u->file->remain_after_exit) {
                unit_sm_queue_step(u, UNIT_STEP_RUNNING);
                return;
        }
        u->finished = true;
        unit_sm_answer_flight(u, true, NULL);
        unit_sm_queue_step(u, UNIT_STEP_STOP);
}

/* The start job is done for the unit's Type= (SPEC §4 "Start jobs"), after
 * ExecStartPost= (a oneshot's too, with or without RemainAfterExit=). */
static void step_main_started(struct unit *u) {
        if (u->file->exec_start_post.n > 0) {
                u->cmd_index = 0;
                unit_sm_set_pos(u, UNIT_POS_START_POST);
                unit_sm_queue_step(u, UNIT_STEP_RUN);
                return;
        }
        unit_sm_queue_step(u, UNIT_STEP_START_DONE);
}

const struct unit_command_list *unit_sm_commands_of(const struct unit *u) {
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
                unit_sm_queue_step(u, UNIT_STEP_RUN);
                return;
        case UNIT_POS_START: /* oneshot: every ExecStart= succeeded (or there was none) */
                unit_sm_queue_step(u, UNIT_STEP_MAIN_STARTED); /* ExecStartPost=, then done or running */
                return;
        case UNIT_POS_START_POST:
                unit_sm_queue_step(u, UNIT_STEP_START_DONE);
                return;
        case UNIT_POS_STOP_CMD:
                unit_sm_queue_step(u, UNIT_STEP_STOP_SIGTERM);
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
 * unit goes back to inactive. */
static bool publish(struct unit *u) {
        if (!u->resolution || sf_resolution_begin_publishing(u->resolution) != -ECANCELED)
                return true;
        log_debug("%s: start cancelled before its first process", u->name);
        u->resolution = sf_resolution_free(u->resolution);
        u->result = UNIT_RESULT_SUCCESS;
        u->want_up = false;
        unit_sm_queue_step(u, UNIT_STEP_DEAD);
        return false;
}

/* A main process was spawned: the start job is done at once (simple), or
 * later (exec: its exec status; notify: READY=1, unit_notify; oneshot: its
 * exit). The record shows the main pid meanwhile. */
static void main_spawned(struct unit *u, struct exit_process *p) {
        unit_sm_set_main(u, p);
        if (u->file->type == UNIT_TYPE_SIMPLE) {
                unit_sm_queue_step(u, UNIT_STEP_MAIN_STARTED);
                return;
        }
        unit_sm_queue_changed(u);
}

/* Spawns the position's command at cmd_index; moves on when none is left. */
static void step_run(struct unit *u) {
        const struct unit_command_list *l = unit_sm_commands_of(u);
        if (!l)
                return;
        const struct unit_command *cmd = unit_sm_command(l, u->cmd_index);
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
                unit_note_failure(u, l, u->cmd_index, 0, NULL, -k); /* pkg: status's "Process:" line */
                if (u->pos == UNIT_POS_STOP_CMD || u->pos == UNIT_POS_RELOAD) {
                        u->cmd_index++;
                        unit_sm_queue_step(u, UNIT_STEP_RUN);
                } else
                        unit_sm_start_failed(u, k == -ENOEXEC ? UNIT_RESULT_EXEC_FAILED : UNIT_RESULT_RESOURCES);
                return;
        }
        if (main && u->file->type != UNIT_TYPE_FORKING)
                main_spawned(u, p);
        else /* Type=forking's start process too: the main process is found at its exit */
                u->control = p;
}

/* A new file takes effect where no process of the unit runs. The start-limit
 * ring is sized by StartLimitBurst=, which the new file may change. */
void unit_sm_take_next_file(struct unit *u) {
        if (!u->next_file)
                return;
        unit_file_free(u->file);
        u->file = TAKE_PTR(u->next_file);
        free(u->start_times);
        u->start_times = NULL;
        unit_sm_start_limit_reset(u);
}

/* The start job begins its work: the start limit, then ExecStartPre=. */
static void step_start(struct unit *u) {
        unit_sm_take_next_file(u);
        if (!unit_sm_conditions_met(u)) /* cond: skipped, or failed by an assert */
                return;
        if (!unit_sm_start_limit_ok(u)) {
                log_error("%s: start limit hit (more than %u starts within the interval): no more automatic restarts",
                          u->name, u->file->start_limit_burst);
                u->result = UNIT_RESULT_START_LIMIT;
                unit_sm_set_pos(u, UNIT_POS_FAILED);
                unit_sm_answer_flight(u, false, NULL);
                return;
        }
        u->result = UNIT_RESULT_SUCCESS;
        u->finished = false;
        u->cmd_index = 0; /* last_exit stays: the previous instance's, until this one exits */
        unit_sm_set_pos(u, UNIT_POS_START_PRE);
        unit_sm_arm(u, u->file->timeout_start);
        int k = u->ops->prepare(u->userdata, u);
        if (k < 0) { /* said by the op, once, with the reason */
                if (k == -EMFILE || k == -ENFILE) /* tend's shortage: the start never ran */
                        unit_sm_start_limit_forget(u);
                unit_sm_start_failed(u, UNIT_RESULT_RESOURCES);
                return;
        }
        u->preparing = k > 0; /* unit_prepared() goes on */
        if (!u->preparing)
                unit_sm_queue_step(u, UNIT_STEP_RUN);
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
static void step_begin_start(struct unit *u) {
        unit_sm_move(u, wait_pos_of(u->pos));
        /* The manager may start u's required units from start_job(): an
         * event of theirs, or of u, runs to its end in there. */
        if (u->ops->start_job(u->userdata, u) != 0 && unit_is_waiting(u)) {
                /* Behind a restart's stop nothing new runs yet: the queued
                 * stop applies after the event. Else the old instance is
                 * gone: the restart waits, shown inactive. */
                if (u->pos == UNIT_POS_WAIT_RESTART && !(u->queued & UNIT_QUEUED_STOP))
                        unit_sm_set_pos(u, UNIT_POS_WAIT_INACTIVE);
                return;
        }
        if (unit_is_waiting(u))
                unit_sm_queue_step(u, UNIT_STEP_START);
}

/* ---- the table, and the loop that runs it ---- */

#define F(s) (1u << UNIT_STEP_##s)

/* Each step, the positions it may move to, and the steps that may follow
 * it. An event may queue any step. */
static const struct {
        void (*run)(struct unit *u);
        unsigned follows;
} steps[_UNIT_STEP_MAX] = {
        /* → WAIT_*: ops->start_job; may stay there (its dependencies) */
        [UNIT_STEP_BEGIN_START] = { step_begin_start, F(START) },
        /* → INACTIVE (a condition or assert unmet) | FAILED (start limit) |
         * START_PRE: ops->prepare, TimeoutStartSec= */
        [UNIT_STEP_START] = { step_start, F(RUN) | F(STOP) },
        /* the position's command at cmd_index: spawn, or the next position
         * when none is left (START_PRE → START, RELOAD → RUNNING) */
        [UNIT_STEP_RUN] = { step_run, F(RUN) | F(MAIN_STARTED) | F(START_DONE) | F(STOP) | F(STOP_SIGTERM) | F(DEAD) },
        /* → START_POST (ExecStartPost=) */
        [UNIT_STEP_MAIN_STARTED] = { step_main_started, F(RUN) | F(START_DONE) },
        /* every start command ran: running, or a oneshot's stop */
        [UNIT_STEP_START_DONE] = { step_start_done, F(RUNNING) | F(STOP) },
        /* → RUNNING: the watchdog lease, the flight answered ok */
        [UNIT_STEP_RUNNING] = { step_running, 0 },
        /* → STOP_CMD (ExecStop=): TimeoutStopSec= */
        [UNIT_STEP_STOP] = { step_stop, F(RUN) | F(STOP_SIGTERM) },
        /* → STOP_SIGTERM with KillSignal= or WatchdogSignal=, STOP_SIGKILL
         * with FinalKillSignal=: TimeoutStopSec=, or done at once */
        [UNIT_STEP_STOP_SIGTERM] = { step_stop_sigterm, F(STOP_FINISHED) | F(STOP_SIGKILL) },
        [UNIT_STEP_STOP_WATCHDOG] = { step_stop_watchdog, F(STOP_FINISHED) | F(STOP_SIGKILL) },
        [UNIT_STEP_STOP_SIGKILL] = { step_stop_sigkill, F(STOP_FINISHED) },
        /* nothing runs: the restart policy decides */
        [UNIT_STEP_STOP_FINISHED] = { step_stop_finished, F(BACKOFF_OR_DEAD) | F(DEAD) },
        /* → BACKOFF (UNIT_QUEUED_BACKOFF: the restart's flight) */
        [UNIT_STEP_BACKOFF_OR_DEAD] = { step_backoff_or_dead, F(DEAD) },
        /* → INACTIVE | FAILED | WAIT_RESTART: the flight answered, the
         * SuccessAction=/FailureAction= */
        [UNIT_STEP_DEAD] = { step_dead, 0 },
};

/* The queue is one slot (u->next_step): a step or an event names at most
 * one next step, as its last act, and the loop empties the slot before it
 * runs a step, so the slot is always free when a step is named (asserted).
 * An event that another event causes from inside an ops callback (the
 * manager starting u from start_job(), say) finds the slot free too, and
 * runs its steps to the end before the callback returns. */
void unit_sm_queue_step(struct unit *u, enum unit_step s) {
        assert(s > UNIT_STEP_NONE && s < _UNIT_STEP_MAX);
        assert(u->next_step == UNIT_STEP_NONE);
        assert(u->running_step == UNIT_STEP_NONE || (steps[u->running_step].follows & (1u << s)));
        u->next_step = s;
}

void unit_sm_run_steps(struct unit *u) {
        while (u->next_step != UNIT_STEP_NONE) {
                enum unit_step s = u->next_step;
                u->next_step = UNIT_STEP_NONE;
                u->running_step = s; /* an event from its callbacks resets it */
                steps[s].run(u);
                u->running_step = UNIT_STEP_NONE;
        }
}
