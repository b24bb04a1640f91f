/* SPDX-License-Identifier: MIT */
/*
 * The unit state machine's notifications (SPEC §4 "Readiness and notify")
 * and watchdog lease (SPEC §4 "Watchdog"). Each public function is an event
 * of the machine (unit.h "How an event runs"); a notification's keys act
 * in order, each on the position the one before left.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "notify.h"
#include "signal-util.h"
#include "unit-internal.h"

/* ---- the watchdog lease ---- */

usec_t unit_watchdog_usec(const struct unit_file *f) {
        return f->watchdog == USEC_INFINITY ? 0 : f->watchdog;
}

void unit_sm_watchdog_renew(struct unit *u) {
        usec_t ttl = unit_watchdog_usec(u->file);
        if (ttl == 0 || !u->main)
                return;
        int k = u->ops->watchdog(u->userdata, u, ttl);
        if (k < 0)
                log_warning_errno(k, "%s: watchdog lease not written: %m", u->name);
        else
                u->watchdog_held = true; /* 0: expired; the expiry is on its way */
}

void unit_sm_watchdog_release(struct unit *u) {
        if (!u->watchdog_held)
                return;
        u->watchdog_held = false;
        (void) u->ops->watchdog(u->userdata, u, 0);
}

static bool watchdog_applies(const struct unit *u) {
        return u->pos == UNIT_POS_RUNNING || u->pos == UNIT_POS_RELOAD;
}

/* Expiry or WATCHDOG=trigger: WatchdogSignal=, then the stop escalation. */
static void watchdog_fire(struct unit *u, const char *why) {
        if (!watchdog_applies(u))
                return;
        char b[24];
        log_warning("%s: watchdog %s: sending %s", u->name, why, signal_to_string(u->file->watchdog_signal, b));
        unit_sm_watchdog_release(u);
        unit_sm_disarm(u);
        u->result = UNIT_RESULT_WATCHDOG;
        /* As systemd: no ExecStop=; the signal per KillMode=, then
         * TimeoutStopSec= and the final kill signal. */
        unit_sm_queue_step(u, UNIT_STEP_STOP_WATCHDOG);
}

void unit_watchdog_expired(struct unit *u) {
        unit_sm_event_begin(u);
        u->watchdog_held = false; /* gone: nothing to delete */
        char b[32];
        usec_t ms = unit_watchdog_usec(u->file) / USEC_PER_MSEC;
        snprintf(b, sizeof b, "timeout (%llums)", (unsigned long long) ms);
        watchdog_fire(u, b);
        unit_sm_event_end(u);
}

/* ---- who may notify ---- */

unit_notify_access unit_notify_access_effective(const struct unit_file *f) {
        bool needs = f->type == UNIT_TYPE_NOTIFY || unit_watchdog_usec(f) > 0;
        if (f->notify_access == UNIT_NOTIFY_ACCESS_DEFAULT || f->notify_access == UNIT_NOTIFY_ACCESS_NONE)
                return needs ? UNIT_NOTIFY_ACCESS_MAIN : UNIT_NOTIFY_ACCESS_NONE;
        return f->notify_access;
}

bool unit_notify_allowed(struct unit *u, pid_t pid, const char **ret_why) {
        bool main = pid > 0 && pid == u->main_pid;
        bool control = pid > 0 && u->control && exit_process_pid(u->control) == pid;
        const char *why = NULL;
        switch (unit_notify_access_effective(u->file)) {
        case UNIT_NOTIFY_ACCESS_MAIN:
                if (main)
                        return true;
                why = "NotifyAccess=main and it is not the main process";
                break;
        case UNIT_NOTIFY_ACCESS_EXEC:
                if (main || control)
                        return true;
                why = "NotifyAccess=exec and it is neither the main process nor an Exec*= process";
                break;
        case UNIT_NOTIFY_ACCESS_ALL:
                if (main || control || (pid > 0 && u->ops->contains(u->userdata, u, pid) > 0))
                        return true;
                why = "NotifyAccess=all and it is not a process of the unit";
                break;
        default:
                why = "NotifyAccess=none";
                break;
        }
        if (ret_why)
                *ret_why = why;
        return false;
}

/* ---- the keys ---- */

/* Whether a main process is followed in u's position (MAINPID= applies). */
static bool has_main_phase(const struct unit *u) {
        switch (u->pos) {
        case UNIT_POS_START:
        case UNIT_POS_START_POST:
        case UNIT_POS_RUNNING:
        case UNIT_POS_RELOAD:
        case UNIT_POS_STOP_NOTIFY:
                return true;
        default:
                return false;
        }
}

