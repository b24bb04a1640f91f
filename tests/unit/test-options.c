/* SPDX-License-Identifier: MIT */
/* Time spans, signal names and tend's command line (docs/tend.8.md). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <cmocka.h>

#include "macro.h"
#include "options.h"
#include "signal-util.h"
#include "timespan.h"

static void test_timespan(void **state) {
        static const struct { const char *in; usec_t want; } ok[] = {
                { "5", 5 * USEC_PER_SEC }, { "5s", 5 * USEC_PER_SEC }, { "500ms", 500 * USEC_PER_MSEC },
                { "1min 30s", 90 * USEC_PER_SEC }, { "1min30s", 90 * USEC_PER_SEC }, { "2h", 7200 * USEC_PER_SEC },
                { "1.5s", 1500 * USEC_PER_MSEC }, { "10us", 10 }, { "3 min", 180 * USEC_PER_SEC },
                { "1d 1h", 90000 * USEC_PER_SEC }, { "infinity", USEC_INFINITY }, { "0", 0 }, { " 7s ", 7 * USEC_PER_SEC },
                { "2m", 120 * USEC_PER_SEC }, { "1w", 604800 * USEC_PER_SEC }, { "100msec", 100 * USEC_PER_MSEC },
        };
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
                usec_t v = 0;
                if (parse_timespan(ok[i].in, USEC_PER_SEC, &v) != 0)
                        fail_msg("\"%s\" refused", ok[i].in);
                if (v != ok[i].want)
                        fail_msg("\"%s\" = %llu µs, want %llu", ok[i].in, (unsigned long long) v,
                                 (unsigned long long) ok[i].want);
        }
        static const char *bad[] = { "", "s", "5x", "-1", "1..5s", "five", "5 s s", "1min -3s", ".", "99999999999999999999" };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                usec_t v = 42;
                if (parse_timespan(bad[i], USEC_PER_SEC, &v) >= 0)
                        fail_msg("\"%s\" accepted as %llu", bad[i], (unsigned long long) v);
                assert_int_equal(v, 42); /* untouched on failure */
        }
        usec_t v;
        assert_int_equal(parse_timespan("5", USEC_PER_MSEC, &v), 0);
        assert_int_equal(v, 5 * USEC_PER_MSEC);
        char buf[64];
        assert_string_equal(format_timespan(90 * USEC_PER_SEC + 5 * USEC_PER_MSEC, buf), "1min 30s 5ms");
        assert_string_equal(format_timespan(USEC_INFINITY, buf), "infinity");
        assert_string_equal(format_timespan(0, buf), "0");
}

static void test_signal_names(void **state) {
        assert_int_equal(signal_from_string("TERM"), SIGTERM);
        assert_int_equal(signal_from_string("SIGTERM"), SIGTERM);
        assert_int_equal(signal_from_string("sigquit"), SIGQUIT);
        assert_int_equal(signal_from_string("9"), SIGKILL);
        assert_int_equal(signal_from_string("RTMIN"), SIGRTMIN);
        assert_int_equal(signal_from_string("RTMIN+2"), SIGRTMIN + 2);
        assert_int_equal(signal_from_string("RTMAX-1"), SIGRTMAX - 1);
        assert_int_equal(signal_from_string("0"), -EINVAL);
        assert_int_equal(signal_from_string("65"), -EINVAL);
        assert_int_equal(signal_from_string("NOPE"), -EINVAL);
        assert_int_equal(signal_from_string(""), -EINVAL);
        assert_int_equal(signal_from_string("RTMIN+99"), -EINVAL);
        char buf[24];
        assert_string_equal(signal_to_string(SIGTERM, buf), "SIGTERM");
        assert_string_equal(signal_to_string(SIGRTMIN + 3, buf), "SIGRTMIN+3");

        sigset_t set;
        signal_forward_set(&set);
        assert_true(sigismember(&set, SIGTERM));
        assert_true(sigismember(&set, SIGWINCH));
        assert_true(sigismember(&set, SIGTSTP));
        assert_true(sigismember(&set, SIGRTMIN));
        assert_false(sigismember(&set, SIGCHLD));
        assert_false(sigismember(&set, SIGKILL));
        assert_false(sigismember(&set, SIGSEGV));
}

