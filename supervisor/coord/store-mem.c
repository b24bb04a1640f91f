/* SPDX-License-Identifier: MIT */
/*
 * The in-memory backend of the leased store (SPEC §2.4; design and rationale
 * in docs/store.md).
 *
 * Per keyspace: a sorted array of entries (binary search; a prefix is one
 * contiguous run), a min-heap of ephemeral deadlines, the revision counter,
 * and the list of attached watches. An entry's current value is an immutable
 * PUT record (struct store_event), so get(), list(), a watch's snapshot and
 * every live watcher share it by reference instead of copying it.
 *
 * Locking — two kinds of mutex, always taken in this order:
 *   1. store->lock: the keyspaces (entries, heap, revision), the watch lists
 *      and each watch's list links and `attached` flag, the armed deadline.
 *   2. watch->lock: one watch's queue, its end state and its eventfd state.
 * A consumer takes only its watch's lock, so reading never waits for the
 * store lock (only for a push to that same watch). No caller code runs under
 * either lock, except the clock seam's now() and arm().
 *
 * Ordering rule (SPEC §2.4: no gaps, per-key order): every mutation draws its
 * revision AND pushes its event into every matching watch before it releases
 * store->lock. A watch is attached under that lock right after its snapshot
 * and marker are queued. So each watch sees, after its snapshot, every
 * mutation of its prefix exactly once, in revision order.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include "store-mem-internal.h"

struct mem_watch {
        struct store_watch base;
        struct store_mem *store; /* internal reference */
        enum store_keyspace ks;
        char *prefix;
        size_t prefix_len;

        /* Under store->lock. */
        struct mem_watch *prev, *next;
        bool attached;

        /* Under lock. */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct store_event **ring;
        size_t ring_cap, head, n;
        size_t ring_max;  /* the bound: the snapshot, the marker and queue_capacity live events */
        int end;          /* 0 while live; -ENOBUFS (lagged) or -EPIPE (store closed) */
        int fd;           /* eventfd: readable iff n > 0 || end != 0 */
        bool fd_readable; /* whether fd's counter is non-zero */
        unsigned n_waiting;
};

static const struct store_ops mem_ops;

static struct mem_watch *to_watch(const struct store_watch *w) {
        return container_of(w, struct mem_watch, base);
}

static void mem_unref_internal(struct store_mem *s) {
        if (atomic_fetch_sub_explicit(&s->n_internal, 1, memory_order_acq_rel) != 1)
                return;
        pthread_mutex_destroy(&s->lock);
        free(s);
}

/* ------------------------------------------------------------------------ */
/* Ordered map: sorted array                                                 */
/* ------------------------------------------------------------------------ */

/* Index of the first entry whose key is >= key; *ret_found tells if it is equal. */
static size_t map_lower_bound(const struct keyspace *k, const char *key, bool *ret_found) {
        size_t lo = 0, hi = k->n_entries;
        int c = 1;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                c = strcmp(k->entries[mid]->put->key, key);
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (ret_found)
                *ret_found = lo < k->n_entries && streq(k->entries[lo]->put->key, key);
        return lo;
}

static struct entry *map_find(const struct keyspace *k, const char *key, size_t *ret_idx) {
        bool found;
        size_t idx = map_lower_bound(k, key, &found);

        if (ret_idx)
                *ret_idx = idx;
        return found ? k->entries[idx] : NULL;
}

static int grow(struct entry ***array, size_t *cap, size_t want) {
        if (want <= *cap)
                return 0;
        size_t n = *cap ? *cap * 2 : 16;
        while (n < want)
                n *= 2;
        struct entry **a = reallocarray(*array, n, sizeof(**array));
        if (!a)
                return -ENOMEM;
        *array = a;
        *cap = n;
        return 0;
}

static void map_insert(struct keyspace *k, size_t idx, struct entry *e) {
        memmove(k->entries + idx + 1, k->entries + idx, (k->n_entries - idx) * sizeof(*k->entries));
        k->entries[idx] = e;
        k->n_entries++;
}

