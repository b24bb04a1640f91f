/* SPDX-License-Identifier: MIT */
/*
 * Start and stop jobs between units (SPEC §4 "Start jobs", "Cycles",
 * "Propagation", "Shutdown"), on the graph of deps.h:
 *
 *  - a start job (unit.c: a WAIT position) first starts the units its unit
 *    requires or wants, then waits while a unit it is ordered after has a
 *    start job in progress; it fails with result `dependency` when a unit it
 *    requires failed, is missing, or its cycle was broken by not starting it;
 *  - an automatic (or requested) restart of X restarts X's running
 *    Requires=/BindsTo= dependents, whose starts then wait for X's;
 *  - a BindsTo= dependent stops whenever X is inactive or failed;
 *  - a stop job waits while a unit ordered after its unit is stopping, so
 *    units stop in reverse order; an explicit stop of X stops X's
 *    Requires=/BindsTo= dependents too;
 *  - Requisite= fails a start job at once when the unit is not up (it waits
 *    only while that unit's start job is in progress) and never starts it;
 *    Requisite= and PartOf= dependents stop and restart with the unit;
 *  - a start job stops the units that conflict with its unit (Conflicts=,
 *    either side), and waits for a stop of a unit it is ordered against
 *    (After= or Before=: a stop always goes first, as systemd orders them);
 *  - OnFailure=/OnSuccess= start units when a unit fails or ends;
 *    Upholds= starts its units again whenever they are down while it runs;
 *    StopWhenUnneeded= stops a unit no up unit requires, wants or upholds;
 *    PropagatesReloadTo= reloads units with it.
 *
 * The unit state machines report every change (jobs_changed); the jobs are
 * looked at again from a deferred event source, never from inside a state
 * machine that is reporting. Units without any dependency never wait and
 * never schedule anything here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "deps.h"
#include "jobs.h"
#include "log.h"
#include "macro.h"
#include "singleflight.h"
#include "unit-file.h"
#include "unit.h"

struct jobs {
        sd_event *event;
        struct unit **const *units;    /* the caller's list, read at each use */
        const size_t *n_units;
        const struct jobs_ops *ops;
        void *userdata;
        struct dep_graph *deps;        /* of the units, in that order; NULL or stale when deps_dirty,
                                        * NULL when built and !deps_any */
        bool deps_built;               /* deps was computed once (then deps_dirty says if it is stale) */
        bool deps_dirty;               /* the units changed since deps was built */
        bool deps_any;                 /* some unit has a dependency, a missing one, or a cycle */
        sd_event_source *look;         /* looks at the jobs again once the current event is handled */
        bool batch;                    /* start jobs are being queued together: judge them afterwards */
        bool batch_queued;             /* some unit's batch_start is set: settle their Conflicts= */
        bool shutting_down;            /* jobs_stop_all ran: no restart propagates */
};

static struct jobs_unit *slot(struct jobs *jb, const struct unit *u) {
        return jb->ops->slot(jb->userdata, u);
}

static size_t n_units(const struct jobs *jb) {
        return *jb->n_units;
}

static struct unit *unit_at(struct jobs *jb, size_t i) {
        return (*jb->units)[i];
}

/* The file whose dependencies count: a daemon-reload's new one at once. */
static const struct unit_file *file_of(const struct unit *u) {
        return u->next_file ? u->next_file : u->file;
}

/* ---- the graph ---- */

/* Loads the template instances that units reference (SPEC §3: NAME@INST
 * exists when another unit references it), until none is left to load. */
static void load_referenced_instances(struct jobs *jb) {
        for (size_t i = 0; i < n_units(jb); i++) {
                struct unit *u = (*jb->units)[i];
                const struct unit_file *f = file_of(u);
                const struct unit_dep_keys *k = unit_file_dep_keys(f);
                char *const *lists[] = { f->requires, f->binds_to, f->wants, k->requisite, k->part_of, k->upholds,
                                         k->on_failure, k->on_success, k->propagates_reload_to,
                                         k->reload_propagated_from };
                for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                        for (char *const *p = lists[l]; p && *p; p++) {
                                if (!unit_name_is_valid(*p, UNIT_NAME_INSTANCE) || jb->ops->find(jb->userdata, *p))
                                        continue;
                                if (jb->ops->load(jb->userdata, *p) < 0)
                                        continue; /* missing: the graph says so */
                                log_info("%s: loaded, as %s references it", *p, u->name);
                        }
        }
}

