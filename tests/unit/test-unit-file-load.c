/* SPDX-License-Identifier: MIT */
/*
 * Loading units (supervisor/lang/unit-file-load.c, unit-file-known.c;
 * docs/tend.service.5.md "LOADING"): aliases, linked units and the links
 * refused, drop-ins in systemd.unit(5)'s order with every list key reset by
 * an empty assignment, the text hash over drop-ins, the keys accepted
 * silently or warned about once, and messages that never quote a line.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "unit-file.h"
#include "unit-file-namespace.h"
#include "testutil.h"

#define MAX_MSGS 64
static struct {
        int level;
        char text[2048];
} msgs[MAX_MSGS];
static size_t n_msgs;
static char dir[64], pkg[80];

static void sink(int level, const char *msg, void *userdata) {
        if (n_msgs < MAX_MSGS) {
                msgs[n_msgs].level = level;
                snprintf(msgs[n_msgs].text, sizeof msgs[n_msgs].text, "%s", msg);
        }
        n_msgs++;
}

static int setup(void **state) {
        snprintf(dir, sizeof dir, "/tmp/test-unit-load-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        snprintf(pkg, sizeof pkg, "%s/pkg", dir); /* "elsewhere": a directory that is not DIR */
        char units[PATH_MAX];
        snprintf(units, sizeof units, "%s/units", dir);
        if (mkdir(pkg, 0755) < 0 || mkdir(units, 0755) < 0)
                return -1;
        n_msgs = 0;
        log_set_sink(sink, NULL);
        log_set_max_level(LOG_INFO);
        return 0;
}

static int teardown(void **state) {
        log_set_sink(NULL, NULL);
        log_set_max_level(LOG_WARNING);
        remove_tree(dir);
        return 0;
}

/* DIR/units/rel (or, absolute, rel itself) in buf. */
static char *upath(char buf[static PATH_MAX], const char *rel) {
        if (rel[0] == '/')
                snprintf(buf, PATH_MAX, "%s", rel);
        else
                snprintf(buf, PATH_MAX, "%s/units/%s", dir, rel);
        return buf;
}

static const char *udir(void) {
        static char d[PATH_MAX];
        snprintf(d, sizeof d, "%s/units", dir);
        return d;
}

/* Writes DIR/units/rel (its directory made). */
static void write_file(const char *rel, const char *text) {
        char p[PATH_MAX];
        upath(p, rel);
        char *slash = strrchr(p, '/');
        *slash = '\0';
        (void) mkdir(p, 0755);
        *slash = '/';
        FILE *f = fopen(p, "we");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
}

static void link_to(const char *target, const char *rel) {
        char p[PATH_MAX];
        assert_int_equal(symlink(target, upath(p, rel)), 0);
}

static void assert_strv(char **l, ...) {
        va_list ap;
        va_start(ap, l);
        size_t i = 0;
        for (const char *want; (want = va_arg(ap, const char *)); i++) {
                if (!l || !l[i])
                        fail_msg("entry %zu missing: want \"%s\"", i, want);
                if (strcmp(l[i], want) != 0)
                        fail_msg("entry %zu: got \"%s\", want \"%s\"", i, l[i], want);
        }
        va_end(ap);
        if (l && l[i])
                fail_msg("unexpected entry %zu: \"%s\"", i, l[i]);
}

/* Whether a captured message holds text; forgets none. */
static bool logged(int level, const char *text) {
        for (size_t i = 0; i < n_msgs && i < MAX_MSGS; i++)
                if (msgs[i].level == level && strstr(msgs[i].text, text))
                        return true;
        return false;
}

static void dump_msgs(void) {
        for (size_t i = 0; i < n_msgs && i < MAX_MSGS; i++)
                fprintf(stderr, "  [%d] %s\n", msgs[i].level, msgs[i].text);
}

