/* SPDX-License-Identifier: MIT */
/*
 * The units' runtime: the manager's side of the state machine's seam
 * (struct unit_ops, unit.h) with the real reaper, cgroups, log streams, notify
 * sockets, watchdog leases and timers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <systemd/sd-event.h>

#include "cgroup.h"
#include "due-timer.h"
#include "exec-dirs.h"
#include "exec-stdio.h"
#include "exit-routes.h"
#include "group-cache.h"
#include "kept-env.h"
#include "libexit.h"
#include "log.h"
#include "logs.h"
#include "macro.h"
#include "manager-internal.h"
#include "notify.h"
#include "sandbox.h"
#include "singleflight.h"
#include "unit-file.h"
#include "unit.h"
#include "watchdog.h"

extern char **environ;

#define UNIT_DEFAULT_NOFILE_SOFT 1024u

/* ---- notify sockets and watchdog leases (SPEC §4; notify.h, watchdog.h) ---- */

static void on_unit_notify(void *userdata, pid_t sender, const struct notify_message *msg) {
        struct unit *u = userdata;
        const char *why = NULL;
        if (!unit_notify_allowed(u, sender, &why)) {
                /* No effect at all, MAINPID= included; logged, rate-limited. */
                (void) notify_socket_log_rejected(unit_rare_peek(u)->notify, sender, why); /* it has one */
                return;
        }
        unit_notify(u, msg);
}

/*
 * parsefix: where a unit in a network namespace of its own (PrivateNetwork=)
 * gets its notify socket, a path (an abstract address belongs to a network
 * namespace): /run/tend-notify as root, else $XDG_RUNTIME_DIR/tend-notify;
 * NULL (abstract: the unit cannot notify) without a runtime directory.
 */
static const char *notify_path_dir(const struct unit *u, char buf[static PATH_MAX]) {
        if (!unit_file_hardening(u->file)->private_network)
                return NULL;
        const char *base = geteuid() == 0 ? "/run" : getenv("XDG_RUNTIME_DIR");
        if (!base || base[0] != '/' || snprintf(buf, PATH_MAX, "%s/tend-notify", base) >= PATH_MAX) {
                log_warning("%s: PrivateNetwork=: no runtime directory for a notify socket it can reach "
                            "($XDG_RUNTIME_DIR unset): its notifications will not arrive", u->name);
                return NULL;
        }
        return buf;
}

/* A unit whose NotifyAccess= is not none gets its own socket at its first
 * spawn, kept across restarts; its address reaches the processes allowed
 * to speak (systemd: the main process; Exec*= ones too with exec or all).
 * A main spawn whose PrivateNetwork= changed (daemon-reload) since the socket
 * was made gets a new one of the other kind. */
static int notify_prepare_spawn(struct manager *m, struct unit *u, bool main, char ***envp) {
        unit_notify_access a = unit_notify_access_effective(u->file);
        if (a == UNIT_NOTIFY_ACCESS_NONE || (!main && a == UNIT_NOTIFY_ACCESS_MAIN))
                return 0;
        struct unit_rare *r = unit_rare(u);
        if (!r)
                return log_error_errno(ENOMEM, "%s: cannot create its notify socket: %m", u->name);
        char buf[PATH_MAX];
        const char *dir = notify_path_dir(u, buf);
        if (r->notify && main && (notify_socket_address(r->notify)[0] == '/') != !!dir)
                r->notify = notify_socket_free(r->notify);
        if (!r->notify) {
                int k = notify_socket_new(m->event, u->name, dir, on_unit_notify, u, &r->notify);
                if (k < 0)
                        return log_error_errno(k, "%s: cannot create its notify socket: %m", u->name);
                log_debug("%s: notify socket %s", u->name, notify_socket_address(r->notify));
        }
        return notify_env_add(envp, notify_socket_address(r->notify), main ? unit_watchdog_usec(u->file) : 0);
}

int manager_notify_adopt(struct manager *m, struct unit *u, int fd) {
        struct unit_rare *r = unit_rare(u);
        if (!r)
                return -ENOMEM;
        notify_socket_free(r->notify);
        r->notify = NULL;
        return notify_socket_adopt(m->event, u->name, on_unit_notify, u, fd, &r->notify);
}

static int op_contains(void *userdata, struct unit *u, pid_t pid) {
        return unit_group_contains(data(u)->group, pid);
}

/* MAINPID=: the pidfd first, so that the checks below are about the
 * process named when the message was read, not a later holder of its pid. */
