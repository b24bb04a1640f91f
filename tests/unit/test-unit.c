/* SPDX-License-Identifier: MIT */
/*
 * The unit state machine (SPEC §4) through its seam: a fake clock, recorded
 * signals and timers, scripted exits. Processes are real (sleep, started
 * through libexit, so the machine holds real handles) but their outcomes are
 * scripted: the test decides when and how each "exits".
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
#include "singleflight.h"
#include "unit.h"

struct fake {
        struct exit_hub *hub;
        struct exit_reaper *reaper;
        sf_table *flights;
        usec_t now;
        usec_t armed;            /* USEC_INFINITY when disarmed */
        int signals[64];         /* signal_all calls, in order */
        int n_signals;
        int n_spawns;
        int populated;           /* what populated() answers */
        int restart_requests;
        sf_waiter *own_waiter;   /* tend's own requester's share in the restart's flight */
        int actions, action_status;
        struct exit_process *procs[64]; /* every spawned process, killed at teardown */
        int n_procs;
};

static int f_spawn(void *ud, struct unit *u, const struct unit_command *cmd, bool main, struct exit_process **ret) {
        struct fake *f = ud;
        char *argv[] = { (char *) "sleep", (char *) "1000", NULL };
        struct exit_spawn_attr a = { .size = sizeof a, .argv = argv, .pdeath_signal = SIGKILL };
        int k = exit_reaper_spawn(f->reaper, &a, ret);
        if (k < 0)
                return k;
        f->n_spawns++;
        assert_true(f->n_procs < 64);
        f->procs[f->n_procs++] = exit_process_ref(*ret);
        return 0;
}

static int f_prepare(void *ud, struct unit *u) {
        return 0;
}

static int f_signal_all(void *ud, struct unit *u, int sig) {
        struct fake *f = ud;
        if (f->n_signals < 64)
                f->signals[f->n_signals++] = sig;
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

static void f_changed(void *ud, struct unit *u) {
}

static void f_action(void *ud, struct unit *u, unit_action action, int status) {
        struct fake *f = ud;
        f->actions++;
        f->action_status = status;
}

static void f_request_restart(void *ud, struct unit *u) {
        struct fake *f = ud;
        f->restart_requests++;
        sf_waiter *w = NULL;
        sf_resolution *r = NULL;
        assert_int_equal(sf_table_join(f->flights, u->name, &w, &r), 1);
        /* tend's own requester holds its share until the outcome: freeing it
         * now would cancel the flight (the last waiter leaving). */
        sf_waiter_free(f->own_waiter);
        f->own_waiter = w;
        unit_backoff_begin(u, r);
}

static void f_main_pid_changed(void *ud, struct unit *u, pid_t pid) {
}

static const struct unit_ops fake_ops = {
        .spawn = f_spawn, .prepare = f_prepare, .signal_all = f_signal_all, .populated = f_populated,
        .arm = f_arm, .now = f_now, .changed = f_changed, .action = f_action,
        .request_restart = f_request_restart, .main_pid_changed = f_main_pid_changed,
};

static int setup(void **state) {
        struct fake *f = calloc(1, sizeof *f);
        assert_non_null(f);
        f->now = 1000 * USEC_PER_SEC;
        f->armed = USEC_INFINITY;
        assert_int_equal(exit_hub_new(0, 0, &f->hub), 0);
        assert_int_equal(exit_reaper_new(f->hub, 0, &f->reaper), 0);
        assert_int_equal(sf_table_new(&unit_outcome_ops, NULL, &f->flights), 0);
        log_set_max_level(LOG_EMERG); /* the machine's warnings are expected here */
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fake *f = *state;
        for (int i = 0; i < f->n_procs; i++) {
                (void) exit_process_signal(f->procs[i], SIGKILL);
                (void) exit_process_wait_exec(f->procs[i], 5000, NULL);
                exit_process_unref(f->procs[i]);
        }
        sf_waiter_free(f->own_waiter);
        sf_table_unref(f->flights);
        exit_reaper_free(f->reaper);
        exit_hub_unref(f->hub);
        free(f);
        return 0;
}

static struct unit *make_unit(struct fake *f, const char *name, const char *text) {
        struct unit_file *uf = NULL;
        char *msg = NULL;
        int k = unit_file_parse(name, name, text, strlen(text), &uf, &msg);
        if (k < 0)
                fail_msg("unit text refused: %s", msg ? msg : strerror(-k));
        struct unit *u = NULL;
        assert_int_equal(unit_new(uf, &fake_ops, f, &u), 0);
        return u;
}

/* Starts u through a flight of its own; returns the test's waiter. */
static sf_waiter *start(struct fake *f, struct unit *u) {
        sf_waiter *w = NULL;
        sf_resolution *r = NULL;
        assert_int_equal(sf_table_join(f->flights, u->name, &w, &r), 1);
        unit_start(u, r, true);
        return w;
}

static void exit_main(struct unit *u, int kind, int status) {
        assert_non_null(u->main);
        struct exit_reason r = { .kind = kind, .status = status };
        struct exit_process *p = exit_process_ref(u->main);
        unit_process_exited(u, p, &r);
        exit_process_unref(p);
}

static void fire(struct fake *f, struct unit *u) {
        assert_int_not_equal(f->armed, USEC_INFINITY);
        f->now = f->armed;
        unit_timer_fired(u);
}

static void test_start_answers_with_pid(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "a.service", "[Service]\nExecStart=/bin/true\n");
        sf_waiter *w = start(f, u);
        assert_int_equal(u->state, UNIT_RUNNING);
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(w, &ans), 0);
        assert_int_equal(ans.status, SF_ANSWER_OK);
        struct unit_outcome *o = ans.outcome;
        assert_true(o->ok);
        assert_int_equal(o->main_pid, u->main_pid);
        assert_true(o->main_pid > 0);
        unit_outcome_ops.free(o, NULL);
        sf_waiter_free(w);
        unit_free(u);
}

