/* SPDX-License-Identifier: MIT */
/*
 * The state record's JSON (record.h): one json-c tree, its values updated in
 * place. A field that is sometimes null (main_pid, last_exit) keeps
 * its non-null value object alive through a reference of the writer's own,
 * and state and result have one value object per word, so switching values
 * allocates nothing; only the name and the STATUS= text are new string
 * values each time.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <json-c/json.h>

#include "macro.h"
#include "record.h"

struct record_writer {
        json_object *root;
        /* the writer's references to the values it updates */
        json_object *main_pid, *since, *since_monotonic, *restarts, *waiters, *file_changed;
        json_object *states[_UNIT_STATE_MAX], *results[_UNIT_RESULT_MAX]; /* one value per word */
        json_object *exit_code, *code;                     /* {"code": N} */
        json_object *exit_signal, *signal, *core_dumped;   /* {"signal": N, "core_dumped": B} */
        const char *condition_text;                         /* cond: the next record's, borrowed */
};

struct record_writer *record_writer_free(struct record_writer *w) {
        if (!w)
                return NULL;
        json_object *refs[] = { w->root, w->main_pid, w->since, w->since_monotonic, w->restarts, w->waiters,
                                w->file_changed, w->exit_code, w->code, w->exit_signal, w->signal, w->core_dumped };
        for (size_t i = 0; i < ELEMENTSOF(refs); i++)
                json_object_put(refs[i]);
        for (size_t i = 0; i < _UNIT_STATE_MAX; i++)
                json_object_put(w->states[i]);
        for (size_t i = 0; i < _UNIT_RESULT_MAX; i++)
                json_object_put(w->results[i]);
        free(w);
        return NULL;
}

int record_writer_new(struct record_writer **ret) {
        struct record_writer *w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->root = json_object_new_object();
        int k = 0;
        for (size_t i = 0; i < _UNIT_STATE_MAX; i++)
                if (!(w->states[i] = json_object_new_string(unit_state_to_string((enum unit_state) i))))
                        k = -ENOMEM;
        for (size_t i = 0; i < _UNIT_RESULT_MAX; i++)
                if (!(w->results[i] = json_object_new_string(unit_result_to_string((enum unit_result) i))))
                        k = -ENOMEM;
        w->main_pid = json_object_new_int(0);
        w->since = json_object_new_int64(0);
        w->since_monotonic = json_object_new_int64(0);
        w->restarts = json_object_new_int64(0);
        w->waiters = json_object_new_int(0);
        w->file_changed = json_object_new_boolean(0);
        w->exit_code = json_object_new_object();
        w->code = json_object_new_int(0);
        w->exit_signal = json_object_new_object();
        w->signal = json_object_new_int(0);
        w->core_dumped = json_object_new_boolean(0);
        json_object *version = json_object_new_int(1);
        if (!version || !w->root || !w->main_pid || !w->since || !w->since_monotonic || !w->restarts ||
            !w->waiters || !w->file_changed || !w->exit_code || !w->code || !w->exit_signal || !w->signal || !w->core_dumped)
                k = -ENOMEM;
        /* SPEC §5's order, which json-c keeps: a value replaced keeps its
         * place. A NULL value is the field's null until the first record. */
        const struct {
                json_object *o;
                const char *key;
                json_object *v;
        } layout[] = {
                { w->root, "version", version },
                { w->root, "name", NULL },
                { w->root, "state", w->states[0] },
                { w->root, "main_pid", NULL },
                { w->root, "since", w->since },
                { w->root, "since_monotonic", w->since_monotonic },
                { w->root, "restarts", w->restarts },
                { w->root, "last_exit", NULL },
                { w->root, "status", NULL },
                { w->root, "result", w->results[0] },
                { w->root, "waiters", w->waiters },
                { w->root, "file_changed", w->file_changed },
                { w->root, "file_error", NULL },
                { w->exit_code, "code", w->code },
                { w->exit_signal, "signal", w->signal },
                { w->exit_signal, "core_dumped", w->core_dumped },
        };
        for (size_t i = 0; k >= 0 && i < ELEMENTSOF(layout); i++)
                if (json_object_object_add(layout[i].o, layout[i].key, json_object_get(layout[i].v)) < 0)
                        k = -ENOMEM;
        json_object_put(version);
        if (k < 0) {
                record_writer_free(w);
                return k;
        }
        *ret = w;
        return 0;
}

/* Sets key of o to v (a value the writer holds) or to null. */
static void set_or_null(json_object *o, const char *key, json_object *v, bool set) {
        json_object *cur = NULL;
        (void) json_object_object_get_ex(o, key, &cur);
        if (set && cur != v)
                (void) json_object_object_add(o, key, json_object_get(v));
        else if (!set && cur)
                (void) json_object_object_add(o, key, NULL);
}

