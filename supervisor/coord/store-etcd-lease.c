/* SPDX-License-Identifier: MIT */
/*
 * Lease objects of the etcd backend (docs/store.md §1.9, §4.3): a real etcd
 * lease (/v3/lease/grant), kept alive by the store's I/O thread with one
 * /v3/lease/keepalive request every TTL/3 (a delayed request: the thread's
 * only timer), revoked with /v3/lease/revoke. Keys are attached by putting
 * them with the lease's ID (store-etcd.c), so etcd's lessor deletes them when
 * the lease ends: watchers see `expired` (no tombstone).
 *
 * The keep-alive is a chain: each answer (in the I/O thread) queues the next
 * request TTL/3 later while `keep` holds. The chain holds a reference on the
 * lease; stopping cancels the pending request, whose completion ends the
 * chain and drops it. Locking: s->lock guards keep, pending, chain and the
 * store's lease list.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store-etcd-internal.h"

struct etcd_lease {
        struct store_lease base;
        struct store_etcd *s;
        int64_t id;
        usec_t ttl; /* as granted by etcd, whole seconds */
        atomic_uint n_ref; /* the owner and the keep-alive chain */
        bool keep;         /* the owner wants it kept alive */
        bool chain;        /* a keep-alive request is queued or in flight */
        struct etcd_req *pending;
        usec_t pending_at; /* when the pending renewal is due: it is sent no earlier */
        usec_t expiry;     /* the last renewal's (or the grant's) start + ttl (store_lease_expiry) */
        struct etcd_lease *next; /* s->leases */
};

static struct etcd_lease *to_lease(struct store_lease *l) {
        return container_of(l, struct etcd_lease, base);
}

static struct store_etcd *to_etcd(struct store *s) {
        return container_of(s, struct store_etcd, base);
}

int64_t etcd_lease_id(struct store_lease *l) {
        return to_lease(l)->id;
}

bool etcd_lease_is_object(struct store_etcd *s, int64_t id) {
        bool found = false;

        pthread_mutex_lock(&s->lock);
        for (struct etcd_lease *l = s->leases; l && !found; l = l->next)
                found = l->id == id;
        pthread_mutex_unlock(&s->lock);
        return found;
}

static void lease_unref(struct etcd_lease *l) {
        if (atomic_fetch_sub_explicit(&l->n_ref, 1, memory_order_acq_rel) != 1)
                return;
        struct store_etcd *s = l->s;
        pthread_mutex_lock(&s->lock);
        for (struct etcd_lease **p = &s->leases; *p; p = &(*p)->next)
                if (*p == l) {
                        *p = l->next;
                        break;
                }
        pthread_mutex_unlock(&s->lock);
        free(l);
}

static struct json_object *id_body(int64_t id) {
        struct json_object *b = json_object_new_object();
        etcd_add_int(b, "ID", id);
        return b;
}

/* The TTL a keep-alive answer reports (0: the lease is gone). */
static int64_t keepalive_ttl(struct json_object *reply) {
        struct json_object *res;
        return json_object_object_get_ex(reply, "result", &res) ? etcd_json_int(res, "TTL") : 0;
}

static void keepalive_done(struct etcd_req *r, int error, struct json_object *reply, void *userdata);

/* Queues the next keep-alive `delay` from now, or with from_due from when the
 * last one was due (s->lock held). */
static int keepalive_queue(struct etcd_lease *l, usec_t delay, bool from_due) {
        struct etcd_client *c = l->s->client;
        usec_t now = now_usec(CLOCK_MONOTONIC), at = now + delay;
        /* After an answer, TTL/3 from when the last one was due, not from its answer:
         * a slow answer (a loaded etcd) must not stretch the cadence (bench-cluster-load
         * saw 2.45 s instead of 2 s at TTL 6 s with 100 hosts crash-looping on 2 cores). */
        if (from_due)
                at = l->pending_at + delay > now ? l->pending_at + delay : now;

        l->pending_at = at;
        return etcd_submit_at(c, "/v3/lease/keepalive", id_body(l->id), false, NULL,
                              keepalive_done, l, at, at + MIN(l->ttl / 3, etcd_op_timeout(c)),
                              &l->pending);
}

