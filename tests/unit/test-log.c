/* SPDX-License-Identifier: MIT */
/* The programs' own logging (supervisor/basic/log.h): %m names the error
 * given to log_*_errno(), whatever its sign; the return value; errno kept. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

static char last[2048];
static int last_level, n_lines;

static void sink(int level, const char *msg, void *userdata) {
        (void) userdata;
        snprintf(last, sizeof last, "%s", msg);
        last_level = level;
        n_lines++;
}

static int setup(void **state) {
        log_set_sink(sink, NULL);
        log_set_max_level(LOG_DEBUG);
        last[0] = '\0';
        n_lines = 0;
        return 0;
}

static int teardown(void **state) {
        log_set_sink(NULL, NULL);
        log_set_max_level(LOG_WARNING);
        return 0;
}

static void test_percent_m_names_the_error_of_either_sign(void **state) {
        errno = EINTR;
        assert_int_equal(log_error_errno(-ENOENT, "unit %s: %m", "a.service"), -ENOENT);
        assert_string_equal(last, "unit a.service: No such file or directory");
        assert_int_equal(last_level, LOG_ERR);
        assert_int_equal(errno, EINTR); /* the caller's errno is as it was */

        assert_int_equal(log_warning_errno(EACCES, "b: %m"), -EACCES);
        assert_string_equal(last, "b: Permission denied");
        assert_int_equal(errno, EINTR);
}

static void test_synthetic_errors_are_returned_without_their_mark(void **state) {
        assert_int_equal(log_error_errno(SYNTHETIC_ERRNO(EINVAL), "bad value: %m"), -EINVAL);
        assert_string_equal(last, "bad value: Invalid argument");
        assert_int_equal(log_error_errno(-SYNTHETIC_ERRNO(EBADMSG), "x"), -EBADMSG);
        assert_int_equal(log_errno_value(SYNTHETIC_ERRNO(ENOEXEC)), ENOEXEC);
        assert_int_equal(log_errno_value(-ENOTDIR), ENOTDIR);
}

static void test_a_dropped_message_still_returns_the_error(void **state) {
        log_set_max_level(LOG_WARNING);
        assert_int_equal(log_debug_errno(ENOMEM, "not shown: %m"), -ENOMEM);
        assert_int_equal(n_lines, 0);
        assert_int_equal(log_error_errno(0, "no error"), 0);
        assert_int_equal(n_lines, 1);
}

static void test_the_unit_a_message_is_about(void **state) {
        char b[64];
        assert_int_equal(log_message_unit("web.service: running", b, sizeof b), 11);
        assert_string_equal(b, "web.service");
        assert_int_equal(log_message_unit("unit a@x-1.service: cannot open file:/x: No such file", b, sizeof b), 13);
        assert_string_equal(b, "a@x-1.service");
        assert_int_equal(log_message_unit("logs: writing to tend's stdout failed", b, sizeof b), 0);
        assert_int_equal(log_message_unit("web: no suffix", b, sizeof b), 0);
        assert_int_equal(log_message_unit(".service: nothing before the suffix", b, sizeof b), 0);
        assert_int_equal(log_message_unit("web.service", b, sizeof b), 0);        /* no colon */
        assert_int_equal(log_message_unit("web.service is up", b, sizeof b), 0);
        assert_int_equal(log_message_unit("a-very-long-unit-name.service: x", b, 8), 0); /* does not fit */
}

static void test_journal_stream_names_the_file_of_the_fd(void **state) {
        char path[] = "/tmp/test-log-XXXXXX", text[64];
        int fd = mkstemp(path);
        struct stat st;
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &st), 0);
        snprintf(text, sizeof text, "%llu:%llu", (unsigned long long) st.st_dev, (unsigned long long) st.st_ino);
        assert_true(log_stream_is_journal(fd, text));
        snprintf(text, sizeof text, "%llu:%llu", (unsigned long long) st.st_dev, (unsigned long long) st.st_ino + 1);
        assert_false(log_stream_is_journal(fd, text));
        assert_false(log_stream_is_journal(fd, "12"));
        assert_false(log_stream_is_journal(fd, "1:2x"));
        assert_false(log_stream_is_journal(fd, NULL));
        assert_false(log_stream_is_journal(-1, "1:2"));
        close(fd);
        unlink(path);
}

/* What reaches a file on stderr: one line per message, after a timestamp
 * when the target says so, and no timestamp otherwise. */
static void test_stderr_lines_carry_a_timestamp_when_asked(void **state) {
        char path[] = "/tmp/test-log-XXXXXX", buf[512] = "";
        int fd = mkstemp(path), saved = dup(STDERR_FILENO);
        assert_true(fd >= 0 && saved >= 0);
        log_set_sink(NULL, NULL);
        assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
        log_set_target(LOG_TARGET_STDERR_TIME);
        log_error("unit x.service: first");
        log_set_target(LOG_TARGET_STDERR);
        log_warning("second");
        log_set_target(LOG_TARGET_AUTO);
        assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
        close(saved);
        assert_true(pread(fd, buf, sizeof buf - 1, 0) > 0);
        close(fd);
        unlink(path);
        int y, mo, d, h, mi, s, ms, used = 0;
        char zone[8];
        assert_int_equal(sscanf(buf, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%5s %n", &y, &mo, &d, &h, &mi, &s, &ms, zone, &used), 8);
        assert_true(zone[0] == '+' || zone[0] == '-');
        assert_string_equal(buf + used, "tend: error: unit x.service: first\ntend: warning: second\n");
}

static void test_time_format(void **state) {
        char b[LOG_TIME_MAX];
        setenv("TZ", "UTC", 1);
        assert_string_equal(log_format_time(1700000000123456ull, b), "2023-11-14T22:13:20.123+0000");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_percent_m_names_the_error_of_either_sign, setup, teardown),
                cmocka_unit_test_setup_teardown(test_synthetic_errors_are_returned_without_their_mark, setup, teardown),
                cmocka_unit_test_setup_teardown(test_a_dropped_message_still_returns_the_error, setup, teardown),
                cmocka_unit_test(test_the_unit_a_message_is_about),
                cmocka_unit_test(test_journal_stream_names_the_file_of_the_fd),
                cmocka_unit_test_setup_teardown(test_stderr_lines_carry_a_timestamp_when_asked, setup, teardown),
                cmocka_unit_test(test_time_format),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
