/* SPDX-License-Identifier: MIT */
/*
 * Where an exit goes (supervisor/manager/exit-routes.h; SPEC §2.1, §2.2):
 * the id → (unit, role) table kept at every change of a unit's main and
 * control processes, and the loop's dispatch on it: an exit routed to the
 * right unit and role, an unknown id ignored (its outcome not taken), a
 * process not exited yet left routed, LAGGED recovery offering every owned
 * process once.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "exit-routes.h"

/* Units are opaque here: distinct addresses, never dereferenced. */
static char unit_a, unit_b, unit_c;
#define A ((struct unit *) &unit_a)
#define B ((struct unit *) &unit_b)
#define C ((struct unit *) &unit_c)

/* The hub and the units, as the loop sees them. */
struct world {
        struct exit_routes routes;
        exit_id_t exited[16]; /* ids whose outcome the hub holds */
        size_t n_exited;
        unsigned taken;       /* take calls */
        struct { struct unit *u; enum exit_role role; exit_id_t id; } delivered[16];
        size_t n_delivered;
        struct exit_owner *respawn; /* deliver gives it a new main process, as a restart does */
        exit_id_t respawn_id;
};

static int take(void *userdata, exit_id_t id, struct exit_reason *ret) {
        struct world *w = userdata;
        w->taken++;
        for (size_t i = 0; i < w->n_exited; i++)
                if (w->exited[i] == id) {
                        w->exited[i] = 0; /* taken once */
                        *ret = (struct exit_reason) { .kind = EXIT_REASON_EXITED, .status = (int32_t) id };
                        return 0;
                }
        return -ENOENT;
}

static void deliver(void *userdata, struct exit_owner *owner, enum exit_role role, exit_id_t id,
                    const struct exit_reason *reason) {
        struct world *w = userdata;
        assert_int_equal(reason->status, (int32_t) id);
        assert_null(exit_routes_find(&w->routes, id)); /* the process is gone: so is its route */
        assert_true(w->n_delivered < 16);
        w->delivered[w->n_delivered].u = owner->unit;
        w->delivered[w->n_delivered].role = role;
        w->delivered[w->n_delivered].id = id;
        w->n_delivered++;
        if (w->respawn == owner && role == EXIT_ROLE_MAIN)
                assert_int_equal(exit_routes_set(&w->routes, owner, EXIT_ROLE_MAIN, w->respawn_id), 0);
}

static const struct exit_routes_ops ops = { .take = take, .deliver = deliver };

static void exited(struct world *w, exit_id_t id) {
        assert_true(w->n_exited < 16);
        w->exited[w->n_exited++] = id;
}

static void assert_route(const struct exit_routes *r, exit_id_t id, const struct exit_owner *owner, enum exit_role role) {
        const struct exit_route *e = exit_routes_find(r, id);
        assert_non_null(e);
        assert_ptr_equal(e->owner, owner);
        assert_int_equal(e->role, role);
}

static void test_add_find_remove(void **state) {
        struct exit_routes r = {};
        struct exit_owner a = { .unit = A }, b = { .unit = B };
        assert_null(exit_routes_find(&r, 0));
        assert_null(exit_routes_find(&r, 1));
        assert_int_equal(exit_routes_set(&r, &a, EXIT_ROLE_MAIN, 3), 0);
        assert_int_equal(exit_routes_set(&r, &b, EXIT_ROLE_MAIN, 5), 0);
        assert_int_equal(exit_routes_set(&r, &a, EXIT_ROLE_CONTROL, 4), 0);
        assert_route(&r, 3, &a, EXIT_ROLE_MAIN);
        assert_route(&r, 4, &a, EXIT_ROLE_CONTROL);
        assert_route(&r, 5, &b, EXIT_ROLE_MAIN);
        assert_null(exit_routes_find(&r, 0));
        assert_null(exit_routes_find(&r, 6));
        /* MAINPID=: a's main is now 7; 3 is no longer a's. */
        assert_int_equal(exit_routes_set(&r, &a, EXIT_ROLE_MAIN, 7), 0);
        assert_null(exit_routes_find(&r, 3));
        assert_route(&r, 7, &a, EXIT_ROLE_MAIN);
        assert_int_equal(a.ids[EXIT_ROLE_MAIN], 7);
        /* The same id again changes nothing. */
        assert_int_equal(exit_routes_set(&r, &a, EXIT_ROLE_MAIN, 7), 0);
        assert_route(&r, 7, &a, EXIT_ROLE_MAIN);
        /* Main gone. */
        assert_int_equal(exit_routes_set(&r, &b, EXIT_ROLE_MAIN, 0), 0);
        assert_null(exit_routes_find(&r, 5));
        /* A unit freed: both its routes go, another's stay. */
        assert_int_equal(exit_routes_set(&r, &b, EXIT_ROLE_CONTROL, 9), 0);
        exit_routes_forget(&r, &a);
        assert_null(exit_routes_find(&r, 7));
        assert_null(exit_routes_find(&r, 4));
        assert_int_equal(a.ids[EXIT_ROLE_MAIN] + a.ids[EXIT_ROLE_CONTROL], 0);
        assert_route(&r, 9, &b, EXIT_ROLE_CONTROL);
        exit_routes_done(&r);
}

