/* SPDX-License-Identifier: MIT */
/*
 * The unit state machine as a table (SPEC §4, §2.3): every (position, event)
 * pair, driven through the public functions and a scripted seam that records
 * what the machine asks of the world. The expected rows below are written
 * from SPEC §4's words, not read from unit.c's table: each accepted pair
 * gives the next position, the shown states a watcher sees in order, and the
 * effects (spawn, signal, lease, answer, the restart's flight…); every pair
 * not listed must be ignored: same position, nothing shown, no effect.
 * Then the event sequences of the integration tests (crash → backoff →
 * restart, stop during start, …) replayed through the machine.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "libexit.h"
#include "log.h"
#include "notify.h"
#include "singleflight.h"
#include "unit.h"

/* ---- the scripted seam ---- */

struct fake {
        struct exit_hub *hub;
        struct exit_reaper *reaper;
        sf_table *flights;
        usec_t now, armed;
        int populated;
        int wait_deps;
        sf_waiter *own_waiter;
        sf_waiter *waiters[16];  /* the test's requests */
        int n_waiters;
        struct exit_process *procs[32];
        int n_procs;
        struct exit_process *stray; /* a process of no unit */
        char effects[512];       /* tokens, in order */
        char states[256];        /* shown states as a watcher sees them (repeats folded) */
        enum unit_state last_shown;
        int fork_answer;         /* Type=forking: what forking_main answers (0: a new main process) */
        bool fork_no_main;       /* with fork_answer 0: no main process found */
};

static void effect(struct fake *f, const char *token) {
        size_t n = strlen(f->effects);
        snprintf(f->effects + n, sizeof f->effects - n, "%s%s", n ? " " : "", token);
}

static int f_spawn(void *ud, struct unit *u, const struct unit_command *cmd, bool main, struct exit_process **ret) {
        struct fake *f = ud;
        if (strstr(cmd->path, "missing")) /* the spawn op says why; the machine decides */
                return -ENOEXEC;
        char *argv[] = { (char *) "sleep", (char *) "1000", NULL };
        struct exit_spawn_attr a = { .size = sizeof a, .argv = argv, .pdeath_signal = SIGKILL };
        assert_int_equal(exit_reaper_spawn(f->reaper, &a, ret), 0);
        assert_true(f->n_procs < 32);
        f->procs[f->n_procs++] = exit_process_ref(*ret);
        effect(f, main ? "spawn-main" : "spawn-ctl");
        return 0;
}

static int f_prepare(void *ud, struct unit *u) {
        return 0;
}

static int f_signal_all(void *ud, struct unit *u, int sig) {
        char b[32];
        snprintf(b, sizeof b, "sig-%s", sig == SIGTERM ? "TERM" : sig == SIGCONT ? "CONT" : sig == SIGKILL ? "KILL"
                                       : sig == SIGABRT ? "ABRT" : "other");
        effect(ud, b);
        return 1;
}

static int f_populated(void *ud, struct unit *u) {
        return ((struct fake *) ud)->populated;
}

static int f_arm(void *ud, struct unit *u, usec_t deadline) {
        ((struct fake *) ud)->armed = deadline;
        return 0;
}

static usec_t f_now(void *ud) {
        return ((struct fake *) ud)->now;
}

/* The record a watcher sees: the shown state at each change, in order. */
static void f_changed(void *ud, struct unit *u) {
        struct fake *f = ud;
        enum unit_state s = unit_get_state(u);
        if (s == f->last_shown)
                return;
        f->last_shown = s;
        size_t n = strlen(f->states);
        snprintf(f->states + n, sizeof f->states - n, "%s%s", n ? " " : "", unit_state_to_string(s));
}

static void f_answered(void *ud, struct unit *u) {
        effect(ud, "answer");
}

static void f_action(void *ud, struct unit *u, unit_action action, int status) {
        effect(ud, "action");
}

static void f_request_restart(void *ud, struct unit *u) {
        struct fake *f = ud;
        effect(f, "flight");
        sf_waiter *w = NULL;
        sf_resolution *r = NULL;
        assert_int_equal(sf_table_join(f->flights, u->name, &w, &r), 1);
        sf_waiter_free(f->own_waiter);
        f->own_waiter = w;
        unit_backoff_begin(u, r);
}

static void f_main_pid_changed(void *ud, struct unit *u, pid_t pid) {
}

static int f_contains(void *ud, struct unit *u, pid_t pid) {
        return 0;
}

static int f_adopt(void *ud, struct unit *u, pid_t pid, struct exit_process **ret) {
        return -EPERM;
}

static int f_watchdog(void *ud, struct unit *u, usec_t ttl) {
        effect(ud, ttl ? (u->watchdog_held ? "renew" : "lease+") : "lease-");
        return 1;
}

static int f_start_job(void *ud, struct unit *u) {
        struct fake *f = ud;
        effect(f, "job");
        return f->wait_deps;
}

static void f_auto_restart(void *ud, struct unit *u) {
        effect(ud, "auto");
}

/* Type=forking's main process, as the test scripts it. */
static int f_forking_main(void *ud, struct unit *u, struct exit_process **ret, struct exit_reason *ret_reason) {
        struct fake *f = ud;
        *ret = NULL;
        effect(f, "find-main");
        if (f->fork_answer == 1)
                *ret_reason = (struct exit_reason) { .kind = EXIT_REASON_EXITED, .status = 7 };
        if (f->fork_answer != 0 || f->fork_no_main)
                return f->fork_answer;
        char *argv[] = { (char *) "sleep", (char *) "1000", NULL };
        struct exit_spawn_attr a = { .size = sizeof a, .argv = argv, .pdeath_signal = SIGKILL };
        assert_int_equal(exit_reaper_spawn(f->reaper, &a, ret), 0);
        assert_true(f->n_procs < 32);
        f->procs[f->n_procs++] = exit_process_ref(*ret);
        return 0;
}

static const struct unit_ops fake_ops = {
        .spawn = f_spawn, .prepare = f_prepare, .signal_all = f_signal_all, .populated = f_populated,
        .arm = f_arm, .now = f_now, .changed = f_changed, .action = f_action,
        .request_restart = f_request_restart, .main_pid_changed = f_main_pid_changed,
        .contains = f_contains, .adopt = f_adopt, .watchdog = f_watchdog,
        .start_job = f_start_job, .auto_restart = f_auto_restart, .answered = f_answered,
        .forking_main = f_forking_main,
};

