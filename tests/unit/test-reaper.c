/* SPDX-License-Identifier: MIT */
/*
 * The pidfd reaper (SPEC §2.2) with real children. Every test runs four
 * times: the vfork path, the shared-memory path (clone(CLONE_VM) without
 * CLONE_VFORK; where it is not available, clone3 again), clone3, and the
 * fork + pidfd_open fallback. test-reaper-vm.c has the shared-memory path's
 * own tests.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "libexit.h"
#include "reaper-internal.h"
#include "macro.h"
#include "time-util.h"
#include "testutil.h"
#include "reaper-wait.h"

#define WAIT_MS 10000

static const char *probe; /* tests/helpers/child-probe, from argv or the environment */

struct ctx {
        struct exit_hub *hub;
        struct exit_reaper *reaper;
        uint32_t flags;
        int n_fds_before;
};


static int setup_flags(void **state, uint32_t flags, uint32_t queue) {
        struct ctx *c = calloc(1, sizeof *c);
        assert_non_null(c);
        c->n_fds_before = count_fds();
        c->flags = flags;
        assert_int_equal(exit_hub_new(queue, 0, &c->hub), 0);
        assert_int_equal(exit_reaper_new(c->hub, flags, &c->reaper), 0);
        *state = c;
        return 0;
}

/* The four ways a child is started: clone(CLONE_VM|CLONE_VFORK) where the
 * plan allows it, clone(CLONE_VM) alone where the plan allows that (a hook
 * only if declared safe on shared memory), clone3, and the fork +
 * pidfd_open fallback. */
static uint32_t flags_vfork = EXIT_REAPER_EXEC_EVENTS;
static uint32_t flags_vm = EXIT_REAPER_EXEC_EVENTS | EXIT_REAPER_NO_VFORK;
static uint32_t flags_clone3 = EXIT_REAPER_EXEC_EVENTS | EXIT_REAPER_NO_VFORK | EXIT_REAPER_NO_CLONE_VM;
static uint32_t flags_fork = EXIT_REAPER_EXEC_EVENTS | EXIT_REAPER_NO_VFORK | EXIT_REAPER_NO_CLONE3;

static int setup_vfork(void **state) {
        return setup_flags(state, flags_vfork, 0);
}

static int setup_vm(void **state) {
        return setup_flags(state, flags_vm, 0);
}

static int setup_clone3(void **state) {
        return setup_flags(state, flags_clone3, 0);
}

static int setup_fork(void **state) {
        return setup_flags(state, flags_fork, 0);
}

static int teardown(void **state) {
        struct ctx *c = *state;
        exit_reaper_free(c->reaper);
        exit_hub_unref(c->hub);
        int n = count_fds();
        if (n != c->n_fds_before)
                fail_msg("fd leak: %d fds open after the test, %d before", n, c->n_fds_before);
        free(c);
        return 0;
}

/* Spawns argv with stdout to out_fd (or inherited if -1). */
static struct exit_process *spawn_full(struct ctx *c, char *const *argv, int out_fd, uint32_t flags) {
        struct exit_spawn_attr a = {
                .size = sizeof a,
                .flags = flags | EXIT_SPAWN_STDIO,
                .argv = argv,
                .stdio = { EXIT_SPAWN_FD_NULL, out_fd >= 0 ? out_fd : EXIT_SPAWN_FD_INHERIT, EXIT_SPAWN_FD_INHERIT },
                .pdeath_signal = SIGKILL,
        };
        struct exit_process *p = NULL;
        int k = exit_reaper_spawn(c->reaper, &a, &p);
        if (k < 0)
                fail_msg("spawn %s: %s", argv[0], strerror(-k));
        return p;
}

/* Dispatches until p's outcome can be taken; bounded. */
static struct exit_reason wait_exit(struct ctx *c, struct exit_process *p) {
        return reaper_wait_exit(c->hub, c->reaper, p, WAIT_MS);
}

/* Reads all of fd into buf (NUL-terminated) until EOF, bounded. */
static void read_all(int fd, char *buf, size_t size) {
        size_t n = 0;
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT_MS * USEC_PER_MSEC;
        for (;;) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                if (poll(&pfd, 1, 100) == 0) {
                        if (now_usec(CLOCK_MONOTONIC) > deadline)
                                fail_msg("the child's output never reached EOF: it hangs, or an fd of the pipe leaked into another process");
                        continue;
                }
                ssize_t k = read(fd, buf + n, size - 1 - n);
                assert_true(k >= 0);
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        buf[n] = '\0';
}

