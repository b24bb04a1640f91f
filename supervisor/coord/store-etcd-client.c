/* SPDX-License-Identifier: MIT */
/*
 * The etcd backend's HTTP client (docs/store.md §4): etcd's JSON gateway
 * over libcurl's multi interface, driven by one I/O thread per store.
 *
 * Any thread queues a request (etcd_submit) and wakes the thread
 * (curl_multi_wakeup); the thread adds it to the multi handle, runs
 * curl_multi_perform and waits in curl_multi_poll (no timer of its own: an
 * idle client sleeps until a socket or a submit wakes it). A request that
 * fails to connect (or gets gRPC UNAVAILABLE from a member that lost its
 * quorum) is retried on the next member of the list; the member that
 * answered stays the current one for the next requests. An idempotent
 * request (req_hedgeable) with no answer after its hedge delay is raced on
 * another member, each try with an easy handle of its own; the first answer
 * wins (docs/store.md §4.6: a hung member must not starve a keep-alive).
 * TLS (CA, client certificate) is curl's; with a user, the token from
 * /v3/auth/authenticate goes in every request's Authorization header and is
 * renewed once when etcd answers "invalid auth token".
 *
 * Locking: c->lock guards the submit queue and `closing` (a cancel flag is atomic);
 * everything else (the multi handle, the easy handles, the buffers) belongs
 * to the I/O thread alone.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curl-api.h"
#include "log.h"
#include "store-etcd-internal.h"

#define STREAM_LINE_MAX (4u * 1024u * 1024u) /* a watch message; etcd's own limit is 1.5 MiB */

/* A request's tries in flight at once (hedged requests: docs/store.md §4.6). */
#define TRIES_MAX 4
/* The members a client may list (a request's tried members are a bitmask). */
#define MEMBERS_MAX 64
/* A hedge starts after the request's span (deadline − start) / HEDGE_DIV, at
 * least HEDGE_MIN and at most the request timeout / 4. */
#define HEDGE_DIV 8
#define HEDGE_MIN_USEC (100 * USEC_PER_MSEC)
/* A member whose try timed out, or lost to a hedge started after it, is
 * tried last for this long. */
#define SLOW_USEC (30 * USEC_PER_SEC)

/* One try of a request on one member: its own easy handle and answer. */
struct etcd_try {
        struct etcd_req *r;
        CURL *easy;
        struct curl_slist *headers;
        char *buf;
        size_t len, cap;
        size_t member;   /* the member it was sent to */
        usec_t started;  /* CLOCK_MONOTONIC */
        bool in_multi;   /* in flight */
        char error[CURL_ERROR_SIZE]; /* curl's error buffer: the detail of a failure */
};

struct etcd_req {
        struct etcd_client *c;
        char *path;
        char *body;
        bool stream;
        bool hedged;        /* idempotent: a second member may be raced (req_hedgeable) */
        atomic_bool cancel; /* set by any thread */
        etcd_line_fn on_line;
        etcd_done_fn on_done;
        void *userdata;
        struct etcd_try tries[TRIES_MAX]; /* a stream or an unhedged request: tries[0] only */
        usec_t deadline;    /* CLOCK_MONOTONIC; 0: none (each try: the request timeout) */
        usec_t not_before;  /* CLOCK_MONOTONIC: a delayed request starts then (0: at once) */
        bool delayed;       /* in c->active, not yet started (I/O thread) */
        usec_t hedge_usec;  /* hedged: the delay before another member is raced */
        usec_t hedge_at;    /* hedged: when the next try starts if none answered (0: none) */
        uint64_t tried;     /* members tried for this request (bit i: member i) */
        unsigned failed;    /* tries that failed (at most one a member before giving up) */
        bool reauthed;      /* renewed the token once already */
        int stream_error;   /* on_line's error, ends the stream */
        struct etcd_req *next; /* submit queue / active list */
};

struct etcd_client {
        char **members;
        size_t n_members;
        size_t current; /* I/O thread */
        usec_t *slow_until; /* I/O thread: per member, tried last until then (CLOCK_MONOTONIC) */
        char *ca_file, *cert_file, *key_file, *user, *password;
        char *token; /* I/O thread (auth); written once before the thread starts too */
        long timeout_ms;
        CURLM *multi;
        pthread_t thread;
        pthread_mutex_t lock;
        struct etcd_req *queue, *queue_tail; /* under lock */
        bool closing;                        /* under lock */
        struct etcd_req *active;             /* I/O thread */
};

