/* SPDX-License-Identifier: MIT */
/*
 * The manager: units on one sd-event loop (SPEC §1 service and combined
 * modes, §4). It implements the unit state machine's seam (struct unit_ops)
 * with the real reaper, cgroups, log streams and timers, routes exits to
 * units, runs the start jobs through the single-flight table, keeps every
 * unit's record in the store, and shuts down in order.
 *
 * Collect, then dispatch: the reaper is drained first (all ready pidfds),
 * then exits are handed to the state machines one by one.
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


/* ---- the store record (SPEC §5 fields) ---- */

struct held_record {
        struct unit *u;
        struct record_fields fields;
};

static void record_store(struct manager *m, struct unit *u, const struct record_fields *f) {
        size_t len = 0;
        /* A held record had no STATUS= text (record_held): none is added at its write. */
        const char *text = record_writer_format_fields(m->records, u->name, f->has_status ? u->status_text : NULL,
                                                       f, &len);
        if (!text) {
                log_warning("%s: state record not written (%s)", u->name, strerror(ENOMEM));
                data(u)->record_written = false;
                return;
        }
        char key[STORE_KEY_MAX];
        snprintf(key, sizeof key, "service/%s", u->name);
        int k;
        if (u->record_revision == 0)
                k = store_create(m->store, STORE_DURABLE, key, text, len, 0, &u->record_revision);
        else
                k = store_update(m->store, STORE_DURABLE, key, text, len, u->record_revision, 0, &u->record_revision);
        if (k <= 0)
                log_warning("%s: state record not written (%s)", u->name, k < 0 ? strerror(-k) : "revision conflict");
        data(u)->record_written = k > 0;
}

/* While an exit is handled, the records of the changes it makes are taken
 * (their fields, at the change) and written once it is handled: a restart
 * spawns first and writes the records of the stop, the back-off and the
 * start after, in that order (SPEC §5: each transition still gets its own
 * record, with its own revision). Nothing reads a record in between. */
static void records_hold(struct manager *m) {
        m->records_hold++;
}

static void records_flush(struct manager *m) {
        for (size_t i = 0; i < m->n_held; i++)
                record_store(m, m->held[i].u, &m->held[i].fields);
        m->n_held = 0;
}

static void records_release(struct manager *m) {
        assert(m->records_hold > 0);
        if (--m->records_hold == 0)
                records_flush(m);
}

static bool record_held(struct manager *m, struct unit *u, const struct record_fields *f) {
        if (m->records_hold == 0 || f->has_status) /* a STATUS= text is the unit's current one */
                return false;
        if (m->n_held == m->n_held_max) {
                size_t n = m->n_held_max ? 2 * m->n_held_max : 8;
                struct held_record *h = reallocarray(m->held, n, sizeof *h);
                if (!h)
                        return false; /* written now instead */
                m->held = h;
                m->n_held_max = n;
        }
        m->held[m->n_held++] = (struct held_record) { u, *f };
        return true;
}

