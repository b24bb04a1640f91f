/* SPDX-License-Identifier: MIT */
/*
 * The exit hub (SPEC §2.1): an outcome ledger, bounded durable records,
 * per-process one-shot watches and a bounded single-subscriber queue.
 *
 * Locking. One mutex per hub (hub->lock) protects every mutable field below:
 * the tables, the queue, every watch's links and every watch set's ready
 * list. Two condition variables hang off it: recv_cond (the subscriber) and
 * watch_cond (exit_watch_wait). The rules that make this correct:
 *
 *  1. Publish does all three steps of SPEC §2.1 "Order" (ledger, then the
 *     process's watches, then the queue) inside one critical section, so a
 *     subscriber or watcher that sees an exit can always take its outcome,
 *     and "register-then-check" for a watch is atomic with respect to a
 *     publish: a fire and a register-time answer cannot both happen.
 *  2. No caller code runs under the lock: there are no callbacks, and the
 *     only hook (tests) runs after unlock.
 *  3. Every eventfd is written or read under the lock, and only on a
 *     readiness transition (not-ready -> ready: write; ready -> not-ready:
 *     read). So "the fd is readable" and "a receive / set_next would not
 *     block" change together, atomically, and an event that does not change
 *     readiness costs no system call. Writing under the lock also keeps the
 *     fd number valid: a watch cannot close its fd between our decision to
 *     write and the write.
 *  4. Nothing blocks on a slow resource under the lock; allocation happens
 *     there only in reserve (growing the tables) and never in publish.
 *
 * Lifetime. owner_refs counts the caller's references; refs counts the
 * owners as one, plus one per subscription, watch and watch set. The last
 * owner unref closes the hub; the last ref frees it.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include "hashmap.h"
#include "hub-internal.h"
#include "libexit.h"
#include "macro.h"
#include "time-util.h"

/* Above this a capacity is a mistake, not a configuration (16 Mi events is ~900 MiB). */
#define HUB_MAX_CAPACITY (UINT32_C(1) << 24)

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */
/* ------------------------------------------------------------------------ */

enum proc_state {
        PROC_RESERVED, /* live: id drawn, no pid yet */
        PROC_ATTACHED, /* live: pid bound, in hub->pids */
        PROC_EXITED,   /* the ledger holds its outcome until taken */
};

/* A ledger entry: from reserve() until its outcome is taken (or unreserve()). */
struct proc {
        exit_id_t id;
        pid_t pid;
        enum proc_state state;
        struct exit_reason reason;
        struct exit_watch *watches; /* armed watches (proc_* links); empty once exited */
};

/* A durable record: what a late watcher is answered from. Lives in a ring. */
struct record {
        exit_id_t id;
        pid_t pid;
        bool orphan;
        struct exit_reason reason;
};

/* The tables (common/hashmap.h): an exit id or a pid (never 0: ids start at 1
 * and pids are > 0) -> the object. Backward-shift deletion keeps probe chains
 * intact without tombstones, so the ledger, the pid table and the record index,
 * which see millions of insert/remove pairs, never degrade. */
struct proc_slot {
        uint64_t key;
        struct proc *proc;
};
HASHMAP_DEFINE(proc_map, struct proc_slot);

struct record_slot {
        uint64_t key;
        struct record *rec;
};
HASHMAP_DEFINE(record_map, struct record_slot);

static struct proc *proc_lookup(const struct proc_map *m, uint64_t key) {
        struct proc_slot *s = proc_map_get(m, key);
        return s ? s->proc : NULL;
}

/* key is in m. */
static void proc_unmap(struct proc_map *m, uint64_t key) {
        proc_map_remove(m, proc_map_get(m, key));
}

static const struct record *record_lookup(const struct record_map *m, uint64_t key) {
        struct record_slot *s = record_map_get(m, key);
        return s ? s->rec : NULL;
}

/* A watch's slot is written once; the first answer wins, later ones are absorbed. */
enum watch_slot {
        SLOT_ARMED,
        SLOT_FIRED,    /* -> 0 and the reason */
        SLOT_CLOSED,   /* -> -EPIPE */
        SLOT_RELEASED, /* -> -ESRCH */
};

struct exit_watch {
        struct exit_hub *hub;
        exit_id_t id;
        void *userdata;
        _Atomic int slot;          /* enum watch_slot; atomic so exit_watch_result() reads it unlocked */
        struct exit_reason reason; /* written before slot leaves SLOT_ARMED (release) */
        bool in_set;               /* registered through a set: never has its own fd */
        bool ready;                /* on set->ready_* */
        int fd;                    /* own eventfd, -1 until exit_watch_fd() */
        struct proc *proc;         /* while armed */
        struct exit_watch_set *set; /* NULL once the set is freed */
        struct exit_watch *proc_prev, *proc_next;
        struct exit_watch *member_prev, *member_next;
        struct exit_watch *ready_prev, *ready_next;
};

