/* SPDX-License-Identifier: MIT */
/*
 * Unit and concurrency tests of the single-flight table (SPEC §2.3,
 * supervisor/coord/singleflight.h). Every test starts and ends with the same number
 * of open fds and with every outcome freed (copies made == copies freed); every
 * wait is bounded and its failure names the likely cause.
 */
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "macro.h"
#include "singleflight.h"
#include "time-util.h"
#include "testutil.h"

#define WAIT_MS 10000 /* generous bound for anything a correct table does at once */
#define RACE_ITERATIONS 5000

/* ------------------------------------------------------------------------ */
/* Outcomes with counted copy/free                                           */
/* ------------------------------------------------------------------------ */

typedef struct outcome {
        int pid;
        char result[32];
} outcome;

static atomic_int n_made, n_copies, n_frees;
static atomic_int copy_fails; /* next copies fail with -ENOMEM while > 0 */

static outcome *outcome_new(int pid, const char *result) {
        outcome *o = calloc(1, sizeof *o);
        assert_non_null(o);
        o->pid = pid;
        snprintf(o->result, sizeof o->result, "%s", result);
        atomic_fetch_add(&n_made, 1);
        return o;
}

static int outcome_copy(const void *src, void **ret, void *userdata) {
        if (atomic_load(&copy_fails) > 0) {
                atomic_fetch_sub(&copy_fails, 1);
                return -ENOMEM;
        }
        outcome *o = malloc(sizeof *o);
        if (!o)
                return -ENOMEM;
        memcpy(o, src, sizeof *o);
        atomic_fetch_add(&n_copies, 1);
        *ret = o;
        return 0;
}

static void outcome_free(void *o, void *userdata) {
        atomic_fetch_add(&n_frees, 1);
        free(o);
}

static const sf_outcome_ops test_ops = { .copy = outcome_copy, .free = outcome_free };

/* ------------------------------------------------------------------------ */
/* Log capture through log_set_sink()                                        */
/* ------------------------------------------------------------------------ */

#define CAPTURE_MAX 64

static struct {
        pthread_mutex_t lock;
        int n_by_level[8];
        int n_stored;
        int level[CAPTURE_MAX];
        char text[CAPTURE_MAX][256];
} capture = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void capture_sink(int level, const char *msg, void *userdata) {
        pthread_mutex_lock(&capture.lock);
        capture.n_by_level[level & 7]++;
        if (capture.n_stored < CAPTURE_MAX) {
                capture.level[capture.n_stored] = level;
                snprintf(capture.text[capture.n_stored], sizeof capture.text[0], "%s", msg);
                capture.n_stored++;
        }
        pthread_mutex_unlock(&capture.lock);
}

static void capture_reset(void) {
        pthread_mutex_lock(&capture.lock);
        memset(capture.n_by_level, 0, sizeof capture.n_by_level);
        capture.n_stored = 0;
        pthread_mutex_unlock(&capture.lock);
}

/* Messages at exactly level whose text contains needle (among the stored ones). */
static int capture_count(int level, const char *needle) {
        int n = 0;
        pthread_mutex_lock(&capture.lock);
        for (int i = 0; i < capture.n_stored; i++)
                if (capture.level[i] == level && strstr(capture.text[i], needle))
                        n++;
        pthread_mutex_unlock(&capture.lock);
        return n;
}

/* Every message at error or warning level, stored or not. */
static int capture_errors_and_warnings(void) {
        pthread_mutex_lock(&capture.lock);
        int n = 0;
        for (int l = 0; l <= LOG_WARNING; l++)
                n += capture.n_by_level[l];
        pthread_mutex_unlock(&capture.lock);
        return n;
}

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */
/* ------------------------------------------------------------------------ */


typedef struct fixture {
        sf_table *t;
        int n_fds;
} fixture;

static int setup(void **state) {
        fixture *fx = calloc(1, sizeof *fx);
        if (!fx)
                return -1;
        atomic_store(&n_made, 0);
        atomic_store(&n_copies, 0);
        atomic_store(&n_frees, 0);
        atomic_store(&copy_fails, 0);
        capture_reset();
        log_set_sink(capture_sink, NULL);
        log_set_max_level(LOG_DEBUG);
        fx->n_fds = count_fds();
        if (sf_table_new(&test_ops, NULL, &fx->t) < 0)
                return -1;
        *state = fx;
        return 0;
}

static int teardown(void **state) {
        fixture *fx = *state;
        int ret = 0;

        fx->t = sf_table_unref(fx->t);
        log_set_sink(NULL, NULL);
        log_set_max_level(LOG_WARNING);
        if (atomic_load(&n_made) + atomic_load(&n_copies) != atomic_load(&n_frees)) {
                print_error("outcomes leaked: %d made + %d copies != %d freed (a flight or a copy not freed)\n",
                            atomic_load(&n_made), atomic_load(&n_copies), atomic_load(&n_frees));
                ret = -1;
        }
        int n = count_fds();
        if (n != fx->n_fds) {
                print_error("fd leak: %d open fds at the start, %d at the end (an eventfd not closed)\n",
                            fx->n_fds, n);
                ret = -1;
        }
        free(fx);
        return ret;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static sf_waiter *join_leader(sf_table *t, const char *key, sf_resolution **ret_res) {
        sf_waiter *w = NULL;
        sf_resolution *res = NULL;
        assert_int_equal(sf_table_join(t, key, &w, &res), 1);
        assert_non_null(w);
        assert_non_null(res);
        *ret_res = res;
        return w;
}

static sf_waiter *join_follower(sf_table *t, const char *key) {
        sf_waiter *w = NULL;
        sf_resolution *res = (sf_resolution *) &res; /* must come back NULL */
        assert_int_equal(sf_table_join(t, key, &w, &res), 0);
        assert_non_null(w);
        assert_null(res);
        return w;
}

/* Peeks, checks the status, frees the copy; returns the pid for SF_ANSWER_OK. */
static int peek_status(sf_waiter *w, sf_status expected) {
        sf_answer a;
        assert_int_equal(sf_waiter_peek(w, &a), 0);
        assert_int_equal(a.status, expected);
        int pid = 0;
        if (expected == SF_ANSWER_OK) {
                assert_non_null(a.outcome);
                pid = ((outcome *) a.outcome)->pid;
                outcome_free(a.outcome, NULL);
        } else
                assert_null(a.outcome);
        return pid;
}

static int poll_readable(int fd, int timeout_ms) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r = poll(&p, 1, timeout_ms);
        return r < 0 ? -errno : r;
}

