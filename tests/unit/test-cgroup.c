/* SPDX-License-Identifier: MIT */
/*
 * The cgroup module (supervisor/exec/cgroup.h; SPEC §4 "cgroups", "Signals to
 * groups", "Stop"). Two suites from one binary:
 *
 *   test-cgroup parse       suite unit: discovery parsed from sample
 *                           /proc/self/mountinfo and /proc/self/cgroup texts,
 *                           and the FALLBACK tree's argument checks
 *   test-cgroup privileged  suite privileged: real processes in real cgroups.
 *                           Each test creates <cgroup2 mount>/tend-test-XXXXXX,
 *                           moves this process into it (so discovery finds it as
 *                           "tend's cgroup"), and removes it at the end. Needs
 *                           root and a writable cgroup2 (else exit 77 "skip: …").
 *
 * The children are this binary run as helpers (--helper …), started and reaped
 * through libexit; the reaper runs in orphan mode so the double-forked
 * grandchildren are reaped (and their exit reasons seen) here too.
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
#include <grp.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cgroup.h"
#include "libexit.h"
#include "macro.h"
#include "reaper-internal.h"
#include "time-util.h"
#include "testutil.h"

#define WAIT_MS 10000
#define FORKER_CHILDREN 600 /* the fork-bomb-ish helper's bound */
#define CROWD_CHILDREN 200
#define MAX_RECS (4 * (FORKER_CHILDREN + CROWD_CHILDREN))

static char self_exe[4096];
static char orig_dir[4096];  /* this process's cgroup directory before the tests */
static char cg_mount[2048];  /* the cgroup2 mount */

/* ======================================================================== */
/* Helpers: this binary run as a child                                      */
/* ======================================================================== */

static void say(const char *label) {
        char buf[64];
        int n = snprintf(buf, sizeof buf, "%s %d\n", label, (int) getpid());
        (void) !write(STDOUT_FILENO, buf, (size_t) n);
}

/* Stops holding the report pipe, so the test sees EOF once everyone has reported. */
static void quiet(void) {
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
                dup2(fd, STDOUT_FILENO);
                close(fd);
        }
}

static _Noreturn void pause_forever(void) {
        quiet();
        for (;;)
                pause();
}

/*
 * tree: H (this) forks A, which stays in H's group and session, and B, which
 * calls setsid and forks C before exiting (a double-forking daemon: C is in a
 * session of its own and re-parented to the test, a subreaper). Reports
 * "H pid", "A pid", "C pid"; all three pause.
 */
static int helper_tree(void) {
        say("H");
        if (fork() == 0) {
                say("A");
                pause_forever();
        }
        pid_t b = fork();
        if (b == 0) {
                setsid();
                if (fork() == 0) {
                        say("C");
                        pause_forever();
                }
                _exit(0);
        }
        (void) waitpid(b, NULL, 0);
        pause_forever();
}

/*
 * forker: F forks FORKER_CHILDREN children: odd ones exit at once
 * (short-lived), even ones pause. After the first 20 it stops holding the
 * report pipe, so the test starts signalling while F is still forking. F
 * paces itself (100 µs between forks: not a wait, a rate) so that it is still
 * forking when the scan reaches it, however fast the machine forks.
 */
static int helper_forker(void) {
        say("F");
        for (int i = 0; i < FORKER_CHILDREN; i++) {
                (void) nanosleep(&(struct timespec) { .tv_nsec = 100 * 1000 }, NULL);
                pid_t p = fork();
                if (p == 0) {
                        if (i % 2)
                                _exit(0);
                        pause_forever();
                }
                if (i == 20)
                        quiet();
        }
        pause_forever();
}

/*
 * crowd: K forks CROWD_CHILDREN children that pause, then pauses. Started
 * before the forker, its processes come first in cgroup.procs (join order),
 * so a scan's pass spends a while on them before it reaches the forker.
 */
static int helper_crowd(void) {
        say("K");
        for (int i = 0; i < CROWD_CHILDREN; i++)
                if (fork() == 0)
                        pause_forever();
        pause_forever();
}

/*
 * pgroup MODE: H (a session leader, started with EXIT_SPAWN_SETSID) forks A
 * (stays in H's group) and B (calls setsid: leaves the group). MODE "stay":
 * H pauses; "exit": H exits 0 at once, leaving A and B.
 */
static int helper_pgroup(const char *mode) {
        say("H");
        if (fork() == 0) {
                say("A");
                pause_forever();
        }
        if (fork() == 0) {
                setsid();
                say("B");
                pause_forever();
        }
        if (streq(mode, "exit")) {
                quiet();
                _exit(0);
        }
        pause_forever();
}

/*
 * discover: drops to nobody (uid/gid 65534), runs discovery in the test's
 * root-owned cgroup and prints "MODE DESCRIPTION".
 */
static int helper_discover(void) {
        if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                return 3;
        struct cgroup_tree *t = NULL;
        if (cgroup_tree_open(&t) < 0)
                return 4;
        printf("%s %s\n", cgroup_tree_mode(t) == CGROUP_MODE_CGROUP ? "cgroup" : "fallback", cgroup_tree_describe(t));
        cgroup_tree_free(t);
        return 0;
}

/*
 * enter-leaf: drops to nobody, as helper_discover, then tries to move into
 * tend's leaf and prints "RESULT IN_LEAF".
 */
static int helper_enter_leaf(void) {
        if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                return 3;
        struct cgroup_tree *t = NULL;
        if (cgroup_tree_open(&t) < 0)
                return 4;
        if (cgroup_tree_mode(t) != CGROUP_MODE_CGROUP) {
                printf("fallback %s\n", cgroup_tree_describe(t));
                cgroup_tree_free(t);
                return 0;
        }
        int r = cgroup_tree_enter_leaf(t);
        printf("%d %d\n", r, (int) cgroup_tree_in_leaf(t));
        cgroup_tree_free(t);
        return 0;
}

static int helper(int argc, char **argv) {
        if (argc >= 3 && streq(argv[2], "discover"))
                return helper_discover();
        if (argc >= 3 && streq(argv[2], "enter-leaf"))
                return helper_enter_leaf();
        if (argc >= 3 && streq(argv[2], "tree"))
                return helper_tree();
        if (argc >= 3 && streq(argv[2], "crowd"))
                return helper_crowd();
        if (argc >= 3 && streq(argv[2], "forker"))
                return helper_forker();
        if (argc >= 4 && streq(argv[2], "pgroup"))
                return helper_pgroup(argv[3]);
        if (argc >= 3 && streq(argv[2], "pause")) {
                say("P");
                pause_forever();
        }
        if (argc >= 4 && streq(argv[2], "exit"))
                return atoi(argv[3]);
        return 2;
}

/* ======================================================================== */
/* Discovery from strings (suite unit)                                      */
/* ======================================================================== */

static const char mi_pure[] =
        "22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw\n"
        "25 22 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
        "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";

/* This machine's layout: v1 controllers under /sys/fs/cgroup/NAME, cgroup2 at unified. */
static const char mi_hybrid[] =
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static const char cg_hybrid[] =
        "9:name=systemd:/system.slice/tend.service\n"
        "4:memory:/system.slice/tend.service\n"
        "1:cpu:/\n"
        "0::/system.slice/tend.service\n";

static void expect_location(const char *mi, const char *cg, const char *mount, const char *path, const char *dir) {
        struct cgroup_location loc = { 0 };
        int r = cgroup_locate(mi, cg, &loc);
        if (r < 0)
                fail_msg("cgroup_locate: %s", strerror(-r));
        assert_string_equal(loc.mount, mount);
        assert_string_equal(loc.path, path);
        assert_string_equal(loc.dir, dir);
        cgroup_location_done(&loc);
        assert_null(loc.dir);
}

static void expect_locate_error(const char *mi, const char *cg, int error) {
        struct cgroup_location loc = { .dir = (char *) "untouched" };
        assert_int_equal(cgroup_locate(mi, cg, &loc), error);
        assert_string_equal(loc.dir, "untouched");
}

