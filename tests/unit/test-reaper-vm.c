/* SPDX-License-Identifier: MIT */
/*
 * libexit's shared-memory path (docs/reaping.md): clone(CLONE_VM) without
 * CLONE_VFORK, for children with a hook declared safe on shared memory
 * (EXIT_SPAWN_HOOK_SHARED_VM) and children that do not take the vfork path.
 * What it must keep: the caller goes on at once, the child runs on memory
 * and a TLS of its own (the caller's errno untouched, the caller free to
 * free what it passed), exec and hook failures come back with errno and
 * stage, the arena is freed once the child exec'd or died, and no fd leaks.
 * Skipped where the path is not available (sanitizer builds, other arches).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "libexit.h"
#include "reaper-internal.h"
#include "macro.h"
#include "time-util.h"
#include "testutil.h"
#include "reaper-wait.h"

#define WAIT_MS 10000

static const char *probe; /* tests/helpers/child-probe */

struct ctx {
        struct exit_hub *hub;
        struct exit_reaper *reaper;
        int n_fds_before;
};

static int setup(void **state) {
        *state = NULL;
        if (!spawn_vm_available())
                return 0; /* a sanitizer build, or no TLS layout found: those children fork; skipped */
        struct ctx *c = calloc(1, sizeof *c);
        assert_non_null(c);
        c->n_fds_before = count_fds();
        assert_int_equal(exit_hub_new(0, 0, &c->hub), 0);
        assert_int_equal(exit_reaper_new(c->hub, EXIT_REAPER_EXEC_EVENTS, &c->reaper), 0);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        struct ctx *c = *state;
        if (!c)
                return 0;
        exit_reaper_free(c->reaper);
        exit_hub_unref(c->hub);
        int n = count_fds();
        if (n != c->n_fds_before)
                fail_msg("fd leak: %d fds open after the test, %d before (the exec-status pipe's ends?)", n,
                         c->n_fds_before);
        free(c);
        return 0;
}

/* Dispatches until p's outcome can be taken; bounded. */
static struct exit_reason wait_exit(struct ctx *c, struct exit_process *p) {
        return reaper_wait_exit(c->hub, c->reaper, p, WAIT_MS);
}

/* The hook's state: the child reads `go` and writes `seen`/`errno_seen`
 * on the caller's memory, which only a CLONE_VM child can make visible. */
#define GO_FD 3 /* the child's number of the pipe's read end: its first extra fd */

struct gate {
        atomic_int released;       /* the hook saw the byte */
        atomic_int errno_seen;     /* the child's errno after its failed close(-1) */
        int fail_with;             /* > 0: the hook fails with -fail_with, stage HOOK + 3 */
};

static int hook_gate(void *userdata, int *ret_stage) {
        struct gate *g = userdata;
        struct pollfd pfd = { .fd = GO_FD, .events = POLLIN };
        if (poll(&pfd, 1, WAIT_MS) != 1)
                return -ETIMEDOUT; /* the caller was blocked: it never wrote */
        errno = 0;
        (void) close(-1); /* EBADF into the child's errno: its own, never the caller's */
        atomic_store(&g->errno_seen, errno);
        atomic_store(&g->released, 1);
        if (g->fail_with) {
                *ret_stage = EXIT_STAGE_HOOK + 3;
                return -g->fail_with;
        }
        return 0;
}

static struct exit_process *spawn_gated(struct ctx *c, char **argv, struct gate *g, int go_fd) {
        struct exit_spawn_attr a = {
                .size = sizeof a,
                .flags = EXIT_SPAWN_HOOK_SHARED_VM | EXIT_SPAWN_STDIO,
                .argv = argv,
                .stdio = { EXIT_SPAWN_FD_NULL, EXIT_SPAWN_FD_NULL, EXIT_SPAWN_FD_INHERIT },
                .pdeath_signal = SIGKILL,
                .fds = &go_fd,
                .n_fds = 1,
                .pre_exec = hook_gate,
                .pre_exec_userdata = g,
        };
        struct exit_process *p = NULL;
        int k = exit_reaper_spawn(c->reaper, &a, &p);
        if (k < 0)
                fail_msg("spawn: %s", strerror(-k));
        return p;
}

