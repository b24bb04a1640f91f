/* SPDX-License-Identifier: MIT */
/*
 * Sandboxing (supervisor/exec/sandbox.h; issue 9): the values of the keys as the
 * unit-file parser takes them (limits, capabilities, errno names, system-call
 * filters and their groups), with the exact messages and FILE:LINE; the plan
 * built before a spawn, against a scripted tend (struct sandbox_self: root,
 * or unprivileged), with the exact errors and messages; and the hook run in a
 * real child (the privileged steps only as root). Every test ends with the fd
 * count it started with and no child left.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>
#include <linux/capability.h>

#include <cmocka.h>

#include "libexit.h"
#include "log.h"
#include "sandbox.h"
#include "sandbox-child.h"
#include "unit-exec.h"
#include "unit-file.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Fixture: captured messages, the fd count                                  */
/* ------------------------------------------------------------------------ */

#define MAX_MSGS 32
static struct {
        int level;
        char text[1024];
} msgs[MAX_MSGS];
static size_t n_msgs;
static int fds_at_start;

static void sink(int level, const char *msg, void *userdata) {
        if (n_msgs < MAX_MSGS) {
                msgs[n_msgs].level = level;
                snprintf(msgs[n_msgs].text, sizeof msgs[n_msgs].text, "%s", msg);
        }
        n_msgs++;
}


static int setup(void **state) {
        n_msgs = 0;
        log_set_sink(sink, NULL);
        log_set_max_level(LOG_INFO);
        fds_at_start = count_fds();
        return 0;
}

static int teardown(void **state) {
        log_set_sink(NULL, NULL);
        log_set_max_level(LOG_WARNING);
        if (count_fds() != fds_at_start) {
                fprintf(stderr, "fd leak: %d fds open, %d at start\n", count_fds(), fds_at_start);
                return -1;
        }
        if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
                fprintf(stderr, "a child was left\n");
                return -1;
        }
        return 0;
}

/* Asserts the captured messages, then forgets them: pairs (level, text), ended by -1. */
static void expect_msgs(int level, ...) {
        va_list ap;
        va_start(ap, level);
        size_t i = 0;
        for (; level >= 0; i++, level = va_arg(ap, int)) {
                const char *text = va_arg(ap, const char *);
                if (i >= n_msgs)
                        fail_msg("message %zu missing: want \"%s\"", i, text);
                if (msgs[i].level != level || strcmp(msgs[i].text, text) != 0)
                        fail_msg("message %zu: got [%d] \"%s\"\n                want [%d] \"%s\"", i, msgs[i].level,
                                 msgs[i].text, level, text);
        }
        va_end(ap);
        if (n_msgs != i)
                fail_msg("%zu unexpected messages, the first: [%d] \"%s\"", n_msgs - i, msgs[i].level, msgs[i].text);
        n_msgs = 0;
}

#define EXEC "[Service]\nExecStart=/bin/true\n"

static struct unit_file *parse_ok(const char *text) {
        struct unit_file *u = NULL;
        char *message = NULL;
        int r = unit_file_parse("a.service", "test/a.service", text, strlen(text), &u, &message);
        if (r < 0)
                fail_msg("refused (%d): %s\n--- unit:\n%s", r, message ? message : "(no message)", text);
        return u;
}

/* Parses text, which must fail with error and message (after "test/a.service"), logged as an error. */
static void parse_fails(const char *text, int error, const char *message) {
        struct unit_file *u = NULL;
        char *got = NULL, want[512];
        snprintf(want, sizeof want, "test/a.service%s", message);
        n_msgs = 0;
        int r = unit_file_parse("a.service", "test/a.service", text, strlen(text), &u, &got);
        if (r != error || !got || strcmp(got, want) != 0)
                fail_msg("%s\n  got %d \"%s\"\n  want %d \"%s\"", text, r, got ? got : "(null)", error, want);
        assert_null(u);
        bool logged = false;
        for (size_t i = 0; i < n_msgs && i < MAX_MSGS; i++)
                logged |= msgs[i].level == LOG_ERR && strcmp(msgs[i].text, want) == 0;
        if (!logged)
                fail_msg("\"%s\" was not logged as an error", want);
        free(got);
        n_msgs = 0;
}

static bool filter_has(const struct sandbox_syscall_filter *f, const char *name, int *ret_action) {
        struct sandbox_syscall_filter probe = {}; /* name's number, as the filter resolves it */
        assert_int_equal(sandbox_syscall_filter_add(&probe, name, false), 0);
        assert_int_equal(probe.n, 1);
        int nr = probe.syscalls[0].nr;
        sandbox_syscall_filter_clear(&probe);
        for (size_t i = 0; i < f->n; i++)
                if (f->syscalls[i].nr == nr) {
                        if (ret_action)
                                *ret_action = f->syscalls[i].action;
                        return true;
                }
        return false;
}

/* ------------------------------------------------------------------------ */
/* Values                                                                    */
/* ------------------------------------------------------------------------ */