static struct fake *fake_new(void) {
        struct fake *f = calloc(1, sizeof *f);
        assert_non_null(f);
        f->now = 1000 * USEC_PER_SEC;
        f->armed = USEC_INFINITY;
        assert_int_equal(exit_hub_new(0, 0, &f->hub), 0);
        assert_int_equal(exit_reaper_new(f->hub, 0, &f->reaper), 0);
        assert_int_equal(sf_table_new(&unit_outcome_ops, NULL, &f->flights), 0);
        char *argv[] = { (char *) "sleep", (char *) "1000", NULL };
        struct exit_spawn_attr a = { .size = sizeof a, .argv = argv, .pdeath_signal = SIGKILL };
        assert_int_equal(exit_reaper_spawn(f->reaper, &a, &f->stray), 0);
        return f;
}

static void fake_free(struct fake *f, struct unit *u) {
        unit_free(u);
        f->procs[f->n_procs++] = f->stray;
        for (int i = 0; i < f->n_procs; i++) {
                (void) exit_process_signal(f->procs[i], SIGKILL);
                (void) exit_process_wait_exec(f->procs[i], 5000, NULL);
                exit_process_unref(f->procs[i]);
        }
        for (int i = 0; i < f->n_waiters; i++)
                sf_waiter_free(f->waiters[i]);
        sf_waiter_free(f->own_waiter);
        sf_table_unref(f->flights);
        exit_reaper_free(f->reaper);
        exit_hub_unref(f->hub);
        free(f);
}

static struct unit *make_unit(struct fake *f, const char *text) {
        struct unit_file *uf = NULL;
        char *msg = NULL;
        int k = unit_file_parse("t.service", "t.service", text, strlen(text), &uf, &msg);
        if (k < 0)
                fail_msg("unit text refused: %s", msg ? msg : strerror(-k));
        struct unit *u = NULL;
        assert_int_equal(unit_new(uf, &fake_ops, f, &u), 0);
        return u;
}

/* ---- events, as the manager delivers them ---- */

enum ev {
        EV_START,        /* tendctl start: join the flight; the leader starts the unit */
        EV_STOP,         /* tendctl stop: cancel the flight, then stop */
        EV_RESTART,      /* tendctl restart (tend's own when a flight exists) */
        EV_MAIN_OK,      /* the main process exits 0 */
        EV_MAIN_FAIL,    /* the main process exits 1 */
        EV_CTL_OK,       /* the control process exits 0 */
        EV_CTL_FAIL,     /* the control process exits 1 */
        EV_TIMER,        /* the deadline passed */
        EV_READY,        /* READY=1 */
        EV_STOPPING,     /* STOPPING=1 */
        EV_DEPS_READY,   /* the dependencies allow the start */
        EV_DEPS_FAILED,  /* a required unit failed */
        EV_CANCEL,       /* every requester leaves */
        EV_WATCHDOG,     /* the lease expired */
        EV_RESET_FAILED, /* tendctl reset-failed */
        EV_GONE,         /* the unit's processes may be gone (cgroup.events) */
        EV_RELOAD,       /* tendctl reload */
        EV_PID_FILE,     /* Type=forking: read the PID file again */
        _EV_MAX,
};

static const char *const ev_names[_EV_MAX] = {
        "start", "stop", "restart", "main-ok", "main-fail", "ctl-ok", "ctl-fail", "timer", "ready",
        "stopping", "deps-ready", "deps-failed", "cancel", "watchdog", "reset-failed", "gone", "reload",
        "pid-file",
};

static void join(struct fake *f, struct unit *u, bool restart) {
        sf_waiter *w = NULL;
        sf_resolution *r = NULL;
        assert_true(sf_table_join(f->flights, u->name, &w, &r) >= 0);
        assert_true(f->n_waiters < 16);
        f->waiters[f->n_waiters++] = w;
        if (restart)
                unit_explicit_restart(u, r);
        else if (r)
                unit_start(u, r, true);
}

/* An exit of p, or of a process of no unit when u has none such. */
static void exit_of(struct fake *f, struct unit *u, struct exit_process *p, int status) {
        struct exit_reason r = { .kind = EXIT_REASON_EXITED, .status = status };
        unit_process_exited(u, p ? p : f->stray, &r);
}

static void notify(struct unit *u, const char *text) {
        char buf[NOTIFY_DATAGRAM_MAX + 1];
        size_t n = strlen(text);
        memcpy(buf, text, n);
        struct notify_message m;
        assert_int_equal(notify_parse(buf, n, &m), 0);
        unit_notify(u, &m);
}

static void cancel_all(struct fake *f, struct unit *u) {
        for (int i = 0; i < f->n_waiters; i++)
                f->waiters[i] = sf_waiter_free(f->waiters[i]);
        f->own_waiter = sf_waiter_free(f->own_waiter);
        unit_wait_cancelled(u);
}

static void deliver(struct fake *f, struct unit *u, enum ev e) {
        switch (e) {
        case EV_START:
        case EV_RESTART:
                join(f, u, e == EV_RESTART);
                return;
        case EV_STOP:
                unit_stop(u, sf_table_cancel(f->flights, u->name) == -EBUSY);
                return;
        case EV_MAIN_OK:
        case EV_MAIN_FAIL:
                exit_of(f, u, u->main, e == EV_MAIN_FAIL);
                return;
        case EV_CTL_OK:
        case EV_CTL_FAIL:
                exit_of(f, u, u->control, e == EV_CTL_FAIL);
                return;
        case EV_TIMER:
                f->now = f->armed != USEC_INFINITY ? f->armed : f->now + USEC_PER_SEC;
                unit_timer_fired(u);
                return;
        case EV_READY:
                notify(u, "READY=1");
                return;
        case EV_STOPPING:
                notify(u, "STOPPING=1");
                return;
        case EV_DEPS_READY:
                unit_dependencies_ready(u);
                return;
        case EV_DEPS_FAILED:
                unit_dependency_failed(u, "required unit x.service failed");
                return;
        case EV_CANCEL:
                cancel_all(f, u);
                return;
        case EV_WATCHDOG:
                unit_watchdog_expired(u);
                return;
        case EV_RESET_FAILED:
                unit_reset_failed(u);
                return;
        case EV_GONE:
                f->populated = 0;
                unit_check_processes(u);
                return;
        case EV_RELOAD:
                (void) unit_reload(u);
                return;
        case EV_PID_FILE:
                unit_forking_retry(u);
                return;
        default:
                fail();
        }
}

/* ---- the table, from SPEC §4 ---- */

/* One unit that can reach every position: notify, a command in each list. */
static const char unit_text[] = "[Unit]\nStartLimitIntervalSec=0\n[Service]\nType=notify\n"
                                "ExecStartPre=/bin/true\nExecStart=/bin/true\nExecStartPost=/bin/true\n"
                                "ExecReload=/bin/true\nExecStop=/bin/true\nRestart=on-failure\nRestartSec=5\n"
                                "WatchdogSec=10\nTimeoutStopSec=3\n";

