/* SPDX-License-Identifier: MIT */
/*
 * Watches of the etcd backend (docs/store.md §4.4): a range read gives the
 * snapshot and its revision R (the marker), then a gateway watch stream from
 * R + 1 (with prev_kv) delivers every later change of the range, per key in
 * revision order, no gaps (etcd's watch guarantees). The stream is read in
 * the client's I/O thread, which pushes records into the watch's bounded
 * queue; the consumer reads them as from the in-memory backend (eventfd,
 * store_watch_next/wait).
 *
 * Cause of a DELETE of an ephemeral key: an explicit delete writes the key's
 * tombstone (the key + "\0") in the same transaction, before the delete, so
 * the same stream delivers the tombstone's PUT with the same revision just
 * before the DELETE: then `deleted`. A lease's expiry deletes the key in the
 * lessor's own transaction, which writes no tombstone: `expired`.
 *
 * Anything doubtful ends the watch with -ENOBUFS (re-watch): the stream
 * ending or failing (a member lost: the re-watch goes to the next one), a
 * cancel by etcd (compaction), a full queue. One exception: a stream whose
 * member the client judged slow (-ESTALE: an idle stream on a hung member
 * would wait for ever) is made again on another member from the revision
 * after the last one delivered (etcd sends a revision's events in one
 * message): nothing lost, nothing repeated. Closing the store ends each
 * watch with -EPIPE after its queue drains.
 *
 * Locks: s->lock (the store's watch list) before w->lock (queue, end, fd).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "store-etcd-internal.h"

struct etcd_watch {
        struct store_watch base;
        struct store_etcd *s;
        enum store_keyspace ks;
        struct etcd_watch *prev, *next; /* s->watches, under s->lock */

        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct store_event **ring;
        size_t cap, head, n, max;
        int end;         /* 0 while live, -ENOBUFS or -EPIPE */
        bool closing;    /* the store is closing: the stream's end means -EPIPE */
        struct etcd_req *stream; /* until its on_done ran (stream_done) */
        bool stream_done;
        bool freeing;    /* etcd_watch_free() runs: no stream is made again */
        char *key, *range_end; /* the range, for a stream made again */
        size_t range_end_n;
        int64_t last_rev; /* the last revision delivered (the snapshot's at first) */
        int fd;
        bool fd_readable;

        /* The I/O thread's: the last tombstone seen. */
        char *tomb_key;
        int64_t tomb_rev;
};

static struct etcd_watch *to_watch(const struct store_watch *w) {
        return container_of(w, struct etcd_watch, base);
}

/* ---- the queue (under w->lock) ---- */

static void fd_update(struct etcd_watch *w) {
        bool want = w->n > 0 || w->end != 0;
        uint64_t v = 1;

        if (want && !w->fd_readable)
                (void) !write(w->fd, &v, sizeof(v));
        else if (!want && w->fd_readable)
                (void) !read(w->fd, &v, sizeof(v));
        w->fd_readable = want;
        if (want)
                pthread_cond_broadcast(&w->cond);
}

static void queue_clear(struct etcd_watch *w) {
        while (w->n > 0) {
                store_event_unref(w->ring[w->head]);
                w->head = (w->head + 1) % w->cap;
                w->n--;
        }
}

static void end_watch(struct etcd_watch *w, int error) {
        if (w->end != 0)
                return;
        w->end = error;
        if (error == -ENOBUFS)
                queue_clear(w);
        fd_update(w);
}

