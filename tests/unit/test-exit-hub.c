/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the exit hub (SPEC §2.1). Every test runs between a fixture
 * that counts /proc/self/fd, so a leaked eventfd fails the test; ASan's leak
 * checker covers memory. Threads never call cmocka asserts: they record what
 * they saw and the main thread judges after a bounded rendezvous.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>

#include <cmocka.h>

#include "hub-internal.h"
#include "libexit.h"
#include "macro.h"
#include "time-util.h"

#define WAIT_MS 10000    /* every blocking call in these tests gives up after this */
#define RACE_ITERATIONS 3000

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static int fd_count(void) {
        DIR *d = opendir("/proc/self/fd");
        if (!d)
                return -1;
        int n = 0;
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

static int fixture_setup(void **state) {
        int *n = malloc(sizeof(*n));
        if (!n)
                return -1;
        *n = fd_count();
        *state = n;
        return 0;
}

static int fixture_teardown(void **state) {
        int *n = *state, now = fd_count();
        if (now != *n)
                fprintf(stdout, "fd leak: %d fds at start, %d at end (an eventfd not closed by a free?)\n", *n, now);
        int r = now == *n ? 0 : -1;
        free(n);
        return r;
}

static bool readable(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r = poll(&p, 1, 0);
        assert_true(r >= 0);
        return r == 1 && (p.revents & POLLIN);
}

static struct exit_reason exited(int code) {
        return (struct exit_reason) { .kind = EXIT_REASON_EXITED, .status = code };
}

static struct exit_reason killed(int sig) {
        return (struct exit_reason) { .kind = EXIT_REASON_KILLED, .status = sig };
}

static struct exit_hub *hub_new(uint32_t queue_capacity, uint32_t record_capacity) {
        struct exit_hub *hub = NULL;
        assert_int_equal(exit_hub_new(queue_capacity, record_capacity, &hub), 0);
        return hub;
}

static exit_id_t reg(struct exit_hub *hub, pid_t pid) {
        exit_id_t id = 0;
        assert_int_equal(exit_hub_register(hub, pid, &id), 0);
        return id;
}

static void publish(struct exit_hub *hub, exit_id_t id, int code) {
        struct exit_reason r = exited(code);
        assert_int_equal(exit_hub_publish(hub, id, &r), 0);
}

static void take_expect(struct exit_hub *hub, exit_id_t id, int code) {
        struct exit_reason r;
        assert_int_equal(exit_hub_take(hub, id, &r), 0);
        assert_int_equal(r.kind, EXIT_REASON_EXITED);
        assert_int_equal(r.status, code);
}

/* A bounded receive: a timeout here means an exit was lost or never signalled. */
static struct exit_event recv_event(struct exit_sub *sub) {
        struct exit_event ev;
        int r = exit_sub_recv(sub, &ev, WAIT_MS);
        if (r == -ETIMEDOUT)
                fail_msg("no event within %d ms: publish did not queue it or did not wake the subscriber", WAIT_MS);
        assert_int_equal(r, 0);
        return ev;
}

static void expect_exit_event(struct exit_sub *sub, exit_id_t id, int code) {
        struct exit_event ev = recv_event(sub);
        assert_int_equal(ev.type, EXIT_EVENT_EXIT);
        assert_int_equal(ev.id, id);
        assert_int_equal(ev.reason.status, code);
}

/* A barrier whose wait gives up after WAIT_MS, so a stuck peer fails the test instead of
 * hanging it. */
struct gate {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned parties, arrived, generation;
        bool broken;
};

static void gate_init(struct gate *g, unsigned parties) {
        *g = (struct gate) { .parties = parties };
        pthread_mutex_init(&g->lock, NULL);
        pthread_cond_init(&g->cond, NULL);
}

static void gate_destroy(struct gate *g) {
        pthread_cond_destroy(&g->cond);
        pthread_mutex_destroy(&g->lock);
}

static bool gate_wait(struct gate *g) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += WAIT_MS / 1000;
        pthread_mutex_lock(&g->lock);
        unsigned gen = g->generation;
        if (++g->arrived == g->parties) {
                g->arrived = 0;
                g->generation++;
                pthread_cond_broadcast(&g->cond);
        }
        while (gen == g->generation && !g->broken)
                if (pthread_cond_timedwait(&g->cond, &g->lock, &ts) == ETIMEDOUT) {
                        g->broken = true;
                        pthread_cond_broadcast(&g->cond);
                }
        bool ok = !g->broken;
        pthread_mutex_unlock(&g->lock);
        return ok;
}

static void gate_wait_main(struct gate *g) {
        if (!gate_wait(g))
                fail_msg("a worker thread did not reach the rendezvous within %d ms: "
                         "likely a deadlock on the hub lock or a lost condvar wake-up", WAIT_MS);
}

static void join_bounded(pthread_t t) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += WAIT_MS / 1000;
        if (pthread_timedjoin_np(t, NULL, &ts) != 0)
                fail_msg("a worker thread did not finish within %d ms: likely blocked in the hub", WAIT_MS);
}

/* ------------------------------------------------------------------------ */
/* Identity, registration, arguments                                         */
/* ------------------------------------------------------------------------ */

static void test_ids_start_at_one_and_are_never_reused(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        exit_id_t a, b;
        assert_int_equal(exit_hub_reserve(hub, &a), 0);
        assert_int_equal(a, 1);
        assert_int_equal(exit_hub_unreserve(hub, a), 0);
        assert_int_equal(exit_hub_reserve(hub, &b), 0);
        assert_int_equal(b, 2);
        assert_int_equal(exit_hub_attach(hub, b, 42), 0);
        assert_int_equal(reg(hub, 43), 3);
        assert_int_equal(exit_hub_live_processes(hub), 2);
        exit_hub_unref(hub);
}

