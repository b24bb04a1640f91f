/* SPDX-License-Identifier: MIT */
/*
 * The leased store on etcd v3 (SPEC §2.4; docs/store.md §4 is the design).
 *
 * Key layout under the prefix P: durable keys at P "d/" KEY, ephemeral keys
 * at P "e/" KEY, each ephemeral key under a lease of its own; an explicit
 * delete of an ephemeral key also writes its *tombstone* P "e/" KEY "\0" (a
 * key no caller can name: store keys are C strings) under the deleted key's
 * lease, in the same transaction, so a watcher tells `deleted` (a tombstone
 * PUT at the same revision, just before) from `expired` (the lease's
 * revocation deletes without one).
 *
 * Each operation is a small state machine of gateway requests run in the
 * client's I/O thread (store-etcd-client.c). The blocking functions submit
 * it and wait on a condition variable; store_submit() queues its completion
 * for the owner's loop: an eventfd (store_get_fd) turns readable and
 * store_dispatch() runs the done callbacks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "store-etcd-internal.h"

#define DELETE_RETRIES 16 /* an unconditional delete racing writers: range + txn, again */

struct eop {
        struct store_etcd *s;
        struct store_op *op;
        char *key;   /* the etcd key: prefix, "d/" or "e/", the store key */
        void *value; /* a copy of op->value: the caller's may go after store_submit() */
        usec_t deadline; /* CLOCK_MONOTONIC: no request of the op starts after it */
        int step;
        int64_t lease, cur_rev, cur_lease;
        unsigned tries;
        bool in_loop; /* store_submit(): done runs from store_dispatch() */
        bool object;  /* lease is a lease object's (op->lease): never revoked here */
        struct eop *next;
};

static const struct store_ops etcd_ops;

static struct store_etcd *to_etcd(struct store *s) {
        return container_of(s, struct store_etcd, base);
}

/* ------------------------------------------------------------------------ */
/* JSON requests                                                             */
/* ------------------------------------------------------------------------ */

void etcd_add_b64(struct json_object *o, const char *field, const void *data, size_t n) {
        char *t = etcd_base64(data, n);
        json_object_object_add(o, field, t ? json_object_new_string(t) : NULL);
        free(t);
}

void etcd_add_int(struct json_object *o, const char *field, int64_t v) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%lld", (long long) v);
        json_object_object_add(o, field, json_object_new_string(buf));
}

char *etcd_key(struct store_etcd *s, enum store_keyspace ks, const char *key) {
        char *k;
        return asprintf(&k, "%s%s%s", s->prefix, ks == STORE_DURABLE ? "d/" : "e/", key ?: "") < 0
                       ? NULL
                       : k;
}

/* The end of the range of keys starting with prefix (its last byte + 1). */
char *etcd_range_end(const char *prefix, size_t *ret_n) {
        size_t n = strlen(prefix);
        char *e = strdup(prefix);

        while (e && n > 0 && (unsigned char) e[n - 1] == 0xff)
                n--;
        if (e && n > 0)
                e[n - 1]++;
        *ret_n = n;
        return e;
}

static struct json_object *compare(const char *target, const char *key, int64_t v) {
        struct json_object *c = json_object_new_object();
        json_object_object_add(c, "target", json_object_new_string(target));
        json_object_object_add(c, "result", json_object_new_string("EQUAL"));
        etcd_add_b64(c, "key", key, strlen(key));
        char field[32];
        snprintf(field, sizeof(field), "%s_revision", streq(target, "MOD") ? "mod" : "create");
        etcd_add_int(c, field, v);
        return c;
}

static struct json_object *op_put(const void *key, size_t klen, const void *v, size_t n,
                                  int64_t lease) {
        struct json_object *p = json_object_new_object(), *o = json_object_new_object();
        etcd_add_b64(p, "key", key, klen);
        etcd_add_b64(p, "value", v, n);
        if (lease)
                etcd_add_int(p, "lease", lease);
        json_object_object_add(p, "prev_kv", json_object_new_boolean(true));
        json_object_object_add(o, "request_put", p);
        return o;
}

static struct json_object *op_simple(const char *kind, const char *key) {
        struct json_object *p = json_object_new_object(), *o = json_object_new_object();
        etcd_add_b64(p, "key", key, strlen(key));
        if (streq(kind, "request_delete_range"))
                json_object_object_add(p, "prev_kv", json_object_new_boolean(true));
        json_object_object_add(o, kind, p);
        return o;
}

