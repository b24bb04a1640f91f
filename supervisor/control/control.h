/* SPDX-License-Identifier: MIT */
/*
 * The control socket (SPEC §5): tendctl's server side. One SOCK_SEQPACKET
 * socket, one versioned JSON object per message, one request, one answer;
 * `watch` and `logs -f` stream until the client leaves. The protocol is
 * documented in docs/control-protocol.md.
 *
 * The server knows nothing of units: it reads unit records from the store
 * (durable `service/NAME`, the fields of SPEC §5's JSON) and passes them on
 * as they are, asks the manager for actions through struct control_ops, has
 * the manager describe a flight's outcome (describe_outcome), and hears from
 * the manager when a unit is down (control_server_unit_stopped()).
 *
 * Single-threaded: everything runs in tend's sd-event loop.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "control-proto.h"
#include "logs.h"
#include "singleflight.h"
#include "store.h"
#include "time-util.h"

struct json_object;
struct control_ticket; /* a request answered later (below) */

/* A start's outcome as the answer shows it (docs/control-protocol.md
 * "start"): filled by control_ops.describe_outcome. */
struct control_outcome {
        bool ok;
        pid_t main_pid;      /* > 0; 0: none ("main_pid": null) */
        const char *result;  /* the unit's result word (SPEC §4), static; NULL: unknown */
        bool result_failed;  /* result names a failure, i.e. is not "success" */
        char reason[160];    /* why it is not ok beyond the result; "" if nothing more */
};

struct control_ops {
        /* Normalises "NAME" or "NAME.service" into ret (a buffer of 256 bytes)
         * and says whether the unit exists (may instantiate a template
         * instance NAME@INST.service). 0, or -ENOENT (tendctl exits 3). */
        int (*resolve)(void *userdata, const char *name, char ret[static 256]);
        /* start / restart: joins the unit's single flight (SPEC §2.3) and
         * returns the caller's waiter (owned by the server from then on;
         * freeing it releases the client's share). -ENOENT. */
        int (*start)(void *userdata, const char *unit, bool restart, sf_waiter **ret_waiter);
        /* The fields of a flight's outcome: outcome is the copy an SF_ANSWER_OK
         * answer carries (sf_answer.outcome, of the table the manager made),
         * taken: the manager frees it. ret's strings are static or in ret. */
        void (*describe_outcome)(void *userdata, void *outcome, struct control_outcome *ret);
        /* stop: 1 when the unit is down already (inactive or failed, or it
         * has no record): nothing to wait for; 0 when the stop proceeds
         * asynchronously, and the manager calls control_server_unit_stopped()
         * once the record that shows the unit down is in the store (so a
         * client answered then reads that record); -ENOENT. */
        int (*stop)(void *userdata, const char *unit);
        /* reset-failed: unit NULL = every unit. 0, -ENOENT. */
        int (*reset_failed)(void *userdata, const char *unit);
        /* kill: sig to every process of the unit, or only its main process. 0, -ENOENT, -ESRCH. */
        int (*kill)(void *userdata, const char *unit, int sig, bool main_only);
        /* reload: starts ExecReload=. 0: started, and the manager calls
         * control_server_unit_reloaded() when it has ended (possibly from
         * inside this call: a command that cannot be spawned); -ENOENT,
         * -EOPNOTSUPP ("no ExecReload="), -EBUSY (not running, or a control
         * process runs): nothing started, nothing reported. */
        int (*reload)(void *userdata, const char *unit);
        /* The unit's log stream (NULL for units whose output bypasses tend: journal, inherit, null). */
        logs_stream *(*logs)(void *userdata, const char *unit);
        /* daemon-reload: re-reads the unit directory and starts applying the
         * difference (SPEC §5). report, an empty JSON object, receives the
         * arrays "added", "changed", "removed" (unit names) and "failed"
         * ({"name", "message"}: files that do not load; their units are left
         * as they are). 0, or a negative errno when nothing could be read. */
        int (*daemon_reload)(void *userdata, struct json_object *report);
        /* shutdown: start the work and return 0 at once. */
        int (*shutdown)(void *userdata);
        /* Optional (NULL: the record's own field is shown). The number of
         * waiters sharing the unit's flight now (sf_table_get_waiters()), so
         * `status` shows it live: joining a flight is no state transition and
         * does not rewrite the record. */
        int (*waiters)(void *userdata, const char *unit);
        /* ctl: show. Adds the unit's properties to props (an empty JSON
         * object, borrowed), named as systemd names them where it has the
         * property (docs/control-protocol.md "show"). 0, -ENOENT, -ENOMEM. */
        int (*describe)(void *userdata, const char *unit, struct json_object *props);
        /* security: optional (NULL: not-found). Adds the unit's exposure and
         * checks to ret (an empty JSON object, borrowed; docs/control-protocol.md
         * "security"). 0, -ENOENT, -ENOMEM. */
        int (*assess)(void *userdata, const char *unit, struct json_object *ret);
        /* pkg: enable/disable (optional; NULL: refused). Whether tend starts
         * the unit on its own; never starts or stops it. 0, -ENOENT,
         * -EADDRNOTAVAIL (its file is not in DIR), or the errno of writing DIR. */
        int (*set_enabled)(void *userdata, const char *unit, bool enabled);
        /* reexec: daemon-reexec (optional: NULL refuses it). 0 when the
         * re-exec is under way: the request's answer then waits (QA M1,
         * L1) — for control_server_reexec_abandoned() (answered failed with
         * its why), or it is handed over with the exec
         * (control_server_handover_waiting()) and answered by the new tend
         * (control_server_adopt_answered()). A negative errno with why (a
         * buffer of size bytes) saying what refused it: answered at once,
         * tend runs on. May call control_server_reexec_abandoned() itself. */
        int (*daemon_reexec)(void *userdata, char *why, size_t size);
        /* etcd: the cluster view (docs/control-protocol.md "cluster"): appends to items (an
         * empty JSON array, borrowed) one object per host ("hosts"), per unit of every host
         * ("list"), or the singleton unit's holder ("status", unit given). 0; -EOPNOTSUPP
         * (tend runs without --store), -ENOENT (status: no such singleton), -ENOMEM.
         * Optional (NULL: -EOPNOTSUPP). CONTROL_ANSWER_LATER: the answer is deferred — the
         * manager took a reference on ticket (control_ticket_ref()) and answers through it
         * (control_ticket_answer(): r and items as this call's); ticket NULL (out of memory):
         * answer now. */
        int (*cluster)(void *userdata, const char *view, const char *unit, struct json_object *items,
                       struct control_ticket *ticket);
};