#define assert_logged(level, text)                                                    \
        do {                                                                          \
                if (!logged((level), (text))) {                                       \
                        dump_msgs();                                                  \
                        fail_msg("no message [%d] containing \"%s\"", (level), (text)); \
                }                                                                     \
        } while (0)

#define EXEC "[Service]\nExecStart=/bin/true\n"

static const struct unit_file *find(const struct unit_set *s, const char *name) {
        for (size_t i = 0; i < s->n_units; i++)
                if (strcmp(s->units[i]->name, name) == 0)
                        return s->units[i];
        return NULL;
}

/* ------------------------------------------------------------------------ */

static void test_aliases(void **state) {
        write_file("ssh.service", "[Service]\nExecStart=/bin/true\n[Install]\nAlias=secure.service\nWantedBy=x.target\n");
        link_to("ssh.service", "sshd.service");
        link_to("sshd.service", "sshd2.service"); /* a chain of links in DIR: one unit still */
        write_file("client.service", "[Unit]\nRequires=sshd.service\nAfter=secure.service\nWants=sshd2.service\n" EXEC);
        write_file("other.service", "[Install]\nAlias=ssh.service\n" EXEC); /* another unit's name */
        struct unit_set *s = NULL;
        assert_int_equal(unit_load_dir(udir(), &s), 0);
        assert_int_equal(s->n_errors, 0);
        assert_int_equal(s->n_units, 3);
        const struct unit_file *ssh = find(s, "ssh.service"), *client = find(s, "client.service");
        assert_non_null(ssh);
        assert_non_null(client);
        assert_non_null(find(s, "other.service"));
        assert_strv(ssh->aliases, "secure.service", "sshd.service", "sshd2.service", NULL);
        assert_strv(client->requires, "ssh.service", NULL);
        assert_strv(client->after, "ssh.service", NULL);
        assert_strv(client->wants, "ssh.service", NULL);
        assert_null(find(s, "other.service")->aliases && find(s, "other.service")->aliases[0]
                            ? find(s, "other.service")->aliases[0] : NULL);
        assert_logged(LOG_WARNING, "other.service: alias ssh.service is already a name of ssh.service, ignored");
        unit_set_free(s);

        /* Loading an alias by its name gives the unit under its own name. */
        struct unit_file *u = NULL;
        assert_int_equal(unit_load(udir(), "sshd.service", &u, NULL), 0);
        assert_string_equal(u->name, "ssh.service");
        unit_file_free(u);

        /* A template alias: an instance of the link is an instance of the target. */
        write_file("db@.service", "[Service]\nExecStart=/bin/echo %i %n\n");
        link_to("db@.service", "database@.service");
        assert_int_equal(unit_load(udir(), "database@main.service", &u, NULL), 0);
        assert_string_equal(u->name, "db@main.service");
        unit_file_free(u);
}