static void map_remove(struct keyspace *k, size_t idx) {
        k->n_entries--;
        memmove(k->entries + idx, k->entries + idx + 1, (k->n_entries - idx) * sizeof(*k->entries));
}

/* ------------------------------------------------------------------------ */
/* Deadline min-heap (each entry knows its index: O(log n) fix and remove)   */
/* ------------------------------------------------------------------------ */

static void heap_set(struct keyspace *k, size_t i, struct entry *e) {
        k->heap[i] = e;
        e->heap_idx = i;
}

static void heap_sift_up(struct keyspace *k, size_t i) {
        struct entry *e = k->heap[i];

        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (k->heap[parent]->deadline <= e->deadline)
                        break;
                heap_set(k, i, k->heap[parent]);
                i = parent;
        }
        heap_set(k, i, e);
}

static void heap_sift_down(struct keyspace *k, size_t i) {
        struct entry *e = k->heap[i];

        for (;;) {
                size_t c = 2 * i + 1;
                if (c >= k->n_heap)
                        break;
                if (c + 1 < k->n_heap && k->heap[c + 1]->deadline < k->heap[c]->deadline)
                        c++;
                if (e->deadline <= k->heap[c]->deadline)
                        break;
                heap_set(k, i, k->heap[c]);
                i = c;
        }
        heap_set(k, i, e);
}

/* Room was reserved by the caller (grow) before anything changed. */
static void heap_push(struct keyspace *k, struct entry *e) {
        heap_set(k, k->n_heap++, e);
        heap_sift_up(k, e->heap_idx);
}

static void heap_fix(struct keyspace *k, struct entry *e) {
        heap_sift_up(k, e->heap_idx);
        heap_sift_down(k, e->heap_idx);
}

static void heap_remove(struct keyspace *k, struct entry *e) {
        size_t i = e->heap_idx;

        e->heap_idx = HEAP_NONE;
        if (--k->n_heap == i)
                return;
        heap_set(k, i, k->heap[k->n_heap]);
        heap_fix(k, k->heap[i]);
}

static struct entry *heap_top(const struct keyspace *k) {
        return k->n_heap > 0 ? k->heap[0] : NULL;
}

/* ------------------------------------------------------------------------ */
/* Watch queues (watch->lock held unless stated)                             */
/* ------------------------------------------------------------------------ */

static bool watch_matches(const struct mem_watch *w, const char *key) {
        return strncmp(key, w->prefix, w->prefix_len) == 0;
}

/* Makes the fd readable and wakes blocked waiters; called when the queue turns
 * non-empty or the watch ends (waiters only sleep on an empty, live queue). */
static void watch_wake_locked(struct mem_watch *w) {
        if (!w->fd_readable) {
                (void) eventfd_write(w->fd, 1); /* cannot overflow: one write per reset */
                w->fd_readable = true;
        }
        if (w->n_waiting > 0)
                pthread_cond_broadcast(&w->cond);
}

static void watch_unwake_locked(struct mem_watch *w) {
        eventfd_t v;

        if (w->fd_readable) {
                (void) eventfd_read(w->fd, &v);
                w->fd_readable = false;
        }
}

static void watch_drop_queue_locked(struct mem_watch *w) {
        for (; w->n > 0; w->n--) {
                w->ring[w->head] = store_event_unref(w->ring[w->head]);
                w->head = (w->head + 1) % w->ring_cap;
        }
}

/* -ENOBUFS discards the queue at once (memory stays bounded, and the consumer
 * re-watches anyway); -EPIPE keeps it so the consumer drains it first. */
static void watch_end_locked(struct mem_watch *w, int error) {
        if (w->end != 0)
                return;
        w->end = error;
        if (error == -ENOBUFS) {
                watch_drop_queue_locked(w);
                free(w->ring);
                w->ring = NULL;
                w->ring_cap = w->head = 0;
        }
        watch_wake_locked(w);
}

