/* SPDX-License-Identifier: MIT */
/*
 * ns: the file-system namespace keys (issue 17): their parsers
 * (lang/unit-file-namespace.c: values, errors with FILE:LINE, an empty
 * assignment resetting the key) and the plan exec/namespace.c computes before
 * the fork (the tables, the order, the merge, a refusal). The mounts
 * themselves are proved from inside real units: tests/integration/test_hardening_fs.py.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <linux/capability.h>

#include <cmocka.h>

#include "log.h"
#include "namespace.h"
#include "sandbox.h"
#include "unit-file-namespace.h"
#include "unit-file.h"

static char last[2048];
static int n_errors;

static void sink(int level, const char *msg, void *userdata) {
        (void) userdata;
        if (level <= LOG_ERR) {
                n_errors++;
                snprintf(last, sizeof last, "%s", msg);
        }
}

static int setup(void **state) {
        (void) state;
        n_errors = 0;
        last[0] = 0;
        log_set_sink(sink, NULL);
        return 0;
}

static int teardown(void **state) {
        (void) state;
        log_set_sink(NULL, NULL);
        return 0;
}

static struct unit_file *parse(const char *text, int *ret_error) {
        struct unit_file *u = NULL;
        char *message = NULL;
        int r = unit_file_parse("a.service", "test/a.service", text, strlen(text), &u, &message);
        free(message);
        if (ret_error)
                *ret_error = r;
        return u;
}

static struct unit_file *parse_ok(const char *text) {
        int r;
        struct unit_file *u = parse(text, &r);
        if (!u)
                fail_msg("refused (%d): %s\n--- unit:\n%s", r, last, text);
        return u;
}

/* The unit is refused, with message (exactly) as the first error. */
static void parse_fails(const char *text, const char *message) {
        int r;
        struct unit_file *u = parse(text, &r);
        if (u) {
                unit_file_free(u);
                fail_msg("accepted:\n%s", text);
        }
        assert_int_equal(r, -EINVAL);
        assert_string_equal(last, message);
}

#define EXEC "[Service]\nExecStart=/bin/true\n"

static void assert_list(char **l, const char *const *want) {
        size_t i = 0;
        for (; want[i]; i++) {
                if (!l || !l[i])
                        fail_msg("entry %zu missing: want \"%s\"", i, want[i]);
                assert_string_equal(l[i], want[i]);
        }
        if (l && l[i])
                fail_msg("unexpected entry %zu: \"%s\"", i, l[i]);
}

static void test_defaults(void **state) {
        (void) state;
        struct unit_file *u = parse_ok(EXEC);
        const struct unit_namespace_keys *n = unit_file_namespace(u);
        assert_false(unit_namespace_wanted(n));
        assert_null(unit_file_sandbox(u)->ns); /* out of line: nothing allocated (SPEC §8) */
        unit_file_free(u);
}

static void test_values(void **state) {
        (void) state;
        struct unit_file *u = parse_ok(EXEC "ProtectSystem=strict\nProtectHome=read-only\nPrivateTmp=yes\n"
                                            "PrivateDevices=true\nProtectKernelTunables=1\nProtectControlGroups=on\n"
                                            "ProtectProc=invisible\nProcSubset=pid\nPrivateMounts=yes\n"
                                            "ReadWritePaths=/var/lib//a/ -/b +/c\nReadWritePaths=-+/d\n"
                                            "ReadOnlyPaths=/usr\nInaccessiblePaths=-/x\nExecPaths=/e\nNoExecPaths=/\n"
                                            "TemporaryFileSystem=/t:ro,size=1m /u\n"
                                            "BindPaths=/s -/s2:/d2:norbind\nBindReadOnlyPaths=/r:/r2:rbind\n");
        const struct unit_namespace_keys *n = unit_file_namespace(u);
        assert_int_equal(n->protect_system, UNIT_PROTECT_SYSTEM_STRICT);
        assert_int_equal(n->protect_home, UNIT_PROTECT_HOME_READ_ONLY);
        assert_int_equal(n->protect_proc, UNIT_PROTECT_PROC_INVISIBLE);
        assert_true(n->private_tmp && n->private_devices && n->protect_kernel_tunables && n->protect_control_groups &&
                    n->private_mounts && n->proc_subset_pid);
        assert_list(n->lists[UNIT_NS_READ_WRITE], (const char *[]) { "/var/lib/a", "-/b", "+/c", "-+/d", NULL });
        assert_list(n->lists[UNIT_NS_READ_ONLY], (const char *[]) { "/usr", NULL });
        assert_list(n->lists[UNIT_NS_INACCESSIBLE], (const char *[]) { "-/x", NULL });
        assert_list(n->lists[UNIT_NS_EXEC], (const char *[]) { "/e", NULL });
        assert_list(n->lists[UNIT_NS_NO_EXEC], (const char *[]) { "/", NULL });
        assert_list(n->lists[UNIT_NS_TEMPORARY], (const char *[]) { "/t:ro,size=1m", "/u", NULL });
        assert_list(n->lists[UNIT_NS_BIND], (const char *[]) { "/s", "-/s2:/d2:norbind", NULL });
        assert_list(n->lists[UNIT_NS_BIND_READ_ONLY], (const char *[]) { "/r:/r2:rbind", NULL });
        assert_true(unit_namespace_wanted(n));
        unit_file_free(u);
        u = parse_ok(EXEC "ProtectSystem=yes\nProtectHome=tmpfs\nProtectProc=ptraceable\n");
        n = unit_file_namespace(u);
        assert_int_equal(n->protect_system, UNIT_PROTECT_SYSTEM_YES);
        assert_int_equal(n->protect_home, UNIT_PROTECT_HOME_TMPFS);
        assert_int_equal(n->protect_proc, UNIT_PROTECT_PROC_PTRACEABLE);
        unit_file_free(u);
        u = parse_ok(EXEC "ProtectSystem=full\nProtectHome=no\nProtectProc=noaccess\n");
        assert_int_equal(unit_file_namespace(u)->protect_system, UNIT_PROTECT_SYSTEM_FULL);
        assert_int_equal(unit_file_namespace(u)->protect_proc, UNIT_PROTECT_PROC_NOACCESS);
        unit_file_free(u);
}

