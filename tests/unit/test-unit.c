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
#include <poll.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "libexit.h"
#include "log.h"
#include "notify.h"
#include "singleflight.h"
#include "strv.h"
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
        int contains;            /* what contains() answers */
        int adopt_error;         /* adopt(): 0 spawns a stand-in for the new main process */
        usec_t lease_ttl;        /* the last watchdog() call's ttl; USEC_INFINITY: none yet */
        int lease_creates, lease_renewals, lease_deletes;
        bool lease;              /* a lease exists */
        int wait_deps;           /* what start_job() answers: 1 makes starts wait */
        int start_jobs, auto_restarts;
        bool waiting_at_auto_restart;
        int prepare_error;       /* what prepare() answers */
        char spawned[64];        /* the last spawn's last argument (a copy: its file may be freed) */
};

static int f_spawn(void *ud, struct unit *u, const struct unit_command *cmd, bool main, struct exit_process **ret) {
        struct fake *f = ud;
        char *argv[] = { (char *) "sleep", (char *) "1000", NULL };
        struct exit_spawn_attr a = { .size = sizeof a, .argv = argv, .pdeath_signal = SIGKILL };
        int k = exit_reaper_spawn(f->reaper, &a, ret);
        if (k < 0)
                return k;
        f->n_spawns++;
        if (cmd) /* NULL: adopt()'s stand-in */
                snprintf(f->spawned, sizeof f->spawned, "%s", cmd->argv[strv_length(cmd->argv) - 1]);
        assert_true(f->n_procs < 64);
        f->procs[f->n_procs++] = exit_process_ref(*ret);
        return 0;
}

static int f_prepare(void *ud, struct unit *u) {
        return ((struct fake *) ud)->prepare_error;
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

static int f_contains(void *ud, struct unit *u, pid_t pid) {
        return ((struct fake *) ud)->contains;
}

static int f_adopt(void *ud, struct unit *u, pid_t pid, struct exit_process **ret) {
        struct fake *f = ud;
        if (f->adopt_error)
                return f->adopt_error;
        return f_spawn(ud, u, NULL, true, ret);
}

static int f_watchdog(void *ud, struct unit *u, usec_t ttl) {
        struct fake *f = ud;
        f->lease_ttl = ttl;
        if (ttl == 0) {
                f->lease_deletes += f->lease;
                f->lease = false;
        } else if (f->lease)
                f->lease_renewals++;
        else {
                f->lease_creates++;
                f->lease = true;
        }
        return 1;
}

static int f_start_job(void *ud, struct unit *u) {
        struct fake *f = ud;
        f->start_jobs++;
        assert_true(unit_is_waiting(u));
        return f->wait_deps;
}

static void f_auto_restart(void *ud, struct unit *u) {
        struct fake *f = ud;
        f->auto_restarts++;
        f->waiting_at_auto_restart = unit_is_waiting(u);
}

static const struct unit_ops fake_ops = {
        .spawn = f_spawn, .prepare = f_prepare, .signal_all = f_signal_all, .populated = f_populated,
        .arm = f_arm, .now = f_now, .changed = f_changed, .action = f_action,
        .request_restart = f_request_restart, .main_pid_changed = f_main_pid_changed,
        .contains = f_contains, .adopt = f_adopt, .watchdog = f_watchdog,
        .start_job = f_start_job, .auto_restart = f_auto_restart,
};

static int setup(void **state) {
        struct fake *f = calloc(1, sizeof *f);
        assert_non_null(f);
        f->now = 1000 * USEC_PER_SEC;
        f->armed = USEC_INFINITY;
        f->lease_ttl = USEC_INFINITY;
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
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
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
                assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
                usec_t delay = f->armed - f->now;
                if (delay / USEC_PER_MSEC != want[i])
                        fail_msg("back-off %zu: %llu ms, want %llu ms", i, (unsigned long long) (delay / USEC_PER_MSEC),
                                 (unsigned long long) want[i]);
                fire(f, u);
                assert_int_equal(unit_get_state(u), UNIT_RUNNING);
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
                assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
                f->now += 100 * USEC_PER_MSEC;
                fire(f, u);
                if (i < 4)
                        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        }
        assert_int_equal(unit_get_state(u), UNIT_FAILED);
        assert_int_equal(u->result, UNIT_RESULT_START_LIMIT);
        assert_int_equal(f->n_spawns, 5);
        /* reset-failed clears it; a start works again. */
        unit_reset_failed(u);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        sf_waiter_free(start(f, u));
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        unit_free(u);
}

/* QA M4 (issue 19): a start that gets no fds never ran: ten of them within
 * the interval do not hit the default start limit (5 in 10 s); the first
 * with fds runs. Any other failure of prepare() still counts. */