void record_fields_of(const struct unit *u, int waiters, struct record_fields *ret) {
        *ret = (struct record_fields) { .waiters = waiters > 0 ? waiters : 0, .has_status = u->status_text != NULL,
                                        .has_condition = u->condition_text != NULL };
        unit_get_shown(u, &ret->shown); /* the fields at the change being reported */
        struct exit_reason *e = &ret->shown.last_exit;
        if (!ret->shown.has_last_exit)
                *e = (struct exit_reason) {};
        if (e->kind != EXIT_REASON_KILLED) /* shown only with a signal */
                e->core_dumped = 0;
        e->reserved = 0;
}

bool record_fields_equal(const struct record_fields *a, const struct record_fields *b) {
        const struct unit_shown *x = &a->shown, *y = &b->shown;
        return !a->has_status && !b->has_status && !a->has_condition && !b->has_condition &&
               !a->has_file_error && !b->has_file_error &&
               a->file_changed == b->file_changed && x->state == y->state && x->result == y->result &&
               x->main_pid == y->main_pid && x->since_realtime == y->since_realtime &&
               x->since_monotonic == y->since_monotonic && x->restarts == y->restarts &&
               x->has_last_exit == y->has_last_exit && x->last_exit.kind == y->last_exit.kind &&
               x->last_exit.status == y->last_exit.status && x->last_exit.core_dumped == y->last_exit.core_dumped &&
               a->waiters == b->waiters;
}

const char *record_writer_format_fields(struct record_writer *w, const char *name_text, const char *status_text,
                                       const char *file_error_text, const struct record_fields *f, size_t *ret_len) {
        if (f->shown.state >= _UNIT_STATE_MAX || f->shown.result >= _UNIT_RESULT_MAX)
                return NULL;
        /* Strings are new values: json-c 0.16 (Debian 12) mishandles a
         * json_object_set_string() that shrinks a string it had grown. */
        json_object *name = json_object_new_string(name_text);
        json_object *status = status_text ? json_object_new_string(status_text) : NULL;
        json_object *file_error = file_error_text ? json_object_new_string(file_error_text) : NULL;
        if (!name || (status_text && !status) || (file_error_text && !file_error)) {
                json_object_put(name);
                json_object_put(status);
                json_object_put(file_error);
                return NULL;
        }
        (void) json_object_object_add(w->root, "name", name);
        (void) json_object_object_add(w->root, "status", status);
        (void) json_object_object_add(w->root, "file_error", file_error);
        json_object_set_boolean(w->file_changed, f->file_changed);
        set_or_null(w->root, "state", w->states[f->shown.state], true);
        set_or_null(w->root, "result", w->results[f->shown.result], true);
        json_object_set_int(w->main_pid, f->shown.main_pid);
        set_or_null(w->root, "main_pid", w->main_pid, f->shown.main_pid > 0);
        json_object_set_int64(w->since, (int64_t) f->shown.since_realtime);
        json_object_set_int64(w->since_monotonic, (int64_t) f->shown.since_monotonic);
        json_object_set_int64(w->restarts, (int64_t) f->shown.restarts);
        bool exited = f->shown.has_last_exit && f->shown.last_exit.kind == EXIT_REASON_EXITED;
        json_object_set_int(w->code, f->shown.last_exit.status);
        json_object_set_int(w->signal, f->shown.last_exit.status);
        json_object_set_boolean(w->core_dumped, f->shown.last_exit.core_dumped);
        set_or_null(w->root, "last_exit", exited ? w->exit_code : w->exit_signal, f->shown.has_last_exit);
        json_object_set_int(w->waiters, f->waiters);
        /* cond: present only when set, so every other record keeps SPEC §5's fields. */
        json_object *condition = w->condition_text ? json_object_new_string(w->condition_text) : NULL;
        if (condition)
                (void) json_object_object_add(w->root, "condition", condition);
        else
                json_object_object_del(w->root, "condition");
        w->condition_text = NULL;
        /* The canonical form control-watch.h splices into watch messages unparsed. */
        return json_object_to_json_string_length(w->root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
                                                 ret_len);
}

const char *record_writer_format(struct record_writer *w, const struct unit *u, int waiters, size_t *ret_len) {
        struct record_fields f;
        record_fields_of(u, waiters, &f);
        record_writer_set_condition(w, u->condition_text);
        return record_writer_format_fields(w, u->name, u->status_text, NULL, &f, ret_len);
}

void record_writer_set_condition(struct record_writer *w, const char *text) {
        w->condition_text = text;
}
