/* SPDX-License-Identifier: MIT */
/*
 * The control socket server (SPEC §5; the protocol is docs/control-protocol.md).
 *
 * One listening SOCK_SEQPACKET socket in tend's sd-event loop; one struct conn
 * per client. A connection serves one request at a time: while a request is
 * in progress (a blocking start, a stop waiting for `inactive`, a status
 * answer being sent in batches, a watch or logs -f stream) its EPOLLIN is off,
 * so later requests wait in the kernel; EPOLLHUP is always reported, so a
 * client that leaves is noticed at once and its shares are released.
 *
 * Output never blocks tend: every answer is queued (struct outmsg) and sent
 * with MSG_DONTWAIT. Producers (unit batches, log lines, watch events) add to
 * the queue only while it holds less than CONTROL_OUTPUT_MAX bytes; beyond
 * that they wait in their own bounded queues (the store watch's, the log
 * follower's), which end the stream when they overflow (lagged / dropped with
 * a note). A client that reads nothing for the stall timeout is dropped.
 *
 * Freeing rule: a conn is freed only at the end of a callback that owns it
 * (conn_done()); everything deeper sets c->dead, so no stack frame ever
 * touches a freed conn. sd-event allows unreferencing a source from inside
 * its own callback.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control-proto.h"
#include "control.h"
#include "log.h"
#include "macro.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

#define ACCEPT_BURST 64u /* connections accepted per wake-up, for fairness */

enum conn_phase {
        CONN_IDLE,    /* reading requests */
        CONN_UNITS,   /* status/list: sending unit batches, then the result */
        CONN_PENDING, /* start/restart/stop: waiting for per-unit answers */
        CONN_WATCH,   /* watch: streaming store events */
        CONN_FOLLOW,  /* logs -f: streaming log lines */
};

struct outmsg {
        struct outmsg *next;
        size_t len;
        char data[];
};

/* One unit of a multi-unit request, waiting for its answer (or answered). */
struct pending {
        struct conn *c;
        char unit[256];
        sf_waiter *waiter;          /* start/restart: the client's share */
        sd_event_source *source;    /* on the waiter's fd */
        /* stop: linked on the server's stops (waiting for the manager's
         * control_server_unit_stopped()) or stops_done (reported, answered
         * by stops_done_cb); stop_list is the head it is on, NULL: neither. */
        struct pending **stop_list;
        struct pending *stop_prev, *stop_next;
        struct json_object *result; /* the unit's answer; NULL while pending */
};

struct conn {
        struct control_server *s;
        struct conn *prev, *next;
        int fd;
        pid_t pid;
        uid_t uid;
        sd_event_source *io, *stall;
        bool stall_armed;

        struct outmsg *out_head, *out_tail;
        size_t out_bytes;

        enum conn_phase phase;
        bool eof;  /* the client sent its last request */
        bool dead; /* free at the end of the current callback */

        /* CONN_UNITS */
        struct store_event **records;
        size_t n_records, next_record;
        struct json_object *final; /* the result sent after the last batch */

        /* CONN_PENDING */
        struct pending *pending;
        size_t n_pending, n_open;

        /* CONN_WATCH */
        struct store_watch *watch;
        sd_event_source *watch_source;

        /* CONN_FOLLOW */
        char follow_unit[256];
        logs_follower *follower;
        bool follow_ready; /* the follower may hold lines */
};

/* A --no-block start's share, held by the server until the flight answers so
 * that the client leaving does not cancel what it asked for (SPEC §2.3). */
struct detached {
        struct control_server *s;
        struct detached *prev, *next;
        char unit[256];
        sf_waiter *waiter;
        sd_event_source *source;
};

struct control_server {
        sd_event *event;
        struct store *store;
        struct control_ops ops;
        void *userdata;

        char *path;
        char *created_dir; /* the directory we made, removed at free */
        dev_t sock_dev;
        ino_t sock_ino;
        uid_t uid;
        gid_t group;
        unsigned max_clients;
        usec_t stall_timeout;

        int listen_fd;
        int reserve_fd; /* spent to accept and refuse when out of fds */
        sd_event_source *listen_source;
        char *buf;      /* CONTROL_REQUEST_MAX bytes: the one request being read */

        struct conn *conns;
        unsigned n_conns;
        struct detached *detached;

        /* Blocking stops: waiting for the unit to be down, and reported down.
         * The answers are sent from a defer source, not from inside
         * control_server_unit_stopped(): the manager reports in the middle of
         * its own work, which may be a request of a connection on the stack. */
        struct pending *stops, *stops_done;
        sd_event_source *stops_source;
};

typedef struct json_object json;

