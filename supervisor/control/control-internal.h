/* SPDX-License-Identifier: MIT */
/*
 * The control socket server's insides, shared by its files (control.h is the
 * contract; the protocol is docs/control-protocol.md):
 *   control.c          the socket: path, directory, modes, stale sockets,
 *                      accepting and authorising clients, the server's life
 *   control-conn.c     connections: answers, the output queue, the stall
 *                      timeout, reading requests, the pump
 *   control-request.c  request dispatch: status/list, start/restart (flights),
 *                      stop, the per-unit and global commands
 *   control-stream.c   the streams: watch and logs -f
 *   control-watch.c    one store event as a watch message (pure; spliced)
 *   control-reexec.c   daemon-reexec's deferred answer
 *   control-ticket.c   answers the manager gives later (tickets)
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
 *
 * Single-threaded: everything runs in tend's sd-event loop.
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "control-proto.h"
#include "control.h"
#include "logs.h"
#include "macro.h"
#include "singleflight.h"
#include "store.h"

typedef struct json_object json;

enum conn_phase {
        CONN_IDLE,    /* reading requests */
        CONN_UNITS,   /* status/list: sending unit batches, then the result */
        CONN_PENDING, /* start/restart/stop: waiting for per-unit answers */
        CONN_WATCH,   /* watch: streaming store events */
        CONN_FOLLOW,  /* logs -f: streaming log lines */
        CONN_REEXEC,  /* daemon-reexec: waiting for the manager's word (QA M1, L1) */
        CONN_TICKET,  /* waiting for the manager's deferred answer (control-ticket.c) */
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
         * by stops_done_cb); reload: on reloads, then stops_done with its
         * result set; stop_list is the head it is on, NULL: neither. */
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
        sd_event_source *idle;  /* closes the connection after the idle timeout */

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
        /* ctl: logs --since/-p: the lines shown (tendctl(1) "logs") */
        int64_t follow_since;  /* CLOCK_REALTIME µs; 0: all */
        int follow_priority;   /* the least urgent syslog level shown, 0–7 */

        /* CONN_REEXEC: the manager abandoned the re-exec; answered by reexec_source */
        bool reexec_abandoned;

        /* CONN_TICKET: the deferred answer's ticket (one reference) */
        struct control_ticket *ticket;
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
        int dir_fd;        /* the socket's directory: every operation on the socket's name goes through it */
        char *name;        /* the socket's name in it */
        dev_t sock_dev;
        ino_t sock_ino;
        uid_t uid;
        gid_t group;
        unsigned max_clients;
        usec_t stall_timeout;
        usec_t idle_timeout;
        /* refusals' log lines: logged in the interval from refusals_begin,
         * and counted beyond CONTROL_REFUSALS_LOGGED (control.c) */
        usec_t refusals_begin;
        unsigned refusals_logged, refusals_suppressed;
        sd_event_source *refusals_timer;

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
        /* QA L5: blocking reloads waiting for control_server_unit_reloaded()
         * (answered, with their result set, through stops_done too) */
        struct pending *reloads;

        /* reexec: the re-exec under way was abandoned (why): the connections
         * marked reexec_abandoned are answered from this defer source. */
        char reexec_why[256];
        sd_event_source *reexec_source;

        /* tickets: connections whose ticket the manager answered are
         * answered from this defer source (control-ticket.c). */
        sd_event_source *tickets_source;
};

/* ---- control-conn.c: answers ---- */

/* {"version": 1, "type": "result", "ok": ok}; NULL on ENOMEM. */
json *answer_result(bool ok);
/* Sets "ok": false, "error" and "message" (printf-style, cut at 511 bytes)
 * on o. 0 or -ENOMEM. */
_printf_(3, 0) int answer_vset_error(json *o, enum control_error e, const char *fmt, va_list ap);
_printf_(3, 4) int answer_set_error(json *o, enum control_error e, const char *fmt, ...);
/* A per-unit answer {"name": unit, "ok": true}; NULL on ENOMEM. */
json *answer_unit(const char *unit);
/* A per-unit failure from an ops errno (-ENOENT: not found; -EOPNOTSUPP of
 * reload: no ExecReload=; -ESRCH: no process; else failed); NULL on ENOMEM. */
json *answer_unit_error(const char *unit, const char *verb, int error);
/* A failed result (printf-style message), queued on c. */
_printf_(3, 4) void answer_error(struct conn *c, enum control_error e, const char *fmt, ...);

/* A stream ends with a failed result; the connection reads requests again. */
#define end_stream(c, e, ...)                          \
        do {                                           \
                answer_error((c), (e), __VA_ARGS__);   \
                conn_end_request(c);                   \
        } while (0)

