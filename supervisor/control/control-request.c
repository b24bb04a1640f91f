/* SPDX-License-Identifier: MIT */
/*
 * The control server's requests (control-internal.h): dispatch, status and
 * list from the store's records, start and restart through the manager's
 * flights (SPEC §2.3), stop until the manager reports the unit down, the
 * per-unit and global commands.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "control-internal.h"
#include "unit-name-char.h"
#include "log.h"
#include "unit-exec.h"
#include "unit-file.h"

/* The request's result from its per-unit answers: ok when all are; the first
 * failure's error and message are copied to the top (tendctl's exit status). */
static json *result_from_units(struct pending *p, size_t n) {
        _cleanup_json_ json *o = answer_result(true);
        json *units = json_object_new_array_ext((int) n);
        if (!o || !units || json_object_object_add(o, "units", units) < 0) {
                json_object_put(units);
                return NULL;
        }
        json *first_failure = NULL;
        for (size_t i = 0; i < n; i++) {
                json *ok;
                if (json_object_array_add(units, json_object_get(p[i].result)) < 0)
                        return NULL;
                if (!first_failure && json_object_object_get_ex(p[i].result, "ok", &ok) && !json_object_get_boolean(ok))
                        first_failure = p[i].result;
        }
        if (first_failure) {
                json *e, *m;
                json_object_object_get_ex(first_failure, "error", &e);
                json_object_object_get_ex(first_failure, "message", &m);
                if (control_add_bool(o, "ok", false) < 0 ||
                    json_object_object_add(o, "error", json_object_get(e)) < 0 ||
                    json_object_object_add(o, "message", json_object_get(m)) < 0)
                        return NULL;
        }
        return TAKE_PTR(o);
}

static void stop_unlink(struct pending *p) {
        if (!p->stop_list)
                return;
        if (p->stop_prev)
                p->stop_prev->stop_next = p->stop_next;
        else
                *p->stop_list = p->stop_next;
        if (p->stop_next)
                p->stop_next->stop_prev = p->stop_prev;
        p->stop_list = NULL;
        p->stop_prev = p->stop_next = NULL;
}

static void stop_link(struct pending *p, struct pending **list) {
        stop_unlink(p);
        p->stop_list = list;
        p->stop_next = *list;
        if (*list)
                (*list)->stop_prev = p;
        *list = p;
}

void pending_release(struct pending *p) {
        p->source = sd_event_source_disable_unref(p->source);
        p->waiter = sf_waiter_free(p->waiter); /* SPEC §2.3: leaving releases the share */
        stop_unlink(p);
}

static json *record_parse(struct control_server *s, const struct store_event *ev) {
        json *o = NULL;
        int64_t version;
        if (control_message_parse(ev->value, ev->value_size, &o) < 0 || control_get_int64(o, "version", &version) < 0 ||
            version != 1) {
                log_warning("control: record %s is not a version 1 unit record: not shown", ev->key);
                json_object_put(o);
                return NULL;
        }
        if (s->ops.waiters) {
                int n = s->ops.waiters(s->userdata, ev->key + strlen(CONTROL_RECORD_PREFIX));
                if (n >= 0)
                        (void) control_add_int64(o, "waiters", n);
        }
        return o;
}

/* status/list: one batch of about CONTROL_BATCH_BYTES of records, or the
 * final result once they are all sent. */
int produce_units(struct conn *c) {
        if (c->next_record >= c->n_records) {
                conn_queue(c, TAKE_PTR(c->final));
                conn_end_request(c);
                return 1;
        }
        json *msg = control_message_new("units"), *units = json_object_new_array();
        if (!msg || !units || json_object_object_add(msg, "units", units) < 0) {
                json_object_put(units);
                json_object_put(msg);
                conn_queue(c, NULL);
                return -ENOMEM;
        }
        for (size_t bytes = 0; c->next_record < c->n_records && bytes < CONTROL_BATCH_BYTES; c->next_record++) {
                const struct store_event *ev = c->records[c->next_record];
                json *rec = record_parse(c->s, ev);
                if (rec && json_object_array_add(units, rec) < 0)
                        json_object_put(rec);
                bytes += ev->value_size;
        }
        conn_queue(c, msg);
        return 1;
}