static void test_empty_resets(void **state) {
        (void) state;
        struct unit_file *u = parse_ok(EXEC "ProtectSystem=strict\nProtectSystem=\nPrivateTmp=yes\nPrivateTmp=\n"
                                            "ReadWritePaths=/a /b\nReadWritePaths=\nReadWritePaths=/c\n"
                                            "BindPaths=/x\nBindPaths=\nProtectProc=invisible\nProtectProc=\n"
                                            "ProcSubset=pid\nProcSubset=\n");
        const struct unit_namespace_keys *n = unit_file_namespace(u);
        /* parsefix: systemd 252 ignores an empty boolean or enum (the earlier value stays); lists reset */
        assert_int_equal(n->protect_system, UNIT_PROTECT_SYSTEM_STRICT);
        assert_true(n->private_tmp);
        assert_list(n->lists[UNIT_NS_READ_WRITE], (const char *[]) { "/c", NULL });
        assert_null(n->lists[UNIT_NS_BIND]);
        assert_int_equal(n->protect_proc, UNIT_PROTECT_PROC_INVISIBLE);
        assert_true(n->proc_subset_pid);
        unit_file_free(u);
}

static void test_errors(void **state) {
        (void) state;
        parse_fails(EXEC "ProtectSystem=maybe\n", "test/a.service:3: ProtectSystem=: invalid value \"maybe\"");
        parse_fails(EXEC "ProtectHome=strict\n", "test/a.service:3: ProtectHome=: invalid value \"strict\"");
        parse_fails(EXEC "PrivateTmp=disconnected\n", "test/a.service:3: PrivateTmp=: invalid value \"disconnected\"");
        parse_fails(EXEC "ProtectProc=hidden\n", "test/a.service:3: ProtectProc=: invalid value \"hidden\"");
        parse_fails(EXEC "ProcSubset=some\n", "test/a.service:3: ProcSubset=: invalid value \"some\"");
        parse_fails(EXEC "\nReadWritePaths=relative\n",
                    "test/a.service:4: ReadWritePaths=: not an absolute path without \"..\": \"relative\"");
        parse_fails(EXEC "ReadOnlyPaths=-/a/../b\n",
                    "test/a.service:3: ReadOnlyPaths=: not an absolute path without \"..\": \"-/a/../b\"");
        parse_fails(EXEC "TemporaryFileSystem=/t:bogus\n",
                    "test/a.service:3: TemporaryFileSystem=: unknown mount option \"bogus\"");
        parse_fails(EXEC "BindPaths=/a:b\n", "test/a.service:3: BindPaths=: not absolute paths without \"..\": \"/a:b\"");
        parse_fails(EXEC "BindReadOnlyPaths=/a:/b:recursive\n",
                    "test/a.service:3: BindReadOnlyPaths=: unknown option \"recursive\" (rbind or norbind)");
}

/* ---- the plan ---- */

static struct sandbox_self privileged(void) {
        struct sandbox_self s = { .effective = 1ull << CAP_SYS_ADMIN };
        return s;
}