static void test_registration_errors(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        exit_id_t id, other;
        assert_int_equal(exit_hub_attach(hub, 99, 10), -ENOENT);
        assert_int_equal(exit_hub_reserve(hub, &id), 0);
        assert_int_equal(exit_hub_attach(hub, id, 0), -EINVAL);
        assert_int_equal(exit_hub_attach(hub, id, -5), -EINVAL);
        assert_int_equal(exit_hub_attach(hub, id, 10), 0);
        assert_int_equal(exit_hub_attach(hub, id, 11), -ENOENT);
        assert_int_equal(exit_hub_unreserve(hub, id), -EBUSY);
        /* pid 10 is live: a second process with that pid cannot be registered. */
        assert_int_equal(exit_hub_register(hub, 10, &other), -EEXIST);
        assert_int_equal(exit_hub_live_processes(hub), 1);
        assert_int_equal(exit_hub_ledger_entries(hub), 1);

        exit_id_t reserved;
        struct exit_reason r = exited(0);
        assert_int_equal(exit_hub_reserve(hub, &reserved), 0);
        assert_int_equal(exit_hub_publish(hub, reserved, &r), -ENOENT);
        assert_int_equal(exit_hub_publish(hub, 12345, &r), -ENOENT);
        assert_int_equal(exit_hub_publish(hub, id, &r), 0);
        assert_int_equal(exit_hub_publish(hub, id, &r), -EALREADY);
        take_expect(hub, id, 0);
        assert_int_equal(exit_hub_publish(hub, id, &r), -EALREADY);
        assert_int_equal(exit_hub_unreserve(hub, id), -ENOENT);
        assert_int_equal(exit_hub_unreserve(hub, reserved), 0);
        assert_int_equal(exit_hub_unreserve(hub, reserved), -ENOENT);
        assert_int_equal(exit_hub_ledger_entries(hub), 0);
        exit_hub_unref(hub);
}

static void test_invalid_arguments(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_sub *sub;
        struct exit_watch *w;
        struct exit_watch_set *set;
        struct exit_event ev;
        struct exit_reason r = exited(1), bad = { .kind = 7 };
        exit_id_t id = reg(hub, 5);

        assert_int_equal(exit_hub_new(0, 0, NULL), -EINVAL);
        assert_int_equal(exit_hub_new(UINT32_MAX, 0, &(struct exit_hub *) { NULL }), -EINVAL);
        assert_null(exit_hub_ref(NULL));
        assert_null(exit_hub_unref(NULL));
        assert_int_equal(exit_hub_reserve(NULL, &id), -EINVAL);
        assert_int_equal(exit_hub_reserve(hub, NULL), -EINVAL);
        assert_int_equal(exit_hub_attach(hub, 0, 3), -EINVAL);
        assert_int_equal(exit_hub_unreserve(hub, 0), -EINVAL);
        assert_int_equal(exit_hub_register(hub, 0, &id), -EINVAL);
        assert_int_equal(exit_hub_register(hub, 6, NULL), -EINVAL);
        assert_int_equal(exit_hub_publish(hub, id, NULL), -EINVAL);
        assert_int_equal(exit_hub_publish(hub, id, &bad), -EINVAL);
        assert_int_equal(exit_hub_publish(hub, 0, &r), -EINVAL);
        assert_int_equal(exit_hub_publish_orphan(hub, 0, &r, NULL), -EINVAL);
        assert_int_equal(exit_hub_pid_to_id(hub, -1, &id), -EINVAL);
        assert_int_equal(exit_hub_pid_to_id(hub, 5, NULL), -EINVAL);
        assert_int_equal(exit_hub_take(hub, id, NULL), -EINVAL);
        assert_int_equal(exit_hub_subscribe(hub, NULL), -EINVAL);
        assert_int_equal(exit_sub_recv(NULL, &ev, 0), -EINVAL);
        assert_int_equal(exit_sub_recv_batch(NULL, &ev, 1, 0), -EINVAL);
        assert_int_equal(exit_sub_fd(NULL), -EINVAL);
        assert_null(exit_sub_free(NULL));
        assert_int_equal(exit_hub_watch(hub, 0, NULL, NULL, &w, NULL), -EINVAL);
        assert_int_equal(exit_hub_watch(hub, id, NULL, NULL, NULL, NULL), -EINVAL);
        assert_int_equal(exit_watch_fd(NULL), -EINVAL);
        assert_int_equal(exit_watch_result(NULL, &r), -EINVAL);
        assert_int_equal(exit_watch_wait(NULL, 0, &r), -EINVAL);
        assert_int_equal(exit_watch_id(NULL), 0);
        assert_null(exit_watch_userdata(NULL));
        assert_null(exit_watch_free(NULL));
        assert_int_equal(exit_watch_set_new(NULL, &set), -EINVAL);
        assert_int_equal(exit_watch_set_fd(NULL), -EINVAL);
        assert_int_equal(exit_watch_set_next(NULL, &w), -EINVAL);
        assert_null(exit_watch_set_free(NULL));

        /* A set of another hub is refused; a watch in a set has no fd of its own. */
        struct exit_hub *other = hub_new(0, 0);
        assert_int_equal(exit_watch_set_new(other, &set), 0);
        assert_int_equal(exit_hub_watch(hub, id, set, NULL, &w, NULL), -EINVAL);
        exit_watch_set_free(set);
        exit_hub_unref(other);
        assert_int_equal(exit_watch_set_new(hub, &set), 0);
        assert_int_equal(exit_hub_watch(hub, id, set, NULL, &w, NULL), EXIT_WATCH_LIVE);
        assert_int_equal(exit_watch_fd(w), -EINVAL);
        exit_watch_free(w);
        exit_watch_set_free(set);

        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);
        assert_int_equal(exit_sub_recv_batch(sub, &ev, 0, 0), -EINVAL);
        assert_int_equal(exit_sub_recv(sub, NULL, 0), -EINVAL);
        exit_sub_free(sub);
        exit_hub_unref(hub);
}

static void test_ref_unref_closes_on_last_owner(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_sub *sub;
        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);
        assert_ptr_equal(exit_hub_ref(hub), hub);
        assert_null(exit_hub_unref(hub));
        assert_false(exit_hub_is_closed(hub));
        assert_false(readable(exit_sub_fd(sub)));
        exit_hub_unref(hub);
        /* The sub's reference keeps the memory; the hub is closed. */
        assert_true(exit_hub_is_closed(hub));
        assert_true(readable(exit_sub_fd(sub)));
        struct exit_event ev;
        assert_int_equal(exit_sub_recv(sub, &ev, 0), -EPIPE);

        /* Closed for good: no reopening, nothing new is accepted (the memory is still
         * there only because the subscription holds it). */
        struct exit_reason r = exited(0);
        exit_id_t id;
        struct exit_watch *w;
        struct exit_watch_set *set;
        struct exit_sub *again;
        assert_null(exit_hub_ref(hub));
        assert_int_equal(exit_hub_reserve(hub, &id), -EPIPE);
        assert_int_equal(exit_hub_register(hub, 77, &id), -EPIPE);
        assert_int_equal(exit_hub_publish(hub, 1, &r), -EPIPE);
        assert_int_equal(exit_hub_publish_orphan(hub, 77, &r, &id), -EPIPE);
        assert_int_equal(exit_hub_watch(hub, 1, NULL, NULL, &w, NULL), -EPIPE);
        assert_int_equal(exit_watch_set_new(hub, &set), -EPIPE);
        assert_int_equal(exit_hub_subscribe(hub, &again), -EPIPE);
        exit_sub_free(sub);
}