/* gRPC status codes (grpc/status.h) as errnos. */
static int grpc_to_errno(int64_t code) {
        switch (code) {
        case 3:
                return -EINVAL; /* INVALID_ARGUMENT */
        case 5:
                return -ENOENT; /* NOT_FOUND: e.g. the lease */
        case 7:
        case 16:
                return -EACCES; /* PERMISSION_DENIED, UNAUTHENTICATED */
        case 8:
                return -ENOSPC; /* RESOURCE_EXHAUSTED: the database quota */
        case 11:
                return -ERANGE; /* OUT_OF_RANGE: a compacted or future revision */
        case 4:
        case 14:
                return -ETIMEDOUT; /* DEADLINE_EXCEEDED, UNAVAILABLE */
        default:
                return -EIO;
        }
}

/* ------------------------------------------------------------------------ */
/* Requests and their tries                                                  */
/* ------------------------------------------------------------------------ */

static void try_free(struct etcd_try *t) {
        if (t->easy)
                curl_api.easy_cleanup(t->easy);
        curl_api.slist_free_all(t->headers);
        free(t->buf);
        *t = (struct etcd_try) { 0 };
}

static void req_free(struct etcd_req *r) {
        if (!r)
                return;
        for (size_t i = 0; i < TRIES_MAX; i++)
                try_free(&r->tries[i]);
        free(r->path);
        free(r->body);
        free(r);
}

/*
 * Whether a second try may race the first on another member: only requests
 * that change nothing when etcd applies them twice.
 * - /v3/lease/keepalive: each renewal sets the lease's end to (the handling
 *   member's leader) now + TTL; a second one only moves it later. The
 *   holder's local expiry counts from before the first was sent (docs/
 *   cluster.md §6 step 3), so whichever answers, E_local ≤ E_server holds.
 * - /v3/lease/timetolive, /v3/kv/range: reads.
 * Not hedged: puts, txns and deletes (a guarded create sent twice answers
 * "failed" to its second copy after the first succeeded; every put bumps the
 * key's version), lease grants (two leases), revokes, watches (streams).
 */
static bool req_hedgeable(const char *path) {
        return streq(path, "/v3/lease/keepalive") || streq(path, "/v3/lease/timetolive") ||
               streq(path, "/v3/kv/range");
}

/* Splits a stream into messages: the gateway ends each one with a newline. */
static int stream_lines(struct etcd_try *t) {
        struct etcd_req *r = t->r;
        char *start = t->buf, *nl;

        while ((nl = memchr(start, '\n', t->len - (size_t) (start - t->buf)))) {
                *nl = '\0';
                struct json_object *msg = json_tokener_parse(start);
                int q = msg ? r->on_line(r, msg, r->userdata) : -EIO;
                json_object_put(msg);
                start = nl + 1;
                if (q < 0) {
                        r->stream_error = q;
                        return q;
                }
        }
        t->len -= (size_t) (start - t->buf);
        memmove(t->buf, start, t->len);
        return 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata) {
        struct etcd_try *t = userdata;
        struct etcd_req *r = t->r;
        size_t n = size * nmemb;

        if (r->cancel || (r->stream && t->len + n > STREAM_LINE_MAX))
                return 0; /* aborts the transfer */
        if (t->len + n + 1 > t->cap) {
                size_t cap = t->cap ? t->cap : 4096;
                while (cap < t->len + n + 1)
                        cap *= 2;
                char *b = realloc(t->buf, cap);
                if (!b)
                        return 0;
                t->buf = b;
                t->cap = cap;
        }
        memcpy(t->buf + t->len, data, n);
        t->len += n;
        t->buf[t->len] = '\0';
        if (r->stream && stream_lines(t) < 0)
                return 0;
        return n;
}

/* This try's timeout: the client's, shortened to the request's deadline;
 * -ETIMEDOUT once the deadline passed. */