/* I/O thread: one renewal answered; the next one TTL/3 later while kept. */
static void keepalive_done(struct etcd_req *r, int error, struct json_object *reply, void *userdata) {
        struct etcd_lease *l = userdata;
        struct store_etcd *s = l->s;
        bool gone = error >= 0 && keepalive_ttl(reply) <= 0;
        usec_t delay = l->ttl / 3;

        if (error < 0 && error != -ECANCELED && error != -EPIPE) {
                /* Again TTL/6 after this try was due — at once when it took longer (it
                 * waited for a member until its deadline), and at most TTL/24 from now
                 * while the lease lives: a renewal that reaches etcd before the holder's
                 * stop deadline keeps its singletons running, so an outage ending then
                 * must not find the next try still waiting. Members failing at once
                 * (refused, no leader during an election) were asked again only every
                 * TTL/6: at TTL 6 s, 1, 2 and 3 s after the renewal was due, and Dg is
                 * 2.74 s after it — an election that ended 2.7 s after the leader's kill
                 * stopped a singleton (cluster-trials' leader trial under ASan). */
                pthread_mutex_lock(&s->lock);
                usec_t now = now_usec(CLOCK_MONOTONIC), next = l->pending_at + l->ttl / 6;
                bool alive = now < l->expiry;
                pthread_mutex_unlock(&s->lock);
                delay = next > now ? next - now : 0;
                if (alive)
                        delay = MIN(delay, l->ttl / 24);
                log_warning_errno(error, "store-etcd: lease %lld: keep-alive failed (%m), "
                                  "retrying in %llu ms", (long long) l->id,
                                  (unsigned long long) (delay / USEC_PER_MSEC));
        }
        if (gone)
                log_warning("store-etcd: lease %lld has ended on etcd; its keys are gone",
                            (long long) l->id);
        pthread_mutex_lock(&s->lock);
        if (error >= 0)
                l->expiry = gone ? 0 : l->pending_at + (usec_t) keepalive_ttl(reply) * USEC_PER_SEC;
        l->pending = NULL;
        bool again = l->keep && !gone && error != -ECANCELED && error != -EPIPE &&
                     keepalive_queue(l, delay, error >= 0) >= 0;
        if (!again) {
                l->chain = false;
                l->keep = l->keep && !gone;
        }
        pthread_mutex_unlock(&s->lock);
        if (!again)
                lease_unref(l);
}

/* A lease object for etcd lease id, in s's list. */
static int lease_new(struct store_etcd *s, int64_t id, usec_t ttl, usec_t expiry, struct store_lease **ret) {
        struct etcd_lease *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->base.store = &s->base;
        l->s = s;
        l->id = id;
        l->ttl = ttl;
        l->expiry = expiry;
        atomic_init(&l->n_ref, 1);
        pthread_mutex_lock(&s->lock);
        l->next = s->leases;
        s->leases = l;
        pthread_mutex_unlock(&s->lock);
        *ret = &l->base;
        return 0;
}

int etcd_lease_grant(struct store *base, usec_t ttl_usec, struct store_lease **ret) {
        struct store_etcd *s = to_etcd(base);
        struct json_object *b = json_object_new_object(), *reply = NULL;
        usec_t ttl = ttl_usec ?: s->default_ttl, start = now_usec(CLOCK_MONOTONIC);
        int q;

        json_object_object_add(b, "TTL",
                               json_object_new_int64((int64_t) ((ttl + USEC_PER_SEC - 1) / USEC_PER_SEC)));
        q = etcd_call(s->client, "/v3/lease/grant", b, &reply);
        if (q < 0)
                return q;
        usec_t ttl_granted = (usec_t) etcd_json_int(reply, "TTL") * USEC_PER_SEC;
        q = lease_new(s, etcd_json_int(reply, "ID"), ttl_granted, start + ttl_granted, ret);
        json_object_put(reply);
        return q;
}

/* Stops the chain (s->lock held): the pending request's completion ends it. */
static void keepalive_stop(struct etcd_lease *l) {
        l->keep = false;
        if (l->pending)
                etcd_req_cancel(l->s->client, l->pending);
}

int etcd_lease_keep_alive(struct store_lease *base, bool on) {
        struct etcd_lease *l = to_lease(base);
        struct store_etcd *s = l->s;
        struct json_object *reply = NULL;
        int q = 0;

        if (!on) {
                pthread_mutex_lock(&s->lock);
                keepalive_stop(l);
                pthread_mutex_unlock(&s->lock);
                return 0;
        }
        /* The first renewal, waited for: an ended lease is said at once. */
        usec_t start = now_usec(CLOCK_MONOTONIC);
        q = etcd_call(s->client, "/v3/lease/keepalive", id_body(l->id), &reply);
        if (q >= 0 && keepalive_ttl(reply) <= 0)
                q = -ENOENT;
        json_object_put(reply);
        if (q < 0)
                return q;
        pthread_mutex_lock(&s->lock);
        if (start + l->ttl > l->expiry)
                l->expiry = start + l->ttl;
        l->keep = true;
        if (!l->chain) {
                atomic_fetch_add_explicit(&l->n_ref, 1, memory_order_relaxed);
                q = keepalive_queue(l, l->ttl / 3, false);
                l->chain = q >= 0;
                l->keep = q >= 0;
        }
        pthread_mutex_unlock(&s->lock);
        if (q < 0)
                lease_unref(l);
        return q;
}