static void test_limit_values(void **state) {
        static const struct {
                int resource;
                const char *value;
                int error;
                rlim_t soft, hard;
        } table[] = {
                { RLIMIT_NOFILE, "1024", 0, 1024, 1024 },
                { RLIMIT_NOFILE, "1024:4096", 0, 1024, 4096 },
                { RLIMIT_NOFILE, "infinity", 0, RLIM_INFINITY, RLIM_INFINITY },
                { RLIMIT_NOFILE, "100:infinity", 0, 100, RLIM_INFINITY },
                { RLIMIT_NOFILE, "5:3", -EDOM, 0, 0 },
                { RLIMIT_NOFILE, "infinity:3", -EDOM, 0, 0 },
                { RLIMIT_NOFILE, "1K", -EINVAL, 0, 0 }, /* a count, not a size */
                { RLIMIT_NOFILE, "x", -EINVAL, 0, 0 },
                { RLIMIT_NOFILE, "", -EINVAL, 0, 0 },
                { RLIMIT_NOFILE, "1:", -EINVAL, 0, 0 },
                { RLIMIT_NOFILE, "-1", -EINVAL, 0, 0 },
                { RLIMIT_NOFILE, "99999999999999999999", -ERANGE, 0, 0 },
                { RLIMIT_CORE, "0", 0, 0, 0 },
                { RLIMIT_CORE, "64K", 0, 65536, 65536 },
                { RLIMIT_CORE, "1G:2G", 0, 1ull << 30, 2ull << 30 },
                { RLIMIT_CORE, "16E", -ERANGE, 0, 0 },
                { RLIMIT_CORE, "1X", -EINVAL, 0, 0 },
                { RLIMIT_CPU, "90", 0, 90, 90 },
                { RLIMIT_CPU, "1min", 0, 60, 60 },
                { RLIMIT_CPU, "500ms", 0, 1, 1 }, /* rounded up to whole seconds */
                { RLIMIT_CPU, "1h:2h", 0, 3600, 7200 },
                { RLIMIT_RTTIME, "1000", 0, 1000, 1000 }, /* µs */
                { RLIMIT_RTTIME, "1s", 0, 1000000, 1000000 },
                { RLIMIT_NICE, "+0", 0, 20, 20 },
                { RLIMIT_NICE, "-20", 0, 40, 40 },
                { RLIMIT_NICE, "+19", 0, 1, 1 },
                { RLIMIT_NICE, "10", 0, 10, 10 },
                { RLIMIT_NICE, "41", -ERANGE, 0, 0 },
                { RLIMIT_NICE, "+20", -ERANGE, 0, 0 },
                { RLIMIT_NICE, "-21", -ERANGE, 0, 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                struct rlimit rl = { 7, 7 };
                int r = sandbox_parse_limit(table[i].resource, table[i].value, &rl);
                if (r != table[i].error)
                        fail_msg("case %zu \"%s\": got %d, want %d", i, table[i].value, r, table[i].error);
                if (r == 0 && (rl.rlim_cur != table[i].soft || rl.rlim_max != table[i].hard))
                        fail_msg("case %zu \"%s\": got %llu:%llu", i, table[i].value, (unsigned long long) rl.rlim_cur,
                                 (unsigned long long) rl.rlim_max);
                if (r < 0 && (rl.rlim_cur != 7 || rl.rlim_max != 7))
                        fail_msg("case %zu: *ret written on failure", i);
        }
        assert_int_equal(sandbox_rlimit_from_key("LimitNOFILE"), RLIMIT_NOFILE);
        assert_int_equal(sandbox_rlimit_from_key("LimitRTTIME"), RLIMIT_RTTIME);
        assert_int_equal(sandbox_rlimit_from_key("LimitBANANAS"), -EINVAL);
        assert_string_equal(sandbox_rlimit_key(RLIMIT_CORE), "LimitCORE");
        assert_null(sandbox_rlimit_key(SANDBOX_RLIMIT_MAX));
}

static void test_capability_and_errno_names(void **state) {
        assert_int_equal(sandbox_capability_from_name("CAP_NET_BIND_SERVICE"), CAP_NET_BIND_SERVICE);
        assert_int_equal(sandbox_capability_from_name("cap_sys_admin"), CAP_SYS_ADMIN);
        assert_int_equal(sandbox_capability_from_name("12"), 12);
        assert_int_equal(sandbox_capability_from_name("CAP_BANANA"), -EINVAL);
        assert_int_equal(sandbox_capability_from_name("all"), -EINVAL);
        assert_int_equal(sandbox_capability_from_name(""), -EINVAL);
        assert_int_equal(sandbox_capability_from_name("64"), -EINVAL);
        char name[64];
        sandbox_capability_name(CAP_NET_BIND_SERVICE, name, sizeof name);
        assert_string_equal(name, "CAP_NET_BIND_SERVICE");
        uint64_t all = sandbox_capability_all();
        assert_true(all & (1ull << CAP_CHOWN));
        assert_true(all & (1ull << CAP_SYS_ADMIN));

        assert_int_equal(sandbox_errno_from_name("EPERM"), EPERM);
        assert_int_equal(sandbox_errno_from_name("EACCES"), EACCES);
        assert_int_equal(sandbox_errno_from_name("EUCLEAN"), EUCLEAN);
        assert_int_equal(sandbox_errno_from_name("1"), 1);
        assert_int_equal(sandbox_errno_from_name("4095"), 4095);
        assert_int_equal(sandbox_errno_from_name("kill"), 0);
        assert_int_equal(sandbox_errno_from_name("0"), -EINVAL);
        assert_int_equal(sandbox_errno_from_name("4096"), -EINVAL);
        assert_int_equal(sandbox_errno_from_name("EBANANA"), -EINVAL);
        assert_int_equal(sandbox_errno_from_name("eperm"), -EINVAL);
}

static void test_syscall_filter_semantics(void **state) {
        struct sandbox_syscall_filter f = {};
        int action;
        /* The first word decides: an allow list; the other kind removes. */
        assert_int_equal(sandbox_syscall_filter_add(&f, "@basic-io", false), 0);
        assert_true(f.set && f.allow_list);
        assert_true(filter_has(&f, "write", NULL));
        assert_int_equal(sandbox_syscall_filter_add(&f, "write", true), 0);
        assert_false(filter_has(&f, "write", NULL));
        assert_true(filter_has(&f, "read", NULL));
        assert_int_equal(sandbox_syscall_filter_add(&f, "chroot:EPERM", false), -EDOM); /* allow lists take no errno */
        sandbox_syscall_filter_clear(&f);
        assert_false(f.set);

        /* A deny list, with an errno of its own for one call. */
        assert_int_equal(sandbox_syscall_filter_add(&f, "@privileged", true), 0);
        assert_false(f.allow_list);
        assert_true(filter_has(&f, "chroot", &action));
        assert_int_equal(action, SANDBOX_ACTION_DEFAULT);
        assert_true(filter_has(&f, "setuid", NULL));
        assert_true(filter_has(&f, "chown", NULL));  /* @chown, nested */
        assert_true(filter_has(&f, "reboot", NULL)); /* @reboot, nested */
        assert_false(filter_has(&f, "read", NULL));
        assert_int_equal(sandbox_syscall_filter_add(&f, "chroot:EACCES", true), 0);
        assert_true(filter_has(&f, "chroot", &action));
        assert_int_equal(action, EACCES);
        assert_int_equal(sandbox_syscall_filter_add(&f, "reboot:kill", true), 0);
        assert_true(filter_has(&f, "reboot", &action));
        assert_int_equal(action, 0);
        assert_int_equal(sandbox_syscall_filter_add(&f, "chown", false), 0); /* the other kind removes */
        assert_false(filter_has(&f, "chown", NULL));
        for (size_t i = 1; i < f.n; i++)
                assert_true(f.syscalls[i - 1].nr < f.syscalls[i].nr); /* sorted, no duplicates */

        /* Errors: nothing changes. */
        size_t n = f.n;
        assert_int_equal(sandbox_syscall_filter_add(&f, "nosuchcall", true), -EINVAL);
        assert_int_equal(sandbox_syscall_filter_add(&f, "@nosuchgroup", true), -ENOENT);
        assert_int_equal(sandbox_syscall_filter_add(&f, "chroot:EBANANA", true), -EBADMSG);
        assert_int_equal(sandbox_syscall_filter_add(&f, ":EPERM", true), -EINVAL);
        assert_int_equal(f.n, n);
        char exempt[64];
        sandbox_syscall_filter_exempt(&f, exempt, sizeof exempt);
        assert_string_equal(exempt, "");
        assert_int_equal(sandbox_syscall_filter_add(&f, "@signal", true), 0);
        assert_int_equal(sandbox_syscall_filter_add(&f, "execve", true), 0);
        sandbox_syscall_filter_exempt(&f, exempt, sizeof exempt);
        assert_string_equal(exempt, "execve rt_sigprocmask");
        sandbox_syscall_filter_clear(&f);

        /* @system-service: @basic-io and @network-io in, @privileged's own calls out. */
        assert_int_equal(sandbox_syscall_filter_add(&f, "@system-service", false), 0);
        assert_true(filter_has(&f, "read", NULL));
        assert_true(filter_has(&f, "socket", NULL));
        assert_true(filter_has(&f, "clone", NULL));
        assert_false(filter_has(&f, "chroot", NULL));
        assert_false(filter_has(&f, "reboot", NULL));
        assert_false(filter_has(&f, "mount", NULL));
        sandbox_syscall_filter_clear(&f);

        /* Every group tend lists exists, the SPEC's six among them. */
        static const char *const spec[] = { "@system-service", "@basic-io", "@file-system", "@network-io",
                                            "@process", "@privileged" };
        for (size_t i = 0; i < ELEMENTSOF(spec); i++)
                assert_non_null(sandbox_syscall_group(spec[i]));
        for (const char *const *g = sandbox_syscall_group_names; *g; g++) {
                assert_int_equal(sandbox_syscall_filter_add(&f, *g, false), 0);
                sandbox_syscall_filter_clear(&f);
        }
        assert_null(sandbox_syscall_group("@known")); /* systemd's, not tend's */
}

/* ------------------------------------------------------------------------ */
/* The keys in unit files                                                    */
/* ------------------------------------------------------------------------ */

static void test_unit_file_keys(void **state) {
        struct unit_file *u = parse_ok(EXEC);
        assert_null(u->sandbox); /* held out of line only when a key is set */
        assert_null(unit_file_sandbox(u)->user);
        assert_null(unit_file_sandbox(u)->group);
        assert_null(unit_file_sandbox(u)->supplementary_groups);
        assert_int_equal(unit_file_sandbox(u)->umask, 0022);
        for (int i = 0; i < SANDBOX_RLIMIT_MAX; i++)
                assert_false(unit_file_sandbox(u)->limits[i].set);
        assert_false(unit_file_sandbox(u)->no_new_privileges);
        assert_true(unit_file_sandbox(u)->capability_bounding_set == UINT64_MAX);
        assert_true(unit_file_sandbox(u)->ambient_capabilities == 0);
        assert_false(unit_file_sandbox(u)->syscall_filter.set);
        assert_int_equal(unit_file_sandbox(u)->syscall_error_number, 0);
        assert_false(u->working_directory_home);
        unit_file_free(u);

        u = parse_ok(EXEC "User=nobody\nGroup=%i4\nSupplementaryGroups=adm 4242\nSupplementaryGroups=users\n"
                          "UMask=0077\nLimitNOFILE=100:200\nLimitCORE=infinity\nNoNewPrivileges=yes\n"
                          "CapabilityBoundingSet=CAP_NET_BIND_SERVICE CAP_CHOWN\n"
                          "AmbientCapabilities=CAP_NET_BIND_SERVICE\nSystemCallFilter=@system-service\n"
                          "SystemCallFilter=~@privileged\nSystemCallErrorNumber=EPERM\nWorkingDirectory=-~\n");
        n_msgs = 0;
        assert_non_null(u->sandbox);
        assert_string_equal(unit_file_sandbox(u)->user, "nobody");
        assert_string_equal(unit_file_sandbox(u)->group, "4"); /* specifiers resolved: %i is empty here */
        assert_string_equal(unit_file_sandbox(u)->supplementary_groups[0], "adm");
        assert_string_equal(unit_file_sandbox(u)->supplementary_groups[1], "4242");
        assert_string_equal(unit_file_sandbox(u)->supplementary_groups[2], "users");
        assert_null(unit_file_sandbox(u)->supplementary_groups[3]);
        assert_int_equal(unit_file_sandbox(u)->umask, 0077);
        assert_true(unit_file_sandbox(u)->limits[RLIMIT_NOFILE].set);
        assert_int_equal(unit_file_sandbox(u)->limits[RLIMIT_NOFILE].rl.rlim_cur, 100);
        assert_int_equal(unit_file_sandbox(u)->limits[RLIMIT_NOFILE].rl.rlim_max, 200);
        assert_true(unit_file_sandbox(u)->limits[RLIMIT_CORE].rl.rlim_max == RLIM_INFINITY);
        assert_true(unit_file_sandbox(u)->no_new_privileges);
        assert_true(unit_file_sandbox(u)->capability_bounding_set == ((1ull << CAP_NET_BIND_SERVICE) | (1ull << CAP_CHOWN)));
        assert_true(unit_file_sandbox(u)->ambient_capabilities == 1ull << CAP_NET_BIND_SERVICE);
        assert_true(unit_file_sandbox(u)->syscall_filter.set && unit_file_sandbox(u)->syscall_filter.allow_list);
        assert_true(filter_has(&unit_file_sandbox(u)->syscall_filter, "read", NULL));
        assert_false(filter_has(&unit_file_sandbox(u)->syscall_filter, "chown", NULL)); /* removed by the deny line */
        assert_int_equal(unit_file_sandbox(u)->syscall_error_number, EPERM);
        assert_true(u->working_directory_home && u->working_directory_missing_ok);
        assert_null(u->working_directory);
        unit_file_free(u);

        /* Empty assignments reset; as in systemd 252, not Limit…= and UMask= (kept, with a warning: parsefix). */
        u = parse_ok(EXEC "User=nobody\nUser=\nSupplementaryGroups=adm\nSupplementaryGroups=\nLimitNOFILE=5\n"
                          "LimitNOFILE=\nSystemCallFilter=@basic-io\nSystemCallFilter=\nSystemCallErrorNumber=EPERM\n"
                          "SystemCallErrorNumber=\nUMask=0077\nUMask=\nWorkingDirectory=~\nWorkingDirectory=\n");
        assert_null(unit_file_sandbox(u)->user);
        assert_null(unit_file_sandbox(u)->supplementary_groups);
        assert_true(unit_file_sandbox(u)->limits[RLIMIT_NOFILE].set);
        assert_false(unit_file_sandbox(u)->syscall_filter.set);
        assert_int_equal(unit_file_sandbox(u)->syscall_error_number, 0);
        assert_int_equal(unit_file_sandbox(u)->umask, 0077);
        assert_false(u->working_directory_home);
        unit_file_free(u);
        u = parse_ok(EXEC "WorkingDirectory=~\nWorkingDirectory=/srv\n");
        assert_false(u->working_directory_home);
        assert_string_equal(u->working_directory, "/srv");
        unit_file_free(u);
        n_msgs = 0;
}

static void test_capability_merging(void **state) {
        /* systemd.exec(5)'s examples: OR, then AND NOT with "~". */
        const uint64_t A = 1ull << CAP_CHOWN, B = 1ull << CAP_KILL, C = 1ull << CAP_NET_RAW;
        struct unit_file *u = parse_ok(EXEC "CapabilityBoundingSet=CAP_CHOWN CAP_KILL\n"
                                            "CapabilityBoundingSet=CAP_KILL CAP_NET_RAW\n");
        assert_true(unit_file_sandbox(u)->capability_bounding_set == (A | B | C));
        unit_file_free(u);
        u = parse_ok(EXEC "CapabilityBoundingSet=CAP_CHOWN CAP_KILL\nCapabilityBoundingSet=~CAP_KILL CAP_NET_RAW\n");
        assert_true(unit_file_sandbox(u)->capability_bounding_set == A);
        unit_file_free(u);
        u = parse_ok(EXEC "CapabilityBoundingSet=~CAP_KILL\n"); /* the first, inverted: all but */
        assert_true(unit_file_sandbox(u)->capability_bounding_set == ~B);
        unit_file_free(u);
        u = parse_ok(EXEC "CapabilityBoundingSet=CAP_KILL\nCapabilityBoundingSet=\n"); /* empty: the empty set */
        assert_true(unit_file_sandbox(u)->capability_bounding_set == 0);
        unit_file_free(u);
        u = parse_ok(EXEC "CapabilityBoundingSet=CAP_KILL\nCapabilityBoundingSet=~\n"); /* "~": all again */
        assert_true(unit_file_sandbox(u)->capability_bounding_set == UINT64_MAX);
        unit_file_free(u);
        u = parse_ok(EXEC "AmbientCapabilities=CAP_CHOWN\nAmbientCapabilities=CAP_KILL\n");
        assert_true(unit_file_sandbox(u)->ambient_capabilities == (A | B));
        unit_file_free(u);
        u = parse_ok(EXEC "AmbientCapabilities=CAP_CHOWN\nAmbientCapabilities=\n");
        assert_true(unit_file_sandbox(u)->ambient_capabilities == 0);
        unit_file_free(u);
        n_msgs = 0;
}

static void test_bad_values(void **state) {
        static const struct {
                const char *text;
                int error;
                const char *message;
        } table[] = {
                { EXEC "User=a b\n", -EINVAL, ":3: User=: invalid user name \"a b\"" },
                { EXEC "User=a:b\n", -EINVAL, ":3: User=: invalid user name \"a:b\"" },
                { EXEC "Group=a/b\n", -EINVAL, ":3: Group=: invalid group name \"a/b\"" },
                { EXEC "SupplementaryGroups=adm a:b\n", -EINVAL,
                  ":3: SupplementaryGroups=: invalid group name \"a:b\"" },
                { EXEC "UMask=0888\n", -EINVAL, ":3: UMask=: invalid value \"0888\"" },
                { EXEC "UMask=077777\n", -EINVAL, ":3: UMask=: invalid value \"077777\"" },
                { EXEC "LimitNOFILE=lots\n", -EINVAL, ":3: LimitNOFILE=: invalid value \"lots\"" },
                { EXEC "LimitNOFILE=10:5\n", -EINVAL,
                  ":3: LimitNOFILE=: the soft limit is above the hard limit in \"10:5\"" },
                { EXEC "LimitNICE=+40\n", -EINVAL, ":3: LimitNICE=: out of range: \"+40\"" },
                { EXEC "NoNewPrivileges=perhaps\n", -EINVAL, ":3: NoNewPrivileges=: invalid boolean \"perhaps\"" },
                { EXEC "CapabilityBoundingSet=CAP_CHOWN CAP_BANANA\n", -EINVAL,
                  ":3: CapabilityBoundingSet=: unknown capability \"CAP_BANANA\"" },
                { EXEC "AmbientCapabilities=~CAP_BANANA\n", -EINVAL,
                  ":3: AmbientCapabilities=: unknown capability \"CAP_BANANA\"" },
                { EXEC "CapabilityBoundingSet=CAP_CHOWN\nAmbientCapabilities=CAP_NET_BIND_SERVICE\n", -EINVAL,
                  ":4: AmbientCapabilities=: CAP_NET_BIND_SERVICE is not in CapabilityBoundingSet=" },
                { EXEC "SystemCallFilter=read nosuchcall\n", -EINVAL,
                  ":3: SystemCallFilter=: unknown system call \"nosuchcall\"" },
                { EXEC "SystemCallFilter=~@nosuchgroup\n", -EINVAL,
                  ":3: SystemCallFilter=: unknown system call group \"@nosuchgroup\"" },
                { EXEC "SystemCallFilter=~chroot:EBANANA\n", -EINVAL,
                  ":3: SystemCallFilter=: invalid error number in \"chroot:EBANANA\"" },
                { EXEC "SystemCallFilter=chroot:EPERM\n", -EINVAL,
                  ":3: SystemCallFilter=: an error number (\"chroot:EPERM\") is only allowed in a deny list (\"~\")" },
                { EXEC "SystemCallErrorNumber=EBANANA\n", -EINVAL,
                  ":3: SystemCallErrorNumber=: invalid error number \"EBANANA\"" },
                { EXEC "SystemCallErrorNumber=0\n", -EINVAL, ":3: SystemCallErrorNumber=: invalid error number \"0\"" },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                parse_fails(table[i].text, table[i].error, table[i].message);

        /* A deny list that names what tend itself needs: loaded, with a warning. */
        struct unit_file *u = parse_ok(EXEC "SystemCallFilter=~@signal execve\n");
        expect_msgs(LOG_WARNING, "test/a.service:3: SystemCallFilter=: execve rt_sigprocmask stay allowed: tend needs "
                                 "them to start the program", -1);
        unit_file_free(u);
}

/* ------------------------------------------------------------------------ */
/* Plans                                                                     */
/* ------------------------------------------------------------------------ */

static struct sandbox_self root_self(void) {
        struct sandbox_self s = { .uid = 0, .gid = 0 };
        s.effective = s.permitted = s.bounding = sandbox_capability_all();
        for (int i = 0; i < SANDBOX_RLIMIT_MAX; i++)
                assert_int_equal(getrlimit(i, &s.limits[i]), 0);
        return s;
}

static struct sandbox_self unprivileged_self(uid_t uid, gid_t gid) {
        struct sandbox_self s = root_self();
        s.uid = uid;
        s.gid = gid;
        s.effective = s.permitted = 0;
        return s;
}

/* The command prefixes the next plan() is for (UNIT_COMMAND_*). */
static unsigned plan_flags;

/* Builds the plan of text's unit for self: its error, and on success *ret. */
static int plan(const char *text, const struct sandbox_self *self, struct sandbox_plan **ret,
                struct unit_file **ret_unit) {
        struct unit_file *u = parse_ok(text);
        n_msgs = 0;
        int r = sandbox_plan_new("a.service", u, plan_flags, self, ret);
        if (ret_unit)
                *ret_unit = u;
        else
                unit_file_free(u);
        return r;
}

static bool has_group(const struct sandbox_plan *p, gid_t g) {
        for (size_t i = 0; i < p->n_groups; i++)
                if (p->groups[i] == g)
                        return true;
        return false;
}

static void test_plan_nothing_to_do(void **state) {
        struct sandbox_self self = root_self();
        struct sandbox_plan *p = NULL;
        struct unit_file *u = NULL;
        assert_int_equal(plan(EXEC "Environment=A=1\nUMask=0077\nWorkingDirectory=/srv\n", &self, &p, &u), 0);
        assert_false(p->hook); /* libexit's fast path stays */
        assert_ptr_equal(p->environment, u->environment); /* borrowed */
        assert_string_equal(p->working_directory, "/srv");
        struct exit_spawn_attr a = { .size = sizeof a };
        sandbox_plan_apply(p, &a);
        assert_null(a.pre_exec);
        sandbox_plan_free(p);
        unit_file_free(u);
        assert_null(sandbox_plan_free(NULL));
        expect_msgs(-1);
}

static void test_plan_users(void **state) {
        struct sandbox_self self = root_self();
        struct sandbox_plan *p = NULL;
        struct passwd *nobody = getpwnam("nobody");
        if (!nobody)
                skip();
        uid_t nuid = nobody->pw_uid;
        gid_t ngid = nobody->pw_gid;
        char home[256], shell[256], text[512];
        snprintf(home, sizeof home, "HOME=%s", nobody->pw_dir);
        snprintf(shell, sizeof shell, "SHELL=%s", nobody->pw_shell);

        assert_int_equal(plan(EXEC "User=nobody\nEnvironment=A=1 HOME=/override\nWorkingDirectory=~\n", &self, &p, NULL),
                         0);
        assert_true(p->hook && p->set_uid && p->set_gid && p->set_groups);
        assert_int_equal(p->uid, nuid);
        assert_int_equal(p->gid, ngid);
        assert_true(has_group(p, ngid));
        assert_int_equal(p->gid_stage, SANDBOX_STAGE_SETGID_USER);
        assert_int_equal(p->groups_stage, SANDBOX_STAGE_SETGROUPS_USER);
        assert_string_equal(p->environment[0], "USER=nobody");
        assert_string_equal(p->environment[1], "LOGNAME=nobody");
        assert_string_equal(p->environment[2], home);
        assert_string_equal(p->environment[3], shell);
        assert_string_equal(p->environment[4], "A=1");
        assert_string_equal(p->environment[5], "HOME=/override"); /* Environment= wins (unit_build_environment) */
        assert_null(p->environment[6]);
        assert_string_equal(p->working_directory, nobody->pw_dir);
        assert_false(p->keep_caps || p->ambient_again || p->no_new_privs || p->seccomp_filter);
        sandbox_plan_free(p);

        /* Numeric ids; Group= replaces the primary group; SupplementaryGroups= adds. */
        snprintf(text, sizeof text, EXEC "User=%u\nGroup=0\nSupplementaryGroups=4242\n", (unsigned) nuid);
        assert_int_equal(plan(text, &self, &p, NULL), 0);
        assert_int_equal(p->uid, nuid);
        assert_int_equal(p->gid, 0);
        assert_true(has_group(p, 4242));
        assert_int_equal(p->gid_stage, SANDBOX_STAGE_SETGID);
        assert_int_equal(p->groups_stage, SANDBOX_STAGE_SETGROUPS);
        assert_string_equal(p->environment[0], "USER=nobody");
        sandbox_plan_free(p);

        /* A uid without an entry: its number is its name, its own number its group. */
        uid_t free_uid = 4242;
        while (getpwuid(free_uid))
                free_uid++;
        snprintf(text, sizeof text, EXEC "User=%u\n", (unsigned) free_uid);
        assert_int_equal(plan(text, &self, &p, NULL), 0);
        assert_int_equal(p->uid, free_uid);
        assert_int_equal(p->gid, free_uid);
        assert_int_equal(p->n_groups, 1);
        snprintf(text, sizeof text, "USER=%u", (unsigned) free_uid);
        assert_string_equal(p->environment[0], text);
        assert_string_equal(p->environment[2], "HOME=/");
        sandbox_plan_free(p);

        /* Group= alone: no user change, tend's groups kept (as systemd). */
        assert_int_equal(plan(EXEC "Group=0\n", &self, &p, NULL), 0);
        assert_true(p->set_gid && !p->set_uid && !p->set_groups);
        sandbox_plan_free(p);

        /* WorkingDirectory=~ without User=: tend's own user's home. */
        struct passwd *root = getpwuid(0);
        assert_int_equal(plan(EXEC "WorkingDirectory=~\n", &self, &p, NULL), 0);
        assert_string_equal(p->working_directory, root ? root->pw_dir : "/");
        assert_false(p->hook);
        sandbox_plan_free(p);
        expect_msgs(-1);

        /* Unknown names: each start fails, -ESRCH, the message names the key and the name. */
        assert_int_equal(plan(EXEC "User=tend-no-such-user\n", &self, &p, NULL), -ESRCH);
        expect_msgs(LOG_ERR, "a.service: User=tend-no-such-user: no such user", -1);
        assert_int_equal(plan(EXEC "Group=tend-no-such-group\n", &self, &p, NULL), -ESRCH);
        expect_msgs(LOG_ERR, "a.service: Group=tend-no-such-group: no such group", -1);
        assert_int_equal(plan(EXEC "User=nobody\nSupplementaryGroups=tend-no-such-group\n", &self, &p, NULL), -ESRCH);
        expect_msgs(LOG_ERR, "a.service: SupplementaryGroups=tend-no-such-group: no such group", -1);
}

static void test_plan_capabilities_and_filter(void **state) {
        struct sandbox_self self = root_self();
        struct sandbox_plan *p = NULL;
        const uint64_t nbs = 1ull << CAP_NET_BIND_SERVICE;
        if (!getpwnam("nobody"))
                skip();

        assert_int_equal(plan(EXEC "CapabilityBoundingSet=CAP_CHOWN\n", &self, &p, NULL), 0);
        assert_true(p->bounding_drop == (self.bounding & ~(1ull << CAP_CHOWN)));
        assert_true(p->hook);
        sandbox_plan_free(p);

        /* Ambient across a uid change: keep-caps, then raised again. */
        assert_int_equal(plan(EXEC "User=nobody\nAmbientCapabilities=CAP_NET_BIND_SERVICE\n", &self, &p, NULL), 0);
        assert_true(p->ambient == nbs && p->keep_caps && p->ambient_again);
        assert_true(p->caps_before[2] == (uint32_t) nbs);               /* inheritable = ambient */
        assert_true(p->caps_before[0] == (uint32_t) self.effective);    /* effective kept */
        assert_true(p->caps_after[0] == (uint32_t) nbs && p->caps_after[1] == (uint32_t) nbs &&
                    p->caps_after[2] == (uint32_t) nbs);
        sandbox_plan_free(p);
        /* As root: raised once, nothing clears it. */
        assert_int_equal(plan(EXEC "AmbientCapabilities=CAP_NET_BIND_SERVICE\n", &self, &p, NULL), 0);
        assert_true(p->ambient == nbs && !p->keep_caps && !p->ambient_again);
        sandbox_plan_free(p);

        /* SystemCallFilter=: a program exported; NoNewPrivileges= implied without CAP_SYS_ADMIN. */
        assert_int_equal(plan(EXEC "SystemCallFilter=@system-service\n", &self, &p, NULL), 0);
        assert_non_null(p->seccomp_filter);
        assert_true(p->seccomp_len > 10);
        assert_false(p->no_new_privs); /* root keeps CAP_SYS_ADMIN */
        sandbox_plan_free(p);
        assert_int_equal(plan(EXEC "User=nobody\nSystemCallFilter=~@privileged\n", &self, &p, NULL), 0);
        assert_true(p->no_new_privs);
        sandbox_plan_free(p);
        assert_int_equal(plan(EXEC "User=nobody\nAmbientCapabilities=CAP_SYS_ADMIN\nSystemCallFilter=~@mount\n", &self,
                              &p, NULL), 0);
        assert_false(p->no_new_privs);
        sandbox_plan_free(p);
        assert_int_equal(plan(EXEC "NoNewPrivileges=yes\n", &self, &p, NULL), 0);
        assert_true(p->no_new_privs && p->hook && !p->seccomp_filter);
        sandbox_plan_free(p);

        /* LimitNOFILE=infinity is the kernel's nr_open (setrlimit refuses more). */
        assert_int_equal(plan(EXEC "LimitNOFILE=64:infinity\nLimitCORE=0\n", &self, &p, NULL), 0);
        assert_int_equal(p->n_limits, 2);
        assert_int_equal(p->limits[0].resource, RLIMIT_CORE);
        assert_int_equal(p->limits[1].resource, RLIMIT_NOFILE);
        assert_int_equal(p->limits[1].rl.rlim_cur, 64);
        assert_true(p->limits[1].rl.rlim_max != RLIM_INFINITY && p->limits[1].rl.rlim_max >= 1024);
        sandbox_plan_free(p);
        expect_msgs(-1);
}

/* SPEC §1: an unprivileged tend refuses, before the fork, what it cannot do. */
static void test_plan_unprivileged(void **state) {
        struct passwd *nobody = getpwnam("nobody");
        if (!nobody)
                skip();
        struct sandbox_self self = unprivileged_self(nobody->pw_uid, nobody->pw_gid);
        struct sandbox_plan *p = NULL;
        static const struct {
                const char *text, *message;
        } table[] = {
                { EXEC "User=root\n", "a.service: User= needs privileges tend lacks (EPERM)" },
                { EXEC "Group=0\n", "a.service: Group= needs privileges tend lacks (EPERM)" },
                { EXEC "SupplementaryGroups=0\n",
                  "a.service: SupplementaryGroups= needs privileges tend lacks (EPERM)" },
                { EXEC "CapabilityBoundingSet=CAP_CHOWN\n",
                  "a.service: CapabilityBoundingSet= needs privileges tend lacks (EPERM)" },
                { EXEC "AmbientCapabilities=CAP_NET_BIND_SERVICE\n",
                  "a.service: AmbientCapabilities= needs privileges tend lacks (EPERM)" },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                assert_int_equal(plan(table[i].text, &self, &p, NULL), -EPERM);
                expect_msgs(LOG_ERR, table[i].message, -1);
        }
        /* A hard limit above tend's own. */
        char text[256];
        self.limits[RLIMIT_NOFILE].rlim_max = 4096;
        snprintf(text, sizeof text, EXEC "LimitNOFILE=1024:8192\n");
        /* Not refused (issue 16): the child sets the closest value it may (systemd's setrlimit_closest). */
        assert_int_equal(plan(text, &self, &p, NULL), 0);
        assert_int_equal(p->n_limits, 1);
        assert_int_equal(p->limits[0].rl.rlim_max, 8192);
        sandbox_plan_free(p);
        /* Lowering is fine. */
        assert_int_equal(plan(EXEC "LimitNOFILE=512:2048\n", &self, &p, NULL), 0);
        sandbox_plan_free(p);

        /* What an unprivileged tend can do: its own user, a filter (with NoNewPrivileges=). */
        assert_int_equal(plan(EXEC "User=nobody\nSystemCallFilter=~@privileged\n", &self, &p, NULL), 0);
        assert_false(p->set_uid || p->set_gid || p->set_groups);
        assert_true(p->no_new_privs && p->seccomp_filter);
        assert_string_equal(p->environment[0], "USER=nobody");
        sandbox_plan_free(p);
        self.bounding = 1ull << CAP_CHOWN; /* nothing left to drop */
        assert_int_equal(plan(EXEC "CapabilityBoundingSet=CAP_CHOWN CAP_KILL\n", &self, &p, NULL), 0);
        assert_true(p->bounding_drop == 0 && !p->hook);
        sandbox_plan_free(p);
        expect_msgs(-1);
}

/* ------------------------------------------------------------------------ */
/* The hook, in a real child                                                 */
/* ------------------------------------------------------------------------ */

enum as { AS_SELF, AS_UNPRIVILEGED, AS_RESOURCE };

/* Runs the hook of text's plan in a child, then check() there; the child's
 * wait status. The plan is made for this process's credentials, without
 * any capability, or claiming CAP_SYS_RESOURCE (the child then finds out).
 * *ret_error, *ret_stage: the hook's failure, if any. */
static int run_hook(const char *text, enum as as, int (*check)(void), int *ret_error, int *ret_stage) {
        struct sandbox_self self;
        assert_int_equal(sandbox_self_get(&self), 0);
        if (as == AS_UNPRIVILEGED)
                self.effective = self.permitted = 0;
        if (as == AS_RESOURCE)
                self.effective |= 1ull << CAP_SYS_RESOURCE;
        struct sandbox_plan *p = NULL;
        struct unit_file *u = NULL; /* outlives the plan: its seccomp program is the file's (cost17) */
        int k = plan(text, &self, &p, &u);
        if (k < 0)
                fail_msg("no plan (%d): %s", k, n_msgs ? msgs[0].text : "(no message)");
        int status = sandbox_hook_in_child(p, check, ret_error, ret_stage);
        sandbox_plan_free(p);
        unit_file_free(u);
        return status;
}

static int check_limits_nnp(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur != 64 || rl.rlim_max != 128)
                return 1;
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
                return 2;
        return 0;
}

static struct rlimit hard_before;

static int check_nofile_closest(void) {
        struct rlimit rl;
        return getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur != hard_before.rlim_max ||
               rl.rlim_max != hard_before.rlim_max;
}

static int check_process_keys(void) {
        cpu_set_t set;
        char buf[16] = {};
        errno = 0;
        if (getpriority(PRIO_PROCESS, 0) != 7 || errno)
                return 1;
        if (sched_getaffinity(0, sizeof set, &set) < 0 || CPU_COUNT(&set) != 1 || !CPU_ISSET(0, &set))
                return 2;
        if (syscall(SYS_ioprio_get, 1, 0) != 3 << 13)
                return 3;
        int fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read(fd, buf, sizeof buf - 1) <= 0 || atoi(buf) != 500)
                return 4;
        close(fd);
        return 0;
}

