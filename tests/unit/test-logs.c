/* SPDX-License-Identifier: MIT */
/*
 * The log pipeline for units (SPEC §4 "Logs", §7 limits), on real pipes and
 * real child processes (/bin/sh): lines survive a crash and a restart, a
 * blocked sink stalls only the units writing to it and loses nothing,
 * partial and over-long lines, the ring's bound, followers (a slow one is
 * dropped with a note), pipe sharing, tend's non-blocking stdout
 * description, the final drain, and the journal target (skipped when
 * journald is not running). Every wait has a deadline whose failure message
 * names the likely cause; every test checks that no fd leaked and leaves no
 * child behind (ASan checks memory).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "logs.h"
#include "logs-handover.h"
#include "testutil.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define PAYLOAD "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" /* 64 bytes */
#define LINE_LEN (12 + 64 + 1) /* "line %06d " PAYLOAD "\n" */
#define MEGA_LINES 15000       /* 15000 × 77 B ≈ 1.1 MB */
#define MAX_CHILDREN 8

/* ------------------------------------------------------------------------ */
/* Small helpers: growable buffers, fd count, tend's log captured            */
/* ------------------------------------------------------------------------ */

struct sbuf {
        char *p;
        size_t len, cap;
};

static void sbuf_add(struct sbuf *b, const void *d, size_t n) {
        if (b->len + n + 1 > b->cap) {
                b->cap = (b->len + n + 1) * 2;
                b->p = realloc(b->p, b->cap);
                assert_non_null(b->p);
        }
        memcpy(b->p + b->len, d, n);
        b->len += n;
        b->p[b->len] = '\0';
}

/* Reads what fd (non-blocking) holds now. */
static void sbuf_read(int fd, struct sbuf *b) {
        char tmp[65536];
        for (;;) {
                ssize_t n = read(fd, tmp, sizeof tmp);
                if (n > 0) {
                        sbuf_add(b, tmp, (size_t) n);
                        continue;
                }
                assert_true(n == 0 || errno == EAGAIN || errno == EINTR);
                return;
        }
}

static void sbuf_free(struct sbuf *b) {
        free(b->p);
        *b = (struct sbuf) { 0 };
}


static struct sbuf logged; /* tend's own diagnostics, captured */

static void capture_log(int level, const char *msg, void *userdata) {
        sbuf_add(&logged, msg, strlen(msg));
        sbuf_add(&logged, "\n", 1);
}

/* ------------------------------------------------------------------------ */
/* Children: /bin/sh with the stream's fds as stdout and stderr              */
/* ------------------------------------------------------------------------ */

struct child {
        pid_t pid;
        int pidfd;
        bool exited;
        int code;   /* CLD_EXITED / CLD_KILLED / CLD_DUMPED */
        int status; /* exit code or signal */
};

static struct child *child_spawn(struct child *c, const char *script, int out, int err) {
        pid_t parent = getpid();
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct rlimit nocore = { 0, 0 };
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(99);
                (void) setrlimit(RLIMIT_CORE, &nocore);
                signal(SIGPIPE, SIG_DFL);
                if (dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
                        _exit(98);
                execl("/bin/sh", "sh", "-c", script, (char *) NULL);
                _exit(127);
        }
        *c = (struct child) { .pid = pid, .pidfd = (int) syscall(SYS_pidfd_open, pid, 0) };
        assert_true(c->pidfd >= 0);
        return c;
}

/* Spawns script as the stream's (main) process, as the unit manager would. */
static struct child *unit_spawn(struct child *c, logs_stream *s, const char *script) {
        int out, err;
        assert_int_equal(logs_stream_prepare_spawn(s, &out, &err), 0);
        child_spawn(c, script, out, err);
        logs_stream_spawn_done(s);
        logs_stream_set_pid(s, c->pid);
        return c;
}

static bool child_poll(struct child *c) {
        if (!c || c->pid <= 0 || c->exited)
                return c && c->exited;
        struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
        if (poll(&p, 1, 0) <= 0)
                return false;
        siginfo_t si = { 0 };
        assert_int_equal(waitid((idtype_t) P_PIDFD, (id_t) c->pidfd, &si, WEXITED), 0);
        c->exited = true;
        c->code = si.si_code;
        c->status = si.si_status;
        return true;
}

static void child_reap(struct child *c) {
        if (c->pid <= 0)
                return;
        if (!c->exited) {
                (void) syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
                siginfo_t si;
                (void) waitid((idtype_t) P_PIDFD, (id_t) c->pidfd, &si, WEXITED);
        }
        close(c->pidfd);
        c->pid = 0;
}

/* "i=0; while …; do printf 'line %06d PAYLOAD\n' $i; …; done; TAIL" */
static char *lines_script(unsigned n, const char *tail) {
        char *s;
        assert_true(asprintf(&s, "i=0; while [ $i -lt %u ]; do printf 'line %%06d %s\\n' $i; i=$((i+1)); done; %s",
                             n, PAYLOAD, tail) > 0);
        return s;
}

/* ------------------------------------------------------------------------ */
/* Fixture: an sd-event loop, a manager whose "tend's stdout" is a pipe the  */
/* test reads, a temporary directory                                         */
/* ------------------------------------------------------------------------ */

struct fx {
        sd_event *e;
        logs_manager *m;
        int con[2];          /* [1] is the console fd given to the manager; the test reads [0] */
        struct sbuf out;     /* what reached the console */
        bool read_console;   /* run_until() drains con[0] */
        int extra_fd;        /* another fd run_until() drains into extra */
        struct sbuf extra;
        int aux_fd;          /* closed at teardown */
        struct child kids[MAX_CHILDREN];
        char dir[64];
        int fds;
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof *f);
        assert_non_null(f);
        f->fds = count_fds();
        sbuf_free(&logged);
        assert_int_equal(sd_event_new(&f->e), 0);
        assert_int_equal(pipe2(f->con, O_CLOEXEC), 0);
        assert_int_equal(fcntl(f->con[0], F_SETFL, O_NONBLOCK), 0);
        struct logs_manager_options o = { .console_fd = f->con[1] };
        assert_int_equal(logs_manager_new(f->e, &o, &f->m), 0);
        f->read_console = true;
        f->extra_fd = f->aux_fd = -1;
        snprintf(f->dir, sizeof f->dir, "/tmp/test-logs-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        *state = f;
        return 0;
}

static void rm_dir(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        if (!d)
                return;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
        (void) rmdir(dir);
}

