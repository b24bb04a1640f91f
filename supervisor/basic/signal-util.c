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
        for (int sig = 1; sig < SIGRTMIN; sig++) {
                const char *abbrev = sigabbrev_np(sig);
                if (abbrev && strcasecmp(abbrev, s) == 0)
                        return sig;
        }
        return -EINVAL;
}

const char *signal_to_string(int sig, char buf[static 24]) {
        if (sig > 0 && sig < SIGRTMIN) {
                const char *abbrev = sigabbrev_np(sig);
                if (abbrev) {
                        snprintf(buf, 24, "SIG%s", abbrev);
                        return buf;
                }
        }
        if (sig >= SIGRTMIN && sig <= SIGRTMAX)
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