static int op_adopt(void *userdata, struct unit *u, pid_t pid, struct exit_process **ret) {
        struct manager *m = userdata;
        _cleanup_close_ int fd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
                return negative_errno();
        int k = unit_group_contains(data(u)->group, pid);
        if (k <= 0)
                return k < 0 ? k : -EPERM;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 0) != 0)
                return -ESRCH; /* exited since: the answer above may be about another process */
        /* Its route is set when it becomes the main process (op_main_pid_changed). */
        k = exit_routes_reserve(&m->routes, 1);
        return k < 0 ? k : exit_reaper_track(m->reaper, pid, ret);
}

static int op_watchdog(void *userdata, struct unit *u, usec_t ttl) {
        struct manager *m = userdata;
        struct unit_rare *r = ttl == 0 ? data(u)->rare : unit_rare(u);
        if (ttl == 0) {
                uint64_t none = 0; /* no rare fields: no lease */
                return watchdog_lease_clear(m->watchdogs, u->name, r ? &r->watchdog_revision : &none);
        }
        if (!r)
                return -ENOMEM;
        return watchdog_lease_set(m->watchdogs, u->name, ttl, u->main_pid, &r->watchdog_revision);
}


static void lease_expired(struct manager *m, struct unit *u) {
        if (data(u)->rare) /* (it has: its revision was not 0) */
                data(u)->rare->watchdog_revision = 0;
        unit_watchdog_expired(u);
}

/* The store expired a lease (cause `expired`), or the watch fell behind
 * (name NULL): every lease held is checked. */
void manager_on_lease_expired(void *userdata, const char *name, uint64_t revision) {
        struct manager *m = userdata;
        if (name) {
                struct unit *u = manager_find_unit(m, name);
                if (u && revision && unit_watchdog_revision(u) == revision)
                        lease_expired(m, u);
                return;
        }
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                uint64_t rev = unit_watchdog_revision(u);
                if (rev && watchdog_lease_alive(m->watchdogs, u->name, rev) == 0)
                        lease_expired(m, u);
        }
}

/* tend's own manager (SPEC §1 "Under systemd"): the counts, and READY=1
 * once every initial start job has settled. */
void manager_upstream_update(struct manager *m) {
        if (!m->upstream)
                return;
        size_t running = 0, failed = 0;
        bool settled = m->initial_jobs_queued; /* a unit not started yet is dead: "settled" */
        for (size_t i = 0; i < m->n_units; i++) {
                const struct unit *u = m->units[i];
                running += unit_get_state(u) == UNIT_RUNNING;
                failed += unit_get_state(u) == UNIT_FAILED;
                settled = settled && unit_is_settled(u);
        }
        notify_upstream_update(m->upstream, settled, m->n_units, running, failed);
}

/* ---- the seam (struct unit_ops) ---- */

/* A spawn's parts, built step by step (op_spawn) and freed together. */
struct spawn {
        struct sandbox_plan *sb;
        char **envp, **argv, *path;
        bool keep; /* envp is kept for the next spawn (kept-env.h) */
        bool said; /* the failure was logged by the step that failed */
};

static void spawn_done(struct spawn *s) {
        strv_free(s->envp);
        strv_free(s->argv);
        free(s->path);
        sandbox_plan_free(s->sb);
}

/* User=, Group=… resolved at each start, all the child needs computed now (sandbox.h). */
static int spawn_plan(struct spawn *s, struct unit *u, const struct unit_command *cmd) {
        int k = sandbox_plan_new(u->name, u->file, cmd->flags, NULL, &s->sb);
        s->said = k < 0 && k != -ENOMEM;
        return k;
}

/* The environment: the kept one when it may be (kept-env.h), else tend's
 * own, the file's (Environment=, EnvironmentFile=, User='s) and the notify
 * socket's. */
/* etcd: a singleton runs only while this host holds its key, before its fencing
 * deadline, with the key's revision as $TEND_FENCING_TOKEN (docs/cluster.md §5). */
static int singleton_environment(struct spawn *s, struct manager *m, struct unit *u) {
        uint64_t token;
        char b[64];
        if (!u->file->singleton || !m->cluster)
                return 0;
        if (!cluster_singleton_may_run(m->cluster, u->name, &token)) {
                log_warning("%s: not started: this host does not hold its singleton key (or is past its "
                            "fencing deadline)", u->name);
                s->said = true;
                return -ESTALE;
        }
        snprintf(b, sizeof b, "TEND_FENCING_TOKEN=%llu", (unsigned long long) token);
        return unit_env_set(&s->envp, b);
}

