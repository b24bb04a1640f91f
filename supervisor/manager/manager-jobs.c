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
 *    Requires=/BindsTo= dependents too.
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
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "manager-internal.h"
#include "unit-file.h"

/* ---- the graph ---- */

/* Loads the template instances that units reference (SPEC §3: NAME@INST
 * exists when another unit references it), until none is left to load. */
static void load_referenced_instances(struct manager *m) {
        for (size_t i = 0; i < m->n_units; i++) {
                const struct unit_file *f = m->units[i]->next_file ? m->units[i]->next_file : m->units[i]->file;
                char *const *lists[] = { f->requires, f->binds_to, f->wants };
                for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                        for (char *const *p = lists[l]; p && *p; p++) {
                                if (!unit_name_is_valid(*p, UNIT_NAME_INSTANCE) || manager_find_unit(m, *p))
                                        continue;
                                struct unit_file *inst = NULL;
                                if (unit_load(m->opts->config_dir, *p, &inst, NULL) < 0)
                                        continue; /* missing: the graph says so */
                                if (manager_add_unit(m, inst) < 0)
                                        unit_file_free(inst);
                                else
                                        log_info("%s: loaded, as %s references it", *p, m->units[i]->name);
                        }
        }
}

static bool node_is_plain(const struct dep_node *n) {
        return n->requires.n == 0 && n->wants.n == 0 && n->after.n == 0 && n->before.n == 0 &&
               n->required_by.n == 0 && !n->missing && !n->cycle_broken;
}

static int graph_rebuild(struct manager *m) {
        load_referenced_instances(m);
        _cleanup_free_ struct dep_node_spec *specs = calloc(m->n_units ? m->n_units : 1, sizeof *specs);
        if (!specs)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                const struct unit_file *f = u->next_file ? u->next_file : u->file;
                specs[i] = (struct dep_node_spec) { .name = u->name, .requires = f->requires, .wants = f->wants,
                                                    .binds_to = f->binds_to, .after = f->after, .before = f->before };
                data(u)->node = i;
        }
        struct dep_graph *g = NULL;
        int k = dep_graph_build(specs, m->n_units, &g);
        if (k < 0)
                return log_error_errno(k, "computing the units' dependencies: %s", strerror(-k));
        dep_graph_free(m->deps);
        m->deps = g;
        m->deps_dirty = false;
        m->deps_any = false;
        for (size_t i = 0; i < g->n; i++)
                m->deps_any = m->deps_any || !node_is_plain(&g->nodes[i]);
        if (!m->deps_any)
                m->deps = dep_graph_free(m->deps); /* every node plain: none is kept (128 B a unit) */
        m->deps_built = true;
        return 0;
}

void jobs_invalidate(struct manager *m) {
        m->deps_dirty = true;
}

/* u's node, the graph rebuilt first if units[] changed; NULL when no unit
 * has a dependency, or when it cannot be built (out of memory): units then
 * start as if independent. */
static const struct dep_node *node_of(struct manager *m, const struct unit *u) {
        if ((m->deps_dirty || !m->deps_built) && graph_rebuild(m) < 0)
                return NULL;
        if (!m->deps)
                return NULL; /* no unit has a dependency */
        size_t i = data(u)->node;
        return i < m->deps->n && m->units[i] == u ? &m->deps->nodes[i] : NULL;
}

static struct unit *unit_at(struct manager *m, size_t i) {
        return m->units[i];
}

/* ---- deciding a waiting start job ---- */

enum verdict {
        VERDICT_GO,
        VERDICT_WAIT,
        VERDICT_FAIL,
};

