/* SPDX-License-Identifier: MIT */
/*
 * etcd: the manager's side of singleton units (docs/cluster.md §5, tendctl(1)
 * "CLUSTER"): what the cluster agent asks (acquired: start it; lost: stop
 * it), and what a client or a reload asks of a singleton.
 *
 * - `tendctl start|restart NAME` of a singleton another host holds: refused
 *   at once, naming the holder; this host stands by for it. One nobody is
 *   known to hold (etcd unreachable, or nobody runs it): queued — the answer
 *   comes at once (the start is accepted), the unit waits for its key
 *   (`tendctl status` says so) and starts when this host holds it, driven by
 *   the store's completions and its watch (QA20 M1). A host its Hosts=/
 *   HostMetadata= do not name: refused, naming them (QA20 M4).
 * - `tendctl stop NAME`: this host stops contending; a key it holds goes
 *   once the unit is down, and another host that wants it takes over (QA20 M3).
 * - daemon-reload: Singleton=yes added to a running unit makes this host
 *   contend (the losers stop their copy, QA20 M2); removed, the key goes;
 *   Hosts= no longer naming this host stops the unit here and gives up its
 *   key (QA20 M4).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cgroup.h"
#include "cluster.h"
#include "jobs.h"
#include "libexit.h"
#include "log.h"
#include "manager-internal.h"
#include "singleflight.h"
#include "unit-file.h"
#include "unit.h"

/* ---- what the cluster agent asks (cluster.h's ops) ---- */

static void cluster_acquired(void *userdata, const char *name) {
        struct manager *m = userdata;
        struct unit *u = manager_find_unit(m, name);
        bool asked = cluster_singleton_take_asked(m->cluster, name);
        if (!u || m->shutting_down)
                return;
        if (!asked) {
                manager_start_unit(m, u);
                return;
        }
        /* a client's queued start: explicit, as `tendctl start` (its start limit reset) */
        sf_resolution *r = manager_join_own(m, u);
        if (r)
                unit_start(u, r, true);
}

static void cluster_lost(void *userdata, const char *name) {
        struct manager *m = userdata;
        struct unit *u = manager_find_unit(m, name);
        if (u && !m->shutting_down)
                jobs_stop(m->jobs, u, true);
}

const struct cluster_ops manager_cluster_ops = { .acquired = cluster_acquired, .lost = cluster_lost };

/* ---- a client's start ---- */

/* Answers a start at once (ok, or refused with reason): 1, or sf_table_join()'s error. */
static int answer_now(struct manager *m, struct unit *u, bool ok, const char *reason, sf_waiter **ret_waiter) {
        sf_resolution *r = NULL;
        int k = sf_table_join(m->flights, u->name, ret_waiter, &r);
        if (k < 0 || !r)
                return k < 0 ? k : 1; /* a flight under way: its answer is this one's */
        struct unit_outcome *o = calloc(1, sizeof(*o));
        if (o) {
                *o = (struct unit_outcome) { .ok = ok, .result = UNIT_RESULT_SUCCESS };
                snprintf(o->reason, sizeof o->reason, "%s", reason);
                if (sf_resolution_answer_take(r, o) < 0)
                        free(o);
        }
        sf_resolution_free(r); /* without an answer (out of memory): `abandoned` */
        return 1;
}

int manager_cluster_start_refused(struct manager *m, struct unit *u, sf_waiter **ret_waiter) {
        char why[400];
        if (!m->cluster || !u->file->singleton)
                return 0;
        if (!cluster_host_eligible(m->cluster, u->file->cluster_keys)) {
                snprintf(why, sizeof why, "this host (%s) is not one its Hosts=/HostMetadata= name",
                         cluster_host_id(m->cluster));
                log_info("%s: start refused: %s", u->name, why);
                return answer_now(m, u, false, why, ret_waiter);
        }
        int k = cluster_singleton_want(m->cluster, u->name, u->file->timeout_stop);
        if (k < 0)
                return answer_now(m, u, false, "its fencing margin does not fit the cluster's lease TTL "
                                  "(see tend's log)", ret_waiter);
        if (cluster_singleton_may_run(m->cluster, u->name, NULL))
                return 0; /* held here: started as usual */
        const char *holder = cluster_singleton_holder(m->cluster, u->name);
        if (holder && !streq(holder, cluster_host_id(m->cluster))) {
                snprintf(why, sizeof why, "a singleton held by host %s, where it runs; this host "
                         "takes over when %s lets go or its lease ends", holder, holder);
                log_info("%s: start refused: a singleton held by host %s", u->name, holder);
                return answer_now(m, u, false, why, ret_waiter);
        }
        if (cluster_host_id_in_use(m->cluster)) { /* the other tend with this id may hold it (QA20b Low) */
                snprintf(why, sizeof why, "this host's id %s is in use by another tend: no singleton starts "
                         "here until that tend leaves (give each tend its own --host-id)",
                         cluster_host_id(m->cluster));
                log_info("%s: start refused: host id %s in use by another tend", u->name, cluster_host_id(m->cluster));
                return answer_now(m, u, false, why, ret_waiter);
        }
        /* nobody known to hold it (etcd away, or a release under way): queued, it starts at the acquire */
        cluster_singleton_ask(m->cluster, u->name);
        log_notice("%s: start queued: waiting for its singleton key in etcd; it starts when this host holds it",
                   u->name);
        return answer_now(m, u, true, "", ret_waiter);
}