static void test_parse_pure_v2(void **state) {
        expect_location(mi_pure, "0::/system.slice/tend.service\n", "/sys/fs/cgroup",
                        "/system.slice/tend.service", "/sys/fs/cgroup/system.slice/tend.service");
        expect_location(mi_pure, "0::/\n", "/sys/fs/cgroup", "/", "/sys/fs/cgroup");
        /* No trailing newline. */
        expect_location(mi_pure, "0::/a", "/sys/fs/cgroup", "/a", "/sys/fs/cgroup/a");
}

static void test_parse_hybrid(void **state) {
        expect_location(mi_hybrid, cg_hybrid, "/sys/fs/cgroup/unified", "/system.slice/tend.service",
                        "/sys/fs/cgroup/unified/system.slice/tend.service");
        /* This machine: 0::/ is the root of the unified hierarchy. */
        expect_location(mi_hybrid, "8:pids:/\n4:memory:/x/y\n0::/\n", "/sys/fs/cgroup/unified", "/",
                        "/sys/fs/cgroup/unified");
}

static void test_parse_container(void **state) {
        /* A private cgroup namespace: the container's cgroup is the namespace's
         * root, mounted (read-only unless privileged) at /sys/fs/cgroup. */
        static const char mi_ns[] =
                "611 589 0:55 / / rw,relatime master:290 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w\n"
                "617 615 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate\n";
        expect_location(mi_ns, "0::/\n", "/sys/fs/cgroup", "/", "/sys/fs/cgroup");
        expect_location(mi_ns, "0::/sub\n", "/sys/fs/cgroup", "/sub", "/sys/fs/cgroup/sub");
        /* The host's cgroup namespace with a bind-mounted subtree: the mount's
         * root is the container's cgroup. */
        static const char mi_host_ns[] =
                "617 615 0:26 /docker/abc /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw\n";
        expect_location(mi_host_ns, "0::/docker/abc\n", "/sys/fs/cgroup", "/docker/abc", "/sys/fs/cgroup");
        expect_location(mi_host_ns, "0::/docker/abc/tend\n", "/sys/fs/cgroup", "/docker/abc/tend",
                        "/sys/fs/cgroup/tend");
}

static void test_parse_no_cgroup2(void **state) {
        static const char mi_v1[] =
                "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
                "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n";
        expect_locate_error(mi_v1, "1:cpu:/\n0::/\n", -ENODEV);
        /* A pure v1 kernel lists no "0::" line at all. */
        expect_locate_error(mi_hybrid, "9:name=systemd:/\n1:cpu:/\n", -ENOENT);
        /* An fs type that merely starts with cgroup2 is not cgroup2. */
        expect_locate_error("41 31 0:38 / /x rw - cgroup2x none rw\n", "0::/\n", -ENODEV);
        expect_locate_error("", "0::/\n", -ENODEV);
}

static void test_parse_outside_root(void **state) {
        static const char mi[] =
                "617 615 0:26 /docker/abc /sys/fs/cgroup rw,relatime - cgroup2 cgroup rw\n";
        expect_locate_error(mi, "0::/docker/other\n", -EXDEV);
        /* A prefix of the name is not a parent. */
        expect_locate_error(mi, "0::/docker/abcdef\n", -EXDEV);
        expect_locate_error(mi, "0::/\n", -EXDEV);
        /* Outside the reader's cgroup namespace, the kernel shows "/../…". */
        expect_locate_error(mi_pure, "0::/../../user.slice/x\n", -EXDEV);
        expect_locate_error("617 615 0:26 /.. /sys/fs/cgroup rw - cgroup2 cgroup rw\n", "0::/\n", -EXDEV);
}

static void test_parse_mountinfo_details(void **state) {
        /* Octal escapes in the mount point, several optional fields. */
        expect_location("41 31 0:38 / /mnt/my\\040cg\\134x rw shared:3 master:1 propagate_from:2 - cgroup2 none rw\n",
                        "0::/u\n", "/mnt/my cg\\x", "/u", "/mnt/my cg\\x/u");
        /* Two cgroup2 mounts: only the one whose root contains P counts, and
         * the last one wins (it shadows an earlier one). */
        expect_location("41 31 0:38 /a /x rw - cgroup2 none rw\n"
                        "42 31 0:38 / /y rw - cgroup2 none rw\n",
                        "0::/b/c\n", "/y", "/b/c", "/y/b/c");
        expect_location("41 31 0:38 / /x rw - cgroup2 none rw\n"
                        "42 31 0:38 / /y rw - cgroup2 none rw\n",
                        "0::/b\n", "/y", "/b", "/y/b");
        /* Mounted at /. */
        expect_location("41 31 0:38 / / rw - cgroup2 none rw\n", "0::/b\n", "/", "/b", "/b");
        /* A truncated line is skipped, not misread. */
        expect_locate_error("41 31 0:38 / /x rw -\n", "0::/\n", -ENODEV);
}

static void test_parse_self(void **state) {
        char *p = NULL;
        assert_int_equal(cgroup_parse_self("1:cpu:/a\n0::/b/c:d\n", &p), 0);
        assert_string_equal(p, "/b/c:d");
        free(p);
        p = NULL;
        assert_int_equal(cgroup_parse_self("0::\n", &p), -EINVAL);
        assert_int_equal(cgroup_parse_self("0::relative\n", &p), -EINVAL);
        assert_int_equal(cgroup_parse_self("10::/a\n", &p), -ENOENT);
        assert_int_equal(cgroup_parse_self("", &p), -ENOENT);
        assert_null(p);
        assert_int_equal(cgroup_parse_self(NULL, &p), -EINVAL);
        struct cgroup_location loc = { 0 };
        assert_int_equal(cgroup_locate(NULL, "0::/", &loc), -EINVAL);
        assert_int_equal(cgroup_locate(mi_pure, "0::/", NULL), -EINVAL);
}

/* FALLBACK mode without any process: argument checks and the empty answers. */
static void test_fallback_api(void **state) {
        struct cgroup_tree *t = NULL;
        assert_int_equal(cgroup_tree_open_fallback("cgroups disabled", &t), 0);
        assert_int_equal(cgroup_tree_mode(t), CGROUP_MODE_FALLBACK);
        assert_null(cgroup_tree_dir(t));
        assert_string_equal(cgroup_tree_describe(t), "cgroups disabled: using process groups");

        struct unit_group *g = NULL;
        const char *bad[] = { "", ".", "..", "a/b", "a\nb" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(unit_group_new(t, bad[i], &g), -EINVAL);
        char longname[300];
        memset(longname, 'x', sizeof longname - 1);
        longname[sizeof longname - 1] = '\0';
        assert_int_equal(unit_group_new(t, longname, &g), -EINVAL);
        assert_int_equal(unit_group_new(NULL, "a", &g), -EINVAL);
        assert_null(g);

        assert_int_equal(unit_group_new(t, "demo.service", &g), 0);
        assert_null(unit_group_dir(g));
        assert_int_equal(unit_group_events_fd(g), -EOPNOTSUPP);
        struct exit_spawn_attr a = { .size = sizeof a, .cgroup_fd = -1 };
        assert_int_equal(unit_group_spawn_attr(g, &a), 0);
        assert_int_equal(a.flags, 0);
        assert_int_equal(a.cgroup_fd, -1);
        /* No leader yet: nothing to find, nothing signalled. */
        assert_int_equal(unit_group_populated(g), 0);
        assert_int_equal(unit_group_signal(g, SIGTERM, true), 0);
        assert_int_equal(unit_group_signal(g, SIGTERM, false), 0);
        assert_int_equal(unit_group_kill_leftovers(g, 0), 0);
        assert_int_equal(unit_group_contains(g, getpid()), 0);
        assert_int_equal(unit_group_signal(g, 0, true), -EINVAL);
        assert_int_equal(unit_group_signal(g, _NSIG, true), -EINVAL);
        assert_int_equal(unit_group_contains(g, 0), -EINVAL);
        assert_int_equal(unit_group_remove(g), 0);
        unit_group_free(g);
        cgroup_tree_free(t);
}

/* ======================================================================== */
/* Real processes in real cgroups (suite privileged)                        */
/* ======================================================================== */

struct rec {
        pid_t pid;
        struct exit_reason reason;
};

struct helper_pid {
        char label;
        pid_t pid;
        int pidfd;
};

struct ctx {
        int n_fds_before;
        uint32_t reaper_flags;
        char dir[4096];  /* this test's cgroup: "tend's cgroup" */
        char rel[4096];  /* the same, as /proc/PID/cgroup names it */
        struct exit_hub *hub;
        struct exit_reaper *reaper;
        struct exit_sub *sub;
        struct rec *recs; /* every exit seen, spawned or orphan */
        size_t n_recs;
        struct cgroup_tree *tree;
        struct unit_group *group;
        struct exit_process *procs[16]; /* test_fallback_old_groups: 10 runs */
        size_t n_procs;
        struct helper_pid pids[48]; /* test_fallback_old_groups: 10 runs of 3 */
        size_t n_pids;
};


static int write_file(const char *path, const char *s) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t k = write(fd, s, strlen(s));
        int r = k < 0 ? -errno : 0;
        close(fd);
        return r;
}

