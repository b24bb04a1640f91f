/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser (supervisor/lang/unit-file.h, unit-exec.h; SPEC §3): good and
 * bad inputs with their exact messages and FILE:LINE, systemd.service(5)'s
 * COMMAND LINES examples, specifiers and templates, directory loading, and the
 * environment of a start. Messages are captured through log_set_sink(); every
 * test ends with the fd count it started with.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
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
#include "unit-exec.h"
#include "unit-file.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Fixture: a temporary unit directory, captured messages, the fd count      */
/* ------------------------------------------------------------------------ */

#define MAX_MSGS 64
static struct {
        int level;
        char text[2048];
} msgs[MAX_MSGS];
static size_t n_msgs;
static char dir[64];
static int fds_at_start;

static void sink(int level, const char *msg, void *userdata) {
        if (n_msgs < MAX_MSGS) {
                msgs[n_msgs].level = level;
                snprintf(msgs[n_msgs].text, sizeof msgs[n_msgs].text, "%s", msg);
        }
        n_msgs++;
}


static int setup(void **state) {
        snprintf(dir, sizeof dir, "/tmp/test-unit-file-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        n_msgs = 0;
        log_set_sink(sink, NULL);
        log_set_max_level(LOG_INFO);
        fds_at_start = count_fds();
        return 0;
}

static int teardown(void **state) {
        log_set_sink(NULL, NULL);
        log_set_max_level(LOG_WARNING);
        remove_tree(dir);
        if (count_fds() != fds_at_start) {
                fprintf(stderr, "fd leak: %d fds open, %d at start\n", count_fds(), fds_at_start);
                return -1;
        }
        return 0;
}

static void write_file(const char *name, const char *text) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, name);
        FILE *f = fopen(p, "we");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
}

/* DIR/name in buf. */
static char *dir_path(char buf[static PATH_MAX], const char *name) {
        snprintf(buf, PATH_MAX, "%s/%s", dir, name);
        return buf;
}

/* A string literal where the API takes char * (environ's type) without writing to it. */
#define S(literal) ((char *) (literal))

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

static void expect_no_msgs(void) {
        expect_msgs(-1);
}

/* Parses text as test/NAME; the unit on success, NULL on failure (then *ret_error). */
static struct unit_file *parse_as(const char *name, const char *text, int *ret_error, char **ret_message) {
        char origin[128];
        snprintf(origin, sizeof origin, "test/%s", name);
        struct unit_file *u = NULL;
        int r = unit_file_parse(name, origin, text, strlen(text), &u, ret_message);
        if (ret_error)
                *ret_error = r;
        if (r < 0)
                assert_null(u);
        return r < 0 ? NULL : u;
}