static void test_linked_units(void **state) {
        char target[PATH_MAX], p[PATH_MAX], want[2 * PATH_MAX + 256];
        snprintf(target, sizeof target, "%s/nginx.service", pkg);
        FILE *f = fopen(target, "we");
        assert_non_null(f);
        fputs("[Service]\nExecStart=/bin/echo packaged\n", f);
        fclose(f);
        snprintf(p, sizeof p, "%s/nginx.service.d", pkg); /* next to the target: not read */
        assert_int_equal(mkdir(p, 0755), 0);
        snprintf(p, sizeof p, "%s/nginx.service.d/x.conf", pkg);
        f = fopen(p, "we");
        fputs("[Service]\nRestart=always\n", f);
        fclose(f);
        link_to(target, "web.service"); /* named by the link, not the target */
        write_file("web.service.d/override.conf", "[Service]\nExecStart=\nExecStart=/bin/echo overridden\n");

        struct unit_file *u = NULL;
        assert_int_equal(unit_load(udir(), "web.service", &u, NULL), 0);
        assert_string_equal(u->name, "web.service");
        assert_string_equal(u->path, target);
        assert_string_equal(u->exec_start.commands[0].argv[1], "overridden");
        assert_int_equal(u->restart, UNIT_RESTART_NO);
        assert_strv(u->dropins, upath(p, "web.service.d/override.conf"), NULL);
        unit_file_free(u);

        /* A linked template. */
        snprintf(target, sizeof target, "%s/pg@.service", pkg);
        f = fopen(target, "we");
        fputs("[Service]\nExecStart=/bin/echo %i\n", f);
        fclose(f);
        link_to(target, "pg@.service");
        assert_int_equal(unit_load(udir(), "pg@15-main.service", &u, NULL), 0);
        assert_string_equal(u->name, "pg@15-main.service");
        assert_string_equal(u->path, target);
        unit_file_free(u);

        /* Refused, unread: a target whose name is not a unit's, one that is
         * not a regular file, a dangling link. */
        snprintf(target, sizeof target, "%s/shadow", pkg);
        f = fopen(target, "we");
        fputs("root:$6$SECRET:19000:0:99999:7:::\n", f);
        fclose(f);
        link_to(target, "evil.service");
        char *message = NULL;
        n_msgs = 0;
        assert_int_equal(unit_load(udir(), "evil.service", &u, &message), -EINVAL);
        snprintf(want, sizeof want, "%s/evil.service: a link to \"%s\", whose name is not a service unit (NAME.service) "
                 "name: not read", udir(), target);
        assert_string_equal(message, want);
        free(message);
        snprintf(target, sizeof target, "%s/dir.service", pkg);
        assert_int_equal(mkdir(target, 0755), 0);
        link_to(target, "dir.service");
        assert_int_equal(unit_load(udir(), "dir.service", &u, NULL), -EINVAL);
        assert_logged(LOG_ERR, "which is not a regular file");
        link_to("/nonexistent/x.service", "gone.service");
        assert_int_equal(unit_load(udir(), "gone.service", &u, NULL), -ENOENT);
        assert_logged(LOG_ERR, "gone.service: a link to a file that does not exist");
        for (size_t i = 0; i < n_msgs && i < MAX_MSGS; i++)
                assert_null(strstr(msgs[i].text, "SECRET"));
}

static void test_dropin_order(void **state) {
        write_file("foo-bar-baz.service", "[Service]\nExecStart=/bin/echo main\nEnvironment=MAIN=1\n");
        write_file("service.d/10-all.conf", "[Service]\nEnvironment=A=top B=top C=top\n");
        write_file("foo-.service.d/20-b.conf", "[Service]\nEnvironment=B=foo C=foo\n");
        write_file("foo-bar-.service.d/20-b.conf", "[Service]\nEnvironment=B=foo-bar\n"); /* hides foo-'s */
        write_file("foo-bar-baz.service.d/30-c.conf", "[Service]\nEnvironment=C=own\nExecStart=\nExecStart=/bin/echo c\n");
        write_file("foo-bar-baz.service.d/40-empty.conf", "");    /* masks nothing, adds nothing */
        write_file("foo-bar-baz.service.d/README", "not a drop-in");
        write_file("foo-bar-baz.service.d/50-bad.conf", "\n[Service]\nRestart=sometimes\n");
        char p[PATH_MAX], want[PATH_MAX + 64];
        struct unit_file *u = NULL;
        char *message = NULL;
        assert_int_equal(unit_load(udir(), "foo-bar-baz.service", &u, &message), -EINVAL);
        upath(p, "foo-bar-baz.service.d/50-bad.conf");
        snprintf(want, sizeof want, "%.*s:3: Restart=: invalid value \"sometimes\"", (int) (sizeof want - 64), p);
        assert_string_equal(message, want); /* the drop-in's own FILE:LINE */
        free(message);
        unlink(upath(p, "foo-bar-baz.service.d/50-bad.conf"));
        assert_int_equal(unit_load(udir(), "foo-bar-baz.service", &u, NULL), 0);
        assert_strv(u->environment, "MAIN=1", "A=top", "B=foo-bar", "C=own", NULL);
        assert_int_equal(u->exec_start.n, 1);
        assert_string_equal(u->exec_start.commands[0].argv[1], "c");
        char d1[PATH_MAX], d2[PATH_MAX], d3[PATH_MAX];
        assert_strv(u->dropins, upath(d1, "service.d/10-all.conf"), upath(d2, "foo-bar-.service.d/20-b.conf"),
                    upath(d3, "foo-bar-baz.service.d/30-c.conf"), NULL);
        unit_file_free(u);
}