static void test_fd_short_starts_not_counted(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "m4.service", "[Service]\nExecStart=/bin/true\nRestart=on-failure\nRestartSec=0\n");
        f->prepare_error = -EMFILE;
        sf_waiter_free(start(f, u));
        for (int i = 0; i < 10; i++) {
                assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
                assert_int_equal(u->result, UNIT_RESULT_RESOURCES);
                f->now += 100 * USEC_PER_MSEC;
                fire(f, u);
        }
        assert_int_equal(f->n_spawns, 0);
        f->prepare_error = 0;
        f->now += 100 * USEC_PER_MSEC;
        fire(f, u);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_int_equal(f->n_spawns, 1);
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
                        bool restarted = unit_get_state(u) == UNIT_BACKOFF;
                        if (restarted != rows[i].want[j])
                                fail_msg("Restart=%s, end %zu: %s", rows[i].policy, j, unit_state_to_string(unit_get_state(u)));
                        if (!restarted)
                                assert_int_equal(unit_get_state(u), j == 0 || j == 2 ? UNIT_INACTIVE : UNIT_FAILED);
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
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        assert_int_equal(f->n_signals, 2);
        assert_int_equal(f->signals[0], SIGTERM);
        assert_int_equal(f->signals[1], SIGCONT);
        assert_int_equal(f->armed - f->now, 3 * USEC_PER_SEC);
        fire(f, u);
        assert_int_equal(u->pos, UNIT_POS_STOP_SIGKILL);
        assert_int_equal(f->signals[2], SIGKILL);
        f->populated = 0;
        exit_main(u, EXIT_REASON_KILLED, SIGKILL);
        /* As systemd: a stop that needed the final kill signal timed out. */
        assert_int_equal(unit_get_state(u), UNIT_FAILED);
        assert_int_equal(u->result, UNIT_RESULT_TIMEOUT);
        assert_int_equal(f->armed, USEC_INFINITY);
        unit_free(u);
}

/* p's exit, within 5 s: it must have been killed by sig (not reaped: no
 * hub loop runs here, so its zombie waits). */
static void assert_killed_by(struct exit_process *p, int sig) {
        struct pollfd pfd = { .fd = exit_process_pidfd(p), .events = POLLIN };
        if (poll(&pfd, 1, 5000) != 1)
                fail_msg("pid %d still runs 5 s after its deadline: ExecStop= was not killed", (int) exit_process_pid(p));
        siginfo_t si = { 0 };
        assert_int_equal(waitid(P_PIDFD, (id_t) pfd.fd, &si, WEXITED | WNOWAIT), 0);
        assert_int_equal(si.si_code, CLD_KILLED);
        assert_int_equal(si.si_status, sig);
}

/* A hung ExecStop= does not hold the stop: TimeoutStopSec= runs from
 * entering it; at the deadline it is killed, KillSignal= follows, and the
 * result is timeout (systemd's SERVICE_STOP timeout). */
static void test_stop_cmd_timeout(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "h.service", "[Service]\nExecStart=/bin/true\nExecStop=/bin/true\nTimeoutStopSec=4\n");
        sf_waiter_free(start(f, u));
        f->populated = 1;
        unit_stop(u, false);
        assert_int_equal(u->pos, UNIT_POS_STOP_CMD);
        assert_non_null(u->control);
        assert_int_equal(f->armed - f->now, 4 * USEC_PER_SEC);
        assert_int_equal(f->n_signals, 0);
        struct exit_process *stop_cmd = exit_process_ref(u->control);
        fire(f, u);
        assert_int_equal(u->pos, UNIT_POS_STOP_SIGTERM);
        assert_killed_by(stop_cmd, SIGKILL);
        assert_int_equal(f->n_signals, 2);
        assert_int_equal(f->signals[0], SIGTERM);
        assert_int_equal(f->signals[1], SIGCONT);
        assert_int_equal(f->armed - f->now, 4 * USEC_PER_SEC); /* the signal's own TimeoutStopSec= */
        struct exit_reason killed = { .kind = EXIT_REASON_KILLED, .status = SIGKILL };
        unit_process_exited(u, stop_cmd, &killed);
        exit_process_unref(stop_cmd);
        assert_null(u->control);
        f->populated = 0;
        exit_main(u, EXIT_REASON_KILLED, SIGTERM);
        assert_int_equal(unit_get_state(u), UNIT_FAILED);
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
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        assert_int_equal(f->signals[0], SIGTERM);
        f->populated = 0;
        unit_check_processes(u);
        assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
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
        assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
        f->own_waiter = sf_waiter_free(f->own_waiter);
        fire(f, u);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_int_equal(f->n_spawns, 1);
        unit_free(u);
}

