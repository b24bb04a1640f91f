/* SPDX-License-Identifier: MIT */
/*
 * Leased store benchmark (SPEC §2.4; results in docs/benchmarks.md, "leased
 * store"). At tend's scale — 1,000 keys of ~200-byte JSON — it measures get,
 * create, CAS update and delete per second in the durable keyspace, lease
 * refreshes in the ephemeral one (heap fix + timerfd re-arm on the real
 * clock), and a watch fan-out: one writer thread, 100 watchers drained by one
 * consumer thread through epoll on their eventfds (events delivered per
 * second). Each figure is the best of 3 runs.
 *
 * --quick (CI): a few iterations, one run, nothing judged. Exit 1 only on an
 * error (an unexpected answer, a lagged watcher).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "store.h"

#define N_KEYS 1000
#define N_WATCHERS 100

static bool quick;

struct result {
        const char *name;
        uint64_t ops;
        usec_t usec;
};

static _Noreturn void die(const char *what, int r) {
        fprintf(stderr, "bench-store: %s: %s\n", what, r < 0 ? strerror(-r) : "unexpected answer");
        exit(1);
}

static void check(const char *what, int r, int want) {
        if (r != want)
                die(what, r);
}

static char value[200];
static char keys[N_KEYS][32];
static unsigned order[N_KEYS]; /* a fixed shuffle: inserts land all over the array */

static void init_data(void) {
        unsigned seed = 42;

        memset(value, 'x', sizeof(value));
        memcpy(value, "{\"state\":\"running\",\"main_pid\":1234,", 36);
        value[sizeof(value) - 1] = '}';
        for (unsigned i = 0; i < N_KEYS; i++) {
                snprintf(keys[i], sizeof(keys[i]), "service/unit-%04u", i);
                order[i] = i;
        }
        for (unsigned i = N_KEYS - 1; i > 0; i--) {
                seed = seed * 1103515245u + 12345u;
                unsigned j = (seed >> 8) % (i + 1), t = order[i];
                order[i] = order[j];
                order[j] = t;
        }
}

static struct store *new_store(uint32_t queue_capacity) {
        struct store_options o = { .watch_queue_capacity = queue_capacity };
        struct store *s;
        check("store_new", store_new(&o, &s), 0);
        return s;
}

static void fill(struct store *s, enum store_keyspace ks, uint64_t *revs) {
        for (unsigned i = 0; i < N_KEYS; i++)
                check("create", store_create(s, ks, keys[order[i]], value, sizeof(value),
                                             ks == STORE_EPHEMERAL ? 60 * USEC_PER_SEC : 0,
                                             &revs[order[i]]), 1);
}

/* ------------------------------------------------------------------------ */

static struct result bench_get(unsigned rounds) {
        struct store *s = new_store(0);
        uint64_t revs[N_KEYS];
        usec_t t0;

        fill(s, STORE_DURABLE, revs);
        t0 = now_usec(CLOCK_MONOTONIC);
        for (unsigned r = 0; r < rounds; r++)
                for (unsigned i = 0; i < N_KEYS; i++) {
                        struct store_event *ev;
                        check("get", store_get(s, STORE_DURABLE, keys[order[i]], &ev), 0);
                        store_event_unref(ev);
                }
        struct result res = { "get (durable)", (uint64_t) rounds * N_KEYS, now_usec(CLOCK_MONOTONIC) - t0 };
        store_unref(s);
        return res;
}

/* create and delete, timed separately: each round fills 1,000 keys in
 * shuffled order and deletes them again. */
static void bench_create_delete(unsigned rounds, struct result *create, struct result *del) {
        struct store *s = new_store(0);
        uint64_t revs[N_KEYS];

        *create = (struct result) { "create (durable)", 0, 0 };
        *del = (struct result) { "delete, guarded (durable)", 0, 0 };
        for (unsigned r = 0; r < rounds; r++) {
                usec_t t0 = now_usec(CLOCK_MONOTONIC);
                fill(s, STORE_DURABLE, revs);
                usec_t t1 = now_usec(CLOCK_MONOTONIC);
                for (unsigned i = 0; i < N_KEYS; i++)
                        check("delete", store_delete(s, STORE_DURABLE, keys[order[i]], revs[order[i]], NULL), 1);
                usec_t t2 = now_usec(CLOCK_MONOTONIC);
                create->ops += N_KEYS;
                create->usec += t1 - t0;
                del->ops += N_KEYS;
                del->usec += t2 - t1;
        }
        store_unref(s);
}

static struct result bench_update(enum store_keyspace ks, unsigned rounds) {
        struct store *s = new_store(0);
        uint64_t revs[N_KEYS];
        usec_t t0, ttl = ks == STORE_EPHEMERAL ? 60 * USEC_PER_SEC : 0;

        fill(s, ks, revs);
        t0 = now_usec(CLOCK_MONOTONIC);
        for (unsigned r = 0; r < rounds; r++)
                for (unsigned i = 0; i < N_KEYS; i++) {
                        unsigned k = order[i];
                        check("update", store_update(s, ks, keys[k], value, sizeof(value), revs[k], ttl,
                                                     &revs[k]), 1);
                }
        struct result res = {
                ks == STORE_EPHEMERAL ? "lease refresh (ephemeral, timerfd)" : "update CAS (durable)",
                (uint64_t) rounds * N_KEYS, now_usec(CLOCK_MONOTONIC) - t0,
        };
        store_unref(s);
        return res;
}

