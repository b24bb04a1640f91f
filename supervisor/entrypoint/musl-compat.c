/* SPDX-License-Identifier: MIT */
/* musl-compat.h: glibc's sigabbrev_np(3) for the musl build of tend-static. */
#include <signal.h>
#include <stddef.h>

#include "musl-compat.h"

static const char *const abbrev[] = {
        [SIGHUP] = "HUP",       [SIGINT] = "INT",       [SIGQUIT] = "QUIT",     [SIGILL] = "ILL",
        [SIGTRAP] = "TRAP",     [SIGABRT] = "ABRT",     [SIGBUS] = "BUS",       [SIGFPE] = "FPE",
        [SIGKILL] = "KILL",     [SIGUSR1] = "USR1",     [SIGSEGV] = "SEGV",     [SIGUSR2] = "USR2",
        [SIGPIPE] = "PIPE",     [SIGALRM] = "ALRM",     [SIGTERM] = "TERM",     [SIGSTKFLT] = "STKFLT",
        [SIGCHLD] = "CHLD",     [SIGCONT] = "CONT",     [SIGSTOP] = "STOP",     [SIGTSTP] = "TSTP",
        [SIGTTIN] = "TTIN",     [SIGTTOU] = "TTOU",     [SIGURG] = "URG",       [SIGXCPU] = "XCPU",
        [SIGXFSZ] = "XFSZ",     [SIGVTALRM] = "VTALRM", [SIGPROF] = "PROF",     [SIGWINCH] = "WINCH",
        [SIGIO] = "IO",         [SIGPWR] = "PWR",       [SIGSYS] = "SYS",
};

const char *sigabbrev_np(int sig) {
        if (sig <= 0 || (size_t) sig >= sizeof abbrev / sizeof abbrev[0])
                return NULL;
        return abbrev[sig];
}
