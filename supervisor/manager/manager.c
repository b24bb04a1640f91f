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
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>

#include <systemd/sd-event.h>

#include "cgroup.h"
#include "control.h"
#include "exit-routes.h"
#include "held-records.h"
#include "jobs.h"
#include "libexit.h"
#include "log.h"
#include "logs.h"
#include "macro.h"
#include "manager-internal.h"
#include "manager.h"
#include "notify.h"
#include "record.h"
#include "reexec.h"
#include "signal-util.h"
#include "singleflight.h"
#include "store.h"
#include "unit.h"
#include "unit-hardening.h"
#include "watchdog.h"

/* ---- signals (SPEC §1's table) ---- */

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct manager *m = userdata;
        int sig = (int) si->ssi_signo;
        char b[24];
        bool terminate = sig == SIGTERM || sig == SIGINT || (sig == SIGPWR && getpid() == 1);

        if (m->opts->cmd && m->cmd.process && !terminate) {
                (void) exit_process_signal(m->cmd.process, options_remap(m->opts, sig)); /* forwarded to CMD */
                return 0;
        }
        if (terminate) {
                if (m->shutting_down) {
                        log_notice("%s during shutdown: the final kill signal to everything", signal_to_string(sig, b));
                        manager_kill_everything(m);
                        return 0;
                }
                log_info("%s: shutting down", signal_to_string(sig, b));
                manager_begin_shutdown(m, m->cmd.done ? m->cmd.status : 0);
                return 0;
        }
        if (sig == SIGUSR2) { /* reexec: daemon-reexec (tend(8) "RE-EXECUTING") */
                char why[256] = "";
                if (manager_reexec_request(m, why, sizeof why) < 0)
                        log_error("SIGUSR2: not re-executing: %s", why);
                return 0;
        }
        if (sig == SIGHUP) {
                log_info("SIGHUP: re-reading %s", m->opts->config_dir);
                notify_upstream_reloading(m->upstream, true);
                (void) manager_reload(m, NULL);
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
                log_warning("%s/%s is populated (left by a previous tend?): tend joins it as it is; "
                            "if it was ever cgroup.kill'ed, units are killed at birth", dir, CGROUP_TEND_LEAF);
        else
                (void) log_full_errno(LOG_WARNING, k, "cannot move into %s/%s (%m): tend stays in %s; "
                                      "if that cgroup was ever cgroup.kill'ed, units are killed at birth",
                                      dir, CGROUP_TEND_LEAF, dir);
}

