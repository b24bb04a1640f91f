/* SPDX-License-Identifier: MIT */
/*
 * Single-flight table throughput (SPEC §2.3; docs/benchmarks.md "single-flight
 * table"). Prints one table: join/answer/leave cycles per second on one
 * thread, and N threads joining one key (coalescing) or one key each (lock
 * contention only). Every cycle includes the outcome's copy and free, as in
 * tend. ns/cycle is wall time divided by cycles (the inverse of cycles/s). --quick (CI): a few iterations, numbers not meaningful, nothing judged.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "singleflight.h"
#include "time-util.h"

typedef struct outcome {
        int pid;
        char result[28];
} outcome;

static int outcome_copy(const void *src, void **ret, void *userdata) {
        outcome *o = malloc(sizeof *o);
        if (!o)
                return -ENOMEM;
        memcpy(o, src, sizeof *o);
        *ret = o;
        return 0;
}

static void outcome_free(void *o, void *userdata) {
        free(o);
}

static const sf_outcome_ops ops = { .copy = outcome_copy, .free = outcome_free };

static outcome *outcome_new(int pid) {
        outcome *o = calloc(1, sizeof *o);
        if (!o)
                abort();
        o->pid = pid;
        strcpy(o->result, "success");
        return o;
}

static void die(const char *what, int r) {
        fprintf(stderr, "bench-singleflight: %s: %s\n", what, strerror(-r));
        exit(1);
}

/* The leader's whole cycle: join, answer, take its copy, leave, retire. */
static void leader_cycle(sf_table *t, const char *key, bool with_fd) {
        sf_waiter *w;
        sf_resolution *res;
        sf_answer a;
        int r = sf_table_join(t, key, &w, &res);
        if (r != 1)
                die("join did not lead", r < 0 ? r : -EPROTO);
        int fd = with_fd ? sf_waiter_get_fd(w) : -1;
        if (with_fd && fd < 0)
                die("sf_waiter_get_fd", fd);
        if ((r = sf_resolution_begin_publishing(res)) < 0 ||
            (r = sf_resolution_answer_take(res, outcome_new(1))) < 0)
                die("answer", r);
        if (with_fd && poll(&(struct pollfd) { .fd = fd, .events = POLLIN }, 1, 0) != 1)
                die("waiter fd not readable after the answer", -EPROTO);
        if ((r = sf_waiter_peek(w, &a)) < 0)
                die("peek", r);
        outcome_free(a.outcome, NULL);
        sf_waiter_free(w);
        sf_resolution_free(res);
}

/* A follower's cycle on an answered flight: join, take its copy, leave. */
static void follower_cycle(sf_table *t, const char *key) {
        sf_waiter *w;
        sf_resolution *res;
        sf_answer a;
        int r = sf_table_join(t, key, &w, &res);
        if (r != 0)
                die("join did not follow", r < 0 ? r : -EPROTO);
        if ((r = sf_waiter_peek(w, &a)) < 0)
                die("peek", r);
        outcome_free(a.outcome, NULL);
        sf_waiter_free(w);
}

typedef struct row {
        const char *name;
        int threads;
        long ops;
        double seconds;
        long flights; /* 0: not counted */
} row;

static void print_header(void) {
        printf("%-44s %7s %10s %12s %9s %12s\n", "scenario", "threads", "cycles", "cycles/s", "ns/cycle",
               "joins/flight");
}

static void print_row(const row *r) {
        double per_s = r->ops / r->seconds;
        printf("%-44s %7d %10ld %12.0f %9.0f ", r->name, r->threads, r->ops, per_s,
               1e9 * r->seconds / (double) r->ops);
        if (r->flights > 0)
                printf("%12.2f\n", (double) r->ops / (double) r->flights);
        else
                printf("%12s\n", "-");
}

static double seconds_since(usec_t start) {
        return (double) (now_usec(CLOCK_MONOTONIC) - start) / 1e6;
}

static void bench_single(long n, bool with_fd) {
        sf_table *t;
        int r = sf_table_new(&ops, NULL, &t);
        if (r < 0)
                die("sf_table_new", r);
        usec_t start = now_usec(CLOCK_MONOTONIC);
        for (long i = 0; i < n; i++)
                leader_cycle(t, "bench.service", with_fd);
        print_row(&(row) { with_fd ? "join+answer+leave, waiter eventfd + poll" : "join+answer+leave (leader, blocking API)",
                           1, n, seconds_since(start), n });
        sf_table_unref(t);
}

