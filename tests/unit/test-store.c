/* SPDX-License-Identifier: MIT */
/*
 * The leased store (SPEC §2.4): CAS answers and revisions, delete semantics,
 * leases driven by a test clock (no sleeps), watches (snapshot, marker, live,
 * causes, lag), the timer seam and the real timerfd, and a concurrency test
 * for the TSan build. Every test checks that no fd leaked; ASan checks memory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>

#include <cmocka.h>

#include "store.h"
#include "testutil.h"

#define MS (USEC_PER_MSEC)

/* ------------------------------------------------------------------------ */
/* The test clock: records what the store armed; advancing past it runs      */
/* expiry synchronously (SPEC §2.4 "Clock seam").                            */
/* ------------------------------------------------------------------------ */

struct test_clock {
        _Atomic usec_t now;
        _Atomic usec_t armed;
        atomic_uint n_arm;
        struct store *store;
};

static usec_t tc_now(void *userdata) {
        return atomic_load(&((struct test_clock *) userdata)->now);
}

static int tc_arm(void *userdata, usec_t deadline) {
        struct test_clock *tc = userdata;
        atomic_store(&tc->armed, deadline);
        atomic_fetch_add(&tc->n_arm, 1);
        return 0;
}

/* Moves time forward; runs expiry if the armed deadline is reached, as the
 * owner's event loop would. Returns the number of keys expired. */
static int tc_advance(struct test_clock *tc, usec_t d) {
        atomic_fetch_add(&tc->now, d);
        usec_t armed = atomic_load(&tc->armed);
        if (armed != USEC_INFINITY && armed <= atomic_load(&tc->now))
                return store_run_expiry(tc->store);
        return 0;
}

/* Moves time forward without running expiry: the timer "has not fired yet". */
static void tc_skip(struct test_clock *tc, usec_t d) {
        atomic_fetch_add(&tc->now, d);
}

/* ------------------------------------------------------------------------ */
/* Fixture: a store on the test clock; fd count checked at teardown          */
/* ------------------------------------------------------------------------ */


struct fixture {
        struct test_clock tc;
        struct store_clock clock;
        struct store *s;
        int fds;
};

static int fixture_new(void **state, uint32_t queue_capacity, uint32_t max_keys) {
        struct fixture *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        f->fds = count_fds();
        atomic_init(&f->tc.now, 1000 * USEC_PER_SEC); /* not 0: catch "0 = unset" bugs */
        atomic_init(&f->tc.armed, USEC_INFINITY);
        f->clock = (struct store_clock) { .now = tc_now, .arm = tc_arm, .userdata = &f->tc };
        struct store_options o = {
                .default_ttl_usec = 100 * MS,
                .watch_queue_capacity = queue_capacity,
                .max_keys = max_keys,
                .clock = &f->clock,
        };
        assert_int_equal(store_new(&o, &f->s), 0);
        f->tc.store = f->s;
        *state = f;
        return 0;
}

static int setup(void **state) {
        return fixture_new(state, 0, 0);
}

static int setup_small_queue(void **state) {
        return fixture_new(state, 2, 0);
}

static int setup_queue_300(void **state) {
        return fixture_new(state, 300, 0);
}

static int setup_big_queue(void **state) {
        return fixture_new(state, 8192, 0);
}

static int setup_two_keys(void **state) {
        return fixture_new(state, 0, 2);
}

static int teardown(void **state) {
        struct fixture *f = *state;
        store_unref(f->s);
        int fds = count_fds();
        if (fds != f->fds)
                fail_msg("fd leak: %d fds open before the test, %d after (an eventfd or "
                         "timerfd not closed?)", f->fds, fds);
        free(f);
        return 0;
}

/* For tests that build their own store (real clock). */
static int setup_fds(void **state) {
        int *fds = malloc(sizeof(int));
        assert_non_null(fds);
        *fds = count_fds();
        *state = fds;
        return 0;
}