struct exit_watch_set {
        struct exit_hub *hub;
        int fd;
        bool fd_ready;
        struct exit_watch *ready_head, *ready_tail; /* fired, not yet popped: FIFO */
        struct exit_watch *members;                /* every watch registered through the set */
};

struct exit_sub {
        struct exit_hub *hub;
        int fd;
};

struct exit_hub {
        pthread_mutex_t lock;
        pthread_cond_t recv_cond;  /* the subscriber waits for an event */
        pthread_cond_t watch_cond; /* exit_watch_wait() waits for a fire */
        atomic_uint owner_refs;
        atomic_uint refs;
        bool closed;
        exit_id_t next_id;

        struct proc_map procs; /* id -> struct proc: the ledger (live, and exited until taken) */
        struct proc_map pids;  /* pid -> struct proc: attached live processes only */
        size_t n_live;
        size_t n_armed;

        struct record *records; /* ring of record_capacity; record_next is the oldest once full */
        uint32_t record_capacity, record_next, record_count;
        struct record_map record_index; /* id -> struct record, preallocated: publish never allocates */

        struct exit_sub *sub; /* NULL before subscribe and after exit_sub_free */
        bool subscribed;      /* ever: one subscription per hub lifetime */
        struct exit_event *queue;
        uint32_t queue_capacity, q_head, q_count;
        bool lagged;       /* an event did not fit since the last receive */
        bool sub_fd_ready; /* mirrors the eventfd's counter being non-zero */
        unsigned recv_waiters, watch_waiters;

        exit_hub_lagged_hook_t lagged_hook;
        void *lagged_hook_userdata;
};

/* Intrusive doubly-linked list helpers; `f` names the link pair (f##_prev, f##_next). */
#define LIST_PREPEND(f, head, item)                                    \
        do {                                                           \
                (item)->f##_prev = NULL;                               \
                (item)->f##_next = (head);                             \
                if (head)                                              \
                        (head)->f##_prev = (item);                     \
                (head) = (item);                                       \
        } while (0)

