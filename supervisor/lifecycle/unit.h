/* SPDX-License-Identifier: MIT */
/*
 * The unit state machine (SPEC §4). unit.c (with unit-notify.c and
 * unit-policy.c) owns the life cycle; no other module reads a unit's
 * position: they ask unit_get_state(), unit_job_state(), unit_is_waiting(),
 * unit_is_down(), unit_is_dead(), unit_is_settled().
 *
 * ---- Position: the one source of truth (enum unit_pos, u->pos) ----
 *
 *   position       shown       meaning
 *   INACTIVE       inactive    no process; the last run (if any) succeeded
 *   FAILED         failed      no process; the last run failed (u->result)
 *   WAIT_INACTIVE  inactive    a start job waits for its dependencies (SPEC §4
 *   WAIT_FAILED    failed        "Start jobs"): nothing runs yet, the flight is
 *   WAIT_BACKOFF   backoff       still cancellable, and the shown state is the
 *                                one the unit had before the start
 *   WAIT_RESTART   stopping    an explicit restart's old instance is gone: its
 *                              start job begins (shows inactive if it must wait)
 *   START_PRE      starting    ExecStartPre=[i] runs (control process)
 *   START          starting    the main process runs, its start job not done:
 *                              simple → done at fork; exec → at a successful
 *                              exec; notify → at READY=1; oneshot → at the
 *                              successful exit of ExecStart=[i], each in turn;
 *                              forking → ExecStart= runs as a control process,
 *                              and at its exit 0 the main process is found
 *                              (PIDFile=, MAINPID=, GuessMainPID=; the file
 *                              is read again until it is there: u->control
 *                              and u->main both NULL meanwhile)
 *   START_POST     starting    ExecStartPost=[i] runs; the main process too
 *   RUNNING        running     the main process runs (or RemainAfterExit=)
 *   RELOAD         running     ExecReload=[i] runs
 *   STOP_NOTIFY    stopping    STOPPING=1: the main process exits on its own
 *                              within TimeoutStopSec=
 *   STOP_CMD       stopping    ExecStop=[i] runs
 *   STOP_SIGTERM   stopping    KillSignal= (or WatchdogSignal=) sent: waiting
 *   STOP_SIGKILL   stopping    FinalKillSignal= sent: waiting again
 *   BACKOFF        backoff     waiting RestartSec= (grown over RestartSteps=)
 *
 * The shown state (SPEC §4's words) is never stored: unit_get_state() reads
 * it from the position's row of one table in unit.c (as systemd's
 * state_translation_table), as do the job state and the settled/dead tests.
 * Beside the position, the last run's outcome: u->result (SPEC §5), and
 * u->finished (a oneshot's commands all succeeded: its job is done, no
 * restart follows).
 *
 * ---- Events (the public functions below) ----
 *
 * start (with the flight's resolution, SPEC §2.3), stop, restart (explicit,
 * propagated), the restart policy's flight, the dependencies allow the start
 * or failed it, the waiting flight was cancelled, reload, reset-failed, a new
 * file (daemon-reload), a process exited, the main process's exec status, the
 * deadline passed (TimeoutStartSec=, TimeoutStopSec=, the back-off delay),
 * the unit's processes may be gone, a forking unit's PID file may be there
 * now (unit_forking_retry), a notification (READY=1, STATUS=,
 * WATCHDOG=1, WATCHDOG=trigger, STOPPING=1, MAINPID=, EXTEND_TIMEOUT_USEC=,
 * ERRNO=), the watchdog lease expired. tests/unit/test-unit-table.c lists
 * every (position, event) pair and its outcome.
 *
 * ---- How an event runs ----
 *
 *  1. The handler (a public function below) moves the position, does the
 *     event's own effects through struct unit_ops (spawn, signal, arm,
 *     answer the flight), and names at most one step to follow
 *     (u->next_step: unit_sm_queue_step). It calls no transition itself.
 *  2. The steps run until none is left (unit_sm_run_steps): each step is
 *     one small function of unit-steps.c's table (enum unit_step) that
 *     moves the position, does the new position's effects, and names at
 *     most one next step, as its last act — e.g. a main process's exit:
 *     STOP → RUN (ExecStop=) … its exit: STOP_SIGTERM → STOP_FINISHED →
 *     BACKOFF_OR_DEAD. The table lists which steps may follow each one,
 *     and unit_sm_queue_step() asserts it. A notification's keys act in
 *     order, the steps of each running before the next key.
 *  3. Queued requests (u->queued) are applied, once each, by one function
 *     (apply_requests), their steps run after each: the back-off's end
 *     (ops->auto_restart, once u's new start job exists), an explicit
 *     restart's start once its old instance is gone, a stop queued behind
 *     a publishing restart (SPEC §2.3) once the new instance runs, the
 *     restart policy's flight (ops->request_restart) once in backoff.
 *  4. Only then does the manager hear of the changes: every change (each
 *     shown state passed through, each answer, a SuccessAction=/
 *     FailureAction=) was queued with the record's fields at that moment and
 *     is delivered in order (ops->changed, ops->answered, ops->action); while
 *     ops->changed or ops->answered runs, unit_get_state() and
 *     unit_get_shown() give that change's fields, so that each transition
 *     still gets its own record (SPEC §5). The manager may call any event of
 *     the unit from there: it runs as an event of its own.
 *
 * An event the manager causes from inside an ops callback of a step (u's
 * start from start_job(), say) runs steps 1–2 there and leaves 3–4 to the
 * outer event. The step queue is one slot and never overflows: a step is
 * named last, after every ops call, and the loop empties the slot before
 * it runs a step (asserted at each naming and at each event's begin).
 * Nothing is allocated per step.
 *
 * ---- Invariants ----
 *
 *  - u->main is set only in START, START_POST, RUNNING, RELOAD, STOP_NOTIFY
 *    and the stop phases; u->control only in START_PRE, START (Type=forking's
 *    start process), START_POST, RELOAD, STOP_CMD (and, being killed, the
 *    stop phases after a start's). A Type=forking unit may run (RUNNING)
 *    with no main process when none was known or guessed: it ends when no
 *    process of it is left (unit_check_processes), as systemd's.
 *  - A deadline is armed only in the start phases, STOP_*, and BACKOFF.
 *  - The watchdog lease (ops->watchdog) exists only in RUNNING and RELOAD:
 *    its expiry or WATCHDOG=trigger sends WatchdogSignal= per KillMode= (no
 *    ExecStop=, as systemd), then STOP_SIGTERM/STOP_SIGKILL, result
 *    watchdog, then Restart=; any other way out of RUNNING deletes it first,
 *    so a stop is never taken for a watchdog failure.
 *  - u->resolution (the flight being worked for) is answered when the start
 *    job is done or failed; u->next_resolution exists only with a queued
 *    restart (UNIT_QUEUED_RESTART), whose start takes it.
 *  - UNIT_QUEUED_STOP waits only while a restart is queued or the new
 *    instance has not spawned; it never outlives the event otherwise.
 *  - Between events no step is pending (u->next_step is UNIT_STEP_NONE)
 *    and no transition runs: every move is a step or an event's own.
 *
 * ---- Desired versus current ----
 *
 * u->want_up is what was last asked of the unit: up (start, restart, the
 * restart policy) or down (an explicit stop). u->pos is where it is. A
 * process dying on its own moves the unit through the stop sequence and then
 * the restart policy decides, as long as want_up holds.
 *
 * Every system call the machine needs goes through struct unit_ops, so the
 * manager provides the real ones and a test can script them.
 * Single-threaded: every function runs in tend's event loop.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "libexit.h"
#include "singleflight.h"
#include "time-util.h"
#include "unit-file.h"

/* The shown state (SPEC §4), derived from the position. */
enum unit_state {
        UNIT_INACTIVE,
        UNIT_STARTING,
        UNIT_RUNNING,
        UNIT_STOPPING,
        UNIT_FAILED,
        UNIT_BACKOFF,
        _UNIT_STATE_MAX,
};