struct control_options {
        const char *path;      /* socket path (SPEC §5 rules applied by control_socket_path(), control-proto.h) */
        gid_t control_group;   /* (gid_t) -1: none; else 0660/0710 and this group may connect */
        unsigned max_clients;  /* 0: 2048 (SPEC §7) */
        /* A client with answers pending that reads nothing for this long is
         * dropped (logged). 0: CONTROL_STALL_TIMEOUT_USEC. */
        usec_t stall_timeout_usec;
        /* A connection with no request in progress and nothing to send that
         * sends nothing for this long is closed (logged at debug): 2,048 slots
         * cannot be held forever. 0: $TEND_CONTROL_IDLE_TIMEOUT_MS if set
         * (tests), else CONTROL_IDLE_TIMEOUT_USEC. */
        usec_t idle_timeout_usec;
        /* reexec: > 2, a listening socket already bound at path, handed over
         * by the tend that re-executed (taken: the server's from then on);
         * 0: bind a new one. */
        int listen_fd;
};

#define CONTROL_STALL_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define CONTROL_IDLE_TIMEOUT_USEC (60 * USEC_PER_SEC)
/* Refused connections and accept errors: at most this many log lines per
 * interval; the rest are counted, and the count logged when it ends. */
#define CONTROL_REFUSALS_LOGGED 10u
#define CONTROL_REFUSALS_INTERVAL_USEC (5 * USEC_PER_SEC)
/* Bytes of answers queued per connection before tend stops producing more
 * for it (watch events, log lines, unit batches wait in their own bounded
 * queues meanwhile). Small, so a snapshot is built a few KiB at a time as the
 * client reads: ten watchers of 1,000 units once held 2 MiB that the heap
 * kept after they had gone (docs/benchmarks.md "service mode"). */
#define CONTROL_OUTPUT_MAX (32u * 1024u)

struct control_server;

/* ---- tickets: a request answered later (control-ticket.c) ---- */

/* An op's answer "the manager answers through the ticket later". */
#define CONTROL_ANSWER_LATER 1

/*
 * A request whose answer the manager gives later (ops.cluster's "hosts": the
 * etcd asks answered in tend's loop, docs/control-protocol.md "cluster"). The
 * request's connection waits meanwhile — not cut by the idle timeout, its
 * later requests held in the kernel; a client that hangs up is noticed at
 * once and the ticket detached. Counted: the server holds one reference
 * while the client waits, the manager one from control_ticket_ref() until
 * control_ticket_unref() (NULL accepted; returns t, and NULL). Loop thread only.
 */