int etcd_lease_revoke(struct store_lease *base) {
        struct etcd_lease *l = to_lease(base);
        struct store_etcd *s = l->s;

        pthread_mutex_lock(&s->lock);
        keepalive_stop(l);
        pthread_mutex_unlock(&s->lock);
        int q = etcd_call(s->client, "/v3/lease/revoke", id_body(l->id), NULL);
        if (q == -ENOENT)
                q = 0; /* ended already */
        if (q == 0) {
                pthread_mutex_lock(&s->lock);
                l->expiry = 0;
                pthread_mutex_unlock(&s->lock);
        }
        return q;
}

usec_t etcd_lease_expiry(struct store_lease *base) {
        struct etcd_lease *l = to_lease(base);

        pthread_mutex_lock(&l->s->lock);
        usec_t r = l->expiry;
        pthread_mutex_unlock(&l->s->lock);
        return r;
}

void etcd_lease_free(struct store_lease *base) {
        struct etcd_lease *l = to_lease(base);
        struct store_etcd *s = l->s;

        pthread_mutex_lock(&s->lock);
        keepalive_stop(l);
        pthread_mutex_unlock(&s->lock);
        lease_unref(l);
}

/* ---- carried across daemon-reexec, and asked about (store-etcd.h) ---- */

int store_etcd_lease_adopt(struct store *base, int64_t id, usec_t ttl_usec, usec_t expiry,
                           struct store_lease **ret) {
        if (!base || !ret || id <= 0 || ttl_usec < USEC_PER_SEC || !streq(base->ops->name, "etcd"))
                return -EINVAL;
        return lease_new(to_etcd(base), id, ttl_usec, expiry, ret);
}

int64_t store_etcd_lease_id(struct store_lease *l) {
        return l && streq(l->store->ops->name, "etcd") ? etcd_lease_id(l) : 0;
}

usec_t store_etcd_lease_ttl(struct store_lease *l) {
        return l && streq(l->store->ops->name, "etcd") ? to_lease(l)->ttl : 0;
}

/* One LeaseTimeToLive ask of n leases (store_etcd_lease_time_left() and its
 * _async form): shared by the asker and each request's completion, counted
 * (n_ref: the asker's own reference, one per request in flight; the last one
 * frees it). Waited for on cond (blocking), or, once every request has
 * ended, its completion `post` is queued on the store's completion list and
 * `op.done` runs from store_dispatch() in the owner's loop (async). */
struct store_etcd_ttl_ask {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        size_t pending, n_ref;
        bool submitted; /* every request is sent (or failed to be): the last answer ends it */
        bool done;      /* ended: every sent request has answered */
        size_t n;
        int64_t *ms;
        /* async: the owner's loop side (only the loop touches cb, userdata) */
        struct store_op op;
        struct eop *post;
        store_etcd_ttl_fn cb;
        void *userdata;
};

static void ttl_ask_unref(struct store_etcd_ttl_ask *a) {
        pthread_mutex_lock(&a->lock);
        bool last = --a->n_ref == 0;
        pthread_mutex_unlock(&a->lock);
        if (!last)
                return;
        pthread_cond_destroy(&a->cond);
        pthread_mutex_destroy(&a->lock);
        etcd_loop_done_free(a->post);
        free(a->ms);
        free(a);
}

struct ttl_slot {
        struct store_etcd_ttl_ask *a;
        size_t i;
};

/* Every request ended (a->lock held): the waiter woken, or the completion
 * queued for the owner's loop (which then owns the post). */
static void ttl_ask_ended(struct store_etcd_ttl_ask *a) {
        a->done = true;
        if (a->post) {
                etcd_loop_done_post(a->post, 0);
                a->post = NULL;
        } else
                pthread_cond_signal(&a->cond);
}

/* I/O thread: one /v3/lease/timetolive answered: "TTL" is seconds left, -1 when the lease is gone. */
static void ttl_done(struct etcd_req *r, int error, struct json_object *reply, void *userdata) {
        struct ttl_slot *slot = userdata;
        struct store_etcd_ttl_ask *a = slot->a;
        pthread_mutex_lock(&a->lock);
        if (error >= 0) {
                int64_t t = etcd_json_int(reply, "TTL");
                a->ms[slot->i] = t < 0 ? STORE_ETCD_LEASE_GONE : t * 1000;
        }
        if (--a->pending == 0 && a->submitted)
                ttl_ask_ended(a);
        pthread_mutex_unlock(&a->lock);
        free(slot);
        ttl_ask_unref(a);
}