/* Every list key: an empty assignment in a drop-in resets what the file set. */
static void test_dropin_resets_lists(void **state) {
        static const char main_text[] =
                "[Unit]\nRequires=a.service\nWants=b.service\nBindsTo=c.service\nAfter=d.service\nBefore=e.service\n"
                "[Service]\nExecStartPre=/bin/true\nExecStart=/bin/true\nExecStartPost=/bin/true\nExecStop=/bin/true\n"
                "ExecReload=/bin/true\nEnvironment=A=1\nEnvironmentFile=/etc/x\nSupplementaryGroups=adm\n"
                "SuccessExitStatus=3\nRestartPreventExitStatus=4\nAmbientCapabilities=CAP_NET_RAW\n"
                "CapabilityBoundingSet=CAP_NET_RAW\nSystemCallFilter=@system-service\n"
                "[Install]\nAlias=other.service\n";
        static const char reset[] =
                "[Unit]\nRequires=\nWants=\nBindsTo=\nAfter=\nBefore=\n"
                "[Service]\nExecStartPre=\nExecStart=\nExecStart=/bin/false\nExecStartPost=\nExecStop=\nExecReload=\n"
                "Environment=\nEnvironmentFile=\nSupplementaryGroups=\nSuccessExitStatus=\nRestartPreventExitStatus=\n"
                "AmbientCapabilities=\nCapabilityBoundingSet=\nSystemCallFilter=\n[Install]\nAlias=\n";
        const struct unit_text texts[] = {
                { "test/a.service", main_text, sizeof main_text - 1 },
                { "test/a.service.d/reset.conf", reset, sizeof reset - 1 },
        };
        struct unit_file *u = NULL;
        assert_int_equal(unit_file_parse_texts("a.service", texts, 2, &u, NULL), 0);
        assert_null(u->requires && u->requires[0] ? u->requires[0] : NULL);
        assert_null(u->wants && u->wants[0] ? u->wants[0] : NULL);
        assert_null(u->binds_to && u->binds_to[0] ? u->binds_to[0] : NULL);
        assert_null(u->after && u->after[0] ? u->after[0] : NULL);
        assert_null(u->before && u->before[0] ? u->before[0] : NULL);
        assert_int_equal(u->exec_start_pre.n + u->exec_start_post.n + u->exec_stop.n + u->exec_reload.n, 0);
        assert_int_equal(u->exec_start.n, 1);
        assert_string_equal(u->exec_start.commands[0].argv[0], "/bin/false");
        assert_null(u->environment && u->environment[0] ? u->environment[0] : NULL);
        assert_int_equal(u->n_environment_files, 0);
        const struct unit_sandbox_keys *sb = unit_file_sandbox(u);
        assert_null(sb->supplementary_groups && sb->supplementary_groups[0] ? sb->supplementary_groups[0] : NULL);
        assert_memory_equal(unit_file_exit_statuses(u), &unit_exit_statuses_none, sizeof unit_exit_statuses_none);
        assert_int_equal(sb->ambient_capabilities, unit_sandbox_defaults.ambient_capabilities);
        assert_memory_equal(&sb->syscall_filter, &unit_sandbox_defaults.syscall_filter, sizeof sb->syscall_filter);
        assert_null(u->aliases && u->aliases[0] ? u->aliases[0] : NULL);
        unit_file_free(u);
}

