/* SPDX-License-Identifier: MIT */
/* tend: a process supervisor (SPEC §1). This file is the table of contents. */
#include <signal.h>
#include <stdlib.h>

#include "entrypoint.h"
#include "log.h"
#include "manager.h"
#include "options.h"

/* tend never stops: job-control stops are blocked for tend itself (SPEC §1);
 * in entrypoint mode they are forwarded to CMD. */
static void block_job_control(void) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTSTP);
        sigaddset(&set, SIGTTIN);
        sigaddset(&set, SIGTTOU);
        sigprocmask(SIG_BLOCK, &set, NULL);
}

int main(int argc, char **argv) {
        int *inherited = NULL;
        size_t n_inherited = 0;
        if (entrypoint_collect_inherited_fds(&inherited, &n_inherited) < 0)
                return 1;
        block_job_control();

        struct tend_options opts;
        int k = options_parse(argc, argv, &opts);
        if (k != 0)
                return k > 0 ? 0 : 2;
        log_set_program("tend");
        log_set_max_level(opts.log_level);

        int status = opts.config_dir ? manager_run(&opts, inherited, n_inherited)
                                     : entrypoint_run(&opts, inherited, n_inherited);
        free(inherited);
        return status;
}
