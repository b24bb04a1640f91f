/* SPDX-License-Identifier: MIT */
/*
 * Singleton units on etcd (cluster.h; docs/cluster.md §5, §6): acquired by a
 * create of singletons/NAME under the host's lease, waited for on a watch of
 * singletons/ (no polling), fenced against the lease's local expiry
 * (store_lease_expiry) by tend's loop and, when that loop cannot run, by a
 * fence process (fence.h).
 *
 * Deadlines, from E = store_lease_expiry() (the last renewal's send time +
 * TTL on this host's CLOCK_MONOTONIC; etcd cannot end the lease before it,
 * clock rates aside):
 *   Dk = E − SAFETY − drift       the fence kills the unit's cgroup
 *   Dg = Dk − stop timeout        tend stops the unit the ordinary way
 * drift = TTL/100 (20× NTP's 500 ppm bound on a monotonic clock's rate),
 * SAFETY = 200 ms (the kill taking effect). The loop looks every TTL/3 while
 * it holds one, which a renewal every TTL/3 keeps ≥ 1/3 TTL ahead of Dg
 * as long as margin = stop timeout + SAFETY + drift < TTL/3.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cluster.h"
#include "log.h"
#include "macro.h"

#ifdef HAVE_STORE_ETCD
#include "cluster-internal.h"

#define SAFETY_USEC (200 * USEC_PER_MSEC)
#define FENCE_ROUNDS_USEC (100 * USEC_PER_MSEC) /* the fence's rounds of kills (fence.c: 16 × 5 ms) */

static usec_t drift(const struct cluster *c) {
        return c->o->ttl / 100;
}

static struct singleton *single_find(const struct cluster *c, const char *name) {
        for (size_t i = 0; i < c->n_singles; i++)
                if (streq(c->singles[i]->name, name))
                        return c->singles[i];
        return NULL;
}

/* E − SAFETY − drift: when the fence kills (0: the lease is gone or unknown). */
static usec_t kill_deadline(const struct cluster *c) {
        /* Before the registration thread hands over (c->lease is its own then), a
         * lease carried across a re-exec counts from its expiry at the exec. */
        usec_t e = c->registered && c->lease ? store_lease_expiry(c->lease) : c->adopt_expiry;
        usec_t m = SAFETY_USEC + drift(c);
        return e == USEC_INFINITY ? e : e > m ? e - m : 0;
}

usec_t cluster_kill_deadline(const struct cluster *c) {
        return kill_deadline(c);
}

static usec_t stop_deadline(const struct singleton *s) {
        usec_t k = kill_deadline(s->c), m = s->margin - SAFETY_USEC - drift(s->c);
        return k == USEC_INFINITY ? k : k > m ? k - m : 0;
}

static void arm_check(struct cluster *c);
static void try_acquire(struct singleton *s);

/* The holder a singletons/ value names ("?" when it names none); NULL: out of memory. */
static char *holder_of(const char *value) {
        struct json_object *o = json_tokener_parse(value), *h;
        char *r = strdup(o && json_object_object_get_ex(o, "host", &h) ? json_object_get_string(h) : "?");
        json_object_put(o);
        return r;
}

/* A singleton this host came to want after the watch's snapshot (a start, a
 * reload adding Singleton=) heard no event of its key: its holder is the
 * mirror's (cluster-view.c), the watch's copy of singletons/. */
static void holder_from_mirror(struct singleton *s) {
        const struct store_event *ev = s->holder ? NULL : cluster_mirror_get(s->c, MIRROR_SINGLES, s->key);
        if (ev && ev->type == STORE_EVENT_PUT)
                s->holder = holder_of(ev->value);
}

/* Singleton=yes added by a reload to a unit running here without the key
 * (QA20 M2): another host holds it (holder, or NULL: an acquire found it
 * taken), so this host's copy stops; this host still wants it. */
static void stop_unheld_run(struct singleton *s, const char *holder) {
        if (!s->unheld_run)
                return;
        s->unheld_run = false;
        log_warning("%s: singleton: host %s holds its key in etcd %s: stopping this host's copy (it ran before "
                    "Singleton=yes); this host takes over when the holder lets go", s->name,
                    holder ? holder : "another", s->c->endpoints);
        s->c->ops->lost(s->c->userdata, s->name);
}

/* ---- release: the key deleted (at its revision) once tend has let go ---- */