/* A txn: if cmp then `then` else a range of key. All three consumed. */
static struct json_object *txn(struct json_object *cmp, struct json_object *then,
                               const char *key) {
        struct json_object *t = json_object_new_object(), *a;
        a = json_object_new_array();
        json_object_array_add(a, cmp);
        json_object_object_add(t, "compare", a);
        json_object_object_add(t, "success", then);
        a = json_object_new_array();
        json_object_array_add(a, op_simple("request_range", key));
        json_object_object_add(t, "failure", a);
        return t;
}

static struct json_object *one(struct json_object *o) {
        struct json_object *a = json_object_new_array();
        json_object_array_add(a, o);
        return a;
}

/* The first kv of a range answer (or of a txn's failure range), NULL if none. */
static struct json_object *first_kv(struct json_object *reply) {
        struct json_object *a, *r;

        if (json_object_object_get_ex(reply, "responses", &a)) {
                r = json_object_array_get_idx(a, 0);
                if (!r || !json_object_object_get_ex(r, "response_range", &reply))
                        return NULL;
        }
        if (!json_object_object_get_ex(reply, "kvs", &a))
                return NULL;
        return json_object_array_get_idx(a, 0);
}

static bool succeeded(struct json_object *reply) {
        struct json_object *v;
        return json_object_object_get_ex(reply, "succeeded", &v) && json_object_get_boolean(v);
}

int64_t etcd_header_revision(struct json_object *reply) {
        struct json_object *h;
        return json_object_object_get_ex(reply, "header", &h) ? etcd_json_int(h, "revision") : 0;
}

/* The prev_kv of the first response of a txn (put or delete_range). */
static struct json_object *txn_prev_kv(struct json_object *reply, const char *kind) {
        struct json_object *a, *r, *p, *kvs;

        if (!json_object_object_get_ex(reply, "responses", &a))
                return NULL;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                r = json_object_array_get_idx(a, i);
                if (!json_object_object_get_ex(r, kind, &p))
                        continue;
                if (json_object_object_get_ex(p, "prev_kv", &kvs))
                        return kvs;
                if (json_object_object_get_ex(p, "prev_kvs", &kvs))
                        return json_object_array_get_idx(kvs, 0);
        }
        return NULL;
}

/*
 * A PUT record from a kv, or NULL: a tombstone (a key with a NUL) is not a
 * store key; *ret_error tells -ENOMEM/-EIO from "skip".
 */
struct store_event *etcd_kv_record(struct store_etcd *s, enum store_keyspace ks,
                                     struct json_object *kv, int *ret_error) {
        struct json_object *k = NULL, *v = NULL;
        _cleanup_free_ char *key = NULL, *value = NULL;
        size_t klen, vlen = 0, skip = strlen(s->prefix) + 2;

        *ret_error = -EIO;
        if (!json_object_object_get_ex(kv, "key", &k) ||
            etcd_unbase64(json_object_get_string(k), &key, &klen) < 0)
                return NULL;
        (void) json_object_object_get_ex(kv, "value", &v);
        if (v && etcd_unbase64(json_object_get_string(v), &value, &vlen) < 0)
                return NULL;
        *ret_error = 0;
        if (klen <= skip || strlen(key) != klen)
                return NULL;
        struct store_event *ev = store_event_new(STORE_EVENT_PUT, ks, key + skip, value, vlen);
        if (!ev) {
                *ret_error = -ENOMEM;
                return NULL;
        }
        ev->revision = (uint64_t) etcd_json_int(kv, "mod_revision");
        return ev;
}

/* ------------------------------------------------------------------------ */
/* Operations: state machines in the I/O thread                              */
/* ------------------------------------------------------------------------ */

static void eop_reply(struct etcd_req *r, int error, struct json_object *reply, void *userdata);

/*
 * Sends the op's next request: its answer comes back to eop_reply(), in the
 * I/O thread, possibly before etcd_submit() has returned. So -EINPROGRESS
 * ("sent: the answer continues the op") is the last thing a step may do
 * with e: the op may be completed and freed by then.
 */