static int spawn_environment(struct spawn *s, struct manager *m, struct unit *u, bool main) {
        struct unit_data *d = data(u);
        const struct unit_file *f = u->file;
        s->keep = kept_env_wanted(main, u->restarts, f->n_environment_files, s->sb->environment_owned);
        if (s->keep && d->rare && (s->envp = kept_env_take(&d->rare->main_env, f->text_size, f->text_hash)))
                return singleton_environment(s, m, u);
        int k = unit_build_environment(u->name, environ, main ? 0 : u->main_pid, s->sb->environment,
                                       f->environment_files, f->n_environment_files, &s->envp);
        if (k < 0) {
                s->said = k != -ENOMEM; /* EnvironmentFile= */
                return k;
        }
        k = notify_prepare_spawn(m, u, main, &s->envp);
        s->said = k < 0;
        if (k >= 0) /* corpus: UnsetEnvironment=, from everything tend set (systemd.exec(5)) */
                unit_env_unset(s->envp, unit_file_exec(f)->unset_environment);
        if (k >= 0)
                k = singleton_environment(s, m, u);
        return k;
}

/* argv expanded with the environment, and the executable looked up in its
 * $PATH: one that is missing or not executable is exec-failed (unit.h). */
static int spawn_executable(struct spawn *s, struct unit *u, const struct unit_command *cmd) {
        int k = unit_command_expand(cmd, s->envp, &s->argv, NULL);
        if (k < 0)
                return k;
        k = unit_command_find_executable(cmd, s->envp, &s->path);
        if (k != -ENOENT && k != -EACCES)
                return k;
        if (k == -ENOENT)
                log_error("%s: %s: executable not found", u->name, cmd->path);
        else
                log_error_errno(k, "%s: %s: not executable (%m)", u->name, cmd->path);
        s->said = true;
        return -ENOEXEC;
}

/* corpus: TasksMax= as pids.max of the unit's cgroup; without cgroups (or a
 * pids controller) it cannot be enforced: one warning per start. Before
 * every spawn: ExecStartPre= runs in the cgroup too. */
static void set_tasks_max(struct unit *u, struct unit_group *g, bool main) {
        uint64_t max = unit_file_exec(u->file)->tasks_max;
        int k = max ? unit_group_set_pids_max(g, max) : 0;
        if (!main) /* said once per start, at its main process */
                return;
        if (k == -EOPNOTSUPP)
                log_warning("%s: TasksMax= is not enforced: tend runs without cgroups (process-group mode)", u->name);
        else if (k < 0)
                log_warning_errno(k, "%s: TasksMax= is not enforced: cannot set pids.max of its cgroup: %m", u->name);
}

/* The process itself: stdio from its log stream, the sandbox, its cgroup. */
static int spawn_process(struct spawn *s, struct manager *m, struct unit *u, bool main, struct exit_process **ret) {
        struct unit_data *d = data(u);
        const struct unit_file *f = u->file;
        int out = -1, err = -1;
        _cleanup_(exec_stdio_close) struct exec_stdio io = { { -1, -1, -1 } };
        int k = exec_stdio_open(u->name, f, &io); /* exec: StandardInput=, tty */
        s->said = k < 0;
        if (k >= 0)
                k = logs_stream_prepare_spawn(d->logs, &out, &err);
        if (k < 0)
                return k;
        struct exit_spawn_attr a = {
                .size = sizeof a,
                .flags = EXIT_SPAWN_SETSID | EXIT_SPAWN_STDIO | EXIT_SPAWN_UMASK,
                .argv = s->argv,
                .envp = s->envp,
                .path = s->path,
                .cwd = s->sb->working_directory ? s->sb->working_directory : "/",
                .stdio = { io.fd[0] >= 0 ? io.fd[0] : EXIT_SPAWN_FD_NULL, io.fd[1] >= 0 ? io.fd[1] : out,
                           io.fd[2] >= 0 ? io.fd[2] : err },
                .ignore_signals = f->ignore_sigpipe ? 1ull << (SIGPIPE - 1) : 0,
                .umask = unit_file_sandbox(f)->umask,
                /* SPEC §7: units get soft 1024 unless LimitNOFILE= (systemd's default). */
                .nofile_soft = unit_file_sandbox(f)->limits[RLIMIT_NOFILE].set ? 0 : UNIT_DEFAULT_NOFILE_SOFT,
        };
        if (s->sb->working_directory && f->working_directory_missing_ok && access(s->sb->working_directory, X_OK) < 0)
                a.cwd = "/";
        sandbox_plan_apply(s->sb, &a);
        if (main && unit_watchdog_usec(f) > 0)
                a.flags |= EXIT_SPAWN_WATCHDOG_PID; /* SPEC §4: main process only */
        set_tasks_max(u, d->group, main); /* corpus: TasksMax= */
        k = unit_group_spawn_attr(d->group, &a);
        if (k >= 0)
                k = exit_reaper_spawn(m->reaper, &a, ret);
        unit_group_spawn_done(d->group); /* issue 19: no cgroup fd held while it runs */
        logs_stream_spawn_done(d->logs);
        if (k >= 0 && main)
                unit_group_set_leader(d->group, exit_process_pid(*ret));
        return k;
}

