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
#include <unistd.h>

#include <json-c/json.h>

#include "cluster.h"
#include "control.h"
#include "log.h"
#include "macro.h"

#ifdef HAVE_STORE_ETCD
#include "cluster-internal.h"

void cluster_mirrors_init(struct cluster *c) {
        c->mirrors[MIRROR_SINGLES] = (struct mirror) { .prefix = "singletons/", .ks = STORE_EPHEMERAL,
                                                       .on_event = cluster_singles_event };
        c->mirrors[MIRROR_HOSTS] = (struct mirror) { .prefix = "hosts/", .ks = STORE_EPHEMERAL,
                                                     .on_event = cluster_hosts_event };
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
                m->snapshot_done = m->snapshot_done || ev->type == STORE_EVENT_SNAPSHOT_DONE;
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

int cluster_mirrors_open(struct cluster *c, bool singles) {
        for (size_t i = 0; i < ELEMENTSOF(c->mirrors); i++) {
                struct mirror *m = &c->mirrors[i];
                if (i == MIRROR_SINGLES && !singles)
                        continue;
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
                m->snapshot_done = false;
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

void cluster_mirror_stop(struct cluster *c, int i) {
        struct mirror *m = &c->mirrors[i];
        m->src = sd_event_source_disable_unref(m->src);
        m->w = store_watch_free(m->w);
        m->failed = m->snapshot_done = false;
        mirror_clear(m);
        if (i == MIRROR_SINGLES)
                cluster_singles_rewatch(c);
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

/* ---- hosts: each host's lease time left, asked of etcd without waiting ---- */

/* etcd's LeaseTimeToLive of each host's lease, all at once (docs/cluster.md
 * §4b): the answer is given through the control ticket when etcd answered or
 * the asks' deadline cut them (HOSTS_TTL_WAIT_USEC); a guard timer
 * HOSTS_TTL_GRACE_USEC later answers without the times if the store's
 * completion is late. A view without the times beats one never answered. */
#define HOSTS_TTL_WAIT_USEC (500 * USEC_PER_MSEC)
#define HOSTS_TTL_GRACE_USEC (500 * USEC_PER_MSEC)

struct hosts_ask {
        struct cluster *c;
        struct hosts_ask *next;         /* c->host_asks */
        struct control_ticket *ticket;  /* our reference */
        struct json_object *items;      /* the view as asked; lease_left_ms filled at the answer */
        struct store_etcd_ttl_ask *ask; /* NULL once it has answered */
        sd_event_source *guard;
        usec_t asked;                   /* CLOCK_MONOTONIC, for the log */
};

/* Answers a's ticket with its items as they are, and frees a. */
static void hosts_ask_finish(struct hosts_ask *a) {
        for (struct hosts_ask **p = &a->c->host_asks; *p; p = &(*p)->next)
                if (*p == a) {
                        *p = a->next;
                        break;
                }
        store_etcd_ttl_ask_cancel(a->ask);
        a->guard = sd_event_source_disable_unref(a->guard);
        control_ticket_answer(a->ticket, 0, a->items);
        control_ticket_unref(a->ticket);
        json_object_put(a->items);
        free(a);
}

/* The store's completion, in tend's loop: the times into the items. */
static void hosts_answered(const int64_t *ms, size_t n, size_t answered, void *userdata) {
        struct hosts_ask *a = userdata;
        a->ask = NULL; /* ran: nothing to cancel */
        for (size_t i = 0; i < n && i < json_object_array_length(a->items); i++)
                if (ms[i] >= 0)
                        json_object_object_add(json_object_array_get_idx(a->items, i), "lease_left_ms",
                                               json_object_new_int64(ms[i]));
        if (answered < n)
                log_notice("cluster: etcd %s: %zu of %zu hosts' lease time left not answered within %llu ms",
                           a->c->endpoints, n - answered, n,
                           (unsigned long long) ((now_usec(CLOCK_MONOTONIC) - a->asked) / USEC_PER_MSEC));
        hosts_ask_finish(a);
}

static int hosts_guard(sd_event_source *src, uint64_t usec, void *userdata) {
        struct hosts_ask *a = userdata;
        log_notice("cluster: etcd %s: the hosts' lease time left not answered within %llu ms: shown unknown",
                   a->c->endpoints, (unsigned long long) ((HOSTS_TTL_WAIT_USEC + HOSTS_TTL_GRACE_USEC) / USEC_PER_MSEC));
        hosts_ask_finish(a);
        return 0;
}

void cluster_views_free(struct cluster *c) {
        while (c->host_asks)
                hosts_ask_finish(c->host_asks);
}

/* Asks etcd the time left of each host's lease in ids (items' order). 1
 * (CONTROL_ANSWER_LATER): the ticket is answered later; 0: not asked
 * (answer now, the times unknown); -ENOMEM. */
static int hosts_ask(struct cluster *c, const int64_t *ids, size_t n, struct json_object *items,
                     struct control_ticket *ticket) {
        /* Not asked while this host's own renewals go unanswered (etcd known away);
         * asked while waiting for the host id (etcd answered the registration). */
        if (!ticket || !(c->registered || c->waiting) || !c->etcd || c->lease_late || n == 0)
                return 0;
        struct hosts_ask *a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        *a = (struct hosts_ask) { .c = c, .items = json_object_get(items), .asked = now_usec(CLOCK_MONOTONIC) };
        int k = sd_event_add_time_relative(c->event, &a->guard, CLOCK_MONOTONIC,
                                           HOSTS_TTL_WAIT_USEC + HOSTS_TTL_GRACE_USEC, 0, hosts_guard, a);
        if (k >= 0)
                k = store_etcd_lease_time_left_async(c->etcd, ids, n, HOSTS_TTL_WAIT_USEC, hosts_answered, a, &a->ask);
        if (k < 0) {
                sd_event_source_disable_unref(a->guard);
                json_object_put(a->items);
                free(a);
                return k;
        }
        a->ticket = control_ticket_ref(ticket);
        a->next = c->host_asks;
        c->host_asks = a;
        return CONTROL_ANSWER_LATER;
}

/* Whether a host record is this tend's: its id, under this tend's lease
 * (another tend with the same id is not this one). */
static bool host_is_self(const struct cluster *c, const struct store_event *ev, int64_t lease) {
        return streq(ev->key + strlen("hosts/"), c->host_id) && c->registered && c->lease &&
               lease == store_etcd_lease_id(c->lease);
}

/* This tend while its host id is in use by another (cluster.c, host_id_in_use()):
 * an item of its own, "waiting": "host id in use", no lease. */
static struct json_object *host_waiting_item(const struct cluster *c) {
        char hostname[256] = "";
        (void) gethostname(hostname, sizeof hostname - 1);
        struct json_object *it = json_object_new_object();
        json_object_object_add(it, "host", json_object_new_string(c->host_id));
        json_object_object_add(it, "hostname", json_object_new_string(hostname));
        json_object_object_add(it, "pid", json_object_new_int64(getpid()));
        json_object_object_add(it, "ttl_sec", json_object_new_int64((int64_t) (c->o->ttl / USEC_PER_SEC)));
        json_object_object_add(it, "lease", NULL);
        json_object_object_add(it, "lease_left_ms", NULL);
        json_object_object_add(it, "self", json_object_new_boolean(true));
        json_object_object_add(it, "waiting", json_object_new_string(CLUSTER_WAITING_HOST_ID));
        return it;
}

/* hosts: host, hostname, pid, metadata, lease (id, TTL, time left), and whether it is this one. */
static int view_hosts(struct cluster *c, struct json_object *items, struct control_ticket *ticket) {
        const struct mirror *m = &c->mirrors[MIRROR_HOSTS];
        _cleanup_free_ int64_t *ids = calloc(m->n ?: 1, sizeof(*ids));
        if (!ids)
                return -ENOMEM;
        for (size_t i = 0; i < m->n; i++) {
                struct json_object *v = parse_value(m->evs[i]), *it = json_object_new_object();
                ids[i] = host_lease(m->evs[i]);
                json_object_object_add(it, "host", json_object_new_string(m->evs[i]->key + strlen("hosts/")));
                take(it, "hostname", v, "hostname");
                take(it, "pid", v, "pid");
                take(it, "ttl_sec", v, "ttl_sec");
                take(it, "lease", v, "lease");
                json_object_object_add(it, "lease_left_ms", NULL); /* unknown until etcd answers */
                take(it, "metadata", v, "metadata");
                json_object_object_add(it, "self", json_object_new_boolean(host_is_self(c, m->evs[i], ids[i])));
                json_object_put(v);
                if (json_object_array_add(items, it) < 0)
                        return -ENOMEM;
        }
        if (c->waiting && json_object_array_add(items, host_waiting_item(c)) < 0)
                return -ENOMEM;
        int k = hosts_ask(c, ids, m->n, items, ticket);
        if (k == -ENOMEM)
                return k;
        if (k < 0)
                log_notice("cluster: etcd %s: the hosts' lease time left not asked: %s", c->endpoints, strerror(-k));
        return k < 0 ? 0 : k;
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
        if (!s && !c->waiting)
                return -ENOENT;
        /* waiting: singletons/ is not watched here meanwhile: the holder unknown */
        struct json_object *v = s ? parse_value(s) : json_object_new_object(), *h, *it = json_object_new_object();
        const char *holder = json_object_object_get_ex(v, "host", &h) ? json_object_get_string(h) : "";
        json_object_object_add(it, "unit", json_object_new_string(unit));
        json_object_object_add(it, "holder", s ? json_object_new_string(holder) : NULL);
        json_object_object_add(it, "fencing_token", s ? json_object_new_int64((int64_t) s->revision) : NULL);
        if (c->waiting)
                json_object_object_add(it, "this_host", json_object_new_string(CLUSTER_WAITING_HOST_ID));
        if (s && asprintf(&ukey, "units/%s/%s", holder, unit) >= 0) {
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

int cluster_view(struct cluster *c, const char *view, const char *unit, struct json_object *items,
                 struct control_ticket *ticket) {
        if (!c)
                return -EOPNOTSUPP;
        if (streq(view, "hosts"))
                return view_hosts(c, items, ticket);
        if (streq(view, "list"))
                return view_list(c, items);
        return unit ? view_status(c, unit, items) : -EINVAL;
}

#else /* !HAVE_STORE_ETCD */

int cluster_view(struct cluster *c, const char *view, const char *unit, struct json_object *items,
                 struct control_ticket *ticket) {
        return -EOPNOTSUPP;
}

#endif