/* SPEC §4's word for each position; a start job waiting for its
 * dependencies shows the state the unit had. */
static const enum unit_state shown_of[_UNIT_POS_MAX] = {
        [UNIT_POS_INACTIVE] = UNIT_INACTIVE,      [UNIT_POS_FAILED] = UNIT_FAILED,
        [UNIT_POS_WAIT_INACTIVE] = UNIT_INACTIVE, [UNIT_POS_WAIT_FAILED] = UNIT_FAILED,
        [UNIT_POS_WAIT_BACKOFF] = UNIT_BACKOFF,   [UNIT_POS_WAIT_RESTART] = UNIT_STOPPING,
        [UNIT_POS_START_PRE] = UNIT_STARTING,     [UNIT_POS_START] = UNIT_STARTING,
        [UNIT_POS_START_POST] = UNIT_STARTING,    [UNIT_POS_RUNNING] = UNIT_RUNNING,
        [UNIT_POS_RELOAD] = UNIT_RUNNING,         [UNIT_POS_STOP_NOTIFY] = UNIT_STOPPING,
        [UNIT_POS_STOP_CMD] = UNIT_STOPPING,      [UNIT_POS_STOP_SIGTERM] = UNIT_STOPPING,
        [UNIT_POS_STOP_SIGKILL] = UNIT_STOPPING,  [UNIT_POS_BACKOFF] = UNIT_BACKOFF,
};

static void reach(struct fake *f, struct unit *u, enum unit_pos p);

static void reach_waiting(struct fake *f, struct unit *u, enum unit_pos from, enum ev e) {
        reach(f, u, from);
        f->wait_deps = 1;
        deliver(f, u, e);
        f->wait_deps = 0;
}

/* Drives a fresh unit to p through events only. */
static void reach(struct fake *f, struct unit *u, enum unit_pos p) {
        static const struct { enum unit_pos from; enum ev e; } step[_UNIT_POS_MAX] = {
                [UNIT_POS_FAILED] = { UNIT_POS_WAIT_INACTIVE, EV_DEPS_FAILED },
                [UNIT_POS_START_PRE] = { UNIT_POS_INACTIVE, EV_START },
                [UNIT_POS_START] = { UNIT_POS_START_PRE, EV_CTL_OK },
                [UNIT_POS_START_POST] = { UNIT_POS_START, EV_READY },
                [UNIT_POS_RUNNING] = { UNIT_POS_START_POST, EV_CTL_OK },
                [UNIT_POS_RELOAD] = { UNIT_POS_RUNNING, EV_RELOAD },
                [UNIT_POS_STOP_NOTIFY] = { UNIT_POS_RUNNING, EV_STOPPING },
                [UNIT_POS_STOP_CMD] = { UNIT_POS_RUNNING, EV_STOP },
                [UNIT_POS_STOP_SIGTERM] = { UNIT_POS_STOP_CMD, EV_CTL_OK },
                [UNIT_POS_STOP_SIGKILL] = { UNIT_POS_STOP_SIGTERM, EV_TIMER },
        };
        switch (p) {
        case UNIT_POS_INACTIVE:
                return;
        case UNIT_POS_WAIT_INACTIVE:
                reach_waiting(f, u, UNIT_POS_INACTIVE, EV_START);
                break;
        case UNIT_POS_WAIT_FAILED:
                reach_waiting(f, u, UNIT_POS_FAILED, EV_START);
                break;
        case UNIT_POS_WAIT_BACKOFF:
                reach_waiting(f, u, UNIT_POS_BACKOFF, EV_TIMER);
                break;
        case UNIT_POS_BACKOFF: /* a crash: ExecStop=, then the restart policy */
                reach(f, u, UNIT_POS_RUNNING);
                deliver(f, u, EV_MAIN_FAIL);
                deliver(f, u, EV_CTL_OK);
                break;
        default:
                reach(f, u, step[p].from);
                deliver(f, u, step[p].e);
        }
        if (u->pos != p)
                fail_msg("setup: reached %s, not %s", unit_pos_to_string(u->pos), unit_pos_to_string(p));
}

struct row {
        enum unit_pos from;
        enum ev ev;
        enum unit_pos to;
        const char *states;  /* shown states seen, in order */
        const char *effects; /* in any order */
};

#define P(x) UNIT_POS_##x
#define STOP_SIGNALS "sig-TERM sig-CONT"
/* The start-up of a dead unit: its start job, then ExecStartPre=. */
#define START_UP "job spawn-ctl"