/* RestartSec=100ms, RestartSteps=3, RestartMaxDelaySec=800ms: 100, 200, 400, 800, 800. */
static void test_backoff_steps(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "b.service",
                                   "[Unit]\nStartLimitIntervalSec=0\n[Service]\nExecStart=/bin/true\nRestart=always\n"
                                   "RestartSec=100ms\nRestartSteps=3\nRestartMaxDelaySec=800ms\n");
        sf_waiter_free(start(f, u));
        static const usec_t want[] = { 100, 200, 400, 800, 800 };
        for (size_t i = 0; i < 5; i++) {
                f->populated = 0;
                exit_main(u, EXIT_REASON_EXITED, 1);
                assert_int_equal(u->state, UNIT_BACKOFF);
                usec_t delay = f->armed - f->now;
                if (delay / USEC_PER_MSEC != want[i])
                        fail_msg("back-off %zu: %llu ms, want %llu ms", i, (unsigned long long) (delay / USEC_PER_MSEC),
                                 (unsigned long long) want[i]);
                fire(f, u);
                assert_int_equal(u->state, UNIT_RUNNING);
        }
        assert_int_equal(u->restarts, 5);
        assert_int_equal(f->restart_requests, 5);
        unit_free(u);
}

/* The default start limit: the 6th start within 10 s fails with start-limit. */
static void test_start_limit(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "c.service", "[Service]\nExecStart=/bin/true\nRestart=always\nRestartSec=0\n");
        sf_waiter_free(start(f, u));
        for (int i = 0; i < 5; i++) {
                exit_main(u, EXIT_REASON_KILLED, SIGKILL);
                assert_int_equal(u->state, UNIT_BACKOFF);
                f->now += 100 * USEC_PER_MSEC;
                fire(f, u);
                if (i < 4)
                        assert_int_equal(u->state, UNIT_RUNNING);
        }
        assert_int_equal(u->state, UNIT_FAILED);
        assert_int_equal(u->result, UNIT_RESULT_START_LIMIT);
        assert_int_equal(f->n_spawns, 5);
        /* reset-failed clears it; a start works again. */
        unit_reset_failed(u);
        assert_int_equal(u->state, UNIT_INACTIVE);
        sf_waiter_free(start(f, u));
        assert_int_equal(u->state, UNIT_RUNNING);
        unit_free(u);
}

