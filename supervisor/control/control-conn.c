/* SPDX-License-Identifier: MIT */
/*
 * The control server's connections (control-internal.h): answers, the output
 * queue and its stall timeout, reading requests, the pump that sends,
 * produces while there is room and sets the events a connection needs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control-internal.h"
#include "log.h"

/* ------------------------------------------------------------------------ */
/* Answers                                                                */
/* ------------------------------------------------------------------------ */

json *answer_result(bool ok) {
        _cleanup_json_ json *o = control_message_new("result");
        if (!o || control_add_bool(o, "ok", ok) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* Sets "ok": false, "error" and "message" (printf-style) on o. */
_printf_(3, 0) int answer_vset_error(json *o, enum control_error e, const char *fmt, va_list ap) {
        char msg[512];
        vsnprintf(msg, sizeof msg, fmt, ap);
        if (control_add_bool(o, "ok", false) < 0 || control_add_string(o, "error", control_error_to_string(e)) < 0 ||
            control_add_string(o, "message", msg) < 0)
                return -ENOMEM;
        return 0;
}

_printf_(3, 4) int answer_set_error(json *o, enum control_error e, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = answer_vset_error(o, e, fmt, ap);
        va_end(ap);
        return r;
}

/* A per-unit answer {"name": unit, "ok": true}. */
json *answer_unit(const char *unit) {
        _cleanup_json_ json *o = json_object_new_object();
        if (!o || control_add_string(o, "name", unit) < 0 || control_add_bool(o, "ok", true) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* A per-unit failure from an ops errno: -ENOENT not found, else failed. */
json *answer_unit_error(const char *unit, const char *verb, int error) {
        _cleanup_json_ json *o = answer_unit(unit);
        if (!o)
                return NULL;
        int r;
        if (error == -ENOENT)
                r = answer_set_error(o, CONTROL_ERROR_NOT_FOUND, "unit \"%s\" not found", unit);
        else if (error == -EOPNOTSUPP && streq(verb, "reload"))
                r = answer_set_error(o, CONTROL_ERROR_FAILED, "%s: no ExecReload=", unit);
        else if (error == -EADDRNOTAVAIL) /* pkg: enable/disable of a unit pulled in */
                r = answer_set_error(o, CONTROL_ERROR_FAILED, "%s: its file is not in the unit directory: "
                                     "it starts only when a unit that needs it starts", unit);
        else if (error == -ESRCH)
                r = answer_set_error(o, CONTROL_ERROR_FAILED, "%s: no process to signal", unit);
        else
                r = answer_set_error(o, CONTROL_ERROR_FAILED, "%s of %s failed: %s", verb, unit, strerror(-error));
        return r < 0 ? NULL : TAKE_PTR(o);
}

/* A failed result, queued. */
_printf_(3, 4) void answer_error(struct conn *c, enum control_error e, const char *fmt, ...) {
        json *o = answer_result(false);
        va_list ap;
        va_start(ap, fmt);
        if (o && answer_vset_error(o, e, fmt, ap) < 0) {
                json_object_put(o);
                o = NULL;
        }
        va_end(ap);
        conn_queue(c, o);
}


/* ------------------------------------------------------------------------ */
/* Connections: output queue, events, lifetime                            */
/* ------------------------------------------------------------------------ */

const char *conn_peer(const struct conn *c, char buf[static 64]) {
        snprintf(buf, 64, "client pid %d (uid %u)", (int) c->pid, (unsigned) c->uid);
        return buf;
}

/* Queues msg (taken, also on failure). A failure to queue an answer leaves
 * the client waiting forever, so it ends the connection. */
char *conn_queue_reserve(struct conn *c, size_t len) {
        char who[64];
        if (c->dead)
                return NULL;
        struct outmsg *m = malloc(sizeof *m + len);
        if (!m) {
                log_warning("control: %s: out of memory queueing an answer: dropped", conn_peer(c, who));
                c->dead = true;
                return NULL;
        }
        m->next = NULL;
        m->len = len;
        if (c->out_tail)
                c->out_tail->next = m;
        else
                c->out_head = m;
        c->out_tail = m;
        c->out_bytes += len;
        return m->data;
}

static void queue_text(struct conn *c, const char *text, size_t len) {
        char *buf = conn_queue_reserve(c, len);
        if (buf)
                memcpy(buf, text, len);
}

static int queue_part(json *part, void *userdata) {
        _cleanup_json_ json *o = part;
        struct conn *c = userdata;
        const char *text;
        size_t len;
        if (control_message_text(o, &text, &len) < 0)
                return -ENOMEM;
        queue_text(c, text, len);
        return c->dead ? -ENOMEM : 0;
}

/* Whether o is a result (only results are sent in parts). */
static bool is_result(json *o) {
        const char *type;
        return control_get_string(o, "type", &type) >= 0 && streq(type, "result");
}

void conn_queue(struct conn *c, json *msg) {
        _cleanup_json_ json *o = msg;
        const char *text;
        size_t len;
        char who[64];

        if (c->dead)
                return;
        if (!o || control_message_text(o, &text, &len) < 0) {
                log_warning("control: %s: out of memory building an answer: dropped", conn_peer(c, who));
                c->dead = true;
                return;
        }
        /* Answers of any size: a result over the message limit goes in
         * parts (control-proto.h, docs/control-protocol.md). */
        if (len > CONTROL_MESSAGE_MAX && is_result(o) &&
            (control_result_split(o, CONTROL_BATCH_BYTES, queue_part, c) < 0 ||
             control_message_text(o, &text, &len) < 0)) {
                log_warning("control: %s: out of memory sending an answer in parts: dropped", conn_peer(c, who));
                c->dead = true;
                return;
        }
        queue_text(c, text, len);
}

bool conn_has_room(const struct conn *c) {
        return c->out_bytes < CONTROL_OUTPUT_MAX;
}

static int stall_cb(sd_event_source *src, uint64_t usec, void *userdata) {
        struct conn *c = userdata;
        char who[64];
        log_notice("control: %s read nothing for %" PRIu64 " ms with answers pending: dropped", conn_peer(c, who),
                   (uint64_t) (c->s->stall_timeout / USEC_PER_MSEC));
        c->dead = true;
        conn_done(c);
        return 0;
}

/* The stall deadline runs while the socket refuses our output, restarting on
 * every bit of progress; with nothing blocked it is off. */
static void stall_update(struct conn *c, bool blocked, bool progressed) {
        if (!blocked) {
                if (c->stall_armed)
                        (void) sd_event_source_set_enabled(c->stall, SD_EVENT_OFF);
                c->stall_armed = false;
                return;
        }
        if (c->stall_armed && !progressed)
                return;
        int r = c->stall ? sd_event_source_set_time_relative(c->stall, c->s->stall_timeout)
                         : sd_event_add_time_relative(c->s->event, &c->stall, CLOCK_MONOTONIC, c->s->stall_timeout,
                                                      0, stall_cb, c);
        if (r >= 0)
                r = sd_event_source_set_enabled(c->stall, SD_EVENT_ONESHOT);
        c->stall_armed = r >= 0;
}

/* Sends what the queue holds until the socket refuses. Returns 1 when the
 * socket is full (EPOLLOUT needed), 0 when the queue is empty. */
static int conn_flush(struct conn *c) {
        bool progressed = false;
        char who[64];

        while (c->out_head && !c->dead) {
                struct outmsg *m = c->out_head;
                ssize_t n = send(c->fd, m->data, m->len, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n < 0 && errno == EMSGSIZE) {
                        /* Never left waiting for an answer that cannot come: closed. */
                        log_warning("control: %s: answer of %zu bytes exceeds the socket buffer: connection closed",
                                    conn_peer(c, who), m->len);
                        c->dead = true;
                        break;
                } else if (n < 0) {
                        (void) log_debug_errno(errno, "control: %s: send: %m", conn_peer(c, who));
                        c->dead = true;
                        break;
                }
                c->out_head = m->next;
                if (!c->out_head)
                        c->out_tail = NULL;
                c->out_bytes -= m->len;
                free(m);
                progressed = true;
        }
        bool blocked = c->out_head && !c->dead;
        stall_update(c, blocked, progressed);
        return blocked;
}

void control_server_flush(struct control_server *s) {
        for (struct conn *c = s ? s->conns : NULL; c; c = c->next)
                (void) conn_flush(c);
}

static void out_free(struct conn *c) {
        while (c->out_head) {
                struct outmsg *m = c->out_head;
                c->out_head = m->next;
                free(m);
        }
        c->out_tail = NULL;
        c->out_bytes = 0;
}

/* Ends the request in progress: every share, watch, follower and batch it
 * holds is released; the connection reads requests again. */
void conn_end_request(struct conn *c) {
        for (size_t i = 0; i < c->n_pending; i++) {
                pending_release(&c->pending[i]);
                json_object_put(c->pending[i].result);
        }
        free(c->pending);
        c->pending = NULL;
        c->n_pending = c->n_open = 0;

        store_event_array_free(c->records, c->n_records);
        c->records = NULL;
        c->n_records = c->next_record = 0;
        json_object_put(c->final);
        c->final = NULL;

        c->watch_source = sd_event_source_disable_unref(c->watch_source);
        c->watch = store_watch_free(c->watch);
        c->follower = logs_follower_free(c->follower);
        c->follow_ready = false;
        conn_ticket_release(c);
        c->phase = CONN_IDLE;
}

void conn_free(struct conn *c) {
        struct control_server *s = c->s;

        conn_end_request(c);
        out_free(c);
        c->io = sd_event_source_disable_unref(c->io);
        c->stall = sd_event_source_disable_unref(c->stall);
        c->idle = sd_event_source_disable_unref(c->idle);
        safe_close(c->fd);
        if (c->prev)
                c->prev->next = c->next;
        else
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_conns--;
        free(c);
}

static int conn_produce(struct conn *c) {
        switch (c->phase) {
        case CONN_UNITS:
                return produce_units(c);
        case CONN_WATCH:
                return produce_watch(c);
        case CONN_FOLLOW:
                return c->follow_ready ? produce_follow(c) : 0;
        default:
                return 0;
        }
}

static int idle_cb(sd_event_source *src, uint64_t usec, void *userdata) {
        struct conn *c = userdata;
        char who[64];
        log_debug("control: %s sent nothing for %" PRIu64 " ms with no request in progress: closed",
                  conn_peer(c, who), (uint64_t) (c->s->idle_timeout / USEC_PER_MSEC));
        c->dead = true;
        conn_done(c);
        return 0;
}

/* The idle deadline runs from the connection's last activity while it has no
 * request in progress and nothing to send (a stream or a waiting start is
 * never idle). */
static void idle_update(struct conn *c) {
        bool idle = c->phase == CONN_IDLE && !c->out_head;
        if (!idle) {
                if (c->idle)
                        (void) sd_event_source_set_enabled(c->idle, SD_EVENT_OFF);
                return;
        }
        int r = c->idle ? sd_event_source_set_time_relative(c->idle, c->s->idle_timeout)
                        : sd_event_add_time_relative(c->s->event, &c->idle, CLOCK_MONOTONIC, c->s->idle_timeout, 0,
                                                     idle_cb, c);
        if (r >= 0)
                (void) sd_event_source_set_enabled(c->idle, SD_EVENT_ONESHOT);
}

void conn_update_events(struct conn *c) {
        uint32_t ev = 0;
        if (c->dead)
                return;
        idle_update(c);
        if (c->phase == CONN_IDLE && !c->eof && conn_has_room(c))
                ev |= EPOLLIN;
        if (c->out_head || (c->phase == CONN_UNITS && conn_has_room(c)) ||
            (c->phase == CONN_FOLLOW && c->follow_ready && conn_has_room(c)))
                ev |= EPOLLOUT;
        (void) sd_event_source_set_io_events(c->io, ev);
        if (c->watch_source)
                (void) sd_event_source_set_enabled(c->watch_source, conn_has_room(c) ? SD_EVENT_ON : SD_EVENT_OFF);
}

/* Sends, produces while there is room, sends again; then sets the events the
 * connection needs. A client that has sent its last request and has been
 * answered is closed. */
static void conn_pump(struct conn *c) {
        while (!c->dead) {
                bool blocked = conn_flush(c) > 0;
                if (c->dead || !conn_has_room(c) || conn_produce(c) <= 0 || blocked)
                        break;
        }
        if (!c->dead && c->eof && c->phase == CONN_IDLE && !c->out_head)
                c->dead = true;
        conn_update_events(c);
}

/* The end of every callback that touched c. */
void conn_done(struct conn *c) {
        if (!c->dead)
                conn_pump(c);
        if (c->dead)
                conn_free(c);
}

/* ------------------------------------------------------------------------ */
/* Reading requests                                                       */
/* ------------------------------------------------------------------------ */

/* Reads requests while the connection is idle. A request larger than
 * CONTROL_REQUEST_MAX is consumed whole (SEQPACKET: MSG_TRUNC gives its real
 * size), answered "too-large", and the connection stays usable. */
static void conn_read(struct conn *c) {
        char who[64];
        while (!c->dead && c->phase == CONN_IDLE && !c->eof && conn_has_room(c)) {
                ssize_t n = recv(c->fd, c->s->buf, CONTROL_REQUEST_MAX, MSG_DONTWAIT | MSG_TRUNC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n < 0) {
                        (void) log_debug_errno(errno, "control: %s: recv: %m", conn_peer(c, who));
                        c->dead = true;
                        return;
                }
                if (n == 0) {
                        c->eof = true;
                        return;
                }
                if ((size_t) n > CONTROL_REQUEST_MAX) {
                        log_debug("control: %s sent a request of %zd bytes: refused", conn_peer(c, who), n);
                        char limit[32];
                        snprintf(limit, sizeof limit, "%u", CONTROL_REQUEST_MAX);
                        answer_error(c, CONTROL_ERROR_TOO_LARGE, "the request exceeds %s bytes", limit);
                        continue;
                }
                conn_request(c, c->s->buf, (size_t) n);
        }
}

int conn_io_cb(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct conn *c = userdata;
        if (revents & EPOLLIN)
                conn_read(c);
        /* EPOLLHUP: the client is gone (both directions); whatever it was
         * waiting for is released with the connection. */
        if (revents & (EPOLLHUP | EPOLLERR))
                c->dead = true;
        conn_done(c);
        return 0;
}