/* SPEC §5 "result". */
enum unit_result {
        UNIT_RESULT_SUCCESS,
        UNIT_RESULT_EXIT_CODE,
        UNIT_RESULT_SIGNAL,
        UNIT_RESULT_TIMEOUT,
        UNIT_RESULT_WATCHDOG,
        UNIT_RESULT_START_LIMIT,
        UNIT_RESULT_EXEC_FAILED,
        UNIT_RESULT_DEPENDENCY,
        UNIT_RESULT_RESOURCES,
        _UNIT_RESULT_MAX,
};

/* The position (see the table above). */
enum unit_pos {
        UNIT_POS_INACTIVE,
        UNIT_POS_FAILED,
        UNIT_POS_WAIT_INACTIVE,
        UNIT_POS_WAIT_FAILED,
        UNIT_POS_WAIT_BACKOFF,
        UNIT_POS_WAIT_RESTART,
        UNIT_POS_START_PRE,
        UNIT_POS_START,
        UNIT_POS_START_POST,
        UNIT_POS_RUNNING,
        UNIT_POS_RELOAD,
        UNIT_POS_STOP_NOTIFY,
        UNIT_POS_STOP_CMD,
        UNIT_POS_STOP_SIGTERM,
        UNIT_POS_STOP_SIGKILL,
        UNIT_POS_BACKOFF,
        _UNIT_POS_MAX,
};

