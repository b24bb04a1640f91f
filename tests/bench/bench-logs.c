/* SPDX-License-Identifier: MIT */
/*
 * Log pipeline benchmark (SPEC §4 "Logs"; results in docs/benchmarks.md,
 * "logs"). A writer thread plays the unit: it writes complete lines into the
 * stream's pipe in 64 KiB blocks (blocking, as a unit's stdout does). The
 * main thread runs the sd-event loop: read, cut into lines, prefix
 * "NAME[PID]: ", writev to the console sink, push to the ring. Sinks:
 * /dev/null (the pipeline's own cost) and a pipe drained by a reader thread
 * (a container runtime reading tend's stdout). Lines of 80 and 1024 bytes.
 * Reported: lines/s and MB/s of the unit's output, and the floor — the same
 * bytes through a bare read()+write() copy loop, no lines, no prefix.
 * Each figure is the best of 3 runs.
 *
 * --quick (CI): a few MB, one run, nothing judged. Exit 1 only on an error
 * (a lost line, a failed call).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logs.h"

static bool quick;

static _Noreturn void die(const char *what, int r) {
        fprintf(stderr, "bench-logs: %s: %s\n", what, r < 0 ? strerror(-r) : "unexpected answer");
        exit(1);
}

/* ------------------------------------------------------------------------ */
/* The unit: a thread writing n lines of len bytes                            */
/* ------------------------------------------------------------------------ */

struct writer {
        int fd;
        size_t len;
        uint64_t n;
        pthread_t t;
};

static void *writer_run(void *arg) {
        struct writer *w = arg;
        size_t per = (64 * 1024) / w->len, blen = per * w->len;
        char *block = malloc(blen);
        if (!block)
                die("malloc", -ENOMEM);
        for (size_t i = 0; i < per; i++) {
                memset(block + i * w->len, 'a' + (int) (i % 26), w->len - 1);
                block[i * w->len + w->len - 1] = '\n';
        }
        for (uint64_t left = w->n; left > 0;) {
                size_t lines = left < per ? (size_t) left : per, len = lines * w->len, off = 0;
                while (off < len) {
                        ssize_t k = write(w->fd, block + off, len - off);
                        if (k < 0)
                                die("write", -errno);
                        off += (size_t) k;
                }
                left -= lines;
        }
        free(block);
        return NULL;
}

/* ------------------------------------------------------------------------ */
/* The pipe sink's reader: a thread draining it until EOF                     */
/* ------------------------------------------------------------------------ */

struct reader {
        int fd;
        uint64_t bytes;
        pthread_t t;
};

static void *reader_run(void *arg) {
        struct reader *r = arg;
        char *buf = malloc(1 << 20);
        ssize_t k;
        if (!buf)
                die("malloc", -ENOMEM);
        while ((k = read(r->fd, buf, 1 << 20)) > 0)
                r->bytes += (uint64_t) k;
        free(buf);
        return NULL;
}

/* ------------------------------------------------------------------------ */
/* One run                                                                    */
/* ------------------------------------------------------------------------ */

enum sink_kind { TO_DEVNULL, TO_PIPE };

struct result {
        double lines_per_s, mb_per_s, floor_mb_per_s;
};

