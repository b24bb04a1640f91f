/* SPDX-License-Identifier: MIT */
/*
 * Held records (supervisor/manager/held-records.h; SPEC §5 records, §8):
 * records held during an exit are written in order after it, each a write
 * (a revision) of its own; a STATUS= record is written at once, after the
 * held ones; a flush (a unit freed) writes them all now.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "held-records.h"

/* The store: every write in order, with the revision it got. */
struct fake_store {
        struct { struct unit *u; struct record_fields f; uint64_t revision; } w[64];
        size_t n;
        uint64_t revision;
};

static void store(void *userdata, struct unit *u, const struct record_fields *f) {
        struct fake_store *s = userdata;
        assert_true(s->n < 64);
        s->w[s->n].u = u;
        s->w[s->n].f = *f;
        s->w[s->n].revision = ++s->revision;
        s->n++;
}

/* Units are opaque here: distinct addresses, never dereferenced. */
static char unit_a, unit_b;
#define A ((struct unit *) &unit_a)
#define B ((struct unit *) &unit_b)

static struct record_fields fields(enum unit_state state, uint64_t restarts, bool status) {
        return (struct record_fields) { .shown = { .state = state, .restarts = restarts }, .has_status = status };
}

static void assert_write(const struct fake_store *s, size_t i, struct unit *u, enum unit_state state, uint64_t restarts) {
        assert_true(i < s->n);
        assert_ptr_equal(s->w[i].u, u);
        assert_int_equal(s->w[i].f.shown.state, state);
        assert_int_equal(s->w[i].f.shown.restarts, restarts);
        assert_int_equal(s->w[i].revision, i + 1);
}

/* Not held: each record is written at once. */
static void test_unheld_written_at_once(void **state) {
        struct held_records h = {};
        struct fake_store s = {};
        struct record_fields f = fields(UNIT_RUNNING, 0, false);
        assert_false(held_records_write(&h, A, &f, store, &s));
        assert_int_equal(s.n, 1);
        assert_write(&s, 0, A, UNIT_RUNNING, 0);
        held_records_done(&h);
}

/* An exit's stop, back-off and start: nothing written until the release,
 * then all three in order, each a revision of its own (none merged). */
static void test_held_in_order_after_release(void **state) {
        struct held_records h = {};
        struct fake_store s = {};
        held_records_hold(&h);
        struct record_fields stop = fields(UNIT_STOPPING, 0, false), back = fields(UNIT_BACKOFF, 1, false),
                             start = fields(UNIT_RUNNING, 1, false), other = fields(UNIT_FAILED, 0, false);
        assert_true(held_records_write(&h, A, &stop, store, &s));
        stop.shown.state = UNIT_INACTIVE; /* the caller's copy changes: the held one does not */
        assert_true(held_records_write(&h, B, &other, store, &s));
        assert_true(held_records_write(&h, A, &back, store, &s));
        assert_true(held_records_write(&h, A, &start, store, &s));
        assert_int_equal(s.n, 0);
        held_records_release(&h, store, &s);
        assert_int_equal(s.n, 4);
        assert_write(&s, 0, A, UNIT_STOPPING, 0);
        assert_write(&s, 1, B, UNIT_FAILED, 0);
        assert_write(&s, 2, A, UNIT_BACKOFF, 1);
        assert_write(&s, 3, A, UNIT_RUNNING, 1);
        held_records_done(&h);
}

/* Nested holds (the reaper's dispatch inside another): the last release writes. */
static void test_nested_hold(void **state) {
        struct held_records h = {};
        struct fake_store s = {};
        struct record_fields f = fields(UNIT_RUNNING, 0, false);
        held_records_hold(&h);
        held_records_hold(&h);
        assert_true(held_records_write(&h, A, &f, store, &s));
        held_records_release(&h, store, &s);
        assert_int_equal(s.n, 0);
        held_records_release(&h, store, &s);
        assert_int_equal(s.n, 1);
        held_records_done(&h);
}

/* A STATUS= record is the unit's current text: written at once, after the
 * ones held before it; holding goes on for the next ones. */
static void test_status_written_at_once_after_held(void **state) {
        struct held_records h = {};
        struct fake_store s = {};
        struct record_fields a = fields(UNIT_STARTING, 0, false), st = fields(UNIT_RUNNING, 0, true),
                             b = fields(UNIT_STOPPING, 0, false);
        held_records_hold(&h);
        assert_true(held_records_write(&h, A, &a, store, &s));
        assert_false(held_records_write(&h, B, &st, store, &s));
        assert_int_equal(s.n, 2);
        assert_write(&s, 0, A, UNIT_STARTING, 0);
        assert_write(&s, 1, B, UNIT_RUNNING, 0);
        assert_true(s.w[1].f.has_status);
        assert_true(held_records_write(&h, A, &b, store, &s));
        assert_int_equal(s.n, 2);
        held_records_release(&h, store, &s);
        assert_int_equal(s.n, 3);
        assert_write(&s, 2, A, UNIT_STOPPING, 0);
        held_records_done(&h);
}

/* A unit freed while records are held: flush writes them all now, the hold
 * stays (later records are held again). */
static void test_flush_writes_now(void **state) {
        struct held_records h = {};
        struct fake_store s = {};
        struct record_fields a = fields(UNIT_STOPPING, 0, false), b = fields(UNIT_INACTIVE, 0, false);
        held_records_hold(&h);
        assert_true(held_records_write(&h, A, &a, store, &s));
        assert_true(held_records_write(&h, B, &b, store, &s));
        held_records_flush(&h, store, &s);
        assert_int_equal(s.n, 2);
        assert_write(&s, 0, A, UNIT_STOPPING, 0);
        assert_write(&s, 1, B, UNIT_INACTIVE, 0);
        assert_true(held_records_write(&h, A, &b, store, &s));
        assert_int_equal(s.n, 2);
        held_records_release(&h, store, &s);
        assert_int_equal(s.n, 3);
        held_records_done(&h);
}

/* Many held records (the array grows): none lost, order kept. */
static void test_many_held(void **state) {
        struct held_records h = {};
        struct fake_store s = {};
        held_records_hold(&h);
        for (uint64_t i = 0; i < 40; i++) {
                struct record_fields f = fields(UNIT_RUNNING, i, false);
                assert_true(held_records_write(&h, i % 2 ? A : B, &f, store, &s));
        }
        assert_int_equal(s.n, 0);
        held_records_release(&h, store, &s);
        assert_int_equal(s.n, 40);
        for (uint64_t i = 0; i < 40; i++)
                assert_write(&s, i, i % 2 ? A : B, UNIT_RUNNING, i);
        held_records_done(&h);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_unheld_written_at_once),
                cmocka_unit_test(test_held_in_order_after_release),
                cmocka_unit_test(test_nested_hold),
                cmocka_unit_test(test_status_written_at_once_after_held),
                cmocka_unit_test(test_flush_writes_now),
                cmocka_unit_test(test_many_held),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