/* What follows an event (u->next_step): unit-steps.c's table. */
enum unit_step {
        UNIT_STEP_NONE,
        UNIT_STEP_BEGIN_START,    /* a start job: a WAIT position, ops->start_job */
        UNIT_STEP_START,          /* past its wait: the start limit, START_PRE */
        UNIT_STEP_RUN,            /* the position's next command, or the next position */
        UNIT_STEP_MAIN_STARTED,   /* the start job done for Type=: ExecStartPost= */
        UNIT_STEP_START_DONE,     /* every start command ran */
        UNIT_STEP_RUNNING,        /* RUNNING */
        UNIT_STEP_STOP,           /* the stop sequence: ExecStop= if the job was done */
        UNIT_STEP_STOP_SIGTERM,   /* KillSignal= */
        UNIT_STEP_STOP_WATCHDOG,  /* WatchdogSignal= (no ExecStop=) */
        UNIT_STEP_STOP_SIGKILL,   /* FinalKillSignal= */
        UNIT_STEP_STOP_FINISHED,  /* nothing runs any more: the restart policy */
        UNIT_STEP_BACKOFF_OR_DEAD,
        UNIT_STEP_DEAD,           /* INACTIVE, FAILED, or on to a restart's start */
        _UNIT_STEP_MAX,
};

/* Requests that wait for a position, applied after the event (u->queued). */
enum {
        UNIT_QUEUED_RESTART = 1 << 0, /* an explicit restart: start once stopped */
        UNIT_QUEUED_STOP = 1 << 1,    /* a stop behind a publishing restart (SPEC §2.3) */
        UNIT_QUEUED_BACKOFF = 1 << 2, /* the restart policy's flight: ops->request_restart */
        UNIT_QUEUED_AUTO_RESTART = 1 << 3, /* the back-off passed: ops->auto_restart */
};

/* A flight's outcome (SPEC §2.3): success with the new main pid, or failure
 * with the unit's result. Owned by the single-flight table (unit_outcome_ops). */
struct unit_outcome {
        bool ok;
        pid_t main_pid;
        enum unit_result result;
        char reason[160];       /* why it is not ok, when more than the result says; else "" */
};
extern const sf_outcome_ops unit_outcome_ops;

