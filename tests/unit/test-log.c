/* SPDX-License-Identifier: MIT */
/* The programs' own logging (supervisor/basic/log.h): %m names the error
 * given to log_*_errno(), whatever its sign; the return value; errno kept. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_percent_m_names_the_error_of_either_sign, setup, teardown),
                cmocka_unit_test_setup_teardown(test_synthetic_errors_are_returned_without_their_mark, setup, teardown),
                cmocka_unit_test_setup_teardown(test_a_dropped_message_still_returns_the_error, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
