/* SPDX-License-Identifier: MIT */
/* Monotonic time in µs and absolute-deadline helpers (SPEC §1: every timeout is a
 * one-shot CLOCK_MONOTONIC deadline). Header-only. */
#pragma once

#include <stdint.h>
#include <time.h>

typedef uint64_t usec_t;

#define USEC_INFINITY ((usec_t) UINT64_MAX)
#define USEC_PER_SEC ((usec_t) 1000000ULL)
#define USEC_PER_MSEC ((usec_t) 1000ULL)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)

static inline usec_t timespec_to_usec(const struct timespec *ts) {
        return (usec_t) ts->tv_sec * USEC_PER_SEC + (usec_t) ts->tv_nsec / NSEC_PER_USEC;
}

static inline struct timespec usec_to_timespec(usec_t u) {
        return (struct timespec) {
                .tv_sec = (time_t) (u / USEC_PER_SEC),
                .tv_nsec = (long) ((u % USEC_PER_SEC) * NSEC_PER_USEC),
        };
}

static inline usec_t now_usec(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return timespec_to_usec(&ts);
}

/* Absolute CLOCK_MONOTONIC deadline timeout_ms from now; a negative timeout is infinite. */
static inline usec_t deadline_after_ms(int timeout_ms) {
        if (timeout_ms < 0)
                return USEC_INFINITY;
        return now_usec(CLOCK_MONOTONIC) + (usec_t) timeout_ms * USEC_PER_MSEC;
}