static int read_file(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t k = read(fd, buf, size - 1);
        int r = k < 0 ? -errno : 0;
        buf[k < 0 ? 0 : k] = '\0';
        close(fd);
        return r;
}

static void move_self(const char *dir) {
        char path[4200], pid[32];
        snprintf(path, sizeof path, "%s/cgroup.procs", dir);
        snprintf(pid, sizeof pid, "%d", (int) getpid());
        int r = write_file(path, pid);
        if (r < 0)
                fail_msg("moving the test into %s: %s", dir, strerror(-r));
}

/* Collects what the reaper has: exits into c->recs. Waits up to ms first. */
static void pump(struct ctx *c, int ms) {
        struct pollfd pfd[2] = {
                { .fd = exit_reaper_fd(c->reaper), .events = POLLIN },
                { .fd = exit_sub_fd(c->sub), .events = POLLIN },
        };
        (void) poll(pfd, 2, ms);
        assert_true(exit_reaper_dispatch(c->reaper) >= 0);
        struct exit_event ev;
        while (exit_sub_recv(c->sub, &ev, 0) == 0) {
                if (ev.type == EXIT_EVENT_LAGGED)
                        fail_msg("the test's exit queue overflowed: raise its capacity");
                if (c->n_recs == MAX_RECS)
                        fail_msg("more than %d exits in one test: raise MAX_RECS", MAX_RECS);
                c->recs[c->n_recs++] = (struct rec) { ev.pid, ev.reason };
        }
}

static const struct rec *find_rec(struct ctx *c, pid_t pid) {
        for (size_t i = c->n_recs; i > 0; i--)
                if (c->recs[i - 1].pid == pid)
                        return &c->recs[i - 1];
        return NULL;
}

/* The exit reason of pid (a child or an orphan of the test), bounded. */
static struct exit_reason wait_reaped(struct ctx *c, pid_t pid, const char *what) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT_MS * USEC_PER_MSEC;
        const struct rec *r;
        while (!(r = find_rec(c, pid))) {
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("%s (pid %d) not dead and reaped within %d ms: the signal never reached it", what, (int) pid, WAIT_MS);
                pump(c, 50);
        }
        return r->reason;
}

/* Reaps (through the reaper) every child that has exited so far; bounded. */
static void drain_zombies(struct ctx *c) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT_MS * USEC_PER_MSEC;
        for (;;) {
                siginfo_t si = { 0 };
                if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
                        return;
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("zombie %d not reaped within %d ms: the reaper's orphan pass missed it", (int) si.si_pid, WAIT_MS);
                pump(c, 10);
        }
}

static void assert_killed_by(struct ctx *c, pid_t pid, int sig, const char *what) {
        struct exit_reason r = wait_reaped(c, pid, what);
        if (r.kind != EXIT_REASON_KILLED || r.status != sig)
                fail_msg("%s (pid %d): expected to die by signal %d, got %s %d", what, (int) pid, sig,
                         r.kind == EXIT_REASON_KILLED ? "signal" : "exit code", r.status);
}

/* Whether pid (opened as pidfd when reported) is still running, after giving
 * a signal sent to it 200 ms to act: the documented-limit assertions. */
static bool still_alive(struct ctx *c, const struct helper_pid *h) {
        usec_t until = now_usec(CLOCK_MONOTONIC) + 200 * USEC_PER_MSEC;
        while (now_usec(CLOCK_MONOTONIC) < until)
                pump(c, 20);
        struct pollfd pfd = { .fd = h->pidfd, .events = POLLIN };
        return poll(&pfd, 1, 0) == 0;
}

static struct exit_process *spawn_helper(struct ctx *c, char *const *args, uint32_t flags, int cgroup_fd, int *ret_out) {
        char *argv[8] = { self_exe, (char *) "--helper" };
        for (size_t i = 0; args[i]; i++)
                argv[2 + i] = args[i];
        int pipefd[2];
        assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
        struct exit_spawn_attr a = {
                .size = sizeof a,
                .flags = flags | EXIT_SPAWN_STDIO,
                .argv = argv,
                .stdio = { EXIT_SPAWN_FD_NULL, pipefd[1], EXIT_SPAWN_FD_INHERIT },
                .pdeath_signal = SIGKILL,
                .cgroup_fd = -1,
        };
        if (cgroup_fd >= 0) {
                a.flags |= EXIT_SPAWN_CGROUP;
                a.cgroup_fd = cgroup_fd;
        } else if (c->group)
                assert_int_equal(unit_group_spawn_attr(c->group, &a), 0);
        struct exit_process *p = NULL;
        int k = exit_reaper_spawn(c->reaper, &a, &p);
        close(pipefd[1]);
        if (k < 0)
                fail_msg("spawn helper %s: %s", args[0], strerror(-k));
        assert_true(c->n_procs < ELEMENTSOF(c->procs));
        c->procs[c->n_procs++] = p;
        *ret_out = pipefd[0];
        return p;
}

/* Reads fd until EOF (every process of the helper let go of the pipe) into
 * buf, NUL-terminated, and closes it; bounded. */
static void read_output(struct ctx *c, int fd, char *buf, size_t size) {
        size_t n = 0;
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT_MS * USEC_PER_MSEC;
        for (;;) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                if (poll(&pfd, 1, 50) == 0) {
                        if (now_usec(CLOCK_MONOTONIC) > deadline)
                                fail_msg("the helper's reports never reached EOF: it hangs, or one of its processes kept the pipe");
                        pump(c, 0);
                        continue;
                }
                ssize_t k = read(fd, buf + n, size - 1 - n);
                assert_true(k >= 0);
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        close(fd);
        buf[n] = '\0';
}

/* Reads the helper's "L pid" reports, opening a pidfd for each. */
static void read_reports(struct ctx *c, int fd) {
        char buf[4096];
        read_output(c, fd, buf, sizeof buf);
        char label;
        int pid, used;
        for (char *p = buf; sscanf(p, " %c %d%n", &label, &pid, &used) == 2; p += used) {
                assert_true(c->n_pids < ELEMENTSOF(c->pids));
                int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
                if (pidfd < 0)
                        fail_msg("helper process %c (pid %d) died before the test started", label, pid);
                c->pids[c->n_pids++] = (struct helper_pid) { label, (pid_t) pid, pidfd };
        }
}

/* mkdir dir (a cgroup of the test's) and runs helper `args` there, in a
 * session of its own, until it has reported (a leftover for tend to find). */