/* ------------------------------------------------------------------------ */
/* The queue                                                                 */
/* ------------------------------------------------------------------------ */

static void test_overflow_gives_one_lagged_then_recovers(void **state) {
        struct exit_hub *hub = hub_new(2, 0);
        struct exit_sub *sub;
        struct exit_event ev;
        exit_id_t ids[4];
        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);
        for (int i = 0; i < 4; i++)
                ids[i] = reg(hub, 100 + i);

        for (int i = 0; i < 3; i++)
                publish(hub, ids[i], i);
        ev = recv_event(sub);
        assert_int_equal(ev.type, EXIT_EVENT_LAGGED);
        assert_int_equal(ev.id, 0);
        assert_int_equal(ev.pid, 0);
        assert_int_equal(exit_sub_recv(sub, &ev, 0), -ETIMEDOUT);
        assert_false(readable(exit_sub_fd(sub)));

        publish(hub, ids[3], 3);
        expect_exit_event(sub, ids[3], 3);
        /* The consumer recovers by taking its outcomes: nothing was lost from the ledger. */
        for (int i = 0; i < 4; i++)
                take_expect(hub, ids[i], i);
        exit_sub_free(sub);
        exit_hub_unref(hub);
}

struct hook_ctx {
        exit_id_t id;
        int calls, publish_result;
};

static void publish_from_hook(struct exit_hub *hub, void *userdata) {
        struct hook_ctx *c = userdata;
        struct exit_reason r = exited(77);
        c->calls++;
        c->publish_result = exit_hub_publish(hub, c->id, &r);
}

/* Forces "a publish racing the LAGGED discard" at the exact point after the decision. */
static void test_publish_racing_lagged_discard_is_kept(void **state) {
        struct exit_hub *hub = hub_new(2, 16);
        struct exit_sub *sub;
        struct hook_ctx ctx = {};
        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);
        exit_hub_set_lagged_hook(hub, publish_from_hook, &ctx);

        for (int it = 0; it < RACE_ITERATIONS; it++) {
                exit_id_t ids[3];
                for (int i = 0; i < 3; i++)
                        ids[i] = reg(hub, 1000 + i);
                ctx.id = reg(hub, 2000);
                for (int i = 0; i < 3; i++)
                        publish(hub, ids[i], i);

                struct exit_event ev = recv_event(sub);
                assert_int_equal(ev.type, EXIT_EVENT_LAGGED);
                assert_int_equal(ctx.calls, it + 1);
                assert_int_equal(ctx.publish_result, 0);
                assert_true(readable(exit_sub_fd(sub)));
                struct exit_event next;
                assert_int_equal(exit_sub_recv(sub, &next, 0), 0);
                assert_int_equal(next.type, EXIT_EVENT_EXIT);
                assert_int_equal(next.id, ctx.id);
                assert_false(readable(exit_sub_fd(sub)));

                for (int i = 0; i < 3; i++)
                        take_expect(hub, ids[i], i);
                take_expect(hub, ctx.id, 77);
        }
        exit_hub_set_lagged_hook(hub, NULL, NULL);
        assert_int_equal(exit_hub_ledger_entries(hub), 0);
        exit_sub_free(sub);
        exit_hub_unref(hub);
}

struct stress {
        struct exit_hub *hub;
        unsigned n;
        int error;
};

/* Publishes ids 1..n in order, then drops the only owner reference (closing the hub). */
static void *stress_publisher(void *arg) {
        struct stress *s = arg;
        for (unsigned i = 1; i <= s->n && s->error == 0; i++) {
                exit_id_t id;
                struct exit_reason r = exited((int) (i & 0xff));
                s->error = exit_hub_register(s->hub, (pid_t) (i % 30000 + 2), &id);
                if (s->error == 0 && id != i)
                        s->error = -EBADMSG;
                if (s->error == 0)
                        s->error = exit_hub_publish(s->hub, id, &r);
                if (s->error == 0)
                        s->error = exit_hub_take(s->hub, id, &r);
                /* The mutex is not fair: without an occasional yield the publisher keeps it and
                 * the receiver sees a handful of huge LAGGED gaps instead of many small races. */
                if (i % 8 == 0)
                        sched_yield();
        }
        exit_hub_unref(s->hub);
        return NULL;
}

/* Free-running: ids strictly increase, and between two EXIT events with no LAGGED
 * between them there is no gap; the stream ends with id n or a LAGGED, then -EPIPE. */
static void test_lagged_stress_no_silent_gap(void **state) {
        struct stress s = { .hub = hub_new(4, 64), .n = 30000 };
        struct exit_sub *sub;
        pthread_t t;
        assert_int_equal(exit_hub_subscribe(s.hub, &sub), 0);
        assert_int_equal(pthread_create(&t, NULL, stress_publisher, &s), 0);

        exit_id_t last = 0;
        bool lagged_since = false, last_was_lagged = false;
        unsigned lagged = 0, exits = 0;
        struct exit_event evs[3];
        int r;
        while ((r = exit_sub_recv_batch(sub, evs, ELEMENTSOF(evs), WAIT_MS)) > 0) {
                for (int i = 0; i < r; i++) {
                        if (evs[i].type == EXIT_EVENT_LAGGED) {
                                assert_int_equal(i, 0); /* a LAGGED marker is first of its batch */
                                lagged++;
                                lagged_since = last_was_lagged = true;
                                continue;
                        }
                        assert_int_equal(evs[i].type, EXIT_EVENT_EXIT);
                        if (!lagged_since && evs[i].id != last + 1)
                                fail_msg("gap without LAGGED: %" PRIu64 " after %" PRIu64, evs[i].id, last);
                        assert_true(evs[i].id > last);
                        last = evs[i].id;
                        lagged_since = last_was_lagged = false;
                        exits++;
                }
        }
        if (r == -ETIMEDOUT)
                fail_msg("no event and no close within %d ms: a publish was not signalled", WAIT_MS);
        assert_int_equal(r, -EPIPE);
        join_bounded(t);
        assert_int_equal(s.error, 0);
        if (!last_was_lagged)
                assert_int_equal(last, s.n);
        fprintf(stdout, "stress: %u exits received, %u LAGGED markers\n", exits, lagged);
        exit_sub_free(sub);
}