/* Spins, calling nothing that writes errno, until flag is set; bounded. */
static bool spin_until(atomic_int *flag) {
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start); /* the vDSO: errno untouched on success */
        do {
                if (atomic_load(flag))
                        return true;
                clock_gettime(CLOCK_MONOTONIC, &now);
        } while (now.tv_sec - start.tv_sec < WAIT_MS / 1000);
        return false;
}

/* The caller is not suspended: spawn returns while the child waits in its
 * hook for a byte only the caller sends after spawn. The child runs on the
 * caller's memory (its writes are seen here: not a copy) with a TLS of its
 * own (errno here unchanged by the child's EBADF); the caller may free and
 * scribble over argv at once; the exec succeeds with the arguments as they
 * were; the arena is freed at the exec. */
static void test_not_blocked_shared_memory_own_tls(void **state) {
        struct ctx *c = *state;
        if (!c)
                skip();
        int go[2];
        assert_int_equal(pipe2(go, O_CLOEXEC), 0);
        struct gate g = { 0 };
        char **argv = calloc(4, sizeof(char *));
        assert_non_null(argv);
        argv[0] = strdup(probe);
        argv[1] = strdup("exit");
        argv[2] = strdup("42");
        struct exit_process *p = spawn_gated(c, argv, &g, go[0]);
        assert_non_null(p->vm); /* the shared-memory path was taken */
        assert_int_equal(exit_process_exec_result(p, NULL), -EINPROGRESS);
        for (int i = 0; i < 3; i++) {
                memset(argv[i], 'x', strlen(argv[i]));
                free(argv[i]);
        }
        free(argv);

        errno = 4242;
        assert_int_equal(write(go[1], "g", 1), 1); /* success: errno untouched */
        if (!spin_until(&g.released))
                fail_msg("the hook's write never reached our memory: the child does not share it (a fork?)");
        int e = errno;
        assert_int_equal(atomic_load(&g.errno_seen), EBADF);
        if (e != 4242)
                fail_msg("our errno is %d after the child's failed close: the child wrote into our TLS", e);

        assert_int_equal(exit_process_wait_exec(p, WAIT_MS, NULL), 0);
        assert_null(p->vm); /* freed at the exec-status pipe's EOF */
        struct exit_reason r = wait_exit(c, p);
        assert_int_equal(r.kind, EXIT_REASON_EXITED);
        assert_int_equal(r.status, 42);
        exit_process_unref(p);
        close(go[0]);
        close(go[1]);
}

/* A hook's failure comes back with its errno and stage; the arena is freed
 * at the reap (the child reported before its _exit). */
static void test_hook_failure(void **state) {
        struct ctx *c = *state;
        if (!c)
                skip();
        int go[2];
        assert_int_equal(pipe2(go, O_CLOEXEC), 0);
        struct gate g = { .fail_with = EPERM };
        char *argv[] = { (char *) probe, (char *) "exit", (char *) "0", NULL };
        struct exit_process *p = spawn_gated(c, argv, &g, go[0]);
        assert_non_null(p->vm);
        assert_int_equal(write(go[1], "g", 1), 1);
        int stage = -1;
        assert_int_equal(exit_process_wait_exec(p, WAIT_MS, &stage), -EPERM);
        assert_int_equal(stage, EXIT_STAGE_HOOK + 3);
        struct exit_reason r = wait_exit(c, p);
        assert_int_equal(r.kind, EXIT_REASON_EXITED);
        assert_int_equal(r.status, 127);
        assert_null(p->vm);
        exit_process_unref(p);
        close(go[0]);
        close(go[1]);
}

/* Without a hook, a child that does not vfork (a working directory other
 * than "/") takes the path too: exec failures with errno and stage. */