/* A stop during back-off cancels the restart's flight: no spawn, inactive. */
static void test_stop_during_backoff(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "h.service", "[Service]\nExecStart=/bin/true\nRestart=always\nRestartSec=5s\n");
        sf_waiter_free(start(f, u));
        exit_main(u, EXIT_REASON_EXITED, 1);
        assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
        /* A client joins the restart's flight while it waits. */
        sf_waiter *w = NULL;
        sf_resolution *r = NULL;
        assert_int_equal(sf_table_join(f->flights, u->name, &w, &r), 0);
        assert_int_equal(sf_table_cancel(f->flights, u->name), 0);
        unit_stop(u, false);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
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
        assert_int_equal(unit_get_state(u), UNIT_STARTING);
        exit_main(u, EXIT_REASON_EXITED, 0);
        assert_int_equal(unit_get_state(u), UNIT_STARTING);
        exit_main(u, EXIT_REASON_EXITED, 0);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_int_equal(f->n_spawns, 2);
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(w, &ans), 0);
        assert_int_equal(ans.status, SF_ANSWER_OK);
        unit_outcome_ops.free(ans.outcome, NULL);
        sf_waiter_free(w);

        struct unit *v = make_unit(f, "p.service", "[Service]\nType=oneshot\nExecStart=/bin/false\n");
        w = start(f, v);
        exit_main(v, EXIT_REASON_EXITED, 1);
        assert_int_equal(unit_get_state(v), UNIT_FAILED);
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

/* ---- daemon-reload: a changed file (unit_set_next_file) ---- */

static struct unit_file *parse_file(const char *name, const char *text) {
        struct unit_file *uf = NULL;
        assert_int_equal(unit_file_parse(name, name, text, strlen(text), &uf, NULL), 0);
        return uf;
}

/* The answer of w: ok, with the outcome's main pid. */
static pid_t answered_pid(sf_waiter *w) {
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(w, &ans), 0);
        assert_int_equal(ans.status, SF_ANSWER_OK);
        struct unit_outcome *o = ans.outcome;
        assert_true(o->ok);
        pid_t pid = o->main_pid;
        unit_outcome_ops.free(o, NULL);
        return pid;
}

/* A dead unit takes the new file at once and is not started; a running one
 * takes it at once too, never restarted: its process runs on (same pid,
 * nothing spawned), the new file governs its decisions (Restart=: the next
 * exit), and its next start runs the new command. */
static void test_new_file(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "n.service", "[Service]\nExecStart=/bin/true\n");
        struct unit_file *f2 = parse_file("n.service", "[Service]\nExecStart=/bin/echo two\n");
        assert_false(unit_file_same_text(u->file, f2));
        assert_false(unit_set_next_file(u, f2));
        assert_ptr_equal(u->file, f2);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_int_equal(f->n_spawns, 0);

        sf_waiter_free(start(f, u));
        assert_string_equal(f->spawned, "two");
        pid_t old = u->main_pid;
        struct unit_file *f3 = parse_file("n.service", "[Service]\nExecStart=/bin/echo three\nRestart=always\n"
                                                       "RestartSec=5\n");
        assert_false(unit_set_next_file(u, f3)); /* nothing waits */
        assert_ptr_equal(u->file, f3);
        assert_null(u->next_file);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_int_equal(u->main_pid, old);
        assert_int_equal(f->n_spawns, 1);
        assert_int_equal(f->n_signals, 0);
        /* f2 had Restart=no: the exit would leave it failed. */
        exit_main(u, EXIT_REASON_EXITED, 1);
        assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
        assert_int_equal(f->armed - f->now, 5 * USEC_PER_SEC);
        fire(f, u);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_string_equal(f->spawned, "three");
        assert_int_equal(u->restarts, 1);
        unit_free(u);
}

/* Restart=always → no while it runs: the next exit is not restarted. */
static void test_new_file_restart_no(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "r.service", "[Service]\nExecStart=/bin/true\nRestart=always\nRestartSec=0\n");
        sf_waiter_free(start(f, u));
        assert_false(unit_set_next_file(u, parse_file("r.service", "[Service]\nExecStart=/bin/true\nRestart=no\n")));
        exit_main(u, EXIT_REASON_KILLED, SIGKILL);
        assert_int_equal(unit_get_state(u), UNIT_FAILED);
        assert_int_equal(f->restart_requests, 0);
        assert_int_equal(f->n_spawns, 1);
        unit_free(u);
}

/* A reload during a start: the new file waits while the start runs (its
 * commands are walked by index) and is taken once the unit runs, without a
 * restart; the start's waiters get the start's outcome. */