static void test_subscribe_once_per_hub_lifetime(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_sub *sub, *second;
        struct exit_event ev;
        exit_id_t early = reg(hub, 7);
        publish(hub, early, 9);

        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);
        assert_int_equal(exit_hub_subscribe(hub, &second), -EBUSY);
        /* Published before the subscription: not queued, but in the ledger. */
        assert_false(readable(exit_sub_fd(sub)));
        assert_int_equal(exit_sub_recv(sub, &ev, 0), -ETIMEDOUT);
        take_expect(hub, early, 9);

        exit_sub_free(sub);
        assert_int_equal(exit_hub_subscribe(hub, &second), -EBUSY);
        /* With no subscriber an exit is still recorded. */
        exit_id_t late = reg(hub, 8);
        publish(hub, late, 3);
        take_expect(hub, late, 3);
        exit_hub_unref(hub);
}

static void test_close_drains_then_epipe(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_sub *sub;
        struct exit_watch *own, *in_set, *popped;
        struct exit_watch_set *set;
        struct exit_event ev;
        struct exit_reason r;
        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);
        assert_int_equal(exit_watch_set_new(hub, &set), 0);
        exit_id_t a = reg(hub, 10), b = reg(hub, 11), c = reg(hub, 12);
        assert_int_equal(exit_hub_watch(hub, c, NULL, NULL, &own, NULL), EXIT_WATCH_LIVE);
        assert_int_equal(exit_hub_watch(hub, c, set, NULL, &in_set, NULL), EXIT_WATCH_LIVE);
        int own_fd = exit_watch_fd(own);
        assert_true(own_fd >= 0);
        publish(hub, a, 1);
        publish(hub, b, 2);

        exit_hub_unref(hub); /* the owner drops the hub: closed */

        assert_true(readable(exit_sub_fd(sub)));
        expect_exit_event(sub, a, 1);
        expect_exit_event(sub, b, 2);
        assert_true(readable(exit_sub_fd(sub)));
        assert_int_equal(exit_sub_recv(sub, &ev, WAIT_MS), -EPIPE);
        assert_int_equal(exit_sub_recv_batch(sub, &ev, 1, -1), -EPIPE);
        assert_true(readable(exit_sub_fd(sub)));

        assert_true(readable(own_fd));
        assert_int_equal(exit_watch_result(own, &r), -EPIPE);
        assert_int_equal(exit_watch_wait(own, WAIT_MS, &r), -EPIPE);
        assert_true(readable(exit_watch_set_fd(set)));
        assert_int_equal(exit_watch_set_next(set, &popped), 0);
        assert_ptr_equal(popped, in_set);
        assert_int_equal(exit_watch_result(in_set, &r), -EPIPE);
        assert_false(readable(exit_watch_set_fd(set)));
        assert_int_equal(exit_watch_set_next(set, &popped), -EAGAIN);

        exit_watch_free(own);
        exit_watch_free(in_set);
        exit_watch_set_free(set);
        exit_sub_free(sub); /* the last reference: the hub's memory goes here */
}

static void test_sub_fd_readable_exactly_when_receivable(void **state) {
        struct exit_hub *hub = hub_new(2, 0);
        struct exit_sub *sub;
        struct exit_event evs[4];
        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);
        int fd = exit_sub_fd(sub);
        exit_id_t ids[8];
        for (int i = 0; i < 8; i++)
                ids[i] = reg(hub, 200 + i);

        assert_false(readable(fd));
        assert_int_equal(exit_sub_recv(sub, evs, 0), -ETIMEDOUT);
        publish(hub, ids[0], 0);
        assert_true(readable(fd));
        publish(hub, ids[1], 1);
        assert_true(readable(fd));
        assert_int_equal(exit_sub_recv(sub, evs, 0), 0);
        assert_true(readable(fd));
        assert_int_equal(exit_sub_recv(sub, evs, 0), 0);
        assert_false(readable(fd));
        assert_int_equal(exit_sub_recv(sub, evs, 0), -ETIMEDOUT);

        for (int i = 2; i < 5; i++) /* one more than fits */
                publish(hub, ids[i], i);
        assert_true(readable(fd));
        assert_int_equal(exit_sub_recv_batch(sub, evs, ELEMENTSOF(evs), 0), 1);
        assert_int_equal(evs[0].type, EXIT_EVENT_LAGGED);
        assert_false(readable(fd));

        publish(hub, ids[5], 5);
        publish(hub, ids[6], 6);
        assert_true(readable(fd));
        assert_int_equal(exit_sub_recv_batch(sub, evs, ELEMENTSOF(evs), 0), 2);
        assert_int_equal(evs[0].id, ids[5]);
        assert_int_equal(evs[1].id, ids[6]);
        assert_false(readable(fd));

        publish(hub, ids[7], 7);
        exit_hub_unref(hub); /* closed with one event queued */
        assert_true(readable(fd));
        assert_int_equal(exit_sub_recv(sub, evs, 0), 0);
        assert_int_equal(evs[0].id, ids[7]);
        assert_true(readable(fd)); /* closed and drained: a receive answers -EPIPE at once */
        assert_int_equal(exit_sub_recv(sub, evs, 0), -EPIPE);
        assert_true(readable(fd));
        exit_sub_free(sub);
}