static bool node_is_plain(const struct dep_node *n) {
        return dep_node_is_plain(n);
}

static int graph_rebuild(struct jobs *jb) {
        load_referenced_instances(jb);
        size_t n = n_units(jb);
        _cleanup_free_ struct dep_node_spec *specs = calloc(n ? n : 1, sizeof *specs);
        if (!specs)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct unit *u = (*jb->units)[i];
                const struct unit_file *f = file_of(u);
                const struct unit_dep_keys *k = unit_file_dep_keys(f);
                specs[i] = (struct dep_node_spec) { .name = u->name, .requires = f->requires, .wants = f->wants,
                                                    .binds_to = f->binds_to, .after = f->after, .before = f->before,
                                                    .requisite = k->requisite, .part_of = k->part_of,
                                                    .conflicts = k->conflicts, .upholds = k->upholds,
                                                    .on_failure = k->on_failure, .on_success = k->on_success,
                                                    .propagates_reload_to = k->propagates_reload_to,
                                                    .reload_propagated_from = k->reload_propagated_from };
                slot(jb, u)->node = i;
        }
        struct dep_graph *g = NULL;
        int k = dep_graph_build(specs, n, &g);
        if (k < 0)
                return log_error_errno(k, "computing the units' dependencies: %m");
        dep_graph_free(jb->deps);
        jb->deps = g;
        jb->deps_dirty = false;
        jb->deps_any = false;
        for (size_t i = 0; i < g->n; i++)
                jb->deps_any = jb->deps_any || !node_is_plain(&g->nodes[i]) ||
                               file_of(unit_at(jb, i))->stop_when_unneeded;
        if (!jb->deps_any)
                jb->deps = dep_graph_free(jb->deps); /* every node plain: none is kept (128 B a unit) */
        jb->deps_built = true;
        return 0;
}

void jobs_invalidate(struct jobs *jb) {
        jb->deps_dirty = true;
}

/* u's node, the graph rebuilt first if units[] changed; NULL when no unit
 * has a dependency, or when it cannot be built (out of memory): units then
 * start as if independent. */
static const struct dep_node *node_of(struct jobs *jb, const struct unit *u) {
        if ((jb->deps_dirty || !jb->deps_built) && graph_rebuild(jb) < 0)
                return NULL;
        if (!jb->deps)
                return NULL; /* no unit has a dependency */
        size_t i = slot(jb, u)->node;
        return i < jb->deps->n && i < n_units(jb) && (*jb->units)[i] == u ? &jb->deps->nodes[i] : NULL;
}


/* ---- deciding a waiting start job ---- */

enum verdict {
        VERDICT_GO,
        VERDICT_WAIT,
        VERDICT_FAIL,
};

/* Whether u has a stop job, waiting or running. */
static bool is_stopping(struct jobs *jb, const struct unit *u) {
        return slot(jb, u)->stop_pending || unit_job_state(u) == UNIT_JOB_STOPPING;
}

/* Requisite=: each unit must be up, never started for it; a start job of it
 * in progress is waited for. */
static enum verdict judge_requisite(struct jobs *jb, const struct dep_node *n, char *why, size_t size) {
        bool wait = false;
        for (size_t j = 0; j < n->requisite.n; j++) {
                struct unit *x = unit_at(jb, n->requisite.items[j]);
                enum unit_job_state s = unit_job_state(x);
                if (s == UNIT_JOB_PENDING && !slot(jb, x)->stop_pending) {
                        wait = true;
                        continue;
                }
                if (s != UNIT_JOB_DONE || unit_is_down(x) || slot(jb, x)->stop_pending) {
                        snprintf(why, size, "requisite unit %s is not active", x->name);
                        return VERDICT_FAIL;
                }
        }
        return wait ? VERDICT_WAIT : VERDICT_GO;
}

