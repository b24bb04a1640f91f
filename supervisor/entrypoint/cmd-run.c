/* SPDX-License-Identifier: MIT */
/*
 * "Run CMD and exit with its status", for entrypoint and combined modes
 * (cmd-run.h; SPEC §1, §6).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmd-run.h"
#include "log.h"
#include "macro.h"

int cmd_run_exec_failure_status(int error, int stage) {
        /* As a shell says "not found" for execvp's ENOENT and ENOTDIR: the
         * file is not there, whatever the component that is missing. */
        if (stage == EXIT_STAGE_EXEC && (error == -ENOENT || error == -ENOTDIR))
                return CMD_STATUS_NOT_FOUND;
        return CMD_STATUS_NOT_EXECUTABLE;
}

int cmd_run_status(int exec, int stage, const struct exit_reason *reason) {
        if (exec < 0 && exec != -EINPROGRESS)
                return cmd_run_exec_failure_status(exec, stage);
        return exit_reason_to_shell_status(reason);
}

/* Whether the environment variable name holds tend's own pid. */
static bool env_names_us(const char *name) {
        const char *v = getenv(name);
        char self[16];
        snprintf(self, sizeof self, "%d", (int) getpid());
        return v && streq(v, self);
}

static int spawn(struct exit_reaper *reaper, char *const *argv, uint64_t nofile_soft, uint32_t flags,
                 struct exit_process **ret_process) {
        /* Socket activation and the watchdog name tend's pid: they mean CMD. */
        if (env_names_us("LISTEN_PID"))
                flags |= EXIT_SPAWN_LISTEN_PID;
        if (env_names_us("WATCHDOG_PID"))
                flags |= EXIT_SPAWN_WATCHDOG_PID;
        struct exit_spawn_attr a = { .size = sizeof a, .flags = flags, .argv = argv, .nofile_soft = nofile_soft };
        int k = exit_reaper_spawn(reaper, &a, ret_process);
        if (k < 0)
                return log_error_errno(k, "cannot start %s: %m", argv[0]);
        return 0;
}

int cmd_run_spawn(struct exit_reaper *reaper, char *const *argv, uint64_t nofile_soft, bool beside_units,
                  struct exit_process **ret_process) {
        uint32_t flags = EXIT_SPAWN_FOREGROUND | EXIT_SPAWN_KEEP_FDS | (beside_units ? EXIT_SPAWN_NO_VFORK : 0);
        return spawn(reaper, argv, nofile_soft, flags, ret_process);
}

int cmd_run_spawn_in(struct exit_reaper *reaper, char *const *argv, bool same_group,
                     struct exit_process **ret_process) {
        uint32_t flags = (same_group ? 0 : EXIT_SPAWN_FOREGROUND) | EXIT_SPAWN_KEEP_FDS;
        return spawn(reaper, argv, 0, flags, ret_process);
}

int cmd_run_exec_result(const char *name, const struct exit_process *process) {
        int stage = EXIT_STAGE_EXEC;
        int k = exit_process_exec_result(process, &stage);
        if (k == -EINPROGRESS)
                return k; /* not announced yet: a caller's mistake, said nothing */
        if (k < 0)
                return log_error_errno(k, "%s: %m", name);
        log_debug("started %s as pid %d", name, (int) exit_process_pid(process));
        return 0;
}

int cmd_run_exited(const char *name, const struct exit_process *process, const struct exit_reason *reason) {
        if (reason->kind == EXIT_REASON_KILLED)
                log_info("%s (pid %d) killed by signal %d%s", name, (int) exit_process_pid(process), reason->status,
                         reason->core_dumped ? " (core dumped)" : "");
        else
                log_info("%s (pid %d) exited with code %d", name, (int) exit_process_pid(process), reason->status);
        int stage = EXIT_STAGE_EXEC;
        int exec = exit_process_exec_result(process, &stage);
        return cmd_run_status(exec, stage, reason);
}
