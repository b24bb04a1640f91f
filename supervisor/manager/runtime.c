/* SPDX-License-Identifier: MIT */
/*
 * The units' runtime: the manager's side of the state machine's seam
 * (struct unit_ops, unit.h) with the real reaper, cgroups, log streams, notify
 * sockets, watchdog leases and timers.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "control.h"
#include "libexit.h"
#include "log.h"
#include "logs.h"
#include "macro.h"
#include "manager.h"
#include "manager-internal.h"
#include "record.h"
#include "notify.h"
#include "sandbox.h"
#include "signal-util.h"
#include "singleflight.h"
#include "store.h"
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
                (void) notify_socket_log_rejected(data(u)->notify, sender, why);
                return;
        }
        unit_notify(u, msg);
}

/* A unit whose NotifyAccess= is not none gets its own socket at its first
 * spawn, kept across restarts; its address reaches the processes allowed
 * to speak (systemd: the main process; Exec*= ones too with exec or all). */
static int notify_prepare_spawn(struct manager *m, struct unit *u, bool main, char ***envp) {
        struct unit_data *d = data(u);
        unit_notify_access a = unit_notify_access_effective(u->file);
        if (a == UNIT_NOTIFY_ACCESS_NONE || (!main && a == UNIT_NOTIFY_ACCESS_MAIN))
                return 0;
        if (!d->notify) {
                int k = notify_socket_new(m->event, u->name, on_unit_notify, u, &d->notify);
                if (k < 0)
                        return log_error_errno(k, "%s: cannot create its notify socket: %s", u->name, strerror(-k));
                log_debug("%s: notify socket %s", u->name, notify_socket_address(d->notify));
        }
        return notify_env_add(envp, notify_socket_address(d->notify), main ? unit_watchdog_usec(u->file) : 0);
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
        return exit_reaper_track(m->reaper, pid, ret);
}

static int op_watchdog(void *userdata, struct unit *u, usec_t ttl) {
        struct manager *m = userdata;
        struct unit_data *d = data(u);
        if (ttl == 0)
                return watchdog_lease_clear(m->watchdogs, u->name, &d->watchdog_revision);
        return watchdog_lease_set(m->watchdogs, u->name, ttl, u->main_pid, &d->watchdog_revision);
}


static void lease_expired(struct manager *m, struct unit *u) {
        data(u)->watchdog_revision = 0;
        unit_watchdog_expired(u);
}

/* The store expired a lease (cause `expired`), or the watch fell behind
 * (name NULL): every lease held is checked. */