/* A ring holds this many events while idle; it grows (doubling) up to
 * ring_max as events queue, and shrinks back once drained: ten idle
 * watchers of 1,000 units cost 5 KiB, not 160. */
#define WATCH_RING_IDLE 64u

/* Moves the queue into a ring of cap (≥ n) slots, unwrapped. */
static int watch_resize_locked(struct mem_watch *w, size_t cap) {
        struct store_event **v = malloc(cap * sizeof *v);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < w->n; i++)
                v[i] = w->ring[(w->head + i) % w->ring_cap];
        free(w->ring);
        w->ring = v;
        w->ring_cap = cap;
        w->head = 0;
        return 0;
}

static int watch_push_locked(struct mem_watch *w, struct store_event *ev) {
        if (w->end != 0)
                return w->end;
        if (w->n == w->ring_cap &&
            (w->ring_cap >= w->ring_max || watch_resize_locked(w, MIN(w->ring_cap * 2, w->ring_max)) < 0))
                return -ENOBUFS; /* out of memory lags the watcher as a full queue does */
        w->ring[(w->head + w->n) % w->ring_cap] = store_event_ref(ev);
        if (w->n++ == 0)
                watch_wake_locked(w);
        return 0;
}

static int watch_pop_locked(struct mem_watch *w, struct store_event **ret) {
        if (w->n == 0)
                return w->end ?: -EAGAIN;
        *ret = w->ring[w->head];
        w->ring[w->head] = NULL;
        w->head = (w->head + 1) % w->ring_cap;
        if (--w->n == 0 && w->ring_cap > WATCH_RING_IDLE)
                (void) watch_resize_locked(w, WATCH_RING_IDLE);
        if (w->n == 0 && w->end == 0)
                watch_unwake_locked(w);
        return 0;
}

/* store->lock held. */
static void watch_detach(struct keyspace *k, struct mem_watch *w) {
        if (!w->attached)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else
                k->watches = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->prev = w->next = NULL;
        w->attached = false;
}

static void watch_attach(struct keyspace *k, struct mem_watch *w) {
        w->prev = NULL;
        w->next = k->watches;
        if (k->watches)
                k->watches->prev = w;
        k->watches = w;
        w->attached = true;
}

/* store->lock held: ends w with error and stops publishing to it. */
static void watch_end_detach(struct keyspace *k, struct mem_watch *w, int error) {
        pthread_mutex_lock(&w->lock);
        watch_end_locked(w, error);
        pthread_mutex_unlock(&w->lock);
        watch_detach(k, w);
}

/*
 * store->lock held; called right after the revision in ev was drawn (see the
 * ordering rule at the top). A watcher whose queue is full is ended and
 * detached: it gets -ENOBUFS ("re-watch") instead of a gap.
 */
static void broadcast(struct keyspace *k, struct store_event *ev) {
        struct mem_watch *w, *next;

        for (w = k->watches; w; w = next) {
                next = w->next;
                if (!watch_matches(w, ev->key))
                        continue;
                pthread_mutex_lock(&w->lock);
                int r = watch_push_locked(w, ev);
                if (r < 0)
                        watch_end_locked(w, -ENOBUFS);
                pthread_mutex_unlock(&w->lock);
                if (r < 0)
                        watch_detach(k, w);
        }
}

/* store->lock held: an event for key could not be allocated. Rather than leave
 * a gap, every watcher that would have seen it must re-watch. */
static void broadcast_lost(struct keyspace *k, const char *key) {
        struct mem_watch *w, *next;

        for (w = k->watches; w; w = next) {
                next = w->next;
                if (watch_matches(w, key))
                        watch_end_detach(k, w, -ENOBUFS);
        }
}

/* ------------------------------------------------------------------------ */
/* Entries, expiry, the timer (store->lock held)                             */
/* ------------------------------------------------------------------------ */

static uint64_t draw_revision(struct keyspace *k) {
        return ++k->revision;
}

