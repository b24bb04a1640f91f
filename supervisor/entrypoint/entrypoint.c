/* SPDX-License-Identifier: MIT */
/*
 * Entrypoint mode (SPEC §1, §6): run one command as a container's PID 1 or
 * as a subreaper, forward signals to it, reap every orphan, and exit with
 * its status once what remains of its descendants has been stopped.
 *
 * Phases: RUNNING (CMD alive; signals forwarded) → CLEANUP (CMD reaped;
 * leftovers get SIGTERM, each process re-parented later too, SIGKILL at
 * --stop-timeout) → done (no child left; exit with CMD's status).
 *
 * The loop is a plain epoll set of four fds (the signalfd, the reaper's, the
 * exit subscription's, one timerfd), not sd-event: entrypoint mode links no
 * libsystemd, so that tend-static is one static binary and `tend -- CMD`
 * starts as fast as tini (docs/benchmarks.md, "session 6").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <termios.h>
#include <unistd.h>

#include "cmd-run.h"
#include "entrypoint.h"
#include "libexit.h"
#include "log.h"
#include "macro.h"
#include "proc-scan.h"
#include "signal-util.h"

/* Past SIGKILL, how long tend waits for the last children before exiting anyway
 * (a process stuck in uninterruptible sleep must not hold the container). */
#define FINAL_REAP_GRACE (1 * USEC_PER_SEC)

/* The epoll set's sources (epoll_event.data.u32). */
enum loop_source {
        LOOP_SIGNAL,
        LOOP_REAPER,
        LOOP_SUB,
        LOOP_TIMER,
};

/* What the one timer is armed for. */
enum timer {
        TIMER_NONE,
        TIMER_STOP,  /* --stop-timeout: SIGKILL to the leftovers */
        TIMER_GRACE, /* past SIGKILL: exit anyway */
};

enum phase {
        PHASE_RUNNING,
        PHASE_CLEANUP,
        PHASE_KILLED,
};

struct entrypoint {
        const struct tend_options *opts;
        int epoll_fd, signal_fd, timer_fd;
        bool done; /* leave the loop */
        struct exit_hub *hub;
        struct exit_reaper *reaper;
        struct exit_sub *sub;
        struct exit_process *child;
        pid_t child_pgid;
        bool gave_foreground;
        bool said_kill_fallback; /* the pidfd_send_signal refusal was logged */
        enum phase phase;
        int pid1_sent; /* as PID 1: the last signal kill(-1) sent, so it is sent once */
        int status; /* tend's exit status once CMD is gone */
        struct proc_set *signalled;
        enum timer timer;
};

static const char *cmd_name(const struct entrypoint *e) {
        return e->opts->cmd[0];
}

/* ---- leftovers ---- */

/* As a subreaper: CMD's process group (found in /proc: CMD has been reaped)
 * and every process re-parented to tend. As PID 1: everything (kill(-1)). */
static int signal_leftovers(struct entrypoint *e, int sig) {
        if (getpid() == 1) {
                /* kill(-1) reached every process there was: repeating it for
                 * each orphan reaped would send a second SIGTERM, which many
                 * programs take as "skip the clean shutdown". */
                if (e->pid1_sent == sig)
                        return 0;
                e->pid1_sent = sig;
                if (kill(-1, sig) < 0 && errno != ESRCH)
                        return log_warning_errno(errno, "kill(-1, %d): %m", sig);
                return 0;
        }
        struct proc_match m[] = {
                { PROC_FIELD_PPID, getpid() },
                { PROC_FIELD_PGRP, e->child_pgid },
        };
        int k = proc_set_signal(e->signalled, m, e->child_pgid > 0 ? 2 : 1, sig);
        if (k < 0)
                return log_warning_errno(k, "scanning /proc for leftovers: %m");
        if (k > 0) {
                char buf[24];
                log_info("sent %s to %d leftover process%s of %s", signal_to_string(sig, buf), k, k == 1 ? "" : "es",
                         cmd_name(e));
        }
        return k;
}

