/* SPDX-License-Identifier: MIT */
/*
 * Exit hub benchmark (SPEC §2.1; results in docs/benchmarks.md "exit hub").
 *
 *  (a) batch:     publish 64 exits, epoll_wait on the subscription fd, recv_batch 64,
 *                 on one thread pinned to one core. Reports events/s for publish+receive
 *                 and for the whole life cycle (register+publish+receive+take), and fd
 *                 wake-ups (epoll_wait returns) per 1,000 events.
 *  (b) ping-pong: one thread publishes one exit and waits for an ack; another, on the
 *                 other core, wakes from epoll_wait, receives it, takes it and acks.
 *  (c) watches:   register a process, arm 0/1/8 watches (through one watch set, and with
 *                 an fd of their own), publish (fires them), pop and free them, take.
 *
 * --quick (CI): a few iterations, no target judged. The exit status is non-zero only when
 * something is functionally wrong (a lost event, a wrong count, an unexpected errno).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "libexit.h"
#include "macro.h"
#include "time-util.h"

#define BATCH 64
#define WAIT_MS 5000
#define TARGET_EVENTS_PER_SEC 5e6
#define REPEATS_MAX 9

#define CHECK(cond, ...)                                                        \
        do {                                                                    \
                if (!(cond)) {                                                  \
                        fprintf(stderr, "bench-exit-hub: %s:%d: ", __FILE__, __LINE__); \
                        fprintf(stderr, __VA_ARGS__);                           \
                        fputc('\n', stderr);                                    \
                        exit(EXIT_FAILURE);                                     \
                }                                                               \
        } while (0)

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static bool pin_to_cpu(int cpu) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

static void unpin(void) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int i = 0; i < CPU_SETSIZE; i++)
                CPU_SET(i, &set);
        (void) pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static const struct exit_reason reason0 = { .kind = EXIT_REASON_EXITED, .status = 0 };

static pid_t fake_pid(uint64_t i) {
        return (pid_t) (i % 4000000 + 2);
}

static int epoll_with(int fd) {
        int ep = epoll_create1(EPOLL_CLOEXEC);
        CHECK(ep >= 0, "epoll_create1: %s", strerror(errno));
        struct epoll_event ev = { .events = EPOLLIN };
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll_ctl: %s", strerror(errno));
        return ep;
}

/* Waits for the fd to be readable; every return of epoll_wait is one wake-up. */
static void wait_readable(int ep, uint64_t *wakeups) {
        struct epoll_event ev;
        int n = epoll_wait(ep, &ev, 1, WAIT_MS);
        CHECK(n == 1, "epoll_wait returned %d: the subscription fd did not become readable "
                      "(an event lost, or the eventfd not raised on not-ready -> ready)", n);
        (*wakeups)++;
}

struct result {
        uint64_t events, wakeups, ns;
};

static double ns_per_event(const struct result *r) {
        return (double) r->ns / (double) r->events;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return (x > y) - (x < y);
}

/* The machine is shared and noisy: every measurement is repeated; print the median and
 * the best run. Returns the median rate. */
static double print_row(const char *name, const struct result *runs, size_t n) {
        double ns[REPEATS_MAX], wakeups = 0;
        for (size_t i = 0; i < n; i++) {
                ns[i] = ns_per_event(&runs[i]);
                wakeups += 1000.0 * (double) runs[i].wakeups / (double) runs[i].events;
        }
        qsort(ns, n, sizeof(ns[0]), cmp_double);
        double median = ns[n / 2];
        printf("  %-40s %10.0f /s median %10.0f /s best %9.1f ns/event %7.1f wake-ups/1000 events\n",
               name, 1e9 / median, 1e9 / ns[0], median, wakeups / (double) n);
        return 1e9 / median;
}

static void print_watch_row(const char *name, const double *ns_runs, size_t n) {
        double ns[REPEATS_MAX];
        memcpy(ns, ns_runs, n * sizeof(ns[0]));
        qsort(ns, n, sizeof(ns[0]), cmp_double);
        printf("  %-40s %9.1f ns median %9.1f ns best\n", name, ns[n / 2], ns[0]);
}

/* ---- (a) batch ---------------------------------------------------------- */

