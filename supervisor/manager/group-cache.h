/* SPDX-License-Identifier: MIT */
/*
 * The per-iteration cgroup cache (SPEC §8 restart latency): an empty cgroup
 * stays empty until tend spawns into it (no process is left in it to fork),
 * so within one loop iteration an "empty" answer of cgroup.events is read
 * once, not once per question the state machine asks (a main process's exit
 * asks three: SIGTERM, SIGCONT, and whether the stop is complete), and a
 * restart in the same dispatch need not look for leftovers again.
 *
 * The invariant (tests/unit/test-manager-group-cache.c): an "empty" answer
 * is reused only within the loop iteration it was read in, and never after a
 * spawn into the cgroup; a "populated" answer or an error is never reused.
 *
 * Plain data, one per unit, zero-initialised; the iteration is the caller's
 * (sd_event_get_iteration): injected so that the rule is testable alone.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct group_cache {
        uint64_t empty_iteration; /* 1 + the loop iteration that read the cgroup empty, or 0 */
};

/* Whether the cgroup is known empty in loop iteration `iteration`. */
static inline bool group_cache_known_empty(const struct group_cache *c, uint64_t iteration) {
        return c->empty_iteration != 0 && c->empty_iteration == iteration + 1;
}

/* The cgroup was read in loop iteration `iteration`: populated > 0, empty 0,
 * or a negative errno. Only "empty" is kept. */
static inline void group_cache_answer(struct group_cache *c, uint64_t iteration, int populated) {
        c->empty_iteration = populated == 0 ? iteration + 1 : 0;
}

/* Something is about to be spawned into the cgroup: it may be populated from here. */
static inline void group_cache_spawning(struct group_cache *c) {
        c->empty_iteration = 0;
}