static int req_timeout_ms(struct etcd_req *r, long *ret) {
        long ms = r->c->timeout_ms;

        if (r->deadline > 0) {
                usec_t now = now_usec(CLOCK_MONOTONIC);
                if (now >= r->deadline)
                        return -ETIMEDOUT;
                ms = MIN(ms, (long) ((r->deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC));
        }
        *ret = ms;
        return 0;
}

/* Prepares t's easy handle for r's path on member (a new handle or a reset one). */
static int try_setup(struct etcd_try *t, size_t member, long timeout_ms) {
        struct etcd_req *r = t->r;
        struct etcd_client *c = r->c;
        _cleanup_free_ char *url = NULL, *auth = NULL;

        t->member = member;
        if (asprintf(&url, "%s%s", c->members[member], r->path) < 0)
                return -ENOMEM;
        if (!t->easy) {
                t->easy = curl_api.easy_init();
                if (!t->easy)
                        return -ENOMEM;
        }
        curl_api.easy_reset(t->easy);
        curl_api.slist_free_all(t->headers);
        t->headers = curl_api.slist_append(NULL, "Content-Type: application/json");
        if (c->token && asprintf(&auth, "Authorization: %s", c->token) >= 0)
                t->headers = curl_api.slist_append(t->headers, auth);
        t->len = 0;
        t->error[0] = '\0';
        curl_api.easy_setopt(t->easy, CURLOPT_URL, url);
        curl_api.easy_setopt(t->easy, CURLOPT_POSTFIELDS, r->body);
        curl_api.easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->headers);
        curl_api.easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_api.easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
        curl_api.easy_setopt(t->easy, CURLOPT_PRIVATE, t);
        curl_api.easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->error);
        curl_api.easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
        curl_api.easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
        curl_api.easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, r->stream ? 0L : timeout_ms);
        curl_api.easy_setopt(t->easy, CURLOPT_TCP_KEEPALIVE, 1L);
        if (c->ca_file)
                curl_api.easy_setopt(t->easy, CURLOPT_CAINFO, c->ca_file);
        if (c->cert_file)
                curl_api.easy_setopt(t->easy, CURLOPT_SSLCERT, c->cert_file);
        if (c->key_file)
                curl_api.easy_setopt(t->easy, CURLOPT_SSLKEY, c->key_file);
        return 0;
}

/* A connection-level failure: another member may answer. */
static bool curl_error_is_member(CURLcode code) {
        switch (code) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_SSL_CONNECT_ERROR:
                return true;
        default:
                return false;
        }
}

/* The errno a failed transfer on member url ends its request with
 * (docs/store.md §4.6). On https://, a connection dropped after connecting is
 * the TLS layer's doing (a client certificate refused: the server's alert
 * comes with the first read); an empty reply is a server that does not speak
 * HTTP here (http:// to a TLS member). */
static int curl_error_errno(CURLcode code, const char *url) {
        bool tls = strncmp(url, "https://", 8) == 0;

        switch (code) {
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
                return tls ? -EPROTO : -ECONNREFUSED;
        case CURLE_GOT_NOTHING:
                return -EPROTO;
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
                return -ECONNREFUSED;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        default:
                return -EPROTO; /* TLS (a certificate, a handshake), HTTP: see the log line */
        }
}

static bool member_slow(const struct etcd_client *c, size_t m, usec_t now) {
        return c->slow_until[m] > now;
}

static bool try_on(const struct etcd_req *r, size_t m) {
        for (size_t i = 0; i < TRIES_MAX; i++)
                if (r->tries[i].in_multi && r->tries[i].member == m)
                        return true;
        return false;
}

static size_t tries_in_flight(const struct etcd_req *r) {
        size_t n = 0;
        for (size_t i = 0; i < TRIES_MAX; i++)
                n += r->tries[i].in_multi;
        return n;
}

/* The member r's next try goes to: from the current one on, the first of
 * the best kind — not tried yet by r, not slow, no try of r in flight there
 * (in that order of weight: a member in flight is raced again only when
 * every other is worse). */
static size_t pick_member(const struct etcd_req *r) {
        const struct etcd_client *c = r->c;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        size_t best = c->current;
        unsigned best_rank = UINT_MAX;

        for (size_t i = 0; i < c->n_members; i++) {
                size_t m = (c->current + i) % c->n_members;
                unsigned rank = (try_on(r, m) ? 4u : 0u) + (r->tried >> m & 1 ? 2u : 0u) +
                                (member_slow(c, m, now) ? 1u : 0u);
                if (rank < best_rank) {
                        best = m;
                        best_rank = rank;
                }
        }
        return best;
}

static void try_stop(struct etcd_try *t) {
        if (t->in_multi)
                curl_api.multi_remove_handle(t->r->c->multi, t->easy);
        t->in_multi = false;
}

/* Starts a try of r on member in a free slot; a hedged request's next hedge
 * is due hedge_usec later. -ETIMEDOUT (said) past the deadline, -EBUSY with
 * no free slot, -ENOMEM. */
