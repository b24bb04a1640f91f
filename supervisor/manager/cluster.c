/* SPDX-License-Identifier: MIT */
/*
 * The cluster agent (cluster.h; docs/cluster.md): the etcd store, this
 * host's registration under its lease, and the published unit records.
 *
 * Keys on etcd, under the store's prefix P (store-etcd adds d/ and e/,
 * docs/store.md §4.2):
 *   ephemeral hosts/HOST       this host (JSON), under the host's lease
 *   durable   units/HOST/NAME  the last published record of unit NAME
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <json-c/json.h>

#include "log.h"
#include "macro.h"
#include "unit-file.h"

#include "cluster.h"

#ifdef HAVE_STORE_ETCD

#include "cluster-internal.h"

#define PUBLISH_INTERVAL_USEC USEC_PER_SEC /* at most one write per unit per this */
#define BACKOFF_FIRST_USEC USEC_PER_SEC
#define BACKOFF_MAX_USEC (30 * USEC_PER_SEC)


const char *cluster_host_id(const struct cluster *c) {
        return c->host_id;
}

bool cluster_host_id_in_use(const struct cluster *c) {
        return c->waiting;
}

/* A re-exec's carried state, until cluster_new() takes it. */
static struct cluster_carried *carried_pending;

void cluster_carry_in(struct cluster_carried *cc) {
        cluster_carried_free(carried_pending);
        carried_pending = cc;
}

/* Whether "K=V" is one of the comma-separated pairs of list. */
static bool pair_listed(const char *list, const char *pair) {
        size_t n = strlen(pair);
        for (const char *p = list; p && *p;) {
                const char *end = strchrnul(p, ',');
                if ((size_t) (end - p) == n && strncmp(p, pair, n) == 0)
                        return true;
                p = *end ? end + 1 : end;
        }
        return false;
}

bool cluster_host_eligible(const struct cluster *c, const struct unit_cluster_keys *ck) {
        if (!ck)
                return true;
        bool listed = !ck->hosts;
        for (char **h = ck->hosts; h && *h && !listed; h++)
                listed = streq(*h, c->host_id);
        for (char **kv = ck->host_metadata; kv && *kv && listed; kv++)
                listed = pair_listed(c->o->metadata, *kv);
        return listed;
}

/* ---- configuration ---- */

/* "etcd://h:p,h2:p2/PREFIX" → endpoints "h:p,h2:p2", prefix "PREFIX/" ("tend/" when empty). */
static int parse_url(struct cluster *c, const char *url) {
        const char *rest = url + strlen("etcd://"), *slash = strchr(rest, '/');
        size_t n = slash ? (size_t) (slash - rest) : strlen(rest);
        const char *p = slash ? slash + 1 : "";
        size_t pl = strlen(p);

        if (n == 0) {
                log_error("--store %s: no etcd endpoint (etcd://HOST:PORT[,HOST:PORT...]/PREFIX)", url);
                return -EINVAL;
        }
        c->endpoints = strndup(rest, n);
        if (pl == 0)
                c->prefix = strdup("tend/");
        else if (asprintf(&c->prefix, "%s%s", p, p[pl - 1] == '/' ? "" : "/") < 0)
                c->prefix = NULL;
        return c->endpoints && c->prefix ? 0 : -ENOMEM;
}

/* The first line of path, trimmed; -errno (logged) when unreadable or empty. */
static int read_line(const char *what, const char *path, char **ret) {
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        FILE *f = fopen(path, "re");
        if (!f)
                return log_error_errno(negative_errno(), "%s %s: %m", what, path);
        ssize_t n = getline(&line, &cap, f);
        fclose(f);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
                line[--n] = '\0';
        if (n <= 0) {
                log_error("%s %s: empty", what, path);
                return -EINVAL;
        }
        *ret = TAKE_PTR(line);
        return 0;
}

/* The host id: --host-id was checked by options_parse() (exit 2); the machine
 * id is checked here. */
static int host_id_valid(const char *id) {
        if (!options_host_id_valid(id)) {
                log_error("host id from /etc/machine-id: want 1-%d characters of A-Z a-z 0-9 . _ : @ - "
                          "(or give --host-id)", TEND_HOST_ID_MAX);
                return -EINVAL;
        }
        return 0;
}

