/* SPDX-License-Identifier: MIT */
/*
 * The timing harness of the service-mode benchmarks (SPEC §8); the
 * orchestration (service directories, supervisors, tables) is
 * tests/bench/bench-service.py. Every number comes from two clocks only: this
 * program's clock_gettime(CLOCK_MONOTONIC) and the one tests/bench/stamp.c
 * reads first thing after its exec, carried through a FIFO.
 *
 *   bench-restart kill --count N [--warmup W] [--hold-ms H] [--timeout-ms T] NAME=FIFO...
 *       Restart latency of a long-running unit. Rows are interleaved round
 *       robin, one kill in flight at a time: wait until the row's current
 *       instance has run H ms (default 1500: past runit's and s6's "ran less
 *       than a second" rule, so this is the long-running case), read
 *       CLOCK_MONOTONIC, SIGKILL it (pidfd_send_signal), then read the next
 *       stamp: latency = its timestamp − the one taken before the kill.
 *       Prints "sample NAME NS" per kill after W warm-up rounds, then
 *       "pid NAME PID" of each row's last instance.
 *
 *   bench-restart crash --count N [--warmup W] [--timeout-ms T] NAME=FIFO...
 *       Crash loop: the program exits 1 right after its stamp, so the time
 *       between two consecutive stamps is exit + reap + the supervisor's
 *       decision + spawn + exec: the whole cycle, nothing subtracted. Rows
 *       given together are read together (poll); each stops after W + N
 *       intervals. Prints "sample NAME NS".
 *
 *   bench-restart exec [--cgroup DIR] [--no-cgroup2] -- CMD [ARG...]
 *       Moves itself into DIR's cgroup.procs, with --no-cgroup2 into a private
 *       mount namespace without cgroup2 mounts (tend then uses process groups),
 *       and execs CMD: how bench-service.py launches every supervisor.
 *
 *   bench-restart start --count N [--cgroup DIR] [--no-cgroup2] [--timeout-ms T] FIFO -- CMD [ARG...]
 *       Reads CLOCK_MONOTONIC, forks CMD (set up as for exec; stdin and
 *       stdout /dev/null, stderr inherited), waits for N
 *       stamps: prints "elapsed NS" (the latest stamp − the time before the
 *       fork), "first NS" and "pid PID". CMD keeps running until stdin
 *       reaches EOF; then SIGTERM, SIGKILL after T ms, and "exit STATUS".
 *
 * Exit status 0; 1 when a row does not answer within T ms (default 30 s) or
 * a stamp is malformed, with a message naming the row; 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-stamp.h"

#define MAX_ROWS 16

struct row {
        const char *name;
        int fd;
        struct bench_stamp cur;
        bool have;
        long done;
};

static long opt_count = 200, opt_warmup = 5, opt_hold_ms = 1500, opt_timeout_ms = 30000;
static const char *opt_cgroup;
static bool opt_no_cgroup2;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fputs("bench-restart: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        exit(1);
}

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void sleep_until(uint64_t ns) {
        struct timespec ts = { .tv_sec = (time_t) (ns / 1000000000u), .tv_nsec = (long) (ns % 1000000000u) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

/* Opened read-write: the FIFO never reports EOF between two writers, and a
 * writer's open() never waits for us. */
static int open_fifo(const char *path) {
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
                die("%s: %s", path, strerror(errno));
        return fd;
}

/* 1 with a stamp in *s; 0 when nothing came within timeout_ms. */
static int read_stamp(const char *name, int fd, long timeout_ms, struct bench_stamp *s) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int k;
        while ((k = poll(&p, 1, (int) timeout_ms)) < 0 && errno == EINTR)
                ;
        if (k < 0)
                die("%s: poll: %s", name, strerror(errno));
        if (k == 0)
                return 0;
        ssize_t n = read(fd, s, sizeof *s);
        if (n != (ssize_t) sizeof *s || s->magic != BENCH_STAMP_MAGIC)
                die("%s: malformed stamp (%zd bytes): is the row's program tests/bench/stamp?", name, n);
        return 1;
}

static void parse_rows(char **argv, int argc, struct row *rows, int *n) {
        if (argc > MAX_ROWS)
                die("at most %d rows", MAX_ROWS);
        for (int i = 0; i < argc; i++) {
                char *eq = strchr(argv[i], '=');
                if (!eq)
                        die("a row is NAME=FIFO, not \"%s\"", argv[i]);
                *eq = '\0';
                rows[i] = (struct row) { .name = argv[i], .fd = open_fifo(eq + 1) };
        }
        *n = argc;
}

