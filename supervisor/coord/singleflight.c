/* SPDX-License-Identifier: MIT */
/*
 * Single-flight table (SPEC §2.3). Contract in singleflight.h, design and race
 * rules in docs/singleflight.md. The rules that the code below depends on:
 *
 *  L1  One mutex per table (t->lock) guards the key → flight map, every
 *      flight's waiter count and waiter list, and the fds that wake-ups write.
 *      A waiter is counted and uncounted only under it, and the slot of a
 *      flight cancelled by its last waiter leaving is removed in the same
 *      critical section, so nobody joins a slot between the two.
 *  L2  f->state is atomic. The only transitions out of RUNNING are
 *      compare-and-exchanges: to CANCELLED (under the lock: last waiter
 *      leaving, sf_table_cancel) or to PUBLISHING (sf_resolution_begin_publishing,
 *      lock-free; sf_resolution_answer_take, under the lock). Whichever wins,
 *      the other sees the winner's state and is refused. Every other
 *      transition (PUBLISHING → ANSWERED/ABANDONED, RUNNING → ABANDONED) is
 *      made by the resolution's single owner under the lock.
 *  L3  f->outcome is written before the release store of ANSWERED and never
 *      changes afterwards; readers that load a final state with acquire read
 *      it without the lock (and copy it outside the lock: caller code never
 *      runs under the lock).
 *  L4  A flight is in the map only while its resolution lives (the slot
 *      leaves at cancellation or at the resolution's end), and the map holds a
 *      reference. Retiring compares the map's flight with this flight by
 *      pointer: this flight is alive, so no successor can share its address.
 *  L5  References (f->n_ref): one per waiter, one for the live resolution,
 *      one for the map. The last unref frees the flight — outcome through
 *      ops->free, then the table reference — so it is always dropped after
 *      unlocking.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include "hashmap.h"
#include "log.h"
#include "singleflight.h"

struct sf_resolution {
        bool live; /* owned by the resolution's user; read by nobody else */
};

struct sf_waiter {
        sf_flight *flight;
        sf_waiter *prev, *next; /* f->waiters, under the lock */
        int fd;                 /* lazy eventfd; written under the lock */
};

struct sf_flight {
        atomic_uint n_ref;
        sf_table *table;
        uint64_t hash; /* hashmap_str_key(key): its map slot's key */

        _Atomic int state; /* sf_state; rule L2 */
        void *outcome;     /* rule L3 */

        atomic_uint n_waiters; /* written under the lock; atomic for lock-free queries */
        sf_waiter *waiters; /* under the lock */
        pthread_cond_t answered; /* signalled under the lock at every final state */
        int worker_fd;           /* lazy eventfd, readable once CANCELLED; under the lock */

        sf_resolution resolution; /* exactly one per flight */
        char key[];
};

/* A map slot (common/hashmap.h): keys are string hashes, so two flights'
 * keys may share one; the lookup compares the strings. */
struct flight_slot {
        uint64_t key;
        sf_flight *flight;
};
HASHMAP_DEFINE(flight_map, struct flight_slot);

struct sf_table {
        atomic_uint n_ref;
        pthread_mutex_t lock;
        pthread_condattr_t condattr; /* CLOCK_MONOTONIC for every flight's condition */
        sf_outcome_ops ops;
        void *userdata;

        struct flight_map flights; /* under the lock */
};

/* ------------------------------------------------------------------------ */
/* Map (under the lock)                                                      */
/* ------------------------------------------------------------------------ */

static sf_flight *map_find(sf_table *t, const char *key, uint64_t hash) {
        for (struct flight_slot *s = flight_map_get(&t->flights, hash); s; s = flight_map_get_next(&t->flights, s))
                if (streq(s->flight->key, key))
                        return s->flight;
        return NULL;
}

/* Removes f if — and only if — f itself is in the map (rule L4). Returns
 * whether it did, so the caller drops the map's reference after unlocking. */