/* Restart= against a clean exit, a failing exit, a clean signal, an unclean signal. */
static void test_restart_table(void **state) {
        struct fake *f = *state;
        static const struct { const char *policy; bool want[4]; } rows[] = {
                /*                       exit 0  exit 1  SIGTERM SIGKILL */
                { "no",          { false, false, false, false } },
                { "always",      { true,  true,  true,  true } },
                { "on-success",  { true,  false, true,  false } },
                { "on-failure",  { false, true,  false, true } },
                { "on-abnormal", { false, false, false, true } },
                { "on-abort",    { false, false, false, true } },
        };
        static const struct { int kind, status; } ends[] = {
                { EXIT_REASON_EXITED, 0 }, { EXIT_REASON_EXITED, 1 },
                { EXIT_REASON_KILLED, SIGTERM }, { EXIT_REASON_KILLED, SIGKILL },
        };
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
                for (size_t j = 0; j < 4; j++) {
                        char text[256];
                        snprintf(text, sizeof text, "[Service]\nExecStart=/bin/true\nRestart=%s\n", rows[i].policy);
                        struct unit *u = make_unit(f, "d.service", text);
                        sf_waiter_free(start(f, u));
                        exit_main(u, ends[j].kind, ends[j].status);
                        bool restarted = u->state == UNIT_BACKOFF;
                        if (restarted != rows[i].want[j])
                                fail_msg("Restart=%s, end %zu: %s", rows[i].policy, j, unit_state_to_string(u->state));
                        if (!restarted)
                                assert_int_equal(u->state, j == 0 || j == 2 ? UNIT_INACTIVE : UNIT_FAILED);
                        sf_table_cancel(f->flights, u->name);
                        f->own_waiter = sf_waiter_free(f->own_waiter);
                        unit_free(u);
                }
}

/* Stop: KillSignal then SIGCONT to every process, FinalKillSignal after TimeoutStopSec. */
static void test_stop_escalation(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "e.service", "[Service]\nExecStart=/bin/true\nTimeoutStopSec=3s\n");
        sf_waiter_free(start(f, u));
        f->populated = 1;
        unit_stop(u, false);
        assert_int_equal(u->state, UNIT_STOPPING);
        assert_int_equal(f->n_signals, 2);
        assert_int_equal(f->signals[0], SIGTERM);
        assert_int_equal(f->signals[1], SIGCONT);
        assert_int_equal(f->armed - f->now, 3 * USEC_PER_SEC);
        fire(f, u);
        assert_int_equal(u->phase, PHASE_STOP_SIGKILL);
        assert_int_equal(f->signals[2], SIGKILL);
        f->populated = 0;
        exit_main(u, EXIT_REASON_KILLED, SIGKILL);
        /* As systemd: a stop that needed the final kill signal timed out. */
        assert_int_equal(u->state, UNIT_FAILED);
        assert_int_equal(u->result, UNIT_RESULT_TIMEOUT);
        assert_int_equal(f->armed, USEC_INFINITY);
        unit_free(u);
}

/* A main process dying on its own: its remaining processes are stopped
 * before the restart policy decides (SPEC §4 "Stop"). */
static void test_main_exit_stops_the_rest(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "g.service", "[Service]\nExecStart=/bin/true\nRestart=on-failure\n");
        sf_waiter_free(start(f, u));
        f->populated = 1; /* a worker of the dead daemon still runs */
        exit_main(u, EXIT_REASON_EXITED, 2);
        assert_int_equal(u->state, UNIT_STOPPING);
        assert_int_equal(f->signals[0], SIGTERM);
        f->populated = 0;
        unit_check_processes(u);
        assert_int_equal(u->state, UNIT_BACKOFF);
        assert_int_equal(u->result, UNIT_RESULT_EXIT_CODE);
        unit_free(u);
}

