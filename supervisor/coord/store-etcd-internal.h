/* SPDX-License-Identifier: MIT */
/*
 * Internal to the etcd backend (store-etcd.c, store-etcd-client.c): the
 * HTTP/JSON client of etcd's gateway. One I/O thread drives a curl multi
 * handle; requests are queued from any thread and completed in the I/O
 * thread (on_done), or waited for (etcd_call). Not a public API.
 */
#pragma once

#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store-etcd.h"

struct etcd_client;
struct etcd_req;

/*
 * on_done runs once in the I/O thread: error 0 with reply = the parsed JSON
 * answer (borrowed: valid during the call), or a negative errno with reply
 * NULL (-ECONNREFUSED/-ETIMEDOUT: every member failed; -EACCES, -ENOENT,
 * -ENOSPC, -ERANGE, -EINVAL, -EIO: etcd's gRPC status; -EPIPE: the client
 * closed). on_line (streams only) runs for each message of the stream; a
 * negative answer ends the stream (on_done then runs with that error). A
 * stream also ends with -ESTALE when its member is judged slow (a request's
 * try there timed out or lost a race): its owner may resume it elsewhere.
 */
typedef void (*etcd_done_fn)(struct etcd_req *r, int error, struct json_object *reply,
                             void *userdata);
typedef int (*etcd_line_fn)(struct etcd_req *r, struct json_object *msg, void *userdata);

/* Creates the client and starts its I/O thread; authenticates if asked. */
int etcd_client_new(const struct store_etcd_options *opts, struct etcd_client **ret);
/* Stops the I/O thread (in-flight requests complete with -EPIPE) and frees. */
void etcd_client_free(struct etcd_client *c);

/*
 * Queues POST path with body (consumed: put whatever the call's outcome) and
 * returns at once. Each try on a member is bounded by the request timeout and
 * by deadline (absolute CLOCK_MONOTONIC µs; 0 = none): no try starts after
 * it, and on_done then runs with -ETIMEDOUT. stream: the answer is a stream
 * of messages (watch), with no timeout and no deadline. ret (may be NULL) is
 * a handle for etcd_req_cancel(); it stays valid until on_done has run.
 * on_done may run (in the I/O thread) before etcd_submit() returns: the
 * caller must not touch what on_done frees after a successful submit.
 * Errors: -ENOMEM, -EPIPE (client closed).
 */
int etcd_submit(struct etcd_client *c, const char *path, struct json_object *body, bool stream,
                etcd_line_fn on_line, etcd_done_fn on_done, void *userdata, usec_t deadline,
                struct etcd_req **ret);

/* As etcd_submit, but the request starts at not_before (CLOCK_MONOTONIC µs;
 * 0 = at once): the I/O thread's only timer (the leases' keep-alives). A
 * cancel before then ends it with -ECANCELED, unsent. */
int etcd_submit_at(struct etcd_client *c, const char *path, struct json_object *body, bool stream,
                   etcd_line_fn on_line, etcd_done_fn on_done, void *userdata, usec_t not_before,
                   usec_t deadline, struct etcd_req **ret);

/* The bound of one operation: the request timeout once per member (µs). */
usec_t etcd_op_timeout(const struct etcd_client *c);

/* How late the I/O thread may answer past a deadline before a waiter gives up (µs). */
#define ETCD_WAIT_GRACE_USEC (2 * USEC_PER_SEC)

/* A condition variable on CLOCK_MONOTONIC, for etcd_wait_until(). */
void etcd_cond_init(pthread_cond_t *cond);
/* Waits (lock held) until *done or the absolute CLOCK_MONOTONIC deadline:
 * 0 or -ETIMEDOUT. */
int etcd_wait_until(pthread_cond_t *cond, pthread_mutex_t *lock, const bool *done, usec_t deadline);

/* Asks the I/O thread to end a stream; its on_done runs with -ECANCELED
 * (or whatever ended it first). Safe from any thread before on_done ran. */
void etcd_req_cancel(struct etcd_client *c, struct etcd_req *r);

/*
 * Blocking form of etcd_submit (never from the I/O thread) with the deadline
 * now + etcd_op_timeout(): 0 with *ret_reply a reference the caller puts, or
 * on_done's error; -ETIMEDOUT (logged) if the I/O thread has not answered
 * ETCD_WAIT_GRACE_USEC after the deadline (its answer is then dropped).
 */