static void test_recv_batch_order_and_limits(void **state) {
        struct exit_hub *hub = hub_new(4, 0);
        struct exit_sub *sub;
        struct exit_event evs[8];
        exit_id_t ids[6];
        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);
        /* Wrap the ring: 3 in, 3 out, then 4 in across the end. */
        for (int i = 0; i < 6; i++)
                ids[i] = reg(hub, 300 + i);
        for (int i = 0; i < 3; i++)
                publish(hub, ids[i], i);
        assert_int_equal(exit_sub_recv_batch(sub, evs, 8, 0), 3);
        for (int i = 0; i < 3; i++)
                assert_int_equal(evs[i].id, ids[i]);
        for (int i = 3; i < 6; i++)
                publish(hub, ids[i], i);
        struct exit_reason r = exited(0);
        exit_id_t orphan;
        assert_int_equal(exit_hub_publish_orphan(hub, 4242, &r, &orphan), 0);
        assert_int_equal(exit_sub_recv_batch(sub, evs, 2, 0), 2);
        assert_int_equal(evs[0].id, ids[3]);
        assert_int_equal(evs[1].id, ids[4]);
        assert_int_equal(exit_sub_recv_batch(sub, evs, 8, 0), 2);
        assert_int_equal(evs[0].id, ids[5]);
        assert_int_equal(evs[0].pid, 305);
        assert_int_equal(evs[0].flags, 0);
        assert_int_equal(evs[1].id, orphan);
        assert_int_equal(evs[1].flags, EXIT_EVENT_ORPHAN);
        assert_int_equal(evs[1].pid, 4242);
        assert_int_equal(exit_sub_recv_batch(sub, evs, 8, 0), -ETIMEDOUT);
        exit_sub_free(sub);
        exit_hub_unref(hub);
}

static usec_t elapsed_since(usec_t start) {
        return now_usec(CLOCK_MONOTONIC) - start;
}

static void test_recv_timeout_blocks_then_times_out(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_sub *sub;
        struct exit_event ev;
        struct exit_watch *w;
        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);

        usec_t start = now_usec(CLOCK_MONOTONIC);
        assert_int_equal(exit_sub_recv(sub, &ev, 150), -ETIMEDOUT);
        usec_t took = elapsed_since(start);
        assert_true(took >= 150 * USEC_PER_MSEC);
        if (took > WAIT_MS * USEC_PER_MSEC)
                fail_msg("a 150 ms receive took %" PRIu64 " us: the deadline is not honoured", took);

        exit_id_t id = reg(hub, 20);
        assert_int_equal(exit_hub_watch(hub, id, NULL, NULL, &w, NULL), EXIT_WATCH_LIVE);
        start = now_usec(CLOCK_MONOTONIC);
        assert_int_equal(exit_watch_wait(w, 100, NULL), -ETIMEDOUT);
        assert_true(elapsed_since(start) >= 100 * USEC_PER_MSEC);
        assert_int_equal(exit_watch_wait(w, 0, NULL), -ETIMEDOUT);
        assert_int_equal(exit_watch_result(w, NULL), -EAGAIN);
        exit_watch_free(w);
        exit_sub_free(sub);
        exit_hub_unref(hub);
}

struct waker {
        struct exit_hub *hub;
        exit_id_t id;
        struct gate *gate;
        int result;
};

static void *publish_after_gate(void *arg) {
        struct waker *w = arg;
        struct exit_reason r = killed(9);
        if (!gate_wait(w->gate))
                return NULL;
        w->result = exit_hub_publish(w->hub, w->id, &r);
        return NULL;
}

/* The blocking receive and watch wait are woken by a publish on another thread. */
static void test_blocking_receive_and_wait_are_woken(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_sub *sub;
        struct exit_watch *w;
        struct exit_reason r;
        struct gate gate;
        gate_init(&gate, 2);
        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);
        struct waker wk = { .hub = hub, .id = reg(hub, 30), .gate = &gate, .result = 1 };
        assert_int_equal(exit_hub_watch(hub, wk.id, NULL, NULL, &w, NULL), EXIT_WATCH_LIVE);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, publish_after_gate, &wk), 0);
        gate_wait_main(&gate);

        struct exit_event ev = recv_event(sub);
        assert_int_equal(ev.type, EXIT_EVENT_EXIT);
        assert_int_equal(ev.reason.kind, EXIT_REASON_KILLED);
        assert_int_equal(ev.reason.status, 9);
        int rc = exit_watch_wait(w, WAIT_MS, &r);
        if (rc == -ETIMEDOUT)
                fail_msg("watch not fired within %d ms: watch_cond not broadcast on fire", WAIT_MS);
        assert_int_equal(rc, 0);
        assert_int_equal(r.status, 9);
        join_bounded(t);
        assert_int_equal(wk.result, 0);
        assert_int_equal(exit_hub_take(hub, wk.id, &r), 0);
        exit_watch_free(w);
        exit_sub_free(sub);
        exit_hub_unref(hub);
        gate_destroy(&gate);
}

/* ------------------------------------------------------------------------ */
/* The ledger                                                                */
/* ------------------------------------------------------------------------ */

static void test_take_errors_and_orphans(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_reason r = killed(15), got;
        exit_id_t id = reg(hub, 40), orphan;
        assert_int_equal(exit_hub_take(hub, id, &got), -EINPROGRESS);
        assert_int_equal(exit_hub_take(hub, 999, &got), -ENOENT);
        assert_int_equal(exit_hub_publish(hub, id, &r), 0);
        assert_int_equal(exit_hub_take(hub, id, &got), 0);
        assert_int_equal(got.kind, EXIT_REASON_KILLED);
        assert_int_equal(got.status, 15);
        assert_int_equal(exit_hub_take(hub, id, &got), -EALREADY);

        assert_int_equal(exit_hub_publish_orphan(hub, 41, &r, &orphan), 0);
        assert_true(orphan > id);
        assert_int_equal(exit_hub_take(hub, orphan, &got), -EPERM);
        exit_id_t mapped;
        assert_int_equal(exit_hub_pid_to_id(hub, 41, &mapped), -ESRCH); /* an orphan was never live */
        struct exit_watch *w = (void *) 1;
        assert_int_equal(exit_hub_watch(hub, orphan, NULL, NULL, &w, &got), EXIT_WATCH_ALREADY_EXITED);
        assert_null(w);
        assert_int_equal(got.status, 15);
        assert_int_equal(exit_hub_durable_records(hub), 2);
        exit_hub_unref(hub);
}

/* exit_hub_orphan_find: an orphan's status by pid, only after the given id:
 * Type=forking reads its daemon's pid once the start process exited, and
 * that start process (spawned before, exiting after) has the smaller id. */