static int try_start(struct etcd_req *r, size_t member) {
        struct etcd_client *c = r->c;
        struct etcd_try *t = NULL;
        long timeout_ms = c->timeout_ms;

        for (size_t i = 0; i < (r->hedged ? TRIES_MAX : 1) && !t; i++)
                if (!r->tries[i].in_multi)
                        t = &r->tries[i];
        if (!t)
                return -EBUSY;
        if (!r->stream && req_timeout_ms(r, &timeout_ms) < 0) {
                log_warning("store-etcd: %s%s: not sent: its operation's deadline has passed "
                            "(the members before did not answer in time)", c->members[member], r->path);
                return -ETIMEDOUT;
        }
        t->r = r;
        int q = try_setup(t, member, timeout_ms);
        if (q < 0)
                return q;
        if (curl_api.multi_add_handle(c->multi, t->easy) != CURLM_OK)
                return -ENOMEM;
        t->in_multi = true;
        t->started = now_usec(CLOCK_MONOTONIC);
        r->tried |= UINT64_C(1) << member;
        /* No hedge due at or past the deadline: it could not be sent. */
        if (r->hedged)
                r->hedge_at = r->deadline > 0 && t->started + r->hedge_usec >= r->deadline
                                      ? 0
                                      : t->started + r->hedge_usec;
        return 0;
}

/* The delay before a hedge: 1/HEDGE_DIV of the request's span (its deadline
 * from now, or the request timeout), within [HEDGE_MIN, timeout / 4]. */
static usec_t hedge_delay(const struct etcd_req *r) {
        usec_t timeout = (usec_t) r->c->timeout_ms * USEC_PER_MSEC, now = now_usec(CLOCK_MONOTONIC);
        usec_t span = r->deadline > now ? r->deadline - now : timeout;
        usec_t h = MIN(span / HEDGE_DIV, timeout / 4);
        return h > HEDGE_MIN_USEC ? h : HEDGE_MIN_USEC;
}

static int req_start(struct etcd_req *r) {
        if (r->hedged)
                r->hedge_usec = hedge_delay(r);
        return try_start(r, pick_member(r));
}

static void req_finish(struct etcd_req *r, int error, struct json_object *reply) {
        struct etcd_client *c = r->c;

        for (struct etcd_req **p = &c->active; *p; p = &(*p)->next)
                if (*p == r) {
                        *p = r->next;
                        break;
                }
        for (size_t i = 0; i < TRIES_MAX; i++)
                if (r->tries[i].r)
                        try_stop(&r->tries[i]);
        if (r->on_done)
                r->on_done(r, error, reply, r->userdata);
        req_free(r);
}

static int reauthenticate(struct etcd_client *c);


/* The watch streams on member m, judged slow or failing, end with -ESTALE
 * (their owner resumes them on another member): an idle stream cannot tell a
 * hung or cut-off member from a quiet range (docs/store.md §4.5). Their end
 * runs in active_timers(), not here: the caller may be walking c->active. */
static void streams_leave(struct etcd_client *c, size_t m) {
        size_t n = 0;

        for (struct etcd_req *r = c->active; r; r = r->next)
                if (r->stream && r->tries[0].in_multi && r->tries[0].member == m &&
                    !atomic_load(&r->cancel) && r->stream_error == 0) {
                        r->stream_error = -ESTALE;
                        atomic_store(&r->cancel, true);
                        n++;
                }
        if (n == 0)
                return;
        log_warning("store-etcd: %s judged slow or failing (a request there timed out, failed or "
                    "lost a race): "
                    "%zu watch stream%s moved to another member", c->members[m], n, n == 1 ? "" : "s");
        curl_api.multi_wakeup(c->multi);
}

/* Member m failed r's try: the next requests go to the next member, unless
 * another request moved on already (several fail at once on a dead member);
 * its watch streams too (a member cut off from its quorum answers UNAVAILABLE
 * and keeps its streams open, silent). */
static void member_failed(struct etcd_client *c, size_t m) {
        if (c->current == m)
                c->current = (c->current + 1) % c->n_members;
        streams_leave(c, m);
}

static void member_mark_slow(struct etcd_client *c, size_t m) {
        c->slow_until[m] = now_usec(CLOCK_MONOTONIC) + SLOW_USEC;
        streams_leave(c, m);
}

/* t failed on its member: another try on the next member while members are
 * left; true while r goes on (a try started, or another still in flight). */
static bool try_failed(struct etcd_try *t) {
        struct etcd_req *r = t->r;

        try_stop(t);
        member_failed(r->c, t->member);
        bool others = tries_in_flight(r) > 0;
        if (others && r->deadline > 0 && now_usec(CLOCK_MONOTONIC) >= r->deadline)
                return true; /* the others end it (a "not sent" said once, not per try) */
        if (++r->failed < r->c->n_members && try_start(r, pick_member(r)) >= 0)
                return true;
        return others;
}