static void finish_if_no_children(struct entrypoint *e) {
        if (e->phase == PHASE_RUNNING)
                return;
        int k = exit_reaper_has_children(e->reaper);
        if (k == 0)
                e->done = true;
}

/* Arms the one timer for usec from now (USEC_INFINITY: never). */
static void arm_timer(struct entrypoint *e, enum timer what, usec_t usec) {
        struct itimerspec its = {};
        e->timer = usec == USEC_INFINITY ? TIMER_NONE : what;
        if (e->timer != TIMER_NONE) {
                its.it_value.tv_sec = (time_t) (usec / USEC_PER_SEC);
                its.it_value.tv_nsec = (long) (usec % USEC_PER_SEC) * 1000 + 1; /* 0 would disarm */
        }
        if (timerfd_settime(e->timer_fd, 0, &its, NULL) < 0)
                log_warning_errno(errno, "arming the stop timer: %m");
}

static void on_final_grace(struct entrypoint *e) {
        log_warning("children of %s survived SIGKILL for 1s (uninterruptible sleep?); exiting anyway", cmd_name(e));
        e->done = true;
}

static void kill_everything(struct entrypoint *e) {
        e->phase = PHASE_KILLED;
        (void) signal_leftovers(e, SIGKILL);
        arm_timer(e, TIMER_GRACE, FINAL_REAP_GRACE);
        finish_if_no_children(e);
}

static void on_stop_timeout(struct entrypoint *e) {
        log_info("--stop-timeout reached: SIGKILL to what remains of %s", cmd_name(e));
        kill_everything(e);
}

static void on_timer(struct entrypoint *e) {
        uint64_t n;
        if (read(e->timer_fd, &n, sizeof n) < 0)
                return; /* EAGAIN: re-armed since it fired */
        enum timer what = e->timer;
        e->timer = TIMER_NONE;
        if (what == TIMER_STOP)
                on_stop_timeout(e);
        else if (what == TIMER_GRACE)
                on_final_grace(e);
}

/* ---- the child's end ---- */

static void child_exited(struct entrypoint *e, const struct exit_reason *reason) {
        e->status = options_exit_status(e->opts, cmd_run_exited(cmd_name(e), e->child, reason));

        /* Give the terminal back to our own group, as a shell would. */
        if (e->gave_foreground && tcgetpgrp(STDIN_FILENO) == e->child_pgid)
                (void) tcsetpgrp(STDIN_FILENO, getpgrp());

        e->phase = PHASE_CLEANUP;
        if (exit_reaper_has_children(e->reaper) == 0) {
                e->done = true;
                return;
        }
        (void) signal_leftovers(e, SIGTERM);
        arm_timer(e, TIMER_STOP, e->opts->stop_timeout);
}

static void try_take_child(struct entrypoint *e) {
        struct exit_reason reason;
        if (e->phase == PHASE_RUNNING && exit_hub_take(e->hub, exit_process_id(e->child), &reason) == 0)
                child_exited(e, &reason);
}

static void drain_events(struct entrypoint *e) {
        struct exit_event ev;
        bool orphans = false;
        while (exit_sub_recv(e->sub, &ev, 0) == 0) {
                if (ev.type == EXIT_EVENT_LAGGED) {
                        log_debug("exit queue overflowed; recovering CMD's outcome from the ledger");
                        try_take_child(e);
                } else if (ev.flags & EXIT_EVENT_ORPHAN) {
                        if (e->opts->warn_on_reap) /* tini's -w */
                                log_warning("reaped zombie process with pid %d", ev.pid);
                        else
                                log_debug("reaped orphan pid %d", ev.pid);
                        orphans = true;
                } else if (ev.id == exit_process_id(e->child))
                        try_take_child(e);
        }
        /* A reaped orphan may have left children of its own, re-parented to
         * us just now: they get SIGTERM too, until the SIGKILL. */
        if (orphans && e->phase == PHASE_CLEANUP)
                (void) signal_leftovers(e, SIGTERM);
        else if (orphans && e->phase == PHASE_KILLED)
                (void) signal_leftovers(e, SIGKILL); /* forked before the SIGKILL, re-parented since */
        finish_if_no_children(e);
}