static int op_spawn(void *userdata, struct unit *u, const struct unit_command *cmd, bool main,
                    struct exit_process **ret) {
        struct manager *m = userdata;
        struct unit_data *d = data(u);
        _cleanup_(spawn_done) struct spawn s = {};

        group_cache_spawning(&d->group_cache); /* it may be populated from here */

        /* Each step that fails says why, but for running out of memory; the
         * rest is said once at the end. */
        int k = spawn_plan(&s, u, cmd);
        if (k >= 0)
                k = spawn_environment(&s, m, u, main);
        if (k >= 0)
                k = spawn_executable(&s, u, cmd);
        if (k >= 0)
                k = exit_routes_reserve(&m->routes, 1); /* the route of what is spawned */
        if (k >= 0)
                k = spawn_process(&s, m, u, main, ret);
        if (k < 0) {
                if (!s.said)
                        log_error_errno(k, "%s: cannot start %s: %m", u->name, cmd->path);
                return k;
        }
        if (s.keep && unit_rare(u)) /* out of memory: built again at the next spawn */
                kept_env_keep(&d->rare->main_env, TAKE_PTR(s.envp), u->file->text_size, u->file->text_hash);
        /* Its exit goes to u: the state machine takes *ret as its main or
         * control process (Type=forking's start process is a control
         * process: unit.h). Cannot fail: reserved above. */
        if (main && u->file->singleton && m->cluster) { /* etcd: its fence's target */
                _cleanup_free_ char *dir = unit_group_dir(d->group);
                cluster_singleton_target(m->cluster, u->name, exit_process_pid(*ret), dir);
        }
        bool forking = main && u->file->type == UNIT_TYPE_FORKING;
        if (forking)
                manager_forking_spawned(u, *ret);
        (void) exit_routes_set(&m->routes, &d->exits, main && !forking ? EXIT_ROLE_MAIN : EXIT_ROLE_CONTROL,
                               exit_process_id(*ret));
        return 0;
}

/* Leftovers of a previous tend get this long to die after cgroup.kill (a
 * SIGKILL: only a process in uninterruptible sleep takes long), the start
 * waiting meanwhile without blocking the loop; then the start fails. */
#define LEFTOVER_KILL_TIMEOUT_MS 2000
#define OWN_LEFTOVERS_NAMED 16 /* survivors named one by one in the warning */

/* cgroup.events and tend's own waiters are edge-triggered: with a thousand
 * units starting at once, a thousand level-triggered fds that stay ready
 * until sd-event dispatches them (one source per iteration) would each be
 * polled again by every epoll_wait in between, O(N²). */
#define GROUP_EVENTS (EPOLLPRI | EPOLLET)


/* The unit's cgroup.events is no longer watched: its fd closed (issue 19's
 * fd budget: a unit holds it only while something waits for its cgroup). */
static void group_unwatch(struct unit_data *d) {
        if (!d->group_source)
                return;
        d->group_source = sd_event_source_disable_unref(d->group_source);
        unit_group_events_close(d->group);
}

/* A previous tend's leftovers are gone (error 0), or will not go: the
 * waiting start goes on in a fresh cgroup, or fails. */
static void leftovers_gone(struct unit *u, int error) {
        struct unit_data *d = data(u);
        if (d->rare) /* it is: the deadline is in it */
                d->rare->leftovers_deadline = sd_event_source_disable_unref(d->rare->leftovers_deadline);
        if (error >= 0 && unit_group_needs_renewal(d->group)) {
                /* After cgroup.kill the kernel would kill every child spawned
                 * into that cgroup (cgroup.h): a fresh one, watched anew. */
                group_unwatch(d);
                error = unit_group_renew(d->group);
        }
        unit_prepared(u, error < 0 ? error : 0);
}

