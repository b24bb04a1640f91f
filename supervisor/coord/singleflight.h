/* SPDX-License-Identifier: MIT */
/*
 * Single-flight table (SPEC §2.3): one piece of work per key, however many
 * requests want it. In tend the key is a unit name and the work is a start or
 * restart; this module knows nothing of units and is usable and tested alone.
 *
 * Three objects, three roles:
 *
 *   sf_waiter      a requester's *share* in a flight. Every requester holds one
 *                  (tend's own requesters and control connections alike).
 *                  Freeing it leaves the flight; the last waiter leaving a
 *                  RUNNING flight cancels it.
 *   sf_resolution  the *work's* handle: exactly one per flight, given to the
 *                  caller of sf_table_join() that created the flight (the
 *                  leader), who hands it to whoever does the work (in tend the
 *                  unit's state machine). It publishes the answer. Freeing it
 *                  ends the work: without an answer that is `abandoned`.
 *   sf_flight      the shared slot, borrowed from a waiter or the resolution
 *                  for queries (key, state, waiter count).
 *
 * States of a flight (sf_state):
 *
 *        RUNNING ──begin_publishing/answer──▶ PUBLISHING ──answer──▶ ANSWERED
 *           │  (compare-and-exchange:                │
 *           │   exactly one of these two wins)       └──resolution freed──▶ ABANDONED
 *           ├──last waiter leaves / sf_table_cancel──▶ CANCELLED
 *           └──resolution freed───────────────────────▶ ABANDONED
 *
 * A waiter's answer (sf_answer) is final once the flight is ANSWERED (SF_ANSWER_OK
 * with the outcome), CANCELLED or ABANDONED. The slot leaves the table when
 * the flight is cancelled or when its resolution is freed, whichever comes
 * first; until then every sf_table_join() of the key joins this flight, so
 * waiters that join after the answer, before the resolution is freed, get it.
 *
 * Conventions, for every function below unless its comment says otherwise:
 *  - Return: 0 (or the non-negative value the comment names) on success, a
 *    negative errno on failure; -EINVAL for a NULL required pointer or an
 *    empty key. ret_* out-parameters are written only on success.
 *  - Thread-safety: every function may be called from any thread. One table
 *    mutex serialises joins, leaves, cancels and answers. A waiter or a
 *    resolution has one user at a time (hand it over, do not share it), except
 *    that sf_resolution_is_cancelled() and the sf_flight_get_*() queries may be
 *    called from any thread while the object lives.
 *  - Times are absolute CLOCK_MONOTONIC deadlines in µs (common/time-util.h:
 *    deadline_after_ms()); USEC_INFINITY waits forever, 0 never blocks.
 *  - Caller code (the outcome copy/free functions, the log sink) never runs
 *    under the table's lock.
 *  - Every fd is an eventfd, O_CLOEXEC|O_NONBLOCK, owned by the object it came
 *    from; once readable it stays readable (level-triggered): do not read it.
 *
 * The design, the race rules and examples: docs/singleflight.md.
 */
#pragma once

#include <stdbool.h>

#include "macro.h"
#include "time-util.h"

typedef struct sf_table sf_table;
typedef struct sf_flight sf_flight;
typedef struct sf_waiter sf_waiter;
typedef struct sf_resolution sf_resolution;

typedef enum sf_state {
        SF_STATE_RUNNING,    /* work not yet at its point of no return; cancellable */
        SF_STATE_PUBLISHING, /* work past its point of no return; not cancellable */
        SF_STATE_ANSWERED,   /* outcome stored; waiters answered SF_ANSWER_OK */
        SF_STATE_CANCELLED,  /* last waiter left or sf_table_cancel(); answered SF_ANSWER_CANCELLED */
        SF_STATE_ABANDONED,  /* resolution freed without an answer; answered SF_ANSWER_ABANDONED */
} sf_state;

typedef enum sf_status {
        SF_ANSWER_OK,        /* the work's outcome: sf_answer.outcome is the caller's own copy */
        SF_ANSWER_CANCELLED, /* the flight was cancelled (stop, or every waiter left) */
        SF_ANSWER_ABANDONED, /* the work ended without an answer */
} sf_status;

typedef struct sf_answer {
        sf_status status;
        /* SF_ANSWER_OK: a copy made by ops->copy for this call, owned by the caller,
         * who releases it with the same function it gave as ops->free.
         * Otherwise NULL. */
        void *outcome;
} sf_answer;

