/* SPDX-License-Identifier: MIT */
/*
 * The leased store (SPEC §2.4): a key-value store with two keyspaces, DURABLE
 * and EPHEMERAL (keys with a TTL: leases), compare-and-set writes, revisions,
 * and watches (snapshot, marker, then live changes). tend keeps each unit's
 * state record in durable `service/NAME` and its watchdog lease in ephemeral
 * `watchdog/NAME`.
 *
 * Callers use only the store_* front functions below. They check arguments
 * and dispatch through the backend's operations table (struct store_ops at
 * the end of this header), so a distributed backend can replace the in-memory
 * one (store-mem.c) without touching callers. docs/store.md is the contract
 * every backend must meet and the in-memory design.
 *
 * Conventions, for every function unless its comment says otherwise:
 *  - Return: 0 (or the non-negative value the comment names) on success, a
 *    negative errno on failure; the global errno is never a return channel.
 *    Bad arguments (NULL where a pointer is required, unknown keyspace, empty
 *    key, a TTL on a durable key, …) answer -EINVAL; too-long keys or values
 *    -E2BIG; -ENOMEM when an allocation fails (the operation changed nothing;
 *    dead keys it found may have been expired first).
 *  - Compare-and-set answers are not errors: 1 = WON (and *ret_revision is
 *    written), 0 = LOST (nothing changed, *ret_revision untouched).
 *  - ret_* out-parameters are written only on success (WON for CAS).
 *  - Times are µs (usec_t); deadlines are absolute CLOCK_MONOTONIC (or the
 *    test clock's time); USEC_INFINITY means "never".
 *  - Thread-safety: every function may be called from any thread, concurrently
 *    with any other, on the same objects, except the _free/_unref of an object
 *    concurrently with another call on that same object. No caller code runs
 *    inside a store call except the clock seam's two callbacks (see below).
 *  - Keys are NUL-terminated, non-empty, at most STORE_KEY_MAX bytes, ordered
 *    by strcmp() (bytewise). Values are byte strings of at most
 *    STORE_VALUE_MAX bytes (they may contain NULs).
 *  - Every fd the store creates is O_CLOEXEC|O_NONBLOCK and owned by the
 *    object that returned it: never close or read it yourself.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "time-util.h"

/* ------------------------------------------------------------------------ */
/* Limits and defaults                                                       */
/* ------------------------------------------------------------------------ */

#define STORE_KEY_MAX 1024u                          /* bytes, without the NUL */
#define STORE_VALUE_MAX (64u * 1024u)                /* bytes (SPEC §7: 64 KiB per request) */
#define STORE_TTL_MAX_USEC (366ULL * 24 * 3600 * USEC_PER_SEC)
#define STORE_DEFAULT_TTL_USEC (30 * USEC_PER_SEC)
#define STORE_DEFAULT_WATCH_QUEUE 1024u              /* live events per watcher */
#define STORE_DEFAULT_MAX_KEYS 16384u                /* per keyspace */

/* "No expected revision" for store_delete(). Revisions start at 1, so 0 is free. */
#define STORE_REV_ANY ((uint64_t) 0)

enum store_keyspace {
        STORE_DURABLE = 0,
        STORE_EPHEMERAL = 1,
        _STORE_KEYSPACE_MAX,
};

/* ------------------------------------------------------------------------ */
/* The clock seam (SPEC §2.4 "Clock seam")                                   */
/* ------------------------------------------------------------------------ */

/*
 * now() answers the current time in µs on the clock deadlines are measured
 * against. arm() asks for expiry to run at `deadline` (absolute µs), or
 * cancels the request with USEC_INFINITY; each call replaces the previous
 * one. When the deadline passes, the owner of the clock makes the store run
 * expiry: store_dispatch() for the default clock (its timerfd is readable),
 * store_run_expiry() for any other (a test clock calls it synchronously when
 * the test advances time).
 *
 * Both callbacks run with the store's lock held, from whichever thread is
 * inside a store call: they must be thread-safe and must not call into the
 * store. arm() is called only when the earliest deadline changes; a negative
 * answer is retried at the next change (the store keeps working: reads and
 * writes still expire dead keys in place).
 */
