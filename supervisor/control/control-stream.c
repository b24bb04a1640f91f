/* SPDX-License-Identifier: MIT */
/*
 * The control server's streams (control-internal.h): watch (store events as
 * messages) and logs -f (a unit's ring, then its lines as they come).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "control-internal.h"
#include "control-watch.h"
#include "log.h"

/* ------------------------------------------------------------------------ */
/* watch                                                                  */
/* ------------------------------------------------------------------------ */

/* A unit record (a canonical JSON object, record.c) is spliced into its
 * message unparsed; any other value goes through json-c (control-watch.h). */
static void conn_queue_watch_event(struct conn *c, const struct store_event *ev) {
        size_t n = watch_splice_size(ev);
        if (n == 0) {
                conn_queue(c, watch_message_tree(ev));
                return;
        }
        char *buf = conn_queue_reserve(c, n);
        if (buf)
                watch_splice_write(ev, buf, n);
}

int produce_watch(struct conn *c) {
        int produced = 0;
        char who[64];
        while (conn_has_room(c) && !c->dead) {
                struct store_event *ev = NULL;
                int r = store_watch_next(c->watch, &ev);
                if (r == -EAGAIN)
                        break;
                if (r == -ENOBUFS) {
                        log_notice("control: %s fell behind its watch: told to re-watch", conn_peer(c, who));
                        end_stream(c, CONTROL_ERROR_LAGGED, "%s", "the watch fell behind; watch again and dedupe by revision");
                        return 1;
                }
                if (r < 0) {
                        end_stream(c, CONTROL_ERROR_STREAM_ENDED, "the store ended the watch: %s", strerror(-r));
                        return 1;
                }
                conn_queue_watch_event(c, ev);
                store_event_unref(ev);
                produced = 1;
        }
        return produced;
}

static int watch_cb(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        conn_done(userdata);
        return 0;
}

void handle_watch(struct conn *c, const struct control_request *q) {
        enum store_keyspace ks = q->ephemeral ? STORE_EPHEMERAL : STORE_DURABLE;
        int r = store_watch(c->s->store, ks, q->prefix, &c->watch);
        if (r >= 0)
                r = sd_event_add_io(c->s->event, &c->watch_source, store_watch_fd(c->watch), EPOLLIN, watch_cb, c);
        if (r < 0) {
                conn_end_request(c);
                answer_error(c, CONTROL_ERROR_FAILED, "cannot watch: %s", strerror(-r));
                return;
        }
        c->phase = CONN_WATCH;
}

/* ------------------------------------------------------------------------ */
/* logs, logs -f                                                          */
/* ------------------------------------------------------------------------ */

static const char *origin_name(enum logs_origin o) {
        return o == LOGS_ORIGIN_STDERR ? "stderr" : o == LOGS_ORIGIN_TEND ? "tend" : "stdout";
}

/* One log line as messages of at most CONTROL_LINE_PIECE bytes of text each
 * (so any line, escaped, fits a message); all but the last piece carry
 * "continues", the last carries the line's own flags. */
static json *line_message(const char *unit, const struct logs_line *l, const char *text, size_t n, unsigned flags) {
        _cleanup_json_ json *o = control_message_new("line");
        if (!o || control_add_string(o, "unit", unit) < 0 || control_add_int64(o, "time", (int64_t) l->realtime_usec) < 0 ||
            (l->pid > 0 ? control_add_int64(o, "pid", l->pid) : control_add_string(o, "pid", NULL)) < 0 ||
            control_add_string(o, "stream", origin_name(l->origin)) < 0 ||
            control_add_int64(o, "priority", l->priority) < 0)
                return NULL;
        /* docs/control-protocol.md "Bytes that are not UTF-8" */
        _cleanup_free_ char *esc = NULL;
        size_t esc_len;
        if (control_text_escape(text, n, &esc, &esc_len) < 0 || (esc && control_add_bool(o, "escaped", true) < 0))
                return NULL;
        json *t = json_object_new_string_len(esc ? esc : text, (int) esc_len);
        if (!t || json_object_object_add(o, "text", t) < 0) {
                json_object_put(t);
                return NULL;
        }
        static const struct {
                unsigned flag;
                const char *name;
        } names[] = {
                { LOGS_LINE_CONTINUES, "continues" },
                { LOGS_LINE_PARTIAL, "partial" },
                { LOGS_LINE_TRUNCATED, "truncated" },
                { LOGS_LINE_NOTE, "note" },
        };
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if ((flags & names[i].flag) && control_add_bool(o, names[i].name, true) < 0)
                        return NULL;
        return TAKE_PTR(o);
}

/* One log line as messages of at most CONTROL_LINE_PIECE bytes of text each
 * (so any line, escaped, fits a message); all but the last piece carry
 * "continues", the last carries the line's own flags. */