/* Whether u's start job may begin; on VERDICT_FAIL, why[] names the cause. */
static enum verdict judge(struct jobs *jb, const struct dep_node *n, char *why, size_t size) {
        if (n->cycle_broken) {
                snprintf(why, size, "not started to break ordering cycle");
                return VERDICT_FAIL;
        }
        if (n->missing) {
                snprintf(why, size, "required unit %s is not loaded", n->missing[0]);
                return VERDICT_FAIL;
        }
        for (size_t j = 0; j < n->requires.n; j++) {
                struct unit *x = unit_at(jb, n->requires.items[j]);
                switch (unit_job_state(x)) {
                case UNIT_JOB_PENDING:
                case UNIT_JOB_DONE:
                        continue;
                case UNIT_JOB_FAILED:
                        snprintf(why, size, "required unit %s failed (result %s)", x->name,
                                 unit_result_to_string(x->result));
                        return VERDICT_FAIL;
                case UNIT_JOB_STOPPING:
                        snprintf(why, size, "required unit %s is stopping", x->name);
                        return VERDICT_FAIL;
                case UNIT_JOB_NONE:
                        snprintf(why, size, "required unit %s is not active", x->name);
                        return VERDICT_FAIL;
                }
        }
        enum verdict v = judge_requisite(jb, n, why, size);
        if (v != VERDICT_GO)
                return v;
        for (size_t j = 0; j < n->after.n; j++) {
                struct unit *x = unit_at(jb, n->after.items[j]);
                if (unit_job_state(x) == UNIT_JOB_PENDING || is_stopping(jb, x))
                        return VERDICT_WAIT;
        }
        /* A stop goes before a start whichever way they are ordered (systemd). */
        for (size_t j = 0; j < n->before.n; j++)
                if (is_stopping(jb, unit_at(jb, n->before.items[j])))
                        return VERDICT_WAIT;
        return VERDICT_GO;
}

/* Starts the units u requires, wants or upholds that have no start job (SPEC §4: a
 * start pulls them in, as systemd's start job does). */
static void pull_dependencies(struct jobs *jb, const struct dep_node *n) {
        size_t count = n->requires.n + n->wants.n + n->upholds.n, k = 0;
        _cleanup_free_ struct unit **pull = calloc(count ? count : 1, sizeof *pull);
        if (!pull)
                return;
        /* Collected first: each start changes the phases this loop reads. */
        const struct dep_list *lists[] = { &n->requires, &n->wants, &n->upholds };
        for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                for (size_t j = 0; j < lists[l]->n; j++) {
                        struct unit *x = unit_at(jb, lists[l]->items[j]);
                        if (unit_is_down(x) && !jobs_stop_pending(jb, x))
                                pull[k++] = x;
                }
        for (size_t j = 0; j < k; j++)
                if (unit_is_down(pull[j])) /* a second mention, or started meanwhile */
                        jb->ops->start(jb->userdata, pull[j]);
}

static int on_cancel(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct jobs_unit *ju = userdata;
        ju->cancel_source = sd_event_source_disable_unref(ju->cancel_source);
        unit_wait_cancelled(ju->unit);
        return 0;
}

/* While u waits, every requester leaving cancels its flight (SPEC §2.3): the
 * resolution's eventfd, duplicated so that the source owns an fd of its own
 * whatever happens to the resolution. */
static void watch_cancel(struct jobs *jb, struct unit *u) {
        struct jobs_unit *d = slot(jb, u);
        if (d->cancel_source || !u->resolution)
                return;
        int fd = sf_resolution_get_fd(u->resolution);
        if (fd < 0)
                return;
        int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return;
        if (sd_event_add_io(jb->event, &d->cancel_source, dup, EPOLLIN, on_cancel, d) < 0) {
                close(dup);
                return;
        }
        (void) sd_event_source_set_io_fd_own(d->cancel_source, true);
}