struct store_clock {
        usec_t (*now)(void *userdata);
        int (*arm)(void *userdata, usec_t deadline);
        void *userdata;
};

/* ------------------------------------------------------------------------ */
/* Creation and lifetime                                                     */
/* ------------------------------------------------------------------------ */

struct store_options {
        usec_t default_ttl_usec;       /* TTL for ttl_usec == 0; 0 = STORE_DEFAULT_TTL_USEC */
        uint32_t watch_queue_capacity; /* live events a watcher may hold; 0 = default */
        uint32_t max_keys;             /* per keyspace; 0 = STORE_DEFAULT_MAX_KEYS */
        /* NULL: the default clock (CLOCK_MONOTONIC, a timerfd owned by the store,
         * see store_get_fd()). Otherwise copied; its userdata must outlive the store. */
        const struct store_clock *clock;
};

struct store;

/*
 * Creates an in-memory store (the etcd backend: store_etcd_new() in
 * store-etcd.h). opts may be NULL (all defaults). The caller owns the
 * returned reference (the "owner").
 * Errors: -EINVAL (ret NULL, default_ttl_usec > STORE_TTL_MAX_USEC, max_keys
 * > INT_MAX, a clock without now or arm), -ENOMEM, or a timerfd_create() error.
 */
int store_new(const struct store_options *opts, struct store **ret);

/*
 * Owner references. ref() returns s. unref() drops one and returns NULL; when
 * the last one goes the store is *closed*: its keys are freed, its timerfd is
 * closed, and every watch drains what it has queued and then answers -EPIPE.
 * The memory itself goes when the last watch is freed too. Both accept NULL.
 */
struct store *store_ref(struct store *s);
struct store *store_unref(struct store *s);

/* ------------------------------------------------------------------------ */
/* Writes (SPEC §2.4): each draws the next revision of its keyspace          */
/* ------------------------------------------------------------------------ */

/*
 * Creates key if it is absent. ttl_usec: 0 = the store's default TTL
 * (ephemeral only; must be 0 for durable, ≤ STORE_TTL_MAX_USEC); the key
 * expires at (time of this write) + ttl_usec. value is copied (NULL allowed
 * with size 0).
 * Returns 1 = WON with *ret_revision = the entry's new revision (ret_revision
 * may be NULL); 0 = LOST (the key exists). Errors: the conventions above,
 * -ENOSPC (the keyspace holds max_keys keys).
 */
int store_create(struct store *s, enum store_keyspace ks, const char *key,
                 const void *value, size_t size, usec_t ttl_usec, uint64_t *ret_revision);

/*
 * Compare-and-set: replaces key's value if its current revision is
 * `expected` (≥ 1). An ephemeral key's deadline becomes now + ttl_usec (0 =
 * the store's default TTL, not the key's previous TTL): writing is how a
 * lease is kept alive.
 * Returns 1 = WON with *ret_revision = the new revision; 0 = LOST (key absent,
 * dead, or at another revision). Errors: the conventions above (expected 0 is
 * -EINVAL).
 */
int store_update(struct store *s, enum store_keyspace ks, const char *key,
                 const void *value, size_t size, uint64_t expected, usec_t ttl_usec,
                 uint64_t *ret_revision);

/*
 * Deletes key; `expected` guards it (STORE_REV_ANY: unconditional).
 * Returns 1 = WON with *ret_revision = the deleted entry's revision, or = 0
 * when the key was already absent or dead (a vacuous WON(0), whatever
 * `expected` was; no DELETE event of its own). 0 = LOST when the key exists
 * at another revision than `expected`.
 * The DELETE event watchers see carries a new revision of its own (cause
 * STORE_CAUSE_DELETED) and the deleted entry's revision as prev_revision.
 */
int store_delete(struct store *s, enum store_keyspace ks, const char *key,
                 uint64_t expected, uint64_t *ret_revision);

/* ------------------------------------------------------------------------ */
/* Reads                                                                     */
/* ------------------------------------------------------------------------ */