#define LIST_REMOVE(f, head, item)                                     \
        do {                                                           \
                if ((item)->f##_next)                                  \
                        (item)->f##_next->f##_prev = (item)->f##_prev; \
                if ((item)->f##_prev)                                  \
                        (item)->f##_prev->f##_next = (item)->f##_next; \
                else                                                   \
                        (head) = (item)->f##_next;                     \
                (item)->f##_prev = (item)->f##_next = NULL;            \
        } while (0)

static void hub_lock(struct exit_hub *h) {
        int r = pthread_mutex_lock(&h->lock);
        assert(r == 0);
        (void) r;
}

static void hub_unlock(struct exit_hub *h) {
        int r = pthread_mutex_unlock(&h->lock);
        assert(r == 0);
        (void) r;
}

/* Waits on cond until signalled or the absolute CLOCK_MONOTONIC deadline; false once it passed. */
static bool cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *lock, usec_t deadline) {
        if (deadline == USEC_INFINITY)
                return pthread_cond_wait(cond, lock) == 0;
        struct timespec ts = usec_to_timespec(deadline);
        return pthread_cond_timedwait(cond, lock, &ts) != ETIMEDOUT;
}

/* eventfd counters only move 0 -> 1 -> 0 here (rule 3), so neither call can fail with
 * EAGAIN; any other error would mean a closed fd, which the lock rules out. */
static void efd_raise(int fd) {
        int r = eventfd_write(fd, 1);
        assert(r == 0);
        (void) r;
}

static void efd_lower(int fd) {
        eventfd_t v;
        int r = eventfd_read(fd, &v);
        assert(r == 0);
        (void) r;
}

static bool reason_is_valid(const struct exit_reason *reason) {
        if (!reason)
                return false;
        switch (reason->kind) {
        case EXIT_REASON_EXITED:
                return reason->status >= 0 && reason->status <= 255 && reason->core_dumped == 0;
        case EXIT_REASON_KILLED:
                return reason->status > 0 && (reason->core_dumped == 0 || reason->core_dumped == 1);
        default:
                return false;
        }
}

/* ------------------------------------------------------------------------ */
/* Hub lifetime                                                              */
/* ------------------------------------------------------------------------ */

static struct exit_hub *hub_free(struct exit_hub *h) {
        if (!h)
                return NULL;
        /* Every watch held a reference, so no armed watch can point into a proc now. */
        for (struct proc_slot *s = NULL; (s = proc_map_next(&h->procs, s));)
                free(s->proc);
        proc_map_done(&h->procs);
        proc_map_done(&h->pids);
        record_map_done(&h->record_index);
        free(h->records);
        free(h->queue);
        pthread_cond_destroy(&h->watch_cond);
        pthread_cond_destroy(&h->recv_cond);
        pthread_mutex_destroy(&h->lock);
        free(h);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct exit_hub *, hub_free);

static void hub_acquire(struct exit_hub *h) {
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
}

/* Drops an internal reference; never called with the lock held (it may free the lock). */
static void hub_release(struct exit_hub *h) {
        if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
                hub_free(h);
}

static int hub_init_sync(struct exit_hub *h) {
        pthread_condattr_t attr;
        if (pthread_condattr_init(&attr) != 0)
                return -ENOMEM;
        /* Deadlines are CLOCK_MONOTONIC (STYLE "Processes, signals, time"). */
        (void) pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        (void) pthread_mutex_init(&h->lock, NULL);
        (void) pthread_cond_init(&h->recv_cond, &attr);
        (void) pthread_cond_init(&h->watch_cond, &attr);
        pthread_condattr_destroy(&attr);
        return 0;
}

_public_ int exit_hub_new(uint32_t queue_capacity, uint32_t record_capacity, struct exit_hub **ret_hub) {
        if (!ret_hub || queue_capacity > HUB_MAX_CAPACITY || record_capacity > HUB_MAX_CAPACITY)
                return -EINVAL;

        _cleanup_(hub_freep) struct exit_hub *h = calloc(1, sizeof(*h));
        if (!h || hub_init_sync(h) < 0) {
                free(TAKE_PTR(h));
                return -ENOMEM;
        }
        h->queue_capacity = queue_capacity ?: EXIT_HUB_DEFAULT_QUEUE_CAPACITY;
        h->record_capacity = record_capacity ?: EXIT_HUB_DEFAULT_RECORD_CAPACITY;
        /* Preallocate the queue and the records: publish must never allocate. */
        h->queue = calloc(h->queue_capacity, sizeof(*h->queue));
        h->records = calloc(h->record_capacity, sizeof(*h->records));
        if (!h->queue || !h->records || record_map_reserve(&h->record_index, h->record_capacity) < 0)
                return -ENOMEM;
        h->next_id = 1;
        atomic_init(&h->owner_refs, 1);
        atomic_init(&h->refs, 1);
        *ret_hub = TAKE_PTR(h);
        return 0;
}

_public_ struct exit_hub *exit_hub_ref(struct exit_hub *hub) {
        if (!hub)
                return NULL;
        /* A closed hub is never reopened: once owner_refs reached 0 it stays there, so a
         * late ref() cannot close (and release) the hub a second time. */
        unsigned n = atomic_load_explicit(&hub->owner_refs, memory_order_relaxed);
        do {
                if (n == 0)
                        return NULL;
        } while (!atomic_compare_exchange_weak_explicit(&hub->owner_refs, &n, n + 1, memory_order_relaxed,
                                                        memory_order_relaxed));
        return hub;
}

static void sub_sync_fd(struct exit_hub *h);
static void watches_settle(struct exit_hub *h, struct proc *p, enum watch_slot slot);

/* Closing answers everything that waits: the subscriber drains then sees -EPIPE, armed
 * watches answer -EPIPE (their fds and sets become readable). */
static void hub_close(struct exit_hub *h) {
        hub_lock(h);
        h->closed = true;
        for (struct proc_slot *s = NULL; (s = proc_map_next(&h->procs, s));)
                if (s->proc->watches)
                        watches_settle(h, s->proc, SLOT_CLOSED);
        if (h->sub) {
                sub_sync_fd(h);
                pthread_cond_broadcast(&h->recv_cond);
        }
        hub_unlock(h);
}

_public_ struct exit_hub *exit_hub_unref(struct exit_hub *hub) {
        if (!hub)
                return NULL;
        if (atomic_fetch_sub_explicit(&hub->owner_refs, 1, memory_order_acq_rel) == 1) {
                hub_close(hub);
                hub_release(hub);
        }
        return NULL;
}

/* ------------------------------------------------------------------------ */
/* Durable records                                                           */
/* ------------------------------------------------------------------------ */

/* Adds a record, evicting the oldest when full. Allocates nothing: the ring and its index
 * were sized at creation. */
static void record_add(struct exit_hub *h, exit_id_t id, pid_t pid, bool orphan, const struct exit_reason *reason) {
        struct record *rec = &h->records[h->record_next];
        if (h->record_count == h->record_capacity)
                record_map_remove(&h->record_index, record_map_get(&h->record_index, rec->id));
        else
                h->record_count++;
        *rec = (struct record) { .id = id, .pid = pid, .orphan = orphan, .reason = *reason };
        (void) record_map_put(&h->record_index, (struct record_slot) { .key = id, .rec = rec });
        h->record_next = h->record_next + 1 == h->record_capacity ? 0 : h->record_next + 1;
}

/* ------------------------------------------------------------------------ */
/* The queue and the subscription                                            */
/* ------------------------------------------------------------------------ */

static bool sub_ready(const struct exit_hub *h) {
        return h->q_count > 0 || h->lagged || h->closed;
}

/* Rule 3: touch the eventfd only when readiness flips. */
static void sub_sync_fd(struct exit_hub *h) {
        bool ready = sub_ready(h);
        if (ready == h->sub_fd_ready)
                return;
        if (ready)
                efd_raise(h->sub->fd);
        else
                efd_lower(h->sub->fd);
        h->sub_fd_ready = ready;
}

static void queue_offer(struct exit_hub *h, const struct exit_event *ev) {
        if (!h->sub) /* before subscribe (or after its free): the ledger has it */
                return;
        if (h->q_count == h->queue_capacity) {
                /* Full: already readable, nothing to signal; the next receive says LAGGED. */
                h->lagged = true;
                return;
        }
        uint32_t tail = h->q_head + h->q_count;
        if (tail >= h->queue_capacity)
                tail -= h->queue_capacity;
        h->queue[tail] = *ev;
        h->q_count++;
        sub_sync_fd(h);
        if (h->recv_waiters > 0)
                pthread_cond_signal(&h->recv_cond);
}

/* Copies up to n queued events out, in at most two chunks of the ring. */
static size_t queue_pop(struct exit_hub *h, struct exit_event *events, size_t n) {
        size_t k = n < h->q_count ? n : h->q_count;
        size_t first = h->queue_capacity - h->q_head;
        if (first > k)
                first = k;
        memcpy(events, h->queue + h->q_head, first * sizeof(*events));
        memcpy(events + first, h->queue, (k - first) * sizeof(*events));
        h->q_head = (uint32_t) ((h->q_head + k) % h->queue_capacity);
        h->q_count -= (uint32_t) k;
        return k;
}

/*
 * One receive decision, under the lock. LAGGED comes first and discards exactly what is
 * queued now, in the same critical section as the decision: a publish that races it
 * either happened before (and is discarded, covered by the marker) or after (and is kept
 * for the next receive). Returns the count, 0 if nothing is receivable yet, or -EPIPE.
 */
static int sub_take_locked(struct exit_hub *h, struct exit_event *events, size_t n, bool *ret_lagged) {
        if (h->lagged) {
                h->lagged = false;
                h->q_head = h->q_count = 0;
                events[0] = (struct exit_event) { .type = EXIT_EVENT_LAGGED };
                *ret_lagged = true;
                return 1;
        }
        if (h->q_count > 0)
                return (int) queue_pop(h, events, n);
        return h->closed ? -EPIPE : 0;
}

static int sub_recv(struct exit_sub *sub, struct exit_event *events, size_t n, int timeout_ms) {
        struct exit_hub *h = sub->hub;
        usec_t deadline = timeout_ms > 0 ? deadline_after_ms(timeout_ms) : USEC_INFINITY;
        bool lagged = false, timed_out = false;
        int r;

        hub_lock(h);
        for (;;) {
                r = sub_take_locked(h, events, n, &lagged);
                if (r != 0)
                        break;
                if (timeout_ms == 0 || timed_out) {
                        r = -ETIMEDOUT;
                        break;
                }
                h->recv_waiters++;
                timed_out = !cond_wait_until(&h->recv_cond, &h->lock, deadline);
                h->recv_waiters--;
        }
        if (r > 0)
                sub_sync_fd(h);
        exit_hub_lagged_hook_t hook = lagged ? h->lagged_hook : NULL;
        void *hook_userdata = h->lagged_hook_userdata;
        hub_unlock(h);

        if (hook) /* rule 2: tests only, and never under the lock */
                hook(h, hook_userdata);
        return r;
}

_public_ int exit_sub_recv(struct exit_sub *sub, struct exit_event *ret_event, int timeout_ms) {
        if (!sub || !ret_event)
                return -EINVAL;
        int r = sub_recv(sub, ret_event, 1, timeout_ms);
        return r < 0 ? r : 0;
}

_public_ int exit_sub_recv_batch(struct exit_sub *sub, struct exit_event *events, size_t n, int timeout_ms) {
        if (!sub || !events || n == 0)
                return -EINVAL;
        if (n > INT_MAX)
                n = INT_MAX;
        return sub_recv(sub, events, n, timeout_ms);
}

_public_ int exit_sub_fd(const struct exit_sub *sub) {
        if (!sub)
                return -EINVAL;
        return sub->fd;
}

_public_ int exit_hub_subscribe(struct exit_hub *hub, struct exit_sub **ret_sub) {
        if (!hub || !ret_sub)
                return -EINVAL;

        _cleanup_free_ struct exit_sub *sub = calloc(1, sizeof(*sub));
        if (!sub)
                return -ENOMEM;
        _cleanup_close_ int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0)
                return negative_errno();

        hub_lock(hub);
        int r = hub->closed ? -EPIPE : hub->subscribed ? -EBUSY : 0;
        if (r == 0) {
                hub->subscribed = true;
                sub->hub = hub;
                sub->fd = TAKE_FD(fd);
                hub->sub = sub;
                hub_acquire(hub);
        }
        hub_unlock(hub);
        if (r < 0)
                return r;
        *ret_sub = TAKE_PTR(sub);
        return 0;
}

