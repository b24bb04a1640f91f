/* SPDX-License-Identifier: MIT */
/*
 * Reaper benchmark (SPEC §8, issue "libexit reaper"):
 *  1. spawn + exec + reap of a static trivial program through the reaper,
 *     against the kernel's floor measured in the same run: the fastest of
 *     fork, vfork, posix_spawn and clone3(CLONE_PIDFD) loops;
 *  2. storm: N children blocked on one pipe, released together, every exit
 *     reaped and its outcome taken, against a minimal waitpid(-1) loop.
 * Usage: bench-reaper [--quick]. Needs BENCH_TRIVIAL (set by meson).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libexit.h"
#include "macro.h"
#include "time-util.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

extern char **environ;
static const char *trivial;
static char *trivial_argv[2];

static int cmp_u64(const void *a, const void *b) {
        usec_t x = *(const usec_t *) a, y = *(const usec_t *) b;
        return x < y ? -1 : x > y;
}

struct result {
        const char *name;
        double mean_us, median_us, p99_us;
};

static struct result summarise(const char *name, usec_t *t, int n) {
        qsort(t, (size_t) n, sizeof *t, cmp_u64);
        double sum = 0;
        for (int i = 0; i < n; i++)
                sum += (double) t[i];
        return (struct result) { name, sum / n, (double) t[n / 2], (double) t[(n * 99) / 100] };
}

static void must(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "bench-reaper: %s: %s\n", what, strerror(errno));
                exit(1);
        }
}

static void reap_pid(pid_t pid) {
        int status;
        must(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "waitpid");
}

static usec_t one_fork(void) {
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        pid_t pid = fork();
        if (pid == 0) {
                execve(trivial, trivial_argv, environ);
                _exit(127);
        }
        must(pid > 0, "fork");
        reap_pid(pid);
        return now_usec(CLOCK_MONOTONIC) - t0;
}

static usec_t one_vfork(void) {
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        pid_t pid = vfork();
        if (pid == 0) {
                execve(trivial, trivial_argv, environ);
                _exit(127);
        }
        must(pid > 0, "vfork");
        reap_pid(pid);
        return now_usec(CLOCK_MONOTONIC) - t0;
}

static usec_t one_posix_spawn(void) {
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        pid_t pid;
        errno = posix_spawn(&pid, trivial, NULL, NULL, trivial_argv, environ);
        must(errno == 0, "posix_spawn");
        reap_pid(pid);
        return now_usec(CLOCK_MONOTONIC) - t0;
}

struct clone_args_v2 {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
                set_tid_size, cgroup;
};

static usec_t one_clone3(void) {
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        int pidfd = -1;
        struct clone_args_v2 a = { .flags = 0x1000 /* CLONE_PIDFD */, .pidfd = (uint64_t) (uintptr_t) &pidfd,
                                   .exit_signal = SIGCHLD };
        long pid = syscall(SYS_clone3, &a, sizeof a);
        if (pid == 0) {
                execve(trivial, trivial_argv, environ);
                _exit(127);
        }
        must(pid > 0, "clone3");
        siginfo_t si = { 0 };
        must(waitid((idtype_t) P_PIDFD, (id_t) pidfd, &si, WEXITED) == 0 && si.si_status == 0, "waitid");
        close(pidfd);
        return now_usec(CLOCK_MONOTONIC) - t0;
}

static struct exit_hub *hub;
static struct exit_reaper *reaper;

static void reaper_open(uint32_t flags, uint32_t queue) {
        must(exit_hub_new(queue, 0, &hub) == 0, "exit_hub_new");
        must(exit_reaper_new(hub, flags, &reaper) == 0, "exit_reaper_new");
}

static void reaper_close(void) {
        reaper = exit_reaper_free(reaper);
        hub = exit_hub_unref(hub);
}

/* Spawn, then wait in the reaper's fd and dispatch until the outcome is
 * takeable: exactly what an embedder's loop does. */