static bool map_remove(sf_table *t, sf_flight *f) {
        for (struct flight_slot *s = flight_map_get(&t->flights, f->hash); s; s = flight_map_get_next(&t->flights, s))
                if (s->flight == f) {
                        flight_map_remove(&t->flights, s);
                        return true;
                }
        return false;
}

/* ------------------------------------------------------------------------ */
/* Table                                                                     */
/* ------------------------------------------------------------------------ */

int sf_table_new(const sf_outcome_ops *ops, void *userdata, sf_table **ret) {
        if (!ops || !ops->copy || !ops->free || !ret)
                return -EINVAL;

        _cleanup_free_ sf_table *t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;

        int r = pthread_condattr_init(&t->condattr);
        if (r == 0)
                r = pthread_condattr_setclock(&t->condattr, CLOCK_MONOTONIC);
        if (r == 0)
                r = pthread_mutex_init(&t->lock, NULL);
        if (r != 0)
                return -r;
        atomic_init(&t->n_ref, 1);
        t->ops = *ops;
        t->userdata = userdata;
        *ret = TAKE_PTR(t);
        return 0;
}

sf_table *sf_table_ref(sf_table *t) {
        if (t)
                atomic_fetch_add_explicit(&t->n_ref, 1, memory_order_relaxed);
        return t;
}

sf_table *sf_table_unref(sf_table *t) {
        if (!t || atomic_fetch_sub_explicit(&t->n_ref, 1, memory_order_acq_rel) != 1)
                return NULL;
        /* Every flight in the map holds a table reference: the map is empty. */
        assert(flight_map_size(&t->flights) == 0);
        pthread_mutex_destroy(&t->lock);
        pthread_condattr_destroy(&t->condattr);
        flight_map_done(&t->flights);
        free(t);
        return NULL;
}

/* ------------------------------------------------------------------------ */
/* Flight                                                                    */
/* ------------------------------------------------------------------------ */

static sf_state flight_state(sf_flight *f) {
        return (sf_state) atomic_load_explicit(&f->state, memory_order_acquire);
}

static bool state_is_final(sf_state s) {
        return s == SF_STATE_ANSWERED || s == SF_STATE_CANCELLED || s == SF_STATE_ABANDONED;
}

/* The compare-and-exchange of rule L2. On failure *from holds the state that won. */
static bool flight_cas(sf_flight *f, sf_state *from, sf_state to) {
        int expected = (int) *from;
        bool won = atomic_compare_exchange_strong_explicit(
                        &f->state, &expected, (int) to, memory_order_acq_rel, memory_order_acquire);
        *from = (sf_state) expected;
        return won;
}

/* A new RUNNING flight with the map's and the resolution's references (rule L5). */
static sf_flight *flight_new(sf_table *t, const char *key, uint64_t hash) {
        size_t len = strlen(key);
        sf_flight *f = calloc(1, sizeof *f + len + 1);
        if (!f)
                return NULL;
        if (pthread_cond_init(&f->answered, &t->condattr) != 0) {
                free(f);
                return NULL;
        }
        memcpy(f->key, key, len + 1);
        f->hash = hash;
        f->worker_fd = -1;
        atomic_init(&f->state, SF_STATE_RUNNING);
        atomic_init(&f->n_waiters, 0);
        atomic_init(&f->n_ref, 2);
        f->resolution.live = true;
        f->table = sf_table_ref(t);
        return f;
}

static void flight_ref(sf_flight *f) {
        atomic_fetch_add_explicit(&f->n_ref, 1, memory_order_relaxed);
}

/* Rule L5: never under the lock — it runs ops->free and may free the table. */
static void flight_unref(sf_flight *f) {
        if (!f || atomic_fetch_sub_explicit(&f->n_ref, 1, memory_order_acq_rel) != 1)
                return;
        sf_table *t = f->table;
        if (f->outcome)
                t->ops.free(f->outcome, t->userdata);
        pthread_cond_destroy(&f->answered);
        free(f);
        sf_table_unref(t);
}