/* Whether u's start waits for a previous tend's leftovers to die. */
static bool leftovers_waiting(const struct unit *u) {
        const struct unit_rare *r = unit_rare_peek(u);
        return r && r->leftovers_deadline;
}

static int on_leftovers_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        struct unit *u = userdata;
        log_error("%s: leftover processes of a previous tend are still in its cgroup %d ms after cgroup.kill "
                  "(in uninterruptible sleep?): the start fails",
                  u->name, LEFTOVER_KILL_TIMEOUT_MS);
        leftovers_gone(u, -ETIMEDOUT);
        return 0;
}

static int on_group_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct unit *u = userdata;
        /* Reading cgroup.events re-arms its EPOLLPRI; unread, a level-
         * triggered source would fire again at once and tend would spin
         * (a unit's cgroup becoming populated while it runs). Edge-triggered,
         * the read still takes the state the next notification compares with. */
        struct unit_data *d = data(u);
        int populated = unit_group_populated(d->group);
        if (populated == 0) /* sd-event allows this inside the callback */
                group_unwatch(d);
        if (leftovers_waiting(u) && populated <= 0) {
                leftovers_gone(u, populated);
                return 0;
        }
        unit_check_processes(u);
        return 0;
}

/* A unit's cgroup.events is watched only while something waits for the
 * cgroup to empty: from a populated answer (op_populated) until it reads
 * empty. No change is lost in between: the read that answered populated
 * recorded the file's event count, and adding the fd to epoll reports any
 * change since (kernfs compares the counts), edge-triggered or not. */
static void group_watch(struct unit *u) {
        struct unit_data *d = data(u);
        if (d->group_source)
                return;
        int fd = unit_group_events_fd(d->group);
        if (fd >= 0 && sd_event_add_io(d->m->event, &d->group_source, fd, GROUP_EVENTS, on_group_event, u) < 0)
                unit_group_events_close(d->group);
}

static uint64_t loop_iteration(struct manager *m) {
        uint64_t iteration = 0;
        (void) sd_event_get_iteration(m->event, &iteration);
        return iteration;
}

/* Whether u's cgroup read empty in this loop iteration (group-cache.h). */
static bool group_known_empty(struct manager *m, const struct unit_data *d) {
        return group_cache_known_empty(&d->group_cache, loop_iteration(m));
}

/* exec: the unit's directories before its start (exec-dirs.h), and what its processes will not get as written. */
static int prepare_exec(struct unit *u) {
        uid_t uid;
        gid_t gid;
        sandbox_start_notices(u->name, u->file);
        if (!exec_dirs_any(u->file))
                return 0;
        int k = sandbox_owner(u->name, u->file, &uid, &gid);
        return k < 0 ? k : exec_dirs_setup(u->name, u->file, uid, gid);
}

/* What this tend's own stop left in the cgroup (KillMode=process, SendSIGKILL=no
 * survivors): left alone, as systemd does, with its warning. */
static void own_leftovers_warn(struct unit *u) {
        pid_t pids[OWN_LEFTOVERS_NAMED];
        int n = unit_group_members(data(u)->group, pids, OWN_LEFTOVERS_NAMED);
        for (int i = 0; i < n && i < OWN_LEFTOVERS_NAMED; i++) {
                char path[64], comm[32] = "n/a";
                snprintf(path, sizeof path, "/proc/%d/comm", (int) pids[i]);
                FILE *f = fopen(path, "re");
                if (f) {
                        if (fgets(comm, sizeof comm, f))
                                comm[strcspn(comm, "\n")] = '\0';
                        fclose(f);
                }
                log_warning("%s: Found left-over process %d (%s) in control group while starting unit. Ignoring.",
                            u->name, (int) pids[i], comm);
        }
        if (n > OWN_LEFTOVERS_NAMED)
                log_warning("%s: %d more left-over processes in control group: ignored", u->name,
                            n - OWN_LEFTOVERS_NAMED);
        if (n > 0)
                log_warning("%s: This usually indicates unclean termination of a previous run, or service "
                            "implementation deficiencies.", u->name);
}

/*
 * What a start finds in the unit's cgroup: this tend's own survivors stay
 * (own_leftovers_warn); a previous tend's leftovers get cgroup.kill and the
 * start waits for "populated 0" in the loop (on_group_event), at most
 * LEFTOVER_KILL_TIMEOUT_MS (SPEC §4 "cgroups"). 0: go on; 1: wait; < 0.
 */
