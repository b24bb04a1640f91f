/* SPDX-License-Identifier: MIT */
/*
 * Orphans and exit storms (SPEC §2.2). Run as
 *   test-reaper-orphans subreaper        the reaper as a child subreaper
 *   unshare -pf --mount-proc test-reaper-orphans pid1    the reaper as PID 1
 * With "--double-fork N FD" it is the tracked child itself: it double-forks N
 * grandchildren that block reading FD, reaps its middle processes, exits 7.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "libexit.h"
#include "macro.h"
#include "time-util.h"

#define N_ORPHANS 200
#define N_STORM 10000
#define WAIT_MS 60000

static const char *self_exe;
static bool as_pid1;

static int count_zombie_children(void) {
        DIR *d = opendir("/proc");
        assert_non_null(d);
        int n = 0;
        struct dirent *e;
        pid_t me = getpid();
        while ((e = readdir(d))) {
                char path[300], buf[512];
                if (e->d_name[0] < '0' || e->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
                FILE *f = fopen(path, "re");
                if (!f)
                        continue;
                size_t k = fread(buf, 1, sizeof buf - 1, f);
                fclose(f);
                buf[k] = '\0';
                /* "pid (comm) S ppid …": comm may hold spaces and parentheses. */
                char *close_paren = strrchr(buf, ')');
                char state;
                int ppid;
                if (close_paren && sscanf(close_paren + 2, "%c %d", &state, &ppid) == 2 && state == 'Z' && ppid == me)
                        n++;
        }
        closedir(d);
        return n;
}

static void pump(struct exit_reaper *r, struct exit_sub *sub) {
        struct pollfd pfd[2] = { { .fd = exit_reaper_fd(r), .events = POLLIN },
                                 { .fd = exit_sub_fd(sub), .events = POLLIN } };
        (void) poll(pfd, 2, 100);
        assert_true(exit_reaper_dispatch(r) >= 0);
}

static void test_orphans(void **state) {
        struct exit_hub *hub = NULL;
        struct exit_reaper *r = NULL;
        struct exit_sub *sub = NULL;
        assert_int_equal(exit_hub_new(0, 0, &hub), 0);
        assert_int_equal(exit_reaper_new(hub, EXIT_REAPER_ORPHANS, &r), 0);
        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);
        if (!as_pid1) {
                int on = 0;
                assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &on), 0);
                assert_int_equal(on, 1);
        } else
                assert_int_equal(getpid(), 1);

        for (int round = 0; round < 3; round++) {
                int release[2];
                assert_int_equal(pipe2(release, O_CLOEXEC), 0);
                char n_arg[16];
                snprintf(n_arg, sizeof n_arg, "%d", N_ORPHANS);
                char *argv[] = { (char *) self_exe, (char *) "--double-fork", n_arg, (char *) "3", NULL };
                int fds[] = { release[0] };
                struct exit_spawn_attr a = { .size = sizeof a, .argv = argv, .fds = fds, .n_fds = 1 };
                struct exit_process *p = NULL;
                assert_int_equal(exit_reaper_spawn(r, &a, &p), 0);
                close(release[0]);

                /* Let the tracked child become a zombie before any orphan is
                 * reaped: wait on its pidfd without dispatching. */
                struct pollfd pfd = { .fd = exit_process_pidfd(p), .events = POLLIN };
                if (poll(&pfd, 1, WAIT_MS) != 1)
                        fail_msg("the double-forking child did not exit: it could not fork %d grandchildren", N_ORPHANS);
                close(release[1]); /* every grandchild exits now */

                int orphans = 0, mine = 0;
                usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT_MS * USEC_PER_MSEC;
                while (orphans < N_ORPHANS || mine < 1) {
                        if (now_usec(CLOCK_MONOTONIC) > deadline)
                                fail_msg("round %d: %d/%d orphans and %d/1 tracked exits seen: SIGCHLD coalesced and the orphan pass stopped early?",
                                         round, orphans, N_ORPHANS, mine);
                        pump(r, sub);
                        struct exit_event ev;
                        while (exit_sub_recv(sub, &ev, 0) == 0) {
                                assert_int_equal(ev.type, EXIT_EVENT_EXIT);
                                if (ev.flags & EXIT_EVENT_ORPHAN) {
                                        assert_int_not_equal(ev.pid, exit_process_pid(p));
                                        struct exit_reason dummy;
                                        assert_int_equal(exit_hub_take(hub, ev.id, &dummy), -EPERM);
                                        orphans++;
                                } else {
                                        assert_int_equal(ev.id, exit_process_id(p));
                                        mine++;
                                }
                        }
                }
                assert_int_equal(orphans, N_ORPHANS);
                struct exit_reason reason;
                assert_int_equal(exit_hub_take(hub, exit_process_id(p), &reason), 0);
                assert_int_equal(reason.kind, EXIT_REASON_EXITED);
                assert_int_equal(reason.status, 7);
                assert_int_equal(count_zombie_children(), 0);
                exit_process_unref(p);
        }
        exit_sub_free(sub);
        exit_reaper_free(r);
        exit_hub_unref(hub);
}

