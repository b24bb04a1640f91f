/* SPDX-License-Identifier: MIT */
/*
 * The sd_notify protocol, both ways (SPEC §1 "Under systemd", §4 "Readiness
 * and notify"; docs/notify.md):
 *
 *  - notify_parse(): one datagram's assignments (READY=1, STATUS=, …), pure,
 *    so a fuzzer and the unit tests drive it alone;
 *  - struct notify_socket: a unit's NOTIFY_SOCKET, an abstract AF_UNIX
 *    datagram socket with SO_PASSCRED in tend's sd-event loop. It hands each
 *    datagram, parsed, with the sender's credentials to its owner (the
 *    manager), which decides whether the sender may speak for the unit
 *    (NotifyAccess=, unit.h) and logs a refusal through
 *    notify_socket_log_rejected();
 *  - struct notify_upstream: tend's own notifications to the manager that
 *    started it ($NOTIFY_SOCKET): READY=1, STATUS=, WATCHDOG=1, RELOADING=1,
 *    STOPPING=1, EXTEND_TIMEOUT_USEC=.
 *
 * Every fd is O_CLOEXEC|O_NONBLOCK. Single-threaded: every function runs in
 * tend's event loop. Errors are negative errnos.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "time-util.h"

/* SPEC §7: bigger datagrams are dropped whole. */
#define NOTIFY_DATAGRAM_MAX 4096
/* Datagrams read per wake-up of a unit's socket, so that a flood yields to
 * every other source of the loop between batches (SPEC §4 "a flood never
 * blocks tend"). */
#define NOTIFY_DISPATCH_MAX 32
/* Rejected senders are logged at most NOTIFY_REJECT_LOG_BURST times per
 * interval per socket; the next line logged counts the ones that were not. */
#define NOTIFY_REJECT_LOG_INTERVAL_USEC (1 * USEC_PER_SEC)
#define NOTIFY_REJECT_LOG_BURST 5

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * The recognised assignments of one datagram (SPEC §4). Like systemd, the
 * first assignment of a key counts; unknown keys are ignored; an invalid
 * value (MAINPID=abc, STATUS= that is not UTF-8) is ignored and counted in
 * n_invalid, the rest of the datagram still counts.
 */
struct notify_message {
        bool ready;            /* READY=1 */
        bool stopping;         /* STOPPING=1 */
        bool reloading;        /* RELOADING=1 */
        bool watchdog_ping;    /* WATCHDOG=1 */
        bool watchdog_trigger; /* WATCHDOG=trigger */
        const char *status;    /* STATUS=, NUL-terminated inside the parsed buffer; NULL if absent */
        pid_t main_pid;        /* MAINPID=, > 0; 0 if absent */
        bool has_extend_timeout;
        usec_t extend_timeout_usec; /* EXTEND_TIMEOUT_USEC= */
        int status_errno;      /* ERRNO=, 1…4095; 0 if absent (ERRNO=0 clears: has_errno) */
        bool has_errno;
        unsigned n_invalid;    /* assignments of a recognised key with an invalid value */
};

/*
 * Parses buf[0..size) — "KEY=VALUE" lines separated by '\n' — into *ret.
 * buf is modified in place (each '\n' becomes a NUL) and must have room for
 * size + 1 bytes: ret->status points into it. Returns 0; -EMSGSIZE (size >
 * NOTIFY_DATAGRAM_MAX), -EBADMSG (an embedded NUL byte: the datagram is
 * dropped whole, as systemd does), -EINVAL (NULL arguments). *ret is written
 * only on success.
 */
int notify_parse(char *buf, size_t size, struct notify_message *ret);

/* ------------------------------------------------------------------------ */
/* A unit's socket                                                           */
/* ------------------------------------------------------------------------ */

struct notify_socket;

/*
 * Called once per accepted datagram (NOTIFY_DATAGRAM_MAX at most, no NUL):
 * sender is its SCM_CREDENTIALS pid (0 when it has none in tend's pid
 * namespace); m is valid during the call only. Every fd the datagram carried
 * has been closed already (which answers systemd-notify's BARRIER=1).
 */
typedef void (*notify_handler_t)(void *userdata, pid_t sender, const struct notify_message *m);

/*
 * Creates a datagram socket bound to a short abstract address the kernel
 * picks (autobind: unique in the network namespace, so two tends sharing one
 * never collide), with SO_PASSCRED. With event non-NULL it is added to that
 * loop (EPOLLIN); without, the caller calls notify_socket_dispatch() (tests).
 * name names the owner (the unit) in log lines; it is copied. *ret is the
 * caller's (notify_socket_free). Errors: -EINVAL, -ENOMEM, socket errors.
 *
 * parsefix: with dir non-NULL the socket is bound to a path instead,
 * DIR/<16 random hex digits> (DIR made 0755 if missing; the socket file
 * 0666: any user may connect, the credentials decide who may speak), for a
 * unit in a network namespace of its own (PrivateNetwork=), which cannot
 * reach an abstract address. notify_socket_free() removes the file. Errors
 * also: mkdir/bind/chmod errors, -ENAMETOOLONG (dir too long for sun_path:
 * at most 90 bytes), -EADDRINUSE (8 random names taken).
 */
int notify_socket_new(sd_event *event, const char *name, const char *dir, notify_handler_t handler, void *userdata,
                      struct notify_socket **ret);