static void queue_line(struct conn *c, const char *unit, const struct logs_line *l) {
        size_t off = 0;
        do {
                size_t n = l->len - off > CONTROL_LINE_PIECE ? CONTROL_LINE_PIECE : l->len - off;
                unsigned flags = off + n == l->len ? l->flags : (l->flags & LOGS_LINE_NOTE) | LOGS_LINE_CONTINUES;
                conn_queue(c, line_message(unit, l, l->text + off, n, flags));
                off += n;
        } while (off < l->len && !c->dead);
}

/* ctl: logs --since/-p: whether the line is shown. */
static bool line_selected(const struct logs_line *l, int64_t since, int max_priority) {
        return (since <= 0 || (int64_t) l->realtime_usec >= since) && l->priority <= max_priority;
}

int produce_follow(struct conn *c) {
        int produced = 0;
        while (conn_has_room(c) && !c->dead) {
                struct logs_line line;
                int r = logs_follower_next(c->follower, &line);
                if (r == 0) {
                        c->follow_ready = false;
                        break;
                }
                if (r < 0) {
                        end_stream(c, CONTROL_ERROR_STREAM_ENDED,
                                   "the log stream of %s ended (the unit went away, or this client fell behind)",
                                   c->follow_unit);
                        return 1;
                }
                /* a note of tend's (the follower's loss) always passes */
                if (!(line.flags & LOGS_LINE_NOTE) && !line_selected(&line, c->follow_since, c->follow_priority))
                        continue;
                queue_line(c, c->follow_unit, &line);
                produced = 1;
        }
        return produced;
}

struct ring_ctx {
        struct conn *c;
        const char *unit;
        int64_t since;
        int max_priority;
        size_t skip; /* selected lines not shown: -n counts the selected ones */
        size_t counted;
};

static int ring_line(const struct logs_line *line, void *userdata) {
        struct ring_ctx *x = userdata;
        if (!line_selected(line, x->since, x->max_priority))
                return 0;
        if (x->skip > 0) {
                x->skip--;
                return 0;
        }
        queue_line(x->c, x->unit, line);
        return x->c->dead ? -ENOMEM : 0;
}

static int ring_count(const struct logs_line *line, void *userdata) {
        struct ring_ctx *x = userdata;
        x->counted += line_selected(line, x->since, x->max_priority);
        return 0;
}

/* The ring's last n selected lines (n < 0: every one). Without a filter the
 * ring keeps its own count; with one, a first pass counts what it selects. */
static int ring_send(logs_stream *stream, struct ring_ctx *x, int64_t n) {
        if (x->since <= 0 && x->max_priority >= 7)
                return logs_stream_ring(stream, n < 0 ? SIZE_MAX : (size_t) n, ring_line, x);
        int r = logs_stream_ring(stream, SIZE_MAX, ring_count, x);
        if (r < 0)
                return r;
        x->skip = n >= 0 && x->counted > (size_t) n ? x->counted - (size_t) n : 0;
        return logs_stream_ring(stream, SIZE_MAX, ring_line, x);
}

static void follower_notify(logs_follower *f, void *userdata) {
        struct conn *c = userdata;
        c->follow_ready = true;
        conn_update_events(c);
}

/* The ring is copied into the queue at once (bounded by the ring's own size)
 * and the follower attached in the same loop iteration: no gap, no overlap. */
void handle_logs(struct conn *c, const struct control_request *q) {
        struct control_server *s = c->s;
        logs_stream *stream = NULL;
        char unit[256];
        int64_t lines = q->lines;
        bool follow = q->follow;

        if (request_resolve(s, control_request_unit(q, 0), unit) < 0)
                answer_error(c, CONTROL_ERROR_NOT_FOUND, "unit \"%s\" not found", control_request_unit(q, 0));
        else if (!(stream = s->ops.logs(s->userdata, unit)))
                answer_error(c, CONTROL_ERROR_FAILED,
                             "%s: its output does not pass through tend (journal, null or inherit): no log ring", unit);
        if (!stream)
                return;

        struct ring_ctx x = { .c = c, .unit = unit, .since = q->since, .max_priority = q->max_priority };
        int r = ring_send(stream, &x, lines);
        if (r < 0 || c->dead)
                return;
        if (!follow) {
                conn_queue(c, answer_result(true));
                return;
        }
        snprintf(c->follow_unit, sizeof c->follow_unit, "%s", unit);
        c->follow_since = q->since;
        c->follow_priority = q->max_priority;
        r = logs_stream_follow(stream, 0, follower_notify, c, &c->follower);
        if (r < 0)
                answer_error(c, CONTROL_ERROR_FAILED, "cannot follow the log: %s", strerror(-r));
        else
                c->phase = CONN_FOLLOW;
}