static struct unit_file *parse_ok(const char *text) {
        int r;
        char *message = NULL;
        struct unit_file *u = parse_as("a.service", text, &r, &message);
        if (!u)
                fail_msg("refused (%d): %s\n--- unit:\n%s", r, message ? message : "(no message)", text);
        return u;
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

/* Expands command i of list against the unit's Environment= only. */
static char **expand(const struct unit_file *u, const struct unit_command_list *l, size_t i, char ***ret_unset) {
        char **envp = NULL, **argv = NULL;
        assert_true(i < l->n);
        assert_int_equal(unit_build_environment(u->name, NULL, 0, u->environment, NULL, 0, &envp), 0);
        assert_int_equal(unit_command_expand(&l->commands[i], envp, &argv, ret_unset), 0);
        strv_free(envp);
        return argv;
}

#define EXEC "[Service]\nExecStart=/bin/true\n"

/* ------------------------------------------------------------------------ */
/* Names                                                                     */
/* ------------------------------------------------------------------------ */

static void test_unit_names(void **state) {
        static const struct {
                const char *name;
                unsigned kinds;
        } table[] = {
                { "foo.service", UNIT_NAME_PLAIN },          { "a-b_c:d.e\\x2d.service", UNIT_NAME_PLAIN },
                { "foo@.service", UNIT_NAME_TEMPLATE },      { "foo@bar.service", UNIT_NAME_INSTANCE },
                { "foo@b@r.service", UNIT_NAME_INSTANCE },   { "getty@tty1.service", UNIT_NAME_INSTANCE },
                { "foo", 0 },                                { ".service", 0 },
                { "@.service", 0 },                          { "@bar.service", 0 },
                { "foo.socket", 0 },                         { "fo o.service", 0 },
                { "foo/bar.service", 0 },                    { "foo.service.d", 0 },
                { "føø.service", 0 },                        { "", 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                for (unsigned kind = UNIT_NAME_PLAIN; kind <= UNIT_NAME_INSTANCE; kind <<= 1)
                        if (unit_name_is_valid(table[i].name, kind) != !!(table[i].kinds & kind))
                                fail_msg("\"%s\" as kind %u: %s", table[i].name, kind,
                                         (table[i].kinds & kind) ? "refused" : "accepted");
        char longname[300];
        memset(longname, 'a', sizeof longname);
        strcpy(longname + 247, ".service"); /* 255 bytes */
        assert_true(unit_name_is_valid(longname, UNIT_NAME_PLAIN));
        strcpy(longname + 248, ".service");
        assert_false(unit_name_is_valid(longname, UNIT_NAME_ANY));
        assert_false(unit_name_is_valid(NULL, UNIT_NAME_ANY));
}

/* ------------------------------------------------------------------------ */
/* Good units                                                                */
/* ------------------------------------------------------------------------ */

static void test_defaults(void **state) {
        struct unit_file *u = parse_ok(EXEC);
        expect_no_msgs();
        assert_string_equal(u->name, "a.service");
        assert_string_equal(u->path, "test/a.service");
        assert_null(u->instance);
        assert_null(u->description);
        assert_int_equal(u->start_limit_interval, 10 * USEC_PER_SEC);
        assert_int_equal(u->start_limit_burst, 5);
        assert_int_equal(u->success_action, UNIT_ACTION_NONE);
        assert_int_equal(u->failure_action, UNIT_ACTION_NONE);
        assert_int_equal(u->type, UNIT_TYPE_SIMPLE);
        assert_int_equal(u->exec_start.n, 1);
        assert_string_equal(u->exec_start.commands[0].path, "/bin/true");
        assert_strv(u->exec_start.commands[0].argv, "/bin/true", NULL);
        assert_int_equal(u->exec_start.commands[0].flags, 0);
        assert_int_equal(u->exec_start_pre.n + u->exec_start_post.n + u->exec_stop.n + u->exec_reload.n, 0);
        assert_int_equal(u->restart, UNIT_RESTART_NO);
        assert_int_equal(u->restart_sec, 100 * USEC_PER_MSEC);
        assert_int_equal(u->restart_steps, 0);
        assert_true(u->restart_max_delay == USEC_INFINITY);
        assert_false(u->remain_after_exit);
        static const struct unit_exit_status_set empty = {};
        assert_null(u->exit_statuses); /* held out of line only when a set is not empty */
        assert_memory_equal(&unit_file_exit_statuses(u)->success, &empty, sizeof empty);
        assert_memory_equal(&unit_file_exit_statuses(u)->restart_prevent, &empty, sizeof empty);
        assert_int_equal(u->timeout_start, 90 * USEC_PER_SEC);
        assert_int_equal(u->timeout_stop, 10 * USEC_PER_SEC);
        assert_int_equal(u->kill_mode, UNIT_KILL_CONTROL_GROUP);
        assert_int_equal(u->kill_signal, SIGTERM);
        assert_int_equal(u->final_kill_signal, SIGKILL);
        assert_true(u->send_sigkill);
        assert_true(u->ignore_sigpipe);
        assert_null(u->environment);
        assert_int_equal(u->n_environment_files, 0);
        assert_null(u->working_directory);
        assert_int_equal(u->standard_output.kind, UNIT_OUTPUT_DEFAULT);
        assert_int_equal(u->standard_error.kind, UNIT_OUTPUT_DEFAULT);
        assert_null(u->syslog_identifier);
        assert_null(u->requires);
        assert_null(u->after);
        unit_file_free(u);

        /* No ExecStart=: Type defaults to oneshot, whose start timeout is off. */
        u = parse_ok("[Service]\nRemainAfterExit=yes\nExecStop=/bin/true\n");
        assert_int_equal(u->type, UNIT_TYPE_ONESHOT);
        assert_true(u->timeout_start == USEC_INFINITY);
        unit_file_free(u);
}

static void test_every_key(void **state) {
        struct unit_file *u = parse_ok("# a full unit\n"
                                       "[Unit]\n"
                                       "Description=Web server %n\n"
                                       "StartLimitIntervalSec=1min\n"
                                       "StartLimitBurst=3\n"
                                       "SuccessAction=exit\n"
                                       "FailureAction=exit-force\n"
                                       "\n"
                                       "[Service]\n"
                                       "Type=exec\n"
                                       "ExecStartPre=-/bin/mkdir -p /run/web\n"
                                       "ExecStart=/usr/sbin/web --port 8080\n"
                                       "ExecStartPost=/bin/echo started $MAINPID\n"
                                       "ExecStop=/bin/kill -TERM $MAINPID\n"
                                       "ExecReload=/bin/kill -HUP $MAINPID\n"
                                       "Restart=on-failure\n"
                                       "RestartSec=2s\n"
                                       "RestartSteps=4\n"
                                       "RestartMaxDelaySec=30s\n"
                                       "RemainAfterExit=true\n"
                                       "SuccessExitStatus=TEMPFAIL 250 SIGKILL\n"
                                       "RestartPreventExitStatus=3 SIGHUP\n"
                                       "TimeoutStartSec=5s\n"
                                       "TimeoutStopSec=500ms\n"
                                       "KillMode=mixed\n"
                                       "KillSignal=SIGINT\n"
                                       "FinalKillSignal=9\n"
                                       "SendSIGKILL=no\n"
                                       "IgnoreSIGPIPE=off\n"
                                       "Environment=A=1 \"B=two words\"\n"
                                       "EnvironmentFile=-/etc/default/web\n"
                                       "WorkingDirectory=-/srv/web\n"
                                       "StandardOutput=append:/var/log/web.log\n"
                                       "StandardError=null\n"
                                       "SyslogIdentifier=web-%i\n"
                                       "[Install]\n"
                                       "WantedBy=multi-user.target\n");
        expect_no_msgs();
        assert_string_equal(u->description, "Web server a.service");
        assert_int_equal(u->start_limit_interval, 60 * USEC_PER_SEC);
        assert_int_equal(u->start_limit_burst, 3);
        assert_int_equal(u->success_action, UNIT_ACTION_EXIT);
        assert_int_equal(u->failure_action, UNIT_ACTION_EXIT_FORCE);
        assert_int_equal(u->type, UNIT_TYPE_EXEC);
        assert_int_equal(u->exec_start_pre.commands[0].flags, UNIT_COMMAND_IGNORE_FAILURE);
        assert_strv(u->exec_start_pre.commands[0].argv, "/bin/mkdir", "-p", "/run/web", NULL);
        assert_strv(u->exec_start.commands[0].argv, "/usr/sbin/web", "--port", "8080", NULL);
        assert_strv(u->exec_start_post.commands[0].argv, "/bin/echo", "started", "$MAINPID", NULL);
        assert_strv(u->exec_stop.commands[0].argv, "/bin/kill", "-TERM", "$MAINPID", NULL);
        assert_strv(u->exec_reload.commands[0].argv, "/bin/kill", "-HUP", "$MAINPID", NULL);
        assert_int_equal(u->restart, UNIT_RESTART_ON_FAILURE);
        assert_int_equal(u->restart_sec, 2 * USEC_PER_SEC);
        assert_int_equal(u->restart_steps, 4);
        assert_int_equal(u->restart_max_delay, 30 * USEC_PER_SEC);
        assert_true(u->remain_after_exit);
        assert_non_null(u->exit_statuses);
        assert_true(unit_exit_status_set_has_code(&unit_file_exit_statuses(u)->success, 75));
        assert_true(unit_exit_status_set_has_code(&unit_file_exit_statuses(u)->success, 250));
        assert_false(unit_exit_status_set_has_code(&unit_file_exit_statuses(u)->success, 0));
        assert_true(unit_exit_status_set_has_signal(&unit_file_exit_statuses(u)->success, SIGKILL));
        assert_false(unit_exit_status_set_has_signal(&unit_file_exit_statuses(u)->success, SIGTERM));
        assert_true(unit_exit_status_set_has_code(&unit_file_exit_statuses(u)->restart_prevent, 3));
        assert_true(unit_exit_status_set_has_signal(&unit_file_exit_statuses(u)->restart_prevent, SIGHUP));
        assert_int_equal(u->timeout_start, 5 * USEC_PER_SEC);
        assert_int_equal(u->timeout_stop, 500 * USEC_PER_MSEC);
        assert_int_equal(u->kill_mode, UNIT_KILL_MIXED);
        assert_int_equal(u->kill_signal, SIGINT);
        assert_int_equal(u->final_kill_signal, SIGKILL);
        assert_false(u->send_sigkill);
        assert_false(u->ignore_sigpipe);
        assert_strv(u->environment, "A=1", "B=two words", NULL);
        assert_int_equal(u->n_environment_files, 1);
        assert_string_equal(u->environment_files[0].path, "/etc/default/web");
        assert_true(u->environment_files[0].optional);
        assert_string_equal(u->working_directory, "/srv/web");
        assert_true(u->working_directory_missing_ok);
        assert_int_equal(u->standard_output.kind, UNIT_OUTPUT_APPEND);
        assert_string_equal(u->standard_output.path, "/var/log/web.log");
        assert_int_equal(u->standard_error.kind, UNIT_OUTPUT_NULL);
        assert_string_equal(u->syslog_identifier, "web-");
        unit_file_free(u);

        u = parse_ok(EXEC "StandardOutput=inherit\nStandardError=inherit\n");
        assert_int_equal(u->standard_output.kind, UNIT_OUTPUT_INHERIT);
        assert_int_equal(u->standard_error.kind, UNIT_OUTPUT_DEFAULT); /* systemd: stderr=inherit is "as stdout" */
        unit_file_free(u);
        u = parse_ok(EXEC "StandardOutput=file:/tmp/out\nStandardError=journal\nKillMode=process\n"
                          "Restart=on-abnormal\nBooleanless=1\n");
        assert_int_equal(u->standard_output.kind, UNIT_OUTPUT_FILE);
        assert_string_equal(u->standard_output.path, "/tmp/out");
        assert_int_equal(u->standard_error.kind, UNIT_OUTPUT_JOURNAL);
        assert_int_equal(u->kill_mode, UNIT_KILL_PROCESS);
        assert_int_equal(u->restart, UNIT_RESTART_ON_ABNORMAL);
        expect_msgs(LOG_WARNING, "test/a.service:7: unknown key \"Booleanless\" in section [Service], ignoring", -1);
        unit_file_free(u);

        /* corpus: systemd's other outputs: syslog is the journal (systemd 252
         * maps it), kmsg and the +console ones tend's default, with a notice. */
        u = parse_ok(EXEC "StandardOutput=syslog\nStandardError=journal+console\n");
        assert_int_equal(u->standard_output.kind, UNIT_OUTPUT_JOURNAL);
        assert_int_equal(u->standard_error.kind, UNIT_OUTPUT_DEFAULT);
        expect_msgs(LOG_NOTICE, "test/a.service:4: StandardError=journal+console: the lines go to tend's default "
                                "output instead (the journal when tend runs under systemd, else tend's stdout)", -1);
        unit_file_free(u);
        u = parse_ok(EXEC "StandardOutput=journal\nStandardOutput=kmsg+console\nStandardError=kmsg\n");
        assert_int_equal(u->standard_output.kind, UNIT_OUTPUT_DEFAULT);
        assert_int_equal(u->standard_error.kind, UNIT_OUTPUT_DEFAULT);
        n_msgs = 0;
        unit_file_free(u);
}

static void test_booleans_and_numbers(void **state) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on", "YES", "On" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off", "NO", "Off" };
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                char text[128];
                snprintf(text, sizeof text, EXEC "RemainAfterExit=%s\nSendSIGKILL=%s\n", yes[i], no[i]);
                struct unit_file *u = parse_ok(text);
                assert_true(u->remain_after_exit);
                assert_false(u->send_sigkill);
                unit_file_free(u);
        }
        struct unit_file *u = parse_ok("[Unit]\nStartLimitBurst=0\nStartLimitIntervalSec=0\n" EXEC);
        assert_int_equal(u->start_limit_burst, 0);
        assert_int_equal(u->start_limit_interval, 0); /* 0 disables the limit: not infinity */
        unit_file_free(u);
}

static void test_timespans(void **state) {
        struct unit_file *u = parse_ok("[Unit]\nStartLimitIntervalSec=2h\n" EXEC "RestartSec=500ms\n"
                                       "TimeoutStopSec=1min 30s\nTimeoutStartSec=0\nRestartMaxDelaySec=infinity\n");
        expect_no_msgs();
        assert_int_equal(u->restart_sec, 500 * USEC_PER_MSEC);
        assert_int_equal(u->timeout_stop, 90 * USEC_PER_SEC);
        assert_true(u->timeout_start == USEC_INFINITY); /* 0 disables, as in systemd */
        assert_int_equal(u->start_limit_interval, 7200 * USEC_PER_SEC);
        unit_file_free(u);

        u = parse_ok(EXEC "TimeoutSec=7\nRestartSec=3\n"); /* a bare number is seconds */
        assert_int_equal(u->timeout_start, 7 * USEC_PER_SEC);
        assert_int_equal(u->timeout_stop, 7 * USEC_PER_SEC);
        assert_int_equal(u->restart_sec, 3 * USEC_PER_SEC);
        unit_file_free(u);

        /* An empty assignment restores the default; oneshot keeps its explicit start timeout. */
        u = parse_ok("[Service]\nType=oneshot\nExecStart=/bin/true\nTimeoutStartSec=5\nTimeoutStopSec=1\n"
                     "TimeoutStopSec=\nRestartSec=9\nRestartSec=\n");
        assert_int_equal(u->timeout_start, 5 * USEC_PER_SEC);
        assert_int_equal(u->timeout_stop, 10 * USEC_PER_SEC);
        assert_int_equal(u->restart_sec, 100 * USEC_PER_MSEC);
        unit_file_free(u);

        /* systemd's RestartSteps=/RestartMaxDelaySec= consistency rules, as warnings. */
        u = parse_ok(EXEC "RestartSteps=3\n");
        assert_int_equal(u->restart_steps, 0);
        expect_msgs(LOG_WARNING, "test/a.service: RestartSteps= without RestartMaxDelaySec=, ignoring RestartSteps=", -1);
        unit_file_free(u);
        u = parse_ok(EXEC "RestartSec=10s\nRestartSteps=2\nRestartMaxDelaySec=5s\n");
        assert_int_equal(u->restart_sec, 5 * USEC_PER_SEC);
        expect_msgs(LOG_WARNING, "test/a.service: RestartMaxDelaySec=5s is shorter than RestartSec=10s, using it for both", -1);
        unit_file_free(u);
}

