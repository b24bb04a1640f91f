/* SPDX-License-Identifier: MIT */
/*
 * The floor of the hardening benchmark (tests/bench/bench-hardening.py): the
 * minimal restart loop (restart-loop.c) whose child makes, between fork and
 * exec, the mount namespace tend makes for ProtectSystem=strict +
 * PrivateTmp=yes + PrivateDevices=yes (floor-ns.h), nothing else.
 *
 *   restart-loop-ns PROG [ARG...]              re-spawn PROG each time it exits
 *   restart-loop-ns --spawn N PROG [ARG...]    spawn N copies at once, then reap
 *
 * fork(), not posix_spawn: the child's unshare() needs a process of its own,
 * as tend's clone3 without CLONE_VM for a plan with a pre-exec hook.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "floor-ns.h"

static pid_t spawn(char **argv) {
        pid_t pid = fork();
        if (pid != 0)
                return pid;
        int r = floor_ns_setup();
        if (r < 0) {
                fprintf(stderr, "restart-loop-ns: the namespace: %s\n", strerror(-r));
                _exit(127);
        }
        execv(argv[0], argv);
        _exit(127);
}

int main(int argc, char **argv) {
        long n = 0;
        int first = 1;
        if (argc > 3 && !strcmp(argv[1], "--spawn")) {
                n = strtol(argv[2], NULL, 10);
                first = 3;
        }
        if (argc <= first)
                return 2;
        if (n > 0) {
                for (long i = 0; i < n; i++)
                        if (spawn(argv + first) < 0)
                                return 1;
                for (;;)
                        if (wait(NULL) < 0)
                                pause();
        }
        for (;;) {
                pid_t pid = spawn(argv + first);
                if (pid < 0)
                        return 1;
                (void) waitpid(pid, NULL, 0);
        }
}