/* reexec: a unit's socket made by the tend that re-executed (fd: bound as
 * notify_socket_new() binds, SO_PASSCRED on), taken on success (O_CLOEXEC
 * again); the processes that have its address go on notifying. A socket
 * bound to a path (dir above) is this tend's to remove from then on, at
 * notify_socket_free(). Errors: -EINVAL, -ENOMEM, -EPROTO (neither an
 * abstract address nor a path), getsockname errors. */
int notify_socket_adopt(sd_event *event, const char *name, notify_handler_t handler, void *userdata, int fd,
                        struct notify_socket **ret);

/* The address for NOTIFY_SOCKET= ("@" and the abstract name, or the path), valid until freed. */
const char *notify_socket_address(const struct notify_socket *s);

/* The socket's fd (owned by s). */
int notify_socket_fd(const struct notify_socket *s);

/*
 * Reads at most NOTIFY_DISPATCH_MAX datagrams without blocking, closes every
 * fd they carry, drops those over NOTIFY_DATAGRAM_MAX (MSG_TRUNC) or with a
 * NUL (logged, rate-limited), and calls the handler for each other one.
 * Returns the number of datagrams read (0: none queued); an error of
 * recvmsg() other than EAGAIN/EINTR is returned (the loop logs it and keeps
 * the source).
 */
int notify_socket_dispatch(struct notify_socket *s);

/*
 * Logs that pid's notification to s was refused (why: e.g. "NotifyAccess=main
 * and it is not the main process"), at most NOTIFY_REJECT_LOG_BURST times per
 * NOTIFY_REJECT_LOG_INTERVAL_USEC; the next line logged says how many were
 * not. No timer: a suppressed count is reported by the next refusal logged.
 * Returns the number of refusals so far (for tests).
 */
unsigned notify_socket_log_rejected(struct notify_socket *s, pid_t pid, const char *why);

/* Closes the socket and removes it from the loop; accepts NULL; returns NULL. */
struct notify_socket *notify_socket_free(struct notify_socket *s);

/*
 * Adds NOTIFY_SOCKET=address and, when watchdog_usec > 0, WATCHDOG_USEC= to
 * the strv *envp — unless the unit's own Environment=/EnvironmentFile=
 * already set that name (systemd lets a unit's settings win). tend's own
 * values never reach here: unit_build_environment() drops them.
 * Returns 0, -ENOMEM, -EINVAL.
 */
int notify_env_add(char ***envp, const char *address, usec_t watchdog_usec);

/* ------------------------------------------------------------------------ */
/* tend's own manager ($NOTIFY_SOCKET)                                       */
/* ------------------------------------------------------------------------ */

struct notify_upstream;

/*
 * Reads $NOTIFY_SOCKET and, through sd_watchdog_enabled(), $WATCHDOG_USEC /
 * $WATCHDOG_PID (the watchdog is tend's only when WATCHDOG_PID is tend's
 * pid, or absent), then removes NOTIFY_SOCKET and WATCHDOG_* from tend's
 * environment, so no child (a unit, combined mode's CMD) ever inherits them.
 * Without $NOTIFY_SOCKET: *ret = NULL and 0 (tend sends nothing).
 * Otherwise opens a datagram socket towards that address (a path or
 * "@abstract") and, with a watchdog, arms a one-shot timer at half of
 * WATCHDOG_USEC that sends WATCHDOG=1 and re-arms itself — tend's only
 * periodic wake-up (SPEC §1). Until notify_upstream_update() says settled,
 * a one-shot timer sends EXTEND_TIMEOUT_USEC= every
 * NOTIFY_UPSTREAM_EXTEND_INTERVAL_USEC so a slow start is not killed by
 * systemd's TimeoutStartSec=. Errors: -ENOMEM, socket and sd-event errors.
 */
int notify_upstream_new(sd_event *event, struct notify_upstream **ret);

#define NOTIFY_UPSTREAM_EXTEND_INTERVAL_USEC (10 * USEC_PER_SEC)

/* WATCHDOG_USEC when the watchdog is tend's, else 0. */
usec_t notify_upstream_watchdog_usec(const struct notify_upstream *u);

/*
 * Sends text (assignments separated by '\n') at once, without blocking
 * (MSG_DONTWAIT|MSG_NOSIGNAL; a full manager queue drops it, logged at
 * debug level). u may be NULL: nothing is sent, 0.
 */
int notify_upstream_send(struct notify_upstream *u, const char *text);

/*
 * The units' counts changed: the first call with settled true sends READY=1
 * (and ends the EXTEND_TIMEOUT_USEC= timer); every call sends STATUS= when
 * its text ("N units: R running, F failed") differs from the last one sent.
 * u may be NULL.
 */
void notify_upstream_update(struct notify_upstream *u, bool settled, size_t n_units, size_t n_running,
                            size_t n_failed);

/* RELOADING=1 (begin) or READY=1 (end) around a daemon-reload. u may be NULL. */
void notify_upstream_reloading(struct notify_upstream *u, bool begin);

/* STOPPING=1, once; the watchdog keeps pinging until tend exits. u may be NULL. */
void notify_upstream_stopping(struct notify_upstream *u);

/* Closes the socket and the timers; accepts NULL; returns NULL. */
struct notify_upstream *notify_upstream_free(struct notify_upstream *u);
