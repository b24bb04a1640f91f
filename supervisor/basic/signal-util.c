/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "signal-util.h"

static int parse_number(const char *s, int min, int max) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < min || v > max)
                return -EINVAL;
        return (int) v;
}

/* The names of the standard signals, without "SIG", as systemd 252 spells
 * them (signal 29 is "IO"): one table for the glibc and the musl builds,
 * whose libraries name some signals differently. */
static const char *const signal_names[] = {
        [SIGHUP] = "HUP",       [SIGINT] = "INT",       [SIGQUIT] = "QUIT",     [SIGILL] = "ILL",
        [SIGTRAP] = "TRAP",     [SIGABRT] = "ABRT",     [SIGBUS] = "BUS",       [SIGFPE] = "FPE",
        [SIGKILL] = "KILL",     [SIGUSR1] = "USR1",     [SIGSEGV] = "SEGV",     [SIGUSR2] = "USR2",
        [SIGPIPE] = "PIPE",     [SIGALRM] = "ALRM",     [SIGTERM] = "TERM",
#ifdef SIGSTKFLT
        [SIGSTKFLT] = "STKFLT",
#endif
        [SIGCHLD] = "CHLD",     [SIGCONT] = "CONT",     [SIGSTOP] = "STOP",     [SIGTSTP] = "TSTP",
        [SIGTTIN] = "TTIN",     [SIGTTOU] = "TTOU",     [SIGURG] = "URG",       [SIGXCPU] = "XCPU",
        [SIGXFSZ] = "XFSZ",     [SIGVTALRM] = "VTALRM", [SIGPROF] = "PROF",     [SIGWINCH] = "WINCH",
        [SIGIO] = "IO",         [SIGPWR] = "PWR",       [SIGSYS] = "SYS",
};

static const char *signal_name(int sig) {
        if (sig <= 0 || (size_t) sig >= sizeof signal_names / sizeof signal_names[0])
                return NULL;
        return signal_names[sig];
}

int signal_from_string(const char *s) {
        if (!s || !*s)
                return -EINVAL;
        if (s[0] >= '0' && s[0] <= '9')
                return parse_number(s, 1, _NSIG - 1);
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        if (strncasecmp(s, "RTMIN", 5) == 0) {
                int off = s[5] == '\0' ? 0 : s[5] == '+' ? parse_number(s + 6, 0, SIGRTMAX - SIGRTMIN) : -EINVAL;
                return off < 0 ? off : SIGRTMIN + off;
        }
        if (strncasecmp(s, "RTMAX", 5) == 0) {
                int off = s[5] == '\0' ? 0 : s[5] == '-' ? parse_number(s + 6, 0, SIGRTMAX - SIGRTMIN) : -EINVAL;
                return off < 0 ? off : SIGRTMAX - off;
        }
        /* POLL: glibc's and Docker's name for IO. systemd's other libc
         * aliases (IOT, CLD, UNUSED) it refuses, and so does tend. */
        if (strcasecmp(s, "POLL") == 0)
                return SIGIO;
        for (int sig = 1; sig < SIGRTMIN; sig++) {
                const char *name = signal_name(sig);
                if (name && strcasecmp(name, s) == 0)
                        return sig;
        }
        return -EINVAL;
}

const char *signal_to_string(int sig, char buf[static 24]) {
        const char *name = signal_name(sig);
        if (name)
                snprintf(buf, 24, "SIG%s", name);
        else if (sig >= SIGRTMIN && sig <= SIGRTMAX)
                snprintf(buf, 24, "SIGRTMIN+%d", sig - SIGRTMIN);
        else
                snprintf(buf, 24, "signal %d", sig);
        return buf;
}

void signal_forward_set(sigset_t *ret_set) {
        static const int excluded[] = {
                SIGKILL, SIGSTOP, SIGCHLD, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT,
        };
        sigemptyset(ret_set);
        for (int sig = 1; sig < _NSIG; sig++)
                if (sig < 32 || sig >= SIGRTMIN) /* 32 and 33 belong to glibc */
                        sigaddset(ret_set, sig);
        for (size_t i = 0; i < sizeof excluded / sizeof excluded[0]; i++)
                sigdelset(ret_set, excluded[i]);
}