static void jobs_schedule(struct jobs *jb);
static void mark_stop(struct jobs *jb, struct unit *u, bool propagate);

/* Conflicts=: u's start job gives every unit that conflicts with u, and is
 * up or being started, a stop job (with its dependents', as an explicit
 * stop); it runs from the deferred look. */
static void stop_conflicting(struct jobs *jb, struct unit *u, const struct dep_node *n) {
        const struct dep_list *lists[] = { &n->conflicts, &n->conflicted_by };
        for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                for (size_t j = 0; j < lists[l]->n; j++) {
                        struct unit *x = unit_at(jb, lists[l]->items[j]);
                        if (unit_is_down(x) || slot(jb, x)->stop_pending)
                                continue;
                        log_info("%s: stopping, as %s starts (Conflicts=)", x->name, u->name);
                        mark_stop(jb, x, true);
                        jobs_schedule(jb);
                }
}

int jobs_start_job(struct jobs *jb, struct unit *u) {
        if (jobs_stop_pending(jb, u)) {
                jobs_schedule(jb); /* the stop job takes it back to where it was */
                return 1;
        }
        const struct dep_node *n = node_of(jb, u);
        if (!n || node_is_plain(n))
                return 0;
        if (jb->batch)
                slot(jb, u)->batch_start = jb->batch_queued = true;
        else
                stop_conflicting(jb, u, n);
        pull_dependencies(jb, n); /* loads no unit: n stays valid */
        char why[512];
        /* While a batch of start jobs is queued (tend's start, daemon-reload),
         * a unit not started yet would look as if it had no start job: judge
         * once the whole batch exists. */
        if (!jb->batch && judge(jb, n, why, sizeof why) == VERDICT_GO)
                return 0;
        watch_cancel(jb, u);
        jobs_schedule(jb);
        return 1;
}

/* ---- propagation ---- */

/* Whether u is up: running, or starting past its wait. */
static bool is_up(const struct unit *u) {
        enum unit_job_state s = unit_job_state(u);
        return s == UNIT_JOB_DONE ? !unit_is_down(u) : s == UNIT_JOB_PENDING && !unit_is_waiting(u);
}

/* A unit whose stop and restart follow another's, and the key that says so. */
struct follower {
        struct unit *unit;
        const char *key;
};

/* The units whose stop and restart follow n's (SPEC §4 "Propagation";
 * systemd's: Requires=, BindsTo=, Requisite=, PartOf=), each once, into a
 * new array *ret (the caller frees it); their number, or -ENOMEM. */
static ssize_t followers(struct jobs *jb, const struct dep_node *n, struct follower **ret) {
        size_t count = n->required_by.n + n->requisite_of.n + n->consists_of.n, k = 0;
        struct follower *f = calloc(count ? count : 1, sizeof *f);
        if (!f)
                return -ENOMEM;
        const struct dep_list *lists[] = { &n->required_by, &n->requisite_of, &n->consists_of };
        for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                for (size_t j = 0; j < lists[l]->n; j++) {
                        size_t i = lists[l]->items[j];
                        bool seen = false;
                        for (size_t m = 0; m < k && !seen; m++)
                                seen = f[m].unit == unit_at(jb, i);
                        if (seen)
                                continue;
                        f[k].unit = unit_at(jb, i);
                        f[k++].key = l == 0 ? (dep_list_has(&n->bound_by, i) ? "BindsTo=" : "Requires=")
                                   : l == 1 ? "Requisite="
                                            : "PartOf=";
                }
        *ret = f;
        return (ssize_t) k;
}

