/* SPDX-License-Identifier: MIT */
/*
 * Combined mode (SPEC §1): CMD starts once the initial start jobs have
 * settled.
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
#include "cmd-run.h"
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

/* ---- combined mode ---- */

void manager_maybe_start_cmd(struct manager *m) {
        /* Not while the initial start jobs are being queued: a unit not
         * started yet is dead, which would count as settled. */
        if (!m->opts->cmd || m->cmd.started || m->shutting_down || !m->initial_jobs_queued)
                return;
        for (size_t i = 0; i < m->n_units; i++)
                if (!unit_is_settled(m->units[i]))
                        return;
        m->cmd.started = true;
        for (size_t i = 0; i < m->n_units; i++)
                if (unit_get_state(m->units[i]) == UNIT_FAILED)
                        fprintf(stderr, "tend: %s failed (%s) before CMD started\n", m->units[i]->name,
                                unit_result_to_string(m->units[i]->result));
        /* Its exec result comes through the loop (manager_cmd_exec_result):
         * this callback never waits for it. */
        int k = cmd_run_spawn(m->reaper, m->opts->cmd, m->cmd.nofile_soft_inherited, true, &m->cmd.process);
        for (size_t i = 0; i < m->cmd.n_inherited; i++)
                close(m->cmd.inherited[i]); /* CMD has them; tend keeps no copy */
        m->cmd.n_inherited = 0;
        if (k < 0)
                manager_begin_shutdown(m, 1);
}

/* CMD's exec result, from the reaper's exec events: a failure is said now;
 * the status follows at CMD's exit. Returns whether p is CMD. */
bool manager_cmd_exec_result(struct manager *m, struct exit_process *p) {
        if (!m->cmd.process || p != m->cmd.process)
                return false;
        (void) cmd_run_exec_result(m->opts->cmd[0], p);
        return true;
}

/* An exit of CMD (id is its process's): its status becomes tend's, and the
 * shutdown begins. Returns whether id was CMD's. */
bool manager_cmd_exited(struct manager *m, exit_id_t id) {
        if (!m->cmd.process || exit_process_id(m->cmd.process) != id)
                return false;
        struct exit_reason reason;
        if (exit_hub_take(m->hub, id, &reason) == 0) {
                m->cmd.status = cmd_run_exited(m->opts->cmd[0], m->cmd.process, &reason);
                m->cmd.done = true;
                m->cmd.process = exit_process_unref(m->cmd.process);
                log_info("CMD exited: tend stops its units and exits with status %d", m->cmd.status);
                /* Combined mode exits with CMD's status, also when a
                 * signal to tend began the shutdown (SPEC §1). */
                m->exit_status = m->cmd.status;
                if (m->shutting_down)
                        manager_shutdown_cmd_gone(m); /* the shutdown that signalled CMD goes on */
                else
                        manager_begin_shutdown(m, m->cmd.status);
        }
        return true;
}