/* hosts/HOST's value: {"host", "hostname", "pid", "ttl_sec", "lease", "metadata": {K: V}};
 * "lease" is the etcd lease id (decimal text; 0 before the grant): `--cluster hosts`
 * asks etcd for its time left. */
static int make_host_value(struct cluster *c, int64_t lease) {
        char lease_text[32];
        snprintf(lease_text, sizeof lease_text, "%lld", (long long) lease);
        char hostname[256] = "";
        (void) gethostname(hostname, sizeof hostname - 1);
        struct json_object *o = json_object_new_object(), *md = json_object_new_object();
        json_object_object_add(o, "host", json_object_new_string(c->host_id));
        json_object_object_add(o, "hostname", json_object_new_string(hostname));
        json_object_object_add(o, "pid", json_object_new_int64(getpid()));
        json_object_object_add(o, "ttl_sec", json_object_new_int64((int64_t) (c->o->ttl / USEC_PER_SEC)));
        json_object_object_add(o, "lease", json_object_new_string(lease_text));
        for (const char *p = c->o->metadata; p && *p;) {
                const char *end = strchrnul(p, ','), *eq = memchr(p, '=', (size_t) (end - p));
                if (!eq) {
                        log_error("--host-metadata: \"%.*s\" is not K=V", (int) (end - p), p);
                        json_object_put(o);
                        json_object_put(md);
                        return -EINVAL;
                }
                _cleanup_free_ char *k = strndup(p, (size_t) (eq - p));
                json_object_object_add(md, k, json_object_new_string_len(eq + 1, (int) (end - eq - 1)));
                p = *end ? end + 1 : end;
        }
        json_object_object_add(o, "metadata", md);
        free(c->host_value);
        c->host_value = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return c->host_value ? 0 : -ENOMEM;
}

static int configure(struct cluster *c) {
        const struct tend_cluster_options *o = c->o;
        int k = parse_url(c, o->store);
        if (k < 0)
                return k;
        if (o->host_id)
                k = (c->host_id = strdup(o->host_id)) ? 0 : -ENOMEM;
        else
                k = read_line("host id: --host-id not given and", "/etc/machine-id", &c->host_id);
        if (k < 0 || (k = host_id_valid(c->host_id)) < 0)
                return k;
        if (o->password_file && (k = read_line("--store-password-file", o->password_file, &c->password)) < 0)
                return k;
        if (!!o->user != !!o->password_file) {
                log_error("--store-user and --store-password-file go together");
                return -EINVAL;
        }
        c->eo = (struct store_etcd_options) {
                .endpoints = c->endpoints, .prefix = c->prefix, .ca_file = o->ca,
                .cert_file = o->cert, .key_file = o->key, .user = o->user, .password = c->password,
        };
        return make_host_value(c, 0);
}

/* ---- registration (its own thread: these calls exist only blocking) ---- */

/* Sleeps up to usec unless stop_fd is written; true when told to stop. */
static bool sleep_or_stop(struct cluster *c, usec_t usec) {
        struct pollfd p = { .fd = c->stop_fd, .events = POLLIN };
        return poll(&p, 1, (int) (usec / USEC_PER_MSEC)) > 0;
}

/* Whose hosts/ID is ("hostname H, pid P, lease L, N s left"; any byte of it
 * outside printable ASCII shown as '?'), into c->in_use, c->in_use_lease.
 * -EADDRINUSE; -ENOENT when the key went meanwhile; the store's errors. */