/* ------------------------------------------------------------------------ */
/* Syntax: comments, continuations, sections, repeated keys                  */
/* ------------------------------------------------------------------------ */

static void test_syntax(void **state) {
        /* systemd.syntax(7)'s own example, with ExecStart= for the keys. */
        struct unit_file *u = parse_ok("[Unit]\n"
                                       "Description=value 1\n"
                                       "\n"
                                       "# a comment\n"
                                       "; another\n"
                                       "[Service]\n"
                                       "  ExecStart  =  /bin/echo value 2 \\\n"
                                       "       value 2 continued\n"
                                       "Environment=A=value\\\n"
                                       "# this line is ignored\n"
                                       "; this line is ignored too\n"
                                       "       B=3\n"
                                       "SyslogIdentifier=ends in a backslash \\\\\n"
                                       "X-Custom=whatever\n"
                                       "[X-Mine]\n"
                                       "Anything=goes\n"
                                       "[Install]\n"
                                       "Alias=b.service\n"
                                       "[Service]\n"
                                       "RemainAfterExit=yes\r\n");
        expect_no_msgs();
        assert_string_equal(u->description, "value 1");
        assert_strv(u->exec_start.commands[0].argv, "/bin/echo", "value", "2", "value", "2", "continued", NULL);
        assert_strv(u->environment, "A=value", "B=3", NULL);
        assert_string_equal(u->syslog_identifier, "ends in a backslash \\\\"); /* an escaped backslash does not continue */
        unit_file_free(u);
}

static void test_continuation_values(void **state) {
        struct unit_file *u = parse_ok("[Service]\n"
                                       "ExecStart=/bin/echo a\\\n"
                                       "b\n"
                                       "Description=x\n"
                                       "SyslogIdentifier=one \\\n"
                                       "  two\n");
        /* The backslash becomes a space; the next line is appended as it is. */
        assert_strv(u->exec_start.commands[0].argv, "/bin/echo", "a", "b", NULL);
        assert_string_equal(u->syslog_identifier, "one    two");
        expect_msgs(LOG_WARNING, "test/a.service:4: unknown key \"Description\" in section [Service], ignoring", -1);
        unit_file_free(u);

        /* [X-Tend] is tend's own section: systemd ignores it, tend reads it and names a key it does not know. */
        u = parse_ok(EXEC "[X-Tend]\nNoSuchKey=1\n[X-Other]\nNoSuchKey=1\n");
        expect_msgs(LOG_WARNING, "test/a.service:4: unknown key \"NoSuchKey\" in section [X-Tend], ignoring", -1);
        unit_file_free(u);

        /* Messages name the first line of a continued assignment; a continuation at EOF ends it. */
        int r;
        char *message = NULL;
        assert_null(parse_as("a.service", EXEC "Restart=\\\nsometimes \\", &r, &message));
        assert_int_equal(r, -EINVAL);
        assert_string_equal(message, "test/a.service:3: Restart=: invalid value \"sometimes\"");
        expect_msgs(LOG_ERR, message, -1);
        free(message);
}

static void test_repeated_keys(void **state) {
        struct unit_file *u = parse_ok("[Service]\n"
                                       "Environment=A=1 B=2\n"
                                       "Environment=C=3\n"
                                       "Environment=A=override\n"
                                       "ExecStartPre=/bin/one\n"
                                       "ExecStartPre=/bin/two\n"
                                       "ExecStop=/bin/dropped\n"
                                       "ExecStop=\n"
                                       "ExecStop=/bin/kept\n"
                                       "SuccessExitStatus=1 2\n"
                                       "SuccessExitStatus=3\n"
                                       "RestartPreventExitStatus=4\n"
                                       "RestartPreventExitStatus=\n"
                                       "EnvironmentFile=/a\n"
                                       "EnvironmentFile=-/b\n"
                                       "ExecStart=/bin/first\n"
                                       "ExecStart=\n"
                                       "ExecStart=/bin/second\n"
                                       "Description=\n");
        assert_strv(u->environment, "A=override", "B=2", "C=3", NULL);
        assert_int_equal(u->exec_start_pre.n, 2);
        assert_strv(u->exec_start_pre.commands[1].argv, "/bin/two", NULL);
        assert_int_equal(u->exec_stop.n, 1);
        assert_strv(u->exec_stop.commands[0].argv, "/bin/kept", NULL);
        for (int i = 1; i <= 3; i++)
                assert_true(unit_exit_status_set_has_code(&unit_file_exit_statuses(u)->success, i));
        assert_false(unit_exit_status_set_has_code(&unit_file_exit_statuses(u)->restart_prevent, 4));
        assert_int_equal(u->n_environment_files, 2);
        assert_false(u->environment_files[0].optional);
        assert_true(u->environment_files[1].optional);
        assert_int_equal(u->exec_start.n, 1); /* the reset makes a second ExecStart= legal */
        assert_strv(u->exec_start.commands[0].argv, "/bin/second", NULL);
        unit_file_free(u);

        u = parse_ok(EXEC "Environment=A=1\nEnvironment=\nEnvironment=B=2\nEnvironmentFile=/x\nEnvironmentFile=\n");
        assert_strv(u->environment, "B=2", NULL);
        assert_int_equal(u->n_environment_files, 0);
        unit_file_free(u);
        expect_msgs(LOG_WARNING, "test/a.service:19: unknown key \"Description\" in section [Service], ignoring", -1);
}

static void test_unknown_keys_warn(void **state) {
        /* One unknown key, and an unknown section, do not stop the rest of the file. */
        struct unit_file *u = parse_ok("[Unit]\n"
                                       "Documentation=man:web(8)\n"
                                       "[Service]\n"
                                       "ExecStart=/bin/true\n"
                                       "FrobnicateTmp=yes\n"
                                       "Restart=always\n"
                                       "[Socket]\n"
                                       "ListenStream=80\n"
                                       "[Service]\n"
                                       "RestartSec=1\n");
        assert_int_equal(u->restart, UNIT_RESTART_ALWAYS);
        assert_int_equal(u->restart_sec, USEC_PER_SEC);
        /* Documentation= matters only to systemd's machinery: silent (unit-file-known.c). */
        expect_msgs(LOG_WARNING, "test/a.service:5: unknown key \"FrobnicateTmp\" in section [Service], ignoring",
                    LOG_WARNING, "test/a.service:7: unknown section [Socket], ignoring its keys", -1);
        unit_file_free(u);

        /* Many unknown keys: the unit still loads; only the first 50 messages are logged. */
        char text[4096] = EXEC;
        for (int i = 0; i < 60; i++)
                snprintf(text + strlen(text), sizeof text - strlen(text), "Protect%d=yes\n", i);
        snprintf(text + strlen(text), sizeof text - strlen(text), "Restart=on-abort\n");
        u = parse_ok(text);
        assert_int_equal(u->restart, UNIT_RESTART_ON_ABORT);
        assert_int_equal(n_msgs, 51);
        assert_string_equal(msgs[49].text, "test/a.service:52: unknown key \"Protect49\" in section [Service], ignoring");
        assert_string_equal(msgs[50].text, "test/a.service: more than 50 messages, the rest are not shown");
        n_msgs = 0;
        unit_file_free(u);

        /* A long value is cut in a message, never inside a UTF-8 character; control bytes are escaped. */
        char value[400] = "\x01";
        for (int i = 0; i < 100; i++)
                strcat(value, "\xc3\xa9"); /* é: 2 bytes */
        snprintf(text, sizeof text, EXEC "Restart=%s\n", value);
        int r;
        assert_null(parse_as("a.service", text, &r, NULL));
        char want[1024] = "test/a.service:3: Restart=: invalid value \"\\x01";
        for (int i = 0; i < 31; i++) /* 1 + 31 * 2 = 63 bytes of the 64 shown (QUOTE_MAX: a token) */
                strcat(want, "\xc3\xa9");
        strcat(want, "...\"");
        expect_msgs(LOG_ERR, want, -1);
}

/* ------------------------------------------------------------------------ */
/* Bad units: exact message, FILE:LINE, errno                                */
/* ------------------------------------------------------------------------ */

