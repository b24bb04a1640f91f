/* SPDX-License-Identifier: MIT */
/*
 * Finding and signalling processes without a cgroup (SPEC §4 "Signals to
 * groups", §6): members of a process group, or children re-parented to tend,
 * found in /proc, each opened as a pidfd and kept only if, after opening,
 * /proc/PID/stat still matches and the pidfd is live. Signals go through the
 * pidfds, never to a bare pid. Passes repeat until one finds nothing new,
 * because forks race the scan.
 *
 * Not thread-safe: one proc_set per caller.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

enum proc_field {
        PROC_FIELD_PPID,
        PROC_FIELD_PGRP,
        PROC_FIELD_SESSION,
};

struct proc_match {
        enum proc_field field;
        pid_t value;
};

/* Processes already signalled, remembered by pid and start time (so a
 * recycled pid is never mistaken for one of them), without an fd each. */
struct proc_set;

struct proc_set *proc_set_new(void);
struct proc_set *proc_set_free(struct proc_set *set); /* NULL accepted; returns NULL */

/*
 * Sends sig to every live process matching any of matches[0..n) that has not
 * had sig from this set yet (tend itself excluded), repeating passes until one
 * finds none (at most 16: a group forking faster than the scan is caught by
 * the caller's next scan). Returns the number of processes signalled (>= 0) or a negative
 * errno (-ENOMEM; /proc unreadable: -errno of opendir).
 */
int proc_set_signal(struct proc_set *set, const struct proc_match *matches, size_t n, int sig);

/*
 * Lists the processes matching m (tend itself excluded) into pids[0..max) in
 * /proc's order: Type=forking's guess of its main process (SPEC §4; systemd's
 * GuessMainPID=) lists tend's own children (PROC_FIELD_PPID = getpid()).
 * Returns how many matched (>= 0; more than max when pids was too short: only
 * max are written), or -errno of opendir. A pid is about the process at the
 * time it was read: open a pidfd and re-check before acting on it.
 */
int proc_scan_find(const struct proc_match *m, pid_t *pids, size_t max);

/* Reads field of /proc/PID/stat. Returns 0 and *ret, or -ESRCH/-errno. */
int proc_stat_field(pid_t pid, enum proc_field field, pid_t *ret);

/* pid's start time (field 22 of /proc/PID/stat: clock ticks since boot):
 * with the pid, a process's identity. 0 or -ESRCH (gone), -EIO, -errno. */
int proc_start_time(pid_t pid, unsigned long long *ret);
