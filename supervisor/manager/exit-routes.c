/* SPDX-License-Identifier: MIT */
/* Where an exit goes: see exit-routes.h. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "exit-routes.h"
#include "macro.h"

/* ---- the table: add, find, remove ---- */

int exit_routes_reserve(struct exit_routes *r, size_t more) {
        return exit_route_map_reserve(&r->map, exit_route_map_size(&r->map) + more);
}

static int routes_add(struct exit_routes *r, struct exit_route route) {
        assert(!exit_route_map_get(&r->map, route.key)); /* ids are never reused */
        return exit_route_map_insert(&r->map, route);
}

const struct exit_route *exit_routes_find(const struct exit_routes *r, exit_id_t id) {
        return id != 0 ? exit_route_map_get(&r->map, id) : NULL;
}

static void routes_remove(struct exit_routes *r, exit_id_t id) {
        struct exit_route *e = id != 0 ? exit_route_map_get(&r->map, id) : NULL;
        if (e)
                exit_route_map_remove(&r->map, e);
}

/* ---- owners ---- */

int exit_routes_set(struct exit_routes *r, struct exit_owner *owner, enum exit_role role, exit_id_t id) {
        assert(role < _EXIT_ROLE_MAX);
        if (owner->ids[role] == id)
                return 0;
        routes_remove(r, owner->ids[role]);
        owner->ids[role] = 0;
        if (id == 0)
                return 0;
        int k = routes_add(r, (struct exit_route) { .key = id, .owner = owner, .role = role });
        if (k < 0)
                return k;
        owner->ids[role] = id;
        return 0;
}

void exit_routes_forget(struct exit_routes *r, struct exit_owner *owner) {
        for (enum exit_role role = 0; role < _EXIT_ROLE_MAX; role++)
                (void) exit_routes_set(r, owner, role, 0);
}

/* ---- the loop's use ---- */

bool exit_routes_dispatch(struct exit_routes *r, exit_id_t id, const struct exit_routes_ops *ops, void *userdata) {
        const struct exit_route *route = exit_routes_find(r, id);
        struct exit_reason reason;
        if (!route || ops->take(userdata, id, &reason) < 0)
                return false;
        struct exit_owner *owner = route->owner;
        enum exit_role role = route->role;
        (void) exit_routes_set(r, owner, role, 0); /* the process is gone: its route first */
        ops->deliver(userdata, owner, role, id, &reason);
        return true;
}

static int id_compare(const void *a, const void *b) {
        exit_id_t x = *(const exit_id_t *) a, y = *(const exit_id_t *) b;
        return x < y ? -1 : x > y;
}

int exit_routes_recover(struct exit_routes *r, const struct exit_routes_ops *ops, void *userdata) {
        /* A copy of the ids, in the order they were given (ids grow): each
         * delivery changes the table. */
        size_t n = exit_route_map_size(&r->map), got = 0;
        _cleanup_free_ exit_id_t *ids = calloc(n ? n : 1, sizeof *ids);
        if (!ids)
                return -ENOMEM;
        for (const struct exit_route *e = NULL; (e = exit_route_map_next(&r->map, e));)
                ids[got++] = e->key;
        qsort(ids, n, sizeof *ids, id_compare);
        for (size_t i = 0; i < n; i++)
                (void) exit_routes_dispatch(r, ids[i], ops, userdata);
        return 0;
}

void exit_routes_done(struct exit_routes *r) {
        exit_route_map_done(&r->map);
}
