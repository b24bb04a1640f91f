/* SPDX-License-Identifier: MIT */
/*
 * /proc scans (proc-scan.h). A process already signalled is remembered by
 * its identity — pid plus start time (field 22 of /proc/PID/stat), which a
 * recycled pid never shares — in a hash set, so the set costs no fd per
 * process (thousands of leftovers must not exhaust RLIMIT_NOFILE) and each
 * lookup is O(1). Every signal still goes through a pidfd, opened for that
 * one signal after the re-check and closed at once.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hashmap.h"
#include "log.h"
#include "macro.h"
#include "proc-scan.h"

struct proc_entry {
        uint64_t key;               /* the pid, > 0 */
        unsigned long long start;   /* start time, clock ticks since boot */
        int last_signal;
};
HASHMAP_DEFINE(proc_entry_map, struct proc_entry);

struct proc_set {
        struct proc_entry_map entries; /* pid -> its identity and the last signal sent */
        bool warned_emfile;
};

struct proc_set *proc_set_new(void) {
        return calloc(1, sizeof(struct proc_set));
}

struct proc_set *proc_set_free(struct proc_set *set) {
        if (!set)
                return NULL;
        proc_entry_map_done(&set->entries);
        free(set);
        return NULL;
}

/* The fields tend reads from /proc/PID/stat. */
struct proc_stat {
        pid_t ppid, pgrp, session;
        unsigned long long start;
};

static int read_stat(pid_t pid, struct proc_stat *ret) {
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ESRCH ? -ESRCH : negative_errno();
        ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n <= 0)
                return n < 0 ? negative_errno() : -ESRCH;
        buf[n] = '\0';
        /* "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
         * majflt cmajflt utime stime cutime cstime priority nice threads
         * itrealvalue starttime …": comm may hold ") ". */
        char *p = strrchr(buf, ')');
        char state;
        int ppid, pgrp, session;
        unsigned long long start;
        if (!p || sscanf(p + 1, " %c %d %d %d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                         &state, &ppid, &pgrp, &session, &start) != 5)
                return -EIO;
        *ret = (struct proc_stat) { ppid, pgrp, session, start };
        return 0;
}

int proc_stat_field(pid_t pid, enum proc_field field, pid_t *ret) {
        struct proc_stat st;
        int k = read_stat(pid, &st);
        if (k < 0)
                return k;
        *ret = field == PROC_FIELD_PPID ? st.ppid : field == PROC_FIELD_PGRP ? st.pgrp : st.session;
        return 0;
}

int proc_start_time(pid_t pid, unsigned long long *ret) {
        struct proc_stat st;
        int k = read_stat(pid, &st);
        if (k < 0)
                return k;
        *ret = st.start;
        return 0;
}

static bool stat_matches(const struct proc_stat *st, const struct proc_match *m, size_t n) {
        for (size_t i = 0; i < n; i++) {
                pid_t v = m[i].field == PROC_FIELD_PPID ? st->ppid : m[i].field == PROC_FIELD_PGRP ? st->pgrp : st->session;
                if (v == m[i].value)
                        return true;
        }
        return false;
}

/* The entry for pid (a stale identity, a recycled pid, is replaced), or a new
 * one; NULL when out of memory. */
static struct proc_entry *set_get(struct proc_set *set, pid_t pid, unsigned long long start) {
        struct proc_entry fresh = { .key = (uint64_t) pid, .start = start };
        struct proc_entry *e = proc_entry_map_get(&set->entries, fresh.key);
        if (!e) {
                if (proc_entry_map_reserve(&set->entries, proc_entry_map_size(&set->entries) + 1) < 0)
                        return NULL;
                return proc_entry_map_put(&set->entries, fresh);
        }
        if (e->start != start)
                *e = fresh; /* a recycled pid: a new process */
        return e;
}

/* Signals pid through a pidfd opened now, after re-checking that the process
 * it names is still the one the scan found (same start time, still matching). */
static int signal_checked(struct proc_set *set, pid_t pid, const struct proc_stat *seen,
                          const struct proc_match *m, size_t n, int sig) {
        _cleanup_close_ int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0) {
                if ((errno == EMFILE || errno == ENFILE) && !set->warned_emfile) {
                        set->warned_emfile = true;
                        log_error("out of file descriptors opening a pidfd for pid %d: it is not signalled", (int) pid);
                }
                return negative_errno();
        }
        struct proc_stat now;
        if (read_stat(pid, &now) < 0 || now.start != seen->start || !stat_matches(&now, m, n))
                return -ESRCH;
        if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0)
                return negative_errno();
        /* A stopped process must see the termination request. */
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGCONT, NULL, 0);
        return 0;
}

/* One pass over /proc. Returns how many it signalled. */
static int scan_pass(struct proc_set *set, const struct proc_match *m, size_t n, int sig) {
        DIR *d = opendir("/proc");
        if (!d)
                return negative_errno();
        pid_t self = getpid();
        int count = 0, k = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                long v = strtol(de->d_name, &end, 10);
                pid_t pid = (pid_t) v;
                struct proc_stat st;
                if (*end || v <= 0 || pid == self || read_stat(pid, &st) < 0 || !stat_matches(&st, m, n))
                        continue;
                struct proc_entry *e = set_get(set, pid, st.start);
                if (!e) {
                        k = -ENOMEM;
                        break;
                }
                if (e->last_signal == sig)
                        continue;
                int r = signal_checked(set, pid, &st, m, n, sig);
                if (r == -EMFILE || r == -ENFILE) {
                        k = r;
                        continue; /* the others may still be reachable */
                }
                e->last_signal = sig;
                count += r == 0;
        }
        closedir(d);
        return count > 0 || k == 0 ? count : k;
}

/* A group that forks faster than tend scans would keep it here forever: the
 * passes are capped, and the caller's next event (an orphan reaped, the stop
 * timeout's SIGKILL) scans again. */
#define PROC_SCAN_MAX_PASSES 16

int proc_set_signal(struct proc_set *set, const struct proc_match *m, size_t n, int sig) {
        int total = 0;
        for (int pass = 0; pass < PROC_SCAN_MAX_PASSES; pass++) {
                int k = scan_pass(set, m, n, sig);
                if (k < 0)
                        return total > 0 ? total : k;
                if (k == 0)
                        return total;
                total += k;
        }
        return total;
}

int proc_scan_find(const struct proc_match *m, pid_t *pids, size_t max) {
        DIR *d = opendir("/proc");
        if (!d)
                return negative_errno();
        pid_t self = getpid();
        int count = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                long v = strtol(de->d_name, &end, 10);
                pid_t pid = (pid_t) v;
                struct proc_stat st;
                if (*end || v <= 0 || pid == self || read_stat(pid, &st) < 0 || !stat_matches(&st, m, 1))
                        continue;
                if ((size_t) count < max)
                        pids[count] = pid;
                if (count < INT_MAX)
                        count++;
        }
        closedir(d);
        return count;
}
