/* SPDX-License-Identifier: MIT */
/*
 * What tend-static needs from glibc that musl lacks, for the musl build of
 * tend-static (supervisor/meson.build; docs/benchmarks.md "session 10").
 * Given to every source of that build with `-include`; glibc builds never
 * see it. Signal names come from signal-util.c's own table in both builds.
 * Thread-safe: all are stateless.
 */
#pragma once

#include <errno.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Real-time signals numbered as glibc, bash's `kill -l`, systemd and Docker
 * number them (SIGRTMIN+3 is 37), not from musl's 35: `--remap RTMIN+3:TERM`
 * means the same signal in tend and tend-static. Signal 34, which musl keeps
 * out of its sets, is added to the forwarded set by hand (entrypoint.c). */
#undef SIGRTMIN
#define SIGRTMIN 34

/* musl's sigfillset() leaves signals 32-34 out and its pthread_sigmask()
 * clears them from the old mask it returns: a mask saved and restored around
 * a spawn (libexit) would unblock 34, whose default action ends tend. These
 * take and give every bit, as the kernel does (0 or an errno value, as
 * pthread_sigmask; sigprocmask: 0 or -1 with errno). */
static inline int tend_sigfillset(sigset_t *set) {
        __builtin_memset(set, 0xff, sizeof *set);
        return 0;
}
static inline int tend_sigprocmask(int how, const sigset_t *set, sigset_t *old) {
        if (old)
                __builtin_memset(old, 0, sizeof *old);
        return (int) syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}
static inline int tend_pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
        return tend_sigprocmask(how, set, old) < 0 ? errno : 0;
}
#define sigfillset tend_sigfillset
#define sigprocmask tend_sigprocmask
#define pthread_sigmask tend_pthread_sigmask

/* close_range(2) (Linux 5.9): 0 or -1 with errno, as glibc's wrapper. */
static inline int close_range(unsigned int first, unsigned int last, int flags) {
        return (int) syscall(SYS_close_range, first, last, flags);
}