static int cmd_kill(struct row *rows, int n) {
        for (int i = 0; i < n; i++) {
                if (!read_stamp(rows[i].name, rows[i].fd, opt_timeout_ms, &rows[i].cur))
                        die("%s: no first instance within %ld ms: did the supervisor start it?", rows[i].name,
                            opt_timeout_ms);
                struct bench_stamp s; /* a late duplicate would desynchronise the row */
                while (read_stamp(rows[i].name, rows[i].fd, 0, &s))
                        rows[i].cur = s;
        }
        for (long round = 0; round < opt_warmup + opt_count; round++)
                for (int i = 0; i < n; i++) {
                        struct row *r = &rows[i];
                        sleep_until(r->cur.ns + (uint64_t) opt_hold_ms * 1000000u);
                        int pidfd = (int) syscall(SYS_pidfd_open, r->cur.pid, 0);
                        if (pidfd < 0)
                                die("%s: instance %d is gone before the kill (%s): it must not exit on its own",
                                    r->name, r->cur.pid, strerror(errno));
                        uint64_t t0 = now_ns();
                        if (syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0)
                                die("%s: SIGKILL %d: %s", r->name, r->cur.pid, strerror(errno));
                        struct bench_stamp s;
                        if (!read_stamp(r->name, r->fd, opt_timeout_ms, &s))
                                die("%s: no new instance within %ld ms after SIGKILL of %d", r->name, opt_timeout_ms,
                                    r->cur.pid);
                        if (s.pid == r->cur.pid || s.ns < t0)
                                die("%s: stamp of pid %d does not follow the kill of %d", r->name, s.pid, r->cur.pid);
                        close(pidfd);
                        r->cur = s;
                        if (round >= opt_warmup)
                                printf("sample %s %llu\n", r->name, (unsigned long long) (s.ns - t0));
                }
        for (int i = 0; i < n; i++)
                printf("pid %s %d\n", rows[i].name, rows[i].cur.pid);
        return 0;
}

static int cmd_crash(struct row *rows, int n) {
        struct pollfd p[MAX_ROWS];
        int left = n;
        for (int i = 0; i < n; i++)
                p[i] = (struct pollfd) { .fd = rows[i].fd, .events = POLLIN };
        while (left > 0) {
                int k = poll(p, (nfds_t) n, (int) opt_timeout_ms);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        die("poll: %s", strerror(errno));
                if (k == 0)
                        for (int i = 0; i < n; i++)
                                if (p[i].fd >= 0)
                                        die("%s: no new instance within %ld ms in the crash loop", rows[i].name,
                                            opt_timeout_ms);
                for (int i = 0; i < n; i++) {
                        if (p[i].fd < 0 || !(p[i].revents & POLLIN))
                                continue;
                        struct row *r = &rows[i];
                        struct bench_stamp s;
                        (void) read_stamp(r->name, r->fd, 0, &s);
                        if (r->have) {
                                if (s.pid == r->cur.pid || s.ns < r->cur.ns)
                                        die("%s: stamps out of order (pid %d after %d)", r->name, s.pid, r->cur.pid);
                                if (r->done++ >= opt_warmup)
                                        printf("sample %s %llu\n", r->name, (unsigned long long) (s.ns - r->cur.ns));
                        }
                        r->cur = s;
                        r->have = true;
                        if (r->done >= opt_warmup + opt_count) {
                                p[i].fd = -1;
                                left--;
                        }
                }
        }
        return 0;
}

/* Hides every cgroup2 mount from CMD (a private mount namespace), so tend
 * runs in its process-group mode (SPEC §4 "cgroups": no cgroup2 mount). */
static int hide_cgroup2(void) {
        if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return -errno;
        char line[4096], points[16][1024];
        int n = 0;
        while (n < 16 && fgets(line, sizeof line, f)) {
                char *sep = strstr(line, " - "), mp[1024];
                if (sep && !strncmp(sep + 3, "cgroup2 ", 8) && sscanf(line, "%*s %*s %*s %*s %1023s", mp) == 1)
                        snprintf(points[n++], sizeof points[0], "%s", mp);
        }
        fclose(f);
        while (n-- > 0)
                if (umount2(points[n], MNT_DETACH) < 0)
                        return -errno;
        return 0;
}