/* The accepted pairs. Every pair not here is ignored. */
static const struct row rows[] = {
        /* Dead: a start (or restart) runs the start job; a stop of an
         * inactive unit keeps it so, a failed one stays failed. */
        { P(INACTIVE), EV_START, P(START_PRE), "starting", START_UP },
        { P(INACTIVE), EV_RESTART, P(START_PRE), "starting", START_UP },
        { P(FAILED), EV_START, P(START_PRE), "starting", START_UP },
        { P(FAILED), EV_RESTART, P(START_PRE), "starting", START_UP },
        { P(FAILED), EV_RESET_FAILED, P(INACTIVE), "inactive", "" },
        /* Waiting for dependencies: nothing spawned; a stop or every
         * requester leaving ends it where it was; the dependencies decide. */
        { P(WAIT_INACTIVE), EV_STOP, P(INACTIVE), "", "answer" },
        { P(WAIT_INACTIVE), EV_CANCEL, P(INACTIVE), "", "" },
        { P(WAIT_INACTIVE), EV_DEPS_READY, P(START_PRE), "starting", "spawn-ctl" },
        { P(WAIT_INACTIVE), EV_DEPS_FAILED, P(FAILED), "failed", "answer" },
        { P(WAIT_FAILED), EV_STOP, P(FAILED), "", "answer" },
        { P(WAIT_FAILED), EV_CANCEL, P(FAILED), "", "" },
        { P(WAIT_FAILED), EV_DEPS_READY, P(START_PRE), "starting", "spawn-ctl" },
        { P(WAIT_FAILED), EV_DEPS_FAILED, P(FAILED), "", "answer" },
        { P(WAIT_BACKOFF), EV_STOP, P(INACTIVE), "inactive", "answer" },
        { P(WAIT_BACKOFF), EV_CANCEL, P(INACTIVE), "inactive", "" },
        { P(WAIT_BACKOFF), EV_DEPS_READY, P(START_PRE), "starting", "spawn-ctl" },
        { P(WAIT_BACKOFF), EV_DEPS_FAILED, P(FAILED), "failed", "answer" },
        /* Starting: a stop past the point of no return answers and stops at
         * once; a restart stops first; a failed start stops what is left,
         * then Restart=on-failure; no ExecStop= (the unit never ran). */
        { P(START_PRE), EV_STOP, P(STOP_SIGTERM), "stopping", "answer " STOP_SIGNALS },
        { P(START_PRE), EV_RESTART, P(STOP_SIGTERM), "stopping", STOP_SIGNALS },
        { P(START_PRE), EV_CTL_OK, P(START), "", "spawn-main" },
        { P(START_PRE), EV_CTL_FAIL, P(BACKOFF), "stopping backoff", "answer flight " STOP_SIGNALS },
        { P(START_PRE), EV_TIMER, P(STOP_SIGTERM), "stopping", "answer " STOP_SIGNALS },
        { P(START), EV_STOP, P(STOP_SIGTERM), "stopping", "answer " STOP_SIGNALS },
        { P(START), EV_RESTART, P(STOP_SIGTERM), "stopping", STOP_SIGNALS },
        { P(START), EV_MAIN_OK, P(BACKOFF), "stopping backoff", "answer flight " STOP_SIGNALS },
        { P(START), EV_MAIN_FAIL, P(BACKOFF), "stopping backoff", "answer flight " STOP_SIGNALS },
        { P(START), EV_TIMER, P(STOP_SIGTERM), "stopping", "answer " STOP_SIGNALS },
        { P(START), EV_READY, P(START_POST), "", "spawn-ctl" },
        { P(START_POST), EV_STOP, P(STOP_SIGTERM), "stopping", "answer " STOP_SIGNALS },
        { P(START_POST), EV_RESTART, P(STOP_SIGTERM), "stopping", STOP_SIGNALS },
        { P(START_POST), EV_MAIN_OK, P(STOP_SIGTERM), "stopping", "answer " STOP_SIGNALS },
        { P(START_POST), EV_MAIN_FAIL, P(STOP_SIGTERM), "stopping", "answer " STOP_SIGNALS },
        { P(START_POST), EV_CTL_OK, P(RUNNING), "running", "lease+ answer" },
        { P(START_POST), EV_CTL_FAIL, P(STOP_SIGTERM), "stopping", "answer " STOP_SIGNALS },
        { P(START_POST), EV_TIMER, P(STOP_SIGTERM), "stopping", "answer " STOP_SIGNALS },
        /* Running: the lease exists; any way out deletes it first but its
         * expiry; a stop or an exit runs ExecStop=. */
        { P(RUNNING), EV_START, P(RUNNING), "", "answer" },
        { P(RUNNING), EV_STOP, P(STOP_CMD), "stopping", "lease- spawn-ctl" },
        { P(RUNNING), EV_RESTART, P(STOP_CMD), "stopping", "lease- spawn-ctl" },
        { P(RUNNING), EV_MAIN_OK, P(STOP_CMD), "stopping", "lease- spawn-ctl" },
        { P(RUNNING), EV_MAIN_FAIL, P(STOP_CMD), "stopping", "lease- spawn-ctl" },
        { P(RUNNING), EV_STOPPING, P(STOP_NOTIFY), "stopping", "lease-" },
        { P(RUNNING), EV_WATCHDOG, P(STOP_SIGTERM), "stopping", "sig-ABRT sig-CONT" },
        { P(RUNNING), EV_RELOAD, P(RELOAD), "", "spawn-ctl" },
        { P(RELOAD), EV_START, P(RELOAD), "", "answer" },
        { P(RELOAD), EV_STOP, P(STOP_SIGTERM), "stopping", "lease- " STOP_SIGNALS },
        { P(RELOAD), EV_RESTART, P(STOP_SIGTERM), "stopping", "lease- " STOP_SIGNALS },
        { P(RELOAD), EV_MAIN_OK, P(STOP_SIGTERM), "stopping", "lease- " STOP_SIGNALS },
        { P(RELOAD), EV_MAIN_FAIL, P(STOP_SIGTERM), "stopping", "lease- " STOP_SIGNALS },
        { P(RELOAD), EV_CTL_OK, P(RUNNING), "", "" },
        { P(RELOAD), EV_CTL_FAIL, P(RUNNING), "", "" },
        { P(RELOAD), EV_WATCHDOG, P(STOP_SIGTERM), "stopping", "sig-ABRT sig-CONT" },
        /* STOPPING=1: the main process exits on its own; then ExecStop=. */
        { P(STOP_NOTIFY), EV_STOP, P(STOP_CMD), "", "spawn-ctl" },
        { P(STOP_NOTIFY), EV_RESTART, P(STOP_CMD), "", "spawn-ctl" },
        { P(STOP_NOTIFY), EV_MAIN_OK, P(STOP_CMD), "", "spawn-ctl" },
        { P(STOP_NOTIFY), EV_MAIN_FAIL, P(STOP_CMD), "", "spawn-ctl" },
        { P(STOP_NOTIFY), EV_TIMER, P(STOP_CMD), "", "spawn-ctl" },
        /* Stopping: ExecStop=, KillSignal= (+ SIGCONT), FinalKillSignal=
         * after TimeoutStopSec=; a stop changes nothing; a start or
         * restart is queued (the unit shows stopping until it is down). */
        { P(STOP_CMD), EV_CTL_OK, P(STOP_SIGTERM), "", STOP_SIGNALS },
        { P(STOP_CMD), EV_CTL_FAIL, P(STOP_SIGTERM), "", STOP_SIGNALS },
        { P(STOP_CMD), EV_TIMER, P(STOP_SIGTERM), "", STOP_SIGNALS },
        { P(STOP_SIGTERM), EV_MAIN_OK, P(INACTIVE), "inactive", "" },
        { P(STOP_SIGTERM), EV_MAIN_FAIL, P(INACTIVE), "inactive", "" },
        { P(STOP_SIGTERM), EV_TIMER, P(STOP_SIGKILL), "", "sig-KILL" },
        { P(STOP_SIGKILL), EV_MAIN_OK, P(FAILED), "failed", "" },
        { P(STOP_SIGKILL), EV_MAIN_FAIL, P(FAILED), "failed", "" },
        { P(STOP_SIGKILL), EV_TIMER, P(FAILED), "failed", "" },
        /* Back-off: a stop ends the restart's flight; the delay's end starts
         * the unit (its start job, then its dependents' restarts). */
        { P(BACKOFF), EV_STOP, P(INACTIVE), "inactive", "answer" },
        { P(BACKOFF), EV_TIMER, P(START_PRE), "starting", START_UP " auto" },
};

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The tokens of s, sorted, joined by spaces (effects come in any order). */
static void sorted(const char *s, char *out, size_t size) {
        char copy[512], *tok[64], *save = NULL;
        size_t n = 0;
        snprintf(copy, sizeof copy, "%s", s);
        for (char *t = strtok_r(copy, " ", &save); t && n < 64; t = strtok_r(NULL, " ", &save))
                tok[n++] = t;
        qsort(tok, n, sizeof *tok, cmp_str);
        out[0] = 0;
        for (size_t i = 0; i < n; i++)
                snprintf(out + strlen(out), size - strlen(out), "%s%s", i ? " " : "", tok[i]);
}

