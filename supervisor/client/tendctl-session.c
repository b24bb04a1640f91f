/* SPDX-License-Identifier: MIT */
/*
 * tend's own verbs' sessions (tendctl-session.h): the request built from the
 * command line, the answer's messages read until its "result" (status and
 * list's records, logs' lines, watch's events deduplicated across re-watches),
 * the exit status of the result.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "tendctl-conn.h"
#include "tendctl-print.h"
#include "tendctl-session.h"

static json *build_request(const struct args *a) {
        bool takes_units = a->cmd != CONTROL_CMD_WATCH;
        _cleanup_json_ json *o = request_new(a->cmd, a->names, takes_units ? a->n_names : 0);
        int r = o ? 0 : -ENOMEM;
        switch (r < 0 ? -1 : a->cmd) {
        case CONTROL_CMD_START: case CONTROL_CMD_STOP: case CONTROL_CMD_RESTART: case CONTROL_CMD_RELOAD:
                r = control_add_bool(o, "no_block", a->no_block);
                break;
        case CONTROL_CMD_KILL:
                if ((r = control_add_int64(o, "signal", a->signal)) >= 0)
                        r = control_add_bool(o, "main", a->main_only);
                break;
        case CONTROL_CMD_LOGS:
                if ((r = control_add_bool(o, "follow", a->follow)) >= 0 && a->lines >= 0)
                        r = control_add_int64(o, "lines", a->lines);
                if (r >= 0 && a->since > 0)
                        r = control_add_int64(o, "since", a->since);
                if (r >= 0 && a->priority < 7)
                        r = control_add_int64(o, "priority", a->priority);
                break;
        case CONTROL_CMD_WATCH:
                json_object_object_del(o, "units");
                if ((r = control_add_string(o, "keyspace", a->ephemeral ? "ephemeral" : "durable")) >= 0)
                        r = control_add_string(o, "prefix", a->n_names ? a->names[0] : "");
                break;
        default:
                break;
        }
        return r < 0 ? NULL : TAKE_PTR(o);
}

/* ------------------------------------------------------------------------ */
/* Answers                                                                   */
/* ------------------------------------------------------------------------ */

/* The exit status of a result; its failures are printed on stderr. */
static int result_status(json *res, enum verb verb) {
        if (get_bool(res, "ok"))
                return 0;
        /* systemctl kill of a unit with no process left succeeds, silently */
        if (verb == VERB_KILL && strstr(get_str(res, "message", ""), ": no process to signal"))
                return 0;
        json *units;
        size_t printed = 0;
        if (json_object_object_get_ex(res, "units", &units) && json_object_is_type(units, json_type_array))
                for (size_t i = 0; i < json_object_array_length(units); i++) {
                        json *u = json_object_array_get_idx(units, i);
                        if (!get_bool(u, "ok")) {
                                fprintf(stderr, "tendctl: %s\n", get_str(u, "message", get_str(u, "error", "failed")));
                                printed++;
                        }
                }
        if (printed == 0)
                fprintf(stderr, "tendctl: %s\n", get_str(res, "message", get_str(res, "error", "failed")));
        enum control_error e = control_error_from_string(get_str(res, "error", NULL));
        if (e == CONTROL_ERROR_NOT_FOUND)
                return verb_exit_unknown(verb) ? verb_exit_unknown(verb) : EXIT_NOT_FOUND;
        if (e == CONTROL_ERROR_PERMISSION_DENIED)
                return verb_exit_denied(verb);
        if (verb == VERB_RELOAD && strstr(get_str(res, "message", ""), "no ExecReload="))
                return EXIT_NOT_IMPLEMENTED;
        return control_error_exit_status(e);
}

struct session {
        const struct args *a;
        int fd;
        json *records; /* status/list */
        /* watch: key → last revision shown (negative: deleted at that revision) */
        json *seen, *snapshot;
        bool resync;
        json *parts; /* a result's arrays sent ahead in result-part messages (control-proto.h) */
};