/* An eventfd write never blocks here: each fd is written at most once per
 * wake-up kind, far below the counter's limit, and it is O_NONBLOCK anyway. */
static void fd_signal(int fd) {
        if (fd >= 0)
                (void) !eventfd_write(fd, 1);
}

/* Under the lock, after the store of a final state. */
static void flight_wake_waiters_locked(sf_flight *f) {
        pthread_cond_broadcast(&f->answered);
        for (sf_waiter *w = f->waiters; w; w = w->next)
                fd_signal(w->fd);
}

/*
 * RUNNING → CANCELLED (rule L2), under the lock: answers every waiter, wakes
 * the worker, and removes the slot in the same critical section (rule L1).
 * Returns 0, or the refusal for the state that won: -EBUSY (PUBLISHING),
 * -EALREADY (ANSWERED); -ECANCELED for a flight already CANCELLED or
 * ABANDONED (not reachable through the map: such flights have left it).
 * *ret_unmapped says whether the map's reference must be dropped.
 */
static int flight_cancel_locked(sf_flight *f, bool *ret_unmapped) {
        sf_state s = SF_STATE_RUNNING;
        *ret_unmapped = false;
        if (!flight_cas(f, &s, SF_STATE_CANCELLED))
                return s == SF_STATE_PUBLISHING ? -EBUSY : s == SF_STATE_ANSWERED ? -EALREADY : -ECANCELED;
        flight_wake_waiters_locked(f);
        fd_signal(f->worker_fd);
        *ret_unmapped = map_remove(f->table, f);
        return 0;
}

/* Rule L1: only under the lock, so the count never goes negative and the
 * check "was that the last waiter" cannot race a join. */
static unsigned flight_add_waiters_locked(sf_flight *f, int delta) {
        unsigned n = atomic_load_explicit(&f->n_waiters, memory_order_relaxed);
        assert(delta > 0 || n > 0);
        n += (unsigned) delta;
        atomic_store_explicit(&f->n_waiters, n, memory_order_relaxed);
        return n;
}

const char *sf_flight_get_key(sf_flight *f) {
        return f ? f->key : NULL;
}

sf_state sf_flight_get_state(sf_flight *f) {
        assert(f);
        return flight_state(f);
}

unsigned sf_flight_get_waiters(sf_flight *f) {
        return f ? atomic_load_explicit(&f->n_waiters, memory_order_relaxed) : 0;
}

/* ------------------------------------------------------------------------ */
/* Join, cancel, count                                                       */
/* ------------------------------------------------------------------------ */

static bool key_valid(const char *key) {
        return key && key[0];
}

/* Under the lock: the slot for key, created (and mapped) if absent. Sets
 * *ret_created. NULL only when a new flight cannot be allocated. */
static sf_flight *table_get_or_create_locked(sf_table *t, const char *key, uint64_t hash, bool *ret_created) {
        sf_flight *f = map_find(t, key, hash);
        *ret_created = !f;
        if (f)
                return f;
        /* Room first, so a flight once made is always mapped. */
        if (flight_map_reserve(&t->flights, flight_map_size(&t->flights) + 1) < 0)
                return NULL;
        f = flight_new(t, key, hash);
        if (f)
                (void) flight_map_put(&t->flights, (struct flight_slot) { .key = hash, .flight = f });
        return f;
}

static void waiter_link_locked(sf_flight *f, sf_waiter *w) {
        w->flight = f;
        w->prev = NULL;
        w->next = f->waiters;
        if (f->waiters)
                f->waiters->prev = w;
        f->waiters = w;
        (void) flight_add_waiters_locked(f, +1);
        flight_ref(f);
}

