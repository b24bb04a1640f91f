/* SPDX-License-Identifier: MIT */
/* A unit's deadline timer: see due-timer.h. */
#include "due-timer.h"

int due_timer_arm(struct due_timer *t, sd_event *e, usec_t deadline, usec_t now, sd_event_time_handler_t on_time,
                  sd_event_handler_t on_due, void *userdata) {
        /* sd-event allows this from inside the source's own callback. */
        due_timer_done(t);
        if (deadline == USEC_INFINITY)
                return 0;
        int k;
        if (deadline <= now) {
                k = sd_event_add_defer(e, &t->source, on_due, userdata);
                t->due = k >= 0;
        } else
                /* Accuracy 1 µs: sd-event's default (250 ms) would blur back-off delays. */
                k = sd_event_add_time(e, &t->source, CLOCK_MONOTONIC, deadline, 1, on_time, userdata);
        return k < 0 ? k : sd_event_source_set_enabled(t->source, SD_EVENT_ONESHOT);
}

void due_timer_dispatched(struct due_timer *t) {
        t->due = false;
}

bool due_timer_take_due(struct due_timer *t) {
        if (!t->due)
                return false;
        due_timer_done(t);
        return true;
}

void due_timer_done(struct due_timer *t) {
        t->source = sd_event_source_disable_unref(t->source);
        t->due = false;
}