/* What a record shows of u (SPEC §5), as unit_get_shown() gives it. */
struct unit_shown {
        usec_t since_realtime, since_monotonic;
        uint64_t restarts;
        enum unit_state state;
        enum unit_result result;
        pid_t main_pid;
        struct exit_reason last_exit;
        bool has_last_exit;
};

/* A change queued for the manager (delivered after the event). */
struct unit_change {
        enum { UNIT_CHANGE_CHANGED, UNIT_CHANGE_ANSWERED, UNIT_CHANGE_ACTION } kind;
        struct unit_shown shown;        /* the fields at the change */
        unit_action action;             /* UNIT_CHANGE_ACTION */
        int status;
};

struct unit;
struct notify_message;
struct unit_failure; /* pkg */

/* The seam: what the machine asks of the world (the manager implements it). */
struct unit_ops {
        /* Spawns cmd for u: its main process when main is true (a session
         * leader with MAINPID unset), else a control process (MAINPID set when
         * the main process runs). *ret is the caller's reference. Says why it
         * failed (the caller does not). Errors fail the start: -ENOEXEC, the
         * executable was not found or may not be run → exec-failed; any other
         * (User= unknown, EnvironmentFile= missing, no memory…) → resources. */
        int (*spawn)(void *userdata, struct unit *u, const struct unit_command *cmd, bool main,
                     struct exit_process **ret);
        /* Before each start's first spawn: empties u's cgroup of leftovers of
         * a previous tend (SPEC §4 "cgroups"). An error fails the start
         * (result resources); the op says why (the caller does not). 1: not ready
         * yet (leftovers dying): the start waits in START_PRE, under
         * TimeoutStartSec=, until the manager calls unit_prepared(); nothing
         * blocks meanwhile. */
        int (*prepare)(void *userdata, struct unit *u);
        /* Sends sig to every process of u (cgroup or process group). */
        int (*signal_all)(void *userdata, struct unit *u, int sig);
        /* 1 if any process of u is left, else 0. */
        int (*populated)(void *userdata, struct unit *u);
        /* Arms u's one timer at an absolute CLOCK_MONOTONIC deadline (µs);
         * USEC_INFINITY disarms it. */
        int (*arm)(void *userdata, struct unit *u, usec_t deadline);
        usec_t (*now)(void *userdata);
        /* u's record changed (state, pid, result…): write service/NAME. Called
         * after the event, once per change in order; unit_get_shown() gives
         * the fields at that change. */
        void (*changed)(void *userdata, struct unit *u);
        /* u ended in success or failure and its SuccessAction=/FailureAction=
         * asks tend to exit with status. Called after the event, in order. */
        void (*action)(void *userdata, struct unit *u, unit_action action, int status);
        /* The restart policy wants a restart of u: join u's flight as one of
         * tend's own requesters; the leader hands the resolution back through
         * unit_backoff_begin(). Called once u is in BACKOFF, after the event's
         * transitions (a queued request). */
        void (*request_restart)(void *userdata, struct unit *u);
        /* The main process changed (pid, or 0 when it is gone): logs prefix. */
        void (*main_pid_changed)(void *userdata, struct unit *u, pid_t pid);
        /* 1 if pid is a process of u (its cgroup, or without one its process
         * group or session: NotifyAccess=all, MAINPID=), 0 if not, or a
         * negative errno (-ESRCH: no such process). */
        int (*contains)(void *userdata, struct unit *u, pid_t pid);
        /* MAINPID=: takes pid as u's new main process — a pidfd opened at
         * once, a process of u, tracked through the reaper so its exit is
         * u's. *ret is the caller's reference. Errors: -ESRCH (gone), -EPERM
         * (not a process of u), -ECHILD (not tend's child: tend cannot wait
         * for it), -EEXIST (already tracked). */
        int (*adopt)(void *userdata, struct unit *u, pid_t pid, struct exit_process **ret);
        /* Creates or renews u's watchdog lease for ttl µs (1 done, 0 the
         * lease already expired: its expiry is on its way); ttl 0 deletes it
         * (SPEC §4 "Watchdog"). An expiry comes back as unit_watchdog_expired(). */
        int (*watchdog)(void *userdata, struct unit *u, usec_t ttl);
        /* A start job of u is about to begin (u is in a WAIT position): 0 lets it
         * begin at once; 1 makes it wait until the manager calls
         * unit_dependencies_ready() or unit_dependency_failed() (SPEC §4
         * "Start jobs"). The manager may start u's required units from here. */
        int (*start_job)(void *userdata, struct unit *u);
        /* u's automatic restart begins (its back-off delay passed): SPEC §4
         * "Propagation" restarts its running Requires=/BindsTo= dependents. */
        void (*auto_restart)(void *userdata, struct unit *u);
        /* Type=forking: the start process exited 0 (or unit_forking_retry
         * came); finds u's main process: the pid in PIDFile=, trusted as
         * systemd 252 does (owned by root or tend's user, else the pid must
         * be a process of u; a path through an unsafe symlink only then),
         * a pidfd opened and tracked through the reaper; without PIDFile=,
         * u->main if MAINPID= named one, else the guess (GuessMainPID=: the
         * one child of tend among u's processes). Returns 0 with *ret the
         * new main process (the caller's reference), or NULL to keep u's
         * (none, when not known or guessed); 1 when the pid in the file had
         * already exited and was reaped as an orphan: *ret_reason is its
         * status; -EAGAIN when the file is not there (missing, empty, its
         * process not yet re-parented to tend): the manager calls
         * unit_forking_retry() later; -EINPROGRESS likewise, when no
         * process is left in u's group but one that left it (without
         * cgroups: re-parented to tend during the start) lives, so the unit
         * waits on; -ESRCH when the guess cannot tell the daemon apart
         * (without cgroups); any other error when the file is
         * refused or unreadable, said with the file and why (the start fails,
         * result resources). */
        int (*forking_main)(void *userdata, struct unit *u, struct exit_process **ret,
                            struct exit_reason *ret_reason);
        /* u's flight was answered and its resolution let go (optional, may be
         * NULL): the requesters' answers are final. Called after the event, in
         * order with the changes. */
        void (*answered)(void *userdata, struct unit *u);
        /* pkg: a command of u failed (unit_note_failure(); optional, may be
         * NULL). f and its strings are borrowed for the call. */
        void (*command_failed)(void *userdata, struct unit *u, const struct unit_failure *f);
};

