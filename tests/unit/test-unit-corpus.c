/* SPDX-License-Identifier: MIT */
/*
 * The Debian corpus's language (helper "corpus"): specifiers of the manager
 * and the machine (unit-specifiers.c; systemd.unit(5) "Specifiers" of systemd
 * 252), each one against the value read here independently, for a system
 * manager (root) and a user manager (a child that drops to nobody), %y/%Y
 * through a linked unit; the keys of unit-file-extra.c as parsed.
 */
#include <errno.h>
#include <signal.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "unit-exec.h"
#include "unit-file.h"
#include "unit-specifiers.h"

static char last_msg[1400];

static void sink(int level, const char *msg, void *userdata) {
        (void) level;
        (void) userdata;
        snprintf(last_msg, sizeof last_msg, "%s", msg);
}

/* The Description= of a unit whose Description= is text (name: a.service). */
static char *describe_as(const char *name, const char *text, int *ret) {
        char unit[4096];
        snprintf(unit, sizeof unit, "[Unit]\nDescription=%s\n[Service]\nExecStart=/bin/true\n", text);
        struct unit_file *u = NULL;
        *ret = unit_file_parse(name, "test/a.service", unit, strlen(unit), &u, NULL);
        if (*ret < 0)
                return NULL;
        char *d = strdup(u->description);
        unit_file_free(u);
        return d;
}

static void assert_describes(const char *text, const char *want) {
        int r;
        char *got = describe_as("a.service", text, &r);
        if (!got)
                fail_msg("%s: refused (%d): %s", text, r, last_msg);
        if (strcmp(got, want) != 0)
                fail_msg("%s: got \"%s\", want \"%s\"", text, got, want);
        free(got);
}

/* The first line of path, without its newline. */
static void first_line(const char *path, char *buf, size_t size) {
        FILE *f = fopen(path, "re");
        assert_non_null(f);
        assert_non_null(fgets(buf, (int) size, f));
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
}

/* A field of /etc/os-release, written here without the library's parser. */
static void os_field(const char *key, char *out, size_t size) {
        char line[512];
        *out = 0;
        FILE *f = fopen("/etc/os-release", "re");
        if (!f)
                f = fopen("/usr/lib/os-release", "re");
        if (!f)
                return;
        while (fgets(line, sizeof line, f)) {
                size_t n = strlen(key);
                line[strcspn(line, "\n")] = 0;
                if (strncmp(line, key, n) || line[n] != '=')
                        continue;
                char *v = line + n + 1;
                size_t l = strlen(v);
                if (l >= 2 && (v[0] == '"' || v[0] == '\'') && v[l - 1] == v[0])
                        v[l - 1] = 0, v++;
                snprintf(out, size, "%s", v);
        }
        fclose(f);
}

static void test_machine(void **state) {
        char want[256], buf[256];
        struct utsname u;
        assert_int_equal(uname(&u), 0);
        assert_describes("%v", u.release);
        /* %a: systemd's names, not uname's */
        const char *arch = !strcmp(u.machine, "x86_64") ? "x86-64" : !strcmp(u.machine, "aarch64") ? "arm64" : u.machine;
        assert_describes("%a", arch);
        assert_string_equal(unit_architecture_name("i686"), "x86");
        assert_string_equal(unit_architecture_name("ppc64le"), "ppc64-le");
        char host[HOST_NAME_MAX + 1];
        assert_int_equal(gethostname(host, sizeof host), 0);
        assert_describes("%H", host);
        host[strcspn(host, ".")] = 0;
        assert_describes("%l", host);
        /* %m: /etc/machine-id; %b: the boot id without its dashes */
        first_line("/etc/machine-id", want, sizeof want);
        assert_describes("%m", want);
        first_line("/proc/sys/kernel/random/boot_id", buf, sizeof buf);
        size_t j = 0;
        for (char *p = buf; *p; p++)
                if (*p != '-')
                        want[j++] = *p;
        want[j] = 0;
        assert_int_equal(j, 32);
        assert_describes("%b", want);
        /* os-release: a missing field is empty, as in systemd */
        static const char *const fields[][2] = { { "%A", "IMAGE_VERSION" }, { "%B", "BUILD_ID" }, { "%M", "IMAGE_ID" },
                                                 { "%o", "ID" },            { "%w", "VERSION_ID" }, { "%W", "VARIANT_ID" } };
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
                os_field(fields[i][1], want, sizeof want);
                assert_describes(fields[i][0], want);
        }
        char text[64];
        unit_os_release_value("A=1\nID=\"debian\"\nB='x y'\n", "ID", text, sizeof text);
        assert_string_equal(text, "debian");
        unit_os_release_value("A=1\nB='x y'\n", "B", text, sizeof text);
        assert_string_equal(text, "x y");
}