static int teardown(void **state) {
        struct fx *f = *state;
        for (unsigned i = 0; i < MAX_CHILDREN; i++)
                child_reap(&f->kids[i]);
        f->m = logs_manager_free(f->m);
        f->e = sd_event_unref(f->e);
        close(f->con[0]);
        close(f->con[1]);
        safe_close(f->aux_fd);
        rm_dir(f->dir);
        sbuf_free(&f->out);
        sbuf_free(&f->extra);
        int want = f->fds;
        free(f);
        assert_int_equal(count_fds(), want); /* an fd leaked */
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Bounded waiting                                                           */
/* ------------------------------------------------------------------------ */

typedef bool (*cond_fn)(struct fx *f, void *arg);

/* Runs the loop (and drains the test's readers) until cond holds; fails
 * after timeout_ms naming what was awaited and the likely cause. */
static void run_until(struct fx *f, cond_fn cond, void *arg, int timeout_ms, const char *what, const char *cause) {
        usec_t deadline = deadline_after_ms(timeout_ms);
        for (;;) {
                if (f->read_console)
                        sbuf_read(f->con[0], &f->out);
                if (f->extra_fd >= 0)
                        sbuf_read(f->extra_fd, &f->extra);
                for (unsigned i = 0; i < MAX_CHILDREN; i++)
                        child_poll(&f->kids[i]);
                if (cond(f, arg))
                        return;
                if (now_usec(CLOCK_MONOTONIC) >= deadline)
                        fail_msg("timed out after %d ms waiting for %s (likely cause: %s)", timeout_ms, what, cause);
                assert_true(sd_event_run(f->e, 2 * USEC_PER_MSEC) >= 0);
        }
}

struct want {
        struct child *exited[3];
        logs_stream *s[3];
        uint64_t lines[3];
        struct sbuf *buf;
        size_t len;
};

static bool want_met(struct fx *f, void *arg) {
        struct want *w = arg;
        for (unsigned i = 0; i < 3; i++) {
                if (w->exited[i] && !w->exited[i]->exited)
                        return false;
                if (w->s[i]) {
                        struct logs_stream_stats st;
                        logs_stream_get_stats(w->s[i], &st);
                        if (st.lines < w->lines[i])
                                return false;
                }
        }
        return !w->buf || w->buf->len >= w->len;
}

/* Runs the loop until it is idle for a few rounds (nothing more will come). */
static void run_idle(struct fx *f) {
        for (int idle = 0, rounds = 0; idle < 5 && rounds < 10000; rounds++) {
                int r = sd_event_run(f->e, 10 * USEC_PER_MSEC);
                assert_true(r >= 0);
                idle = r == 0 ? idle + 1 : 0;
        }
        if (f->read_console)
                sbuf_read(f->con[0], &f->out);
}

/* ------------------------------------------------------------------------ */
/* Checking what arrived                                                     */
/* ------------------------------------------------------------------------ */

struct expect {
        char prefix[64];   /* "NAME[PID]: ", or "" for a raw file */
        unsigned next, n;
};

/* buf must be exactly the lines "PREFIX" "line %06u " PAYLOAD, every expect's
 * indices 0..n-1 in order, lines of several expects in any interleaving of
 * whole lines. */
static void check_lines(const struct sbuf *b, struct expect *ex, unsigned nex) {
        size_t off = 0, lineno = 0;
        while (off < b->len) {
                const char *line = b->p + off;
                const char *nl = memchr(line, '\n', b->len - off);
                if (!nl)
                        fail_msg("line %zu has no newline: \"%.80s\"", lineno, line);
                size_t len = (size_t) (nl - line);
                unsigned j;
                for (j = 0; j < nex; j++) {
                        size_t pl = strlen(ex[j].prefix);
                        char want[256];
                        if (len < pl || memcmp(line, ex[j].prefix, pl) != 0)
                                continue;
                        snprintf(want, sizeof want, "%sline %06u %s", ex[j].prefix, ex[j].next, PAYLOAD);
                        if (strlen(want) != len || memcmp(want, line, len) != 0)
                                fail_msg("line %zu: got \"%.*s\", want \"%s\" (lost, reordered or interleaved)",
                                         lineno, (int) (len < 200 ? len : 200), line, want);
                        ex[j].next++;
                        break;
                }
                if (j == nex)
                        fail_msg("line %zu: unexpected \"%.*s\"", lineno, (int) (len < 200 ? len : 200), line);
                off += len + 1;
                lineno++;
        }
        for (unsigned j = 0; j < nex; j++)
                if (ex[j].next != ex[j].n)
                        fail_msg("\"%s\": %u lines arrived, %u written", ex[j].prefix, ex[j].next, ex[j].n);
}

static void read_file(const char *path, struct sbuf *b) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        char tmp[65536];
        ssize_t n;
        while ((n = read(fd, tmp, sizeof tmp)) > 0)
                sbuf_add(b, tmp, (size_t) n);
        close(fd);
}

static struct logs_stream_config console_unit(const char *name) {
        return (struct logs_stream_config) {
                .name = name,
                .stdout_target = { LOGS_TARGET_CONSOLE, NULL },
                .stderr_target = { LOGS_TARGET_CONSOLE, NULL },
        };
}

static struct logs_stream_config file_unit(const char *name, const char *path) {
        return (struct logs_stream_config) {
                .name = name,
                .stdout_target = { LOGS_TARGET_FILE, path },
                .stderr_target = { LOGS_TARGET_FILE, path },
        };
}

static void wait_for(struct fx *f, struct want w, int timeout_ms, const char *what, const char *cause) {
        run_until(f, want_met, &w, timeout_ms, what, cause);
}

static void assert_crashed(const struct child *k, int sig) {
        if (!(k->code == CLD_KILLED || k->code == CLD_DUMPED) || k->status != sig)
                fail_msg("child %d: si_code %d status %d, want killed by signal %d", k->pid, k->code, k->status, sig);
}

static bool stream_paused(struct fx *f, void *arg) {
        struct logs_stream_stats st;
        logs_stream_get_stats(arg, &st);
        return st.sink_pauses > 0;
}

/* ------------------------------------------------------------------------ */
/* 1 MB of lines, then a crash: every line reaches the sink, in order        */
/* ------------------------------------------------------------------------ */

static void test_crash_console(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("mega");
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        _cleanup_free_ char *script = lines_script(MEGA_LINES, "kill -SEGV $$");
        struct expect ex = { .n = MEGA_LINES };
        struct logs_stream_stats st;

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        struct child *k = unit_spawn(&f->kids[0], s, script);
        snprintf(ex.prefix, sizeof ex.prefix, "mega[%d]: ", k->pid);

        wait_for(f, (struct want) { .exited = { k } }, 30000, "the writer to crash",
                 "tend stopped reading the unit's pipe and never resumed (backpressure stuck)");
        assert_crashed(k, SIGSEGV);
        assert_int_equal(logs_stream_main_exited(s), 0);
        wait_for(f, (struct want) { .buf = &f->out, .len = MEGA_LINES * (strlen(ex.prefix) + LINE_LEN) }, 10000,
                 "every line on tend's stdout", "lines lost, or stuck in a paused pipe after the crash");
        check_lines(&f->out, &ex, 1);
        logs_stream_get_stats(s, &st);
        assert_int_equal(st.lines, MEGA_LINES);
        assert_int_equal(st.bytes, (uint64_t) MEGA_LINES * LINE_LEN);
        assert_int_equal(st.sink_lost_lines, 0);
        assert_int_equal(st.partial_lines, 0);
}

static void test_crash_file(void **state) {
        struct fx *f = *state;
        char path[128];
        snprintf(path, sizeof path, "%s/mega.log", f->dir);
        struct logs_stream_config c = file_unit("mega", path);
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        _cleanup_free_ char *script = lines_script(MEGA_LINES, "kill -SEGV $$");
        struct expect ex = { .prefix = "", .n = MEGA_LINES };
        struct sbuf content = { 0 };

        /* file: truncates when the stream opens it. */
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "stale\n", 6), 6);
        close(fd);

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_n_pipes(s), 1);
        struct child *k = unit_spawn(&f->kids[0], s, script);
        wait_for(f, (struct want) { .exited = { k } }, 30000, "the writer to crash",
                 "tend stopped reading the unit's pipe (a regular file never blocks)");
        assert_crashed(k, SIGSEGV);
        assert_int_equal(logs_stream_main_exited(s), 0);
        wait_for(f, (struct want) { .s = { s }, .lines = { MEGA_LINES } }, 10000, "every line in the file",
                 "lines lost between the pipe and the file");
        read_file(path, &content);
        check_lines(&content, &ex, 1);
        assert_int_equal(f->out.len, 0); /* nothing went to tend's stdout */
        sbuf_free(&content);
}

/* ------------------------------------------------------------------------ */
/* The pipe survives a restart                                               */
/* ------------------------------------------------------------------------ */

static void test_restart(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("svc");
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        _cleanup_free_ char *one = lines_script(500, "kill -KILL $$");
        _cleanup_free_ char *two = lines_script(500, "exit 0");
        struct expect ex[2] = { { .n = 500 }, { .n = 500 } };

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        struct child *k1 = unit_spawn(&f->kids[0], s, one);
        snprintf(ex[0].prefix, sizeof ex[0].prefix, "svc[%d]: ", k1->pid);
        /* The loop does not run: instance 1's lines wait in the pipe tend holds. */
        struct pollfd p = { .fd = k1->pidfd, .events = POLLIN };
        assert_int_equal(poll(&p, 1, 10000), 1);
        assert_true(child_poll(k1));
        assert_crashed(k1, SIGKILL);
        assert_int_equal(f->out.len, 0);
        /* Main exit: what the pipe holds now is read with the old pid. */
        assert_int_equal(logs_stream_main_exited(s), 0);

        struct child *k2 = unit_spawn(&f->kids[1], s, two);
        snprintf(ex[1].prefix, sizeof ex[1].prefix, "svc[%d]: ", k2->pid);
        wait_for(f, (struct want) { .exited = { k2 } }, 10000, "instance 2 to exit", "its pipe is not read");
        assert_int_equal(logs_stream_main_exited(s), 0);
        wait_for(f, (struct want) { .s = { s }, .lines = { 1000 } }, 10000, "both instances' lines",
                 "lines written before the restart were lost");
        run_idle(f);
        check_lines(&f->out, ex, 2);
        /* Instance 1's lines all precede instance 2's. */
        char *first2 = strstr(f->out.p, ex[1].prefix);
        assert_non_null(first2);
        assert_null(strstr(first2, ex[0].prefix));
}