/* Many units, added and removed out of order: each id keeps its route. */
static void test_many(void **state) {
        enum { N = 300 };
        static struct exit_owner o[N];
        struct exit_routes r = {};
        for (size_t i = 0; i < N; i++) {
                o[i] = (struct exit_owner) { .unit = A };
                assert_int_equal(exit_routes_set(&r, &o[i], EXIT_ROLE_MAIN, 1000 + i), 0);
        }
        for (size_t i = 0; i < N; i += 3)
                assert_int_equal(exit_routes_set(&r, &o[i], EXIT_ROLE_MAIN, 0), 0);
        for (size_t i = 0; i < N; i += 3)
                assert_int_equal(exit_routes_set(&r, &o[i], EXIT_ROLE_CONTROL, 5000 + i), 0);
        for (size_t i = 0; i < N; i++) {
                if (i % 3 == 0) {
                        assert_null(exit_routes_find(&r, 1000 + i));
                        assert_route(&r, 5000 + i, &o[i], EXIT_ROLE_CONTROL);
                } else
                        assert_route(&r, 1000 + i, &o[i], EXIT_ROLE_MAIN);
        }
        exit_routes_done(&r);
}

/* An exit goes to its unit with its role; the route goes; a second event
 * for it, an unknown id, and a process not exited yet deliver nothing. */
static void test_dispatch_routes_to_unit_and_role(void **state) {
        struct world w = {};
        struct exit_owner a = { .unit = A }, b = { .unit = B };
        assert_int_equal(exit_routes_set(&w.routes, &a, EXIT_ROLE_MAIN, 10), 0);
        assert_int_equal(exit_routes_set(&w.routes, &b, EXIT_ROLE_MAIN, 11), 0);
        assert_int_equal(exit_routes_set(&w.routes, &b, EXIT_ROLE_CONTROL, 12), 0);
        exited(&w, 12);
        assert_true(exit_routes_dispatch(&w.routes, 12, &ops, &w));
        assert_int_equal(w.n_delivered, 1);
        assert_ptr_equal(w.delivered[0].u, B);
        assert_int_equal(w.delivered[0].role, EXIT_ROLE_CONTROL);
        assert_int_equal(b.ids[EXIT_ROLE_CONTROL], 0);
        assert_route(&w.routes, 11, &b, EXIT_ROLE_MAIN);

        assert_false(exit_routes_dispatch(&w.routes, 12, &ops, &w)); /* delivered already */
        w.taken = 0;
        assert_false(exit_routes_dispatch(&w.routes, 99, &ops, &w)); /* nobody's: CMD's, an orphan… */
        assert_false(exit_routes_dispatch(&w.routes, 0, &ops, &w));
        assert_int_equal(w.taken, 0); /* an unknown id's outcome is not taken */
        assert_false(exit_routes_dispatch(&w.routes, 10, &ops, &w)); /* not exited yet: stays */
        assert_route(&w.routes, 10, &a, EXIT_ROLE_MAIN);
        assert_int_equal(w.n_delivered, 1);

        exited(&w, 10);
        assert_true(exit_routes_dispatch(&w.routes, 10, &ops, &w));
        assert_ptr_equal(w.delivered[1].u, A);
        assert_int_equal(w.delivered[1].role, EXIT_ROLE_MAIN);
        exit_routes_done(&w.routes);
}

/* A restart in the exit's dispatch: the new main's route is there after it. */
static void test_dispatch_restart_sets_new_route(void **state) {
        struct world w = {};
        struct exit_owner a = { .unit = A };
        assert_int_equal(exit_routes_set(&w.routes, &a, EXIT_ROLE_MAIN, 20), 0);
        w.respawn = &a;
        w.respawn_id = 21;
        exited(&w, 20);
        assert_true(exit_routes_dispatch(&w.routes, 20, &ops, &w));
        assert_null(exit_routes_find(&w.routes, 20));
        assert_route(&w.routes, 21, &a, EXIT_ROLE_MAIN);
        exit_routes_done(&w.routes);
}

/* LAGGED: every owned process is offered once; the exited ones are
 * delivered (to the right unit and role), the running ones stay routed,
 * one spawned during the recovery is not offered. */
static void test_recover_routes_every_owned_process(void **state) {
        struct world w = {};
        struct exit_owner a = { .unit = A }, b = { .unit = B }, c = { .unit = C };
        assert_int_equal(exit_routes_set(&w.routes, &a, EXIT_ROLE_MAIN, 30), 0);
        assert_int_equal(exit_routes_set(&w.routes, &a, EXIT_ROLE_CONTROL, 31), 0);
        assert_int_equal(exit_routes_set(&w.routes, &b, EXIT_ROLE_MAIN, 32), 0);
        assert_int_equal(exit_routes_set(&w.routes, &c, EXIT_ROLE_CONTROL, 33), 0);
        exited(&w, 30);
        exited(&w, 31);
        exited(&w, 33);
        w.respawn = &a; /* a restarts at once: 34 must not be offered in this recovery */
        w.respawn_id = 34;
        assert_int_equal(exit_routes_recover(&w.routes, &ops, &w), 0);
        assert_int_equal(w.taken, 4);
        assert_int_equal(w.n_delivered, 3);
        assert_ptr_equal(w.delivered[0].u, A);
        assert_int_equal(w.delivered[0].role, EXIT_ROLE_MAIN);
        assert_int_equal(w.delivered[0].id, 30);
        assert_ptr_equal(w.delivered[1].u, A);
        assert_int_equal(w.delivered[1].role, EXIT_ROLE_CONTROL);
        assert_ptr_equal(w.delivered[2].u, C);
        assert_int_equal(w.delivered[2].role, EXIT_ROLE_CONTROL);
        assert_route(&w.routes, 32, &b, EXIT_ROLE_MAIN); /* still running */
        assert_route(&w.routes, 34, &a, EXIT_ROLE_MAIN);
        assert_null(exit_routes_find(&w.routes, 33));
        exit_routes_done(&w.routes);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_add_find_remove),
                cmocka_unit_test(test_many),
                cmocka_unit_test(test_dispatch_routes_to_unit_and_role),
                cmocka_unit_test(test_dispatch_restart_sets_new_route),
                cmocka_unit_test(test_recover_routes_every_owned_process),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
