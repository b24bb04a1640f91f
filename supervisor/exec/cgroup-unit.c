/* SPDX-License-Identifier: MIT */
/*
 * A unit's processes (cgroup.h): its cgroup in CGROUP mode, walked and
 * signalled; its process group in FALLBACK mode; the unit_group functions
 * that hide which.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "macro.h"
#include "proc-scan.h"
#include "time-util.h"
#include "cgroup-internal.h"

/* cgroup trees nest; tend walks a unit's subtree (a unit may create cgroups
 * below its own) no deeper than this. */
#define SUBTREE_MAX_DEPTH 32

struct unit_group {
        struct cgroup_tree *tree; /* borrowed */
        const char *name;         /* "NAME.service": the cgroup is tree->dir/name, as /proc/PID/cgroup
                                   * names it tree->path/name (not kept: 130 B a unit); the caller's
                                   * when it had the suffix (unit_group_new), else owned */
        int dir_fd;               /* CGROUP: the directory, also CLONE_INTO_CGROUP's fd: open only
                                   * within a call, and from unit_group_spawn_attr to
                                   * unit_group_spawn_done (issue 19's fd budget) */
        int events_fd;            /* CGROUP: cgroup.events, open within a call and while watched
                                   * (from unit_group_events_fd to unit_group_events_close) */
        pid_t leader;             /* FALLBACK: the session leader, 0 if none */
        pid_t *old;               /* FALLBACK: earlier leaders' groups that still had members
                                   * when a new leader came (KillMode=process survivors of an
                                   * earlier run, QA19 M1), NULL until the first; owned */
        unsigned char n_old;      /* entries of old[], at most UNIT_GROUP_MAX_OLD */
        unsigned forgotten;       /* FALLBACK: groups with members dropped from old[] (QA19B M2) */
        bool removed;
        bool made;                /* CGROUP: the cgroup exists and is the unit's to use */
        bool spawning;            /* CGROUP: dir_fd is lent to a spawn's attr */
        bool watched;             /* CGROUP: events_fd is lent to the caller's event loop */
        bool name_owned;          /* name is the group's (made with the suffix) */
        bool killed;              /* CGROUP: cgroup.kill was written, or tend found the cgroup
                                   * existing (its kill count unknown): see unit_group_renew */
        bool spawned;             /* this tend spawned into the group: what is left in it is
                                   * this tend's own (KillMode=process survivors), never killed
                                   * as a previous tend's leftovers */
};

/* ------------------------------------------------------------------------ */
/* pidfds                                                                   */
/* ------------------------------------------------------------------------ */

static int pidfd_open_(pid_t pid) {
        int fd = (int) syscall(SYS_pidfd_open, pid, 0);
        return fd < 0 ? negative_errno() : fd;
}

static int pidfd_signal(int pidfd, int sig) {
        return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 ? negative_errno() : 0;
}

/* ------------------------------------------------------------------------ */
/* A unit's cgroup: walking its subtree                                     */
/* ------------------------------------------------------------------------ */

typedef int (*member_fn)(pid_t pid, void *userdata);

/* Calls fn for every pid in cgroup.procs of dir_fd and of every cgroup below
 * it (a cgroup removed meanwhile is skipped). Stops at fn's first negative
 * answer and returns it. */
static int walk_members(int dir_fd, unsigned depth, member_fn fn, void *userdata) {
        _cleanup_free_ char *procs = NULL;
        int r = cgroup_read_file_at(dir_fd, "cgroup.procs", &procs);
        if (r < 0)
                return r == -ENOENT || r == -ENODEV ? 0 : r;
        for (char *p = procs, *end; *p; p = end) {
                long v = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (v > 0 && (r = fn((pid_t) v, userdata)) < 0)
                        return r;
        }
        if (depth >= SUBTREE_MAX_DEPTH)
                return 0;
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d) {
                r = negative_errno();
                safe_close(fd);
                return r == -ENOENT || r == -ENODEV ? 0 : r;
        }
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                _cleanup_close_ int child = openat(dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (child >= 0)
                        r = walk_members(child, depth + 1, fn, userdata);
        }
        closedir(d);
        return r;
}

