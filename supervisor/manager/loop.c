/* SPDX-License-Identifier: MIT */
/*
 * The loop's dispatch of exits (SPEC §2.1, §2.2): collect, then dispatch —
 * the reaper is drained first (all ready pidfds), then exits are handed to
 * the state machines one by one.
 */
#include <stdbool.h>

#include <systemd/sd-event.h>

#include "exit-routes.h"
#include "libexit.h"
#include "log.h"
#include "macro.h"
#include "manager-internal.h"
#include "sandbox.h"
#include "store.h"
#include "unit.h"

/* ---- exits ---- */

/* The process of u that had role, if it is still the one of id. */
static struct exit_process *process_of(struct unit *u, enum exit_role role, exit_id_t id) {
        struct exit_process *p = role == EXIT_ROLE_MAIN ? u->main : u->control;
        return p && exit_process_id(p) == id ? p : NULL;
}

static int take_exit(void *userdata, exit_id_t id, struct exit_reason *ret) {
        struct manager *m = userdata;
        return exit_hub_take(m->hub, id, ret);
}

static void deliver_exit(void *userdata, struct exit_owner *owner, enum exit_role role, exit_id_t id,
                         const struct exit_reason *reason) {
        struct unit *u = owner->unit;
        struct exit_process *p = process_of(u, role, id);
        if (!p)
                return; /* routes are kept at every change of u->main and u->control: never */
        exit_process_ref(p);
        unit_process_exited(u, p, reason);
        exit_process_unref(p);
        manager_run_due(u);
}

static const struct exit_routes_ops exit_ops = {
        .take = take_exit,
        .deliver = deliver_exit,
};

static void process_exit(struct manager *m, exit_id_t id) {
        if (manager_cmd_exited(m, id))
                return;
        (void) exit_routes_dispatch(&m->routes, id, &exit_ops, m);
}

/* After LAGGED: take the outcome of every process tend owns. */
static void recover_exits(struct manager *m) {
        if (m->cmd.process)
                process_exit(m, exit_process_id(m->cmd.process));
        int k = exit_routes_recover(&m->routes, &exit_ops, m);
        if (k < 0)
                log_error_errno(k, "recovering exits after the exit queue overflowed: %m");
}

static void drain_exec_events(struct manager *m) {
        struct exit_process *p;
        while (exit_reaper_next_exec(m->reaper, &p) == 0) {
                if (manager_cmd_exec_result(m, p)) { /* combined mode's CMD (cmd.c) */
                        exit_process_unref(p);
                        continue;
                }
                int stage = 0, error = exit_process_exec_result(p, &stage);
                const struct exit_route *r = exit_routes_find(&m->routes, exit_process_id(p));
                struct unit *u = r ? r->owner->unit : NULL;
                enum exit_role role = r ? r->role : EXIT_ROLE_CONTROL;
                if (u && process_of(u, role, exit_process_id(p))) {
                        sandbox_log_exec_failure(u->name, error, stage); /* "NAME: KEY …" */
                        if (role == EXIT_ROLE_MAIN)
                                unit_exec_result(u, p, error);
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
                log_warning_errno(k, "reaping: %m");
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