/* Takes ev (its reference). A full queue or ENOMEM ends the watch: -ENOBUFS. */
static int push(struct etcd_watch *w, struct store_event *ev) {
        if (w->end != 0) {
                store_event_unref(ev);
                return w->end;
        }
        if (w->n == w->cap) {
                size_t cap = w->cap ? w->cap * 2 : 64;
                struct store_event **ring = w->n < w->max ? calloc(cap, sizeof(*ring)) : NULL;
                if (!ring) {
                        store_event_unref(ev);
                        end_watch(w, -ENOBUFS);
                        return -ENOBUFS;
                }
                for (size_t i = 0; i < w->n; i++)
                        ring[i] = w->ring[(w->head + i) % w->cap];
                free(w->ring);
                w->ring = ring;
                w->cap = cap;
                w->head = 0;
        }
        if (w->n >= w->max) {
                store_event_unref(ev);
                end_watch(w, -ENOBUFS);
                return -ENOBUFS;
        }
        w->ring[(w->head + w->n) % w->cap] = ev;
        w->n++;
        fd_update(w);
        return 0;
}

/* ---- the stream (I/O thread) ---- */

/* One gateway event: a record pushed, a tombstone noted, or nothing. */
static int on_event(struct etcd_watch *w, struct json_object *jev) {
        struct json_object *kv = NULL, *prev = NULL, *t = NULL, *k = NULL;
        _cleanup_free_ char *raw = NULL;
        size_t n, skip = strlen(w->s->prefix) + 2;
        int q;

        if (!json_object_object_get_ex(jev, "kv", &kv) || !json_object_object_get_ex(kv, "key", &k))
                return -EIO;
        bool del = json_object_object_get_ex(jev, "type", &t) &&
                   streq(json_object_get_string(t), "DELETE");
        if (etcd_unbase64(json_object_get_string(k), &raw, &n) < 0 || n <= skip)
                return -EIO;
        int64_t rev = etcd_json_int(kv, "mod_revision");
        if (strlen(raw) != n) { /* a tombstone: remember a PUT, ignore its own expiry */
                if (!del) {
                        free(w->tomb_key);
                        w->tomb_key = strdup(raw + skip);
                        w->tomb_rev = rev;
                }
                return 0;
        }
        if (!del) {
                struct store_event *ev = etcd_kv_record(w->s, w->ks, kv, &q);
                return ev ? push(w, ev) : q < 0 ? q : 0;
        }
        struct store_event *ev = store_event_new(STORE_EVENT_DELETE, w->ks, raw + skip, NULL, 0);
        if (!ev)
                return -ENOMEM;
        ev->revision = (uint64_t) rev;
        if (json_object_object_get_ex(jev, "prev_kv", &prev))
                ev->prev_revision = (uint64_t) etcd_json_int(prev, "mod_revision");
        bool tomb = w->tomb_key && w->tomb_rev == rev && streq(w->tomb_key, raw + skip);
        ev->cause = w->ks == STORE_DURABLE || tomb ? STORE_CAUSE_DELETED : STORE_CAUSE_EXPIRED;
        return push(w, ev);
}

static int on_line(struct etcd_req *r, struct json_object *msg, void *userdata) {
        struct etcd_watch *w = userdata;
        struct json_object *res, *evs, *v;
        int q = 0;

        if (!json_object_object_get_ex(msg, "result", &res))
                return -ENOBUFS; /* {"error": …}: the stream failed */
        if (json_object_object_get_ex(res, "canceled", &v) && json_object_get_boolean(v))
                return -ENOBUFS; /* compacted past our revision, or a member's own reason */
        if (!json_object_object_get_ex(res, "events", &evs))
                return 0;
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; q >= 0 && i < json_object_array_length(evs); i++) {
                struct json_object *jev = json_object_array_get_idx(evs, i), *kv;
                q = on_event(w, jev);
                int64_t rev = q >= 0 && json_object_object_get_ex(jev, "kv", &kv)
                                      ? etcd_json_int(kv, "mod_revision") : 0;
                if (rev > w->last_rev)
                        w->last_rev = rev;
        }
        pthread_mutex_unlock(&w->lock);
        return q < 0 ? -ENOBUFS : 0;
}

static int submit_stream(struct etcd_watch *w, int64_t rev);