usec_t mem_deadline_after(usec_t now, usec_t ttl) {
        return now < USEC_INFINITY - 1 - ttl ? now + ttl : USEC_INFINITY - 1;
}

static struct entry *entry_free(struct entry *e) {
        if (e) {
                store_event_unref(e->put);
                free(e);
        }
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct entry *, entry_free);

static struct entry *entry_new(enum store_keyspace ks, const char *key, const void *value,
                               size_t size) {
        struct entry *e = malloc(sizeof(*e));
        if (!e)
                return NULL;
        *e = (struct entry) { .deadline = USEC_INFINITY, .heap_idx = HEAP_NONE };
        e->put = store_event_new(STORE_EVENT_PUT, ks, key, value, size);
        return e->put ? e : entry_free(e);
}

/* Removes the entry at idx from the map and, if there, from the heap; frees it. */
static void entry_remove(struct keyspace *k, size_t idx) {
        struct entry *e = k->entries[idx];

        if (e->heap_idx != HEAP_NONE)
                heap_remove(k, e);
        map_remove(k, idx);
        entry_free(e);
}

/* Publishes the DELETE of entries[idx] with a new revision (ev: pre-allocated,
 * or NULL if that failed), then removes the entry. Returns its revision. */
uint64_t mem_entry_delete(struct keyspace *k, size_t idx, struct store_event *ev,
                             enum store_cause cause) {
        struct entry *e = k->entries[idx];
        uint64_t prev = e->put->revision, rev = draw_revision(k);

        if (ev) {
                ev->cause = cause;
                ev->revision = rev;
                ev->prev_revision = prev;
                broadcast(k, ev);
        } else
                broadcast_lost(k, e->put->key);
        entry_remove(k, idx);
        return prev;
}

struct store_event *mem_delete_event_new(const struct keyspace *k, const struct entry *e) {
        return store_event_new(STORE_EVENT_DELETE, k->id, e->put->key, NULL, 0);
}

/* Expires every ephemeral key and lease whose deadline is <= now, earliest
 * first; returns the count of keys. A key is dead *at* its deadline. */
static int expire_due(struct store_mem *s, usec_t now) {
        struct keyspace *k = &s->ks[STORE_EPHEMERAL];
        struct mem_lease *l;
        struct entry *e;
        int n = 0;

        while ((l = mem_lease_first(s)) && l->deadline <= now &&
               (!(e = heap_top(k)) || l->deadline <= e->deadline))
                n += mem_lease_end(s, l);
        while ((e = heap_top(k)) && e->deadline <= now) {
                size_t idx;
                struct store_event *ev = mem_delete_event_new(k, e);
                struct entry *found _unused_ = map_find(k, e->put->key, &idx);

                assert(found == e);
                mem_entry_delete(k, idx, ev, STORE_CAUSE_EXPIRED);
                store_event_unref(ev);
                n++;
        }
        while ((l = mem_lease_first(s)) && l->deadline <= now)
                n += mem_lease_end(s, l);
        return n;
}

/*
 * Keeps the clock armed at the earliest deadline, or disarmed with no
 * ephemeral key (SPEC §1: no timer without a reason). Under store->lock so
 * that two writers cannot arm out of order and leave a stale deadline.
 */
static void rearm(struct store_mem *s) {
        const struct entry *top = heap_top(&s->ks[STORE_EPHEMERAL]);
        const struct mem_lease *l = mem_lease_first(s);
        usec_t want = top ? top->deadline : USEC_INFINITY;

        if (l && l->deadline < want)
                want = l->deadline;

        if (s->armed_known && s->armed == want)
                return;
        s->armed_known = s->clock.arm(s->clock.userdata, want) >= 0;
        s->armed = want;
}

/*
 * Every operation runs between mem_op_begin() and mem_op_end(): under store->lock,
 * with the dead keys of the keyspace expired first (so no operation ever
 * observes one: "expire in place"), and the timer re-armed last.
 */