static int parse(struct tend_options *o, ...) {
        char *argv[32];
        int argc = 0;
        va_list ap;
        va_start(ap, o);
        argv[argc++] = (char *) "tend";
        for (char *a; (a = va_arg(ap, char *)); )
                argv[argc++] = a;
        va_end(ap);
        argv[argc] = NULL;
        return options_parse(argc, argv, o);
}

static void test_options(void **state) {
        struct tend_options o;
        assert_int_equal(parse(&o, "--", "sleep", "1", NULL), 0);
        assert_string_equal(o.cmd[0], "sleep");
        assert_string_equal(o.cmd[1], "1");
        assert_null(o.cmd[2]);
        assert_false(o.process_group);
        assert_int_equal(o.stop_timeout, 5 * USEC_PER_SEC);
        assert_int_equal(o.log_level, LOG_ERR);

        /* CMD's own options are never tend's. */
        assert_int_equal(parse(&o, "-g", "ls", "-v", "--remap", NULL), 0);
        assert_true(o.process_group);
        assert_string_equal(o.cmd[0], "ls");
        assert_string_equal(o.cmd[1], "-v");
        assert_int_equal(o.log_level, LOG_ERR);

        assert_int_equal(parse(&o, "--remap", "TERM:QUIT", "--remap", "2:SIGUSR1", "--stop-timeout", "1min", "-vv",
                               "--", "x", NULL), 0);
        assert_int_equal(options_remap(&o, SIGTERM), SIGQUIT);
        assert_int_equal(options_remap(&o, SIGINT), SIGUSR1);
        assert_int_equal(options_remap(&o, SIGHUP), SIGHUP);
        assert_int_equal(o.stop_timeout, 60 * USEC_PER_SEC);
        assert_int_equal(o.log_level, LOG_DEBUG);

        assert_int_equal(parse(&o, "--log-level", "info", "--", "x", NULL), 0);
        assert_int_equal(o.log_level, LOG_INFO);

        /* Usage errors: -EINVAL (tend exits 2). */
        assert_int_equal(parse(&o, NULL), -EINVAL);
        assert_int_equal(parse(&o, "--", NULL), -EINVAL);
        assert_int_equal(parse(&o, "--bogus", "--", "x", NULL), -EINVAL);
        assert_int_equal(parse(&o, "-z", "--", "x", NULL), -EINVAL);
        assert_int_equal(parse(&o, "--remap", "TERM", "--", "x", NULL), -EINVAL);
        assert_int_equal(parse(&o, "--remap", "TERM:NOPE", "--", "x", NULL), -EINVAL);
        assert_int_equal(parse(&o, "--stop-timeout", "soon", "--", "x", NULL), -EINVAL);
        assert_int_equal(parse(&o, "--log-level", "loud", "--", "x", NULL), -EINVAL);
        assert_int_equal(parse(&o, "--stop-timeout", NULL), -EINVAL);
        assert_int_equal(parse(&o, "--config-dir", "/tmp", NULL), 0);
        assert_string_equal(o.config_dir, "/tmp");
        assert_null(o.cmd);
        /* --help and --version: exit 0. */
        assert_int_equal(parse(&o, "--version", NULL), 1);
}

