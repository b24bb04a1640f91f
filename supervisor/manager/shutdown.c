/* SPDX-License-Identifier: MIT */
/*
 * Shutdown (SPEC §4 "Shutdown"): units stop in reverse order under one
 * deadline; what is left gets the final kill signal.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "cgroup.h"
#include "jobs.h"
#include "libexit.h"
#include "log.h"
#include "manager-internal.h"
#include "notify.h"
#include "unit.h"

/* ---- shutdown (SPEC §4 "Shutdown") ---- */

#define LEFTOVERS_POLL_USEC (100 * USEC_PER_MSEC)

/* Asked at every change during a shutdown: a scan from the first unit each
 * time made a shutdown of N units cost N² (issue 19: 10,000 units). The scan
 * goes on from where the last one stopped (*from, a hint: units[] may have
 * been compacted meanwhile), and only a scan that reaches the end is checked
 * by one from the start, so the whole shutdown costs O(N) calls but for
 * units that came back to life. */
static bool all_units_are(struct manager *m, bool (*is)(const struct unit *u), size_t *from) {
        if (*from > m->n_units)
                *from = 0;
        while (*from < m->n_units && is(m->units[*from]))
                ++*from;
        if (*from < m->n_units)
                return false;
        for (size_t i = 0; i < m->n_units; i++)
                if (!is(m->units[i])) {
                        *from = i;
                        return false;
                }
        return true;
}

static bool all_units_dead(struct manager *m) {
        static size_t from;
        return all_units_are(m, unit_is_dead, &from);
}

/* Every unit's stop sequence is over (inactive or failed), whatever
 * processes it left (KillMode=process, SendSIGKILL=no). */
static bool all_units_down(struct manager *m) {
        static size_t from;
        return all_units_are(m, unit_is_down, &from);
}

static size_t units_left(struct manager *m, char *buf, size_t size);

/* Process groups of earlier runs a unit stopped tracking (fallback mode, past
 * UNIT_GROUP_MAX_OLD): their processes may still run, unreached, so tend does
 * not say 0 (issue 19; QA19B M2). */
static void check_forgotten(struct manager *m) {
        for (size_t i = 0; i < m->n_units; i++) {
                unsigned n = unit_group_forgotten(data(m->units[i])->group);
                if (n == 0)
                        continue;
                log_error("shutdown: %s: %u process group%s of earlier runs no longer tracked (more than %d "
                          "kept): %s processes may still run", m->units[i]->name, n, n == 1 ? "" : "s",
                          UNIT_GROUP_MAX_OLD, n == 1 ? "its" : "their");
                if (m->exit_status == 0)
                        m->exit_status = 1;
        }
}

static void shutdown_finish(struct manager *m) {
        if (getpid() == 1 && exit_reaper_has_children(m->reaper) > 0) {
                /* As PID 1 the remaining processes get SIGTERM, then, at the
                 * deadline, SIGKILL; tend exits when none is left. */
                static bool termed;
                if (!termed) {
                        termed = true;
                        (void) kill(-1, SIGTERM);
                        (void) kill(-1, SIGCONT);
                }
                return;
        }
        check_forgotten(m);
        sd_event_exit(m->event, m->exit_status);
}

static int on_leftovers_poll(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        char names[8];
        if (units_left(m, names, sizeof names) > 0 || !all_units_dead(m))
                return sd_event_source_set_time_relative(s, LEFTOVERS_POLL_USEC);
        m->leftovers_poll = sd_event_source_disable_unref(m->leftovers_poll);
        shutdown_finish(m);
        return 0;
}

/* One unit's leftovers at the end of the shutdown: named with their count
 * and why they were left, then SIGTERM (and SIGCONT). */
static void leftovers_term(struct unit *u) {
        struct unit_group *g = data(u)->group;
        int n = unit_group_members(g, NULL, 0);
        const char *why = !u->file->send_sigkill ? "SendSIGKILL=no" : "KillMode=process";
        if (n > 0)
                log_warning("%s: %d process%s left by its stop (%s): SIGTERM at shutdown, the final kill signal at "
                            "the shutdown deadline", u->name, n, n == 1 ? "" : "es", why);
        else
                log_warning("%s: processes left by its stop (%s): SIGTERM at shutdown, the final kill signal at the "
                            "shutdown deadline", u->name, why);
        if (u->main) /* SendSIGKILL=no: its main process may be the survivor */
                (void) exit_process_signal(u->main, SIGTERM);
        (void) unit_group_signal(g, SIGTERM, u->main != NULL);
}

/* As systemd's own shutdown (systemd-shutdown: SIGTERM to the processes
 * that remain once the units are stopped, SIGKILL after a timeout): once
 * every unit's stop is over, what their stops left gets SIGTERM, tend says
 * what it waits for, and polls until it is gone; the shutdown deadline's
 * final kill reaches the rest. Returns whether anything is left to wait for.
 * Once: O(units) reads of cgroup.events. */