usec_t mem_op_begin(struct store_mem *s, enum store_keyspace ks) {
        usec_t now = 0;

        pthread_mutex_lock(&s->lock);
        if (ks == STORE_EPHEMERAL) {
                now = s->clock.now(s->clock.userdata);
                (void) expire_due(s, now);
        }
        return now;
}

void mem_op_end(struct store_mem *s) {
        rearm(s);
        pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

int mem_create_locked(struct store_mem *s, struct keyspace *k, const char *key,
                         const void *value, size_t size, usec_t now, usec_t ttl,
                         struct mem_lease *lease, uint64_t *ret_revision) {
        _cleanup_(entry_freep) struct entry *e = NULL;
        size_t idx;
        int r;

        if (map_find(k, key, &idx))
                return 0; /* LOST */
        if (k->n_entries >= s->max_keys)
                return -ENOSPC;

        /* Reserve everything before the first change: an error leaves no trace. */
        r = grow(&k->entries, &k->cap_entries, k->n_entries + 1);
        if (r < 0)
                return r;
        if (k->id == STORE_EPHEMERAL) {
                r = grow(&k->heap, &k->cap_heap, k->n_heap + 1);
                if (r < 0)
                        return r;
        }
        e = entry_new(k->id, key, value, size);
        if (!e)
                return -ENOMEM;

        e->put->revision = draw_revision(k);
        e->lease = lease;
        if (k->id == STORE_EPHEMERAL && !lease) {
                e->deadline = mem_deadline_after(now, ttl ?: s->default_ttl);
                heap_push(k, e);
        }
        map_insert(k, idx, e);
        broadcast(k, e->put);
        if (ret_revision)
                *ret_revision = e->put->revision;
        TAKE_PTR(e);
        return 1;
}

static int mem_create(struct store *base, enum store_keyspace ks, const char *key,
                      const void *value, size_t size, usec_t ttl, uint64_t *ret_revision) {
        struct store_mem *s = to_mem(base);
        usec_t now = mem_op_begin(s, ks);
        int r = mem_create_locked(s, &s->ks[ks], key, value, size, now, ttl, NULL, ret_revision);
        mem_op_end(s);
        return r;
}

static int update_locked(struct store_mem *s, struct keyspace *k, const char *key,
                         const void *value, size_t size, uint64_t expected, usec_t now,
                         usec_t ttl, uint64_t *ret_revision) {
        struct entry *e = map_find(k, key, NULL);
        struct store_event *ev;

        if (!e || e->put->revision != expected)
                return 0; /* LOST */
        if (e->lease && grow(&k->heap, &k->cap_heap, k->n_heap + 1) < 0)
                return -ENOMEM; /* it leaves its lease for the heap */
        ev = store_event_new(STORE_EVENT_PUT, k->id, key, value, size);
        if (!ev)
                return -ENOMEM;

        ev->revision = draw_revision(k);
        store_event_unref(e->put);
        e->put = ev;
        if (k->id == STORE_EPHEMERAL) {
                e->deadline = mem_deadline_after(now, ttl ?: s->default_ttl);
                if (e->lease) {
                        e->lease = NULL; /* detached: a TTL of its own */
                        heap_push(k, e);
                } else
                        heap_fix(k, e);
        }
        broadcast(k, ev);
        if (ret_revision)
                *ret_revision = ev->revision;
        return 1;
}

static int mem_update(struct store *base, enum store_keyspace ks, const char *key,
                      const void *value, size_t size, uint64_t expected, usec_t ttl,
                      uint64_t *ret_revision) {
        struct store_mem *s = to_mem(base);
        usec_t now = mem_op_begin(s, ks);
        int r = update_locked(s, &s->ks[ks], key, value, size, expected, now, ttl, ret_revision);
        mem_op_end(s);
        return r;
}

static int delete_locked(struct keyspace *k, const char *key, uint64_t expected,
                         uint64_t *ret_revision) {
        _cleanup_store_event_unref_ struct store_event *ev = NULL;
        size_t idx;
        struct entry *e = map_find(k, key, &idx);

        if (!e) {
                if (ret_revision)
                        *ret_revision = 0; /* vacuous WON(0) */
                return 1;
        }
        if (expected != STORE_REV_ANY && e->put->revision != expected)
                return 0; /* LOST */
        ev = mem_delete_event_new(k, e);
        if (!ev)
                return -ENOMEM;

        uint64_t prev = mem_entry_delete(k, idx, ev, STORE_CAUSE_DELETED);
        if (ret_revision)
                *ret_revision = prev;
        return 1;
}

static int mem_delete(struct store *base, enum store_keyspace ks, const char *key,
                      uint64_t expected, uint64_t *ret_revision) {
        struct store_mem *s = to_mem(base);
        (void) mem_op_begin(s, ks);
        int r = delete_locked(&s->ks[ks], key, expected, ret_revision);
        mem_op_end(s);
        return r;
}

static int mem_get(struct store *base, enum store_keyspace ks, const char *key,
                   struct store_event **ret) {
        struct store_mem *s = to_mem(base);
        (void) mem_op_begin(s, ks);
        struct entry *e = map_find(&s->ks[ks], key, NULL);
        if (e)
                *ret = store_event_ref(e->put);
        mem_op_end(s);
        return e ? 0 : -ENOENT;
}

/* The run [*ret_first, *ret_first + count) of entries whose key starts with prefix. */
static size_t map_prefix_range(const struct keyspace *k, const char *prefix, size_t *ret_first) {
        size_t len = strlen(prefix), first = map_lower_bound(k, prefix, NULL), i;

        for (i = first; i < k->n_entries; i++)
                if (strncmp(k->entries[i]->put->key, prefix, len) != 0)
                        break;
        *ret_first = first;
        return i - first;
}

static int mem_list(struct store *base, enum store_keyspace ks, const char *prefix,
                    struct store_event ***ret_events, size_t *ret_n) {
        struct store_mem *s = to_mem(base);
        struct keyspace *k = &s->ks[ks];
        struct store_event **evs = NULL;
        size_t first, n;
        int r = 0;

        (void) mem_op_begin(s, ks);
        n = map_prefix_range(k, prefix, &first);
        if (n > 0) {
                evs = malloc(n * sizeof(*evs));
                if (evs)
                        for (size_t i = 0; i < n; i++)
                                evs[i] = store_event_ref(k->entries[first + i]->put);
                else
                        r = -ENOMEM;
        }
        mem_op_end(s);
        if (r < 0)
                return r;
        *ret_events = evs;
        *ret_n = n;
        return 0;
}

static int mem_get_fd(struct store *base) {
        struct store_mem *s = to_mem(base);
        return s->timer_fd >= 0 ? s->timer_fd : -EOPNOTSUPP;
}

static int mem_run_expiry(struct store *base) {
        struct store_mem *s = to_mem(base);

        pthread_mutex_lock(&s->lock);
        int n = expire_due(s, s->clock.now(s->clock.userdata));
        mem_op_end(s);
        return n;
}

static int mem_dispatch(struct store *base) {
        struct store_mem *s = to_mem(base);

        if (s->timer_fd >= 0) {
                int r = store_timerfd_drain(s->timer_fd);
                if (r < 0)
                        return r;
        }
        return mem_run_expiry(base);
}

/* ------------------------------------------------------------------------ */
/* Watches                                                                   */
/* ------------------------------------------------------------------------ */

static void watch_destroy(struct mem_watch *w) {
        if (w->ring) {
                watch_drop_queue_locked(w); /* nobody else can reach w any more */
                free(w->ring);
        }
        safe_close(w->fd);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w->prefix);
        free(w);
}