_public_ struct exit_sub *exit_sub_free(struct exit_sub *sub) {
        if (!sub)
                return NULL;
        struct exit_hub *h = sub->hub;

        hub_lock(h);
        /* Later exits are not queued (no subscriber); what was queued is dropped. */
        h->sub = NULL;
        h->q_head = h->q_count = 0;
        h->lagged = false;
        h->sub_fd_ready = false;
        hub_unlock(h);

        safe_close(sub->fd);
        free(sub);
        hub_release(h);
        return NULL;
}

/* ------------------------------------------------------------------------ */
/* Watches and watch sets                                                    */
/* ------------------------------------------------------------------------ */

static void set_sync_fd(struct exit_watch_set *set) {
        bool ready = set->ready_head != NULL;
        if (ready == set->fd_ready)
                return;
        if (ready)
                efd_raise(set->fd);
        else
                efd_lower(set->fd);
        set->fd_ready = ready;
}

static void set_ready_push(struct exit_watch_set *set, struct exit_watch *w) {
        w->ready = true;
        w->ready_next = NULL;
        w->ready_prev = set->ready_tail;
        if (set->ready_tail)
                set->ready_tail->ready_next = w;
        else
                set->ready_head = w;
        set->ready_tail = w;
        set_sync_fd(set);
}