static struct namespace_plan *plan_of(const char *text) {
        struct unit_file *u = parse_ok(text);
        struct namespace_plan *p = NULL;
        struct sandbox_self self = privileged();
        assert_int_equal(namespace_plan_new("a.service", u, &p), 0);
        assert_non_null(p);
        assert_int_equal(namespace_plan_finish("a.service", u, &self, &p), 0);
        unit_file_free(u);
        return p;
}

static const struct namespace_mount *find(const struct namespace_plan *p, const char *path) {
        for (size_t i = 0; i < p->n_mounts; i++)
                if (strcmp(p->mounts[i].path, path) == 0)
                        return &p->mounts[i];
        return NULL;
}

static void test_plan_tables(void **state) {
        (void) state;
        struct namespace_plan *p = plan_of(EXEC "ProtectSystem=strict\nReadWritePaths=-/nonexistent/w\n"
                                                "ReadOnlyPaths=/proc/sys\nProtectKernelTunables=yes\n"
                                                "ProtectControlGroups=yes\n");
        /* sorted by path: a parent before what is under it */
        for (size_t i = 1; i < p->n_mounts; i++)
                assert_true(strcmp(p->mounts[i - 1].path, p->mounts[i].path) != 0);
        assert_string_equal(p->mounts[0].path, "/");
        assert_int_equal(find(p, "/")->mode, NAMESPACE_READ_ONLY);
        assert_int_equal(find(p, "/sys")->mode, NAMESPACE_READ_ONLY); /* beats strict's implicit read-write */
        assert_int_equal(find(p, "/sys/fs/cgroup")->mode, NAMESPACE_READ_ONLY);
        assert_int_equal(find(p, "/proc")->mode, NAMESPACE_READ_WRITE_IMPLICIT);
        assert_int_equal(find(p, "/nonexistent/w")->mode, NAMESPACE_READ_WRITE);
        assert_true(find(p, "/nonexistent/w")->optional);
        assert_int_equal(find(p, "/proc/sys")->mode, NAMESPACE_READ_ONLY);
        assert_false(p->user_namespace);
        namespace_plan_free(p);
}

static void test_plan_merge(void **state) {
        (void) state;
        struct namespace_plan *p = plan_of(EXEC "InaccessiblePaths=-/var/x\nReadWritePaths=-/var/x/y -/var/x\n"
                                                "ProtectHome=yes\nPrivateTmp=yes\n");
        assert_int_equal(find(p, "/var/x")->mode, NAMESPACE_INACCESSIBLE); /* wins over read-write */
        assert_null(find(p, "/var/x/y"));                                  /* under an inaccessible path */
        assert_int_equal(find(p, "/home")->mode, NAMESPACE_INACCESSIBLE);
        assert_int_equal(find(p, "/tmp")->mode, NAMESPACE_PRIVATE_TMP);
        assert_non_null(p->inaccessible_dir);
        namespace_plan_free(p);
}

/* Two keys on one path: the kept entry takes the others' read-only, noexec, exec (systemd 252). */
static void test_plan_merge_flags(void **state) {
        (void) state;
        struct namespace_plan *p = plan_of(EXEC "PrivateTmp=yes\nReadOnlyPaths=/tmp\n"
                                                "BindPaths=/usr/share\nReadOnlyPaths=/usr/share\n"
                                                "TemporaryFileSystem=/srv:ro\nReadWritePaths=/srv\n"
                                                "NoExecPaths=/opt\nExecPaths=/opt\n");
        assert_int_equal(find(p, "/tmp")->mode, NAMESPACE_PRIVATE_TMP);
        assert_true(find(p, "/tmp")->read_only);
        assert_int_equal(find(p, "/usr/share")->mode, NAMESPACE_BIND_RECURSIVE);
        assert_true(find(p, "/usr/share")->read_only);
        assert_int_equal(find(p, "/srv")->mode, NAMESPACE_READ_WRITE); /* the tmpfs dropped, its ro kept */
        assert_true(find(p, "/srv")->read_only);
        assert_int_equal(find(p, "/opt")->mode, NAMESPACE_NO_EXEC);
        assert_true(find(p, "/opt")->exec); /* noexec still wins in the child */
        for (size_t i = 1; i < p->n_mounts; i++)
                assert_true(strcmp(p->mounts[i - 1].path, p->mounts[i].path) != 0);
        namespace_plan_free(p);
}

/* QA's M3: the plan resolves the paths before the fork; a directory swapped for a
 * symbolic link afterwards (here, deterministically, between the plan and the
 * child) must not redirect the mount: the child opens each path without
 * following a link and fails with ELOOP, never making the link's target
 * read-only in place of the path. Root only (a real mount namespace, in a child). */