/* Whether u's start job may begin; on VERDICT_FAIL, why[] names the cause. */
static enum verdict judge(struct manager *m, const struct dep_node *n, char *why, size_t size) {
        if (n->cycle_broken) {
                snprintf(why, size, "not started to break ordering cycle");
                return VERDICT_FAIL;
        }
        if (n->missing) {
                snprintf(why, size, "required unit %s is not loaded", n->missing[0]);
                return VERDICT_FAIL;
        }
        for (size_t j = 0; j < n->requires.n; j++) {
                struct unit *x = unit_at(m, n->requires.items[j]);
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
        for (size_t j = 0; j < n->after.n; j++)
                if (unit_job_state(unit_at(m, n->after.items[j])) == UNIT_JOB_PENDING)
                        return VERDICT_WAIT;
        return VERDICT_GO;
}

/* Starts the units u requires or wants that have no start job (SPEC §4: a
 * start pulls them in, as systemd's start job does). */
static void pull_dependencies(struct manager *m, const struct dep_node *n) {
        size_t count = n->requires.n + n->wants.n, k = 0;
        _cleanup_free_ struct unit **pull = calloc(count ? count : 1, sizeof *pull);
        if (!pull)
                return;
        /* Collected first: each start changes the phases this loop reads. */
        const struct dep_list *lists[] = { &n->requires, &n->wants };
        for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                for (size_t j = 0; j < lists[l]->n; j++) {
                        struct unit *x = unit_at(m, lists[l]->items[j]);
                        if (unit_is_down(x) && !jobs_stop_pending(x))
                                pull[k++] = x;
                }
        for (size_t j = 0; j < k; j++)
                if (unit_is_down(pull[j])) /* a second mention, or started meanwhile */
                        manager_start_unit(m, pull[j]);
}

static int on_cancel(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct unit *u = userdata;
        data(u)->cancel_source = sd_event_source_disable_unref(data(u)->cancel_source);
        unit_wait_cancelled(u);
        return 0;
}

/* While u waits, every requester leaving cancels its flight (SPEC §2.3): the
 * resolution's eventfd, duplicated so that the source owns an fd of its own
 * whatever happens to the resolution. */
static void watch_cancel(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        if (d->cancel_source || !u->resolution)
                return;
        int fd = sf_resolution_get_fd(u->resolution);
        if (fd < 0)
                return;
        int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return;
        if (sd_event_add_io(m->event, &d->cancel_source, dup, EPOLLIN, on_cancel, u) < 0) {
                close(dup);
                return;
        }
        (void) sd_event_source_set_io_fd_own(d->cancel_source, true);
}

static void jobs_schedule(struct manager *m);

int jobs_start_job(struct manager *m, struct unit *u) {
        if (jobs_stop_pending(u)) {
                jobs_schedule(m); /* the stop job takes it back to where it was */
                return 1;
        }
        const struct dep_node *n = node_of(m, u);
        if (!n || node_is_plain(n))
                return 0;
        pull_dependencies(m, n); /* loads no unit: n stays valid */
        char why[512];
        /* While a batch of start jobs is queued (tend's start, daemon-reload),
         * a unit not started yet would look as if it had no start job: judge
         * once the whole batch exists. */
        if (!m->jobs_batch && judge(m, n, why, sizeof why) == VERDICT_GO)
                return 0;
        watch_cancel(m, u);
        jobs_schedule(m);
        return 1;
}

/* ---- propagation ---- */

/* Whether u is up: running, or starting past its wait. */
static bool is_up(const struct unit *u) {
        enum unit_job_state s = unit_job_state(u);
        return s == UNIT_JOB_DONE ? !unit_is_down(u) : s == UNIT_JOB_PENDING && !unit_is_waiting(u);
}

void jobs_propagate_restart(struct manager *m, struct unit *u, const char *how) {
        const struct dep_node *n = node_of(m, u);
        if (!n || n->required_by.n == 0 || m->shutting_down)
                return;
        size_t count = n->required_by.n, k = 0;
        _cleanup_free_ struct unit **restart = calloc(count, sizeof *restart);
        if (!restart)
                return;
        _cleanup_free_ bool *bound = calloc(count, sizeof *bound);
        if (!bound)
                return;
        for (size_t j = 0; j < count; j++) {
                struct unit *d = unit_at(m, n->required_by.items[j]);
                if (is_up(d) && !jobs_stop_pending(d)) {
                        bound[k] = dep_list_has(&n->bound_by, n->required_by.items[j]);
                        restart[k++] = d;
                }
        }
        for (size_t j = 0; j < k; j++) {
                log_info("%s: restarting, as %s (%s) restarts %s", restart[j]->name, u->name,
                         bound[j] ? "BindsTo=" : "Requires=", how);
                unit_propagated_restart(restart[j], manager_join_own(m, restart[j]));
        }
}

/* SPEC §4: a BindsTo= dependent stops whenever the unit it is bound to is
 * inactive or failed. */
static bool bound_to_dead(struct manager *m, const struct dep_node *n, const char **ret_name) {
        for (size_t j = 0; j < n->binds_to.n; j++) {
                struct unit *x = unit_at(m, n->binds_to.items[j]);
                if (unit_is_down(x)) {
                        *ret_name = x->name;
                        return true;
                }
        }
        return false;
}

/* ---- stop jobs ---- */

bool jobs_stop_pending(const struct unit *u) {
        return data(u)->stop_pending;
}

static void mark_stop(struct manager *m, struct unit *u, bool propagate) {
        if (data(u)->stop_pending)
                return;
        data(u)->stop_pending = true;
        const struct dep_node *n = propagate ? node_of(m, u) : NULL;
        if (!n)
                return;
        for (size_t j = 0; j < n->required_by.n; j++) {
                struct unit *d = unit_at(m, n->required_by.items[j]);
                if (!data(d)->stop_pending && (d->want_up || !unit_is_dead(d))) {
                        log_info("%s: stopping, as %s (%s) stops", d->name, u->name,
                                 dep_list_has(&n->bound_by, n->required_by.items[j]) ? "BindsTo=" : "Requires=");
                        mark_stop(m, d, true);
                }
        }
}

/* Whether a unit ordered after u is still to stop or stopping. */
static bool later_units_stopping(struct manager *m, const struct dep_node *n) {
        for (size_t j = 0; j < n->before.n; j++) {
                struct unit *v = unit_at(m, n->before.items[j]);
                if (data(v)->stop_pending || unit_job_state(v) == UNIT_JOB_STOPPING)
                        return true;
        }
        return false;
}

/* Runs the stop job of u if nothing ordered after it is still stopping.
 * Something that has no process (waiting, in back-off, dead) stops at once:
 * there is nothing to order. */
static void try_stop(struct manager *m, struct unit *u) {
        const struct dep_node *n = node_of(m, u);
        bool idle = unit_is_dead(u) || unit_is_waiting(u);
        if (!idle && n && later_units_stopping(m, n))
                return;
        data(u)->stop_pending = false;
        manager_stop_unit(m, u);
}

void jobs_stop_all(struct manager *m) {
        for (size_t i = 0; i < m->n_units; i++)
                mark_stop(m, m->units[i], false);
        for (size_t i = 0; i < m->n_units; i++)
                if (data(m->units[i])->stop_pending)
                        try_stop(m, m->units[i]);
}

void jobs_stop(struct manager *m, struct unit *u, bool propagate) {
        mark_stop(m, u, propagate);
        /* At once where nothing has to wait, as the caller (tendctl stop,
         * shutdown) expects: a stop in back-off must prevent the spawn. */
        for (size_t i = 0; i < m->n_units; i++)
                if (data(m->units[i])->stop_pending)
                        try_stop(m, m->units[i]);
}

/* ---- the deferred look ---- */

static void dispatch_unit(struct manager *m, struct unit *u) {
        if (data(u)->stop_pending) {
                try_stop(m, u);
                return;
        }
        const struct dep_node *n = node_of(m, u);
        if (!n || node_is_plain(n))
                return;
        char why[512];
        const char *bound = NULL;
        if (unit_is_waiting(u)) {
                switch (judge(m, n, why, sizeof why)) {
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
        if (u->want_up && !unit_is_dead(u) && bound_to_dead(m, n, &bound)) {
                log_info("%s: stopping, as %s (BindsTo=) is %s", u->name, bound,
                         unit_state_to_string(unit_get_state(manager_find_unit(m, bound))));
                manager_stop_unit(m, u);
        }
}

static int on_jobs(sd_event_source *s, void *userdata) {
        struct manager *m = userdata;
        /* By index: a unit's change schedules another pass, never reshapes units[] here. */
        for (size_t i = 0; i < m->n_units; i++)
                dispatch_unit(m, m->units[i]);
        return 0;
}

static void jobs_schedule(struct manager *m) {
        manager_defer(m, &m->jobs, on_jobs);
}

void jobs_changed(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        if (d->cancel_source && !unit_is_waiting(u))
                d->cancel_source = sd_event_source_disable_unref(d->cancel_source);
        if (m->deps_any || d->stop_pending || m->deps_dirty)
                jobs_schedule(m);
}

void jobs_done(struct manager *m) {
        m->jobs = sd_event_source_disable_unref(m->jobs);
        m->deps = dep_graph_free(m->deps);
}
