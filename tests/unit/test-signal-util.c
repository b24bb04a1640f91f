/* SPDX-License-Identifier: MIT */
/* Signal names (supervisor/basic/signal-util.h): systemd 252's spellings, plus
 * POLL for signal 29, the same in the glibc and musl builds (qa18 finding 1). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "signal-util.h"

/* Every standard signal by its systemd name, with and without SIG, any case. */
static void test_names_as_systemd(void **state) {
        static const struct { const char *name; int sig; } names[] = {
                { "HUP", SIGHUP },   { "INT", SIGINT },       { "QUIT", SIGQUIT },   { "ILL", SIGILL },
                { "TRAP", SIGTRAP }, { "ABRT", SIGABRT },     { "BUS", SIGBUS },     { "FPE", SIGFPE },
                { "KILL", SIGKILL }, { "USR1", SIGUSR1 },     { "SEGV", SIGSEGV },   { "USR2", SIGUSR2 },
                { "PIPE", SIGPIPE }, { "ALRM", SIGALRM },     { "TERM", SIGTERM },   { "STKFLT", SIGSTKFLT },
                { "CHLD", SIGCHLD }, { "CONT", SIGCONT },     { "STOP", SIGSTOP },   { "TSTP", SIGTSTP },
                { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU },     { "URG", SIGURG },     { "XCPU", SIGXCPU },
                { "XFSZ", SIGXFSZ }, { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF },   { "WINCH", SIGWINCH },
                { "IO", SIGIO },     { "PWR", SIGPWR },       { "SYS", SIGSYS },
        };
        (void) state;
        char buf[24], with_sig[16];
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
                snprintf(with_sig, sizeof with_sig, "SIG%s", names[i].name);
                if (signal_from_string(names[i].name) != names[i].sig || signal_from_string(with_sig) != names[i].sig)
                        fail_msg("%s is not signal %d", names[i].name, names[i].sig);
                /* Printed as systemd prints it (with SIG): the name read back. */
                assert_string_equal(signal_to_string(names[i].sig, buf), with_sig);
        }
        assert_int_equal(signal_from_string("sigio"), SIGIO);
        assert_int_equal(signal_from_string("Io"), SIGIO);
}

/* 29 is IO (systemd) and POLL (glibc, Docker): both read, IO printed. */
static void test_io_and_poll(void **state) {
        (void) state;
        char buf[24];
        assert_int_equal(SIGIO, 29);
        assert_int_equal(signal_from_string("IO"), 29);
        assert_int_equal(signal_from_string("SIGIO"), 29);
        assert_int_equal(signal_from_string("POLL"), 29);
        assert_int_equal(signal_from_string("SIGPOLL"), 29);
        assert_int_equal(signal_from_string("poll"), 29);
        assert_string_equal(signal_to_string(29, buf), "SIGIO");
}

/* systemd refuses the other libc aliases: so does tend. */
static void test_aliases_systemd_refuses(void **state) {
        static const char *refused[] = {
                "IOT", "SIGIOT", "CLD", "SIGCLD", "UNUSED", "SIGUNUSED", "LOST", "EMT", "INFO", "POLLX", "SIG", "",
                "SIGSIGTERM", "TERM ", "RTMIN-1", "RTMAX+1",
        };
        (void) state;
        for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
                if (signal_from_string(refused[i]) != -EINVAL)
                        fail_msg("\"%s\" accepted as %d", refused[i], signal_from_string(refused[i]));
        assert_int_equal(signal_from_string(NULL), -EINVAL);
}

static void test_numbers_and_realtime(void **state) {
        (void) state;
        char buf[24];
        assert_int_equal(signal_from_string("29"), 29);
        assert_int_equal(signal_from_string("RTMIN+3"), SIGRTMIN + 3);
        assert_int_equal(signal_from_string("sigrtmax-1"), SIGRTMAX - 1);
        assert_string_equal(signal_to_string(SIGRTMIN + 3, buf), "SIGRTMIN+3");
        assert_string_equal(signal_to_string(0, buf), "signal 0");
        assert_string_equal(signal_to_string(32, buf), "signal 32");
        assert_string_equal(signal_to_string(_NSIG, buf), "signal 65");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names_as_systemd),
                cmocka_unit_test(test_io_and_poll),
                cmocka_unit_test(test_aliases_systemd_refuses),
                cmocka_unit_test(test_numbers_and_realtime),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