static void test_new_file_during_start(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "s.service", "[Service]\nType=exec\nExecStart=/bin/true\n");
        struct unit_file *f1 = u->file;
        sf_waiter *w = start(f, u);
        assert_int_equal(unit_get_state(u), UNIT_STARTING);
        struct unit_file *f2 = parse_file("s.service", "[Service]\nType=exec\nExecStart=/bin/echo two\n");
        assert_true(unit_set_next_file(u, f2));
        assert_ptr_equal(u->file, f1);
        assert_int_equal(unit_get_state(u), UNIT_STARTING);
        pid_t pid = u->main_pid;
        unit_exec_result(u, u->main, 0);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_ptr_equal(u->file, f2);
        assert_null(u->next_file);
        assert_int_equal(answered_pid(w), pid);
        assert_int_equal(f->n_spawns, 1);
        sf_waiter_free(w);
        unit_free(u);
}

/* A changed Type= waits for the next start: the running instance keeps its
 * shape; once it is dead the file is taken. */
static void test_new_file_type_waits(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "y.service", "[Service]\nExecStart=/bin/true\n");
        struct unit_file *f1 = u->file;
        sf_waiter_free(start(f, u));
        struct unit_file *f2 = parse_file("y.service", "[Service]\nType=oneshot\nExecStart=/bin/true\n");
        assert_true(unit_set_next_file(u, f2));
        assert_ptr_equal(u->file, f1);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        exit_main(u, EXIT_REASON_EXITED, 0);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_ptr_equal(u->file, f2);
        assert_null(u->next_file);
        unit_free(u);
}

/* WatchdogSec= changed while it runs: the held lease is re-armed with the new
 * value (as systemd), and let go when the new file has none. */
static void test_new_file_watchdog(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "wd.service", "[Service]\nExecStart=/bin/true\nWatchdogSec=10\n");
        sf_waiter_free(start(f, u));
        assert_true(f->lease);
        assert_int_equal(f->lease_ttl, 10 * USEC_PER_SEC);
        assert_false(unit_set_next_file(u, parse_file("wd.service", "[Service]\nExecStart=/bin/true\nWatchdogSec=20\n")));
        assert_int_equal(f->lease_ttl, 20 * USEC_PER_SEC);
        assert_false(unit_set_next_file(u, parse_file("wd.service", "[Service]\nExecStart=/bin/true\n")));
        assert_false(f->lease);
        assert_int_equal(f->lease_deletes, 1);
        unit_free(u);
}

/* SPEC §2.3: a stop during a restart past its point of no return is queued;
 * the restart completes (its waiters get the new pid), then the unit stops. */
static void test_stop_during_publishing_restart(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "t.service", "[Service]\nExecStart=/bin/true\n");
        sf_waiter_free(start(f, u));
        sf_waiter *w = NULL;
        sf_resolution *r = NULL;
        assert_int_equal(sf_table_join(f->flights, u->name, &w, &r), 1);
        unit_explicit_restart(u, r);
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        assert_int_equal(sf_table_cancel(f->flights, u->name), -EBUSY);
        unit_stop(u, true);
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        exit_main(u, EXIT_REASON_KILLED, SIGTERM);
        /* Restarted, answered, then stopped: the new instance gets SIGTERM. */
        pid_t pid = answered_pid(w);
        assert_true(pid > 0);
        assert_int_equal(u->main_pid, pid);
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        exit_main(u, EXIT_REASON_KILLED, SIGTERM);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_int_equal(f->n_spawns, 2);
        assert_false(u->queued & UNIT_QUEUED_STOP);
        /* Nothing is left queued: the next start stays up. */
        sf_waiter_free(w);
        sf_waiter_free(start(f, u));
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        unit_free(u);
}

/* ---- notifications and the watchdog (SPEC §4) ---- */

/* Parses text (with '\n's) as a datagram and hands it to u, as the manager
 * does for an allowed sender. */
static void notify(struct unit *u, const char *text) {
        char buf[NOTIFY_DATAGRAM_MAX + 1];
        size_t n = strlen(text);
        memcpy(buf, text, n);
        struct notify_message m;
        assert_int_equal(notify_parse(buf, n, &m), 0);
        unit_notify(u, &m);
}

/* Type=notify: starting until READY=1, then running; the flight answers then. */
static void test_notify_ready(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "n.service", "[Service]\nType=notify\nExecStart=/bin/true\n");
        sf_waiter *w = start(f, u);
        assert_int_equal(unit_get_state(u), UNIT_STARTING);
        assert_int_equal(f->armed - f->now, 90 * USEC_PER_SEC); /* TimeoutStartSec= */
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(w, &ans), -EAGAIN);
        notify(u, "STATUS=warming up");
        assert_int_equal(unit_get_state(u), UNIT_STARTING);
        assert_string_equal(u->status_text, "warming up");
        notify(u, "READY=1\nSTATUS=ready");
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_string_equal(u->status_text, "ready");
        assert_int_equal(f->armed, USEC_INFINITY);
        assert_int_equal(sf_waiter_peek(w, &ans), 0);
        assert_int_equal(ans.status, SF_ANSWER_OK);
        assert_true(((struct unit_outcome *) ans.outcome)->ok);
        unit_outcome_ops.free(ans.outcome, NULL);
        sf_waiter_free(w);
        /* READY=1 again, running: nothing; STATUS= empty clears it. */
        notify(u, "READY=1\nSTATUS=");
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_null(u->status_text);
        unit_free(u);
}

