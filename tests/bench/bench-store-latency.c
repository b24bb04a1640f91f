/* SPDX-License-Identifier: MIT */
/*
 * The latency of each store operation (issue 20; docs/benchmarks.md "issue
 * 20: store on etcd"): p50 and p99 of N blocking calls each — create, get,
 * CAS update (durable), lease renewal (ephemeral update), list of 100 keys,
 * delete (durable and ephemeral), and a watch's delivery (a write to the
 * event seen by a watcher in another thread) — on the in-memory backend and,
 * when BENCH_ETCD_ENDPOINTS is set (bench-store-etcd.py starts an etcd), on
 * etcd. 200-byte values, as tend's unit records. --quick: 30 of each.
 * Exit 1 only on an unexpected answer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#ifdef HAVE_STORE_ETCD
#include "store-etcd.h"
#endif

static unsigned n_ops = 1000;
static char value[200];

static _Noreturn void die(const char *what, int r) {
        fprintf(stderr, "bench-store-latency: %s: %s\n", what,
                r < 0 ? strerror(-r) : "unexpected answer");
        exit(1);
}

/* Times are ns here: the in-memory operations take well under a µs. */
static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int cmp_usec(const void *a, const void *b) {
        usec_t x = *(const usec_t *) a, y = *(const usec_t *) b;
        return x < y ? -1 : x > y;
}