static int eop_send(struct eop *e, const char *path, struct json_object *body) {
        int q = etcd_submit(e->s->client, path, body, false, NULL, eop_reply, e, e->deadline, NULL);
        return q < 0 ? q : -EINPROGRESS;
}

static struct json_object *range_body(const char *key) {
        struct json_object *b = json_object_new_object();
        etcd_add_b64(b, "key", key, strlen(key));
        return b;
}

/* Fire and forget (a lease nothing needs any more: it would expire anyway). */
static void lease_revoke(struct store_etcd *s, int64_t lease) {
        if (lease == 0)
                return;
        struct json_object *b = json_object_new_object();
        etcd_add_int(b, "ID", lease);
        (void) etcd_submit(s->client, "/v3/lease/revoke", b, false, NULL, NULL, NULL, 0, NULL);
}

/* A key's previous lease, once the key moved to a new one: revoked only if it
 * holds nothing but that key (and its tombstone). */
struct old_lease {
        struct store_etcd *s;
        int64_t id;
        char key[]; /* the etcd key */
};

static bool only_key(struct json_object *reply, const char *key) {
        struct json_object *keys;
        size_t n = strlen(key);

        if (!json_object_object_get_ex(reply, "keys", &keys))
                return true; /* no key left */
        for (size_t i = 0; i < json_object_array_length(keys); i++) {
                _cleanup_free_ char *k = NULL;
                size_t klen;
                if (etcd_unbase64(json_object_get_string(json_object_array_get_idx(keys, i)), &k,
                                  &klen) < 0 ||
                    !((klen == n || klen == n + 1) && memcmp(k, key, n) == 0))
                        return false;
        }
        return true;
}

static void old_lease_keys(struct etcd_req *r, int error, struct json_object *reply,
                           void *userdata) {
        struct old_lease *o = userdata;

        if (error >= 0 && only_key(reply, o->key))
                lease_revoke(o->s, o->id);
        free(o);
}

/*
 * After an update moved key off lease id: a lease of the key's own goes; a
 * lease object (of this store, or of another tend's: it holds other keys)
 * stays. Fire and forget: one /v3/lease/timetolive (keys) then the revoke.
 */
static void old_lease_release(struct store_etcd *s, int64_t id, const char *key) {
        size_t n = strlen(key);
        struct old_lease *o;

        if (id == 0 || etcd_lease_is_object(s, id) || !(o = malloc(sizeof(*o) + n + 1)))
                return;
        o->s = s;
        o->id = id;
        memcpy(o->key, key, n + 1);
        struct json_object *b = json_object_new_object();
        etcd_add_int(b, "ID", id);
        json_object_object_add(b, "keys", json_object_new_boolean(true));
        if (etcd_submit(s->client, "/v3/lease/timetolive", b, false, NULL, old_lease_keys, o, 0,
                        NULL) < 0)
                free(o);
}

static void eop_complete(struct eop *e, int result) {
        struct store_etcd *s = e->s;
        struct store_op *op = e->op;

        op->result = result;
        free(e->key);
        e->key = NULL;
        free(e->value);
        e->value = NULL;
        if (!e->in_loop) {
                free(e);
                op->done(op, op->userdata);
                return;
        }
        pthread_mutex_lock(&s->lock);
        if (!s->completed) {
                uint64_t one_ = 1;
                (void) !write(s->fd, &one_, sizeof(one_));
        }
        if (s->completed_tail)
                s->completed_tail->next = e;
        else
                s->completed = e;
        s->completed_tail = e;
        pthread_mutex_unlock(&s->lock);
}

struct eop *etcd_loop_done_new(struct store_etcd *s, struct store_op *op) {
        struct eop *e = calloc(1, sizeof(*e));
        if (e)
                *e = (struct eop) { .s = s, .op = op, .in_loop = true };
        return e;
}

void etcd_loop_done_post(struct eop *e, int result) {
        eop_complete(e, result);
}

void etcd_loop_done_free(struct eop *e) {
        free(e);
}

static int ttl_seconds(struct store_etcd *s, usec_t ttl) {
        ttl = ttl ?: s->default_ttl;
        return (int) ((ttl + USEC_PER_SEC - 1) / USEC_PER_SEC);
}

static int eop_grant(struct eop *e) {
        struct json_object *b = json_object_new_object();
        json_object_object_add(b, "TTL", json_object_new_int(ttl_seconds(e->s, e->op->ttl_usec)));
        return eop_send(e, "/v3/lease/grant", b);
}