/* ------------------------------------------------------------------------ */
/* Binding: the directory, stale sockets, modes                              */
/* ------------------------------------------------------------------------ */

/* Creates the missing ancestors of dir (0755, as mkdir -p would). */
static int mkdir_parents(const char *dir) {
        _cleanup_free_ char *p = strdup(dir);
        if (!p)
                return -ENOMEM;
        for (char *slash = strchr(p + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
                *slash = '\0';
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                *slash = '/';
        }
        return 0;
}

/*
 * The socket's directory: created 0700 (0710, group = the control group),
 * its ancestors 0755. An existing directory is the operator's and is left
 * as it is (tend never changes the mode of, say, /tmp or a home directory).
 */
static int socket_dir_prepare(struct control_server *s) {
        _cleanup_free_ char *dir = strdup(s->path);
        if (!dir)
                return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0; /* relative name in the cwd, or a file in / */
        *slash = '\0';

        if (mkdir(dir, 0700) < 0) {
                if (errno == EEXIST)
                        return 0;
                if (errno != ENOENT)
                        return negative_errno();
                int r = mkdir_parents(dir);
                if (r < 0)
                        return r;
                if (mkdir(dir, 0700) < 0)
                        return errno == EEXIST ? 0 : negative_errno();
        }
        s->created_dir = TAKE_PTR(dir);
        mode_t mode = s->group != (gid_t) -1 ? 0710 : 0700;
        if (s->group != (gid_t) -1 && chown(s->created_dir, (uid_t) -1, s->group) < 0)
                return negative_errno();
        return chmod(s->created_dir, mode) < 0 ? negative_errno() : 0; /* umask may have cut it */
}

static int sockaddr_fill(const char *path, struct sockaddr_un *ret, socklen_t *ret_len) {
        size_t n = strlen(path);
        if (n == 0)
                return -EINVAL;
        if (n >= sizeof ret->sun_path)
                return -ENAMETOOLONG;
        *ret = (struct sockaddr_un) { .sun_family = AF_UNIX };
        memcpy(ret->sun_path, path, n);
        *ret_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n + 1);
        return 0;
}

/*
 * The path exists: is a tend listening there? connect() refused → stale
 * (0: unlinked, bind again); accepted or backlog full → -EADDRINUSE; no
 * socket at all → -EEXIST. ENOENT (gone meanwhile) → 0.
 */
static int stale_socket_remove(const char *path, const struct sockaddr_un *sa, socklen_t len) {
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (const struct sockaddr *) sa, len) == 0)
                return -EADDRINUSE;
        switch (errno) {
        case ECONNREFUSED:
                log_info("control socket %s: stale (nobody listening), replaced", path);
                return unlink(path) < 0 && errno != ENOENT ? negative_errno() : 0;
        case ENOENT:
                return 0;
        case EAGAIN:      /* a live listener with a full backlog */
        case EPROTOTYPE:  /* something else listens there, with another socket type */
                return -EADDRINUSE;
        default:
                return negative_errno();
        }
}