/* Hedged r has had no answer for its hedge delay: the same request raced on
 * another member (a free slot made by dropping the oldest try: r's tries
 * are idempotent, req_hedgeable()). */
static void req_hedge(struct etcd_req *r) {
        struct etcd_try *oldest = NULL;

        r->hedge_at = 0;
        if (tries_in_flight(r) == TRIES_MAX) {
                for (size_t i = 0; i < TRIES_MAX; i++)
                        if (!oldest || r->tries[i].started < oldest->started)
                                oldest = &r->tries[i];
                member_mark_slow(r->c, oldest->member);
                try_stop(oldest);
        }
        size_t m = pick_member(r);
        log_debug("store-etcd: %s: no answer in %llu ms: raced on %s", r->path,
                  (unsigned long long) (r->hedge_usec / USEC_PER_MSEC), r->c->members[m]);
        (void) try_start(r, m); /* on failure, the tries in flight end it */
}

/* t answered first: the tries started before it lost the race (their members
 * are tried last for a while); its member serves the next requests. */
static void try_won(struct etcd_try *t) {
        struct etcd_req *r = t->r;

        for (size_t i = 0; i < TRIES_MAX; i++) {
                struct etcd_try *o = &r->tries[i];
                if (o != t && o->in_multi && o->started < t->started)
                        member_mark_slow(r->c, o->member);
        }
        r->c->current = t->member;
}

/* Judges an HTTP answer: 0 with *ret a reference, or an errno (gRPC status). */
static int parse_reply(struct etcd_try *t, long http, struct json_object **ret) {
        struct json_object *o = t->len > 0 ? json_tokener_parse(t->buf) : NULL;
        struct etcd_req *r = t->r;

        if (!o)
                return -EIO;
        if (http == 200 && !json_object_object_get_ex(o, "error", NULL)) {
                *ret = o;
                return 0;
        }
        int64_t code = etcd_json_int(o, "code");
        struct json_object *msg = NULL;
        (void) json_object_object_get_ex(o, "error", &msg);
        log_debug("store-etcd: %s%s: %s (code %lld)", r->c->members[t->member], r->path,
                  msg ? json_object_get_string(msg) : "?", (long long) code);
        int q = grpc_to_errno(code);
        if (code == 16 || (msg && strstr(json_object_get_string(msg), "invalid auth token")))
                q = -EKEYEXPIRED;
        json_object_put(o);
        return q;
}

/* A transfer failed: said with curl's text and its error buffer's detail. */
static void try_transfer_failed(struct etcd_try *t, CURLcode code) {
        struct etcd_req *r = t->r;
        struct etcd_client *c = r->c;

        log_warning("store-etcd: %s%s: %s%s%s", c->members[t->member], r->path, curl_api.easy_strerror(code),
                    t->error[0] ? ": " : "", t->error);
        if (code == CURLE_OPERATION_TIMEDOUT)
                member_mark_slow(c, t->member);
        /* A stream is not retried: it ends, and the re-watch goes to the next member. */
        if (r->stream) {
                try_stop(t);
                member_failed(c, t->member);
        } else if (curl_error_is_member(code) && try_failed(t))
                return;
        req_finish(r, curl_error_errno(code, c->members[t->member]), NULL);
}

static void try_completed(struct etcd_try *t, CURLcode code) {
        struct etcd_req *r = t->r;
        struct etcd_client *c = r->c;
        struct json_object *reply = NULL;
        long http = 0;
        int q;

        if (r->cancel || r->stream_error) {
                req_finish(r, r->stream_error ?: -ECANCELED, NULL);
                return;
        }
        if (code != CURLE_OK) {
                try_transfer_failed(t, code);
                return;
        }
        curl_api.easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &http);
        q = r->stream ? -EPIPE : parse_reply(t, http, &reply);
        if (q == -ETIMEDOUT && try_failed(t)) /* UNAVAILABLE: a member without quorum */
                return;
        if (q == -EKEYEXPIRED) {
                q = -EACCES;
                if (c->user && !r->reauthed && reauthenticate(c) >= 0) {
                        r->reauthed = true;
                        size_t m = t->member;
                        try_stop(t);
                        if (try_start(r, m) >= 0)
                                return;
                }
        }
        if (q >= 0)
                try_won(t);
        req_finish(r, q, reply);
        json_object_put(reply);
}

/* ------------------------------------------------------------------------ */
/* The I/O thread                                                            */
/* ------------------------------------------------------------------------ */