static void assert_fd_readable(int fd, const char *cause) {
        int r = poll_readable(fd, WAIT_MS);
        if (r != 1)
                fail_msg("fd %d not readable after %d ms (poll: %d): %s", fd, WAIT_MS, r, cause);
}

/* Waits, with a deadline, until key's flight counts n waiters. The count has
 * no event to wait on: a bounded retry loop is the documented exception. */
static void wait_for_waiters(sf_table *t, const char *key, int n, const char *cause) {
        usec_t deadline = deadline_after_ms(WAIT_MS);
        int r;
        while ((r = sf_table_get_waiters(t, key)) != n) {
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("key '%s' has %d waiters after %d ms, expected %d: %s", key, r, WAIT_MS, n, cause);
                sched_yield();
        }
}

/* Waits until thread tid sleeps (state S in /proc), i.e. is blocked in
 * sf_waiter_wait(): bounded retry loop over /proc, no event exists for it. */
static void wait_for_sleeping(pid_t tid) {
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int) tid);
        usec_t deadline = deadline_after_ms(WAIT_MS);
        for (;;) {
                FILE *f = fopen(path, "re");
                assert_non_null(f);
                size_t n = fread(buf, 1, sizeof buf - 1, f);
                fclose(f);
                buf[n] = 0;
                const char *p = strrchr(buf, ')');
                if (p && p[1] == ' ' && p[2] == 'S')
                        return;
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("thread %d never blocked in sf_waiter_wait() within %d ms (busy loop in wait?)",
                                 (int) tid, WAIT_MS);
                sched_yield();
        }
}

/* A requester in another thread: joins key, then blocks for the answer. */
typedef struct waiter_thread {
        sf_table *t;
        const char *key;
        pthread_t thread;
        atomic_int tid;
        int join_r, wait_r;
        sf_answer answer;
} waiter_thread;

static void *waiter_thread_main(void *p) {
        waiter_thread *wt = p;
        sf_waiter *w = NULL;
        sf_resolution *res = NULL;

        atomic_store(&wt->tid, (int) syscall(SYS_gettid));
        wt->join_r = sf_table_join(wt->t, wt->key, &w, &res);
        if (wt->join_r != 0) { /* leading here would be a test bug; end the work */
                sf_resolution_free(res);
                sf_waiter_free(w);
                return NULL;
        }
        wt->wait_r = sf_waiter_wait(w, deadline_after_ms(WAIT_MS), &wt->answer);
        sf_waiter_free(w);
        return NULL;
}

/* Starts a waiter thread and returns once it has joined (n_expected waiters
 * on key) and sleeps in sf_waiter_wait(). */
static void waiter_thread_start(waiter_thread *wt, sf_table *t, const char *key, int n_expected) {
        *wt = (waiter_thread) { .t = t, .key = key, .join_r = -1, .wait_r = -1 };
        assert_int_equal(pthread_create(&wt->thread, NULL, waiter_thread_main, wt), 0);
        wait_for_waiters(t, key, n_expected, "the waiter thread did not join (table lock held?)");
        wait_for_sleeping((pid_t) atomic_load(&wt->tid));
}

