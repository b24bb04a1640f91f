/* SPDX-License-Identifier: MIT */
/*
 * The cluster as this host sees it (cluster.h; docs/cluster.md §4b): the
 * prefixes singletons/, hosts/ and units/ of etcd mirrored by watches (no
 * polling, no read when asked: `tendctl --cluster` is answered from here),
 * and the view's items built from them.
 *
 * A mirror keeps the newest PUT of each live key in key order (binary
 * search; a watch's snapshot arrives in key order, so it fills by appends).
 * A watch that ends (-ENOBUFS: etcd away, compaction; -EPIPE) is made again
 * by the registration thread (with its back-off); meanwhile the mirror keeps
 * what it had, and the new snapshot replaces it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cluster.h"
#include "log.h"
#include "macro.h"

#ifdef HAVE_STORE_ETCD
#include "cluster-internal.h"

void cluster_mirrors_init(struct cluster *c) {
        c->mirrors[MIRROR_SINGLES] = (struct mirror) { .prefix = "singletons/", .ks = STORE_EPHEMERAL,
                                                       .on_event = cluster_singles_event };
        c->mirrors[MIRROR_HOSTS] = (struct mirror) { .prefix = "hosts/", .ks = STORE_EPHEMERAL };
        c->mirrors[MIRROR_UNITS] = (struct mirror) { .prefix = "units/", .ks = STORE_DURABLE };
}

/* The index of key in m, or of where it would go (*found false). */
static size_t mirror_find(const struct mirror *m, const char *key, bool *found) {
        size_t lo = 0, hi = m->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int d = strcmp(m->evs[mid]->key, key);
                if (d == 0) {
                        *found = true;
                        return mid;
                }
                if (d < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return lo;
}

static void mirror_clear(struct mirror *m) {
        for (size_t i = 0; i < m->n; i++)
                store_event_unref(m->evs[i]);
        m->n = 0;
}

static int mirror_apply(struct mirror *m, struct store_event *ev) {
        bool found;
        size_t i = mirror_find(m, ev->key, &found);
        if (ev->type == STORE_EVENT_DELETE) {
                if (found) {
                        store_event_unref(m->evs[i]);
                        memmove(m->evs + i, m->evs + i + 1, (m->n - i - 1) * sizeof(*m->evs));
                        m->n--;
                }
                return 0;
        }
        if (found) {
                store_event_unref(m->evs[i]);
                m->evs[i] = store_event_ref(ev);
                return 0;
        }
        if (m->n == m->cap) {
                size_t cap = m->cap ? m->cap * 2 : 16;
                struct store_event **a = reallocarray(m->evs, cap, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                m->evs = a;
                m->cap = cap;
        }
        memmove(m->evs + i + 1, m->evs + i, (m->n - i) * sizeof(*m->evs));
        m->evs[i] = store_event_ref(ev);
        m->n++;
        return 0;
}

static struct mirror *mirror_of_source(struct cluster *c, sd_event_source *src) {
        for (size_t i = 0; i < ELEMENTSOF(c->mirrors); i++)
                if (c->mirrors[i].src == src)
                        return &c->mirrors[i];
        return NULL;
}

static void mirror_ended(struct cluster *c, struct mirror *m, int error) {
        log_info("cluster: etcd %s: the watch of %s ended (%s): watching again", c->endpoints, m->prefix,
                 strerror(-error));
        m->src = sd_event_source_disable_unref(m->src);
        if (m == &c->mirrors[MIRROR_SINGLES])
                cluster_singles_rewatch(c); /* nobody is tried until the new snapshot */
        if (c->thread_running) {
                m->failed = true;
                return;
        }
        m->w = store_watch_free(m->w);
        (void) cluster_start_registration(c);
}

static int on_mirror(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct cluster *c = userdata;
        struct mirror *m = mirror_of_source(c, src);
        struct store_event *ev;
        int k;

        if (!m)
                return 0;
        while ((k = store_watch_next(m->w, &ev)) == 0) {
                if (ev->type != STORE_EVENT_SNAPSHOT_DONE && mirror_apply(m, ev) < 0)
                        log_warning("cluster: %s%s: not mirrored (out of memory)", m->prefix, ev->key);
                if (m->on_event)
                        m->on_event(c, ev);
                store_event_unref(ev);
        }
        if (k != -EAGAIN)
                mirror_ended(c, m, k);
        return 0;
}

int cluster_mirrors_open(struct cluster *c) {
        for (size_t i = 0; i < ELEMENTSOF(c->mirrors); i++) {
                struct mirror *m = &c->mirrors[i];
                int k = m->w ? 0 : store_watch(c->etcd, m->ks, m->prefix, &m->w);
                if (k < 0)
                        return k;
        }
        return 0;
}

void cluster_mirrors_start(struct cluster *c) {
        bool again = false;
        for (size_t i = 0; i < ELEMENTSOF(c->mirrors); i++) {
                struct mirror *m = &c->mirrors[i];
                if (m->failed) {
                        m->failed = false;
                        m->w = store_watch_free(m->w);
                        again = true;
                        continue;
                }
                if (!m->w || m->src)
                        continue;
                mirror_clear(m); /* the new snapshot replaces it */
                if (i == MIRROR_SINGLES)
                        cluster_singles_rewatch(c);
                if (sd_event_add_io(c->event, &m->src, store_watch_fd(m->w), EPOLLIN, on_mirror, c) < 0) {
                        log_warning("cluster: cannot poll the watch of %s", m->prefix);
                        continue;
                }
                (void) on_mirror(m->src, -1, 0, c);
        }
        if (again)
                (void) cluster_start_registration(c);
}

void cluster_mirrors_free(struct cluster *c) {
        for (size_t i = 0; i < ELEMENTSOF(c->mirrors); i++) {
                struct mirror *m = &c->mirrors[i];
                m->src = sd_event_source_disable_unref(m->src);
                m->w = store_watch_free(m->w);
                mirror_clear(m);
                free(m->evs);
                m->evs = NULL;
                m->cap = 0;
        }
}

const struct store_event *cluster_mirror_get(const struct cluster *c, int i, const char *key) {
        bool found;
        size_t at = mirror_find(&c->mirrors[i], key, &found);
        return found ? c->mirrors[i].evs[at] : NULL;
}

/* ---- the view's items ---- */

static struct json_object *parse_value(const struct store_event *ev) {
        struct json_object *o = json_tokener_parse(ev->value);
        if (o && json_object_is_type(o, json_type_object))
                return o;
        json_object_put(o);
        return json_object_new_object();
}

static void take(struct json_object *to, const char *to_key, struct json_object *from, const char *key) {
        struct json_object *v;
        json_object_object_add(to, to_key, json_object_object_get_ex(from, key, &v) ? json_object_get(v) : NULL);
}

/* The etcd lease id a host's value names ("lease", decimal text; 0: none). */
static int64_t host_lease(const struct store_event *ev) {
        struct json_object *v = parse_value(ev), *l;
        const char *t = json_object_object_get_ex(v, "lease", &l) ? json_object_get_string(l) : NULL;
        int64_t id = t ? strtoll(t, NULL, 10) : 0;
        json_object_put(v);
        return id;
}

/* Each host's lease time left, asked of etcd now (LeaseTimeToLive, all at once;
 * docs/cluster.md §4b): ms[i] in ms, or STORE_ETCD_LEASE_UNKNOWN/_GONE. The loop
 * waits at most HOSTS_TTL_WAIT_USEC for the answers: the control protocol has no
 * deferred answer (yet), and a view without the times beats a stalled tend. */
#define HOSTS_TTL_WAIT_USEC (500 * USEC_PER_MSEC)
static int64_t *hosts_time_left(struct cluster *c, const struct mirror *m) {
        int64_t *ids = calloc(m->n ?: 1, sizeof(*ids)), *ms = calloc(m->n ?: 1, sizeof(*ms));
        if (!ids || !ms) {
                free(ids);
                free(ms);
                return NULL;
        }
        for (size_t i = 0; i < m->n; i++) {
                ids[i] = host_lease(m->evs[i]);
                ms[i] = STORE_ETCD_LEASE_UNKNOWN;
        }
        /* Not asked while this host's own renewals go unanswered (etcd known away): no wait then. */
        if (c->registered && c->etcd && !c->lease_late && m->n > 0) {
                int k = store_etcd_lease_time_left(c->etcd, ids, m->n, HOSTS_TTL_WAIT_USEC, ms);
                if (k >= 0 && (size_t) k < m->n)
                        log_notice("cluster: etcd %s: %zu of %zu hosts' lease time left not answered within %llu ms",
                                   c->endpoints, m->n - (size_t) k, m->n,
                                   (unsigned long long) (HOSTS_TTL_WAIT_USEC / USEC_PER_MSEC));
        }
        free(ids);
        return ms;
}

/* hosts: host, hostname, pid, metadata, lease (id, TTL, time left), and whether it is this one. */
static int view_hosts(struct cluster *c, struct json_object *items) {
        const struct mirror *m = &c->mirrors[MIRROR_HOSTS];
        _cleanup_free_ int64_t *left = hosts_time_left(c, m);
        if (!left)
                return -ENOMEM;
        for (size_t i = 0; i < m->n; i++) {
                struct json_object *v = parse_value(m->evs[i]), *it = json_object_new_object();
                json_object_object_add(it, "host", json_object_new_string(m->evs[i]->key + strlen("hosts/")));
                take(it, "hostname", v, "hostname");
                take(it, "pid", v, "pid");
                take(it, "ttl_sec", v, "ttl_sec");
                take(it, "lease", v, "lease");
                json_object_object_add(it, "lease_left_ms", left[i] >= 0 ? json_object_new_int64(left[i]) : NULL);
                take(it, "metadata", v, "metadata");
                json_object_object_add(it, "self", json_object_new_boolean(
                                                           streq(m->evs[i]->key + strlen("hosts/"), c->host_id)));
                json_object_put(v);
                if (json_object_array_add(items, it) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* list: every host's published units: host, unit, state, main pid, result, and
 * whether the host is present (its lease alive). */
static int view_list(struct cluster *c, struct json_object *items) {
        const struct mirror *m = &c->mirrors[MIRROR_UNITS];
        for (size_t i = 0; i < m->n; i++) {
                const char *hk = m->evs[i]->key + strlen("units/"), *slash = strchr(hk, '/');
                if (!slash)
                        continue;
                _cleanup_free_ char *host = strndup(hk, (size_t) (slash - hk)), *hkey = NULL;
                if (!host || asprintf(&hkey, "hosts/%s", host) < 0)
                        return -ENOMEM;
                struct json_object *v = parse_value(m->evs[i]), *it = json_object_new_object();
                json_object_object_add(it, "host", json_object_new_string(host));
                json_object_object_add(it, "unit", json_object_new_string(slash + 1));
                take(it, "state", v, "state");
                take(it, "main_pid", v, "main_pid");
                take(it, "result", v, "result");
                take(it, "restarts", v, "restarts");
                json_object_object_add(it, "host_present",
                                       json_object_new_boolean(cluster_mirror_get(c, MIRROR_HOSTS, hkey) != NULL));
                json_object_put(v);
                if (json_object_array_add(items, it) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* status NAME: the singleton's holder and token, and its record on that host. */
static int view_status(struct cluster *c, const char *unit, struct json_object *items) {
        _cleanup_free_ char *skey = NULL, *ukey = NULL;
        if (asprintf(&skey, "singletons/%s", unit) < 0)
                return -ENOMEM;
        const struct store_event *s = cluster_mirror_get(c, MIRROR_SINGLES, skey);
        if (!s)
                return -ENOENT;
        struct json_object *v = parse_value(s), *h, *it = json_object_new_object();
        const char *holder = json_object_object_get_ex(v, "host", &h) ? json_object_get_string(h) : "";
        json_object_object_add(it, "unit", json_object_new_string(unit));
        json_object_object_add(it, "holder", json_object_new_string(holder));
        json_object_object_add(it, "fencing_token", json_object_new_int64((int64_t) s->revision));
        if (asprintf(&ukey, "units/%s/%s", holder, unit) >= 0) {
                const struct store_event *u = cluster_mirror_get(c, MIRROR_UNITS, ukey);
                struct json_object *r = u ? parse_value(u) : NULL;
                if (r) {
                        take(it, "state", r, "state");
                        take(it, "main_pid", r, "main_pid");
                        json_object_put(r);
                }
        }
        json_object_put(v);
        return json_object_array_add(items, it) < 0 ? -ENOMEM : 0;
}

int cluster_view(struct cluster *c, const char *view, const char *unit, struct json_object *items) {
        if (!c)
                return -EOPNOTSUPP;
        if (streq(view, "hosts"))
                return view_hosts(c, items);
        if (streq(view, "list"))
                return view_list(c, items);
        return unit ? view_status(c, unit, items) : -EINVAL;
}

#else /* !HAVE_STORE_ETCD */

int cluster_view(struct cluster *c, const char *view, const char *unit, struct json_object *items) {
        return -EOPNOTSUPP;
}

#endif