/* Never ready: TimeoutStartSec= fails the start with result timeout, then the policy. */
static void test_notify_never_ready(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "t.service",
                                   "[Service]\nType=notify\nExecStart=/bin/true\nTimeoutStartSec=2s\n");
        sf_waiter_free(start(f, u));
        assert_int_equal(f->armed - f->now, 2 * USEC_PER_SEC);
        /* EXTEND_TIMEOUT_USEC= moves the deadline later, never earlier. */
        notify(u, "EXTEND_TIMEOUT_USEC=5000000");
        assert_int_equal(f->armed - f->now, 5 * USEC_PER_SEC);
        notify(u, "EXTEND_TIMEOUT_USEC=1000000");
        assert_int_equal(f->armed - f->now, 5 * USEC_PER_SEC);
        fire(f, u);
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        assert_int_equal(f->signals[0], SIGTERM);
        exit_main(u, EXIT_REASON_KILLED, SIGTERM);
        assert_int_equal(unit_get_state(u), UNIT_FAILED);
        assert_int_equal(u->result, UNIT_RESULT_TIMEOUT);
        unit_free(u);
}

/* NotifyAccess=: who may speak for the unit. */
static void test_notify_access(void **state) {
        struct fake *f = *state;
        static const struct { const char *access; bool main, control, member, outsider; } rows[] = {
                { "",                   true,  false, false, false }, /* notify unit: main */
                { "NotifyAccess=none\n", true,  false, false, false }, /* systemd raises it to main */
                { "NotifyAccess=main\n", true,  false, false, false },
                { "NotifyAccess=exec\n", true,  true,  false, false },
                { "NotifyAccess=all\n",  true,  true,  true,  false },
        };
        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                char text[256];
                snprintf(text, sizeof text, "[Service]\nType=notify\nExecStart=/bin/true\n%s", rows[i].access);
                struct unit *u = make_unit(f, "x.service", text);
                sf_waiter_free(start(f, u));
                const char *why = NULL;
                f->contains = 0;
                assert_int_equal(unit_notify_allowed(u, u->main_pid, &why), rows[i].main);
                assert_false(unit_notify_allowed(u, 0, &why)); /* no credentials */
                assert_non_null(why);
                assert_false(unit_notify_allowed(u, getpid(), &why)); /* an outsider */
                f->contains = 1;
                assert_int_equal(unit_notify_allowed(u, getpid(), &why), rows[i].member);
                unit_free(u);
        }
        /* A simple unit without NotifyAccess= has no socket: none. */
        struct unit *u = make_unit(f, "s.service", "[Service]\nExecStart=/bin/true\n");
        assert_int_equal(unit_notify_access_effective(u->file), UNIT_NOTIFY_ACCESS_NONE);
        unit_free(u);
        u = make_unit(f, "w.service", "[Service]\nExecStart=/bin/true\nWatchdogSec=1\n");
        assert_int_equal(unit_notify_access_effective(u->file), UNIT_NOTIFY_ACCESS_MAIN);
        unit_free(u);
}

/* MAINPID= from an allowed sender: the new main process is followed; a refused adoption changes nothing. */
static void test_notify_main_pid(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "m.service", "[Service]\nType=notify\nExecStart=/bin/true\n");
        sf_waiter_free(start(f, u));
        pid_t old = u->main_pid;
        f->adopt_error = -EPERM;
        notify(u, "MAINPID=12345");
        assert_int_equal(u->main_pid, old);
        f->adopt_error = 0;
        notify(u, "MAINPID=12345\nREADY=1");
        assert_int_not_equal(u->main_pid, old); /* the stand-in f_adopt spawned */
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        unit_free(u);
}

/* WatchdogSec=: the lease from running; WATCHDOG=1 renews; its expiry sends
 * WatchdogSignal=, then the stop escalation, result watchdog, then Restart=. */