static void set_ready_unlink(struct exit_watch_set *set, struct exit_watch *w) {
        if (w == set->ready_tail)
                set->ready_tail = w->ready_prev;
        LIST_REMOVE(ready, set->ready_head, w);
        w->ready = false;
        set_sync_fd(set);
}

/* Makes the settled watch visible through the fd it was registered through. */
static void watch_notify(struct exit_watch *w) {
        if (w->set)
                set_ready_push(w->set, w);
        else if (w->fd >= 0)
                efd_raise(w->fd);
}

/* The slot is written once, under the lock: the first answer (fire, close, release)
 * wins and a second is absorbed. It is atomic only so exit_watch_result() can read it
 * without the lock; the release store publishes w->reason with it. */
static bool watch_settle(struct exit_watch *w, enum watch_slot slot, const struct exit_reason *reason) {
        if (atomic_load_explicit(&w->slot, memory_order_relaxed) != SLOT_ARMED)
                return false;
        if (reason)
                w->reason = *reason;
        atomic_store_explicit(&w->slot, slot, memory_order_release);
        return true;
}

/* Answers every armed watch of p. Cost: p's watches only; allocates nothing. */
static void watches_settle(struct exit_hub *h, struct proc *p, enum watch_slot slot) {
        bool any = p->watches != NULL;
        while (p->watches) {
                struct exit_watch *w = p->watches;
                LIST_REMOVE(proc, p->watches, w);
                w->proc = NULL;
                h->n_armed--;
                if (watch_settle(w, slot, slot == SLOT_FIRED ? &p->reason : NULL))
                        watch_notify(w);
        }
        if (any && h->watch_waiters > 0)
                pthread_cond_broadcast(&h->watch_cond);
}

static struct exit_watch *watch_destroy(struct exit_watch *w) {
        if (w) {
                safe_close(w->fd);
                free(w);
        }
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct exit_watch *, watch_destroy);

/* Register-then-check, atomically with respect to publish (rule 1). */
static int watch_register_locked(struct exit_hub *h, struct exit_watch *w, struct exit_reason *ret_reason) {
        if (h->closed)
                return -EPIPE;
        struct proc *p = proc_lookup(&h->procs, w->id);
        if (p && p->state != PROC_EXITED) {
                w->proc = p;
                LIST_PREPEND(proc, p->watches, w);
                h->n_armed++;
                if (w->set)
                        LIST_PREPEND(member, w->set->members, w);
                hub_acquire(h);
                return EXIT_WATCH_LIVE;
        }
        const struct exit_reason *reason = p ? &p->reason : NULL;
        if (!reason) {
                const struct record *rec = record_lookup(&h->record_index, w->id);
                reason = rec ? &rec->reason : NULL;
        }
        if (!reason)
                return EXIT_WATCH_NO_RECORD;
        if (ret_reason)
                *ret_reason = *reason;
        return EXIT_WATCH_ALREADY_EXITED;
}

_public_ int exit_hub_watch(struct exit_hub *hub, exit_id_t id, struct exit_watch_set *set, void *userdata,
                            struct exit_watch **ret_watch, struct exit_reason *ret_reason) {
        if (!hub || id == 0 || !ret_watch || (set && set->hub != hub))
                return -EINVAL;

        /* Allocate before the lock; an answer other than LIVE frees it again. */
        _cleanup_(watch_destroyp) struct exit_watch *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct exit_watch) { .hub = hub, .id = id, .userdata = userdata, .fd = -1, .set = set, .in_set = !!set };
        atomic_init(&w->slot, SLOT_ARMED);

        hub_lock(hub);
        int r = watch_register_locked(hub, w, ret_reason);
        hub_unlock(hub);

        if (r == EXIT_WATCH_LIVE)
                *ret_watch = TAKE_PTR(w);
        else if (r >= 0)
                *ret_watch = NULL;
        return r;
}