static void test_bad_inputs(void **state) {
        static const struct {
                const char *text;
                int error;
                const char *message; /* the first error; "test/a.service" prefix added */
        } table[] = {
                { EXEC "Restart=sometimes\n", -EINVAL, ":3: Restart=: invalid value \"sometimes\"" },
                { EXEC "RestartSec=5x\n", -EINVAL, ":3: RestartSec=: invalid time span \"5x\"" },
                { EXEC "TimeoutStopSec=-1\n", -EINVAL, ":3: TimeoutStopSec=: invalid time span \"-1\"" },
                { EXEC "RemainAfterExit=maybe\n", -EINVAL, ":3: RemainAfterExit=: invalid boolean \"maybe\"" },
                { EXEC "KillSignal=SIGFOO\n", -EINVAL, ":3: KillSignal=: invalid signal \"SIGFOO\"" },
                { EXEC "StartLimitBurst=-1\n", -EINVAL, ":3: StartLimitBurst=: invalid value \"-1\"" },
                { EXEC "RestartSteps=4294967296\n", -EINVAL, ":3: RestartSteps=: invalid value \"4294967296\"" },
                { EXEC "KillMode=none\n", -EOPNOTSUPP, ":3: KillMode=none is not supported" },
                { EXEC "Type=dbus\n", -EOPNOTSUPP,
                  ":3: Type=dbus is not supported: tend does not watch D-Bus names; use Type=simple, or Type=notify "
                  "if the program sends READY=1" },
                { EXEC "PIDFile=/run/../etc/x.pid\n", -EINVAL, ":3: PIDFile=: a path with \"..\": \"/run/../etc/x.pid\"" },
                { EXEC "Type=Simple\n", -EINVAL, ":3: Type=: invalid value \"Simple\"" },
                { "[Unit]\nFailureAction=reboot\n" EXEC, -EOPNOTSUPP, ":2: FailureAction=reboot is not supported" },
                { EXEC "SuccessExitStatus=0 300\n", -EINVAL, ":3: SuccessExitStatus=: invalid exit status or signal \"300\"" },
                { EXEC "SuccessExitStatus=SIGNOPE\n", -EINVAL,
                  ":3: SuccessExitStatus=: invalid exit status or signal \"SIGNOPE\"" },
                { EXEC "garbage\n", -EINVAL, ":3: syntax error: neither a [section] nor a KEY=VALUE assignment" },
                { EXEC " = value\n", -EINVAL, ":3: syntax error: assignment without a key" },
                { "ExecStart=/bin/true\n[Service]\n", -EINVAL, ":1: syntax error: ExecStart= before any [section]" },
                { "[Service\nExecStart=/bin/true\n", -EINVAL, ":1: syntax error: invalid section header" },
                { "[Serv]ice]\n" EXEC, -EINVAL, ":1: syntax error: invalid section header" },
                { "[Service]\nExecStart=bin/true\n", -EINVAL,
                  ":2: ExecStart=: neither an absolute path nor a file name: \"bin/true\"" },
                { "[Service]\nExecStart=/bin/\n", -EINVAL, ":2: ExecStart=: executable path is a directory: \"/bin/\"" },
                { "[Service]\nExecStart=-\n", -EINVAL, ":2: ExecStart=: empty executable path" },
                { "[Service]\nExecStart=@/bin/true\n", -EINVAL, ":2: ExecStart=: \"@\" without an argv[0] in \"@/bin/true\"" },
                { "[Service]\nExecStart=$CMD arg\n", -EINVAL,
                  ":2: ExecStart=: the executable may not be a variable: \"$CMD\"" },
                { "[Service]\nExecStart=/bin/echo \"unterminated\n", -EINVAL,
                  ":2: ExecStart=: unbalanced quoting in \"/bin/echo \"unterminated\"" },
                { "[Service]\nExecStart=/bin/echo ${FOO\n", -EINVAL,
                  ":2: ExecStart=: invalid variable reference in \"${FOO\" (write $$ for a literal $)" },
                { "[Service]\nExecStart=/bin/echo ${FOO:-x}\n", -EINVAL,
                  ":2: ExecStart=: invalid variable reference in \"${FOO:-x}\" (write $$ for a literal $)" },
                { "[Service]\nExecStart=/bin/echo $1\n", -EINVAL,
                  ":2: ExecStart=: invalid variable reference in \"$1\" (write $$ for a literal $)" },
                { "[Service]\nExecStart=/bin/echo %z\n", -EINVAL, ":2: ExecStart=: unknown specifier %z in \"%z\"" },
                { "[Service]\nExecStart=/bin/echo $\n", -EINVAL,
                  ":2: ExecStart=: invalid variable reference in \"$\" (write $$ for a literal $)" },
                { "[Service]\nExecStart=/bin/echo %q\n", -EOPNOTSUPP,
                  ":2: ExecStart=: specifier %q is newer than systemd 252: not supported in \"%q\"" },
                { EXEC "Environment=1FOO=x\n", -EINVAL, ":3: Environment=: invalid environment assignment \"1FOO=x\"" },
                { EXEC "Environment=NOEQUALS\n", -EINVAL, ":3: Environment=: invalid environment assignment \"NOEQUALS\"" },
                { EXEC "Environment=\"A=1\n", -EINVAL, ":3: Environment=: unbalanced quoting in \"\"A=1\"" },
                { EXEC "EnvironmentFile=etc/x\n", -EINVAL, ":3: EnvironmentFile=: not an absolute path: \"etc/x\"" },
                { EXEC "WorkingDirectory=srv\n", -EINVAL, ":3: WorkingDirectory=: not an absolute path: \"srv\"" },
                { EXEC "StandardOutput=socket\n", -EOPNOTSUPP,
                  ":3: StandardOutput=socket is not supported: tend has no socket activation" },
                { EXEC "StandardError=fd:web\n", -EOPNOTSUPP,
                  ":3: StandardError=fd:… is not supported: tend has no socket activation (no socket units to name)" },
                { EXEC "StandardOutput=file:log\n", -EINVAL, ":3: StandardOutput=: not an absolute path: \"log\"" },
                { EXEC "StandardOutput=console\n", -EINVAL, ":3: StandardOutput=: invalid value \"console\"" },
                { "[Service]\nExecStart=/bin/a\nExecStart=/bin/b\n", -EINVAL,
                  ":3: ExecStart=: more than one command, which only Type=oneshot allows" },
                { "[Service]\nExecStart=/bin/echo one ; /bin/echo \"two two\"\n", -EINVAL,
                  ":2: ExecStart=: more than one command, which only Type=oneshot allows" },
                { "[Service]\nType=oneshot\nExecStart=/bin/a\nRestart=always\n", -EINVAL,
                  ":4: Restart=always is not allowed for Type=oneshot" },
                { "[Service]\nType=simple\n", -EINVAL, ": no ExecStart=, which only Type=oneshot allows" },
                { "[Service]\nRemainAfterExit=yes\n", -EINVAL, ": no ExecStart=, ExecStop= or SuccessAction=" },
                { "[Service]\nExecStop=/bin/true\n", -EINVAL,
                  ": no ExecStart= and no SuccessAction=, which needs RemainAfterExit=yes" },
                { "", -EINVAL, ": no ExecStart=, ExecStop= or SuccessAction=" },
                { EXEC "Description=\xff\xfe\n", -EINVAL, ":3: syntax error: line is not valid UTF-8" },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                int r;
                char *message = NULL, want[512];
                snprintf(want, sizeof want, "test/a.service%s", table[i].message);
                n_msgs = 0;
                assert_null(parse_as("a.service", table[i].text, &r, &message));
                if (r != table[i].error || !message || strcmp(message, want) != 0)
                        fail_msg("case %zu: got %d \"%s\"\n        want %d \"%s\"", i, r, message ? message : "(null)",
                                 table[i].error, want);
                /* The same text was logged, as an error. */
                size_t j = 0;
                while (j < n_msgs && !(msgs[j].level == LOG_ERR && strcmp(msgs[j].text, want) == 0))
                        j++;
                if (j == n_msgs)
                        fail_msg("case %zu: \"%s\" was not logged as an error", i, want);
                free(message);
        }
        n_msgs = 0;

        /* A NUL byte: parsed from memory, so its length is explicit. */
        static const char nul[] = EXEC "Description=a\0b\n";
        struct unit_file *u = NULL;
        char *message = NULL;
        assert_int_equal(unit_file_parse("a.service", "test/a.service", nul, sizeof nul - 1, &u, &message), -EINVAL);
        assert_string_equal(message, "test/a.service:3: syntax error: NUL byte in line");
        free(message);
        n_msgs = 0;

        /* Every error of a file is reported, not only the first; the result is the first. */
        int r;
        assert_null(parse_as("a.service", EXEC "Restart=x\nKillSignal=y\nLimitNOFILE=z\n", &r, NULL));
        assert_int_equal(r, -EINVAL);
        expect_msgs(LOG_ERR, "test/a.service:3: Restart=: invalid value \"x\"",
                    LOG_ERR, "test/a.service:4: KillSignal=: invalid signal \"y\"",
                    LOG_ERR, "test/a.service:5: LimitNOFILE=: invalid value \"z\"", -1);

        /* Invalid names and oversized input. */
        assert_int_equal(unit_file_parse("a@.service", "t", "", 0, &u, NULL), -EINVAL);
        expect_msgs(LOG_ERR, "t: invalid unit name \"a@.service\"", -1);
        size_t big = UNIT_FILE_SIZE_MAX + 1;
        char *text = malloc(big);
        assert_non_null(text);
        memset(text, '#', big);
        assert_int_equal(unit_file_parse("a.service", "t", text, big, &u, NULL), -EFBIG);
        expect_msgs(LOG_ERR, "t: larger than 1048576 bytes", -1);
        free(text);
}

/* Requires=, Wants=, BindsTo=, After=, Before= (SPEC §3, §4): lists of
 * service names that accumulate, reset by an empty assignment, with
 * specifiers; other unit types are dropped with a note, bad names refused. */
