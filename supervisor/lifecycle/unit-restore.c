/* SPDX-License-Identifier: MIT */
/* reexec: a unit's position and history across a re-exec (unit-restore.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "unit-internal.h"
#include "unit-restore.h"

bool unit_restorable(const struct unit *u, const char **why) {
        switch (u->pos) {
        case UNIT_POS_INACTIVE:
        case UNIT_POS_FAILED:
        case UNIT_POS_BACKOFF:
                return !u->main && !u->control;
        case UNIT_POS_RUNNING:
                if (!u->control)
                        return true;
                *why = "runs a control process";
                return false;
        default:
                *why = "is starting, stopping or reloading";
                return false;
        }
}

static void starts_get(const struct unit *u, struct unit_saved *ret) {
        const struct unit_start_times *r = u->start_times;
        unsigned cap = u->file->start_limit_burst + 1;
        ret->n_starts = 0;
        if (!r)
                return;
        /* Oldest first: the ring's entries before head, wrapped. */
        unsigned first = r->n < cap ? 0 : r->head;
        for (unsigned i = 0; i < r->n && ret->n_starts < UNIT_SAVED_STARTS_MAX; i++)
                ret->starts[ret->n_starts++] = r->t[(first + i) % cap];
}

void unit_saved_get(const struct unit *u, struct unit_saved *ret) {
        *ret = (struct unit_saved) {
                .pos = u->pos,
                .result = u->result,
                .want_up = u->want_up,
                .finished = u->finished,
                .has_last_exit = u->has_last_exit,
                .watchdog_held = u->watchdog_held,
                .last_exit = u->last_exit,
                .main_pid = u->main_pid,
                .since_realtime = u->since_realtime,
                .since_monotonic = u->since_monotonic,
                .deadline = u->deadline,
                .restarts = u->restarts,
                .restart_step = u->restart_step,
                .status_text = u->status_text,
        };
        starts_get(u, ret);
}

/* The history replayed into the ring the current file's burst sizes. */
static int starts_put(struct unit *u, const struct unit_saved *s) {
        unsigned cap = u->file->start_limit_burst + 1;
        if (s->n_starts == 0 || u->file->start_limit_burst == 0)
                return 0;
        u->start_times = calloc(1, sizeof *u->start_times + cap * sizeof u->start_times->t[0]);
        if (!u->start_times)
                return -ENOMEM;
        for (unsigned i = 0; i < s->n_starts; i++) {
                u->start_times->t[u->start_times->head] = s->starts[i];
                u->start_times->head = (u->start_times->head + 1) % cap;
                if (u->start_times->n < cap)
                        u->start_times->n++;
        }
        return 0;
}

int unit_restore(struct unit *u, const struct unit_saved *s, struct exit_process *main, sf_resolution *resolution) {
        bool ok = s->pos == UNIT_POS_INACTIVE || s->pos == UNIT_POS_FAILED || s->pos == UNIT_POS_BACKOFF ||
                  s->pos == UNIT_POS_RUNNING;
        if (!ok || u->main || u->control || u->pos != UNIT_POS_INACTIVE) {
                sf_resolution_free(resolution);
                return -EINVAL;
        }
        if (s->status_text && !(u->status_text = strdup(s->status_text))) {
                sf_resolution_free(resolution);
                return -ENOMEM;
        }
        int k = starts_put(u, s);
        if (k < 0) {
                sf_resolution_free(resolution);
                return k;
        }
        u->result = s->result;
        u->want_up = s->want_up;
        u->finished = s->finished;
        u->has_last_exit = s->has_last_exit;
        u->last_exit = s->last_exit;
        u->restarts = s->restarts;
        u->restart_step = s->restart_step;
        u->resolution = resolution;
        unit_sm_event_begin(u);
        if (main)
                unit_sm_set_main(u, exit_process_ref(main));
        /* The position as it was, with the old tend's times: no move is
         * logged, the record is written once with them. */
        u->pos = s->pos;
        u->since_realtime = s->since_realtime;
        u->since_monotonic = s->since_monotonic;
        unit_sm_queue_changed(u);
        /* The watchdog's lease anew, its period from now (the store is the
         * new tend's): at most one WatchdogSec= more for the unit. */
        usec_t ttl = unit_watchdog_usec(u->file);
        if (s->watchdog_held && u->main && ttl > 0)
                u->watchdog_held = u->ops->watchdog(u->userdata, u, ttl) >= 0;
        if (s->deadline != USEC_INFINITY) {
                u->deadline = s->deadline;
                u->ops->arm(u->userdata, u, u->deadline);
        }
        unit_sm_event_end(u);
        return 0;
}