/* ------------------------------------------------------------------------ */
/* Requests                                                               */
/* ------------------------------------------------------------------------ */

static const char *unit_arg(const struct control_request *q, size_t i) {
        return control_request_unit(q, i);
}

/* "NAME" or "NAME.service" → the manager's name. 0, -ENOENT. */
int request_resolve(struct control_server *s, const char *given, char ret[static 256]) {
        if (!given || !*given || strlen(given) >= 256)
                return -ENOENT;
        return s->ops.resolve(s->userdata, given, ret);
}

static int pending_new(struct conn *c, size_t n) {
        c->pending = calloc(n ? n : 1, sizeof *c->pending);
        if (!c->pending)
                return -ENOMEM;
        c->n_pending = n;
        for (size_t i = 0; i < n; i++)
                c->pending[i].c = c;
        return 0;
}

/* The request is answered once every unit is; until then the connection waits. */
static void pending_check_done(struct conn *c) {
        if (c->n_open > 0) {
                c->phase = CONN_PENDING;
                return;
        }
        conn_queue(c, result_from_units(c->pending, c->n_pending));
        conn_end_request(c);
}

/* --- status, list --- */

static int records_add(struct conn *c, struct store_event *ev) {
        struct store_event **a = reallocarray(c->records, c->n_records + 1, sizeof *a);
        if (!a) {
                store_event_unref(ev);
                return -ENOMEM;
        }
        c->records = a;
        c->records[c->n_records++] = ev;
        return 0;
}