/* Runs argv, returns its stdout in buf and its exit reason. */
static struct exit_reason run_capture(struct ctx *c, char *const *argv, char *buf, size_t size) {
        int pipefd[2];
        assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
        struct exit_process *p = spawn_full(c, argv, pipefd[1], 0);
        close(pipefd[1]);
        read_all(pipefd[0], buf, size);
        close(pipefd[0]);
        struct exit_reason r = wait_exit(c, p);
        exit_process_unref(p);
        return r;
}

static void test_exit_codes(void **state) {
        struct ctx *c = *state;
        for (int code = 0; code <= 255; code++) {
                char arg[8];
                snprintf(arg, sizeof arg, "%d", code);
                char *argv[] = { (char *) probe, (char *) "exit", arg, NULL };
                struct exit_process *p = spawn_full(c, argv, -1, 0);
                /* The vfork path suspends us until the exec: its status is known at once. */
                if (!(c->flags & EXIT_REAPER_NO_VFORK) && spawn_vfork_available())
                        assert_int_equal(exit_process_exec_result(p, NULL), 0);
                struct exit_reason r = wait_exit(c, p);
                assert_int_equal(r.kind, EXIT_REASON_EXITED);
                assert_int_equal(r.status, code);
                assert_int_equal(exit_process_exec_result(p, NULL), 0);
                exit_process_unref(p);
        }
}

static void test_killed(void **state) {
        struct ctx *c = *state;
        int sigs[] = { SIGTERM, SIGKILL };
        for (size_t i = 0; i < ELEMENTSOF(sigs); i++) {
                char *argv[] = { (char *) "sleep", (char *) "100", NULL };
                struct exit_process *p = spawn_full(c, argv, -1, 0);
                assert_int_equal(exit_process_wait_exec(p, WAIT_MS, NULL), 0);
                assert_int_equal(exit_process_signal(p, sigs[i]), 0);
                struct exit_reason r = wait_exit(c, p);
                assert_int_equal(r.kind, EXIT_REASON_KILLED);
                assert_int_equal(r.status, sigs[i]);
                assert_int_equal(r.core_dumped, 0);
                /* Reaped: the pidfd answers for this process only. */
                assert_int_equal(exit_process_signal(p, SIGTERM), -ESRCH);
                assert_int_equal(exit_process_signal(p, 0), -ESRCH);
                exit_process_unref(p);
        }
}

static int hook_core_limit(void *userdata, int *ret_stage) {
        struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
        if (setrlimit(RLIMIT_CORE, &rl) < 0)
                return -errno;
        return 0;
}

static void test_core_dump(void **state) {
        struct ctx *c = *state;
        char pattern[256] = "";
        FILE *f = fopen("/proc/sys/kernel/core_pattern", "re");
        if (f) {
                if (!fgets(pattern, sizeof pattern, f))
                        pattern[0] = '\0';
                fclose(f);
        }
        char dir[] = "/tmp/tend-core-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char *argv[] = { (char *) "sleep", (char *) "100", NULL };
        struct exit_spawn_attr a = {
                .size = sizeof a, .argv = argv, .cwd = dir, .pdeath_signal = SIGKILL,
                .pre_exec = hook_core_limit,
        };
        struct exit_process *p = NULL;
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
        assert_int_equal(exit_process_wait_exec(p, WAIT_MS, NULL), 0);
        assert_int_equal(exit_process_signal(p, SIGQUIT), 0);
        struct exit_reason r = wait_exit(c, p);
        exit_process_unref(p);
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        (void) !system(cmd);
        assert_int_equal(r.kind, EXIT_REASON_KILLED);
        assert_int_equal(r.status, SIGQUIT);
        if (!r.core_dumped && pattern[0] == '|') {
                print_message("skip: core_pattern pipes to %s and that helper took no dump\n", pattern);
                skip();
        }
        assert_int_equal(r.core_dumped, 1);
}