static void test_dependency_keys(void **state) {
        struct unit_file *u = parse_ok("[Unit]\nRequires=b.service c.service\nRequires=d.service\nWants=e.service\n"
                                       "BindsTo=f.service\nAfter=b.service\nAfter=\nAfter=g.service\n"
                                       "Before=h.service i@x.service\n" EXEC);
        expect_no_msgs();
        assert_strv(u->requires, "b.service", "c.service", "d.service", NULL);
        assert_strv(u->wants, "e.service", NULL);
        assert_strv(u->binds_to, "f.service", NULL);
        assert_strv(u->after, "g.service", NULL);
        assert_strv(u->before, "h.service", "i@x.service", NULL);
        unit_file_free(u);

        /* %i in a template's instance: web@blue.service wants db@blue.service. */
        int r;
        char *message = NULL;
        u = parse_as("web@blue.service", "[Unit]\nWants=db@%i.service\nAfter=db@%i.service\n" EXEC, &r, &message);
        assert_non_null(u);
        assert_strv(u->wants, "db@blue.service", NULL);
        assert_strv(u->after, "db@blue.service", NULL);
        unit_file_free(u);

        /* After=network.target, common in real units: tend has no targets. */
        n_msgs = 0;
        u = parse_ok("[Unit]\nAfter=network.target b.service\nWants=network-online.target\n"
                     "Requires=dbus.socket\n" EXEC);
        expect_msgs(LOG_INFO, "test/a.service:2: After=\"network.target\" ignored: tend runs services only",
                    LOG_INFO, "test/a.service:3: Wants=\"network-online.target\" ignored: tend runs services only",
                    LOG_INFO, "test/a.service:4: Requires=\"dbus.socket\" ignored: tend runs services only", -1);
        assert_strv(u->after, "b.service", NULL);
        assert_null(u->wants);
        assert_null(u->requires);
        unit_file_free(u);

        /* Itself: a cycle of one, dropped with a warning. */
        n_msgs = 0;
        u = parse_ok("[Unit]\nAfter=a.service b.service\n" EXEC);
        expect_msgs(LOG_WARNING, "test/a.service:2: After=\"a.service\" names the unit itself, ignored", -1);
        assert_strv(u->after, "b.service", NULL);
        unit_file_free(u);

        /* A name that is no unit at all, or a template, is an error. */
        static const char *const bad[] = { "[Unit]\nRequires=b\n", "[Unit]\nAfter=b@.service\n",
                                           "[Unit]\nWants=/etc/b.service\n" };
        static const char *const want[] = { "test/a.service:2: Requires=: invalid unit name \"b\"",
                                            "test/a.service:2: After=: invalid unit name \"b@.service\"",
                                            "test/a.service:2: Wants=: invalid unit name \"/etc/b.service\"" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char text[256];
                snprintf(text, sizeof text, "%s" EXEC, bad[i]);
                n_msgs = 0;
                message = NULL;
                assert_null(parse_as("a.service", text, &r, &message));
                assert_int_equal(r, -EINVAL);
                if (strcmp(message, want[i]) != 0)
                        fail_msg("got \"%s\", want \"%s\"", message, want[i]);
                free(message);
        }
}

/* journal (issue 18): SyslogLevelPrefix=, SyslogLevel=, SyslogFacility=. */
static void test_syslog_keys(void **state) {
        struct unit_file *u = parse_ok(EXEC);
        assert_int_equal(unit_file_syslog_priority(u), LOG_DAEMON | LOG_INFO);
        assert_true(unit_file_syslog_level_prefix(u));
        unit_file_free(u);
        u = parse_ok(EXEC "SyslogLevelPrefix=no\nSyslogLevel=warning\nSyslogFacility=local7\n");
        assert_int_equal(unit_file_syslog_priority(u), LOG_LOCAL7 | LOG_WARNING);
        assert_false(unit_file_syslog_level_prefix(u));
        unit_file_free(u);
        u = parse_ok(EXEC "SyslogLevel=3\nSyslogFacility=kern\nSyslogLevelPrefix=yes\n");
        assert_int_equal(unit_file_syslog_priority(u), LOG_KERN | LOG_ERR);
        assert_true(unit_file_syslog_level_prefix(u));
        unit_file_free(u);
        u = parse_ok(EXEC "SyslogLevel=debug\nSyslogLevel=\nSyslogFacility=mail\nSyslogFacility=\n");
        assert_int_equal(unit_file_syslog_priority(u), LOG_DAEMON | LOG_INFO); /* empty: the default again */
        unit_file_free(u);
        const char *bad[] = { "SyslogLevel=loud", "SyslogLevel=8", "SyslogFacility=local8", "SyslogFacility=12",
                              "SyslogLevelPrefix=maybe" };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                char text[128];
                int r;
                snprintf(text, sizeof text, EXEC "%s\n", bad[i]);
                assert_null(parse_as("a.service", text, &r, NULL));
                assert_int_equal(r, -EINVAL);
        }
}

static void test_readiness_keys(void **state) {
        /* Readiness and the watchdog load (issue 7). */
        n_msgs = 0;
        struct unit_file *n = parse_ok("[Service]\nType=notify\nExecStart=/bin/true\nWatchdogSec=1.5\n"
                                       "WatchdogSignal=SIGUSR1\nNotifyAccess=all\n");
        expect_no_msgs();
        assert_int_equal(n->type, UNIT_TYPE_NOTIFY);
        assert_int_equal(n->watchdog, 1500 * USEC_PER_MSEC);
        assert_int_equal(n->watchdog_signal, SIGUSR1);
        assert_int_equal(n->notify_access, UNIT_NOTIFY_ACCESS_ALL);
        unit_file_free(n);
        n = parse_ok(EXEC);
        assert_int_equal(n->watchdog, 0);
        assert_int_equal(n->watchdog_signal, SIGABRT);
        assert_int_equal(n->notify_access, UNIT_NOTIFY_ACCESS_DEFAULT);
        unit_file_free(n);

        /* An empty assignment is a reset to the default: nothing to enforce. */
        struct unit_file *u = parse_ok("[Unit]\nAfter=\n" EXEC "User=\nWatchdogSec=\n");
        expect_no_msgs();
        unit_file_free(u);
        /* parsefix: systemd 252 ignores an empty Limit…= ("Failed to parse resource value, ignoring") */
        u = parse_ok(EXEC "LimitNOFILE=\n");
        expect_msgs(LOG_WARNING, "test/a.service:3: LimitNOFILE=: empty value, ignoring", -1);
        unit_file_free(u);
        /* A Limit… key systemd does not have is an unknown key, not a refusal. */
        u = parse_ok(EXEC "LimitBANANAS=3\n");
        expect_msgs(LOG_WARNING, "test/a.service:3: unknown key \"LimitBANANAS\" in section [Service], ignoring", -1);
        unit_file_free(u);
}

/* Type=forking, PIDFile=, GuessMainPID=, Type=idle (issue 16). */
static void test_forking_keys(void **state) {
        n_msgs = 0;
        struct unit_file *u = parse_ok("[Service]\nType=forking\nExecStart=/bin/true\nPIDFile=/run/a.pid\n");
        expect_no_msgs();
        assert_int_equal(u->type, UNIT_TYPE_FORKING);
        assert_string_equal(u->pid_file, "/run/a.pid");
        assert_true(u->guess_main_pid);
        unit_file_free(u);
        /* systemd: a relative path is under /run; /var/run/ is /run/. */
        u = parse_ok("[Service]\nType=forking\nExecStart=/bin/true\nPIDFile=d/a.pid\nGuessMainPID=no\n");
        assert_string_equal(u->pid_file, "/run/d/a.pid");
        assert_false(u->guess_main_pid);
        unit_file_free(u);
        u = parse_ok(EXEC "PIDFile=/var/run/nginx.pid\n");
        assert_string_equal(u->pid_file, "/run/nginx.pid");
        unit_file_free(u);
        u = parse_ok(EXEC "PIDFile=/run/a.pid\nPIDFile=\n");
        assert_null(u->pid_file);
        unit_file_free(u);
        /* Type=idle is simple (its only difference is console ordering). */
        u = parse_ok("[Service]\nType=idle\nExecStart=/bin/true\n");
        expect_no_msgs();
        assert_int_equal(u->type, UNIT_TYPE_SIMPLE);
        unit_file_free(u);
}

/* ------------------------------------------------------------------------ */
/* Command lines (systemd.service(5) "COMMAND LINES")                        */
/* ------------------------------------------------------------------------ */

/* A command's argv is one allocation (strv_pack()): the pointers, then the strings. */
static void test_packed_argv(void **state) {
        struct unit_file *u = parse_ok("[Service]\nExecStart=/bin/echo one \"two words\" %n\n");
        char **argv = u->exec_start.commands[0].argv;
        assert_strv(argv, "/bin/echo", "one", "two words", "a.service", NULL);
        const char *block = (const char *) (argv + 5);
        assert_ptr_equal(argv[0], block);
        for (int i = 1; i < 4; i++)
                assert_ptr_equal(argv[i], argv[i - 1] + strlen(argv[i - 1]) + 1);
        unit_file_free(u);

        char **v = NULL;
        assert_int_equal(strv_pack(NULL, &v), 0);
        assert_non_null(v);
        assert_null(v[0]);
        free(v);
}

