/* SPDX-License-Identifier: MIT */
/* Where an exit goes: see exit-routes.h. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "exit-routes.h"
#include "macro.h"

/* ---- the table: add, find, remove (TODO(issue 15): common/hashmap.h) ---- */

/* The index of the first route with a key >= id. */
static size_t lower_bound(const struct exit_routes *r, exit_id_t id) {
        size_t lo = 0, hi = r->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (r->v[mid].key < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

int exit_routes_reserve(struct exit_routes *r, size_t more) {
        if (r->n_max - r->n >= more)
                return 0;
        size_t n = r->n_max ? r->n_max : 16;
        while (n - r->n < more)
                n *= 2;
        struct exit_route *v = reallocarray(r->v, n, sizeof *v);
        if (!v)
                return -ENOMEM;
        r->v = v;
        r->n_max = n;
        return 0;
}

static int routes_add(struct exit_routes *r, struct exit_route route) {
        int k = exit_routes_reserve(r, 1);
        if (k < 0)
                return k;
        size_t i = lower_bound(r, route.key);
        assert(i == r->n || r->v[i].key != route.key); /* ids are never reused */
        memmove(r->v + i + 1, r->v + i, (r->n - i) * sizeof *r->v);
        r->v[i] = route;
        r->n++;
        return 0;
}

const struct exit_route *exit_routes_find(const struct exit_routes *r, exit_id_t id) {
        size_t i = lower_bound(r, id);
        return id != 0 && i < r->n && r->v[i].key == id ? &r->v[i] : NULL;
}

static void routes_remove(struct exit_routes *r, exit_id_t id) {
        size_t i = lower_bound(r, id);
        if (id == 0 || i == r->n || r->v[i].key != id)
                return;
        memmove(r->v + i, r->v + i + 1, (r->n - i - 1) * sizeof *r->v);
        r->n--;
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

int exit_routes_recover(struct exit_routes *r, const struct exit_routes_ops *ops, void *userdata) {
        /* A copy of the ids: each delivery changes the table. */
        size_t n = r->n;
        _cleanup_free_ exit_id_t *ids = calloc(n ? n : 1, sizeof *ids);
        if (!ids)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                ids[i] = r->v[i].key;
        for (size_t i = 0; i < n; i++)
                (void) exit_routes_dispatch(r, ids[i], ops, userdata);
        return 0;
}

void exit_routes_done(struct exit_routes *r) {
        free(r->v);
        *r = (struct exit_routes) {};
}
