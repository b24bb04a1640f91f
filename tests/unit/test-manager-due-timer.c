/* SPDX-License-Identifier: MIT */
/*
 * Due timers (supervisor/manager/due-timer.h; SPEC §8 restart latency): a
 * deadline already due when armed runs exactly once — at the end of the
 * exit's dispatch (due_timer_take_due) or at the next loop iteration (its
 * defer source), never both. On a real sd-event loop; the clock is injected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "due-timer.h"

struct fixture {
        sd_event *e;
        struct due_timer t;
        unsigned fired; /* each handler run */
};

static int on_due(sd_event_source *s, void *userdata) {
        struct fixture *f = userdata;
        due_timer_dispatched(&f->t);
        f->fired++;
        return 0;
}

static int on_time(sd_event_source *s, uint64_t usec, void *userdata) {
        struct fixture *f = userdata;
        f->fired++;
        return 0;
}

static int setup(void **state) {
        struct fixture *f = test_calloc(1, sizeof *f);
        assert_int_equal(sd_event_new(&f->e), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        due_timer_done(&f->t);
        sd_event_unref(f->e);
        test_free(f);
        return 0;
}

/* Runs the loop's ready events (a few iterations, none waiting). */
static void run_ready(struct fixture *f) {
        for (int i = 0; i < 4; i++)
                assert_true(sd_event_run(f->e, 0) >= 0);
}

static int arm(struct fixture *f, usec_t deadline, usec_t now) {
        return due_timer_arm(&f->t, f->e, deadline, now, on_time, on_due, f);
}

/* Claimed by the exit's dispatch: run there, and not again by the loop. */
static void test_due_taken_runs_once(void **state) {
        struct fixture *f = *state;
        assert_int_equal(arm(f, 100, 100), 0); /* deadline == now: due */
        assert_true(f->t.due);
        assert_true(due_timer_take_due(&f->t));
        f->fired++; /* what manager_run_due does when it claims it */
        assert_null(f->t.source);
        assert_false(due_timer_take_due(&f->t)); /* a second claim finds nothing */
        run_ready(f);
        assert_int_equal(f->fired, 1);
}

/* Not claimed: the next iteration runs it once, and a claim afterwards finds nothing. */
static void test_due_unclaimed_runs_next_iteration_once(void **state) {
        struct fixture *f = *state;
        assert_int_equal(arm(f, 50, 100), 0); /* already past */
        assert_int_equal(f->fired, 0);
        run_ready(f);
        assert_int_equal(f->fired, 1);
        assert_false(due_timer_take_due(&f->t));
        run_ready(f);
        assert_int_equal(f->fired, 1); /* one-shot */
}

/* A deadline in the future is a timer: never claimed as due. */
static void test_future_not_due(void **state) {
        struct fixture *f = *state;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        assert_int_equal(arm(f, now + 3600 * USEC_PER_SEC, now), 0);
        assert_non_null(f->t.source);
        assert_false(f->t.due);
        assert_false(due_timer_take_due(&f->t));
        run_ready(f);
        assert_int_equal(f->fired, 0);
}

/* Arming again, or disarming, drops a due deadline that has not run. */
static void test_rearm_drops_due(void **state) {
        struct fixture *f = *state;
        assert_int_equal(arm(f, 10, 100), 0);
        assert_int_equal(arm(f, USEC_INFINITY, 0), 0);
        assert_null(f->t.source);
        assert_false(due_timer_take_due(&f->t));
        run_ready(f);
        assert_int_equal(f->fired, 0);
        assert_int_equal(arm(f, 10, 100), 0);
        assert_int_equal(arm(f, 20, 100), 0); /* due again: one source, one run */
        run_ready(f);
        assert_int_equal(f->fired, 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_due_taken_runs_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_due_unclaimed_runs_next_iteration_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_future_not_due, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rearm_drops_due, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