static void test_command_line_examples(void **state) {
        /* Example: "This will execute /bin/echo with four arguments: one, two, two, and two two." */
        struct unit_file *u = parse_ok("[Service]\nEnvironment=\"ONE=one\" 'TWO=two two'\nExecStart=echo $ONE $TWO ${TWO}\n");
        assert_string_equal(u->exec_start.commands[0].path, "echo"); /* resolved in PATH at start */
        assert_strv(u->exec_start.commands[0].argv, "echo", "$ONE", "$TWO", "${TWO}", NULL); /* unexpanded at load */
        char **argv = expand(u, &u->exec_start, 0, NULL);
        assert_strv(argv, "echo", "one", "two", "two", "two two", NULL);
        strv_free(argv);
        unit_file_free(u);

        /*
         * Example: ${ONE} ${TWO} ${THREE} → one, 'two two' too, ""; $ONE $TWO $THREE → one, two two, too.
         * The man page long said 'one' (quotes kept) for the first: a documentation bug, fixed in systemd
         * PR #42753 — systemd removes quotes anywhere in a word, so ONE=one.
         */
        u = parse_ok("[Service]\nType=oneshot\n"
                     "Environment=ONE='one' \"TWO='two two' too\" THREE=\n"
                     "ExecStart=/bin/echo ${ONE} ${TWO} ${THREE}\n"
                     "ExecStart=/bin/echo $ONE $TWO $THREE\n");
        assert_strv(u->environment, "ONE=one", "TWO='two two' too", "THREE=", NULL);
        argv = expand(u, &u->exec_start, 0, NULL);
        assert_strv(argv, "/bin/echo", "one", "'two two' too", "", NULL);
        strv_free(argv);
        argv = expand(u, &u->exec_start, 1, NULL);
        assert_strv(argv, "/bin/echo", "one", "two two", "too", NULL);
        strv_free(argv);
        unit_file_free(u);

        /* Example: "ExecStart=echo / >/dev/null & \; \ ls" is echo with five arguments. */
        u = parse_ok("[Service]\nExecStart=echo / >/dev/null & \\; \\\nls\n");
        assert_strv(u->exec_start.commands[0].argv, "echo", "/", ">/dev/null", "&", ";", "ls", NULL);
        unit_file_free(u);

        /* Example: sh -c 'dmesg | tac' */
        u = parse_ok("[Service]\nExecStart=sh -c 'dmesg | tac'\n");
        assert_strv(u->exec_start.commands[0].argv, "sh", "-c", "dmesg | tac", NULL);
        unit_file_free(u);

        /*
         * Example: "ExecStart=echo one ; echo "two two"" — systemd (v257 and
         * later too) still splits at a lone ';', though its man page no longer
         * documents it: two commands, so Type=oneshot (one command otherwise:
         * refused in test_bad_inputs). tend splits as systemd does and warns.
         */
        u = parse_ok("[Service]\nType=oneshot\nExecStart=/bin/echo one ; /bin/echo \"two two\"\n");
        assert_int_equal(u->exec_start.n, 2);
        assert_strv(u->exec_start.commands[0].argv, "/bin/echo", "one", NULL);
        assert_strv(u->exec_start.commands[1].argv, "/bin/echo", "two two", NULL);
        expect_msgs(LOG_WARNING, "test/a.service:3: ExecStart=: ';' separates commands here, as in systemd, which no "
                                 "longer documents it: prefer one ExecStart= line per command", -1);
        unit_file_free(u);

        /* Example ":echo $USER ; -false ; +:@true $TEST", less the "+" tend refuses. */
        u = parse_ok("[Service]\nType=oneshot\nExecStart=:echo $USER ; -false ; :@true $TEST\n");
        n_msgs = 0;
        assert_int_equal(u->exec_start.n, 3);
        assert_int_equal(u->exec_start.commands[0].flags, UNIT_COMMAND_NO_ENV_EXPAND);
        argv = expand(u, &u->exec_start, 0, NULL);
        assert_strv(argv, "echo", "$USER", NULL);
        strv_free(argv);
        assert_int_equal(u->exec_start.commands[1].flags, UNIT_COMMAND_IGNORE_FAILURE);
        assert_strv(u->exec_start.commands[1].argv, "false", NULL);
        assert_string_equal(u->exec_start.commands[2].path, "true");
        assert_strv(u->exec_start.commands[2].argv, "$TEST", NULL); /* "$TEST" as argv[0] */
        unit_file_free(u);
}

static void test_quoting_and_escapes(void **state) {
        struct unit_file *u = parse_ok("[Service]\nExecStart=/bin/printf \"a\\tb\" \\x41 \\101 \\u00e9 x\\sy 'it\\'s' "
                                       "\"\" --opt=\"a b\"c 'say \"hi\"' a\\;b \";\"\n");
        assert_strv(u->exec_start.commands[0].argv, "/bin/printf", "a\tb", "A", "A", "\xc3\xa9", "x y", "it's", "",
                    "--opt=a bc", "say \"hi\"", "a\\;b", ";", NULL);
        /* An unknown escape is kept as written, with a warning (systemd's behaviour). */
        expect_msgs(LOG_WARNING, "test/a.service:2: ExecStart=: unknown escape sequence kept as written in "
                                 "\"/bin/printf \"a\\tb\" \\x41 \\101 \\u00e9 x\\sy 'it\\'s' \"\" --opt=\"a b\"c"
                                 "...\"", -1);
        unit_file_free(u);

        /* Prefixes in any order; '@' puts the next word in argv[0]. */
        u = parse_ok("[Service]\nExecStart=@-/bin/sleep my-sleep 10\nExecStop=-:@/bin/kill kill -TERM $MAINPID\n");
        assert_string_equal(u->exec_start.commands[0].path, "/bin/sleep");
        assert_strv(u->exec_start.commands[0].argv, "my-sleep", "10", NULL);
        assert_int_equal(u->exec_start.commands[0].flags, UNIT_COMMAND_IGNORE_FAILURE);
        assert_int_equal(u->exec_stop.commands[0].flags, UNIT_COMMAND_IGNORE_FAILURE | UNIT_COMMAND_NO_ENV_EXPAND);
        assert_strv(u->exec_stop.commands[0].argv, "kill", "-TERM", "$MAINPID", NULL);
        unit_file_free(u);

        /* Direct word extraction. */
        const char *p = "  one\t'two three'  four\\ five ";
        char *w = NULL;
        bool bad = false;
        assert_int_equal(unit_extract_word(&p, EXTRACT_UNQUOTE | EXTRACT_CUNESCAPE, &w, &bad), 1);
        assert_string_equal(w, "one");
        free(w);
        assert_int_equal(unit_extract_word(&p, EXTRACT_UNQUOTE | EXTRACT_CUNESCAPE, &w, &bad), 1);
        assert_string_equal(w, "two three");
        free(w);
        assert_int_equal(unit_extract_word(&p, EXTRACT_UNQUOTE | EXTRACT_CUNESCAPE, &w, &bad), 1);
        assert_string_equal(w, "four\\ five");
        assert_true(bad);
        free(w);
        assert_int_equal(unit_extract_word(&p, EXTRACT_UNQUOTE | EXTRACT_CUNESCAPE, &w, NULL), 0);
        assert_null(w);
        p = "'open";
        assert_int_equal(unit_extract_word(&p, EXTRACT_UNQUOTE, &w, NULL), -EINVAL);
        assert_int_equal(unit_extract_word(&p, EXTRACT_UNQUOTE | EXTRACT_RELAX, &w, NULL), 1);
        assert_string_equal(w, "open");
        free(w);
        p = "\\x00 \\400 \\ud800";
        assert_int_equal(unit_extract_word(&p, EXTRACT_CUNESCAPE, &w, &bad), 1); /* refused escapes stay as written */
        assert_string_equal(w, "\\x00");
        free(w);
}

static void test_variables(void **state) {
        struct unit_file *u = parse_ok("[Service]\n"
                                       "Environment=\"ARGS=-a  'b c'  d\" EMPTY= DOLLAR=$$x\n"
                                       "ExecStart=/bin/cmd $ARGS ${ARGS} pre${ARGS}post $$ARGS $$ $UNSET ${UNSET}x "
                                       "$EMPTY ${EMPTY} cost$5 ${DOLLAR}\n");
        char **unset = NULL;
        char **argv = expand(u, &u->exec_start, 0, &unset);
        assert_strv(argv, "/bin/cmd", "-a", "b c", "d", "-a  'b c'  d", "pre-a  'b c'  dpost", "$ARGS", "$", "x", "",
                    "cost$5", "$$x", NULL);
        assert_strv(unset, "UNSET", "UNSET", NULL);
        strv_free(argv);
        strv_free(unset);
        unit_file_free(u);
        n_msgs = 0;

        /* ':' leaves the words alone; expansion happens per start, against that start's environment. */
        u = parse_ok("[Service]\nExecStart=/bin/cmd $A\n");
        struct unit_command *cmd = &u->exec_start.commands[0];
        char *envp1[] = { S("A=first"), NULL }, *envp2[] = { S("A=second one"), NULL };
        assert_int_equal(unit_command_expand(cmd, envp1, &argv, NULL), 0);
        assert_strv(argv, "/bin/cmd", "first", NULL);
        strv_free(argv);
        assert_int_equal(unit_command_expand(cmd, envp2, &argv, NULL), 0);
        assert_strv(argv, "/bin/cmd", "second", "one", NULL);
        strv_free(argv);
        cmd->flags |= UNIT_COMMAND_NO_ENV_EXPAND;
        assert_int_equal(unit_command_expand(cmd, envp2, &argv, NULL), 0);
        assert_strv(argv, "/bin/cmd", "$A", NULL);
        strv_free(argv);
        unit_file_free(u);

        /* '@' with an argv[0] that expands to nothing never gives an empty argv. */
        u = parse_ok("[Service]\nExecStart=@/bin/cmd $NOTHING\n");
        argv = expand(u, &u->exec_start, 0, NULL);
        assert_strv(argv, "/bin/cmd", NULL);
        strv_free(argv);
        unit_file_free(u);
}

