/* SPDX-License-Identifier: MIT */
/*
 * The unit state machine's policies (SPEC §4 "Restart"): which exits are
 * clean, whether Restart= restarts, the back-off delay, the start limit.
 * Pure functions of the unit's file and last run, but for the start-limit
 * ring they keep.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>

#include "unit-internal.h"

/* systemd's clean exit: code 0 or SuccessExitStatus=; for non-oneshot units
 * also SIGHUP, SIGINT, SIGTERM and SIGPIPE. */
bool unit_sm_exit_is_clean(const struct unit *u, const struct exit_reason *r) {
        const struct unit_exit_status_set *ok = &unit_file_exit_statuses(u->file)->success;
        if (r->kind == EXIT_REASON_EXITED)
                return r->status == 0 || unit_exit_status_set_has_code(ok, r->status);
        if (unit_exit_status_set_has_signal(ok, r->status))
                return true;
        return u->file->type != UNIT_TYPE_ONESHOT &&
               (r->status == SIGHUP || r->status == SIGINT || r->status == SIGTERM || r->status == SIGPIPE);
}

enum unit_result unit_sm_result_of_exit(const struct unit *u, const struct exit_reason *r) {
        if (unit_sm_exit_is_clean(u, r))
                return UNIT_RESULT_SUCCESS;
        return r->kind == EXIT_REASON_EXITED ? UNIT_RESULT_EXIT_CODE : UNIT_RESULT_SIGNAL;
}

/* RestartPreventExitStatus= names the last exit. */
static bool restart_prevented(const struct unit *u) {
        if (!u->has_last_exit || u->result == UNIT_RESULT_START_LIMIT)
                return false;
        const struct exit_reason *r = &u->last_exit;
        const struct unit_exit_status_set *prevent = &unit_file_exit_statuses(u->file)->restart_prevent;
        if (r->kind == EXIT_REASON_EXITED)
                return unit_exit_status_set_has_code(prevent, r->status);
        return r->kind == EXIT_REASON_KILLED && unit_exit_status_set_has_signal(prevent, r->status);
}

bool unit_sm_restart_wanted(const struct unit *u) {
        if (!u->want_up || u->finished || restart_prevented(u))
                return false;
        bool clean = u->result == UNIT_RESULT_SUCCESS;
        bool unclean_signal = u->result == UNIT_RESULT_SIGNAL;
        bool timeout = u->result == UNIT_RESULT_TIMEOUT, watchdog = u->result == UNIT_RESULT_WATCHDOG;
        switch (u->file->restart) {
        case UNIT_RESTART_NO:
                return false;
        case UNIT_RESTART_ALWAYS:
                return true;
        case UNIT_RESTART_ON_SUCCESS:
                return clean;
        case UNIT_RESTART_ON_FAILURE:
                return !clean;
        case UNIT_RESTART_ON_ABNORMAL:
                return unclean_signal || timeout || watchdog;
        case UNIT_RESTART_ON_ABORT:
                return unclean_signal;
        case UNIT_RESTART_ON_WATCHDOG:
                return watchdog;
        }
        return false;
}

/* RestartSec= growing over RestartSteps= to RestartMaxDelaySec=, as systemd
 * does: geometric interpolation, delay(n) = sec · (max/sec)^(n/steps). */
usec_t unit_sm_restart_delay(const struct unit *u) {
        const struct unit_file *f = u->file;
        usec_t sec = f->restart_sec, max = f->restart_max_delay;
        if (f->restart_steps == 0 || max == USEC_INFINITY || max <= sec || sec == 0)
                return sec;
        unsigned n = u->restart_step < f->restart_steps ? u->restart_step : f->restart_steps;
        double ratio = (double) max / (double) sec, d = (double) sec;
        for (unsigned i = 0; i < n; i++)
                d *= pow(ratio, 1.0 / f->restart_steps);
        usec_t v = (usec_t) (d + 0.5);
        return v > max ? max : v;
}

/* Records a start; false when it is one more than StartLimitBurst= within
 * StartLimitIntervalSec= (0 disables the limit). */
bool unit_sm_start_limit_ok(struct unit *u) {
        const struct unit_file *f = u->file;
        if (f->start_limit_interval == 0 || f->start_limit_burst == 0)
                return true;
        unsigned cap = f->start_limit_burst + 1;
        if (!u->start_times) {
                u->start_times = calloc(1, sizeof *u->start_times + cap * sizeof u->start_times->t[0]);
                if (!u->start_times)
                        return true; /* out of memory: no limit rather than no start */
        }
        struct unit_start_times *r = u->start_times;
        usec_t t = unit_sm_now(u);
        r->t[r->head] = t;
        r->head = (r->head + 1) % cap;
        if (r->n < cap)
                r->n++;
        if (r->n < cap)
                return true;
        /* The oldest of the last burst+1 starts is at head. */
        usec_t oldest = r->t[r->head];
        return t - oldest >= f->start_limit_interval;
}

/* The last start recorded never ran (tend had no fds for it, tend(8) "FILE
 * DESCRIPTOR BUDGET"): it does not count toward the start limit. */
void unit_sm_start_limit_forget(struct unit *u) {
        struct unit_start_times *r = u->start_times;
        if (!r || r->n == 0)
                return;
        unsigned cap = u->file->start_limit_burst + 1;
        r->head = (r->head + cap - 1) % cap;
        r->n--;
}

void unit_sm_start_limit_reset(struct unit *u) {
        if (u->start_times)
                u->start_times->n = u->start_times->head = 0;
}