static void test_tmp(void **state) {
        unsetenv("TEMP");
        unsetenv("TMP");
        unsetenv("TMPDIR");
        assert_describes("%T %V", "/tmp /var/tmp");
        setenv("TMP", "/scratch", 1);
        assert_describes("%T %V", "/scratch /scratch");
        setenv("TMPDIR", "relative", 1); /* not absolute: the next one */
        assert_describes("%T", "/scratch");
        setenv("TMPDIR", "/t", 1);
        assert_describes("%T", "/t");
        unsetenv("TMP");
        unsetenv("TMPDIR");
}

/* As root: the system manager's directories and user, whatever User= says
 * (systemd 252: %u and the others are not influenced by User=). */
static void test_system_manager(void **state) {
        if (geteuid() != 0)
                skip();
        assert_describes("%t|%S|%C|%L|%E|%d", "/run|/var/lib|/var/cache|/var/log|/etc|/run/credentials/a.service");
        int r;
        struct unit_file *u = NULL;
        const char *text = "[Service]\nUser=nobody\nExecStart=/bin/echo %u %U %g %G %h %s\n";
        assert_int_equal(unit_file_parse("a.service", "test/a.service", text, strlen(text), &u, NULL), 0);
        char **argv = u->exec_start.commands[0].argv;
        const char *want[] = { "/bin/echo", "root", "0", "root", "0", "/root", "/bin/sh" };
        for (size_t i = 0; i < 7; i++)
                assert_string_equal(argv[i], want[i]);
        unit_file_free(u);
        char *d = describe_as("web@x.service", "%d", &r);
        assert_string_equal(d, "/run/credentials/web@x.service");
        free(d);
}

/* The user manager: a child as nobody with the XDG variables of its session. */
static int user_manager_child(void) {
        setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
        setenv("HOME", "/home/x", 1);
        setenv("SHELL", "/bin/zsh", 1);
        setenv("XDG_CONFIG_HOME", "/cfg", 1);
        unsetenv("XDG_STATE_HOME");
        unsetenv("XDG_CACHE_HOME");
        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                return 10;
        int r;
        char *d = describe_as("a.service", "%t|%S|%C|%L|%E|%d|%U|%G|%h|%s", &r);
        const char *want = "/run/user/4242|/home/x/.local/state|/home/x/.cache|/home/x/.local/state/log|/cfg|"
                           "/run/user/4242/credentials/a.service|65534|65534|/home/x|/bin/zsh";
        if (!d || strcmp(d, want) != 0) {
                fprintf(stderr, "user manager: got \"%s\"\n                want \"%s\"\n", d ? d : last_msg, want);
                return 11;
        }
        free(d);
        d = describe_as("a.service", "%u:%g", &r); /* nobody's names, whatever this system calls them */
        if (!d || strchr(d, ':') == d || strcmp(d, "65534:65534") == 0) {
                fprintf(stderr, "user manager: %%u:%%g gave \"%s\" (names expected)\n", d ? d : last_msg);
                return 12;
        }
        free(d);
        unsetenv("XDG_RUNTIME_DIR"); /* systemd --user cannot run without it: the unit is refused */
        d = describe_as("a.service", "%t/x", &r);
        if (d || r != -ENXIO || !strstr(last_msg, "Description=: specifier %t: $XDG_RUNTIME_DIR is not set")) {
                fprintf(stderr, "user manager without XDG_RUNTIME_DIR: %d \"%s\"\n", r, last_msg);
                return 13;
        }
        return 0;
}

