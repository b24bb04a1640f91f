/* SPDX-License-Identifier: MIT */
/*
 * Condition*= and Assert*= at a start (systemd.unit(5) "Conditions and
 * Asserts"; exec/condition.h evaluates them): checked when the start job
 * begins its work, before the start limit and ExecStartPre=, as systemd
 * checks them when the start job runs.
 *  - A condition unmet skips the start: the unit becomes inactive (result
 *    success), its start job counts as done (dependents proceed, as with
 *    systemd's job result "done"), the flight is answered ok, and the record
 *    carries "start condition unmet: ConditionX=…".
 *  - An assert unmet fails the start without a state change of its own: the
 *    unit becomes inactive, its start job is not done (a Requires= dependent
 *    fails, as systemd's job result "assert" fails them), and the flight is
 *    answered not ok with "assertion failed: AssertX=…".
 * Each is logged once (info, error) with the unit and the key's file:line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "condition.h"
#include "log.h"
#include "unit-internal.h"

/* The text shown for u's last start (u->condition_text), or none. */
static void set_text(struct unit *u, const char *text) {
        free(u->condition_text);
        u->condition_text = text ? strdup(text) : NULL; /* out of memory: shown without it */
}

static void skipped(struct unit *u, const struct unit_condition *c, bool is_assert) {
        char what[512], text[600];
        condition_format(c, what, sizeof what);
        snprintf(text, sizeof text, "%s: %s", is_assert ? "assertion failed" : "start condition unmet", what);
        if (is_assert)
                log_error("%s: %s:%u: %s, not starting", u->name, u->file->path, c->line, text);
        else
                log_info("%s: %s:%u: %s, not starting", u->name, u->file->path, c->line, text);
        set_text(u, text);
        u->queued &= ~UNIT_QUEUED_STOP;
        u->result = UNIT_RESULT_SUCCESS;
        u->finished = !is_assert; /* a skipped start job is done; an asserted one is not */
        unit_sm_set_pos(u, UNIT_POS_INACTIVE);
        unit_sm_answer_flight(u, !is_assert, is_assert ? text : NULL);
}

bool unit_sm_conditions_met(struct unit *u) {
        const struct unit_conditions *l = u->file->conditions;
        const struct unit_condition *failed = NULL;
        if (!l) {
                set_text(u, NULL);
                return true;
        }
        static const struct condition_env machine = {}; /* the real root, tend's environment */
        if (!condition_list_test(&machine, l, false, u->name, u->file->path, &failed)) {
                skipped(u, failed, false);
                return false;
        }
        if (!condition_list_test(&machine, l, true, u->name, u->file->path, &failed)) {
                skipped(u, failed, true);
                return false;
        }
        set_text(u, NULL);
        return true;
}