static void test_watchdog_expiry(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "wd.service",
                                   "[Service]\nExecStart=/bin/true\nWatchdogSec=1\nRestart=on-watchdog\n");
        sf_waiter_free(start(f, u));
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_int_equal(f->lease_creates, 1);
        assert_int_equal(f->lease_ttl, USEC_PER_SEC);
        notify(u, "WATCHDOG=1");
        notify(u, "WATCHDOG=1");
        assert_int_equal(f->lease_renewals, 2);
        f->lease = false; /* the store expired it */
        f->populated = 1;
        unit_watchdog_expired(u);
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        assert_int_equal(u->result, UNIT_RESULT_WATCHDOG);
        assert_int_equal(f->signals[0], SIGABRT);
        assert_int_equal(f->signals[1], SIGCONT);
        assert_int_equal(f->lease_deletes, 0);
        /* Pings while stopping change nothing. */
        notify(u, "WATCHDOG=1");
        assert_int_equal(f->lease_renewals, 2);
        /* Escalation: the final kill signal after TimeoutStopSec=. */
        fire(f, u);
        assert_int_equal(f->signals[2], SIGKILL);
        f->populated = 0;
        exit_main(u, EXIT_REASON_KILLED, SIGKILL);
        assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
        assert_int_equal(u->result, UNIT_RESULT_WATCHDOG);
        fire(f, u);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_int_equal(f->lease_creates, 2);
        unit_free(u);
}

/* WATCHDOG=trigger, and WatchdogSignal=; Restart=on-failure restarts it too. */
static void test_watchdog_trigger(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "wt.service", "[Service]\nExecStart=/bin/true\nWatchdogSec=5\n"
                                                   "WatchdogSignal=SIGUSR2\nRestart=on-failure\n");
        sf_waiter_free(start(f, u));
        notify(u, "WATCHDOG=trigger");
        assert_int_equal(f->signals[0], SIGUSR2);
        assert_int_equal(f->lease_deletes, 1); /* tend's own delete: not an expiry */
        exit_main(u, EXIT_REASON_KILLED, SIGUSR2);
        assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
        assert_int_equal(u->result, UNIT_RESULT_WATCHDOG);
        unit_free(u);
}

/* An explicit stop deletes the lease first: never a watchdog failure. */
static void test_watchdog_stop(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "ws.service", "[Service]\nExecStart=/bin/true\nWatchdogSec=1\nRestart=always\n");
        sf_waiter_free(start(f, u));
        assert_true(f->lease);
        unit_stop(u, false);
        assert_false(f->lease);
        assert_int_equal(f->lease_deletes, 1);
        /* A late expiry (raced with the stop) is not acted on. */
        unit_watchdog_expired(u);
        assert_int_equal(u->result, UNIT_RESULT_SUCCESS);
        exit_main(u, EXIT_REASON_KILLED, SIGTERM);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_int_equal(u->result, UNIT_RESULT_SUCCESS);
        unit_free(u);
}

/* STOPPING=1: stopping while the main process exits on its own, within TimeoutStopSec=. */
static void test_notify_stopping(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "st.service", "[Service]\nType=notify\nExecStart=/bin/true\nWatchdogSec=1\n"
                                                   "TimeoutStopSec=4\n");
        sf_waiter_free(start(f, u));
        notify(u, "READY=1");
        assert_true(f->lease);
        notify(u, "STOPPING=1");
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        assert_false(f->lease);
        assert_int_equal(f->armed - f->now, 4 * USEC_PER_SEC);
        assert_int_equal(f->n_signals, 0);
        exit_main(u, EXIT_REASON_EXITED, 0);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_int_equal(u->result, UNIT_RESULT_SUCCESS);
        unit_free(u);
}


/* ---- start jobs (SPEC §4 "Start jobs"): the WAIT positions ---- */

static sf_status answer_of(sf_waiter *w, bool *ret_ok) {
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(w, &ans), 0);
        if (ans.status == SF_ANSWER_OK) {
                *ret_ok = ((struct unit_outcome *) ans.outcome)->ok;
                unit_outcome_ops.free(ans.outcome, NULL);
        }
        return ans.status;
}

/* A waiting start job spawns nothing and shows the state the unit had; once
 * its dependencies allow, it starts and answers its flight. */
static void test_wait_then_ready(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "w.service", "[Service]\nExecStart=/bin/true\n");
        f->wait_deps = 1;
        sf_waiter *w = start(f, u);
        assert_int_equal(f->start_jobs, 1);
        assert_int_equal(f->n_spawns, 0);
        assert_true(unit_is_waiting(u));
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_int_equal(unit_job_state(u), UNIT_JOB_PENDING);
        assert_false(unit_is_settled(u));
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(w, &ans), -EAGAIN);
        unit_dependencies_ready(u);
        assert_int_equal(f->n_spawns, 1);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_int_equal(unit_job_state(u), UNIT_JOB_DONE);
        bool ok = false;
        assert_int_equal(answer_of(w, &ok), SF_ANSWER_OK);
        assert_true(ok);
        unit_dependencies_ready(u); /* no-op outside a WAIT position */
        assert_int_equal(f->n_spawns, 1);
        sf_waiter_free(w);
        unit_free(u);
}