/* In the future supervisor, before its exec: its cgroup, its mount namespace. */
static void prepare_child(void) {
        if (opt_cgroup) {
                char path[4096];
                snprintf(path, sizeof path, "%s/cgroup.procs", opt_cgroup);
                int fd = open(path, O_WRONLY | O_CLOEXEC);
                if (fd < 0 || write(fd, "0", 1) != 1) {
                        fprintf(stderr, "bench-restart: %s: %s\n", path, strerror(errno));
                        _exit(127);
                }
                close(fd);
        }
        int k = opt_no_cgroup2 ? hide_cgroup2() : 0;
        if (k < 0) {
                fprintf(stderr, "bench-restart: --no-cgroup2: %s\n", strerror(-k));
                _exit(127);
        }
}

static pid_t spawn(char **argv) {
        pid_t pid = fork();
        if (pid < 0)
                die("fork: %s", strerror(errno));
        if (pid > 0)
                return pid;
        prepare_child();
        int null = open("/dev/null", O_RDWR);
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        if (null > STDERR_FILENO)
                close(null);
        execv(argv[0], argv);
        fprintf(stderr, "bench-restart: %s: %s\n", argv[0], strerror(errno));
        _exit(127);
}

static int wait_stop(pid_t pid) {
        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        (void) kill(pid, SIGTERM);
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        if (pidfd >= 0 && poll(&p, 1, (int) opt_timeout_ms) == 0) {
                fprintf(stderr, "bench-restart: %d did not exit within %ld ms of SIGTERM: SIGKILL\n", pid, opt_timeout_ms);
                (void) kill(pid, SIGKILL);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int cmd_start(const char *fifo, char **argv) {
        int fd = open_fifo(fifo);
        uint64_t t0 = now_ns(), first = UINT64_MAX, last = 0;
        pid_t pid = spawn(argv);
        for (long i = 0; i < opt_count; i++) {
                struct bench_stamp s;
                if (!read_stamp("start", fd, opt_timeout_ms, &s)) {
                        fprintf(stderr, "bench-restart: %s: %ld of %ld stamps after %ld ms without a new one\n", argv[0],
                                i, opt_count, opt_timeout_ms);
                        wait_stop(pid);
                        exit(1);
                }
                first = s.ns < first ? s.ns : first;
                last = s.ns > last ? s.ns : last;
        }
        printf("elapsed %llu\nfirst %llu\npid %d\n", (unsigned long long) (last - t0),
               (unsigned long long) (first - t0), pid);
        fflush(stdout);
        char buf[256];
        while (read(STDIN_FILENO, buf, sizeof buf) > 0)
                ;
        printf("exit %d\n", wait_stop(pid));
        return 0;
}

static long number(const char *opt, const char *v) {
        char *end;
        long x = v ? strtol(v, &end, 10) : -1;
        if (!v || *end || x < 0) {
                fprintf(stderr, "bench-restart: %s wants a number\n", opt);
                exit(2);
        }
        return x;
}

int main(int argc, char **argv) {
        if (argc < 2) {
                fprintf(stderr, "usage: bench-restart kill|crash|start OPTIONS ... (see the source)\n");
                return 2;
        }
        const char *cmd = argv[1];
        int i = 2;
        for (; i < argc && !strncmp(argv[i], "--", 2) && strcmp(argv[i], "--"); i += 2) {
                const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (!strcmp(o, "--count"))
                        opt_count = number(o, v);
                else if (!strcmp(o, "--warmup"))
                        opt_warmup = number(o, v);
                else if (!strcmp(o, "--hold-ms"))
                        opt_hold_ms = number(o, v);
                else if (!strcmp(o, "--timeout-ms"))
                        opt_timeout_ms = number(o, v);
                else if (!strcmp(o, "--cgroup"))
                        opt_cgroup = v;
                else if (!strcmp(o, "--no-cgroup2")) {
                        opt_no_cgroup2 = true;
                        i--; /* takes no value */
                }
                else {
                        fprintf(stderr, "bench-restart: unknown option %s\n", o);
                        return 2;
                }
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        struct row rows[MAX_ROWS];
        int n = 0;
        if (!strcmp(cmd, "kill") || !strcmp(cmd, "crash")) {
                parse_rows(argv + i, argc - i, rows, &n);
                if (n == 0)
                        return 2;
                return !strcmp(cmd, "kill") ? cmd_kill(rows, n) : cmd_crash(rows, n);
        }
        if (!strcmp(cmd, "start") && i + 2 < argc && !strcmp(argv[i + 1], "--"))
                return cmd_start(argv[i], argv + i + 2);
        if (!strcmp(cmd, "exec") && i + 1 < argc && !strcmp(argv[i], "--")) {
                prepare_child();
                execv(argv[i + 1], argv + i + 1);
                die("%s: %s", argv[i + 1], strerror(errno));
        }
        fprintf(stderr, "bench-restart: unknown command or missing FIFO -- CMD\n");
        return 2;
}