static void test_orphan_find(void **state) {
        struct exit_hub *hub = hub_new(0, 4);
        struct exit_reason r7 = { .kind = EXIT_REASON_EXITED, .status = 7 }, r9 = killed(9), got;
        assert_int_equal(exit_hub_publish_orphan(hub, 50, &r9, NULL), 0); /* before the start: not it */
        exit_id_t start = reg(hub, 60);
        assert_int_equal(exit_hub_orphan_find(hub, 50, start, &got), -ENOENT);
        assert_int_equal(exit_hub_publish_orphan(hub, 50, &r7, NULL), 0); /* the daemon, recycled pid 50 */
        publish(hub, start, 0);                                              /* then the start process */
        assert_int_equal(exit_hub_orphan_find(hub, 50, start, &got), 0);
        assert_int_equal(got.kind, EXIT_REASON_EXITED);
        assert_int_equal(got.status, 7);
        assert_int_equal(exit_hub_orphan_find(hub, 60, 0, &got), -ENOENT); /* not an orphan */
        assert_int_equal(exit_hub_orphan_find(hub, 51, start, &got), -ENOENT);
        assert_int_equal(exit_hub_orphan_find(hub, 50, 0, &got), 0);
        assert_int_equal(got.status, 7); /* the newest */
        /* Evicted by record_capacity (4) later exits: gone. */
        for (pid_t p = 70; p < 74; p++)
                assert_int_equal(exit_hub_publish_orphan(hub, p, &r9, NULL), 0);
        assert_int_equal(exit_hub_orphan_find(hub, 50, start, &got), -ENOENT);
        assert_int_equal(exit_hub_orphan_find(hub, 73, start, &got), 0);
        assert_int_equal(exit_hub_orphan_find(hub, 0, start, &got), -EINVAL);
        exit_hub_unref(hub);
}

struct takers {
        struct exit_hub *hub;
        struct gate start, done;
        exit_id_t id;
        int results[8];
        struct exit_reason reasons[8];
        unsigned iterations;
};

struct taker_arg {
        struct takers *t;
        int index;
};

static void *taker(void *arg) {
        struct taker_arg *a = arg;
        struct takers *t = a->t;
        for (unsigned i = 0; i < t->iterations; i++) {
                if (!gate_wait(&t->start))
                        return NULL;
                t->results[a->index] = exit_hub_take(t->hub, t->id, &t->reasons[a->index]);
                if (!gate_wait(&t->done))
                        return NULL;
        }
        return NULL;
}

static void test_take_exactly_once_under_8_threads(void **state) {
        struct takers t = { .hub = hub_new(0, 0), .iterations = RACE_ITERATIONS };
        struct taker_arg args[8];
        pthread_t threads[8];
        gate_init(&t.start, 9);
        gate_init(&t.done, 9);
        for (int i = 0; i < 8; i++) {
                args[i] = (struct taker_arg) { .t = &t, .index = i };
                assert_int_equal(pthread_create(&threads[i], NULL, taker, &args[i]), 0);
        }
        for (unsigned it = 0; it < t.iterations; it++) {
                t.id = reg(t.hub, (pid_t) (it % 1000 + 2));
                publish(t.hub, t.id, (int) (it & 0xff));
                gate_wait_main(&t.start);
                gate_wait_main(&t.done);
                int zeros = 0, already = 0;
                for (int i = 0; i < 8; i++) {
                        if (t.results[i] == 0) {
                                zeros++;
                                assert_int_equal(t.reasons[i].status, (int) (it & 0xff));
                        } else if (t.results[i] == -EALREADY)
                                already++;
                }
                if (zeros != 1 || already != 7)
                        fail_msg("iteration %u: %d takers got 0 and %d -EALREADY (want 1 and 7)", it, zeros, already);
        }
        for (int i = 0; i < 8; i++)
                join_bounded(threads[i]);
        assert_int_equal(exit_hub_ledger_entries(t.hub), 0);
        exit_hub_unref(t.hub);
        gate_destroy(&t.start);
        gate_destroy(&t.done);
}

/* A reused pid: the old outcome stays with the old id; the pid maps to the new one. */
static void test_reused_pid_keeps_old_outcome(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_watch *w;
        struct exit_reason got;
        exit_id_t old = reg(hub, 500), found;
        assert_int_equal(exit_hub_pid_to_id(hub, 500, &found), 0);
        assert_int_equal(found, old);
        publish(hub, old, 4);
        assert_int_equal(exit_hub_pid_to_id(hub, 500, &found), -ESRCH);

        exit_id_t new = reg(hub, 500);
        assert_true(new != old);
        assert_int_equal(exit_hub_pid_to_id(hub, 500, &found), 0);
        assert_int_equal(found, new);
        assert_int_equal(exit_hub_watch(hub, new, NULL, NULL, &w, NULL), EXIT_WATCH_LIVE);
        assert_int_equal(exit_watch_id(w), new);
        assert_int_equal(exit_hub_watch(hub, old, NULL, NULL, &(struct exit_watch *) { NULL }, &got),
                         EXIT_WATCH_ALREADY_EXITED);
        assert_int_equal(got.status, 4);
        take_expect(hub, old, 4);
        assert_int_equal(exit_hub_take(hub, new, &got), -EINPROGRESS);
        assert_int_equal(exit_watch_result(w, NULL), -EAGAIN);
        publish(hub, new, 5);
        assert_int_equal(exit_watch_result(w, &got), 0);
        assert_int_equal(got.status, 5);
        take_expect(hub, new, 5);
        exit_watch_free(w);
        exit_hub_unref(hub);
}

static void test_durable_records_bounded_oldest_evicted(void **state) {
        struct exit_hub *hub = hub_new(0, 2);
        struct exit_watch *w = NULL;
        struct exit_reason got;
        exit_id_t ids[4];
        for (int i = 0; i < 4; i++)
                ids[i] = reg(hub, 600 + i);
        for (int i = 0; i < 3; i++)
                publish(hub, ids[i], 10 + i);
        assert_int_equal(exit_hub_durable_records(hub), 2);
        for (int i = 1; i < 3; i++)
                take_expect(hub, ids[i], 10 + i);

        /* ids[0]'s record is evicted but its outcome is untaken: the ledger still answers. */
        assert_int_equal(exit_hub_watch(hub, ids[0], NULL, NULL, &w, &got), EXIT_WATCH_ALREADY_EXITED);
        assert_int_equal(got.status, 10);
        take_expect(hub, ids[0], 10);
        /* Taken and evicted: nothing is left, so nothing is armed. */
        assert_int_equal(exit_hub_watch(hub, ids[0], NULL, NULL, &w, &got), EXIT_WATCH_NO_RECORD);
        assert_null(w);
        assert_int_equal(exit_hub_take(hub, ids[0], &got), -ENOENT);
        assert_int_equal(exit_hub_take(hub, ids[1], &got), -EALREADY);

        publish(hub, ids[3], 13); /* evicts ids[1] */
        assert_int_equal(exit_hub_watch(hub, ids[1], NULL, NULL, &w, &got), EXIT_WATCH_NO_RECORD);
        assert_int_equal(exit_hub_watch(hub, ids[2], NULL, NULL, &w, &got), EXIT_WATCH_ALREADY_EXITED);
        assert_int_equal(got.status, 12);
        assert_int_equal(exit_hub_armed_watches(hub), 0);
        take_expect(hub, ids[3], 13);
        exit_hub_unref(hub);
}