/* A failed requirement: failed, result dependency, the flight answered
 * not ok; no restart (Restart=always) and no FailureAction=. */
static void test_dependency_failed(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "d.service", "[Unit]\nFailureAction=exit\n[Service]\nExecStart=/bin/true\n"
                                                   "Restart=always\n");
        f->wait_deps = 1;
        sf_waiter *w = start(f, u);
        unit_dependency_failed(u, "required unit x.service failed");
        assert_int_equal(unit_get_state(u), UNIT_FAILED);
        assert_int_equal(u->result, UNIT_RESULT_DEPENDENCY);
        assert_int_equal(unit_job_state(u), UNIT_JOB_FAILED);
        assert_true(unit_is_settled(u));
        assert_int_equal(f->n_spawns, 0);
        assert_int_equal(f->restart_requests, 0);
        assert_int_equal(f->actions, 0);
        bool ok = true;
        assert_int_equal(answer_of(w, &ok), SF_ANSWER_OK);
        assert_false(ok);
        sf_waiter_free(w);
        /* A later start that may go runs normally. */
        f->wait_deps = 0;
        w = start(f, u);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_int_equal(u->result, UNIT_RESULT_SUCCESS);
        sf_waiter_free(w);
        unit_free(u);
}

/* SPEC §2.3 with §4: every requester leaving a waiting start cancels it, and
 * the unit stays inactive when its dependencies become ready afterwards. */
static void test_wait_cancelled(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "c.service", "[Service]\nExecStart=/bin/true\n");
        f->wait_deps = 1;
        sf_waiter *w = start(f, u);
        uint64_t since = u->since_monotonic;
        unit_wait_cancelled(u); /* not cancelled yet: nothing happens */
        assert_true(unit_is_waiting(u));
        sf_waiter_free(w); /* the last requester leaves */
        unit_wait_cancelled(u);
        assert_false(unit_is_waiting(u));
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_int_equal(u->since_monotonic, since);
        unit_dependencies_ready(u);
        assert_int_equal(f->n_spawns, 0);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        unit_free(u);
}

/* A stop while waiting wins, also against an explicit restart's publishing
 * flight: nothing is spawned, the unit ends inactive. */
static void test_stop_while_waiting(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "s.service", "[Service]\nExecStart=/bin/true\n");
        sf_waiter_free(start(f, u));
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        f->wait_deps = 1;
        sf_waiter *w = NULL;
        sf_resolution *r = NULL;
        assert_int_equal(sf_table_join(f->flights, u->name, &w, &r), 1);
        unit_explicit_restart(u, r);
        f->populated = 0;
        exit_main(u, EXIT_REASON_KILLED, SIGTERM);
        assert_true(unit_is_waiting(u));
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE); /* the old instance is gone; the restart waits */
        assert_int_equal(unit_job_state(u), UNIT_JOB_PENDING);
        assert_int_equal(sf_table_cancel(f->flights, u->name), -EBUSY);
        unit_stop(u, true);
        assert_false(unit_is_waiting(u));
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_int_equal(f->n_spawns, 1);
        bool ok = true;
        assert_int_equal(answer_of(w, &ok), SF_ANSWER_OK);
        assert_false(ok);
        sf_waiter_free(w);
        unit_free(u);
}

/* An automatic restart: the start job exists (a WAIT position or later) before
 * the manager hears of it, so the dependents it restarts wait for it. */
static void test_auto_restart_hook(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "r.service", "[Unit]\nStartLimitIntervalSec=0\n[Service]\nExecStart=/bin/true\n"
                                                   "Restart=always\nRestartSec=0\n");
        sf_waiter_free(start(f, u));
        f->populated = 0;
        exit_main(u, EXIT_REASON_KILLED, SIGKILL);
        assert_int_equal(unit_get_state(u), UNIT_BACKOFF);
        assert_int_equal(unit_job_state(u), UNIT_JOB_FAILED);
        assert_int_equal(f->auto_restarts, 0);
        f->wait_deps = 1;
        fire(f, u);
        assert_int_equal(f->auto_restarts, 1);
        assert_true(f->waiting_at_auto_restart);
        assert_int_equal(unit_get_state(u), UNIT_BACKOFF); /* shown until the start begins */
        unit_dependencies_ready(u);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_int_equal(u->restarts, 1);
        unit_free(u);
}


/* Not ok, with this reason, in w's answer. */
static void assert_answer_not_ok(sf_waiter *w, const char *reason) {
        sf_answer ans;
        assert_int_equal(sf_waiter_peek(w, &ans), 0);
        assert_int_equal(ans.status, SF_ANSWER_OK);
        struct unit_outcome *o = ans.outcome;
        assert_false(o->ok);
        assert_string_equal(o->reason, reason);
        unit_outcome_ops.free(o, NULL);
}