static int teardown_fds(void **state) {
        int *fds = *state, now = count_fds();
        if (now != *fds)
                fail_msg("fd leak: %d fds open before the test, %d after", *fds, now);
        free(fds);
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Event expectations (non-blocking: everything here is synchronous)         */
/* ------------------------------------------------------------------------ */

static struct store_event *next_event(struct store_watch *w, int line) {
        struct store_event *ev = NULL;
        int r = store_watch_next(w, &ev);
        if (r < 0)
                fail_msg("line %d: store_watch_next: %s (event not broadcast, or the watch "
                         "lagged?)", line, strerror(-r));
        return ev;
}

static void expect_put(struct store_watch *w, const char *key, const char *value,
                       uint64_t rev, int line) {
        struct store_event *ev = next_event(w, line);
        if (ev->type != STORE_EVENT_PUT || !streq(ev->key, key) || ev->revision != rev ||
            (value && !streq(ev->value, value)))
                fail_msg("line %d: expected PUT %s=%s @%" PRIu64 ", got %s %s=%s @%" PRIu64,
                         line, key, value ?: "*", rev, store_event_type_to_string(ev->type),
                         ev->key, ev->value, ev->revision);
        store_event_unref(ev);
}

static void expect_delete(struct store_watch *w, const char *key, uint64_t rev, uint64_t prev,
                          enum store_cause cause, int line) {
        struct store_event *ev = next_event(w, line);
        if (ev->type != STORE_EVENT_DELETE || !streq(ev->key, key) || ev->revision != rev ||
            ev->prev_revision != prev || ev->cause != cause)
                fail_msg("line %d: expected DELETE %s @%" PRIu64 " (prev %" PRIu64 ", %s), got "
                         "%s %s @%" PRIu64 " (prev %" PRIu64 ", %s)",
                         line, key, rev, prev, store_cause_to_string(cause),
                         store_event_type_to_string(ev->type), ev->key, ev->revision,
                         ev->prev_revision, store_cause_to_string(ev->cause));
        store_event_unref(ev);
}

static void expect_marker(struct store_watch *w, uint64_t rev, int line) {
        struct store_event *ev = next_event(w, line);
        if (ev->type != STORE_EVENT_SNAPSHOT_DONE || ev->revision != rev)
                fail_msg("line %d: expected SNAPSHOT_DONE @%" PRIu64 ", got %s %s @%" PRIu64,
                         line, rev, store_event_type_to_string(ev->type), ev->key, ev->revision);
        store_event_unref(ev);
}

static void expect_none(struct store_watch *w, int line) {
        struct store_event *ev = NULL;
        int r = store_watch_next(w, &ev);
        if (r != -EAGAIN)
                fail_msg("line %d: expected no event, got %s%s%s", line,
                         r < 0 ? strerror(-r) : store_event_type_to_string(ev->type), r < 0 ? "" : " ",
                         r < 0 ? "" : ev->key);
}

#define EXPECT_PUT(w, k, v, rev) expect_put(w, k, v, rev, __LINE__)
#define EXPECT_DELETE(w, k, rev, prev, c) expect_delete(w, k, rev, prev, c, __LINE__)
#define EXPECT_MARKER(w, rev) expect_marker(w, rev, __LINE__)
#define EXPECT_NONE(w) expect_none(w, __LINE__)

static bool fd_readable(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static int put(struct store *s, enum store_keyspace ks, const char *key, const char *v,
               usec_t ttl, uint64_t *rev) {
        return store_create(s, ks, key, v, strlen(v), ttl, rev);
}

static int upd(struct store *s, enum store_keyspace ks, const char *key, const char *v,
               uint64_t expected, usec_t ttl, uint64_t *rev) {
        return store_update(s, ks, key, v, strlen(v), expected, ttl, rev);
}

static void expect_stored(struct store *s, enum store_keyspace ks, const char *key,
                         const char *value, uint64_t rev) {
        _cleanup_store_event_unref_ struct store_event *ev = NULL;
        assert_int_equal(store_get(s, ks, key, &ev), 0);
        assert_int_equal(ev->type, STORE_EVENT_PUT);
        assert_int_equal(ev->keyspace, ks);
        assert_string_equal(ev->key, key);
        assert_int_equal(ev->value_size, strlen(value));
        assert_string_equal(ev->value, value);
        assert_int_equal(ev->revision, rev);
}

static void expect_absent(struct store *s, enum store_keyspace ks, const char *key) {
        struct store_event *ev = NULL;
        assert_int_equal(store_get(s, ks, key, &ev), -ENOENT);
        assert_null(ev);
}

/* ------------------------------------------------------------------------ */
/* CAS and delete                                                            */
/* ------------------------------------------------------------------------ */

static void test_create_update_cas(void **state) {
        struct store *s = ((struct fixture *) *state)->s;
        uint64_t rev = 99;

        assert_int_equal(put(s, STORE_DURABLE, "service/a", "v1", 0, &rev), 1);
        assert_int_equal(rev, 1);
        rev = 99;
        assert_int_equal(put(s, STORE_DURABLE, "service/a", "other", 0, &rev), 0); /* LOST */
        assert_int_equal(rev, 99);                                                 /* untouched */
        expect_stored(s, STORE_DURABLE, "service/a", "v1", 1);

        assert_int_equal(upd(s, STORE_DURABLE, "service/a", "v2", 1, 0, &rev), 1);
        assert_int_equal(rev, 2);
        rev = 99;
        assert_int_equal(upd(s, STORE_DURABLE, "service/a", "v3", 1, 0, &rev), 0); /* stale */
        assert_int_equal(upd(s, STORE_DURABLE, "service/a", "v3", 3, 0, &rev), 0); /* future */
        assert_int_equal(upd(s, STORE_DURABLE, "service/zz", "v", 1, 0, &rev), 0); /* absent */
        assert_int_equal(rev, 99);
        expect_stored(s, STORE_DURABLE, "service/a", "v2", 2);

        /* LOST draws nothing: the next win is 3. The other keyspace starts at 1. */
        assert_int_equal(put(s, STORE_DURABLE, "service/b", "x", 0, &rev), 1);
        assert_int_equal(rev, 3);
        assert_int_equal(put(s, STORE_EPHEMERAL, "service/a", "lease", 0, &rev), 1);
        assert_int_equal(rev, 1);
        expect_stored(s, STORE_DURABLE, "service/a", "v2", 2);
        expect_stored(s, STORE_EPHEMERAL, "service/a", "lease", 1);

        /* ret_revision is optional. */
        assert_int_equal(put(s, STORE_DURABLE, "service/c", "x", 0, NULL), 1);
        assert_int_equal(upd(s, STORE_DURABLE, "service/c", "y", 4, 0, NULL), 1);
        expect_stored(s, STORE_DURABLE, "service/c", "y", 5);
}

static void test_delete(void **state) {
        struct store *s = ((struct fixture *) *state)->s;
        _cleanup_store_watch_free_ struct store_watch *w = NULL;
        uint64_t rev = 99;

        /* Absent: vacuous WON(0), whatever the guard, and no event. */
        assert_int_equal(store_watch(s, STORE_DURABLE, "", &w), 0);
        EXPECT_MARKER(w, 0);
        assert_int_equal(store_delete(s, STORE_DURABLE, "k", STORE_REV_ANY, &rev), 1);
        assert_int_equal(rev, 0);
        rev = 99;
        assert_int_equal(store_delete(s, STORE_DURABLE, "k", 7, &rev), 1);
        assert_int_equal(rev, 0);
        EXPECT_NONE(w);

        assert_int_equal(put(s, STORE_DURABLE, "k", "v", 0, &rev), 1);
        assert_int_equal(rev, 1);
        EXPECT_PUT(w, "k", "v", 1);

        /* Guarded, wrong revision: LOST, key kept, no event. */
        rev = 99;
        assert_int_equal(store_delete(s, STORE_DURABLE, "k", 5, &rev), 0);
        assert_int_equal(rev, 99);
        expect_stored(s, STORE_DURABLE, "k", "v", 1);
        EXPECT_NONE(w);

        /* Guarded, right revision: WON(the deleted entry's revision); the event has a new one. */
        assert_int_equal(store_delete(s, STORE_DURABLE, "k", 1, &rev), 1);
        assert_int_equal(rev, 1);
        EXPECT_DELETE(w, "k", 2, 1, STORE_CAUSE_DELETED);
        expect_absent(s, STORE_DURABLE, "k");

        /* Re-create after delete: a fresh entry at the next revision. */
        assert_int_equal(put(s, STORE_DURABLE, "k", "again", 0, &rev), 1);
        assert_int_equal(rev, 3);
        EXPECT_PUT(w, "k", "again", 3);
        assert_int_equal(upd(s, STORE_DURABLE, "k", "x", 1, 0, &rev), 0); /* old revision */

        /* Unconditional. */
        assert_int_equal(store_delete(s, STORE_DURABLE, "k", STORE_REV_ANY, &rev), 1);
        assert_int_equal(rev, 3);
        EXPECT_DELETE(w, "k", 4, 3, STORE_CAUSE_DELETED);
        EXPECT_NONE(w);
}

/* ------------------------------------------------------------------------ */
/* Leases (test clock)                                                       */
/* ------------------------------------------------------------------------ */

static void test_lease_kept_alive_then_expires(void **state) {
        struct fixture *f = *state;
        struct store *s = f->s;
        _cleanup_store_watch_free_ struct store_watch *w = NULL;
        const usec_t ttl = 100 * MS;
        uint64_t rev;

        assert_int_equal(put(s, STORE_EPHEMERAL, "watchdog/a", "0", ttl, &rev), 1);
        assert_int_equal(atomic_load(&f->tc.armed), atomic_load(&f->tc.now) + ttl);

        /* Refreshed every TTL/2 for 3× the TTL: never expires. */
        for (usec_t t = 0; t < 3 * ttl; t += ttl / 2) {
                assert_int_equal(tc_advance(&f->tc, ttl / 2), 0);
                expect_stored(s, STORE_EPHEMERAL, "watchdog/a", "0", rev);
                assert_int_equal(upd(s, STORE_EPHEMERAL, "watchdog/a", "0", rev, ttl, &rev), 1);
                assert_int_equal(atomic_load(&f->tc.armed), atomic_load(&f->tc.now) + ttl);
        }
        assert_int_equal(rev, 7);

        assert_int_equal(store_watch(s, STORE_EPHEMERAL, "watchdog/", &w), 0);
        EXPECT_PUT(w, "watchdog/a", "0", 7);
        EXPECT_MARKER(w, 7);

        /* Silence: alive 1 µs before the deadline, dead at it. */
        assert_int_equal(tc_advance(&f->tc, ttl - 1), 0);
        expect_stored(s, STORE_EPHEMERAL, "watchdog/a", "0", 7);
        EXPECT_NONE(w);
        assert_int_equal(tc_advance(&f->tc, 1), 1);
        EXPECT_DELETE(w, "watchdog/a", 8, 7, STORE_CAUSE_EXPIRED);
        EXPECT_NONE(w);
        expect_absent(s, STORE_EPHEMERAL, "watchdog/a");
        assert_int_equal(atomic_load(&f->tc.armed), USEC_INFINITY);
        assert_int_equal(upd(s, STORE_EPHEMERAL, "watchdog/a", "0", 7, ttl, &rev), 0);
}

/* A lease object on the test clock (docs/store.md §1.9): kept alive, its
 * deadline moves without a write, an event or a timer; stopped, its keys
 * expire exactly one TTL later; freed unrevoked, as if its holder died. */
static void test_lease_object(void **state) {
        struct fixture *f = *state;
        struct store *s = f->s;
        _cleanup_store_watch_free_ struct store_watch *w = NULL;
        struct store_lease *l = NULL, *l2 = NULL;
        const usec_t ttl = 100 * MS;
        uint64_t ra, rb, rc;

        assert_int_equal(store_lease_grant(s, ttl, &l), 0);
        assert_int_equal(atomic_load(&f->tc.armed), atomic_load(&f->tc.now) + ttl);
        assert_int_equal(store_create_leased(s, "host/a", "a", 1, l, &ra), 1);
        assert_int_equal(store_create_leased(s, "host/b", "b", 1, l, &rb), 1);
        assert_int_equal(store_watch(s, STORE_EPHEMERAL, "host/", &w), 0);
        EXPECT_PUT(w, "host/a", "a", ra);
        EXPECT_PUT(w, "host/b", "b", rb);
        EXPECT_MARKER(w, rb);
        assert_int_equal(store_lease_keep_alive(l, true), 0);
        assert_int_equal(atomic_load(&f->tc.armed), USEC_INFINITY); /* no timer: SPEC §1 */
        unsigned arms = atomic_load(&f->tc.n_arm);
        for (int i = 0; i < 100; i++)
                assert_int_equal(tc_advance(&f->tc, 10 * ttl), 0);
        assert_int_equal(store_run_expiry(s), 0);
        assert_int_equal(atomic_load(&f->tc.n_arm), arms); /* nothing armed, nothing woke */
        EXPECT_NONE(w);
        expect_stored(s, STORE_EPHEMERAL, "host/a", "a", ra); /* no write either */
        assert_int_equal(store_lease_keep_alive(l, false), 0);
        assert_int_equal(atomic_load(&f->tc.armed), atomic_load(&f->tc.now) + ttl);
        assert_int_equal(tc_advance(&f->tc, ttl - 1), 0);
        assert_int_equal(tc_advance(&f->tc, 1), 2);
        EXPECT_DELETE(w, "host/a", rb + 1, ra, STORE_CAUSE_EXPIRED);
        EXPECT_DELETE(w, "host/b", rb + 2, rb, STORE_CAUSE_EXPIRED);
        assert_int_equal(atomic_load(&f->tc.armed), USEC_INFINITY);
        assert_int_equal(store_lease_keep_alive(l, true), -ENOENT);
        assert_int_equal(store_create_leased(s, "host/c", "c", 1, l, NULL), -ENOENT);
        store_lease_free(l);

        /* Freed without a revoke: the lease (and its key) ends one TTL later. */
        assert_int_equal(store_lease_grant(s, ttl, &l2), 0);
        assert_int_equal(store_create_leased(s, "host/c", "c", 1, l2, &rc), 1);
        EXPECT_PUT(w, "host/c", "c", rc);
        assert_int_equal(store_lease_keep_alive(l2, true), 0);
        assert_int_equal(tc_advance(&f->tc, 5 * ttl), 0);
        store_lease_free(l2);
        assert_int_equal(tc_advance(&f->tc, ttl - 1), 0);
        assert_int_equal(tc_advance(&f->tc, 1), 1);
        EXPECT_DELETE(w, "host/c", rc + 1, rc, STORE_CAUSE_EXPIRED);
        EXPECT_NONE(w);
}

static void test_two_ttls_expire_in_order(void **state) {
        struct fixture *f = *state;
        struct store *s = f->s;
        _cleanup_store_watch_free_ struct store_watch *w = NULL;
        usec_t t0 = atomic_load(&f->tc.now);

        assert_int_equal(put(s, STORE_EPHEMERAL, "a", "long", 300 * MS, NULL), 1);
        assert_int_equal(atomic_load(&f->tc.armed), t0 + 300 * MS);
        assert_int_equal(put(s, STORE_EPHEMERAL, "b", "short", 100 * MS, NULL), 1);
        assert_int_equal(atomic_load(&f->tc.armed), t0 + 100 * MS);
        assert_int_equal(put(s, STORE_EPHEMERAL, "c", "default", 0, NULL), 1); /* 100 ms too */
        assert_int_equal(atomic_load(&f->tc.armed), t0 + 100 * MS);

        assert_int_equal(store_watch(s, STORE_EPHEMERAL, NULL, &w), 0);
        EXPECT_PUT(w, "a", "long", 1);
        EXPECT_PUT(w, "b", "short", 2);
        EXPECT_PUT(w, "c", "default", 3);
        EXPECT_MARKER(w, 3);

        assert_int_equal(tc_advance(&f->tc, 100 * MS), 2);
        EXPECT_DELETE(w, "b", 4, 2, STORE_CAUSE_EXPIRED);
        EXPECT_DELETE(w, "c", 5, 3, STORE_CAUSE_EXPIRED);
        EXPECT_NONE(w);
        assert_int_equal(atomic_load(&f->tc.armed), t0 + 300 * MS);
        expect_stored(s, STORE_EPHEMERAL, "a", "long", 1);

        assert_int_equal(tc_advance(&f->tc, 200 * MS), 1);
        EXPECT_DELETE(w, "a", 6, 1, STORE_CAUSE_EXPIRED);
        assert_int_equal(atomic_load(&f->tc.armed), USEC_INFINITY);
}

static void test_list_never_shows_dead_key(void **state) {
        struct fixture *f = *state;
        struct store *s = f->s;
        _cleanup_store_watch_free_ struct store_watch *w = NULL;
        struct store_event **evs = NULL;
        size_t n = 99;

        assert_int_equal(put(s, STORE_EPHEMERAL, "w/a", "1", 100 * MS, NULL), 1);
        assert_int_equal(put(s, STORE_EPHEMERAL, "w/b", "2", 200 * MS, NULL), 1);
        assert_int_equal(put(s, STORE_EPHEMERAL, "w/c", "3", 300 * MS, NULL), 1);
        assert_int_equal(put(s, STORE_EPHEMERAL, "x/1", "4", 400 * MS, NULL), 1);
        assert_int_equal(store_watch(s, STORE_EPHEMERAL, "w/", &w), 0);
        EXPECT_PUT(w, "w/a", "1", 1);
        EXPECT_PUT(w, "w/b", "2", 2);
        EXPECT_PUT(w, "w/c", "3", 3);
        EXPECT_MARKER(w, 4);

        /* The timer "has not fired": w/a is dead but expiry has not run. */
        tc_skip(&f->tc, 150 * MS);
        assert_int_equal(store_list(s, STORE_EPHEMERAL, "w/", &evs, &n), 2);
        assert_int_equal(n, 2);
        assert_string_equal(evs[0]->key, "w/b");
        assert_int_equal(evs[0]->revision, 2);
        assert_string_equal(evs[1]->key, "w/c");
        store_event_array_free(evs, n);
        EXPECT_DELETE(w, "w/a", 5, 1, STORE_CAUSE_EXPIRED); /* expired in place */
        assert_int_equal(atomic_load(&f->tc.armed), 1000 * USEC_PER_SEC + 200 * MS);

        /* get expires in place too. */
        tc_skip(&f->tc, 100 * MS);
        expect_absent(s, STORE_EPHEMERAL, "w/b");
        EXPECT_DELETE(w, "w/b", 6, 2, STORE_CAUSE_EXPIRED);

        /* "list expires every dead key of the keyspace", not only the prefix's. */
        tc_skip(&f->tc, 200 * MS);
        assert_int_equal(store_list(s, STORE_EPHEMERAL, "nothing/", &evs, &n), 0);
        assert_null(evs);
        assert_int_equal(n, 0);
        EXPECT_DELETE(w, "w/c", 7, 3, STORE_CAUSE_EXPIRED);
        assert_int_equal(store_list(s, STORE_EPHEMERAL, NULL, &evs, NULL), 0);
        assert_int_equal(atomic_load(&f->tc.armed), USEC_INFINITY);
        EXPECT_NONE(w);
}

/* ------------------------------------------------------------------------ */
/* Watches                                                                   */
/* ------------------------------------------------------------------------ */

static void test_watch_snapshot_marker_live(void **state) {
        struct fixture *f = *state;
        struct store *s = f->s;
        _cleanup_store_watch_free_ struct store_watch *w = NULL, *e = NULL;
        uint64_t rev;

        assert_int_equal(put(s, STORE_DURABLE, "svc/b", "B", 0, NULL), 1);  /* 1 */
        assert_int_equal(put(s, STORE_DURABLE, "svc/a", "A", 0, NULL), 1);  /* 2 */
        assert_int_equal(put(s, STORE_DURABLE, "other/x", "X", 0, NULL), 1); /* 3 */
        assert_int_equal(put(s, STORE_DURABLE, "svc", "no", 0, NULL), 1);    /* 4: not "svc/" */
        assert_int_equal(put(s, STORE_DURABLE, "svc0", "no", 0, NULL), 1);   /* 5 */

        assert_int_equal(store_watch(s, STORE_DURABLE, "svc/", &w), 0);
        assert_true(fd_readable(store_watch_fd(w)));
        EXPECT_PUT(w, "svc/a", "A", 2); /* key order, each at its own revision */
        EXPECT_PUT(w, "svc/b", "B", 1);
        EXPECT_MARKER(w, 5);
        assert_false(fd_readable(store_watch_fd(w)));
        EXPECT_NONE(w);

        assert_int_equal(put(s, STORE_DURABLE, "svc/c", "C", 0, NULL), 1);    /* 6 */
        assert_int_equal(put(s, STORE_DURABLE, "other/y", "Y", 0, NULL), 1);  /* 7: invisible */
        assert_int_equal(upd(s, STORE_DURABLE, "svc/a", "A2", 2, 0, &rev), 1); /* 8 */
        assert_int_equal(upd(s, STORE_DURABLE, "other/x", "X2", 3, 0, NULL), 1); /* 9 */
        assert_int_equal(store_delete(s, STORE_DURABLE, "svc/b", 1, &rev), 1); /* 10 */
        assert_true(fd_readable(store_watch_fd(w)));
        EXPECT_PUT(w, "svc/c", "C", 6);
        EXPECT_PUT(w, "svc/a", "A2", 8);
        EXPECT_DELETE(w, "svc/b", 10, 1, STORE_CAUSE_DELETED);
        EXPECT_NONE(w);
        assert_false(fd_readable(store_watch_fd(w)));

        /* Ephemeral: an explicit delete says `deleted`, a lapse says `expired`. */
        assert_int_equal(store_watch(s, STORE_EPHEMERAL, "watchdog/", &e), 0);
        EXPECT_MARKER(e, 0);
        assert_int_equal(put(s, STORE_EPHEMERAL, "watchdog/u", "", 100 * MS, NULL), 1); /* 1 */
        assert_int_equal(put(s, STORE_EPHEMERAL, "watchdog/v", "", 100 * MS, NULL), 1); /* 2 */
        assert_int_equal(store_delete(s, STORE_EPHEMERAL, "watchdog/u", 1, &rev), 1);   /* 3 */
        assert_int_equal(tc_advance(&f->tc, 100 * MS), 1);                              /* 4 */
        EXPECT_PUT(e, "watchdog/u", "", 1);
        EXPECT_PUT(e, "watchdog/v", "", 2);
        EXPECT_DELETE(e, "watchdog/u", 3, 1, STORE_CAUSE_DELETED);
        EXPECT_DELETE(e, "watchdog/v", 4, 2, STORE_CAUSE_EXPIRED);
        EXPECT_NONE(e);
        EXPECT_NONE(w); /* the durable watch saw none of it */
        assert_string_equal(store_cause_to_string(STORE_CAUSE_EXPIRED), "expired");
        assert_string_equal(store_cause_to_string(STORE_CAUSE_DELETED), "deleted");
        assert_string_equal(store_keyspace_to_string(STORE_EPHEMERAL), "ephemeral");
        assert_string_equal(store_event_type_to_string(STORE_EVENT_PUT), "put");
}

/* The bound is exact however the queue is held: a ring that grows from its
 * idle size to the snapshot plus queue_capacity events, in order, and
 * overflows at one more; drained, it takes the next burst again. */
static void test_queue_grows_to_its_bound(void **state) {
        struct store *s = ((struct fixture *) *state)->s; /* queue capacity 300 */
        _cleanup_store_watch_free_ struct store_watch *w = NULL, *lag = NULL;
        char key[32], value[32];

        for (int i = 0; i < 150; i++) {
                snprintf(key, sizeof key, "snap/%03d", i);
                assert_int_equal(put(s, STORE_DURABLE, key, "s", 0, NULL), 1);
        }
        assert_int_equal(store_watch(s, STORE_DURABLE, "", &w), 0);
        assert_int_equal(store_watch(s, STORE_DURABLE, "", &lag), 0);
        for (int burst = 0; burst < 2; burst++) {
                for (int i = 0; i < 300; i++) { /* the whole queue_capacity, far past the idle ring */
                        snprintf(key, sizeof key, "live/%d/%03d", burst, i);
                        snprintf(value, sizeof value, "%d", i);
                        assert_int_equal(put(s, STORE_DURABLE, key, value, 0, NULL), 1);
                }
                if (burst == 0)
                        for (int i = 0; i < 150; i++) {
                                snprintf(key, sizeof key, "snap/%03d", i);
                                EXPECT_PUT(w, key, "s", (uint64_t) i + 1);
                        }
                if (burst == 0)
                        EXPECT_MARKER(w, 150);
                for (int i = 0; i < 300; i++) {
                        snprintf(key, sizeof key, "live/%d/%03d", burst, i);
                        snprintf(value, sizeof value, "%d", i);
                        EXPECT_PUT(w, key, value, 150 + (uint64_t) burst * 300 + (uint64_t) i + 1);
                }
                EXPECT_NONE(w);
        }
        /* lag read nothing: the snapshot, the marker and 300 events filled it;
         * the first burst's last put was its bound, the second overflowed. */
        struct store_event *ev = NULL;
        assert_int_equal(store_watch_next(lag, &ev), -ENOBUFS);
        assert_null(ev);
}

static void test_lag_then_rewatch(void **state) {
        struct store *s = ((struct fixture *) *state)->s; /* queue capacity 2 */
        struct store_watch *w = NULL;
        _cleanup_store_watch_free_ struct store_watch *quiet = NULL, *w2 = NULL;
        struct store_event *ev = NULL;

        assert_int_equal(store_watch(s, STORE_DURABLE, "", &w), 0);
        assert_int_equal(store_watch(s, STORE_DURABLE, "quiet/", &quiet), 0);
        /* Room: the (empty) snapshot, the marker, 2 live events; the third overflows. */
        assert_int_equal(put(s, STORE_DURABLE, "k1", "1", 0, NULL), 1);
        assert_int_equal(put(s, STORE_DURABLE, "k2", "2", 0, NULL), 1);
        assert_int_equal(put(s, STORE_DURABLE, "k3", "3", 0, NULL), 1);

        assert_true(fd_readable(store_watch_fd(w)));
        assert_int_equal(store_watch_next(w, &ev), -ENOBUFS); /* queue discarded at once */
        assert_int_equal(store_watch_next(w, &ev), -ENOBUFS); /* sticky */
        assert_int_equal(store_watch_wait(w, USEC_INFINITY, &ev), -ENOBUFS); /* never blocks */
        assert_true(fd_readable(store_watch_fd(w)));
        assert_null(ev);
        assert_int_equal(put(s, STORE_DURABLE, "k4", "4", 0, NULL), 1); /* no harm to it */
        w = store_watch_free(w);

        /* Another watcher is not affected by this one's lag. */
        EXPECT_MARKER(quiet, 0);
        EXPECT_NONE(quiet);

        /* Re-watch: the snapshot carries the state it missed. */
        assert_int_equal(store_watch(s, STORE_DURABLE, "", &w2), 0);
        EXPECT_PUT(w2, "k1", "1", 1);
        EXPECT_PUT(w2, "k2", "2", 2);
        EXPECT_PUT(w2, "k3", "3", 3);
        EXPECT_PUT(w2, "k4", "4", 4);
        EXPECT_MARKER(w2, 4);
        assert_int_equal(put(s, STORE_DURABLE, "k5", "5", 0, NULL), 1);
        EXPECT_PUT(w2, "k5", "5", 5);
        EXPECT_NONE(w2);
}

static void test_close_drains_then_epipe(void **state) {
        struct fixture *f = *state;
        struct store_watch *w = NULL;
        struct store_event *ev = NULL;

        assert_int_equal(store_watch(f->s, STORE_DURABLE, "", &w), 0);
        assert_int_equal(put(f->s, STORE_DURABLE, "k", "v", 0, NULL), 1);
        f->s = store_unref(f->s); /* the owner goes: the store closes */
        EXPECT_MARKER(w, 0);
        EXPECT_PUT(w, "k", "v", 1);
        assert_int_equal(store_watch_next(w, &ev), -EPIPE);
        assert_int_equal(store_watch_wait(w, USEC_INFINITY, &ev), -EPIPE);
        assert_true(fd_readable(store_watch_fd(w)));
        store_watch_free(w); /* releases the store's memory */
}

/* ------------------------------------------------------------------------ */
/* Revisions: strictly increasing per keyspace, independent, gap-free        */
/* ------------------------------------------------------------------------ */

static void check_stream(struct store_watch *w, uint64_t *last, const char *what) {
        struct store_event *ev;

        while (store_watch_next(w, &ev) == 0) {
                if (ev->type != STORE_EVENT_SNAPSHOT_DONE && ev->revision != *last + 1)
                        fail_msg("%s: event %s %s at revision %" PRIu64 " after %" PRIu64
                                 " (a gap or a reordering)", what,
                                 store_event_type_to_string(ev->type), ev->key, ev->revision, *last);
                if (ev->type != STORE_EVENT_SNAPSHOT_DONE)
                        *last = ev->revision;
                store_event_unref(ev);
        }
        assert_int_equal(store_watch_next(w, &ev), -EAGAIN); /* drained, not lagged */
}

static void test_revisions_increase(void **state) {
        struct fixture *f = *state;
        struct store *s = f->s;
        _cleanup_store_watch_free_ struct store_watch *wd = NULL, *we = NULL;
        uint64_t won[_STORE_KEYSPACE_MAX] = {}, seen[_STORE_KEYSPACE_MAX] = {};
        uint64_t cur[_STORE_KEYSPACE_MAX][16] = {};
        unsigned seed = 12345;

        assert_int_equal(store_watch(s, STORE_DURABLE, "", &wd), 0);
        assert_int_equal(store_watch(s, STORE_EPHEMERAL, "", &we), 0);
        for (int i = 0; i < 3000; i++) {
                seed = seed * 1103515245u + 12345u;
                enum store_keyspace ks = (seed >> 8) & 1;
                unsigned k = (seed >> 9) % 16, op = (seed >> 13) % 4;
                char key[16];
                uint64_t rev = 0;
                int r;

                snprintf(key, sizeof(key), "key/%u", k);
                if (ks == STORE_EPHEMERAL) {
                        /* Let some leases lapse (expiry draws revisions too), then learn
                         * whether this one is still alive. */
                        struct store_event *ev = NULL;
                        if (op == 3)
                                (void) tc_advance(&f->tc, 40 * MS);
                        cur[ks][k] = store_get(s, ks, key, &ev) == 0 ? ev->revision : 0;
                        store_event_unref(ev);
                        if (op == 3)
                                continue;
                }
                if (cur[ks][k] == 0 || op == 0) {
                        r = put(s, ks, key, "v", 0, &rev);
                        assert_int_equal(r, cur[ks][k] == 0 ? 1 : 0);
                } else if (op == 1) {
                        r = upd(s, ks, key, "w", cur[ks][k], 0, &rev);
                        assert_int_equal(r, 1);
                } else {
                        r = store_delete(s, ks, key, cur[ks][k], &rev);
                        assert_int_equal(r, 1);
                        assert_int_equal(rev, cur[ks][k]);
                        cur[ks][k] = 0;
                        continue;
                }
                if (r == 1) {
                        if (rev <= won[ks])
                                fail_msg("keyspace %s: WON(%" PRIu64 ") after WON(%" PRIu64 ")",
                                         store_keyspace_to_string(ks), rev, won[ks]);
                        won[ks] = rev;
                        cur[ks][k] = rev;
                }
        }
        check_stream(wd, &seen[STORE_DURABLE], "durable");
        check_stream(we, &seen[STORE_EPHEMERAL], "ephemeral");
        assert_true(won[STORE_DURABLE] > 100 && won[STORE_EPHEMERAL] > 100);
        assert_true(seen[STORE_DURABLE] >= won[STORE_DURABLE]);
        assert_true(seen[STORE_EPHEMERAL] >= won[STORE_EPHEMERAL]);
}

/* ------------------------------------------------------------------------ */
/* The timer: through the seam, and the real timerfd                         */
/* ------------------------------------------------------------------------ */

static void test_timer_seam_arms_only_for_leases(void **state) {
        struct fixture *f = *state;
        struct store *s = f->s;
        usec_t t0 = atomic_load(&f->tc.now);
        uint64_t ra, rb;

        assert_int_equal(store_get_fd(s), -EOPNOTSUPP); /* custom clock: no timerfd */
        assert_int_equal(put(s, STORE_DURABLE, "service/a", "{}", 0, NULL), 1);
        assert_int_equal(store_delete(s, STORE_DURABLE, "service/a", STORE_REV_ANY, NULL), 1);
        assert_int_equal(store_run_expiry(s), 0);
        assert_int_equal(atomic_load(&f->tc.n_arm), 0); /* never armed without a lease */

        assert_int_equal(put(s, STORE_EPHEMERAL, "a", "", 500 * MS, &ra), 1);
        assert_int_equal(atomic_load(&f->tc.armed), t0 + 500 * MS);
        assert_int_equal(put(s, STORE_EPHEMERAL, "b", "", 200 * MS, &rb), 1);
        assert_int_equal(atomic_load(&f->tc.armed), t0 + 200 * MS);
        assert_int_equal(upd(s, STORE_EPHEMERAL, "b", "", rb, 900 * MS, &rb), 1);
        assert_int_equal(atomic_load(&f->tc.armed), t0 + 500 * MS);
        unsigned arms = atomic_load(&f->tc.n_arm);
        assert_int_equal(put(s, STORE_DURABLE, "x", "", 0, NULL), 1);
        assert_int_equal(atomic_load(&f->tc.n_arm), arms); /* unchanged deadline: no call */

        assert_int_equal(store_delete(s, STORE_EPHEMERAL, "a", ra, NULL), 1);
        assert_int_equal(atomic_load(&f->tc.armed), t0 + 900 * MS);
        assert_int_equal(store_delete(s, STORE_EPHEMERAL, "b", rb, NULL), 1);
        assert_int_equal(atomic_load(&f->tc.armed), USEC_INFINITY);
}

static bool timerfd_armed(int fd) {
        struct itimerspec its;
        assert_int_equal(timerfd_gettime(fd, &its), 0);
        return its.it_value.tv_sec != 0 || its.it_value.tv_nsec != 0;
}

static void test_real_timerfd_armed_and_disarmed(void **state) {
        _cleanup_store_unref_ struct store *s = NULL;
        uint64_t rev;

        assert_int_equal(store_new(NULL, &s), 0);
        int fd = store_get_fd(s);
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);

        assert_false(timerfd_armed(fd));
        assert_int_equal(put(s, STORE_DURABLE, "service/a", "{}", 0, NULL), 1);
        assert_false(timerfd_armed(fd));
        assert_int_equal(put(s, STORE_EPHEMERAL, "watchdog/a", "", 10 * USEC_PER_SEC, &rev), 1);
        assert_true(timerfd_armed(fd));
        assert_int_equal(store_delete(s, STORE_EPHEMERAL, "watchdog/a", rev, NULL), 1);
        assert_false(timerfd_armed(fd));
        assert_int_equal(store_dispatch(s), 0); /* spurious: harmless */
        assert_false(timerfd_armed(fd));
}

static void test_real_timerfd_expiry(void **state) {
        _cleanup_store_unref_ struct store *s = NULL;
        _cleanup_store_watch_free_ struct store_watch *w = NULL;
        struct pollfd p = { .events = POLLIN };

        assert_int_equal(store_new(NULL, &s), 0);
        p.fd = store_get_fd(s);
        assert_int_equal(store_watch(s, STORE_EPHEMERAL, "watchdog/", &w), 0);
        EXPECT_MARKER(w, 0);
        assert_int_equal(put(s, STORE_EPHEMERAL, "watchdog/a", "", 50 * MS, NULL), 1);
        EXPECT_PUT(w, "watchdog/a", "", 1);

        int r = poll(&p, 1, 5000);
        if (r != 1)
                fail_msg("the store's timerfd was not readable 5 s after a 50 ms lease "
                         "(not armed, or armed at the wrong deadline?)");
        assert_int_equal(store_dispatch(s), 1);
        EXPECT_DELETE(w, "watchdog/a", 2, 1, STORE_CAUSE_EXPIRED);
        assert_false(timerfd_armed(p.fd));
        assert_false(fd_readable(p.fd));
}

/* ------------------------------------------------------------------------ */
/* Arguments and limits                                                      */
/* ------------------------------------------------------------------------ */

static void test_invalid_arguments(void **state) {
        struct store *s = ((struct fixture *) *state)->s;
        struct store_watch *w = NULL;
        struct store_event *ev = NULL, **evs = NULL;
        char *big = malloc(STORE_VALUE_MAX + 2);
        assert_non_null(big);
        memset(big, 'k', STORE_VALUE_MAX + 1);
        big[STORE_VALUE_MAX + 1] = '\0';

        assert_int_equal(store_create(NULL, STORE_DURABLE, "k", "", 0, 0, NULL), -EINVAL);
        assert_int_equal(store_create(s, _STORE_KEYSPACE_MAX, "k", "", 0, 0, NULL), -EINVAL);
        assert_int_equal(store_create(s, STORE_DURABLE, NULL, "", 0, 0, NULL), -EINVAL);
        assert_int_equal(store_create(s, STORE_DURABLE, "", "", 0, 0, NULL), -EINVAL);
        assert_int_equal(store_create(s, STORE_DURABLE, "k", NULL, 1, 0, NULL), -EINVAL);
        assert_int_equal(store_create(s, STORE_DURABLE, "k", "", 0, 1, NULL), -EINVAL); /* TTL */
        assert_int_equal(store_create(s, STORE_EPHEMERAL, "k", "", 0, STORE_TTL_MAX_USEC + 1, NULL),
                         -EINVAL);
        assert_int_equal(store_update(s, STORE_DURABLE, "k", "", 0, 0, 0, NULL), -EINVAL);
        assert_int_equal(store_get(s, STORE_DURABLE, "k", NULL), -EINVAL);
        assert_int_equal(store_list(s, STORE_DURABLE, "", NULL, NULL), -EINVAL);
        assert_int_equal(store_watch(s, 7, "", &w), -EINVAL);
        assert_int_equal(store_watch_next(NULL, &ev), -EINVAL);

        /* Sizes: the limits themselves pass, one more byte is -E2BIG. */
        assert_int_equal(store_create(s, STORE_DURABLE, "v", big, STORE_VALUE_MAX, 0, NULL), 1);
        assert_int_equal(store_create(s, STORE_DURABLE, "v2", big, STORE_VALUE_MAX + 1, 0, NULL), -E2BIG);
        big[STORE_KEY_MAX] = '\0';
        assert_int_equal(store_create(s, STORE_DURABLE, big, "", 0, 0, NULL), 1);
        big[STORE_KEY_MAX] = 'k';
        big[STORE_KEY_MAX + 1] = '\0';
        assert_int_equal(store_create(s, STORE_DURABLE, big, "", 0, 0, NULL), -E2BIG);
        assert_int_equal(store_watch(s, STORE_DURABLE, big, &w), -E2BIG);
        assert_int_equal(store_list(s, STORE_DURABLE, big, &evs, NULL), -E2BIG);
        free(big);

        /* Values are bytes: embedded NULs survive, and a NUL always follows. */
        static const char bin[] = { 'a', '\0', 'b', '\xff' };
        assert_int_equal(store_create(s, STORE_DURABLE, "bin", bin, sizeof(bin), 0, NULL), 1);
        assert_int_equal(store_get(s, STORE_DURABLE, "bin", &ev), 0);
        assert_int_equal(ev->value_size, sizeof(bin));
        assert_memory_equal(ev->value, bin, sizeof(bin));
        assert_int_equal(ev->value[sizeof(bin)], '\0');
        store_event_unref(ev);
        assert_int_equal(store_create(s, STORE_DURABLE, "empty", NULL, 0, 0, NULL), 1);
        expect_stored(s, STORE_DURABLE, "empty", "", 4);
}

static void test_max_keys(void **state) {
        struct store *s = ((struct fixture *) *state)->s; /* max_keys 2 */
        uint64_t rev;

        assert_int_equal(put(s, STORE_DURABLE, "a", "", 0, NULL), 1);
        assert_int_equal(put(s, STORE_DURABLE, "b", "", 0, &rev), 1);
        assert_int_equal(put(s, STORE_DURABLE, "c", "", 0, NULL), -ENOSPC);
        assert_int_equal(put(s, STORE_DURABLE, "a", "", 0, NULL), 0); /* LOST before full */
        assert_int_equal(put(s, STORE_EPHEMERAL, "c", "", 0, NULL), 1); /* per keyspace */
        assert_int_equal(store_delete(s, STORE_DURABLE, "b", rev, NULL), 1);
        assert_int_equal(put(s, STORE_DURABLE, "c", "", 0, NULL), 1);
}

/* ------------------------------------------------------------------------ */
/* Blocking waits                                                            */
/* ------------------------------------------------------------------------ */

struct waiter {
        struct store_watch *w;
        int r;
        struct store_event *ev;
};

static void *waiter_thread(void *userdata) {
        struct waiter *wt = userdata;
        wt->r = store_watch_wait(wt->w, 10 * USEC_PER_SEC, &wt->ev);
        return NULL;
}

static void test_wait_blocks_until_event_or_timeout(void **state) {
        struct fixture *f = *state;
        struct store_watch *w = NULL;
        struct waiter wt = {};
        pthread_t t;

        assert_int_equal(store_watch(f->s, STORE_DURABLE, "", &w), 0);
        EXPECT_MARKER(w, 0);
        struct store_event *ev = NULL;
        assert_int_equal(store_watch_wait(w, 20 * MS, &ev), -ETIMEDOUT);
        assert_int_equal(store_watch_wait(w, 0, &ev), -EAGAIN);

        /* A writer wakes a blocked waiter (whether it is already asleep or not). */
        wt.w = w;
        assert_int_equal(pthread_create(&t, NULL, waiter_thread, &wt), 0);
        assert_int_equal(put(f->s, STORE_DURABLE, "k", "v", 0, NULL), 1);
        assert_int_equal(pthread_join(t, NULL), 0);
        if (wt.r != 0)
                fail_msg("blocked waiter got %s instead of the PUT (lost wake-up?)", strerror(-wt.r));
        assert_string_equal(wt.ev->key, "k");
        store_event_unref(wt.ev);

        /* Closing the store wakes a blocked waiter with -EPIPE. */
        wt = (struct waiter) { .w = w };
        assert_int_equal(pthread_create(&t, NULL, waiter_thread, &wt), 0);
        f->s = store_unref(f->s);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(wt.r, -EPIPE);
        store_watch_free(w);
}

/* ------------------------------------------------------------------------ */
/* Concurrency: writers and watchers on several threads (TSan build)         */
/* ------------------------------------------------------------------------ */

#define N_WRITERS 4
#define N_KEYS 8
#define N_ITER 1200
#define N_INC 150
#define N_SLOTS (N_WRITERS * N_KEYS + 2) /* + shared/counter, done */
#define SLOT_SHARED (N_WRITERS * N_KEYS)
#define SLOT_DONE (N_WRITERS * N_KEYS + 1)

struct rec {
        enum store_event_type type;
        uint64_t rev; /* PUT: the revision won; DELETE: the deleted entry's revision */
};

struct writer {
        struct store *s;
        int id;
        struct rec recs[N_KEYS][N_ITER / N_KEYS + 1];
        size_t n[N_KEYS];
        unsigned lost;
        char error[256];
};

struct seen {
        int slot;
        enum store_event_type type;
        uint64_t rev, prev;
};

struct reader {
        struct store *s;
        bool lossy; /* re-watches on lag; else lag is a failure and every live event is kept */
        pthread_barrier_t *started; /* waited on once the first watch exists */
        struct seen *seen;
        size_t n_seen, cap_seen;
        unsigned rewatches;
        char error[256];
};

static int key_slot(const char *key) {
        int t, k;
        if (streq(key, "shared/counter"))
                return SLOT_SHARED;
        if (streq(key, "done"))
                return SLOT_DONE;
        if (sscanf(key, "t%d/k%d", &t, &k) == 2 && t >= 0 && t < N_WRITERS && k >= 0 && k < N_KEYS)
                return t * N_KEYS + k;
        return -1;
}

static void writer_inc_shared(struct writer *wr) {
        for (;;) {
                struct store_event *ev = NULL;
                char buf[32];
                uint64_t rev;

                if (store_get(wr->s, STORE_DURABLE, "shared/counter", &ev) < 0) {
                        snprintf(wr->error, sizeof(wr->error), "shared/counter vanished");
                        return;
                }
                int len = snprintf(buf, sizeof(buf), "%ld", strtol(ev->value, NULL, 10) + 1);
                int r = store_update(wr->s, STORE_DURABLE, "shared/counter", buf, len,
                                     ev->revision, 0, &rev);
                store_event_unref(ev);
                if (r == 1)
                        return;
                if (r < 0) {
                        snprintf(wr->error, sizeof(wr->error), "update: %s", strerror(-r));
                        return;
                }
                wr->lost++;
        }
}

static void *writer_thread(void *userdata) {
        struct writer *wr = userdata;
        uint64_t cur[N_KEYS] = {};

        for (int i = 0; i < N_ITER && !wr->error[0]; i++) {
                int k = i % N_KEYS, r;
                char key[32];
                uint64_t rev = 0;
                struct rec rec;

                snprintf(key, sizeof(key), "t%d/k%d", wr->id, k);
                if (cur[k] == 0) {
                        r = store_create(wr->s, STORE_DURABLE, key, key, strlen(key), 0, &rev);
                        rec = (struct rec) { STORE_EVENT_PUT, rev };
                } else if (i % 7 == 0) {
                        r = store_delete(wr->s, STORE_DURABLE, key, cur[k], &rev);
                        rec = (struct rec) { STORE_EVENT_DELETE, rev };
                } else {
                        r = store_update(wr->s, STORE_DURABLE, key, key, strlen(key), cur[k], 0, &rev);
                        rec = (struct rec) { STORE_EVENT_PUT, rev };
                }
                if (r != 1) { /* only this thread writes these keys: never LOST */
                        snprintf(wr->error, sizeof(wr->error), "%s: answer %d at iteration %d", key, r, i);
                        break;
                }
                cur[k] = rec.type == STORE_EVENT_PUT ? rev : 0;
                wr->recs[k][wr->n[k]++] = rec;
                if (i % (N_ITER / N_INC) == 0)
                        writer_inc_shared(wr);
                if (i % 64 == 0) { /* leases too, so the heap and the timer are exercised */
                        (void) store_create(wr->s, STORE_EPHEMERAL, key, "", 0, 60 * USEC_PER_SEC, &rev);
                        (void) store_delete(wr->s, STORE_EPHEMERAL, key, STORE_REV_ANY, NULL);
                }
        }
        return NULL;
}

static bool reader_record(struct reader *rd, const struct store_event *ev, int slot) {
        if (rd->n_seen == rd->cap_seen) {
                rd->cap_seen = rd->cap_seen ? rd->cap_seen * 2 : 4096;
                rd->seen = realloc(rd->seen, rd->cap_seen * sizeof(*rd->seen));
                if (!rd->seen) {
                        snprintf(rd->error, sizeof(rd->error), "out of memory");
                        return false;
                }
        }
        rd->seen[rd->n_seen++] = (struct seen) { slot, ev->type, ev->revision, ev->prev_revision };
        return true;
}

/* One watch session: snapshot, marker, live events until "done" appears.
 * Returns 1 when done, 0 to re-watch after a lag, -1 on a failure. */
static int reader_session(struct reader *rd) {
        _cleanup_store_watch_free_ struct store_watch *w = NULL;
        uint64_t last[N_SLOTS] = {};
        bool live = false, done = false;

        int r = store_watch(rd->s, STORE_DURABLE, "", &w);
        if (rd->started) {
                pthread_barrier_wait(rd->started);
                rd->started = NULL;
        }
        if (r < 0) {
                snprintf(rd->error, sizeof(rd->error), "store_watch: %s", strerror(-r));
                return -1;
        }
        for (;;) {
                struct store_event *ev = NULL;
                r = store_watch_wait(w, 30 * USEC_PER_SEC, &ev);
                if (r == -ENOBUFS && rd->lossy) {
                        rd->rewatches++;
                        return 0;
                }
                if (r < 0) {
                        snprintf(rd->error, sizeof(rd->error), "store_watch_wait: %s (%s)", strerror(-r),
                                 r == -ETIMEDOUT ? "no event for 30 s: lost wake-up or a writer stuck?"
                                                 : "a watcher with room for everything lagged?");
                        return -1;
                }
                int slot = ev->type == STORE_EVENT_SNAPSHOT_DONE ? -1 : key_slot(ev->key);
                if (ev->type == STORE_EVENT_SNAPSHOT_DONE) {
                        live = true;
                } else if (slot < 0) {
                        snprintf(rd->error, sizeof(rd->error), "unexpected key %s", ev->key);
                } else if (ev->revision <= last[slot]) {
                        snprintf(rd->error, sizeof(rd->error), "%s: revision %" PRIu64 " after %" PRIu64,
                                 ev->key, ev->revision, last[slot]);
                } else {
                        last[slot] = ev->revision;
                        if (live && !rd->lossy)
                                (void) reader_record(rd, ev, slot);
                        if (slot == SLOT_DONE)
                                done = true;
                }
                store_event_unref(ev);
                if (rd->error[0])
                        return -1;
                if (done && live)
                        return 1;
        }
}

static void *reader_thread(void *userdata) {
        struct reader *rd = userdata;
        int r;

        while ((r = reader_session(rd)) == 0)
                ;
        return NULL;
}

/* The complete watcher saw each writer's key history exactly, in order. */
static void check_histories(struct reader *rd, struct writer *wr) {
        size_t cursor[N_WRITERS][N_KEYS] = {};
        unsigned shared_puts = 0;
        uint64_t prev_rev = 0;

        for (size_t i = 0; i < rd->n_seen; i++) {
                const struct seen *e = &rd->seen[i];
                if (prev_rev && e->rev != prev_rev + 1)
                        fail_msg("live revision %" PRIu64 " after %" PRIu64 ": a gap", e->rev, prev_rev);
                prev_rev = e->rev;
                if (e->slot == SLOT_SHARED) {
                        shared_puts++;
                        continue;
                }
                if (e->slot == SLOT_DONE)
                        continue;
                int t = e->slot / N_KEYS, k = e->slot % N_KEYS;
                size_t c = cursor[t][k]++;
                if (c >= wr[t].n[k])
                        fail_msg("t%d/k%d: an event the writer never made", t, k);
                const struct rec *rec = &wr[t].recs[k][c];
                uint64_t got = e->type == STORE_EVENT_DELETE ? e->prev : e->rev;
                if (e->type != rec->type || got != rec->rev)
                        fail_msg("t%d/k%d #%zu: watcher saw %s %" PRIu64 ", writer won %s %" PRIu64, t,
                                 k, c, store_event_type_to_string(e->type), got,
                                 store_event_type_to_string(rec->type), rec->rev);
        }
        for (int t = 0; t < N_WRITERS; t++)
                for (int k = 0; k < N_KEYS; k++)
                        if (cursor[t][k] != wr[t].n[k])
                                fail_msg("t%d/k%d: watcher saw %zu of %zu events: missing", t, k,
                                         cursor[t][k], wr[t].n[k]);
        assert_int_equal(shared_puts, N_WRITERS * N_INC);
}

/* Starts the readers, waits until each has its first watch, runs the writers,
 * then writes "done" (which ends every reader) and joins everything. */
static void run_concurrently(struct store *s, struct writer *wr, struct reader *rd, size_t n_rd) {
        pthread_t tw[N_WRITERS], tr[4];
        pthread_barrier_t started;

        assert_true(n_rd <= ELEMENTSOF(tr));
        assert_int_equal(store_create(s, STORE_DURABLE, "shared/counter", "0", 1, 0, NULL), 1);
        assert_int_equal(pthread_barrier_init(&started, NULL, n_rd + 1), 0);
        for (size_t i = 0; i < n_rd; i++) {
                rd[i].s = s;
                rd[i].started = &started;
                assert_int_equal(pthread_create(&tr[i], NULL, reader_thread, &rd[i]), 0);
        }
        pthread_barrier_wait(&started);
        for (int t = 0; t < N_WRITERS; t++) {
                wr[t].s = s;
                wr[t].id = t;
                assert_int_equal(pthread_create(&tw[t], NULL, writer_thread, &wr[t]), 0);
        }
        for (int t = 0; t < N_WRITERS; t++)
                assert_int_equal(pthread_join(tw[t], NULL), 0);
        assert_int_equal(store_create(s, STORE_DURABLE, "done", "", 0, 0, NULL), 1);
        for (size_t i = 0; i < n_rd; i++)
                assert_int_equal(pthread_join(tr[i], NULL), 0);
        pthread_barrier_destroy(&started);

        for (int t = 0; t < N_WRITERS; t++)
                if (wr[t].error[0])
                        fail_msg("writer %d: %s", t, wr[t].error);
        for (size_t i = 0; i < n_rd; i++)
                if (rd[i].error[0])
                        fail_msg("%s watcher %zu: %s", rd[i].lossy ? "lossy" : "complete", i,
                                 rd[i].error);

        struct store_event *ev = NULL;
        assert_int_equal(store_get(s, STORE_DURABLE, "shared/counter", &ev), 0);
        assert_int_equal(strtol(ev->value, NULL, 10), N_WRITERS * N_INC);
        store_event_unref(ev);
}

static unsigned total_lost(const struct writer *wr) {
        unsigned n = 0;
        for (int t = 0; t < N_WRITERS; t++)
                n += wr[t].lost;
        return n;
}

/* Room for everything: two watchers see every write, in order, none missing. */
static void test_concurrent_writers_complete_watchers(void **state) {
        _cleanup_store_unref_ struct store *s = NULL;
        struct store_options o = {
                .watch_queue_capacity = N_WRITERS * (N_ITER + N_INC) + 16, /* never lags */
        };
        struct writer *wr = calloc(N_WRITERS, sizeof(*wr));
        struct reader rd[2] = {};

        assert_non_null(wr);
        assert_int_equal(store_new(&o, &s), 0);
        run_concurrently(s, wr, rd, ELEMENTSOF(rd));
        for (size_t i = 0; i < ELEMENTSOF(rd); i++) {
                check_histories(&rd[i], wr);
                free(rd[i].seen);
        }
        print_message("complete: %zu live events checked per watcher; shared counter: %u LOST\n",
                      rd[0].n_seen, total_lost(wr));
        free(wr);
}

/* A small queue: watchers lag while writers run, re-watch, and still see each
 * key's revisions strictly increasing in every session. */
static void test_concurrent_writers_lagging_watchers(void **state) {
        _cleanup_store_unref_ struct store *s = NULL;
        struct store_options o = { .watch_queue_capacity = 16 };
        struct writer *wr = calloc(N_WRITERS, sizeof(*wr));
        struct reader rd[2] = { { .lossy = true }, { .lossy = true } };

        assert_non_null(wr);
        assert_int_equal(store_new(&o, &s), 0);
        run_concurrently(s, wr, rd, ELEMENTSOF(rd));
        print_message("lagging: watchers re-watched %u and %u times; shared counter: %u LOST\n",
                      rd[0].rewatches, rd[1].rewatches, total_lost(wr));
        free(wr);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create_update_cas, setup, teardown),
                cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lease_kept_alive_then_expires, setup, teardown),
                cmocka_unit_test_setup_teardown(test_two_ttls_expire_in_order, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lease_object, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_never_shows_dead_key, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_snapshot_marker_live, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lag_then_rewatch, setup_small_queue, teardown),
                cmocka_unit_test_setup_teardown(test_queue_grows_to_its_bound, setup_queue_300, teardown),
                cmocka_unit_test_setup_teardown(test_close_drains_then_epipe, setup, teardown),
                cmocka_unit_test_setup_teardown(test_revisions_increase, setup_big_queue, teardown),
                cmocka_unit_test_setup_teardown(test_timer_seam_arms_only_for_leases, setup, teardown),
                cmocka_unit_test_setup_teardown(test_real_timerfd_armed_and_disarmed, setup_fds,
                                                teardown_fds),
                cmocka_unit_test_setup_teardown(test_real_timerfd_expiry, setup_fds, teardown_fds),
                cmocka_unit_test_setup_teardown(test_invalid_arguments, setup, teardown),
                cmocka_unit_test_setup_teardown(test_max_keys, setup_two_keys, teardown),
                cmocka_unit_test_setup_teardown(test_wait_blocks_until_event_or_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent_writers_complete_watchers, setup_fds,
                                                teardown_fds),
                cmocka_unit_test_setup_teardown(test_concurrent_writers_lagging_watchers, setup_fds,
                                                teardown_fds),
        };
        return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
