/* SPDX-License-Identifier: MIT */
/*
 * The manager's units: their per-unit data (log stream, cgroup, timer),
 * adding, finding, starting and stopping one, loading DIR at start-up.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <systemd/sd-event.h>

#include "cgroup.h"
#include "due-timer.h"
#include "exit-routes.h"
#include "jobs.h"
#include "kept-env.h"
#include "log.h"
#include "logs.h"
#include "macro.h"
#include "manager-internal.h"
#include "notify.h"
#include "singleflight.h"
#include "strv.h"
#include "unit-file.h"
#include "unit.h"
#include "watchdog.h"

/* ---- units ---- */

struct logs_target manager_output_target(const struct unit_output *o, bool is_stderr, const struct unit_output *out) {
        if (is_stderr && o->kind == UNIT_OUTPUT_DEFAULT)
                return manager_output_target(out, false, out);
        switch (o->kind) {
        case UNIT_OUTPUT_INHERIT:
                return (struct logs_target) { LOGS_TARGET_INHERIT, NULL };
        case UNIT_OUTPUT_NULL:
        case UNIT_OUTPUT_TTY: /* exec: the spawn opens TTYPath= (exec-stdio.h) */
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

/* A unit's output key (taken) as it keeps it: the manager's shared copy when
 * equal (1,000 units with the default settings keep one string, SPEC §8). */
static char *key_keep(struct manager *m, char *key) {
        if (!m->logs_key_shared)
                return m->logs_key_shared = key;
        if (!streq(key, m->logs_key_shared))
                return key;
        free(key);
        return m->logs_key_shared;
}

/* Lets go of a unit's output key (key_keep()'s). */
static void key_drop(struct manager *m, char *key) {
        if (key != m->logs_key_shared)
                free(key);
}

static struct unit_data *unit_data_free(struct unit_data *d) {
        if (!d)
                return NULL;
        due_timer_done(&d->timer);
        sd_event_source_disable_unref(d->group_source);
        jobs_unit_done(&d->jobs);
        sf_waiter_free(d->own_waiter);
        logs_stream_free(d->logs);
        key_drop(d->m, d->logs_key);
        if (d->rare) {
                sd_event_source_disable_unref(d->rare->pid_file_retry);
                sd_event_source_disable_unref(d->rare->leftovers_deadline);
                notify_socket_free(d->rare->notify);
                kept_env_done(&d->rare->main_env);
                free(d->rare->file_error);
                free(d->rare->failure);
                strv_free(d->rare->aliases);
                free(d->rare);
        }
        unit_group_free(d->group);
        free(d);
        return NULL;
}

struct unit_rare *unit_rare(struct unit *u) {
        struct unit_data *d = data(u);
        if (!d->rare)
                d->rare = calloc(1, sizeof *d->rare);
        return d->rare;
}

/* The output settings a unit's log stream is made from, as one string. */
static char *output_key(const struct unit_file *f) {
        const struct unit_output *o = &f->standard_output, *e = &f->standard_error;
        char *s = NULL;
        if (asprintf(&s, "%d %s\n%d %s\n%s\n%d %d", (int) o->kind, o->path ? o->path : "", (int) e->kind,
                     e->path ? e->path : "", f->syslog_identifier ? f->syslog_identifier : "",
                     unit_file_syslog_priority(f), (int) unit_file_syslog_level_prefix(f)) < 0)
                return NULL;
        return s;
}

/* A log stream for u's file into *ret, and its output key. */
static int logs_open(struct manager *m, struct unit *u, logs_stream **ret, char **ret_key) {
        const struct unit_file *f = u->file;
        struct logs_stream_config c = {
                .name = u->name,
                .syslog_identifier = f->syslog_identifier,
                .stdout_target = manager_output_target(&f->standard_output, false, &f->standard_output),
                .stderr_target = manager_output_target(&f->standard_error, true, &f->standard_output),
                .syslog_priority = unit_file_syslog_priority(f),
                .no_level_prefix = !unit_file_syslog_level_prefix(f),
        };
        _cleanup_free_ char *key = output_key(f);
        if (!key)
                return log_error_errno(ENOMEM, "%s: cannot set up its logs: %m", u->name);
        int k = logs_stream_new(m->logs, &c, ret);
        if (k < 0)
                return log_error_errno(k, "%s: cannot set up its logs: %m", u->name);
        *ret_key = key_keep(m, TAKE_PTR(key));
        return 0;
}

/* Before each start: a daemon-reload may have changed StandardOutput=,
 * StandardError= or SyslogIdentifier=; the new file gets a stream of its own
 * (the old one's ring and followers end). Unchanged settings keep the stream. */
int manager_logs_renew(struct manager *m, struct unit *u) {
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
        key_drop(m, d->logs_key);
        d->logs_key = new_key;
        return 0;
}

static int unit_data_new(struct manager *m, struct unit *u) {
        struct unit_data *d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        d->m = m;
        d->exits.unit = u;
        d->jobs.unit = u;
        u->manager_data = d;
        /* No fd at load (issue 19's fd budget): the stream's pipes are made
         * by each start (op_prepare), which fails "out of file descriptors"
         * without them, retried per Restart=. */
        int k = logs_open(m, u, &d->logs, &d->logs_key);
        if (k < 0)
                return k;
        k = unit_group_new(m->cgroups, u->name, &d->group);
        if (k < 0)
                return log_error_errno(k, "%s: cannot create its cgroup: %m", u->name);
        return 0;
}

/* ---- names: a unit's own and its aliases, one hash table ---- */

static struct unit_name_slot *name_slot(struct manager *m, const char *name) {
        uint64_t key = hashmap_str_key(name);
        for (struct unit_name_slot *s = unit_name_map_get(&m->names, key); s; s = unit_name_map_get_next(&m->names, s))
                if (streq(s->name, name))
                        return s;
        return NULL;
}

/* name (borrowed: u's own, or one of its aliases) → u, unless another unit has it. */
static int name_add(struct manager *m, struct unit *u, const char *name) {
        struct unit_name_slot *s = name_slot(m, name);
        if (s && s->unit != u) {
                log_warning("%s: alias %s is already a name of %s, ignored", u->name, name, s->unit->name);
                return -EEXIST;
        }
        if (s)
                return 0;
        return unit_name_map_insert(&m->names, (struct unit_name_slot) { hashmap_str_key(name), name, u });
}

static void name_remove(struct manager *m, struct unit *u, const char *name) {
        struct unit_name_slot *s = name_slot(m, name);
        if (s && s->unit == u)
                unit_name_map_remove(&m->names, s);
}

static void aliases_remove(struct manager *m, struct unit *u) {
        struct unit_rare *r = data(u)->rare;
        if (!r)
                return;
        for (char **a = r->aliases; a && *a; a++)
                name_remove(m, u, *a);
        r->aliases = strv_free(r->aliases);
}

/* f's aliases as u's names (those another unit has are left out). */
static void aliases_add(struct manager *m, struct unit *u, const struct unit_file *f) {
        struct unit_rare *r = f->aliases ? unit_rare(u) : NULL;
        for (char *const *a = f->aliases; r && a && *a; a++) {
                if (strv_extend(&r->aliases, *a) < 0)
                        break;
                char **last = r->aliases + strv_length(r->aliases) - 1;
                if (name_add(m, u, *last) < 0) {
                        free(*last);
                        *last = NULL;
                }
        }
}

void manager_unit_names_update(struct manager *m, struct unit *u, const struct unit_file *f) {
        aliases_remove(m, u);
        aliases_add(m, u, f);
}

struct unit *manager_find_unit(struct manager *m, const char *name) {
        struct unit_name_slot *s = name ? name_slot(m, name) : NULL;
        return s ? s->unit : NULL;
}

struct unit *manager_unit_free(struct unit *u) {
        if (!u)
                return NULL;
        struct unit_data *d = u->manager_data;
        if (d)
                records_flush(d->m); /* none of them may outlive it */
        if (d)
                exit_routes_forget(&d->m->routes, &d->exits);
        if (d && d->m->watchdogs && d->rare) /* a unit is freed dead, so this is a no-op but for safety */
                (void) watchdog_lease_clear(d->m->watchdogs, u->name, &d->rare->watchdog_revision);
        if (d) {
                aliases_remove(d->m, u);
                name_remove(d->m, u, u->name);
        }
        unit_data_free(u->manager_data);
        u->manager_data = NULL;
        return unit_free(u);
}

int manager_add_unit(struct manager *m, struct unit_file *f) {
        if (manager_find_unit(m, f->name))
                return -EEXIST; /* an alias's unit, loaded under its own name */
        struct unit **v = realloc(m->units, (m->n_units + 1) * sizeof *v);
        if (!v)
                return -ENOMEM;
        m->units = v;
        struct unit *u = NULL;
        int k = unit_new(f, &manager_unit_ops, m, &u);
        if (k < 0)
                return k;
        k = unit_data_new(m, u);
        if (k >= 0)
                k = name_add(m, u, u->name);
        if (k < 0) {
                u->file = NULL; /* the caller still owns f */
                manager_unit_free(u);
                return k;
        }
        aliases_add(m, u, f);
        m->units[m->n_units++] = u;
        jobs_invalidate(m->jobs);
        record_write(m, u);
        return 0;
}

void manager_start_unit(struct manager *m, struct unit *u) {
        /* etcd: Hosts=/HostMetadata= name the hosts that may run it (docs/cluster.md §5) */
        if (m->cluster && !cluster_host_eligible(m->cluster, u->file->cluster_keys)) {
                log_info("%s: not started: this host (%s) is not one its Hosts=/HostMetadata= name", u->name,
                         cluster_host_id(m->cluster));
                return;
        }
        /* etcd: a singleton starts on the host that holds its key (docs/cluster.md §5) */
        if (m->cluster && u->file->singleton && !cluster_singleton_may_run(m->cluster, u->name, NULL)) {
                (void) cluster_singleton_want(m->cluster, u->name, u->file->timeout_stop);
                return;
        }
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

void manager_notice_missing_wants(struct manager *m) {
        for (size_t i = 0; i < m->n_units; i++) {
                const struct unit *u = m->units[i];
                if (data(u)->removed)
                        continue; /* gone from DIR, stopping */
                for (char **p = u->file->wants; p && *p; p++)
                        if (!manager_find_unit(m, *p) && !unit_exists(m->opts->config_dir, *p))
                                log_notice("%s: Wants=%s: no such unit in %s (no impact, as under systemd)", u->name, *p,
                                           m->opts->config_dir);
        }
}

int manager_load_units(struct manager *m) {
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
        manager_notice_missing_wants(m);
        return 0;
}

/* ---- the jobs' operations (jobs.h) ---- */

static struct jobs_unit *jobs_slot(void *userdata, const struct unit *u) {
        return &data(u)->jobs;
}

static struct unit *jobs_find(void *userdata, const char *name) {
        return manager_find_unit(userdata, name);
}

/* A template's instance another unit references (SPEC §3), from DIR. */
static int jobs_load(void *userdata, const char *name) {
        struct manager *m = userdata;
        struct unit_file *f = NULL;
        /* Missing: a Wants= of it was said once per load
         * (manager_notice_missing_wants), a Requires= fails its start. Not
         * said here: the graph is rebuilt at every change of the units. */
        if (!unit_exists(m->opts->config_dir, name))
                return -ENOENT;
        int k = unit_load(m->opts->config_dir, name, &f, NULL);
        if (k < 0)
                return k;
        k = manager_add_unit(m, f);
        if (k < 0)
                unit_file_free(f);
        return k;
}

static void jobs_start(void *userdata, struct unit *u) {
        manager_start_unit(userdata, u);
}

static void jobs_stop_now(void *userdata, struct unit *u) {
        manager_stop_unit(userdata, u);
}

static sf_resolution *jobs_join(void *userdata, struct unit *u) {
        return manager_join_own(userdata, u);
}

const struct jobs_ops manager_jobs_ops = {
        .slot = jobs_slot,
        .find = jobs_find,
        .load = jobs_load,
        .start = jobs_start,
        .stop = jobs_stop_now,
        .join = jobs_join,
};
