/* SPDX-License-Identifier: MIT */
/*
 * daemon-reload (SPEC §5): DIR read again and the difference applied;
 * removed units freed once dead (the sweep).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "jobs.h"
#include "log.h"
#include "macro.h"
#include "manager-internal.h"
#include "store.h"
#include "unit-file.h"
#include "unit.h"

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

/* The last "failed" entry is a file no unit was loaded from (QA19 L3): the
 * answer says "not loaded", not "not reloaded, left as it is". */
static void report_never_loaded(struct json_object *report) {
        struct json_object *a = NULL, *o = NULL;
        if (report && json_object_object_get_ex(report, "failed", &a) && json_object_array_length(a) > 0 &&
            (o = json_object_array_get_idx(a, json_object_array_length(a) - 1)) &&
            json_object_is_type(o, json_type_object))
                (void) json_object_object_add(o, "loaded", json_object_new_boolean(false));
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

/* Sets (message, taken: NULL clears) why u's file does not load now, and
 * writes u's record if that changed what it says. */
static void set_file_error(struct manager *m, struct unit *u, char *message) {
        if (!message && !(unit_rare_peek(u) && unit_rare_peek(u)->file_error))
                return;
        struct unit_rare *r = unit_rare(u);
        if (!r) { /* out of memory: its record cannot say why */
                free(message);
                return;
        }
        free(r->file_error);
        r->file_error = message;
        record_write(m, u);
}

/* A changed unit is never restarted (tend(8) "RELOADING DIR"): the new file
 * governs its decisions at once, its processes keep what they got, and
 * `tendctl restart` (or its next start) runs the new file. */
static void change_unit(struct manager *m, struct unit *u, struct unit_file *f) {
        bool waits = unit_set_next_file(u, f);
        if (unit_is_dead(u))
                log_info("%s: changed in %s: its next start runs the new file", u->name, m->opts->config_dir);
        else if (waits)
                log_info("%s: changed in %s: not restarted; the new file applies once its commands are done "
                         "(a changed Type= or RemainAfterExit=: at its next start; `tendctl restart %s`)",
                         u->name, m->opts->config_dir, u->name);
        else
                log_info("%s: changed in %s: not restarted; its settings apply now, what its processes get at its "
                         "next start (`tendctl restart %s`)",
                         u->name, m->opts->config_dir, u->name);
        record_write(m, u); /* file_changed */
}

static void reload_unit(struct manager *m, struct unit *u, struct unit_set *set, struct json_object *report) {
        struct unit_data *d = data(u);
        struct unit_file *f = NULL;
        _cleanup_free_ char *message = NULL;
        int k = dir_lookup(m, set, u->name, &f, &message);
        if (k < 0) {
                log_error("%s: not reloaded: its file does not load (see above); the unit is left as it is, "
                          "on the last file that loaded",
                          u->name);
                report_add(report, "failed", u->name, message ? message : strerror(-k));
                set_file_error(m, u, message ? strdup(message) : strdup(strerror(-k)));
                return;
        }
        set_file_error(m, u, NULL);
        if (k == 0) {
                if (!d->removed) {
                        log_info("%s: removed from %s: stopping it", u->name, m->opts->config_dir);
                        d->removed = true;
                        report_add(report, "removed", u->name, NULL);
                        jobs_stop(m->jobs, u, true); /* as tendctl stop: its dependents too */
                        manager_cluster_stopped(m, u); /* etcd: a singleton's key goes once it is down */
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
                if (manager_unit_starts_on_its_own(m, u)) /* pkg: tendctl disable */
                        manager_start_unit(m, u);
                return;
        }
        manager_unit_names_update(m, u, f); /* its aliases: links in DIR may have changed */
        if (unit_file_same_text(u->next_file ? u->next_file : u->file, f)) {
                unit_file_free(f); /* unchanged: not touched */
                return;
        }
        report_add(report, "changed", u->name, NULL);
        change_unit(m, u, f);
        manager_cluster_reloaded(m, u); /* etcd: Singleton=, Hosts= (docs/cluster.md §5) */
}

/* SIGHUP and tendctl daemon-reload: re-read DIR. New units start, removed ones
 * stop (and go once dead: sweep), changed ones take their new file without a
 * restart (change_unit), unchanged ones are not touched; a file that does not
 * load leaves its unit as it is, its record saying why (file_error). report (NULL for SIGHUP) receives the arrays "added", "changed",
 * "removed" (unit names) and "failed" ({"name", "message"}). 0, or the error
 * of reading DIR itself (logged). */
int manager_reload(struct manager *m, struct json_object *report) {
        _cleanup_(unit_set_freep) struct unit_set *set = NULL;
        manager_initial_starts_finish(m); /* before units[] changes */
        int k = unit_load_dir(m->opts->config_dir, &set);
        if (k < 0)
                return k;
        jobs_invalidate(m->jobs); /* files changed: their dependencies may have */
        jobs_batch(m->jobs, true);
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
                if (manager_unit_starts_on_its_own(m, m->units[i])) /* pkg: tendctl disable */
                        manager_start_unit(m, m->units[i]);
        /* Files that do not load and belong to no loaded unit (those that do
         * were reported above). */
        for (size_t j = 0; j < set->n_errors; j++) {
                const struct unit_load_error *e = &set->errors[j];
                if (e->error != -ERFKILL && !manager_find_unit(m, e->name)) {
                        report_add(report, "failed", e->name, e->message ? e->message : strerror(-e->error));
                        report_never_loaded(report);
                }
        }
        manager_notice_missing_wants(m);
        jobs_batch(m->jobs, false);
        manager_sweep_schedule(m);
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
                if (data(u)->removed && unit_is_dead(u) && (unit_get_state(u) == UNIT_INACTIVE || unit_get_state(u) == UNIT_FAILED))
                        unit_forget(m, u);
                else
                        m->units[kept++] = u;
        }
        m->n_units = kept;
        if (kept != n)
                jobs_invalidate(m->jobs);
        manager_check_shutdown_done(m);
        return 0;
}

/* Removed units are freed from a callback of their own, never from inside
 * the state machine that just reported them dead. */
void manager_sweep_schedule(struct manager *m) {
        manager_defer(m, &m->sweep, on_sweep);
}