void manager_on_lease_expired(void *userdata, const char *name, uint64_t revision) {
        struct manager *m = userdata;
        if (name) {
                struct unit *u = manager_find_unit(m, name);
                if (u && revision && data(u)->watchdog_revision == revision)
                        lease_expired(m, u);
                return;
        }
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                uint64_t rev = data(u)->watchdog_revision;
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

static int op_spawn(void *userdata, struct unit *u, const struct unit_command *cmd, bool main,
                    struct exit_process **ret) {
        struct manager *m = userdata;
        struct unit_data *d = data(u);
        const struct unit_file *f = u->file;
        char **envp = NULL, **argv = NULL, *path = NULL;
        struct sandbox_plan *sb = NULL;

        d->empty_iteration = 0; /* it may be populated from here */

        /* Each step that fails says why, but for running out of memory; the
         * rest is said once at the end. */
        bool said = false;

        /* User=, Group=… resolved at each start, all the child needs computed now (sandbox.h). */
        int k = sandbox_plan_new(u->name, f, NULL, &sb);
        said = k < 0 && k != -ENOMEM;
        /* The main process's environment is built from tend's own, the file
         * and the notify socket, none of which changes between restarts
         * unless the file does: kept for the next spawn once the unit has
         * restarted (a copy of tend's environment per unit, a few KiB: 1,000
         * units started once keep none). EnvironmentFile= is read at each
         * start and User= is looked up at each start: those are built anew. */
        bool keep = k >= 0 && main && u->restarts > 0 && f->n_environment_files == 0 && !sb->environment_owned;
        if (keep && d->main_env && d->main_env_size == f->text_size && d->main_env_hash == f->text_hash)
                envp = TAKE_PTR(d->main_env);
        else {
                if (k >= 0) {
                        k = unit_build_environment(u->name, environ, main ? 0 : u->main_pid, sb->environment,
                                                   f->environment_files, f->n_environment_files, &envp);
                        said = k < 0 && k != -ENOMEM; /* EnvironmentFile= */
                }
                if (k >= 0) {
                        k = notify_prepare_spawn(m, u, main, &envp);
                        said = k < 0;
                }
        }
        if (k >= 0)
                k = unit_command_expand(cmd, envp, &argv, NULL);
        if (k >= 0) {
                k = unit_command_find_executable(cmd, envp, &path);
                if (k == -ENOENT || k == -EACCES) {
                        if (k == -ENOENT)
                                log_error("%s: %s: executable not found", u->name, cmd->path);
                        else
                                log_error("%s: %s: not executable (%s)", u->name, cmd->path, strerror(-k));
                        said = true;
                        k = -ENOEXEC; /* exec-failed (unit.h) */
                }
        }
        int out = -1, err = -1;
        if (k >= 0)
                k = logs_stream_prepare_spawn(d->logs, &out, &err);
        if (k >= 0) {
                struct exit_spawn_attr a = {
                        .size = sizeof a,
                        .flags = EXIT_SPAWN_SETSID | EXIT_SPAWN_STDIO | EXIT_SPAWN_UMASK,
                        .argv = argv,
                        .envp = envp,
                        .path = path,
                        .cwd = sb->working_directory ? sb->working_directory : "/",
                        .stdio = { EXIT_SPAWN_FD_NULL, out, err },
                        .ignore_signals = f->ignore_sigpipe ? 1ull << (SIGPIPE - 1) : 0,
                        .umask = unit_file_sandbox(f)->umask,
                        /* SPEC §7: units get soft 1024 unless LimitNOFILE= (systemd's default). */
                        .nofile_soft = unit_file_sandbox(f)->limits[RLIMIT_NOFILE].set ? 0 : UNIT_DEFAULT_NOFILE_SOFT,
                };
                if (sb->working_directory && f->working_directory_missing_ok && access(sb->working_directory, X_OK) < 0)
                        a.cwd = "/";
                sandbox_plan_apply(sb, &a);
                if (main && unit_watchdog_usec(f) > 0)
                        a.flags |= EXIT_SPAWN_WATCHDOG_PID; /* SPEC §4: main process only */
                k = unit_group_spawn_attr(d->group, &a);
                if (k >= 0)
                        k = exit_reaper_spawn(m->reaper, &a, ret);
                logs_stream_spawn_done(d->logs);
                if (k >= 0 && main)
                        unit_group_set_leader(d->group, exit_process_pid(*ret));
        }
        if (k < 0 && !said)
                log_error("%s: cannot start %s: %s", u->name, cmd->path, strerror(-k));
        if (keep && k >= 0) {
                unit_strv_free(d->main_env);
                d->main_env = TAKE_PTR(envp);
                d->main_env_size = f->text_size; /* a file of the same text builds the same environment */
                d->main_env_hash = f->text_hash;
        }
        unit_strv_free(envp);
        unit_strv_free(argv);
        free(path);
        sandbox_plan_free(sb);
        return k;
}

/* Leftovers of a previous tend wait at most this long for cgroup.kill. */
#define LEFTOVER_KILL_TIMEOUT_MS 2000

/* cgroup.events and tend's own waiters are edge-triggered: with a thousand
 * units starting at once, a thousand level-triggered fds that stay ready
 * until sd-event dispatches them (one source per iteration) would each be
 * polled again by every epoll_wait in between, O(N²). */
#define GROUP_EVENTS (EPOLLPRI | EPOLLET)


static int on_group_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct unit *u = userdata;
        /* Reading cgroup.events re-arms its EPOLLPRI; unread, a level-
         * triggered source would fire again at once and tend would spin
         * (a unit's cgroup becoming populated while it runs). Edge-triggered,
         * the read still takes the state the next notification compares with. */
        struct unit_data *d = data(u);
        if (unit_group_populated(d->group) == 0) /* sd-event allows this inside the callback */
                d->group_source = sd_event_source_disable_unref(d->group_source);
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
        int fd = unit_group_events_fd(d->group);
        if (!d->group_source && fd >= 0)
                (void) sd_event_add_io(d->m->event, &d->group_source, fd, GROUP_EVENTS, on_group_event, u);
}

static uint64_t loop_iteration(struct manager *m) {
        uint64_t iteration = 0;
        (void) sd_event_get_iteration(m->event, &iteration);
        return iteration;
}

/* Whether u's cgroup read empty in this loop iteration (op_populated). */
static bool group_known_empty(struct manager *m, const struct unit_data *d) {
        return d->empty_iteration == loop_iteration(m) + 1;
}