/* ------------------------------------------------------------------------ */
/* Watches                                                                   */
/* ------------------------------------------------------------------------ */

static void test_watch_three_states(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_watch *live, *reserved_w, *w = (void *) 1;
        struct exit_reason got = {};
        int dummy;
        exit_id_t id = reg(hub, 700), rid;
        assert_int_equal(exit_hub_reserve(hub, &rid), 0);

        assert_int_equal(exit_hub_watch(hub, id, NULL, &dummy, &live, NULL), EXIT_WATCH_LIVE);
        assert_ptr_equal(exit_watch_userdata(live), &dummy);
        assert_int_equal(exit_hub_watch(hub, rid, NULL, NULL, &reserved_w, NULL), EXIT_WATCH_LIVE);
        assert_int_equal(exit_hub_watch(hub, 12345, NULL, NULL, &w, &got), EXIT_WATCH_NO_RECORD);
        assert_null(w);
        assert_int_equal(exit_hub_armed_watches(hub), 2);

        int fd = exit_watch_fd(live);
        assert_true(fd >= 0);
        assert_int_equal(exit_watch_fd(live), fd); /* created once */
        assert_false(readable(fd));
        publish(hub, id, 3);
        assert_true(readable(fd));
        assert_int_equal(exit_watch_result(live, &got), 0);
        assert_int_equal(got.status, 3);
        assert_int_equal(exit_hub_watch(hub, id, NULL, NULL, &w, &got), EXIT_WATCH_ALREADY_EXITED);
        assert_null(w);
        /* Notification-only: the outcome is still there to take. */
        take_expect(hub, id, 3);
        assert_int_equal(exit_hub_watch(hub, id, NULL, NULL, &w, NULL), EXIT_WATCH_ALREADY_EXITED);

        /* Unreserve answers a reserved process's watches -ESRCH; its id then has no record. */
        assert_int_equal(exit_hub_unreserve(hub, rid), 0);
        assert_int_equal(exit_watch_result(reserved_w, NULL), -ESRCH);
        int rfd = exit_watch_fd(reserved_w); /* created after the answer: readable at once */
        assert_true(readable(rfd));
        assert_int_equal(exit_hub_watch(hub, rid, NULL, NULL, &w, NULL), EXIT_WATCH_NO_RECORD);
        assert_int_equal(exit_hub_armed_watches(hub), 0);

        exit_watch_free(live);
        exit_watch_free(reserved_w);
        exit_hub_unref(hub);
}

static void test_free_unfired_watch_deregisters(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_watch_set *set;
        struct exit_watch *a, *b, *c;
        assert_int_equal(exit_watch_set_new(hub, &set), 0);
        exit_id_t id = reg(hub, 800);
        assert_int_equal(exit_hub_watch(hub, id, NULL, NULL, &a, NULL), EXIT_WATCH_LIVE);
        assert_true(exit_watch_fd(a) >= 0);
        assert_int_equal(exit_hub_watch(hub, id, set, NULL, &b, NULL), EXIT_WATCH_LIVE);
        assert_int_equal(exit_hub_watch(hub, id, set, NULL, &c, NULL), EXIT_WATCH_LIVE);
        assert_int_equal(exit_hub_armed_watches(hub), 3);
        exit_watch_free(b);
        assert_int_equal(exit_hub_armed_watches(hub), 2);
        exit_watch_free(a);
        exit_watch_free(c);
        assert_int_equal(exit_hub_armed_watches(hub), 0);

        publish(hub, id, 0);
        assert_false(readable(exit_watch_set_fd(set)));
        struct exit_watch *popped;
        assert_int_equal(exit_watch_set_next(set, &popped), -EAGAIN);
        take_expect(hub, id, 0);
        exit_watch_set_free(set);
        exit_hub_unref(hub);
}

/* Set fd readable exactly when next() would return a watch, at every step. */
static void assert_set_consistent(struct exit_watch_set *set, bool expect_ready) {
        assert_int_equal(readable(exit_watch_set_fd(set)), expect_ready);
}

static void test_many_watches_fire_only_their_process(void **state) {
        enum { N = 100 };
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_watch_set *set;
        struct exit_watch *ws[N], *other, *popped;
        bool seen[N] = {};
        assert_int_equal(exit_watch_set_new(hub, &set), 0);
        exit_id_t a = reg(hub, 900), b = reg(hub, 901);
        for (intptr_t i = 0; i < N; i++)
                assert_int_equal(exit_hub_watch(hub, a, set, (void *) i, &ws[i], NULL), EXIT_WATCH_LIVE);
        assert_int_equal(exit_hub_watch(hub, b, set, NULL, &other, NULL), EXIT_WATCH_LIVE);
        assert_set_consistent(set, false);

        publish(hub, a, 1);
        assert_int_equal(exit_hub_armed_watches(hub), 1);
        for (int i = 0; i < N; i++) {
                assert_set_consistent(set, true);
                assert_int_equal(exit_watch_set_next(set, &popped), 0);
                intptr_t k = (intptr_t) exit_watch_userdata(popped);
                assert_ptr_equal(popped, ws[k]);
                assert_false(seen[k]);
                seen[k] = true;
                assert_int_equal(exit_watch_result(popped, NULL), 0);
        }
        assert_set_consistent(set, false);
        assert_int_equal(exit_watch_set_next(set, &popped), -EAGAIN);
        assert_int_equal(exit_watch_result(other, NULL), -EAGAIN);

        /* Freeing a fired, unpopped watch takes it off the ready list (and the fd down). */
        publish(hub, b, 2);
        assert_set_consistent(set, true);
        exit_watch_free(other);
        assert_set_consistent(set, false);
        assert_int_equal(exit_watch_set_next(set, &popped), -EAGAIN);

        for (int i = 0; i < N; i++)
                exit_watch_free(ws[i]);
        take_expect(hub, a, 1);
        take_expect(hub, b, 2);
        exit_watch_set_free(set);
        exit_hub_unref(hub);
}