/* Removes every cgroup below dir_fd, deepest first. */
static int remove_below(int dir_fd, unsigned depth) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                _cleanup_close_ int child = openat(dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (child >= 0 && depth < SUBTREE_MAX_DEPTH)
                        r = remove_below(child, depth + 1);
                if (r >= 0 && unlinkat(dir_fd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                        r = negative_errno();
        }
        closedir(d);
        return r;
}

static int count_member(pid_t pid, void *userdata) {
        if (pid != getpid())
                ++*(int *) userdata;
        return 0;
}

static int count_members(struct unit_group *g) {
        int n = 0;
        int r = walk_members(g->dir_fd, 0, count_member, &n);
        return r < 0 ? r : n;
}

/* Whether /proc/PID/cgroup names the unit's cgroup or one below it. */
static int cgroup_has_pid(const struct unit_group *g, pid_t pid) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/%d/cgroup", (int) pid);
        _cleanup_free_ char *text = NULL, *path = NULL;
        int r = cgroup_read_file_at(AT_FDCWD, proc, &text);
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        r = cgroup_parse_self(text, &path);
        if (r < 0)
                return r == -ENOMEM ? r : 0;
        const char *t = streq(g->tree->path, "/") ? "" : g->tree->path;
        size_t nt = strlen(t), nn = strlen(g->name);
        if (strncmp(path, t, nt) != 0 || path[nt] != '/')
                return 0;
        const char *rest = path + nt + 1;
        return strncmp(rest, g->name, nn) == 0 && (rest[nn] == '\0' || rest[nn] == '/');
}

static int group_events_open(struct unit_group *g);

