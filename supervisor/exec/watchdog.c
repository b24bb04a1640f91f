/* SPDX-License-Identifier: MIT */
/*
 * Watchdog leases in the store (watchdog.h; SPEC §4 "Watchdog").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "watchdog.h"

struct watchdog_leases {
        sd_event *event;
        sd_event_source *source;
        struct store *store;
        struct store_watch *watch;
        watchdog_expired_t expired;
        void *userdata;
};

static int on_watch(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static int make_watch(struct watchdog_leases *w) {
        w->source = sd_event_source_disable_unref(w->source);
        w->watch = store_watch_free(w->watch);
        int k = store_watch(w->store, STORE_EPHEMERAL, WATCHDOG_KEY_PREFIX, &w->watch);
        if (k >= 0 && w->event)
                k = sd_event_add_io(w->event, &w->source, store_watch_fd(w->watch), EPOLLIN, on_watch, w);
        return k;
}

static void key_to_name(const char *key, char ret[static STORE_KEY_MAX + 1]) {
        snprintf(ret, STORE_KEY_MAX + 1, "%s", key + strlen(WATCHDOG_KEY_PREFIX));
}

int watchdog_leases_dispatch(struct watchdog_leases *w) {
        struct store_event *ev = NULL;
        int k;
        while ((k = store_watch_next(w->watch, &ev)) == 0) {
                if (ev->type == STORE_EVENT_DELETE && ev->cause == STORE_CAUSE_EXPIRED) {
                        char name[STORE_KEY_MAX + 1];
                        key_to_name(ev->key, name);
                        w->expired(w->userdata, name, ev->prev_revision);
                }
                ev = store_event_unref(ev);
        }
        if (k == -EAGAIN)
                return 0;
        if (k != -ENOBUFS)
                return k;
        /* Fell behind (a burst of renewals): watch again; an expiry dropped
         * with the old queue is found by the owner's check of every lease. */
        log_debug("the watchdog leases' watch fell behind: watching again");
        k = make_watch(w);
        if (k < 0)
                return k;
        w->expired(w->userdata, NULL, 0);
        return 1;
}

static int on_watch(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        int k = watchdog_leases_dispatch(userdata);
        if (k < 0)
                log_error_errno(k, "watchdog leases: %m");
        return 0;
}

int watchdog_leases_new(sd_event *event, struct store *store, watchdog_expired_t expired, void *userdata,
                        struct watchdog_leases **ret) {
        if (!store || !expired || !ret)
                return -EINVAL;
        struct watchdog_leases *w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->event = event ? sd_event_ref(event) : NULL;
        w->store = store_ref(store);
        w->expired = expired;
        w->userdata = userdata;
        int k = make_watch(w);
        if (k < 0) {
                watchdog_leases_free(w);
                return k;
        }
        *ret = w;
        return 0;
}

static void lease_key(const char *name, char ret[static STORE_KEY_MAX + 1]) {
        snprintf(ret, STORE_KEY_MAX + 1, WATCHDOG_KEY_PREFIX "%s", name);
}

int watchdog_lease_set(struct watchdog_leases *w, const char *name, usec_t ttl, pid_t main_pid,
                       uint64_t *revision) {
        if (!w || !name || !revision || ttl == 0)
                return -EINVAL;
        if (ttl > STORE_TTL_MAX_USEC)
                ttl = STORE_TTL_MAX_USEC;
        char key[STORE_KEY_MAX + 1], value[64];
        lease_key(name, key);
        int n = snprintf(value, sizeof value, "{\"main_pid\":%d,\"usec\":%llu}", (int) main_pid,
                         (unsigned long long) ttl);
        if (*revision)
                return store_update(w->store, STORE_EPHEMERAL, key, value, (size_t) n, *revision, ttl, revision);
        int k = store_create(w->store, STORE_EPHEMERAL, key, value, (size_t) n, ttl, revision);
        if (k == 0) {
                /* Not ours (cannot happen: one lease per unit, cleared at
                 * each stop): replace it, without an expiry. */
                (void) store_delete(w->store, STORE_EPHEMERAL, key, STORE_REV_ANY, NULL);
                k = store_create(w->store, STORE_EPHEMERAL, key, value, (size_t) n, ttl, revision);
        }
        return k;
}

int watchdog_lease_clear(struct watchdog_leases *w, const char *name, uint64_t *revision) {
        if (!w || !name || !revision)
                return -EINVAL;
        if (*revision == 0)
                return 0;
        char key[STORE_KEY_MAX + 1];
        lease_key(name, key);
        uint64_t expected = *revision;
        *revision = 0;
        int k = store_delete(w->store, STORE_EPHEMERAL, key, expected, NULL);
        return k < 0 ? k : 0;
}

int watchdog_lease_alive(struct watchdog_leases *w, const char *name, uint64_t revision) {
        if (!w || !name)
                return -EINVAL;
        char key[STORE_KEY_MAX + 1];
        lease_key(name, key);
        struct store_event *ev = NULL;
        int k = store_get(w->store, STORE_EPHEMERAL, key, &ev);
        if (k == -ENOENT)
                return 0;
        if (k < 0)
                return k;
        bool alive = ev->revision == revision;
        store_event_unref(ev);
        return alive;
}

struct watchdog_leases *watchdog_leases_free(struct watchdog_leases *w) {
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->source);
        store_watch_free(w->watch);
        store_unref(w->store);
        sd_event_unref(w->event);
        free(w);
        return NULL;
}