/* tini's and dumb-init's options and variables (issue 18; tend(8), COMING FROM TINI). */
static void test_peer_options(void **state) {
        struct tend_options o;
        assert_int_equal(parse(&o, "-e", "3", "-e", "143", "-w", "-s", "-p", "SIGKILL", "--", "x", NULL), 0);
        assert_int_equal(options_exit_status(&o, 3), 0);
        assert_int_equal(options_exit_status(&o, 143), 0);
        assert_int_equal(options_exit_status(&o, 4), 4);
        assert_true(o.warn_on_reap);
        assert_int_equal(o.log_level, LOG_WARNING); /* -w's warnings show */
        assert_int_equal(o.parent_death_signal, SIGKILL);

        assert_int_equal(parse(&o, "-r", "15:3", "--rewrite", "USR1:0", "--remap", "HUP:0", "-c", "x", NULL), 0);
        assert_int_equal(options_remap(&o, SIGTERM), SIGQUIT);
        assert_int_equal(options_remap(&o, SIGUSR1), 0);
        assert_int_equal(options_remap(&o, SIGHUP), 0);
        assert_int_equal(options_remap(&o, SIGINT), SIGINT);
        assert_true(o.single_child);
        assert_false(o.process_group);
        assert_string_equal(o.cmd[0], "x");

        assert_int_equal(setenv("TINI_KILL_PROCESS_GROUP", "", 1), 0);
        assert_int_equal(setenv("TINI_VERBOSITY", "2", 1), 0);
        assert_int_equal(parse(&o, "--", "x", NULL), 0);
        assert_true(o.process_group);
        assert_int_equal(o.log_level, LOG_INFO);
        assert_int_equal(parse(&o, "-c", "--", "x", NULL), 0); /* the command line wins */
        assert_false(o.process_group);
        assert_int_equal(setenv("TINI_VERBOSITY", "many", 1), 0);
        assert_int_equal(parse(&o, "--", "x", NULL), -EINVAL);
        unsetenv("TINI_VERBOSITY");
        unsetenv("TINI_KILL_PROCESS_GROUP");

        assert_int_equal(setenv("DUMB_INIT_SETSID", "0", 1), 0);
        assert_int_equal(parse(&o, "--", "x", NULL), 0);
        assert_true(o.same_group);
        assert_int_equal(parse(&o, "-g", "--", "x", NULL), -EINVAL);
        assert_int_equal(setenv("DUMB_INIT_SETSID", "1", 1), 0);
        assert_int_equal(parse(&o, "--", "x", NULL), 0);
        assert_false(o.same_group);
        unsetenv("DUMB_INIT_SETSID");

        assert_int_equal(parse(&o, "-c", "-g", "--", "x", NULL), -EINVAL);
        assert_int_equal(parse(&o, "-e", "256", "--", "x", NULL), -EINVAL);
        assert_int_equal(parse(&o, "-p", "NOPE", "--", "x", NULL), -EINVAL);
        assert_int_equal(parse(&o, "-r", "15", "--", "x", NULL), -EINVAL);
        assert_int_equal(parse(&o, "-e", "3", "--config-dir", "/tmp", NULL), -EINVAL);
        assert_int_equal(parse(&o, "-V", NULL), 1);
        assert_int_equal(parse(&o, "-l", NULL), 1);
}

/* --host-id (QA20 L2; tend(8) CLUSTER): 1-64 of [A-Za-z0-9._:@-], else exit 2. */
static void test_host_ids(void **state) {
        struct tend_options o;
        char long_id[TEND_HOST_ID_MAX + 2];
        memset(long_id, 'a', sizeof long_id - 1);
        long_id[sizeof long_id - 1] = '\0';
        const char *bad[] = { "", "h 1", "h/1", "h\n1", "h1\x01", "h\"q", "\xc3\xbcmlaut", long_id };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_false(options_host_id_valid(bad[i]));
                assert_int_equal(parse(&o, "--config-dir", "/tmp", "--store", "etcd://h:1/p", "--host-id", bad[i],
                                       NULL), -EINVAL);
        }
        long_id[TEND_HOST_ID_MAX] = '\0';
        const char *good[] = { "0123456789abcdef0123456789abcdef", "web-1.example.com", "rack_2:h@dc", long_id };
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                assert_true(options_host_id_valid(good[i]));
                assert_int_equal(parse(&o, "--config-dir", "/tmp", "--store", "etcd://h:1/p", "--host-id", good[i],
                                       NULL), 0);
                assert_string_equal(o.cluster.host_id, good[i]);
        }
        assert_false(options_host_id_valid(NULL));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_timespan),
                cmocka_unit_test(test_signal_names),
                cmocka_unit_test(test_options),
                cmocka_unit_test(test_peer_options),
                cmocka_unit_test(test_host_ids),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
