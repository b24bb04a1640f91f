/* SPDX-License-Identifier: MIT */
/*
 * ctl: the control socket's `show` (docs/control-protocol.md "show"): a
 * unit's properties under systemd's names where systemd has the property,
 * so `tendctl show -p ActiveState --value` answers what `systemctl show`
 * does. Read by tendctl's show, is-active, is-failed, cat, status and
 * list-dependencies.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cgroup.h"
#include "control-describe.h"
#include "control-proto.h"
#include "libexit.h"
#include "macro.h"
#include "manager-internal.h"
#include "unit.h"

/* systemd's ActiveState and SubState of a service in u's position. */
static void active_words(const struct unit *u, const struct unit_shown *sh, const char **ret_active,
                         const char **ret_sub) {
        static const struct {
                const char *active, *sub;
        } pos_words[_UNIT_POS_MAX] = {
                [UNIT_POS_INACTIVE] = { "inactive", "dead" },
                [UNIT_POS_FAILED] = { "failed", "failed" },
                [UNIT_POS_WAIT_INACTIVE] = { "activating", "start-pre" },
                [UNIT_POS_WAIT_FAILED] = { "activating", "start-pre" },
                [UNIT_POS_WAIT_BACKOFF] = { "activating", "auto-restart" },
                [UNIT_POS_WAIT_RESTART] = { "activating", "start-pre" },
                [UNIT_POS_START_PRE] = { "activating", "start-pre" },
                [UNIT_POS_START] = { "activating", "start" },
                [UNIT_POS_START_POST] = { "activating", "start-post" },
                [UNIT_POS_RUNNING] = { "active", "running" },
                [UNIT_POS_RELOAD] = { "reloading", "reload" },
                [UNIT_POS_STOP_NOTIFY] = { "deactivating", "stop" },
                [UNIT_POS_STOP_CMD] = { "deactivating", "stop" },
                [UNIT_POS_STOP_SIGTERM] = { "deactivating", "stop-sigterm" },
                [UNIT_POS_STOP_SIGKILL] = { "deactivating", "stop-sigkill" },
                [UNIT_POS_BACKOFF] = { "activating", "auto-restart" },
        };
        *ret_active = "inactive";
        *ret_sub = "dead";
        if ((unsigned) u->pos < _UNIT_POS_MAX && pos_words[u->pos].active) {
                *ret_active = pos_words[u->pos].active;
                *ret_sub = pos_words[u->pos].sub;
        }
        /* RemainAfterExit=, a oneshot done: systemd's "active (exited)" */
        if (u->pos == UNIT_POS_RUNNING && sh->main_pid <= 0)
                *ret_sub = "exited";
}

/* systemd's Result= words: tend's, but start-limit is start-limit-hit. */
static const char *result_word(enum unit_result r) {
        return r == UNIT_RESULT_START_LIMIT ? "start-limit-hit" : unit_result_to_string(r);
}

static int add_strv(struct json_object *props, const char *key, char *const *v) {
        struct json_object *a = json_object_new_array();
        if (!a || json_object_object_add(props, key, a) < 0) {
                json_object_put(a);
                return -ENOMEM;
        }
        for (size_t i = 0; v && v[i]; i++)
                if (json_object_array_add(a, json_object_new_string(v[i])) < 0)
                        return -ENOMEM;
        return 0;
}

/* Names: the unit's own name, then its aliases. */
static int add_names(struct json_object *props, const struct unit *u, char *const *aliases) {
        size_t n = 0;
        while (aliases && aliases[n])
                n++;
        _cleanup_free_ const char **v = calloc(n + 2, sizeof *v);
        if (!v)
                return -ENOMEM;
        v[0] = u->name;
        for (size_t i = 0; i < n; i++)
                v[i + 1] = aliases[i];
        return add_strv(props, "Names", (char *const *) v);
}

static int add_state(struct json_object *props, const struct unit *u) {
        struct unit_shown sh;
        const char *active, *sub;
        unit_get_shown(u, &sh);
        active_words(u, &sh, &active, &sub);
        bool is_active = streq(active, "active") || streq(active, "reloading");
        int code = !sh.has_last_exit ? 0
                   : sh.last_exit.kind == EXIT_REASON_EXITED ? 1 /* CLD_EXITED */
                   : sh.last_exit.core_dumped ? 3 /* CLD_DUMPED */ : 2 /* CLD_KILLED */;
        if (control_add_string(props, "ActiveState", active) < 0 || control_add_string(props, "SubState", sub) < 0 ||
            control_add_string(props, "TendState", unit_state_to_string(sh.state)) < 0 ||
            control_add_int64(props, "MainPID", sh.main_pid > 0 ? sh.main_pid : 0) < 0 ||
            control_add_int64(props, "ControlPID", u->control ? exit_process_pid(u->control) : 0) < 0 ||
            control_add_int64(props, "NRestarts", (int64_t) sh.restarts) < 0 ||
            control_add_string(props, "Result", result_word(sh.result)) < 0 ||
            control_add_int64(props, "ExecMainCode", code) < 0 ||
            control_add_int64(props, "ExecMainStatus", sh.has_last_exit ? sh.last_exit.status : 0) < 0 ||
            control_add_int64(props, "StateChangeTimestamp", (int64_t) sh.since_realtime) < 0 ||
            control_add_int64(props, "ActiveEnterTimestamp", is_active ? (int64_t) sh.since_realtime : 0) < 0 ||
            control_add_string(props, "StatusText", u->status_text) < 0 ||
            control_add_string(props, "ConditionText", u->condition_text) < 0)
                return -ENOMEM;
        return 0;
}