enum store_event_type {
        STORE_EVENT_PUT = 1,           /* key, value, revision (the entry's) */
        STORE_EVENT_DELETE = 2,        /* key, cause, revision (new), prev_revision */
        STORE_EVENT_SNAPSHOT_DONE = 3, /* revision = the keyspace's revision at the snapshot */
};

enum store_cause {
        STORE_CAUSE_NONE = 0,    /* PUT, SNAPSHOT_DONE */
        STORE_CAUSE_DELETED = 1, /* store_delete() */
        STORE_CAUSE_EXPIRED = 2, /* the TTL ran out */
};

/*
 * An immutable, reference-counted record: what get() and list() answer (a
 * PUT: the key's current value) and what watches deliver. key and value are
 * never NULL and always NUL-terminated (value[value_size] == '\0', handy for
 * JSON text); SNAPSHOT_DONE has key "" and DELETE value "". Fields must not
 * be modified. Release each reference with store_event_unref().
 */
struct store_event {
        enum store_event_type type;
        enum store_cause cause;
        enum store_keyspace keyspace;
        uint64_t revision;
        uint64_t prev_revision; /* DELETE: the deleted entry's revision; else 0 */
        const char *key;
        const char *value;
        size_t value_size;
};

/* Another reference to ev (any thread); returns ev. */
struct store_event *store_event_ref(struct store_event *ev);
/* Drops one reference (any thread); accepts NULL; returns NULL. */
struct store_event *store_event_unref(struct store_event *ev);
/* Unrefs n events and frees the array (as store_list() returns it); accepts NULL. */
void store_event_array_free(struct store_event **evs, size_t n);

/*
 * The key's current value as a PUT record (*ret: a reference the caller
 * unrefs). A dead ephemeral key is expired in place first, never answered.
 * Errors: -ENOENT (absent or dead), the conventions above.
 */
int store_get(struct store *s, enum store_keyspace ks, const char *key, struct store_event **ret);

/*
 * Every live key starting with prefix (NULL or "" = all), in key order, as PUT
 * records. Expires every dead key of the keyspace first. *ret_events is an
 * array of *ret_n references (NULL when 0), freed with store_event_array_free().
 * Returns the count (also in *ret_n, which may be NULL).
 */
int store_list(struct store *s, enum store_keyspace ks, const char *prefix,
               struct store_event ***ret_events, size_t *ret_n);

/* ------------------------------------------------------------------------ */
/* Expiry: the event-loop side                                               */
/* ------------------------------------------------------------------------ */

/*
 * The default clock's timerfd (CLOCK_MONOTONIC, absolute, armed at the
 * earliest ephemeral deadline, disarmed when there is no ephemeral key), for
 * the owner's epoll set (EPOLLIN). Owned by the store. Errors: -EOPNOTSUPP
 * when the store was created with a custom clock.
 */
int store_get_fd(struct store *s);

/*
 * Call when store_get_fd() is readable: drains the timerfd, then runs expiry
 * as store_run_expiry(). Spurious calls are harmless.
 */
int store_dispatch(struct store *s);

/*
 * Expires every ephemeral key whose deadline is ≤ clock.now() (each becomes a
 * DELETE event with cause STORE_CAUSE_EXPIRED and a new revision), then
 * re-arms the clock at the next deadline. Returns the number expired.
 */
int store_run_expiry(struct store *s);

/* ------------------------------------------------------------------------ */
/* Watches (SPEC §2.4 "watch")                                               */
/* ------------------------------------------------------------------------ */

struct store_watch;

/*
 * Watches keys of ks starting with prefix (NULL or "" = all). The watch
 * delivers: every matching live key as a PUT, in key order; one
 * SNAPSHOT_DONE; then every PUT and DELETE of a matching key, in revision
 * order (per key always; the in-memory backend even orders all of them).
 * The queue has room for the snapshot, the marker and watch_queue_capacity
 * more events; a watcher that falls further behind is ended: its queue is
 * discarded and next() answers -ENOBUFS, meaning "re-watch" (free it, watch
 * again, dedupe by revision). *ret is the caller's, freed with
 * store_watch_free(); it holds an internal reference to the store's memory.
 * Errors: the conventions above, or an eventfd() error.
 */
int store_watch(struct store *s, enum store_keyspace ks, const char *prefix,
                struct store_watch **ret);