/* ------------------------------------------------------------------------ */
/* A blocked sink stalls only its own unit; nothing is lost                  */
/* ------------------------------------------------------------------------ */

static void test_blocked_fifo(void **state) {
        struct fx *f = *state;
        char path[128];
        snprintf(path, sizeof path, "%s/fifo", f->dir);
        assert_int_equal(mkfifo(path, 0600), 0);
        /* A reader that does not read: tend's writes fill the FIFO and block. */
        f->aux_fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        assert_true(f->aux_fd >= 0);

        struct logs_stream_config ca = file_unit("slow", path), cb = console_unit("fast");
        _cleanup_(logs_stream_freep) logs_stream *a = NULL, *b = NULL;
        _cleanup_free_ char *big = lines_script(MEGA_LINES, "exit 0");
        _cleanup_free_ char *small = lines_script(2000, "exit 0");
        struct expect exa = { .prefix = "", .n = MEGA_LINES }, exb = { .n = 2000 };
        struct logs_stream_stats st;

        assert_int_equal(logs_stream_new(f->m, &ca, &a), 0);

        assert_int_equal(logs_stream_open_pipes(a), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_new(f->m, &cb, &b), 0);
        assert_int_equal(logs_stream_open_pipes(b), 0); /* issue 19: pipes at the start */
        struct child *ka = unit_spawn(&f->kids[0], a, big);
        run_until(f, stream_paused, a, 20000, "the FIFO unit to pause", "tend never saw EAGAIN on the full FIFO");
        struct child *kb = unit_spawn(&f->kids[1], b, small);
        snprintf(exb.prefix, sizeof exb.prefix, "fast[%d]: ", kb->pid);

        wait_for(f, (struct want) { .exited = { kb }, .buf = &f->out, .len = 2000 * (strlen(exb.prefix) + LINE_LEN) },
                 20000, "the other unit's lines while the FIFO is not read",
                 "a blocked sink stalled the whole loop, or another unit's pipe");
        child_poll(ka);
        assert_false(ka->exited); /* its writes block: backpressure reached the unit */
        logs_stream_get_stats(a, &st);
        assert_true(st.lines < MEGA_LINES);
        assert_int_equal(logs_stream_main_exited(b), 0);
        check_lines(&f->out, &exb, 1);

        /* Now read the FIFO: every line of the blocked unit arrives. */
        f->extra_fd = f->aux_fd;
        wait_for(f, (struct want) { .exited = { ka } }, 30000, "the blocked unit to finish once its FIFO is read",
                 "tend never resumed reading after EPOLLOUT on the FIFO");
        assert_int_equal(logs_stream_main_exited(a), 0);
        wait_for(f, (struct want) { .buf = &f->extra, .len = (size_t) MEGA_LINES * LINE_LEN }, 10000,
                 "every line through the FIFO", "lines lost while the sink was blocked");
        check_lines(&f->extra, &exa, 1);
        logs_stream_get_stats(a, &st);
        assert_int_equal(st.sink_lost_lines, 0);
        a = logs_stream_free(a);
        f->extra_fd = -1;
}

static void test_blocked_console(void **state) {
        struct fx *f = *state;
        char path[128];
        snprintf(path, sizeof path, "%s/c.log", f->dir);
        struct logs_stream_config ca = console_unit("ua"), cb = console_unit("ub"), cc = file_unit("uc", path);
        _cleanup_(logs_stream_freep) logs_stream *a = NULL, *b = NULL, *c = NULL;
        _cleanup_free_ char *big = lines_script(MEGA_LINES / 2, "exit 0");
        _cleanup_free_ char *small = lines_script(2000, "exit 0");
        struct expect ex[2] = { { .n = MEGA_LINES / 2 }, { .n = MEGA_LINES / 2 } };
        struct expect exc = { .prefix = "", .n = 2000 };
        struct sbuf content = { 0 };
        
        assert_int_equal(logs_stream_new(f->m, &ca, &a), 0);
        
        assert_int_equal(logs_stream_open_pipes(a), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_new(f->m, &cb, &b), 0);
        assert_int_equal(logs_stream_open_pipes(b), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_new(f->m, &cc, &c), 0);
        assert_int_equal(logs_stream_open_pipes(c), 0); /* issue 19: pipes at the start */
        f->read_console = false; /* tend's stdout: a pipe nobody reads */
        struct child *ka = unit_spawn(&f->kids[0], a, big);
        struct child *kb = unit_spawn(&f->kids[1], b, big);
        run_until(f, stream_paused, a, 20000, "unit A to pause", "tend never saw EAGAIN on its full stdout");
        run_until(f, stream_paused, b, 20000, "unit B to pause", "tend never saw EAGAIN on its full stdout");
        struct child *kc = unit_spawn(&f->kids[2], c, small);
        snprintf(ex[0].prefix, sizeof ex[0].prefix, "ua[%d]: ", ka->pid);
        snprintf(ex[1].prefix, sizeof ex[1].prefix, "ub[%d]: ", kb->pid);

        wait_for(f, (struct want) { .exited = { kc }, .s = { c }, .lines = { 2000 } }, 20000,
                 "the file unit's lines while tend's stdout is full",
                 "a full tend stdout stalled a unit writing elsewhere");
        child_poll(ka);
        child_poll(kb);
        assert_false(ka->exited);
        assert_false(kb->exited);
        read_file(path, &content);
        check_lines(&content, &exc, 1);

        /* Drain tend's stdout: both units' lines arrive whole, none lost. */
        f->read_console = true;
        wait_for(f, (struct want) { .exited = { ka, kb } }, 30000, "the console units to finish once stdout is read",
                 "tend never resumed the paused pipes after EPOLLOUT on its stdout");
        assert_int_equal(logs_stream_main_exited(a), 0);
        assert_int_equal(logs_stream_main_exited(b), 0);
        wait_for(f, (struct want) { .buf = &f->out,
                                    .len = (MEGA_LINES / 2) * (strlen(ex[0].prefix) + strlen(ex[1].prefix) + 2 * LINE_LEN) },
                 10000, "every console line", "lines lost or cut while tend's stdout was full");
        check_lines(&f->out, ex, 2);
        sbuf_free(&content);
}

/* ------------------------------------------------------------------------ */
/* Partial last line; an over-long line                                      */
/* ------------------------------------------------------------------------ */

struct collected {
        struct logs_line l[64];
        char *text[64];
        unsigned n;
};

static int collect(const struct logs_line *l, void *userdata) {
        struct collected *c = userdata;
        if (c->n == 64)
                return -ENOBUFS;
        c->l[c->n] = *l;
        c->text[c->n] = malloc(l->len + 1);
        assert_non_null(c->text[c->n]);
        memcpy(c->text[c->n], l->text, l->len + 1);
        c->l[c->n].text = c->text[c->n];
        c->n++;
        return 0;
}

static void collected_free(struct collected *c) {
        for (unsigned i = 0; i < c->n; i++)
                free(c->text[i]);
        c->n = 0;
}

static void test_partial_line(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("part");
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        char want1[64], want2[64];
        struct collected col = { 0 };

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        struct child *k = unit_spawn(&f->kids[0], s, "printf 'abc\\ndef'");
        snprintf(want1, sizeof want1, "part[%d]: abc\n", k->pid);
        snprintf(want2, sizeof want2, "part[%d]: abc\npart[%d]: def\n", k->pid, k->pid);
        wait_for(f, (struct want) { .exited = { k }, .buf = &f->out, .len = strlen(want1) }, 10000,
                 "the complete line", "the pipe is not read");
        run_idle(f);
        assert_string_equal(f->out.p, want1); /* "def" waits for its newline… */
        assert_int_equal(logs_stream_main_exited(s), 0);
        sbuf_read(f->con[0], &f->out);
        assert_string_equal(f->out.p, want2); /* …until the main process exited */

        assert_int_equal(logs_stream_ring(s, SIZE_MAX, collect, &col), 2);
        assert_string_equal(col.l[0].text, "abc");
        assert_int_equal(col.l[0].flags, 0);
        assert_string_equal(col.l[1].text, "def");
        assert_int_equal(col.l[1].flags, LOGS_LINE_PARTIAL);
        assert_int_equal(col.l[1].pid, k->pid);
        collected_free(&col);
}