static struct store_etcd_ttl_ask *ttl_ask_new(size_t n) {
        struct store_etcd_ttl_ask *a = calloc(1, sizeof(*a));
        if (!a || !(a->ms = calloc(n ?: 1, sizeof(*a->ms)))) {
                free(a);
                return NULL;
        }
        pthread_mutex_init(&a->lock, NULL);
        etcd_cond_init(&a->cond);
        a->n_ref = 1;
        a->n = n;
        for (size_t i = 0; i < n; i++)
                a->ms[i] = STORE_ETCD_LEASE_UNKNOWN;
        return a;
}

/* Sends one request per id, each bounded by deadline; then the ask ends as
 * soon as none is in flight (at once if none could be sent). */
static void ttl_ask_send(struct store_etcd *s, struct store_etcd_ttl_ask *a, const int64_t *ids, usec_t deadline) {
        for (size_t i = 0; i < a->n; i++) {
                struct ttl_slot *slot = malloc(sizeof(*slot));
                if (!slot)
                        continue;
                *slot = (struct ttl_slot) { .a = a, .i = i };
                pthread_mutex_lock(&a->lock);
                a->pending++;
                a->n_ref++;
                pthread_mutex_unlock(&a->lock);
                if (etcd_submit(s->client, "/v3/lease/timetolive", id_body(ids[i]), false, NULL, ttl_done, slot,
                                deadline, NULL) < 0) {
                        pthread_mutex_lock(&a->lock);
                        a->pending--;
                        a->n_ref--;
                        pthread_mutex_unlock(&a->lock);
                        free(slot);
                }
        }
        pthread_mutex_lock(&a->lock);
        a->submitted = true;
        if (a->pending == 0)
                ttl_ask_ended(a);
        pthread_mutex_unlock(&a->lock);
}

int store_etcd_lease_time_left(struct store *base, const int64_t *ids, size_t n, usec_t wait_usec,
                               int64_t *ret_ms) {
        if (!base || (n > 0 && (!ids || !ret_ms)) || !streq(base->ops->name, "etcd"))
                return -EINVAL;
        struct store_etcd_ttl_ask *a = ttl_ask_new(n);
        if (!a)
                return -ENOMEM;
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + wait_usec;
        ttl_ask_send(to_etcd(base), a, ids, deadline);
        pthread_mutex_lock(&a->lock);
        (void) etcd_wait_until(&a->cond, &a->lock, &a->done, deadline);
        memcpy(ret_ms, a->ms, n * sizeof(*ret_ms));
        size_t answered = 0;
        for (size_t i = 0; i < n; i++)
                answered += a->ms[i] != STORE_ETCD_LEASE_UNKNOWN;
        pthread_mutex_unlock(&a->lock);
        ttl_ask_unref(a);
        return (int) answered;
}

/* The owner's loop (store_dispatch()): the ask has ended; its answers to the asker unless cancelled. */
static void ttl_ask_dispatched(struct store_op *op, void *userdata) {
        struct store_etcd_ttl_ask *a = userdata;
        if (a->cb) {
                size_t answered = 0;
                pthread_mutex_lock(&a->lock);
                for (size_t i = 0; i < a->n; i++)
                        answered += a->ms[i] != STORE_ETCD_LEASE_UNKNOWN;
                pthread_mutex_unlock(&a->lock);
                a->cb(a->ms, a->n, answered, a->userdata);
        }
        ttl_ask_unref(a);
}

int store_etcd_lease_time_left_async(struct store *base, const int64_t *ids, size_t n, usec_t wait_usec,
                                     store_etcd_ttl_fn cb, void *userdata, struct store_etcd_ttl_ask **ret) {
        if (!base || (n > 0 && !ids) || !cb || !ret || !streq(base->ops->name, "etcd"))
                return -EINVAL;
        struct store_etcd *s = to_etcd(base);
        struct store_etcd_ttl_ask *a = ttl_ask_new(n);
        if (!a)
                return -ENOMEM;
        a->op = (struct store_op) { .done = ttl_ask_dispatched, .userdata = a };
        a->post = etcd_loop_done_new(s, &a->op);
        if (!a->post) {
                ttl_ask_unref(a);
                return -ENOMEM;
        }
        a->cb = cb;
        a->userdata = userdata;
        *ret = a;
        ttl_ask_send(s, a, ids, now_usec(CLOCK_MONOTONIC) + wait_usec);
        return 0;
}

void store_etcd_ttl_ask_cancel(struct store_etcd_ttl_ask *a) {
        if (a)
                a->cb = NULL; /* the loop's own field: ttl_ask_dispatched() frees it, late answers dropped */
}