_public_ int exit_watch_fd(struct exit_watch *watch) {
        if (!watch || watch->in_set)
                return -EINVAL;
        struct exit_hub *h = watch->hub;

        hub_lock(h);
        int fd = watch->fd;
        hub_unlock(h);
        if (fd >= 0)
                return fd;

        /* Created outside the lock; a concurrent first call may win, then ours is closed. */
        _cleanup_close_ int new_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (new_fd < 0)
                return negative_errno();
        hub_lock(h);
        if (watch->fd < 0) {
                watch->fd = TAKE_FD(new_fd);
                if (atomic_load_explicit(&watch->slot, memory_order_relaxed) != SLOT_ARMED)
                        efd_raise(watch->fd);
        }
        fd = watch->fd;
        hub_unlock(h);
        return fd;
}

static int slot_to_result(const struct exit_watch *w, int slot, struct exit_reason *ret_reason) {
        switch (slot) {
        case SLOT_ARMED:
                return -EAGAIN;
        case SLOT_FIRED:
                if (ret_reason)
                        *ret_reason = w->reason;
                return 0;
        case SLOT_CLOSED:
                return -EPIPE;
        default:
                return -ESRCH;
        }
}

_public_ int exit_watch_result(struct exit_watch *watch, struct exit_reason *ret_reason) {
        if (!watch)
                return -EINVAL;
        int slot = atomic_load_explicit(&watch->slot, memory_order_acquire);
        return slot_to_result(watch, slot, ret_reason);
}

_public_ int exit_watch_wait(struct exit_watch *watch, int timeout_ms, struct exit_reason *ret_reason) {
        if (!watch)
                return -EINVAL;
        struct exit_hub *h = watch->hub;
        usec_t deadline = timeout_ms > 0 ? deadline_after_ms(timeout_ms) : USEC_INFINITY;
        bool timed_out = false;
        int slot;

        hub_lock(h);
        while ((slot = atomic_load_explicit(&watch->slot, memory_order_acquire)) == SLOT_ARMED) {
                if (timeout_ms == 0 || timed_out)
                        break;
                h->watch_waiters++;
                timed_out = !cond_wait_until(&h->watch_cond, &h->lock, deadline);
                h->watch_waiters--;
        }
        hub_unlock(h);
        return slot == SLOT_ARMED ? -ETIMEDOUT : slot_to_result(watch, slot, ret_reason);
}

_public_ exit_id_t exit_watch_id(const struct exit_watch *watch) {
        return watch ? watch->id : 0;
}

_public_ void *exit_watch_userdata(const struct exit_watch *watch) {
        return watch ? watch->userdata : NULL;
}

_public_ struct exit_watch *exit_watch_free(struct exit_watch *watch) {
        if (!watch)
                return NULL;
        struct exit_hub *h = watch->hub;

        hub_lock(h);
        if (watch->proc) { /* unfired: deregister, leaving no registry entry */
                LIST_REMOVE(proc, watch->proc->watches, watch);
                watch->proc = NULL;
                h->n_armed--;
        }
        if (watch->set) {
                if (watch->ready)
                        set_ready_unlink(watch->set, watch);
                LIST_REMOVE(member, watch->set->members, watch);
        }
        hub_unlock(h);

        watch_destroy(watch);
        hub_release(h);
        return NULL;
}

_public_ int exit_watch_set_new(struct exit_hub *hub, struct exit_watch_set **ret_set) {
        if (!hub || !ret_set)
                return -EINVAL;

        _cleanup_free_ struct exit_watch_set *set = calloc(1, sizeof(*set));
        if (!set)
                return -ENOMEM;
        _cleanup_close_ int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0)
                return negative_errno();

        hub_lock(hub);
        bool closed = hub->closed;
        if (!closed)
                hub_acquire(hub);
        hub_unlock(hub);
        if (closed)
                return -EPIPE;

        set->hub = hub;
        set->fd = TAKE_FD(fd);
        *ret_set = TAKE_PTR(set);
        return 0;
}

_public_ int exit_watch_set_fd(const struct exit_watch_set *set) {
        if (!set)
                return -EINVAL;
        return set->fd;
}

_public_ int exit_watch_set_next(struct exit_watch_set *set, struct exit_watch **ret_watch) {
        if (!set || !ret_watch)
                return -EINVAL;

        hub_lock(set->hub);
        struct exit_watch *w = set->ready_head;
        if (w)
                set_ready_unlink(set, w);
        hub_unlock(set->hub);

        if (!w)
                return -EAGAIN;
        *ret_watch = w;
        return 0;
}

_public_ struct exit_watch_set *exit_watch_set_free(struct exit_watch_set *set) {
        if (!set)
                return NULL;
        struct exit_hub *h = set->hub;

        hub_lock(h);
        /* Watches still registered through the set are detached: from now on they report
         * through exit_watch_result()/exit_watch_wait() only. */
        while (set->members) {
                struct exit_watch *w = set->members;
                LIST_REMOVE(member, set->members, w);
                w->set = NULL;
                w->ready = false;
                w->ready_prev = w->ready_next = NULL;
        }
        set->ready_head = set->ready_tail = NULL;
        hub_unlock(h);

        safe_close(set->fd);
        free(set);
        hub_release(h);
        return NULL;
}