static void test_long_line(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("long");
        c.ring_bytes = 256 * 1024;
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        struct collected col = { 0 };
        struct sbuf want = { 0 };
        char prefix[64];
        struct logs_stream_stats st;

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        struct child *k = unit_spawn(&f->kids[0], s, "head -c 102400 /dev/zero | tr '\\0' x; echo");
        snprintf(prefix, sizeof prefix, "long[%d]: ", k->pid);
        char *xs = malloc(LOGS_LINE_MAX);
        assert_non_null(xs);
        memset(xs, 'x', LOGS_LINE_MAX);
        for (int i = 0; i < 2; i++) {
                sbuf_add(&want, prefix, strlen(prefix));
                sbuf_add(&want, xs, LOGS_LINE_MAX);
                sbuf_add(&want, LOGS_CONTINUES_MARKER "\n", strlen(LOGS_CONTINUES_MARKER) + 1);
        }
        sbuf_add(&want, prefix, strlen(prefix));
        sbuf_add(&want, xs, 102400 - 2 * LOGS_LINE_MAX);
        sbuf_add(&want, "\n", 1);
        free(xs);

        wait_for(f, (struct want) { .exited = { k }, .buf = &f->out, .len = want.len }, 10000,
                 "three pieces of the 100 KiB line", "the line was not split at 48 KiB, or a piece is stuck");
        run_idle(f);
        assert_int_equal(f->out.len, want.len);
        assert_memory_equal(f->out.p, want.p, want.len);

        assert_int_equal(logs_stream_ring(s, SIZE_MAX, collect, &col), 3);
        assert_int_equal(col.l[0].len, LOGS_LINE_MAX);
        assert_int_equal(col.l[0].flags, LOGS_LINE_CONTINUES);
        assert_int_equal(col.l[1].len, LOGS_LINE_MAX);
        assert_int_equal(col.l[1].flags, LOGS_LINE_CONTINUES);
        assert_int_equal(col.l[2].len, 102400 - 2 * LOGS_LINE_MAX);
        assert_int_equal(col.l[2].flags, 0);
        logs_stream_get_stats(s, &st);
        assert_int_equal(st.split_pieces, 2);
        assert_int_equal(st.lines, 3);
        collected_free(&col);
        sbuf_free(&want);
}

/* ------------------------------------------------------------------------ */
/* Ring and followers                                                        */
/* ------------------------------------------------------------------------ */

struct ring_walk {
        unsigned n, first, last;
        size_t bytes;
        usec_t ts;
        pid_t pid;
        bool bad;
};

static int walk(const struct logs_line *l, void *userdata) {
        struct ring_walk *w = userdata;
        unsigned idx;
        if (sscanf(l->text, "line %06u", &idx) != 1 || l->len != LINE_LEN - 1 || l->realtime_usec < w->ts ||
            l->pid != w->pid || l->origin != LOGS_ORIGIN_STDOUT || (w->n > 0 && idx != w->last + 1))
                w->bad = true;
        if (w->n == 0)
                w->first = idx;
        w->last = idx;
        w->ts = l->realtime_usec;
        w->bytes += LOGS_RING_RECORD_OVERHEAD + l->len;
        w->n++;
        return 0;
}

static void test_ring(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("ring");
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        _cleanup_free_ char *script = lines_script(1000, "exit 0");
        struct logs_stream_stats st;

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        struct child *k = unit_spawn(&f->kids[0], s, script);
        usec_t start = now_usec(CLOCK_REALTIME);
        wait_for(f, (struct want) { .exited = { k }, .s = { s }, .lines = { 1000 } }, 10000, "1000 lines",
                 "the pipe is not read");

        struct ring_walk w = { .pid = k->pid, .ts = start };
        int n = logs_stream_ring(s, SIZE_MAX, walk, &w);
        assert_false(w.bad);
        assert_int_equal(n, (int) w.n);
        assert_int_equal(w.last, 999);                    /* the most recent lines… */
        assert_true(w.bytes <= LOGS_RING_DEFAULT);        /* …within the byte bound… */
        assert_true(w.bytes + LOGS_RING_RECORD_OVERHEAD + LINE_LEN - 1 > LOGS_RING_DEFAULT); /* …and no fewer */
        logs_stream_get_stats(s, &st);
        assert_int_equal(st.ring_evicted, 1000 - w.n);

        struct ring_walk w5 = { .pid = k->pid, .ts = start };
        assert_int_equal(logs_stream_ring(s, 5, walk, &w5), 5);
        assert_false(w5.bad);
        assert_int_equal(w5.first, 995);
        assert_int_equal(w5.last, 999);
        struct ring_walk w0 = { 0 };
        assert_int_equal(logs_stream_ring(s, 0, walk, &w0), 0);
}

/* Lines of varied lengths (so records wrap the ring at every offset) keep
 * their exact text; the ring never holds more than its bound. */
static int check_varied(const struct logs_line *l, void *userdata) {
        unsigned *next = userdata, idx;
        char want[128];
        assert_int_equal(sscanf(l->text, "v%u", &idx), 1);
        if (*next != 0 && idx != *next)
                fail_msg("ring line %u follows %u: a record was lost or corrupted", idx, *next - 1);
        int n = snprintf(want, sizeof want, "v%u %.*s", idx, (int) (idx % 53), PAYLOAD PAYLOAD);
        assert_int_equal(l->len, (size_t) n);
        assert_string_equal(l->text, want);
        *next = idx + 1;
        return 0;
}

static void test_ring_wrap(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("wrap");
        c.ring_bytes = 1000;
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        int out, err;
        char line[160];

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_prepare_spawn(s, &out, &err), 0);
        for (unsigned i = 0; i < 3000; i++) {
                int n = snprintf(line, sizeof line, "v%u %.*s\n", i, (int) (i % 53), PAYLOAD PAYLOAD);
                assert_int_equal(write(out, line, (size_t) n), n);
                if (i % 50 == 0) {
                        assert_int_equal(logs_stream_main_exited(s), 0); /* reads what is there */
                        sbuf_read(f->con[0], &f->out);
                        unsigned next = 0;
                        assert_true(logs_stream_ring(s, SIZE_MAX, check_varied, &next) > 0);
                        assert_int_equal(next, i + 1); /* the newest line is there */
                }
        }
}

/* A partial line flushed at the main exit while the sink is blocked ends
 * where the old instance's output ended: the next instance's first bytes,
 * already in the pipe when the sink unblocks, are a line of their own. */
static void test_flush_point_while_blocked(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("cut");
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        int out, err;
        char line[1024];

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_prepare_spawn(s, &out, &err), 0);
        logs_stream_set_pid(s, 1);
        memset(line, 'z', sizeof line);
        line[sizeof line - 1] = '\n';
        f->read_console = false;
        while (!stream_paused(f, s)) {
                assert_int_equal(write(out, line, sizeof line), (ssize_t) sizeof line);
                (void) sd_event_run(f->e, 0);
        }
        assert_int_equal(write(out, "tail", 4), 4);   /* instance 1 ends without a newline */
        assert_int_equal(logs_stream_main_exited(s), 0); /* the sink is blocked: the flush waits */
        logs_stream_set_pid(s, 2);
        assert_int_equal(write(out, "next\n", 5), 5); /* instance 2 */
        f->read_console = true;
        const char *want = "cut[1]: tail\ncut[2]: next\n";
        usec_t deadline = deadline_after_ms(10000);
        while (f->out.len < strlen(want) || memcmp(f->out.p + f->out.len - strlen(want), want, strlen(want)) != 0) {
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("the last lines are \"%s\", want \"%s\" (the flush point moved past the old "
                                 "instance's output)", f->out.len > 40 ? f->out.p + f->out.len - 40 : f->out.p, want);
                sbuf_read(f->con[0], &f->out);
                (void) sd_event_run(f->e, 2 * USEC_PER_MSEC);
        }
        struct logs_stream_stats st;
        logs_stream_get_stats(s, &st);
        assert_int_equal(st.partial_lines, 1);
}

struct follow_state {
        unsigned notified;
};

static void on_follow(logs_follower *fl, void *userdata) {
        ((struct follow_state *) userdata)->notified++;
}

struct follow_pair {
        logs_follower *fast;
        struct ring_walk w;
        int end;
};

/* Drains the fast follower as a control connection would. */
static bool fast_drained(struct fx *f, void *arg) {
        struct follow_pair *fp = arg;
        struct logs_line l;
        int r;
        while ((r = logs_follower_next(fp->fast, &l)) == 1)
                walk(&l, &fp->w);
        return fp->w.n == 200;
}