static int watch_alloc(enum store_keyspace ks, const char *prefix, struct mem_watch **ret) {
        pthread_condattr_t attr;
        struct mem_watch *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->fd = -1;
        w->base.ops = &mem_ops;
        w->ks = ks;
        pthread_mutex_init(&w->lock, NULL);
        /* Blocking waits measure real time, whatever clock the store uses. */
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&w->cond, &attr);
        pthread_condattr_destroy(&attr);

        w->prefix = strdup(prefix);
        if (!w->prefix) {
                watch_destroy(w);
                return -ENOMEM;
        }
        w->prefix_len = strlen(prefix);
        w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->fd < 0) {
                int r = negative_errno();
                watch_destroy(w);
                return r;
        }
        *ret = w;
        return 0;
}

/* store->lock held: queues the snapshot and the marker, then attaches w. Room:
 * the snapshot, the marker, and queue_capacity live events. */
static int watch_start(struct store_mem *s, struct mem_watch *w, struct store_event *marker) {
        struct keyspace *k = &s->ks[w->ks];
        size_t first, n = map_prefix_range(k, w->prefix, &first);

        w->ring_max = n + 1 + s->queue_capacity;
        int r = watch_resize_locked(w, MIN(n + 1 + WATCH_RING_IDLE, w->ring_max));
        if (r < 0)
                return r;

        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < n; i++)
                (void) watch_push_locked(w, k->entries[first + i]->put);
        marker->revision = k->revision;
        (void) watch_push_locked(w, marker);
        pthread_mutex_unlock(&w->lock);

        watch_attach(k, w);
        w->store = s;
        atomic_fetch_add_explicit(&s->n_internal, 1, memory_order_relaxed);
        return 0;
}