static int setup_cgroups(struct manager *m) {
        int k = m->resumed ? cgroup_tree_open_resumed(&m->cgroups) : cgroup_tree_open(&m->cgroups);
        if (k < 0)
                return log_error_errno(k, "cgroups: %m");
        if (cgroup_tree_mode(m->cgroups) == CGROUP_MODE_FALLBACK) {
                log_warning("%s", cgroup_tree_describe(m->cgroups)); /* an operator needs it: not hidden */
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
        m->cmd.nofile_soft_inherited = rl.rlim_cur;
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
        /* keyring: systemd's default, KeyringMode=private, needs keyctl(2) (unit-hardening.h) */
        if (geteuid() == 0 && !unit_keyring_available())
                log_notice("keyctl(2) is missing or denied here: units that do not set KeyringMode= "
                           "keep tend's session keyring");
        int k = sd_event_new(&m->event);
        if (k < 0)
                return log_error_errno(k, "sd_event_new: %m");
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
                return log_error_errno(k, "setting up the reaper: %m");
        struct store_options so = { .watch_queue_capacity = watch_queue_capacity() };
        if ((k = sf_table_new(&unit_outcome_ops, NULL, &m->flights)) < 0 ||
            (k = store_new(&so, &m->store)) < 0 || (k = record_writer_new(&m->records)) < 0 ||
            (k = logs_manager_new(m->event, &(struct logs_manager_options) { .console_fd = -1, .resumed = m->resumed },
                                  &m->logs)) < 0)
                return log_error_errno(k, "setting up: %m");
        if ((k = setup_cgroups(m)) < 0 || (k = manager_setup_control(m)) < 0)
                return k;
        if ((k = add_signal_sources(m)) < 0 ||
            (k = sd_event_add_io(m->event, NULL, exit_reaper_fd(m->reaper), EPOLLIN, manager_on_reaper, m)) < 0 ||
            (k = sd_event_add_io(m->event, NULL, exit_sub_fd(m->sub), EPOLLIN, manager_on_sub, m)) < 0 ||
            (k = sd_event_add_io(m->event, NULL, store_get_fd(m->store), EPOLLIN, manager_on_store, m)) < 0 ||
            (k = watchdog_leases_new(m->event, m->store, manager_on_lease_expired, m, &m->watchdogs)) < 0 ||
            (k = jobs_new(m->event, &m->units, &m->n_units, &manager_jobs_ops, m, &m->jobs)) < 0)
                return log_error_errno(k, "setting up the event loop: %m");
        /* etcd: the cluster store beside tend's own (issue 20), after the signals are
         * blocked (its threads inherit the mask); registration runs in the background,
         * so units never wait for etcd. */
        if (m->opts->cluster.store &&
            (k = cluster_new(m->event, &m->opts->cluster, m->store, &manager_cluster_ops, m, &m->cluster)) < 0)
                return k;
        /* Before the first spawn: NOTIFY_SOCKET and WATCHDOG_* leave tend's
         * environment, so no child inherits them (SPEC §1). */
        if ((k = notify_upstream_new(m->event, &m->upstream)) < 0)
                log_warning_errno(k, "$NOTIFY_SOCKET: %m: not notifying the service manager");
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
        free(m->logs_key_shared); /* after the units: theirs may be it */
        unit_name_map_done(&m->names);
        exit_routes_done(&m->routes);
        m->sweep = sd_event_source_disable_unref(m->sweep);
        m->jobs = jobs_free(m->jobs);
        m->shutdown_timer = sd_event_source_disable_unref(m->shutdown_timer);
        m->leftovers_poll = sd_event_source_disable_unref(m->leftovers_poll);
        m->reexec_retry = sd_event_source_disable_unref(m->reexec_retry);
        manager_reexec_cancel(m);
        m->upstream = notify_upstream_free(m->upstream);
        m->watchdogs = watchdog_leases_free(m->watchdogs);
        exit_process_unref(m->cmd.process);
        logs_manager_free(m->logs);
        cgroup_tree_leave_leaf(m->cgroups);
        cgroup_tree_free(m->cgroups);
        record_writer_free(m->records);
        held_records_done(&m->held);
        m->cluster = cluster_free(m->cluster); /* before the store it watches */
        store_unref(m->store);
        sf_table_unref(m->flights);
        exit_sub_free(m->sub);
        exit_reaper_free(m->reaper);
        exit_hub_unref(m->hub);
        m->event = sd_event_unref(m->event);
}

/* DIR as an absolute path without a trailing '/' (symbolic links kept: a
 * link in DIR is an alias or a linked unit by where it points, unit-file.h),
 * so every unit's path reads as systemctl's FragmentPath does; NULL when DIR
 * is already that (or on ENOMEM, where DIR as given still works). */
static char *absolute_dir(const char *dir) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
                n--;
        if (dir[0] == '/')
                return n == strlen(dir) ? NULL : strndup(dir, n);
        _cleanup_free_ char *cwd = getcwd(NULL, 0);
        char *abs = NULL;
        if (!cwd || asprintf(&abs, "%s%s%.*s", cwd, streq(cwd, "/") ? "" : "/", (int) n, dir) < 0)
                return NULL;
        return abs;
}

/* ---- the start of every unit in DIR (SPEC §3) ---- */

/* issue 19: starts made before the loop answers tendctl. Units with an edge
 * (dependencies, ordering, Conflicts=) are queued in one batch, as they must
 * be judged together; the independent ones go ahead at once, the first
 * INITIAL_STARTS_PER_TURN before the loop runs (a DIR of that many starts as
 * it always did), the rest as many per turn of the loop, so that 10,000
 * units' spawns no longer keep tendctl waiting for all of them. */
#define INITIAL_STARTS_PER_TURN 256

static struct {
        sd_event_source *source;
        size_t next, end; /* the independent units of units[next, end) are still to start */
} initial;

static void initial_starts_done(struct manager *m) {
        initial.source = sd_event_source_disable_unref(initial.source);
        m->initial_jobs_queued = true;
        manager_maybe_start_cmd(m);
        manager_upstream_update(m);
}

/* Whether tend starts u itself now: not a unit a re-exec resumed (reexec), not
 * a disabled one (pkg: tendctl disable; says why once). */