/* ---- storm ---- */

static bool storm_limits_ok(void) {
        struct rlimit rl;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
        rlim_t want = N_STORM + 100;
        if (rl.rlim_cur < want) {
                if (rl.rlim_max < want)
                        rl.rlim_max = want; /* as root; up to fs.nr_open */
                rl.rlim_cur = want;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
                        print_message("skip: RLIMIT_NOFILE cannot be raised to %lu (%s)\n", (unsigned long) want, strerror(errno));
                        return false;
                }
        }
        FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
        long pid_max = 0;
        if (f) {
                if (fscanf(f, "%ld", &pid_max) != 1)
                        pid_max = 0;
                fclose(f);
        }
        if (pid_max && pid_max < N_STORM + 500) {
                print_message("skip: kernel.pid_max is %ld, below %d children\n", pid_max, N_STORM);
                return false;
        }
        /* pids.max of our cgroup, in v2 or the v1 pids hierarchy. */
        const char *files[] = { "/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                f = fopen(files[i], "re");
                if (!f)
                        continue;
                char v[32] = "";
                if (!fgets(v, sizeof v, f))
                        v[0] = '\0';
                fclose(f);
                if (strncmp(v, "max", 3) != 0 && atol(v) > 0 && atol(v) < N_STORM + 500) {
                        print_message("skip: %s is %ld, below %d children\n", files[i], atol(v), N_STORM);
                        return false;
                }
        }
        return true;
}