/*
 * A pollable fd (eventfd), readable exactly when store_watch_next() would not
 * answer -EAGAIN. Owned by the watch. Never fails for a valid watch.
 */
int store_watch_fd(const struct store_watch *w);

/*
 * Takes the next event without blocking: 0 with *ret = a reference the
 * caller unrefs. Errors: -EAGAIN (nothing queued), -ENOBUFS (the watcher
 * fell behind; the watch has ended: re-watch; sticky), -EPIPE (the store was
 * closed and the queue is drained; sticky), -EINVAL.
 */
int store_watch_next(struct store_watch *w, struct store_event **ret);

/*
 * As store_watch_next(), but blocks (a condition variable, no polling) up to
 * timeout_usec µs (USEC_INFINITY: forever; 0: never blocks and answers
 * -EAGAIN). Errors: -ETIMEDOUT, and those of store_watch_next().
 */
int store_watch_wait(struct store_watch *w, usec_t timeout_usec, struct store_event **ret);

/* Ends the watch, drops what it has queued, closes its fd. Accepts NULL; returns NULL. */
struct store_watch *store_watch_free(struct store_watch *w);

/* ------------------------------------------------------------------------ */
/* Lease objects (issue 20; docs/store.md §1.9)                              */
/* ------------------------------------------------------------------------ */

/*
 * A lease object: a TTL that ephemeral keys are attached to (instead of each
 * key's own deadline), renewed by keep-alive without any write and without
 * any event. While its keep-alive runs, its keys live; when the keep-alive
 * stops (or the holder dies), the lease ends at most its TTL after the last
 * renewal and every attached key goes with cause STORE_CAUSE_EXPIRED. That is
 * presence: "alive" = "the lease is kept alive", never a key rewritten on a
 * timer.
 *  - in memory: the holder is the store's own process, so a kept-alive lease
 *    is renewed at every instant (no timer, no wake-up: SPEC §1); stopping
 *    the keep-alive sets its deadline to now + TTL (the clock seam's now).
 *  - etcd: a real etcd lease (TTL in whole seconds, ≥ 2 s); the store's I/O
 *    thread sends /v3/lease/keepalive every TTL/3 (one request each, nothing
 *    else), so the server-side deadline stays ≥ 2/3 TTL ahead.
 * A lease and its store: the lease holds no reference; free every lease
 * before the store's last store_unref(). One lease must not be used from two
 * threads at once (the store itself may be).
 */
struct store_lease;

/*
 * Grants a lease of ttl_usec (0 = the store's default TTL; ≤
 * STORE_TTL_MAX_USEC; etcd rounds up to whole seconds). The keep-alive is
 * off: without store_lease_keep_alive() the lease ends ttl after the grant.
 * *ret is the caller's, freed with store_lease_free().
 * Errors: -EINVAL, -ENOMEM, and on etcd the request's errors (-ETIMEDOUT,
 * -ECONNREFUSED, -EACCES, …).
 */
int store_lease_grant(struct store *s, usec_t ttl_usec, struct store_lease **ret);

/*
 * Starts (on) or stops the keep-alive. Starting renews at once (a lease
 * that already ended answers -ENOENT: its keys are gone; grant another).
 * Stopping never fails. Idempotent. Errors: -EINVAL, -ENOENT, on etcd the
 * first renewal's request errors (the keep-alive is then off).
 */
int store_lease_keep_alive(struct store_lease *l, bool on);

/*
 * Ends the lease now: every attached key is deleted, each with a DELETE
 * event of cause STORE_CAUSE_EXPIRED (the lease ended — by its holder; a
 * watcher of presence reacts to both alike; STORE_CAUSE_DELETED stays for
 * store_delete() of the key itself). The keep-alive stops. Revoking an ended
 * lease answers 0. Errors: -EINVAL, on etcd the request's errors.
 */
int store_lease_revoke(struct store_lease *l);

/*
 * Stops the keep-alive and frees l. It does NOT revoke: the lease (and its
 * keys) ends at most its TTL later, as if its holder died. Accepts NULL;
 * returns NULL.
 */
struct store_lease *store_lease_free(struct store_lease *l);