static const struct row *find_row(enum unit_pos p, enum ev e) {
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
                if (rows[i].from == p && rows[i].ev == e)
                        return &rows[i];
        return NULL;
}

static void check_pair(enum unit_pos p, enum ev e) {
        struct fake *f = fake_new();
        struct unit *u = make_unit(f, unit_text);
        reach(f, u, p);
        f->effects[0] = f->states[0] = 0;
        f->last_shown = unit_get_state(u);
        assert_int_equal(f->last_shown, shown_of[p]);

        deliver(f, u, e);

        const struct row *r = find_row(p, e);
        struct row ignored = { p, e, p, "", "" };
        if (!r)
                r = &ignored;
        char want[512], got[512];
        sorted(r->effects, want, sizeof want);
        sorted(f->effects, got, sizeof got);
        if (u->pos != r->to || !streq(f->states, r->states) || !streq(want, got))
                fail_msg("%s + %s: got %s [%s] {%s}, want %s [%s] {%s}", unit_pos_to_string(p), ev_names[e],
                         unit_pos_to_string(u->pos), f->states, got, unit_pos_to_string(r->to), r->states, want);
        assert_int_equal(unit_get_state(u), shown_of[r->to]);
        assert_int_equal(u->next_step, UNIT_STEP_NONE); /* unit.h: no step outlives its event */
        fake_free(f, u);
}

static void test_every_pair(void **state) {
        for (enum unit_pos p = 0; p < _UNIT_POS_MAX; p++) {
                if (p == UNIT_POS_WAIT_RESTART)
                        continue; /* only inside an event: see test_restart_waits */
                for (enum ev e = 0; e < _EV_MAX; e++)
                        check_pair(p, e);
        }
}

/* Every stop phase has its deadline, ExecStop= included (SPEC §4 "Stop":
 * TimeoutStopSec= bounds the stop): a hung one cannot hold it forever. */
static void test_stop_phases_armed(void **state) {
        static const enum unit_pos stopping[] = { P(STOP_NOTIFY), P(STOP_CMD), P(STOP_SIGTERM), P(STOP_SIGKILL) };
        for (size_t i = 0; i < sizeof stopping / sizeof stopping[0]; i++) {
                struct fake *f = fake_new();
                struct unit *u = make_unit(f, unit_text);
                reach(f, u, stopping[i]);
                if (f->armed != f->now + 3 * USEC_PER_SEC)
                        fail_msg("%s: no TimeoutStopSec=3 deadline", unit_pos_to_string(stopping[i]));
                fake_free(f, u);
        }
}

/* A start or restart while stopping is queued: the start job shows as
 * pending, and the unit starts once it is down (SPEC §2.3). */
static void test_start_while_stopping(void **state) {
        static const enum unit_pos stopping[] = { P(STOP_NOTIFY), P(STOP_CMD), P(STOP_SIGTERM), P(STOP_SIGKILL) };
        for (size_t i = 0; i < sizeof stopping / sizeof stopping[0]; i++) {
                struct fake *f = fake_new();
                struct unit *u = make_unit(f, unit_text);
                reach(f, u, stopping[i]);
                assert_int_equal(unit_job_state(u), UNIT_JOB_STOPPING);
                deliver(f, u, EV_START);
                assert_int_equal(unit_job_state(u), UNIT_JOB_PENDING);
                assert_int_equal(unit_get_state(u), UNIT_STOPPING);
                f->states[0] = 0;
                f->last_shown = UNIT_STOPPING;
                for (int n = 0; n < 4 && u->pos != P(START_PRE); n++)
                        deliver(f, u, u->control ? EV_CTL_OK : u->main ? EV_MAIN_OK : EV_TIMER);
                assert_int_equal(u->pos, P(START_PRE));
                assert_string_equal(f->states, "starting"); /* never inactive in between */
                fake_free(f, u);
        }
}

/* An explicit restart whose start must wait: shown inactive once the old
 * instance is gone (WAIT_RESTART lasts only inside the event). */
static void test_restart_waits(void **state) {
        struct fake *f = fake_new();
        struct unit *u = make_unit(f, "[Service]\nExecStart=/bin/true\n");
        deliver(f, u, EV_START);
        f->states[0] = 0;
        f->last_shown = unit_get_state(u);
        f->wait_deps = 1;
        deliver(f, u, EV_RESTART);
        deliver(f, u, EV_MAIN_OK);
        assert_int_equal(u->pos, P(WAIT_INACTIVE));
        assert_string_equal(f->states, "stopping inactive");
        assert_int_equal(unit_job_state(u), UNIT_JOB_PENDING);
        deliver(f, u, EV_DEPS_READY);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        fake_free(f, u);
}

/* ---- the integration tests' sequences, replayed ---- */

/* A unit of text taken through events; states[] is what `tendctl watch`
 * shows of it, in order (repeats folded, as records are). */
static struct unit *replay(struct fake *f, const char *text, const enum ev *events, size_t n) {
        struct unit *u = make_unit(f, text);
        f->last_shown = unit_get_state(u);
        for (size_t i = 0; i < n; i++)
                deliver(f, u, events[i]);
        return u;
}

#define REPLAY(f, text, ...)                                                                              \
        replay(f, text, (const enum ev[]) { __VA_ARGS__ }, sizeof((const enum ev[]) { __VA_ARGS__ }) /    \
                                                                   sizeof(enum ev))

/* The first request's answer: ok or not. */
static bool first_answer_ok(struct fake *f) {
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(f->waiters[0], &ans), 0);
        assert_int_equal(ans.status, SF_ANSWER_OK);
        bool ok = ((struct unit_outcome *) ans.outcome)->ok;
        unit_outcome_ops.free(ans.outcome, NULL);
        return ok;
}

/* test_service: a crashing Restart=always unit restarts, each time through
 * stopping and backoff, its restarts counted. */