int etcd_call(struct etcd_client *c, const char *path, struct json_object *body,
              struct json_object **ret_reply);

/* base64 of n bytes into a new NUL-terminated string; NULL on ENOMEM. */
char *etcd_base64(const void *data, size_t n);
/* Decodes base64 text into a new buffer (NUL-terminated, *ret_n without it).
 * Returns 0, -EINVAL (bad text) or -ENOMEM. */
int etcd_unbase64(const char *text, char **ret, size_t *ret_n);

/* ---- the store (store-etcd.c) and its watches (store-etcd-watch.c) ---- */

struct etcd_watch;

struct store_etcd {
        struct store base;
        /* One reference for the owner side (dropped at close) plus one per
         * watch: a watch may outlive the owner and still needs s->lock. */
        atomic_uint n_internal;
        struct etcd_client *client;
        char *prefix;
        usec_t default_ttl;
        size_t queue_capacity;

        pthread_mutex_t lock; /* the completion list and the eventfd state, the watch list */
        struct eop *completed, *completed_tail;
        int fd; /* eventfd: readable iff completed != NULL */
        struct etcd_watch *watches;
        struct etcd_lease *leases; /* the lease objects not yet freed (under lock) */
};

/* ---- lease objects (store-etcd-lease.c) ---- */

struct etcd_lease;
int etcd_lease_grant(struct store *s, usec_t ttl_usec, struct store_lease **ret);
int etcd_lease_keep_alive(struct store_lease *l, bool on);
int etcd_lease_revoke(struct store_lease *l);
void etcd_lease_free(struct store_lease *l);
usec_t etcd_lease_expiry(struct store_lease *l);
/* The etcd lease ID of l. */
int64_t etcd_lease_id(struct store_lease *l);
/* Whether id is a lease object's (an update must not revoke it). Takes s->lock. */
bool etcd_lease_is_object(struct store_etcd *s, int64_t id);

void etcd_store_unref_internal(struct store_etcd *s);

/* A completion for the owner's loop made ahead (never fails later, in the I/O
 * thread): etcd_loop_done_post() queues it, and store_dispatch() then runs
 * op->done(op, op->userdata) and frees it; one never posted is freed with
 * etcd_loop_done_free() (NULL accepted). NULL on ENOMEM. */
struct eop;
struct eop *etcd_loop_done_new(struct store_etcd *s, struct store_op *op);
void etcd_loop_done_post(struct eop *e, int result);
void etcd_loop_done_free(struct eop *e);
/* P "d/" key or P "e/" key (key NULL = ""); NULL on ENOMEM. */
char *etcd_key(struct store_etcd *s, enum store_keyspace ks, const char *key);
/* The end of the range of keys starting with prefix (its last byte + 1): a
 * new string of *ret_n bytes; NULL on ENOMEM. */
char *etcd_range_end(const char *prefix, size_t *ret_n);
/* Adds field = base64(data) to o. */
void etcd_add_b64(struct json_object *o, const char *field, const void *data, size_t n);
void etcd_add_int(struct json_object *o, const char *field, int64_t v);
/* A PUT record of keyspace ks from a gateway kv, or NULL: for a tombstone
 * (*ret_error 0: skip it) or on error (*ret_error -ENOMEM or -EIO). */
struct store_event *etcd_kv_record(struct store_etcd *s, enum store_keyspace ks,
                                   struct json_object *kv, int *ret_error);
int64_t etcd_header_revision(struct json_object *reply);

int etcd_watch(struct store *s, enum store_keyspace ks, const char *prefix,
               struct store_watch **ret);
int etcd_watch_fd(const struct store_watch *w);
int etcd_watch_next(struct store_watch *w, usec_t timeout_usec, struct store_event **ret);
void etcd_watch_free(struct store_watch *w);
/* At close: each watch drains, then answers -EPIPE; their streams end. */
void etcd_watches_close(struct store_etcd *s);

/* An int64 field of a gateway answer (sent as a JSON string or number);
 * absent (proto3 default) is 0. */
int64_t etcd_json_int(struct json_object *o, const char *field);
