/* SPDX-License-Identifier: MIT */
/*
 * Type=forking (SPEC §4; docs/tend.service.5.md "Type=forking"): the start
 * process (ExecStart=) runs as a control process in START; when it exits 0
 * the main process is found — PIDFile= (read, trusted and tracked by the
 * manager: ops->forking_main), else the one MAINPID= named, else the guess
 * (GuessMainPID=) — and the start job is done as for the other types
 * (ExecStartPost=, RUNNING). A PID file not there yet is read again
 * (unit_forking_retry) until TimeoutStartSec= or until no process of the
 * unit is left, as systemd 252 does.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"
#include "unit-internal.h"

/* The main process read from the PID file had exited already: the unit saw
 * it run and end with that status (systemd's main process exiting in
 * START_POST): its result, then the stop sequence. */
static void main_already_exited(struct unit *u, const struct exit_reason *r) {
        u->has_last_exit = true;
        u->last_exit = *r;
        u->result = unit_sm_result_of_exit(u, r);
        log_info("%s: its main process (PIDFile=%s) exited before tend read the file", u->name, u->file->pid_file);
        unit_sm_answer_flight(u, u->result == UNIT_RESULT_SUCCESS, NULL);
        unit_sm_queue_step(u, UNIT_STEP_STOP);
}

/* Not there yet: wait for the next read, unless nothing of the unit is
 * left to write it (systemd: the start fails). */
static void wait_for_pid_file(struct unit *u) {
        if (u->main || u->ops->populated(u->userdata, u) != 0)
                return;
        char why[200];
        /* A file that is there named no live process of the unit (said by the op). */
        snprintf(why, sizeof why, "PIDFile=%s %s and no process of the unit is left", u->file->pid_file,
                 access(u->file->pid_file, F_OK) == 0 ? "names no live process of the unit" : "was not written");
        log_error("%s: %s", u->name, why);
        u->result = UNIT_RESULT_RESOURCES;
        unit_sm_answer_flight(u, false, why);
        unit_sm_queue_step(u, UNIT_STEP_STOP);
}

static void find_main(struct unit *u) {
        struct exit_process *p = NULL;
        struct exit_reason r = {};
        int k = u->ops->forking_main(u->userdata, u, &p, &r);
        if (k == -EAGAIN) {
                wait_for_pid_file(u);
                return;
        }
        if (k == -EINPROGRESS) /* not there yet, and a daemon outside the unit's group lives */
                return;
        if (k < 0) { /* refused: said by the op, naming the file and why */
                unit_sm_start_failed(u, UNIT_RESULT_RESOURCES);
                return;
        }
        if (k == 1) {
                main_already_exited(u, &r);
                return;
        }
        if (p)
                unit_sm_set_main(u, p);
        if (!u->main) {
                log_info("%s: running without a known main process (no PIDFile=, and no single process to guess)",
                         u->name);
                /* Its end is the cgroup's: watched from here (ops->populated). */
                (void) u->ops->populated(u->userdata, u);
        }
        unit_sm_queue_changed(u);
        unit_sm_queue_step(u, UNIT_STEP_MAIN_STARTED);
}

void unit_sm_forking_started(struct unit *u) {
        if (!u->file->pid_file && u->main) {
                /* MAINPID= named it while the start process ran. */
                unit_sm_queue_step(u, UNIT_STEP_MAIN_STARTED);
                return;
        }
        find_main(u);
}

bool unit_sm_forking_waits(const struct unit *u) {
        return u->pos == UNIT_POS_START && u->file->type == UNIT_TYPE_FORKING && !u->control;
}

void unit_forking_retry(struct unit *u) {
        if (!unit_sm_forking_waits(u))
                return;
        unit_sm_event_begin(u);
        find_main(u);
        unit_sm_event_end(u);
}

bool unit_sm_forking_ended(struct unit *u) {
        if (u->pos != UNIT_POS_RUNNING || u->file->type != UNIT_TYPE_FORKING || u->main || u->control)
                return false;
        return u->ops->populated(u->userdata, u) == 0;
}