static void bench_batch(uint64_t rounds, struct result *hot, struct result *full) {
        struct exit_hub *hub;
        struct exit_sub *sub;
        struct exit_event evs[BATCH];
        exit_id_t ids[BATCH];
        CHECK(exit_hub_new(0, 0, &hub) == 0, "exit_hub_new");
        CHECK(exit_hub_subscribe(hub, &sub) == 0, "subscribe");
        int ep = epoll_with(exit_sub_fd(sub));
        uint64_t seq = 0, t_full = now_ns();

        *hot = (struct result) {};
        for (uint64_t round = 0; round < rounds; round++) {
                for (int i = 0; i < BATCH; i++)
                        CHECK(exit_hub_register(hub, fake_pid(seq++), &ids[i]) == 0, "register");

                uint64_t t0 = now_ns();
                for (int i = 0; i < BATCH; i++)
                        CHECK(exit_hub_publish(hub, ids[i], &reason0) == 0, "publish");
                wait_readable(ep, &hot->wakeups);
                int n = exit_sub_recv_batch(sub, evs, BATCH, 0);
                hot->ns += now_ns() - t0;

                CHECK(n == BATCH, "recv_batch returned %d, want %d", n, BATCH);
                for (int i = 0; i < BATCH; i++) {
                        struct exit_reason r;
                        CHECK(evs[i].type == EXIT_EVENT_EXIT && evs[i].id == ids[i], "event %d out of order", i);
                        CHECK(exit_hub_take(hub, ids[i], &r) == 0, "take");
                }
                if (round % 1024 == 0) { /* drained: the fd must be quiet again */
                        struct epoll_event ev;
                        CHECK(epoll_wait(ep, &ev, 1, 0) == 0, "sub fd readable with an empty queue");
                }
        }
        hot->events = rounds * BATCH;
        *full = (struct result) { .events = hot->events, .wakeups = hot->wakeups, .ns = now_ns() - t_full };
        safe_close(ep);
        exit_sub_free(sub);
        exit_hub_unref(hub);
}

/* ---- (b) ping-pong ------------------------------------------------------ */

struct pingpong {
        struct exit_hub *hub;
        struct exit_sub *sub;
        int ack_fd;
        uint64_t n, wakeups;
        bool pinned;
};

static void *pingpong_consumer(void *arg) {
        struct pingpong *p = arg;
        p->pinned = pin_to_cpu(1) && p->pinned;
        int ep = epoll_with(exit_sub_fd(p->sub));
        for (uint64_t i = 0; i < p->n; i++) {
                struct exit_event ev;
                struct exit_reason r;
                wait_readable(ep, &p->wakeups);
                CHECK(exit_sub_recv_batch(p->sub, &ev, 1, 0) == 1, "recv_batch after readable");
                CHECK(ev.type == EXIT_EVENT_EXIT, "unexpected event type %u", ev.type);
                CHECK(exit_hub_take(p->hub, ev.id, &r) == 0, "take");
                CHECK(eventfd_write(p->ack_fd, 1) == 0, "ack");
        }
        safe_close(ep);
        return NULL;
}

static bool bench_pingpong(uint64_t n, struct result *res) {
        struct pingpong p = { .n = n };
        pthread_t t;
        CHECK(exit_hub_new(0, 0, &p.hub) == 0, "exit_hub_new");
        CHECK(exit_hub_subscribe(p.hub, &p.sub) == 0, "subscribe");
        p.ack_fd = eventfd(0, EFD_CLOEXEC);
        CHECK(p.ack_fd >= 0, "eventfd");
        p.pinned = pin_to_cpu(0);
        CHECK(pthread_create(&t, NULL, pingpong_consumer, &p) == 0, "pthread_create");

        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < n; i++) {
                exit_id_t id;
                eventfd_t v;
                CHECK(exit_hub_register(p.hub, fake_pid(i), &id) == 0, "register");
                CHECK(exit_hub_publish(p.hub, id, &reason0) == 0, "publish");
                CHECK(eventfd_read(p.ack_fd, &v) == 0, "ack read"); /* blocking: the consumer acks */
        }
        uint64_t ns = now_ns() - t0;
        CHECK(pthread_join(t, NULL) == 0, "pthread_join");
        *res = (struct result) { .events = n, .wakeups = p.wakeups, .ns = ns };
        safe_close(p.ack_fd);
        exit_sub_free(p.sub);
        exit_hub_unref(p.hub);
        unpin();
        return p.pinned;
}

/* The same two threads bouncing a bare eventfd through epoll: what the OS alone costs. */
struct bounce {
        int to_consumer, to_publisher;
        uint64_t n, wakeups;
};

static void *bounce_consumer(void *arg) {
        struct bounce *b = arg;
        (void) pin_to_cpu(1);
        int ep = epoll_with(b->to_consumer);
        for (uint64_t i = 0; i < b->n; i++) {
                eventfd_t v;
                wait_readable(ep, &b->wakeups);
                CHECK(eventfd_read(b->to_consumer, &v) == 0, "bounce read");
                CHECK(eventfd_write(b->to_publisher, 1) == 0, "bounce ack");
        }
        safe_close(ep);
        return NULL;
}

static void bench_bounce(uint64_t n, struct result *res) {
        struct bounce b = { .n = n };
        pthread_t t;
        b.to_consumer = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        b.to_publisher = eventfd(0, EFD_CLOEXEC);
        CHECK(b.to_consumer >= 0 && b.to_publisher >= 0, "eventfd");
        (void) pin_to_cpu(0);
        CHECK(pthread_create(&t, NULL, bounce_consumer, &b) == 0, "pthread_create");
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < n; i++) {
                eventfd_t v;
                CHECK(eventfd_write(b.to_consumer, 1) == 0, "bounce write");
                CHECK(eventfd_read(b.to_publisher, &v) == 0, "bounce wait");
        }
        uint64_t ns = now_ns() - t0;
        CHECK(pthread_join(t, NULL) == 0, "pthread_join");
        *res = (struct result) { .events = n, .wakeups = b.wakeups, .ns = ns };
        safe_close(b.to_consumer);
        safe_close(b.to_publisher);
        unpin();
}

