/* SPDX-License-Identifier: MIT */
/*
 * The floor of the service-mode benchmarks (SPEC §8): the minimal restart
 * loop, a few lines of C that waitpid() and re-spawn at once.
 *
 *   restart-loop PROG [ARG...]              re-spawn PROG each time it exits
 *   restart-loop --spawn N PROG [ARG...]    spawn N copies at once, then reap
 *
 * posix_spawn (glibc: clone(CLONE_VM|CLONE_VFORK) + exec), the cheapest
 * spawn a minimal supervisor would write. No fd, signal or session set-up:
 * the floor is the spawn, the exec and the reap, nothing else.
 */
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
        long n = 0;
        int first = 1;
        if (argc > 3 && !strcmp(argv[1], "--spawn")) {
                n = strtol(argv[2], NULL, 10);
                first = 3;
        }
        if (argc <= first)
                return 2;
        pid_t pid;
        if (n > 0) {
                for (long i = 0; i < n; i++)
                        if (posix_spawn(&pid, argv[first], NULL, NULL, argv + first, environ) != 0)
                                return 1;
                for (;;)
                        if (wait(NULL) < 0)
                                pause();
        }
        for (;;) {
                if (posix_spawn(&pid, argv[first], NULL, NULL, argv + first, environ) != 0)
                        return 1;
                (void) waitpid(pid, NULL, 0);
        }
}