/* ------------------------------------------------------------------------ */
/* Specifiers and templates                                                  */
/* ------------------------------------------------------------------------ */

static void test_specifiers(void **state) {
        int r;
        struct unit_file *u = parse_as("web-front@a-b\\x2dc.service",
                                       "[Unit]\nDescription=%n|%N|%p|%P|%i|%I|%f|%j|%J|%%|100%\n"
                                       "[Service]\nExecStart=/bin/echo %i %%i\nSyslogIdentifier=%p\n"
                                       "Environment=INST=%i\nWorkingDirectory=/srv/%I\nStandardOutput=file:/log/%N\n",
                                       &r, NULL);
        assert_int_equal(r, 0);
        assert_string_equal(u->instance, "a-b\\x2dc");
        assert_string_equal(u->description, "web-front@a-b\\x2dc.service|web-front@a-b\\x2dc|web-front|web/front|"
                                            "a-b\\x2dc|a/b-c|/a/b-c|front|front|%|100%");
        assert_strv(u->exec_start.commands[0].argv, "/bin/echo", "a-b\\x2dc", "%i", NULL);
        assert_string_equal(u->syslog_identifier, "web-front");
        assert_strv(u->environment, "INST=a-b\\x2dc", NULL);
        assert_string_equal(u->working_directory, "/srv/a/b-c");
        assert_string_equal(u->standard_output.path, "/log/web-front@a-b\\x2dc");
        unit_file_free(u);

        /* A plain unit: %i is empty, %f is the unescaped prefix. */
        u = parse_ok("[Unit]\nDescription=[%i] %f %j\n" EXEC);
        assert_string_equal(u->description, "[] /a a");
        unit_file_free(u);
}

static void test_templates(void **state) {
        char want[PATH_MAX], want2[PATH_MAX];
        write_file("web@.service", "[Service]\nExecStart=/bin/echo %i %n\n");
        write_file("web@special.service", "[Service]\nExecStart=/bin/echo own file %i\n");

        struct unit_file *u = NULL;
        char *message = NULL;
        assert_int_equal(unit_load(dir, "web@one.service", &u, &message), 0);
        assert_null(message);
        assert_string_equal(u->name, "web@one.service");
        assert_string_equal(u->instance, "one");
        assert_string_equal(u->path, dir_path(want, "web@.service"));
        assert_strv(u->exec_start.commands[0].argv, "/bin/echo", "one", "web@one.service", NULL);
        u = unit_file_free(u);

        /* An instance with a file of its own uses it. */
        assert_int_equal(unit_load(dir, "web@special.service", &u, NULL), 0);
        assert_strv(u->exec_start.commands[0].argv, "/bin/echo", "own", "file", "special", NULL);
        u = unit_file_free(u);
        expect_no_msgs();

        /* A template never starts by itself. */
        assert_int_equal(unit_load(dir, "web@.service", &u, &message), -EINVAL);
        assert_string_equal(message, "web@.service: a template: only its instances (web@<instance>.service) run");
        expect_msgs(LOG_ERR, message, -1);
        free(message);

        /* No template, no instance. */
        assert_int_equal(unit_load(dir, "db@one.service", &u, &message), -ENOENT);
        snprintf(want2, sizeof want2, "%s/db@one.service: no such unit file", dir);
        assert_string_equal(message, want2);
        expect_msgs(LOG_ERR, want2, -1);
        free(message);

        /* Drop-ins of the instance and of its template are both read, by file
         * name; the instance's own file hides the template's of the same name. */
        snprintf(want, sizeof want, "%s/web@one.service.d", dir);
        assert_int_equal(mkdir(want, 0755), 0);
        snprintf(want2, sizeof want2, "%s/web@.service.d", dir);
        assert_int_equal(mkdir(want2, 0755), 0);
        write_file("web@.service.d/10-env.conf", "[Service]\nEnvironment=FROM=template\n");
        write_file("web@.service.d/20-restart.conf", "[Service]\nRestart=always\n");
        write_file("web@one.service.d/10-env.conf", "[Service]\nEnvironment=FROM=instance\n");
        assert_int_equal(unit_load(dir, "web@one.service", &u, NULL), 0);
        assert_strv(u->environment, "FROM=instance", NULL);
        assert_int_equal(u->restart, UNIT_RESTART_ALWAYS);
        char d1[PATH_MAX + 32], d2[PATH_MAX + 32];
        snprintf(d1, sizeof d1, "%s/10-env.conf", want);
        snprintf(d2, sizeof d2, "%s/20-restart.conf", want2);
        assert_strv(u->dropins, d1, d2, NULL);
        u = unit_file_free(u);
        /* another instance gets the template's only */
        assert_int_equal(unit_load(dir, "web@two.service", &u, NULL), 0);
        assert_strv(u->environment, "FROM=template", NULL);
        u = unit_file_free(u);
        expect_no_msgs();
}

/* ------------------------------------------------------------------------ */
/* Directories                                                               */
/* ------------------------------------------------------------------------ */

static void test_load_dir(void **state) {
        char p[PATH_MAX], m1[PATH_MAX + 128], m2[PATH_MAX + 128], m3[PATH_MAX + 128], m4[PATH_MAX + 128];
        write_file("good.service", EXEC "Restart=always\n");
        write_file("bad.service", EXEC "Restart=sometimes\nUnknownKey=1\n");
        write_file("warned.service", EXEC "UnknownKey=1\n");
        write_file("tmpl@.service", EXEC);
        write_file("masked.service", "");
        write_file("bad name.service", EXEC);
        write_file("x\xe9.service", EXEC); /* issue 19: a Latin-1 name, quoted escaped */
        write_file("README", "not a unit");
        write_file("other.socket", "[Socket]\n");
        assert_int_equal(symlink("/dev/null", dir_path(p, "nulled.service")), 0);
        assert_int_equal(mkdir(dir_path(p, "dir.service"), 0755), 0);
        assert_int_equal(mkdir(dir_path(p, "good.service.d"), 0755), 0); /* empty: nothing to read */

        struct unit_set *s = NULL;
        assert_int_equal(unit_load_dir(dir, &s), 0);
        assert_int_equal(s->n_units, 2);
        assert_string_equal(s->units[0]->name, "good.service");
        assert_int_equal(s->units[0]->restart, UNIT_RESTART_ALWAYS); /* unaffected by its bad neighbour */
        assert_string_equal(s->units[1]->name, "warned.service");

        static const struct {
                const char *name;
                int error;
        } errors[] = {
                { "bad name.service", -EINVAL }, { "bad.service", -EINVAL },    { "dir.service", -EINVAL },
                { "masked.service", -ERFKILL },  { "nulled.service", -ERFKILL }, { "x\xe9.service", -EINVAL },
        };
        assert_int_equal(s->n_errors, ELEMENTSOF(errors));
        for (size_t i = 0; i < ELEMENTSOF(errors); i++) {
                assert_string_equal(s->errors[i].name, errors[i].name);
                assert_int_equal(s->errors[i].error, errors[i].error);
                assert_non_null(s->errors[i].message);
        }
        snprintf(m1, sizeof m1, "%s/bad.service:3: Restart=: invalid value \"sometimes\"", dir);
        assert_string_equal(s->errors[1].message, m1);
        snprintf(m2, sizeof m2, "%s/masked.service: masked (empty, or a link to /dev/null), not loaded", dir);
        assert_string_equal(s->errors[3].message, m2);

        /* Every message of the directory, in order, each naming its file: the
         * names first (the other unit types, invalid names, links), then
         * each unit's file. */
        char e0[PATH_MAX + 128], e1[PATH_MAX + 128], w0[PATH_MAX + 128], w1[PATH_MAX + 128], w2[PATH_MAX + 128];
        snprintf(w1, sizeof w1, "%s: tend runs services only: ignored 1 socket (other.socket)", dir);
        snprintf(e0, sizeof e0, "%s: invalid unit name \"bad name.service\"", dir);
        snprintf(e1, sizeof e1, "%s: invalid unit name \"x\\xe9.service\"", dir); /* never the raw byte */
        snprintf(w0, sizeof w0, "%s/bad.service:4: unknown key \"UnknownKey\" in section [Service], ignoring", dir);
        snprintf(m3, sizeof m3, "%s/dir.service: not a regular file", dir);
        snprintf(m4, sizeof m4, "%s/nulled.service: masked (a link to /dev/null), not loaded", dir);
        snprintf(w2, sizeof w2, "%s/warned.service:3: unknown key \"UnknownKey\" in section [Service], ignoring", dir);
        expect_msgs(LOG_WARNING, w1, LOG_ERR, e0, LOG_NOTICE, m4, LOG_ERR, e1, LOG_ERR, m1, LOG_WARNING, w0, LOG_ERR, m3,
                    LOG_NOTICE, m2, LOG_WARNING, w2, -1);
        unit_set_free(s);

        /* A directory that cannot be read is the only failure of the whole call. */
        assert_int_equal(unit_load_dir(dir_path(p, "missing"), &s), -ENOENT);
        snprintf(m1, sizeof m1, "%s/missing: cannot read the unit directory: No such file or directory", dir);
        expect_msgs(LOG_ERR, m1, -1);

        /* An empty directory is an empty set. */
        assert_int_equal(mkdir(dir_path(p, "empty"), 0755), 0);
        assert_int_equal(unit_load_dir(p, &s), 0);
        assert_int_equal(s->n_units + s->n_errors, 0);
        unit_set_free(s);
}