static void test_exec_failures(void **state) {
        struct ctx *c = *state;
        if (!c)
                skip();
        struct {
                const char *exe, *cwd;
                int error, stage;
        } cases[] = {
                { "/nonexistent/tend-vm-test", "/tmp", -ENOENT, EXIT_STAGE_EXEC },
                { "/dev/null", "/tmp", -EACCES, EXIT_STAGE_EXEC }, /* not a regular file */
                { probe, "/nonexistent-dir", -ENOENT, EXIT_STAGE_CHDIR },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *argv[] = { (char *) cases[i].exe, (char *) "exit", (char *) "0", NULL };
                struct exit_spawn_attr a = { .size = sizeof a, .argv = argv, .cwd = cases[i].cwd };
                struct exit_process *p = NULL;
                assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
                assert_non_null(p->vm);
                int stage = -1;
                assert_int_equal(exit_process_wait_exec(p, WAIT_MS, &stage), cases[i].error);
                assert_int_equal(stage, cases[i].stage);
                struct exit_reason r = wait_exit(c, p);
                assert_int_equal(r.status, 127);
                assert_null(p->vm);
                exit_process_unref(p);
        }
}

/* A hook not declared safe keeps the fork path; so does a reaper with
 * EXIT_REAPER_NO_CLONE_VM. */
static void test_undeclared_hook_forks(void **state) {
        struct ctx *c = *state;
        if (!c)
                skip();
        int go[2];
        assert_int_equal(pipe2(go, O_CLOEXEC), 0);
        assert_int_equal(write(go[1], "g", 1), 1);
        struct gate g = { 0 };
        char *argv[] = { (char *) probe, (char *) "exit", (char *) "0", NULL };
        struct exit_spawn_attr a = {
                .size = sizeof a, .argv = argv, .fds = &go[0], .n_fds = 1,
                .pre_exec = hook_gate, .pre_exec_userdata = &g,
        };
        struct exit_process *p = NULL;
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
        assert_null(p->vm);
        assert_int_equal(exit_process_wait_exec(p, WAIT_MS, NULL), 0);
        assert_int_equal(atomic_load(&g.released), 0); /* a copy of our memory: its write stayed there */
        assert_int_equal(wait_exit(c, p).status, 0);
        exit_process_unref(p);
        close(go[0]);
        close(go[1]);
}

/* Many children at once on the path, each with its own arena, every one
 * freed (the mappings counted in /proc/self/maps). */
static int count_maps(void) {
        FILE *f = fopen("/proc/self/maps", "re");
        assert_non_null(f);
        int n = 0;
        for (int ch; (ch = fgetc(f)) != EOF;)
                n += ch == '\n';
        fclose(f);
        return n;
}

static void test_arenas_freed(void **state) {
        struct ctx *c = *state;
        if (!c)
                skip();
        int before = count_maps();
        struct exit_process *ps[32];
        for (size_t i = 0; i < ELEMENTSOF(ps); i++) {
                char *argv[] = { (char *) probe, (char *) "exit", (char *) "7", NULL };
                struct exit_spawn_attr a = { .size = sizeof a, .argv = argv, .cwd = "/tmp" };
                assert_int_equal(exit_reaper_spawn(c->reaper, &a, &ps[i]), 0);
                assert_non_null(ps[i]->vm);
        }
        for (size_t i = 0; i < ELEMENTSOF(ps); i++) {
                assert_int_equal(wait_exit(c, ps[i]).status, 7);
                assert_null(ps[i]->vm);
                exit_process_unref(ps[i]);
        }
        for (struct exit_process *p; exit_reaper_next_exec(c->reaper, &p) == 0;)
                exit_process_unref(p);
        /* glibc may have mapped a little for itself meanwhile: 32 arenas
         * left would be 64 more lines (the guard page and the rest). */
        int after = count_maps();
        if (after > before + 4)
                fail_msg("%d mappings before, %d after 32 children: their arenas were not unmapped", before, after);
}

int main(int argc, char **argv) {
        (void) argc;
        (void) argv;
        probe = getenv("TEND_CHILD_PROBE");
        if (!probe) {
                fprintf(stderr, "TEND_CHILD_PROBE is not set: run through meson test\n");
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_not_blocked_shared_memory_own_tls, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hook_failure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_failures, setup, teardown),
                cmocka_unit_test_setup_teardown(test_undeclared_hook_forks, setup, teardown),
                cmocka_unit_test_setup_teardown(test_arenas_freed, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
