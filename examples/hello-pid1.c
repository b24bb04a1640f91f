/* SPDX-License-Identifier: MIT */
/*
 * The demo CMD of examples/Dockerfile: says who it is, waits for SIGTERM or
 * SIGINT (docker stop, Ctrl-C), which tend forwards to it, and exits 0.
 * Linked statically, so that the image holds nothing but it and tend-static.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigprocmask(SIG_BLOCK, &set, NULL);
        printf("hello: pid %d, parent %d; waiting for SIGTERM\n", (int) getpid(), (int) getppid());
        fflush(stdout);
        int sig = 0;
        sigwait(&set, &sig);
        printf("hello: got %s, exiting 0\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        return 0;
}