/* The write (create or update) once the lease, if any, is granted. */
static int eop_write(struct eop *e) {
        struct store_op *op = e->op;
        bool create = op->type == STORE_OP_CREATE;
        struct json_object *cmp = create ? compare("CREATE", e->key, 0)
                                         : compare("MOD", e->key, (int64_t) op->expected);
        return eop_send(e, "/v3/kv/txn",
                        txn(cmp, one(op_put(e->key, strlen(e->key), e->value, op->size, e->lease)),
                            e->key));
}

static int write_step(struct eop *e, struct json_object *reply) {
        struct store_op *op = e->op;

        if (e->step == 0 && op->keyspace == STORE_EPHEMERAL && !e->object) {
                e->step = 1;
                return eop_grant(e);
        }
        if (e->step == 1) {
                e->lease = etcd_json_int(reply, "ID");
                e->step = 2;
                return eop_write(e);
        }
        if (e->step == 0) {
                e->step = 2;
                return eop_write(e);
        }
        if (!succeeded(reply)) {
                if (!e->object)
                        lease_revoke(e->s, e->lease);
                return 0;
        }
        struct json_object *prev = txn_prev_kv(reply, "response_put");
        if (op->type == STORE_OP_UPDATE && prev)
                old_lease_release(e->s, etcd_json_int(prev, "lease"), e->key);
        op->revision = (uint64_t) etcd_header_revision(reply);
        return 1;
}

/* The txn that deletes an ephemeral key at revision cur_rev and writes its tombstone. */
static int delete_with_tombstone(struct eop *e) {
        struct json_object *then = json_object_new_array();

        /* The tombstone first: a watcher sees it just before the DELETE of the same revision. */
        json_object_array_add(then, op_put(e->key, strlen(e->key) + 1, "", 0, e->cur_lease));
        json_object_array_add(then, op_simple("request_delete_range", e->key));
        e->step = 2;
        return eop_send(e, "/v3/kv/txn", txn(compare("MOD", e->key, e->cur_rev), then, e->key));
}

/*
 * Ephemeral delete: a range learns the key's revision and lease, then a txn
 * guarded by that revision deletes it and writes its tombstone under the same
 * lease. An unconditional delete that lost a race with a writer starts again.
 */
static int delete_ephemeral(struct eop *e, struct json_object *reply) {
        struct store_op *op = e->op;
        struct json_object *kv = reply ? first_kv(reply) : NULL;

        if (e->step == 2 && succeeded(reply)) {
                struct json_object *prev = txn_prev_kv(reply, "response_delete_range");
                op->revision = prev ? (uint64_t) etcd_json_int(prev, "mod_revision") : 0;
                return 1;
        }
        if (e->step == 0 || (e->step == 2 && kv && op->expected == STORE_REV_ANY)) {
                if (e->tries++ > DELETE_RETRIES)
                        return -EBUSY;
                e->step = 1;
                return eop_send(e, "/v3/kv/range", range_body(e->key));
        }
        if (!kv) { /* absent (or gone meanwhile): a vacuous WON */
                op->revision = 0;
                return 1;
        }
        e->cur_rev = etcd_json_int(kv, "mod_revision");
        e->cur_lease = etcd_json_int(kv, "lease");
        if (op->expected != STORE_REV_ANY && (uint64_t) e->cur_rev != op->expected)
                return 0;
        return delete_with_tombstone(e);
}

static int delete_step(struct eop *e, struct json_object *reply) {
        struct store_op *op = e->op;

        if (op->keyspace == STORE_EPHEMERAL)
                return delete_ephemeral(e, reply);
        if (e->step == 0) {
                e->step = 1;
                if (op->expected == STORE_REV_ANY) {
                        struct json_object *b = range_body(e->key);
                        json_object_object_add(b, "prev_kv", json_object_new_boolean(true));
                        return eop_send(e, "/v3/kv/deleterange", b);
                }
                return eop_send(e, "/v3/kv/txn",
                                txn(compare("MOD", e->key, (int64_t) op->expected),
                                    one(op_simple("request_delete_range", e->key)), e->key));
        }
        struct json_object *prev = NULL, *a;
        if (json_object_object_get_ex(reply, "prev_kvs", &a))
                prev = json_object_array_get_idx(a, 0);
        else if (succeeded(reply))
                prev = txn_prev_kv(reply, "response_delete_range");
        else if (first_kv(reply))
                return 0; /* exists at another revision */
        op->revision = prev ? (uint64_t) etcd_json_int(prev, "mod_revision") : 0;
        return 1;
}