static void test_followers(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("fol");
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        _cleanup_(logs_follower_freep) logs_follower *fast = NULL, *slow = NULL, *idle = NULL;
        _cleanup_free_ char *script = lines_script(200, "exit 0");
        struct follow_state fs = { 0 }, ss = { 0 };
        struct expect ex = { .n = 200 };
        struct logs_line l;
        struct logs_stream_stats st;

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_follow(s, 0, on_follow, &fs, &fast), 0);
        assert_int_equal(logs_stream_follow(s, LOGS_FOLLOWER_QUEUE_MIN, on_follow, &ss, &slow), 0);
        assert_int_equal(logs_stream_follow(s, 0, NULL, NULL, &idle), 0);
        assert_int_equal(logs_follower_next(slow, &l), 0);
        assert_int_equal(logs_stream_follow(s, LOGS_FOLLOWER_QUEUE_MIN - 1, NULL, NULL, &(logs_follower *) { NULL }),
                         -EINVAL);

        struct child *k = unit_spawn(&f->kids[0], s, script);
        snprintf(ex.prefix, sizeof ex.prefix, "fol[%d]: ", k->pid);
        struct follow_pair fp = { .fast = fast, .w = { .pid = k->pid } };
        run_until(f, fast_drained, &fp, 10000, "200 lines through the fast follower", "the follower queue is not fed");
        assert_false(fp.w.bad);
        assert_int_equal(fp.w.first, 0);
        assert_int_equal(fp.w.last, 199);
        assert_true(fs.notified >= 1);

        /* The slow follower fell behind: one note, then the end. */
        assert_int_equal(logs_follower_next(slow, &l), 1);
        assert_int_equal(l.flags, LOGS_LINE_NOTE);
        assert_int_equal(l.origin, LOGS_ORIGIN_TEND);
        assert_non_null(strstr(l.text, "fell behind"));
        assert_int_equal(logs_follower_next(slow, &l), -EPIPE);
        assert_true(ss.notified >= 2); /* lines queued, then the drop */
        logs_stream_get_stats(s, &st);
        assert_int_equal(st.followers_dropped, 1); /* only the slow one */
        assert_non_null(strstr(logged.p ? logged.p : "", "log follower fell behind"));

        /* The sink is unaffected. */
        wait_for(f, (struct want) { .exited = { k }, .buf = &f->out, .len = 200 * (strlen(ex.prefix) + LINE_LEN) },
                 10000, "every line on tend's stdout", "dropping a follower affected the sink");
        check_lines(&f->out, &ex, 1);

        /* Freeing the stream ends the followers after their queued lines. */
        s = logs_stream_free(s);
        assert_int_equal(logs_follower_next(fast, &l), -EPIPE);
        struct ring_walk wi = { .pid = k->pid };
        while (logs_follower_next(idle, &l) == 1)
                walk(&l, &wi);
        assert_false(wi.bad);
        assert_int_equal(wi.n, 200); /* within its bound: kept everything */
        assert_int_equal(logs_follower_next(idle, &l), -EPIPE);
}

/* issue 19's fd budget: a stopped unit holds no fd. Its pipe is read to the
 * end (the last partial line flushed) and closed; the ring keeps the lines;
 * the next start makes a new pipe. */
static void test_close_pipes(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("dead");
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        struct collected col = { 0 };

        int fds = count_fds();
        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);
        assert_int_equal(count_fds(), fds); /* loaded: no fd */
        assert_int_equal(logs_stream_open_pipes(s), 0);
        assert_int_equal(count_fds(), fds + 2);
        struct child *k = unit_spawn(&f->kids[0], s, "printf 'abc\\ndef'");
        /* running: the read end only (the child has the write end), and the
         * test's own pidfd of the child */
        assert_int_equal(count_fds(), fds + 2);
        wait_for(f, (struct want) { .exited = { k } }, 10000, "the writer to exit", "the child hangs");
        assert_int_equal(logs_stream_close_pipes(s), 0);
        assert_int_equal(count_fds(), fds + 1); /* stopped: no fd of the stream's */
        assert_int_equal(logs_stream_n_pipes(s), 0);
        assert_int_equal(logs_stream_ring(s, SIZE_MAX, collect, &col), 2); /* nothing lost */
        assert_string_equal(col.l[0].text, "abc");
        assert_string_equal(col.l[1].text, "def");
        assert_int_equal(col.l[1].flags, LOGS_LINE_PARTIAL);
        collected_free(&col);
        assert_int_equal(logs_stream_open_pipes(s), 0); /* the next start */
        assert_int_equal(count_fds(), fds + 3);
        assert_int_equal(logs_stream_close_pipes(s), 0);
        assert_int_equal(count_fds(), fds + 1);
}

/* ------------------------------------------------------------------------ */
/* reexec: a pipe's read end handed over to a stream that has no pipe        */
/* ------------------------------------------------------------------------ */

static void test_handover_read_end(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c1 = console_unit("old"), c2 = console_unit("new"), cn = console_unit("null");
        cn.stdout_target = cn.stderr_target = (struct logs_target) { LOGS_TARGET_NULL, NULL };
        _cleanup_(logs_stream_freep) logs_stream *s2 = NULL, *sn = NULL;
        logs_stream *s1 = NULL;
        struct logs_handover h;
        struct collected col = { 0 };
        int out, err;

        /* The old tend: a running unit's stream holds its pipe's read end only. */
        assert_int_equal(logs_stream_new(f->m, &c1, &s1), 0);
        assert_int_equal(logs_stream_handover_get(s1, false, &h), 0);
        assert_int_equal(h.n_pipes, 0); /* no pipe: nothing carried */
        assert_int_equal(logs_stream_prepare_spawn(s1, &out, &err), 0);
        int w = fcntl(out, F_DUPFD_CLOEXEC, 0); /* the child's copy */
        assert_true(w >= 0);
        logs_stream_spawn_done(s1);
        assert_int_equal(logs_stream_handover_get(s1, false, &h), 0);
        assert_int_equal(h.n_pipes, 1);
        assert_true(h.shared);
        assert_false(fcntl(h.pipe[0].rfd, F_GETFD) & FD_CLOEXEC); /* for the execve */
        int rfd = fcntl(h.pipe[0].rfd, F_DUPFD, 0);                /* what execve keeps */
        assert_true(rfd >= 0);
        s1 = logs_stream_free(s1);
        int fds = count_fds();
        assert_int_equal(write(w, "abc\npart", 8), 8);

        /* The new tend: its streams have no pipe (issue 19: made at a start). */
        assert_int_equal(logs_stream_new(f->m, &c2, &s2), 0);
        assert_int_equal(logs_stream_new(f->m, &cn, &sn), 0);
        h.pipe[0] = (struct logs_handover_pipe) { .rfd = rfd, .in = "x-", .in_len = 2 };
        assert_int_equal(logs_stream_handover_put(sn, &h), -ESTALE); /* its settings changed */
        assert_int_equal(logs_stream_handover_put(s2, &h), 0);
        assert_int_equal(logs_stream_n_pipes(s2), 1);
        assert_int_equal(count_fds(), fds); /* the read end taken, no write end made */
        assert_true(fcntl(rfd, F_GETFD) & FD_CLOEXEC);
        assert_int_equal(logs_stream_handover_put(s2, &h), -EEXIST);
        close(w); /* the unit is dead: its pipe read to the end, closed */
        assert_int_equal(logs_stream_close_pipes(s2), 0);
        assert_int_equal(count_fds(), fds - 2); /* w and the read end */
        assert_int_equal(logs_stream_ring(s2, SIZE_MAX, collect, &col), 2); /* nothing lost */
        assert_string_equal(col.l[0].text, "x-abc");
        assert_string_equal(col.l[1].text, "part");
        collected_free(&col);
}

/* ------------------------------------------------------------------------ */
/* Pipes: shared for one target, two for two                                 */
/* ------------------------------------------------------------------------ */