static void test_storm(void **state) {
        if (!storm_limits_ok())
                skip();
        struct exit_hub *hub = NULL;
        struct exit_reaper *r = NULL;
        struct exit_sub *sub = NULL;
        assert_int_equal(exit_hub_new(64, 0, &hub), 0);
        assert_int_equal(exit_reaper_new(hub, EXIT_REAPER_ORPHANS, &r), 0);
        assert_int_equal(exit_hub_subscribe(hub, &sub), 0);

        int release[2];
        assert_int_equal(pipe2(release, O_CLOEXEC), 0);
        struct exit_process **procs = calloc(N_STORM, sizeof *procs);
        bool *taken = calloc(N_STORM, sizeof *taken);
        assert_non_null(procs);
        assert_non_null(taken);
        char *argv[] = { (char *) "cat", NULL };
        struct exit_spawn_attr a = {
                .size = sizeof a, .flags = EXIT_SPAWN_STDIO, .argv = argv,
                .stdio = { release[0], EXIT_SPAWN_FD_NULL, EXIT_SPAWN_FD_INHERIT },
                .pdeath_signal = SIGKILL,
        };
        for (int i = 0; i < N_STORM; i++) {
                int k = exit_reaper_spawn(r, &a, &procs[i]);
                if (k < 0)
                        fail_msg("spawn %d of %d: %s", i, N_STORM, strerror(-k));
                /* Collect exec statuses as we go, so their pipes close. */
                if (i % 256 == 255)
                        assert_true(exit_reaper_dispatch(r) >= 0);
        }
        close(release[0]);
        for (int i = 0; i < N_STORM; i++)
                if (exit_process_wait_exec(procs[i], WAIT_MS, NULL) != 0)
                        fail_msg("child %d did not exec cat", i);
        close(release[1]); /* one pipe closes: all 10,000 exit together */

        int n_taken = 0, lagged = 0, events = 0;
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + 4 * WAIT_MS * USEC_PER_MSEC;
        while (n_taken < N_STORM) {
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("%d of %d outcomes recovered: exits were lost (reaper or hub)", n_taken, N_STORM);
                pump(r, sub);
                struct exit_event ev;
                bool recover = false;
                while (exit_sub_recv(sub, &ev, 0) == 0) {
                        if (ev.type == EXIT_EVENT_LAGGED) {
                                lagged++;
                                recover = true;
                                continue;
                        }
                        assert_int_equal(ev.flags & EXIT_EVENT_ORPHAN, 0);
                        events++;
                        recover = true; /* take by id below: one path for both */
                }
                if (!recover)
                        continue;
                /* After LAGGED the consumer recovers by taking the outcomes of
                 * the ids it owns; exactly once each. */
                for (int i = 0; i < N_STORM; i++) {
                        if (taken[i])
                                continue;
                        struct exit_reason reason;
                        int k = exit_hub_take(hub, exit_process_id(procs[i]), &reason);
                        if (k == -EINPROGRESS)
                                continue;
                        assert_int_equal(k, 0);
                        assert_int_equal(reason.kind, EXIT_REASON_EXITED);
                        assert_int_equal(reason.status, 0);
                        taken[i] = true;
                        n_taken++;
                }
        }
        print_message("storm: %d exits, %d events received, %d LAGGED markers\n", N_STORM, events, lagged);
        assert_true(lagged >= 1);
        assert_true(events < N_STORM);
        for (int i = 0; i < N_STORM; i++) {
                struct exit_reason reason;
                /* Taken once: a second take answers "taken", or "no such
                 * outcome" once the durable record was evicted too. */
                int k = exit_hub_take(hub, exit_process_id(procs[i]), &reason);
                assert_true(k == -EALREADY || k == -ENOENT);
                exit_process_unref(procs[i]);
        }
        assert_int_equal(count_zombie_children(), 0);
        free(procs);
        free(taken);
        exit_sub_free(sub);
        exit_reaper_free(r);
        exit_hub_unref(hub);
}

/* ---- the double-forking child ---- */

static int double_fork(int n, int fd) {
        for (int i = 0; i < n; i++) {
                pid_t middle = fork();
                if (middle < 0)
                        return 1;
                if (middle == 0) {
                        pid_t g = fork();
                        if (g == 0) {
                                char c;
                                while (read(fd, &c, 1) > 0)
                                        ;
                                _exit(i % 256);
                        }
                        _exit(g < 0);
                }
                int status;
                if (waitpid(middle, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        return 1;
        }
        return 7;
}

int main(int argc, char **argv) {
        self_exe = "/proc/self/exe";
        char exe[4096];
        ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (k > 0) {
                exe[k] = '\0';
                self_exe = exe;
        }
        if (argc == 4 && strcmp(argv[1], "--double-fork") == 0)
                return double_fork(atoi(argv[2]), atoi(argv[3]));
        if (argc != 2 || (strcmp(argv[1], "pid1") != 0 && strcmp(argv[1], "subreaper") != 0)) {
                fprintf(stderr, "usage: %s pid1|subreaper\n", argv[0]);
                return 2;
        }
        as_pid1 = strcmp(argv[1], "pid1") == 0;
        if (as_pid1 && getpid() != 1) {
                printf("skip: not PID 1: run under unshare -pf --mount-proc\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_orphans),
                cmocka_unit_test(test_storm),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