/*
 * As store_create() in the ephemeral keyspace, with the key attached to l
 * (it lives as long as l). A later store_update() of the key gives it a TTL
 * of its own (the update's ttl_usec), detaching it from l; store_delete()
 * deletes it (cause STORE_CAUSE_DELETED). Errors: as store_create(),
 * -EINVAL for l NULL or of another store, -ENOENT when l has ended.
 */
int store_create_leased(struct store *s, const char *key, const void *value, size_t size,
                        struct store_lease *l, uint64_t *ret_revision);

/*
 * The CLOCK_MONOTONIC time (µs) before which l cannot have ended on the
 * store's side: its last renewal's send time + its TTL (a renewal is counted
 * from before it was sent, so the store's own deadline is never earlier,
 * clock rates aside); 0 once the lease is known to have ended (revoked,
 * expired, or a renewal answered that it is gone). USEC_INFINITY in memory
 * while kept alive (renewed at every instant). A time in the past that is not
 * 0: not renewed in time (the store unreachable); it may still be alive. Holders fence with it (docs/cluster.md): whatever must stop
 * when l ends stops before it. Thread-safe as the other lease calls; 0 for
 * l NULL.
 */
usec_t store_lease_expiry(struct store_lease *l);

DEFINE_TRIVIAL_CLEANUP_FUNC(struct store_lease *, store_lease_free);
#define _cleanup_store_lease_free_ _cleanup_(store_lease_freep)

/* ------------------------------------------------------------------------ */
/* Asynchronous operations (issue 20; docs/store.md §1.8)                    */
/* ------------------------------------------------------------------------ */

enum store_op_type {
        STORE_OP_CREATE = 1,
        STORE_OP_UPDATE,
        STORE_OP_DELETE,
        STORE_OP_GET,
        STORE_OP_LIST,
};

/*
 * One operation of the table above, submitted without waiting. The caller
 * fills the inputs (the arguments of the blocking function of the same name;
 * `key` is the prefix for LIST, NULL allowed there) and owns the struct; key
 * and value are copied at submit and may go right after it. done(op,
 * userdata) runs exactly once, after store_submit() answered 0:
 *  - in-memory backend: at once, inside store_submit();
 *  - etcd backend: from store_dispatch() in the thread that calls it, when
 *    store_get_fd() turned readable (the owner's event loop never waits on
 *    the network).
 * Then `result` is what the blocking function would have answered (1/0 for
 * CAS, the count for LIST, or a negative errno) and the results are set:
 * `revision` (CREATE/UPDATE/DELETE WON), `event` (GET: a reference the
 * callee of done owns), `events`/`n_events` (LIST: freed with
 * store_event_array_free()). The struct must stay valid until done ran.
 */
struct store_op {
        enum store_op_type type;
        enum store_keyspace keyspace;
        const char *key;
        const void *value;
        size_t size;
        uint64_t expected;
        usec_t ttl_usec;
        void (*done)(struct store_op *op, void *userdata);
        void *userdata;
        /* CREATE in the ephemeral keyspace only: attach the key to this lease
         * (ttl_usec must be 0) as store_create_leased(); NULL: its own TTL. */
        struct store_lease *lease;

        int result;
        uint64_t revision;
        struct store_event *event;
        struct store_event **events;
        size_t n_events;
};

/*
 * Starts op. Returns 0 (done will run) or a negative errno (done will not
 * run): -EINVAL/-E2BIG for the argument errors the blocking functions
 * answer (checked here, before anything is sent), -ENOMEM, -EPIPE (the
 * store is closing).
 */
int store_submit(struct store *s, struct store_op *op);

/* "durable"/"ephemeral", "put"/"delete"/"snapshot-done", "none"/"deleted"/"expired";
 * NULL for an unknown value. */
const char *store_keyspace_to_string(enum store_keyspace ks);
const char *store_event_type_to_string(enum store_event_type t);
const char *store_cause_to_string(enum store_cause c);