static void on_stream_done(struct etcd_req *r, int error, struct json_object *reply,
                           void *userdata) {
        struct etcd_watch *w = userdata;

        pthread_mutex_lock(&w->lock);
        w->stream = NULL;
        /* Its member was judged slow: the same stream from another member. */
        if (error == -ESTALE && !w->closing && !w->freeing && w->end == 0 &&
            submit_stream(w, w->last_rev) >= 0) {
                pthread_mutex_unlock(&w->lock);
                return;
        }
        w->stream_done = true;
        end_watch(w, w->closing ? -EPIPE : -ENOBUFS);
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

/* ---- the front ---- */

/* The snapshot: every live key of the range as PUT, then the marker at the range's revision. */
static int snapshot(struct etcd_watch *w, const char *key, const char *end, size_t end_n,
                    int64_t *ret_rev) {
        struct json_object *b = json_object_new_object(), *reply = NULL, *kvs;
        int q;

        etcd_add_b64(b, "key", key, strlen(key));
        etcd_add_b64(b, "range_end", end, end_n);
        q = etcd_call(w->s->client, "/v3/kv/range", b, &reply);
        if (q < 0)
                return q;
        size_t n = json_object_object_get_ex(reply, "kvs", &kvs) ? json_object_array_length(kvs) : 0;
        w->max = n + 1 + w->s->queue_capacity;
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; q >= 0 && i < n; i++) {
                struct store_event *ev = etcd_kv_record(w->s, w->ks, json_object_array_get_idx(kvs, i), &q);
                if (ev)
                        q = push(w, ev);
        }
        *ret_rev = etcd_header_revision(reply);
        struct store_event *marker = q >= 0 ? store_event_new(STORE_EVENT_SNAPSHOT_DONE, w->ks, NULL, NULL, 0) : NULL;
        if (marker) {
                marker->revision = (uint64_t) *ret_rev;
                q = push(w, marker);
        } else if (q >= 0)
                q = -ENOMEM;
        pthread_mutex_unlock(&w->lock);
        json_object_put(reply);
        return q;
}

/* The stream of w's range from rev + 1 (w->lock held; from the I/O thread
 * too: its on_done cannot run before this returns). */
static int submit_stream(struct etcd_watch *w, int64_t rev) {
        struct json_object *b = json_object_new_object(), *c = json_object_new_object();

        etcd_add_b64(c, "key", w->key, strlen(w->key));
        etcd_add_b64(c, "range_end", w->range_end, w->range_end_n);
        etcd_add_int(c, "start_revision", rev + 1);
        json_object_object_add(c, "prev_kv", json_object_new_boolean(true));
        json_object_object_add(b, "create_request", c);
        int q = etcd_submit(w->s->client, "/v3/watch", b, true, on_line, on_stream_done, w, 0,
                            &w->stream);
        w->stream_done = q < 0;
        return q;
}

static int start_stream(struct etcd_watch *w, int64_t rev) {
        pthread_mutex_lock(&w->lock);
        w->last_rev = rev;
        int q = submit_stream(w, rev);
        pthread_mutex_unlock(&w->lock);
        return q;
}