/* status NAME…: each unit's record; unknown units are listed in the result. */
static int status_named(struct conn *c, const struct control_request *q) {
        json *missing = json_object_new_array();
        if (!missing || json_object_object_add(c->final, "units", missing) < 0) {
                json_object_put(missing);
                return -ENOMEM;
        }
        for (size_t i = 0; i < q->n_units; i++) {
                char name[256], key[STORE_KEY_MAX + 1];
                struct store_event *ev = NULL;
                int r = request_resolve(c->s, unit_arg(q, i), name);
                if (r >= 0) {
                        snprintf(key, sizeof key, CONTROL_RECORD_PREFIX "%s", name);
                        r = store_get(c->s->store, STORE_DURABLE, key, &ev);
                }
                if (r >= 0 && (r = records_add(c, ev)) >= 0)
                        continue;
                if (r == -ENOMEM)
                        return r;
                json *e = answer_unit_error(unit_arg(q, i), "status", -ENOENT);
                if (!e || json_object_array_add(missing, e) < 0)
                        return -ENOMEM;
                if (json_object_array_length(missing) == 1 &&
                    answer_set_error(c->final, CONTROL_ERROR_NOT_FOUND, "unit \"%s\" not found", unit_arg(q, i)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void handle_status(struct conn *c, const struct control_request *q) {
        int r;
        c->final = answer_result(true);
        if (!c->final) {
                conn_queue(c, NULL);
                return;
        }
        if (q->cmd == CONTROL_CMD_STATUS && q->n_units > 0)
                r = status_named(c, q);
        else {
                size_t n = 0;
                r = store_list(c->s->store, STORE_DURABLE, CONTROL_RECORD_PREFIX, &c->records, &n);
                c->n_records = n;
        }
        if (r < 0) {
                conn_end_request(c);
                answer_error(c, CONTROL_ERROR_FAILED, "reading unit records: %s", strerror(-r));
                return;
        }
        c->phase = CONN_UNITS;
}

/* --- start, restart --- */

/* The fields of a flight's outcome, as the manager described them. */
static int outcome_fields(json *o, const char *unit, const struct control_outcome *out) {
        const char *result = out->result ? out->result : "unknown";
        int r = out->main_pid > 0 ? control_add_int64(o, "main_pid", out->main_pid)
                                  : control_add_string(o, "main_pid", NULL);
        if (r >= 0)
                r = control_add_string(o, "result", out->result);
        if (r < 0 || out->ok)
                return r;
        if (out->reason[0] && !out->result_failed)
                return answer_set_error(o, CONTROL_ERROR_FAILED, "%s did not start: %s", unit, out->reason);
        if (out->reason[0])
                return answer_set_error(o, CONTROL_ERROR_FAILED, "%s failed to start (result %s): %s", unit, result,
                                 out->reason);
        return answer_set_error(o, CONTROL_ERROR_FAILED, "%s failed to start (result %s)", unit, result);
}

/* The answer of a start/restart; a->outcome is taken (the manager
 * describes and frees it). */
static json *start_result(struct control_server *s, const char *unit, sf_answer *a) {
        struct control_outcome out = { .ok = false };
        bool described = a->outcome != NULL;
        if (described)
                s->ops.describe_outcome(s->userdata, TAKE_PTR(a->outcome), &out);

        _cleanup_json_ json *o = answer_unit(unit);
        int r;
        if (!o || control_add_string(o, "answer", sf_status_to_string(a->status)) < 0)
                return NULL;
        if (a->status == SF_ANSWER_CANCELLED)
                r = answer_set_error(o, CONTROL_ERROR_CANCELLED, "start of %s was cancelled (a stop)", unit);
        else if (a->status != SF_ANSWER_OK || !described)
                r = answer_set_error(o, CONTROL_ERROR_ABANDONED, "start of %s was abandoned (see tend's log)", unit);
        else
                r = outcome_fields(o, unit, &out);
        return r < 0 ? NULL : TAKE_PTR(o);
}

/* Takes the answer of a waiter whose fd is readable; NULL if not final yet. */
static json *waiter_answer(struct control_server *s, sf_waiter *w, const char *unit) {
        sf_answer a;
        int r = sf_waiter_peek(w, &a);
        if (r == -EAGAIN)
                return NULL;
        if (r < 0)
                return answer_unit_error(unit, "start", r);
        return start_result(s, unit, &a);
}

static int pending_waiter_cb(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct pending *p = userdata;
        struct conn *c = p->c;
        p->result = waiter_answer(c->s, p->waiter, p->unit);
        if (!p->result)
                return 0;
        pending_release(p); /* the answer is ours: the share is no longer needed */
        c->n_open--;
        pending_check_done(c);
        conn_done(c);
        return 0;
}

void detached_free(struct detached *d) {
        struct control_server *s = d->s;
        d->source = sd_event_source_disable_unref(d->source);
        d->waiter = sf_waiter_free(d->waiter);
        if (d->prev)
                d->prev->next = d->next;
        else
                s->detached = d->next;
        if (d->next)
                d->next->prev = d->prev;
        free(d);
}

static int detached_cb(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct detached *d = userdata;
        _cleanup_json_ json *o = waiter_answer(d->s, d->waiter, d->unit);
        if (!o)
                return 0;
        log_debug("control: --no-block start of %s: %s", d->unit, json_object_to_json_string(o));
        detached_free(d);
        return 0;
}

/* --no-block: the server keeps the client's share until the flight answers
 * (w is taken). One share per flight is enough to keep it going, so a
 * script repeating `start --no-block` while a start hangs costs nothing more. */
static int detach(struct control_server *s, sf_waiter *w, const char *unit) {
        for (struct detached *d = s->detached; d; d = d->next)
                if (sf_waiter_get_flight(d->waiter) == sf_waiter_get_flight(w)) {
                        sf_waiter_free(w);
                        return 0;
                }
        struct detached *d = calloc(1, sizeof *d);
        if (!d) {
                sf_waiter_free(w);
                return -ENOMEM;
        }
        d->s = s;
        d->waiter = w;
        snprintf(d->unit, sizeof d->unit, "%s", unit);
        int fd = sf_waiter_get_fd(w);
        int r = fd < 0 ? fd : sd_event_add_io(s->event, &d->source, fd, EPOLLIN, detached_cb, d);
        d->next = s->detached;
        if (s->detached)
                s->detached->prev = d;
        s->detached = d;
        if (r < 0)
                detached_free(d);
        return r;
}

static void start_one(struct conn *c, struct pending *p, bool restart, bool no_block) {
        struct control_server *s = c->s;
        const char *verb = restart ? "restart" : "start";
        sf_waiter *w = NULL;

        int r = s->ops.start(s->userdata, p->unit, restart, &w);
        if (r >= 0 && no_block) {
                r = detach(s, w, p->unit);
                p->result = r < 0 ? answer_unit_error(p->unit, verb, r) : answer_unit(p->unit);
                if (p->result && r >= 0 && control_add_string(p->result, "answer", "queued") < 0) {
                        json_object_put(p->result);
                        p->result = NULL;
                }
                return;
        }
        if (r >= 0) {
                p->waiter = w;
                int fd = sf_waiter_get_fd(w);
                r = fd < 0 ? fd : sd_event_add_io(s->event, &p->source, fd, EPOLLIN, pending_waiter_cb, p);
                if (r >= 0) {
                        c->n_open++;
                        return;
                }
                pending_release(p);
        }
        p->result = answer_unit_error(p->unit, verb, r);
}

/* --- stop: wait for the manager to report the unit down --- */

/* Answers the stops the manager reported (control_server_unit_stopped()).
 * A conn may be freed by conn_done(), and its pendings with it (unlinked
 * from stops_done by pending_release()), so the list is read from its head
 * each time. */
int stops_done_cb(sd_event_source *src, void *userdata) {
        struct control_server *s = userdata;
        while (s->stops_done) {
                struct pending *p = s->stops_done;
                struct conn *c = p->c;
                pending_release(p);
                if (!p->result) /* a reload's is set when it is reported */
                        p->result = answer_unit(p->unit);
                c->n_open--;
                pending_check_done(c);
                conn_done(c);
        }
        return 0;
}

void control_server_unit_stopped(struct control_server *s, const char *unit) {
        if (!s || !unit)
                return;
        struct pending *next;
        for (struct pending *p = s->stops; p; p = next) {
                next = p->stop_next;
                if (streq(p->unit, unit))
                        stop_link(p, &s->stops_done);
        }
        if (s->stops_done)
                (void) sd_event_source_set_enabled(s->stops_source, SD_EVENT_ONESHOT);
}

void control_server_unit_reloaded(struct control_server *s, const char *unit, const char *why) {
        if (!s || !unit)
                return;
        struct pending *next;
        for (struct pending *p = s->reloads; p; p = next) {
                next = p->stop_next;
                if (!streq(p->unit, unit))
                        continue;
                p->result = answer_unit(p->unit);
                if (p->result && why && answer_set_error(p->result, CONTROL_ERROR_FAILED, "%s", why) < 0) {
                        json_object_put(p->result);
                        p->result = NULL;
                }
                if (!p->result) /* out of memory: the connection ends (stops_done_cb) rather than answer wrong */
                        p->c->dead = true;
                stop_link(p, &s->stops_done);
        }
        if (s->stops_done)
                (void) sd_event_source_set_enabled(s->stops_source, SD_EVENT_ONESHOT);
}

/* reload: waits for ExecReload= to end (QA L5, as `systemctl reload`); on the
 * list before the manager is asked, which may report the end at once. */
static void reload_one(struct conn *c, struct pending *p, bool no_block) {
        struct control_server *s = c->s;
        stop_link(p, &s->reloads);
        int r = s->ops.reload(s->userdata, p->unit);
        if (r >= 0 && !no_block) {
                c->n_open++;
                return;
        }
        stop_unlink(p);
        if (r < 0 || !p->result)
                p->result = r < 0 ? answer_unit_error(p->unit, "reload", r) : answer_unit(p->unit);
}

static void stop_one(struct conn *c, struct pending *p, bool no_block) {
        struct control_server *s = c->s;
        int r = s->ops.stop(s->userdata, p->unit);
        if (r == 0 && !no_block) { /* not down yet: the manager reports when it is */
                stop_link(p, &s->stops);
                c->n_open++;
                return;
        }
        p->result = r < 0 ? answer_unit_error(p->unit, "stop", r) : answer_unit(p->unit);
}

/* --- the per-unit commands --- */

static int simple_op(struct conn *c, const struct control_request *q, const char *unit) {
        struct control_server *s = c->s;
        switch (q->cmd) {
        case CONTROL_CMD_RESET_FAILED:
                return s->ops.reset_failed(s->userdata, unit);
        case CONTROL_CMD_KILL:
                return s->ops.kill(s->userdata, unit, q->signal, q->main_only);
        case CONTROL_CMD_ENABLE:
        case CONTROL_CMD_DISABLE:
                return s->ops.set_enabled ? s->ops.set_enabled(s->userdata, unit, q->cmd == CONTROL_CMD_ENABLE)
                                          : -EOPNOTSUPP;
        default:
                return -EINVAL;
        }
}

static void handle_units(struct conn *c, const struct control_request *q) {
        bool no_block = q->no_block;
        if (pending_new(c, q->n_units) < 0) {
                conn_queue(c, NULL);
                return;
        }
        for (size_t i = 0; i < q->n_units && !c->dead; i++) {
                struct pending *p = &c->pending[i];
                const char *verb = control_command_to_string(q->cmd);
                int r = request_resolve(c->s, unit_arg(q, i), p->unit);
                if (r < 0) {
                        p->result = answer_unit_error(unit_arg(q, i), verb, r);
                        continue;
                }
                if (q->cmd == CONTROL_CMD_START || q->cmd == CONTROL_CMD_RESTART)
                        start_one(c, p, q->cmd == CONTROL_CMD_RESTART, no_block);
                else if (q->cmd == CONTROL_CMD_STOP)
                        stop_one(c, p, no_block);
                else if (q->cmd == CONTROL_CMD_RELOAD)
                        reload_one(c, p, no_block);
                else {
                        r = simple_op(c, q, p->unit);
                        p->result = r < 0 ? answer_unit_error(p->unit, verb, r) : answer_unit(p->unit);
                }
        }
        for (size_t i = 0; i < c->n_pending && !c->dead; i++)
                if (!c->pending[i].result && !c->pending[i].source && !c->pending[i].stop_list) {
                        conn_queue(c, NULL); /* out of memory building an answer */
                        return;
                }
        pending_check_done(c);
}

/* One failed entry of daemon-reload's answer: the file name (escaped if it
 * must be), its message; the result's own message if it is the first. A
 * loaded unit is "not reloaded, left as it is"; a file no unit was loaded
 * from ("loaded": false) is "not loaded" (QA19 L3). */
static int reload_failed_entry(json *o, json *units, json *f, bool first) {
        const char *name = "?", *message = "does not load";
        json *loaded = NULL;
        (void) control_get_string(f, "name", &name);
        (void) control_get_string(f, "message", &message);
        const char *what = json_object_object_get_ex(f, "loaded", &loaded) && !json_object_get_boolean(loaded)
                                   ? "not loaded" : "not reloaded, left as it is";
        _cleanup_free_ char *escaped = NULL;
        if (control_name_escape(name, &escaped) < 0) /* QA L3: escaped: true */
                return -ENOMEM;
        const char *shown = escaped ? escaped : name;
        _cleanup_json_ json *e = answer_unit(shown);
        if (!e || (escaped && json_object_object_add(e, "escaped", json_object_new_boolean(true)) < 0) ||
            answer_set_error(e, CONTROL_ERROR_FAILED, "%s: %s: %s", shown, what, message) < 0 ||
            (first && answer_set_error(o, CONTROL_ERROR_FAILED, "%s: %s: %s", shown, what, message) < 0) ||
            json_object_array_add(units, e) < 0)
                return -ENOMEM;
        TAKE_PTR(e);
        return 0;
}

/* daemon-reload: the manager's report in the result. Files that do not
 * load fail the request (each is a failed entry of "units", the first one's
 * message at the top); the rest of the difference is applied all the same. */
static json *reload_result(json *report) {
        _cleanup_json_ json *o = answer_result(true);
        json *units = json_object_new_array(), *failed = NULL;
        if (!o || !units || json_object_object_add(o, "units", units) < 0) {
                json_object_put(units);
                return NULL;
        }
        static const char *const keys[] = { "added", "changed", "removed" };
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                json *a = NULL;
                if (!json_object_object_get_ex(report, keys[i], &a))
                        a = json_object_new_array();
                else
                        json_object_get(a);
                if (!a || json_object_object_add(o, keys[i], a) < 0) {
                        json_object_put(a);
                        return NULL;
                }
        }
        json_object_object_get_ex(report, "failed", &failed);
        for (size_t i = 0; failed && i < json_object_array_length(failed); i++)
                if (reload_failed_entry(o, units, json_object_array_get_idx(failed, i), i == 0) < 0)
                        return NULL;
        return TAKE_PTR(o);
}

static void handle_daemon_reload(struct conn *c) {
        struct control_server *s = c->s;
        _cleanup_json_ json *report = json_object_new_object();
        if (!report) {
                conn_queue(c, NULL);
                return;
        }
        int r = s->ops.daemon_reload(s->userdata, report);
        if (r < 0) {
                answer_error(c, CONTROL_ERROR_FAILED, "cannot read the unit directory: %s", strerror(-r));
                return;
        }
        conn_queue(c, reload_result(report));
}

/* reset-failed without a name: every unit. */
static void handle_global(struct conn *c, const struct control_request *q) {
        struct control_server *s = c->s;
        int r;
        if (q->cmd == CONTROL_CMD_DAEMON_RELOAD) {
                handle_daemon_reload(c);
                return;
        }
        if (q->cmd == CONTROL_CMD_DAEMON_REEXEC) {
                handle_daemon_reexec(c);
                return;
        }
        if (q->cmd == CONTROL_CMD_RESET_FAILED)
                r = s->ops.reset_failed(s->userdata, NULL);
        else
                r = s->ops.shutdown(s->userdata);
        if (r < 0) {
                answer_error(c, CONTROL_ERROR_FAILED, "%s", strerror(-r));
                return;
        }
        conn_queue(c, answer_result(true));
}

/* --- ctl: show --- */

/* One "properties" message per unit found; the result lists the others
 * (not-found), as status does. security: the same with one "security"
 * message (field "assessment") per unit. */
static int show_one(struct conn *c, const char *given, json *missing, bool security) {
        struct control_server *s = c->s;
        char name[256];
        int r = request_resolve(s, given, name);
        if (r >= 0) {
                _cleanup_json_ json *msg = control_message_new(security ? "security" : "properties"),
                                    *props = json_object_new_object();
                if (!msg || !props || control_add_string(msg, "name", name) < 0)
                        return -ENOMEM;
                if (security)
                        r = s->ops.assess ? s->ops.assess(s->userdata, name, props) : -ENOENT;
                else
                        r = s->ops.describe ? s->ops.describe(s->userdata, name, props) : -ENOENT;
                if (r >= 0) {
                        if (json_object_object_add(msg, security ? "assessment" : "properties", TAKE_PTR(props)) < 0)
                                return -ENOMEM;
                        conn_queue(c, TAKE_PTR(msg));
                        return 0;
                }
        }
        if (r == -ENOMEM)
                return r;
        json *e = answer_unit_error(given, security ? "security" : "show", -ENOENT);
        if (!e || json_object_array_add(missing, e) < 0)
                return -ENOMEM;
        return 0;
}

static void handle_show(struct conn *c, const struct control_request *q) {
        _cleanup_json_ json *res = answer_result(true);
        json *missing = json_object_new_array();
        if (!res || !missing || json_object_object_add(res, "units", missing) < 0) {
                json_object_put(missing);
                conn_queue(c, NULL);
                return;
        }
        for (size_t i = 0; i < q->n_units && !c->dead; i++) {
                size_t before = json_object_array_length(missing);
                if (show_one(c, unit_arg(q, i), missing, q->cmd == CONTROL_CMD_SECURITY) < 0) {
                        conn_queue(c, NULL);
                        return;
                }
                if (before == 0 && json_object_array_length(missing) == 1 &&
                    answer_set_error(res, CONTROL_ERROR_NOT_FOUND, "unit \"%s\" not found", unit_arg(q, i)) < 0) {
                        conn_queue(c, NULL);
                        return;
                }
        }
        if (!c->dead)
                conn_queue(c, TAKE_PTR(res));
}

/* --- etcd: the cluster view --- */

/* One "cluster-item" message per item (each small: a host, a unit), then the
 * result; now, or from the manager's ticket (control-ticket.c). */
static void answer_cluster(struct conn *c, int r, json *items) {
        if (r == -EOPNOTSUPP || r == -ENOENT) {
                answer_error(c, r == -ENOENT ? CONTROL_ERROR_NOT_FOUND : CONTROL_ERROR_FAILED, "%s",
                             r == -ENOENT ? "no such singleton unit in the cluster"
                                          : "tend runs without a cluster store (tend --store etcd://...)");
                return;
        }
        for (size_t i = 0; r >= 0 && items && i < json_object_array_length(items) && !c->dead; i++) {
                json *msg = control_message_new("cluster-item");
                json *it = json_object_get(json_object_array_get_idx(items, i));
                if (!msg || json_object_object_add(msg, "item", it) < 0) {
                        json_object_put(it);
                        json_object_put(msg);
                        r = -ENOMEM;
                        break;
                }
                conn_queue(c, msg);
        }
        if (!c->dead)
                conn_queue(c, r < 0 || !items ? NULL : answer_result(true));
}

/* The manager may answer later (CONTROL_ANSWER_LATER): the connection waits on a ticket. */
static void handle_cluster(struct conn *c, const struct control_request *q) {
        struct control_server *s = c->s;
        _cleanup_json_ json *items = json_object_new_array();
        const char *unit = q->n_units ? unit_arg(q, 0) : NULL;
        struct control_ticket *t = items ? conn_ticket_new(c, answer_cluster) : NULL;
        int r = !items ? -ENOMEM
                : s->ops.cluster ? s->ops.cluster(s->userdata, q->view, unit, items, t)
                                 : -EOPNOTSUPP;
        if (r == CONTROL_ANSWER_LATER && t)
                return; /* answered by tickets_answered_cb() */
        conn_end_request(c); /* the ticket released */
        answer_cluster(c, r == CONTROL_ANSWER_LATER ? -ENOMEM : r, items);
}

/* --- dispatch --- */

/* An unsupported-version answer names the versions tend speaks. */
static void answer_version(struct conn *c, const char *reason) {
        json *o = answer_result(false);
        json *v = json_object_new_array();
        if (o && answer_set_error(o, CONTROL_ERROR_UNSUPPORTED_VERSION, "%s", reason) >= 0 && v &&
            json_object_array_add(v, json_object_new_int(CONTROL_PROTOCOL_VERSION)) >= 0 &&
            json_object_object_add(o, "supported", TAKE_PTR(v)) >= 0) {
                conn_queue(c, o);
                return;
        }
        json_object_put(v);
        json_object_put(o);
        conn_queue(c, NULL);
}

/* Issue 19: a request's bytes must be UTF-8 (no overlong forms, no
 * surrogates: json-c's own check lets them through), its unit names too once
 * decoded (a \\u escape): nothing else is ever echoed into an answer. */
static int request_check_utf8(const char *buf, size_t size, const struct control_request *q, char *reason,
                              size_t rsize) {
        bool ok = unit_utf8_is_valid(buf, size);
        for (size_t i = 0; ok && i < q->n_units; i++) {
                const char *n = control_request_unit(q, i);
                ok = unit_utf8_is_valid(n, strlen(n));
        }
        if (!ok)
                snprintf(reason, rsize, "the request is not UTF-8 (a unit name must be)");
        return ok ? 0 : -EBADMSG;
}

/* Issue 19: a unit name outside systemd's unit-name characters (ASCII
 * letters, digits, ":-_.\\", and "@" of a template instance) names no unit:
 * refused with the reason, as at load, never looked up. */
static int request_check_names(const struct control_request *q, char *reason, size_t rsize) {
        for (size_t i = 0; i < q->n_units; i++) {
                const char *n = control_request_unit(q, i);
                bool ok = n[0] != '\0';
                for (const char *p = n; ok && *p; p++)
                        ok = unit_name_char(*p) || *p == '@';
                size_t len = strlen(n), cut = len > 64 ? 64 : len;
                while (cut > 0 && cut < len && ((unsigned char) n[cut] & 0xc0) == 0x80)
                        cut--; /* never inside a UTF-8 sequence: the answer stays UTF-8 */
                if (!ok) {
                        snprintf(reason, rsize, "invalid unit name \"%.*s%s\": a unit name has only ASCII letters, "
                                 "digits and \":-_.\\@\"", (int) cut, n, cut < len ? "..." : "");
                        return -EINVAL;
                }
                /* QA19 L6: as systemd, at most 255 characters with the
                 * ".service" tend adds to a bare name. */
                bool suffixed = len >= 8 && streq(n + len - 8, ".service");
                if (len + (suffixed ? 0 : 8) > UNIT_NAME_MAX) {
                        snprintf(reason, rsize, "invalid unit name \"%.*s...\": longer than %d characters",
                                 (int) cut, n, UNIT_NAME_MAX);
                        return -EINVAL;
                }
                /* QA19 L6: "t@1.timer" is not t@1.timer.service: a unit type
                 * tend does not run is refused, never looked up. */
                const char *other = unit_name_other_suffix(n);
                if (other) {
                        snprintf(reason, rsize, "\"%.*s%s\" is a %s unit: tend runs services only", (int) cut, n,
                                 cut < len ? "..." : "", other + 1);
                        return -EINVAL;
                }
        }
        return 0;
}

void conn_request(struct conn *c, const char *buf, size_t size) {
        struct control_request q;
        char who[64], reason[256];

        int r = control_request_decode(buf, size, &q, reason, sizeof reason);
        if (r >= 0 && (r = request_check_utf8(buf, size, &q, reason, sizeof reason)) < 0)
                control_request_done(&q);
        else if (r >= 0 && (r = request_check_names(&q, reason, sizeof reason)) < 0)
                control_request_done(&q);
        if (r == -EPROTONOSUPPORT) {
                answer_version(c, reason);
                return;
        }
        if (r < 0) {
                if (r == -ENOMEM) {
                        (void) log_debug_errno(r, "control: %s sent a bad request: %m", conn_peer(c, who));
                        conn_queue(c, NULL);
                } else {
                        log_debug("control: %s sent a bad request: %s", conn_peer(c, who), reason);
                        answer_error(c, CONTROL_ERROR_BAD_REQUEST, "%s", reason);
                }
                return;
        }
        log_debug("control: %s: %s", conn_peer(c, who), control_command_to_string(q.cmd));
        switch (q.cmd) {
        case CONTROL_CMD_STATUS:
        case CONTROL_CMD_LIST:
                handle_status(c, &q);
                break;
        case CONTROL_CMD_LOGS:
                handle_logs(c, &q);
                break;
        case CONTROL_CMD_WATCH:
                handle_watch(c, &q);
                break;
        case CONTROL_CMD_RESET_FAILED:
                if (q.n_units == 0)
                        handle_global(c, &q);
                else
                        handle_units(c, &q);
                break;
        case CONTROL_CMD_DAEMON_RELOAD:
        case CONTROL_CMD_DAEMON_REEXEC:
        case CONTROL_CMD_SHUTDOWN:
                handle_global(c, &q);
                break;
        case CONTROL_CMD_SHOW:
        case CONTROL_CMD_SECURITY: /* security */
                handle_show(c, &q);
                break;
        case CONTROL_CMD_CLUSTER:
                handle_cluster(c, &q);
                break;
        default:
                handle_units(c, &q);
                break;
        }
        control_request_done(&q);
}