static int check_chroot_eperm(void) {
        if (chroot("/") == 0 || errno != EPERM)
                return 1;
        return prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2 ? 0 : 2;
}

static int check_chroot_killed(void) {
        (void) !chroot("/");
        return 3; /* not reached: SIGSYS */
}

static int check_nobody(void) {
        struct passwd *n = getpwnam("nobody");
        gid_t groups[8];
        int ng = getgroups(8, groups);
        if (!n || getuid() != n->pw_uid || geteuid() != n->pw_uid || getgid() != n->pw_gid)
                return 1;
        if (ng < 1)
                return 2;
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2];
        if (syscall(SYS_capget, &h, d) < 0 || d[0].effective != 1u << CAP_NET_BIND_SERVICE || d[1].effective)
                return 3;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_NET_BIND_SERVICE, 0, 0) != 1)
                return 4;
        if (prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) != 0)
                return 5;
        return 0;
}

static void test_hook_in_child(void **state) {
        int error, stage, status;
        status = run_hook(EXEC "LimitNOFILE=64:128\nNoNewPrivileges=yes\n", AS_UNPRIVILEGED, check_limits_nnp, &error,
                          &stage);
        assert_int_equal(error, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        status = run_hook(EXEC "SystemCallFilter=~@privileged\nSystemCallErrorNumber=EPERM\n", AS_UNPRIVILEGED,
                          check_chroot_eperm, &error, &stage);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        status = run_hook(EXEC "SystemCallFilter=~@privileged\n", AS_UNPRIVILEGED, check_chroot_killed, &error, &stage);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS);

        /* A failing step: its stage names the key; the child stops there, before the exec. */
        status = run_hook(EXEC "CPUAffinity=1023\n", AS_SELF, check_limits_nnp, &error, &stage); /* no such CPU */
        assert_int_equal(error, -EINVAL);
        assert_int_equal(stage, EXIT_STAGE_HOOK + SANDBOX_STAGE_AFFINITY);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 127);

        /* A limit above what even root may set (nr_open): the closest value, the current hard limit. */
        char text[128];
        getrlimit(RLIMIT_NOFILE, &hard_before);
        snprintf(text, sizeof text, EXEC "LimitNOFILE=%llu\n", 1ull << 40);
        status = run_hook(text, AS_RESOURCE, check_nofile_closest, &error, &stage);
        assert_int_equal(error, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        /* The process keys, each read back by the child. */
        status = run_hook(EXEC "Nice=7\nCPUAffinity=0\nIOSchedulingClass=idle\nOOMScoreAdjust=500\n", AS_SELF,
                          check_process_keys, &error, &stage);
        assert_int_equal(error, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("the child's process keys: check %d", WEXITSTATUS(status));

        if (getuid() != 0 || !getpwnam("nobody"))
                return; /* the rest changes credentials: root only */
        status = run_hook(EXEC "User=nobody\nCapabilityBoundingSet=CAP_NET_BIND_SERVICE\n"
                               "AmbientCapabilities=CAP_NET_BIND_SERVICE\n", AS_SELF, check_nobody, &error, &stage);
        assert_int_equal(error, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("the child's view after User=nobody + ambient: check %d", WEXITSTATUS(status));
}

/* exec (issue 16): the command prefixes, parsed and planned. */
static void test_command_prefixes(void **state) {
        static const struct {
                const char *word;
                unsigned flags;
        } table[] = {
                { "+/bin/true", UNIT_COMMAND_FULL_PRIVILEGES },
                { "!/bin/true", UNIT_COMMAND_NO_SETUID },
                { "!!/bin/true", UNIT_COMMAND_AMBIENT_MAGIC },
                { "-+/bin/true", UNIT_COMMAND_FULL_PRIVILEGES | UNIT_COMMAND_IGNORE_FAILURE },
                { ":-!!/bin/true", UNIT_COMMAND_AMBIENT_MAGIC | UNIT_COMMAND_IGNORE_FAILURE | UNIT_COMMAND_NO_ENV_EXPAND },
                { "@!-/bin/true x", UNIT_COMMAND_NO_SETUID | UNIT_COMMAND_IGNORE_FAILURE },
                { "!-!/bin/true", UNIT_COMMAND_AMBIENT_MAGIC | UNIT_COMMAND_IGNORE_FAILURE },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                char text[256];
                snprintf(text, sizeof text, "[Service]\nExecStart=%s\n", table[i].word);
                struct unit_file *u = parse_ok(text);
                assert_int_equal(u->exec_start.commands[0].flags, table[i].flags);
                assert_string_equal(u->exec_start.commands[0].path, "/bin/true");
                unit_file_free(u);
        }
        parse_fails("[Service]\nExecStart=+!/bin/true\n", -EINVAL, ":2: ExecStart=: neither an absolute path nor a file name: \"!/bin/true\"");
        parse_fails("[Service]\nExecStart=!!!/bin/true\n", -EINVAL, ":2: ExecStart=: neither an absolute path nor a file name: \"!/bin/true\"");

        struct sandbox_self self = root_self();
        struct sandbox_plan *p = NULL;
        const char *text = EXEC "User=nobody\nNoNewPrivileges=yes\nCapabilityBoundingSet=CAP_CHOWN\nLimitCORE=0\n";
        plan_flags = UNIT_COMMAND_FULL_PRIVILEGES; /* '+': nothing of the sandbox but the limits */
        assert_int_equal(plan(text, &self, &p, NULL), 0);
        assert_false(p->set_uid || p->set_gid || p->set_groups || p->no_new_privs || p->bounding_drop);
        assert_int_equal(p->n_limits, 1);
        assert_string_equal(p->environment[0], "USER=nobody"); /* User='s environment still (systemd) */
        sandbox_plan_free(p);
        plan_flags = UNIT_COMMAND_NO_SETUID; /* '!': the rest of the sandbox stays */
        assert_int_equal(plan(text, &self, &p, NULL), 0);
        assert_false(p->set_uid || p->set_gid || p->set_groups);
        assert_true(p->no_new_privs && p->bounding_drop);
        sandbox_plan_free(p);
        plan_flags = UNIT_COMMAND_AMBIENT_MAGIC; /* '!!' on a kernel with ambient capabilities: no effect */
        assert_int_equal(plan(text, &self, &p, NULL), 0);
        assert_true(p->set_uid && p->set_gid && p->no_new_privs);
        sandbox_plan_free(p);
        plan_flags = 0;
        expect_msgs(-1);
}

/* exec (issue 16): the directories' and process keys' values. */
static void test_process_keys(void **state) {
        struct unit_file *u = parse_ok(EXEC "RuntimeDirectory=sshd a/b\nRuntimeDirectory=c\nRuntimeDirectoryMode=0700\n"
                                            "StateDirectory=s\nRuntimeDirectoryPreserve=restart\nNice=-5\n"
                                            "OOMScoreAdjust=-900\nIOSchedulingPriority=6\nCPUSchedulingPolicy=fifo\n"
                                            "CPUAffinity=0-2 5\nCPUAffinity=7\nStandardInput=tty-force\nTTYPath=tty3\n"
                                            "StandardOutput=tty\n");
        const struct unit_exec_keys *e = unit_file_exec(u);
        assert_string_equal(e->directories[UNIT_EXEC_DIR_RUNTIME][0], "sshd");
        assert_string_equal(e->directories[UNIT_EXEC_DIR_RUNTIME][1], "a/b");
        assert_string_equal(e->directories[UNIT_EXEC_DIR_RUNTIME][2], "c");
        assert_int_equal(e->directory_modes[UNIT_EXEC_DIR_RUNTIME], 0700);
        assert_int_equal(e->directory_modes[UNIT_EXEC_DIR_STATE], 0755);
        assert_int_equal(e->runtime_directory_preserve, UNIT_PRESERVE_RESTART);
        assert_true(e->nice_set && e->nice == -5 && e->oom_score_adjust == -900);
        assert_true(e->io_set && e->io_class == 2 && e->io_priority == 6); /* a priority alone: best-effort */
        assert_int_equal(e->cpu_sched_priority, 1); /* fifo's lowest */
        assert_int_equal(e->cpu_affinity[0], 0x7 | 1 << 5 | 1 << 7);
        assert_int_equal(e->standard_input, UNIT_INPUT_TTY_FORCE);
        assert_string_equal(e->tty_path, "/dev/tty3");
        assert_int_equal(u->standard_output.kind, UNIT_OUTPUT_TTY);
        unit_file_free(u);
        u = parse_ok(EXEC);
        assert_ptr_equal(unit_file_exec(u), &unit_exec_defaults);
        unit_file_free(u);
        parse_fails(EXEC "RuntimeDirectory=../etc\n", -EINVAL, ":3: RuntimeDirectory=: not a relative path without \"..\": \"../etc\"");
        parse_fails(EXEC "StateDirectory=/var/lib/x\n", -EINVAL, ":3: StateDirectory=: not a relative path without \"..\": \"/var/lib/x\"");
        parse_fails(EXEC "LogsDirectory=a/../b\n", -EINVAL, ":3: LogsDirectory=: not a relative path without \"..\": \"a/../b\"");
        parse_fails(EXEC "Nice=20\n", -EINVAL, ":3: Nice=: out of range: \"20\"");
        parse_fails(EXEC "OOMScoreAdjust=-1001\n", -EINVAL, ":3: OOMScoreAdjust=: out of range: \"-1001\"");
        parse_fails(EXEC "CPUAffinity=3-1\n", -EINVAL, ":3: CPUAffinity=: invalid value \"3-1\"");
        parse_fails(EXEC "RuntimeDirectoryMode=999\n", -EINVAL, ":3: RuntimeDirectoryMode=: invalid value \"999\"");
        parse_fails(EXEC "StandardInput=socket\n", -EOPNOTSUPP, ":3: StandardInput=\"socket\" is not supported (null, tty, tty-force, tty-fail, data, file:PATH are)");
        expect_msgs(-1);
}

static void test_stage_messages(void **state) {
        const char *key, *step;
        assert_true(sandbox_stage_describe(EXIT_STAGE_HOOK + SANDBOX_STAGE_SETUID, &key, &step));
        assert_string_equal(key, "User=");
        assert_string_equal(step, "setresuid");
        assert_true(sandbox_stage_describe(EXIT_STAGE_HOOK + SANDBOX_STAGE_LIMIT + RLIMIT_CORE, &key, &step));
        assert_string_equal(key, "LimitCORE=");
        assert_true(sandbox_stage_describe(EXIT_STAGE_HOOK + SANDBOX_STAGE_SECCOMP, &key, NULL));
        assert_string_equal(key, "SystemCallFilter=");
        assert_false(sandbox_stage_describe(EXIT_STAGE_CHDIR, &key, &step));
        assert_false(sandbox_stage_describe(EXIT_STAGE_HOOK, &key, &step));
        assert_false(sandbox_stage_describe(EXIT_STAGE_HOOK + _SANDBOX_STAGE_END, &key, &step));

        sandbox_log_exec_failure("a.service", -EPERM, EXIT_STAGE_HOOK + SANDBOX_STAGE_SETGROUPS);
        sandbox_log_exec_failure("a.service", -ENOENT, EXIT_STAGE_EXEC); /* not the hook's: nothing */
        sandbox_log_exec_failure("a.service", 0, EXIT_STAGE_HOOK + SANDBOX_STAGE_SETUID);
        expect_msgs(LOG_ERR, "a.service: SupplementaryGroups= setgroups failed: Operation not permitted (EPERM)", -1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_limit_values, setup, teardown),
                cmocka_unit_test_setup_teardown(test_capability_and_errno_names, setup, teardown),
                cmocka_unit_test_setup_teardown(test_syscall_filter_semantics, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unit_file_keys, setup, teardown),
                cmocka_unit_test_setup_teardown(test_capability_merging, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_values, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_nothing_to_do, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_users, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_capabilities_and_filter, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_unprivileged, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hook_in_child, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stage_messages, setup, teardown),
                cmocka_unit_test_setup_teardown(test_command_prefixes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_process_keys, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
