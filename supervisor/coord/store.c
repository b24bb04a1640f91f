/* SPDX-License-Identifier: MIT */
/*
 * The store's front (SPEC §2.4): argument checks shared by every backend,
 * owner reference counting, dispatch through the operations table; plus the
 * helpers backends share (records, the default clock). The in-memory backend
 * is store-mem.c; the contract is docs/store.md.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>

#include "store.h"

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * The reference count lives in front of the public struct, so the public
 * type has no field a caller could touch; key and value follow it in the
 * same allocation. Records are immutable once published, so the only shared
 * mutable state is n_ref (atomic): watchers on different threads unref the
 * same record.
 */
struct event_box {
        atomic_uint n_ref;
        struct store_event ev;
        char data[];
};

struct store_event *store_event_new(enum store_event_type type, enum store_keyspace ks,
                                    const char *key, const void *value, size_t size) {
        size_t klen = key ? strlen(key) : 0;
        struct event_box *b;

        if (size > STORE_VALUE_MAX || klen > STORE_KEY_MAX)
                return NULL;
        b = malloc(sizeof(*b) + klen + 1 + size + 1);
        if (!b)
                return NULL;

        char *k = b->data, *v = b->data + klen + 1;
        if (klen > 0)
                memcpy(k, key, klen);
        k[klen] = '\0';
        if (size > 0)
                memcpy(v, value, size);
        v[size] = '\0';

        atomic_init(&b->n_ref, 1);
        b->ev = (struct store_event) {
                .type = type,
                .keyspace = ks,
                .key = k,
                .value = v,
                .value_size = size,
        };
        return &b->ev;
}

struct store_event *store_event_ref(struct store_event *ev) {
        if (ev)
                atomic_fetch_add_explicit(&container_of(ev, struct event_box, ev)->n_ref, 1,
                                          memory_order_relaxed);
        return ev;
}

struct store_event *store_event_unref(struct store_event *ev) {
        if (!ev)
                return NULL;
        struct event_box *b = container_of(ev, struct event_box, ev);
        /* acq_rel: the thread that frees must see every other thread's reads done. */
        if (atomic_fetch_sub_explicit(&b->n_ref, 1, memory_order_acq_rel) == 1)
                free(b);
        return NULL;
}

void store_event_array_free(struct store_event **evs, size_t n) {
        if (!evs)
                return;
        for (size_t i = 0; i < n; i++)
                store_event_unref(evs[i]);
        free(evs);
}

/* ------------------------------------------------------------------------ */
/* The default clock                                                         */
/* ------------------------------------------------------------------------ */

usec_t store_clock_monotonic_now(void *userdata) {
        return now_usec(CLOCK_MONOTONIC);
}