/* Moves queued requests into the multi handle; cancels flagged streams. */
static bool take_queue(struct etcd_client *c) {
        struct etcd_req *q;
        bool closing;

        pthread_mutex_lock(&c->lock);
        q = c->queue;
        c->queue = c->queue_tail = NULL;
        closing = c->closing;
        pthread_mutex_unlock(&c->lock);

        while (q) {
                struct etcd_req *r = q;
                q = q->next;
                r->next = c->active;
                c->active = r;
                r->delayed = !closing && r->not_before > now_usec(CLOCK_MONOTONIC);
                int e = closing ? -EPIPE : r->delayed ? 0 : req_start(r);
                if (e < 0)
                        req_finish(r, e, NULL);
        }
        return closing;
}

/* Cancelled streams (their write callback aborts at the next byte, but an
 * idle stream may send none) end; delayed requests start when due; hedges
 * start. Returns when the next of those is due (USEC_INFINITY: none). */
static usec_t active_timers(struct etcd_client *c) {
        usec_t now = now_usec(CLOCK_MONOTONIC), next = USEC_INFINITY;

        for (struct etcd_req *r = c->active, *n; r; r = n) {
                n = r->next;
                if (atomic_load(&r->cancel))
                        req_finish(r, r->stream_error ?: -ECANCELED, NULL);
                else if (r->delayed && r->not_before <= now) {
                        r->delayed = false;
                        int e = req_start(r);
                        if (e < 0)
                                req_finish(r, e, NULL);
                        else if (r->hedge_at)
                                next = MIN(next, r->hedge_at);
                } else if (r->delayed)
                        next = MIN(next, r->not_before);
                else if (r->hedge_at && r->hedge_at <= now) {
                        req_hedge(r);
                        if (r->hedge_at)
                                next = MIN(next, r->hedge_at);
                } else if (r->hedge_at)
                        next = MIN(next, r->hedge_at);
        }
        return next;
}

static void *io_thread(void *userdata) {
        struct etcd_client *c = userdata;
        int running;

        for (;;) {
                if (take_queue(c))
                        break;
                curl_api.multi_perform(c->multi, &running);
                CURLMsg *m;
                int left;
                while ((m = curl_api.multi_info_read(c->multi, &left)))
                        if (m->msg == CURLMSG_DONE) {
                                struct etcd_try *t;
                                curl_api.easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **) &t);
                                try_completed(t, m->data.result);
                        }
                usec_t next = active_timers(c), now = now_usec(CLOCK_MONOTONIC);
                /* No timer of ours but the delayed requests' (keep-alives) and the
                 * hedges': curl shortens the wait to its own timers; a started
                 * request needs a perform at once. */
                int wait_ms = next == USEC_INFINITY ? 3600 * 1000
                              : next <= now         ? 0
                                                    : (int) MIN((next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC,
                                                                (usec_t) 3600 * 1000);
                curl_api.multi_poll(c->multi, NULL, 0, wait_ms, NULL);
        }
        while (c->active)
                req_finish(c->active, -EPIPE, NULL);
        return NULL;
}

int etcd_submit(struct etcd_client *c, const char *path, struct json_object *body, bool stream,
                etcd_line_fn on_line, etcd_done_fn on_done, void *userdata, usec_t deadline,
                struct etcd_req **ret) {
        return etcd_submit_at(c, path, body, stream, on_line, on_done, userdata, 0, deadline, ret);
}

int etcd_submit_at(struct etcd_client *c, const char *path, struct json_object *body, bool stream,
                   etcd_line_fn on_line, etcd_done_fn on_done, void *userdata, usec_t not_before,
                   usec_t deadline, struct etcd_req **ret) {
        struct etcd_req *r = calloc(1, sizeof(*r));
        int q = -ENOMEM;

        if (r) {
                *r = (struct etcd_req) { .c = c, .stream = stream, .on_line = on_line,
                                         .on_done = on_done, .userdata = userdata,
                                         .deadline = deadline, .not_before = not_before,
                                         .hedged = !stream && req_hedgeable(path) };
                r->path = strdup(path);
                r->body = strdup(json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN));
        }
        json_object_put(body);
        if (!r || !r->path || !r->body) {
                req_free(r);
                return q;
        }
        pthread_mutex_lock(&c->lock);
        if (c->closing)
                q = -EPIPE;
        else {
                if (c->queue_tail)
                        c->queue_tail->next = r;
                else
                        c->queue = r;
                c->queue_tail = r;
                q = 0;
                if (ret)
                        *ret = r;
        }
        pthread_mutex_unlock(&c->lock);
        if (q < 0) {
                req_free(r);
                return q;
        }
        curl_api.multi_wakeup(c->multi);
        return 0;
}