void jobs_propagate_restart(struct jobs *jb, struct unit *u, const char *how) {
        const struct dep_node *n = node_of(jb, u);
        if (!n || jb->shutting_down)
                return;
        _cleanup_free_ struct follower *f = NULL;
        ssize_t count = followers(jb, n, &f);
        size_t k = 0;
        for (ssize_t j = 0; j < count; j++) /* collected first: each restart changes what is up */
                if (is_up(f[j].unit) && !jobs_stop_pending(jb, f[j].unit))
                        f[k++] = f[j];
        for (size_t j = 0; j < k; j++) {
                log_info("%s: restarting, as %s (%s) restarts %s", f[j].unit->name, u->name, f[j].key, how);
                unit_propagated_restart(f[j].unit, jb->ops->join(jb->userdata, f[j].unit));
        }
}

/* SPEC §4: a BindsTo= dependent stops whenever the unit it is bound to is
 * inactive or failed. */
static bool bound_to_dead(struct jobs *jb, const struct dep_node *n, const char **ret_name) {
        for (size_t j = 0; j < n->binds_to.n; j++) {
                struct unit *x = unit_at(jb, n->binds_to.items[j]);
                if (unit_is_down(x)) {
                        *ret_name = x->name;
                        return true;
                }
        }
        return false;
}

/* ---- stop jobs ---- */

bool jobs_stop_pending(struct jobs *jb, const struct unit *u) {
        return slot(jb, u)->stop_pending;
}

static void mark_stop(struct jobs *jb, struct unit *u, bool propagate) {
        if (slot(jb, u)->stop_pending)
                return;
        slot(jb, u)->stop_pending = true;
        const struct dep_node *n = propagate ? node_of(jb, u) : NULL;
        if (!n)
                return;
        _cleanup_free_ struct follower *f = NULL;
        ssize_t count = followers(jb, n, &f);
        for (ssize_t j = 0; j < count; j++) {
                struct unit *d = f[j].unit;
                if (!slot(jb, d)->stop_pending && (d->want_up || !unit_is_dead(d))) {
                        log_info("%s: stopping, as %s (%s) stops", d->name, u->name, f[j].key);
                        mark_stop(jb, d, true);
                }
        }
}

/* Whether a unit ordered after u is still to stop or stopping. */
static bool later_units_stopping(struct jobs *jb, const struct dep_node *n) {
        for (size_t j = 0; j < n->before.n; j++) {
                struct unit *v = unit_at(jb, n->before.items[j]);
                if (slot(jb, v)->stop_pending || unit_job_state(v) == UNIT_JOB_STOPPING)
                        return true;
        }
        return false;
}

/* Runs the stop job of u if nothing ordered after it is still stopping.
 * Something that has no process (waiting, in back-off, dead) stops at once:
 * there is nothing to order. */
static void try_stop(struct jobs *jb, struct unit *u) {
        const struct dep_node *n = node_of(jb, u);
        bool idle = unit_is_dead(u) || unit_is_waiting(u);
        if (!idle && n && later_units_stopping(jb, n))
                return;
        slot(jb, u)->stop_pending = false;
        jb->ops->stop(jb->userdata, u);
}

/* Runs every stop job that need not wait. */
static void try_stop_pending(struct jobs *jb) {
        for (size_t i = 0; i < n_units(jb); i++)
                if (slot(jb, unit_at(jb, i))->stop_pending)
                        try_stop(jb, unit_at(jb, i));
}

void jobs_stop_all(struct jobs *jb) {
        jb->shutting_down = true;
        for (size_t i = 0; i < n_units(jb); i++)
                mark_stop(jb, unit_at(jb, i), false);
        try_stop_pending(jb);
}

void jobs_stop(struct jobs *jb, struct unit *u, bool propagate) {
        mark_stop(jb, u, propagate);
        /* At once where nothing has to wait, as the caller (tendctl stop,
         * shutdown) expects: a stop in back-off must prevent the spawn. */
        try_stop_pending(jb);
}

/* ---- OnFailure=, OnSuccess= ---- */

enum {
        TRIGGER_FAILURE = 1 << 0,
        TRIGGER_SUCCESS = 1 << 1,
};

/* Starts the units named (OnFailure= or OnSuccess= of u) that are down or
 * stopping (replace: a stop job of theirs gives way; fail: they are left). */