static void report(const char *backend, const char *op, usec_t *t, unsigned n) {
        qsort(t, n, sizeof(*t), cmp_usec);
        usec_t p50 = t[n / 2], p99 = t[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
        printf("%-8s %-24s p50 %9.2f µs   p99 %9.2f µs\n", backend, op, (double) p50 / 1000,
               (double) p99 / 1000);
}

#define TIME(t, expr)                                                    \
        do {                                                             \
                uint64_t _t0 = now_ns();                                 \
                expr;                                                    \
                (t) = now_ns() - _t0;                                    \
        } while (0)

static void bench_writes(struct store *s, const char *name, usec_t *t, uint64_t *revs) {
        char k[64];
        int r = 0;

        for (unsigned i = 0; i < n_ops; i++) {
                snprintf(k, sizeof(k), "service/u%05u", i);
                TIME(t[i], r = store_create(s, STORE_DURABLE, k, value, sizeof(value), 0, &revs[i]));
                if (r != 1)
                        die("create", r);
        }
        report(name, "create (durable)", t, n_ops);
        for (unsigned i = 0; i < n_ops; i++) {
                struct store_event *ev = NULL;
                snprintf(k, sizeof(k), "service/u%05u", i);
                TIME(t[i], r = store_get(s, STORE_DURABLE, k, &ev));
                if (r != 0)
                        die("get", r);
                store_event_unref(ev);
        }
        report(name, "get", t, n_ops);
        for (unsigned i = 0; i < n_ops; i++) {
                snprintf(k, sizeof(k), "service/u%05u", i);
                TIME(t[i], r = store_update(s, STORE_DURABLE, k, value, sizeof(value), revs[i], 0,
                                            &revs[i]));
                if (r != 1)
                        die("update", r);
        }
        report(name, "update (CAS)", t, n_ops);
        for (unsigned i = 0; i < n_ops; i++) {
                struct store_event **evs = NULL;
                size_t n = 0;
                snprintf(k, sizeof(k), "service/u%03u", i % 10); /* 100 keys each */
                TIME(t[i], r = store_list(s, STORE_DURABLE, k, &evs, &n));
                if (r < 0)
                        die("list", r);
                store_event_array_free(evs, n);
        }
        report(name, "list (100 keys)", t, n_ops);
        for (unsigned i = 0; i < n_ops; i++) {
                snprintf(k, sizeof(k), "service/u%05u", i);
                TIME(t[i], r = store_delete(s, STORE_DURABLE, k, revs[i], NULL));
                if (r != 1)
                        die("delete", r);
        }
        report(name, "delete (durable)", t, n_ops);
}

static void bench_leases(struct store *s, const char *name, usec_t *t, uint64_t *revs) {
        char k[64];
        int r = 0;
        usec_t ttl = 60 * USEC_PER_SEC;

        for (unsigned i = 0; i < n_ops; i++) {
                snprintf(k, sizeof(k), "watchdog/u%05u", i);
                TIME(t[i], r = store_create(s, STORE_EPHEMERAL, k, "1", 1, ttl, &revs[i]));
                if (r != 1)
                        die("create ephemeral", r);
        }
        report(name, "create (ephemeral)", t, n_ops);
        for (unsigned i = 0; i < n_ops; i++) {
                snprintf(k, sizeof(k), "watchdog/u%05u", i);
                TIME(t[i], r = store_update(s, STORE_EPHEMERAL, k, "1", 1, revs[i], ttl, &revs[i]));
                if (r != 1)
                        die("renew", r);
        }
        report(name, "renew (ephemeral upd.)", t, n_ops);
        for (unsigned i = 0; i < n_ops; i++) {
                snprintf(k, sizeof(k), "watchdog/u%05u", i);
                TIME(t[i], r = store_delete(s, STORE_EPHEMERAL, k, revs[i], NULL));
                if (r != 1)
                        die("delete ephemeral", r);
        }
        report(name, "delete (ephemeral)", t, n_ops);
}

/* Lease objects (docs/store.md §1.9): attach keys, one renewal, revoke them all. */
static void bench_lease_object(struct store *s, const char *name, usec_t *t) {
        struct store_lease *l = NULL;
        char k[64];
        int r = 0;

        TIME(t[0], r = store_lease_grant(s, 60 * USEC_PER_SEC, &l));
        if (r < 0)
                die("lease grant", r);
        for (unsigned i = 0; i < n_ops; i++) {
                snprintf(k, sizeof(k), "host/u%05u", i);
                TIME(t[i], r = store_create_leased(s, k, "1", 1, l, NULL));
                if (r != 1)
                        die("create leased", r);
        }
        report(name, "create (leased)", t, n_ops);
        for (unsigned i = 0; i < n_ops; i++) {
                TIME(t[i], r = store_lease_keep_alive(l, true));
                if (r < 0)
                        die("keep-alive", r);
        }
        report(name, "keep-alive (1 renewal)", t, n_ops);
        TIME(t[0], r = store_lease_revoke(l));
        if (r < 0)
                die("revoke", r);
        printf("%-8s %-24s %9.2f µs for %u keys\n", name, "revoke (lease + keys)", (double) t[0] / 1000,
               n_ops);
        store_lease_free(l);
}

/* A write until its PUT comes out of a watch (store_watch_wait: the consumer blocks). */
static void bench_watch(struct store *s, const char *name, usec_t *t) {
        struct store_watch *w = NULL;
        struct store_event *ev = NULL;
        uint64_t rev = 0;
        int r;

        r = store_watch(s, STORE_DURABLE, "w/", &w);
        if (r < 0)
                die("watch", r);
        if (store_watch_wait(w, 5 * USEC_PER_SEC, &ev) < 0)
                die("watch marker", -ETIMEDOUT);
        store_event_unref(ev);
        r = store_create(s, STORE_DURABLE, "w/k", "0", 1, 0, &rev);
        if (r != 1 || store_watch_wait(w, 5 * USEC_PER_SEC, &ev) < 0)
                die("watch create", r);
        store_event_unref(ev);
        for (unsigned i = 0; i < n_ops; i++) {
                uint64_t t0 = now_ns();
                r = store_update(s, STORE_DURABLE, "w/k", value, sizeof(value), rev, 0, &rev);
                if (r != 1)
                        die("watch update", r);
                r = store_watch_wait(w, 5 * USEC_PER_SEC, &ev);
                if (r < 0)
                        die("watch wait", r);
                t[i] = now_ns() - t0;
                store_event_unref(ev);
        }
        report(name, "write to watch event", t, n_ops);
        store_watch_free(w);
}

static void run(struct store *s, const char *name) {
        usec_t *t = calloc(n_ops, sizeof(*t));
        uint64_t *revs = calloc(n_ops, sizeof(*revs));

        if (!t || !revs)
                die("calloc", -ENOMEM);
        bench_writes(s, name, t, revs);
        bench_leases(s, name, t, revs);
        bench_lease_object(s, name, t);
        bench_watch(s, name, t);
        free(t);
        free(revs);
}

int main(int argc, char **argv) {
        struct store *s = NULL;
        int r;

        if (argc > 1 && streq(argv[1], "--quick"))
                n_ops = 30;
        memset(value, 'x', sizeof(value));
        r = store_new(NULL, &s);
        if (r < 0)
                die("store_new", r);
        run(s, "memory");
        store_unref(s);

        const char *endpoints = getenv("BENCH_ETCD_ENDPOINTS");
        if (!endpoints || !endpoints[0]) {
                printf("etcd     (BENCH_ETCD_ENDPOINTS not set: not measured)\n");
                return 0;
        }
#ifdef HAVE_STORE_ETCD
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "bench-%d/", (int) getpid());
        r = store_etcd_new(&(struct store_etcd_options) { .endpoints = endpoints, .prefix = prefix },
                           &s);
        if (r < 0)
                die("store_etcd_new", r);
        run(s, "etcd");
        store_unref(s);
#else
        printf("etcd     (built without libcurl: not measured)\n");
#endif
        return 0;
}