/* ------------------------------------------------------------------------ */
/* Registration and the ledger                                               */
/* ------------------------------------------------------------------------ */

static int reserve_locked(struct exit_hub *h, struct proc *p) {
        if (h->closed)
                return -EPIPE;
        /* Grow both tables now, so attach() and publish() never allocate. */
        int r = proc_map_reserve(&h->procs, proc_map_size(&h->procs) + 1);
        if (r < 0)
                return r;
        r = proc_map_reserve(&h->pids, h->n_live + 1);
        if (r < 0)
                return r;
        p->id = h->next_id++;
        p->state = PROC_RESERVED;
        (void) proc_map_put(&h->procs, (struct proc_slot) { .key = p->id, .proc = p });
        h->n_live++;
        return 0;
}

_public_ int exit_hub_reserve(struct exit_hub *hub, exit_id_t *ret_id) {
        if (!hub || !ret_id)
                return -EINVAL;

        _cleanup_free_ struct proc *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        hub_lock(hub);
        int r = reserve_locked(hub, p);
        hub_unlock(hub);
        if (r < 0)
                return r;
        *ret_id = TAKE_PTR(p)->id;
        return 0;
}

static int attach_locked(struct exit_hub *h, exit_id_t id, pid_t pid) {
        struct proc *p = proc_lookup(&h->procs, id);
        if (!p || p->state != PROC_RESERVED)
                return -ENOENT;
        if (proc_map_get(&h->pids, (uint64_t) pid))
                return -EEXIST;
        p->pid = pid;
        p->state = PROC_ATTACHED;
        (void) proc_map_put(&h->pids, (struct proc_slot) { .key = (uint64_t) pid, .proc = p }); /* room made by reserve */
        return 0;
}

_public_ int exit_hub_attach(struct exit_hub *hub, exit_id_t id, pid_t pid) {
        if (!hub || id == 0 || pid <= 0)
                return -EINVAL;
        hub_lock(hub);
        int r = attach_locked(hub, id, pid);
        hub_unlock(hub);
        return r;
}

static int unreserve_locked(struct exit_hub *h, exit_id_t id, struct proc **ret_freed) {
        struct proc *p = proc_lookup(&h->procs, id);
        if (!p || p->state == PROC_EXITED)
                return -ENOENT;
        if (p->state == PROC_ATTACHED)
                return -EBUSY;
        watches_settle(h, p, SLOT_RELEASED);
        proc_unmap(&h->procs, id);
        h->n_live--;
        *ret_freed = p;
        return 0;
}

_public_ int exit_hub_unreserve(struct exit_hub *hub, exit_id_t id) {
        if (!hub || id == 0)
                return -EINVAL;
        struct proc *freed = NULL;
        hub_lock(hub);
        int r = unreserve_locked(hub, id, &freed);
        hub_unlock(hub);
        free(freed);
        return r;
}

_public_ int exit_hub_register(struct exit_hub *hub, pid_t pid, exit_id_t *ret_id) {
        if (!hub || pid <= 0 || !ret_id)
                return -EINVAL;
        exit_id_t id;
        int r = exit_hub_reserve(hub, &id);
        if (r < 0)
                return r;
        r = exit_hub_attach(hub, id, pid);
        if (r < 0) {
                (void) exit_hub_unreserve(hub, id);
                return r;
        }
        *ret_id = id;
        return 0;
}

/* SPEC §2.1 "Order", in one critical section (rule 1). */
static int publish_locked(struct exit_hub *h, exit_id_t id, const struct exit_reason *reason) {
        if (h->closed)
                return -EPIPE;
        struct proc *p = proc_lookup(&h->procs, id);
        if (!p) /* a record without a ledger entry: published and taken (or an orphan) */
                return record_lookup(&h->record_index, id) ? -EALREADY : -ENOENT;
        if (p->state == PROC_EXITED)
                return -EALREADY;
        if (p->state == PROC_RESERVED)
                return -ENOENT;

        /* 1. The ledger and the durable record; the pid stops being live. */
        p->state = PROC_EXITED;
        p->reason = *reason;
        proc_unmap(&h->pids, (uint64_t) p->pid);
        h->n_live--;
        record_add(h, id, p->pid, false, reason);
        /* 2. This process's watches. */
        watches_settle(h, p, SLOT_FIRED);
        /* 3. The queue. */
        queue_offer(h, &(struct exit_event) { .type = EXIT_EVENT_EXIT, .id = id, .pid = p->pid, .reason = *reason });
        return 0;
}