/* pkg: the last Exec*= command of u that failed — exited unclean (not a
 * SuccessExitStatus=, not a '-' command), was killed, or could not be
 * executed — as `tendctl status` shows it ("Process: PID ExecStartPre=…").
 * Handed to ops->command_failed, which keeps it (out of struct unit: few
 * units have one, SPEC §8). */
struct unit_failure {
        const char *key;            /* "ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop" (static) */
        unsigned index, n;          /* the command's index in its list (from 0), of n */
        pid_t pid;                  /* 0: it never ran (spawn failed) */
        int exec_errno;             /* > 0: its exec (or the set-up before it) failed with it; reason unset */
        struct exit_reason reason;  /* how it ended */
        usec_t realtime;            /* when it ended, µs since the epoch */
        const char *path;           /* its executable as the file names it (borrowed for the call) */
};

/* pkg: tells ops->command_failed (if set) that the index-th command of l
 * (one of u->file's Exec*= lists) failed; pid its pid (0: it never ran), r
 * how it ended (NULL: it never ran), exec_errno > 0 when its exec or spawn
 * failed. */
void unit_note_failure(struct unit *u, const struct unit_command_list *l, unsigned index, pid_t pid,
                       const struct exit_reason *r, int exec_errno);

struct unit {
        char *name;
        struct unit_file *file;         /* owned: the file decisions read; a daemon-reload replaces it (unit_set_next_file) */
        struct unit_file *next_file;    /* owned: a daemon-reload's new file waiting for a fit, or NULL */
        const struct unit_ops *ops;
        void *userdata;
        void *manager_data;             /* the manager's per-unit data (log stream, cgroup, timer) */

