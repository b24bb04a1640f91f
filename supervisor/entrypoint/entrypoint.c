/* SPDX-License-Identifier: MIT */
/*
 * Entrypoint mode (SPEC §1, §6): run one command as a container's PID 1 or
 * as a subreaper, forward signals to it, reap every orphan, and exit with
 * its status once what remains of its descendants has been stopped.
 *
 * Phases: RUNNING (CMD alive; signals forwarded) → CLEANUP (CMD reaped;
 * leftovers get SIGTERM, each process re-parented later too, SIGKILL at
 * --stop-timeout) → done (no child left; exit with CMD's status).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include <systemd/sd-event.h>

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

enum phase {
        PHASE_RUNNING,
        PHASE_CLEANUP,
        PHASE_KILLED,
};

struct entrypoint {
        const struct tend_options *opts;
        sd_event *event;
        struct exit_hub *hub;
        struct exit_reaper *reaper;
        struct exit_sub *sub;
        struct exit_process *child;
        pid_t child_pgid;
        bool gave_foreground;
        enum phase phase;
        int pid1_sent; /* as PID 1: the last signal kill(-1) sent, so it is sent once */
        int status; /* tend's exit status once CMD is gone */
        struct proc_set *signalled;
        sd_event_source *timer;
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
                sd_event_exit(e->event, 0);
}

static int on_final_grace(sd_event_source *s, uint64_t usec, void *userdata) {
        struct entrypoint *e = userdata;
        log_warning("children of %s survived SIGKILL for 1s (uninterruptible sleep?); exiting anyway", cmd_name(e));
        return sd_event_exit(e->event, 0);
}

static void kill_everything(struct entrypoint *e) {
        e->phase = PHASE_KILLED;
        (void) signal_leftovers(e, SIGKILL);
        e->timer = sd_event_source_unref(e->timer);
        (void) sd_event_add_time_relative(e->event, &e->timer, CLOCK_MONOTONIC, FINAL_REAP_GRACE, 0, on_final_grace, e);
        finish_if_no_children(e);
}

static int on_stop_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct entrypoint *e = userdata;
        log_info("--stop-timeout reached: SIGKILL to what remains of %s", cmd_name(e));
        kill_everything(e);
        return 0;
}

/* ---- the child's end ---- */

static void child_exited(struct entrypoint *e, const struct exit_reason *reason) {
        e->status = cmd_run_exited(cmd_name(e), e->child, reason);

        /* Give the terminal back to our own group, as a shell would. */
        if (e->gave_foreground && tcgetpgrp(STDIN_FILENO) == e->child_pgid)
                (void) tcsetpgrp(STDIN_FILENO, getpgrp());

        e->phase = PHASE_CLEANUP;
        if (exit_reaper_has_children(e->reaper) == 0) {
                sd_event_exit(e->event, 0);
                return;
        }
        (void) signal_leftovers(e, SIGTERM);
        (void) sd_event_add_time_relative(e->event, &e->timer, CLOCK_MONOTONIC, e->opts->stop_timeout, 0,
                                          on_stop_timeout, e);
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

static int on_reaper(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct entrypoint *e = userdata;
        int k = exit_reaper_dispatch(e->reaper);
        if (k < 0)
                log_warning_errno(k, "reaping: %m");
        drain_exec_events(e);
        drain_events(e);
        return 0;
}

static int on_sub(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        drain_events(userdata);
        return 0;
}

/* ---- signals ---- */

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct entrypoint *e = userdata;
        int sig = (int) si->ssi_signo;
        char b1[24], b2[24];

        /* A signal tend raised itself (SIGPIPE, writing a log line to a closed
         * stderr) is not CMD's: forwarded, it would kill CMD, and the debug
         * line saying so would raise the next one, in a loop. */
        if ((pid_t) si->ssi_pid == getpid() && si->ssi_code == SI_USER)
                return 0;

        if (e->phase != PHASE_RUNNING) {
                /* A second SIGTERM/SIGINT while stopping: everything, at once. */
                if ((sig == SIGTERM || sig == SIGINT) && e->phase == PHASE_CLEANUP) {
                        log_info("%s while stopping: SIGKILL to everything", signal_to_string(sig, b1));
                        kill_everything(e);
                }
                return 0;
        }
        int to = options_remap(e->opts, sig);
        int k;
        if (e->opts->process_group && e->child_pgid > 0)
                /* CMD is unreaped while RUNNING, so its pgid cannot be recycled. */
                k = kill(-e->child_pgid, to) < 0 ? -errno : 0;
        else
                k = exit_process_signal(e->child, to);
        if (k < 0 && k != -ESRCH)
                log_warning_errno(k, "forwarding %s to %s: %m", signal_to_string(to, b2), cmd_name(e));
        else
                log_debug("forwarded %s as %s", signal_to_string(sig, b1), signal_to_string(to, b2));
        return 0;
}