static void test_user_manager(void **state) {
        if (geteuid() != 0)
                skip();
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(user_manager_child());
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

/* %y and %Y: the file with its links resolved (a linked unit's target). */
static void test_fragment(void **state) {
        char dir[] = "/tmp/test-specifiers-XXXXXX", p[PATH_MAX], q[PATH_MAX];
        assert_non_null(mkdtemp(dir));
        snprintf(p, sizeof p, "%s/pkg", dir);
        assert_int_equal(mkdir(p, 0755), 0);
        snprintf(p, sizeof p, "%s/units", dir);
        assert_int_equal(mkdir(p, 0755), 0);
        snprintf(p, sizeof p, "%s/pkg/web.service", dir);
        FILE *f = fopen(p, "we");
        assert_non_null(f);
        fputs("[Unit]\nDescription=%y|%Y\n[Service]\nExecStart=/bin/true\n", f);
        fclose(f);
        snprintf(q, sizeof q, "%s/units/web.service", dir);
        assert_int_equal(symlink(p, q), 0);
        snprintf(q, sizeof q, "%s/units", dir);
        struct unit_file *u = NULL;
        assert_int_equal(unit_load(q, "web.service", &u, NULL), 0);
        char want[2 * PATH_MAX + 2];
        snprintf(want, sizeof want, "%s|%s/pkg", p, dir);
        assert_string_equal(u->description, want);
        unit_file_free(u);
        snprintf(q, sizeof q, "%s/units/web.service", dir);
        unlink(q);
        unlink(p);
        snprintf(p, sizeof p, "%s/pkg", dir);
        rmdir(p);
        snprintf(p, sizeof p, "%s/units", dir);
        rmdir(p);
        rmdir(dir);
}

static struct unit_file *parse_service(const char *service, int *ret) {
        char text[2048];
        snprintf(text, sizeof text, "[Service]\nExecStart=/bin/true\n%s", service);
        struct unit_file *u = NULL;
        *ret = unit_file_parse("a.service", "test/a.service", text, strlen(text), &u, NULL);
        return u;
}

static void test_extra_keys(void **state) {
        int r;
        struct unit_file *u = parse_service("UnsetEnvironment=A B=1\nUnsetEnvironment=C 1BAD\nRestartKillSignal=USR1\n"
                                            "SendSIGHUP=yes\nTasksMax=4\nUser=nobody\nPermissionsStartOnly=yes\n"
                                            "ExecStartPre=/bin/a\nExecStartPre=!/bin/b\nExecReload=/bin/c\n", &r);
        assert_int_equal(r, 0);
        const struct unit_exec_keys *e = unit_file_exec(u);
        assert_string_equal(e->unset_environment[0], "A");
        assert_string_equal(e->unset_environment[1], "B=1");
        assert_string_equal(e->unset_environment[2], "C");
        assert_null(e->unset_environment[3]); /* 1BAD: warned, skipped */
        assert_string_equal(last_msg, "test/a.service:4: UnsetEnvironment=: invalid variable name or assignment "
                                      "\"1BAD\", ignoring");
        assert_int_equal(e->restart_kill_signal, SIGUSR1);
        assert_true(e->send_sighup);
        assert_int_equal(e->tasks_max, 4);
        /* PermissionsStartOnly=: '+' on the others, a prefix of its own kept, ExecStart= untouched */
        assert_true(u->exec_start_pre.commands[0].flags & UNIT_COMMAND_FULL_PRIVILEGES);
        assert_false(u->exec_start_pre.commands[1].flags & UNIT_COMMAND_FULL_PRIVILEGES);
        assert_true(u->exec_reload.commands[0].flags & UNIT_COMMAND_FULL_PRIVILEGES);
        assert_false(u->exec_start.commands[0].flags & UNIT_COMMAND_FULL_PRIVILEGES);
        unit_file_free(u);
        u = parse_service("TasksMax=infinity\n", &r);
        assert_int_equal(unit_file_exec(u)->tasks_max, UINT64_MAX);
        unit_file_free(u);
        u = parse_service("TasksMax=50%\n", &r);
        assert_true(unit_file_exec(u)->tasks_max > 0 && unit_file_exec(u)->tasks_max < UINT64_MAX);
        unit_file_free(u);
        assert_null(parse_service("TasksMax=0\n", &r));
        assert_int_equal(r, -EINVAL);
        assert_null(parse_service("RestartKillSignal=SIGNOPE\n", &r));

        char *env[] = { strdup("A=1"), strdup("B=1"), strdup("B2=1"), strdup("C=2"), strdup("D=1"), NULL };
        char *const unset[] = { (char *) "A", (char *) "B", (char *) "C=3", (char *) "D=1", NULL };
        unit_env_unset(env, unset);
        assert_string_equal(env[0], "B2=1");
        assert_string_equal(env[1], "C=2");
        assert_null(env[2]);
        free(env[0]);
        free(env[1]);
}

int main(void) {
        log_set_sink(sink, NULL);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_machine),
                cmocka_unit_test(test_tmp),
                cmocka_unit_test(test_system_manager),
                cmocka_unit_test(test_user_manager),
                cmocka_unit_test(test_fragment),
                cmocka_unit_test(test_extra_keys),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