static int mem_watch(struct store *base, enum store_keyspace ks, const char *prefix,
                     struct store_watch **ret) {
        struct store_mem *s = to_mem(base);
        _cleanup_store_event_unref_ struct store_event *marker = NULL;
        struct mem_watch *w;
        int r;

        marker = store_event_new(STORE_EVENT_SNAPSHOT_DONE, ks, NULL, NULL, 0);
        if (!marker)
                return -ENOMEM;
        r = watch_alloc(ks, prefix, &w);
        if (r < 0)
                return r;

        (void) mem_op_begin(s, ks);
        r = watch_start(s, w, marker);
        mem_op_end(s);
        if (r < 0) {
                watch_destroy(w);
                return r;
        }
        *ret = &w->base;
        return 0;
}

static int mem_watch_fd(const struct store_watch *base) {
        return to_watch(base)->fd;
}

static int watch_sleep_locked(struct mem_watch *w, usec_t deadline) {
        int r = 0;

        w->n_waiting++;
        if (deadline == USEC_INFINITY)
                pthread_cond_wait(&w->cond, &w->lock);
        else {
                struct timespec ts = usec_to_timespec(deadline);
                r = -pthread_cond_timedwait(&w->cond, &w->lock, &ts);
        }
        w->n_waiting--;
        return r;
}

static int mem_watch_next(struct store_watch *base, usec_t timeout, struct store_event **ret) {
        struct mem_watch *w = to_watch(base);
        usec_t deadline = timeout == USEC_INFINITY ? USEC_INFINITY
                                                   : mem_deadline_after(now_usec(CLOCK_MONOTONIC), timeout);
        int r;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                r = watch_pop_locked(w, ret);
                if (r != -EAGAIN || timeout == 0)
                        break;
                if (watch_sleep_locked(w, deadline) == -ETIMEDOUT) {
                        r = watch_pop_locked(w, ret);
                        if (r == -EAGAIN)
                                r = -ETIMEDOUT;
                        break;
                }
        }
        pthread_mutex_unlock(&w->lock);
        return r;
}

static void mem_watch_free(struct store_watch *base) {
        struct mem_watch *w = to_watch(base);
        struct store_mem *s = w->store;

        /* Detach under the store lock so no broadcast can still reach w. The
         * internal reference keeps s (and its lock) alive even after close. */
        pthread_mutex_lock(&s->lock);
        watch_detach(&s->ks[w->ks], w);
        pthread_mutex_unlock(&s->lock);
        watch_destroy(w);
        mem_unref_internal(s);
}