static void test_child_follows_no_link(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        char base[] = "/run/tend-test-ns-XXXXXX", d[64], elsewhere[64], moved[64], text[256];
        assert_non_null(mkdtemp(base));
        snprintf(d, sizeof d, "%s/d", base);
        snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", base);
        snprintf(moved, sizeof moved, "%s/d.moved", base);
        assert_int_equal(mkdir(d, 0755), 0);
        assert_int_equal(mkdir(elsewhere, 0755), 0);
        snprintf(text, sizeof text, EXEC "ReadOnlyPaths=%s\n", d);
        struct namespace_plan *p = plan_of(text);
        assert_int_equal(rename(d, moved), 0); /* the race, won by the writer */
        assert_int_equal(symlink(elsewhere, d), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int key;
                int r = namespace_pre_exec(p, &key);
                struct statvfs sv;
                bool redirected = statvfs(elsewhere, &sv) == 0 && (sv.f_flag & ST_RDONLY);
                _exit(redirected ? 2 : r == -ELOOP ? 0 : 3);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        namespace_plan_free(p);
        unlink(d);
        rmdir(moved);
        rmdir(elsewhere);
        rmdir(base);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) == 2)
                fail_msg("the child followed the link: %s became read-only", elsewhere);
        assert_int_equal(WEXITSTATUS(status), 0);
}

/* QA's M4: /proc/self resolved before the fork is tend's own process: refused, naming the key. */
static void test_plan_proc_self(void **state) {
        (void) state;
        static const char *const units[] = { EXEC "InaccessiblePaths=/proc/self/environ\n",
                                             EXEC "ReadOnlyPaths=/proc/thread-self\n",
                                             EXEC "BindReadOnlyPaths=/proc/self/fd:/srv\n" };
        for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
                struct unit_file *u = parse_ok(units[i]);
                struct namespace_plan *p = NULL;
                struct sandbox_self self = privileged();
                last[0] = 0;
                assert_int_equal(namespace_plan_new("a.service", u, &p), 0);
                assert_int_equal(namespace_plan_finish("a.service", u, &self, &p), -EINVAL);
                assert_non_null(strstr(last, "a.service: "));
                assert_non_null(strstr(last, "(/proc/self), which tend would resolve to its own: not supported"));
                namespace_plan_free(p);
                unit_file_free(u);
        }
}

static void test_plan_missing(void **state) {
        (void) state;
        struct unit_file *u = parse_ok(EXEC "ReadOnlyPaths=/nonexistent-tend-test\n");
        struct namespace_plan *p = NULL;
        struct sandbox_self self = privileged();
        assert_int_equal(namespace_plan_new("a.service", u, &p), 0);
        assert_int_equal(namespace_plan_finish("a.service", u, &self, &p), -ENOENT);
        assert_string_equal(last, "a.service: ReadOnlyPaths=/nonexistent-tend-test: No such file or directory (ENOENT)");
        namespace_plan_free(p);
        unit_file_free(u);
}

static void test_plan_refused(void **state) {
        (void) state;
        /* No CAP_SYS_ADMIN: a user namespace at best, and no new /proc there: refused, naming the key. */
        struct unit_file *u = parse_ok(EXEC "ProtectProc=invisible\n");
        struct namespace_plan *p = NULL;
        struct sandbox_self self = {};
        assert_int_equal(namespace_plan_new("a.service", u, &p), 0);
        assert_int_equal(namespace_plan_finish("a.service", u, &self, &p), -EPERM);
        assert_non_null(strstr(last, "a.service: ProtectProc= cannot be applied ("));
        namespace_plan_free(p);
        unit_file_free(u);
}

static void test_plan_add(void **state) {
        (void) state;
        /* Another key's owner (ProtectKernelModules=) adds an implied entry to a unit without any of ns's keys. */
        struct namespace_plan *p = NULL;
        struct sandbox_self self = privileged();
        struct unit_file *u = parse_ok(EXEC);
        assert_int_equal(namespace_plan_new("a.service", u, &p), 0);
        assert_null(p);
        assert_int_equal(namespace_plan_add(&p, NAMESPACE_INACCESSIBLE, "/nonexistent-modules", true,
                                            "ProtectKernelModules="), 0);
        assert_int_equal(namespace_plan_finish("a.service", u, &self, &p), 0);
        assert_non_null(p);
        assert_int_equal(p->n_mounts, 1);
        assert_string_equal(namespace_key_name(17), "ProtectKernelModules=");
        namespace_plan_free(p);
        unit_file_free(u);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
                cmocka_unit_test_setup_teardown(test_values, setup, teardown),
                cmocka_unit_test_setup_teardown(test_empty_resets, setup, teardown),
                cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_tables, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_merge, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_merge_flags, setup, teardown),
                cmocka_unit_test_setup_teardown(test_child_follows_no_link, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_proc_self, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_missing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plan_add, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
