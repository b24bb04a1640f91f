/* SPDX-License-Identifier: MIT */
/*
 * Units' watchdogs as leases in the store (SPEC §2.4, §4 "Watchdog";
 * docs/notify.md): a unit with WatchdogSec= holds the ephemeral key
 * `watchdog/NAME` while it runs, TTL = WatchdogSec, rewritten by each
 * WATCHDOG=1. Nothing here keeps a timer: the store's own expiry (its timerfd,
 * armed at the earliest deadline) deletes a lease nobody renewed, with cause
 * `expired`, and this module learns it through a store watch on the
 * `watchdog/` prefix — the same event any `tendctl watch --ephemeral` client
 * sees. tend's own delete (a stop) has cause `deleted` and is never a
 * watchdog failure.
 *
 * The caller keeps each lease's revision (0: no lease) and compares an
 * expiry's revision with it, so an expiry of an older lease (a previous run)
 * is never taken for the current one.
 *
 * Single-threaded: every function runs in tend's event loop.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "store.h"
#include "time-util.h"

#define WATCHDOG_KEY_PREFIX "watchdog/"

struct watchdog_leases;

/*
 * An expiry: the lease of unit `name` whose last revision was `revision`
 * expired. name NULL means "the watch was re-made after it fell behind and
 * expiries may have been missed": check every lease held with
 * watchdog_lease_alive().
 */
typedef void (*watchdog_expired_t)(void *userdata, const char *name, uint64_t revision);

/*
 * Watches store's ephemeral `watchdog/` keys (store is referenced). With
 * event non-NULL the watch's fd is in that loop and dispatched there (and
 * moved to the new fd when the watch is re-made); without, the caller calls
 * watchdog_leases_dispatch() (tests). *ret is the caller's
 * (watchdog_leases_free). Errors: those of store_watch() and sd-event.
 */
int watchdog_leases_new(sd_event *event, struct store *store, watchdog_expired_t expired, void *userdata,
                        struct watchdog_leases **ret);

/*
 * Drains the watch: calls expired() for every DELETE with cause `expired`.
 * Returns 0, or 1 when the watch fell behind and was re-made (expired() was
 * called with name NULL), or a negative errno (the store is gone: -EPIPE).
 */
int watchdog_leases_dispatch(struct watchdog_leases *w);

/*
 * Creates (*revision == 0) or renews (*revision = the lease's last revision)
 * unit name's lease for ttl µs (> 0), recording main_pid in its value.
 * On success *revision is the new revision and 1 is returned. A renewal that
 * finds the lease expired answers 0 and leaves *revision as it was: the
 * expiry reaches expired() through the watch. Errors: the store's.
 */
int watchdog_lease_set(struct watchdog_leases *w, const char *name, usec_t ttl, pid_t main_pid,
                       uint64_t *revision);

/* Deletes unit name's lease if it is still at *revision (cause `deleted`);
 * *revision becomes 0. A vacuous 0 when there is none. */
int watchdog_lease_clear(struct watchdog_leases *w, const char *name, uint64_t *revision);

/* 1 if unit name's lease is alive at revision, 0 if it is gone (expired),
 * or a negative errno. */
int watchdog_lease_alive(struct watchdog_leases *w, const char *name, uint64_t revision);

/* Ends the watch, drops the store reference; accepts NULL; returns NULL. */
struct watchdog_leases *watchdog_leases_free(struct watchdog_leases *w);