static void helper_in_new_cgroup(struct ctx *c, const char *dir, char *const *args) {
        assert_int_equal(mkdir(dir, 0755), 0);
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        int out;
        spawn_helper(c, args, EXIT_SPAWN_SETSID, fd, &out);
        close(fd);
        read_reports(c, out);
}

/* Runs helper `args` (what: for messages) to its clean exit; its output in buf. */
static void helper_output(struct ctx *c, char *const *args, const char *what, char *buf, size_t size) {
        int out;
        struct exit_process *p = spawn_helper(c, args, 0, -1, &out);
        read_output(c, out, buf, size);
        struct exit_reason r = wait_reaped(c, exit_process_pid(p), what);
        assert_int_equal(r.kind, EXIT_REASON_EXITED);
        assert_int_equal(r.status, 0);
}

static const struct helper_pid *pid_of(struct ctx *c, char label) {
        for (size_t i = 0; i < c->n_pids; i++)
                if (c->pids[i].label == label)
                        return &c->pids[i];
        fail_msg("no helper process %c reported", label);
        return NULL;
}

/* Blocks on the unit's events fd (EPOLLPRI in an epoll set, as tend's loop
 * does) until "populated 0"; bounded. */
static void wait_unit_empty(struct ctx *c, const char *cause) {
        int ep = epoll_create1(EPOLL_CLOEXEC);
        assert_true(ep >= 0);
        struct epoll_event ev = { .events = EPOLLPRI };
        assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, unit_group_events_fd(c->group), &ev), 0);
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT_MS * USEC_PER_MSEC;
        int populated;
        while ((populated = unit_group_populated(c->group)) == 1) {
                if (now_usec(CLOCK_MONOTONIC) > deadline) {
                        close(ep);
                        fail_msg("the unit's cgroup is still populated after %d ms: %s", WAIT_MS, cause);
                }
                (void) epoll_wait(ep, &ev, 1, 50);
                pump(c, 0);
        }
        close(ep);
        assert_int_equal(populated, 0);
}

/* Kills whatever is left in dir (this process excepted) and below. */
static void kill_subtree(const char *dir) {
        char path[4200], buf[65536];
        snprintf(path, sizeof path, "%s/cgroup.procs", dir);
        if (read_file(path, buf, sizeof buf) == 0)
                for (char *p = buf, *end; *p; p = end) {
                        long v = strtol(p, &end, 10);
                        if (end == p)
                                break;
                        int pidfd = v > 0 && v != getpid() ? (int) syscall(SYS_pidfd_open, (pid_t) v, 0) : -1;
                        if (pidfd >= 0) {
                                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                                close(pidfd);
                        }
                }
        DIR *d = opendir(dir);
        if (!d)
                return;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (e->d_type != DT_DIR || e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                kill_subtree(path);
        }
        closedir(d);
}

