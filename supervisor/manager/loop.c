/* SPDX-License-Identifier: MIT */
/*
 * The loop's dispatch of exits (SPEC §2.1, §2.2): collect, then dispatch —
 * the reaper is drained first (all ready pidfds), then exits are handed to
 * the state machines one by one.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "control.h"
#include "libexit.h"
#include "log.h"
#include "logs.h"
#include "macro.h"
#include "manager.h"
#include "manager-internal.h"
#include "record.h"
#include "notify.h"
#include "sandbox.h"
#include "signal-util.h"
#include "singleflight.h"
#include "store.h"
#include "unit-file.h"
#include "unit.h"
#include "watchdog.h"

/* ---- exits ---- */

/* Finds the unit and process an exit id belongs to. */
static struct unit *unit_of_id(struct manager *m, exit_id_t id, struct exit_process **ret) {
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                if (u->main && exit_process_id(u->main) == id) {
                        *ret = u->main;
                        return u;
                }
                if (u->control && exit_process_id(u->control) == id) {
                        *ret = u->control;
                        return u;
                }
        }
        *ret = NULL;
        return NULL;
}

static void process_exit(struct manager *m, exit_id_t id) {
        struct exit_reason reason;
        if (manager_cmd_exited(m, id))
                return;
        struct exit_process *p;
        struct unit *u = unit_of_id(m, id, &p);
        if (!u || exit_hub_take(m->hub, id, &reason) < 0)
                return;
        exit_process_ref(p);
        unit_process_exited(u, p, &reason);
        exit_process_unref(p);
        manager_run_due(u);
}

/* After LAGGED: take the outcome of every process tend owns. */
static void recover_exits(struct manager *m) {
        if (m->cmd)
                process_exit(m, exit_process_id(m->cmd));
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *u = m->units[i];
                if (u->main)
                        process_exit(m, exit_process_id(u->main));
                if (u->control)
                        process_exit(m, exit_process_id(u->control));
        }
}

static void drain_exec_events(struct manager *m) {
        struct exit_process *p;
        while (exit_reaper_next_exec(m->reaper, &p) == 0) {
                if (manager_cmd_exec_result(m, p)) { /* combined mode's CMD (cmd.c) */
                        exit_process_unref(p);
                        continue;
                }
                int stage = 0, error = exit_process_exec_result(p, &stage);
                for (size_t i = 0; i < m->n_units; i++) {
                        if (m->units[i]->main == p || m->units[i]->control == p)
                                sandbox_log_exec_failure(m->units[i]->name, error, stage); /* "NAME: KEY …" */
                        if (m->units[i]->main == p)
                                unit_exec_result(m->units[i], p, error);
                }
                exit_process_unref(p);
        }
}

static void drain_exits(struct manager *m) {
        struct exit_event ev[64];
        bool orphans = false;
        int n;
        while ((n = exit_sub_recv_batch(m->sub, ev, ELEMENTSOF(ev), 0)) > 0)
                for (int i = 0; i < n; i++) {
                        if (ev[i].type == EXIT_EVENT_LAGGED) {
                                log_debug("exit queue overflowed: recovering outcomes from the ledger");
                                recover_exits(m);
                        } else if (ev[i].flags & EXIT_EVENT_ORPHAN)
                                orphans = true;
                        else
                                process_exit(m, ev[i].id);
                }
        /* Without cgroups, a unit's last processes may have been orphans. */
        if (orphans)
                for (size_t i = 0; i < m->n_units; i++)
                        unit_check_processes(m->units[i]);
        manager_check_shutdown_done(m);
}

/* The records of what the exits change are written after the restarts
 * they cause have spawned (records_hold). */
int manager_on_reaper(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct manager *m = userdata;
        int k = exit_reaper_dispatch(m->reaper);
        if (k < 0)
                log_warning_errno(k, "reaping: %s", strerror(-k));
        records_hold(m);
        drain_exec_events(m);
        drain_exits(m);
        records_release(m);
        return 0;
}

int manager_on_sub(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct manager *m = userdata;
        records_hold(m);
        drain_exits(m);
        records_release(m);
        return 0;
}

int manager_on_store(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct manager *m = userdata;
        (void) store_dispatch(m->store);
        return 0;
}