static void log_adopt_refused(struct unit *u, pid_t pid, int k) {
        const char *why = k == -EPERM    ? "not a process of the unit"
                          : k == -ECHILD ? "not a child of tend, which can only follow a process it can wait for"
                          : k == -ESRCH  ? "no such process"
                                         : NULL;
        if (why)
                log_warning("%s: MAINPID=%d ignored: %s", u->name, (int) pid, why);
        else
                log_warning_errno(k, "%s: MAINPID=%d ignored: %m", u->name, (int) pid);
}

static void notify_main_pid(struct unit *u, pid_t pid) {
        if (pid == u->main_pid)
                return;
        if (!has_main_phase(u)) {
                log_debug("%s: MAINPID=%d ignored while %s", u->name, (int) pid,
                          unit_state_to_string(unit_get_state(u)));
                return;
        }
        struct exit_process *p = NULL;
        int k = u->ops->adopt(u->userdata, u, pid, &p);
        if (k < 0) {
                log_adopt_refused(u, pid, k);
                return;
        }
        log_info("%s: main process is now %d (MAINPID=)", u->name, (int) pid);
        /* The old main process is no longer followed: its exit is not the
         * unit's; it stays a process of the unit for the stop. */
        unit_sm_set_main(u, p);
        unit_sm_queue_changed(u);
}

/* STATUS= (empty: cleared) and ERRNO=; true when the record changed. */
static bool notify_status(struct unit *u, const struct notify_message *m) {
        bool changed = false;
        if (m->status) {
                const char *text = *m->status ? m->status : NULL;
                if (!text != !u->status_text || (text && !streq(text, u->status_text))) {
                        char *copy = text ? strdup(text) : NULL;
                        if (copy || !text) {
                                free(u->status_text);
                                u->status_text = copy;
                                changed = true;
                        }
                }
        }
        if (m->has_errno && m->status_errno != u->status_errno) {
                u->status_errno = m->status_errno;
                if (m->status_errno)
                        log_info("%s: reports ERRNO=%d (%s)", u->name, m->status_errno, strerror(m->status_errno));
                changed = true;
        }
        return changed;
}

static void notify_ready(struct unit *u) {
        /* The start job of a Type=notify unit (SPEC §4 "Start jobs"); in
         * any other position READY=1 changes nothing. */
        if (u->pos == UNIT_POS_START && u->file->type == UNIT_TYPE_NOTIFY && u->main)
                unit_sm_queue_step(u, UNIT_STEP_MAIN_STARTED);
}

static void notify_stopping(struct unit *u) {
        if (u->pos != UNIT_POS_RUNNING)
                return;
        unit_sm_watchdog_release(u);
        unit_sm_set_pos(u, UNIT_POS_STOP_NOTIFY);
        unit_sm_arm(u, u->file->timeout_stop);
}

/* Whether a start or stop deadline runs in u's position. */
static bool deadline_extendable(const struct unit *u) {
        switch (u->pos) {
        case UNIT_POS_START_PRE:
        case UNIT_POS_START:
        case UNIT_POS_START_POST:
        case UNIT_POS_STOP_NOTIFY:
        case UNIT_POS_STOP_CMD:
        case UNIT_POS_STOP_SIGTERM:
        case UNIT_POS_STOP_SIGKILL:
                return true;
        default:
                return false;
        }
}

/* EXTEND_TIMEOUT_USEC=: the start or stop deadline becomes at least now + usec. */
static void notify_extend(struct unit *u, usec_t usec) {
        if (u->deadline == USEC_INFINITY || !deadline_extendable(u))
                return;
        usec_t t = unit_sm_now(u);
        usec_t want = usec > USEC_INFINITY - 1 - t ? USEC_INFINITY - 1 : t + usec;
        if (want <= u->deadline)
                return;
        u->deadline = want;
        u->ops->arm(u->userdata, u, want);
}

void unit_notify(struct unit *u, const struct notify_message *m) {
        unit_sm_event_begin(u);
        if (m->main_pid)
                notify_main_pid(u, m->main_pid);
        if (notify_status(u, m))
                unit_sm_queue_changed(u);
        if (m->reloading)
                log_debug("%s: RELOADING=1", u->name);
        if (m->ready)
                notify_ready(u);
        /* Each key acts on the position the one before left: its steps run
         * first (READY=1 then STOPPING=1 in one message stops a running
         * unit). */
        unit_sm_run_steps(u);
        if (m->stopping)
                notify_stopping(u);
        if (m->has_extend_timeout)
                notify_extend(u, m->extend_timeout_usec);
        if (m->watchdog_trigger)
                watchdog_fire(u, "triggered (WATCHDOG=trigger)");
        unit_sm_run_steps(u);
        if (m->watchdog_ping && u->watchdog_held && watchdog_applies(u))
                unit_sm_watchdog_renew(u);
        unit_sm_event_end(u);
}
