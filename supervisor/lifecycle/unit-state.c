/* SPDX-License-Identifier: MIT */
/*
 * The unit state machine's positions (unit.h): the one table from which the
 * shown state, the job state and the settled/dead tests are read, and the
 * changes the manager hears after each event, in order, with the fields they
 * had (SPEC §5: each transition gets its own record).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "unit-internal.h"

/* ---- names ---- */

static const char *const state_names[_UNIT_STATE_MAX] = {
        [UNIT_INACTIVE] = "inactive", [UNIT_STARTING] = "starting", [UNIT_RUNNING] = "running",
        [UNIT_STOPPING] = "stopping", [UNIT_FAILED] = "failed",     [UNIT_BACKOFF] = "backoff",
};

static const char *const result_names[_UNIT_RESULT_MAX] = {
        [UNIT_RESULT_SUCCESS] = "success",         [UNIT_RESULT_EXIT_CODE] = "exit-code",
        [UNIT_RESULT_SIGNAL] = "signal",           [UNIT_RESULT_TIMEOUT] = "timeout",
        [UNIT_RESULT_WATCHDOG] = "watchdog",       [UNIT_RESULT_START_LIMIT] = "start-limit",
        [UNIT_RESULT_EXEC_FAILED] = "exec-failed", [UNIT_RESULT_DEPENDENCY] = "dependency",
        [UNIT_RESULT_RESOURCES] = "resources",
};

const char *unit_state_to_string(enum unit_state s) {
        return s < _UNIT_STATE_MAX ? state_names[s] : NULL;
}

const char *unit_result_to_string(enum unit_result r) {
        return r < _UNIT_RESULT_MAX ? result_names[r] : NULL;
}

/* ---- the position table: everything derived from a position ---- */

const struct unit_pos_row unit_pos_table[_UNIT_POS_MAX] = {
        [UNIT_POS_INACTIVE] = { .name = "inactive", .shown = UNIT_INACTIVE, .job = UNIT_JOB_NONE,
                                .settled = true, .idle = true, .down = true },
        [UNIT_POS_FAILED] = { .name = "failed", .shown = UNIT_FAILED, .job = UNIT_JOB_FAILED,
                                .settled = true, .idle = true, .down = true },
        [UNIT_POS_WAIT_INACTIVE] = { .name = "wait-inactive", .shown = UNIT_INACTIVE, .job = UNIT_JOB_PENDING,
                                .waiting = true },
        [UNIT_POS_WAIT_FAILED] = { .name = "wait-failed", .shown = UNIT_FAILED, .job = UNIT_JOB_PENDING,
                                .waiting = true },
        [UNIT_POS_WAIT_BACKOFF] = { .name = "wait-backoff", .shown = UNIT_BACKOFF, .job = UNIT_JOB_PENDING,
                                .waiting = true },
        [UNIT_POS_WAIT_RESTART] = { .name = "wait-restart", .shown = UNIT_STOPPING, .job = UNIT_JOB_PENDING,
                                .waiting = true },
        [UNIT_POS_START_PRE] = { .name = "start-pre", .shown = UNIT_STARTING, .job = UNIT_JOB_PENDING,
                                .starting = true },
        [UNIT_POS_START] = { .name = "start", .shown = UNIT_STARTING, .job = UNIT_JOB_PENDING, .starting = true },
        [UNIT_POS_START_POST] = { .name = "start-post", .shown = UNIT_STARTING, .job = UNIT_JOB_PENDING,
                                .starting = true },
        [UNIT_POS_RUNNING] = { .name = "running", .shown = UNIT_RUNNING, .job = UNIT_JOB_DONE,
                                .settled = true, .ran = true },
        [UNIT_POS_RELOAD] = { .name = "reload", .shown = UNIT_RUNNING, .job = UNIT_JOB_DONE,
                                .settled = true, .ran = true },
        [UNIT_POS_STOP_NOTIFY] = { .name = "stop-notify", .shown = UNIT_STOPPING, .job = UNIT_JOB_STOPPING,
                                .ran = true },
        [UNIT_POS_STOP_CMD] = { .name = "stop-cmd", .shown = UNIT_STOPPING, .job = UNIT_JOB_STOPPING },
        [UNIT_POS_STOP_SIGTERM] = { .name = "stop-sigterm", .shown = UNIT_STOPPING, .job = UNIT_JOB_STOPPING },
        [UNIT_POS_STOP_SIGKILL] = { .name = "stop-sigkill", .shown = UNIT_STOPPING, .job = UNIT_JOB_STOPPING },
        [UNIT_POS_BACKOFF] = { .name = "backoff", .shown = UNIT_BACKOFF, .job = UNIT_JOB_FAILED,
                                .settled = true, .idle = true },
};

const char *unit_pos_to_string(enum unit_pos p) {
        return p < _UNIT_POS_MAX ? unit_pos_table[p].name : NULL;
}

enum unit_state unit_get_state(const struct unit *u) {
        return u->report ? u->report->state : unit_sm_row(u)->shown;
}

static void shown_now(const struct unit *u, struct unit_shown *ret) {
        *ret = (struct unit_shown) {
                .state = unit_sm_row(u)->shown,
                .result = u->result,
                .main_pid = u->main_pid,
                .since_realtime = u->since_realtime,
                .since_monotonic = u->since_monotonic,
                .restarts = u->restarts,
                .has_last_exit = u->has_last_exit,
                .last_exit = u->last_exit,
        };
}