static int socket_bind(struct control_server *s) {
        struct sockaddr_un sa;
        socklen_t len;
        int r = sockaddr_fill(s->path, &sa, &len);
        if (r < 0)
                return r;

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        for (int attempt = 0; bind(fd, (struct sockaddr *) &sa, len) < 0; attempt++) {
                if (errno != EADDRINUSE || attempt > 0)
                        return negative_errno();
                r = stale_socket_remove(s->path, &sa, len);
                if (r < 0)
                        return r;
        }

        /* The directory (0700/0710) already shuts others out while the mode
         * is still the umask's; SO_PEERCRED is checked on every connection anyway. */
        bool group = s->group != (gid_t) -1;
        struct stat st;
        if ((group && chown(s->path, (uid_t) -1, s->group) < 0) || chmod(s->path, group ? 0660 : 0600) < 0 ||
            stat(s->path, &st) < 0 || listen(fd, SOMAXCONN) < 0) {
                r = negative_errno();
                (void) unlink(s->path);
                return r;
        }
        s->sock_dev = st.st_dev;
        s->sock_ino = st.st_ino;
        s->listen_fd = TAKE_FD(fd);
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

static json *result_new(bool ok) {
        _cleanup_json_ json *o = control_message_new("result");
        if (!o || control_add_bool(o, "ok", ok) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* Sets "ok": false, "error" and "message" (printf-style) on o. */
_printf_(3, 0) static int vset_error(json *o, enum control_error e, const char *fmt, va_list ap) {
        char msg[512];
        vsnprintf(msg, sizeof msg, fmt, ap);
        if (control_add_bool(o, "ok", false) < 0 || control_add_string(o, "error", control_error_to_string(e)) < 0 ||
            control_add_string(o, "message", msg) < 0)
                return -ENOMEM;
        return 0;
}

_printf_(3, 4) static int set_error(json *o, enum control_error e, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = vset_error(o, e, fmt, ap);
        va_end(ap);
        return r;
}

/* A per-unit answer {"name": unit, "ok": true}. */
static json *unit_result_new(const char *unit) {
        _cleanup_json_ json *o = json_object_new_object();
        if (!o || control_add_string(o, "name", unit) < 0 || control_add_bool(o, "ok", true) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* A per-unit failure from an ops errno: -ENOENT not found, else failed. */
static json *unit_error_new(const char *unit, const char *verb, int error) {
        _cleanup_json_ json *o = unit_result_new(unit);
        if (!o)
                return NULL;
        int r;
        if (error == -ENOENT)
                r = set_error(o, CONTROL_ERROR_NOT_FOUND, "unit \"%s\" not found", unit);
        else if (error == -EOPNOTSUPP && streq(verb, "reload"))
                r = set_error(o, CONTROL_ERROR_FAILED, "%s: no ExecReload=", unit);
        else if (error == -ESRCH)
                r = set_error(o, CONTROL_ERROR_FAILED, "%s: no process to signal", unit);
        else
                r = set_error(o, CONTROL_ERROR_FAILED, "%s of %s failed: %s", verb, unit, strerror(-error));
        return r < 0 ? NULL : TAKE_PTR(o);
}

/* The request's result from its per-unit answers: ok when all are; the first
 * failure's error and message are copied to the top (tendctl's exit status). */
static json *result_from_units(struct pending *p, size_t n) {
        _cleanup_json_ json *o = result_new(true);
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

/* ------------------------------------------------------------------------ */
/* Connections: output queue, events, lifetime                               */
/* ------------------------------------------------------------------------ */

static void conn_update_events(struct conn *c);
static void conn_done(struct conn *c);

static const char *peer(const struct conn *c, char buf[static 64]) {
        snprintf(buf, 64, "client pid %d (uid %u)", (int) c->pid, (unsigned) c->uid);
        return buf;
}

/* Queues msg (taken, also on failure). A failure to queue an answer leaves
 * the client waiting forever, so it ends the connection. */
static void conn_queue(struct conn *c, json *msg) {
        _cleanup_json_ json *o = msg;
        const char *text;
        size_t len;
        char who[64];

        if (c->dead)
                return;
        if (!o || control_message_text(o, &text, &len) < 0) {
                log_warning("control: %s: out of memory building an answer: dropped", peer(c, who));
                c->dead = true;
                return;
        }
        struct outmsg *m = malloc(sizeof *m + len);
        if (!m) {
                log_warning("control: %s: out of memory queueing an answer: dropped", peer(c, who));
                c->dead = true;
                return;
        }
        m->next = NULL;
        m->len = len;
        memcpy(m->data, text, len);
        if (c->out_tail)
                c->out_tail->next = m;
        else
                c->out_head = m;
        c->out_tail = m;
        c->out_bytes += len;
}

static bool conn_has_room(const struct conn *c) {
        return c->out_bytes < CONTROL_OUTPUT_MAX;
}

static int stall_cb(sd_event_source *src, uint64_t usec, void *userdata) {
        struct conn *c = userdata;
        char who[64];
        log_notice("control: %s read nothing for %" PRIu64 " ms with answers pending: dropped", peer(c, who),
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
                if (n < 0 && errno == EMSGSIZE)
                        log_warning("control: %s: answer of %zu bytes exceeds the socket buffer: not sent",
                                    peer(c, who), m->len);
                else if (n < 0) {
                        log_debug("control: %s: send: %s", peer(c, who), strerror(errno));
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

static void out_free(struct conn *c) {
        while (c->out_head) {
                struct outmsg *m = c->out_head;
                c->out_head = m->next;
                free(m);
        }
        c->out_tail = NULL;
        c->out_bytes = 0;
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

static void pending_release(struct pending *p) {
        p->source = sd_event_source_disable_unref(p->source);
        p->waiter = sf_waiter_free(p->waiter); /* SPEC §2.3: leaving releases the share */
        stop_unlink(p);
}

/* Ends the request in progress: every share, watch, follower and batch it
 * holds is released; the connection reads requests again. */
static void conn_end_request(struct conn *c) {
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
        c->phase = CONN_IDLE;
}

static void conn_free(struct conn *c) {
        struct control_server *s = c->s;

        conn_end_request(c);
        out_free(c);
        c->io = sd_event_source_disable_unref(c->io);
        c->stall = sd_event_source_disable_unref(c->stall);
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

/* ------------------------------------------------------------------------ */
/* Producers: what a request in progress adds to the queue when there is room */
/* ------------------------------------------------------------------------ */

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
static int produce_units(struct conn *c) {
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

static json *watch_value(const struct store_event *ev) {
        json *v = NULL;
        if (control_json_parse(ev->value, ev->value_size, &v) < 0 || !v)
                v = json_object_new_string_len(ev->value, (int) ev->value_size);
        return v;
}

/* One store event as a message (docs/control-protocol.md "watch"). */
static json *watch_message(const struct store_event *ev) {
        bool marker = ev->type == STORE_EVENT_SNAPSHOT_DONE;
        _cleanup_json_ json *o = control_message_new(marker ? "snapshot-done" : "event");
        if (!o || control_add_string(o, "keyspace", store_keyspace_to_string(ev->keyspace)) < 0 ||
            control_add_int64(o, "revision", (int64_t) ev->revision) < 0)
                return NULL;
        if (marker)
                return TAKE_PTR(o);
        if (control_add_string(o, "event", store_event_type_to_string(ev->type)) < 0 ||
            control_add_string(o, "key", ev->key) < 0)
                return NULL;
        if (ev->type == STORE_EVENT_DELETE) {
                if (control_add_string(o, "cause", store_cause_to_string(ev->cause)) < 0 ||
                    control_add_int64(o, "prev_revision", (int64_t) ev->prev_revision) < 0)
                        return NULL;
                return TAKE_PTR(o);
        }
        if (json_object_object_add(o, "value", watch_value(ev)) < 0)
                return NULL;

        /* A value whose text (escaped) would not fit one message is omitted. */
        const char *text;
        size_t len;
        if (control_message_text(o, &text, &len) < 0)
                return NULL;
        if (len > CONTROL_MESSAGE_MAX - 64 &&
            (json_object_object_add(o, "value", NULL) < 0 || control_add_bool(o, "value_omitted", true) < 0))
                return NULL;
        return TAKE_PTR(o);
}

/* A failed result, queued. */
_printf_(3, 4) static void answer_error(struct conn *c, enum control_error e, const char *fmt, ...) {
        json *o = result_new(false);
        va_list ap;
        va_start(ap, fmt);
        if (o && vset_error(o, e, fmt, ap) < 0) {
                json_object_put(o);
                o = NULL;
        }
        va_end(ap);
        conn_queue(c, o);
}

/* A stream ends with a failed result; the connection reads requests again. */
#define end_stream(c, e, ...)                          \
        do {                                           \
                answer_error((c), (e), __VA_ARGS__);   \
                conn_end_request(c);                   \
        } while (0)

static int produce_watch(struct conn *c) {
        int produced = 0;
        char who[64];
        while (conn_has_room(c) && !c->dead) {
                struct store_event *ev = NULL;
                int r = store_watch_next(c->watch, &ev);
                if (r == -EAGAIN)
                        break;
                if (r == -ENOBUFS) {
                        log_notice("control: %s fell behind its watch: told to re-watch", peer(c, who));
                        end_stream(c, CONTROL_ERROR_LAGGED, "%s", "the watch fell behind; watch again and dedupe by revision");
                        return 1;
                }
                if (r < 0) {
                        end_stream(c, CONTROL_ERROR_STREAM_ENDED, "the store ended the watch: %s", strerror(-r));
                        return 1;
                }
                conn_queue(c, watch_message(ev));
                store_event_unref(ev);
                produced = 1;
        }
        return produced;
}

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
            control_add_string(o, "stream", origin_name(l->origin)) < 0)
                return NULL;
        json *t = json_object_new_string_len(text, (int) n);
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

static int produce_follow(struct conn *c) {
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
                queue_line(c, c->follow_unit, &line);
                produced = 1;
        }
        return produced;
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

static void conn_update_events(struct conn *c) {
        uint32_t ev = 0;
        if (c->dead)
                return;
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
static void conn_done(struct conn *c) {
        if (!c->dead)
                conn_pump(c);
        if (c->dead)
                conn_free(c);
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

static const char *unit_arg(const struct control_request *q, size_t i) {
        return control_request_unit(q, i);
}

/* "NAME" or "NAME.service" → the manager's name. 0, -ENOENT. */
static int resolve(struct control_server *s, const char *given, char ret[static 256]) {
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
                int r = resolve(c->s, unit_arg(q, i), name);
                if (r >= 0) {
                        snprintf(key, sizeof key, CONTROL_RECORD_PREFIX "%s", name);
                        r = store_get(c->s->store, STORE_DURABLE, key, &ev);
                }
                if (r >= 0 && (r = records_add(c, ev)) >= 0)
                        continue;
                if (r == -ENOMEM)
                        return r;
                json *e = unit_error_new(unit_arg(q, i), "status", -ENOENT);
                if (!e || json_object_array_add(missing, e) < 0)
                        return -ENOMEM;
                if (json_object_array_length(missing) == 1 &&
                    set_error(c->final, CONTROL_ERROR_NOT_FOUND, "unit \"%s\" not found", unit_arg(q, i)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void handle_status(struct conn *c, const struct control_request *q) {
        int r;
        c->final = result_new(true);
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
                return set_error(o, CONTROL_ERROR_FAILED, "%s did not start: %s", unit, out->reason);
        if (out->reason[0])
                return set_error(o, CONTROL_ERROR_FAILED, "%s failed to start (result %s): %s", unit, result,
                                 out->reason);
        return set_error(o, CONTROL_ERROR_FAILED, "%s failed to start (result %s)", unit, result);
}

/* The answer of a start/restart; a->outcome is taken (the manager
 * describes and frees it). */
static json *start_result(struct control_server *s, const char *unit, sf_answer *a) {
        struct control_outcome out = { .ok = false };
        bool described = a->outcome != NULL;
        if (described)
                s->ops.describe_outcome(s->userdata, TAKE_PTR(a->outcome), &out);

        _cleanup_json_ json *o = unit_result_new(unit);
        int r;
        if (!o || control_add_string(o, "answer", sf_status_to_string(a->status)) < 0)
                return NULL;
        if (a->status == SF_ANSWER_CANCELLED)
                r = set_error(o, CONTROL_ERROR_CANCELLED, "start of %s was cancelled (a stop)", unit);
        else if (a->status != SF_ANSWER_OK || !described)
                r = set_error(o, CONTROL_ERROR_ABANDONED, "start of %s was abandoned (see tend's log)", unit);
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
                return unit_error_new(unit, "start", r);
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

static void detached_free(struct detached *d) {
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
                p->result = r < 0 ? unit_error_new(p->unit, verb, r) : unit_result_new(p->unit);
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
        p->result = unit_error_new(p->unit, verb, r);
}

/* --- stop: wait for the manager to report the unit down --- */

/* Answers the stops the manager reported (control_server_unit_stopped()).
 * A conn may be freed by conn_done(), and its pendings with it (unlinked
 * from stops_done by pending_release()), so the list is read from its head
 * each time. */
static int stops_done_cb(sd_event_source *src, void *userdata) {
        struct control_server *s = userdata;
        while (s->stops_done) {
                struct pending *p = s->stops_done;
                struct conn *c = p->c;
                pending_release(p);
                p->result = unit_result_new(p->unit);
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

static void stop_one(struct conn *c, struct pending *p, bool no_block) {
        struct control_server *s = c->s;
        int r = s->ops.stop(s->userdata, p->unit);
        if (r == 0 && !no_block) { /* not down yet: the manager reports when it is */
                stop_link(p, &s->stops);
                c->n_open++;
                return;
        }
        p->result = r < 0 ? unit_error_new(p->unit, "stop", r) : unit_result_new(p->unit);
}

/* --- the per-unit commands --- */

static int simple_op(struct conn *c, const struct control_request *q, const char *unit) {
        struct control_server *s = c->s;
        switch (q->cmd) {
        case CONTROL_CMD_RESET_FAILED:
                return s->ops.reset_failed(s->userdata, unit);
        case CONTROL_CMD_RELOAD:
                return s->ops.reload(s->userdata, unit);
        case CONTROL_CMD_KILL:
                return s->ops.kill(s->userdata, unit, q->signal, q->main_only);
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
                int r = resolve(c->s, unit_arg(q, i), p->unit);
                if (r < 0) {
                        p->result = unit_error_new(unit_arg(q, i), verb, r);
                        continue;
                }
                if (q->cmd == CONTROL_CMD_START || q->cmd == CONTROL_CMD_RESTART)
                        start_one(c, p, q->cmd == CONTROL_CMD_RESTART, no_block);
                else if (q->cmd == CONTROL_CMD_STOP)
                        stop_one(c, p, no_block);
                else {
                        r = simple_op(c, q, p->unit);
                        p->result = r < 0 ? unit_error_new(p->unit, verb, r) : unit_result_new(p->unit);
                }
        }
        for (size_t i = 0; i < c->n_pending && !c->dead; i++)
                if (!c->pending[i].result && !c->pending[i].source && !c->pending[i].stop_list) {
                        conn_queue(c, NULL); /* out of memory building an answer */
                        return;
                }
        pending_check_done(c);
}

/* daemon-reload: the manager's report in the result. Files that do not
 * load fail the request (each is a failed entry of "units", the first one's
 * message at the top); the rest of the difference is applied all the same. */
static json *reload_result(json *report) {
        _cleanup_json_ json *o = result_new(true);
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
        for (size_t i = 0; failed && i < json_object_array_length(failed); i++) {
                json *f = json_object_array_get_idx(failed, i);
                const char *name = "?", *message = "does not load";
                (void) control_get_string(f, "name", &name);
                (void) control_get_string(f, "message", &message);
                _cleanup_json_ json *e = unit_result_new(name);
                if (!e || set_error(e, CONTROL_ERROR_FAILED, "%s: not reloaded, left as it is: %s", name, message) < 0 ||
                    (i == 0 && set_error(o, CONTROL_ERROR_FAILED, "%s: not reloaded, left as it is: %s", name, message) < 0) ||
                    json_object_array_add(units, e) < 0)
                        return NULL;
                TAKE_PTR(e);
        }
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
        if (q->cmd == CONTROL_CMD_RESET_FAILED)
                r = s->ops.reset_failed(s->userdata, NULL);
        else
                r = s->ops.shutdown(s->userdata);
        if (r < 0) {
                answer_error(c, CONTROL_ERROR_FAILED, "%s", strerror(-r));
                return;
        }
        conn_queue(c, result_new(true));
}

/* --- logs --- */

struct ring_ctx {
        struct conn *c;
        const char *unit;
};

static int ring_line(const struct logs_line *line, void *userdata) {
        struct ring_ctx *x = userdata;
        queue_line(x->c, x->unit, line);
        return x->c->dead ? -ENOMEM : 0;
}

static void follower_notify(logs_follower *f, void *userdata) {
        struct conn *c = userdata;
        c->follow_ready = true;
        conn_update_events(c);
}

/* The ring is copied into the queue at once (bounded by the ring's own size)
 * and the follower attached in the same loop iteration: no gap, no overlap. */
static void handle_logs(struct conn *c, const struct control_request *q) {
        struct control_server *s = c->s;
        logs_stream *stream = NULL;
        char unit[256];
        int64_t lines = q->lines;
        bool follow = q->follow;

        if (resolve(s, unit_arg(q, 0), unit) < 0)
                answer_error(c, CONTROL_ERROR_NOT_FOUND, "unit \"%s\" not found", unit_arg(q, 0));
        else if (!(stream = s->ops.logs(s->userdata, unit)))
                answer_error(c, CONTROL_ERROR_FAILED,
                             "%s: its output does not pass through tend (journal, null or inherit): no log ring", unit);
        if (!stream)
                return;

        struct ring_ctx x = { .c = c, .unit = unit };
        int r = logs_stream_ring(stream, lines < 0 ? SIZE_MAX : (size_t) lines, ring_line, &x);
        if (r < 0 || c->dead)
                return;
        if (!follow) {
                conn_queue(c, result_new(true));
                return;
        }
        snprintf(c->follow_unit, sizeof c->follow_unit, "%s", unit);
        r = logs_stream_follow(stream, 0, follower_notify, c, &c->follower);
        if (r < 0)
                answer_error(c, CONTROL_ERROR_FAILED, "cannot follow the log: %s", strerror(-r));
        else
                c->phase = CONN_FOLLOW;
}

/* --- watch --- */

static int watch_cb(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        conn_done(userdata);
        return 0;
}

static void handle_watch(struct conn *c, const struct control_request *q) {
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

/* --- dispatch --- */

/* An unsupported-version answer names the versions tend speaks. */
static void answer_version(struct conn *c, const char *reason) {
        json *o = result_new(false);
        json *v = json_object_new_array();
        if (o && set_error(o, CONTROL_ERROR_UNSUPPORTED_VERSION, "%s", reason) >= 0 && v &&
            json_object_array_add(v, json_object_new_int(CONTROL_PROTOCOL_VERSION)) >= 0 &&
            json_object_object_add(o, "supported", TAKE_PTR(v)) >= 0) {
                conn_queue(c, o);
                return;
        }
        json_object_put(v);
        json_object_put(o);
        conn_queue(c, NULL);
}

static void conn_request(struct conn *c, const char *buf, size_t size) {
        struct control_request q;
        char who[64], reason[256];

        int r = control_request_decode(buf, size, &q, reason, sizeof reason);
        if (r == -EPROTONOSUPPORT) {
                answer_version(c, reason);
                return;
        }
        if (r < 0) {
                log_debug("control: %s sent a bad request: %s", peer(c, who), r == -ENOMEM ? strerror(ENOMEM) : reason);
                if (r == -ENOMEM)
                        conn_queue(c, NULL);
                else
                        answer_error(c, CONTROL_ERROR_BAD_REQUEST, "%s", reason);
                return;
        }
        log_debug("control: %s: %s", peer(c, who), control_command_to_string(q.cmd));
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
        case CONTROL_CMD_SHUTDOWN:
                handle_global(c, &q);
                break;
        default:
                handle_units(c, &q);
                break;
        }
        control_request_done(&q);
}

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
                        log_debug("control: %s: recv: %s", peer(c, who), strerror(errno));
                        c->dead = true;
                        return;
                }
                if (n == 0) {
                        c->eof = true;
                        return;
                }
                if ((size_t) n > CONTROL_REQUEST_MAX) {
                        log_debug("control: %s sent a request of %zd bytes: refused", peer(c, who), n);
                        char limit[32];
                        snprintf(limit, sizeof limit, "%u", CONTROL_REQUEST_MAX);
                        answer_error(c, CONTROL_ERROR_TOO_LARGE, "the request exceeds %s bytes", limit);
                        continue;
                }
                conn_request(c, c->s->buf, (size_t) n);
        }
}

static int conn_io_cb(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
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

/* ------------------------------------------------------------------------ */
/* Accepting and authorising                                                 */
/* ------------------------------------------------------------------------ */

static bool groups_include(int fd, gid_t group) {
        gid_t small[64], *g = small;
        _cleanup_free_ gid_t *big = NULL;
        socklen_t len = sizeof small;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0) {
                if (errno != ERANGE || !(big = malloc(len)))
                        return false;
                g = big;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0)
                        return false;
        }
        for (size_t i = 0; i < len / sizeof(gid_t); i++)
                if (g[i] == group)
                        return true;
        return false;
}

/* SPEC §5: root, tend's own uid, or the control group (primary or supplementary). */
static bool peer_authorised(const struct control_server *s, int fd, const struct ucred *cred) {
        if (cred->uid == 0 || cred->uid == s->uid)
                return true;
        if (s->group == (gid_t) -1)
                return false;
        return cred->gid == s->group || groups_include(fd, s->group);
}

/*
 * Answers a connection tend will not serve, and closes it. What the client
 * already sent is read first: closing a unix socket with unread data makes
 * the peer's next recv() fail with ECONNRESET before it sees our answer.
 * (A request sent after this drain can still race; tendctl retries its recv
 * once after ECONNRESET for that reason.)
 */
static void refuse(struct control_server *s, int fd, enum control_error e, const char *message) {
        _cleanup_json_ json *o = result_new(false);
        const char *text;
        size_t len;
        if (o && set_error(o, e, "%s", message) >= 0 && control_message_text(o, &text, &len) >= 0)
                (void) send(fd, text, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        for (unsigned i = 0; i < 16 && recv(fd, s->buf, CONTROL_REQUEST_MAX, MSG_DONTWAIT | MSG_TRUNC) > 0; i++)
                ;
        safe_close(fd);
}

static void conn_new(struct control_server *s, int fd) {
        struct ucred cred = { .pid = 0, .uid = (uid_t) -1, .gid = (gid_t) -1 };
        socklen_t len = sizeof cred;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || !peer_authorised(s, fd, &cred)) {
                log_warning("control: refused client pid %d uid %u gid %u: not root, not tend's user%s",
                            (int) cred.pid, (unsigned) cred.uid, (unsigned) cred.gid,
                            s->group != (gid_t) -1 ? ", not in the control group" : "");
                refuse(s, fd, CONTROL_ERROR_PERMISSION_DENIED, "permission denied: not root, not tend's user, "
                              "not in tend's control group");
                return;
        }
        if (s->n_conns >= s->max_clients) {
                log_warning("control: refused client pid %d: %u clients connected (the limit)", (int) cred.pid, s->n_conns);
                refuse(s, fd, CONTROL_ERROR_TOO_MANY_CLIENTS, "too many clients connected to tend");
                return;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
                log_warning("control: out of memory accepting client pid %d", (int) cred.pid);
                refuse(s, fd, CONTROL_ERROR_FAILED, "tend is out of memory");
                return;
        }
        *c = (struct conn) { .s = s, .fd = fd, .pid = cred.pid, .uid = cred.uid, .next = s->conns };
        if (sd_event_add_io(s->event, &c->io, fd, EPOLLIN, conn_io_cb, c) < 0) {
                free(c);
                refuse(s, fd, CONTROL_ERROR_FAILED, "tend cannot watch the connection");
                return;
        }
        if (s->conns)
                s->conns->prev = c;
        s->conns = c;
        s->n_conns++;
}

/* Out of fds: accepting with the reserve fd spent lets tend answer the
 * client instead of leaving the listener readable (a busy loop). */
static void accept_without_fds(struct control_server *s) {
        s->reserve_fd = safe_close(s->reserve_fd);
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0)
                refuse(s, fd, CONTROL_ERROR_FAILED, "tend is out of file descriptors");
        s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        log_warning("control: out of file descriptors: a client was refused");
}

static int listen_cb(sd_event_source *src, int lfd, uint32_t revents, void *userdata) {
        struct control_server *s = userdata;
        for (unsigned i = 0; i < ACCEPT_BURST; i++) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd >= 0) {
                        conn_new(s, fd);
                        continue;
                }
                if (errno == EINTR || errno == ECONNABORTED)
                        continue;
                if ((errno == EMFILE || errno == ENFILE) && s->reserve_fd >= 0) {
                        accept_without_fds(s);
                        continue;
                }
                if (errno != EAGAIN)
                        log_warning("control: accept: %s", strerror(errno));
                break;
        }
        return 0;
}

/* ------------------------------------------------------------------------ */
/* The server                                                                */
/* ------------------------------------------------------------------------ */

static bool ops_complete(const struct control_ops *o) {
        return o && o->resolve && o->start && o->describe_outcome && o->stop && o->reset_failed && o->kill &&
               o->reload && o->logs && o->daemon_reload && o->shutdown;
}

static int server_listen(struct control_server *s) {
        int r = socket_dir_prepare(s);
        if (r < 0)
                return log_error_errno(r, "control socket %s: cannot create its directory: %s", s->path, strerror(-r));
        r = socket_bind(s);
        if (r == -EADDRINUSE)
                return log_error_errno(r, "control socket %s: tend is already running", s->path);
        if (r == -EEXIST)
                return log_error_errno(r, "control socket %s: the path exists and is not a socket", s->path);
        if (r < 0)
                return log_error_errno(r, "control socket %s: %s", s->path, strerror(-r));
        r = sd_event_add_io(s->event, &s->listen_source, s->listen_fd, EPOLLIN, listen_cb, s);
        if (r < 0)
                return log_error_errno(r, "control socket %s: cannot watch it: %s", s->path, strerror(-r));
        return 0;
}

int control_server_new(sd_event *event, struct store *store, const struct control_ops *ops, void *userdata,
                       const struct control_options *opts, struct control_server **ret) {
        if (!event || !store || !ops_complete(ops) || !ret)
                return -EINVAL;

        struct control_server *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        *s = (struct control_server) {
                .event = sd_event_ref(event),
                .store = store_ref(store),
                .ops = *ops,
                .userdata = userdata,
                .uid = geteuid(),
                .group = opts ? opts->control_group : (gid_t) -1,
                .max_clients = opts && opts->max_clients ? opts->max_clients : CONTROL_MAX_CLIENTS_DEFAULT,
                .stall_timeout = opts && opts->stall_timeout_usec ? opts->stall_timeout_usec : CONTROL_STALL_TIMEOUT_USEC,
                .listen_fd = -1,
                .reserve_fd = -1,
        };
        int r = control_socket_path(opts ? opts->path : NULL, &s->path);
        if (r < 0)
                log_error_errno(r, "control socket: no path (set --control-socket, $TEND_SOCKET or $XDG_RUNTIME_DIR)");
        else if (!(s->buf = malloc(CONTROL_REQUEST_MAX)))
                r = -ENOMEM;
        else if ((s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
                r = log_error_errno(negative_errno(), "control socket: cannot open /dev/null");
        else if ((r = sd_event_add_defer(event, &s->stops_source, stops_done_cb, s)) < 0 ||
                 (r = sd_event_source_set_enabled(s->stops_source, SD_EVENT_OFF)) < 0)
                log_error_errno(r, "control socket: cannot add an event source: %m");
        else
                r = server_listen(s);
        if (r < 0) {
                control_server_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

/* The socket file is removed only if it is still ours: a tend started after
 * us (whose stale check unlinked our file) keeps its own. */
static void socket_unlink(struct control_server *s) {
        struct stat st;
        if (s->listen_fd < 0 || !s->path)
                return;
        if (stat(s->path, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino)
                (void) unlink(s->path);
        if (s->created_dir)
                (void) rmdir(s->created_dir); /* fails harmlessly if something else lives there */
}

struct control_server *control_server_free(struct control_server *s) {
        if (!s)
                return NULL;
        while (s->conns)
                conn_free(s->conns);
        while (s->detached)
                detached_free(s->detached);
        s->stops_source = sd_event_source_disable_unref(s->stops_source);
        s->listen_source = sd_event_source_disable_unref(s->listen_source);
        socket_unlink(s);
        safe_close(s->listen_fd);
        safe_close(s->reserve_fd);
        free(s->created_dir);
        free(s->path);
        free(s->buf);
        store_unref(s->store);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}