_public_ int exit_hub_publish(struct exit_hub *hub, exit_id_t id, const struct exit_reason *reason) {
        if (!hub || id == 0 || !reason_is_valid(reason))
                return -EINVAL;
        hub_lock(hub);
        int r = publish_locked(hub, id, reason);
        hub_unlock(hub);
        return r;
}

_public_ int exit_hub_publish_orphan(struct exit_hub *hub, pid_t pid, const struct exit_reason *reason,
                                     exit_id_t *ret_id) {
        if (!hub || pid <= 0 || !reason_is_valid(reason))
                return -EINVAL;

        hub_lock(hub);
        exit_id_t id = 0;
        if (!hub->closed) {
                id = hub->next_id++;
                record_add(hub, id, pid, true, reason);
                queue_offer(hub, &(struct exit_event) { .type = EXIT_EVENT_EXIT, .flags = EXIT_EVENT_ORPHAN,
                                                       .id = id, .pid = pid, .reason = *reason });
        }
        hub_unlock(hub);
        if (id == 0)
                return -EPIPE;
        if (ret_id)
                *ret_id = id;
        return 0;
}

_public_ int exit_hub_pid_to_id(struct exit_hub *hub, pid_t pid, exit_id_t *ret_id) {
        if (!hub || pid <= 0 || !ret_id)
                return -EINVAL;
        hub_lock(hub);
        const struct proc *p = proc_lookup(&hub->pids, (uint64_t) pid);
        exit_id_t id = p ? p->id : 0;
        hub_unlock(hub);
        if (id == 0)
                return -ESRCH;
        *ret_id = id;
        return 0;
}

/* The ring's records newest first: an orphan of pid published after `after`. */
_public_ int exit_hub_orphan_find(struct exit_hub *hub, pid_t pid, exit_id_t after, struct exit_reason *ret_reason) {
        if (!hub || pid <= 0 || !ret_reason)
                return -EINVAL;
        int r = -ENOENT;
        hub_lock(hub);
        for (uint32_t i = 0; i < hub->record_count; i++) {
                uint32_t at = (hub->record_next + hub->record_capacity - 1 - i) % hub->record_capacity;
                const struct record *rec = &hub->records[at];
                if (!rec->orphan)
                        continue;
                /* An orphan's id is drawn when it is published, so the ring
                 * holds orphans in the order of their ids (not so a spawned
                 * process's, drawn at its spawn). */
                if (rec->id <= after)
                        break;
                if (rec->pid == pid) {
                        *ret_reason = rec->reason;
                        r = 0;
                        break;
                }
        }
        hub_unlock(hub);
        return r;
}

/* Exactly once: the entry leaves the ledger in the same critical section that reads it. */
static int take_locked(struct exit_hub *h, exit_id_t id, struct exit_reason *ret_reason, struct proc **ret_freed) {
        struct proc *p = proc_lookup(&h->procs, id);
        if (!p) {
                const struct record *rec = record_lookup(&h->record_index, id);
                if (!rec)
                        return -ENOENT;
                return rec->orphan ? -EPERM : -EALREADY;
        }
        if (p->state != PROC_EXITED)
                return -EINPROGRESS;
        *ret_reason = p->reason;
        proc_unmap(&h->procs, id);
        *ret_freed = p;
        return 0;
}

_public_ int exit_hub_take(struct exit_hub *hub, exit_id_t id, struct exit_reason *ret_reason) {
        if (!hub || id == 0 || !ret_reason)
                return -EINVAL;
        struct proc *freed = NULL;
        struct exit_reason reason;
        hub_lock(hub);
        int r = take_locked(hub, id, &reason, &freed);
        hub_unlock(hub);
        free(freed);
        if (r == 0)
                *ret_reason = reason;
        return r;
}

/* ------------------------------------------------------------------------ */
/* Private interface (hub-internal.h)                                        */
/* ------------------------------------------------------------------------ */

void exit_hub_set_lagged_hook(struct exit_hub *hub, exit_hub_lagged_hook_t hook, void *userdata) {
        hub_lock(hub);
        hub->lagged_hook = hook;
        hub->lagged_hook_userdata = userdata;
        hub_unlock(hub);
}

#define HUB_READ_LOCKED(hub, expr)          \
        ({                                  \
                hub_lock(hub);              \
                __typeof__(expr) _v_ = (expr); \
                hub_unlock(hub);            \
                _v_;                        \
        })

size_t exit_hub_armed_watches(struct exit_hub *hub) {
        return HUB_READ_LOCKED(hub, hub->n_armed);
}

size_t exit_hub_ledger_entries(struct exit_hub *hub) {
        return HUB_READ_LOCKED(hub, proc_map_size(&hub->procs));
}

size_t exit_hub_live_processes(struct exit_hub *hub) {
        return HUB_READ_LOCKED(hub, hub->n_live);
}

size_t exit_hub_durable_records(struct exit_hub *hub) {
        return HUB_READ_LOCKED(hub, (size_t) hub->record_count);
}

bool exit_hub_is_closed(struct exit_hub *hub) {
        return HUB_READ_LOCKED(hub, hub->closed);
}