int etcd_watch(struct store *base, enum store_keyspace ks, const char *prefix,
               struct store_watch **ret) {
        struct store_etcd *s = container_of(base, struct store_etcd, base);
        struct etcd_watch *w = calloc(1, sizeof(*w));
        _cleanup_free_ char *key = NULL, *end = NULL;
        size_t end_n = 0;
        int64_t rev = 0;
        int q;

        if (!w)
                return -ENOMEM;
        *w = (struct etcd_watch) { .base.ops = base->ops, .s = s, .ks = ks, .stream_done = true };
        pthread_mutex_init(&w->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* deadline_of() is monotonic */
        pthread_cond_init(&w->cond, &ca);
        pthread_condattr_destroy(&ca);
        w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        key = etcd_key(s, ks, prefix);
        end = key ? etcd_range_end(key, &end_n) : NULL;
        q = w->fd < 0 ? negative_errno() : !end ? -ENOMEM : snapshot(w, key, end, end_n, &rev);
        if (q >= 0) {
                pthread_mutex_lock(&s->lock);
                w->next = s->watches;
                if (w->next)
                        w->next->prev = w;
                s->watches = w;
                atomic_fetch_add(&s->n_internal, 1);
                pthread_mutex_unlock(&s->lock);
                w->key = key;
                w->range_end = end;
                key = end = NULL;
                w->range_end_n = end_n;
                if (start_stream(w, rev) < 0) {
                        pthread_mutex_lock(&w->lock);
                        end_watch(w, -ENOBUFS);
                        pthread_mutex_unlock(&w->lock);
                }
                *ret = &w->base;
                return 0;
        }
        pthread_mutex_lock(&w->lock);
        queue_clear(w);
        pthread_mutex_unlock(&w->lock);
        free(w->ring);
        safe_close(w->fd);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return q;
}

int etcd_watch_fd(const struct store_watch *base) {
        return to_watch(base)->fd;
}

static void deadline_of(usec_t timeout, struct timespec *ret) {
        clock_gettime(CLOCK_MONOTONIC, ret);
        usec_t t = (usec_t) ret->tv_sec * USEC_PER_SEC + (usec_t) ret->tv_nsec / 1000 + timeout;
        *ret = usec_to_timespec(t);
}

int etcd_watch_next(struct store_watch *base, usec_t timeout_usec, struct store_event **ret) {
        struct etcd_watch *w = to_watch(base);
        struct timespec until;
        int q = 0;

        if (timeout_usec != 0 && timeout_usec != USEC_INFINITY)
                deadline_of(timeout_usec, &until);
        pthread_mutex_lock(&w->lock);
        while (w->n == 0 && w->end == 0 && q == 0 && timeout_usec != 0) {
                if (timeout_usec == USEC_INFINITY)
                        pthread_cond_wait(&w->cond, &w->lock);
                else
                        q = -pthread_cond_timedwait(&w->cond, &w->lock, &until);
        }
        if (w->n > 0) {
                *ret = w->ring[w->head];
                w->head = (w->head + 1) % w->cap;
                w->n--;
                fd_update(w);
                q = 0;
        } else
                q = w->end ?: timeout_usec == 0 ? -EAGAIN : -ETIMEDOUT;
        pthread_mutex_unlock(&w->lock);
        return q;
}

void etcd_watch_free(struct store_watch *base) {
        struct etcd_watch *w = to_watch(base);
        struct store_etcd *s = w->s;

        /* Detach; while the store is open its client lives, so the cancel is safe here. */
        pthread_mutex_lock(&s->lock);
        if (w->prev)
                w->prev->next = w->next;
        else if (s->watches == w)
                s->watches = w->next;
        if (w->next)
                w->next->prev = w->prev;
        pthread_mutex_lock(&w->lock);
        w->freeing = true;
        if (w->stream)
                etcd_req_cancel(s->client, w->stream);
        pthread_mutex_unlock(&s->lock);
        while (!w->stream_done)
                pthread_cond_wait(&w->cond, &w->lock);
        queue_clear(w);
        pthread_mutex_unlock(&w->lock);
        free(w->ring);
        free(w->tomb_key);
        free(w->key);
        free(w->range_end);
        safe_close(w->fd);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        etcd_store_unref_internal(s);
}

void etcd_watches_close(struct store_etcd *s) {
        pthread_mutex_lock(&s->lock);
        for (struct etcd_watch *w = s->watches; w; w = w->next) {
                pthread_mutex_lock(&w->lock);
                w->closing = true;
                if (w->stream)
                        etcd_req_cancel(s->client, w->stream);
                else
                        end_watch(w, -EPIPE);
                pthread_mutex_unlock(&w->lock);
        }
        pthread_mutex_unlock(&s->lock);
}