static int read_step(struct eop *e, struct json_object *reply) {
        struct store_op *op = e->op;
        int q;

        if (e->step == 0) {
                struct json_object *b = range_body(e->key);
                if (op->type == STORE_OP_LIST) {
                        size_t n;
                        _cleanup_free_ char *end = etcd_range_end(e->key, &n);
                        if (!end)
                                return -ENOMEM;
                        etcd_add_b64(b, "range_end", end, n);
                }
                e->step = 1;
                return eop_send(e, "/v3/kv/range", b);
        }
        if (op->type == STORE_OP_GET) {
                struct json_object *kv = first_kv(reply);
                op->event = kv ? etcd_kv_record(e->s, op->keyspace, kv, &q) : NULL;
                return op->event ? 0 : !kv ? -ENOENT : q < 0 ? q : -EIO;
        }
        struct json_object *kvs;
        size_t n = json_object_object_get_ex(reply, "kvs", &kvs) ? json_object_array_length(kvs) : 0;
        op->events = n > 0 ? calloc(n, sizeof(*op->events)) : NULL;
        if (n > 0 && !op->events)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct store_event *ev = etcd_kv_record(e->s, op->keyspace, json_object_array_get_idx(kvs, i), &q);
                if (q < 0) {
                        store_event_array_free(op->events, op->n_events);
                        op->events = NULL;
                        op->n_events = 0;
                        return q;
                }
                if (ev)
                        op->events[op->n_events++] = ev;
        }
        return (int) op->n_events;
}

/* One step: sends the next request (-EINPROGRESS), or answers the op (its result or an error). */
static int eop_step(struct eop *e, struct json_object *reply) {
        switch (e->op->type) {
        case STORE_OP_CREATE:
        case STORE_OP_UPDATE:
                return write_step(e, reply);
        case STORE_OP_DELETE:
                return delete_step(e, reply);
        default:
                return read_step(e, reply);
        }
}

static void eop_reply(struct etcd_req *r, int error, struct json_object *reply, void *userdata) {
        struct eop *e = userdata;
        int q = error < 0 ? error : eop_step(e, reply);

        if (q == -EINPROGRESS)
                return;
        if (q < 0 && e->lease && !e->object && e->op->type == STORE_OP_CREATE)
                lease_revoke(e->s, e->lease); /* granted for a create that failed */
        eop_complete(e, q);
}

static int eop_start(struct store_etcd *s, struct store_op *op, bool in_loop) {
        struct eop *e = calloc(1, sizeof(*e));
        int q;

        if (!e)
                return -ENOMEM;
        *e = (struct eop) { .s = s, .op = op, .in_loop = in_loop,
                            .deadline = now_usec(CLOCK_MONOTONIC) + etcd_op_timeout(s->client) };
        if (op->lease) {
                e->lease = etcd_lease_id(op->lease);
                e->object = true;
        }
        e->key = etcd_key(s, op->keyspace, op->key);
        e->value = op->size > 0 ? malloc(op->size) : NULL;
        if (e->value)
                memcpy(e->value, op->value, op->size);
        q = !e->key || (op->size > 0 && !e->value) ? -ENOMEM : eop_step(e, NULL);
        if (q == -EINPROGRESS)
                return 0; /* e is the I/O thread's now */
        free(e->key);
        free(e->value);
        free(e);
        return q < 0 ? q : -EIO;
}

static int etcd_submit_op(struct store *base, struct store_op *op) {
        return eop_start(to_etcd(base), op, true);
}

/*
 * A blocking call's op lives here, shared by the caller and the I/O thread:
 * a caller that stops waiting (the I/O thread late past the op's deadline)
 * leaves it to the completion, which frees it and what it answered.
 */
struct blocking {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned n_ref;
        bool done;
        struct store_op op;
};