static void release_done(struct store_op *op, void *userdata) {
        struct singleton *s = userdata;
        s->acquiring = false;
        if (s->c->closing)
                return;
        if (op->result >= 0 || op->result == -ENOENT) {
                s->releasing = false; /* gone (or someone else's by now): the watch says what next */
                try_acquire(s); /* its DELETE came while this was in flight: nothing else tries */
        } else
                arm_check(s->c); /* etcd away: again at the next check */
}

static void try_release(struct singleton *s) {
        if (!s->releasing || s->acquiring || !s->c->registered || !s->c->etcd ||
            now_usec(CLOCK_MONOTONIC) < s->release_after)
                return;
        s->op = (struct store_op) { .type = STORE_OP_DELETE, .keyspace = STORE_EPHEMERAL, .key = s->key,
                                    .expected = s->token, .done = release_done, .userdata = s };
        s->acquiring = store_submit(s->c->etcd, &s->op) >= 0;
}

/* The lease could not be renewed before Dg (or the key went): stop the unit
 * now; the fence stays armed at Dk in case the stop does not finish. */
static void single_lose(struct singleton *s, const char *why) {
        struct cluster *c = s->c;
        log_warning("%s: singleton: %s (etcd %s): stopping it before its lease can end on etcd", s->name, why,
                    c->endpoints);
        s->held = false;
        s->letting_go = false;
        s->lost_why = NULL;
        s->releasing = true;
        if (s->fence) {
                /* The carried lease ended during a re-exec: another host may hold the key
                 * already, and the new lease's Dk is no deadline of this key: kill now. */
                usec_t dk = c->adopt_lost ? now_usec(CLOCK_MONOTONIC) : kill_deadline(c);
                (void) fence_set(s->fence, dk, s->pid, s->cgroup);
                /* it fires at Dk, then exits — unless this host holds the key again
                 * first: then no other host can, and its unit's cgroup is the next
                 * run's (acquire_done stands it down before that run starts) */
                fence_free(s->lost_fence);
                s->lost_fence = s->fence;
                s->fence = NULL;
        }
        s->pid = 0; /* the run it fences is over or fenced: no later fence gets its pid */
        /* the key goes only once the unit is surely dead — its stop may take up to
         * TimeoutStopSec=, and another host starts it at the key's DELETE */
        s->release_after = kill_deadline(c) + FENCE_ROUNDS_USEC;
        c->ops->lost(c->userdata, s->name);
        try_release(s);
        arm_check(c); /* the release, at release_after */
}

/* ---- the check: every TTL/3 while one is held (or being released) ---- */

static int on_check(sd_event_source *src, uint64_t usec, void *userdata) {
        struct cluster *c = userdata;
        usec_t now = now_usec(CLOCK_MONOTONIC);

        for (size_t i = 0; i < c->n_singles; i++) {
                struct singleton *s = c->singles[i];
                if (s->held && s->lost_why)
                        single_lose(s, s->lost_why);
                else if (s->held && now >= stop_deadline(s))
                        single_lose(s, kill_deadline(c) ?
                                    "its lease was not renewed in time" : "its lease has ended");
                else if (s->held && s->fence)
                        (void) fence_set(s->fence, kill_deadline(c), s->pid, s->cgroup);
                else if (s->releasing)
                        try_release(s);
                else if (s->stale_lease)
                        try_acquire(s);
        }
        arm_check(c);
        return 0;
}