static void test_pipe_sharing(void **state) {
        struct fx *f = *state;
        char path[128], path2[128];
        snprintf(path, sizeof path, "%s/err.log", f->dir);
        snprintf(path2, sizeof path2, "%s/both.log", f->dir);
        logs_stream *s;
        int out, err, fds;

        /* Same target: one pipe, one fd for both. */
        struct logs_stream_config one = console_unit("one");
        fds = count_fds();
        assert_int_equal(logs_stream_new(f->m, &one, &s), 0);
        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(count_fds(), fds + 2);
        assert_int_equal(logs_stream_n_pipes(s), 1);
        assert_int_equal(logs_stream_prepare_spawn(s, &out, &err), 0);
        assert_int_equal(out, err);
        assert_true(fcntl(out, F_GETFD) & FD_CLOEXEC);
        assert_false(fcntl(out, F_GETFL) & O_NONBLOCK); /* the child's description blocks */
        logs_stream_spawn_done(s);
        s = logs_stream_free(s);

        /* Same file for both: one pipe. */
        struct logs_stream_config same = file_unit("same", path2);
        fds = count_fds();
        assert_int_equal(logs_stream_new(f->m, &same, &s), 0);
        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(count_fds(), fds + 3); /* a pipe and the file */
        assert_int_equal(logs_stream_n_pipes(s), 1);
        s = logs_stream_free(s);

        /* Two targets: two pipes; each stream's lines reach its own sink. */
        struct logs_stream_config two = console_unit("two");
        two.stderr_target = (struct logs_target) { LOGS_TARGET_APPEND, path };
        fds = count_fds();
        assert_int_equal(logs_stream_new(f->m, &two, &s), 0);
        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(count_fds(), fds + 5); /* two pipes and the file */
        assert_int_equal(logs_stream_n_pipes(s), 2);
        struct child *k = unit_spawn(&f->kids[0], s, "echo to-out; echo to-err >&2");
        char want[64];
        snprintf(want, sizeof want, "two[%d]: to-out\n", k->pid);
        wait_for(f, (struct want) { .exited = { k }, .s = { s }, .lines = { 2 } }, 10000, "both lines",
                 "one of the two pipes is not read");
        run_idle(f);
        assert_string_equal(f->out.p, want);
        struct sbuf content = { 0 };
        read_file(path, &content);
        assert_string_equal(content.p, "to-err\n");
        sbuf_free(&content);
        struct collected col = { 0 };
        assert_int_equal(logs_stream_ring(s, SIZE_MAX, collect, &col), 2);
        assert_int_equal(col.l[0].origin + col.l[1].origin, LOGS_ORIGIN_STDOUT + LOGS_ORIGIN_STDERR);
        collected_free(&col);
        s = logs_stream_free(s);
}

static void test_direct_targets(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = {
                .name = "direct",
                .stdout_target = { LOGS_TARGET_NULL, NULL },
                .stderr_target = { LOGS_TARGET_INHERIT, NULL },
        };
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        struct stat a, b;
        int out, err;

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_n_pipes(s), 0);
        assert_int_equal(logs_stream_prepare_spawn(s, &out, &err), 0);
        assert_int_equal(fstat(out, &a), 0);
        assert_int_equal(stat("/dev/null", &b), 0);
        assert_true(S_ISCHR(a.st_mode) && a.st_rdev == b.st_rdev);
        assert_int_equal(err, f->con[1]); /* inherit: tend's stdout itself */
        logs_stream_spawn_done(s);
        struct child *k = unit_spawn(&f->kids[0], s, "echo gone; echo raw >&2");
        wait_for(f, (struct want) { .exited = { k }, .buf = &f->out, .len = 4 }, 10000, "the inherited line",
                 "the child did not get tend's stdout");
        assert_string_equal(f->out.p, "raw\n"); /* no prefix, no ring */
        struct collected col = { 0 };
        assert_int_equal(logs_stream_ring(s, SIZE_MAX, collect, &col), 0);
}

/* ------------------------------------------------------------------------ */
/* tend's stdout: its own description is non-blocking, the original is not   */
/* ------------------------------------------------------------------------ */

static void test_stdout_nonblock(void **state) {
        struct fx *f = *state;
        int p[2], saved;
        struct stat a, b;
        _cleanup_(logs_manager_freep) logs_manager *m = NULL;
        logs_stream *s;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fflush(stdout);
        saved = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        assert_true(saved >= 0);
        assert_int_equal(dup2(p[1], STDOUT_FILENO), STDOUT_FILENO);

        int r = logs_manager_new(f->e, NULL, &m);
        int cfd = logs_manager_console_fd(m);
        int flags1 = fcntl(STDOUT_FILENO, F_GETFL), cflags = cfd >= 0 ? fcntl(cfd, F_GETFL) : -1;
        bool same_pipe = cfd >= 0 && fstat(cfd, &a) == 0 && fstat(STDOUT_FILENO, &b) == 0 && a.st_ino == b.st_ino;
        struct logs_stream_config c = console_unit("nb");
        int rs = logs_stream_new(m, &c, &s);
        if (rs == 0) {
                int out, err;
                (void) logs_stream_prepare_spawn(s, &out, &err);
                assert_int_equal(write(out, "hello\n", 6), 6);
                (void) logs_stream_main_exited(s); /* reads it now */
                s = logs_stream_free(s);
        }
        m = logs_manager_free(m);
        /* Restore fd 1 before asserting: cmocka reports there. */
        assert_int_equal(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
        close(saved);
        close(p[1]);

        assert_int_equal(r, 0);
        assert_int_equal(rs, 0);
        assert_true(cfd > STDERR_FILENO);
        assert_true(same_pipe);
        assert_true(cflags & O_NONBLOCK);   /* tend's own description */
        assert_false(flags1 & O_NONBLOCK);  /* the one tend was given: untouched */
        char buf[64] = { 0 };
        assert_int_equal(read(p[0], buf, sizeof buf - 1), (ssize_t) strlen("nb: hello\n"));
        assert_string_equal(buf, "nb: hello\n"); /* no pid set: "NAME: " */
        close(p[0]);
}

static void test_socket_console(void **state) {
        struct fx *f = *state;
        int sp[2];
        _cleanup_(logs_manager_freep) logs_manager *m = NULL;
        _cleanup_(logs_stream_freep) logs_stream *s = NULL;
        int out, err;
        char buf[128] = { 0 };

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        struct logs_manager_options o = { .console_fd = sp[1] };
        assert_int_equal(logs_manager_new(f->e, &o, &m), 0);
        assert_false(fcntl(sp[1], F_GETFL) & O_NONBLOCK);
        struct logs_stream_config c = console_unit("sock");
        assert_int_equal(logs_stream_new(m, &c, &s), 0);
        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        logs_stream_set_pid(s, 4242);
        assert_int_equal(logs_stream_prepare_spawn(s, &out, &err), 0);
        assert_int_equal(write(out, "one\ntwo\n", 8), 8);
        assert_int_equal(logs_stream_main_exited(s), 0);
        assert_int_equal(recv(sp[0], buf, sizeof buf - 1, MSG_DONTWAIT), 32);
        assert_string_equal(buf, "sock[4242]: one\nsock[4242]: two\n");
        s = logs_stream_free(s);
        m = logs_manager_free(m);
        close(sp[0]);
        close(sp[1]);
}

/* ------------------------------------------------------------------------ */
/* Shutdown: the final drain, and what a free loses                          */
/* ------------------------------------------------------------------------ */

static void test_final_drain(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("end");
        logs_stream *s;
        struct expect ex = { .n = 3000 };
        int r;

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        int out, err;
        assert_int_equal(logs_stream_prepare_spawn(s, &out, &err), 0);
        logs_stream_set_pid(s, 77);
        snprintf(ex.prefix, sizeof ex.prefix, "end[77]: ");
        /* 3000 lines ≈ 230 KB: more than the unit's pipe and tend's stdout hold together. */
        _cleanup_free_ char *script = lines_script(3000, "exit 0");
        struct child *k = child_spawn(&f->kids[0], script, out, err);
        f->read_console = false;
        run_until(f, stream_paused, s, 10000, "the unit's pipe to pause", "tend's stdout never reported EAGAIN");
        assert_false(k->exited); /* blocked: tend's stdout is full */

        /* Shutdown with tend's stdout full: the drain times out, nothing is lost yet… */
        assert_int_equal(logs_manager_drain(f->m, now_usec(CLOCK_MONOTONIC) + 20 * USEC_PER_MSEC), -ETIMEDOUT);
        /* …and goes on as the reader makes room. */
        usec_t deadline = deadline_after_ms(20000);
        while ((r = logs_manager_drain(f->m, now_usec(CLOCK_MONOTONIC) + 5 * USEC_PER_MSEC)) == -ETIMEDOUT ||
               !child_poll(k) || f->out.len < 3000 * (strlen(ex.prefix) + LINE_LEN)) {
                sbuf_read(f->con[0], &f->out);
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("the final drain never completed (%zu bytes arrived)", f->out.len);
        }
        assert_int_equal(r, 0);
        check_lines(&f->out, &ex, 1);
        s = logs_stream_free(s);
}

static void test_free_blocked_notes_loss(void **state) {
        struct fx *f = *state;
        struct logs_stream_config c = console_unit("lossy");
        logs_stream *s;
        int out, err;
        char line[1024];

        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);

        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_prepare_spawn(s, &out, &err), 0);
        memset(line, 'y', sizeof line);
        line[sizeof line - 1] = '\n';
        /* Fill tend's stdout (not read) and the unit's pipe. */
        assert_int_equal(fcntl(out, F_SETFL, O_NONBLOCK), 0); /* the test writes without blocking */
        for (int i = 0; i < 4096; i++) {
                if (write(out, line, sizeof line) < 0)
                        break;
                (void) sd_event_run(f->e, 0);
        }
        assert_int_equal(fcntl(out, F_SETFL, 0), 0);
        struct logs_stream_stats st;
        logs_stream_get_stats(s, &st);
        assert_true(st.sink_pauses > 0);
        s = logs_stream_free(s);
        assert_non_null(logged.p);
        assert_non_null(strstr(logged.p, "unit lossy:"));
        assert_non_null(strstr(logged.p, "bytes of log output lost"));
}