static usec_t one_reaper(void) {
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        struct exit_spawn_attr a = { .size = sizeof a, .argv = trivial_argv };
        struct exit_process *p = NULL;
        must(exit_reaper_spawn(reaper, &a, &p) == 0, "exit_reaper_spawn");
        struct exit_reason r;
        while (exit_hub_take(hub, exit_process_id(p), &r) == -EINPROGRESS) {
                struct pollfd pfd = { .fd = exit_reaper_fd(reaper), .events = POLLIN };
                (void) poll(&pfd, 1, -1);
                (void) exit_reaper_dispatch(reaper);
        }
        must(r.kind == EXIT_REASON_EXITED && r.status == 0, "trivial program failed");
        exit_process_unref(p);
        return now_usec(CLOCK_MONOTONIC) - t0;
}

static struct result run_loop(const char *name, usec_t (*one)(void), int n) {
        usec_t *t = calloc((size_t) n, sizeof *t);
        must(t != NULL, "calloc");
        for (int i = 0; i < n / 10 + 1; i++) /* warm up */
                (void) one();
        for (int i = 0; i < n; i++)
                t[i] = one();
        struct result r = summarise(name, t, n);
        free(t);
        return r;
}

/* ---- storm ---- */

/* Both storms run the same static child, exec'd with stdin the read end of
 * one pipe; the clock starts when the last write end closes. */
static const char *block_child;

static double storm_minimal(int n) {
        int rel[2];
        must(pipe2(rel, O_CLOEXEC) == 0, "pipe2");
        char *argv[] = { (char *) block_child, NULL };
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, rel[0], STDIN_FILENO);
        for (int i = 0; i < n; i++) {
                pid_t pid;
                errno = posix_spawn(&pid, block_child, &fa, NULL, argv, environ);
                must(errno == 0, "posix_spawn");
        }
        posix_spawn_file_actions_destroy(&fa);
        close(rel[0]);
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        close(rel[1]);
        for (int left = n; left > 0; left--) {
                int status;
                must(waitpid(-1, &status, 0) > 0, "waitpid");
        }
        return (double) (now_usec(CLOCK_MONOTONIC) - t0) / 1000.0;
}

static double storm_reaper(int n, uint32_t queue) {
        reaper_open(0, queue);
        struct exit_sub *sub = NULL;
        must(exit_hub_subscribe(hub, &sub) == 0, "subscribe");
        int rel[2];
        must(pipe2(rel, O_CLOEXEC) == 0, "pipe2");
        struct exit_process **procs = calloc((size_t) n, sizeof *procs);
        char *argv[] = { (char *) block_child, NULL };
        struct exit_spawn_attr a = {
                .size = sizeof a, .flags = EXIT_SPAWN_STDIO, .argv = argv,
                .stdio = { rel[0], EXIT_SPAWN_FD_INHERIT, EXIT_SPAWN_FD_INHERIT },
        };
        for (int i = 0; i < n; i++)
                must(exit_reaper_spawn(reaper, &a, &procs[i]) == 0, "spawn");
        close(rel[0]);
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        close(rel[1]);
        int taken = 0;
        bool *done = calloc((size_t) n, sizeof *done);
        while (taken < n) {
                struct pollfd pfd = { .fd = exit_reaper_fd(reaper), .events = POLLIN };
                (void) poll(&pfd, 1, 1000);
                (void) exit_reaper_dispatch(reaper);
                struct exit_event ev[64];
                int k;
                bool lagged = false;
                while ((k = exit_sub_recv_batch(sub, ev, 64, 0)) > 0)
                        for (int i = 0; i < k; i++) {
                                struct exit_reason r;
                                if (ev[i].type == EXIT_EVENT_LAGGED)
                                        lagged = true;
                                else if (exit_hub_take(hub, ev[i].id, &r) == 0)
                                        taken++;
                        }
                if (!lagged)
                        continue;
                /* Recover by id, as a real consumer does after LAGGED. */
                for (int i = 0; i < n; i++) {
                        struct exit_reason r;
                        if (done[i])
                                continue;
                        int t = exit_hub_take(hub, exit_process_id(procs[i]), &r);
                        taken += t == 0;
                        done[i] = t != -EINPROGRESS;
                }
        }
        double ms = (double) (now_usec(CLOCK_MONOTONIC) - t0) / 1000.0;
        for (int i = 0; i < n; i++)
                exit_process_unref(procs[i]);
        free(procs);
        free(done);
        exit_sub_free(sub);
        reaper_close();
        return ms;
}