static void record_write(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        struct record_fields now;
        int waiters = sf_table_get_waiters(m->flights, u->name);
        record_fields_of(u, waiters, &now);
        if (u->record_revision != 0 && d->record_written && record_fields_equal(&d->record, &now))
                return; /* the same record again: nothing for the store or its watchers */
        d->record = now;
        if (record_held(m, u, &now)) {
                d->record_written = true; /* unless its write fails (record_store) */
                return;
        }
        records_flush(m); /* the ones held before it go first */
        record_store(m, u, &now);
}

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
static void on_lease_expired(void *userdata, const char *name, uint64_t revision) {
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
static void upstream_update(struct manager *m) {
        if (!m->upstream)
                return;
        size_t running = 0, failed = 0;
        bool settled = m->initial_jobs_queued; /* a unit not started yet is dead: "settled" */
        for (size_t i = 0; i < m->n_units; i++) {
                const struct unit *u = m->units[i];
                running += u->state == UNIT_RUNNING;
                failed += u->state == UNIT_FAILED;
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

static int on_group_event(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static int logs_renew(struct manager *m, struct unit *u);

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
        int k = logs_renew(m, u);
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
static void unit_run_due(struct unit *u) {
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
 * without a timerfd to program, unless unit_run_due() runs it first. */
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

static void maybe_start_cmd(struct manager *m);
static void check_shutdown_done(struct manager *m);
static void begin_shutdown(struct manager *m, int status);
static void sweep_schedule(struct manager *m);

/* Once the answer is in (or the flight was cancelled or abandoned), tend's
 * own requester lets go of its share. Asked when the unit answers and at
 * each of its changes: no fd or event source per start. */
static void own_waiter_settle(struct unit_data *d) {
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
        upstream_update(m);
        if (data(u)->removed && unit_is_dead(u))
                sweep_schedule(m);
        maybe_start_cmd(m);
        check_shutdown_done(m);
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
        begin_shutdown(m, status);
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

static const struct unit_ops unit_ops = {
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

/* ---- units ---- */

static struct logs_target output_target(const struct unit_output *o, bool is_stderr, const struct unit_output *out) {
        if (is_stderr && o->kind == UNIT_OUTPUT_DEFAULT)
                return output_target(out, false, out);
        switch (o->kind) {
        case UNIT_OUTPUT_INHERIT:
                return (struct logs_target) { LOGS_TARGET_INHERIT, NULL };
        case UNIT_OUTPUT_NULL:
                return (struct logs_target) { LOGS_TARGET_NULL, NULL };
        case UNIT_OUTPUT_JOURNAL:
                return (struct logs_target) { LOGS_TARGET_JOURNAL, NULL };
        case UNIT_OUTPUT_FILE:
                return (struct logs_target) { LOGS_TARGET_FILE, o->path };
        case UNIT_OUTPUT_APPEND:
                return (struct logs_target) { LOGS_TARGET_APPEND, o->path };
        default:
                return (struct logs_target) { logs_target_default(), NULL };
        }
}

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

static struct unit_data *unit_data_free(struct unit_data *d) {
        if (!d)
                return NULL;
        sd_event_source_disable_unref(d->timer);
        sd_event_source_disable_unref(d->group_source);
        sd_event_source_disable_unref(d->cancel_source);
        sf_waiter_free(d->own_waiter);
        unit_strv_free(d->main_env);
        notify_socket_free(d->notify);
        logs_stream_free(d->logs);
        free(d->logs_key);
        unit_group_free(d->group);
        free(d);
        return NULL;
}

/* The output settings a unit's log stream is made from, as one string. */
static char *output_key(const struct unit_file *f) {
        const struct unit_output *o = &f->standard_output, *e = &f->standard_error;
        char *s = NULL;
        if (asprintf(&s, "%d %s\n%d %s\n%s", (int) o->kind, o->path ? o->path : "", (int) e->kind,
                     e->path ? e->path : "", f->syslog_identifier ? f->syslog_identifier : "") < 0)
                return NULL;
        return s;
}

/* A log stream for u's file into *ret, and its output key. */
static int logs_open(struct manager *m, struct unit *u, logs_stream **ret, char **ret_key) {
        const struct unit_file *f = u->file;
        struct logs_stream_config c = {
                .name = u->name,
                .syslog_identifier = f->syslog_identifier,
                .stdout_target = output_target(&f->standard_output, false, &f->standard_output),
                .stderr_target = output_target(&f->standard_error, true, &f->standard_output),
        };
        _cleanup_free_ char *key = output_key(f);
        if (!key)
                return log_error_errno(ENOMEM, "%s: cannot set up its logs: %s", u->name, strerror(ENOMEM));
        int k = logs_stream_new(m->logs, &c, ret);
        if (k < 0)
                return log_error_errno(k, "%s: cannot set up its logs: %s", u->name, strerror(-k));
        *ret_key = TAKE_PTR(key);
        return 0;
}

/* Before each start: a daemon-reload may have changed StandardOutput=,
 * StandardError= or SyslogIdentifier=; the new file gets a stream of its own
 * (the old one's ring and followers end). Unchanged settings keep the stream. */
static int logs_renew(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        _cleanup_free_ char *key = output_key(u->file);
        if (key && d->logs_key && streq(key, d->logs_key))
                return 0;
        logs_stream *s = NULL;
        char *new_key = NULL;
        int k = logs_open(m, u, &s, &new_key);
        if (k < 0)
                return k;
        logs_stream_free(d->logs);
        d->logs = s;
        free(d->logs_key);
        d->logs_key = new_key;
        return 0;
}

static int unit_data_new(struct manager *m, struct unit *u) {
        struct unit_data *d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        d->m = m;
        u->manager_data = d;
        int k = logs_open(m, u, &d->logs, &d->logs_key);
        if (k < 0)
                return k;
        k = unit_group_new(m->cgroups, u->name, &d->group);
        if (k < 0)
                return log_error_errno(k, "%s: cannot create its cgroup: %s", u->name, strerror(-k));
        return 0;
}

static struct unit *manager_unit_free(struct unit *u) {
        if (!u)
                return NULL;
        struct unit_data *d = u->manager_data;
        if (d)
                records_flush(d->m); /* none of them may outlive it */
        if (d && d->m->watchdogs) /* a unit is freed dead, so this is a no-op but for safety */
                (void) watchdog_lease_clear(d->m->watchdogs, u->name, &d->watchdog_revision);
        unit_data_free(u->manager_data);
        u->manager_data = NULL;
        return unit_free(u);
}

int manager_add_unit(struct manager *m, struct unit_file *f) {
        struct unit **v = realloc(m->units, (m->n_units + 1) * sizeof *v);
        if (!v)
                return -ENOMEM;
        m->units = v;
        struct unit *u = NULL;
        int k = unit_new(f, &unit_ops, m, &u);
        if (k < 0)
                return k;
        k = unit_data_new(m, u);
        if (k < 0) {
                u->file = NULL; /* the caller still owns f */
                manager_unit_free(u);
                return k;
        }
        m->units[m->n_units++] = u;
        jobs_invalidate(m);
        record_write(m, u);
        return 0;
}

struct unit *manager_find_unit(struct manager *m, const char *name) {
        for (size_t i = 0; i < m->n_units; i++)
                if (streq(m->units[i]->name, name))
                        return m->units[i];
        return NULL;
}

void manager_start_unit(struct manager *m, struct unit *u) {
        sf_resolution *r = manager_join_own(m, u);
        if (r)
                unit_start(u, r, false);
}

/* Whether a request other than tend's own shares u's flight (a client's). */
static bool flight_has_clients(struct manager *m, struct unit *u) {
        own_waiter_settle(data(u)); /* a share still held is then in the live flight */
        int waiters = sf_table_get_waiters(m->flights, u->name);
        return waiters > (data(u)->own_waiter ? 1 : 0);
}

void manager_stop_unit(struct manager *m, struct unit *u) {
        /* SPEC §2.3: a start that the shutdown or the unit's removal ends is
         * abandoned (an error), where a stop cancels it. One that only tend's
         * own requester waits for (a restart in back-off) has nobody to tell:
         * tend stops its own request, as a stop would (docs/singleflight.md). */
        if ((m->shutting_down || data(u)->removed) && flight_has_clients(m, u)) {
                if (unit_abandon_flight(u))
                        log_notice("%s: its start is abandoned: %s", u->name,
                                   m->shutting_down ? "tend shuts down" : "its file is gone");
                unit_stop(u, false);
                return;
        }
        int k = sf_table_cancel(m->flights, u->name);
        unit_stop(u, k == -EBUSY);
}

static int load_units(struct manager *m) {
        _cleanup_(unit_set_freep) struct unit_set *set = NULL;
        int k = unit_load_dir(m->opts->config_dir, &set);
        if (k < 0)
                return k;
        for (size_t i = 0; i < set->n_units; i++) {
                if (manager_find_unit(m, set->units[i]->name))
                        continue;
                struct unit_file *f = set->units[i];
                if (manager_add_unit(m, f) >= 0)
                        set->units[i] = NULL; /* taken */
        }
        for (size_t i = 0; i < set->n_units; i++)
                unit_file_free(set->units[i]);
        set->n_units = 0;
        return 0;
}

/* ---- daemon-reload (SPEC §5): apply the difference ---- */

/* report (a JSON object, or NULL for SIGHUP) gets name appended to its array key. */
static void report_add(struct json_object *report, const char *key, const char *name, const char *message) {
        struct json_object *a = NULL;
        if (!report)
                return;
        if (!json_object_object_get_ex(report, key, &a)) {
                a = json_object_new_array();
                if (!a || json_object_object_add(report, key, a) < 0) {
                        json_object_put(a);
                        return;
                }
        }
        struct json_object *v = json_object_new_string(name);
        if (v && message) { /* "failed": {"name": …, "message": …} */
                struct json_object *o = json_object_new_object();
                if (o) {
                        json_object_object_add(o, "name", v);
                        json_object_object_add(o, "message", json_object_new_string(message));
                }
                v = o;
        }
        if (v && json_object_array_add(a, v) < 0)
                json_object_put(v);
}

/*
 * What DIR holds now for a loaded unit: 1 with *ret (taken out of set, or
 * loaded from its template for an instance), 0 when it holds nothing (no file,
 * or masked), or the negative errno of a file that does not load, *ret_message
 * saying why (already logged with FILE:LINE).
 */
static int dir_lookup(struct manager *m, struct unit_set *set, const char *name, struct unit_file **ret,
                      char **ret_message) {
        for (size_t j = 0; j < set->n_units; j++)
                if (set->units[j] && streq(set->units[j]->name, name)) {
                        *ret = TAKE_PTR(set->units[j]);
                        return 1;
                }
        for (size_t j = 0; j < set->n_errors; j++)
                if (streq(set->errors[j].name, name)) {
                        if (set->errors[j].error == -ERFKILL)
                                return 0;
                        *ret_message = set->errors[j].message ? strdup(set->errors[j].message) : NULL;
                        return set->errors[j].error;
                }
        if (!unit_name_is_valid(name, UNIT_NAME_INSTANCE))
                return 0;
        /* An instance of a template (tendctl start NAME@INST): its template's
         * text. A template gone is a removal, not a load error to log. */
        char template[PATH_MAX];
        snprintf(template, sizeof template, "%s/%.*s@.service", m->opts->config_dir, (int) strcspn(name, "@"), name);
        if (faccessat(AT_FDCWD, template, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
                return 0;
        int k = unit_load(m->opts->config_dir, name, ret, ret_message);
        if (k == -ENOENT || k == -ERFKILL)
                return 0;
        return k < 0 ? k : 1;
}

/* A changed unit that runs restarts to run the new file; daemon-reload is
 * one of tend's own requesters of its flight (SPEC §2.3). */
static void change_unit(struct manager *m, struct unit *u, struct unit_file *f) {
        if (!unit_set_next_file(u, f)) {
                log_info("%s: changed in %s: the new file applies at its next start", u->name, m->opts->config_dir);
                return;
        }
        log_info("%s: changed in %s: restarting it", u->name, m->opts->config_dir);
        /* Not leading: a start is in flight, and the restart answers it. */
        unit_explicit_restart(u, manager_join_own(m, u));
        jobs_propagate_restart(m, u, "with its new file");
}

static void reload_unit(struct manager *m, struct unit *u, struct unit_set *set, struct json_object *report) {
        struct unit_data *d = data(u);
        struct unit_file *f = NULL;
        _cleanup_free_ char *message = NULL;
        int k = dir_lookup(m, set, u->name, &f, &message);
        if (k < 0) {
                log_error("%s: not reloaded: its file does not load (see above); the unit is left as it is", u->name);
                report_add(report, "failed", u->name, message ? message : strerror(-k));
                return;
        }
        if (k == 0) {
                if (!d->removed) {
                        log_info("%s: removed from %s: stopping it", u->name, m->opts->config_dir);
                        d->removed = true;
                        report_add(report, "removed", u->name, NULL);
                        jobs_stop(m, u, true); /* as tendctl stop: its dependents too */
                }
                return;
        }
        if (d->removed) {
                /* Removed at an earlier reload and back before it was freed: it
                 * starts again, as a new unit would, with the file it has now. */
                d->removed = false;
                (void) unit_set_next_file(u, f);
                log_info("%s: back in %s: starting it", u->name, m->opts->config_dir);
                report_add(report, "added", u->name, NULL);
                manager_start_unit(m, u);
                return;
        }
        if (unit_file_same_text(u->next_file ? u->next_file : u->file, f)) {
                unit_file_free(f); /* unchanged: not touched */
                return;
        }
        report_add(report, "changed", u->name, NULL);
        change_unit(m, u, f);
}

/* SIGHUP and tendctl daemon-reload: re-read DIR. New units start, removed ones
 * stop (and go once dead: sweep), changed ones restart with their new file,
 * unchanged ones are not touched; a file that does not load leaves its unit as
 * it is. report (NULL for SIGHUP) receives the arrays "added", "changed",
 * "removed" (unit names) and "failed" ({"name", "message"}). 0, or the error
 * of reading DIR itself (logged). */
static int reload(struct manager *m, struct json_object *report) {
        _cleanup_(unit_set_freep) struct unit_set *set = NULL;
        int k = unit_load_dir(m->opts->config_dir, &set);
        if (k < 0)
                return k;
        jobs_invalidate(m); /* files changed: their dependencies may have */
        m->jobs_batch = true;
        for (size_t i = 0; i < m->n_units; i++)
                reload_unit(m, m->units[i], set, report);
        /* Every new unit is added before any starts, so that the graph (and
         * its cycles) is built once, with all of them. */
        size_t first_new = m->n_units;
        for (size_t j = 0; j < set->n_units; j++) {
                struct unit_file *f = TAKE_PTR(set->units[j]);
                if (!f)
                        continue; /* a loaded unit's */
                if (manager_add_unit(m, f) < 0) {
                        unit_file_free(f);
                        continue;
                }
                log_info("%s: new in %s: starting it", f->name, m->opts->config_dir);
                report_add(report, "added", f->name, NULL);
        }
        for (size_t i = first_new, n = m->n_units; i < n; i++)
                manager_start_unit(m, m->units[i]);
        /* Files that do not load and belong to no loaded unit (those that do
         * were reported above). */
        for (size_t j = 0; j < set->n_errors; j++) {
                const struct unit_load_error *e = &set->errors[j];
                if (e->error != -ERFKILL && !manager_find_unit(m, e->name))
                        report_add(report, "failed", e->name, e->message ? e->message : strerror(-e->error));
        }
        m->jobs_batch = false;
        sweep_schedule(m);
        return 0;
}

/* Frees a removed unit that is dead: its record, its cgroup, its data. */
static void unit_forget(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        char key[STORE_KEY_MAX];
        snprintf(key, sizeof key, "service/%s", u->name);
        (void) store_delete(m->store, STORE_DURABLE, key, STORE_REV_ANY, NULL);
        int k = unit_group_populated(d->group);
        if (k == 0)
                (void) unit_group_remove(d->group);
        else if (k > 0)
                log_warning("%s: processes are left in its cgroup (KillMode=process?): the cgroup stays", u->name);
        log_info("%s: removed", u->name);
        manager_unit_free(u);
}

static int on_sweep(sd_event_source *s, void *userdata) {
        struct manager *m = userdata;
        size_t kept = 0, n = m->n_units;
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                if (data(u)->removed && unit_is_dead(u) && (u->state == UNIT_INACTIVE || u->state == UNIT_FAILED))
                        unit_forget(m, u);
                else
                        m->units[kept++] = u;
        }
        m->n_units = kept;
        if (kept != n)
                jobs_invalidate(m);
        check_shutdown_done(m);
        return 0;
}

/* Removed units are freed from a callback of their own, never from inside
 * the state machine that just reported them dead. */
static void sweep_schedule(struct manager *m) {
        manager_defer(m, &m->sweep, on_sweep);
}

/* ---- exits ---- */

/* Finds the unit and process an exit id belongs to. */
static struct unit *unit_of_id(struct manager *m, exit_id_t id, struct exit_process **ret) {
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                if (u->main && exit_process_id(u->main) == id) {
                        *ret = u->main;
                        return u;
                }
                if (u->control && exit_process_id(u->control) == id) {
                        *ret = u->control;
                        return u;
                }
        }
        *ret = NULL;
        return NULL;
}

static void process_exit(struct manager *m, exit_id_t id) {
        struct exit_reason reason;
        if (m->cmd && exit_process_id(m->cmd) == id) {
                if (exit_hub_take(m->hub, id, &reason) == 0) {
                        int exec = exit_process_exec_result(m->cmd, NULL);
                        m->cmd_status = exec < 0 && exec != -EINPROGRESS ? (exec == -ENOENT ? 127 : 126)
                                                                          : exit_reason_to_shell_status(&reason);
                        m->cmd_done = true;
                        m->cmd = exit_process_unref(m->cmd);
                        log_info("CMD exited: tend stops its units and exits with status %d", m->cmd_status);
                        /* Combined mode exits with CMD's status, also when a
                         * signal to tend began the shutdown (SPEC §1). */
                        m->exit_status = m->cmd_status;
                        begin_shutdown(m, m->cmd_status);
                }
                return;
        }
        struct exit_process *p;
        struct unit *u = unit_of_id(m, id, &p);
        if (!u || exit_hub_take(m->hub, id, &reason) < 0)
                return;
        exit_process_ref(p);
        unit_process_exited(u, p, &reason);
        exit_process_unref(p);
        unit_run_due(u);
}

/* After LAGGED: take the outcome of every process tend owns. */
static void recover_exits(struct manager *m) {
        if (m->cmd)
                process_exit(m, exit_process_id(m->cmd));
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                if (u->main)
                        process_exit(m, exit_process_id(u->main));
                if (u->control)
                        process_exit(m, exit_process_id(u->control));
        }
}

static void drain_exec_events(struct manager *m) {
        struct exit_process *p;
        while (exit_reaper_next_exec(m->reaper, &p) == 0) {
                int stage = 0, error = exit_process_exec_result(p, &stage);
                for (size_t i = 0; i < m->n_units; i++) {
                        if (m->units[i]->main == p || m->units[i]->control == p)
                                sandbox_log_exec_failure(m->units[i]->name, error, stage); /* "NAME: KEY …" */
                        if (m->units[i]->main == p)
                                unit_exec_result(m->units[i], p, error);
                }
                exit_process_unref(p);
        }
}

static void drain_exits(struct manager *m) {
        struct exit_event ev[64];
        bool orphans = false;
        int n;
        while ((n = exit_sub_recv_batch(m->sub, ev, ELEMENTSOF(ev), 0)) > 0)
                for (int i = 0; i < n; i++) {
                        if (ev[i].type == EXIT_EVENT_LAGGED) {
                                log_debug("exit queue overflowed: recovering outcomes from the ledger");
                                recover_exits(m);
                        } else if (ev[i].flags & EXIT_EVENT_ORPHAN)
                                orphans = true;
                        else
                                process_exit(m, ev[i].id);
                }
        /* Without cgroups, a unit's last processes may have been orphans. */
        if (orphans)
                for (size_t i = 0; i < m->n_units; i++)
                        unit_check_processes(m->units[i]);
        check_shutdown_done(m);
}

/* The records of what the exits change are written after the restarts
 * they cause have spawned (records_hold). */
static int on_reaper(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct manager *m = userdata;
        int k = exit_reaper_dispatch(m->reaper);
        if (k < 0)
                log_warning_errno(k, "reaping: %s", strerror(-k));
        records_hold(m);
        drain_exec_events(m);
        drain_exits(m);
        records_release(m);
        return 0;
}

static int on_sub(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct manager *m = userdata;
        records_hold(m);
        drain_exits(m);
        records_release(m);
        return 0;
}

static int on_store(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct manager *m = userdata;
        (void) store_dispatch(m->store);
        return 0;
}

/* ---- combined mode ---- */

static void maybe_start_cmd(struct manager *m) {
        /* Not while the initial start jobs are being queued: a unit not
         * started yet is dead, which would count as settled. */
        if (!m->opts->cmd || m->cmd_started || m->shutting_down || !m->initial_jobs_queued)
                return;
        for (size_t i = 0; i < m->n_units; i++)
                if (!unit_is_settled(m->units[i]))
                        return;
        m->cmd_started = true;
        for (size_t i = 0; i < m->n_units; i++)
                if (m->units[i]->state == UNIT_FAILED)
                        fprintf(stderr, "tend: %s failed (%s) before CMD started\n", m->units[i]->name,
                                unit_result_to_string(m->units[i]->result));
        struct exit_spawn_attr a = { .size = sizeof a, .flags = EXIT_SPAWN_FOREGROUND | EXIT_SPAWN_KEEP_FDS,
                                     .argv = m->opts->cmd, .nofile_soft = m->nofile_soft_inherited };
        int k = exit_reaper_spawn(m->reaper, &a, &m->cmd);
        for (size_t i = 0; i < m->n_inherited; i++)
                close(m->inherited[i]); /* CMD has them; tend keeps no copy */
        m->n_inherited = 0;
        if (k < 0) {
                log_error("cannot start %s: %s", m->opts->cmd[0], strerror(-k));
                begin_shutdown(m, 1);
                return;
        }
        k = exit_process_wait_exec(m->cmd, -1, NULL);
        if (k < 0)
                log_error("%s: %s", m->opts->cmd[0], strerror(-k));
}

/* ---- the control socket's requests (SPEC §5) ---- */

static struct unit *find_loaded(struct manager *m, const char *name) {
        char full[256];
        size_t n = strlen(name);
        if (n >= 8 && streq(name + n - 8, ".service"))
                snprintf(full, sizeof full, "%s", name);
        else
                snprintf(full, sizeof full, "%s.service", name);
        return manager_find_unit(m, full);
}

static int ctl_resolve(void *userdata, const char *name, char ret[static 256]) {
        struct manager *m = userdata;
        struct unit *u = find_loaded(m, name);
        if (!u) {
                /* NAME@INST.service exists when tendctl start names it (SPEC §3). */
                char full[256];
                size_t n = strlen(name);
                snprintf(full, sizeof full, n >= 8 && streq(name + n - 8, ".service") ? "%s" : "%s.service", name);
                struct unit_file *f = NULL;
                if (!strchr(full, '@') || !unit_name_is_valid(full, UNIT_NAME_INSTANCE) ||
                    unit_load(m->opts->config_dir, full, &f, NULL) < 0)
                        return -ENOENT;
                if (manager_add_unit(m, f) < 0) {
                        unit_file_free(f);
                        return -ENOENT;
                }
                u = m->units[m->n_units - 1];
        }
        snprintf(ret, 256, "%s", u->name);
        return 0;
}

static int ctl_start(void *userdata, const char *name, bool restart, sf_waiter **ret_waiter) {
        struct manager *m = userdata;
        struct unit *u = find_loaded(m, name);
        if (!u || data(u)->removed) /* gone from DIR: only its stop is left */
                return -ENOENT;
        if (m->shutting_down)
                return -ESHUTDOWN;
        sf_resolution *r = NULL;
        int k = sf_table_join(m->flights, u->name, ret_waiter, &r);
        if (k < 0)
                return k;
        if (r) {
                if (restart) {
                        unit_explicit_restart(u, r);
                        jobs_propagate_restart(m, u, "on request");
                } else
                        unit_start(u, r, true);
        }
        record_write(m, u); /* waiters changed */
        return 0;
}

static int ctl_stop(void *userdata, const char *name) {
        struct manager *m = userdata;
        struct unit *u = find_loaded(m, name);
        if (!u)
                return -ENOENT;
        jobs_stop(m, u, true); /* and its Requires=/BindsTo= dependents (SPEC §4) */
        return 0;
}

static int ctl_reset_failed(void *userdata, const char *name) {
        struct manager *m = userdata;
        if (!name) {
                for (size_t i = 0; i < m->n_units; i++)
                        unit_reset_failed(m->units[i]);
                return 0;
        }
        struct unit *u = find_loaded(m, name);
        if (!u)
                return -ENOENT;
        unit_reset_failed(u);
        return 0;
}

static int ctl_kill(void *userdata, const char *name, int sig, bool main_only) {
        struct manager *m = userdata;
        struct unit *u = find_loaded(m, name);
        if (!u)
                return -ENOENT;
        if (main_only)
                return u->main ? exit_process_signal(u->main, sig) : -ESRCH;
        if (!u->main && !u->control && unit_group_populated(data(u)->group) <= 0)
                return -ESRCH;
        int k = unit_group_signal(data(u)->group, sig, u->main != NULL);
        return k < 0 ? k : 0;
}

static int ctl_reload(void *userdata, const char *name) {
        struct manager *m = userdata;
        struct unit *u = find_loaded(m, name);
        if (!u)
                return -ENOENT;
        return unit_reload(u);
}

static logs_stream *ctl_logs(void *userdata, const char *name) {
        struct manager *m = userdata;
        struct unit *u = find_loaded(m, name);
        if (!u)
                return NULL;
        enum logs_target_type t = output_target(&u->file->standard_output, false, &u->file->standard_output).type;
        if (t == LOGS_TARGET_JOURNAL || t == LOGS_TARGET_INHERIT || t == LOGS_TARGET_NULL)
                return NULL;
        return data(u)->logs;
}

static int ctl_daemon_reload(void *userdata, struct json_object *report) {
        struct manager *m = userdata;
        log_info("daemon-reload: re-reading %s", m->opts->config_dir);
        notify_upstream_reloading(m->upstream, true);
        int k = reload(m, report);
        notify_upstream_reloading(m->upstream, false);
        return k;
}

static int ctl_shutdown(void *userdata) {
        struct manager *m = userdata;
        log_info("shutdown requested through the control socket");
        begin_shutdown(m, m->cmd_done ? m->cmd_status : 0);
        return 0;
}

static int ctl_waiters(void *userdata, const char *name) {
        struct manager *m = userdata;
        int k = sf_table_get_waiters(m->flights, name);
        return k < 0 ? 0 : k;
}

static const struct control_ops control_ops = {
        .resolve = ctl_resolve,
        .start = ctl_start,
        .stop = ctl_stop,
        .reset_failed = ctl_reset_failed,
        .kill = ctl_kill,
        .reload = ctl_reload,
        .logs = ctl_logs,
        .daemon_reload = ctl_daemon_reload,
        .shutdown = ctl_shutdown,
        .waiters = ctl_waiters,
};

static int setup_control(struct manager *m) {
        _cleanup_free_ char *path = NULL;
        int k = control_socket_path(m->opts->control_socket, &path);
        if (k < 0)
                return log_error_errno(k, "no control socket path: set --control-socket or $TEND_SOCKET");
        struct control_options o = { .path = path, .control_group = m->opts->control_group };
        k = control_server_new(m->event, m->store, &control_ops, m, &o, &m->control);
        if (k == -EADDRINUSE)
                return log_error_errno(k, "already running: %s answers", path);
        if (k < 0)
                return log_error_errno(k, "control socket %s: %s", path, strerror(-k));
        log_info("control socket: %s", path);
        return 0;
}

/* ---- shutdown (SPEC §4 "Shutdown") ---- */

static bool all_units_dead(struct manager *m) {
        for (size_t i = 0; i < m->n_units; i++)
                if (!unit_is_dead(m->units[i]))
                        return false;
        return true;
}

static void check_shutdown_done(struct manager *m) {
        if (!m->shutting_down || m->cmd || !all_units_dead(m))
                return;
        if (getpid() == 1 && exit_reaper_has_children(m->reaper) > 0) {
                /* As PID 1 the remaining processes get SIGTERM, then, at the
                 * deadline, SIGKILL; tend exits when none is left. */
                static bool termed;
                if (!termed) {
                        termed = true;
                        (void) kill(-1, SIGTERM);
                        (void) kill(-1, SIGCONT);
                }
                return;
        }
        sd_event_exit(m->event, m->exit_status);
}

static void kill_everything(struct manager *m) {
        m->force_killed = true;
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                (void) unit_group_signal(data(u)->group, u->file->final_kill_signal, u->main != NULL);
        }
        if (m->cmd)
                (void) exit_process_signal(m->cmd, SIGKILL);
        if (getpid() == 1)
                (void) kill(-1, SIGKILL);
}

static int on_shutdown_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        log_warning("shutdown deadline reached: sending the final kill signal to everything left");
        kill_everything(m);
        /* What survives SIGKILL (uninterruptible sleep) is not waited for. */
        sd_event_exit(m->event, m->exit_status);
        return 0;
}

static void stop_all_units(struct manager *m) {
        /* Reverse order of After=/Before=; independent units in parallel. */
        jobs_stop_all(m);
        check_shutdown_done(m);
}

static int on_cmd_stop_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        if (m->cmd) {
                log_warning("%s did not exit within --stop-timeout: SIGKILL", m->opts->cmd[0]);
                (void) exit_process_signal(m->cmd, SIGKILL);
        }
        return 0;
}

static void begin_shutdown(struct manager *m, int status) {
        if (m->shutting_down)
                return;
        m->shutting_down = true;
        m->exit_status = status;
        notify_upstream_stopping(m->upstream);
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + m->opts->shutdown_timeout;
        (void) sd_event_add_time(m->event, &m->shutdown_timer, CLOCK_MONOTONIC, deadline, 1, on_shutdown_deadline, m);
        if (m->cmd) {
                /* Combined mode: CMD first, within the same deadline. */
                (void) exit_process_signal(m->cmd, SIGTERM);
                usec_t t = now_usec(CLOCK_MONOTONIC) + m->opts->stop_timeout;
                (void) sd_event_add_time(m->event, NULL, CLOCK_MONOTONIC, t < deadline ? t : deadline, 1,
                                         on_cmd_stop_timeout, m);
        }
        stop_all_units(m);
}

/* ---- signals (SPEC §1's table) ---- */

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct manager *m = userdata;
        int sig = (int) si->ssi_signo;
        char b[24];
        bool terminate = sig == SIGTERM || sig == SIGINT || (sig == SIGPWR && getpid() == 1);

        if (m->opts->cmd && m->cmd && !terminate) {
                (void) exit_process_signal(m->cmd, options_remap(m->opts, sig)); /* forwarded to CMD */
                return 0;
        }
        if (terminate) {
                if (m->shutting_down) {
                        log_notice("%s during shutdown: the final kill signal to everything", signal_to_string(sig, b));
                        kill_everything(m);
                        return 0;
                }
                log_info("%s: shutting down", signal_to_string(sig, b));
                begin_shutdown(m, m->cmd_done ? m->cmd_status : 0);
                return 0;
        }
        if (sig == SIGHUP) {
                log_info("SIGHUP: re-reading %s", m->opts->config_dir);
                notify_upstream_reloading(m->upstream, true);
                (void) reload(m, NULL);
                notify_upstream_reloading(m->upstream, false);
                return 0;
        }
        log_info("%s received: ignored", signal_to_string(sig, b));
        return 0;
}

static int add_signal_sources(struct manager *m) {
        sigset_t set;
        signal_forward_set(&set);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return negative_errno();
        for (int sig = 1; sig < _NSIG; sig++)
                if (sigismember(&set, sig)) {
                        int k = sd_event_add_signal(m->event, NULL, sig, on_signal, m);
                        if (k < 0)
                                return k;
                }
        return 0;
}

/* ---- set-up ---- */

/* In cgroup mode tend moves into a leaf of its own beside its units' cgroups
 * (cgroup.h, cgroup_tree_enter_leaf: a tend whose cgroup was once
 * cgroup.kill'ed would otherwise see every unit killed at birth). Failing
 * that, it stays where it is and says so: never a reason not to start. */
static void enter_leaf(struct manager *m) {
        const char *dir = cgroup_tree_dir(m->cgroups);
        int k = cgroup_tree_enter_leaf(m->cgroups);
        if (k == 0)
                log_debug("tend runs in %s/%s", dir, CGROUP_TEND_LEAF);
        else if (k > 0)
                log_notice("%s/%s is populated (left by a previous tend?): tend joins it as it is; "
                           "if it was ever cgroup.kill'ed, units are killed at birth", dir, CGROUP_TEND_LEAF);
        else
                log_notice("cannot move into %s/%s (%s): tend stays in %s; "
                           "if that cgroup was ever cgroup.kill'ed, units are killed at birth",
                           dir, CGROUP_TEND_LEAF, strerror(-k), dir);
}

static int setup_cgroups(struct manager *m) {
        int k = cgroup_tree_open(&m->cgroups);
        if (k < 0)
                return log_error_errno(k, "cgroups: %s", strerror(-k));
        if (cgroup_tree_mode(m->cgroups) == CGROUP_MODE_FALLBACK) {
                log_notice("%s", cgroup_tree_describe(m->cgroups));
                return 0;
        }
        log_info("units run in cgroups under %s", cgroup_tree_dir(m->cgroups));
        enter_leaf(m);
        return 0;
}

/* tend takes its hard RLIMIT_NOFILE as its soft one (SPEC §7). */
static void raise_nofile(struct manager *m) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        m->nofile_soft_inherited = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        (void) setrlimit(RLIMIT_NOFILE, &rl);
}

/* $TEND_WATCH_QUEUE: the store's bound on events queued per watcher (a test
 * knob, docs/tend.8.md: tests force a lagged watch with a small one). 0: the
 * store's default. */
static uint32_t watch_queue_capacity(void) {
        const char *e = getenv("TEND_WATCH_QUEUE");
        char *end;
        if (!e || !*e)
                return 0;
        errno = 0;
        unsigned long n = strtoul(e, &end, 10);
        if (errno || *end || n > UINT32_MAX) {
                log_warning("TEND_WATCH_QUEUE=\"%s\" is not a number: ignored", e);
                return 0;
        }
        return (uint32_t) n;
}

static int manager_setup(struct manager *m) {
        raise_nofile(m);
        int k = sd_event_new(&m->event);
        if (k < 0)
                return log_error_errno(k, "sd_event_new: %s", strerror(-k));
        k = exit_hub_new(0, 0, &m->hub);
        if (k >= 0)
                k = exit_reaper_new(m->hub, EXIT_REAPER_ORPHANS | EXIT_REAPER_EXEC_EVENTS, &m->reaper);
        if (k == -ENOSYS)
                return log_error_errno(k, "the kernel lacks %s: tend needs Linux 5.10 or later",
                                       exit_reaper_missing_syscall());
        /* Subscribe before the first spawn: earlier exits are not queued. */
        if (k >= 0)
                k = exit_hub_subscribe(m->hub, &m->sub);
        if (k < 0)
                return log_error_errno(k, "setting up the reaper: %s", strerror(-k));
        struct store_options so = { .watch_queue_capacity = watch_queue_capacity() };
        if ((k = sf_table_new(&unit_outcome_ops, NULL, &m->flights)) < 0 ||
            (k = store_new(&so, &m->store)) < 0 || (k = record_writer_new(&m->records)) < 0 ||
            (k = logs_manager_new(m->event, &(struct logs_manager_options) { .console_fd = -1 }, &m->logs)) < 0)
                return log_error_errno(k, "setting up: %s", strerror(-k));
        if ((k = setup_cgroups(m)) < 0 || (k = setup_control(m)) < 0)
                return k;
        if ((k = add_signal_sources(m)) < 0 ||
            (k = sd_event_add_io(m->event, NULL, exit_reaper_fd(m->reaper), EPOLLIN, on_reaper, m)) < 0 ||
            (k = sd_event_add_io(m->event, NULL, exit_sub_fd(m->sub), EPOLLIN, on_sub, m)) < 0 ||
            (k = sd_event_add_io(m->event, NULL, store_get_fd(m->store), EPOLLIN, on_store, m)) < 0 ||
            (k = watchdog_leases_new(m->event, m->store, on_lease_expired, m, &m->watchdogs)) < 0)
                return log_error_errno(k, "setting up the event loop: %s", strerror(-k));
        /* Before the first spawn: NOTIFY_SOCKET and WATCHDOG_* leave tend's
         * environment, so no child inherits them (SPEC §1). */
        if ((k = notify_upstream_new(m->event, &m->upstream)) < 0)
                log_warning_errno(k, "$NOTIFY_SOCKET: %s: not notifying the service manager", strerror(-k));
        return 0;
}

static void manager_done(struct manager *m) {
        m->control = control_server_free(m->control);
        if (m->logs)
                (void) logs_manager_drain(m->logs, now_usec(CLOCK_MONOTONIC) + 500 * USEC_PER_MSEC);
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit_data *d = data(m->units[i]);
                if (d->group && unit_group_populated(d->group) == 0)
                        (void) unit_group_remove(d->group);
                manager_unit_free(m->units[i]);
        }
        free(m->units);
        m->sweep = sd_event_source_disable_unref(m->sweep);
        jobs_done(m);
        m->shutdown_timer = sd_event_source_disable_unref(m->shutdown_timer);
        m->upstream = notify_upstream_free(m->upstream);
        m->watchdogs = watchdog_leases_free(m->watchdogs);
        exit_process_unref(m->cmd);
        logs_manager_free(m->logs);
        cgroup_tree_leave_leaf(m->cgroups);
        cgroup_tree_free(m->cgroups);
        record_writer_free(m->records);
        free(m->held);
        store_unref(m->store);
        sf_table_unref(m->flights);
        exit_sub_free(m->sub);
        exit_reaper_free(m->reaper);
        exit_hub_unref(m->hub);
        m->event = sd_event_unref(m->event);
}

int manager_run(const struct tend_options *opts, const int *inherited, size_t n_inherited) {
        struct manager m = { .opts = opts, .inherited = inherited, .n_inherited = opts->cmd ? n_inherited : 0 };
        if (!opts->cmd)
                for (size_t i = 0; i < n_inherited; i++)
                        close(inherited[i]);
        int k = manager_setup(&m);
        if (k >= 0)
                k = load_units(&m);
        if (k >= 0) {
                /* Every non-template unit in DIR gets a start job (SPEC §3),
                 * all queued before any waits for another. Instances loaded
                 * meanwhile (referenced by a unit) start only when pulled. */
                size_t n_initial = m.n_units;
                m.jobs_batch = true;
                for (size_t i = 0; i < n_initial; i++)
                        manager_start_unit(&m, m.units[i]);
                m.jobs_batch = false;
                m.initial_jobs_queued = true;
                maybe_start_cmd(&m);
                upstream_update(&m);
                k = sd_event_loop(m.event);
                if (k < 0)
                        log_error_errno(k, "event loop: %s", strerror(-k));
        }
        int status = k < 0 ? 1 : m.exit_status;
        manager_done(&m);
        return status;
}