/* ------------------------------------------------------------------------ */
/* The environment of a start                                                */
/* ------------------------------------------------------------------------ */

static void test_environment_builder(void **state) {
        char *base[] = { S("HOME=/root"),       S("NOTIFY_SOCKET=/run/systemd/notify"), S("WATCHDOG_USEC=1000"),
                         S("WATCHDOG_PID=1"),   S("LISTEN_FDS=2"), S("LISTEN_PID=1"),       S("LISTEN_FDNAMES=a:b"),
                         S("TEND_SOCKET=/x"),   S("JOURNAL_STREAM=8:9"), S("FOO=base"),     S("WATCHDOG=kept"),
                         S("NOTIFY_SOCKETS=kept"), S("FOO=duplicate"), S("NOEQUALS"),       S("=novalue"),
                         S("LANG=C.UTF-8"),     NULL };
        char **envp = NULL;
        assert_int_equal(unit_build_environment("a.service", base, 0, NULL, NULL, 0, &envp), 0);
        assert_strv(envp, "HOME=/root", "FOO=base", "WATCHDOG=kept", "NOTIFY_SOCKETS=kept", "LANG=C.UTF-8",
                    "PATH=" UNIT_DEFAULT_PATH, NULL);
        envp = strv_free(envp);

        /* Overrides in place, in order: tend's, MAINPID, Environment=, then EnvironmentFile=. */
        char path[PATH_MAX], optional[PATH_MAX], glob[PATH_MAX];
        write_file("env", "# comment\n; comment too\nFOO=from file\nBAR=\"quoted # not a comment\"\nNEW='x'\n");
        write_file("env.d-1", "GLOB=1\n");
        write_file("env.d-2", "GLOB=2\nMAINPID=file\n");
        const struct unit_env_file files[] = {
                { dir_path(path, "env"), false },
                { dir_path(optional, "missing"), true },
                { dir_path(glob, "env.d-*"), false },
        };
        char *base2[] = { S("PATH=/bin"), S("FOO=tend"), S("BAR=tend"), S("MAINPID=stale"), NULL };
        char *environment[] = { S("BAR=unit"), S("FOO=unit"), S("ONLY=unit"), NULL };
        assert_int_equal(unit_build_environment("a.service", base2, 4242, environment, files, 3, &envp), 0);
        assert_strv(envp, "PATH=/bin", "FOO=from file", "BAR=quoted # not a comment", "MAINPID=file", "ONLY=unit",
                    "NEW=x", "GLOB=2", NULL);
        envp = strv_free(envp);
        assert_int_equal(unit_build_environment("a.service", base2, 4242, NULL, NULL, 0, &envp), 0);
        assert_strv(envp, "PATH=/bin", "FOO=tend", "BAR=tend", "MAINPID=4242", NULL);
        envp = strv_free(envp);
        expect_no_msgs();

        /* A missing file without '-' fails the start, naming the unit and the file. */
        char want[PATH_MAX + 128];
        const struct unit_env_file missing = { optional, false };
        assert_int_equal(unit_build_environment("a.service", base2, 0, NULL, &missing, 1, &envp), -ENOENT);
        assert_null(envp);
        snprintf(want, sizeof want, "a.service: EnvironmentFile=\"%s\": No such file or directory", optional);
        expect_msgs(LOG_ERR, want, -1);

        /* Read at each start, not at load: a change shows at the next start. */
        write_file("env", "FOO=changed\n");
        assert_int_equal(unit_build_environment("a.service", NULL, 0, NULL, files, 1, &envp), 0);
        assert_strv(envp, "PATH=" UNIT_DEFAULT_PATH, "FOO=changed", NULL);
        envp = strv_free(envp);

        /* A directory is not an environment file. */
        const struct unit_env_file d = { dir, false };
        assert_int_equal(unit_build_environment("a.service", NULL, 0, NULL, &d, 1, &envp), -EINVAL);
        snprintf(want, sizeof want, "a.service: EnvironmentFile=\"%s\": not a regular file", dir);
        expect_msgs(LOG_ERR, want, -1);

        assert_true(unit_env_is_private("LISTEN_FDS=3"));
        assert_true(unit_env_is_private("TEND_X"));
        assert_false(unit_env_is_private("LISTEN=3"));
        assert_false(unit_env_is_private("JOURNAL_STREAMS=1"));
}

static void test_environment_file_format(void **state) {
        static const char text[] = "# comment \\\n"
                                   "A=1\n"
                                   "  B = two  words  \n"
                                   "C=\"quoted \\\"x\\\" \\$HOME \\n \\\\ \\`\"\n"
                                   "D='single $x \\n'\n"
                                   "E=con\\\n"
                                   "tinued\n"
                                   "F=\"multi\n"
                                   "line\"\n"
                                   "G=unquoted # not a comment\n"
                                   "H=\n"
                                   "I=\"a\" 'b' c\n"
                                   "J=esc\\aped\\ space\n"
                                   "1BAD=x\n"
                                   "NOEQ\n"
                                   "A=last wins\r\n"
                                   "K=\"unterminated";
        char **envp = NULL;
        assert_int_equal(unit_env_file_parse(text, sizeof text - 1, "f", &envp), 12);
        assert_strv(envp, "A=last wins", "B=two  words", "C=quoted \"x\" $HOME \\n \\ `", "D=single $x \\n",
                    "E=continued", "F=multi\nline", "G=unquoted # not a comment", "H=", "I=abc", "J=escaped space",
                    "K=unterminated", NULL);
        strv_free(envp);
        expect_msgs(LOG_WARNING, "f:14: invalid variable name \"1BAD\", ignoring", LOG_WARNING,
                    "f:15: line without '=' ignored: \"NOEQ\"", -1);
}

static void test_find_executable(void **state) {
        struct unit_command cmd = { .path = S("sh") };
        char *found = NULL, p[PATH_MAX];
        char *envp[] = { S("PATH=relative:/nonexistent::/usr/bin:/bin"), NULL };
        assert_int_equal(unit_command_find_executable(&cmd, envp, &found), 0);
        assert_true(strcmp(found, "/usr/bin/sh") == 0 || strcmp(found, "/bin/sh") == 0);
        free(found);
        assert_int_equal(unit_command_find_executable(&cmd, NULL, &found), 0); /* UNIT_DEFAULT_PATH */
        free(found);
        cmd.path = S("/absolute/is/kept");
        assert_int_equal(unit_command_find_executable(&cmd, envp, &found), 0);
        assert_string_equal(found, "/absolute/is/kept");
        free(found);
        cmd.path = S("no-such-program-anywhere");
        assert_int_equal(unit_command_find_executable(&cmd, envp, &found), -ENOENT);
        /* Found but not executable: -EACCES (exit 126), unless root may exec it anyway. */
        write_file("prog", "#!/bin/sh\n");
        char path_env[PATH_MAX + 8];
        snprintf(path_env, sizeof path_env, "PATH=%s", dir);
        char *envp2[] = { path_env, NULL };
        cmd.path = S("prog");
        int r = unit_command_find_executable(&cmd, envp2, &found);
        assert_int_equal(r, -EACCES); /* mode 0644: no x bit for anyone, root included */
        assert_int_equal(chmod(dir_path(p, "prog"), 0755), 0);
        assert_int_equal(unit_command_find_executable(&cmd, envp2, &found), 0);
        assert_string_equal(found, p);
        free(found);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_unit_names, setup, teardown),
                cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
                cmocka_unit_test_setup_teardown(test_packed_argv, setup, teardown),
                cmocka_unit_test_setup_teardown(test_every_key, setup, teardown),
                cmocka_unit_test_setup_teardown(test_booleans_and_numbers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_timespans, setup, teardown),
                cmocka_unit_test_setup_teardown(test_syntax, setup, teardown),
                cmocka_unit_test_setup_teardown(test_continuation_values, setup, teardown),
                cmocka_unit_test_setup_teardown(test_repeated_keys, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown_keys_warn, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_inputs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dependency_keys, setup, teardown),
                cmocka_unit_test_setup_teardown(test_readiness_keys, setup, teardown),
                cmocka_unit_test_setup_teardown(test_forking_keys, setup, teardown),
                cmocka_unit_test_setup_teardown(test_syslog_keys, setup, teardown),
                cmocka_unit_test_setup_teardown(test_command_line_examples, setup, teardown),
                cmocka_unit_test_setup_teardown(test_quoting_and_escapes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_variables, setup, teardown),
                cmocka_unit_test_setup_teardown(test_specifiers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_templates, setup, teardown),
                cmocka_unit_test_setup_teardown(test_load_dir, setup, teardown),
                cmocka_unit_test_setup_teardown(test_environment_builder, setup, teardown),
                cmocka_unit_test_setup_teardown(test_environment_file_format, setup, teardown),
                cmocka_unit_test_setup_teardown(test_find_executable, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