static void start_listed(struct jobs *jb, struct unit *u, char *const *names, const char *key, bool mode_fail) {
        for (char *const *p = names; p && *p; p++) {
                struct unit *x = jb->ops->find(jb->userdata, *p);
                if (!x) {
                        log_warning("%s: %s%s is not loaded, not started", u->name, key, *p);
                        continue;
                }
                bool stopping = is_stopping(jb, x);
                if (stopping && mode_fail) {
                        log_notice("%s: %s%s not started: it is being stopped (OnFailureJobMode=fail)", u->name,
                                   key, x->name);
                        continue;
                }
                if (!unit_is_down(x) && !stopping)
                        continue; /* up or being started: a start job would change nothing */
                slot(jb, x)->stop_pending = false;
                log_info("%s: starting, as %s %s (%s)", x->name, u->name,
                         streq(key, "OnFailure=") ? "failed" : "succeeded", key);
                jb->ops->start(jb->userdata, x);
        }
}

static void fire_triggers(struct jobs *jb, struct unit *u) {
        unsigned t = slot(jb, u)->triggers;
        slot(jb, u)->triggers = 0;
        const struct unit_file *f = file_of(u);
        const struct unit_dep_keys *k = unit_file_dep_keys(f);
        if (t & TRIGGER_FAILURE)
                start_listed(jb, u, k->on_failure, "OnFailure=", f->on_failure_mode_fail);
        if (t & TRIGGER_SUCCESS)
                start_listed(jb, u, k->on_success, "OnSuccess=", false);
}

/* systemd: OnFailure= when the unit enters failed (a start refused for a
 * dependency changes no state there: none); OnSuccess= when it enters
 * inactive from starting, running or stopping. tend's back-off is systemd's
 * auto-restart: neither fires on the way into it. */
static void note_triggers(struct jobs *jb, struct unit *u) {
        struct jobs_unit *d = slot(jb, u);
        enum unit_state s = unit_get_state(u), prev = d->shown;
        d->shown = (unsigned char) s;
        if (s == prev || jb->shutting_down)
                return;
        const struct unit_dep_keys *k = unit_file_dep_keys(file_of(u));
        if (s == UNIT_FAILED && k->on_failure) {
                struct unit_shown shown;
                unit_get_shown(u, &shown);
                if (shown.result != UNIT_RESULT_DEPENDENCY)
                        d->triggers |= TRIGGER_FAILURE;
        } else if (s == UNIT_INACTIVE && k->on_success && prev != UNIT_FAILED && prev != UNIT_BACKOFF)
                d->triggers |= TRIGGER_SUCCESS;
}

/* ---- Upholds=, StopWhenUnneeded= ---- */

/* Whether u runs (active, as systemd's Upholds= and StopWhenUnneeded= ask). */
static bool is_active(struct jobs *jb, const struct unit *u) {
        return unit_job_state(u) == UNIT_JOB_DONE && !unit_is_down(u) && !slot(jb, u)->stop_pending;
}

/* Starts u's Upholds= units that are down. One whose last start hit its
 * start limit or failed for a dependency is left until something else
 * starts it: it would only fail again at once. */
static void uphold(struct jobs *jb, struct unit *u, const struct dep_node *n) {
        if (!n->upholds.n || jb->shutting_down || !is_active(jb, u))
                return;
        for (size_t j = 0; j < n->upholds.n; j++) {
                struct unit *x = unit_at(jb, n->upholds.items[j]);
                if (!unit_is_down(x) || slot(jb, x)->stop_pending)
                        continue;
                if (unit_get_state(x) == UNIT_FAILED &&
                    (x->result == UNIT_RESULT_START_LIMIT || x->result == UNIT_RESULT_DEPENDENCY))
                        continue;
                log_info("%s: starting, as %s upholds it (Upholds=)", x->name, u->name);
                jb->ops->start(jb->userdata, x);
        }
}