static void test_exec_errors(void **state) {
        struct ctx *c = *state;
        char file[] = "/tmp/tend-noexec-XXXXXX";
        int fd = mkostemp(file, O_CLOEXEC);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(chmod(file, 0644), 0);

        struct { const char *path; int error; } cases[] = {
                { "/nonexistent/tend-test-binary", -ENOENT },
                { "tend-no-such-command-anywhere", -ENOENT },
                { file, -EACCES },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *argv[] = { (char *) cases[i].path, NULL };
                /* The blocking wrapper. */
                struct exit_process *p = spawn_full(c, argv, -1, 0);
                int stage = -1;
                assert_int_equal(exit_process_wait_exec(p, WAIT_MS, &stage), cases[i].error);
                assert_int_equal(stage, EXIT_STAGE_EXEC);
                struct exit_reason r = wait_exit(c, p);
                assert_int_equal(r.kind, EXIT_REASON_EXITED);
                assert_int_equal(r.status, 127);
                exit_process_unref(p);

                /* The asynchronous event through the reaper's fd. */
                p = spawn_full(c, argv, -1, 0);
                struct exit_process *q = NULL;
                usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT_MS * USEC_PER_MSEC;
                /* Events of earlier children (the vfork path queues one at spawn) come first. */
                while (exit_reaper_next_exec(c->reaper, &q) == -EAGAIN || q != p) {
                        if (q && q != p) {
                                exit_process_unref(q);
                                q = NULL;
                                continue;
                        }
                        if (now_usec(CLOCK_MONOTONIC) > deadline)
                                fail_msg("no exec event for %s: the exec-status pipe is not in the reaper's epoll set", cases[i].path);
                        struct pollfd pfd = { .fd = exit_reaper_fd(c->reaper), .events = POLLIN };
                        (void) poll(&pfd, 1, 100);
                        assert_true(exit_reaper_dispatch(c->reaper) >= 0);
                }
                assert_ptr_equal(q, p);
                assert_int_equal(exit_process_exec_result(q, &stage), cases[i].error);
                exit_process_unref(q);
                (void) wait_exit(c, p);
                exit_process_unref(p);
        }
        unlink(file);
}

/* SPEC §2.2: the exec status is an fd the caller watches. With a lone child
 * that keeps running (no exit, no SIGCHLD to wake anyone), the reaper's fd
 * alone must announce its exec result, on every spawn path; and once the
 * result is popped, the fd is quiet again. */
static void test_exec_event_wakes_reaper_fd(void **state) {
        struct ctx *c = *state;
        char *argv[] = { (char *) "sleep", (char *) "100", NULL };
        for (int round = 0; round < 3; round++) {
                struct exit_process *p = spawn_full(c, argv, -1, 0), *q = NULL;
                struct pollfd pfd = { .fd = exit_reaper_fd(c->reaper), .events = POLLIN };
                /* An exec takes milliseconds; 5 s is the bound of a loaded machine. */
                usec_t deadline = now_usec(CLOCK_MONOTONIC) + 5 * USEC_PER_SEC;
                /* Poll before popping: a pop first would find what the vfork
                 * path queued at spawn and hide a fd that never wakes. */
                for (;;) {
                        int n = poll(&pfd, 1, 100);
                        assert_true(n >= 0);
                        if (n > 0) {
                                assert_true(exit_reaper_dispatch(c->reaper) >= 0);
                                if (exit_reaper_next_exec(c->reaper, &q) == 0)
                                        break;
                        }
                        if (now_usec(CLOCK_MONOTONIC) > deadline)
                                fail_msg("round %d: the reaper's fd never became readable for the exec result of a "
                                         "child that keeps running (queued without waking the fd?)", round);
                }
                assert_ptr_equal(q, p);
                assert_int_equal(exit_process_exec_result(q, NULL), 0);
                exit_process_unref(q);
                assert_int_equal(exit_reaper_dispatch(c->reaper), 0);
                pfd.revents = 0;
                assert_int_equal(poll(&pfd, 1, 0), 0); /* nothing queued, nothing exited: quiet */
                assert_int_equal(exit_process_signal(p, SIGKILL), 0);
                (void) wait_exit(c, p);
                exit_process_unref(p);
        }
}