static void test_seq_crash_loop(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Unit]\nStartLimitIntervalSec=0\n[Service]\nExecStart=/bin/false\n"
                                   "Restart=always\nRestartSec=0\n",
                                EV_START, EV_MAIN_FAIL, EV_TIMER, EV_MAIN_FAIL, EV_TIMER, EV_MAIN_FAIL, EV_TIMER);
        assert_string_equal(f->states, "starting running stopping backoff starting running stopping backoff "
                                       "starting running stopping backoff starting running");
        assert_int_equal(u->restarts, 3);
        assert_int_equal(u->result, UNIT_RESULT_SUCCESS);
        fake_free(f, u);
}

/* test_service: the default start limit, the 6th start within 10 s. */
static void test_seq_start_limit(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Service]\nExecStart=/bin/false\nRestart=always\nRestartSec=0\n", EV_START,
                                EV_MAIN_FAIL, EV_TIMER, EV_MAIN_FAIL, EV_TIMER, EV_MAIN_FAIL, EV_TIMER,
                                EV_MAIN_FAIL, EV_TIMER, EV_MAIN_FAIL, EV_TIMER);
        assert_int_equal(unit_get_state(u), UNIT_FAILED);
        assert_int_equal(u->result, UNIT_RESULT_START_LIMIT);
        const char *tail = f->states + strlen(f->states) - strlen("backoff failed");
        assert_string_equal(tail, "backoff failed");
        assert_int_equal(u->restarts, 5);
        fake_free(f, u);
}

/* test_service: a missing executable fails the start, result exec-failed. */
static void test_seq_exec_failed(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Service]\nExecStart=/nonexistent/missing\n", EV_START);
        assert_string_equal(f->states, "starting stopping failed");
        assert_int_equal(u->result, UNIT_RESULT_EXEC_FAILED);
        assert_false(first_answer_ok(f));
        fake_free(f, u);
}

/* test_service: a stop while a notify unit starts; answered not ok, inactive. */
static void test_seq_stop_during_start(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Service]\nType=notify\nExecStart=/bin/true\n", EV_START, EV_STOP,
                                EV_MAIN_OK);
        assert_string_equal(f->states, "starting stopping inactive");
        assert_int_equal(u->result, UNIT_RESULT_SUCCESS);
        assert_false(first_answer_ok(f));
        fake_free(f, u);
}

/* test_service: a restart requested during back-off joins the restart's
 * flight and gets its outcome; nothing is spawned before the delay. */
static void test_seq_restart_during_backoff(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Service]\nExecStart=/bin/false\nRestart=always\nRestartSec=5\n", EV_START,
                                EV_MAIN_FAIL);
        int spawned = f->n_procs;
        deliver(f, u, EV_RESTART);
        assert_int_equal(f->n_procs, spawned);
        assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
        deliver(f, u, EV_TIMER);
        assert_string_equal(f->states, "starting running stopping backoff starting running");
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(f->waiters[1], &ans), 0);
        assert_true(((struct unit_outcome *) ans.outcome)->ok);
        unit_outcome_ops.free(ans.outcome, NULL);
        fake_free(f, u);
}

/* test_service: oneshot, with and without RemainAfterExit=. */
static void test_seq_oneshot(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Service]\nType=oneshot\nExecStart=/bin/true\nRemainAfterExit=yes\n", EV_START,
                                EV_MAIN_OK);
        assert_string_equal(f->states, "starting running");
        assert_true(first_answer_ok(f));
        fake_free(f, u);

        f = fake_new();
        u = REPLAY(f, "[Service]\nType=oneshot\nExecStart=/bin/true\n", EV_START, EV_MAIN_OK);
        assert_string_equal(f->states, "starting stopping inactive");
        assert_int_equal(unit_job_state(u), UNIT_JOB_DONE); /* SPEC §4: settled, its job done */
        assert_true(first_answer_ok(f));
        fake_free(f, u);
}

/* test_notify: running at READY=1, the flight answered then. */
static void test_seq_notify_ready(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Service]\nType=notify\nExecStart=/bin/true\n", EV_START);
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(f->waiters[0], &ans), -EAGAIN);
        deliver(f, u, EV_READY);
        assert_string_equal(f->states, "starting running");
        assert_true(first_answer_ok(f));
        fake_free(f, u);
}

/* test_notify: the watchdog's expiry → WatchdogSignal=, backoff with
 * result watchdog. */
static void test_seq_watchdog(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Service]\nType=notify\nExecStart=/bin/true\nWatchdogSec=1\n"
                                   "Restart=on-failure\n",
                                EV_START, EV_READY, EV_WATCHDOG, EV_MAIN_FAIL);
        assert_string_equal(f->states, "starting running stopping backoff");
        assert_int_equal(u->result, UNIT_RESULT_WATCHDOG);
        assert_non_null(strstr(f->effects, "sig-ABRT"));
        fake_free(f, u);
}

/* test_dependencies: a required unit failed → failed, result dependency,
 * nothing spawned; a wanted unit's start that may go runs. */
static void test_seq_dependency(void **state) {
        struct fake *f = fake_new();
        f->wait_deps = 1;
        struct unit *u = REPLAY(f, "[Service]\nExecStart=/bin/true\nRestart=always\n", EV_START, EV_DEPS_FAILED);
        assert_string_equal(f->states, "failed");
        assert_int_equal(u->result, UNIT_RESULT_DEPENDENCY);
        assert_int_equal(f->n_procs, 0);
        assert_false(first_answer_ok(f));
        fake_free(f, u);
}

/* cond: a condition unmet skips the start (systemd.unit(5): "the starting of the unit will be
 * (mostly silently) skipped"): nothing spawned, inactive, answered ok, its job done for the
 * units that require it; the record's text names the condition. */
static void test_seq_condition_skipped(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Unit]\nConditionPathExists=/nonexistent/tend-cond\n[Service]\nExecStart=/bin/true\n",
                                EV_START);
        assert_int_equal(u->pos, P(INACTIVE));
        assert_int_equal(f->n_procs, 0);
        assert_true(first_answer_ok(f));
        assert_int_equal(unit_job_state(u), UNIT_JOB_DONE);
        assert_string_equal(u->condition_text, "start condition unmet: ConditionPathExists=/nonexistent/tend-cond");
        fake_free(f, u);
}

/* cond: an assert unmet fails the start job ("any assertion setting that is not met results in
 * failure of the start job") but changes no state: inactive, answered not ok, no job done. */