void etcd_req_cancel(struct etcd_client *c, struct etcd_req *r) {
        atomic_store(&r->cancel, true);
        curl_api.multi_wakeup(c->multi);
}

/* ------------------------------------------------------------------------ */
/* Blocking calls                                                            */
/* ------------------------------------------------------------------------ */

usec_t etcd_op_timeout(const struct etcd_client *c) {
        return (usec_t) c->timeout_ms * USEC_PER_MSEC * c->n_members;
}

/* Shared by the waiting thread and on_done: whoever drops the last reference frees it. */
struct call {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned n_ref;
        bool done;
        int error;
        struct json_object *reply;
};

static void call_unref(struct call *k) {
        pthread_mutex_lock(&k->lock);
        bool last = --k->n_ref == 0;
        pthread_mutex_unlock(&k->lock);
        if (!last)
                return;
        json_object_put(k->reply);
        pthread_cond_destroy(&k->cond);
        pthread_mutex_destroy(&k->lock);
        free(k);
}

static void call_done(struct etcd_req *r, int error, struct json_object *reply, void *userdata) {
        struct call *k = userdata;

        pthread_mutex_lock(&k->lock);
        k->error = error;
        k->reply = json_object_get(reply);
        k->done = true;
        pthread_cond_signal(&k->cond);
        pthread_mutex_unlock(&k->lock);
        call_unref(k);
}

int etcd_wait_until(pthread_cond_t *cond, pthread_mutex_t *lock, const bool *done, usec_t deadline) {
        struct timespec ts;
        int q = 0;

        /* The condition variables use CLOCK_MONOTONIC (etcd_cond_init). */
        ts = usec_to_timespec(deadline);
        while (!*done && q != ETIMEDOUT)
                q = pthread_cond_timedwait(cond, lock, &ts);
        return *done ? 0 : -ETIMEDOUT;
}

void etcd_cond_init(pthread_cond_t *cond) {
        pthread_condattr_t a;

        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(cond, &a);
        pthread_condattr_destroy(&a);
}

int etcd_call(struct etcd_client *c, const char *path, struct json_object *body,
              struct json_object **ret_reply) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + etcd_op_timeout(c);
        struct call *k = calloc(1, sizeof(*k));
        int q;

        if (!k) {
                json_object_put(body);
                return -ENOMEM;
        }
        pthread_mutex_init(&k->lock, NULL);
        etcd_cond_init(&k->cond);
        k->n_ref = 2;
        q = etcd_submit(c, path, body, false, NULL, call_done, k, deadline, NULL);
        if (q < 0) {
                k->n_ref = 1;
                call_unref(k);
                return q;
        }
        pthread_mutex_lock(&k->lock);
        /* The I/O thread answers by the deadline; the grace covers its being late. */
        q = etcd_wait_until(&k->cond, &k->lock, &k->done, deadline + ETCD_WAIT_GRACE_USEC);
        if (q == 0 && k->error >= 0 && ret_reply)
                *ret_reply = json_object_get(k->reply);
        q = q < 0 ? q : k->error;
        pthread_mutex_unlock(&k->lock);
        if (q == -ETIMEDOUT && !k->done)
                log_warning("store-etcd: %s: no answer within %llu ms (the client's I/O thread "
                            "is stalled?)", path,
                            (unsigned long long) ((etcd_op_timeout(c) + ETCD_WAIT_GRACE_USEC) / USEC_PER_MSEC));
        call_unref(k);
        return q;
}

/* ------------------------------------------------------------------------ */
/* Authentication                                                            */
/* ------------------------------------------------------------------------ */

/*
 * /v3/auth/authenticate with a blocking easy handle on the calling thread
 * (at creation, or in the I/O thread when a token expired: a rare, short
 * stall of that thread). Tries every member.
 */