/* ---- a client's stop; a unit down ---- */

void manager_cluster_stopped(struct manager *m, struct unit *u) {
        if (m->cluster)
                cluster_singleton_unwant(m->cluster, u->name, unit_is_dead(u));
}

/* u ended here on its own, not by this host's stop (a dependency's stop, its
 * start limit hit, a clean exit with Restart=no): down, no restart or start
 * under way — as for a stop, its key goes (docs/cluster.md §5). */
static bool ended_on_its_own(struct manager *m, struct unit *u) {
        /* m->resumed: a re-exec puts units back (a freshly loaded one looks dead until then) */
        return !m->shutting_down && !m->resumed && unit_is_dead(u) &&
               (u->pos == UNIT_POS_INACTIVE || u->pos == UNIT_POS_FAILED) &&
               unit_job_state(u) != UNIT_JOB_PENDING && !(u->queued & UNIT_QUEUED_RESTART) &&
               cluster_singleton_may_run(m->cluster, u->name, NULL);
}

void manager_cluster_unit_down(struct manager *m, struct unit *u) {
        if (!m->cluster)
                return;
        cluster_singleton_unit_down(m->cluster, u->name); /* a hold this host gave up (stop, Hosts=) */
        if (u->file->singleton && ended_on_its_own(m, u)) {
                log_info("%s: singleton %s on this host: this host gives up its key", u->name,
                         u->pos == UNIT_POS_FAILED ? "failed" : "ended");
                cluster_singleton_unwant(m->cluster, u->name, true);
        }
}

/* ---- daemon-reload ---- */

/* Singleton=yes on a unit running here without its key: this host contends. */
static void contend_running(struct manager *m, struct unit *u, const struct unit_file *f) {
        if (cluster_singleton_want(m->cluster, u->name, f->timeout_stop) < 0)
                return; /* logged: it keeps running, as an ordinary unit would */
        _cleanup_free_ char *dir = unit_group_dir(data(u)->group);
        cluster_singleton_target(m->cluster, u->name, u->main ? exit_process_pid(u->main) : 0, dir);
        log_info("%s: Singleton=yes added while it runs: this host contends for its key; it stops here if "
                 "another host holds it", u->name);
        cluster_singleton_running(m->cluster, u->name);
}

void manager_cluster_reloaded(struct manager *m, struct unit *u) {
        const struct unit_file *f = u->next_file ? u->next_file : u->file;
        if (!m->cluster)
                return;
        if (!f->singleton) {
                cluster_singleton_forget(m->cluster, u->name);
                return;
        }
        if (!cluster_host_eligible(m->cluster, f->cluster_keys)) {
                bool wanted = cluster_singleton_waiting(m->cluster, u->name) ||
                              cluster_singleton_may_run(m->cluster, u->name, NULL);
                if (!wanted && unit_is_dead(u))
                        return;
                if (unit_is_dead(u))
                        log_info("%s: its Hosts=/HostMetadata= no longer name this host (%s): it no longer "
                                 "waits for its singleton key", u->name, cluster_host_id(m->cluster));
                else
                        log_notice("%s: its Hosts=/HostMetadata= no longer name this host (%s): stopping it here; "
                                   "its singleton key goes once it stopped", u->name, cluster_host_id(m->cluster));
                cluster_singleton_unwant(m->cluster, u->name, false);
                cluster_singleton_set_ineligible(m->cluster, u->name, true);
                jobs_stop(m->jobs, u, true);
                if (unit_is_dead(u))
                        cluster_singleton_unit_down(m->cluster, u->name);
                return;
        }
        if (!unit_is_dead(u) && !cluster_singleton_may_run(m->cluster, u->name, NULL))
                contend_running(m, u, f);
        /* named again after Hosts= had left this host out: it stands by again, as for a
         * file put back (started as at a load, which waits for the key) */
        if (cluster_singleton_set_ineligible(m->cluster, u->name, false) && unit_is_dead(u) &&
            manager_unit_starts_on_its_own(m, u)) {
                log_info("%s: its Hosts=/HostMetadata= name this host (%s) again: it waits for its singleton key",
                         u->name, cluster_host_id(m->cluster));
                manager_start_unit(m, u);
        }
}