/* ------------------------------------------------------------------------ */
/* Watch fan-out                                                             */
/* ------------------------------------------------------------------------ */

struct fanout {
        struct store *s;
        struct store_watch *w[N_WATCHERS];
        uint64_t revs[N_KEYS]; /* the writer's: each key's current revision */
        uint64_t writes, delivered;
        usec_t start, end;
};

static void *writer_thread(void *userdata) {
        struct fanout *f = userdata;
        uint64_t *revs = f->revs;

        f->start = now_usec(CLOCK_MONOTONIC);
        for (uint64_t n = 0; n < f->writes; n++) {
                unsigned k = order[n % N_KEYS];
                check("update", store_update(f->s, STORE_DURABLE, keys[k], value, sizeof(value), revs[k],
                                             0, &revs[k]), 1);
        }
        return NULL;
}

/* Drains every watcher whose eventfd is readable until each has seen all the
 * writes: what an event loop serving 100 `tendctl watch` clients does. */
static void consume(struct fanout *f, int epfd) {
        uint64_t want = f->writes * N_WATCHERS;
        struct epoll_event evs[N_WATCHERS];

        while (f->delivered < want) {
                int n = epoll_wait(epfd, evs, N_WATCHERS, 10000);
                if (n <= 0)
                        die("epoll_wait (no watcher readable for 10 s)", n < 0 ? -errno : -ETIMEDOUT);
                for (int i = 0; i < n; i++) {
                        struct store_watch *w = evs[i].data.ptr;
                        struct store_event *ev;
                        int r;
                        while ((r = store_watch_next(w, &ev)) == 0) {
                                if (ev->type == STORE_EVENT_PUT)
                                        f->delivered++;
                                store_event_unref(ev);
                        }
                        if (r != -EAGAIN)
                                die("store_watch_next (watcher lagged?)", r);
                }
        }
        f->end = now_usec(CLOCK_MONOTONIC);
}

static struct result bench_fanout(uint64_t writes) {
        static struct fanout f;
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        pthread_t t;

        if (epfd < 0)
                die("epoll_create1", -errno);
        f = (struct fanout) { .s = new_store((uint32_t) writes + 16), .writes = writes };
        fill(f.s, STORE_DURABLE, f.revs);
        for (unsigned i = 0; i < N_WATCHERS; i++) {
                struct store_event *ev;
                struct epoll_event e = { .events = EPOLLIN };
                check("watch", store_watch(f.s, STORE_DURABLE, "service/", &f.w[i]), 0);
                while (store_watch_next(f.w[i], &ev) == 0) /* the snapshot: not counted */
                        store_event_unref(ev);
                e.data.ptr = f.w[i];
                if (epoll_ctl(epfd, EPOLL_CTL_ADD, store_watch_fd(f.w[i]), &e) < 0)
                        die("epoll_ctl", -errno);
        }

        check("pthread_create", -pthread_create(&t, NULL, writer_thread, &f), 0);
        consume(&f, epfd);
        pthread_join(t, NULL);

        for (unsigned i = 0; i < N_WATCHERS; i++)
                store_watch_free(f.w[i]);
        safe_close(epfd);
        store_unref(f.s);
        return (struct result) { "watch fan-out x100 (events delivered)", f.delivered, f.end - f.start };
}

/* ------------------------------------------------------------------------ */

static void keep_best(struct result *best, struct result r) {
        if (best->ops == 0 || (double) r.ops / (double) r.usec > (double) best->ops / (double) best->usec)
                *best = r;
}

static void print_row(const struct result *r) {
        double sec = (double) (r->usec ?: 1) / 1e6;
        printf("%-40s %10" PRIu64 " %9.4f %12.0f %9.1f\n", r->name, r->ops, sec,
               (double) r->ops / sec, sec * 1e9 / (double) r->ops);
}

int main(int argc, char **argv) {
        struct result res[6] = {};
        unsigned reps = 3, rounds = 1000, update_rounds = 1000, create_rounds = 200;
        uint64_t fanout_writes = 50000;

        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--quick"))
                        quick = true;
                else {
                        fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
                        return 2;
                }
        }
        if (quick) {
                reps = 1;
                rounds = update_rounds = create_rounds = 2;
                fanout_writes = 500;
        }
        init_data();

        for (unsigned r = 0; r < reps; r++) {
                struct result c, d;
                keep_best(&res[0], bench_get(rounds));
                bench_create_delete(create_rounds, &c, &d);
                keep_best(&res[1], c);
                keep_best(&res[2], bench_update(STORE_DURABLE, update_rounds));
                keep_best(&res[3], d);
                keep_best(&res[4], bench_update(STORE_EPHEMERAL, update_rounds));
                keep_best(&res[5], bench_fanout(fanout_writes));
        }

        printf("leased store, in-memory backend: %u keys, %zu-byte values, best of %u%s\n", N_KEYS,
               sizeof(value), reps, quick ? " (quick: nothing judged)" : "");
        printf("%-40s %10s %9s %12s %9s\n", "operation", "ops", "seconds", "ops/s", "ns/op");
        for (size_t i = 0; i < ELEMENTSOF(res); i++)
                print_row(&res[i]);
        return 0;
}