static void test_clean_signal_state(void **state) {
        struct ctx *c = *state;
        /* The parent blocks signals and ignores SIGINT and SIGPIPE, as a
         * process started from a background job or by a careless launcher. */
        struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_pipe, old_max;
        sigaction(SIGINT, &ign, &old_int);
        sigaction(SIGPIPE, &ign, &old_pipe);
        sigaction(SIGRTMAX, &ign, &old_max); /* signal 64: the top bit of /proc's SigIgn, which the child reads */
        sigset_t block, saved;
        sigemptyset(&block);
        sigaddset(&block, SIGUSR1);
        sigaddset(&block, SIGTERM);
        sigaddset(&block, SIGHUP);
        sigprocmask(SIG_BLOCK, &block, &saved);

        char out[512];
        char *argv[] = { (char *) probe, (char *) "sigs", NULL };
        struct exit_reason r = run_capture(c, argv, out, sizeof out);

        sigprocmask(SIG_SETMASK, &saved, NULL);
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGPIPE, &old_pipe, NULL);
        sigaction(SIGRTMAX, &old_max, NULL);

        assert_int_equal(r.kind, EXIT_REASON_EXITED);
        assert_int_equal(r.status, 0);
        assert_string_equal(out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

static void test_fds_given_only(void **state) {
        struct ctx *c = *state;
        /* A leaked, inheritable fd in the parent must not reach the child. */
        int leak = open("/dev/null", O_RDONLY);
        assert_true(leak >= 0);
        int extra[2];
        assert_int_equal(pipe2(extra, O_CLOEXEC), 0);

        int out[2];
        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        char *argv[] = { (char *) probe, (char *) "fds", NULL };
        int fds[] = { extra[0], extra[1] };
        struct exit_spawn_attr a = {
                .size = sizeof a, .flags = EXIT_SPAWN_STDIO, .argv = argv,
                .stdio = { EXIT_SPAWN_FD_NULL, out[1], EXIT_SPAWN_FD_NULL },
                .fds = fds, .n_fds = 2, .pdeath_signal = SIGKILL,
        };
        struct exit_process *p = NULL;
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
        close(out[1]);
        char buf[256];
        read_all(out[0], buf, sizeof buf);
        close(out[0]);
        struct exit_reason r = wait_exit(c, p);
        exit_process_unref(p);
        close(leak);
        close(extra[0]);
        close(extra[1]);
        assert_int_equal(r.status, 0);
        assert_string_equal(buf, "0 1 2 3 4\n");
}

/* Whether the setup under test spawns on the vfork path where the plan allows it. */
static bool vfork_expected(const struct ctx *c) {
        return !(c->flags & EXIT_REAPER_NO_VFORK) && spawn_vfork_available();
}

/* A working directory of "/" keeps the vfork path (chdir to the root cannot
 * stall the suspended parent); any other takes clone3. Either way the child
 * runs there, whatever the parent's own. */
static void test_cwd(void **state) {
        struct ctx *c = *state;
        char dir[] = "/tmp/tend-cwd-XXXXXX", old[4096];
        assert_non_null(mkdtemp(dir));
        assert_non_null(getcwd(old, sizeof old));
        assert_int_equal(chdir(dir), 0);
        const char *cwds[] = { "/", dir, NULL };
        for (size_t i = 0; i < ELEMENTSOF(cwds); i++) {
                int out[2];
                assert_int_equal(pipe2(out, O_CLOEXEC), 0);
                char *argv[] = { (char *) probe, (char *) "cwd", NULL };
                struct exit_spawn_attr a = {
                        .size = sizeof a, .flags = EXIT_SPAWN_STDIO, .argv = argv, .cwd = cwds[i],
                        .stdio = { EXIT_SPAWN_FD_NULL, out[1], EXIT_SPAWN_FD_INHERIT }, .pdeath_signal = SIGKILL,
                };
                struct exit_process *p = NULL;
                assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
                close(out[1]);
                /* Only the vfork path knows the exec status when spawn returns. */
                bool fast = vfork_expected(c) && (!cwds[i] || streq(cwds[i], "/"));
                assert_int_equal(exit_process_exec_result(p, NULL), fast ? 0 : -EINPROGRESS);
                char buf[4200], want[4200];
                read_all(out[0], buf, sizeof buf);
                close(out[0]);
                struct exit_reason r = wait_exit(c, p);
                exit_process_unref(p);
                assert_int_equal(r.kind, EXIT_REASON_EXITED);
                assert_int_equal(r.status, 0);
                snprintf(want, sizeof want, "%s\n", cwds[i] ? cwds[i] : dir);
                assert_string_equal(buf, want);
        }
        assert_int_equal(chdir(old), 0);
        assert_int_equal(rmdir(dir), 0);
}

/* EXIT_SPAWN_SESSION_KEYRING: the child's session keyring is a new one (not
 * ours, not an earlier child's); without the flag, ours (inherited); with
 * _SHARED, our user keyring linked into it. On each spawn path. */
static void test_session_keyring(void **state) {
        struct ctx *c = *state;
        char *argv[] = { (char *) probe, (char *) "keyring", NULL };
        static const uint32_t flags[] = { 0, EXIT_SPAWN_SESSION_KEYRING, EXIT_SPAWN_SESSION_KEYRING,
                                          EXIT_SPAWN_SESSION_KEYRING_SHARED };
        long ids[4];
        char linked[4][16];
        for (size_t i = 0; i < ELEMENTSOF(flags); i++) {
                int out[2];
                assert_int_equal(pipe2(out, O_CLOEXEC), 0);
                struct exit_process *p = spawn_full(c, argv, out[1], flags[i]);
                close(out[1]);
                char buf[256];
                read_all(out[0], buf, sizeof buf);
                close(out[0]);
                struct exit_reason r = wait_exit(c, p);
                int stage = -1, e = exit_process_exec_result(p, &stage);
                exit_process_unref(p);
                if (e == -ENOSYS || e == -EPERM || e == -EACCES) { /* no keys here (a seccomp policy) */
                        assert_int_equal(stage, EXIT_STAGE_KEYRING);
                        skip();
                }
                assert_int_equal(r.kind, EXIT_REASON_EXITED);
                if (r.status != 0 || sscanf(buf, "%ld %15s", &ids[i], linked[i]) != 2)
                        fail_msg("child-probe keyring: status %d, said \"%s\" (keyctl failed in the child?)", r.status, buf);
        }
        long own = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3L /* KEY_SPEC_SESSION_KEYRING */, 0L);
        assert_true(own > 0);
        assert_int_equal(ids[0], own);    /* without the flag: inherited */
        assert_int_not_equal(ids[1], own);
        assert_int_not_equal(ids[2], ids[1]);
        assert_int_not_equal(ids[3], own);
        assert_string_equal(linked[1], "unlinked");
        assert_string_equal(linked[3], "linked");
}