/*
 * How the table owns outcomes. The table takes ownership of the one outcome a
 * resolution answers and hands every waiter its own copy.
 *  copy: make *ret_copy, an independent copy of outcome; 0 or a negative
 *        errno (which sf_waiter_wait()/sf_waiter_peek() then return).
 *  free: release an outcome (the stored one, when the flight is freed).
 * Both may run in any thread, never under the table's lock. userdata is
 * passed through unchanged.
 */
typedef struct sf_outcome_ops {
        int (*copy)(const void *outcome, void **ret_copy, void *userdata);
        void (*free)(void *outcome, void *userdata);
} sf_outcome_ops;

/* ------------------------------------------------------------------------ */
/* Table                                                                     */
/* ------------------------------------------------------------------------ */

/*
 * Creates an empty table with one reference, owned by the caller. ops is
 * copied (both functions required); userdata is borrowed and must outlive the
 * table. Returns 0, -EINVAL, -ENOMEM, or a pthread error as a negative errno.
 */
int sf_table_new(const sf_outcome_ops *ops, void *userdata, sf_table **ret);

/* Adds a reference. Returns t. NULL is accepted and returned. */
sf_table *sf_table_ref(sf_table *t);

/*
 * Drops a reference; returns NULL. Every flight holds a reference, so the
 * table is freed once the owner has dropped its own and every waiter and
 * resolution is gone. NULL is accepted.
 */