static int leftovers_handle(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        if (unit_group_spawned(d->group)) {
                if (unit_group_populated(d->group) > 0)
                        own_leftovers_warn(u);
                return 0;
        }
        int k = unit_group_kill_leftovers_begin(d->group);
        if (k <= 0)
                return k;
        log_warning("%s: killed %d leftover process%s of a previous tend in its cgroup", u->name, k,
                    k == 1 ? "" : "es");
        struct unit_rare *r = unit_rare(u); /* the deadline's place: only a unit that waits has one */
        if (!r)
                return log_error_errno(ENOMEM, "%s: cannot wait for the leftovers to die: %m", u->name);
        k = sd_event_add_time_relative(m->event, &r->leftovers_deadline, CLOCK_MONOTONIC,
                                       LEFTOVER_KILL_TIMEOUT_MS * USEC_PER_MSEC, 0, on_leftovers_deadline, u);
        if (k < 0)
                return k;
        group_watch(u); /* reports "populated 0" even if it came before the watch (kernfs counts) */
        return 1;
}

/* issue 19's fd budget: a start needs 2 fds (its log pipe and its main
 * process's pidfd, more with ExecStartPre= or a notify socket); tend keeps
 * FDS_RESERVED of its RLIMIT_NOFILE free for itself (the control socket's
 * clients, /proc reads, the store), so running out of fds fails units' starts,
 * "out of file descriptors", and never tendctl. fds are handed out lowest
 * first: the lowest free one at or above limit - FDS_RESERVED means fewer than
 * FDS_RESERVED are free. One dup and close, ≈ 1 µs a start. */
#define FDS_RESERVED 32
static bool fds_low(struct manager *m) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > INT_MAX)
                return false;
        int fd = fcntl(sd_event_get_fd(m->event), F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
                return errno == EMFILE || errno == ENFILE;
        safe_close(fd);
        return (rlim_t) fd + FDS_RESERVED >= rl.rlim_cur;
}

/* A start failed for want of fds (tend(8) "FILE DESCRIPTOR BUDGET"): said
 * once per unit as it enters that state; its repeats (each RestartSec=) are
 * counted and summed up at most once per FDS_SHORT_LOG_USEC. Returns k. */
#define FDS_SHORT_LOG_USEC (5 * USEC_PER_SEC)
static int fds_short(struct manager *m, struct unit *u, int k) {
        struct unit_data *d = data(u);
        if (!d->fds_short) {
                d->fds_short = true;
                return log_error_errno(k, "%s: out of file descriptors: the start fails (result resources), "
                                          "retried per Restart= without counting toward its start limit", u->name);
        }
        usec_t now = 0;
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        if (m->fds_short_repeats++ == 0)
                m->fds_short_since = now;
        else if (now - m->fds_short_since >= FDS_SHORT_LOG_USEC) {
                log_error("out of file descriptors: %u more starts failed in the last %llu s, not logged one by one",
                          m->fds_short_repeats, (unsigned long long) ((now - m->fds_short_since) / USEC_PER_SEC));
                m->fds_short_repeats = 0;
        }
        return k;
}

static int op_prepare(void *userdata, struct unit *u) {
        struct manager *m = userdata;
        struct unit_data *d = data(u);
        d->started_text_size = u->file->text_size; /* what `tendctl status` compares (file_changed) */
        d->started_text_hash = u->file->text_hash;
        const struct unit_rare *r = unit_rare_peek(u);
        if (r && r->file_error) /* parsefix: tend(8) "RELOADING DIR": say which file a (re)start runs */
                log_warning("%s: starting on the last file that loaded: its current file does not (%s)", u->name,
                            r->file_error);
        int k = prepare_exec(u); /* says why (exec-dirs.h, sandbox.h), but for ENOMEM */
        if (k < 0)
                return k == -ENOMEM ? log_error_errno(k, "%s: cannot prepare its start: %m", u->name) : k;
        k = manager_logs_renew(m, u);
        if (k >= 0)
                k = fds_low(m) ? -EMFILE : logs_stream_open_pipes(d->logs); /* issue 19: at the start, not at load */
        if (k == -EMFILE || k == -ENFILE)
                return fds_short(m, u, k);
        d->fds_short = false;
        if (k < 0)
                return log_error_errno(k, "%s: cannot prepare its start: %m", u->name);
        if (leftovers_waiting(u))
                return 1; /* a previous tend's leftovers still dying (a stop and a start came meanwhile) */
        /* A restart in the dispatch of the exit that found its open cgroup
         * empty need not ask again (op_populated). */
        bool empty = unit_group_opened(d->group) && group_known_empty(m, d);
        k = empty ? 0 : leftovers_handle(m, u);
        if (k != 0 || !unit_group_needs_renewal(d->group))
                return k;
        /* After cgroup.kill the kernel would kill every child spawned into
         * that cgroup (cgroup.h): a fresh one, watched anew. */
        group_unwatch(d);
        k = unit_group_renew(d->group);
        return k < 0 ? log_error_errno(k, "%s: cannot prepare its start: cannot renew its cgroup: %m", u->name) : 0;
}