static int host_key_taken(struct cluster *c, const char *key) {
        struct store_event *ev = NULL;
        int k = store_get(c->etcd, STORE_EPHEMERAL, key, &ev);
        if (k < 0)
                return k;
        struct json_object *o = json_tokener_parse(ev->value), *v;
        bool obj = o && json_object_is_type(o, json_type_object);
        const char *hostname = obj && json_object_object_get_ex(o, "hostname", &v) ? json_object_get_string(v) : "?";
        long long pid = obj && json_object_object_get_ex(o, "pid", &v) ? (long long) json_object_get_int64(v) : 0;
        const char *lease = obj && json_object_object_get_ex(o, "lease", &v) ? json_object_get_string(v) : NULL;
        int64_t id = lease ? strtoll(lease, NULL, 10) : 0, ms = STORE_ETCD_LEASE_UNKNOWN;
        if (id > 0)
                (void) store_etcd_lease_time_left(c->etcd, &id, 1, USEC_PER_SEC, &ms);
        char left[48] = "its time left unknown";
        if (ms >= 0)
                snprintf(left, sizeof left, "%lld s left", (long long) (ms / 1000));
        free(c->in_use);
        if (asprintf(&c->in_use, "hostname %s, pid %lld, lease %lld, %s", hostname, pid, (long long) id, left) < 0)
                c->in_use = NULL;
        for (char *p = c->in_use; p && *p; p++)
                if (*p < ' ' || *p > '~')
                        *p = '?';
        c->in_use_lease = id;
        json_object_put(o);
        store_event_unref(ev);
        return -EADDRINUSE;
}

/* The host key created under a fresh lease, only if absent (a create guarded
 * by create_revision = 0): a key another lease holds — another tend with this
 * host id, or this host's previous tend whose lease has not ended yet — is
 * never taken over: -EADDRINUSE (host_key_taken() says whose). */
static int register_once(struct cluster *c) {
        _cleanup_free_ char *key = NULL;
        struct store_lease *l = NULL;
        int k;

        if (!c->etcd && (k = store_etcd_new(&c->eo, &c->etcd)) < 0)
                return k;
        if (asprintf(&key, "hosts/%s", c->host_id) < 0)
                return -ENOMEM;
        if ((k = store_lease_grant(c->etcd, c->o->ttl, &l)) < 0)
                return k;
        k = make_host_value(c, store_etcd_lease_id(l));
        if (k >= 0)
                k = store_lease_keep_alive(l, true);
        for (int tries = 0; k >= 0 && tries < 3; tries++) {
                k = store_create_leased(c->etcd, key, c->host_value, strlen(c->host_value), l, NULL);
                if (k == 0)
                        k = host_key_taken(c, key); /* -ENOENT: gone meanwhile, try again */
                if (k != -ENOENT)
                        break;
        }
        if (k <= 0) {
                (void) store_lease_revoke(l);
                store_lease_free(l);
                return k == 0 ? -EEXIST : k;
        }
        c->lease = l;
        return 0;
}

/* daemon-reexec: the lease the previous tend held, renewed at once (its host
 * key and singleton keys live on under it); one that ended meanwhile
 * (-ENOENT) is let go: a registration anew (adopt_lost: the loop stops what
 * it carried as held). */
static int adopt_once(struct cluster *c) {
        struct store_lease *l = NULL;
        int k;

        if (!c->etcd && (k = store_etcd_new(&c->eo, &c->etcd)) < 0)
                return k;
        if ((k = store_etcd_lease_adopt(c->etcd, c->adopt_id, c->adopt_ttl, c->adopt_expiry, &l)) < 0)
                return k;
        k = store_lease_keep_alive(l, true);
        if (k == -ENOENT) {
                log_warning("cluster: etcd %s: host %s's lease %lld ended during the re-exec: registering anew",
                            c->endpoints, c->host_id, (long long) c->adopt_id);
                store_lease_free(l);
                c->adopt_lost = true;
                return register_once(c);
        }
        if (k < 0) {
                store_lease_free(l);
                return k;
        }
        c->lease = l;
        return 0;
}

static void *registration_thread(void *userdata) {
        struct cluster *c = userdata;
        usec_t delay = BACKOFF_FIRST_USEC;

        for (;;) {
                int k = c->lease ? 0 : c->adopt_id && !c->adopt_lost ? adopt_once(c) : register_once(c);
                c->reg_in_use = k == -EADDRINUSE; /* handed over as it is: the loop waits on a watch */
                if (k >= 0 || c->reg_in_use)
                        k = cluster_mirrors_open(c, !c->reg_in_use);
                if (k >= 0)
                        break;
                c->reg_error = k;
                log_warning_errno(k, "cluster: etcd %s: cannot register host %s or watch the cluster (%m); "
                                  "retrying in %llu s",
                                  c->endpoints, c->host_id, (unsigned long long) (delay / USEC_PER_SEC));
                if (sleep_or_stop(c, delay))
                        return NULL;
                delay = delay * 2 > BACKOFF_MAX_USEC ? BACKOFF_MAX_USEC : delay * 2;
        }
        c->reg_error = 0;
        (void) eventfd_write(c->done_fd, 1);
        return NULL;
}