int sf_table_join(sf_table *t, const char *key, sf_waiter **ret_waiter, sf_resolution **ret_resolution) {
        if (!t || !key_valid(key) || !ret_waiter || !ret_resolution)
                return -EINVAL;

        _cleanup_free_ sf_waiter *w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->fd = -1;
        uint64_t hash = hashmap_str_key(key);

        bool created;
        pthread_mutex_lock(&t->lock);
        sf_flight *f = table_get_or_create_locked(t, key, hash, &created);
        if (f)
                waiter_link_locked(f, w);
        pthread_mutex_unlock(&t->lock);
        if (!f)
                return -ENOMEM;

        *ret_resolution = created ? &f->resolution : NULL;
        *ret_waiter = TAKE_PTR(w);
        return created ? 1 : 0;
}

int sf_table_cancel(sf_table *t, const char *key) {
        if (!t || !key_valid(key))
                return -EINVAL;
        uint64_t hash = hashmap_str_key(key);
        bool unmapped = false;
        int r;

        pthread_mutex_lock(&t->lock);
        sf_flight *f = map_find(t, key, hash);
        if (!f)
                r = -ENOENT;
        else {
                r = flight_cancel_locked(f, &unmapped);
                if (r == 0)
                        flight_ref(f); /* keep the key readable for the log line below */
        }
        pthread_mutex_unlock(&t->lock);

        if (r == 0) {
                log_debug("flight '%s': cancelled by its owner; every waiter answered cancelled", f->key);
                if (unmapped)
                        flight_unref(f);
                flight_unref(f);
        }
        return r;
}

int sf_table_get_waiters(sf_table *t, const char *key) {
        if (!t || !key_valid(key))
                return -EINVAL;
        uint64_t hash = hashmap_str_key(key);

        pthread_mutex_lock(&t->lock);
        sf_flight *f = map_find(t, key, hash);
        unsigned n = f ? atomic_load_explicit(&f->n_waiters, memory_order_relaxed) : 0;
        pthread_mutex_unlock(&t->lock);
        return (int) n;
}

/* ------------------------------------------------------------------------ */
/* Waiter                                                                    */
/* ------------------------------------------------------------------------ */

sf_flight *sf_waiter_get_flight(sf_waiter *w) {
        return w ? w->flight : NULL;
}

/* Under the lock. Returns true when the flight was cancelled by this leave. */
static bool waiter_unlink_locked(sf_waiter *w, bool *ret_unmapped) {
        sf_flight *f = w->flight;

        if (w->prev)
                w->prev->next = w->next;
        else
                f->waiters = w->next;
        if (w->next)
                w->next->prev = w->prev;

        unsigned n = flight_add_waiters_locked(f, -1);

        *ret_unmapped = false;
        /* The last waiter of a RUNNING flight cancels it. Losing the exchange
         * to PUBLISHING (or finding it answered) is normal: nothing to do. */
        return n == 0 && flight_cancel_locked(f, ret_unmapped) == 0;
}

sf_waiter *sf_waiter_free(sf_waiter *w) {
        if (!w)
                return NULL;
        sf_flight *f = w->flight;
        bool unmapped;

        pthread_mutex_lock(&f->table->lock);
        bool cancelled = waiter_unlink_locked(w, &unmapped);
        pthread_mutex_unlock(&f->table->lock);

        if (cancelled)
                log_debug("flight '%s': cancelled, its last waiter left", f->key);
        safe_close(w->fd);
        free(w);
        if (unmapped)
                flight_unref(f);
        flight_unref(f); /* the waiter's: after the log line, which reads f->key */
        return NULL;
}

/* The answer of a final state, outside the lock (rule L3). */
static int flight_deliver(sf_flight *f, sf_state s, sf_answer *ret) {
        sf_table *t = f->table;

        switch (s) {
        case SF_STATE_ANSWERED: {
                void *copy = NULL;
                int r = t->ops.copy(f->outcome, &copy, t->userdata);
                if (r < 0)
                        return r;
                *ret = (sf_answer) { .status = SF_ANSWER_OK, .outcome = copy };
                return 0;
        }
        case SF_STATE_CANCELLED:
                *ret = (sf_answer) { .status = SF_ANSWER_CANCELLED };
                return 0;
        case SF_STATE_ABANDONED:
                *ret = (sf_answer) { .status = SF_ANSWER_ABANDONED };
                return 0;
        default:
                return -EAGAIN;
        }
}