        /* (The fields are ordered to leave no hole, the small ones packed in
         * bytes, the counts of its queues in the queues: 1,000 units keep one each,
         * a 208-byte malloc chunk; SPEC §8.) */
        unsigned cmd_index;             /* the command of the position's list that runs */
        pid_t main_pid;                 /* the main process's pid, 0 when gone */
        int status_errno;               /* the last ERRNO=, 0 if none */
        unsigned restart_step;          /* RestartSteps= position */
        /* Current: the position, and the last run's outcome. */
        enum unit_pos pos : 8;          /* the one position; read through the accessors */
        enum unit_result result : 8;
        /* Desired. */
        enum unit_step next_step : 8;   /* the step that follows, run after the event's move */
        enum unit_step running_step : 8; /* the step running, for the table's assert */
        unsigned queued : 8;            /* UNIT_QUEUED_*: requests applied after the event */
        unsigned event_depth : 8;       /* > 0: an event runs (nested: a callback's; asserted < 255) */
        bool finished : 1;              /* a oneshot's commands all succeeded: no restart */
        bool want_up : 1;               /* up unless explicitly stopped */
        bool has_last_exit : 1;
        bool watchdog_held : 1;         /* the lease watchdog/NAME exists (ops->watchdog) */
        bool preparing : 1;             /* START_PRE waits for ops->prepare's unit_prepared() */

        struct exit_process *main;      /* while unreaped */
        struct exit_process *control;
        struct exit_reason last_exit;   /* of the last main process */
        char *status_text;              /* the last STATUS=, or NULL */
        usec_t deadline;                /* the armed timer (absolute), USEC_INFINITY if none */

        usec_t since_realtime;          /* last change of the shown state, µs */
        usec_t since_monotonic;
        uint64_t restarts;              /* automatic and requested, since tend started */
        struct unit_start_times *start_times; /* the last StartLimitBurst+1 starts, or NULL (unit-policy.c) */

        sf_resolution *resolution;      /* the current start flight's work, or NULL */
        sf_resolution *next_resolution; /* a queued restart's flight */
        uint64_t record_revision;       /* of service/NAME in the store */

        /* The changes for the manager, delivered after the event. */
        struct unit_changes *changes;   /* or NULL (unit-state.c) */
        const struct unit_shown *report; /* the change being delivered, or NULL */
        char *condition_text;           /* cond: why the last start was skipped or failed by an
                                         * assert ("start condition unmet: ConditionX=…"), or NULL */
};

/* struct unit keeps these in 8 bits each. */
_Static_assert(_UNIT_POS_MAX <= 256 && _UNIT_RESULT_MAX <= 256 && _UNIT_STEP_MAX <= 256 &&
                       UNIT_QUEUED_AUTO_RESTART < 256,
               "a field of struct unit is too narrow");

/* Creates a unit from its loaded file (taken on success). */
int unit_new(struct unit_file *file, const struct unit_ops *ops, void *userdata, struct unit **ret);
struct unit *unit_free(struct unit *u);

const char *unit_state_to_string(enum unit_state s);
/* The position's name (debugging and tests: "start-pre", "stop-sigterm"…). */
const char *unit_pos_to_string(enum unit_pos p);

/* u's shown state (SPEC §4), derived from its position; while ops->changed
 * or ops->answered runs, the state at the change being delivered. */
enum unit_state unit_get_state(const struct unit *u);

/* The fields of u's record (SPEC §5), as unit_get_state() says: at the
 * change being delivered, else now. */
void unit_get_shown(const struct unit *u, struct unit_shown *ret);
const char *unit_result_to_string(enum unit_result r);