static int on_units(struct session *x, json *m) {
        json *units;
        if (!json_object_object_get_ex(m, "units", &units) || !json_object_is_type(units, json_type_array))
                return 0;
        for (size_t i = 0; i < json_object_array_length(units); i++)
                if (json_object_array_add(x->records, json_object_get(json_object_array_get_idx(units, i))) < 0)
                        return -ENOMEM;
        return 0;
}

static int finish_units(struct session *x, json *res) {
        size_t n = json_object_array_length(x->records);
        /* A failed request that gives no record prints nothing on stdout, not an
         * empty list: only its error, on stderr (issue 19). */
        if (n == 0 && !get_bool(res, "ok"))
                return result_status(res, x->a->verb);
        if (x->a->json)
                print_json(x->records);
        else if (x->a->verb == VERB_LIST || x->a->verb == VERB_LIST_UNITS)
                print_list(x->records);
        else
                for (size_t i = 0; i < n; i++) {
                        if (i > 0)
                                putchar('\n');
                        print_status(json_object_array_get_idx(x->records, i));
                }
        fflush(stdout);
        return result_status(res, x->a->verb);
}

/* --- watch: print each change once, across re-watches (dedupe by revision) --- */

static const char *key_name(const char *key) {
        const char *slash = strchr(key, '/');
        return slash ? slash + 1 : key;
}

static void print_event(struct session *x, json *m, const char *event, int64_t rev) {
        const char *key = get_str(m, "key", "");
        json *value = NULL;
        bool put = streq(event, "put");
        if (put)
                json_object_object_get_ex(m, "value", &value);

        if (!x->a->json) {
                const char *state = value ? get_str(value, "state", NULL) : NULL;
                int64_t pid = value ? get_int(value, "main_pid", 0) : 0;
                printf("%" PRId64 " %-6s %s", rev, event, key);
                if (state && pid > 0)
                        printf(" %s%s%s pid %" PRId64 "\n", state_colour(state), state, colour_off(), pid);
                else if (state)
                        printf(" %s%s%s\n", state_colour(state), state, colour_off());
                else if (put)
                        printf(" %s\n", value ? json_object_to_json_string_ext(value, JSON_C_TO_STRING_PLAIN) : "null");
                else
                        printf(" (%s)\n", get_str(m, "cause", "deleted"));
                fflush(stdout);
                return;
        }
        _cleanup_json_ json *o = json_object_new_object();
        if (!o)
                return;
        if (value && json_object_is_type(value, json_type_object)) {
                json_object_object_foreach(value, k, v)
                        json_object_object_add(o, k, json_object_get(v));
        } else if (put)
                json_object_object_add(o, "value", json_object_get(value));
        if (!json_object_object_get_ex(o, "name", NULL))
                control_add_string(o, "name", key_name(key));
        control_add_string(o, "key", key);
        control_add_int64(o, "revision", rev);
        control_add_string(o, "keyspace", get_str(m, "keyspace", "durable"));
        control_add_string(o, "event", event);
        if (!put && get_str(m, "cause", NULL))
                control_add_string(o, "cause", get_str(m, "cause", NULL));
        print_json(o);
        fflush(stdout);
}

static void on_event(struct session *x, json *m) {
        const char *key = get_str(m, "key", ""), *event = get_str(m, "event", "put");
        int64_t rev = get_int(m, "revision", 0), last = 0;
        json *prev;

        if (json_object_object_get_ex(x->seen, key, &prev))
                last = json_object_get_int64(prev);
        if (x->resync && streq(event, "put"))
                json_object_object_add(x->snapshot, key, NULL);
        if (rev <= (last < 0 ? -last : last))
                return; /* shown already, before the re-watch */
        json_object_object_add(x->seen, key, json_object_new_int64(streq(event, "delete") ? -rev : rev));
        print_event(x, m, event, rev);
}