/* CMD's exec result, announced by the reaper's fd: the loop never waits for
 * it. Before its exit: the reaper collects an exec status before it
 * publishes the exit, and the exits are drained after this. */
static void drain_exec_events(struct entrypoint *e) {
        struct exit_process *p;
        while (exit_reaper_next_exec(e->reaper, &p) == 0) {
                if (p == e->child)
                        (void) cmd_run_exec_result(cmd_name(e), p);
                exit_process_unref(p);
        }
}

static void on_reaper(struct entrypoint *e) {
        int k = exit_reaper_dispatch(e->reaper);
        if (k < 0)
                log_warning_errno(k, "reaping: %m");
        drain_exec_events(e);
        drain_events(e);
}

/* ---- signals ---- */

static const char *refusal_name(int error) {
        return error == -EPERM ? "EPERM" : error == -ENOSYS ? "ENOSYS" : "an error";
}

/* Once: libexit signals CMD with kill(2) because a seccomp profile refuses
 * pidfd_send_signal (exit_process_signal: safe while CMD is unreaped). */
static void note_kill_fallback(struct entrypoint *e) {
        int refused = exit_process_signal_refused();
        if (refused == 0 || e->said_kill_fallback)
                return;
        e->said_kill_fallback = true;
        log_warning("pidfd_send_signal refused (%s): a seccomp profile older than docker 20.10? "
                    "Signalling %s with kill(2) instead",
                    refusal_name(refused), cmd_name(e));
}

static void on_signal(struct entrypoint *e, const struct signalfd_siginfo *si) {
        int sig = (int) si->ssi_signo;
        char b1[24], b2[24];

        /* A signal tend raised itself (SIGPIPE, writing a log line to a closed
         * stderr) is not CMD's: forwarded, it would kill CMD, and the debug
         * line saying so would raise the next one, in a loop. */
        if ((pid_t) si->ssi_pid == getpid() && si->ssi_code == SI_USER)
                return;

        if (e->phase != PHASE_RUNNING) {
                /* A second SIGTERM/SIGINT while stopping: everything, at once. */
                if ((sig == SIGTERM || sig == SIGINT) && e->phase == PHASE_CLEANUP) {
                        log_info("%s while stopping: SIGKILL to everything", signal_to_string(sig, b1));
                        kill_everything(e);
                }
                return;
        }
        int to = options_remap(e->opts, sig);
        if (to == 0) { /* --remap SIG:0, dumb-init's -r SIG:0 */
                log_debug("dropped %s (remapped to 0)", signal_to_string(sig, b1));
                return;
        }
        int k;
        if (e->opts->process_group && e->child_pgid > 0)
                /* CMD is unreaped while RUNNING, so its pgid cannot be recycled. */
                k = kill(-e->child_pgid, to) < 0 ? -errno : 0;
        else
                k = exit_process_signal(e->child, to);
        note_kill_fallback(e);
        if (k < 0 && k != -ESRCH)
                log_warning_errno(k, "forwarding %s to %s: %m", signal_to_string(to, b2), cmd_name(e));
        else
                log_debug("forwarded %s as %s", signal_to_string(sig, b1), signal_to_string(to, b2));
}

static void drain_signals(struct entrypoint *e) {
        struct signalfd_siginfo si[16];
        ssize_t n;
        while (!e->done && (n = read(e->signal_fd, si, sizeof si)) > 0)
                for (size_t i = 0; i < (size_t) n / sizeof si[0]; i++)
                        on_signal(e, &si[i]);
}

/* Real-time signals the C library keeps out of a sigset_t although tend
 * forwards them: musl reserves signal 34, glibc's SIGRTMIN, for its own
 * threads (tend-static has none). Set in the kernel's layout, which both
 * libcs share: bit sig - 1 of the set's first words. No-op with glibc. */
