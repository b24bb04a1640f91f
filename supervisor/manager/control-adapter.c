/* SPDX-License-Identifier: MIT */
/*
 * The control socket's requests (SPEC §5), answered from the units: the
 * manager's side of struct control_ops (control.h).
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
#include "control-describe.h"
#include "libexit.h"
#include "log.h"
#include "logs.h"
#include "macro.h"
#include "manager.h"
#include "manager-internal.h"
#include "reexec.h"
#include "record.h"
#include "notify.h"
#include "sandbox.h"
#include "signal-util.h"
#include "singleflight.h"
#include "store.h"
#include "unit-file.h"
#include "unit.h"
#include "watchdog.h"

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
                u = manager_find_unit(m, f->name); /* an alias of an instance already loaded */
                if (u)
                        unit_file_free(f);
                else if (manager_add_unit(m, f) < 0) {
                        unit_file_free(f);
                        return -ENOENT;
                } else
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
        int refused = manager_cluster_start_refused(m, u, ret_waiter); /* cluster: a singleton held elsewhere */
        if (refused != 0)
                return refused < 0 ? refused : 0;
        sf_resolution *r = NULL;
        int k = sf_table_join(m->flights, u->name, ret_waiter, &r);
        if (k < 0)
                return k;
        if (r) {
                if (restart) {
                        unit_explicit_restart(u, r);
                        jobs_propagate_restart(m->jobs, u, "on request");
                } else
                        unit_start(u, r, true);
        }
        record_write(m, u); /* waiters changed */
        return 0;
}

static void ctl_describe_outcome(void *userdata, void *outcome, struct control_outcome *ret) {
        const struct unit_outcome *o = outcome;
        *ret = (struct control_outcome) {
                .ok = o->ok,
                .main_pid = o->main_pid > 0 ? o->main_pid : 0,
                .result = unit_result_to_string(o->result),
                .result_failed = o->result != UNIT_RESULT_SUCCESS,
        };
        snprintf(ret->reason, sizeof ret->reason, "%s", o->reason);
        unit_outcome_ops.free(outcome, NULL);
}

static bool state_is_down(enum unit_state s) {
        return s == UNIT_INACTIVE || s == UNIT_FAILED;
}

/* What u's record in the store says: down when it has none, or when the
 * last one written shows inactive or failed. */
static bool record_says_down(struct unit *u) {
        struct unit_data *d = data(u);
        if (u->record_revision == 0)
                return true;
        return d->record_written && state_is_down(d->record.shown.state);
}

static int ctl_stop(void *userdata, const char *name) {
        struct manager *m = userdata;
        struct unit *u = find_loaded(m, name);
        if (!u)
                return -ENOENT;
        jobs_stop(m->jobs, u, true); /* and its Requires=/BindsTo= dependents (SPEC §4) */
        manager_cluster_stopped(m, u); /* etcd: a singleton's key goes once it is down */
        return record_says_down(u) ? 1 : 0;
}