static int read_populated(struct unit_group *g) {
        char buf[256];
        int r = group_events_open(g);
        if (r < 0)
                return r;
        /* Reading through the fd the loop polls re-arms its EPOLLPRI. */
        ssize_t n = pread(g->events_fd, buf, sizeof buf - 1, 0);
        if (n < 0)
                return negative_errno();
        buf[n] = '\0';
        for (char *line = buf; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
                if (strncmp(line, "populated ", 10) == 0 && (line[10] == '0' || line[10] == '1'))
                        return line[10] == '1';
        return -EIO;
}

/* Blocks on the events fd until "populated 0" or the deadline. */
static int wait_empty(struct unit_group *g, usec_t deadline) {
        for (;;) {
                int r = read_populated(g);
                if (r <= 0)
                        return r;
                usec_t now = now_usec(CLOCK_MONOTONIC);
                if (now >= deadline)
                        return -ETIMEDOUT;
                usec_t ms = (deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
                int timeout = deadline == USEC_INFINITY ? -1 : ms > INT_MAX ? INT_MAX : (int) ms;
                struct pollfd pfd = { .fd = g->events_fd, .events = POLLPRI };
                if (poll(&pfd, 1, timeout) < 0 && errno != EINTR)
                        return negative_errno();
        }
}

/* ------------------------------------------------------------------------ */
/* Signalling by scan (CGROUP mode, any signal but SIGKILL)                 */
/* ------------------------------------------------------------------------ */

struct member {
        pid_t pid;
        int pidfd;
};

/* One call's processes already signalled, as pidfds: a pid that shows up
 * again is skipped while its process lives, and treated as new once it died
 * (the pid was recycled). */
struct scan {
        struct unit_group *group;
        struct member *v;
        size_t n, cap;
        int sig;
        int found; /* signalled during the current pass */
        pid_t self;
};

static bool scan_seen_live(struct scan *s, pid_t pid) {
        for (size_t i = 0; i < s->n; i++) {
                if (s->v[i].pid != pid)
                        continue;
                if (pidfd_signal(s->v[i].pidfd, 0) == 0)
                        return true;
                safe_close(s->v[i].pidfd);
                s->v[i] = s->v[--s->n];
                return false;
        }
        return false;
}

static int scan_add(struct scan *s, pid_t pid, int pidfd) {
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 16;
                struct member *v = realloc(s->v, cap * sizeof *v);
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        s->v[s->n++] = (struct member) { pid, pidfd };
        return 0;
}

static int scan_visit(pid_t pid, void *userdata) {
        struct scan *s = userdata;
        if (pid == s->self || scan_seen_live(s, pid))
                return 0;
        int pidfd = pidfd_open_(pid);
        if (pidfd < 0)
                return 0; /* gone already */
        /* Re-check after opening: between reading cgroup.procs and
         * pidfd_open the pid may have been recycled by a process elsewhere.
         * The pidfd being live after the check proves the check read the
         * process the pidfd holds. */
        if (cgroup_has_pid(s->group, pid) != 1 || pidfd_signal(pidfd, 0) < 0) {
                safe_close(pidfd);
                return 0;
        }
        if (scan_add(s, pid, pidfd) < 0) {
                safe_close(pidfd);
                return -ENOMEM;
        }
        if (pidfd_signal(pidfd, s->sig) == 0)
                s->found++;
        return 0;
}

static int signal_by_scan(struct unit_group *g, int sig) {
        struct scan s = { .group = g, .sig = sig, .self = getpid() };
        int total = 0, r = 0;
        for (unsigned pass = 0; pass < UNIT_GROUP_MAX_PASSES; pass++) {
                s.found = 0;
                r = walk_members(g->dir_fd, 0, scan_visit, &s);
                total += s.found;
                if (r < 0 || s.found == 0)
                        break;
        }
        for (size_t i = 0; i < s.n; i++)
                safe_close(s.v[i].pidfd);
        free(s.v);
        return r < 0 ? r : total;
}

static int signal_by_cgroup_kill(struct unit_group *g) {
        int n = count_members(g);
        if (n < 0)
                return n;
        int r = cgroup_write_string_at(g->dir_fd, "cgroup.kill", "1");
        if (r >= 0)
                g->killed = true;
        return r < 0 ? r : n;
}

/* ------------------------------------------------------------------------ */
/* FALLBACK mode: the leader's process group                                */
/* ------------------------------------------------------------------------ */

/* kill(-pgid, 0) answers ESRCH only when no process has that process group.
 * Any other answer means the group exists: a process group id is a pid the
 * kernel does not hand out again while a process (zombies included) still has
 * it as its group, so while the unit's group lives its id is the unit's. That
 * is the whole answer, in one system call: no /proc scan (issue 19: one scan
 * per unit made a shutdown of 10,000 units quadratic). */
static bool group_gone(pid_t pgid) {
        return kill(-pgid, 0) < 0 && errno == ESRCH;
}

/* The earlier groups that are gone are forgotten: each is asked once per
 * call, one system call each (at most UNIT_GROUP_MAX_OLD). */
static void old_prune(struct unit_group *g) {
        unsigned n = 0;
        for (unsigned i = 0; i < g->n_old; i++)
                if (!group_gone(g->old[i]))
                        g->old[n++] = g->old[i];
        g->n_old = (unsigned char) n;
}

/* A leader is replaced (a new start, a forking daemon's own group): its
 * group is kept while it has members, so that stop, shutdown and "empty"
 * reach them as the unit's cgroup would. Past UNIT_GROUP_MAX_OLD groups the
 * oldest is forgotten, with a warning: its processes are tend's no more. */
static void old_keep(struct unit_group *g, pid_t pgid) {
        old_prune(g);
        if (pgid <= 1 || group_gone(pgid))
                return;
        for (unsigned i = 0; i < g->n_old; i++)
                if (g->old[i] == pgid)
                        return;
        if (!g->old) {
                g->old = calloc(UNIT_GROUP_MAX_OLD, sizeof *g->old);
                if (!g->old) {
                        log_warning("%s: the processes left in process group %d are no longer tracked (out of memory): "
                                    "stop and shutdown will not reach them", g->name, (int) pgid);
                        g->forgotten++;
                        return;
                }
        }
        if (g->n_old == UNIT_GROUP_MAX_OLD) {
                log_warning("%s: %d process groups of earlier runs still have processes: the oldest, %d, is no "
                            "longer tracked (stop and shutdown will not reach it)", g->name, UNIT_GROUP_MAX_OLD,
                            (int) g->old[0]);
                memmove(g->old, g->old + 1, (UNIT_GROUP_MAX_OLD - 1) * sizeof *g->old);
                g->n_old--;
                g->forgotten++;
        }
        g->old[g->n_old++] = pgid;
}

static int fallback_populated(struct unit_group *g) {
        old_prune(g);
        return (g->leader > 1 && !group_gone(g->leader)) || g->n_old > 0;
}

/* kill(-pgid) of each earlier group: their leaders are long reaped, so a
 * group that still exists is the unit's (group_gone). */
static void old_signal(struct unit_group *g, int sig) {
        old_prune(g);
        for (unsigned i = 0; i < g->n_old; i++) {
                (void) kill(-g->old[i], sig);
                if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
                        (void) kill(-g->old[i], SIGCONT);
        }
}

/* kill(-pgid) reaches the group's processes as the kernel lists them at
 * once, forks included. With the leader unreaped its pid cannot have been
 * recycled; once reaped, a group still there is the unit's (group_gone). */
static int leader_signal(const struct unit_group *g, int sig, bool leader_unreaped) {
        if (g->leader <= 1)
                return 0;
        if (leader_unreaped) {
                pid_t pgid = getpgid(g->leader);
                if (pgid < 0)
                        return errno == ESRCH ? 0 : negative_errno();
                if (pgid != g->leader)
                        return -EPERM;
        }
        if (kill(-g->leader, sig) < 0)
                return errno == ESRCH ? 0 : negative_errno();
        /* as proc-scan.h did for a group without its leader: a stopped
         * member gets SIGCONT so it can act on the signal */
        if (!leader_unreaped && (sig == SIGTERM || sig == SIGINT || sig == SIGHUP))
                (void) kill(-g->leader, SIGCONT);
        return 0;
}

/* The leader's group, then the earlier runs' (none when the leader is
 * refused: -EPERM means nothing was signalled). */
static int fallback_signal(struct unit_group *g, int sig, bool leader_unreaped) {
        int r = leader_signal(g, sig, leader_unreaped);
        if (r != -EPERM)
                old_signal(g, sig);
        return r;
}

static int fallback_contains(const struct unit_group *g, pid_t pid) {
        pid_t pgrp, sid;
        int r = proc_stat_field(pid, PROC_FIELD_PGRP, &pgrp);
        if (r >= 0)
                r = proc_stat_field(pid, PROC_FIELD_SESSION, &sid);
        if (r < 0)
                return r;
        return g->leader > 1 && (pgrp == g->leader || sid == g->leader);
}

/* ------------------------------------------------------------------------ */
/* A unit's processes: the public face                                      */
/* ------------------------------------------------------------------------ */

static bool is_cgroup(const struct unit_group *g) {
        return g->tree->mode == CGROUP_MODE_CGROUP;
}

/* The cgroup's name is name with ".service" unless it has it already: a
 * unit name of 255 characters fits NAME_MAX as it is. */
static bool name_valid(const char *name) {
        size_t n = strlen(name), k = strlen(".service");
        size_t dir = n > k && streq(name + n - k, ".service") ? n : n + k;
        return n > 0 && dir <= NAME_MAX && !streq(name, ".") && !streq(name, "..") && !strchr(name, '/') &&
               !strchr(name, '\n');
}

/* name with the suffix: name itself (borrowed) when it has it, else a new string (owned). */
static const char *service_name(const char *name, bool *ret_owned) {
        size_t n = strlen(name), k = strlen(".service");
        *ret_owned = !(n > k && streq(name + n - k, ".service"));
        return *ret_owned ? cgroup_strdup_printf("%s.service", name) : name;
}

struct unit_group *unit_group_free(struct unit_group *g) {
        if (!g)
                return NULL;
        safe_close(g->dir_fd);
        safe_close(g->events_fd);
        free(g->old);
        if (g->name_owned)
                free((char *) g->name);
        free(g);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct unit_group *, unit_group_free)

/* Opens the unit's cgroup directory if it is not open (issue 19: a unit
 * holds no cgroup fd between calls, but while a spawn or a watch borrows one). */
static int group_open_fds(struct unit_group *g) {
        if (g->dir_fd >= 0)
                return 0;
        g->dir_fd = openat(g->tree->dir_fd, g->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return g->dir_fd < 0 ? negative_errno() : 0;
}

/* Opens cgroup.events if it is not open. */
static int group_events_open(struct unit_group *g) {
        int r = group_open_fds(g); /* the callers go on with the directory */
        if (r < 0 || g->events_fd >= 0)
                return r;
        g->events_fd = openat(g->dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
        return g->events_fd < 0 ? negative_errno() : 0;
}

/* The end of a call: the fds nobody borrows are closed. */
static void group_put(struct unit_group *g) {
        if (!g->spawning)
                g->dir_fd = safe_close(g->dir_fd);
        if (!g->watched)
                g->events_fd = safe_close(g->events_fd);
}

/* The unit's cgroup exists and its directory is open: made now if it is not
 * yet (EEXIST: made meanwhile by someone else, e.g. an operator; used as it
 * is), or again if it went away since (an operator's rmdir). */
static int group_ensure(struct unit_group *g) {
        int r = g->made ? group_open_fds(g) : -ENOENT;
        if (r != -ENOENT)
                return r;
        if (mkdirat(g->tree->dir_fd, g->name, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        r = group_open_fds(g);
        g->made = r >= 0;
        return r;
}

/* CGROUP mode, at unit_group_new: the names, and the cgroup opened if it
 * exists already (a previous tend's: a cgroup.kill of tend's cgroup may have
 * counted in it, unit_group_renew). One that does not exist is made only
 * before the unit's first spawn (group_ensure): 1,000 mkdirs of cgroups,
 * ≈ 25–56 µs each, no longer delay the first unit's start. */
static int group_init_cgroup(struct unit_group *g) {
        struct cgroup_tree *t = g->tree;
        int r = group_open_fds(g);
        if (r == -ENOENT)
                return 0;
        if (r == 0) {
                g->made = true;
                g->killed = t->in_leaf;
        }
        group_put(g);
        return r;
}

int unit_group_new(struct cgroup_tree *tree, const char *name, struct unit_group **ret_group) {
        if (!tree || !name || !ret_group || !name_valid(name))
                return -EINVAL;
        _cleanup_(unit_group_freep) struct unit_group *g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        g->tree = tree;
        g->dir_fd = g->events_fd = -1;
        g->name = service_name(name, &g->name_owned);
        if (!g->name)
                return -ENOMEM;
        if (tree->mode == CGROUP_MODE_CGROUP) {
                int r = group_init_cgroup(g);
                if (r < 0)
                        return r;
        }
        *ret_group = TAKE_PTR(g);
        return 0;
}

char *unit_group_dir(const struct unit_group *group) {
        if (!group || group->removed || group->tree->mode != CGROUP_MODE_CGROUP)
                return NULL;
        return cgroup_strdup_printf("%s/%s", group->tree->dir, group->name);
}

void unit_group_set_leader(struct unit_group *group, pid_t pid) {
        if (!group)
                return;
        pid = pid > 0 ? pid : 0;
        if (!is_cgroup(group) && group->leader > 1 && group->leader != pid)
                old_keep(group, group->leader);
        for (unsigned i = 0; i < group->n_old; i++)
                if (group->old[i] == pid) { /* a leader again: not an earlier run's */
                        memmove(group->old + i, group->old + i + 1, (group->n_old - i - 1) * sizeof *group->old);
                        group->n_old--;
                        break;
                }
        group->leader = pid;
}

pid_t unit_group_leader(const struct unit_group *group) {
        return group ? group->leader : 0;
}

size_t unit_group_old_groups(struct unit_group *group, pid_t *pgids, size_t max) {
        if (!group || is_cgroup(group))
                return 0;
        old_prune(group);
        for (size_t i = 0; i < group->n_old && i < max; i++)
                pgids[i] = group->old[i];
        return group->n_old;
}

void unit_group_keep_old(struct unit_group *group, pid_t pgid) {
        if (group && !is_cgroup(group) && pgid != group->leader)
                old_keep(group, pgid);
}

int unit_group_spawn_attr(struct unit_group *group, struct exit_spawn_attr *attr) {
        if (!group || !attr)
                return -EINVAL;
        if (group->removed)
                return -ENOENT;
        if (is_cgroup(group)) {
                int r = group_ensure(group);
                if (r < 0)
                        return r;
                attr->flags |= EXIT_SPAWN_CGROUP;
                attr->cgroup_fd = group->dir_fd;
                group->spawning = true;
        }
        group->spawned = true;
        return 0;
}

void unit_group_spawn_done(struct unit_group *group) {
        if (!group)
                return;
        group->spawning = false;
        group_put(group);
}

/* corpus: TasksMax=. The pids controller is enabled for tend's units (in
 * tend's cgroup.subtree_control, possible once tend is in its leaf) when
 * the unit's cgroup has no pids.max yet. */
int unit_group_set_pids_max(struct unit_group *group, uint64_t max) {
        char v[32];
        if (!group)
                return -EINVAL;
        if (!is_cgroup(group))
                return -EOPNOTSUPP;
        int r = group_ensure(group);
        if (r < 0)
                return r;
        if (max == UINT64_MAX)
                snprintf(v, sizeof v, "max");
        else
                snprintf(v, sizeof v, "%llu", (unsigned long long) max);
        r = cgroup_write_string_at(group->dir_fd, "pids.max", v);
        if (r == -ENOENT && cgroup_write_string_at(group->tree->dir_fd, "cgroup.subtree_control", "+pids") >= 0)
                r = cgroup_write_string_at(group->dir_fd, "pids.max", v);
        group_put(group);
        return r;
}

int unit_group_events_fd(struct unit_group *group) {
        if (!group)
                return -EINVAL;
        if (group->removed || (is_cgroup(group) && !group->made))
                return -ENOENT;
        if (!is_cgroup(group))
                return -EOPNOTSUPP;
        int r = group_events_open(group);
        if (r < 0) {
                group_put(group);
                return r;
        }
        group->watched = true;
        return group->events_fd;
}

void unit_group_events_close(struct unit_group *group) {
        if (!group)
                return;
        group->watched = false;
        group_put(group);
}

int unit_group_populated(struct unit_group *group) {
        if (!group)
                return -EINVAL;
        if (group->removed)
                return -ENOENT;
        if (!is_cgroup(group))
                return fallback_populated(group);
        /* Not made yet: nothing was ever spawned into it. */
        if (!group->made)
                return 0;
        int r = read_populated(group);
        group_put(group);
        return r;
}

int unit_group_kill_leftovers_begin(struct unit_group *group) {
        if (!group)
                return -EINVAL;
        if (group->removed)
                return -ENOENT;
        if (!is_cgroup(group))
                return 0;
        int r = group_ensure(group);
        if (r >= 0)
                r = read_populated(group);
        if (r > 0)
                r = signal_by_cgroup_kill(group);
        group_put(group);
        return r;
}

int unit_group_kill_leftovers(struct unit_group *group, int timeout_ms) {
        usec_t deadline = deadline_after_ms(timeout_ms);
        int n = unit_group_kill_leftovers_begin(group);
        if (n <= 0)
                return n;
        int r = wait_empty(group, deadline);
        group_put(group);
        return r < 0 ? r : n;
}

bool unit_group_spawned(const struct unit_group *group) {
        return group && group->spawned;
}

void unit_group_resume(struct unit_group *group, bool spawned, int renew) {
        if (!group)
                return;
        group->spawned = spawned;
        if (renew >= 0 && is_cgroup(group))
                group->killed = renew > 0 && group->made;
}

struct member_list {
        pid_t *pids;
        size_t n, max;
        pid_t self;
};

static int list_member(pid_t pid, void *userdata) {
        struct member_list *l = userdata;
        if (pid == l->self)
                return 0;
        if (l->n < l->max)
                l->pids[l->n] = pid;
        l->n++;
        return 0;
}

int unit_group_members(struct unit_group *group, pid_t *pids, size_t max) {
        if (!group || (!pids && max > 0))
                return -EINVAL;
        if (group->removed)
                return -ENOENT;
        if (!is_cgroup(group) || !group->made)
                return 0;
        struct member_list l = { .pids = pids, .max = max, .self = getpid() };
        int r = group_open_fds(group);
        if (r >= 0)
                r = walk_members(group->dir_fd, 0, list_member, &l);
        group_put(group);
        return r < 0 ? r : (int) (l.n > INT_MAX ? INT_MAX : l.n);
}

bool unit_group_opened(const struct unit_group *group) {
        return group && !group->removed && is_cgroup(group) && group->made;
}

bool unit_group_needs_renewal(const struct unit_group *group) {
        return group && !group->removed && is_cgroup(group) && group->killed;
}

/* Removes the unit's cgroup, which must be empty (-EBUSY if populated), and
 * closes its fds. One never opened holds nothing of tend's, if it exists at
 * all: only the rmdir. */
static int group_rmdir(struct unit_group *g) {
        /* The kernel refuses (EBUSY) the rmdir of a populated cgroup or of one
         * with children: tried first, it is the whole work for a unit's
         * usual empty leaf (issue 19: the shutdown of 10,000 units opened,
         * read and listed each one before). */
        bool gone = unlinkat(g->tree->dir_fd, g->name, AT_REMOVEDIR) == 0 || errno == ENOENT;
        if (!gone && errno != EBUSY && errno != ENOTEMPTY) {
                int r = negative_errno();
                group_put(g);
                return r;
        }
        if (!gone && g->made) {
                int r = read_populated(g);
                if (r == 0)
                        r = remove_below(g->dir_fd, 0);
                if (r == -ENOENT) /* gone already (an operator's rmdir) */
                        r = 0;
                if (r != 0) {
                        group_put(g);
                        return r > 0 ? -EBUSY : r;
                }
        }
        if (!gone && unlinkat(g->tree->dir_fd, g->name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
                int r = negative_errno();
                group_put(g);
                return r;
        }
        g->dir_fd = safe_close(g->dir_fd);
        g->events_fd = safe_close(g->events_fd);
        g->watched = g->spawning = g->made = false;
        return 0;
}

int unit_group_renew(struct unit_group *group) {
        if (!group)
                return -EINVAL;
        if (group->removed)
                return -ENOENT;
        if (!unit_group_needs_renewal(group))
                return 0;
        /* Living survivors this tend's lineage spawned (QA19 H1: a
         * re-executed tend that could only guess the kill count): a cgroup
         * whose kill count bit a new child would have killed them at their
         * birth, and any cgroup.kill since would have killed them: its count
         * is not one that kills, and it cannot be removed anyway. */
        if (group->made && group->spawned) {
                int p = read_populated(group);
                group_put(group);
                if (p > 0) {
                        group->killed = false;
                        return 0;
                }
        }
        /* !made: an earlier renewal failed after the rmdir (or the
         * cgroup was never opened); only the mkdir is left to do. */
        if (group->made) {
                int r = group_rmdir(group);
                if (r < 0)
                        return r;
        }
        int r = group_ensure(group);
        group_put(group);
        if (r < 0)
                return r;
        group->killed = false;
        return 1;
}

int unit_group_signal(struct unit_group *group, int sig, bool leader_unreaped) {
        if (!group || sig <= 0 || sig >= _NSIG)
                return -EINVAL;
        if (group->removed)
                return -ENOENT;
        if (!is_cgroup(group))
                return fallback_signal(group, sig, leader_unreaped);
        if (!group->made)
                return 0; /* not made yet: nothing was spawned into it */
        /* An empty cgroup (cgroup.events, authoritative) has nobody to
         * signal: no scan, and no cgroup.kill that would force a renewal. */
        int r = read_populated(group);
        if (r > 0)
                r = sig == SIGKILL ? signal_by_cgroup_kill(group) : signal_by_scan(group, sig);
        group_put(group);
        return r;
}

int unit_group_contains(struct unit_group *group, pid_t pid) {
        if (!group || pid <= 0)
                return -EINVAL;
        if (group->removed)
                return -ENOENT;
        if (!is_cgroup(group))
                return fallback_contains(group, pid);
        return group->made ? cgroup_has_pid(group, pid) : 0;
}

int unit_group_remove(struct unit_group *group) {
        if (!group)
                return -EINVAL;
        if (group->removed || !is_cgroup(group))
                return 0;
        int r = group_rmdir(group);
        if (r < 0)
                return r;
        group->removed = true;
        return 0;
}

unsigned unit_group_forgotten(const struct unit_group *g) {
        return g ? g->forgotten : 0;
}