static void test_hash_covers_dropins(void **state) {
        write_file("web.service", EXEC);
        struct unit_file *a = NULL, *b = NULL;
        assert_int_equal(unit_load(udir(), "web.service", &a, NULL), 0);
        write_file("web.service.d/x.conf", "[Service]\nRestart=always\n");
        assert_int_equal(unit_load(udir(), "web.service", &b, NULL), 0);
        assert_false(unit_file_same_text(a, b));
        unit_file_free(a);
        write_file("web.service.d/x.conf", "[Service]\nRestart=on-failure\n");
        assert_int_equal(unit_load(udir(), "web.service", &a, NULL), 0);
        assert_false(unit_file_same_text(a, b));
        unit_file_free(b);
        assert_int_equal(unit_load(udir(), "web.service", &b, NULL), 0);
        assert_true(unit_file_same_text(a, b)); /* nothing changed: the same */
        unit_file_free(b);
        char p[PATH_MAX], q[PATH_MAX]; /* renamed: the order may change, so it is a change */
        assert_int_equal(rename(upath(p, "web.service.d/x.conf"), upath(q, "web.service.d/y.conf")), 0);
        assert_int_equal(unit_load(udir(), "web.service", &b, NULL), 0);
        assert_false(unit_file_same_text(a, b));
        unit_file_free(a);
        unit_file_free(b);
}

static void test_known_keys(void **state) {
        static const char text[] = "[Unit]\nDocumentation=man:x(8)\nDefaultDependencies=no\nIgnoreOnIsolate=yes\n"
                                   "RefuseManualStop=yes\nJobTimeoutSec=5\nCollectMode=inactive\nSourcePath=/x\n"
                                   "[Service]\nExecStart=/bin/true\nSyslogLevel=debug\nCPUAccounting=yes\n"
                                   "CPUQuota=10%\nCPUQuota=20%\nMemoryMax=1G\n"
                                   "[Install]\nWantedBy=multi-user.target\nAlso=x.service\nAlias=bad.target\n";
        const struct unit_text t = { "test/a.service", text, sizeof text - 1 };
        struct unit_file *u = NULL;
        assert_int_equal(unit_file_parse_texts("a.service", &t, 1, &u, NULL), 0);
        unit_file_free(u);
        if (n_msgs != 3) {
                dump_msgs();
                fail_msg("%zu messages, want 3", n_msgs);
        }
        assert_string_equal(msgs[0].text, "test/a.service:13: CPUQuota= is not supported: the unit runs without the CPU quota");
        assert_string_equal(msgs[1].text, "test/a.service:15: MemoryMax= is not supported: the unit runs without the memory limit");
        assert_string_equal(msgs[2].text, "test/a.service:19: Alias=\"bad.target\" ignored: not a service (NAME.service) name");
}

/* issue 19: lines of a file that is not a unit file are never quoted. */
static void test_no_line_quoted(void **state) {
        static const char text[] = "root:$6$SECRET1:19000:0:99999:7:::\n"
                                   "[SECRET2 section\n"
                                   "SECRET3 line=with an equals sign\n"
                                   "[Service]\n"
                                   "SECRET4:x=1\n"
                                   "}SECRET5\n";
        const struct unit_text t = { "test/a.service", text, sizeof text - 1 };
        struct unit_file *u = NULL;
        char *message = NULL;
        assert_int_equal(unit_file_parse_texts("a.service", &t, 1, &u, &message), -EINVAL);
        assert_null(strstr(message, "SECRET"));
        free(message);
        if (n_msgs != 4) { /* line 3 is in the unknown section line 2 opened: ignored */
                dump_msgs();
                fail_msg("%zu messages, want one for each bad line", n_msgs);
        }
        for (size_t i = 0; i < n_msgs && i < MAX_MSGS; i++)
                if (strstr(msgs[i].text, "SECRET") || strstr(msgs[i].text, "$6$")) {
                        dump_msgs();
                        fail_msg("message %zu quotes a line", i);
                }
}