void manager_control_record_stored(struct manager *m, struct unit *u, const struct record_fields *f) {
        if (state_is_down(f->shown.state)) {
                control_server_unit_stopped(m->control, u->name);
                manager_cluster_unit_down(m, u); /* etcd: a singleton's key given up goes now */
        }
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

/* QA L5: the reload is waited for, as systemctl's reload job: set before it
 * begins (a command that cannot be spawned ends it inside unit_reload()). */
static int ctl_reload(void *userdata, const char *name) {
        struct manager *m = userdata;
        struct unit *u = find_loaded(m, name);
        if (!u)
                return -ENOENT;
        /* A refused reload (-EBUSY: one runs) leaves the running one's waiters as
         * they were: it must not unmark them (QA19B M1: the first client was never
         * answered). */
        bool was_waited = data(u)->reload_waited, was_failed = data(u)->reload_failed;
        bool running = u->pos == UNIT_POS_RELOAD;
        data(u)->reload_waited = true;
        if (!running)
                data(u)->reload_failed = false;
        int k = unit_reload(u);
        if (k < 0) {
                data(u)->reload_waited = running ? was_waited : false;
                data(u)->reload_failed = running ? was_failed : data(u)->reload_failed;
                return k;
        }
        jobs_propagate_reload(m->jobs, u); /* PropagatesReloadTo= (not waited for) */
        return 0;
}

void manager_control_unit_changed(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        if (!d->reload_waited || u->pos == UNIT_POS_RELOAD)
                return;
        d->reload_waited = false;
        const struct unit_rare *r = unit_rare_peek(u);
        const struct unit_failure *f = r ? r->failure : NULL;
        char why[512] = "";
        if (d->reload_failed && f && f->exec_errno > 0)
                snprintf(why, sizeof why, "%s: reload failed: ExecReload=%s could not be executed: %s", u->name, f->path,
                         strerror(f->exec_errno));
        else if (d->reload_failed && f)
                snprintf(why, sizeof why, "%s: reload failed: ExecReload=%s %s %d (see `tendctl status %s`)", u->name,
                         f->path, f->reason.kind == EXIT_REASON_EXITED ? "exited with status" : "was killed by signal",
                         f->reason.status, u->name);
        else if (d->reload_failed || u->pos != UNIT_POS_RUNNING)
                snprintf(why, sizeof why, "%s: reload failed: %s", u->name,
                         d->reload_failed ? "ExecReload= failed" : "the unit stopped while it reloaded");
        d->reload_failed = false;
        control_server_unit_reloaded(m->control, u->name, why[0] ? why : NULL);
}

static logs_stream *ctl_logs(void *userdata, const char *name) {
        struct manager *m = userdata;
        struct unit *u = find_loaded(m, name);
        if (!u)
                return NULL;
        enum logs_target_type t = manager_output_target(&u->file->standard_output, false, &u->file->standard_output).type;
        if (t == LOGS_TARGET_JOURNAL || t == LOGS_TARGET_INHERIT || t == LOGS_TARGET_NULL)
                return NULL;
        return data(u)->logs;
}

static int ctl_daemon_reload(void *userdata, struct json_object *report) {
        struct manager *m = userdata;
        log_info("daemon-reload: re-reading %s", m->opts->config_dir);
        notify_upstream_reloading(m->upstream, true);
        int k = manager_reload(m, report);
        notify_upstream_reloading(m->upstream, false);
        return k;
}

static int ctl_shutdown(void *userdata) {
        struct manager *m = userdata;
        log_info("shutdown requested through the control socket");
        manager_begin_shutdown(m, m->cmd.done ? m->cmd.status : 0);
        return 0;
}

static int ctl_waiters(void *userdata, const char *name) {
        struct manager *m = userdata;
        int k = sf_table_get_waiters(m->flights, name);
        return k < 0 ? 0 : k;
}

/* etcd: the cluster view (cluster.h). */
static int ctl_cluster(void *userdata, const char *view, const char *unit, struct json_object *items,
                       struct control_ticket *ticket) {
        struct manager *m = userdata;
        return cluster_view(m->cluster, view, unit, items, ticket);
}

static int ctl_describe(void *userdata, const char *name, struct json_object *props) {
        return manager_describe_unit(userdata, name, props);
}

static int ctl_assess(void *userdata, const char *name, struct json_object *ret) { /* security */
        return manager_assess_unit(userdata, name, ret);
}

/* pkg: enable/disable (enablement.c) */
static int ctl_set_enabled(void *userdata, const char *name, bool enabled) {
        struct manager *m = userdata;
        struct unit *u = find_loaded(m, name);
        return u ? manager_unit_set_enabled(m, u, enabled) : -ENOENT;
}

static int ctl_daemon_reexec(void *userdata, char *why, size_t size) {
        return manager_reexec_request(userdata, why, size);
}

static const struct control_ops control_ops = {
        .resolve = ctl_resolve,
        .start = ctl_start,
        .describe_outcome = ctl_describe_outcome,
        .stop = ctl_stop,
        .reset_failed = ctl_reset_failed,
        .kill = ctl_kill,
        .reload = ctl_reload,
        .logs = ctl_logs,
        .daemon_reload = ctl_daemon_reload,
        .shutdown = ctl_shutdown,
        .waiters = ctl_waiters,
        .describe = ctl_describe,
        .assess = ctl_assess,
        .set_enabled = ctl_set_enabled,
        .daemon_reexec = ctl_daemon_reexec,
        .cluster = ctl_cluster,
};

int manager_setup_control(struct manager *m) {
        _cleanup_free_ char *path = NULL;
        int k = control_socket_path(m->opts->control_socket, &path);
        if (k < 0)
                return log_error_errno(k, "no control socket path: set --control-socket or $TEND_SOCKET");
        struct control_options o = { .path = path, .control_group = m->opts->control_group,
                                     .listen_fd = manager_resume_control_fd(m) };
        k = control_server_new(m->event, m->store, &control_ops, m, &o, &m->control);
        if (k < 0)
                return k; /* said why, one line with the path (QA L4) */
        log_info("control socket: %s", path);
        return 0;
}