/* ------------------------------------------------------------------------ */
/* Lifetime                                                                  */
/* ------------------------------------------------------------------------ */

static void keyspace_clear(struct keyspace *k) {
        while (k->watches)
                watch_end_detach(k, k->watches, -EPIPE);
        for (size_t i = 0; i < k->n_entries; i++)
                entry_free(k->entries[i]);
        free(k->entries);
        free(k->heap);
        k->entries = k->heap = NULL;
        k->n_entries = k->cap_entries = k->n_heap = k->cap_heap = 0;
}

static void mem_close(struct store *base) {
        struct store_mem *s = to_mem(base);

        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < ELEMENTSOF(s->ks); i++)
                keyspace_clear(&s->ks[i]);
        while (s->leases) /* a lease must be freed before the store: these are ownerless */
                mem_lease_unlink(s, s->leases);
        pthread_mutex_unlock(&s->lock);
        s->timer_fd = safe_close(s->timer_fd);
        mem_unref_internal(s);
}

static int options_check(const struct store_options *o) {
        if (o->default_ttl_usec > STORE_TTL_MAX_USEC || o->max_keys > INT_MAX)
                return -EINVAL;
        if (o->clock && (!o->clock->now || !o->clock->arm))
                return -EINVAL;
        return 0;
}

int store_mem_new(const struct store_options *opts, struct store **ret) {
        static const struct store_options defaults = {};
        struct store_mem *s;
        int r;

        if (!ret)
                return -EINVAL;
        opts = opts ?: &defaults;
        r = options_check(opts);
        if (r < 0)
                return r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->base.ops = &mem_ops;
        atomic_init(&s->base.n_ref, 1);
        atomic_init(&s->n_internal, 1);
        pthread_mutex_init(&s->lock, NULL);
        for (size_t i = 0; i < ELEMENTSOF(s->ks); i++)
                s->ks[i].id = (enum store_keyspace) i;
        s->default_ttl = opts->default_ttl_usec ?: STORE_DEFAULT_TTL_USEC;
        s->queue_capacity = opts->watch_queue_capacity ?: STORE_DEFAULT_WATCH_QUEUE;
        s->max_keys = opts->max_keys ?: STORE_DEFAULT_MAX_KEYS;
        /* Nothing is armed yet: a fresh timerfd is disarmed, and a custom clock
         * hears from us only once there is an ephemeral key. */
        s->armed = USEC_INFINITY;
        s->armed_known = true;
        s->timer_fd = -1;

        if (opts->clock)
                s->clock = *opts->clock;
        else {
                s->timer_fd = store_timerfd_new();
                if (s->timer_fd < 0) {
                        r = s->timer_fd;
                        pthread_mutex_destroy(&s->lock);
                        free(s);
                        return r;
                }
                s->clock = (struct store_clock) {
                        .now = store_clock_monotonic_now,
                        .arm = store_clock_timerfd_arm,
                        .userdata = &s->timer_fd,
                };
        }
        *ret = &s->base;
        return 0;
}

static const struct store_ops mem_ops = {
        .name = "memory",
        .close = mem_close,
        .create = mem_create,
        .update = mem_update,
        .delete = mem_delete,
        .get = mem_get,
        .list = mem_list,
        .get_fd = mem_get_fd,
        .dispatch = mem_dispatch,
        .run_expiry = mem_run_expiry,
        .watch = mem_watch,
        .watch_fd = mem_watch_fd,
        .watch_next = mem_watch_next,
        .watch_free = mem_watch_free,
        .lease_grant = mem_lease_grant,
        .lease_keep_alive = mem_lease_keep_alive,
        .lease_revoke = mem_lease_revoke,
        .lease_free = mem_lease_free,
        .lease_expiry = mem_lease_expiry,
        .create_leased = mem_create_leased,
};