DEFINE_TRIVIAL_CLEANUP_FUNC(struct store *, store_unref);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct store_watch *, store_watch_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct store_event *, store_event_unref);
#define _cleanup_store_unref_ _cleanup_(store_unrefp)
#define _cleanup_store_watch_free_ _cleanup_(store_watch_freep)
#define _cleanup_store_event_unref_ _cleanup_(store_event_unrefp)

/* ------------------------------------------------------------------------ */
/* For backends only: the operations table and shared helpers (store.c)      */
/* ------------------------------------------------------------------------ */

/*
 * A backend embeds struct store (and struct store_watch) as the first member
 * of its own objects and fills ops. The front has checked every argument
 * against the conventions above before an op runs (keys, sizes, keyspace,
 * TTL range; ttl_usec is passed as given, 0 included), and handles the owner
 * references: close() runs once, when the last one is dropped. Each op must
 * meet the contract of the front function of the same name (docs/store.md).
 */
struct store_ops {
        const char *name;
        void (*close)(struct store *s);
        int (*create)(struct store *s, enum store_keyspace ks, const char *key,
                      const void *value, size_t size, usec_t ttl_usec, uint64_t *ret_revision);
        int (*update)(struct store *s, enum store_keyspace ks, const char *key,
                      const void *value, size_t size, uint64_t expected, usec_t ttl_usec,
                      uint64_t *ret_revision);
        int (*delete)(struct store *s, enum store_keyspace ks, const char *key,
                      uint64_t expected, uint64_t *ret_revision);
        int (*get)(struct store *s, enum store_keyspace ks, const char *key,
                   struct store_event **ret);
        /* prefix is never NULL here; ret_events and ret_n neither. */
        int (*list)(struct store *s, enum store_keyspace ks, const char *prefix,
                    struct store_event ***ret_events, size_t *ret_n);
        int (*get_fd)(struct store *s);
        int (*dispatch)(struct store *s);
        int (*run_expiry)(struct store *s);
        int (*watch)(struct store *s, enum store_keyspace ks, const char *prefix,
                     struct store_watch **ret);
        int (*watch_fd)(const struct store_watch *w);
        int (*watch_next)(struct store_watch *w, usec_t timeout_usec, struct store_event **ret);
        void (*watch_free)(struct store_watch *w);
        /* NULL: the front runs the blocking op and calls done at once. */
        int (*submit)(struct store *s, struct store_op *op);
        /* Lease objects (docs/store.md §1.9); the front checked l and its store. */
        int (*lease_grant)(struct store *s, usec_t ttl_usec, struct store_lease **ret);
        int (*lease_keep_alive)(struct store_lease *l, bool on);
        int (*lease_revoke)(struct store_lease *l);
        void (*lease_free)(struct store_lease *l);
        usec_t (*lease_expiry)(struct store_lease *l);
        int (*create_leased)(struct store *s, const char *key, const void *value, size_t size,
                             struct store_lease *l, uint64_t *ret_revision);
};

struct store {
        const struct store_ops *ops;
        atomic_uint n_ref; /* owner references; managed by the front */
};

struct store_watch {
        const struct store_ops *ops;
};

struct store_lease {
        struct store *store; /* the store that granted it */
};

/* The in-memory backend (store-mem.c); store_new() calls it. */
int store_mem_new(const struct store_options *opts, struct store **ret);

/*
 * A new record with one reference: key and value copied into one allocation
 * (value may be NULL when size is 0; key NULL means ""). The backend fills
 * revision, cause and prev_revision before publishing it; after that it is
 * immutable. Returns NULL on ENOMEM.
 */
struct store_event *store_event_new(enum store_event_type type, enum store_keyspace ks,
                                    const char *key, const void *value, size_t size);

/* The default clock: now() reads CLOCK_MONOTONIC; arm() sets the timerfd
 * whose int fd userdata points to (absolute; USEC_INFINITY disarms). */
usec_t store_clock_monotonic_now(void *userdata);
int store_clock_timerfd_arm(void *userdata, usec_t deadline);
/* A CLOCK_MONOTONIC timerfd, TFD_CLOEXEC|TFD_NONBLOCK; returns it or a negative errno. */
int store_timerfd_new(void);
/* Reads a non-blocking timerfd until empty (EAGAIN is success). */
int store_timerfd_drain(int fd);