/* ---- control-conn.c: connections ---- */

/* "client pid P (uid U)" in buf, for the log; returns buf. */
const char *conn_peer(const struct conn *c, char buf[static 64]);
/* Queues msg (taken, also on failure; NULL: out of memory building it). A
 * failure to queue an answer would leave the client waiting forever, so it
 * ends the connection (c->dead). */
void conn_queue(struct conn *c, json *msg);
/* A message of len bytes at the end of c's queue, for the caller to fill
 * (now, before anything sends); NULL when c is dead or out of memory (then
 * c is dead). */
char *conn_queue_reserve(struct conn *c, size_t len);
/* True while the output queue holds less than CONTROL_OUTPUT_MAX bytes:
 * producers add to it only then. */
bool conn_has_room(const struct conn *c);
/* Ends the request in progress (shares, watch, follower, batches released);
 * the connection reads requests again. */
void conn_end_request(struct conn *c);
/* Frees c now (its request ended, its fd closed, unlinked from c->s). */
void conn_free(struct conn *c);
/* The end of every callback that touched c: pumps its output, sets its
 * events, frees it if it is dead. c may be freed on return. */
void conn_done(struct conn *c);
/* Sets the epoll events c needs now (and the watch's source on or off). */
void conn_update_events(struct conn *c);
/* The connection's sd-event io callback (userdata: the conn). */
int conn_io_cb(sd_event_source *src, int fd, uint32_t revents, void *userdata);

/* ---- control.c: clients ---- */

/* A connection on fd (taken), its peer authorised: the new conn, or NULL
 * (refused and answered, or out of memory: fd closed either way). */
struct conn *conn_new(struct control_server *s, int fd);
/* reexec: a connection handed over by the previous tend (fd taken): made
 * O_CLOEXEC and non-blocking again, then conn_new(); NULL as conn_new(). */
struct conn *conn_adopt(struct control_server *s, int fd);
/* reexec: c's fd made to survive the exec (O_CLOEXEC off) or not (on again,
 * cloexec true): whether it worked. */
bool conn_handover_fd(struct conn *c, bool cloexec);

/* ---- control-reexec.c: daemon-reexec's deferred answer ---- */

/* Starts daemon-reexec on c: the answer waits for the manager's word. */
void handle_daemon_reexec(struct conn *c);
/* Whether c waits for daemon-reexec's answer (handed over to the new tend). */
bool conn_reexec_waiting(const struct conn *c);

/* ---- control-ticket.c: deferred answers ---- */

/* Queues a ticket's answer on c (r and items as the manager gave them;
 * items borrowed, NULL when r < 0): the request's own formatter. */
typedef void (*ticket_answer_fn)(struct conn *c, int r, struct json_object *items);
/* c waits for the manager's answer (CONN_TICKET), given to answer: the
 * ticket (c holds its one reference), or NULL on ENOMEM (c unchanged). */
struct control_ticket *conn_ticket_new(struct conn *c, ticket_answer_fn answer);
/* Drops c's ticket (conn_end_request()): a later answer is dropped. */
void conn_ticket_release(struct conn *c);
/* The server's defer source: answers the connections whose ticket was answered. */
int tickets_answered_cb(sd_event_source *src, void *userdata);

/* ---- control-request.c: requests ---- */

/* Decodes and starts one request read from c (buf[0..size), borrowed). */
void conn_request(struct conn *c, const char *buf, size_t size);
/* "NAME" or "NAME.service" (given by the client) → the manager's name in
 * ret (ops.resolve). 0, -ENOENT (also for an empty or over-long name). */
int request_resolve(struct control_server *s, const char *given, char ret[static 256]);
/* status/list: queues the next batch of records, or the final result. 1. */
int produce_units(struct conn *c);
/* Releases what a pending unit holds (its share, its event source, its
 * place on the server's stop lists); its result stays. */
void pending_release(struct pending *p);
/* Frees a --no-block start's share (and unlinks it from the server). */
void detached_free(struct detached *d);
/* The server's defer source: answers the stops reported down. */
int stops_done_cb(sd_event_source *src, void *userdata);
/* The server's defer source: answers the daemon-reexec requests of an
 * abandoned re-exec (control_server_reexec_abandoned()). */
int reexec_abandoned_cb(sd_event_source *src, void *userdata);

/* ---- control-stream.c: watch, logs -f ---- */

void handle_watch(struct conn *c, const struct control_request *q);
void handle_logs(struct conn *c, const struct control_request *q);
/* Queue what the stream holds while there is room: 1 if something was
 * queued (or the stream ended), 0 if not. */
int produce_watch(struct conn *c);
int produce_follow(struct conn *c);
