/* SPDX-License-Identifier: MIT */
/*
 * Internal to the in-memory backend (store-mem.c, store-mem-lease.c): its
 * data structures and the helpers the lease objects share. Not a public
 * API; every function here runs with store->lock held unless it says so.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "store.h"

#define HEAP_NONE SIZE_MAX

struct mem_lease;

struct entry {
        struct store_event *put; /* current value: key, value, revision; shared */
        usec_t deadline;         /* ephemeral: last write + TTL; durable, leased: USEC_INFINITY */
        size_t heap_idx;         /* position in the deadline heap, HEAP_NONE if durable or leased */
        struct mem_lease *lease; /* the lease object it is attached to, or NULL */
};

/*
 * A lease object (docs/store.md §1.9), under store->lock. Its deadline is
 * USEC_INFINITY while kept alive (renewed at every instant: no timer), else
 * the last renewal + ttl. It stays in the store's list until it has ended AND
 * its owner freed it, so attached entries never point to freed memory.
 */
struct mem_lease {
        struct store_lease base;
        usec_t ttl, deadline;
        bool ended, owner_gone;
        struct mem_lease *prev, *next;
};

struct mem_watch;

struct keyspace {
        enum store_keyspace id;
        uint64_t revision;      /* last drawn; the first draw answers 1 */
        struct entry **entries; /* sorted by strcmp() of their keys */
        size_t n_entries, cap_entries;
        struct entry **heap; /* min-heap by deadline (ephemeral keyspace only) */
        size_t n_heap, cap_heap;
        struct mem_watch *watches; /* attached watches, doubly linked */
};

struct store_mem {
        struct store base;
        pthread_mutex_t lock;
        /* One reference for the owner side (dropped by close) plus one per watch:
         * a watch may outlive the owner and still needs this lock to detach. */
        atomic_uint n_internal;
        struct store_clock clock;
        int timer_fd;     /* default clock only; -1 otherwise */
        usec_t armed;     /* the deadline clock.arm() last accepted */
        bool armed_known; /* false after a failed arm(): the next rearm retries */
        usec_t default_ttl;
        size_t queue_capacity;
        size_t max_keys;
        struct keyspace ks[_STORE_KEYSPACE_MAX];
        struct mem_lease *leases; /* every lease not yet both ended and freed */
};

static inline struct store_mem *to_mem(struct store *s) {
        return container_of(s, struct store_mem, base);
}

/* Takes store->lock; for the ephemeral keyspace, expires dead keys and leases
 * first and answers the clock's now (0 for durable). */
usec_t mem_op_begin(struct store_mem *s, enum store_keyspace ks);
/* Re-arms the clock and releases store->lock. */
void mem_op_end(struct store_mem *s);
/* now + ttl, saturated below USEC_INFINITY. */
usec_t mem_deadline_after(usec_t now, usec_t ttl);
/* store_create() under the lock; lease: attach the key to it (no TTL of its own). */
int mem_create_locked(struct store_mem *s, struct keyspace *k, const char *key,
                      const void *value, size_t size, usec_t now, usec_t ttl,
                      struct mem_lease *lease, uint64_t *ret_revision);
/* A DELETE record for e (NULL on ENOMEM: mem_entry_delete copes). */
struct store_event *mem_delete_event_new(const struct keyspace *k, const struct entry *e);
/* Publishes the DELETE of entries[idx] (a new revision, cause) and removes it;
 * answers the deleted entry's revision. */
uint64_t mem_entry_delete(struct keyspace *k, size_t idx, struct store_event *ev,
                          enum store_cause cause);

/* ---- lease objects (store-mem-lease.c) ---- */

/* The live lease that ends first, or NULL. */
struct mem_lease *mem_lease_first(const struct store_mem *s);
/* Unlinks l from the store's list and frees it. */
void mem_lease_unlink(struct store_mem *s, struct mem_lease *l);
/* Ends l: each attached key goes (cause expired, key order); frees l if its
 * owner freed it. Returns the count of keys. */
int mem_lease_end(struct store_mem *s, struct mem_lease *l);
int mem_lease_grant(struct store *base, usec_t ttl, struct store_lease **ret);
int mem_lease_keep_alive(struct store_lease *base, bool on);
int mem_lease_revoke(struct store_lease *base);
void mem_lease_free(struct store_lease *base);
usec_t mem_lease_expiry(struct store_lease *base);
int mem_create_leased(struct store *base, const char *key, const void *value, size_t size,
                      struct store_lease *lease, uint64_t *ret_revision);
