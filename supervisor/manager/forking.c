/* SPDX-License-Identifier: MIT */
/*
 * Type=forking's main process, the manager's side (unit.h ops->forking_main;
 * docs/tend.service.5.md "Type=forking"): the PID file read and trusted as
 * systemd 252's service_load_pid_file() does, or the guess of
 * GuessMainPID=; the daemon tracked through the reaper (tend is its
 * subreaper, so it is tend's child once its parent exited), and the exit of
 * a daemon that was gone before its file was read taken from the orphans the
 * reaper recorded (exit_hub_orphan_find). Without cgroups a daemon that made
 * its own session (fork, setsid, fork) is outside the unit's process group:
 * tend's children that it does not follow and that started after the start
 * process — re-parented to tend during the start — are counted as the
 * unit's while it starts (reparented()); the main process found brings its
 * process group, which the unit's signals reach from then on.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <systemd/sd-event.h>

#include "cgroup.h"
#include "exit-routes.h"
#include "libexit.h"
#include "log.h"
#include "macro.h"
#include "manager-internal.h"
#include "pid-file.h"
#include "proc-scan.h"
#include "unit.h"

/* The PID file is read again after 10 ms, doubling up to this. */
#define PID_FILE_RETRY_MAX_USEC (200 * USEC_PER_MSEC)
/* Children of tend looked at for the guess. */
#define GUESS_MAX_CHILDREN 1024
/* A PID file's pid that is not tend's child yet (its parent has not exited)
 * is said to be someone else's after this many reads (~150 ms). */
#define NOT_CHILD_READS 4

/* Why the wait for the PID file was said (once per reason and start). */
enum {
        SAID_NONE,
        SAID_MISSING,
        SAID_PARSE,
        SAID_GONE,
        SAID_NOT_CHILD,
};

static bool fallback(const struct manager *m) {
        return cgroup_tree_mode(m->cgroups) == CGROUP_MODE_FALLBACK;
}

void manager_forking_spawned(struct unit *u, struct exit_process *start) {
        struct unit_rare *r = unit_rare(u);
        if (!r)
                return; /* no orphan is taken for its daemon: it is guessed (out of memory) */
        r->forking_since = exit_process_id(start);
        r->pid_file_reads = 0;
        r->pid_file_said = SAID_NONE;
        r->pid_file_retry = sd_event_source_disable_unref(r->pid_file_retry);
        r->forking_start_ticks = 0; /* 0: unknown, no process counted as re-parented */
        if (fallback(data(u)->m))
                (void) proc_start_time(exit_process_pid(start), &r->forking_start_ticks);
}

/* Whether the wait for u's PID file is said now: once per reason. */
static bool say(struct unit *u, unsigned char reason) {
        struct unit_rare *r = unit_rare(u);
        if (!r)
                return true; /* out of memory: said each time */
        if (r->pid_file_said == reason)
                return false;
        r->pid_file_said = reason;
        return true;
}

/* Without cgroups: pid is a child of tend that tend does not follow, started
 * after u's start process — re-parented to tend (its subreaper) during the
 * start, a daemon that left the start process's session. */
static bool reparented(struct manager *m, struct unit *u, pid_t pid) {
        const struct unit_rare *r = unit_rare_peek(u);
        unsigned long long since = r ? r->forking_start_ticks : 0, t;
        pid_t ppid;
        exit_id_t id;
        return fallback(m) && since > 0 && proc_stat_field(pid, PROC_FIELD_PPID, &ppid) == 0 && ppid == getpid() &&
               exit_hub_pid_to_id(m->hub, pid, &id) < 0 && proc_start_time(pid, &t) == 0 && t >= since;
}

/* Whether pid is a process of u while it starts: 1, 0, or a negative errno. */
static int of_unit(struct manager *m, struct unit *u, pid_t pid) {
        int k = unit_group_contains(data(u)->group, pid);
        return k == 0 && reparented(m, u, pid) ? 1 : k;
}

/* tend's children that tend does not follow and that are u's (of_unit):
 * their number, the last in *ret (0 when none). */
static int candidates(struct manager *m, struct unit *u, pid_t *ret) {
        *ret = 0;
        _cleanup_free_ pid_t *pids = malloc(GUESS_MAX_CHILDREN * sizeof *pids);
        if (!pids)
                return -ENOMEM;
        const struct proc_match mt = { PROC_FIELD_PPID, getpid() };
        int n = proc_scan_find(&mt, pids, GUESS_MAX_CHILDREN), found = 0;
        for (int i = 0; i < n && i < GUESS_MAX_CHILDREN; i++) {
                exit_id_t id;
                if (exit_hub_pid_to_id(m->hub, pids[i], &id) == 0)
                        continue; /* followed already: another unit's, or CMD */
                if (of_unit(m, u, pids[i]) <= 0)
                        continue;
                *ret = pids[i];
                found++;
        }
        return n > GUESS_MAX_CHILDREN ? GUESS_MAX_CHILDREN + 1 : found;
}