static bool leftovers_wait(struct manager *m, bool dead) {
        char names[512];
        size_t n = units_left(m, names, sizeof names);
        if (n == 0 && dead)
                return false;
        m->leftovers_termed = true;
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                if (u->main || unit_group_populated(data(u)->group) > 0)
                        leftovers_term(u);
        }
        uint64_t deadline = 0, now = now_usec(CLOCK_MONOTONIC);
        (void) sd_event_source_get_time(m->shutdown_timer, &deadline);
        log_warning("shutdown: waiting for the processes %zu unit%s left (%s), at most %llu ms more", n ? n : 1,
                    n == 1 ? "" : "s", n ? names : "a main process",
                    (unsigned long long) (deadline > now ? (deadline - now) / USEC_PER_MSEC : 0));
        (void) sd_event_add_time_relative(m->event, &m->leftovers_poll, CLOCK_MONOTONIC, LEFTOVERS_POLL_USEC, 0,
                                          on_leftovers_poll, m);
        return true;
}

void manager_check_shutdown_done(struct manager *m) {
        if (!m->shutting_down || m->cmd.process || m->leftovers_termed) /* then the poll decides */
                return;
        bool dead = all_units_dead(m);
        if (!dead && !all_units_down(m))
                return;
        if (!leftovers_wait(m, dead) && dead)
                shutdown_finish(m);
}

void manager_kill_everything(struct manager *m) {
        m->force_killed = true;
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                (void) unit_group_signal(data(u)->group, u->file->final_kill_signal, u->main != NULL);
        }
        if (m->cmd.process)
                (void) exit_process_signal(m->cmd.process, SIGKILL);
        if (getpid() == 1)
                (void) kill(-1, SIGKILL);
}

/* The units with a process left (cgroup.events, or the fallback's process
 * group: one read or system call each, no fd kept); up to max named in buf. */
static size_t units_left(struct manager *m, char *buf, size_t size) {
        size_t n = 0, used = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                if (unit_group_populated(data(u)->group) <= 0)
                        continue;
                if (n++ < 10 && used < size) {
                        int w = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", u->name);
                        used += w > 0 ? (size_t) w : 0;
                }
        }
        if (n > 10 && used < size)
                snprintf(buf + used, size - used, " and %zu more", n - 10);
        return n;
}

/* After the final kill: up to 1 s for the kernel to finish the kills (the
 * loop is ending: nothing else waits), then what is left is named and tend
 * exits non-zero (issue 19: a shutdown never ends with a unit's process
 * running while tend says 0). */
static void check_nothing_left(struct manager *m) {
        char names[512];
        size_t n = 0;
        for (unsigned i = 0; i < 20; i++) {
                if ((n = units_left(m, names, sizeof names)) == 0)
                        return;
                (void) usleep(50 * 1000);
        }
        log_error("shutdown: %zu unit%s still %s processes after the final kill signal: %s", n, n == 1 ? "" : "s",
                  n == 1 ? "has" : "have", names);
        if (m->exit_status == 0)
                m->exit_status = 1;
}

static int on_shutdown_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        log_warning("shutdown deadline reached: sending the final kill signal to everything left");
        manager_kill_everything(m);
        /* What survives SIGKILL (uninterruptible sleep) is named, and tend
         * exits non-zero. */
        check_nothing_left(m);
        check_forgotten(m);
        sd_event_exit(m->event, m->exit_status);
        return 0;
}

static void stop_all_units(struct manager *m) {
        if (m->units_stopping)
                return;
        m->units_stopping = true;
        /* Reverse order of After=/Before=; independent units in parallel. */
        jobs_stop_all(m->jobs);
        manager_check_shutdown_done(m);
}

static int on_cmd_stop_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        if (m->cmd.process) {
                log_warning("%s did not exit within --stop-timeout: SIGKILL", m->opts->cmd[0]);
                (void) exit_process_signal(m->cmd.process, SIGKILL);
        }
        return 0;
}

void manager_begin_shutdown(struct manager *m, int status) {
        if (m->shutting_down)
                return;
        m->shutting_down = true;
        m->exit_status = status;
        notify_upstream_stopping(m->upstream);
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + m->opts->shutdown_timeout;
        (void) sd_event_add_time(m->event, &m->shutdown_timer, CLOCK_MONOTONIC, deadline, 1, on_shutdown_deadline, m);
        if (m->cmd.process) {
                /* Combined mode (SPEC §1): CMD first, within the same deadline;
                 * the units stop once CMD is gone (manager_shutdown_cmd_gone),
                 * so a CMD that talks to them on its way out still finds them. */
                (void) exit_process_signal(m->cmd.process, SIGTERM);
                usec_t t = now_usec(CLOCK_MONOTONIC) + m->opts->stop_timeout;
                (void) sd_event_add_time(m->event, NULL, CLOCK_MONOTONIC, t < deadline ? t : deadline, 1,
                                         on_cmd_stop_timeout, m);
                return;
        }
        stop_all_units(m);
}

void manager_shutdown_cmd_gone(struct manager *m) {
        if (m->shutting_down)
                stop_all_units(m);
}