/* NRestarts as systemd 252 counts it (tendctl(1) "show"): u's automatic
 * restarts since the last start that was not one; a requested start or
 * restart and reset-failed begin it anew. It is the RestartSteps= position
 * (unit_backoff_begin() counts the restart it schedules: not yet made while
 * u waits in back-off). The record's restarts count requested ones too. */
uint64_t unit_n_restarts(const struct unit *u);

/*
 * Starts u for the flight whose resolution is given (taken). A running unit
 * answers at once; a stopping one starts when stopped. An explicit start
 * (tendctl, not the restart policy) resets the back-off step and the start
 * limit.
 */
void unit_start(struct unit *u, sf_resolution *resolution, bool explicit_request);

/* Explicit restart: stop, then start for the flight (taken). resolution NULL
 * (tend's own restart at daemon-reload, which could not lead a flight): the
 * flight in progress, if any, gets the restart's outcome instead. */
void unit_explicit_restart(struct unit *u, sf_resolution *resolution);

/* Explicit stop. The caller first cancels u's flight through the table
 * (sf_table_cancel): flight_publishing is true when that was refused because
 * the flight is PUBLISHING; the stop is then queued until the publication
 * completes (SPEC §2.3). Then the stop sequence. */
void unit_stop(struct unit *u, bool flight_publishing);

/* Lets go of u's flight (and of a restart's next one) without an answer: its
 * waiters are answered `abandoned` and the table logs an error naming the
 * unit (SPEC §2.3: a start that a shutdown or a reload removing the unit
 * ends). Call it before unit_stop(u, false). Returns whether there was one. */
bool unit_abandon_flight(struct unit *u);

/* The restart policy's flight: wait the back-off delay, then start. */
void unit_backoff_begin(struct unit *u, sf_resolution *resolution);

/*
 * Propagation's restart (SPEC §4): like unit_explicit_restart() with tend's
 * own flight (resolution taken, may be NULL), but the back-off step and the
 * start limit are kept, as for an automatic restart.
 */
void unit_propagated_restart(struct unit *u, sf_resolution *resolution);

/* The start job waiting in a WAIT position may begin (its ordering dependencies
 * are done and its required units are up). No-op in any other position. */
void unit_dependencies_ready(struct unit *u);

/*
 * The start job waiting in a WAIT position fails without running anything: u
 * becomes failed with result dependency; why (borrowed; copied into the
 * log line and the flight's answer) names the unit, e.g. "required unit
 * db.service failed (result exit-code)". No restart follows, and no
 * SuccessAction=/FailureAction=. No-op in any other position.
 */
void unit_dependency_failed(struct unit *u, const char *why);

/* The flight of the start job waiting in a WAIT position was cancelled (every
 * requester left, SPEC §2.3): u goes back to where it was, untouched. */
void unit_wait_cancelled(struct unit *u);

/* How the start job of u stands, for the units ordered after it or
 * requiring it (SPEC §4 "Start jobs"). */
enum unit_job_state {
        UNIT_JOB_NONE,    /* no start job: inactive and not being started */
        UNIT_JOB_PENDING, /* being started (waiting, or before its job is done) */
        UNIT_JOB_DONE,    /* up: running, or a oneshot that exited successfully */
        UNIT_JOB_FAILED,  /* its last start failed: failed, or in back-off */
        UNIT_JOB_STOPPING, /* up, being stopped (not to be started again) */
};
enum unit_job_state unit_job_state(const struct unit *u);

/* Runs ExecReload= (tendctl reload). 0; -EOPNOTSUPP: no ExecReload=;
 * -EBUSY: the unit is not running, or a control process runs. */
int unit_reload(struct unit *u);