static int op_prepare(void *userdata, struct unit *u) {
        struct manager *m = userdata;
        struct unit_data *d = data(u);
        int k = manager_logs_renew(m, u);
        if (k < 0)
                return k;
        /* A restart in the dispatch of the exit that found its open cgroup
         * empty need not ask again (op_populated). */
        bool empty = unit_group_opened(d->group) && group_known_empty(m, d);
        k = empty ? 0 : unit_group_kill_leftovers(d->group, LEFTOVER_KILL_TIMEOUT_MS);
        if (k > 0)
                log_notice("%s: killed %d leftover process%s of a previous tend in its cgroup", u->name, k,
                           k == 1 ? "" : "es");
        if (k < 0 || !unit_group_needs_renewal(d->group))
                return k < 0 ? k : 0;
        /* After cgroup.kill the kernel would kill every child spawned into
         * that cgroup (cgroup.h): a fresh one, watched anew. */
        d->group_source = sd_event_source_disable_unref(d->group_source);
        k = unit_group_renew(d->group);
        return k < 0 ? k : 0;
}


/* An empty cgroup stays empty until tend spawns into it (no process is left
 * in it to fork): within one loop iteration an "empty" answer is asked of
 * cgroup.events once, not once per question the state machine asks (a
 * main process's exit asked three: SIGTERM, SIGCONT, and whether the stop
 * is complete). */
static int op_populated(void *userdata, struct unit *u) {
        struct manager *m = userdata;
        struct unit_data *d = data(u);
        if (group_known_empty(m, d))
                return 0;
        int k = unit_group_populated(d->group);
        if (k > 0)
                group_watch(u);
        d->empty_iteration = k == 0 ? loop_iteration(m) + 1 : 0;
        return k;
}

static int op_signal_all(void *userdata, struct unit *u, int sig) {
        if (op_populated(userdata, u) == 0)
                return 0; /* nobody to signal */
        return unit_group_signal(data(u)->group, sig, u->main != NULL);
}

static int on_unit_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        unit_timer_fired(userdata);
        return 0;
}

static int on_unit_due(sd_event_source *s, void *userdata) {
        data(userdata)->due = false;
        unit_timer_fired(userdata);
        return 0;
}

/* A deadline that was already due when armed is run at the end of the
 * exit that armed it (process_exit: RestartSec=0 restarts in the same
 * dispatch as the exit), not a loop iteration later. */
void manager_run_due(struct unit *u) {
        struct unit_data *d = data(u);
        if (!d->due)
                return;
        d->due = false;
        d->timer = sd_event_source_disable_unref(d->timer);
        unit_timer_fired(u);
}

/* A unit holds a timer source only while a deadline is armed (a running
 * unit has none: an sd-event source is 300 B, times 1,000 units). A deadline
 * already due (RestartSec=0) is a deferred event: the next loop iteration,
 * without a timerfd to program, unless manager_run_due() runs it first. */
static int op_arm(void *userdata, struct unit *u, usec_t deadline) {
        struct manager *m = userdata;
        struct unit_data *d = data(u);
        /* sd-event allows this from inside the source's own callback. */
        d->timer = sd_event_source_disable_unref(d->timer);
        d->due = false;
        if (deadline == USEC_INFINITY)
                return 0;
        int k;
        if (deadline <= now_usec(CLOCK_MONOTONIC)) {
                k = sd_event_add_defer(m->event, &d->timer, on_unit_due, u);
                d->due = k >= 0;
        } else
                /* Accuracy 1 µs: sd-event's default (250 ms) would blur back-off delays. */
                k = sd_event_add_time(m->event, &d->timer, CLOCK_MONOTONIC, deadline, 1, on_unit_timer, u);
        return k < 0 ? k : sd_event_source_set_enabled(d->timer, SD_EVENT_ONESHOT);
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

static void op_changed(void *userdata, struct unit *u) {
        struct manager *m = userdata;
        own_waiter_settle(data(u));
        record_write(m, u);
        jobs_changed(m, u);
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
                log_error_errno(k, "%s: cannot start: %s", u->name, strerror(-k));
                return NULL;
        }
        sf_waiter_free(d->own_waiter);
        d->own_waiter = w;
        return r;
}

static void op_request_restart(void *userdata, struct unit *u) {
        struct manager *m = userdata;
        if (m->shutting_down || jobs_stop_pending(u))
                return; /* its stop job stops it from back-off */
        sf_resolution *r = manager_join_own(m, u);
        if (r)
                unit_backoff_begin(u, r);
}

static void op_main_pid_changed(void *userdata, struct unit *u, pid_t pid) {
        if (pid > 0)
                logs_stream_set_pid(data(u)->logs, pid);
        else
                (void) logs_stream_main_exited(data(u)->logs);
}

static int op_start_job(void *userdata, struct unit *u) {
        return jobs_start_job(userdata, u);
}

static void op_auto_restart(void *userdata, struct unit *u) {
        jobs_propagate_restart(userdata, u, "automatically");
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
};
