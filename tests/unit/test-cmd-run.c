/* SPDX-License-Identifier: MIT */
/*
 * "Run CMD and exit with its status" (supervisor/entrypoint/cmd-run.h), the
 * one implementation of entrypoint and combined modes: the status table of
 * SPEC §6, then real CMDs through a reaper, their exec results taken from the
 * reaper's fd as both modes' loops do.
 */
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
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmd-run.h"
#include "log.h"
#include "macro.h"
#include "time-util.h"

static char last_error[2048];

static void sink(int level, const char *msg, void *userdata) {
        if (level <= LOG_ERR)
                snprintf(last_error, sizeof last_error, "%s", msg);
}

static struct exit_reason exited(int code) {
        return (struct exit_reason) { .kind = EXIT_REASON_EXITED, .status = code };
}

static void test_exec_failure_table(void **state) {
        struct { int error, stage, status; } cases[] = {
                { -ENOENT, EXIT_STAGE_EXEC, 127 },
                { -ENOTDIR, EXIT_STAGE_EXEC, 127 }, /* was 126 in combined mode */
                { -EACCES, EXIT_STAGE_EXEC, 126 },
                { -ENOEXEC, EXIT_STAGE_EXEC, 126 },
                { -EPERM, EXIT_STAGE_EXEC, 126 },
                { -ELOOP, EXIT_STAGE_EXEC, 126 },
                { -ENOENT, EXIT_STAGE_SETUP, 126 }, /* not the file missing: tend's set-up failed */
                { -ENOTTY, EXIT_STAGE_SETUP, 126 },
                { -EBADF, EXIT_STAGE_FDS, 126 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                assert_int_equal(cmd_run_exec_failure_status(cases[i].error, cases[i].stage), cases[i].status);
                /* An exec failure wins over the child's own _exit(127). */
                struct exit_reason r = exited(127);
                assert_int_equal(cmd_run_status(cases[i].error, cases[i].stage, &r), cases[i].status);
        }
}

static void test_exit_table(void **state) {
        for (int code = 0; code <= 255; code++) {
                struct exit_reason r = exited(code);
                assert_int_equal(cmd_run_status(0, EXIT_STAGE_EXEC, &r), code);
                /* Not announced yet (cannot happen at exit; harmless): the exit decides. */
                assert_int_equal(cmd_run_status(-EINPROGRESS, EXIT_STAGE_EXEC, &r), code);
        }
        int sigs[] = { SIGTERM, SIGKILL, SIGINT, SIGSEGV };
        for (size_t i = 0; i < ELEMENTSOF(sigs); i++) {
                struct exit_reason r = { .kind = EXIT_REASON_KILLED, .status = sigs[i] };
                assert_int_equal(cmd_run_status(0, EXIT_STAGE_EXEC, &r), 128 + sigs[i]);
        }
}

/* Pops p's exec event off the reaper as a loop does: poll its fd, dispatch. */
static void wait_exec_event(struct exit_reaper *r, struct exit_process *p) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC;
        for (;;) {
                struct pollfd pfd = { .fd = exit_reaper_fd(r), .events = POLLIN };
                if (poll(&pfd, 1, 100) > 0) {
                        assert_true(exit_reaper_dispatch(r) >= 0);
                        struct exit_process *q;
                        while (exit_reaper_next_exec(r, &q) == 0) {
                                bool mine = q == p;
                                exit_process_unref(q);
                                if (mine)
                                        return;
                        }
                }
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("no exec event for pid %d: the reaper's fd never announced it", exit_process_pid(p));
        }
}

static struct exit_reason wait_exit(struct exit_hub *hub, struct exit_reaper *r, struct exit_process *p) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC;
        struct exit_reason reason;
        while (exit_hub_take(hub, exit_process_id(p), &reason) != 0) {
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("pid %d never reaped", exit_process_pid(p));
                struct pollfd pfd = { .fd = exit_reaper_fd(r), .events = POLLIN };
                (void) poll(&pfd, 1, 100);
                assert_true(exit_reaper_dispatch(r) >= 0);
        }
        return reason;
}

/* Real CMDs: the status and the message a user sees. */
static void test_real_cmds(void **state) {
        char file[] = "/tmp/tend-cmd-run-XXXXXX";
        int fd = mkostemp(file, O_CLOEXEC);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(chmod(file, 0644), 0);
        struct { const char *cmd; int status; const char *said; } cases[] = {
                { "/nonexistent/tend-test-cmd", 127, "/nonexistent/tend-test-cmd: No such file or directory" },
                { "tend-no-such-command-anywhere", 127, "tend-no-such-command-anywhere: No such file or directory" },
                { "/etc/passwd/tend-test-cmd", 127, "/etc/passwd/tend-test-cmd: Not a directory" },
                { file, 126, "Permission denied" },
                { "true", 0, NULL },
                { "false", 1, NULL },
        };
        struct exit_hub *hub;
        struct exit_reaper *r;
        assert_int_equal(exit_hub_new(0, 0, &hub), 0);
        assert_int_equal(exit_reaper_new(hub, EXIT_REAPER_EXEC_EVENTS, &r), 0);
        for (size_t n = 0; n < 2 * ELEMENTSOF(cases); n++) {
                size_t i = n % ELEMENTSOF(cases);
                bool beside_units = n >= ELEMENTSOF(cases); /* combined mode */
                char *argv[] = { (char *) cases[i].cmd, NULL };
                struct exit_process *p;
                last_error[0] = '\0';
                assert_int_equal(cmd_run_spawn(r, argv, 0, beside_units, &p), 0);
                /* Beside units, spawn returns before CMD's exec (never the
                 * vfork path): its status is not known yet, whatever the build. */
                if (beside_units && exit_process_exec_result(p, NULL) != -EINPROGRESS)
                        fail_msg("%s: spawn waited for the exec (the vfork path) beside units", cases[i].cmd);
                wait_exec_event(r, p);
                int k = cmd_run_exec_result(cases[i].cmd, p);
                struct exit_reason reason = wait_exit(hub, r, p);
                assert_int_equal(cmd_run_exited(cases[i].cmd, p, &reason), cases[i].status);
                if (cases[i].said) {
                        assert_true(k < 0);
                        if (!strstr(last_error, cases[i].said))
                                fail_msg("%s: said %s, not %s", cases[i].cmd, last_error, cases[i].said);
                } else {
                        assert_int_equal(k, 0);
                        assert_string_equal(last_error, "");
                }
                exit_process_unref(p);
        }
        exit_reaper_free(r);
        exit_hub_unref(hub);
        unlink(file);
}

static int setup(void **state) {
        log_set_sink(sink, NULL);
        return 0;
}

static int teardown(void **state) {
        log_set_sink(NULL, NULL);
        return 0;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec_failure_table),
                cmocka_unit_test(test_exit_table),
                cmocka_unit_test(test_real_cmds),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