static bool same_file(int fd, const struct stat *st) {
        struct stat now;
        return fstat(fd, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino;
}

/* The vfork path shares our fd table (CLONE_FILES) until the child unshares
 * it: with many fds open, inheritable ones among them, the child gets exactly
 * 0/1/2 from the given sources, ours stay as they were, and no copy of a
 * source stays behind in the parent (the pipe reaches EOF). */
static void test_fds_many_open(void **state) {
        struct ctx *c = *state;
        int many[200];
        for (size_t i = 0; i < ELEMENTSOF(many); i++) {
                many[i] = open("/dev/null", i % 2 ? O_RDONLY : O_RDONLY | O_CLOEXEC);
                assert_true(many[i] >= 0);
        }
        struct stat before[3];
        bool open_before[3];
        for (int i = 0; i < 3; i++)
                open_before[i] = fstat(i, &before[i]) == 0;
        int n_before = count_fds();

        for (int round = 0; round < 3; round++) {
                int out[2], err[2];
                assert_int_equal(pipe2(out, O_CLOEXEC), 0);
                assert_int_equal(pipe2(err, O_CLOEXEC), 0);
                char *argv[] = { (char *) probe, (char *) "fds", NULL };
                struct exit_spawn_attr a = {
                        .size = sizeof a, .flags = EXIT_SPAWN_STDIO, .argv = argv,
                        .stdio = { EXIT_SPAWN_FD_NULL, out[1], err[1] }, .pdeath_signal = SIGKILL,
                };
                struct exit_process *p = NULL;
                assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
                assert_int_equal(exit_process_exec_result(p, NULL), vfork_expected(c) ? 0 : -EINPROGRESS);
                close(out[1]);
                close(err[1]);
                char buf[256], ebuf[64];
                read_all(out[0], buf, sizeof buf);
                read_all(err[0], ebuf, sizeof ebuf);
                close(out[0]);
                close(err[0]);
                struct exit_reason r = wait_exit(c, p);
                exit_process_unref(p);
                assert_int_equal(r.kind, EXIT_REASON_EXITED);
                assert_int_equal(r.status, 0);
                assert_string_equal(buf, "0 1 2\n");
                assert_string_equal(ebuf, "");
                for (int i = 0; i < 3; i++)
                        if (open_before[i] && !same_file(i, &before[i]))
                                fail_msg("our fd %d changed in a spawn: the child's dup2 reached the parent's fd table", i);
                /* Queued exec events hold their process (and its pidfd). */
                struct exit_process *q = NULL;
                while (exit_reaper_next_exec(c->reaper, &q) == 0)
                        exit_process_unref(q);
                assert_int_equal(count_fds(), n_before);
        }
        for (size_t i = 0; i < ELEMENTSOF(many); i++)
                close(many[i]);
}

static void test_env_pid_slots(void **state) {
        struct ctx *c = *state;
        char *envp[] = { (char *) "LISTEN_PID=1", (char *) "PATH=/usr/bin:/bin", NULL };
        char *argv[] = { (char *) probe, (char *) "env", (char *) "LISTEN_PID", NULL };
        int out[2];
        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        struct exit_spawn_attr a = {
                .size = sizeof a, .flags = EXIT_SPAWN_STDIO | EXIT_SPAWN_LISTEN_PID | EXIT_SPAWN_WATCHDOG_PID,
                .argv = argv, .envp = envp,
                .stdio = { EXIT_SPAWN_FD_NULL, out[1], EXIT_SPAWN_FD_INHERIT }, .pdeath_signal = SIGKILL,
        };
        struct exit_process *p = NULL;
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
        close(out[1]);
        char buf[64], want[64];
        read_all(out[0], buf, sizeof buf);
        close(out[0]);
        snprintf(want, sizeof want, "%d\n", (int) exit_process_pid(p));
        (void) wait_exit(c, p);
        exit_process_unref(p);
        assert_string_equal(buf, want);
}

/* attr.path, attr.ignore_signals, attr.umask (a service's SIGPIPE and umask). */
static void test_path_ignore_umask(void **state) {
        struct ctx *c = *state;
        char *argv[] = { (char *) "renamed-argv0", (char *) "sigs", NULL };
        int out[2];
        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        struct exit_spawn_attr a = {
                .size = sizeof a, .flags = EXIT_SPAWN_STDIO | EXIT_SPAWN_UMASK, .argv = argv, .path = probe,
                .stdio = { EXIT_SPAWN_FD_NULL, out[1], EXIT_SPAWN_FD_INHERIT }, .pdeath_signal = SIGKILL,
                .ignore_signals = 1ull << (SIGPIPE - 1), .umask = 0027,
        };
        struct exit_process *p = NULL;
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
        close(out[1]);
        char buf[256];
        read_all(out[0], buf, sizeof buf);
        close(out[0]);
        struct exit_reason r = wait_exit(c, p);
        exit_process_unref(p);
        assert_int_equal(r.status, 0);
        /* SIGPIPE (13) ignored: bit 12 of SigIgn. */
        assert_string_equal(buf, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000001000\n");

        char *argv2[] = { (char *) "/bin/sh", (char *) "-c", (char *) "exit $(umask)", NULL };
        a = (struct exit_spawn_attr) { .size = sizeof a, .flags = EXIT_SPAWN_UMASK, .argv = argv2, .umask = 0027 };
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
        r = wait_exit(c, p);
        exit_process_unref(p);
        assert_int_equal(r.status, 27); /* sh prints 0027; $((0027)) would be octal, exit takes decimal 27 */

        /* nofile_soft: the child's soft RLIMIT_NOFILE, the hard one kept. */
        struct rlimit rl;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
        char *argv3[] = { (char *) "/bin/sh", (char *) "-c", (char *) "test $(ulimit -n) = 100 && test $(ulimit -H -n) = $0", NULL, NULL };
        char hard[32];
        snprintf(hard, sizeof hard, "%llu", (unsigned long long) rl.rlim_max);
        argv3[3] = hard;
        a = (struct exit_spawn_attr) { .size = sizeof a, .argv = argv3, .nofile_soft = 100 };
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
        r = wait_exit(c, p);
        exit_process_unref(p);
        assert_int_equal(r.status, 0);

        /* The parent holding more fds than the child's soft limit (tend with
         * a thousand control clients): the child still starts. */
        int held[120], n_held = 0;
        for (; n_held < 120; n_held++)
                if ((held[n_held] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
                        break;
        assert_int_equal(n_held, 120);
        a = (struct exit_spawn_attr) { .size = sizeof a, .argv = argv3, .nofile_soft = 100, .pdeath_signal = SIGKILL };
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
        r = wait_exit(c, p);
        assert_int_equal(exit_process_exec_result(p, NULL), 0);
        exit_process_unref(p);
        assert_int_equal(r.status, 0);
        for (int i = 0; i < n_held; i++)
                close(held[i]);
}

static void test_sigchld_ignored(void **state) {
        /* A process started with SIGCHLD ignored still gets every status:
         * the reaper resets the disposition at creation. */
        struct sigaction ign = { .sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT };
        assert_int_equal(sigaction(SIGCHLD, &ign, NULL), 0);
        struct ctx *c = NULL;
        setup_flags((void **) &c, *(uint32_t *) *state, 0);
        for (int i = 0; i < 20; i++) {
                char arg[8];
                snprintf(arg, sizeof arg, "%d", i + 3);
                char *argv[] = { (char *) probe, (char *) "exit", arg, NULL };
                struct exit_process *p = spawn_full(c, argv, -1, 0);
                struct exit_reason r = wait_exit(c, p);
                assert_int_equal(r.kind, EXIT_REASON_EXITED);
                assert_int_equal(r.status, i + 3);
                exit_process_unref(p);
        }
        void *s = c;
        teardown(&s);
}

static void test_track(void **state) {
        struct ctx *c = *state;
        struct exit_process *p = NULL;
        /* Not our child. */
        assert_int_equal(exit_reaper_track(c->reaper, getppid(), &p), -ECHILD);
        assert_int_equal(exit_reaper_track(c->reaper, 1, &p), -ECHILD);

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(42);
        assert_int_equal(exit_reaper_track(c->reaper, pid, &p), 0);
        struct exit_process *dup = NULL;
        assert_int_equal(exit_reaper_track(c->reaper, pid, &dup), -EEXIST);
        struct exit_reason r = wait_exit(c, p);
        assert_int_equal(r.kind, EXIT_REASON_EXITED);
        assert_int_equal(r.status, 42);
        assert_int_equal(exit_process_signal(p, SIGTERM), -ESRCH);
        exit_process_unref(p);
}

static void test_second_reaper_refused(void **state) {
        struct ctx *c = *state;
        struct exit_reaper *r2 = NULL;
        assert_int_equal(exit_reaper_new(c->hub, 0, &r2), -EBUSY);
        assert_null(r2);
}

static void test_exits_reach_subscription(void **state) {
        struct ctx *c = *state;
        struct exit_sub *sub = NULL;
        assert_int_equal(exit_hub_subscribe(c->hub, &sub), 0);
        char *argv[] = { (char *) probe, (char *) "exit", (char *) "9", NULL };
        struct exit_process *p = spawn_full(c, argv, -1, 0);
        struct exit_event ev;
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT_MS * USEC_PER_MSEC;
        for (;;) {
                struct pollfd pfd[2] = { { .fd = exit_reaper_fd(c->reaper), .events = POLLIN },
                                         { .fd = exit_sub_fd(sub), .events = POLLIN } };
                (void) poll(pfd, 2, 100);
                assert_true(exit_reaper_dispatch(c->reaper) >= 0);
                if (exit_sub_recv(sub, &ev, 0) == 0)
                        break;
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("no exit event reached the subscription: dispatch reaped but did not publish");
        }
        assert_int_equal(ev.type, EXIT_EVENT_EXIT);
        assert_int_equal(ev.id, exit_process_id(p));
        assert_int_equal(ev.pid, exit_process_pid(p));
        assert_int_equal(ev.flags & EXIT_EVENT_ORPHAN, 0);
        assert_int_equal(ev.reason.status, 9);
        /* The outcome is takeable the moment the event is seen. */
        struct exit_reason r;
        assert_int_equal(exit_hub_take(c->hub, ev.id, &r), 0);
        assert_int_equal(r.status, 9);
        exit_process_unref(p);
        exit_sub_free(sub);
}

static void test_bad_args(void **state) {
        struct ctx *c = *state;
        struct exit_process *p = NULL;
        char *argv[] = { NULL };
        struct exit_spawn_attr a = { .size = sizeof a, .argv = argv };
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), -EINVAL);
        assert_int_equal(exit_reaper_spawn(c->reaper, NULL, &p), -EINVAL);
        char *ok[] = { (char *) "true", NULL };
        a.argv = ok;
        a.flags = EXIT_SPAWN_SETSID | EXIT_SPAWN_SETPGID;
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), -EINVAL);
        assert_int_equal(exit_reaper_track(c->reaper, 0, &p), -EINVAL);
        assert_int_equal(exit_process_signal(NULL, SIGTERM), -EINVAL);
        assert_int_equal(exit_reaper_new(NULL, 0, NULL), -EINVAL);
        assert_null(p);
}