static int reauthenticate(struct etcd_client *c) {
        struct json_object *body = json_object_new_object(), *reply = NULL, *tok;
        int q = -ECONNREFUSED;

        json_object_object_add(body, "name", json_object_new_string(c->user));
        json_object_object_add(body, "password", json_object_new_string(c->password));
        struct etcd_req r = { .c = c, .path = (char *) "/v3/auth/authenticate",
                              .body = (char *) json_object_to_json_string(body) };
        struct etcd_try *t = &r.tries[0];
        t->r = &r;
        free(c->token);
        c->token = NULL;
        for (size_t i = 0; i < c->n_members; i++) {
                long http = 0;
                if (try_setup(t, c->current, c->timeout_ms) < 0)
                        break;
                CURLcode code = curl_api.easy_perform(t->easy);
                if (code != CURLE_OK) {
                        log_warning("store-etcd: %s/v3/auth/authenticate: %s%s%s", c->members[c->current],
                                    curl_api.easy_strerror(code), t->error[0] ? ": " : "", t->error);
                        q = curl_error_errno(code, c->members[c->current]);
                        c->current = (c->current + 1) % c->n_members;
                        continue;
                }
                curl_api.easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &http);
                /* etcd answers a wrong password with INVALID_ARGUMENT: any refusal is EACCES. */
                q = parse_reply(t, http, &reply);
                if (q < 0 && q != -ENOMEM)
                        q = -EACCES;
                break;
        }
        if (q >= 0 && json_object_object_get_ex(reply, "token", &tok)) {
                c->token = strdup(json_object_get_string(tok));
                q = c->token ? 0 : -ENOMEM;
        } else if (q >= 0)
                q = -EACCES;
        if (q < 0)
                log_warning_errno(q, "store-etcd: %s: authentication as %s failed: %m",
                                  c->members[c->current], c->user);
        json_object_put(reply);
        json_object_put(body);
        try_free(t);
        return q;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */
/* ------------------------------------------------------------------------ */

static int parse_members(struct etcd_client *c, const char *list) {
        _cleanup_free_ char *copy = strdup(list);
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        for (char *m = strtok_r(copy, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
                char **a = reallocarray(c->members, c->n_members + 1, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                c->members = a;
                size_t len = strlen(m);
                while (len > 0 && m[len - 1] == '/')
                        m[--len] = '\0';
                if (strstr(m, "://"))
                        a[c->n_members] = strdup(m);
                else if (asprintf(&a[c->n_members], "%s://%s", c->ca_file ? "https" : "http", m) < 0)
                        a[c->n_members] = NULL;
                if (!a[c->n_members])
                        return -ENOMEM;
                c->n_members++;
        }
        if (c->n_members > MEMBERS_MAX) {
                log_error("store-etcd: %zu members listed: at most %d", c->n_members, MEMBERS_MAX);
                return -E2BIG;
        }
        c->slow_until = calloc(c->n_members ?: 1, sizeof(*c->slow_until));
        if (!c->slow_until)
                return -ENOMEM;
        return c->n_members > 0 ? 0 : -EINVAL;
}

static int dup_opt(const char *s, char **ret) {
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

void etcd_client_free(struct etcd_client *c) {
        if (!c)
                return;
        if (c->multi) {
                pthread_mutex_lock(&c->lock);
                c->closing = true;
                pthread_mutex_unlock(&c->lock);
                curl_api.multi_wakeup(c->multi);
                pthread_join(c->thread, NULL);
                curl_api.multi_cleanup(c->multi);
        }
        for (size_t i = 0; i < c->n_members; i++)
                free(c->members[i]);
        free(c->members);
        free(c->slow_until);
        free(c->ca_file);
        free(c->cert_file);
        free(c->key_file);
        free(c->user);
        free(c->password);
        free(c->token);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

int etcd_client_new(const struct store_etcd_options *opts, struct etcd_client **ret) {
        struct etcd_client *c;
        int q;

        if (!opts->endpoints || (!opts->user != !opts->password))
                return -EINVAL;
        if ((q = curl_api_load()) < 0)
                return q;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        pthread_mutex_init(&c->lock, NULL);
        c->timeout_ms = (long) ((opts->request_timeout_usec ?: 5 * USEC_PER_SEC) / 1000);
        q = dup_opt(opts->ca_file, &c->ca_file);
        if (q >= 0)
                q = dup_opt(opts->cert_file, &c->cert_file);
        if (q >= 0)
                q = dup_opt(opts->key_file, &c->key_file);
        if (q >= 0)
                q = dup_opt(opts->user, &c->user);
        if (q >= 0)
                q = dup_opt(opts->password, &c->password);
        if (q >= 0)
                q = parse_members(c, opts->endpoints);
        if (q >= 0 && c->user)
                q = reauthenticate(c);
        if (q >= 0) {
                c->multi = curl_api.multi_init();
                q = c->multi ? -pthread_create(&c->thread, NULL, io_thread, c) : -ENOMEM;
                if (q < 0 && c->multi) {
                        curl_api.multi_cleanup(c->multi);
                        c->multi = NULL;
                }
        }
        if (q < 0) {
                etcd_client_free(c);
                return q;
        }
        *ret = c;
        return 0;
}