/* The restart policy's flight is cancelled when tend's own share is its last
 * and it leaves (SPEC §2.3): the unit does not start. */
static void test_backoff_flight_cancelled(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "i.service", "[Service]\nExecStart=/bin/true\nRestart=always\n");
        sf_waiter_free(start(f, u));
        exit_main(u, EXIT_REASON_EXITED, 1);
        assert_int_equal(u->state, UNIT_BACKOFF);
        f->own_waiter = sf_waiter_free(f->own_waiter);
        fire(f, u);
        assert_int_equal(u->state, UNIT_INACTIVE);
        assert_int_equal(f->n_spawns, 1);
        unit_free(u);
}

/* A stop during back-off cancels the restart's flight: no spawn, inactive. */
static void test_stop_during_backoff(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "h.service", "[Service]\nExecStart=/bin/true\nRestart=always\nRestartSec=5s\n");
        sf_waiter_free(start(f, u));
        exit_main(u, EXIT_REASON_EXITED, 1);
        assert_int_equal(u->state, UNIT_BACKOFF);
        /* A client joins the restart's flight while it waits. */
        sf_waiter *w = NULL;
        sf_resolution *r = NULL;
        assert_int_equal(sf_table_join(f->flights, u->name, &w, &r), 0);
        assert_int_equal(sf_table_cancel(f->flights, u->name), 0);
        unit_stop(u, false);
        assert_int_equal(u->state, UNIT_INACTIVE);
        assert_int_equal(f->n_spawns, 1);
        assert_int_equal(f->armed, USEC_INFINITY);
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(w, &ans), 0);
        assert_int_equal(ans.status, SF_ANSWER_CANCELLED);
        sf_waiter_free(w);
        unit_free(u);
}

/* Type=oneshot: each ExecStart= in turn; RemainAfterExit=yes stays running. */
static void test_oneshot(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "o.service",
                                   "[Service]\nType=oneshot\nExecStart=/bin/true\nExecStart=/bin/true\nRemainAfterExit=yes\n");
        sf_waiter *w = start(f, u);
        assert_int_equal(u->state, UNIT_STARTING);
        exit_main(u, EXIT_REASON_EXITED, 0);
        assert_int_equal(u->state, UNIT_STARTING);
        exit_main(u, EXIT_REASON_EXITED, 0);
        assert_int_equal(u->state, UNIT_RUNNING);
        assert_int_equal(f->n_spawns, 2);
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(w, &ans), 0);
        assert_int_equal(ans.status, SF_ANSWER_OK);
        unit_outcome_ops.free(ans.outcome, NULL);
        sf_waiter_free(w);

        struct unit *v = make_unit(f, "p.service", "[Service]\nType=oneshot\nExecStart=/bin/false\n");
        w = start(f, v);
        exit_main(v, EXIT_REASON_EXITED, 1);
        assert_int_equal(v->state, UNIT_FAILED);
        assert_int_equal(v->result, UNIT_RESULT_EXIT_CODE);
        assert_int_equal(sf_waiter_peek(w, &ans), 0);
        assert_int_equal(ans.status, SF_ANSWER_OK);
        assert_false(((struct unit_outcome *) ans.outcome)->ok);
        unit_outcome_ops.free(ans.outcome, NULL);
        sf_waiter_free(w);
        unit_free(u);
        unit_free(v);
}

/* FailureAction=exit reports the unit's status: code, or 128 + signal. */
static void test_failure_action(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "q.service", "[Unit]\nFailureAction=exit\n[Service]\nExecStart=/bin/true\n");
        sf_waiter_free(start(f, u));
        exit_main(u, EXIT_REASON_EXITED, 7);
        assert_int_equal(f->actions, 1);
        assert_int_equal(f->action_status, 7);
        unit_free(u);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_start_answers_with_pid, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backoff_steps, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_table, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_escalation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_main_exit_stops_the_rest, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_during_backoff, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backoff_flight_cancelled, setup, teardown),
                cmocka_unit_test_setup_teardown(test_oneshot, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failure_action, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