/* ------------------------------------------------------------------------ */
/* Targets, the default, the journal                                         */
/* ------------------------------------------------------------------------ */

static void test_targets(void **state) {
        struct logs_target t;
        struct stat st;
        char env[64];

        assert_int_equal(logs_target_parse("file:/var/log/x", &t), 0);
        assert_int_equal(t.type, LOGS_TARGET_FILE);
        assert_string_equal(t.path, "/var/log/x");
        assert_int_equal(logs_target_parse("append:/x", &t), 0);
        assert_int_equal(t.type, LOGS_TARGET_APPEND);
        assert_int_equal(logs_target_parse("journal", &t), 0);
        assert_int_equal(t.type, LOGS_TARGET_JOURNAL);
        assert_null(t.path);
        assert_int_equal(logs_target_parse("null", &t), 0);
        assert_int_equal(logs_target_parse("inherit", &t), 0);
        assert_int_equal(logs_target_parse("console", &t), 0);
        assert_int_equal(logs_target_parse("file:relative", &t), -EINVAL);
        assert_int_equal(logs_target_parse("file:", &t), -EINVAL);
        assert_int_equal(logs_target_parse("kmsg", &t), -EINVAL);
        assert_int_equal(logs_target_parse("journal+console", &t), -EINVAL);
        assert_string_equal(logs_target_type_to_string(LOGS_TARGET_INHERIT), "inherit");
        assert_null(logs_target_type_to_string(_LOGS_TARGET_MAX));

        assert_int_equal(fstat(STDERR_FILENO, &st), 0);
        snprintf(env, sizeof env, "%llu:%llu", (unsigned long long) st.st_dev, (unsigned long long) st.st_ino);
        assert_true(logs_journal_stream_matches(STDERR_FILENO, env));
        snprintf(env, sizeof env, "%llu:%llu", (unsigned long long) st.st_dev, (unsigned long long) st.st_ino + 1);
        assert_false(logs_journal_stream_matches(STDERR_FILENO, env));
        assert_false(logs_journal_stream_matches(STDERR_FILENO, "12"));
        assert_false(logs_journal_stream_matches(STDERR_FILENO, "-1:2"));
        assert_false(logs_journal_stream_matches(STDERR_FILENO, "1:2x"));
        assert_false(logs_journal_stream_matches(STDERR_FILENO, NULL));

        char *old = getenv("JOURNAL_STREAM") ? strdup(getenv("JOURNAL_STREAM")) : NULL;
        snprintf(env, sizeof env, "%llu:%llu", (unsigned long long) st.st_dev, (unsigned long long) st.st_ino);
        setenv("JOURNAL_STREAM", env, 1);
        assert_int_equal(logs_target_default(), LOGS_TARGET_JOURNAL);
        unsetenv("JOURNAL_STREAM");
        assert_int_equal(logs_target_default(), LOGS_TARGET_CONSOLE);
        if (old)
                setenv("JOURNAL_STREAM", old, 1);
        free(old);
}

static void test_bad_config(void **state) {
        struct fx *f = *state;
        logs_stream *s = NULL;
        char path[128], longname[LOGS_NAME_MAX + 2];

        struct logs_stream_config c = console_unit("");
        assert_int_equal(logs_stream_new(f->m, &c, &s), -EINVAL);
        memset(longname, 'n', sizeof longname - 1);
        longname[sizeof longname - 1] = '\0';
        c.name = longname;
        assert_int_equal(logs_stream_new(f->m, &c, &s), -EINVAL);
        c = console_unit("ok");
        c.ring_bytes = LOGS_RING_MIN - 1;
        assert_int_equal(logs_stream_new(f->m, &c, &s), -EINVAL);
        c = file_unit("rel", "relative/path");
        assert_int_equal(logs_stream_new(f->m, &c, &s), -EINVAL);
        /* a file: target is opened with its pipe, before a start (issue 19) */
        c = file_unit("nodir", "/nonexistent-dir/x.log");
        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);
        assert_int_equal(logs_stream_open_pipes(s), -ENOENT);
        s = logs_stream_free(s);
        snprintf(path, sizeof path, "%s/noreader", f->dir);
        assert_int_equal(mkfifo(path, 0600), 0);
        c = file_unit("fifo", path);
        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);
        assert_int_equal(logs_stream_open_pipes(s), -ENXIO);
        assert_non_null(strstr(logged.p, "FIFO with no reader"));
        s = logs_stream_free(s);
        assert_int_equal(logs_manager_new(NULL, NULL, &(logs_manager *) { NULL }), -EINVAL);
        struct logs_manager_options o = { .console_fd = -1, .ring_bytes = 1 };
        assert_int_equal(logs_manager_new(f->e, &o, &(logs_manager *) { NULL }), -EINVAL);
}

/* ------------------------------------------------------------------------ */
/* Levels: "<N>" prefixes, and the journal's entries                         */
/* ------------------------------------------------------------------------ */

static void test_level_prefix_parser(void **state) {
        int level = -1;
        assert_int_equal(logs_parse_level_prefix("<4>warn", 7, &level), 3);
        assert_int_equal(level, 4);
        assert_int_equal(logs_parse_level_prefix("<03>x", 5, &level), 4);
        assert_int_equal(level, 3);
        assert_int_equal(logs_parse_level_prefix("<007>", 5, &level), 5);
        assert_int_equal(level, 7);
        assert_int_equal(logs_parse_level_prefix("<0>", 3, &level), 3);
        assert_int_equal(level, 0);
        level = -1;
        assert_int_equal(logs_parse_level_prefix("<8>x", 4, &level), 0);    /* not a level */
        assert_int_equal(logs_parse_level_prefix("<13>x", 5, &level), 0);   /* a facility: not on a stream */
        assert_int_equal(logs_parse_level_prefix("<0003>x", 7, &level), 0); /* too many digits */
        assert_int_equal(logs_parse_level_prefix("<>x", 3, &level), 0);
        assert_int_equal(logs_parse_level_prefix("<4", 2, &level), 0);
        assert_int_equal(logs_parse_level_prefix("<4>", 2, &level), 0);     /* the '>' is past len */
        assert_int_equal(logs_parse_level_prefix(" <4>x", 5, &level), 0);
        assert_int_equal(logs_parse_level_prefix("4>x", 3, &level), 0);
        assert_int_equal(level, -1); /* untouched when there is none */
}

/* A datagram socket standing in for journald's: the test reads the entries. */
static int journal_socket(struct fx *f, char *path, size_t size) {
        snprintf(path, size, "%s/journal.socket", f->dir);
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        assert_true(fd >= 0);
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        return fd;
}

/* The value of field name in entry e[0..n) (text form, or MESSAGE's binary
 * form) into buf; false if it is not there. */
static bool entry_field(const char *e, size_t n, const char *name, char *buf, size_t size) {
        size_t nl = strlen(name);
        for (size_t off = 0; off < n;) {
                const char *end = memchr(e + off, '\n', n - off);
                assert_non_null(end);
                size_t len = (size_t) (end - (e + off));
                if (len == nl && memcmp(e + off, name, nl) == 0) { /* binary: NAME\n, le64 size, bytes, \n */
                        uint64_t v = 0;
                        for (unsigned i = 0; i < 8; i++)
                                v |= (uint64_t) (uint8_t) end[1 + i] << (8 * i);
                        assert_true(v < size);
                        memcpy(buf, end + 9, v);
                        buf[v] = '\0';
                        return true;
                }
                if (len > nl && e[off + nl] == '=' && memcmp(e + off, name, nl) == 0) {
                        snprintf(buf, size, "%.*s", (int) (len - nl - 1), e + off + nl + 1);
                        return true;
                }
                if (memchr(e + off, '=', len))
                        off += len + 1;
                else { /* another binary field */
                        uint64_t v = 0;
                        for (unsigned i = 0; i < 8; i++)
                                v |= (uint64_t) (uint8_t) end[1 + i] << (8 * i);
                        off += len + 1 + 8 + v + 1;
                }
        }
        return false;
}