void unit_get_shown(const struct unit *u, struct unit_shown *ret) {
        if (u->report)
                *ret = *u->report;
        else
                shown_now(u, ret);
}

uint64_t unit_n_restarts(const struct unit *u) {
        return u->pos == UNIT_POS_BACKOFF && u->restart_step > 0 ? u->restart_step - 1 : u->restart_step;
}

enum unit_job_state unit_job_state(const struct unit *u) {
        if (u->pos == UNIT_POS_INACTIVE && u->finished && u->result == UNIT_RESULT_SUCCESS)
                return UNIT_JOB_DONE; /* a oneshot that exited successfully */
        if (unit_sm_row(u)->job == UNIT_JOB_STOPPING && (u->queued & UNIT_QUEUED_RESTART))
                return UNIT_JOB_PENDING; /* stopping to start again */
        return unit_sm_row(u)->job;
}

bool unit_is_waiting(const struct unit *u) {
        return unit_sm_row(u)->waiting;
}

bool unit_is_settled(const struct unit *u) {
        return unit_sm_row(u)->settled;
}

bool unit_is_down(const struct unit *u) {
        return unit_sm_row(u)->down;
}

bool unit_is_dead(const struct unit *u) {
        return unit_sm_row(u)->idle && !u->main && !u->control;
}

bool unit_is_restarting(const struct unit *u) {
        return u->pos == UNIT_POS_BACKOFF || u->pos == UNIT_POS_WAIT_BACKOFF;
}

/* ---- the changes, delivered to the manager after the event ---- */

/* Most units change rarely, so none keeps a buffer between events; the
 * last one freed is kept here for the next event of any unit (the machine
 * runs on one thread: tend's loop). Without it every event of every unit
 * allocated and freed a buffer: a malloc/free on each restart, and at the
 * start of 1,000 units holes between the allocations they keep. */
static struct unit_changes *spare_changes;

void unit_sm_queue_change(struct unit *u, int kind, unit_action action, int status) {
        if (!u->changes && spare_changes)
                u->changes = TAKE_PTR(spare_changes);
        struct unit_changes *q = u->changes;
        if (!q || q->n == q->max) {
                uint32_t max = q ? 2 * q->max : 4; /* (32 bits: an event queues a handful) */
                struct unit_changes *g = max > 0 ? realloc(q, sizeof *g + (size_t) max * sizeof g->v[0]) : NULL;
                if (!g) {
                        /* Out of memory: the last change carries the latest fields. */
                        log_warning("%s: a state change is not reported on its own (out of memory)", u->name);
                        if (!q || q->n == 0)
                                return;
                        q->n--;
                } else {
                        if (!q)
                                g->n = 0;
                        g->max = max;
                        u->changes = q = g;
                }
        }
        struct unit_change *c = &q->v[q->n++];
        *c = (struct unit_change) { .kind = kind, .action = action, .status = status };
        shown_now(u, &c->shown);
}

void unit_sm_queue_changed(struct unit *u) {
        unit_sm_queue_change(u, UNIT_CHANGE_CHANGED, UNIT_ACTION_NONE, 0);
}

/* Each change in order, with the fields it had. The manager may run an event
 * of u from its callback: that event delivers what is queued then (this
 * loop's rest included, in order), so the loop reads from the front each
 * time. */
void unit_sm_deliver_changes(struct unit *u) {
        for (struct unit_changes *q; (q = u->changes) && q->n > 0;) { /* a callback may grow it */
                struct unit_change c = q->v[0];
                q->n--;
                memmove(q->v, q->v + 1, q->n * sizeof q->v[0]);
                const struct unit_shown *saved = u->report;
                u->report = &c.shown;
                if (c.kind == UNIT_CHANGE_CHANGED)
                        u->ops->changed(u->userdata, u);
                else if (c.kind == UNIT_CHANGE_ANSWERED && u->ops->answered)
                        u->ops->answered(u->userdata, u);
                else if (c.kind == UNIT_CHANGE_ACTION)
                        u->ops->action(u->userdata, u, c.action, c.status);
                u->report = saved;
        }
        /* No buffer kept by the unit between events (spare_changes). */
        if (!spare_changes)
                spare_changes = u->changes;
        else
                free(u->changes);
        u->changes = NULL;
}

/* ---- moving ---- */

usec_t unit_sm_now(struct unit *u) {
        return u->ops->now(u->userdata);
}

void unit_sm_set_pos(struct unit *u, enum unit_pos p) {
        enum unit_state was = unit_sm_row(u)->shown;
        u->pos = p;
        if (unit_sm_row(u)->shown != was) {
                u->since_monotonic = unit_sm_now(u);
                u->since_realtime = now_usec(CLOCK_REALTIME);
                log_info("%s: %s", u->name, unit_state_to_string(unit_sm_row(u)->shown));
        }
        unit_sm_queue_changed(u);
}

/* A finer move that changes nothing shown: no record. */
void unit_sm_move(struct unit *u, enum unit_pos p) {
        assert(unit_pos_table[p].shown == unit_sm_row(u)->shown);
        u->pos = p;
}