/* StopWhenUnneeded=: stops u once no unit that requires, wants, upholds or
 * has it as Requisite= is up or has a start job. */
static void stop_if_unneeded(struct jobs *jb, struct unit *u, const struct dep_node *n) {
        if (!file_of(u)->stop_when_unneeded || jb->shutting_down || !u->want_up || !is_active(jb, u))
                return;
        const struct dep_list *lists[] = { &n->required_by, &n->wanted_by, &n->upheld_by, &n->requisite_of };
        for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                for (size_t j = 0; j < lists[l]->n; j++)
                        if (!unit_is_down(unit_at(jb, lists[l]->items[j])))
                                return;
        log_info("%s: stopping, as no unit needs it any more (StopWhenUnneeded=)", u->name);
        jobs_stop(jb, u, true);
}

/* ---- Conflicts= in a batch ---- */

/* Which of u and x (conflicting, both started by one batch) starts: the one
 * whose Conflicts= names the other, else the first in name order. */
static struct unit *conflict_winner(struct jobs *jb, struct unit *u, struct unit *x) {
        const struct dep_node *nu = node_of(jb, u), *nx = node_of(jb, x);
        bool u_names = dep_list_has(&nu->conflicts, slot(jb, x)->node);
        bool x_names = dep_list_has(&nx->conflicts, slot(jb, u)->node);
        if (u_names != x_names)
                return u_names ? u : x;
        return strcmp(u->name, x->name) <= 0 ? u : x;
}

/* The batch's start jobs that conflict with each other: the loser's start is
 * dropped (it stays as it was, as a transaction drops a job in systemd);
 * then each start left stops the units outside the batch it conflicts with. */
static void settle_batch_conflicts(struct jobs *jb) {
        if (jb->batch || !jb->batch_queued)
                return;
        jb->batch_queued = false;
        for (size_t i = 0; i < n_units(jb); i++) {
                struct unit *u = unit_at(jb, i);
                const struct dep_node *n = slot(jb, u)->batch_start ? node_of(jb, u) : NULL;
                const struct dep_list *lists[] = { n ? &n->conflicts : NULL, n ? &n->conflicted_by : NULL };
                for (size_t l = 0; n && l < ELEMENTSOF(lists) && slot(jb, u)->batch_start; l++)
                        for (size_t j = 0; j < lists[l]->n && slot(jb, u)->batch_start; j++) {
                                struct unit *x = unit_at(jb, lists[l]->items[j]);
                                if (!slot(jb, x)->batch_start || !unit_is_waiting(x))
                                        continue;
                                struct unit *win = conflict_winner(jb, u, x), *lose = win == u ? x : u;
                                log_info("%s: not started, as %s starts (Conflicts=)", lose->name, win->name);
                                slot(jb, lose)->batch_start = false;
                                jb->ops->stop(jb->userdata, lose);
                        }
        }
        for (size_t i = 0; i < n_units(jb); i++) {
                struct unit *u = unit_at(jb, i);
                if (!slot(jb, u)->batch_start)
                        continue;
                slot(jb, u)->batch_start = false;
                const struct dep_node *n = node_of(jb, u);
                if (n && unit_is_waiting(u))
                        stop_conflicting(jb, u, n);
        }
}

/* ---- the deferred look ---- */

static void dispatch_unit(struct jobs *jb, struct unit *u) {
        if (slot(jb, u)->stop_pending) {
                try_stop(jb, u);
                return;
        }
        if (slot(jb, u)->triggers)
                fire_triggers(jb, u);
        const struct dep_node *n = node_of(jb, u);
        if (!n || (node_is_plain(n) && !file_of(u)->stop_when_unneeded))
                return;
        char why[512];
        const char *bound = NULL;
        if (unit_is_waiting(u)) {
                switch (judge(jb, n, why, sizeof why)) {
                case VERDICT_GO:
                        unit_dependencies_ready(u);
                        return;
                case VERDICT_FAIL:
                        unit_dependency_failed(u, why);
                        return;
                case VERDICT_WAIT:
                        return;
                }
        }
        if (u->want_up && !unit_is_dead(u) && bound_to_dead(jb, n, &bound)) {
                log_info("%s: stopping, as %s (BindsTo=) is %s", u->name, bound,
                         unit_state_to_string(unit_get_state(jb->ops->find(jb->userdata, bound))));
                jb->ops->stop(jb->userdata, u);
                return;
        }
        uphold(jb, u, n);
        stop_if_unneeded(jb, u, n);
}

