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
        json_object *main_pid, *since, *since_monotonic, *restarts, *waiters;
        json_object *states[_UNIT_STATE_MAX], *results[_UNIT_RESULT_MAX]; /* one value per word */
        json_object *exit_code, *code;                     /* {"code": N} */
        json_object *exit_signal, *signal, *core_dumped;   /* {"signal": N, "core_dumped": B} */
};

struct record_writer *record_writer_free(struct record_writer *w) {
        if (!w)
                return NULL;
        json_object *refs[] = { w->root, w->main_pid, w->since, w->since_monotonic, w->restarts, w->waiters,
                                w->exit_code, w->code, w->exit_signal, w->signal, w->core_dumped };
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
        w->exit_code = json_object_new_object();
        w->code = json_object_new_int(0);
        w->exit_signal = json_object_new_object();
        w->signal = json_object_new_int(0);
        w->core_dumped = json_object_new_boolean(0);
        json_object *version = json_object_new_int(1);
        if (!version || !w->root || !w->main_pid || !w->since || !w->since_monotonic || !w->restarts ||
            !w->waiters || !w->exit_code || !w->code || !w->exit_signal || !w->signal || !w->core_dumped)
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
        struct unit_shown s;
        unit_get_shown(u, &s); /* the fields at the change being reported */
        *ret = (struct record_fields) {
                .state = s.state,
                .result = s.result,
                .main_pid = s.main_pid,
                .since_realtime = s.since_realtime,
                .since_monotonic = s.since_monotonic,
                .restarts = s.restarts,
                .has_last_exit = s.has_last_exit,
                .last_exit = s.has_last_exit ? s.last_exit : (struct exit_reason) {},
                .waiters = waiters > 0 ? waiters : 0,
                .has_status = u->status_text != NULL,
        };
        if (ret->last_exit.kind != EXIT_REASON_KILLED) /* shown only with a signal */
                ret->last_exit.core_dumped = 0;
        ret->last_exit.reserved = 0;
}

bool record_fields_equal(const struct record_fields *a, const struct record_fields *b) {
        return !a->has_status && !b->has_status && a->state == b->state && a->result == b->result &&
               a->main_pid == b->main_pid && a->since_realtime == b->since_realtime &&
               a->since_monotonic == b->since_monotonic && a->restarts == b->restarts &&
               a->has_last_exit == b->has_last_exit && a->last_exit.kind == b->last_exit.kind &&
               a->last_exit.status == b->last_exit.status && a->last_exit.core_dumped == b->last_exit.core_dumped &&
               a->waiters == b->waiters;
}

const char *record_writer_format_fields(struct record_writer *w, const char *name_text, const char *status_text,
                                       const struct record_fields *f, size_t *ret_len) {
        if (f->state >= _UNIT_STATE_MAX || f->result >= _UNIT_RESULT_MAX)
                return NULL;
        /* Strings are new values: json-c 0.16 (Debian 12) mishandles a
         * json_object_set_string() that shrinks a string it had grown. */
        json_object *name = json_object_new_string(name_text);
        json_object *status = status_text ? json_object_new_string(status_text) : NULL;
        if (!name || (status_text && !status)) {
                json_object_put(name);
                json_object_put(status);
                return NULL;
        }
        (void) json_object_object_add(w->root, "name", name);
        (void) json_object_object_add(w->root, "status", status);
        set_or_null(w->root, "state", w->states[f->state], true);
        set_or_null(w->root, "result", w->results[f->result], true);
        json_object_set_int(w->main_pid, f->main_pid);
        set_or_null(w->root, "main_pid", w->main_pid, f->main_pid > 0);
        json_object_set_int64(w->since, (int64_t) f->since_realtime);
        json_object_set_int64(w->since_monotonic, (int64_t) f->since_monotonic);
        json_object_set_int64(w->restarts, (int64_t) f->restarts);
        bool exited = f->has_last_exit && f->last_exit.kind == EXIT_REASON_EXITED;
        json_object_set_int(w->code, f->last_exit.status);
        json_object_set_int(w->signal, f->last_exit.status);
        json_object_set_boolean(w->core_dumped, f->last_exit.core_dumped);
        set_or_null(w->root, "last_exit", exited ? w->exit_code : w->exit_signal, f->has_last_exit);
        json_object_set_int(w->waiters, f->waiters);
        /* The canonical form control-watch.h splices into watch messages unparsed. */
        return json_object_to_json_string_length(w->root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
                                                 ret_len);
}

const char *record_writer_format(struct record_writer *w, const struct unit *u, int waiters, size_t *ret_len) {
        struct record_fields f;
        record_fields_of(u, waiters, &f);
        return record_writer_format_fields(w, u->name, u->status_text, &f, ret_len);
}
