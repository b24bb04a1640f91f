/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"
#include "proc-scan.h"

struct proc_entry {
        pid_t pid;
        int pidfd;
        int last_signal;
};

struct proc_set {
        struct proc_entry *entries;
        size_t n, cap;
};

struct proc_set *proc_set_new(void) {
        return calloc(1, sizeof(struct proc_set));
}

struct proc_set *proc_set_free(struct proc_set *set) {
        if (!set)
                return NULL;
        for (size_t i = 0; i < set->n; i++)
                safe_close(set->entries[i].pidfd);
        free(set->entries);
        free(set);
        return NULL;
}

int proc_stat_field(pid_t pid, enum proc_field field, pid_t *ret) {
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : negative_errno();
        ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n <= 0)
                return n < 0 ? negative_errno() : -ESRCH;
        buf[n] = '\0';
        /* "pid (comm) state ppid pgrp session …": comm may hold ") ". */
        char *p = strrchr(buf, ')');
        int ppid, pgrp, session;
        char state;
        if (!p || sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4)
                return -EIO;
        *ret = field == PROC_FIELD_PPID ? ppid : field == PROC_FIELD_PGRP ? pgrp : session;
        return 0;
}

static bool matches_any(pid_t pid, const struct proc_match *m, size_t n) {
        for (size_t i = 0; i < n; i++) {
                pid_t v;
                if (proc_stat_field(pid, m[i].field, &v) == 0 && v == m[i].value)
                        return true;
        }
        return false;
}

static int pidfd_signal(int pidfd, int sig) {
        return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 ? negative_errno() : 0;
}

/* The entry for pid if it names a live process (a dead one's pid may have
 * been recycled: its entry is dropped). */
static struct proc_entry *set_find_live(struct proc_set *set, pid_t pid) {
        for (size_t i = 0; i < set->n; i++) {
                struct proc_entry *e = &set->entries[i];
                if (e->pid != pid)
                        continue;
                if (pidfd_signal(e->pidfd, 0) == 0)
                        return e;
                safe_close(e->pidfd);
                *e = set->entries[--set->n];
                return NULL;
        }
        return NULL;
}

static struct proc_entry *set_add(struct proc_set *set, pid_t pid, int pidfd) {
        if (set->n == set->cap) {
                size_t cap = set->cap ? set->cap * 2 : 16;
                struct proc_entry *e = realloc(set->entries, cap * sizeof *e);
                if (!e)
                        return NULL;
                set->entries = e;
                set->cap = cap;
        }
        set->entries[set->n] = (struct proc_entry) { pid, pidfd, 0 };
        return &set->entries[set->n++];
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
                if (*end || v <= 0 || pid == self || !matches_any(pid, m, n))
                        continue;
                struct proc_entry *e = set_find_live(set, pid);
                if (!e) {
                        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
                        if (pidfd < 0)
                                continue; /* gone already */
                        /* Re-check after opening: the pid may have been
                         * recycled between the scan and pidfd_open. */
                        if (!matches_any(pid, m, n) || pidfd_signal(pidfd, 0) < 0) {
                                close(pidfd);
                                continue;
                        }
                        e = set_add(set, pid, pidfd);
                        if (!e) {
                                close(pidfd);
                                k = -ENOMEM;
                                break;
                        }
                }
                if (e->last_signal == sig)
                        continue;
                e->last_signal = sig;
                if (pidfd_signal(e->pidfd, sig) == 0) {
                        count++;
                        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
                                (void) pidfd_signal(e->pidfd, SIGCONT); /* a stopped process must see it */
                }
        }
        closedir(d);
        return k < 0 ? k : count;
}

int proc_set_signal(struct proc_set *set, const struct proc_match *m, size_t n, int sig) {
        int total = 0;
        for (;;) {
                int k = scan_pass(set, m, n, sig);
                if (k < 0)
                        return k;
                if (k == 0)
                        return total;
                total += k;
        }
}