/* pkg: the last failed command (unit.h struct unit_failure), tend's own
 * properties: FailedCommand ("ExecStartPre", …), its index (from 0) and the
 * list's length, path, pid, code (1 exited, 2 killed, 3 dumped, 0 its exec
 * failed: FailedCommandErrno), status (exit code or signal), timestamp. */
void manager_command_failed(void *userdata, struct unit *u, const struct unit_failure *f) {
        if (data(u)->reload_waited && streq(f->key, "ExecReload"))
                data(u)->reload_failed = true; /* QA L5: the reload's answer */
        struct unit_rare *rare = unit_rare(u);
        if (!rare)
                return; /* out of memory: the status shows no failed command */
        size_t len = strlen(f->path);
        free(rare->failure);
        rare->failure = malloc(sizeof *rare->failure + len + 1);
        if (!rare->failure)
                return;
        char *path = (char *) (rare->failure + 1);
        memcpy(path, f->path, len + 1);
        *rare->failure = *f;
        rare->failure->path = path;
}

static int add_failure(struct json_object *props, const struct unit *u) {
        const struct unit_rare *rare = unit_rare_peek(u);
        const struct unit_failure *f = rare ? rare->failure : NULL;
        if (!f)
                return 0;
        const struct exit_reason *r = &f->reason;
        int code = f->exec_errno > 0 ? 0 : r->kind == EXIT_REASON_EXITED ? 1 : r->core_dumped ? 3 : 2;
        if (control_add_string(props, "FailedCommand", f->key) < 0 ||
            control_add_int64(props, "FailedCommandIndex", f->index) < 0 ||
            control_add_int64(props, "FailedCommandCount", f->n) < 0 ||
            control_add_string(props, "FailedCommandPath", f->path) < 0 ||
            control_add_int64(props, "FailedCommandPID", f->pid) < 0 ||
            control_add_int64(props, "FailedCommandCode", code) < 0 ||
            control_add_int64(props, "FailedCommandStatus", code ? r->status : 0) < 0 ||
            control_add_int64(props, "FailedCommandErrno", f->exec_errno) < 0 ||
            control_add_int64(props, "FailedCommandTimestamp", (int64_t) f->realtime) < 0)
                return -ENOMEM;
        return 0;
}

static int add_file(struct json_object *props, const struct unit *u, const struct unit_data *d) {
        const struct unit_file *f = u->file;
        const struct unit_rare *r = unit_rare_peek(u); /* NULL: no alias, no file error */
        if (control_add_string(props, "Id", u->name) < 0 || add_names(props, u, r ? r->aliases : NULL) < 0 ||
            control_add_string(props, "Description", f->description ? f->description : u->name) < 0 ||
            control_add_string(props, "LoadState", "loaded") < 0 ||
            control_add_string(props, "UnitFileState", unit_enablement_to_string(manager_unit_enablement(d->m, u))) < 0 ||
            control_add_string(props, "FragmentPath", f->path) < 0 || add_strv(props, "DropInPaths", f->dropins) < 0 ||
            control_add_bool(props, "CanReload", f->exec_reload.n > 0) < 0 ||
            control_add_bool(props, "RemainAfterExit", f->remain_after_exit) < 0 ||
            add_strv(props, "Requires", f->requires) < 0 || add_strv(props, "Wants", f->wants) < 0 ||
            add_strv(props, "BindsTo", f->binds_to) < 0 || add_strv(props, "After", f->after) < 0 ||
            add_strv(props, "Before", f->before) < 0 ||
            control_add_string(props, "FileError", r ? r->file_error : NULL) < 0 ||
            control_add_bool(props, "FileChanged", d->record_written && d->record.file_changed) < 0)
                return -ENOMEM;
        return 0;
}

int manager_describe_unit(struct manager *m, const char *name, struct json_object *props) {
        struct unit *u = manager_find_unit(m, name);
        if (!u)
                return -ENOENT;
        struct unit_data *d = data(u);
        _cleanup_free_ char *dir = unit_group_dir(d->group);
        if (add_file(props, u, d) < 0 || add_state(props, u) < 0 || add_failure(props, u) < 0 ||
            control_add_string(props, "CGroupDirectory", dir) < 0)
                return -ENOMEM;
        /* etcd: a singleton's holder as this host last saw it ("": nobody; docs/cluster.md) */
        if (u->file->singleton && m->cluster) {
                const char *holder = cluster_singleton_holder(m->cluster, u->name);
                uint64_t token = 0;
                bool mine = cluster_singleton_may_run(m->cluster, u->name, &token);
                if (control_add_string(props, "TendSingletonHolder", holder ? holder : "") < 0 ||
                    control_add_int64(props, "TendFencingToken", mine ? (int64_t) token : 0) < 0 ||
                    control_add_bool(props, "TendSingletonWaiting",
                                     cluster_singleton_waiting(m->cluster, u->name)) < 0)
                        return -ENOMEM;
        }
        return 0;
}