int cluster_start_registration(struct cluster *c) {
        sigset_t all, old;
        /* Every signal blocked in the thread (and the store's I/O thread it starts):
         * tend's loop takes them through its signalfd. */
        sigfillset(&all);
        (void) pthread_sigmask(SIG_BLOCK, &all, &old);
        int k = pthread_create(&c->thread, NULL, registration_thread, c);
        (void) pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (k != 0)
                return log_error_errno(-k, "cluster: cannot start the registration thread: %m");
        c->thread_running = true;
        return 0;
}

/* ---- the host lease's local expiry ---- */

static int on_lease_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void arm_lease_timer(struct cluster *c, usec_t at) {
        if (c->lease_timer) {
                (void) sd_event_source_set_time(c->lease_timer, at);
                (void) sd_event_source_set_enabled(c->lease_timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_add_time(c->event, &c->lease_timer, CLOCK_MONOTONIC, at, 0, on_lease_timer, c);
}

/* At the lease's local expiry: renewed meanwhile → wait for the new one; not
 * renewed (etcd unreachable) → said once, checked again every TTL/3 while the
 * keep-alive retries (the lease may well live on: etcd refreshes leases at a
 * leader change); ended on etcd → register again under a new lease. */
static int on_lease_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct cluster *c = userdata;
        usec_t expiry = store_lease_expiry(c->lease), now = now_usec(CLOCK_MONOTONIC);

        if (expiry > now) {
                if (c->lease_late)
                        log_notice("cluster: etcd %s: host %s's lease renewed again", c->endpoints, c->host_id);
                c->lease_late = false;
                arm_lease_timer(c, expiry);
                return 0;
        }
        if (expiry != 0) {
                if (!c->lease_late)
                        log_warning("cluster: etcd %s: host %s's lease not renewed before its local expiry "
                                    "(etcd unreachable?): still trying", c->endpoints, c->host_id);
                c->lease_late = true;
                arm_lease_timer(c, now + c->o->ttl / 3);
                return 0;
        }
        if (c->thread_running) { /* it hands over soon: look again then */
                arm_lease_timer(c, now + c->o->ttl / 3);
                return 0;
        }
        log_warning("cluster: etcd %s: host %s's lease has ended on etcd: registering again",
                    c->endpoints, c->host_id);
        c->lease = store_lease_free(c->lease);
        c->registered = c->lease_late = false;
        (void) cluster_start_registration(c);
        return 0;
}

/* ---- publishing unit records (written behind, coalesced) ---- */

static void flush_soon(struct cluster *c);

static void op_done(struct store_op *op, void *userdata) {
        struct published *p = userdata;
        struct cluster *c = p->c;

        p->busy = false;
        free(p->key);
        p->key = NULL;
        p->sending = store_event_unref(p->sending);
        if (op->type == STORE_OP_GET) {
                p->revision = op->result >= 0 ? op->event->revision : 0;
                p->need_get = op->result < 0 && op->result != -ENOENT;
                store_event_unref(op->event);
        } else if (op->result > 0) {
                p->revision = op->type == STORE_OP_DELETE ? 0 : op->revision;
                if (c->write_failing)
                        log_notice("cluster: etcd %s: publishing unit records again", c->endpoints);
                c->write_failing = false;
        } else {
                p->dirty = true;
                p->need_get = op->result == 0;
                if (op->result < 0 && !c->write_failing)
                        log_warning_errno(op->result, "cluster: etcd %s: %s: record not published (%m); "
                                          "retrying", c->endpoints, p->name);
                c->write_failing = c->write_failing || op->result < 0;
        }
        if (!c->closing && (p->dirty || p->need_get))
                flush_soon(c);
}

static int publish_one(struct cluster *c, struct published *p) {
        if (asprintf(&p->key, "units/%s/%s", c->host_id, p->name) < 0)
                return -ENOMEM;
        p->op = (struct store_op) { .keyspace = STORE_DURABLE, .key = p->key, .done = op_done, .userdata = p };
        if (p->need_get)
                p->op.type = STORE_OP_GET;
        else if (!p->latest)
                p->op = (struct store_op) { .type = STORE_OP_DELETE, .keyspace = STORE_DURABLE, .key = p->key,
                                            .expected = STORE_REV_ANY, .done = op_done, .userdata = p };
        else {
                p->op.type = p->revision ? STORE_OP_UPDATE : STORE_OP_CREATE;
                p->sending = store_event_ref(p->latest);
                p->op.value = p->latest->value;
                p->op.size = p->latest->value_size;
                p->op.expected = p->revision;
        }
        if (p->op.type != STORE_OP_GET)
                p->dirty = false;
        p->busy = true;
        int k = store_submit(c->etcd, &p->op);
        if (k < 0) {
                p->busy = false;
                p->dirty = true;
                free(p->key);
                p->key = NULL;
                p->sending = store_event_unref(p->sending);
        }
        return k;
}

static int on_flush(sd_event_source *s, uint64_t usec, void *userdata) {
        struct cluster *c = userdata;

        c->last_flush = now_usec(CLOCK_MONOTONIC);
        for (size_t i = 0; i < c->n_pub; i++) {
                struct published *p = c->pub[i];
                if ((p->dirty || p->need_get) && !p->busy)
                        (void) publish_one(c, p);
        }
        return 0;
}

/* One flush at most every PUBLISH_INTERVAL_USEC, once registered. */
static void flush_soon(struct cluster *c) {
        if (!c->registered)
                return;
        usec_t now = now_usec(CLOCK_MONOTONIC), at = c->last_flush + PUBLISH_INTERVAL_USEC;
        if (at < now)
                at = now;
        int enabled = SD_EVENT_OFF;
        if (c->flush_timer && sd_event_source_get_enabled(c->flush_timer, &enabled) >= 0 && enabled != SD_EVENT_OFF)
                return;
        if (c->flush_timer) {
                (void) sd_event_source_set_time(c->flush_timer, at);
                (void) sd_event_source_set_enabled(c->flush_timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_add_time(c->event, &c->flush_timer, CLOCK_MONOTONIC, at, 0, on_flush, c);
}

static struct published *published_get(struct cluster *c, const char *name) {
        for (size_t i = 0; i < c->n_pub; i++)
                if (streq(c->pub[i]->name, name))
                        return c->pub[i];
        struct published **a = reallocarray(c->pub, c->n_pub + 1, sizeof(*a));
        if (!a)
                return NULL;
        c->pub = a;
        struct published *p = calloc(1, sizeof(*p));
        if (!p || !(p->name = strdup(name))) {
                free(p);
                return NULL;
        }
        p->c = c;
        return c->pub[c->n_pub++] = p;
}

/* A change of service/NAME in the local store: the newest copy replaces the
 * one waiting (coalesced). */
static void local_event(struct cluster *c, struct store_event *ev) {
        if (ev->type == STORE_EVENT_SNAPSHOT_DONE)
                return;
        struct published *p = published_get(c, ev->key + strlen("service/"));
        if (!p) {
                log_warning_errno(ENOMEM, "cluster: %s: record not published (%m)", ev->key);
                return;
        }
        store_event_unref(p->latest);
        p->latest = ev->type == STORE_EVENT_PUT ? store_event_ref(ev) : NULL;
        p->dirty = true;
        flush_soon(c);
}

static int watch_local(struct cluster *c);

static int on_local(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct cluster *c = userdata;
        struct store_event *ev;
        int k;

        while ((k = store_watch_next(c->local_watch, &ev)) == 0) {
                local_event(c, ev);
                store_event_unref(ev);
        }
        if (k == -ENOBUFS) /* lagged: the new snapshot re-marks every unit (coalesced anyway) */
                (void) watch_local(c);
        return 0;
}

static int watch_local(struct cluster *c) {
        c->local_src = sd_event_source_disable_unref(c->local_src);
        c->local_watch = store_watch_free(c->local_watch);
        int k = store_watch(c->local, STORE_DURABLE, "service/", &c->local_watch);
        if (k >= 0)
                k = sd_event_add_io(c->event, &c->local_src, store_watch_fd(c->local_watch), EPOLLIN, on_local, c);
        if (k < 0)
                log_warning_errno(k, "cluster: watching the local records: %m: none published");
        return k;
}

/* ---- the loop's side of registration ---- */

static int on_etcd(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct cluster *c = userdata;
        (void) store_dispatch(c->etcd);
        return 0;
}

/* While waiting: hosts/ID gone (or absent from a new snapshot) → register. */
static void host_id_maybe_free(struct cluster *c) {
        _cleanup_free_ char *key = NULL;
        if (!c->waiting || c->thread_running || c->closing || !c->mirrors[MIRROR_HOSTS].snapshot_done ||
            asprintf(&key, "hosts/%s", c->host_id) < 0 || cluster_mirror_get(c, MIRROR_HOSTS, key))
                return;
        log_notice("cluster: etcd %s: host id %s is free now: registering", c->endpoints, c->host_id);
        (void) cluster_start_registration(c);
}

void cluster_hosts_event(struct cluster *c, const struct store_event *ev) {
        if (ev->type == STORE_EVENT_SNAPSHOT_DONE ||
            (ev->type == STORE_EVENT_DELETE && streq(ev->key + strlen("hosts/"), c->host_id)))
                host_id_maybe_free(c);
}

/* The thread found hosts/ID under another lease: said once per holder (an
 * error: two tends share a host id), then nothing is taken over — no lease,
 * no singleton (their watch stopped until registered), nothing published —
 * until the hosts/ watch sees the key go. Ordinary units run meanwhile. */
static void host_id_in_use(struct cluster *c) {
        if (!c->waiting || c->in_use_lease != c->logged_lease)
                log_error("cluster: etcd %s: host id %s is in use by another tend (%s): not taking it over; "
                          "waiting for its hosts/%s to go, no singleton runs here meanwhile "
                          "(give each tend its own --host-id)", c->endpoints, c->host_id,
                          c->in_use ?: "unknown", c->host_id);
        c->logged_lease = c->in_use_lease;
        c->waiting = true;
        c->adopt_id = 0;
        c->adopt_expiry = 0;
        cluster_mirror_stop(c, MIRROR_SINGLES);
        cluster_singles_renewed(c); /* a carried hold whose lease ended stops */
        c->adopt_lost = false;
        cluster_mirrors_start(c);
        host_id_maybe_free(c); /* the key went while the thread ran */
}

static int on_registered(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct cluster *c = userdata;
        eventfd_t v;

        (void) eventfd_read(c->done_fd, &v);
        (void) pthread_join(c->thread, NULL);
        c->thread_running = false;
        if (!c->etcd_src && sd_event_add_io(c->event, &c->etcd_src, store_get_fd(c->etcd), EPOLLIN, on_etcd, c) < 0)
                log_warning("cluster: cannot poll the etcd store: records not published");
        if (c->reg_in_use) {
                host_id_in_use(c);
                return 0;
        }
        c->waiting = false;
        if (!c->registered && c->adopt_id && !c->adopt_lost)
                log_info("cluster: host %s kept its lease %lld in etcd %s across the re-exec", c->host_id,
                         (long long) c->adopt_id, c->endpoints);
        else if (!c->registered)
                log_info("cluster: host %s registered in etcd %s (prefix %s, lease %llu s)", c->host_id,
                         c->endpoints, c->prefix, (unsigned long long) (c->o->ttl / USEC_PER_SEC));
        c->registered = true;
        c->adopt_id = 0;
        c->adopt_expiry = 0;
        cluster_singles_renewed(c); /* the fences move now (or, the carried lease lost, the units stop) */
        c->adopt_lost = false;
        arm_lease_timer(c, store_lease_expiry(c->lease));
        cluster_mirrors_start(c);
        for (size_t i = 0; i < c->n_pub; i++) /* each copy again: etcd may have lost them */
                c->pub[i]->dirty = c->pub[i]->dirty || c->pub[i]->latest;
        flush_soon(c);
        return 0;
}

int cluster_new(sd_event *e, const struct tend_cluster_options *o, struct store *local,
                const struct cluster_ops *ops, void *userdata, struct cluster **ret) {
        struct cluster *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->ops = ops;
        c->userdata = userdata;
        cluster_mirrors_init(c);
        c->event = sd_event_ref(e);
        c->o = o;
        c->local = local;
        struct cluster_carried *cc = carried_pending;
        carried_pending = NULL;
        c->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        c->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        int k = c->done_fd < 0 || c->stop_fd < 0 ? negative_errno() : configure(c);
        if (k >= 0)
                k = sd_event_add_io(e, &c->done_src, c->done_fd, EPOLLIN, on_registered, c);
        if (k >= 0)
                k = watch_local(c);
        if (k >= 0 && cc) { /* daemon-reexec: before the thread, which takes the lease back */
                c->adopt_id = cc->lease_id;
                c->adopt_ttl = cc->ttl;
                c->adopt_expiry = cc->lease_id ? cc->expiry : 0;
                cluster_singles_adopt(c, cc);
        }
        cluster_carried_free(cc);
        if (k >= 0)
                k = cluster_start_registration(c);
        if (k < 0) {
                cluster_free(c);
                return k;
        }
        log_info("cluster: host %s joining etcd %s (prefix %s)", c->host_id, c->endpoints, c->prefix);
        *ret = c;
        return 0;
}

struct cluster *cluster_free(struct cluster *c) {
        if (!c)
                return NULL;
        c->closing = true;
        if (c->thread_running) {
                (void) eventfd_write(c->stop_fd, 1);
                (void) pthread_join(c->thread, NULL);
        }
        if (c->lease) { /* the singletons' keys go with it: handed over, their units stopped by now */
                int k = store_lease_revoke(c->lease);
                if (k < 0)
                        log_warning_errno(k, "cluster: etcd %s: host %s's lease not revoked (%m): it ends "
                                          "within %llu s", c->endpoints, c->host_id,
                                          (unsigned long long) (c->o->ttl / USEC_PER_SEC));
                store_lease_free(c->lease);
        }
        cluster_views_free(c); /* before the store's close runs their completions */
        c->etcd_src = sd_event_source_disable_unref(c->etcd_src);
        store_unref(c->etcd); /* runs the completions still queued: they see closing */
        cluster_singles_free(c); /* fences stand down: the units are stopped by now */
        cluster_mirrors_free(c);
        for (size_t i = 0; i < c->n_pub; i++) {
                store_event_unref(c->pub[i]->latest);
                store_event_unref(c->pub[i]->sending);
                free(c->pub[i]->key);
                free(c->pub[i]->name);
                free(c->pub[i]);
        }
        free(c->pub);
        c->local_src = sd_event_source_disable_unref(c->local_src);
        store_watch_free(c->local_watch);
        c->done_src = sd_event_source_disable_unref(c->done_src);
        c->lease_timer = sd_event_source_disable_unref(c->lease_timer);
        c->flush_timer = sd_event_source_disable_unref(c->flush_timer);
        safe_close(c->done_fd);
        safe_close(c->stop_fd);
        sd_event_unref(c->event);
        free(c->endpoints);
        free(c->prefix);
        free(c->password);
        free(c->host_id);
        free(c->host_value);
        free(c->in_use);
        free(c);
        return NULL;
}

#else /* !HAVE_STORE_ETCD */

int cluster_new(sd_event *e, const struct tend_cluster_options *o, struct store *local,
                const struct cluster_ops *ops, void *userdata, struct cluster **ret) {
        log_error("--store %s: this tend was built without libcurl (no etcd client)", o->store);
        return -EOPNOTSUPP;
}

struct cluster *cluster_free(struct cluster *c) {
        return NULL;
}

const char *cluster_host_id(const struct cluster *c) {
        return "";
}

bool cluster_host_id_in_use(const struct cluster *c) {
        return false;
}

bool cluster_host_eligible(const struct cluster *c, const struct unit_cluster_keys *ck) {
        return true;
}

#endif
