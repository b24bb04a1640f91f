/* SPDX-License-Identifier: MIT */
/*
 * exit-demo: the smallest complete libexit program. It spawns a few children
 * through the reaper, receives their exits through the hub's subscription in
 * one epoll loop, and prints each.
 *
 *   exit-demo            runs the built-in children
 *   exit-demo CMD ARG…   runs CMD instead, once
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "libexit.h"

static const char *const demo[][4] = {
        { "sh", "-c", "echo 'child 1: exiting 0'; exit 0", NULL },
        { "sh", "-c", "sleep 0.2; echo 'child 2: exiting 3'; exit 3", NULL },
        { "sh", "-c", "echo 'child 3: killing itself with SIGTERM'; kill -TERM $$", NULL },
        { "/nonexistent/program", NULL },
};

/* The ids this program owns: after a LAGGED marker it takes their outcomes. */
static exit_id_t owned[16];
static size_t n_owned;

static int spawn(struct exit_reaper *r, char *const *argv, int *n_live) {
        struct exit_spawn_attr a = { .size = sizeof a, .argv = argv };
        struct exit_process *p = NULL;
        int k = exit_reaper_spawn(r, &a, &p);
        if (k < 0) {
                fprintf(stderr, "exit-demo: spawn %s: %s\n", argv[0], strerror(-k));
                return k;
        }
        k = exit_process_wait_exec(p, 5000, NULL);
        if (k < 0)
                printf("pid %d (%s): exec failed: %s\n", (int) exit_process_pid(p), argv[0], strerror(-k));
        (*n_live)++;
        if (n_owned < sizeof owned / sizeof owned[0])
                owned[n_owned++] = exit_process_id(p);
        exit_process_unref(p); /* the hub still delivers its exit */
        return 0;
}

static void print_reason(pid_t pid, exit_id_t id, const struct exit_reason *reason) {
        if (reason->kind == EXIT_REASON_EXITED)
                printf("pid %d (id %llu): exited with code %d\n", pid, (unsigned long long) id, reason->status);
        else
                printf("pid %d (id %llu): killed by %s%s\n", pid, (unsigned long long) id,
                       strsignal(reason->status), reason->core_dumped ? " (core dumped)" : "");
}

/* Returns how many of our processes the event accounts for. */
static int handle_event(struct exit_hub *hub, const struct exit_event *ev) {
        struct exit_reason reason;
        if (ev->type == EXIT_EVENT_LAGGED) {
                /* Events were dropped: the ledger still has every outcome. */
                int n = 0;
                for (size_t i = 0; i < n_owned; i++)
                        if (exit_hub_take(hub, owned[i], &reason) == 0) {
                                print_reason(0, owned[i], &reason);
                                n++;
                        }
                return n;
        }
        if (ev->flags & EXIT_EVENT_ORPHAN)
                return 0;
        if (exit_hub_take(hub, ev->id, &reason) < 0)
                return 0; /* taken already, after a LAGGED */
        print_reason(ev->pid, ev->id, &reason);
        return 1;
}

int main(int argc, char **argv) {
        struct exit_hub *hub = NULL;
        struct exit_reaper *reaper = NULL;
        struct exit_sub *sub = NULL;
        int k = exit_hub_new(0, 0, &hub);
        if (k >= 0)
                k = exit_reaper_new(hub, 0, &reaper);
        if (k == -ENOSYS)
                fprintf(stderr, "exit-demo: the kernel lacks %s (Linux >= 5.10 required)\n", exit_reaper_missing_syscall());
        /* Subscribe before the first spawn: earlier exits are not queued. */
        if (k >= 0)
                k = exit_hub_subscribe(hub, &sub);
        if (k < 0) {
                fprintf(stderr, "exit-demo: %s\n", strerror(-k));
                return 1;
        }

        int n_live = 0;
        if (argc > 1)
                k = spawn(reaper, argv + 1, &n_live);
        else
                for (size_t i = 0; i < sizeof demo / sizeof demo[0] && k >= 0; i++)
                        k = spawn(reaper, (char *const *) demo[i], &n_live);

        int ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 0 };
        epoll_ctl(ep, EPOLL_CTL_ADD, exit_reaper_fd(reaper), &ev);
        ev.data.u32 = 1;
        epoll_ctl(ep, EPOLL_CTL_ADD, exit_sub_fd(sub), &ev);

        while (n_live > 0) {
                struct epoll_event ready[2];
                if (epoll_wait(ep, ready, 2, -1) < 0 && errno != EINTR)
                        break;
                exit_reaper_dispatch(reaper);
                struct exit_event e;
                while (exit_sub_recv(sub, &e, 0) == 0)
                        n_live -= handle_event(hub, &e);
        }
        close(ep);
        exit_sub_free(sub);
        exit_reaper_free(reaper);
        exit_hub_unref(hub);
        return 0;
}