static int on_jobs(sd_event_source *s, void *userdata) {
        struct jobs *jb = userdata;
        settle_batch_conflicts(jb);
        /* By index: a unit's change schedules another pass, never reshapes units[] here. */
        for (size_t i = 0; i < n_units(jb); i++)
                dispatch_unit(jb, unit_at(jb, i));
        return 0;
}

/* on_jobs runs once, after the event being handled (a defer source made at
 * the first call, re-enabled for one run after that). */
static void jobs_schedule(struct jobs *jb) {
        if (jb->look)
                (void) sd_event_source_set_enabled(jb->look, SD_EVENT_ONESHOT);
        else
                (void) sd_event_add_defer(jb->event, &jb->look, on_jobs, jb);
}

void jobs_resumed(struct jobs *jb, struct unit *u) {
        struct jobs_unit *d = slot(jb, u);
        d->shown = (unsigned char) unit_get_state(u);
        d->triggers = 0;
}

void jobs_changed(struct jobs *jb, struct unit *u) {
        struct jobs_unit *d = slot(jb, u);
        if (d->cancel_source && !unit_is_waiting(u))
                d->cancel_source = sd_event_source_disable_unref(d->cancel_source);
        note_triggers(jb, u);
        if (jb->deps_any || d->stop_pending || jb->deps_dirty || d->triggers)
                jobs_schedule(jb);
}

void jobs_propagate_reload(struct jobs *jb, struct unit *u) {
        const struct dep_node *n = node_of(jb, u);
        for (size_t j = 0; n && j < n->reload_to.n; j++) {
                struct unit *x = unit_at(jb, n->reload_to.items[j]);
                if (unit_get_state(x) != UNIT_RUNNING)
                        continue; /* try-reload: only a running unit */
                int k = unit_reload(x);
                if (k == -EOPNOTSUPP) {
                        log_notice("%s: not reloaded with %s: it has no ExecReload=", x->name, u->name);
                        continue;
                }
                if (k < 0) {
                        log_notice("%s: not reloaded with %s: a command of it runs", x->name, u->name);
                        continue;
                }
                log_info("%s: reloading, as %s reloads (PropagatesReloadTo=)", x->name, u->name);
                /* Its own propagation in turn; a cycle ends at a unit already reloading (-EBUSY). */
                jobs_propagate_reload(jb, x);
                n = node_of(jb, u);
        }
}

int jobs_new(sd_event *event, struct unit **const *units, const size_t *n_units, const struct jobs_ops *ops,
             void *userdata, struct jobs **ret) {
        struct jobs *jb = calloc(1, sizeof *jb);
        if (!jb)
                return -ENOMEM;
        *jb = (struct jobs) { .event = sd_event_ref(event), .units = units, .n_units = n_units, .ops = ops,
                              .userdata = userdata };
        *ret = jb;
        return 0;
}

struct jobs *jobs_free(struct jobs *jb) {
        if (!jb)
                return NULL;
        sd_event_source_disable_unref(jb->look);
        dep_graph_free(jb->deps);
        sd_event_unref(jb->event);
        free(jb);
        return NULL;
}

bool jobs_unit_independent(struct jobs *jb, const struct unit *u) {
        const struct dep_node *n = node_of(jb, u);
        return !n || node_is_plain(n);
}

void jobs_batch(struct jobs *jb, bool on) {
        jb->batch = on;
}

void jobs_unit_done(struct jobs_unit *ju) {
        ju->cancel_source = sd_event_source_disable_unref(ju->cancel_source);
}