/* Within one loop iteration an "empty" answer is asked of cgroup.events
 * once (group-cache.h). */
static int group_populated(struct manager *m, struct unit *u, bool watch) {
        struct unit_data *d = data(u);
        if (group_known_empty(m, d))
                return 0;
        int k = unit_group_populated(d->group);
        if (k > 0 && watch)
                group_watch(u);
        group_cache_answer(&d->group_cache, loop_iteration(m), k);
        return k;
}

static int op_populated(void *userdata, struct unit *u) {
        return group_populated(userdata, u, true);
}

static int op_signal_all(void *userdata, struct unit *u, int sig) {
        /* A forking daemon outside the unit's group (without cgroups: one
         * that made its own session, not as its leader) gets it itself. */
        bool forking = u->file->type == UNIT_TYPE_FORKING;
        if (u->main && forking && unit_group_contains(data(u)->group, u->main_pid) == 0)
                (void) exit_process_signal(u->main, sig);
        /* Not watched from here: while its main or control process lives,
         * their exits say when to ask again (unit_sm_stop_complete), and a
         * watch would hold an fd for each unit stopping (issue 19: a
         * shutdown at the fd limit had none left to reach the units). */
        if (group_populated(userdata, u, false) == 0)
                return 0; /* nobody to signal */
        /* A forking unit's group may be its daemon's, led by a process that
         * exited (fork, setsid, fork): found by a scan (cgroup.h). */
        return unit_group_signal(data(u)->group, sig, u->main != NULL && !forking);
}

static int on_unit_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        unit_timer_fired(userdata);
        return 0;
}

static int on_unit_due(sd_event_source *s, void *userdata) {
        due_timer_dispatched(&data(userdata)->timer);
        unit_timer_fired(userdata);
        return 0;
}

/* A deadline that was already due when armed is run at the end of the
 * exit that armed it (process_exit: RestartSec=0 restarts in the same
 * dispatch as the exit), not a loop iteration later (due-timer.h). */
void manager_run_due(struct unit *u) {
        if (due_timer_take_due(&data(u)->timer))
                unit_timer_fired(u);
}

static int op_arm(void *userdata, struct unit *u, usec_t deadline) {
        struct manager *m = userdata;
        usec_t now = deadline == USEC_INFINITY ? 0 : now_usec(CLOCK_MONOTONIC);
        return due_timer_arm(&data(u)->timer, m->event, deadline, now, on_unit_timer, on_unit_due, u);
}

static usec_t op_now(void *userdata) {
        return now_usec(CLOCK_MONOTONIC);
}


/* Once the answer is in (or the flight was cancelled or abandoned), tend's
 * own requester lets go of its share. Asked when the unit answers and at
 * each of its changes: no fd or event source per start. */
void own_waiter_settle(struct unit_data *d) {
        if (!d->own_waiter)
                return;
        sf_state s = sf_flight_get_state(sf_waiter_get_flight(d->own_waiter));
        if (s != SF_STATE_RUNNING && s != SF_STATE_PUBLISHING)
                d->own_waiter = sf_waiter_free(d->own_waiter);
}

/* issue 19's fd budget: a unit that stopped holds no fd. Its log pipes are
 * read to the end and closed (the ring stays for `tendctl logs`) unless
 * something of it still runs (KillMode=process survivors may write). A unit
 * in back-off keeps them for its restart (the crash loop's latency). */
void manager_logs_release(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        if (d->logs && group_populated(m, u, false) == 0) /* no watch (an fd) for it */
                (void) logs_stream_close_pipes(d->logs);
}