static void test_seq_assert_failed(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Unit]\nAssertPathExists=/nonexistent/tend-cond\n[Service]\nExecStart=/bin/true\n",
                                EV_START);
        assert_int_equal(u->pos, P(INACTIVE));
        assert_int_equal(f->n_procs, 0);
        assert_false(first_answer_ok(f));
        assert_int_equal(unit_job_state(u), UNIT_JOB_NONE);
        assert_string_equal(u->condition_text, "assertion failed: AssertPathExists=/nonexistent/tend-cond");
        fake_free(f, u);
}

/* cond: conditions and asserts met: the start goes on, no text. */
static void test_seq_conditions_met(void **state) {
        struct fake *f = fake_new();
        struct unit *u = REPLAY(f, "[Unit]\nConditionPathExists=/\nAssertPathIsDirectory=/\n[Service]\n"
                                   "ExecStart=/bin/true\n", EV_START);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_null(u->condition_text);
        fake_free(f, u);
}

/* ---- Type=forking (unit-forking.c) ---- */

/* A forking unit's positions: START with its start process running; START
 * waiting for its PID file (no process followed); RUNNING without a main
 * process (none known or guessed). */
enum fork_at { AT_START, AT_WAIT, AT_NO_MAIN };
static const char *const fork_at_names[] = { "start", "wait-pid-file", "running-no-main" };

static const char fork_text[] = "[Unit]\nStartLimitIntervalSec=0\n[Service]\nType=forking\n"
                                "ExecStart=/bin/true\nPIDFile=/run/t.pid\nTimeoutStopSec=3\n";

struct fork_row {
        enum fork_at at;
        enum ev ev;
        int answer;          /* what forking_main answers at this event */
        bool no_main;        /* with answer 0: none found */
        int populated;       /* processes of the unit left */
        enum unit_pos to;
        bool main;           /* a main process afterwards */
        const char *states;
        const char *effects; /* in any order */
        enum unit_result result;
};

#define SIGS STOP_SIGNALS
/* The accepted pairs, from systemd's Type=forking (systemd.service(5)):
 * the start job is done when the start process exited 0 and the main
 * process is known (or none could be); a PID file not there yet is waited
 * for while a process of the unit is left. Every other pair is ignored. */
static const struct fork_row fork_rows[] = {
        { AT_START, EV_CTL_OK, 0, false, 1, P(RUNNING), true, "running", "find-main answer", UNIT_RESULT_SUCCESS },
        { AT_START, EV_CTL_OK, 0, true, 1, P(RUNNING), false, "running", "find-main answer", UNIT_RESULT_SUCCESS },
        { AT_START, EV_CTL_OK, -EAGAIN, false, 1, P(START), false, "", "find-main", UNIT_RESULT_SUCCESS },
        { AT_START, EV_CTL_OK, -EAGAIN, false, 0, P(FAILED), false, "stopping failed", "find-main answer " SIGS,
          UNIT_RESULT_RESOURCES },
        { AT_START, EV_CTL_OK, -EPERM, false, 1, P(STOP_SIGTERM), false, "stopping", "find-main answer " SIGS,
          UNIT_RESULT_RESOURCES },
        { AT_START, EV_CTL_OK, 1, false, 1, P(STOP_SIGTERM), false, "stopping", "find-main answer " SIGS,
          UNIT_RESULT_EXIT_CODE },
        { AT_START, EV_CTL_FAIL, 0, false, 1, P(STOP_SIGTERM), false, "stopping", "answer " SIGS,
          UNIT_RESULT_EXIT_CODE },
        { AT_START, EV_TIMER, 0, false, 1, P(STOP_SIGTERM), false, "stopping", "answer " SIGS, UNIT_RESULT_TIMEOUT },
        { AT_START, EV_STOP, 0, false, 1, P(STOP_SIGTERM), false, "stopping", "answer " SIGS, UNIT_RESULT_SUCCESS },
        { AT_START, EV_RESTART, 0, false, 1, P(STOP_SIGTERM), false, "stopping", SIGS, UNIT_RESULT_SUCCESS },
        { AT_WAIT, EV_PID_FILE, 0, false, 1, P(RUNNING), true, "running", "find-main answer", UNIT_RESULT_SUCCESS },
        { AT_WAIT, EV_PID_FILE, -EAGAIN, false, 1, P(START), false, "", "find-main", UNIT_RESULT_SUCCESS },
        { AT_WAIT, EV_PID_FILE, -EAGAIN, false, 0, P(FAILED), false, "stopping failed", "find-main answer " SIGS,
          UNIT_RESULT_RESOURCES },
        { AT_WAIT, EV_PID_FILE, 1, false, 1, P(STOP_SIGTERM), false, "stopping", "find-main answer " SIGS,
          UNIT_RESULT_EXIT_CODE },
        { AT_WAIT, EV_TIMER, 0, false, 1, P(STOP_SIGTERM), false, "stopping", "answer " SIGS, UNIT_RESULT_TIMEOUT },
        { AT_WAIT, EV_STOP, 0, false, 1, P(STOP_SIGTERM), false, "stopping", "answer " SIGS, UNIT_RESULT_SUCCESS },
        { AT_WAIT, EV_RESTART, 0, false, 1, P(STOP_SIGTERM), false, "stopping", SIGS, UNIT_RESULT_SUCCESS },
        { AT_NO_MAIN, EV_START, 0, false, 1, P(RUNNING), false, "", "answer", UNIT_RESULT_SUCCESS },
        /* STOPPING=1 with no main process: the stop waits TimeoutStopSec=. */
        { AT_NO_MAIN, EV_STOPPING, 0, false, 1, P(STOP_NOTIFY), false, "stopping", "", UNIT_RESULT_SUCCESS },
        /* (A lease exists only with a main process; an expiry still stops.) */
        { AT_NO_MAIN, EV_WATCHDOG, 0, false, 1, P(STOP_SIGTERM), false, "stopping", "sig-ABRT sig-CONT",
          UNIT_RESULT_WATCHDOG },
        { AT_NO_MAIN, EV_GONE, 0, false, 0, P(INACTIVE), false, "stopping inactive", SIGS, UNIT_RESULT_SUCCESS },
        { AT_NO_MAIN, EV_STOP, 0, false, 1, P(STOP_SIGTERM), false, "stopping", SIGS, UNIT_RESULT_SUCCESS },
        { AT_NO_MAIN, EV_RESTART, 0, false, 1, P(STOP_SIGTERM), false, "stopping", SIGS, UNIT_RESULT_SUCCESS },
};

static void fork_reach(struct fake *f, struct unit *u, enum fork_at at) {
        f->populated = 1;
        deliver(f, u, EV_START);
        assert_int_equal(u->pos, P(START));
        assert_non_null(u->control); /* the start process: a control process */
        assert_null(u->main);
        if (at == AT_START)
                return;
        f->fork_answer = at == AT_WAIT ? -EAGAIN : 0;
        f->fork_no_main = at == AT_NO_MAIN;
        deliver(f, u, EV_CTL_OK);
        assert_int_equal(u->pos, at == AT_WAIT ? P(START) : P(RUNNING));
        assert_null(u->main);
        assert_null(u->control);
}