static void remove_subtree(const char *dir) {
        DIR *d = opendir(dir);
        if (d) {
                struct dirent *e;
                char path[4200];
                while ((e = readdir(d))) {
                        if (e->d_type != DT_DIR || e->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                        remove_subtree(path);
                }
                closedir(d);
        }
        if (rmdir(dir) < 0 && errno != ENOENT)
                fprintf(stderr, "test-cgroup: rmdir %s: %s\n", dir, strerror(errno));
}

static int setup_flags(void **state, uint32_t reaper_flags) {
        struct ctx *c = calloc(1, sizeof *c);
        assert_non_null(c);
        c->n_fds_before = count_fds();
        c->reaper_flags = reaper_flags;
        snprintf(c->dir, sizeof c->dir, "%s/tend-test-XXXXXX", cg_mount);
        if (!mkdtemp(c->dir))
                fail_msg("creating a test cgroup under %s: %s", cg_mount, strerror(errno));
        move_self(c->dir);
        snprintf(c->rel, sizeof c->rel, "%s", c->dir + strlen(cg_mount));
        c->recs = calloc(MAX_RECS, sizeof *c->recs);
        assert_non_null(c->recs);
        assert_int_equal(exit_hub_new(MAX_RECS, 0, &c->hub), 0);
        assert_int_equal(exit_reaper_new(c->hub, EXIT_REAPER_ORPHANS | reaper_flags, &c->reaper), 0);
        assert_int_equal(exit_hub_subscribe(c->hub, &c->sub), 0);
        *state = c;
        return 0;
}

static int setup(void **state) {
        return setup_flags(state, 0);
}

static int setup_fork(void **state) {
        return setup_flags(state, EXIT_REAPER_NO_CLONE3 | EXIT_REAPER_NO_VFORK);
}

static int setup_clone3(void **state) {
        return setup_flags(state, EXIT_REAPER_NO_VFORK);
}

/* Opens tend's cgroup as the module discovers it: this test's cgroup. */
static void open_tree(struct ctx *c) {
        assert_int_equal(cgroup_tree_open(&c->tree), 0);
        if (cgroup_tree_mode(c->tree) != CGROUP_MODE_CGROUP)
                fail_msg("discovery fell back: %s", cgroup_tree_describe(c->tree));
        assert_string_equal(cgroup_tree_dir(c->tree), c->dir);
}

/* The unit's group, its cgroup made as the manager has it made before the
 * first spawn (unit_group_kill_leftovers) unless it existed already (then the
 * test looks at it before that). */
static void open_unit(struct ctx *c, const char *name) {
        int r = unit_group_new(c->tree, name, &c->group);
        if (r < 0)
                fail_msg("unit_group_new %s: %s", name, strerror(-r));
        if (unit_group_events_fd(c->group) == -ENOENT)
                assert_int_equal(unit_group_kill_leftovers(c->group, WAIT_MS), 0);
}

static int teardown(void **state) {
        struct ctx *c = *state;
        kill_subtree(c->dir);
        /* Reap everything: the helpers and their re-parented descendants. */
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT_MS * USEC_PER_MSEC;
        while (exit_reaper_has_children(c->reaper) > 0 && now_usec(CLOCK_MONOTONIC) < deadline)
                pump(c, 20);
        bool left = exit_reaper_has_children(c->reaper) > 0;
        for (size_t i = 0; i < c->n_pids; i++)
                close(c->pids[i].pidfd);
        for (size_t i = 0; i < c->n_procs; i++)
                exit_process_unref(c->procs[i]);
        unit_group_free(c->group);
        cgroup_tree_free(c->tree);
        exit_sub_free(c->sub);
        exit_reaper_free(c->reaper);
        exit_hub_unref(c->hub);
        free(c->recs);
        move_self(orig_dir);
        remove_subtree(c->dir);
        int n = count_fds(), before = c->n_fds_before;
        free(c);
        if (left)
                fail_msg("children left after the test: a helper survived SIGKILL for %d ms", WAIT_MS);
        if (n != before)
                fail_msg("fd leak: %d fds open after the test, %d before", n, before);
        return 0;
}

/* The unit-relative "0::" path of pid, as /proc/PID/cgroup names it. */
static void expect_proc_cgroup(pid_t pid, const char *want) {
        char path[64], buf[8192];
        snprintf(path, sizeof path, "/proc/%d/cgroup", (int) pid);
        assert_int_equal(read_file(path, buf, sizeof buf), 0);
        char *p = NULL;
        assert_int_equal(cgroup_parse_self(buf, &p), 0);
        if (!streq(p, want))
                fail_msg("pid %d is in cgroup %s, expected %s", (int) pid, p, want);
        free(p);
}

/* A process of the same user outside the unit: never signalled. */
static const struct helper_pid *start_outsider(struct ctx *c) {
        int out;
        char *args[] = { (char *) "pause", NULL };
        struct unit_group *g = TAKE_PTR(c->group); /* spawn it outside the unit */
        spawn_helper(c, args, EXIT_SPAWN_SETSID, -1, &out);
        c->group = g;
        read_reports(c, out);
        return pid_of(c, 'P');
}

static void expect_outsider_alive(struct ctx *c, const struct helper_pid *o) {
        if (!still_alive(c, o))
                fail_msg("a process outside the unit (pid %d) was signalled", (int) o->pid);
        expect_proc_cgroup(o->pid, c->rel);
}

/* ---- tests ---- */

static void test_discovery_and_unit_cgroup(void **state) {
        struct ctx *c = *state;
        open_tree(c);
        assert_non_null(strstr(cgroup_tree_describe(c->tree), c->dir));
        assert_int_equal(unit_group_new(c->tree, "demo", &c->group), 0);

        char want[4200], buf[4200], path[4300];
        snprintf(want, sizeof want, "%s/demo.service", c->dir);
        char *dir = unit_group_dir(c->group);
        assert_string_equal(dir, want);
        free(dir);
        /* Made only when first needed (before the first spawn); until then
         * it answers as an empty cgroup. */
        struct stat st;
        assert_int_equal(stat(want, &st), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(unit_group_populated(c->group), 0);
        assert_int_equal(unit_group_signal(c->group, SIGTERM, false), 0);
        assert_int_equal(unit_group_contains(c->group, getpid()), 0);
        assert_int_equal(unit_group_events_fd(c->group), -ENOENT);
        /* One never used is removed all the same (nothing to remove). */
        struct unit_group *never = NULL;
        assert_int_equal(unit_group_new(c->tree, "never", &never), 0);
        assert_int_equal(unit_group_remove(never), 0);
        assert_int_equal(unit_group_populated(never), -ENOENT);
        unit_group_free(never);
        assert_int_equal(unit_group_kill_leftovers(c->group, WAIT_MS), 0);
        assert_true(unit_group_events_fd(c->group) >= 0);
        assert_int_equal(stat(want, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        /* A leaf with no controllers enabled, by tend or below it. */
        snprintf(path, sizeof path, "%s/cgroup.subtree_control", want);
        assert_int_equal(read_file(path, buf, sizeof buf), 0);
        assert_string_equal(buf, "");
        snprintf(path, sizeof path, "%s/cgroup.subtree_control", c->dir);
        assert_int_equal(read_file(path, buf, sizeof buf), 0);
        assert_string_equal(buf, "");
        /* The probe left nothing behind. */
        snprintf(path, sizeof path, "%s/tend-probe.%d", c->dir, (int) getpid());
        assert_int_equal(stat(path, &st), -1);
        assert_int_equal(unit_group_populated(c->group), 0);
        /* Opening the same unit again reuses the cgroup. */
        struct unit_group *again = NULL;
        assert_int_equal(unit_group_new(c->tree, "demo.service", &again), 0);
        dir = unit_group_dir(again);
        assert_string_equal(dir, want);
        free(dir);
        unit_group_free(again);

        assert_int_equal(unit_group_remove(c->group), 0);
        assert_int_equal(stat(want, &st), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(unit_group_populated(c->group), -ENOENT);
        assert_int_equal(unit_group_events_fd(c->group), -ENOENT);
        assert_int_equal(unit_group_remove(c->group), 0);
}

/* A tend that cannot write its cgroup falls back, and says why. */
static void test_discovery_unwritable(void **state) {
        struct ctx *c = *state;
        /* Readable by all (mkdtemp made it 0700), writable by root only. */
        assert_int_equal(chmod(c->dir, 0755), 0);
        char *args[] = { (char *) "discover", NULL };
        char buf[8192], want[8192];
        helper_output(c, args, "the discovery helper", buf, sizeof buf);
        snprintf(want, sizeof want,
                 "fallback no writable cgroup v2 subtree at %s (writing its cgroup.procs: %s): using process groups\n",
                 c->dir, strerror(EACCES));
        assert_string_equal(buf, want);
}

/* tend's own leaf: entered (the whole process moves), units beside it,
 * left again at exit (cgroup.h, cgroup_tree_enter_leaf). */
static void test_leaf_enter_and_leave(void **state) {
        struct ctx *c = *state;
        char leaf[4200], want[4200], stale[4200];
        snprintf(leaf, sizeof leaf, "%s/%s", c->dir, CGROUP_TEND_LEAF);
        snprintf(want, sizeof want, "%s/%s", c->rel, CGROUP_TEND_LEAF);
        open_tree(c);
        assert_false(cgroup_tree_in_leaf(c->tree));
        assert_int_equal(cgroup_tree_enter_leaf(c->tree), 0);
        assert_true(cgroup_tree_in_leaf(c->tree));
        expect_proc_cgroup(getpid(), want);
        assert_int_equal(cgroup_tree_enter_leaf(c->tree), 0); /* once is enough */
        /* The tree is still tend's cgroup: units go beside the leaf. */
        assert_string_equal(cgroup_tree_dir(c->tree), c->dir);

        /* A unit cgroup made now is new (nothing to renew); one that existed
         * already (a previous tend's) has an unknown kill count: renewed. */
        open_unit(c, "demo");
        assert_false(unit_group_needs_renewal(c->group));
        snprintf(stale, sizeof stale, "%s/old.service", c->dir);
        assert_int_equal(mkdir(stale, 0755), 0);
        struct unit_group *old = NULL;
        assert_int_equal(unit_group_new(c->tree, "old", &old), 0);
        assert_true(unit_group_needs_renewal(old));
        assert_int_equal(unit_group_renew(old), 1);
        assert_false(unit_group_needs_renewal(old));
        assert_int_equal(unit_group_remove(old), 0);
        unit_group_free(old);

        /* A child spawned into the unit runs (no kill at birth). */
        int out;
        char *args[] = { (char *) "pause", NULL };
        struct exit_process *p = spawn_helper(c, args, EXIT_SPAWN_SETSID, -1, &out);
        read_reports(c, out);
        assert_int_equal(unit_group_populated(c->group), 1);
        assert_int_equal(unit_group_signal(c->group, SIGKILL, true), 1);
        assert_killed_by(c, exit_process_pid(p), SIGKILL, "the unit's process");
        wait_unit_empty(c, "cgroup.kill did not kill the unit's process");

        cgroup_tree_leave_leaf(c->tree);
        assert_false(cgroup_tree_in_leaf(c->tree));
        expect_proc_cgroup(getpid(), c->rel);
        struct stat st;
        assert_int_equal(stat(leaf, &st), -1);
        assert_int_equal(errno, ENOENT);
}

/* A previous tend's leaf: empty, it is made afresh; populated, it is joined
 * as it is (1), and stays when tend leaves. */
static void test_leaf_leftover(void **state) {
        struct ctx *c = *state;
        char leaf[4200], want[4200];
        snprintf(leaf, sizeof leaf, "%s/%s", c->dir, CGROUP_TEND_LEAF);
        snprintf(want, sizeof want, "%s/%s", c->rel, CGROUP_TEND_LEAF);
        assert_int_equal(mkdir(leaf, 0755), 0);
        open_tree(c);
        assert_int_equal(cgroup_tree_enter_leaf(c->tree), 0);
        expect_proc_cgroup(getpid(), want);
        cgroup_tree_leave_leaf(c->tree);

        char *args[] = { (char *) "pause", NULL };
        helper_in_new_cgroup(c, leaf, args);
        assert_int_equal(cgroup_tree_enter_leaf(c->tree), 1);
        expect_proc_cgroup(getpid(), want);
        expect_proc_cgroup(pid_of(c, 'P')->pid, want);
        cgroup_tree_leave_leaf(c->tree);
        expect_proc_cgroup(getpid(), c->rel);
        struct stat st;
        assert_int_equal(stat(leaf, &st), 0); /* populated: it stays */
}

/* A move that is refused (here: a populated leftover leaf owned by root, and
 * a tend running as nobody in a cgroup delegated to nobody) leaves tend where
 * it was, with the errno: the manager says so and carries on. */
static void test_leaf_refused(void **state) {
        struct ctx *c = *state;
        char leaf[4200], procs[4300];
        snprintf(leaf, sizeof leaf, "%s/%s", c->dir, CGROUP_TEND_LEAF);
        snprintf(procs, sizeof procs, "%s/cgroup.procs", c->dir);
        assert_int_equal(chown(c->dir, 65534, 65534), 0);
        assert_int_equal(chmod(c->dir, 0755), 0);
        assert_int_equal(chown(procs, 65534, 65534), 0);
        char *pause_args[] = { (char *) "pause", NULL };
        helper_in_new_cgroup(c, leaf, pause_args);

        char *args[] = { (char *) "enter-leaf", NULL };
        char buf[8192], want[64];
        helper_output(c, args, "the enter-leaf helper", buf, sizeof buf);
        snprintf(want, sizeof want, "%d 0\n", -EACCES);
        assert_string_equal(buf, want);
}

/* The child starts in the unit's cgroup: clone3(CLONE_VM | CLONE_VFORK |
 * CLONE_INTO_CGROUP) on a stack of its own (setup, where the build has the
 * trampoline), clone3 with CLONE_INTO_CGROUP (setup_clone3) or the fork
 * fallback writing to cgroup.procs (setup_fork). */
static void spawn_into_cgroup(void **state) {
        struct ctx *c = *state;
        open_tree(c);
        open_unit(c, "demo");
        const struct helper_pid *o = start_outsider(c);
        int out;
        char *args[] = { (char *) "pause", NULL };
        struct exit_process *p = spawn_helper(c, args, EXIT_SPAWN_SETSID, -1, &out);
        /* Only the vfork path knows the exec status when spawn returns. */
        bool vfork = !(c->reaper_flags & EXIT_REAPER_NO_VFORK) && spawn_vfork_available() &&
                     spawn_vfork_cgroup_available();
        assert_int_equal(exit_process_exec_result(p, NULL), vfork ? 0 : -EINPROGRESS);
        read_reports(c, out);

        char want[4200];
        snprintf(want, sizeof want, "%s/demo.service", c->rel);
        expect_proc_cgroup(exit_process_pid(p), want);
        assert_int_equal(unit_group_populated(c->group), 1);

        /* Membership, for NotifyAccess=all. */
        assert_int_equal(unit_group_contains(c->group, exit_process_pid(p)), 1);
        assert_int_equal(unit_group_contains(c->group, o->pid), 0);
        assert_int_equal(unit_group_contains(c->group, getpid()), 0);
        assert_int_equal(unit_group_remove(c->group), -EBUSY);

        assert_int_equal(unit_group_signal(c->group, SIGKILL, true), 1);
        assert_killed_by(c, exit_process_pid(p), SIGKILL, "the unit's process");
        wait_unit_empty(c, "cgroup.kill did not kill the unit's process");
        expect_outsider_alive(c, o);
        assert_int_equal(unit_group_contains(c->group, o->pid), 0);
}

/* Exit codes and exec failures of children spawned into the unit's cgroup,
 * on each path (the setups of spawn_into_cgroup); a fresh cgroup, never
 * cgroup.kill'ed, so no child is killed at birth. */
static void spawn_into_cgroup_exits(void **state) {
        struct ctx *c = *state;
        open_tree(c);
        open_unit(c, "exits");
        bool vfork = !(c->reaper_flags & EXIT_REAPER_NO_VFORK) && spawn_vfork_available() &&
                     spawn_vfork_cgroup_available();
        const char *codes[] = { "0", "3", "255" };
        for (size_t i = 0; i < ELEMENTSOF(codes); i++) {
                char *argv[] = { self_exe, (char *) "--helper", (char *) "exit", (char *) codes[i], NULL };
                struct exit_spawn_attr a = {
                        .size = sizeof a, .flags = EXIT_SPAWN_SETSID, .argv = argv, .cwd = "/",
                        .pdeath_signal = SIGKILL, .cgroup_fd = -1,
                };
                assert_int_equal(unit_group_spawn_attr(c->group, &a), 0);
                struct exit_process *p = NULL;
                assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
                assert_int_equal(exit_process_exec_result(p, NULL), vfork ? 0 : -EINPROGRESS);
                struct exit_reason r = wait_reaped(c, exit_process_pid(p), "the exiting child");
                exit_process_unref(p);
                assert_int_equal(r.kind, EXIT_REASON_EXITED);
                assert_int_equal(r.status, atoi(codes[i]));
        }
        char *missing[] = { (char *) "/nonexistent/tend-test-binary", NULL };
        struct exit_spawn_attr a = { .size = sizeof a, .argv = missing, .pdeath_signal = SIGKILL, .cgroup_fd = -1 };
        assert_int_equal(unit_group_spawn_attr(c->group, &a), 0);
        struct exit_process *p = NULL;
        assert_int_equal(exit_reaper_spawn(c->reaper, &a, &p), 0);
        int stage = -1;
        assert_int_equal(exit_process_wait_exec(p, WAIT_MS, &stage), -ENOENT);
        assert_int_equal(stage, EXIT_STAGE_EXEC);
        struct exit_reason r = wait_reaped(c, exit_process_pid(p), "the child that could not exec");
        exit_process_unref(p);
        assert_int_equal(r.kind, EXIT_REASON_EXITED);
        assert_int_equal(r.status, 127);
        wait_unit_empty(c, "a child that exited is still in the unit's cgroup");
        /* An empty cgroup is neither scanned nor cgroup.kill'ed (which would
         * force a renewal before the next spawn). */
        assert_int_equal(unit_group_signal(c->group, SIGTERM, false), 0);
        assert_int_equal(unit_group_signal(c->group, SIGKILL, false), 0);
        assert_false(unit_group_needs_renewal(c->group));
}

static void test_spawn_vfork(void **state) {
        spawn_into_cgroup(state);
}

static void test_spawn_clone3(void **state) {
        spawn_into_cgroup(state);
}

static void test_spawn_fork(void **state) {
        spawn_into_cgroup(state);
}

/* populated 1 → 0 seen through the pollable fd when the last process exits. */
static void test_populated_events(void **state) {
        struct ctx *c = *state;
        open_tree(c);
        open_unit(c, "demo");
        int ep = epoll_create1(EPOLL_CLOEXEC);
        assert_true(ep >= 0);
        struct epoll_event ev = { .events = EPOLLPRI };
        assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, unit_group_events_fd(c->group), &ev), 0);
        assert_int_equal(unit_group_populated(c->group), 0); /* reading re-arms */
        assert_int_equal(epoll_wait(ep, &ev, 1, 0), 0);

        int out;
        char *args[] = { (char *) "pause", NULL };
        struct exit_process *p = spawn_helper(c, args, EXIT_SPAWN_SETSID, -1, &out);
        read_reports(c, out);
        /* 0 → 1 raised EPOLLPRI. */
        assert_int_equal(epoll_wait(ep, &ev, 1, WAIT_MS), 1);
        assert_true(ev.events & EPOLLPRI);
        assert_int_equal(unit_group_populated(c->group), 1);
        assert_int_equal(epoll_wait(ep, &ev, 1, 0), 0);

        assert_int_equal(exit_process_signal(p, SIGTERM), 0);
        int k = epoll_wait(ep, &ev, 1, WAIT_MS);
        if (k != 1)
                fail_msg("no EPOLLPRI on cgroup.events within %d ms after the last process died: the kernel does not notify, use inotify IN_MODIFY", WAIT_MS);
        assert_true(ev.events & EPOLLPRI);
        assert_int_equal(unit_group_populated(c->group), 0);
        assert_int_equal(epoll_wait(ep, &ev, 1, 0), 0);
        assert_killed_by(c, exit_process_pid(p), SIGTERM, "the unit's process");
        close(ep);
        assert_int_equal(unit_group_remove(c->group), 0);
}

/* cgroup.kill reaches the double-forked setsid grandchild. */
static void test_cgroup_kill_tree(void **state) {
        struct ctx *c = *state;
        open_tree(c);
        open_unit(c, "demo");
        const struct helper_pid *o = start_outsider(c);
        int out;
        char *args[] = { (char *) "tree", NULL };
        spawn_helper(c, args, EXIT_SPAWN_SETSID, -1, &out);
        read_reports(c, out);
        const struct helper_pid *h = pid_of(c, 'H'), *a = pid_of(c, 'A'), *gc = pid_of(c, 'C');
        /* C is in a session (and group) of its own, not H's. */
        assert_true(getsid(gc->pid) > 0);
        assert_int_not_equal(getsid(gc->pid), h->pid);
        assert_int_not_equal(getpgid(gc->pid), h->pid);
        assert_int_equal(unit_group_contains(c->group, gc->pid), 1);

        assert_int_equal(unit_group_signal(c->group, SIGKILL, false), 3);
        wait_unit_empty(c, "cgroup.kill missed a process");
        assert_killed_by(c, h->pid, SIGKILL, "the main process");
        assert_killed_by(c, a->pid, SIGKILL, "the main process's child");
        assert_killed_by(c, gc->pid, SIGKILL, "the setsid grandchild");
        expect_outsider_alive(c, o);
        assert_int_equal(unit_group_signal(c->group, SIGKILL, false), 0);
}

/* SIGTERM by scan: one pidfd per member, the setsid grandchild included. */
static void test_signal_scan_tree(void **state) {
        struct ctx *c = *state;
        open_tree(c);
        open_unit(c, "demo");
        const struct helper_pid *o = start_outsider(c);
        int out;
        char *args[] = { (char *) "tree", NULL };
        spawn_helper(c, args, EXIT_SPAWN_SETSID, -1, &out);
        read_reports(c, out);
        assert_int_equal(unit_group_signal(c->group, SIGTERM, false), 3);
        assert_killed_by(c, pid_of(c, 'H')->pid, SIGTERM, "the main process");
        assert_killed_by(c, pid_of(c, 'A')->pid, SIGTERM, "the main process's child");
        assert_killed_by(c, pid_of(c, 'C')->pid, SIGTERM, "the setsid grandchild");
        wait_unit_empty(c, "a member missed by the scan");
        expect_outsider_alive(c, o);
        assert_int_equal(unit_group_signal(c->group, SIGTERM, false), 0);
}

/*
 * SIGTERM by scan while the unit forks: the passes repeat until one finds no
 * new process, so the children forked during the scan are reached too. The
 * crowd, ahead of the forker in cgroup.procs, keeps the first pass busy while
 * the forker forks children that pass never read; a single pass would leave
 * them running. Once the forker has SIGTERM pending it cannot fork any more
 * (copy_process refuses), so the passes end.
 */
static void test_signal_scan_forks(void **state) {
        struct ctx *c = *state;
        open_tree(c);
        open_unit(c, "demo");
        const struct helper_pid *o = start_outsider(c);
        int out;
        char *crowd[] = { (char *) "crowd", NULL };
        spawn_helper(c, crowd, EXIT_SPAWN_SETSID, -1, &out);
        read_reports(c, out);
        char *args[] = { (char *) "forker", NULL };
        spawn_helper(c, args, EXIT_SPAWN_SETSID, -1, &out);
        read_reports(c, out);
        pid_t f = pid_of(c, 'F')->pid;
        size_t recs_before = c->n_recs;
        int n = unit_group_signal(c->group, SIGTERM, false);
        assert_true(n >= 2 + CROWD_CHILDREN);
        wait_unit_empty(c, "a process forked during the scan escaped SIGTERM (the passes stopped too early)");
        assert_killed_by(c, f, SIGTERM, "the forking main process");
        /* Every death was SIGTERM, or the exit 0 of a short-lived child. */
        drain_zombies(c);
        int termed = 0;
        for (size_t i = recs_before; i < c->n_recs; i++) {
                const struct exit_reason *r = &c->recs[i].reason;
                if (r->kind == EXIT_REASON_KILLED && r->status == SIGTERM)
                        termed++;
                else if (!(r->kind == EXIT_REASON_EXITED && r->status == 0))
                        fail_msg("pid %d died of %s %d, not SIGTERM", (int) c->recs[i].pid,
                                 r->kind == EXIT_REASON_KILLED ? "signal" : "exit code", r->status);
        }
        if (termed > n)
                fail_msg("%d processes died of SIGTERM but the scan counted %d", termed, n);
        print_message("forker: %d processes signalled, %d died of SIGTERM\n", n, termed);
        expect_outsider_alive(c, o);
}

/* Leftovers of a "previous tend": processes placed into NAME.service before
 * the module opened it are killed before the start, and counted. */
static void test_leftovers(void **state) {
        struct ctx *c = *state;
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/demo.service", c->dir);
        char *args[] = { (char *) "tree", NULL };
        helper_in_new_cgroup(c, dir, args);

        open_tree(c);
        const struct helper_pid *o = start_outsider(c);
        open_unit(c, "demo");
        assert_int_equal(unit_group_populated(c->group), 1);
        assert_int_equal(unit_group_kill_leftovers(c->group, WAIT_MS), 3);
        assert_int_equal(unit_group_populated(c->group), 0);
        assert_killed_by(c, pid_of(c, 'H')->pid, SIGKILL, "a leftover");
        assert_killed_by(c, pid_of(c, 'A')->pid, SIGKILL, "a leftover");
        assert_killed_by(c, pid_of(c, 'C')->pid, SIGKILL, "a leftover setsid grandchild");
        assert_int_equal(unit_group_kill_leftovers(c->group, WAIT_MS), 0);
        expect_outsider_alive(c, o);
}

/* FALLBACK: kill(-pgid) while the leader is unreaped reaches its group; a
 * process that left it (setsid) survives, the documented limit. */
static void test_fallback_killpg(void **state) {
        struct ctx *c = *state;
        assert_int_equal(cgroup_tree_open_fallback("test", &c->tree), 0);
        open_unit(c, "demo");
        const struct helper_pid *o = start_outsider(c);
        int out;
        char *args[] = { (char *) "pgroup", (char *) "stay", NULL };
        struct exit_process *p = spawn_helper(c, args, EXIT_SPAWN_SETSID, -1, &out);
        read_reports(c, out);
        unit_group_set_leader(c->group, exit_process_pid(p));
        const struct helper_pid *h = pid_of(c, 'H'), *a = pid_of(c, 'A'), *b = pid_of(c, 'B');
        assert_int_equal(h->pid, exit_process_pid(p));
        assert_int_equal(unit_group_contains(c->group, a->pid), 1);
        assert_int_equal(unit_group_contains(c->group, b->pid), 0);
        assert_int_equal(unit_group_contains(c->group, o->pid), 0);
        assert_int_equal(unit_group_populated(c->group), 1);

        /* A "leader" that leads no group (not started with setsid) is refused:
         * kill(-pid) would reach nothing meant. */
        unit_group_set_leader(c->group, a->pid);
        assert_int_equal(unit_group_signal(c->group, SIGTERM, true), -EPERM);
        unit_group_set_leader(c->group, h->pid);

        assert_int_equal(unit_group_signal(c->group, SIGTERM, true), 0);
        assert_killed_by(c, h->pid, SIGTERM, "the leader");
        assert_killed_by(c, a->pid, SIGTERM, "the leader's group member");
        if (!still_alive(c, b))
                fail_msg("the process that left the group (setsid) was signalled: the fallback reached beyond the group");
        expect_outsider_alive(c, o);
        assert_int_equal(unit_group_populated(c->group), 0);
}

/* FALLBACK, QA19 M1: the groups of a unit's earlier leaders that still
 * have members are the unit's (populated, signalled), at most
 * UNIT_GROUP_MAX_OLD: of 10 runs each leaving a member (A) behind, the 8
 * before the last are kept with the last's, the first is forgotten. */
static void test_fallback_old_groups(void **state) {
        struct ctx *c = *state;
        assert_int_equal(cgroup_tree_open_fallback("test", &c->tree), 0);
        open_unit(c, "demo");
        pid_t leaders[10], kept[UNIT_GROUP_MAX_OLD + 1];
        const struct helper_pid *left[10];
        for (int i = 0; i < 10; i++) {
                int out;
                char *args[] = { (char *) "pgroup", (char *) "exit", NULL };
                size_t first = c->n_pids;
                struct exit_process *p = spawn_helper(c, args, EXIT_SPAWN_SETSID, -1, &out);
                read_reports(c, out);
                leaders[i] = exit_process_pid(p);
                unit_group_set_leader(c->group, leaders[i]);
                (void) wait_reaped(c, leaders[i], "a run's leader");
                for (size_t j = first; j < c->n_pids; j++)
                        if (c->pids[j].label == 'A')
                                left[i] = &c->pids[j];
        }
        assert_int_equal(unit_group_old_groups(c->group, kept, ELEMENTSOF(kept)), UNIT_GROUP_MAX_OLD);
        for (int i = 0; i < UNIT_GROUP_MAX_OLD; i++)
                assert_int_equal(kept[i], leaders[i + 1]);
        /* leaders[0]'s group was dropped with members: shutdown must not say 0 (QA19B M2) */
        assert_int_equal(unit_group_forgotten(c->group), 1);
        assert_int_equal(unit_group_populated(c->group), 1);
        assert_int_equal(unit_group_signal(c->group, SIGTERM, false), 0);
        for (int i = 1; i < 10; i++)
                assert_killed_by(c, left[i]->pid, SIGTERM, "an earlier run's member");
        if (!still_alive(c, left[0]))
                fail_msg("the forgotten ninth earlier group was signalled: the bound is not what is documented");
        assert_int_equal(unit_group_old_groups(c->group, kept, ELEMENTSOF(kept)), 0);
        assert_int_equal(unit_group_populated(c->group), 0);
}

/* FALLBACK after the leader was reaped: kill(-pgid) reaches the group's
 * members (the group id is not reused while the group lives), no /proc scan
 * (issue 19: a scan per unit made stopping N units cost N × processes). */
static void test_fallback_scan(void **state) {
        struct ctx *c = *state;
        assert_int_equal(cgroup_tree_open_fallback("test", &c->tree), 0);
        open_unit(c, "demo");
        const struct helper_pid *o = start_outsider(c);
        int out;
        char *args[] = { (char *) "pgroup", (char *) "exit", NULL };
        struct exit_process *p = spawn_helper(c, args, EXIT_SPAWN_SETSID, -1, &out);
        read_reports(c, out);
        unit_group_set_leader(c->group, exit_process_pid(p));
        struct exit_reason r = wait_reaped(c, exit_process_pid(p), "the leader");
        assert_int_equal(r.kind, EXIT_REASON_EXITED);
        assert_int_equal(r.status, 0);
        const struct helper_pid *a = pid_of(c, 'A'), *b = pid_of(c, 'B');
        assert_int_equal(unit_group_populated(c->group), 1);

        /* Only A: B left the group, the outsider was never in it (0: the
         * kernel does not count what kill(-pgid) reached). */
        assert_int_equal(unit_group_signal(c->group, SIGTERM, false), 0);
        assert_killed_by(c, a->pid, SIGTERM, "the reaped leader's group member");
        if (!still_alive(c, b))
                fail_msg("the process that left the group (setsid) was signalled");
        expect_outsider_alive(c, o);
        assert_int_equal(unit_group_populated(c->group), 0);
        assert_int_equal(unit_group_signal(c->group, SIGTERM, false), 0);
}

/* ======================================================================== */

static int skip_test(const char *fmt, ...) _printf_(1, 2);
static int skip_test(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        printf("skip: ");
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
        return 77;
}

/* Finds this process's cgroup and the cgroup2 mount; 0, or 77 after "skip: …". */
static int privileged_prerequisites(void) {
        if (geteuid() != 0)
                return skip_test("needs root (it creates cgroups and moves processes)");
        static char mi[1 << 16], cg[1 << 12];
        if (read_file("/proc/self/mountinfo", mi, sizeof mi) < 0 || read_file("/proc/self/cgroup", cg, sizeof cg) < 0)
                return skip_test("cannot read /proc/self");
        struct cgroup_location loc = { 0 };
        int r = cgroup_locate(mi, cg, &loc);
        if (r < 0)
                return skip_test("no usable cgroup2 mount (%s)", strerror(-r));
        snprintf(cg_mount, sizeof cg_mount, "%s", loc.mount);
        snprintf(orig_dir, sizeof orig_dir, "%s", loc.dir);
        cgroup_location_done(&loc);
        char probe[4200], kill_file[4300];
        snprintf(probe, sizeof probe, "%s/tend-test-probe-XXXXXX", cg_mount);
        if (!mkdtemp(probe))
                return skip_test("cgroup2 at %s is not writable (%s)", cg_mount, strerror(errno));
        snprintf(kill_file, sizeof kill_file, "%s/cgroup.kill", probe);
        bool has_kill = access(kill_file, F_OK) == 0;
        (void) rmdir(probe);
        if (!has_kill)
                return skip_test("the kernel lacks cgroup.kill (Linux < 5.14)");
        return 0;
}

int main(int argc, char **argv) {
        if (argc >= 2 && streq(argv[1], "--helper"))
                return helper(argc, argv);
        ssize_t k = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
        if (k <= 0)
                return skip_test("cannot read /proc/self/exe");
        self_exe[k] = '\0';

        if (argc == 2 && streq(argv[1], "parse")) {
                const struct CMUnitTest tests[] = {
                        cmocka_unit_test(test_parse_pure_v2),
                        cmocka_unit_test(test_parse_hybrid),
                        cmocka_unit_test(test_parse_container),
                        cmocka_unit_test(test_parse_no_cgroup2),
                        cmocka_unit_test(test_parse_outside_root),
                        cmocka_unit_test(test_parse_mountinfo_details),
                        cmocka_unit_test(test_parse_self),
                        cmocka_unit_test(test_fallback_api),
                };
                return cmocka_run_group_tests_name("cgroup-parse", tests, NULL, NULL);
        }
        if (argc != 2 || !streq(argv[1], "privileged")) {
                fprintf(stderr, "usage: %s parse|privileged\n", argv[0]);
                return 2;
        }
        int r = privileged_prerequisites();
        if (r != 0)
                return r;
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_discovery_and_unit_cgroup, setup, teardown),
                cmocka_unit_test_setup_teardown(test_discovery_unwritable, setup, teardown),
                cmocka_unit_test_setup_teardown(test_leaf_enter_and_leave, setup, teardown),
                cmocka_unit_test_setup_teardown(test_leaf_leftover, setup, teardown),
                cmocka_unit_test_setup_teardown(test_leaf_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_spawn_vfork, setup, teardown),
                cmocka_unit_test_setup_teardown(test_spawn_clone3, setup_clone3, teardown),
                cmocka_unit_test_setup_teardown(spawn_into_cgroup_exits, setup, teardown),
                cmocka_unit_test_setup_teardown(spawn_into_cgroup_exits, setup_clone3, teardown),
                cmocka_unit_test_setup_teardown(spawn_into_cgroup_exits, setup_fork, teardown),
                cmocka_unit_test_setup_teardown(test_spawn_fork, setup_fork, teardown),
                cmocka_unit_test_setup_teardown(test_populated_events, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cgroup_kill_tree, setup, teardown),
                cmocka_unit_test_setup_teardown(test_signal_scan_tree, setup, teardown),
                cmocka_unit_test_setup_teardown(test_signal_scan_forks, setup, teardown),
                cmocka_unit_test_setup_teardown(test_leftovers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fallback_killpg, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fallback_scan, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fallback_old_groups, setup, teardown),
        };
        return cmocka_run_group_tests_name("cgroup-privileged", tests, NULL, NULL);
}
