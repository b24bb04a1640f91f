/* SPDX-License-Identifier: MIT */
/* tend: a process supervisor (SPEC §1). This file is the table of contents. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "entrypoint.h"
#include "log.h"
#include "options.h"
#ifndef TEND_ENTRYPOINT_ONLY /* tend-static: entrypoint mode alone (options.c refuses the rest) */
#include "manager.h"
#include "unit-file.h"
#endif

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

/* A closed 0/1/2 would be taken by tend's first fds (the signalfd, the epoll
 * set), which units and CMD would then get as their stdio, and tend's own
 * output would go into them: each is held with /dev/null, in every mode.
 * Not O_CLOEXEC: these are the stdio CMD inherits (SPEC §6), not tend's own. */
static int guard_stdio(void) {
        for (int fd = 0; fd < 3; fd++) {
                if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
                        continue;
                int null = open("/dev/null", O_RDWR); /* the lowest free fd: this one */
                if (null < 0)
                        return log_error_errno(errno, "opening /dev/null for closed fd %d: %m", fd);
        }
        return 0;
}

int main(int argc, char **argv) {
#ifndef TEND_ENTRYPOINT_ONLY
        /* reexec: tend(8) "RE-EXECUTING" */
        if (argc == 3 && strcmp(argv[1], "--check-state-version") == 0)
                return reexec_check_version(argv[2]);
        reexec_remember(argc, argv);
#endif
        int *inherited = NULL;
        size_t n_inherited = 0;
        if (guard_stdio() < 0 || entrypoint_collect_inherited_fds(&inherited, &n_inherited) < 0)
                return 1;
        block_job_control();

        struct tend_options opts;
        int k = options_parse(argc, argv, &opts);
        if (k != 0)
                return k > 0 ? 0 : 2;
        log_set_program("tend");
        log_set_max_level(opts.log_level);
#ifndef TEND_ENTRYPOINT_ONLY
        if (unit_hardening_accept_global(opts.accept_weaker_isolation) < 0) /* security: before any unit loads */
                return 1;
#endif
#ifdef TEND_ENTRYPOINT_ONLY
        int status = entrypoint_run(&opts, inherited, n_inherited);
#else
        if (opts.verify) {
                free(inherited);
                return unit_verify(opts.verify);
        }

        int status = opts.config_dir ? manager_run(&opts, inherited, n_inherited)
                                     : entrypoint_run(&opts, inherited, n_inherited);
#endif
        free(inherited);
        return status;
}