static void raise_nofile(rlim_t want) {
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur >= want)
                return;
        if (rl.rlim_max < want)
                rl.rlim_max = want;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
                getrlimit(RLIMIT_NOFILE, &rl);
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
}

int main(int argc, char **argv) {
        bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
        trivial = getenv("BENCH_TRIVIAL");
        if (!trivial) {
                fprintf(stderr, "bench-reaper: BENCH_TRIVIAL is not set: run through meson test\n");
                return 1;
        }
        trivial_argv[0] = (char *) trivial;
        block_child = getenv("BENCH_BLOCK_CHILD");
        if (!block_child) {
                fprintf(stderr, "bench-reaper: BENCH_BLOCK_CHILD is not set: run through meson test\n");
                return 1;
        }
        int n = quick ? 50 : 2000, n_storm = quick ? 300 : 10000;
        raise_nofile((rlim_t) n_storm + 200); /* a pidfd per child */

        printf("bench-reaper: %d spawns of a static trivial program per loop%s\n", n, quick ? " (quick: no ratio judged)" : "");
        struct result floors[] = {
                run_loop("fork+execve+waitpid", one_fork, n),
                run_loop("vfork+execve+waitpid", one_vfork, n),
                run_loop("posix_spawn+waitpid", one_posix_spawn, n),
                run_loop("clone3(PIDFD)+execve+waitid", one_clone3, n),
        };
        struct result floor = floors[0];
        for (size_t i = 1; i < ELEMENTSOF(floors); i++)
                if (floors[i].median_us < floor.median_us)
                        floor = floors[i];

        reaper_open(0, 0);
        struct result via_vfork = run_loop("libexit reaper (vfork path)", one_reaper, n);
        reaper_close();
        reaper_open(EXIT_REAPER_NO_VFORK, 0);
        struct result via_vm = run_loop("libexit reaper (CLONE_VM path)", one_reaper, n);
        reaper_close();
        reaper_open(EXIT_REAPER_NO_VFORK | EXIT_REAPER_NO_CLONE_VM, 0);
        struct result via_clone3 = run_loop("libexit reaper (clone3 path)", one_reaper, n);
        reaper_close();
        reaper_open(EXIT_REAPER_NO_VFORK | EXIT_REAPER_NO_CLONE3, 0);
        struct result via_fork = run_loop("libexit reaper (fork fallback)", one_reaper, n);
        reaper_close();

        printf("%-34s %10s %10s %10s %8s\n", "loop", "mean µs", "median µs", "p99 µs", "ratio");
        struct result all[] = { floors[0], floors[1], floors[2], floors[3], via_vfork, via_vm, via_clone3, via_fork };
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                printf("%-34s %10.1f %10.1f %10.1f %7.2fx\n", all[i].name, all[i].mean_us, all[i].median_us,
                       all[i].p99_us, all[i].median_us / floor.median_us);
        printf("floor: %s (the fastest median); ratio = median / floor median\n\n", floor.name);

        double min_ms = storm_minimal(n_storm);
        double reap_ms = storm_reaper(n_storm, 64);
        double reap_big_ms = storm_reaper(n_storm, (uint32_t) n_storm + 64);
        printf("storm: %d children released by one pipe close, all reaped\n", n_storm);
        printf("%-44s %10.1f ms\n", "minimal loop (waitpid(-1))", min_ms);
        printf("%-44s %10.1f ms  %5.2fx\n", "reaper, queue 64 (LAGGED, recovered by id)", reap_ms, reap_ms / min_ms);
        printf("%-44s %10.1f ms  %5.2fx\n", "reaper, queue larger than the storm", reap_big_ms, reap_big_ms / min_ms);
        return 0;
}