static void op_changed(void *userdata, struct unit *u) {
        struct manager *m = userdata;
        own_waiter_settle(data(u));
        /* exec: RuntimeDirectory= at stop — once, as the change delivered
         * takes the unit from a live state (or back-off) to a dead one; not
         * at each change while dead (a removal that fails is said once). */
        struct unit_shown now;
        unit_get_shown(u, &now);
        enum unit_state was = data(u)->record.shown.state;
        bool entered = (now.state == UNIT_INACTIVE || now.state == UNIT_FAILED || now.state == UNIT_BACKOFF) &&
                       now.state != was && was != UNIT_INACTIVE && was != UNIT_FAILED;
        if (entered && unit_is_dead(u) && exec_dirs_any(u->file))
                exec_dirs_remove_runtime(u->name, u->file, unit_is_restarting(u));
        if (entered && unit_is_dead(u) && !unit_is_restarting(u)) /* security: RemoveIPC= */
                manager_remove_ipc(m, u);
        if (entered && now.state != UNIT_BACKOFF && unit_is_dead(u))
                manager_logs_release(m, u);
        manager_forking_changed(u); /* before the record that says it is dead */
        record_write(m, u);
        manager_control_unit_changed(m, u); /* QA L5: a reload waited for */
        jobs_changed(m->jobs, u);
        manager_upstream_update(m);
        if (data(u)->removed && unit_is_dead(u))
                manager_sweep_schedule(m);
        manager_maybe_start_cmd(m);
        manager_check_shutdown_done(m);
}

static void op_action(void *userdata, struct unit *u, unit_action action, int status) {
        struct manager *m = userdata;
        log_notice("%s: %s: tend exits with status %d", u->name,
                   action == UNIT_ACTION_EXIT_FORCE ? "exit-force" : "exit", status);
        if (action == UNIT_ACTION_EXIT_FORCE) {
                m->exit_status = status;
                sd_event_exit(m->event, status);
                return;
        }
        manager_begin_shutdown(m, status);
}

/* The record written when the unit entered its new state still counted the
 * requests of the flight now answered: written again (if that changed it). */
static void op_answered(void *userdata, struct unit *u) {
        own_waiter_settle(data(u));
        record_write(userdata, u);
}

/* Joins u's flight as one of tend's own requesters; returns the resolution
 * when this request leads (the caller hands it to the unit), else NULL. */
sf_resolution *manager_join_own(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        sf_waiter *w = NULL;
        sf_resolution *r = NULL;
        int k = sf_table_join(m->flights, u->name, &w, &r);
        if (k < 0) {
                log_error_errno(k, "%s: cannot start: %m", u->name);
                return NULL;
        }
        sf_waiter_free(d->own_waiter);
        d->own_waiter = w;
        return r;
}

static void op_request_restart(void *userdata, struct unit *u) {
        struct manager *m = userdata;
        if (m->shutting_down || jobs_stop_pending(m->jobs, u))
                return; /* its stop job stops it from back-off */
        sf_resolution *r = manager_join_own(m, u);
        if (r)
                unit_backoff_begin(u, r);
}

/* Set, replaced (MAINPID=) or gone: the main process's exit route follows
 * (room reserved by op_spawn and op_adopt). */
static void op_main_pid_changed(void *userdata, struct unit *u, pid_t pid) {
        struct manager *m = userdata;
        (void) exit_routes_set(&m->routes, &data(u)->exits, EXIT_ROLE_MAIN, u->main ? exit_process_id(u->main) : 0);
        if (pid > 0)
                logs_stream_set_pid(data(u)->logs, pid);
        else
                (void) logs_stream_main_exited(data(u)->logs);
}

static int op_start_job(void *userdata, struct unit *u) {
        struct manager *m = userdata;
        return jobs_start_job(m->jobs, u);
}

static void op_auto_restart(void *userdata, struct unit *u) {
        struct manager *m = userdata;
        jobs_propagate_restart(m->jobs, u, "automatically");
}

const struct unit_ops manager_unit_ops = {
        .spawn = op_spawn,
        .prepare = op_prepare,
        .signal_all = op_signal_all,
        .populated = op_populated,
        .arm = op_arm,
        .now = op_now,
        .changed = op_changed,
        .action = op_action,
        .request_restart = op_request_restart,
        .main_pid_changed = op_main_pid_changed,
        .contains = op_contains,
        .adopt = op_adopt,
        .watchdog = op_watchdog,
        .start_job = op_start_job,
        .auto_restart = op_auto_restart,
        .answered = op_answered,
        .forking_main = manager_forking_main,
        .command_failed = manager_command_failed, /* pkg */
};