/*
 * daemon-reload found u's file changed (SPEC §5; tend(8) "RELOADING DIR"): f
 * (taken) becomes u->file, which every decision reads (Restart=, timeouts,
 * kill settings, exit statuses, dependencies, WatchdogSec=: a held lease is
 * re-armed with it), without stopping anything: at once when u is dead
 * (inactive, failed, in back-off: its delay stays, its restart runs f) or
 * running (its processes keep what they got; control processes spawned from
 * now, ExecStop= and ExecReload= included, are f's, as under systemd). While
 * a list of commands runs (ExecStartPre=, a oneshot's ExecStart=,
 * ExecStartPost=, ExecReload=, the stop) f waits in u->next_file and is
 * taken at the end of the first event that leaves u running or dead; a
 * changed Type= or RemainAfterExit= waits for u's next start. The start-limit
 * count restarts with f. Returns true while f waits (u->next_file). Never
 * restarts u.
 */
bool unit_set_next_file(struct unit *u, struct unit_file *f);

/* reset-failed: a failed unit becomes inactive; the start limit and back-off reset. */
void unit_reset_failed(struct unit *u);

/* A process of u (main or control) exited; the outcome was taken. */
void unit_process_exited(struct unit *u, struct exit_process *p, const struct exit_reason *reason);

/* The exec status of u's main process is known (0 or a negative errno). */
void unit_exec_result(struct unit *u, struct exit_process *p, int error);

/* u's deadline passed. */
void unit_timer_fired(struct unit *u);

/* ops->prepare answered 1 earlier: the start that waits for it goes on
 * (error 0) or fails with result resources (a negative errno, logged here).
 * Ignored when no start waits (a stop came meanwhile). */
void unit_prepared(struct unit *u, int error);

/* u's processes may be gone (cgroup.events, an orphan reaped). */
void unit_check_processes(struct unit *u);

/* Type=forking: read the PID file again (ops->forking_main answered
 * -EAGAIN). No-op unless u still waits for it. */
void unit_forking_retry(struct unit *u);

/* Whether u counts as settled for combined mode (SPEC §4 "Settled"). */
bool unit_is_settled(const struct unit *u);

/* Whether u's start job waits for its dependencies (a WAIT position). */
bool unit_is_waiting(const struct unit *u);

/* Whether u is inactive or failed with no start job (the position alone:
 * not waiting, not in back-off). */
bool unit_is_down(const struct unit *u);

/* Whether u has no process and no pending work. */
bool unit_is_dead(const struct unit *u);

/* Whether u is, now (not as of the change being delivered), waiting for an
 * automatic restart: in back-off, or its restart's start job waiting for its
 * dependencies. RuntimeDirectoryPreserve=restart keeps the directories then. */
bool unit_is_restarting(const struct unit *u);

/*
 * NotifyAccess= in effect (SPEC §4; systemd's rule): a unit that is
 * Type=notify or has WatchdogSec= gets main when NotifyAccess= is unset or
 * none; others get what they set (none when unset). A unit whose access is
 * not none gets a notify socket.
 */
unit_notify_access unit_notify_access_effective(const struct unit_file *f);

/* WatchdogSec= in effect: 0 when disabled (0 or infinity). */
usec_t unit_watchdog_usec(const struct unit_file *f);

/*
 * Whether a notification from pid (its SCM_CREDENTIALS) may act on u: main
 * = u's main pid; exec = main or a running control process (Exec*=); all =
 * those or any process of u (ops->contains). false with *ret_why (a static
 * string for the log line) otherwise; a refused sender's message has no
 * effect at all, MAINPID= included.
 */
bool unit_notify_allowed(struct unit *u, pid_t pid, const char **ret_why);

/*
 * An allowed notification (notify.h) acts on u: MAINPID= (ops->adopt),
 * STATUS=, ERRNO=, READY=1 (the start job of a Type=notify unit is done),
 * STOPPING=1, EXTEND_TIMEOUT_USEC= (the start or stop deadline moves to at
 * least now + that), WATCHDOG=trigger, WATCHDOG=1. Keys that mean nothing in
 * u's position are ignored.
 */
void unit_notify(struct unit *u, const struct notify_message *m);

/* u's watchdog lease expired (cause `expired`, the lease u holds). */
void unit_watchdog_expired(struct unit *u);
