/* SPDX-License-Identifier: MIT */
/*
 * Start and stop jobs between units (SPEC §4 "Start jobs", "Cycles",
 * "Propagation", "Shutdown"; docs/tend.service.5.md "DEPENDENCIES" for
 * Conflicts=, PartOf=, Requisite=, OnFailure=, OnSuccess=, Upholds=,
 * StopWhenUnneeded=, PropagatesReloadTo=), on the dependency graph of deps.h, for a list
 * of units the caller owns. The caller (the manager) starts, stops and finds
 * units through a small table of operations; jobs never frees or reorders
 * units.
 *
 * Each unit carries a struct jobs_unit (in the caller's per-unit data,
 * zero-initialised with .unit set; jobs_ops.slot finds it).
 *
 * Ownership: jobs borrows the unit list (*units, *n_units are read at each
 * use, so the caller may grow or shrink it: call jobs_invalidate() then),
 * the ops table and userdata for its lifetime; it holds a reference on the
 * event loop. Single-threaded: everything runs on that loop; the ops are
 * called from inside the functions below and from a deferred event source.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "singleflight.h"

struct unit;
struct jobs;

/* A unit's jobs state. */
struct jobs_unit {
        struct unit *unit;              /* the unit it belongs to (borrowed) */
        uint32_t node;                  /* its index in the graph, valid while the graph is (node_of()
                                         * checks it: 32 bits keep the struct at 24 B, SPEC §8) */
        bool stop_pending;              /* a stop job waits for the units ordered after it */
        bool batch_start;               /* its start job was queued in a batch (Conflicts= settled after it) */
        unsigned char shown;            /* the shown state (enum unit_state) of its last change */
        unsigned char triggers;         /* OnFailure=/OnSuccess= units to start (jobs.c) */
        sd_event_source *cancel_source; /* its waiting start job's flight was cancelled */
};

struct jobs_ops {
        /* u's jobs state (never NULL for a unit of the list). */
        struct jobs_unit *(*slot)(void *userdata, const struct unit *u);
        /* The unit of the list called name ("foo.service"), or NULL. */
        struct unit *(*find)(void *userdata, const char *name);
        /* Loads the instance name (a template's NAME@INST.service another unit
         * references, SPEC §3) and adds it at the end of the list: 0, or a
         * negative errno (missing: the graph says so). */
        int (*load)(void *userdata, const char *name);
        /* Starts u as one of the manager's own requesters of its flight. */
        void (*start)(void *userdata, struct unit *u);
        /* Stops u now (its flight cancelled, then the stop sequence). */
        void (*stop)(void *userdata, struct unit *u);
        /* Joins u's flight as one of the manager's own requesters: the
         * resolution when this request leads (the caller's to hand on), else NULL. */
        sf_resolution *(*join)(void *userdata, struct unit *u);
};

/* A jobs table over the list (*units)[0 .. *n_units). 0 or -ENOMEM. */
int jobs_new(sd_event *event, struct unit **const *units, const size_t *n_units, const struct jobs_ops *ops,
             void *userdata, struct jobs **ret);

/* Frees the graph and the deferred source; NULL. Each unit's cancel source
 * goes with jobs_unit_done(). */
struct jobs *jobs_free(struct jobs *jb);

/* Drops u's cancel source (before the unit is freed). */
void jobs_unit_done(struct jobs_unit *ju);

/* u was put back from a re-executed tend's state (unit_restore): the state
 * it has now is the one it had, not a change. OnFailure=/OnSuccess= were
 * started (or not) by the previous tend when it entered that state: none is
 * triggered again (QA19 H2). u must be of the list. */
void jobs_resumed(struct jobs *jb, struct unit *u);

/* The list changed (a unit added or freed, files reloaded): the graph is
 * rebuilt when next needed. */
void jobs_invalidate(struct jobs *jb);

/* Start jobs are being queued together (tend's start, daemon-reload): while
 * on, a start job waits to be judged until the whole batch exists. */
void jobs_batch(struct jobs *jb, bool on);

/* Whether u has no edge at all (no dependency, no ordering, no Conflicts=,
 * nothing naming it): its start job goes ahead at once, so it need not be
 * queued within a batch (tend's start spreads such starts over its loop's
 * turns, issue 19). True when the graph cannot be built (out of memory), as
 * jobs_start_job then starts it at once too. */
bool jobs_unit_independent(struct jobs *jb, const struct unit *u);

/* unit_ops.start_job: 0 to begin u's start now, 1 to wait (its WAIT position, unit.h). May
 * start u's Requires=/BindsTo=/Wants=/Upholds= units, and gives the units that
 * conflict with u (Conflicts=, either side) a stop job; in a batch, conflicts
 * between the batch's own start jobs are settled once it is queued: the unit
 * whose Conflicts= names the other starts (the first in name order when both
 * or neither do); the other is not started and stays as it was. */
int jobs_start_job(struct jobs *jb, struct unit *u);

/* u's record changed (called from unit_ops.changed: unit_get_state() gives
 * the change's state): waiting start jobs, stop jobs, BindsTo=, Upholds= and
 * StopWhenUnneeded= are looked at again once the current event is handled.
 * u entering failed (not for a dependency) starts its OnFailure= units then;
 * u entering inactive from starting, running or stopping starts its
 * OnSuccess= units. Neither once jobs_stop_all() ran. */
void jobs_changed(struct jobs *jb, struct unit *u);

/* u restarts (automatically, or on request; how says which, for the log):
 * its running Requires=/BindsTo=/Requisite=/PartOf= dependents restart too.
 * Not once jobs_stop_all() ran. */
void jobs_propagate_restart(struct jobs *jb, struct unit *u, const char *how);

/* A stop job for u: it stops once every unit ordered after it that is also
 * stopping has stopped (at once if nothing of u runs). propagate: also the
 * units that require u, are bound to it, have it as Requisite= or are PartOf=
 * it, transitively (an explicit stop). */
void jobs_stop(struct jobs *jb, struct unit *u, bool propagate);

/* u's ExecReload= began (tendctl reload): the running units it propagates its
 * reload to (its PropagatesReloadTo=, others' ReloadPropagatedFrom=) reload
 * too, and theirs in turn; one that has no ExecReload= or is busy is named in
 * the log and skipped (systemd's try-reload). */
void jobs_propagate_reload(struct jobs *jb, struct unit *u);

/* Shutdown: a stop job for every unit, in reverse order of their ordering;
 * no restart propagates after it. */
void jobs_stop_all(struct jobs *jb);

/* Whether u has a stop job waiting: no restart and no start for it. */
bool jobs_stop_pending(struct jobs *jb, const struct unit *u);