static void check_fork_pair(enum fork_at at, enum ev e, const struct fork_row *r) {
        struct fake *f = fake_new();
        struct unit *u = make_unit(f, fork_text);
        fork_reach(f, u, at);
        enum unit_pos from = u->pos;
        f->effects[0] = f->states[0] = 0;
        f->last_shown = unit_get_state(u);
        struct fork_row ignored = { at, e, 0, false, 1, from, false, "", "", UNIT_RESULT_SUCCESS };
        if (!r)
                r = &ignored;
        f->fork_answer = r->answer;
        f->fork_no_main = r->no_main;
        f->populated = r->populated;
        deliver(f, u, e);
        char want[512], got[512];
        sorted(r->effects, want, sizeof want);
        sorted(f->effects, got, sizeof got);
        if (u->pos != r->to || !streq(f->states, r->states) || !streq(want, got) || !!u->main != r->main ||
            u->result != r->result)
                fail_msg("forking %s + %s (answer %d): got %s [%s] {%s} main %d result %s, want %s [%s] {%s} main %d "
                         "result %s", fork_at_names[at], ev_names[e], r->answer, unit_pos_to_string(u->pos), f->states,
                         got, !!u->main, unit_result_to_string(u->result), unit_pos_to_string(r->to), r->states, want,
                         r->main, unit_result_to_string(r->result));
        assert_int_equal(u->next_step, UNIT_STEP_NONE);
        fake_free(f, u);
}

static void test_forking_pairs(void **state) {
        for (size_t i = 0; i < sizeof fork_rows / sizeof fork_rows[0]; i++)
                check_fork_pair(fork_rows[i].at, fork_rows[i].ev, &fork_rows[i]);
        /* Every other pair is ignored. */
        for (enum fork_at at = AT_START; at <= AT_NO_MAIN; at++)
                for (enum ev e = 0; e < _EV_MAX; e++) {
                        bool listed = false;
                        for (size_t i = 0; i < sizeof fork_rows / sizeof fork_rows[0]; i++)
                                listed = listed || (fork_rows[i].at == at && fork_rows[i].ev == e);
                        if (!listed)
                                check_fork_pair(at, e, NULL);
                }
}

/* The daemon gone before its file was read (tend reaped it as an orphan):
 * its status is the unit's last exit and result (test_forking). */
static void test_seq_forking_exit_before_read(void **state) {
        struct fake *f = fake_new();
        f->populated = 1;
        struct unit *u = make_unit(f, fork_text);
        deliver(f, u, EV_START);
        f->fork_answer = 1;
        f->populated = 0;
        deliver(f, u, EV_CTL_OK);
        assert_int_equal(u->pos, P(FAILED));
        assert_int_equal(u->result, UNIT_RESULT_EXIT_CODE);
        assert_true(u->has_last_exit);
        assert_int_equal(u->last_exit.status, 7);
        assert_false(first_answer_ok(f));
        fake_free(f, u);
}

/* KillMode=mixed (nginx.service): the stop signal reaches the main process
 * only, so once it is gone nothing signalled is left to wait for: the rest
 * get the final kill signal at once, not after TimeoutStopSec= (systemd 252,
 * unit_kill_context()), and the result is the main process's, not timeout. */
static void test_seq_mixed_main_died(void **state) {
        struct fake *f = fake_new();
        f->populated = 1; /* its workers */
        struct unit *u = REPLAY(f, "[Service]\nExecStart=/bin/true\nKillMode=mixed\nTimeoutStopSec=90\n", EV_START);
        assert_int_equal(u->pos, P(RUNNING));
        f->effects[0] = 0;
        deliver(f, u, EV_MAIN_FAIL); /* the master SIGKILLed: its workers are left */
        assert_int_equal(u->pos, P(STOP_SIGKILL));
        assert_string_equal(f->effects, "sig-KILL");
        f->populated = 0;
        deliver(f, u, EV_GONE);
        assert_int_equal(u->pos, P(FAILED));
        assert_int_equal(u->result, UNIT_RESULT_EXIT_CODE);
        fake_free(f, u);
}

/* KillMode=mixed, a stop: SIGTERM to the main process only; when it exits,
 * the rest get the final kill signal at once. */
static void test_seq_mixed_stop(void **state) {
        struct fake *f = fake_new();
        f->populated = 1;
        struct unit *u = REPLAY(f, "[Service]\nExecStart=/bin/true\nKillMode=mixed\nTimeoutStopSec=90\n", EV_START);
        f->effects[0] = 0;
        deliver(f, u, EV_STOP);
        assert_int_equal(u->pos, P(STOP_SIGTERM));
        assert_string_equal(f->effects, ""); /* the main process is signalled itself, the rest not */
        deliver(f, u, EV_MAIN_OK);
        assert_int_equal(u->pos, P(STOP_SIGKILL));
        assert_string_equal(f->effects, "sig-KILL");
        f->populated = 0;
        deliver(f, u, EV_GONE);
        assert_int_equal(u->pos, P(INACTIVE));
        assert_int_equal(u->result, UNIT_RESULT_SUCCESS);
        fake_free(f, u);
}

int main(void) {
        log_set_max_level(LOG_EMERG); /* the machine's warnings are expected here */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_pair),
                cmocka_unit_test(test_stop_phases_armed),
                cmocka_unit_test(test_start_while_stopping),
                cmocka_unit_test(test_restart_waits),
                cmocka_unit_test(test_seq_crash_loop),
                cmocka_unit_test(test_seq_start_limit),
                cmocka_unit_test(test_seq_exec_failed),
                cmocka_unit_test(test_seq_stop_during_start),
                cmocka_unit_test(test_seq_restart_during_backoff),
                cmocka_unit_test(test_seq_oneshot),
                cmocka_unit_test(test_seq_notify_ready),
                cmocka_unit_test(test_seq_watchdog),
                cmocka_unit_test(test_seq_dependency),
                cmocka_unit_test(test_seq_condition_skipped),
                cmocka_unit_test(test_seq_assert_failed),
                cmocka_unit_test(test_seq_conditions_met),
                cmocka_unit_test(test_forking_pairs),
                cmocka_unit_test(test_seq_forking_exit_before_read),
                cmocka_unit_test(test_seq_mixed_main_died),
                cmocka_unit_test(test_seq_mixed_stop),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
