/* SPDX-License-Identifier: MIT */
/*
 * The exit hub's private interface (not installed): introspection for the
 * unit tests and the reaper, and the test hook that makes the LAGGED race
 * deterministic. Nothing here is exported from the shared library (hidden
 * visibility, not in libexit.sym); the tests and the reaper reach it through
 * the static library.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "libexit.h"

/*
 * Called by exit_sub_recv()/exit_sub_recv_batch() right after they decided
 * to return a LAGGED marker and discarded what was queued at that moment,
 * with the hub's lock released and before the receive returns. A test
 * publishes from it to force "a publish racing the discard" (SPEC §2.1
 * "Queue"): that event must be delivered by the next receive. NULL removes
 * the hook. Tests only; thread-safe.
 */
typedef void (*exit_hub_lagged_hook_t)(struct exit_hub *hub, void *userdata);
void exit_hub_set_lagged_hook(struct exit_hub *hub, exit_hub_lagged_hook_t hook, void *userdata);

/* Armed (registered, unfired) watches across all processes: the watch
 * registry's size. Freeing an unfired watch must bring it back down. */
size_t exit_hub_armed_watches(struct exit_hub *hub);

/* Ledger entries: live processes (reserved or attached) plus exited ones
 * whose outcome is not taken yet. */
size_t exit_hub_ledger_entries(struct exit_hub *hub);

/* Live processes only (reserved or attached). */
size_t exit_hub_live_processes(struct exit_hub *hub);

/* Durable records currently retained (<= record capacity). */
size_t exit_hub_durable_records(struct exit_hub *hub);

/* True once the last owner reference was dropped: a reaper stops publishing
 * (exit_hub_publish would answer -EPIPE anyway). */
bool exit_hub_is_closed(struct exit_hub *hub);
