/* SPDX-License-Identifier: MIT */
/*
 * PID files (supervisor/exec/pid-file.h): the read, and the walk with
 * systemd's CHASE_SAFE rule — from an entry owned by root anything may
 * follow, from one owned by another user only that user's. The ownership
 * cases need root (chown to other users) and are skipped otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pid-file.h"

#define NOBODY 65534

static char tmp[64];

static void path_of(char *buf, size_t size, const char *name) {
        snprintf(buf, size, "%s/%s", tmp, name);
}

static void write_file(const char *name, const char *text, uid_t owner) {
        char p[256];
        path_of(p, sizeof p, name);
        FILE *f = fopen(p, "we");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        assert_int_equal(lchown(p, owner, owner), 0);
}

static int read_text(const char *text, pid_t *ret) {
        write_file("r.pid", text, getuid());
        char p[256];
        path_of(p, sizeof p, "r.pid");
        int fd = -1;
        uid_t uid;
        assert_int_equal(pid_file_open(p, true, &fd, &uid), 0);
        int k = pid_file_read(fd, ret);
        close(fd);
        return k;
}

static void test_read(void **state) {
        pid_t pid = 0;
        assert_int_equal(read_text("1234\n", &pid), 0);
        assert_int_equal(pid, 1234);
        assert_int_equal(read_text("  42 \nmore\n", &pid), 0);
        assert_int_equal(pid, 42);
        assert_int_equal(read_text("", &pid), -ENODATA); /* being written */
        assert_int_equal(read_text("\n", &pid), -ENODATA);
        assert_int_equal(read_text("12ab\n", &pid), -EINVAL);
        assert_int_equal(read_text("-5\n", &pid), -EINVAL);
        assert_int_equal(read_text("0\n", &pid), -EINVAL);
        assert_int_equal(read_text("1\n", &pid), 0); /* read: the manager refuses init, saying why */
        assert_int_equal(pid, 1);
        assert_int_equal(read_text("99999999999\n", &pid), -EINVAL);
}

static void test_unsafe_step(void **state) {
        assert_false(pid_file_unsafe_step(0, 1000));    /* root's entry leads anywhere */
        assert_false(pid_file_unsafe_step(1000, 1000)); /* within one user */
        assert_true(pid_file_unsafe_step(1000, 0));     /* a user's entry to root's */
        assert_true(pid_file_unsafe_step(1000, 1001));  /* to another user's */
}

static int open_at(const char *name, bool safe, uid_t *ret_uid) {
        char p[256];
        path_of(p, sizeof p, name);
        int fd = -1;
        int k = pid_file_open(p, safe, &fd, ret_uid);
        if (k == 0)
                close(fd);
        return k;
}

static void test_walk(void **state) {
        uid_t uid = 1;
        char p[256], q[256];
        write_file("plain.pid", "10\n", getuid());
        assert_int_equal(open_at("plain.pid", true, &uid), 0);
        assert_int_equal(uid, getuid());
        assert_int_equal(open_at("./plain.pid", true, &uid), 0);
        assert_int_equal(open_at("missing.pid", true, &uid), -ENOENT);
        assert_int_equal(pid_file_open("relative.pid", true, &(int) { -1 }, &uid), -EINVAL);
        path_of(p, sizeof p, "dir");
        assert_int_equal(mkdir(p, 0755), 0);
        assert_int_equal(open_at("dir", true, &uid), -EINVAL); /* not a regular file */
        path_of(p, sizeof p, "fifo");
        assert_int_equal(mkfifo(p, 0600), 0);
        assert_int_equal(open_at("fifo", true, &uid), -EINVAL); /* never opened: no blocking open */
        /* Symlinks, relative and absolute, are followed; a loop is not. */
        path_of(p, sizeof p, "rel.pid");
        assert_int_equal(symlink("plain.pid", p), 0);
        assert_int_equal(open_at("rel.pid", true, &uid), 0);
        path_of(p, sizeof p, "abs.pid");
        path_of(q, sizeof q, "plain.pid");
        assert_int_equal(symlink(q, p), 0);
        assert_int_equal(open_at("abs.pid", true, &uid), 0);
        path_of(p, sizeof p, "loop");
        assert_int_equal(symlink("loop", p), 0);
        assert_int_equal(open_at("loop", true, &uid), -ELOOP);
}

/* systemd's CHASE_SAFE: a user's directory may hold that user's entries
 * only; from root's anything. */
static void test_walk_owners(void **state) {
        if (geteuid() != 0)
                skip();
        uid_t uid = 1;
        char p[256], q[256];
        path_of(p, sizeof p, "nobodys");
        assert_int_equal(mkdir(p, 0755), 0);
        assert_int_equal(chown(p, NOBODY, NOBODY), 0);
        write_file("nobodys/own.pid", "10\n", NOBODY);
        assert_int_equal(open_at("nobodys/own.pid", true, &uid), 0);
        assert_int_equal(uid, NOBODY);
        write_file("nobodys/roots.pid", "10\n", 0);
        assert_int_equal(open_at("nobodys/roots.pid", true, &uid), -ENOLINK);
        assert_int_equal(open_at("nobodys/roots.pid", false, &uid), 0); /* the caller's relaxed retry */
        assert_int_equal(uid, 0);
        /* A symlink of another user in nobody's directory, to a root file. */
        write_file("target.pid", "10\n", 0);
        path_of(p, sizeof p, "nobodys/link.pid");
        path_of(q, sizeof q, "target.pid");
        assert_int_equal(symlink(q, p), 0);
        assert_int_equal(lchown(p, NOBODY - 1, NOBODY - 1), 0);
        assert_int_equal(open_at("nobodys/link.pid", true, &uid), -ENOLINK);
        /* The same symlink owned by nobody: a safe step, and the absolute
         * target starts again at the root. */
        assert_int_equal(lchown(p, NOBODY, NOBODY), 0);
        assert_int_equal(open_at("nobodys/link.pid", true, &uid), 0);
        assert_int_equal(uid, 0);
        /* A root directory may hold another user's symlink. */
        path_of(p, sizeof p, "users-link.pid");
        assert_int_equal(symlink(q, p), 0);
        assert_int_equal(lchown(p, NOBODY - 1, NOBODY - 1), 0);
        assert_int_equal(open_at("users-link.pid", true, &uid), 0);
}

static int setup(void **state) {
        snprintf(tmp, sizeof tmp, "/tmp/test-pid-file.XXXXXX");
        if (!mkdtemp(tmp))
                return -1;
        return chmod(tmp, 0755);
}

static int teardown(void **state) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_read, setup, teardown),
                cmocka_unit_test(test_unsafe_step),
                cmocka_unit_test_setup_teardown(test_walk, setup, teardown),
                cmocka_unit_test_setup_teardown(test_walk_owners, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
