/* SPDX-License-Identifier: MIT */
/*
 * The reaper tests' wait (test-reaper.c, test-reaper-vm.c), header-only.
 */
#pragma once

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include "libexit.h"
#include "time-util.h"

/* Dispatches r until p's outcome can be taken from hub, at most wait_ms (ms);
 * fails the cmocka test naming the likely cause otherwise. Single-threaded. */
static inline struct exit_reason reaper_wait_exit(struct exit_hub *hub, struct exit_reaper *r,
                                                  struct exit_process *p, int wait_ms) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + (usec_t) wait_ms * USEC_PER_MSEC;
        struct exit_reason reason;
        for (;;) {
                int k = exit_hub_take(hub, exit_process_id(p), &reason);
                if (k == 0)
                        return reason;
                if (k != -EINPROGRESS)
                        fail_msg("take pid %d: %s", exit_process_pid(p), strerror(-k));
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("pid %d not reaped within %d ms: its pidfd never became readable in the reaper's epoll set, or dispatch did not reap it",
                                 exit_process_pid(p), wait_ms);
                struct pollfd pfd = { .fd = exit_reaper_fd(r), .events = POLLIN };
                (void) poll(&pfd, 1, 100);
                assert_true(exit_reaper_dispatch(r) >= 0);
        }
}