static bool initial_start_wanted(struct manager *m, struct unit *u) {
        return !data(u)->resumed && manager_unit_starts_on_its_own(m, u);
}

/* Starts up to max independent units; whether some are left. */
static bool initial_starts_run(struct manager *m, size_t max) {
        size_t done = 0;
        for (; initial.next < initial.end && initial.next < m->n_units && done < max; initial.next++) {
                struct unit *u = m->units[initial.next];
                if (!jobs_unit_independent(m->jobs, u))
                        continue;
                if (initial_start_wanted(m, u))
                        manager_start_unit(m, u);
                done++;
        }
        return initial.next < initial.end && initial.next < m->n_units;
}

static int on_initial_starts(sd_event_source *s, void *userdata) {
        struct manager *m = userdata;
        if (m->shutting_down || !initial_starts_run(m, INITIAL_STARTS_PER_TURN))
                initial_starts_done(m);
        return 0;
}

/* What is left starts now (a daemon-reload reshapes units[]: reload.c).
 * (A unit a tendctl stop reached before its turn still starts at its turn:
 * its start job was queued first, as at tend's start.) */
size_t manager_initial_starts_finish(struct manager *m) {
        if (!initial.source)
                return 0;
        size_t left = initial.end - MIN(initial.next, initial.end);
        (void) initial_starts_run(m, SIZE_MAX);
        initial_starts_done(m);
        return left;
}

static void initial_starts_begin(struct manager *m) {
        /* Every non-template unit in DIR gets a start job (SPEC §3), those
         * with an edge all queued before any waits for another. Instances
         * loaded meanwhile (referenced by a unit) start only when pulled. */
        initial.next = 0;
        initial.end = m->n_units;
        jobs_batch(m->jobs, true);
        for (size_t i = 0; i < initial.end; i++)
                if (!jobs_unit_independent(m->jobs, m->units[i]) && initial_start_wanted(m, m->units[i]))
                        manager_start_unit(m, m->units[i]);
        jobs_batch(m->jobs, false);
        /* Below the other sources: a defer source stays pending, and at
         * their priority it would win every turn (sd-event dispatches the
         * oldest pending source first): tendctl would wait as before. */
        if (initial_starts_run(m, INITIAL_STARTS_PER_TURN) &&
            sd_event_add_defer(m->event, &initial.source, on_initial_starts, m) >= 0 &&
            sd_event_source_set_priority(initial.source, SD_EVENT_PRIORITY_NORMAL + 10) >= 0 &&
            sd_event_source_set_enabled(initial.source, SD_EVENT_ON) >= 0)
                return; /* the rest from the loop, a turn at a time */
        (void) initial_starts_run(m, SIZE_MAX);
        initial_starts_done(m);
}

int manager_run(const struct tend_options *given, const int *inherited, size_t n_inherited) {
        struct tend_options abs_opts = *given;
        _cleanup_free_ char *dir = absolute_dir(given->config_dir);
        if (dir)
                abs_opts.config_dir = dir;
        const struct tend_options *opts = &abs_opts;
        struct manager m = { .opts = opts, .cmd = { .inherited = inherited, .n_inherited = opts->cmd ? n_inherited : 0 } };
        /* An allocation of 32 KiB or more (a table, a control reply, a watch's snapshot of
         * every record) is a mapping of its own, unmapped when freed: a transient one never
         * leaves a hole in the heap that the small allocations made meanwhile pin (up to
         * 0.5 MiB with 1,000 units and ten watchers attaching; SPEC §8's footprint). */
        (void) mallopt(M_MMAP_THRESHOLD, 32 * 1024);
        /* reexec: a re-executed tend's inherited fds are the ones its state
         * names (every other fd of the previous tend was O_CLOEXEC). */
        int k = manager_resume_begin(&m); /* before the set-up, which takes its control socket */
        if (!opts->cmd && !m.resumed)
                for (size_t i = 0; i < n_inherited; i++)
                        close(inherited[i]);
        if (k >= 0)
                k = manager_setup(&m);
        if (k >= 0)
                k = m.resumed ? manager_resume_load_units(&m) : manager_load_units(&m);
        if (k >= 0)
                (void) manager_resume_units(&m);
        if (k >= 0) {
                initial_starts_begin(&m);
                k = sd_event_loop(m.event);
                if (k < 0)
                        log_error_errno(k, "event loop: %m");
        }
        int status = k < 0 ? 1 : m.exit_status;
        manager_done(&m);
        return status;
}