/* Opens the sink: /dev/null, or a pipe whose read end a reader thread drains. */
static int sink_open(enum sink_kind k, struct reader *rd) {
        if (k == TO_DEVNULL) {
                int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (fd < 0)
                        die("open /dev/null", -errno);
                return fd;
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                die("pipe2", -errno);
        (void) fcntl(p[1], F_SETPIPE_SZ, 1 << 20); /* as a container runtime's would be: roomy */
        *rd = (struct reader) { .fd = p[0] };
        if (pthread_create(&rd->t, NULL, reader_run, rd) != 0)
                die("pthread_create", -EAGAIN);
        return p[1];
}

static void sink_close(enum sink_kind k, int fd, struct reader *rd) {
        close(fd);
        if (k == TO_PIPE) {
                pthread_join(rd->t, NULL);
                close(rd->fd);
        }
}

static double run_pipeline(enum sink_kind kind, size_t len, uint64_t n) {
        sd_event *e = NULL;
        logs_manager *m = NULL;
        logs_stream *s = NULL;
        struct reader rd = { .fd = -1 };
        int r, out, err;

        int sink = sink_open(kind, &rd);
        if ((r = sd_event_new(&e)) < 0)
                die("sd_event_new", r);
        struct logs_manager_options o = { .console_fd = sink };
        if ((r = logs_manager_new(e, &o, &m)) < 0)
                die("logs_manager_new", r);
        struct logs_stream_config c = {
                .name = "bench",
                .stdout_target = { LOGS_TARGET_CONSOLE, NULL },
                .stderr_target = { LOGS_TARGET_CONSOLE, NULL },
        };
        if ((r = logs_stream_new(m, &c, &s)) < 0)
                die("logs_stream_new", r);
        logs_stream_set_pid(s, 12345);
        if ((r = logs_stream_prepare_spawn(s, &out, &err)) < 0)
                die("prepare_spawn", r);

        struct writer w = { .fd = out, .len = len, .n = n };
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        if (pthread_create(&w.t, NULL, writer_run, &w) != 0)
                die("pthread_create", -EAGAIN);
        struct logs_stream_stats st;
        do {
                if ((r = sd_event_run(e, USEC_INFINITY)) < 0)
                        die("sd_event_run", r);
                logs_stream_get_stats(s, &st);
        } while (st.lines < n);
        usec_t t1 = now_usec(CLOCK_MONOTONIC);
        pthread_join(w.t, NULL);
        if (st.lines != n || st.sink_lost_lines != 0)
                die("lines lost", 0);

        logs_stream_free(s);
        logs_manager_free(m);
        sd_event_unref(e);
        sink_close(kind, sink, &rd);
        if (kind == TO_PIPE && rd.bytes != n * (len + strlen("bench[12345]: ")))
                die("bytes lost on the pipe sink", 0);
        return (double) (t1 - t0) / 1e6;
}

/* The floor: the same bytes, read() then write() as they come. */
static double run_floor(enum sink_kind kind, size_t len, uint64_t n) {
        struct reader rd = { .fd = -1 };
        int p[2];
        char *buf = malloc(64 * 1024);

        if (!buf || pipe2(p, O_CLOEXEC) < 0)
                die("pipe2", -errno);
        int sink = sink_open(kind, &rd);
        struct writer w = { .fd = p[1], .len = len, .n = n };
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        if (pthread_create(&w.t, NULL, writer_run, &w) != 0)
                die("pthread_create", -EAGAIN);
        for (uint64_t total = n * len, got = 0; got < total;) {
                ssize_t k = read(p[0], buf, 64 * 1024);
                if (k <= 0)
                        die("read", k < 0 ? -errno : 0);
                if (write(sink, buf, (size_t) k) != k)
                        die("write", -errno);
                got += (uint64_t) k;
        }
        usec_t t1 = now_usec(CLOCK_MONOTONIC);
        pthread_join(w.t, NULL);
        close(p[0]);
        close(p[1]);
        sink_close(kind, sink, &rd);
        free(buf);
        return (double) (t1 - t0) / 1e6;
}

static void print_machine(void) {
        char model[256] = "?", line[512];
        FILE *f = fopen("/proc/cpuinfo", "re");
        if (f) {
                while (fgets(line, sizeof line, f))
                        if (strncmp(line, "model name", 10) == 0) {
                                char *c = strchr(line, ':');
                                if (c) {
                                        snprintf(model, sizeof model, "%s", c + 2);
                                        model[strcspn(model, "\n")] = '\0';
                                }
                                break;
                        }
                fclose(f);
        }
        printf("machine: %ld CPUs, %s\n", sysconf(_SC_NPROCESSORS_ONLN), model);
}

int main(int argc, char **argv) {
        static const char *const sink_names[] = { "/dev/null", "pipe" };
        static const size_t lens[] = { 80, 1024 };

        quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
        int reps = quick ? 1 : 3;
        uint64_t bytes = quick ? 4u << 20 : 256u << 20;

        print_machine();
        printf("%-10s %6s %14s %12s %14s %8s\n", "sink", "line", "lines/s", "MB/s", "floor MB/s", "ratio");
        for (unsigned k = 0; k < 2; k++)
                for (unsigned l = 0; l < 2; l++) {
                        uint64_t n = bytes / lens[l];
                        double best = 1e9, best_floor = 1e9;
                        for (int i = 0; i < reps; i++) {
                                double t = run_pipeline((enum sink_kind) k, lens[l], n);
                                double tf = run_floor((enum sink_kind) k, lens[l], n);
                                best = t < best ? t : best;
                                best_floor = tf < best_floor ? tf : best_floor;
                        }
                        double mb = (double) (n * lens[l]) / 1e6;
                        printf("%-10s %6zu %14.0f %12.1f %14.1f %7.2fx\n", sink_names[k], lens[l], (double) n / best,
                               mb / best, mb / best_floor, best / best_floor);
                }
        if (quick)
                printf("quick run: nothing judged\n");
        return 0;
}