struct control_ticket;
struct control_ticket *control_ticket_ref(struct control_ticket *t);
struct control_ticket *control_ticket_unref(struct control_ticket *t);
/* Whether the client still waits for t's answer (false: gone, or answered). */
bool control_ticket_waiting(const struct control_ticket *t);
/* The answer: r (0 or a negative errno, as the op's own return), items (the
 * op's array; a reference is taken: unchanged afterwards). Queued from a
 * later event-loop dispatch, never inside this call; once only; dropped
 * when the client has gone. Accepts NULL. */
void control_ticket_answer(struct control_ticket *t, int r, struct json_object *items);

/*
 * Binds and listens: the socket's directory is created 0700 (0710 owned by
 * the control group), the socket gets mode 0600 (0660). An existing socket
 * file: connect() refused → stale, unlinked and bound; connected → -EADDRINUSE
 * (tend exits 1 "already running"). Every connection is authorised by
 * SO_PEERCRED uid and SO_PEERGROUPS (root, tend's uid, or the control group);
 * a refused peer gets an error answer and is logged.
 * References to event and store are taken; ops (copied) and userdata are
 * borrowed and must outlive the server. opts->path NULL: control_socket_path(NULL).
 * Errors, each logged here in one line with the path (the caller adds none:
 * QA L4): -EADDRINUSE (a live socket: "tend is already running"), -EEXIST
 * (the path exists and is no socket), -EPERM/-ELOOP/-ENOTDIR (a directory
 * another user could change: refused, saying why), -ENAMETOOLONG, -ENOMEM,
 * or the errno of mkdir/bind/listen/chmod/chown; -EINVAL (a missing
 * argument: a programmer's error, not logged).
 */
int control_server_new(sd_event *event, struct store *store, const struct control_ops *ops, void *userdata,
                       const struct control_options *opts, struct control_server **ret);

/*
 * The manager's report that unit (the name ops.resolve gives) is down: the
 * record that says so (state inactive or failed) is in the store. Blocking
 * stops of the unit are answered, from a later event-loop dispatch (never
 * inside this call, which may run in the middle of a request). Any other
 * call is a no-op: the manager reports every such record. Accepts s NULL.
 */
void control_server_unit_stopped(struct control_server *s, const char *unit);

/*
 * QA L5: the manager's report that the ExecReload= run that ops.reload
 * started for unit has ended: why NULL when it succeeded, else a one-line
 * reason (copied: "NAME: reload failed: …"). Blocking reloads of the unit
 * (`tendctl reload`, as systemctl's reload job) are answered from a later
 * event-loop dispatch, never inside this call. Accepts s NULL.
 */
void control_server_unit_reloaded(struct control_server *s, const char *unit, const char *why);

/* Closes every connection (their waiters released: SPEC §2.3, a client that
 * goes away releases its share; --no-block shares too), unlinks the socket if
 * it is still the one bound, removes the directory if the server created it.
 * Accepts NULL; returns NULL. */
struct control_server *control_server_free(struct control_server *s);

/* reexec: writes what every connection has queued, as far as its socket
 * takes it now (never waits): the answers given before tend re-executes.
 * Accepts NULL. */
void control_server_flush(struct control_server *s);

/* reexec: the connections a re-executed tend goes on serving — no request
 * in progress, nothing queued — into fds (at most max; still the server's),
 * their O_CLOEXEC cleared (set again with cloexec true, after a failed
 * exec). Every other connection gets an answer "tend re-executes: retry"
 * (written by control_server_flush()). Returns how many. */
size_t control_server_handover(struct control_server *s, int *fds, size_t max, bool cloexec);

/* reexec: a connection handed over by the previous tend (fd taken), served
 * as a new one (its peer authorised again; refused like any other if not). */
void control_server_adopt(struct control_server *s, int fd);

/* reexec: the re-exec under way is abandoned (the new binary refused the
 * state, did not answer in time, a unit would not settle or resume, the exec
 * failed: why, a one-line reason, copied): every connection waiting for
 * daemon-reexec's answer now is answered failed "not re-executing: WHY",
 * from a later event-loop dispatch (never inside this call). Accepts NULL. */
void control_server_reexec_abandoned(struct control_server *s, const char *why);

/* reexec: the connections waiting for daemon-reexec's answer into fds (at
 * most max; still the server's), their O_CLOEXEC cleared (set again with
 * cloexec true, after a failed exec): the new tend answers them. Never
 * among control_server_handover()'s. Returns how many. Accepts NULL. */
size_t control_server_handover_waiting(struct control_server *s, int *fds, size_t max, bool cloexec);

/* reexec: a connection whose daemon-reexec request the previous tend handed
 * over (fd taken): served as control_server_adopt() does, and answered
 * {"ok": true} — the new tend has taken over. */
void control_server_adopt_answered(struct control_server *s, int fd);

/* reexec: the listening socket's fd (owned by the server), -1 if none. */
int control_server_listen_fd(const struct control_server *s);