static void blocking_unref(struct blocking *b) {
        pthread_mutex_lock(&b->lock);
        bool last = --b->n_ref == 0;
        pthread_mutex_unlock(&b->lock);
        if (!last)
                return;
        store_event_unref(b->op.event);
        store_event_array_free(b->op.events, b->op.n_events);
        pthread_cond_destroy(&b->cond);
        pthread_mutex_destroy(&b->lock);
        free(b);
}

static void blocking_done(struct store_op *op, void *userdata) {
        struct blocking *b = userdata;
        pthread_mutex_lock(&b->lock);
        b->done = true;
        pthread_cond_signal(&b->cond);
        pthread_mutex_unlock(&b->lock);
        blocking_unref(b);
}

/*
 * The blocking form: the same state machine, waited for until the op's
 * deadline (etcd_op_timeout) plus a grace for a late I/O thread. Results are
 * moved into *op (op->result the answer).
 */
static int run_blocking(struct store_etcd *s, struct store_op *op) {
        usec_t bound = etcd_op_timeout(s->client) + ETCD_WAIT_GRACE_USEC;
        usec_t until = now_usec(CLOCK_MONOTONIC) + bound;
        struct blocking *b = calloc(1, sizeof(*b));
        int q;

        if (!b)
                return -ENOMEM;
        pthread_mutex_init(&b->lock, NULL);
        etcd_cond_init(&b->cond);
        b->n_ref = 2;
        b->op = *op;
        b->op.done = blocking_done;
        b->op.userdata = b;
        q = eop_start(s, &b->op, false);
        if (q < 0) {
                b->n_ref = 1;
                blocking_unref(b);
                return q;
        }
        pthread_mutex_lock(&b->lock);
        q = etcd_wait_until(&b->cond, &b->lock, &b->done, until);
        if (q == 0) {
                op->result = b->op.result;
                op->revision = b->op.revision;
                op->event = b->op.event;
                op->events = b->op.events;
                op->n_events = b->op.n_events;
                b->op.event = NULL;
                b->op.events = NULL;
                b->op.n_events = 0;
        }
        pthread_mutex_unlock(&b->lock);
        if (q < 0)
                log_warning("store-etcd: %s: no answer within %llu ms (the client's I/O thread "
                            "is stalled?)", op->key ?: "",
                            (unsigned long long) (bound / USEC_PER_MSEC));
        blocking_unref(b);
        return q < 0 ? q : op->result;
}

static int etcd_create(struct store *base, enum store_keyspace ks, const char *key,
                       const void *value, size_t size, usec_t ttl_usec, uint64_t *ret_revision) {
        struct store_op op = { .type = STORE_OP_CREATE, .keyspace = ks, .key = key,
                               .value = value, .size = size, .ttl_usec = ttl_usec };
        int q = run_blocking(to_etcd(base), &op);
        if (q == 1 && ret_revision)
                *ret_revision = op.revision;
        return q;
}

static int etcd_create_leased(struct store *base, const char *key, const void *value, size_t size,
                              struct store_lease *l, uint64_t *ret_revision) {
        struct store_op op = { .type = STORE_OP_CREATE, .keyspace = STORE_EPHEMERAL, .key = key,
                               .value = value, .size = size, .lease = l };
        int q = run_blocking(to_etcd(base), &op);
        if (q == 1 && ret_revision)
                *ret_revision = op.revision;
        return q;
}

static int etcd_update(struct store *base, enum store_keyspace ks, const char *key,
                       const void *value, size_t size, uint64_t expected, usec_t ttl_usec,
                       uint64_t *ret_revision) {
        struct store_op op = { .type = STORE_OP_UPDATE, .keyspace = ks, .key = key, .value = value,
                               .size = size, .expected = expected, .ttl_usec = ttl_usec };
        int q = run_blocking(to_etcd(base), &op);
        if (q == 1 && ret_revision)
                *ret_revision = op.revision;
        return q;
}

static int etcd_delete(struct store *base, enum store_keyspace ks, const char *key,
                       uint64_t expected, uint64_t *ret_revision) {
        struct store_op op = { .type = STORE_OP_DELETE, .keyspace = ks, .key = key,
                               .expected = expected };
        int q = run_blocking(to_etcd(base), &op);
        if (q == 1 && ret_revision)
                *ret_revision = op.revision;
        return q;
}