static bool journal_has(struct fx *f, void *arg) {
        struct sbuf *entries = arg;
        char buf[65536];
        ssize_t n;
        while ((n = recv(f->aux_fd, buf, sizeof buf, 0)) > 0) {
                uint32_t len = (uint32_t) n;
                sbuf_add(entries, &len, sizeof len);
                sbuf_add(entries, buf, (size_t) n);
        }
        return entries->len > 0 && memmem(entries->p, entries->len, "<9>odd", 6);
}

/* A journal unit's lines reach journald's socket as one entry each: the
 * "<N>" prefix read and removed, PRIORITY=, the unit's fields; the ring
 * keeps the level. SyslogLevelPrefix=no keeps "<N>" as text. */
static void test_journal(void **state) {
        struct fx *f = *state;
        char path[100], v[256];
        f->aux_fd = journal_socket(f, path, sizeof path);
        struct logs_manager_options o = { .console_fd = f->con[1], .journal_socket = path };
        logs_manager *m = NULL;
        assert_int_equal(logs_manager_new(f->e, &o, &m), 0);
        struct logs_stream_config c = {
                .name = "jour.service", .syslog_identifier = "jid",
                .stdout_target = { LOGS_TARGET_JOURNAL, NULL }, .stderr_target = { LOGS_TARGET_JOURNAL, NULL },
                .syslog_priority = LOG_LOCAL3 | LOG_NOTICE,
        };
        logs_stream *s = NULL;
        assert_int_equal(logs_stream_new(m, &c, &s), 0);
        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_n_pipes(s), 1);
        struct child *k = unit_spawn(&f->kids[0], s, "printf '<4>careful\\nplain\\n<3>bad\\n<9>odd\\n'");
        struct sbuf entries = { 0 };
        run_until(f, journal_has, &entries, 10000, "the entries on the journal socket",
                  "the journal sink does not send, or the pipe is not read");
        wait_for(f, (struct want) { .exited = { k } }, 10000, "the writer", "it blocked");
        const char *want[][2] = { { "careful", "4" }, { "plain", "5" }, { "bad", "3" }, { "<9>odd", "5" } };
        size_t off = 0;
        for (unsigned i = 0; i < 4; i++) {
                assert_true(off < entries.len);
                uint32_t len;
                memcpy(&len, entries.p + off, sizeof len);
                const char *e = entries.p + off + sizeof len;
                assert_true(entry_field(e, len, "MESSAGE", v, sizeof v));
                assert_string_equal(v, want[i][0]);
                assert_true(entry_field(e, len, "PRIORITY", v, sizeof v));
                assert_string_equal(v, want[i][1]);
                assert_true(entry_field(e, len, "SYSLOG_FACILITY", v, sizeof v));
                assert_string_equal(v, "19");
                assert_true(entry_field(e, len, "SYSLOG_IDENTIFIER", v, sizeof v));
                assert_string_equal(v, "jid");
                assert_true(entry_field(e, len, "TEND_UNIT", v, sizeof v));
                assert_string_equal(v, "jour.service");
                assert_true(entry_field(e, len, "OBJECT_SYSTEMD_UNIT", v, sizeof v));
                assert_string_equal(v, "jour.service");
                assert_true(entry_field(e, len, "SYSLOG_PID", v, sizeof v));
                assert_int_equal(atoi(v), k->pid);
                off += sizeof len + len;
        }
        struct collected got = { 0 };
        assert_int_equal(logs_stream_ring(s, SIZE_MAX, collect, &got), 4);
        int levels[] = { 4, 5, 3, 5 };
        for (unsigned i = 0; i < 4; i++) {
                assert_string_equal(got.text[i], want[i][0]);
                assert_int_equal(got.l[i].priority, levels[i]);
        }
        collected_free(&got);
        sbuf_free(&entries);
        logs_stream_free(s);
        logs_manager_free(m);
}

/* The console shows a line without its "<N>"; a file: target gets the bytes
 * as they are; with SyslogLevelPrefix=no the console shows "<N>" too. */
static void test_console_strips_level_prefix(void **state) {
        struct fx *f = *state;
        char path[128];
        snprintf(path, sizeof path, "%s/lv.log", f->dir);
        struct logs_stream_config c = console_unit("lv"), d = file_unit("lvf", path), e = console_unit("raw");
        e.no_level_prefix = true;
        _cleanup_(logs_stream_freep) logs_stream *s = NULL, *t = NULL, *u = NULL;
        assert_int_equal(logs_stream_new(f->m, &c, &s), 0);
        assert_int_equal(logs_stream_open_pipes(s), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_new(f->m, &d, &t), 0);
        assert_int_equal(logs_stream_open_pipes(t), 0); /* issue 19: pipes at the start */
        assert_int_equal(logs_stream_new(f->m, &e, &u), 0);
        assert_int_equal(logs_stream_open_pipes(u), 0); /* issue 19: pipes at the start */
        struct child *k1 = unit_spawn(&f->kids[0], s, "echo '<2>crit'");
        struct child *k2 = unit_spawn(&f->kids[1], t, "echo '<2>crit'");
        struct child *k3 = unit_spawn(&f->kids[2], u, "echo '<2>crit'");
        wait_for(f, (struct want) { .exited = { k1, k2, k3 }, .s = { s, t, u }, .lines = { 1, 1, 1 } }, 10000,
                 "three lines", "a pipe is not read");
        run_idle(f);
        char want[64];
        snprintf(want, sizeof want, "lv[%d]: crit\n", k1->pid);
        assert_non_null(memmem(f->out.p, f->out.len, want, strlen(want)));
        snprintf(want, sizeof want, "raw[%d]: <2>crit\n", k3->pid);
        assert_non_null(memmem(f->out.p, f->out.len, want, strlen(want)));
        struct sbuf file = { 0 };
        read_file(path, &file);
        assert_int_equal(file.len, 8);
        assert_memory_equal(file.p, "<2>crit\n", 8);
        sbuf_free(&file);
        struct collected got = { 0 };
        assert_int_equal(logs_stream_ring(s, SIZE_MAX, collect, &got), 1);
        assert_string_equal(got.text[0], "crit");
        assert_int_equal(got.l[0].priority, LOG_CRIT);
        collected_free(&got);
        assert_int_equal(logs_stream_ring(u, SIZE_MAX, collect, &got), 1);
        assert_string_equal(got.text[0], "<2>crit");
        assert_int_equal(got.l[0].priority, LOG_INFO);
        collected_free(&got);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_crash_console, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crash_file, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart, setup, teardown),
                cmocka_unit_test_setup_teardown(test_blocked_fifo, setup, teardown),
                cmocka_unit_test_setup_teardown(test_blocked_console, setup, teardown),
                cmocka_unit_test_setup_teardown(test_partial_line, setup, teardown),
                cmocka_unit_test_setup_teardown(test_long_line, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ring, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ring_wrap, setup, teardown),
                cmocka_unit_test_setup_teardown(test_flush_point_while_blocked, setup, teardown),
                cmocka_unit_test_setup_teardown(test_followers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pipe_sharing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_pipes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_handover_read_end, setup, teardown),
                cmocka_unit_test_setup_teardown(test_direct_targets, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stdout_nonblock, setup, teardown),
                cmocka_unit_test_setup_teardown(test_socket_console, setup, teardown),
                cmocka_unit_test_setup_teardown(test_final_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_blocked_notes_loss, setup, teardown),
                cmocka_unit_test(test_targets),
                cmocka_unit_test(test_level_prefix_parser),
                cmocka_unit_test_setup_teardown(test_console_strips_level_prefix, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_config, setup, teardown),
                cmocka_unit_test_setup_teardown(test_journal, setup, teardown),
        };

        /* As tend does: SIGPIPE never kills the process (it is blocked for signalfd there). */
        signal(SIGPIPE, SIG_IGN);
        log_set_max_level(LOG_DEBUG);
        log_set_sink(capture_log, NULL);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