static int add_signal_sources(struct entrypoint *e) {
        sigset_t set;
        signal_forward_set(&set);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return negative_errno();
        for (int sig = 1; sig < _NSIG; sig++) {
                if (!sigismember(&set, sig))
                        continue;
                int k = sd_event_add_signal(e->event, NULL, sig, on_signal, e);
                if (k < 0)
                        return k;
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
        int k = cmd_run_spawn(e->reaper, e->opts->cmd, 0, false, &e->child);
        if (k < 0)
                return k;
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
        int k = sd_event_new(&e->event);
        if (k < 0)
                return log_error_errno(k, "sd_event_new: %m");
        k = exit_hub_new(0, 0, &e->hub);
        if (k >= 0)
                k = exit_reaper_new(e->hub, EXIT_REAPER_ORPHANS | EXIT_REAPER_EXEC_EVENTS, &e->reaper);
        if (k == -ENOSYS)
                return log_error_errno(k, "the kernel lacks %s: tend needs Linux 5.10 or later",
                                       exit_reaper_missing_syscall());
        /* Subscribe before the first spawn: earlier exits are not queued. */
        if (k >= 0)
                k = exit_hub_subscribe(e->hub, &e->sub);
        if (k < 0)
                return log_error_errno(k, "setting up the reaper: %m");
        e->signalled = proc_set_new();
        if (!e->signalled)
                return log_error_errno(ENOMEM, "out of memory");
        if ((k = add_signal_sources(e)) < 0 ||
            (k = sd_event_add_io(e->event, NULL, exit_reaper_fd(e->reaper), EPOLLIN, on_reaper, e)) < 0 ||
            (k = sd_event_add_io(e->event, NULL, exit_sub_fd(e->sub), EPOLLIN, on_sub, e)) < 0)
                return log_error_errno(k, "setting up the event loop: %m");
        return 0;
}

static void entrypoint_done(struct entrypoint *e) {
        e->timer = sd_event_source_unref(e->timer);
        e->event = sd_event_unref(e->event);
        exit_process_unref(e->child);
        exit_sub_free(e->sub);
        exit_reaper_free(e->reaper);
        exit_hub_unref(e->hub);
        proc_set_free(e->signalled);
}

int entrypoint_run(const struct tend_options *opts, const int *inherited, size_t n_inherited) {
        struct entrypoint e = { .opts = opts, .status = 1 };
        int k = entrypoint_setup(&e);
        if (k >= 0)
                k = spawn_cmd(&e);
        for (size_t i = 0; i < n_inherited; i++)
                close(inherited[i]); /* CMD has them; tend keeps no copy */
        if (k >= 0) {
                raise_nofile();
                /* CMD may have exited before the loop: its pidfd is readable, so
                 * the first iteration reaps it. */
                k = sd_event_loop(e.event);
                if (k < 0)
                        log_error_errno(k, "event loop: %m");
        }
        int status = k < 0 ? 1 : e.status;
        entrypoint_done(&e);
        return status;
}