/* Joins the thread (its wait is bounded, so this is too) and checks its answer. */
static int waiter_thread_finish(waiter_thread *wt, sf_status expected) {
        assert_int_equal(pthread_join(wt->thread, NULL), 0);
        assert_int_equal(wt->join_r, 0);
        if (wt->wait_r == -ETIMEDOUT)
                fail_msg("blocked waiter timed out after %d ms: the answer never woke it (no broadcast?)", WAIT_MS);
        assert_int_equal(wt->wait_r, 0);
        assert_int_equal(wt->answer.status, expected);
        int pid = 0;
        if (expected == SF_ANSWER_OK) {
                pid = ((outcome *) wt->answer.outcome)->pid;
                outcome_free(wt->answer.outcome, NULL);
        } else
                assert_null(wt->answer.outcome);
        return pid;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

static void test_invalid_arguments(void **state) {
        fixture *fx = *state;
        sf_table *t = NULL;
        sf_waiter *w = NULL;
        sf_resolution *res = NULL;
        sf_answer a;

        assert_int_equal(sf_table_new(NULL, NULL, &t), -EINVAL);
        assert_int_equal(sf_table_new(&(sf_outcome_ops) { .copy = outcome_copy }, NULL, &t), -EINVAL);
        assert_int_equal(sf_table_new(&test_ops, NULL, NULL), -EINVAL);
        assert_int_equal(sf_table_join(NULL, "k", &w, &res), -EINVAL);
        assert_int_equal(sf_table_join(fx->t, "", &w, &res), -EINVAL);
        assert_int_equal(sf_table_join(fx->t, NULL, &w, &res), -EINVAL);
        assert_int_equal(sf_table_join(fx->t, "k", NULL, &res), -EINVAL);
        assert_int_equal(sf_table_join(fx->t, "k", &w, NULL), -EINVAL);
        assert_null(w);
        assert_null(res);
        assert_int_equal(sf_table_cancel(fx->t, ""), -EINVAL);
        assert_int_equal(sf_table_cancel(fx->t, "k"), -ENOENT);
        assert_int_equal(sf_table_get_waiters(fx->t, "k"), 0);
        assert_int_equal(sf_waiter_wait(NULL, 0, &a), -EINVAL);
        assert_int_equal(sf_waiter_peek(NULL, &a), -EINVAL);
        assert_int_equal(sf_waiter_get_fd(NULL), -EINVAL);
        assert_int_equal(sf_resolution_begin_publishing(NULL), -EINVAL);
        assert_int_equal(sf_resolution_answer_take(NULL, &a), -EINVAL);
        assert_int_equal(sf_resolution_get_fd(NULL), -EINVAL);
        assert_false(sf_resolution_is_cancelled(NULL));
        assert_null(sf_waiter_free(NULL));
        assert_null(sf_resolution_free(NULL));
        assert_null(sf_table_unref(NULL));

        w = join_leader(fx->t, "k", &res);
        assert_int_equal(sf_resolution_answer_take(res, NULL), -EINVAL);
        assert_int_equal(sf_waiter_wait(w, 0, NULL), -EINVAL);
        assert_string_equal(sf_flight_get_key(sf_waiter_get_flight(w)), "k");
        assert_ptr_equal(sf_waiter_get_flight(w), sf_resolution_get_flight(res));
        res = sf_resolution_free(res); /* abandoned: one error */
        w = sf_waiter_free(w);
        assert_int_equal(capture_count(LOG_ERR, "'k'"), 1);
}

static void test_wait_timeout(void **state) {
        fixture *fx = *state;
        sf_resolution *res;
        sf_waiter *w = join_leader(fx->t, "slow.service", &res);
        sf_answer a;

        assert_int_equal(sf_waiter_peek(w, &a), -EAGAIN);
        usec_t start = now_usec(CLOCK_MONOTONIC);
        assert_int_equal(sf_waiter_wait(w, start + 20 * USEC_PER_MSEC, &a), -ETIMEDOUT);
        assert_true(now_usec(CLOCK_MONOTONIC) - start >= 20 * USEC_PER_MSEC);
        assert_int_equal(sf_waiter_wait(w, 0, &a), -ETIMEDOUT); /* a past deadline never blocks */
        int fd = sf_waiter_get_fd(w);
        assert_true(fd >= 0);
        assert_int_equal(sf_waiter_get_fd(w), fd); /* one fd per waiter, created once */
        assert_int_equal(poll_readable(fd, 0), 0);

        assert_int_equal(sf_resolution_answer_take(res, outcome_new(7, "success")), 0);
        assert_int_equal(poll_readable(fd, 0), 1);
        assert_int_equal(peek_status(w, SF_ANSWER_OK), 7);
        sf_resolution_free(res);
        sf_waiter_free(w);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

/* SPEC §2.3: the outcome reaches waiters already waiting and those joining
 * before the slot is removed. */
static void test_answer_reaches_early_and_late_waiters(void **state) {
        fixture *fx = *state;
        const char *key = "web.service";
        sf_resolution *res;
        sf_waiter *leader = join_leader(fx->t, key, &res);
        waiter_thread early;

        waiter_thread_start(&early, fx->t, key, 2);
        sf_waiter *polled = join_follower(fx->t, key);
        int fd = sf_waiter_get_fd(polled);
        assert_true(fd >= 0);
        assert_int_equal(poll_readable(fd, 0), 0);
        assert_int_equal(sf_flight_get_waiters(sf_waiter_get_flight(leader)), 3);

        assert_int_equal(sf_resolution_answer_take(res, outcome_new(4242, "success")), 0);
        assert_int_equal(sf_flight_get_state(sf_resolution_get_flight(res)), SF_STATE_ANSWERED);

        /* Joins after the answer, before the resolution ends: same flight, answered at once. */
        sf_waiter *late = join_follower(fx->t, key);
        assert_ptr_equal(sf_waiter_get_flight(late), sf_waiter_get_flight(leader));
        assert_int_equal(peek_status(late, SF_ANSWER_OK), 4242);
        int late_fd = sf_waiter_get_fd(late); /* created after the answer: readable at once */
        assert_true(late_fd >= 0);
        assert_int_equal(poll_readable(late_fd, 0), 1);

        assert_fd_readable(fd, "answer_take did not signal a polling waiter's eventfd");
        assert_int_equal(peek_status(polled, SF_ANSWER_OK), 4242);
        assert_int_equal(waiter_thread_finish(&early, SF_ANSWER_OK), 4242);
        assert_int_equal(peek_status(leader, SF_ANSWER_OK), 4242);
        assert_int_equal(atomic_load(&n_copies), 4);

        /* The resolution's end retires the slot: the next join leads a new flight. */
        assert_int_equal(sf_table_get_waiters(fx->t, key), 3);
        sf_resolution_free(res);
        assert_int_equal(sf_table_get_waiters(fx->t, key), 0);
        sf_resolution *res2;
        sf_waiter *next = join_leader(fx->t, key, &res2);
        assert_ptr_not_equal(sf_waiter_get_flight(next), sf_waiter_get_flight(leader));
        sf_waiter_free(next);
        sf_resolution_free(res2);

        sf_waiter_free(leader);
        sf_waiter_free(polled);
        sf_waiter_free(late);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

/* The answer-before-anyone-waits case cannot hang. */
static void test_answer_before_anyone_waits(void **state) {
        fixture *fx = *state;
        const char *key = "fast.service";
        sf_resolution *res;
        sf_answer a;

        /* Answered before the waiter ever waits. */
        sf_waiter *w = join_leader(fx->t, key, &res);
        assert_int_equal(sf_resolution_answer_take(res, outcome_new(11, "success")), 0);
        usec_t start = now_usec(CLOCK_MONOTONIC);
        assert_int_equal(sf_waiter_wait(w, deadline_after_ms(WAIT_MS), &a), 0);
        assert_true(now_usec(CLOCK_MONOTONIC) - start < USEC_PER_SEC);
        assert_int_equal(a.status, SF_ANSWER_OK);
        assert_int_equal(((outcome *) a.outcome)->pid, 11);
        outcome_free(a.outcome, NULL);
        sf_resolution_free(res);
        sf_waiter_free(w);

        /* Answered with nobody waiting at all: past the point of no return the
         * last waiter leaving cancels nothing, and the answer still succeeds. */
        w = join_leader(fx->t, key, &res);
        assert_int_equal(sf_resolution_begin_publishing(res), 0);
        assert_int_equal(sf_resolution_begin_publishing(res), 0); /* idempotent */
        sf_waiter_free(w);
        assert_false(sf_resolution_is_cancelled(res));
        assert_int_equal(sf_flight_get_state(sf_resolution_get_flight(res)), SF_STATE_PUBLISHING);
        assert_int_equal(sf_table_get_waiters(fx->t, key), 0);
        assert_int_equal(sf_resolution_answer_take(res, outcome_new(12, "success")), 0);
        assert_int_equal(sf_resolution_begin_publishing(res), -EALREADY);
        outcome *extra = outcome_new(13, "success");
        assert_int_equal(sf_resolution_answer_take(res, extra), -EALREADY); /* not taken */
        outcome_free(extra, NULL);

        w = join_follower(fx->t, key);
        assert_int_equal(sf_waiter_wait(w, deadline_after_ms(WAIT_MS), &a), 0);
        assert_int_equal(((outcome *) a.outcome)->pid, 12);
        outcome_free(a.outcome, NULL);
        sf_resolution_free(res);
        sf_waiter_free(w);

        w = join_leader(fx->t, key, &res); /* the key is servable again */
        sf_waiter_free(w);
        sf_resolution_free(res);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

/* SPEC §2.3: every way out of the work without an answer answers abandoned,
 * logs an error naming the key, and leaves the key servable. */
static void test_abandoned(void **state) {
        fixture *fx = *state;
        const char *key = "db.service";
        sf_resolution *res;
        sf_waiter *leader = join_leader(fx->t, key, &res);
        waiter_thread blocked;

        waiter_thread_start(&blocked, fx->t, key, 2);
        sf_waiter *polled = join_follower(fx->t, key);
        int fd = sf_waiter_get_fd(polled);
        assert_true(fd >= 0);

        sf_resolution_free(res); /* an error path: no answer */
        assert_int_equal(waiter_thread_finish(&blocked, SF_ANSWER_ABANDONED), 0);
        assert_fd_readable(fd, "an abandoned flight did not signal its waiters");
        peek_status(polled, SF_ANSWER_ABANDONED);
        peek_status(leader, SF_ANSWER_ABANDONED);
        assert_int_equal(sf_flight_get_state(sf_waiter_get_flight(leader)), SF_STATE_ABANDONED);
        assert_int_equal(capture_count(LOG_ERR, "'db.service'"), 1);
        assert_int_equal(capture_errors_and_warnings(), 1);

        /* The slot is retired although waiters remain: the next join leads. */
        assert_int_equal(sf_table_get_waiters(fx->t, key), 0);
        sf_waiter *next = join_leader(fx->t, key, &res);
        assert_ptr_not_equal(sf_waiter_get_flight(next), sf_waiter_get_flight(leader));

        /* Abandoned past the point of no return too. */
        assert_int_equal(sf_resolution_begin_publishing(res), 0);
        sf_resolution_free(res);
        peek_status(next, SF_ANSWER_ABANDONED);
        assert_int_equal(capture_count(LOG_ERR, "'db.service'"), 2);
        assert_int_equal(capture_errors_and_warnings(), 2);
        assert_int_equal(atomic_load(&n_copies), 0);

        sf_waiter_free(next);
        sf_waiter_free(leader);
        sf_waiter_free(polled);
}

/* A cancelled flight answers cancelled, logs no error, and its late
 * retirement never removes its successor's slot. */
static void test_cancelled_keeps_successor(void **state) {
        fixture *fx = *state;
        const char *key = "cache.service";
        sf_resolution *res;
        sf_waiter *w = join_leader(fx->t, key, &res);
        int worker_fd = sf_resolution_get_fd(res);
        assert_true(worker_fd >= 0);
        assert_int_equal(poll_readable(worker_fd, 0), 0);

        sf_waiter_free(w); /* the only (client) waiter leaves: RUNNING → CANCELLED */
        assert_true(sf_resolution_is_cancelled(res));
        assert_int_equal(poll_readable(worker_fd, 0), 1);
        assert_int_equal(sf_flight_get_state(sf_resolution_get_flight(res)), SF_STATE_CANCELLED);
        assert_int_equal(sf_resolution_begin_publishing(res), -ECANCELED);
        outcome *o = outcome_new(1, "success");
        assert_int_equal(sf_resolution_answer_take(res, o), -ECANCELED); /* not taken */
        outcome_free(o, NULL);
        assert_int_equal(sf_table_cancel(fx->t, key), -ENOENT); /* the slot left with the last waiter */

        /* A successor flight for the same key, then the old work ends late. */
        sf_resolution *res2;
        sf_waiter *w2 = join_leader(fx->t, key, &res2);
        sf_resolution_free(res);
        assert_int_equal(sf_table_get_waiters(fx->t, key), 1);
        sf_waiter *w3 = join_follower(fx->t, key);
        assert_ptr_equal(sf_waiter_get_flight(w3), sf_resolution_get_flight(res2));
        assert_int_equal(sf_flight_get_state(sf_resolution_get_flight(res2)), SF_STATE_RUNNING);

        assert_int_equal(capture_errors_and_warnings(), 0);
        assert_true(capture_count(LOG_DEBUG, "'cache.service'") >= 1);

        assert_int_equal(sf_resolution_answer_take(res2, outcome_new(2, "success")), 0);
        assert_int_equal(peek_status(w3, SF_ANSWER_OK), 2);
        sf_resolution_free(res2);
        sf_waiter_free(w2);
        sf_waiter_free(w3);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

/* The last waiter leaving cancels and the worker observes it; a waiter leaving
 * while others stay changes nothing. */
typedef struct worker_thread {
        pthread_t thread;
        int fd, poll_r;
        sf_resolution *res;
        bool saw_cancelled;
} worker_thread;

static void *worker_thread_main(void *p) {
        worker_thread *wk = p;
        wk->poll_r = poll_readable(wk->fd, WAIT_MS);
        wk->saw_cancelled = sf_resolution_is_cancelled(wk->res);
        wk->res = sf_resolution_free(wk->res);
        return NULL;
}

static void test_last_waiter_leaving_cancels(void **state) {
        fixture *fx = *state;
        const char *key = "api.service";
        sf_resolution *res;
        sf_waiter *w0 = join_leader(fx->t, key, &res);
        sf_waiter *w1 = join_follower(fx->t, key);
        sf_waiter *w2 = join_follower(fx->t, key);
        worker_thread wk = { .res = res, .fd = sf_resolution_get_fd(res) };
        assert_true(wk.fd >= 0);

        sf_waiter_free(w1);
        sf_waiter_free(w2);
        assert_int_equal(sf_table_get_waiters(fx->t, key), 1);
        assert_int_equal(sf_flight_get_state(sf_resolution_get_flight(res)), SF_STATE_RUNNING);
        assert_false(sf_resolution_is_cancelled(res));
        assert_int_equal(poll_readable(wk.fd, 0), 0);
        sf_answer a;
        assert_int_equal(sf_waiter_peek(w0, &a), -EAGAIN);

        /* Hand the resolution to the worker, then the last waiter leaves. */
        assert_int_equal(pthread_create(&wk.thread, NULL, worker_thread_main, &wk), 0);
        sf_waiter_free(w0);
        assert_int_equal(pthread_join(wk.thread, NULL), 0);
        if (wk.poll_r != 1)
                fail_msg("the worker's fd was not readable %d ms after the last waiter left (poll %d): "
                         "the cancelling exchange did not signal the resolution's eventfd", WAIT_MS, wk.poll_r);
        assert_true(wk.saw_cancelled);
        assert_null(wk.res);

        assert_int_equal(sf_table_get_waiters(fx->t, key), 0);
        sf_waiter *next = join_leader(fx->t, key, &res);
        sf_waiter_free(next);
        sf_resolution_free(res);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

/* tend's `stop` while RUNNING: every waiter answered cancelled, no error. */
static void test_owner_cancel_running(void **state) {
        fixture *fx = *state;
        const char *key = "worker.service";
        sf_resolution *res;
        sf_waiter *leader = join_leader(fx->t, key, &res);
        waiter_thread blocked;

        waiter_thread_start(&blocked, fx->t, key, 2);
        sf_waiter *polled = join_follower(fx->t, key);
        int fd = sf_waiter_get_fd(polled);
        int worker_fd = sf_resolution_get_fd(res);
        assert_true(fd >= 0 && worker_fd >= 0);

        assert_int_equal(sf_table_cancel(fx->t, key), 0);
        assert_int_equal(waiter_thread_finish(&blocked, SF_ANSWER_CANCELLED), 0);
        assert_fd_readable(fd, "the owner's cancel did not signal a polling waiter");
        assert_fd_readable(worker_fd, "the owner's cancel did not signal the worker's resolution fd");
        peek_status(polled, SF_ANSWER_CANCELLED);
        peek_status(leader, SF_ANSWER_CANCELLED);
        assert_true(sf_resolution_is_cancelled(res));
        assert_int_equal(sf_table_cancel(fx->t, key), -ENOENT);
        assert_int_equal(sf_table_get_waiters(fx->t, key), 0);
        assert_int_equal(sf_resolution_begin_publishing(res), -ECANCELED);

        sf_resolution_free(res);
        sf_waiter_free(leader);
        sf_waiter_free(polled);
        assert_int_equal(capture_errors_and_warnings(), 0);
        assert_true(capture_count(LOG_DEBUG, "'worker.service'") >= 1);
}

/* tend's `stop` while PUBLISHING is refused; the publication reaches everyone. */
static void test_owner_cancel_publishing(void **state) {
        fixture *fx = *state;
        const char *key = "worker.service";
        sf_resolution *res;
        sf_waiter *leader = join_leader(fx->t, key, &res);
        waiter_thread blocked;
        sf_answer a;

        waiter_thread_start(&blocked, fx->t, key, 2);
        assert_int_equal(sf_resolution_begin_publishing(res), 0);
        assert_int_equal(sf_table_cancel(fx->t, key), -EBUSY);
        assert_int_equal(sf_flight_get_state(sf_resolution_get_flight(res)), SF_STATE_PUBLISHING);
        assert_false(sf_resolution_is_cancelled(res));
        assert_int_equal(sf_waiter_peek(leader, &a), -EAGAIN);
        assert_int_equal(sf_table_get_waiters(fx->t, key), 2);

        assert_int_equal(sf_resolution_answer_take(res, outcome_new(99, "success")), 0);
        assert_int_equal(sf_table_cancel(fx->t, key), -EALREADY);
        assert_int_equal(waiter_thread_finish(&blocked, SF_ANSWER_OK), 99);
        assert_int_equal(peek_status(leader, SF_ANSWER_OK), 99);
        sf_resolution_free(res);
        assert_int_equal(sf_table_cancel(fx->t, key), -ENOENT);
        sf_waiter_free(leader);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

/* Every waiter gets its own copy: copy once per waiter, free for each. */
static void test_copy_per_waiter(void **state) {
        fixture *fx = *state;
        const char *key = "copy.service";
        enum { N = 5 };
        sf_waiter *w[N];
        sf_answer a[N];
        sf_resolution *res;

        w[0] = join_leader(fx->t, key, &res);
        for (int i = 1; i < N; i++)
                w[i] = join_follower(fx->t, key);
        outcome *stored = outcome_new(321, "exit-code");
        assert_int_equal(sf_resolution_answer_take(res, stored), 0);

        atomic_store(&copy_fails, 1); /* a failing copy is reported, and retried */
        assert_int_equal(sf_waiter_peek(w[0], &a[0]), -ENOMEM);
        for (int i = 0; i < N; i++) {
                assert_int_equal(sf_waiter_peek(w[i], &a[i]), 0);
                assert_int_equal(a[i].status, SF_ANSWER_OK);
                assert_ptr_not_equal(a[i].outcome, stored);
                assert_int_equal(((outcome *) a[i].outcome)->pid, 321);
                assert_string_equal(((outcome *) a[i].outcome)->result, "exit-code");
                for (int j = 0; j < i; j++)
                        assert_ptr_not_equal(a[i].outcome, a[j].outcome);
        }
        assert_int_equal(atomic_load(&n_copies), N);
        assert_int_equal(atomic_load(&n_frees), 0);
        for (int i = 0; i < N; i++)
                outcome_free(a[i].outcome, NULL);
        assert_int_equal(atomic_load(&n_frees), N);

        /* The stored outcome lives until the flight's last holder is gone. */
        sf_resolution_free(res);
        for (int i = 0; i < N; i++) {
                assert_int_equal(atomic_load(&n_frees), N);
                sf_waiter_free(w[i]);
        }
        assert_int_equal(atomic_load(&n_frees), N + 1);
        assert_int_equal(atomic_load(&n_copies), N);
}

/* ------------------------------------------------------------------------ */
/* Races                                                                     */
/* ------------------------------------------------------------------------ */

/*
 * Two threads released together at every iteration: A cancels (the owner's
 * cancel, or the last waiter leaving), B begins publishing. Main prepares the
 * flight before, and checks and cleans up after, each iteration; the barriers
 * order every access to the shared fields.
 */
typedef struct race {
        pthread_barrier_t start, done;
        atomic_int go;
        int iterations;
        bool by_leave;
        sf_table *t;
        const char *key;
        sf_waiter *w;
        sf_resolution *res;
        int cancel_r, publish_r;
} race;

static void race_spin(race *rc, int i) {
        /* Both threads leave the barrier at different times; meeting on one
         * store makes them act within nanoseconds of each other. */
        while (atomic_load_explicit(&rc->go, memory_order_acquire) != i)
                ;
}

static void *race_cancel_main(void *p) {
        race *rc = p;
        for (int i = 1; i <= rc->iterations; i++) {
                pthread_barrier_wait(&rc->start);
                race_spin(rc, i);
                if (rc->by_leave)
                        rc->w = sf_waiter_free(rc->w);
                else
                        rc->cancel_r = sf_table_cancel(rc->t, rc->key);
                pthread_barrier_wait(&rc->done);
        }
        return NULL;
}

static void *race_publish_main(void *p) {
        race *rc = p;
        for (int i = 1; i <= rc->iterations; i++) {
                pthread_barrier_wait(&rc->start);
                race_spin(rc, i);
                rc->publish_r = sf_resolution_begin_publishing(rc->res);
                pthread_barrier_wait(&rc->done);
        }
        return NULL;
}

/* Checks that exactly one transition won; returns true if the cancel did. */
static bool race_check(race *rc) {
        bool cancelled = sf_resolution_is_cancelled(rc->res);
        sf_state s = sf_flight_get_state(sf_resolution_get_flight(rc->res));

        if (cancelled) {
                assert_int_equal(s, SF_STATE_CANCELLED);
                assert_int_equal(rc->publish_r, -ECANCELED);
                if (!rc->by_leave)
                        assert_int_equal(rc->cancel_r, 0);
        } else {
                assert_int_equal(s, SF_STATE_PUBLISHING);
                assert_int_equal(rc->publish_r, 0);
                if (!rc->by_leave)
                        assert_int_equal(rc->cancel_r, -EBUSY);
        }
        return cancelled;
}

static void race_cleanup(race *rc, bool cancelled) {
        if (!cancelled)
                assert_int_equal(sf_resolution_answer_take(rc->res, outcome_new(5, "success")), 0);
        if (rc->w)
                peek_status(rc->w, cancelled ? SF_ANSWER_CANCELLED : SF_ANSWER_OK);
        rc->res = sf_resolution_free(rc->res);
        rc->w = sf_waiter_free(rc->w);
        assert_int_equal(sf_table_get_waiters(rc->t, rc->key), 0);
}

static void run_race(sf_table *t, bool by_leave) {
        race rc = { .t = t, .key = "race.service", .iterations = RACE_ITERATIONS, .by_leave = by_leave };
        pthread_t a, b;
        int won_cancel = 0, won_publish = 0;

        assert_int_equal(pthread_barrier_init(&rc.start, NULL, 3), 0);
        assert_int_equal(pthread_barrier_init(&rc.done, NULL, 3), 0);
        assert_int_equal(pthread_create(&a, NULL, race_cancel_main, &rc), 0);
        assert_int_equal(pthread_create(&b, NULL, race_publish_main, &rc), 0);

        for (int i = 1; i <= rc.iterations; i++) {
                rc.w = join_leader(t, rc.key, &rc.res);
                rc.cancel_r = rc.publish_r = 1;
                pthread_barrier_wait(&rc.start);
                atomic_store_explicit(&rc.go, i, memory_order_release);
                pthread_barrier_wait(&rc.done);
                bool cancelled = race_check(&rc);
                if (cancelled)
                        won_cancel++;
                else
                        won_publish++;
                race_cleanup(&rc, cancelled);
        }
        assert_int_equal(pthread_join(a, NULL), 0);
        assert_int_equal(pthread_join(b, NULL), 0);
        pthread_barrier_destroy(&rc.start);
        pthread_barrier_destroy(&rc.done);

        print_message("%s vs begin_publishing: %d iterations, cancel won %d, publish won %d\n",
                      by_leave ? "last waiter leaving" : "owner cancel", rc.iterations, won_cancel, won_publish);
        assert_int_equal(won_cancel + won_publish, rc.iterations);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

static void test_race_owner_cancel_vs_publish(void **state) {
        fixture *fx = *state;
        run_race(fx->t, false);
}

static void test_race_last_leave_vs_publish(void **state) {
        fixture *fx = *state;
        run_race(fx->t, true);
}

/* ------------------------------------------------------------------------ */
/* Waiter count under concurrent join/leave                                  */
/* ------------------------------------------------------------------------ */

#define COUNT_THREADS 8
#define COUNT_ROUNDS 200
#define STORM_ITERATIONS 2000

typedef struct count_test {
        sf_table *t;
        const char *key;
        pthread_barrier_t barrier;
        atomic_int bad_joins;   /* a join that led although the anchor held the flight */
        atomic_int violations;  /* a held waiter whose flight was cancelled */
        atomic_int n_running;
} count_test;

/* Rounds: every thread joins, main counts, every thread leaves, main counts;
 * the barriers keep each count exact (nobody joins or leaves during it). */
static void *count_rounds_main(void *p) {
        count_test *ct = p;
        for (int r = 0; r < COUNT_ROUNDS; r++) {
                sf_waiter *w = NULL;
                sf_resolution *res = NULL;
                if (sf_table_join(ct->t, ct->key, &w, &res) != 0) {
                        atomic_fetch_add(&ct->bad_joins, 1);
                        res = sf_resolution_free(res);
                }
                pthread_barrier_wait(&ct->barrier); /* all joined */
                pthread_barrier_wait(&ct->barrier); /* main counted */
                sf_waiter_free(w);
                pthread_barrier_wait(&ct->barrier); /* all left */
                pthread_barrier_wait(&ct->barrier); /* main counted */
        }
        return NULL;
}

static void test_waiter_count_rounds(void **state) {
        fixture *fx = *state;
        count_test ct = { .t = fx->t, .key = "count.service" };
        pthread_t th[COUNT_THREADS];
        sf_resolution *res;
        sf_waiter *anchor = join_leader(fx->t, ct.key, &res);

        assert_int_equal(pthread_barrier_init(&ct.barrier, NULL, COUNT_THREADS + 1), 0);
        for (int i = 0; i < COUNT_THREADS; i++)
                assert_int_equal(pthread_create(&th[i], NULL, count_rounds_main, &ct), 0);
        for (int r = 0; r < COUNT_ROUNDS; r++) {
                pthread_barrier_wait(&ct.barrier);
                assert_int_equal(sf_table_get_waiters(fx->t, ct.key), COUNT_THREADS + 1);
                assert_int_equal(sf_flight_get_waiters(sf_waiter_get_flight(anchor)), COUNT_THREADS + 1);
                pthread_barrier_wait(&ct.barrier);
                pthread_barrier_wait(&ct.barrier);
                assert_int_equal(sf_table_get_waiters(fx->t, ct.key), 1);
                pthread_barrier_wait(&ct.barrier);
        }
        for (int i = 0; i < COUNT_THREADS; i++)
                assert_int_equal(pthread_join(th[i], NULL), 0);
        pthread_barrier_destroy(&ct.barrier);
        assert_int_equal(atomic_load(&ct.bad_joins), 0);
        assert_int_equal(sf_flight_get_state(sf_resolution_get_flight(res)), SF_STATE_RUNNING);

        sf_waiter_free(anchor);
        assert_true(sf_resolution_is_cancelled(res));
        sf_resolution_free(res);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

/* Free-running join/leave while an anchor holds the flight: never cancelled,
 * the count stays within [1, threads + 1] and ends at exactly 1. */
static void *count_storm_anchored_main(void *p) {
        count_test *ct = p;
        for (int i = 0; i < STORM_ITERATIONS; i++) {
                sf_waiter *w = NULL;
                sf_resolution *res = NULL;
                if (sf_table_join(ct->t, ct->key, &w, &res) != 0) {
                        atomic_fetch_add(&ct->bad_joins, 1);
                        res = sf_resolution_free(res);
                }
                if (sf_flight_get_state(sf_waiter_get_flight(w)) != SF_STATE_RUNNING)
                        atomic_fetch_add(&ct->violations, 1);
                sched_yield(); /* hold the share a moment, so shares overlap */
                sf_waiter_free(w);
        }
        atomic_fetch_sub(&ct->n_running, 1);
        return NULL;
}

static void test_waiter_count_storm_anchored(void **state) {
        fixture *fx = *state;
        count_test ct = { .t = fx->t, .key = "storm.service" };
        pthread_t th[COUNT_THREADS];
        sf_resolution *res;
        sf_waiter *anchor = join_leader(fx->t, ct.key, &res);
        int lo = COUNT_THREADS + 1, hi = 0;

        atomic_store(&ct.n_running, COUNT_THREADS);
        for (int i = 0; i < COUNT_THREADS; i++)
                assert_int_equal(pthread_create(&th[i], NULL, count_storm_anchored_main, &ct), 0);
        /* Sample while they run; pthread_join below bounds this loop. */
        while (atomic_load(&ct.n_running) > 0) {
                int n = sf_table_get_waiters(fx->t, ct.key);
                lo = n < lo ? n : lo;
                hi = n > hi ? n : hi;
        }
        for (int i = 0; i < COUNT_THREADS; i++)
                assert_int_equal(pthread_join(th[i], NULL), 0);
        print_message("anchored storm: waiters observed in [%d, %d]\n", lo, hi);
        assert_true(lo >= 1);
        assert_true(hi <= COUNT_THREADS + 1);
        assert_int_equal(atomic_load(&ct.bad_joins), 0);
        assert_int_equal(atomic_load(&ct.violations), 0);
        assert_int_equal(sf_table_get_waiters(fx->t, ct.key), 1);

        sf_waiter_free(anchor);
        sf_resolution_free(res);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

/*
 * Free-running with no anchor: flights come and go. A leader leaves its share,
 * then answers unless that cancelled the flight. Rule checked: a waiter's
 * flight is never CANCELLED while the waiter is held — nobody joins a slot
 * between its last waiter leaving and its removal.
 */
static void *count_storm_main(void *p) {
        count_test *ct = p;
        for (int i = 0; i < STORM_ITERATIONS; i++) {
                sf_waiter *w = NULL;
                sf_resolution *res = NULL;
                int r = sf_table_join(ct->t, ct->key, &w, &res);
                if (r < 0) {
                        atomic_fetch_add(&ct->bad_joins, 1);
                        continue;
                }
                sf_state s = sf_flight_get_state(sf_waiter_get_flight(w));
                if (s == SF_STATE_CANCELLED || s == SF_STATE_ABANDONED || (r == 1 && s != SF_STATE_RUNNING))
                        atomic_fetch_add(&ct->violations, 1);
                sf_waiter_free(w);
                if (res) {
                        outcome *o = outcome_new(i, "success");
                        if (sf_resolution_answer_take(res, o) < 0)
                                outcome_free(o, NULL);
                        sf_resolution_free(res);
                }
        }
        return NULL;
}

static void test_join_leave_storm(void **state) {
        fixture *fx = *state;
        count_test ct = { .t = fx->t, .key = "storm.service" };
        pthread_t th[COUNT_THREADS];

        for (int i = 0; i < COUNT_THREADS; i++)
                assert_int_equal(pthread_create(&th[i], NULL, count_storm_main, &ct), 0);
        for (int i = 0; i < COUNT_THREADS; i++)
                assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(atomic_load(&ct.bad_joins), 0);
        assert_int_equal(atomic_load(&ct.violations), 0);
        assert_int_equal(sf_table_get_waiters(fx->t, ct.key), 0);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

/* ------------------------------------------------------------------------ */
/* Lifetime and scale                                                        */
/* ------------------------------------------------------------------------ */

/* The owner may drop the table while flights live; the last holder frees it. */
static void test_table_outlives_owner(void **state) {
        fixture *fx = *state;
        sf_resolution *res;
        sf_waiter *w = join_leader(fx->t, "late.service", &res);
        sf_waiter *w2 = join_follower(fx->t, "late.service");
        assert_true(sf_waiter_get_fd(w2) >= 0);

        fx->t = sf_table_unref(fx->t);
        assert_int_equal(sf_resolution_answer_take(res, outcome_new(3, "success")), 0);
        sf_resolution_free(res);
        assert_int_equal(peek_status(w, SF_ANSWER_OK), 3);
        sf_waiter_free(w);
        assert_int_equal(peek_status(w2, SF_ANSWER_OK), 3);
        sf_waiter_free(w2); /* frees the flight, then the table (ASan checks) */
        assert_int_equal(atomic_load(&n_frees), 3);
}

static void test_many_keys(void **state) {
        fixture *fx = *state;
        enum { N = 1000 };
        sf_waiter **w = calloc(2 * N, sizeof *w);
        sf_resolution **res = calloc(N, sizeof *res);
        char key[32];
        assert_non_null(w);
        assert_non_null(res);

        for (int i = 0; i < N; i++) {
                snprintf(key, sizeof key, "unit-%d.service", i);
                w[i] = join_leader(fx->t, key, &res[i]);
        }
        for (int i = 0; i < N; i++) {
                snprintf(key, sizeof key, "unit-%d.service", i);
                w[N + i] = join_follower(fx->t, key);
                assert_ptr_equal(sf_waiter_get_flight(w[N + i]), sf_resolution_get_flight(res[i]));
                assert_int_equal(sf_table_get_waiters(fx->t, key), 2);
        }
        for (int i = 0; i < N; i++) {
                snprintf(key, sizeof key, "unit-%d.service", i);
                assert_int_equal(sf_table_cancel(fx->t, key), 0);
                peek_status(w[i], SF_ANSWER_CANCELLED);
                peek_status(w[N + i], SF_ANSWER_CANCELLED);
        }
        for (int i = 0; i < N; i++) {
                sf_resolution_free(res[i]);
                sf_waiter_free(w[i]);
                sf_waiter_free(w[N + i]);
        }
        free(w);
        free(res);
        assert_int_equal(capture_errors_and_warnings(), 0);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        const struct CMUnitTest tests[] = {
                T(test_invalid_arguments),
                T(test_wait_timeout),
                T(test_answer_reaches_early_and_late_waiters),
                T(test_answer_before_anyone_waits),
                T(test_abandoned),
                T(test_cancelled_keeps_successor),
                T(test_last_waiter_leaving_cancels),
                T(test_owner_cancel_running),
                T(test_owner_cancel_publishing),
                T(test_copy_per_waiter),
                T(test_race_owner_cancel_vs_publish),
                T(test_race_last_leave_vs_publish),
                T(test_waiter_count_rounds),
                T(test_waiter_count_storm_anchored),
                T(test_join_leave_storm),
                T(test_table_outlives_owner),
                T(test_many_keys),
        };
#undef T
        return cmocka_run_group_tests_name("singleflight", tests, NULL, NULL);
}