/* A stop while a notify unit waits for READY=1 (its flight PUBLISHING): the
 * waiters are answered at once, the stop runs at once, the unit ends
 * inactive — not after TimeoutStartSec= with result timeout. */
static void test_stop_before_ready(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "n.service", "[Service]\nType=notify\nExecStart=/bin/true\n");
        sf_waiter *w = start(f, u);
        assert_int_equal(unit_get_state(u), UNIT_STARTING);
        assert_int_equal(sf_table_cancel(f->flights, u->name), -EBUSY);
        unit_stop(u, true);
        assert_answer_not_ok(w, "stopped before it was up");
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        assert_int_equal(f->armed - f->now, 10 * USEC_PER_SEC); /* TimeoutStopSec=, not the start's */
        f->populated = 0;
        exit_main(u, EXIT_REASON_KILLED, SIGTERM);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_int_equal(u->result, UNIT_RESULT_SUCCESS);
        assert_int_equal(f->restart_requests, 0);
        sf_waiter_free(w);
        unit_free(u);
}

/* A stop queued behind a restart of a notify unit: the new instance is
 * spawned (the restart's publication), then, as it would wait for READY=1,
 * the stop applies at once. */
static void test_queued_stop_notify_restart(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "q.service", "[Service]\nType=notify\nExecStart=/bin/true\n");
        sf_waiter *w0 = start(f, u);
        notify(u, "READY=1");
        sf_waiter_free(w0);
        sf_waiter *w = NULL;
        sf_resolution *r = NULL;
        assert_int_equal(sf_table_join(f->flights, u->name, &w, &r), 1);
        unit_explicit_restart(u, r);
        unit_stop(u, true); /* queued: the old instance was signalled */
        f->populated = 0;
        exit_main(u, EXIT_REASON_KILLED, SIGTERM);
        assert_int_equal(f->n_spawns, 2);
        assert_answer_not_ok(w, "stopped before it was up");
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        exit_main(u, EXIT_REASON_KILLED, SIGTERM);
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_false(u->queued & UNIT_QUEUED_STOP);
        sf_waiter_free(w);
        unit_free(u);
}

/* A restart whose start waits for its dependencies: once the old instance
 * is gone the unit shows inactive, without a main pid, not stopping. */
static void test_restart_waiting_shows_inactive(void **state) {
        struct fake *f = *state;
        struct unit *u = make_unit(f, "p.service", "[Service]\nExecStart=/bin/true\n");
        sf_waiter_free(start(f, u));
        f->wait_deps = 1;
        unit_propagated_restart(u, NULL);
        assert_int_equal(unit_get_state(u), UNIT_STOPPING);
        f->populated = 0;
        exit_main(u, EXIT_REASON_KILLED, SIGTERM);
        assert_true(unit_is_waiting(u));
        assert_int_equal(unit_get_state(u), UNIT_INACTIVE);
        assert_int_equal(u->main_pid, 0);
        unit_dependencies_ready(u);
        assert_int_equal(unit_get_state(u), UNIT_RUNNING);
        assert_int_equal(u->restarts, 1);
        unit_free(u);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_start_answers_with_pid, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wait_then_ready, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dependency_failed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wait_cancelled, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_while_waiting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_auto_restart_hook, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_before_ready, setup, teardown),
                cmocka_unit_test_setup_teardown(test_queued_stop_notify_restart, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_waiting_shows_inactive, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backoff_steps, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fd_short_starts_not_counted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_table, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_escalation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_cmd_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_main_exit_stops_the_rest, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_during_backoff, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backoff_flight_cancelled, setup, teardown),
                cmocka_unit_test_setup_teardown(test_oneshot, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failure_action, setup, teardown),
                cmocka_unit_test_setup_teardown(test_notify_ready, setup, teardown),
                cmocka_unit_test_setup_teardown(test_notify_never_ready, setup, teardown),
                cmocka_unit_test_setup_teardown(test_notify_access, setup, teardown),
                cmocka_unit_test_setup_teardown(test_notify_main_pid, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watchdog_expiry, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watchdog_trigger, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watchdog_stop, setup, teardown),
                cmocka_unit_test_setup_teardown(test_notify_stopping, setup, teardown),
                cmocka_unit_test_setup_teardown(test_new_file, setup, teardown),
                cmocka_unit_test_setup_teardown(test_new_file_during_start, setup, teardown),
                cmocka_unit_test_setup_teardown(test_new_file_restart_no, setup, teardown),
                cmocka_unit_test_setup_teardown(test_new_file_type_waits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_new_file_watchdog, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_during_publishing_restart, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