sf_table *sf_table_unref(sf_table *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(sf_table *, sf_table_unref);

/*
 * Joins the flight for key, creating it if the table has no slot for key.
 * key is copied. Always returns a new waiter in *ret_waiter (owned by the
 * caller; free it with sf_waiter_free()). The caller that created the flight
 * also gets its resolution in *ret_resolution (owned by the caller, who starts
 * the work and hands it over; free it with sf_resolution_free()); a follower
 * gets *ret_resolution = NULL. Both out-parameters are required.
 *
 * Returns 1 when the caller leads (start the work), 0 when it joined a
 * flight already under way (RUNNING, PUBLISHING, or ANSWERED: then the
 * waiter's answer is ready at once); -EINVAL, -ENOMEM.
 * SPEC §2.3: the waiter is counted under the table's lock, so nobody joins a
 * slot between its last waiter leaving and its removal.
 */
int sf_table_join(sf_table *t, const char *key, sf_waiter **ret_waiter, sf_resolution **ret_resolution);

/*
 * The owner's cancel (tend's `stop`): the compare-and-exchange RUNNING →
 * CANCELLED; every waiter of the flight is answered SF_ANSWER_CANCELLED, the worker's
 * resolution sees the cancellation (sf_resolution_get_fd(),
 * sf_resolution_is_cancelled()), and the slot is removed (the next join leads
 * a new flight). Logs at debug level only.
 * Returns 0 when cancelled;
 *   -ENOENT   no flight for key;
 *   -EBUSY    the flight is PUBLISHING: the work passed its point of no return;
 *             wait for the publication (queue the stop) — nothing changed;
 *   -EALREADY the flight is ANSWERED and awaits its resolution's end: the
 *             publication is complete, nothing left to cancel.
 */
int sf_table_cancel(sf_table *t, const char *key);

/*
 * The number of waiters sharing key's flight now (tend's `waiters`); 0 when
 * the table has no slot for key. Returns the count or -EINVAL.
 */
int sf_table_get_waiters(sf_table *t, const char *key);

/* ------------------------------------------------------------------------ */
/* Waiter: a requester's share                                               */
/* ------------------------------------------------------------------------ */

/*
 * Leaves the flight and destroys the waiter (closing its fd); returns NULL.
 * Uncounted under the table's lock. If it was the last waiter of a RUNNING
 * flight, that is the compare-and-exchange RUNNING → CANCELLED: the worker is
 * woken and the slot removed (debug log). A waiter leaving while others stay,
 * or after RUNNING, changes nothing else. NULL is accepted.
 */
sf_waiter *sf_waiter_free(sf_waiter *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(sf_waiter *, sf_waiter_free);

/*
 * Blocks until the flight's answer is final or deadline (absolute
 * CLOCK_MONOTONIC µs) passes; on success fills *ret (SF_ANSWER_OK carries a new copy
 * of the outcome, see sf_answer). Each successful call with SF_ANSWER_OK makes one
 * copy. Returns 0; -ETIMEDOUT; -EINVAL; an error of ops->copy.
 */
int sf_waiter_wait(sf_waiter *w, usec_t deadline, sf_answer *ret);

/* The non-blocking query ("the result if answered"), lock-free: like
 * sf_waiter_wait() with a deadline already past, but an unanswered flight
 * returns -EAGAIN. Returns 0 with the answer; -EAGAIN; -EINVAL; an error of
 * ops->copy. */
int sf_waiter_peek(sf_waiter *w, sf_answer *ret);

/*
 * An fd for an event loop, readable once the answer is final (then call
 * sf_waiter_peek()). Created on first call (so waiters that only block cost
 * no fd), owned by the waiter, closed by sf_waiter_free(); each waiter has its
 * own, so one epoll set can watch many waiters of one flight. Returns the fd,
 * or a negative errno from eventfd() (-EMFILE, -ENFILE, -ENOMEM), -EINVAL.
 */
int sf_waiter_get_fd(sf_waiter *w);

/* The waiter's flight, borrowed: valid while the waiter lives. NULL for NULL. */
sf_flight *sf_waiter_get_flight(sf_waiter *w);

/* ------------------------------------------------------------------------ */
/* Resolution: the work's handle                                             */
/* ------------------------------------------------------------------------ */

/*
 * The compare-and-exchange RUNNING → PUBLISHING, called immediately before
 * the work's point of no return (in tend: the first fork of any of the
 * unit's processes, or the first signal to the old instance). After it the
 * flight can no longer be cancelled.
 * Returns 0 (also when already PUBLISHING: calling it before every possible
 * point of no return is fine);
 *   -ECANCELED the flight was cancelled first: do not pass the point of no
 *              return; free the resolution (leaves the unit as it was);
 *   -EALREADY  already answered.
 * Lock-free.
 */
int sf_resolution_begin_publishing(sf_resolution *r);

/*
 * Publishes the outcome: every waiter, those waiting now and those joining
 * until the resolution is freed, is answered SF_ANSWER_OK with its own copy. Works
 * from RUNNING (an answer before the point of no return, e.g. a failure to
 * resolve User=; it takes the same compare-and-exchange) or PUBLISHING, and
 * whether or not anybody waits. Takes ownership of outcome (non-NULL) on
 * success only; the table releases it with ops->free when the flight is freed.
 * Free the resolution right after, so that later joins start a new flight.
 * Returns 0;
 *   -ECANCELED the flight was cancelled (outcome not taken; free the
 *              resolution, which logs at debug level only);
 *   -EALREADY  already answered (outcome not taken);
 *   -EINVAL.
 */
int sf_resolution_answer_take(sf_resolution *r, void *outcome);

/*
 * Ends the work; returns NULL. Without an answer (any error path, the unit
 * removed, shutdown) the flight is answered SF_ANSWER_ABANDONED and an error naming
 * the key is logged; after a cancellation it logs at debug level only. The
 * slot is retired if — and only if — it is still this flight's (identity,
 * not key: a late, finished flight never removes its successor), so the key
 * stays servable. Closes the resolution's fd. NULL is accepted.
 */
sf_resolution *sf_resolution_free(sf_resolution *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(sf_resolution *, sf_resolution_free);

/* True once the flight is CANCELLED: the worker checks it before its point of
 * no return. Lock-free; any thread. False for NULL. */
bool sf_resolution_is_cancelled(sf_resolution *r);

/*
 * An fd readable once the flight is CANCELLED, for the worker's event loop.
 * Created on first call, owned by the resolution, closed by
 * sf_resolution_free(). Returns the fd or a negative errno (see
 * sf_waiter_get_fd()).
 */
int sf_resolution_get_fd(sf_resolution *r);

/* The resolution's flight, borrowed: valid while the resolution lives. */
sf_flight *sf_resolution_get_flight(sf_resolution *r);

/* ------------------------------------------------------------------------ */
/* Flight queries (borrowed pointer; any thread; lock-free)                  */
/* ------------------------------------------------------------------------ */

/* The key, owned by the flight (NULL for NULL). */
const char *sf_flight_get_key(sf_flight *f);

/* The state now (f non-NULL); it may change right after unless it is final
 * (ANSWERED, CANCELLED, ABANDONED). */
sf_state sf_flight_get_state(sf_flight *f);

/* The number of waiters sharing this flight now (0 for NULL). */
unsigned sf_flight_get_waiters(sf_flight *f);

/* "running", "publishing", …, "ok", "cancelled", "abandoned"; NULL if out of range. */
const char *sf_state_to_string(sf_state s);
const char *sf_status_to_string(sf_status s);