static int on_pid_file_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        struct unit *u = userdata;
        struct unit_rare *r = unit_rare(u); /* it exists: the source is in it */
        r->pid_file_retry = sd_event_source_disable_unref(r->pid_file_retry);
        unit_forking_retry(u);
        return 0;
}

/* Not there yet: read again soon (the state machine gives up at
 * TimeoutStartSec= or when no process of the unit is left). */
static int retry_later(struct unit *u) {
        struct unit_rare *r = unit_rare(u);
        if (!r)
                return log_error_errno(ENOMEM, "%s: cannot wait for PIDFile=%s: %m", u->name, u->file->pid_file);
        unsigned n = r->pid_file_reads < 8 ? r->pid_file_reads : 8;
        usec_t delay = 10 * USEC_PER_MSEC << n;
        if (delay > PID_FILE_RETRY_MAX_USEC)
                delay = PID_FILE_RETRY_MAX_USEC;
        r->pid_file_reads++;
        if (!r->pid_file_retry) {
                int k = sd_event_add_time_relative(data(u)->m->event, &r->pid_file_retry, CLOCK_MONOTONIC, delay, 0,
                                                   on_pid_file_retry, u);
                if (k < 0)
                        return log_error_errno(k, "%s: cannot wait for PIDFile=%s: %m", u->name, u->file->pid_file);
        }
        return -EAGAIN;
}

/* Tracks pid (a process tend opened a pidfd for) as u's main process. */
static int track(struct manager *m, struct unit *u, pid_t pid, struct exit_process **ret) {
        int k = exit_routes_reserve(&m->routes, 1); /* its route: op_main_pid_changed */
        if (k < 0)
                return k;
        k = exit_reaper_track(m->reaper, pid, ret);
        if (k < 0)
                return k;
        /* Without a cgroup, a daemon that made its own process group
         * (setsid), or that is in one outside the unit's (a fork after
         * setsid), brings it: what the unit's signals go to from now on.
         * (With a cgroup the leader is not used.) */
        pid_t pgid = getpgid(pid);
        if (pgid == pid || (pgid > 1 && pgid != getpgrp() && unit_group_contains(data(u)->group, pid) == 0))
                unit_group_set_leader(data(u)->group, pgid);
        return 0;
}

/* systemd's trust rule for a pid that is not a process of the unit. */
static int check_trust(struct unit *u, pid_t pid, uid_t owner, bool unsafe) {
        const char *path = u->file->pid_file;
        if (unsafe) {
                log_error("%s: PIDFile=%s refused: reached through an unsafe symlink (owned by another user than "
                          "its directory's), and PID %d is not a process of the unit", u->name, path, (int) pid);
                return -EPERM;
        }
        if (owner != 0 && owner != getuid()) {
                log_error("%s: PIDFile=%s refused: owned by uid %u (not root or tend's user), and PID %d is not a "
                          "process of the unit", u->name, path, (unsigned) owner, (int) pid);
                return -EPERM;
        }
        return 0;
}

/* The file's pid, opened: 0 with *ret_fd; 1 when the process is gone and
 * its exit was reaped as an orphan (*ret_reason); -EAGAIN; an error said. */
static int open_pid(struct manager *m, struct unit *u, pid_t pid, int *ret_fd, struct exit_reason *ret_reason) {
        if (pid == getpid() || pid == 1) {
                log_error("%s: PIDFile=%s refused: PID %d is tend's or init's", u->name, u->file->pid_file, (int) pid);
                return -EPERM;
        }
        int fd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (fd >= 0) {
                *ret_fd = fd;
                return 0;
        }
        if (errno != ESRCH)
                return log_error_errno(errno, "%s: PIDFile=%s: cannot open PID %d: %m", u->name, u->file->pid_file,
                                       (int) pid);
        /* Gone: a daemon that exited after writing its file was reaped as an
         * orphan, its status kept; else a stale file, not rewritten yet. */
        if (exit_hub_orphan_find(m->hub, pid, unit_rare_peek(u) ? unit_rare_peek(u)->forking_since : 0, ret_reason) == 0)
                return 1;
        if (say(u, SAID_GONE))
                log_warning("%s: PIDFile=%s names PID %d, which does not exist (a stale file?): waiting for it to be "
                            "rewritten", u->name, u->file->pid_file, (int) pid);
        return -EAGAIN;
}

static int read_pid_file(struct unit *u, pid_t *ret_pid, uid_t *ret_owner, bool *ret_unsafe) {
        const char *path = u->file->pid_file;
        bool unsafe = false;
        int fd = -1;
        uid_t owner = 0;
        int k = pid_file_open(path, true, &fd, &owner);
        if (k == -ENOLINK) {
                unsafe = true;
                k = pid_file_open(path, false, &fd, &owner);
        }
        if (k == -ENOENT) {
                if (say(u, SAID_MISSING))
                        log_info("%s: PIDFile=%s is not there yet: waiting for it", u->name, path);
                return -EAGAIN;
        }
        if (k < 0)
                return log_error_errno(k, "%s: PIDFile=%s: cannot open it: %m", u->name, path);
        k = pid_file_read(fd, ret_pid);
        safe_close(fd);
        if (k == -ENODATA) /* empty: being written */
                return -EAGAIN;
        if (k == -EINVAL) {
                if (say(u, SAID_PARSE))
                        log_warning("%s: PIDFile=%s holds no PID (a decimal number > 0 on its first line): waiting for "
                                    "it to be rewritten", u->name, path);
                return -EAGAIN;
        }
        if (k < 0)
                return log_error_errno(k, "%s: PIDFile=%s: cannot read it: %m", u->name, path);
        *ret_owner = owner;
        *ret_unsafe = unsafe;
        return 0;
}

