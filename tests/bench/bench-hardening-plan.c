/* SPDX-License-Identifier: MIT */
/*
 * Where a hardened start spends its time (docs/benchmarks.md "issue 17: the
 * cost of hardening"), each phase timed alone with CLOCK_MONOTONIC:
 *
 *   plan   sandbox_plan_new() + sandbox_plan_free() in the manager, before the
 *          fork: the mount plan (namespace.c: the tables, realpath of each
 *          path, the sort, the checks), the seccomp programs (libseccomp);
 *   child  in a fork()ed child, sandbox_pre_exec() (the hook tend's child
 *          runs before its exec), from its first to its last instruction;
 *          the floor: floor_ns_setup() (floor-ns.h) timed the same way;
 *   fork   fork() → the child's first clock read, the same for every row;
 *   exit   the child's last clock read → its parent's waitpid() returns: the
 *          child exits right after its step, so with a namespace this is the
 *          namespace's teardown (its mounts, when its last process exits).
 *
 * Rows: a unit without keys; ProtectSystem=strict + PrivateTmp= +
 * PrivateDevices=; the same with SystemCallFilter=@system-service; the
 * floor. Each phase --count times (default 2,000; --quick 20), median and
 * p99 in µs. The plan's first call (a cold cache) is reported apart.
 * Needs root (the child makes the namespace; else exit status 77, meson's
 * skip). Exit status 1 when a step
 * fails (naming the row), never because of a number.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "floor-ns.h"
#include "sandbox.h"
#include "unit-file.h"

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return (x > y) - (x < y);
}

static void report(const char *row, const char *phase, uint64_t *v, long n) {
        qsort(v, (size_t) n, sizeof *v, cmp);
        long p99 = n * 99 / 100 < n ? n * 99 / 100 : n - 1;
        printf("| %s | %s | %ld | %.1f | %.1f | %.1f |\n", row, phase, n, v[n / 2] / 1e3, v[p99] / 1e3, v[0] / 1e3);
}

/* In a child: t0, the step, t1, both written to fd; 0 or the step's -errno. */
static int child_step(struct sandbox_plan *p, int fd, uint64_t forked) {
        uint64_t t[3] = { forked, now_ns(), 0 };
        int stage = 0, r = p ? sandbox_pre_exec(p, &stage) : floor_ns_setup();
        t[2] = now_ns();
        if (write(fd, t, sizeof t) != (ssize_t) sizeof t)
                return -EIO;
        return r;
}

/* One fork: the times of fork → child, of the child's step, of its exit. */
static int time_child(struct sandbox_plan *p, uint64_t *ret_fork, uint64_t *ret_step, uint64_t *ret_exit) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        uint64_t t0 = now_ns();
        pid_t pid = fork();
        if (pid == 0)
                _exit(child_step(p, fds[1], t0) < 0 ? 1 : 0);
        close(fds[1]);
        uint64_t t[3] = {};
        ssize_t n = pid > 0 ? read(fds[0], t, sizeof t) : -1;
        close(fds[0]);
        int status = 0;
        if (pid > 0)
                (void) waitpid(pid, &status, 0);
        uint64_t reaped = now_ns();
        if (n != (ssize_t) sizeof t || !WIFEXITED(status) || WEXITSTATUS(status))
                return -EIO;
        *ret_fork = t[1] - t[0];
        *ret_step = t[2] - t[1];
        *ret_exit = reaped - t[2];
        return 0;
}

static int row(const char *name, const char *keys, long count) {
        char text[1024];
        snprintf(text, sizeof text, "[Service]\nExecStart=/bin/true\n%s", keys);
        struct unit_file *f = NULL;
        char *message = NULL;
        if (keys && unit_file_parse("bench.service", "bench.service", text, strlen(text), &f, &message) < 0) {
                fprintf(stderr, "bench-hardening-plan: %s: %s\n", name, message ? message : "refused");
                return -EINVAL;
        }
        uint64_t *plan = calloc((size_t) count, sizeof *plan), *fork_ns = calloc((size_t) count, sizeof *fork_ns),
                 *step = calloc((size_t) count, sizeof *step), *exit_ns = calloc((size_t) count, sizeof *exit_ns);
        uint64_t cold = 0;
        int r = plan && fork_ns && step && exit_ns ? 0 : -ENOMEM;
        for (long i = 0; f && i <= count && r >= 0; i++) {
                struct sandbox_plan *p = NULL;
                uint64_t t0 = now_ns();
                r = sandbox_plan_new("bench.service", f, 0, NULL, &p);
                sandbox_plan_free(p);
                uint64_t d = now_ns() - t0;
                if (i == 0)
                        cold = d;
                else
                        plan[i - 1] = d;
        }
        struct sandbox_plan *p = NULL;
        if (f && r >= 0)
                r = sandbox_plan_new("bench.service", f, 0, NULL, &p);
        for (long i = 0; i < count && r >= 0; i++)
                r = time_child(p, &fork_ns[i], &step[i], &exit_ns[i]);
        if (r < 0)
                fprintf(stderr, "bench-hardening-plan: %s: %s\n", name, strerror(-r));
        else {
                if (f) {
                        printf("| %s | plan, first start | 1 | %.1f | | |\n", name, cold / 1e3);
                        report(name, "plan", plan, count);
                }
                report(name, "fork → child", fork_ns, count);
                report(name, "child step", step, count);
                report(name, "exit → reaped", exit_ns, count);
        }
        sandbox_plan_free(p);
        unit_file_free(f);
        free(plan);
        free(fork_ns);
        free(step);
        free(exit_ns);
        return r;
}

int main(int argc, char **argv) {
        long count = 2000;
        for (int i = 1; i < argc; i++)
                if (!strcmp(argv[i], "--quick"))
                        count = 20;
                else if (!strcmp(argv[i], "--count") && i + 1 < argc)
                        count = strtol(argv[++i], NULL, 10);
        if (geteuid() != 0) {
                fprintf(stderr, "bench-hardening-plan: skipped: needs root (the mount namespace)\n");
                return 77; /* meson's skip */
        }
        static const char *const ns = "ProtectSystem=strict\nPrivateTmp=yes\nPrivateDevices=yes\n";
        char ns_filter[256];
        snprintf(ns_filter, sizeof ns_filter, "%sSystemCallFilter=@system-service\n", ns);
        printf("| row | phase | n | median µs | p99 µs | min µs |\n|---|---|---:|---:|---:|---:|\n");
        int r = row("no keys", "", count);
        if (r >= 0)
                r = row("the three keys", ns, count);
        if (r >= 0)
                r = row("the three keys + @system-service", ns_filter, count);
        if (r >= 0)
                r = row("floor-ns", NULL, count);
        return r < 0;
}