/* ---- (c) watches -------------------------------------------------------- */

/* ns per (register + k watches + publish/fire + pop + free + take). */
static double bench_watches(uint64_t iterations, int k, bool own_fd) {
        struct exit_hub *hub;
        struct exit_watch_set *set;
        struct exit_watch *ws[8];
        CHECK(exit_hub_new(0, 0, &hub) == 0, "exit_hub_new");
        CHECK(exit_watch_set_new(hub, &set) == 0, "set_new");

        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < iterations; i++) {
                exit_id_t id;
                struct exit_reason r;
                CHECK(exit_hub_register(hub, fake_pid(i), &id) == 0, "register");
                for (int j = 0; j < k; j++) {
                        CHECK(exit_hub_watch(hub, id, own_fd ? NULL : set, NULL, &ws[j], NULL) == EXIT_WATCH_LIVE, "watch");
                        if (own_fd)
                                CHECK(exit_watch_fd(ws[j]) >= 0, "watch fd");
                }
                CHECK(exit_hub_publish(hub, id, &reason0) == 0, "publish");
                for (int j = 0; j < k; j++) {
                        struct exit_watch *w = ws[j];
                        if (!own_fd)
                                CHECK(exit_watch_set_next(set, &w) == 0, "set_next: watch %d not fired", j);
                        CHECK(exit_watch_result(w, NULL) == 0, "watch not fired");
                        exit_watch_free(w);
                }
                CHECK(exit_hub_take(hub, id, &r) == 0, "take");
        }
        uint64_t ns = now_ns() - t0;
        exit_watch_set_free(set);
        exit_hub_unref(hub);
        return (double) ns / (double) iterations;
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv) {
        bool quick = argc > 1 && streq(argv[1], "--quick");
        size_t repeats = quick ? 1 : 7;
        uint64_t rounds = quick ? 200 : 30000, pings = quick ? 2000 : 20000, watch_iters = quick ? 2000 : 50000;
        struct result hot[REPEATS_MAX], full[REPEATS_MAX], pp[REPEATS_MAX];

        printf("exit hub benchmark%s: %ld CPUs online; median and best of %zu runs\n",
               quick ? " --quick (numbers not judged)" : "", sysconf(_SC_NPROCESSORS_ONLN), repeats);

        bool pinned = pin_to_cpu(0);
        bench_batch(quick ? 20 : 2000, &hot[0], &full[0]); /* warm-up */
        for (size_t i = 0; i < repeats; i++)
                bench_batch(rounds, &hot[i], &full[i]);
        unpin();
        printf("(a) batch of %d, publisher = receiver thread%s, sub fd in epoll, %" PRIu64 " events/run:\n",
               BATCH, pinned ? " pinned to CPU 0" : "", rounds * BATCH);
        double rate = print_row("publish + epoll_wait + recv_batch", hot, repeats);
        print_row("register + publish + recv_batch + take", full, repeats);

        for (size_t i = 0; i < repeats; i++)
                pinned = bench_pingpong(pings, &pp[i]);
        printf("(b) ping-pong, 2 threads%s, %" PRIu64 " round trips/run:\n",
               pinned ? " pinned to CPUs 0 and 1" : " (not pinned)", pings);
        print_row("register+publish -> epoll+recv+take+ack", pp, repeats);
        for (size_t i = 0; i < repeats; i++)
                bench_bounce(pings, &pp[i]);
        print_row("baseline: bare eventfd, same threads", pp, repeats);

        printf("(c) ns per register + k watches + fire + pop + free + take, %" PRIu64 " iterations/run:\n",
               watch_iters);
        static const int ks[] = { 0, 1, 8 };
        for (size_t i = 0; i < ELEMENTSOF(ks); i++) {
                double ns[REPEATS_MAX];
                char name[64];
                for (size_t r = 0; r < repeats; r++)
                        ns[r] = bench_watches(watch_iters, ks[i], false);
                snprintf(name, sizeof(name), "k=%d, through one watch set", ks[i]);
                print_watch_row(name, ns, repeats);
        }
        double own[REPEATS_MAX];
        for (size_t r = 0; r < repeats; r++)
                own[r] = bench_watches(watch_iters / 4, 8, true);
        print_watch_row("k=8, an own eventfd each", own, repeats);

        if (!quick)
                printf("target >= %.0f M events/s (batch, publish + receive, one core, median): %s\n",
                       TARGET_EVENTS_PER_SEC / 1e6, rate >= TARGET_EVENTS_PER_SEC ? "met" : "NOT met");
        return EXIT_SUCCESS;
}