static int from_pid_file(struct manager *m, struct unit *u, struct exit_process **ret, struct exit_reason *ret_reason) {
        pid_t pid = 0;
        uid_t owner = 0;
        bool unsafe = true;
        int k = read_pid_file(u, &pid, &owner, &unsafe);
        if (k < 0)
                return k == -EAGAIN ? retry_later(u) : k;
        if (pid == u->main_pid) {
                *ret = NULL; /* MAINPID= named it already */
                return 0;
        }
        _cleanup_close_ int fd = -1;
        k = open_pid(m, u, pid, &fd, ret_reason);
        if (k != 0)
                return k == -EAGAIN ? retry_later(u) : k;
        /* The pidfd first: the checks below are about the process it names. */
        k = of_unit(m, u, pid);
        if (k <= 0 && (k = check_trust(u, pid, owner, unsafe)) < 0)
                return k;
        k = track(m, u, pid, ret);
        if (k == -ECHILD) { /* not tend's child (yet: its parent has not exited?) */
                const struct unit_rare *r = unit_rare_peek(u);
                if (r && r->pid_file_reads >= NOT_CHILD_READS && say(u, SAID_NOT_CHILD))
                        log_warning("%s: PIDFile=%s names PID %d, which is not tend's child (tend follows only its "
                                    "children): waiting for it to be rewritten", u->name, u->file->pid_file,
                                    (int) pid);
                return retry_later(u);
        }
        if (k == -EEXIST) {
                log_error("%s: PIDFile=%s refused: PID %d is another unit's process", u->name, u->file->pid_file,
                          (int) pid);
                return -EPERM;
        }
        if (k < 0)
                return log_error_errno(k, "%s: PIDFile=%s: cannot follow PID %d: %m", u->name, u->file->pid_file,
                                       (int) pid);
        log_info("%s: main process %d (PIDFile=%s)", u->name, (int) pid, u->file->pid_file);
        return 0;
}

/* GuessMainPID=: the one child of tend among the unit's processes that
 * tend does not follow already (systemd's unit_search_main_pid()); without
 * cgroups, the one re-parented to tend during the start. Without cgroups
 * and with several, nothing tells the daemon apart (another unit's may be
 * among them): the start fails rather than claim a running unit has no
 * process, or end while its daemon runs. */
static int guess(struct manager *m, struct unit *u, struct exit_process **ret) {
        *ret = NULL;
        if (!u->file->guess_main_pid || u->main)
                return 0;
        pid_t found;
        int n = candidates(m, u, &found);
        if (n < 0)
                return n;
        if (n != 1 && fallback(m) && n > 0) {
                log_error("%s: without cgroups its daemon cannot be told apart: %d processes were re-parented to tend "
                          "during its start; set PIDFile=", u->name, n);
                return -ESRCH;
        }
        if (n != 1) {
                log_info("%s: main process not guessed: %s", u->name,
                         n == 0 ? "no process of the unit is tend's child" : "more than one process");
                return 0;
        }
        int k = track(m, u, found, ret);
        if (k < 0) {
                log_warning_errno(k, "%s: cannot follow the guessed main process %d: %m", u->name, (int) found);
                *ret = NULL;
                return 0;
        }
        log_info("%s: main process %d (guessed)", u->name, (int) found);
        return 0;
}

int manager_forking_main(void *userdata, struct unit *u, struct exit_process **ret, struct exit_reason *ret_reason) {
        struct manager *m = userdata;
        *ret = NULL;
        if (!u->file->pid_file)
                return guess(m, u, ret);
        int k = from_pid_file(m, u, ret, ret_reason);
        pid_t any;
        /* Without cgroups its daemon may be out of the unit's group: while
         * one re-parented to tend lives, the unit may still write the file. */
        if (k == -EAGAIN && fallback(m) && candidates(m, u, &any) > 0)
                return -EINPROGRESS;
        return k;
}

void manager_forking_changed(struct unit *u) {
        /* Where u is now (not the change being delivered: a restart in the
         * same event may have spawned its new start process already). */
        bool dead = unit_is_down(u) || unit_job_state(u) == UNIT_JOB_FAILED;
        if (u->file->type != UNIT_TYPE_FORKING || !u->file->pid_file || !dead || unit_is_waiting(u))
                return;
        /* As systemd: a dead unit's PID file goes, so that the next start
         * never reads a pid of this run (recycled by then). */
        if (unlink(u->file->pid_file) < 0 && errno != ENOENT)
                log_debug_errno(errno, "%s: PIDFile=%s: cannot remove it: %m", u->name, u->file->pid_file);
}
