/* SPDX-License-Identifier: MIT */
/*
 * The leased store on etcd v3 (SPEC §2.4; docs/store.md §4): the same
 * contract as the in-memory backend (store.h), served by an etcd cluster
 * through its JSON gateway (grpc-gateway, /v3/...) with libcurl and json-c.
 * Built only when libcurl is found (meson: HAVE_STORE_ETCD).
 *
 * Every store_* function of store.h works on the returned store, from any
 * thread. One I/O thread per store runs libcurl's multi interface (all
 * requests and the watch streams); a caller of a blocking function waits
 * for its answer on a condition variable, and store_submit() (store.h)
 * returns at once and delivers its completion through store_get_fd() /
 * store_dispatch() in the owner's event loop.
 */
#pragma once

#include "store.h"

struct store_etcd_options {
        /* Comma-separated members: "http://127.0.0.1:2379,https://h2:2379"; a
         * member without a scheme is http:// (https:// when ca_file is set).
         * Required. A request that fails to connect moves to the next member. */
        const char *endpoints;
        /* Every key lives under this prefix (e.g. "tend/"); NULL = "". */
        const char *prefix;
        /* TLS: the CA that signed the members' certificates, and the client
         * certificate and key (PEM files). Each may be NULL. */
        const char *ca_file;
        const char *cert_file;
        const char *key_file;
        /* etcd authentication (/v3/auth/authenticate); both or neither. */
        const char *user;
        const char *password;
        usec_t default_ttl_usec;       /* 0 = STORE_DEFAULT_TTL_USEC */
        uint32_t watch_queue_capacity; /* 0 = STORE_DEFAULT_WATCH_QUEUE */
        /* Per request and member; 0 = 5 s. An operation (all its requests,
         * each member tried) ends by this × the number of members: then
         * -ETIMEDOUT; a blocking call waits at most that + 2 s (docs/store.md §4.6). */
        usec_t request_timeout_usec;
};

/*
 * Creates a store on etcd (strings are copied) and, with user/password,
 * authenticates (a blocking request). The etcd cluster need not be reachable:
 * requests fail with -ECONNREFUSED (or -ETIMEDOUT) after every member was tried.
 * Errors: -EINVAL (ret or endpoints NULL, an empty member, user without
 * password), -EACCES (authentication refused), -ENOMEM, an I/O thread error.
 */
int store_etcd_new(const struct store_etcd_options *opts, struct store **ret);

/* ---- leases carried across daemon-reexec, and asked about (issue 20) ---- */

/*
 * A lease object for the etcd lease `id` granted earlier (by this process
 * before a re-exec: docs/cluster.md "Re-executing"), of ttl_usec (whole
 * seconds, ≥ 1 s) and with expiry (CLOCK_MONOTONIC µs: store_lease_expiry()
 * as the previous holder knew it; CLOCK_MONOTONIC survives execve). Sends
 * nothing: store_lease_keep_alive(on) renews it (-ENOENT: it ended
 * meanwhile). *ret is the caller's (store_lease_free()). Errors: -EINVAL (s
 * not an etcd store, id ≤ 0, ttl < 1 s), -ENOMEM. Thread-safe.
 */
int store_etcd_lease_adopt(struct store *s, int64_t id, usec_t ttl_usec, usec_t expiry,
                           struct store_lease **ret);

/* l's etcd lease ID, and its TTL as etcd granted it (µs); 0 for NULL or a
 * lease of another backend. Thread-safe. */
int64_t store_etcd_lease_id(struct store_lease *l);
usec_t store_etcd_lease_ttl(struct store_lease *l);

#define STORE_ETCD_LEASE_UNKNOWN INT64_MIN /* no answer in time, or an error */
#define STORE_ETCD_LEASE_GONE (-1)         /* etcd says the lease does not exist */

/*
 * etcd's LeaseTimeToLive of each of the n lease ids (any lease, any holder),
 * asked all at once: ret_ms[i] = the time left in ms (etcd answers whole
 * seconds), STORE_ETCD_LEASE_GONE, or STORE_ETCD_LEASE_UNKNOWN when no
 * answer came within wait_usec. Blocks the caller at most wait_usec (the
 * late answers are dropped). Returns how many were answered (≥ 0), or
 * -EINVAL, -ENOMEM. Thread-safe.
 */
int store_etcd_lease_time_left(struct store *s, const int64_t *ids, size_t n, usec_t wait_usec,
                               int64_t *ret_ms);

/*
 * The asynchronous form (issue 20's store contract (a); docs/cluster.md §4b):
 * the same asks, sent at once; cb(ms, n, answered, userdata) runs exactly
 * once, from store_dispatch() in the owner's event loop (when
 * store_get_fd() turned readable; never inside this call), once every ask
 * was answered or cut by wait_usec (each request's deadline). ms (n values
 * as above; borrowed for the call) and answered (how many are not
 * STORE_ETCD_LEASE_UNKNOWN). *ret (the ask's handle) stays valid until cb
 * ran or store_etcd_ttl_ask_cancel(). A store closed meanwhile runs cb at its
 * close (the unanswered ones unknown). Returns 0, or -EINVAL (s not an etcd
 * store, ids NULL with n > 0, cb or ret NULL), -ENOMEM: then cb never runs.
 * Call from the owner's loop thread.
 */
struct store_etcd_ttl_ask;
typedef void (*store_etcd_ttl_fn)(const int64_t *ms, size_t n, size_t answered, void *userdata);
int store_etcd_lease_time_left_async(struct store *s, const int64_t *ids, size_t n, usec_t wait_usec,
                                     store_etcd_ttl_fn cb, void *userdata, struct store_etcd_ttl_ask **ret);

/* The asker no longer wants the answers (before cb ran; from the owner's
 * loop thread): cb will not run, the ask is freed when its requests have
 * ended. NULL accepted. */
void store_etcd_ttl_ask_cancel(struct store_etcd_ttl_ask *a);