static int etcd_get(struct store *base, enum store_keyspace ks, const char *key,
                    struct store_event **ret) {
        struct store_op op = { .type = STORE_OP_GET, .keyspace = ks, .key = key };
        int q = run_blocking(to_etcd(base), &op);
        if (q >= 0)
                *ret = op.event;
        return q;
}

static int etcd_list(struct store *base, enum store_keyspace ks, const char *prefix,
                     struct store_event ***ret_events, size_t *ret_n) {
        struct store_op op = { .type = STORE_OP_LIST, .keyspace = ks, .key = prefix };
        int q = run_blocking(to_etcd(base), &op);
        if (q >= 0) {
                *ret_events = op.events;
                *ret_n = op.n_events;
        }
        return q;
}

/* ------------------------------------------------------------------------ */
/* The owner's loop: completions of store_submit()                           */
/* ------------------------------------------------------------------------ */

static int etcd_get_fd(struct store *base) {
        return to_etcd(base)->fd;
}

static int etcd_dispatch(struct store *base) {
        struct store_etcd *s = to_etcd(base);
        struct eop *list;
        uint64_t v;

        pthread_mutex_lock(&s->lock);
        list = s->completed;
        s->completed = s->completed_tail = NULL;
        if (list)
                (void) !read(s->fd, &v, sizeof(v));
        pthread_mutex_unlock(&s->lock);

        int n = 0;
        while (list) {
                struct eop *e = list;
                list = e->next;
                e->op->done(e->op, e->op->userdata);
                free(e);
                n++;
        }
        return n;
}

/* etcd runs expiry itself (its lessor): nothing to run here. */
static int etcd_run_expiry(struct store *base) {
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Creation and close                                                        */
/* ------------------------------------------------------------------------ */

static void etcd_close(struct store *base) {
        struct store_etcd *s = to_etcd(base);

        etcd_watches_close(s);
        etcd_client_free(s->client);
        /* In-loop completions nobody dispatched: run them now, so no op is lost. */
        (void) etcd_dispatch(base);
        etcd_store_unref_internal(s);
}

void etcd_store_unref_internal(struct store_etcd *s) {
        if (atomic_fetch_sub_explicit(&s->n_internal, 1, memory_order_acq_rel) != 1)
                return;
        safe_close(s->fd);
        free(s->prefix);
        pthread_mutex_destroy(&s->lock);
        free(s);
}

int store_etcd_new(const struct store_etcd_options *opts, struct store **ret) {
        struct store_etcd *s;
        int q;

        if (!opts || !ret || !opts->endpoints || opts->default_ttl_usec > STORE_TTL_MAX_USEC)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->base.ops = &etcd_ops;
        atomic_init(&s->base.n_ref, 1);
        atomic_init(&s->n_internal, 1);
        pthread_mutex_init(&s->lock, NULL);
        s->default_ttl = opts->default_ttl_usec ?: STORE_DEFAULT_TTL_USEC;
        s->queue_capacity = opts->watch_queue_capacity ?: STORE_DEFAULT_WATCH_QUEUE;
        s->prefix = strdup(opts->prefix ?: "");
        s->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        q = !s->prefix ? -ENOMEM : s->fd < 0 ? negative_errno() : etcd_client_new(opts, &s->client);
        if (q < 0) {
                if (s->fd >= 0)
                        close(s->fd);
                free(s->prefix);
                pthread_mutex_destroy(&s->lock);
                free(s);
                return q;
        }
        *ret = &s->base;
        return 0;
}

static const struct store_ops etcd_ops = {
        .name = "etcd",
        .close = etcd_close,
        .create = etcd_create,
        .update = etcd_update,
        .delete = etcd_delete,
        .get = etcd_get,
        .list = etcd_list,
        .get_fd = etcd_get_fd,
        .dispatch = etcd_dispatch,
        .run_expiry = etcd_run_expiry,
        .watch = etcd_watch,
        .watch_fd = etcd_watch_fd,
        .watch_next = etcd_watch_next,
        .watch_free = etcd_watch_free,
        .submit = etcd_submit_op,
        .lease_grant = etcd_lease_grant,
        .lease_keep_alive = etcd_lease_keep_alive,
        .lease_revoke = etcd_lease_revoke,
        .lease_free = etcd_lease_free,
        .lease_expiry = etcd_lease_expiry,
        .create_leased = etcd_create_leased,
};