/* Under the lock: sleeps on f->answered until a final state or the deadline. */
static sf_state flight_wait_locked(sf_flight *f, usec_t deadline) {
        sf_state s;
        while (!state_is_final(s = flight_state(f))) {
                if (deadline == USEC_INFINITY)
                        pthread_cond_wait(&f->answered, &f->table->lock);
                else {
                        if (now_usec(CLOCK_MONOTONIC) >= deadline)
                                break;
                        struct timespec ts = usec_to_timespec(deadline);
                        (void) pthread_cond_timedwait(&f->answered, &f->table->lock, &ts);
                }
        }
        return s;
}

int sf_waiter_wait(sf_waiter *w, usec_t deadline, sf_answer *ret) {
        if (!w || !ret)
                return -EINVAL;
        sf_flight *f = w->flight;

        /* Fast path without the lock: a final state is final (rule L3). */
        sf_state s = flight_state(f);
        if (!state_is_final(s)) {
                pthread_mutex_lock(&f->table->lock);
                s = flight_wait_locked(f, deadline);
                pthread_mutex_unlock(&f->table->lock);
        }
        if (!state_is_final(s))
                return -ETIMEDOUT;
        return flight_deliver(f, s, ret);
}

int sf_waiter_peek(sf_waiter *w, sf_answer *ret) {
        if (!w || !ret)
                return -EINVAL;
        sf_state s = flight_state(w->flight);
        if (!state_is_final(s))
                return -EAGAIN;
        return flight_deliver(w->flight, s, ret);
}

/* A fresh eventfd, already readable if ready: under the lock, so a wake-up
 * either precedes it (then ready is true) or finds it in place. */
static int lazy_eventfd_locked(int *fd, bool ready) {
        if (*fd >= 0)
                return *fd;
        int r = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r < 0)
                return negative_errno();
        *fd = r;
        if (ready)
                fd_signal(r);
        return r;
}

int sf_waiter_get_fd(sf_waiter *w) {
        if (!w)
                return -EINVAL;
        sf_flight *f = w->flight;

        pthread_mutex_lock(&f->table->lock);
        int r = lazy_eventfd_locked(&w->fd, state_is_final(flight_state(f)));
        pthread_mutex_unlock(&f->table->lock);
        return r;
}

/* ------------------------------------------------------------------------ */
/* Resolution                                                                */
/* ------------------------------------------------------------------------ */

static sf_flight *resolution_flight(sf_resolution *r) {
        return container_of(r, sf_flight, resolution);
}

sf_flight *sf_resolution_get_flight(sf_resolution *r) {
        return r ? resolution_flight(r) : NULL;
}

bool sf_resolution_is_cancelled(sf_resolution *r) {
        return r && flight_state(resolution_flight(r)) == SF_STATE_CANCELLED;
}

int sf_resolution_get_fd(sf_resolution *r) {
        if (!r)
                return -EINVAL;
        sf_flight *f = resolution_flight(r);

        pthread_mutex_lock(&f->table->lock);
        int fd = lazy_eventfd_locked(&f->worker_fd, flight_state(f) == SF_STATE_CANCELLED);
        pthread_mutex_unlock(&f->table->lock);
        return fd;
}

static int refusal(sf_state s) {
        return s == SF_STATE_CANCELLED ? -ECANCELED : -EALREADY;
}

int sf_resolution_begin_publishing(sf_resolution *r) {
        if (!r)
                return -EINVAL;
        sf_flight *f = resolution_flight(r);
        assert(r->live);

        /* Lock-free: this exchange and the cancelling one (under the lock)
         * act on the same atomic, so exactly one leaves RUNNING (rule L2). */
        sf_state s = SF_STATE_RUNNING;
        if (flight_cas(f, &s, SF_STATE_PUBLISHING) || s == SF_STATE_PUBLISHING)
                return 0;
        return refusal(s);
}