int store_clock_timerfd_arm(void *userdata, usec_t deadline) {
        int fd = *(const int *) userdata;
        struct itimerspec its = {};

        /* it_value all zero disarms; a deadline of 0 (already past) must still fire. */
        if (deadline != USEC_INFINITY)
                its.it_value = deadline > 0 ? usec_to_timespec(deadline)
                                            : (struct timespec) { .tv_nsec = 1 };
        if (timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
                return negative_errno();
        return 0;
}

int store_timerfd_new(void) {
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        return fd < 0 ? negative_errno() : fd;
}

int store_timerfd_drain(int fd) {
        uint64_t expirations;

        for (;;) {
                if (read(fd, &expirations, sizeof(expirations)) >= 0)
                        continue;
                if (errno == EINTR)
                        continue;
                return errno == EAGAIN ? 0 : negative_errno();
        }
}

/* ------------------------------------------------------------------------ */
/* Argument checks: one place, so every backend sees the same contract       */
/* ------------------------------------------------------------------------ */

static bool keyspace_valid(enum store_keyspace ks) {
        return ks == STORE_DURABLE || ks == STORE_EPHEMERAL;
}

static int check_key(const char *key) {
        if (!key || key[0] == '\0')
                return -EINVAL;
        return strnlen(key, STORE_KEY_MAX + 1) > STORE_KEY_MAX ? -E2BIG : 0;
}

static int check_prefix(const char *prefix) {
        if (!prefix)
                return 0;
        return strnlen(prefix, STORE_KEY_MAX + 1) > STORE_KEY_MAX ? -E2BIG : 0;
}

static int check_value(const void *value, size_t size) {
        if (!value && size > 0)
                return -EINVAL;
        return size > STORE_VALUE_MAX ? -E2BIG : 0;
}

/* Durable keys never expire: a TTL there is a caller bug, not a default. */
static int check_ttl(enum store_keyspace ks, usec_t ttl_usec) {
        if (ks == STORE_DURABLE)
                return ttl_usec == 0 ? 0 : -EINVAL;
        return ttl_usec <= STORE_TTL_MAX_USEC ? 0 : -EINVAL;
}

static int check_write(struct store *s, enum store_keyspace ks, const char *key,
                       const void *value, size_t size, usec_t ttl_usec) {
        int r;

        if (!s || !keyspace_valid(ks))
                return -EINVAL;
        r = check_key(key);
        if (r < 0)
                return r;
        r = check_value(value, size);
        if (r < 0)
                return r;
        return check_ttl(ks, ttl_usec);
}

/* ------------------------------------------------------------------------ */
/* The front                                                                 */
/* ------------------------------------------------------------------------ */

int store_new(const struct store_options *opts, struct store **ret) {
        if (!ret)
                return -EINVAL;
        return store_mem_new(opts, ret);
}

struct store *store_ref(struct store *s) {
        if (s)
                atomic_fetch_add_explicit(&s->n_ref, 1, memory_order_relaxed);
        return s;
}

struct store *store_unref(struct store *s) {
        if (s && atomic_fetch_sub_explicit(&s->n_ref, 1,
                                           memory_order_acq_rel) == 1)
                s->ops->close(s);
        return NULL;
}

int store_create(struct store *s, enum store_keyspace ks, const char *key,
                 const void *value, size_t size, usec_t ttl_usec, uint64_t *ret_revision) {
        int r = check_write(s, ks, key, value, size, ttl_usec);
        if (r < 0)
                return r;
        return s->ops->create(s, ks, key, value, size, ttl_usec, ret_revision);
}

int store_update(struct store *s, enum store_keyspace ks, const char *key,
                 const void *value, size_t size, uint64_t expected, usec_t ttl_usec,
                 uint64_t *ret_revision) {
        int r = check_write(s, ks, key, value, size, ttl_usec);
        if (r < 0)
                return r;
        if (expected == 0)
                return -EINVAL;
        return s->ops->update(s, ks, key, value, size, expected, ttl_usec, ret_revision);
}

int store_delete(struct store *s, enum store_keyspace ks, const char *key,
                 uint64_t expected, uint64_t *ret_revision) {
        if (!s || !keyspace_valid(ks))
                return -EINVAL;
        int r = check_key(key);
        if (r < 0)
                return r;
        return s->ops->delete(s, ks, key, expected, ret_revision);
}

int store_get(struct store *s, enum store_keyspace ks, const char *key, struct store_event **ret) {
        if (!s || !keyspace_valid(ks) || !ret)
                return -EINVAL;
        int r = check_key(key);
        if (r < 0)
                return r;
        return s->ops->get(s, ks, key, ret);
}

int store_list(struct store *s, enum store_keyspace ks, const char *prefix,
               struct store_event ***ret_events, size_t *ret_n) {
        if (!s || !keyspace_valid(ks) || !ret_events)
                return -EINVAL;
        struct store_event **evs = NULL;
        size_t n = 0;
        int r = check_prefix(prefix);
        if (r < 0)
                return r;
        r = s->ops->list(s, ks, prefix ?: "", &evs, &n);
        if (r < 0)
                return r;
        *ret_events = evs;
        if (ret_n)
                *ret_n = n;
        return (int) n;
}

int store_get_fd(struct store *s) {
        return s ? s->ops->get_fd(s) : -EINVAL;
}

int store_dispatch(struct store *s) {
        return s ? s->ops->dispatch(s) : -EINVAL;
}

int store_run_expiry(struct store *s) {
        return s ? s->ops->run_expiry(s) : -EINVAL;
}

int store_watch(struct store *s, enum store_keyspace ks, const char *prefix,
                struct store_watch **ret) {
        if (!s || !keyspace_valid(ks) || !ret)
                return -EINVAL;
        int r = check_prefix(prefix);
        if (r < 0)
                return r;
        return s->ops->watch(s, ks, prefix ?: "", ret);
}

int store_watch_fd(const struct store_watch *w) {
        return w ? w->ops->watch_fd(w) : -EINVAL;
}

int store_watch_next(struct store_watch *w, struct store_event **ret) {
        if (!w || !ret)
                return -EINVAL;
        return w->ops->watch_next(w, 0, ret);
}

int store_watch_wait(struct store_watch *w, usec_t timeout_usec, struct store_event **ret) {
        if (!w || !ret)
                return -EINVAL;
        return w->ops->watch_next(w, timeout_usec, ret);
}

struct store_watch *store_watch_free(struct store_watch *w) {
        if (w)
                w->ops->watch_free(w);
        return NULL;
}

/* ---- lease objects ---- */

int store_lease_grant(struct store *s, usec_t ttl_usec, struct store_lease **ret) {
        if (!s || !ret || ttl_usec > STORE_TTL_MAX_USEC)
                return -EINVAL;
        return s->ops->lease_grant(s, ttl_usec, ret);
}

int store_lease_keep_alive(struct store_lease *l, bool on) {
        return l ? l->store->ops->lease_keep_alive(l, on) : -EINVAL;
}

int store_lease_revoke(struct store_lease *l) {
        return l ? l->store->ops->lease_revoke(l) : -EINVAL;
}

struct store_lease *store_lease_free(struct store_lease *l) {
        if (l)
                l->store->ops->lease_free(l);
        return NULL;
}

usec_t store_lease_expiry(struct store_lease *l) {
        return l ? l->store->ops->lease_expiry(l) : 0;
}

int store_create_leased(struct store *s, const char *key, const void *value, size_t size,
                        struct store_lease *l, uint64_t *ret_revision) {
        int r = check_write(s, STORE_EPHEMERAL, key, value, size, 0);
        if (r < 0)
                return r;
        if (!l || l->store != s)
                return -EINVAL;
        return s->ops->create_leased(s, key, value, size, l, ret_revision);
}

static int check_op(struct store *s, struct store_op *op) {
        int r;

        if (!s || !op || !op->done || !keyspace_valid(op->keyspace))
                return -EINVAL;
        if (op->lease && (op->type != STORE_OP_CREATE || op->keyspace != STORE_EPHEMERAL ||
                          op->ttl_usec != 0 || op->lease->store != s))
                return -EINVAL;
        switch (op->type) {
        case STORE_OP_CREATE:
                return check_write(s, op->keyspace, op->key, op->value, op->size, op->ttl_usec);
        case STORE_OP_UPDATE:
                r = check_write(s, op->keyspace, op->key, op->value, op->size, op->ttl_usec);
                return r < 0 ? r : op->expected == 0 ? -EINVAL : 0;
        case STORE_OP_DELETE:
        case STORE_OP_GET:
                return check_key(op->key);
        case STORE_OP_LIST:
                return check_prefix(op->key);
        default:
                return -EINVAL;
        }
}

/* The blocking op, for a backend without a submit of its own (in-memory). */
static int run_op(struct store *s, struct store_op *op) {
        switch (op->type) {
        case STORE_OP_CREATE:
                if (op->lease)
                        return s->ops->create_leased(s, op->key, op->value, op->size, op->lease,
                                                     &op->revision);
                return s->ops->create(s, op->keyspace, op->key, op->value, op->size, op->ttl_usec,
                                      &op->revision);
        case STORE_OP_UPDATE:
                return s->ops->update(s, op->keyspace, op->key, op->value, op->size, op->expected,
                                      op->ttl_usec, &op->revision);
        case STORE_OP_DELETE:
                return s->ops->delete(s, op->keyspace, op->key, op->expected, &op->revision);
        case STORE_OP_GET:
                return s->ops->get(s, op->keyspace, op->key, &op->event);
        default: {
                int r = s->ops->list(s, op->keyspace, op->key ?: "", &op->events, &op->n_events);
                return r < 0 ? r : (int) op->n_events;
        }
        }
}

int store_submit(struct store *s, struct store_op *op) {
        int r = check_op(s, op);
        if (r < 0)
                return r;
        op->revision = 0;
        op->event = NULL;
        op->events = NULL;
        op->n_events = 0;
        if (s->ops->submit)
                return s->ops->submit(s, op);
        op->result = run_op(s, op);
        op->done(op, op->userdata);
        return 0;
}

const char *store_keyspace_to_string(enum store_keyspace ks) {
        switch (ks) {
        case STORE_DURABLE:
                return "durable";
        case STORE_EPHEMERAL:
                return "ephemeral";
        default:
                return NULL;
        }
}

const char *store_event_type_to_string(enum store_event_type t) {
        switch (t) {
        case STORE_EVENT_PUT:
                return "put";
        case STORE_EVENT_DELETE:
                return "delete";
        case STORE_EVENT_SNAPSHOT_DONE:
                return "snapshot-done";
        default:
                return NULL;
        }
}

const char *store_cause_to_string(enum store_cause c) {
        switch (c) {
        case STORE_CAUSE_NONE:
                return "none";
        case STORE_CAUSE_DELETED:
                return "deleted";
        case STORE_CAUSE_EXPIRED:
                return "expired";
        default:
                return NULL;
        }
}
