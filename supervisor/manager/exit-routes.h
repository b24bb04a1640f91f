/* SPDX-License-Identifier: MIT */
/*
 * Where an exit goes (SPEC §2.1, §2.2): exit id → (unit, role), so that the
 * loop hands each exit to its unit without looking through the units.
 *
 * Each unit owns an exit_owner (in its manager data): the ids of its main
 * and control processes while they run. The manager keeps the routes right
 * at every place it learns of a change: a control process spawned
 * (op_spawn), the main process set, replaced (MAINPID=) or gone (the seam's
 * main_pid_changed), an exit dispatched, a unit freed.
 *
 * The invariant (tests/unit/test-manager-exit-routes.c): an id routes to the
 * owner and role it was set for until that role is set to another process,
 * its exit is dispatched, or its owner is forgotten; an id that is no
 * owner's is not delivered; after the exit queue overflowed (LAGGED), every
 * owned process is offered to the hub once.
 *
 * Single-threaded (the loop's). Owners are borrowed: forget one before it is
 * freed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hashmap.h"
#include "libexit.h"

struct unit;

enum exit_role {
        EXIT_ROLE_MAIN,
        EXIT_ROLE_CONTROL,
        _EXIT_ROLE_MAX,
};

struct exit_owner {
        struct unit *unit;              /* borrowed: what deliver is given */
        exit_id_t ids[_EXIT_ROLE_MAX];  /* 0: no such process */
};

/* One route: the process id's owner and role. */
struct exit_route {
        uint64_t key; /* the exit id (never 0) */
        struct exit_owner *owner;
        enum exit_role role;
};

/* The table of routes (common/hashmap.h, keyed by exit id). Zero-initialised
 * is empty. */
HASHMAP_DEFINE(exit_route_map, struct exit_route);
struct exit_routes {
        struct exit_route_map map;
};

/* Room for `more` routes beyond those there are, so that as many
 * exit_routes_set() never fail: reserved before the spawn or the tracking of
 * a process, so that a process never runs without its route. 0 or -ENOMEM. */
int exit_routes_reserve(struct exit_routes *r, size_t more);

/* owner's process in role is now id (0: none): the route of the one it
 * replaces goes, id's is added. 0, or -ENOMEM when no room was reserved
 * (the role then has no route: its exit is not delivered, as for an
 * unknown id). */
int exit_routes_set(struct exit_routes *r, struct exit_owner *owner, enum exit_role role, exit_id_t id);

/* The route of id, or NULL (0 or an id no owner has). Valid until the next
 * change of the table. */
const struct exit_route *exit_routes_find(const struct exit_routes *r, exit_id_t id);

/* Both of owner's routes go (before it is freed). */
void exit_routes_forget(struct exit_routes *r, struct exit_owner *owner);

/* What the loop does with an exit. take: the outcome taken from the hub (0,
 * or a negative errno: not exited yet, or taken already); deliver: the owner
 * of a process whose outcome was taken, with the role it had (its route is
 * gone by then: deliver may set a new process for the role). */
struct exit_routes_ops {
        int (*take)(void *userdata, exit_id_t id, struct exit_reason *ret);
        void (*deliver)(void *userdata, struct exit_owner *owner, enum exit_role role, exit_id_t id,
                        const struct exit_reason *reason);
};

/* An exit event for id: delivered when id is routed and its outcome taken.
 * Returns whether it was delivered. */
bool exit_routes_dispatch(struct exit_routes *r, exit_id_t id, const struct exit_routes_ops *ops, void *userdata);

/* After LAGGED: every process routed now is offered (exit_routes_dispatch),
 * in the order of their ids; those spawned meanwhile are not. 0, or -ENOMEM
 * (nothing offered). */
int exit_routes_recover(struct exit_routes *r, const struct exit_routes_ops *ops, void *userdata);

/* Frees the table (owners are not touched). */
void exit_routes_done(struct exit_routes *r);