static void bench_follower(long n) {
        sf_table *t;
        sf_waiter *w;
        sf_resolution *res;
        int r = sf_table_new(&ops, NULL, &t);
        if (r < 0)
                die("sf_table_new", r);
        if ((r = sf_table_join(t, "bench.service", &w, &res)) != 1 ||
            (r = sf_resolution_answer_take(res, outcome_new(1))) < 0)
                die("prepare an answered flight", r < 0 ? r : -EPROTO);
        usec_t start = now_usec(CLOCK_MONOTONIC);
        for (long i = 0; i < n; i++)
                follower_cycle(t, "bench.service");
        print_row(&(row) { "join+copy+leave (follower, answered flight)", 1, n, seconds_since(start), 0 });
        sf_resolution_free(res);
        sf_waiter_free(w);
        sf_table_unref(t);
}

/* N threads. Shared key: every thread joins "bench.service"; a leader answers
 * at once, followers block until the answer, so joins coalesce into flights. */
typedef struct worker {
        pthread_t thread;
        sf_table *t;
        char key[32];
        long n;
        long flights;
        usec_t start, end; /* each thread times itself: main may be scheduled late */
        pthread_barrier_t *go;
} worker;

static void *worker_main(void *p) {
        worker *wk = p;
        pthread_barrier_wait(wk->go);
        wk->start = now_usec(CLOCK_MONOTONIC);
        for (long i = 0; i < wk->n; i++) {
                sf_waiter *w;
                sf_resolution *res;
                sf_answer a;
                int r = sf_table_join(wk->t, wk->key, &w, &res);
                if (r < 0)
                        die("join", r);
                if (res) {
                        wk->flights++;
                        if ((r = sf_resolution_answer_take(res, outcome_new(1))) < 0)
                                die("answer", r);
                }
                if ((r = sf_waiter_wait(w, deadline_after_ms(10000), &a)) < 0)
                        die("wait (a leader never answered?)", r);
                if (a.status != SF_ANSWER_OK)
                        die("answer not ok", -EPROTO);
                outcome_free(a.outcome, NULL);
                sf_waiter_free(w);
                sf_resolution_free(res);
        }
        wk->end = now_usec(CLOCK_MONOTONIC);
        return NULL;
}

static void bench_threads(int n_threads, long per_thread, bool shared_key) {
        sf_table *t;
        pthread_barrier_t go;
        worker *wk = calloc((size_t) n_threads, sizeof *wk);
        int r = sf_table_new(&ops, NULL, &t);
        if (r < 0 || !wk)
                die("setup", r < 0 ? r : -ENOMEM);
        pthread_barrier_init(&go, NULL, (unsigned) n_threads + 1);
        for (int i = 0; i < n_threads; i++) {
                wk[i] = (worker) { .t = t, .n = per_thread, .go = &go };
                snprintf(wk[i].key, sizeof wk[i].key, shared_key ? "bench.service" : "bench-%d.service", i);
                if (pthread_create(&wk[i].thread, NULL, worker_main, &wk[i]) != 0)
                        die("pthread_create", -EAGAIN);
        }
        pthread_barrier_wait(&go);
        long flights = 0;
        usec_t start = USEC_INFINITY, end = 0;
        for (int i = 0; i < n_threads; i++) {
                pthread_join(wk[i].thread, NULL);
                flights += wk[i].flights;
                start = wk[i].start < start ? wk[i].start : start;
                end = wk[i].end > end ? wk[i].end : end;
        }
        print_row(&(row) { shared_key ? "N threads, one key (join/answer|wait/leave)" : "N threads, one key each",
                           n_threads, per_thread * n_threads, (double) (end - start) / 1e6, flights });
        pthread_barrier_destroy(&go);
        free(wk);
        sf_table_unref(t);
}

int main(int argc, char **argv) {
        bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
        long n = quick ? 2000 : 2000000;
        long per_thread = quick ? 500 : 300000;

        printf("single-flight table%s\n", quick ? " (--quick: numbers not meaningful)" : "");
        print_header();
        bench_single(n, false);
        bench_single(n / 4, true);
        bench_follower(n);
        for (int k = 1; k <= 8; k *= 2)
                bench_threads(k, per_thread, true);
        for (int k = 2; k <= 8; k *= 2)
                bench_threads(k, per_thread, false);
        return 0;
}