static void test_unit_exists(void **state) {
        write_file("a.service", EXEC);
        write_file("t@.service", EXEC);
        assert_true(unit_exists(udir(), "a.service"));
        assert_true(unit_exists(udir(), "t@x.service"));
        assert_false(unit_exists(udir(), "b.service"));
        assert_false(unit_exists(udir(), "u@x.service"));
        assert_false(unit_exists(udir(), "../a.service"));
}

/* parsefix (M6): every drop-in is read, in file-name order, up to UNIT_DROPINS_MAX (over
 * systemd's: it has none); one more refuses the unit naming the directory, never runs it
 * with some unread. The hardening drop-in sorts last and is in a second directory. */
static void test_many_dropins(void **state) {
        enum { N = 300 }; /* over the 64 tend read before, in part and in readdir order */
        char rel[64], p[PATH_MAX], want[PATH_MAX + 128];
        write_file("many.service", EXEC);
        for (int i = N - 2; i >= 0; i--) { /* created in reverse: readdir order is not name order */
                snprintf(rel, sizeof rel, "many.service.d/%04d.conf", i);
                write_file(rel, i % 100 ? "[Service]\nEnvironment=V=x\n" : "[Service]\nEnvironment=\n");
        }
        write_file("service.d/zz-harden.conf", "[Service]\nPrivateTmp=yes\nEnvironment=LAST=1\n");
        struct unit_file *u = NULL;
        char *message = NULL;
        assert_int_equal(unit_load(udir(), "many.service", &u, &message), 0);
        assert_true(unit_file_namespace(u)->private_tmp);
        assert_int_equal(strv_length(u->dropins), N);
        size_t n_env = strv_length(u->environment); /* 0200.conf reset what came before */
        assert_true(n_env >= 2);
        assert_string_equal(u->environment[n_env - 1], "LAST=1");
        assert_string_equal(strrchr(u->dropins[N - 1], '/') + 1, "zz-harden.conf");
        for (size_t i = 1; i < N; i++)
                assert_true(strcmp(strrchr(u->dropins[i - 1], '/') + 1, strrchr(u->dropins[i], '/') + 1) < 0);
        u = unit_file_free(u);
        for (int i = N - 1; i < UNIT_DROPINS_MAX - 1; i++) { /* UNIT_DROPINS_MAX in all: read */
                snprintf(rel, sizeof rel, "many.service.d/%04d.conf", i);
                write_file(rel, "[Service]\n");
        }
        assert_int_equal(unit_load(udir(), "many.service", &u, NULL), 0);
        assert_int_equal(strv_length(u->dropins), UNIT_DROPINS_MAX);
        u = unit_file_free(u);
        write_file("many.service.d/extra.conf", "[Service]\n"); /* one more: refused */
        assert_int_equal(unit_load(udir(), "many.service", &u, &message), -E2BIG);
        assert_null(u);
        assert_non_null(message);
        snprintf(want, sizeof want, "%s/: more than %d drop-ins", upath(p, "many.service.d"), UNIT_DROPINS_MAX);
        char want2[PATH_MAX + 128];
        snprintf(want2, sizeof want2, "%s/: more than %d drop-ins", upath(p, "service.d"), UNIT_DROPINS_MAX);
        if (!strstr(message, want) && !strstr(message, want2)) /* the directory where the count went over */
                fail_msg("%s", message);
        free(message);
        (void) state;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_aliases, setup, teardown),
                cmocka_unit_test_setup_teardown(test_linked_units, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dropin_order, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dropin_resets_lists, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hash_covers_dropins, setup, teardown),
                cmocka_unit_test_setup_teardown(test_known_keys, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_line_quoted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unit_exists, setup, teardown),
                cmocka_unit_test_setup_teardown(test_many_dropins, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