/* After a re-watch's snapshot: a key shown as present that the snapshot
 * lacks was deleted while we were behind. Its delete is shown at the
 * snapshot's revision (the real one was lost with the lag). */
static void on_snapshot_done(struct session *x, json *m) {
        if (!x->resync)
                return;
        int64_t rev = get_int(m, "revision", 0);
        json_object_object_foreach(x->seen, key, v) {
                if (json_object_get_int64(v) <= 0 || json_object_object_get_ex(x->snapshot, key, NULL))
                        continue;
                _cleanup_json_ json *d = json_object_new_object();
                if (!d || control_add_string(d, "key", key) < 0 ||
                    control_add_string(d, "keyspace", get_str(m, "keyspace", "durable")) < 0)
                        continue;
                json_object_object_add(x->seen, key, json_object_new_int64(-rev));
                print_event(x, d, "delete", rev);
        }
        x->resync = false;
        json_object_put(x->snapshot);
        x->snapshot = NULL;
}

static int rewatch(struct session *x) {
        _cleanup_json_ json *req = build_request(x->a);
        x->resync = true;
        json_object_put(x->snapshot);
        x->snapshot = json_object_new_object();
        if (!x->snapshot)
                return -ENOMEM;
        return send_request(x->fd, req);
}

/* Reads messages until the result; returns the exit status. */
static int session_run(struct session *x) {
        for (;;) {
                _cleanup_json_ json *m = NULL;
                int r = recv_message(x->fd, &m);
                if (r < 0)
                        return recv_error(r);
                const char *type = get_str(m, "type", "");
                if (streq(type, "units")) {
                        if (on_units(x, m) < 0)
                                return recv_error(-ENOMEM);
                } else if (streq(type, "line"))
                        print_line(m, x->a->json);
                else if (streq(type, "event"))
                        on_event(x, m);
                else if (streq(type, "snapshot-done"))
                        on_snapshot_done(x, m);
                else if (streq(type, "result-part")) {
                        if (control_result_merge(&x->parts, m) < 0)
                                return recv_error(-ENOMEM);
                } else if (streq(type, "result")) {
                        if (control_result_join(x->parts, m) < 0)
                                return recv_error(-ENOMEM);
                        if (x->a->cmd == CONTROL_CMD_WATCH &&
                            control_error_from_string(get_str(m, "error", NULL)) == CONTROL_ERROR_LAGGED) {
                                if ((r = rewatch(x)) < 0)
                                        return recv_error(r);
                                continue;
                        }
                        if (x->a->cmd == CONTROL_CMD_STATUS || x->a->cmd == CONTROL_CMD_LIST)
                                return finish_units(x, m);
                        if (x->a->json && x->a->cmd != CONTROL_CMD_LOGS && x->a->cmd != CONTROL_CMD_WATCH) {
                                /* start/stop/restart/daemon-reload: the result itself */
                                json_object_object_del(m, "version");
                                json_object_object_del(m, "type");
                                print_json(m);
                                fflush(stdout);
                        }
                        return result_status(m, x->a->verb);
                }
                /* Unknown types come from a newer tend: ignored. */
        }
}

/* tend's own verbs: one request, its answer. */
int run_session(const struct args *a, int fd) {
        _cleanup_json_ json *req = build_request(a);
        int r = send_request(fd, req);
        /* A refused client's answer is already queued when tend closes: read it. */
        if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
                fprintf(stderr, "tendctl: sending to tend: %s\n", strerror(-r));
                return EXIT_FAILED;
        }
        struct session x = { .a = a, .fd = fd, .records = json_object_new_array(), .seen = json_object_new_object() };
        if (!x.records || !x.seen)
                r = recv_error(-ENOMEM);
        else
                r = session_run(&x);
        json_object_put(x.records);
        json_object_put(x.seen);
        json_object_put(x.snapshot);
        json_object_put(x.parts);
        return r;
}