/* ---- pidfd_send_signal refused by a seccomp profile (qa18 finding 0) ---- */

#define CHILD_CHECK(cond)                                                                            \
        do {                                                                                         \
                if (!(cond)) {                                                                       \
                        fprintf(stderr, "%s:%d: %s is false (errno %s)\n", __FILE__, __LINE__, #cond, \
                                strerror(errno));                                                    \
                        _exit(1);                                                                    \
                }                                                                                    \
        } while (0)

/* Makes pidfd_send_signal fail with EPERM in this process (irreversible), as
 * docker < 20.10's profile does. The number is the same on every
 * architecture that has the call (424). */
static int refuse_pidfd_send_signal(void) {
        struct sock_filter code[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pidfd_send_signal, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = { .len = ELEMENTSOF(code), .filter = code };
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0 ? -errno : 0;
}

/* In the forked child: dispatches until p's outcome is taken; bounded. */
static struct exit_reason child_wait_exit(struct exit_hub *hub, struct exit_reaper *r, struct exit_process *p) {
        struct exit_reason reason;
        for (int i = 0; i < WAIT_MS / 100; i++) {
                if (exit_hub_take(hub, exit_process_id(p), &reason) == 0)
                        return reason;
                struct pollfd pfd = { .fd = exit_reaper_fd(r), .events = POLLIN };
                (void) poll(&pfd, 1, 100);
                CHILD_CHECK(exit_reaper_dispatch(r) >= 0);
        }
        CHILD_CHECK(!"the child signalled through the kill(2) fallback was reaped");
        return reason;
}

static struct exit_process *child_spawn_pause(struct exit_reaper *r, int null_fd) {
        char *argv[] = { (char *) probe, (char *) "pause", NULL };
        struct exit_spawn_attr a = {
                .size = sizeof a,
                .flags = EXIT_SPAWN_STDIO,
                .argv = argv,
                .stdio = { EXIT_SPAWN_FD_NULL, null_fd, EXIT_SPAWN_FD_INHERIT },
                .pdeath_signal = SIGKILL,
        };
        struct exit_process *p = NULL;
        CHILD_CHECK(exit_reaper_spawn(r, &a, &p) == 0);
        return p;
}

static void signal_refused_child(void) {
        CHILD_CHECK(refuse_pidfd_send_signal() == 0);
        struct exit_hub *hub = NULL;
        struct exit_reaper *r = NULL;
        CHILD_CHECK(exit_hub_new(0, 0, &hub) == 0);
        /* Not an error: the probe notes the refusal. */
        CHILD_CHECK(exit_reaper_new(hub, 0, &r) == 0);
        CHILD_CHECK(exit_process_signal_refused() == -EPERM);
        int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        CHILD_CHECK(null_fd >= 0);

        struct exit_process *p = child_spawn_pause(r, null_fd);
        CHILD_CHECK(exit_process_signal(p, SIGTERM) == 0); /* through kill(2) */
        struct exit_reason reason = child_wait_exit(hub, r, p);
        CHILD_CHECK(reason.kind == EXIT_REASON_KILLED && reason.status == SIGTERM);
        CHILD_CHECK(exit_process_signal(p, SIGTERM) == -ESRCH); /* reaped: never its pid again */
        exit_process_unref(p);

        /* Once the reaper is freed nothing guarantees the pid: no fallback. */
        p = child_spawn_pause(r, null_fd);
        pid_t pid = exit_process_pid(p);
        exit_reaper_free(r);
        CHILD_CHECK(exit_process_signal(p, SIGTERM) == -EPERM);
        CHILD_CHECK(kill(pid, SIGKILL) == 0);
        int status = 0;
        CHILD_CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        exit_process_unref(p);
        exit_hub_unref(hub);
        close(null_fd);
        _exit(0);
}

/* pidfd_send_signal refused (EPERM): our own unreaped children are signalled
 * with kill(2). In a forked process: the filter and the refusal are for good. */
static void test_signal_refused_falls_back_to_kill(void **state) {
        (void) state;
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                signal_refused_child();
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("the seccomp child failed (status %#x; its message is above): no kill(2) fallback?", status);
}

#define ALL4(t) cmocka_unit_test_setup_teardown(t, setup_vfork, teardown), \
                cmocka_unit_test_setup_teardown(t, setup_vm, teardown), \
                cmocka_unit_test_setup_teardown(t, setup_clone3, teardown), \
                cmocka_unit_test_setup_teardown(t, setup_fork, teardown)

int main(int argc, char **argv) {
        probe = getenv("TEND_CHILD_PROBE");
        if (!probe) {
                fprintf(stderr, "TEND_CHILD_PROBE is not set: run through meson test\n");
                return 1;
        }
        const struct CMUnitTest tests[] = {
                ALL4(test_exit_codes),
                ALL4(test_killed),
                ALL4(test_core_dump),
                ALL4(test_exec_errors),
                ALL4(test_exec_event_wakes_reaper_fd),
                ALL4(test_clean_signal_state),
                ALL4(test_fds_given_only),
                ALL4(test_fds_many_open),
                ALL4(test_cwd),
                ALL4(test_session_keyring),
                ALL4(test_env_pid_slots),
                ALL4(test_track),
                ALL4(test_second_reaper_refused),
                ALL4(test_exits_reach_subscription),
                ALL4(test_bad_args),
                ALL4(test_path_ignore_umask),
                cmocka_unit_test_prestate(test_sigchld_ignored, &flags_vfork),
                cmocka_unit_test_prestate(test_sigchld_ignored, &flags_vm),
                cmocka_unit_test_prestate(test_sigchld_ignored, &flags_clone3),
                cmocka_unit_test_prestate(test_sigchld_ignored, &flags_fork),
                cmocka_unit_test(test_signal_refused_falls_back_to_kill),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