static void add_libc_reserved(sigset_t *set) {
        unsigned long *words = (unsigned long *) set;
        size_t bits = 8 * sizeof(unsigned long);
        for (int sig = SIGRTMIN; sig < _NSIG; sig++)
                if (!sigismember(set, sig))
                        words[(size_t) (sig - 1) / bits] |= 1UL << ((size_t) (sig - 1) % bits);
}

/* One signalfd for every forwarded signal (blocked first). */
static int add_signal_source(struct entrypoint *e) {
        sigset_t set;
        signal_forward_set(&set);
        add_libc_reserved(&set);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return negative_errno();
        e->signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
        return e->signal_fd < 0 ? negative_errno() : 0;
}

static int add_source(struct entrypoint *e, int fd, enum loop_source what) {
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = what };
        return epoll_ctl(e->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0 ? negative_errno() : 0;
}

static void dispatch(struct entrypoint *e, enum loop_source what) {
        switch (what) {
        case LOOP_SIGNAL:
                drain_signals(e);
                break;
        case LOOP_REAPER:
                on_reaper(e);
                break;
        case LOOP_SUB:
                drain_events(e);
                break;
        case LOOP_TIMER:
                on_timer(e);
                break;
        }
}

/* Until e->done. Returns 0 or a negative errno (epoll_wait failed). */
static int entrypoint_loop(struct entrypoint *e) {
        while (!e->done) {
                struct epoll_event ev[4];
                int n = epoll_wait(e->epoll_fd, ev, (int) ELEMENTSOF(ev), -1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return negative_errno();
                for (int i = 0; i < n && !e->done; i++)
                        dispatch(e, (enum loop_source) ev[i].data.u32);
        }
        return 0;
}

/* ---- start ---- */

/* Appends fd to the list if exec would pass it on (not close-on-exec). */
static int add_if_inherited(int **fds, size_t *n, int fd) {
        int flags = fcntl(fd, F_GETFD);
        if (flags < 0 || (flags & FD_CLOEXEC))
                return 0; /* closed, or not inherited by exec: not ours to pass */
        int *v = realloc(*fds, (*n + 1) * sizeof(int));
        if (!v)
                return -ENOMEM;
        *fds = v;
        (*fds)[(*n)++] = fd;
        return 0;
}

/* The fds tend inherited beyond 0/1/2 (socket activation): CMD gets them
 * unchanged; tend keeps no copy. Read before tend opens any fd of its own.
 * /proc/self/fd lists what is open in one pass; probing every possible fd up
 * to RLIMIT_NOFILE instead costs a fcntl() each — 65,536 system calls, several
 * milliseconds of every start, in a container whose limit is 1,048,576. */
int entrypoint_collect_inherited_fds(int **ret_fds, size_t *ret_n) {
        *ret_fds = NULL;
        *ret_n = 0;
        int r = 0;
        DIR *d = opendir("/proc/self/fd");
        if (d) {
                struct dirent *de;
                while (r >= 0 && (de = readdir(d))) {
                        char *end;
                        long fd = strtol(de->d_name, &end, 10);
                        if (de->d_name[0] != '.' && !*end && fd >= 3 && fd != dirfd(d) && fd <= INT_MAX)
                                r = add_if_inherited(ret_fds, ret_n, (int) fd);
                }
                closedir(d);
                return r;
        }
        int max = (int) sysconf(_SC_OPEN_MAX); /* no /proc: probe */
        for (int fd = 3; r >= 0 && fd < max && fd < 65536; fd++)
                r = add_if_inherited(ret_fds, ret_n, fd);
        return r;
}

/* CMD's exec result arrives in the loop (drain_exec_events). CMD inherits
 * tend's soft RLIMIT_NOFILE, raised only after this (raise_nofile). */
static int spawn_cmd(struct entrypoint *e) {
        bool fg_before = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
        int k = cmd_run_spawn_in(e->reaper, e->opts->cmd, e->opts->same_group, &e->child);
        if (k < 0)
                return k;
        if (e->opts->same_group)
                return 0; /* DUMB_INIT_SETSID=0: tend's group, tend's terminal; no group of CMD's */
        e->child_pgid = exit_process_pid(e->child); /* its own group: EXIT_SPAWN_FOREGROUND implies SETPGID */
        e->gave_foreground = fg_before;
        return 0;
}

/* CMD got back the soft limit tend inherited; now tend takes the hard one. */
static void raise_nofile(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
}

static int entrypoint_setup(struct entrypoint *e) {
        /* tini's -p: the signal comes to tend, which forwards it to CMD. */
        if (e->opts->parent_death_signal && prctl(PR_SET_PDEATHSIG, e->opts->parent_death_signal) < 0)
                return log_error_errno(errno, "prctl(PR_SET_PDEATHSIG): %m");
        e->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        e->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (e->epoll_fd < 0 || e->timer_fd < 0)
                return log_error_errno(errno, "setting up the event loop: %m");
        int k = exit_hub_new(0, 0, &e->hub);
        if (k >= 0)
                k = exit_reaper_new(e->hub, EXIT_REAPER_ORPHANS | EXIT_REAPER_EXEC_EVENTS, &e->reaper);
        if ((k == -ENOSYS || k == -EPERM) && exit_reaper_missing_syscall())
                return log_error_errno(k, "%s refused or missing (%s): tend needs it; a seccomp profile "
                                          "older than docker 20.10, or a kernel older than Linux 5.10?",
                                       exit_reaper_missing_syscall(), refusal_name(k));
        if (k < 0 && exit_reaper_missing_syscall())
                return log_error_errno(k, "setting up the reaper: %s: %m", exit_reaper_missing_syscall());
        /* Subscribe before the first spawn: earlier exits are not queued. */
        if (k >= 0)
                k = exit_hub_subscribe(e->hub, &e->sub);
        if (k < 0)
                return log_error_errno(k, "setting up the reaper: %m");
        e->signalled = proc_set_new();
        if (!e->signalled)
                return log_error_errno(ENOMEM, "out of memory");
        if ((k = add_signal_source(e)) < 0 || (k = add_source(e, e->signal_fd, LOOP_SIGNAL)) < 0 ||
            (k = add_source(e, exit_reaper_fd(e->reaper), LOOP_REAPER)) < 0 ||
            (k = add_source(e, exit_sub_fd(e->sub), LOOP_SUB)) < 0 ||
            (k = add_source(e, e->timer_fd, LOOP_TIMER)) < 0)
                return log_error_errno(k, "setting up the event loop: %m");
        return 0;
}

static void entrypoint_done(struct entrypoint *e) {
        safe_close(e->timer_fd);
        safe_close(e->signal_fd);
        safe_close(e->epoll_fd);
        exit_process_unref(e->child);
        exit_sub_free(e->sub);
        exit_reaper_free(e->reaper);
        exit_hub_unref(e->hub);
        proc_set_free(e->signalled);
}

int entrypoint_run(const struct tend_options *opts, const int *inherited, size_t n_inherited) {
        struct entrypoint e = { .opts = opts, .status = 1, .epoll_fd = -1, .signal_fd = -1, .timer_fd = -1 };
        int k = entrypoint_setup(&e);
        if (k >= 0)
                k = spawn_cmd(&e);
        for (size_t i = 0; i < n_inherited; i++)
                close(inherited[i]); /* CMD has them; tend keeps no copy */
        if (k >= 0) {
                raise_nofile();
                /* CMD may have exited before the loop: its pidfd is readable, so
                 * the first iteration reaps it. */
                k = entrypoint_loop(&e);
                if (k < 0)
                        log_error_errno(k, "event loop: %m");
        }
        int status = k < 0 ? 1 : e.status;
        entrypoint_done(&e);
        return status;
}