int sf_resolution_answer_take(sf_resolution *r, void *outcome) {
        if (!r || !outcome)
                return -EINVAL;
        sf_flight *f = resolution_flight(r);
        assert(r->live);
        int ret = 0;

        pthread_mutex_lock(&f->table->lock);
        sf_state s = SF_STATE_RUNNING;
        if (flight_cas(f, &s, SF_STATE_PUBLISHING) || s == SF_STATE_PUBLISHING) {
                /* Rule L3: the outcome before the release store of ANSWERED. */
                f->outcome = outcome;
                atomic_store_explicit(&f->state, SF_STATE_ANSWERED, memory_order_release);
                flight_wake_waiters_locked(f);
        } else
                ret = refusal(s);
        pthread_mutex_unlock(&f->table->lock);
        return ret;
}

/* Under the lock: the resolution's end. Abandons an unanswered flight and
 * retires the slot if it is still this flight's (rule L4). Returns the state
 * the flight was in before, for the log line. */
static sf_state resolution_end_locked(sf_flight *f, bool *ret_unmapped, int *ret_worker_fd) {
        sf_state s = flight_state(f), was = s;
        /* An exchange, not a store: a RUNNING flight may only leave RUNNING
         * through one (rule L2). Under this lock only the resolution's owner
         * — us — could move it otherwise, so the loop runs at most twice. */
        while (s == SF_STATE_RUNNING || s == SF_STATE_PUBLISHING) {
                if (flight_cas(f, &s, SF_STATE_ABANDONED)) {
                        flight_wake_waiters_locked(f);
                        break;
                }
        }
        *ret_unmapped = map_remove(f->table, f);
        *ret_worker_fd = f->worker_fd;
        f->worker_fd = -1;
        f->resolution.live = false;
        return was;
}

sf_resolution *sf_resolution_free(sf_resolution *r) {
        if (!r)
                return NULL;
        sf_flight *f = resolution_flight(r);
        assert(r->live);
        bool unmapped;
        int worker_fd;

        pthread_mutex_lock(&f->table->lock);
        sf_state s = resolution_end_locked(f, &unmapped, &worker_fd);
        pthread_mutex_unlock(&f->table->lock);

        safe_close(worker_fd);
        if (s == SF_STATE_RUNNING || s == SF_STATE_PUBLISHING)
                log_error("flight '%s': the work ended without an answer (%s); waiters answered abandoned, "
                          "the next request starts a new flight",
                          f->key, s == SF_STATE_RUNNING ? "before its point of no return" : "while publishing");
        else if (s == SF_STATE_CANCELLED)
                log_debug("flight '%s': cancelled flight's work ended", f->key);
        if (unmapped)
                flight_unref(f);
        flight_unref(f); /* the resolution's: last, after the log lines read f->key */
        return NULL;
}

/* ------------------------------------------------------------------------ */

const char *sf_state_to_string(sf_state s) {
        static const char *const names[] = {
                [SF_STATE_RUNNING] = "running",
                [SF_STATE_PUBLISHING] = "publishing",
                [SF_STATE_ANSWERED] = "answered",
                [SF_STATE_CANCELLED] = "cancelled",
                [SF_STATE_ABANDONED] = "abandoned",
        };
        return (unsigned) s < ELEMENTSOF(names) ? names[s] : NULL;
}

const char *sf_status_to_string(sf_status s) {
        static const char *const names[] = {
                [SF_ANSWER_OK] = "ok",
                [SF_ANSWER_CANCELLED] = "cancelled",
                [SF_ANSWER_ABANDONED] = "abandoned",
        };
        return (unsigned) s < ELEMENTSOF(names) ? names[s] : NULL;
}