static void arm_check(struct cluster *c) {
        bool any = false;
        for (size_t i = 0; i < c->n_singles && !any; i++)
                any = c->singles[i]->held || c->singles[i]->releasing || c->singles[i]->stale_lease;
        if (!any || c->closing) {
                if (c->check_timer)
                        (void) sd_event_source_set_enabled(c->check_timer, SD_EVENT_OFF);
                return;
        }
        usec_t now = now_usec(CLOCK_MONOTONIC), at = now + c->o->ttl / 3;
        for (size_t i = 0; i < c->n_singles; i++) {
                const struct singleton *s = c->singles[i];
                if (s->held && (s->lost_why || stop_deadline(s) < at))
                        at = s->lost_why ? 0 : stop_deadline(s);
                if (s->releasing && s->release_after > now && s->release_after < at)
                        at = s->release_after;
        }
        if (c->check_timer) {
                (void) sd_event_source_set_time(c->check_timer, at);
                (void) sd_event_source_set_enabled(c->check_timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_add_time(c->event, &c->check_timer, CLOCK_MONOTONIC, at, 0, on_check, c);
}

/* ---- acquire: a create of singletons/NAME under the host's lease ---- */

/* The revision of s's key when the watch's copy shows it under lease (0: not). */
static uint64_t mirror_under_lease(const struct singleton *s, int64_t lease) {
        const struct store_event *ev = cluster_mirror_get(s->c, MIRROR_SINGLES, s->key);
        if (!ev || ev->type != STORE_EVENT_PUT)
                return 0;
        struct json_object *o = json_tokener_parse(ev->value), *l;
        bool ours = o && json_object_object_get_ex(o, "lease", &l) && json_object_get_int64(l) == lease;
        json_object_put(o);
        return ours ? ev->revision : 0;
}

/* The key is this host's at revision token: held (a fence armed, the unit started). */
static void hold(struct singleton *s, uint64_t token) {
        struct cluster *c = s->c;
        s->token = token;
        if (!s->wanted) { /* stopped (or no longer eligible) meanwhile: given back, nothing started */
                s->releasing = true;
                s->release_after = 0;
                try_release(s);
                arm_check(c);
                return;
        }
        s->held = true;
        s->unheld_run = false; /* a run from before Singleton=yes: the fence covers its cgroup now */
        s->lost_fence = fence_free(s->lost_fence); /* held again: the new fence covers the unit */
        free(s->holder);
        s->holder = strdup(c->host_id);
        int k = fence_new(s->name, &s->fence);
        if (k < 0) { /* no fence, no run: let go */
                single_lose(s, "no fence process (fork failed)");
                return;
        }
        (void) fence_set(s->fence, kill_deadline(c), 0, s->cgroup); /* a run still stopping included */
        log_notice("%s: singleton held by this host (fencing token %llu, fence %d)", s->name,
                   (unsigned long long) s->token, (int) fence_pid(s->fence));
        arm_check(c);
        c->ops->acquired(c->userdata, s->name);
}

static bool lease_is(const struct cluster *c, int64_t lease) {
        return c->registered && c->lease && store_etcd_lease_id(c->lease) == lease;
}

static void acquire_done(struct store_op *op, void *userdata) {
        struct singleton *s = userdata;
        struct cluster *c = s->c;

        s->acquiring = false;
        free((void *) op->value);
        if (c->closing)
                return;
        /* the create landed though its answer says otherwise (lost, or retried): the
         * watch's copy shows the key under this lease: the outcome follows the key */
        uint64_t rev = op->result > 0 || !lease_is(c, s->acquire_lease) ? 0 :
                       mirror_under_lease(s, s->acquire_lease);
        if (rev > 0) {
                log_notice("%s: singleton: its key in etcd %s is this host's (the create's answer was %s)",
                           s->name, c->endpoints, op->result == 0 ? "\"taken\"" : "an error");
                hold(s, rev);
                return;
        }
        if (op->result == 0) {
                log_info("%s: singleton held by another host: waiting for its key to go", s->name);
                holder_from_mirror(s);
                stop_unheld_run(s, s->holder);
                return;
        }
        if (op->result == -ENOENT && c->registered && c->lease && !lease_is(c, s->acquire_lease)) {
                try_acquire(s); /* its lease ended, and this host registered again meanwhile */
                return;
        }
        if (op->result < 0) {
                log_warning_errno(op->result, "%s: singleton: etcd %s: cannot acquire (%m): again at the "
                                  "next change of its key or registration", s->name, c->endpoints);
                return;
        }
        hold(s, op->revision);
}

static void try_acquire(struct singleton *s) {
        struct cluster *c = s->c;
        if (!s->wanted || s->held || s->acquiring || s->releasing || s->holder || !c->registered || !c->lease ||
            c->closing || !c->single_snapshot_done)
                return;
        /* a lease past this unit's stop deadline would lose the key at the next check:
         * no acquire (and no fence) until a renewal gets through */
        s->stale_lease = now_usec(CLOCK_MONOTONIC) >= stop_deadline(s);
        if (s->stale_lease) {
                arm_check(c);
                return;
        }
        char *value = NULL;
        s->acquire_lease = store_etcd_lease_id(c->lease);
        if (asprintf(&value, "{\"host\":\"%s\",\"lease\":\"%lld\"}", c->host_id,
                     (long long) s->acquire_lease) < 0)
                return;
        s->op = (struct store_op) { .type = STORE_OP_CREATE, .keyspace = STORE_EPHEMERAL, .key = s->key,
                                    .value = value, .size = strlen(value), .lease = c->lease,
                                    .done = acquire_done, .userdata = s };
        s->acquiring = true;
        if (store_submit(c->etcd, &s->op) < 0) {
                s->acquiring = false;
                free(value);
        }
}

/* ---- the watch of singletons/ ---- */

void cluster_singles_event(struct cluster *c, const struct store_event *ev) {
        if (ev->type == STORE_EVENT_SNAPSHOT_DONE) {
                c->single_snapshot_done = true;
                for (size_t i = 0; i < c->n_singles; i++)
                        try_acquire(c->singles[i]);
                return;
        }
        struct singleton *s = single_find(c, ev->key + strlen("singletons/"));
        if (!s)
                return;
        free(s->holder);
        s->holder = NULL;
        if (ev->type == STORE_EVENT_PUT) {
                struct json_object *o = json_tokener_parse(ev->value), *l;
                s->holder = holder_of(ev->value);
                bool our_lease = o && json_object_object_get_ex(o, "lease", &l) && c->registered && c->lease &&
                                 json_object_get_int64(l) == store_etcd_lease_id(c->lease);
                json_object_put(o);
                if (s->held && ev->revision != s->token)
                        single_lose(s, "its key was taken over");
                else if (!s->held && !our_lease)
                        stop_unheld_run(s, s->holder);
                else if (!s->held && !s->acquiring && !s->releasing && our_lease) {
                        /* under this tend's live lease, not known held: a create answered after
                         * a re-exec's exec (nothing ran it): given back, then acquired anew with a fence */
                        log_notice("%s: singleton: its key is this host's from before a re-exec: released, "
                                   "acquired anew", s->name);
                        s->token = ev->revision;
                        s->releasing = true;
                        try_release(s);
                        arm_check(c);
                }
                return;
        }
        if (s->held) /* our key went: the lease ended on etcd, or someone deleted it */
                single_lose(s, ev->cause == STORE_CAUSE_EXPIRED ? "its lease ended on etcd" : "its key was deleted");
        s->releasing = false; /* nothing left to delete */
        try_acquire(s);
}

/* A new watch of singletons/ is coming: the holders are unknown until its snapshot. */
void cluster_singles_rewatch(struct cluster *c) {
        c->single_snapshot_done = false;
        for (size_t i = 0; i < c->n_singles; i++) {
                free(c->singles[i]->holder);
                c->singles[i]->holder = NULL;
        }
}

/* ---- daemon-reexec (reexec-cluster.c) ---- */

/* A carried singleton's fence, taken back: alive (its pidfd not readable: it
 * has not fired) → 0; gone → -ESRCH. */
static int adopt_fence(struct singleton *s, struct carried_single *cs) {
        struct pollfd p = { .fd = cs->fence_pidfd, .events = POLLIN };
        if (cs->fence_fd < 0 || cs->fence_pidfd < 0 || poll(&p, 1, 0) != 0)
                return -ESRCH;
        int k = fence_adopt(cs->fence_fd, cs->fence_pid, &s->fence);
        if (k >= 0)
                cs->fence_fd = -1;
        return k;
}

void cluster_singles_adopt(struct cluster *c, struct cluster_carried *cc) {
        for (size_t i = 0; i < cc->n_singles; i++) {
                struct carried_single *cs = &cc->singles[i];
                struct singleton **a = reallocarray(c->singles, c->n_singles + 1, sizeof(*a));
                struct singleton *s = a ? calloc(1, sizeof(*s)) : NULL;
                if (a)
                        c->singles = a;
                if (!s || !(s->name = strdup(cs->name)) || asprintf(&s->key, "singletons/%s", cs->name) < 0) {
                        log_error("%s: singleton: not carried across the re-exec (out of memory)", cs->name);
                        if (s)
                                free(s->name);
                        free(s);
                        continue;
                }
                *s = (struct singleton) { .c = c, .name = s->name, .key = s->key, .margin = cs->margin,
                                          .token = cs->token, .releasing = cs->releasing, .pid = cs->pid,
                                          .cgroup = TAKE_PTR(cs->cgroup), .fence_pidfd = -1, .wanted = cs->wanted,
                                          .letting_go = cs->held && cs->letting_go };
                c->singles[c->n_singles++] = s;
                if (!cs->held)
                        continue;
                int k = c->adopt_id ? adopt_fence(s, cs) : -ENOENT;
                s->held = true;
                s->holder = strdup(c->host_id);
                if (k < 0) { /* lost at the first check, in the loop: the units are loaded by then */
                        s->lost_why = k == -ENOENT ? "the host lease was not carried across the re-exec" :
                                      "its fence process did not survive the re-exec";
                        continue;
                }
                (void) fence_set(s->fence, kill_deadline(c), s->pid, s->cgroup);
                log_notice("%s: singleton still held by this host across the re-exec (fencing token %llu, fence %d)",
                           s->name, (unsigned long long) s->token, (int) fence_pid(s->fence));
        }
        arm_check(c);
}

void cluster_singles_renewed(struct cluster *c) {
        if (c->adopt_lost)
                for (size_t i = 0; i < c->n_singles; i++)
                        if (c->singles[i]->held)
                                single_lose(c->singles[i], "the host lease ended during the re-exec");
        if (c->n_singles > 0)
                (void) on_check(NULL, 0, c);
        /* registered (again, under a new lease): every singleton this host wants and
         * nobody holds is tried now; an acquire under an ended lease failed ENOENT */
        for (size_t i = 0; i < c->n_singles; i++)
                try_acquire(c->singles[i]);
}

void cluster_singles_free(struct cluster *c) {
        for (size_t i = 0; i < c->n_singles; i++) {
                struct singleton *s = c->singles[i];
                fence_free(s->fence); /* stand down: tend stopped the unit itself */
                fence_free(s->lost_fence);
                free(s->name);
                free(s->key);
                free(s->holder);
                free(s->cgroup);
                free(s);
        }
        free(c->singles);
        c->singles = NULL;
        c->n_singles = 0;
        c->check_timer = sd_event_source_disable_unref(c->check_timer);
}

/* ---- the manager's side ---- */

int cluster_singleton_want(struct cluster *c, const char *name, usec_t stop_timeout) {
        struct singleton *old = single_find(c, name);
        if (old) { /* wanted again (a start after a stop): a hold being given up is kept */
                old->letting_go = false;
                old->ineligible = false;
                if (!old->wanted)
                        log_info("%s: singleton: waiting to hold its key in etcd %s", name, c->endpoints);
                old->wanted = true;
                try_acquire(old);
                return 0;
        }
        usec_t margin = stop_timeout + SAFETY_USEC + drift(c);
        if (stop_timeout == USEC_INFINITY || margin >= c->o->ttl / 3) {
                log_error("%s: Singleton=yes: the fencing margin (TimeoutStopSec= + 0.2 s + TTL/100) must be "
                          "under a third of --cluster-ttl (%llu s): not started on this host", name,
                          (unsigned long long) (c->o->ttl / USEC_PER_SEC));
                return -ERANGE;
        }
        struct singleton **a = reallocarray(c->singles, c->n_singles + 1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        c->singles = a;
        struct singleton *s = calloc(1, sizeof(*s));
        if (!s || !(s->name = strdup(name)) || asprintf(&s->key, "singletons/%s", name) < 0) {
                if (s)
                        free(s->name);
                free(s);
                return -ENOMEM;
        }
        s->c = c;
        s->margin = margin;
        s->fence_pidfd = -1;
        s->wanted = true;
        c->singles[c->n_singles++] = s;
        if (c->single_snapshot_done)
                holder_from_mirror(s);
        log_info("%s: singleton: waiting to hold its key in etcd %s", name, c->endpoints);
        try_acquire(s);
        return 0;
}

bool cluster_singleton_may_run(struct cluster *c, const char *name, uint64_t *ret_token) {
        struct singleton *s = single_find(c, name);
        if (!s || !s->held || now_usec(CLOCK_MONOTONIC) >= stop_deadline(s))
                return false;
        if (ret_token)
                *ret_token = s->token;
        return true;
}

void cluster_singleton_target(struct cluster *c, const char *name, pid_t pid, const char *cgroup_dir) {
        struct singleton *s = single_find(c, name);
        if (!s)
                return;
        s->pid = pid;
        free(s->cgroup);
        s->cgroup = cgroup_dir ? strdup(cgroup_dir) : NULL;
        if (s->held && s->fence)
                (void) fence_set(s->fence, kill_deadline(c), s->pid, s->cgroup);
}

const char *cluster_singleton_holder(const struct cluster *c, const char *name) {
        const struct singleton *s = c ? single_find(c, name) : NULL;
        return s ? s->holder : NULL;
}

/* ---- started, stopped, reloaded (QA20 M1–M4; docs/cluster.md §5) ---- */

/* A hold given up by this host (a stop, Hosts= narrowed), the unit down: its
 * fence kills what is left of its cgroup now, and the key is deleted once
 * the fence's rounds are over — never while the unit could still run. */
static void let_go(struct singleton *s) {
        struct cluster *c = s->c;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        log_info("%s: singleton: stopped on this host: its key in etcd %s goes, another host that wants it "
                 "takes it", s->name, c->endpoints);
        s->held = false;
        s->letting_go = false;
        s->releasing = true;
        if (s->fence) {
                (void) fence_set(s->fence, now, s->pid, s->cgroup);
                fence_free(s->lost_fence);
                s->lost_fence = s->fence; /* fires now, then exits */
                s->fence = NULL;
        }
        s->pid = 0;
        s->release_after = now + FENCE_ROUNDS_USEC;
        try_release(s);
        arm_check(c);
}

void cluster_singleton_unwant(struct cluster *c, const char *name, bool unit_down) {
        struct singleton *s = single_find(c, name);
        if (!s)
                return;
        if (s->wanted && !s->held)
                log_info("%s: singleton: this host no longer waits for its key", name);
        s->wanted = false;
        s->asked = false;
        s->unheld_run = false;
        s->ineligible = false;
        if (s->held)
                s->letting_go = true;
        if (s->held && unit_down)
                let_go(s);
}

bool cluster_singleton_set_ineligible(struct cluster *c, const char *name, bool set) {
        struct singleton *s = single_find(c, name);
        bool was = s && s->ineligible;
        if (s)
                s->ineligible = set;
        return was;
}

void cluster_singleton_unit_down(struct cluster *c, const char *name) {
        struct singleton *s = single_find(c, name);
        if (s && s->held && s->letting_go)
                let_go(s);
}

void cluster_singleton_forget(struct cluster *c, const char *name) {
        struct singleton *s = single_find(c, name);
        if (!s)
                return;
        s->wanted = false;
        s->asked = false;
        s->unheld_run = false;
        s->letting_go = false;
        if (!s->held)
                return;
        /* the unit runs on as an ordinary one: its fence stands down, the key goes now */
        log_notice("%s: Singleton= removed: its key in etcd %s goes; the unit runs on here as an ordinary one",
                   name, c->endpoints);
        s->held = false;
        s->fence = fence_free(s->fence);
        s->releasing = true;
        s->release_after = 0;
        s->pid = 0;
        try_release(s);
        arm_check(c);
}

void cluster_singleton_running(struct cluster *c, const char *name) {
        struct singleton *s = single_find(c, name);
        if (!s || s->held || !s->wanted)
                return;
        s->unheld_run = true;
        if (s->holder && !streq(s->holder, c->host_id))
                stop_unheld_run(s, s->holder);
}

bool cluster_singleton_waiting(const struct cluster *c, const char *name) {
        const struct singleton *s = c ? single_find(c, name) : NULL;
        return s && s->wanted && !s->held;
}

void cluster_singleton_ask(struct cluster *c, const char *name) {
        struct singleton *s = single_find(c, name);
        if (s && s->wanted && !s->held)
                s->asked = true;
}

bool cluster_singleton_take_asked(struct cluster *c, const char *name) {
        struct singleton *s = single_find(c, name);
        bool asked = s && s->asked;
        if (s)
                s->asked = false;
        return asked;
}

#else /* !HAVE_STORE_ETCD */

bool cluster_singleton_set_ineligible(struct cluster *c, const char *name, bool set) {
        return false;
}

void cluster_singleton_unwant(struct cluster *c, const char *name, bool unit_down) {
}

void cluster_singleton_unit_down(struct cluster *c, const char *name) {
}

void cluster_singleton_forget(struct cluster *c, const char *name) {
}

void cluster_singleton_running(struct cluster *c, const char *name) {
}

bool cluster_singleton_waiting(const struct cluster *c, const char *name) {
        return false;
}

void cluster_singleton_ask(struct cluster *c, const char *name) {
}

bool cluster_singleton_take_asked(struct cluster *c, const char *name) {
        return false;
}

int cluster_singleton_want(struct cluster *c, const char *name, usec_t stop_timeout) {
        return -EOPNOTSUPP;
}

bool cluster_singleton_may_run(struct cluster *c, const char *name, uint64_t *ret_token) {
        return false;
}

void cluster_singleton_target(struct cluster *c, const char *name, pid_t pid, const char *cgroup_dir) {
}

const char *cluster_singleton_holder(const struct cluster *c, const char *name) {
        return NULL;
}

#endif