static void test_set_freed_before_its_watches(void **state) {
        struct exit_hub *hub = hub_new(0, 0);
        struct exit_watch_set *set;
        struct exit_watch *fired, *armed;
        struct exit_reason got;
        assert_int_equal(exit_watch_set_new(hub, &set), 0);
        exit_id_t a = reg(hub, 950), b = reg(hub, 951);
        assert_int_equal(exit_hub_watch(hub, a, set, NULL, &fired, NULL), EXIT_WATCH_LIVE);
        assert_int_equal(exit_hub_watch(hub, b, set, NULL, &armed, NULL), EXIT_WATCH_LIVE);
        publish(hub, a, 1);
        exit_watch_set_free(set);
        /* Detached: they still report through result/wait. */
        publish(hub, b, 2);
        assert_int_equal(exit_watch_result(fired, &got), 0);
        assert_int_equal(got.status, 1);
        assert_int_equal(exit_watch_wait(armed, WAIT_MS, &got), 0);
        assert_int_equal(got.status, 2);
        assert_int_equal(exit_watch_fd(armed), -EINVAL);
        exit_watch_free(fired);
        exit_watch_free(armed);
        exit_hub_unref(hub);
}

struct race {
        struct exit_hub *hub;
        struct exit_watch_set *set;
        struct gate start, done;
        exit_id_t id;
        bool use_set;
        unsigned iterations;
        int publish_result, watch_result;
        struct exit_watch *watch;
        struct exit_reason reason;
};

static void *race_publisher(void *arg) {
        struct race *r = arg;
        for (unsigned i = 0; i < r->iterations; i++) {
                struct exit_reason reason = exited(42);
                if (!gate_wait(&r->start))
                        return NULL;
                r->publish_result = exit_hub_publish(r->hub, r->id, &reason);
                if (!gate_wait(&r->done))
                        return NULL;
        }
        return NULL;
}

static void *race_watcher(void *arg) {
        struct race *r = arg;
        for (unsigned i = 0; i < r->iterations; i++) {
                if (!gate_wait(&r->start))
                        return NULL;
                r->reason = (struct exit_reason) {};
                r->watch_result = exit_hub_watch(r->hub, r->id, r->use_set ? r->set : NULL, NULL, &r->watch, &r->reason);
                if (!gate_wait(&r->done))
                        return NULL;
        }
        return NULL;
}

/* Checks one iteration: the watch was answered exactly once, at registration or by one fire. */
static void race_check(struct race *r, unsigned *live, unsigned *already) {
        struct exit_watch *popped;
        assert_int_equal(r->publish_result, 0);
        if (r->watch_result == EXIT_WATCH_ALREADY_EXITED) {
                assert_null(r->watch);
                assert_int_equal(r->reason.status, 42);
                assert_int_equal(exit_watch_set_next(r->set, &popped), -EAGAIN);
                (*already)++;
                return;
        }
        assert_int_equal(r->watch_result, EXIT_WATCH_LIVE);
        assert_int_equal(exit_watch_result(r->watch, &r->reason), 0);
        assert_int_equal(r->reason.status, 42);
        if (r->use_set) {
                assert_int_equal(exit_watch_set_next(r->set, &popped), 0);
                assert_ptr_equal(popped, r->watch);
                assert_int_equal(exit_watch_set_next(r->set, &popped), -EAGAIN);
                assert_false(readable(exit_watch_set_fd(r->set)));
        } else {
                eventfd_t v = 0;
                assert_int_equal(eventfd_read(exit_watch_fd(r->watch), &v), 0);
                assert_int_equal(v, 1); /* one fire, one wake-up */
        }
        r->watch = exit_watch_free(r->watch);
        (*live)++;
}

static void test_fire_racing_registration_answers_once(void **state) {
        struct race r = { .hub = hub_new(0, 0), .iterations = RACE_ITERATIONS };
        unsigned live = 0, already = 0;
        pthread_t tp, tw;
        assert_int_equal(exit_watch_set_new(r.hub, &r.set), 0);
        gate_init(&r.start, 3);
        gate_init(&r.done, 3);
        assert_int_equal(pthread_create(&tp, NULL, race_publisher, &r), 0);
        assert_int_equal(pthread_create(&tw, NULL, race_watcher, &r), 0);
        for (unsigned it = 0; it < r.iterations; it++) {
                r.id = reg(r.hub, 1234);
                r.use_set = it & 1;
                gate_wait_main(&r.start);
                gate_wait_main(&r.done);
                race_check(&r, &live, &already);
                take_expect(r.hub, r.id, 42);
                assert_int_equal(exit_hub_armed_watches(r.hub), 0);
        }
        join_bounded(tp);
        join_bounded(tw);
        fprintf(stdout, "race: %u LIVE then fired, %u ALREADY_EXITED\n", live, already);
        exit_watch_set_free(r.set);
        exit_hub_unref(r.hub);
        gate_destroy(&r.start);
        gate_destroy(&r.done);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, fixture_setup, fixture_teardown)
        const struct CMUnitTest tests[] = {
                T(test_ids_start_at_one_and_are_never_reused),
                T(test_registration_errors),
                T(test_invalid_arguments),
                T(test_ref_unref_closes_on_last_owner),
                T(test_overflow_gives_one_lagged_then_recovers),
                T(test_publish_racing_lagged_discard_is_kept),
                T(test_lagged_stress_no_silent_gap),
                T(test_subscribe_once_per_hub_lifetime),
                T(test_close_drains_then_epipe),
                T(test_sub_fd_readable_exactly_when_receivable),
                T(test_recv_batch_order_and_limits),
                T(test_recv_timeout_blocks_then_times_out),
                T(test_blocking_receive_and_wait_are_woken),
                T(test_take_errors_and_orphans),
                T(test_orphan_find),
                T(test_take_exactly_once_under_8_threads),
                T(test_reused_pid_keeps_old_outcome),
                T(test_durable_records_bounded_oldest_evicted),
                T(test_watch_three_states),
                T(test_free_unfired_watch_deregisters),
                T(test_many_watches_fire_only_their_process),
                T(test_set_freed_before_its_watches),
                T(test_fire_racing_registration_answers_once),
        };
#undef T
        return cmocka_run_group_tests(tests, NULL, NULL);
}
