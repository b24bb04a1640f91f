/* SPDX-License-Identifier: MIT */
/*
 * The dependency graph (supervisor/lifecycle/deps.h; SPEC §4 "Start jobs", "Cycles"):
 * names resolved, Before= turned around, reverse edges, missing
 * requirements, and ordering cycles found and broken; the keys beyond
 * Requires=/Wants=/BindsTo= (Requisite=, PartOf=, Conflicts=, Upholds=,
 * OnFailure=, OnSuccess=, PropagatesReloadTo=/ReloadPropagatedFrom=) and
 * the parsing of their lists into a unit file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "deps.h"
#include "log.h"
#include "macro.h"
#include "unit-file.h"

/* A NULL-terminated name vector from string literals (the specs borrow
 * `char *const *`, as unit files hold them; the names are never written). */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wincompatible-pointer-types-discards-qualifiers"
#else
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#endif
#define V(...) ((char *const[]) { __VA_ARGS__, NULL })

static struct dep_graph *build(const struct dep_node_spec *specs, size_t n) {
        struct dep_graph *g = NULL;
        assert_int_equal(dep_graph_build(specs, n, &g), 0);
        assert_non_null(g);
        assert_int_equal(g->n, n);
        return g;
}

/* list holds exactly the given indices (any order); -1 ends them. */
static void assert_list(const struct dep_list *l, ...) {
        va_list ap;
        va_start(ap, l);
        size_t n = 0;
        for (int i; (i = va_arg(ap, int)) >= 0; n++)
                if (!dep_list_has(l, (size_t) i))
                        fail_msg("index %d missing from a list of %zu", i, l->n);
        va_end(ap);
        if (l->n != n)
                fail_msg("list has %zu entries, want %zu", l->n, n);
}

/* a ← b ← c (c After=b, b After=a) and d Before=a: the ordering both ways. */
static void test_chain_and_before(void **state) {
        struct dep_node_spec s[] = {
                { .name = "a.service" },
                { .name = "b.service", .after = V("a.service"), .requires = V("a.service") },
                { .name = "c.service", .after = V("b.service", "b.service"), .wants = V("b.service") },
                { .name = "d.service", .before = V("a.service") },
        };
        struct dep_graph *g = build(s, ELEMENTSOF(s));
        assert_int_equal(g->n_cycles, 0);
        assert_list(&g->nodes[0].after, 3, -1);
        assert_list(&g->nodes[0].before, 1, -1);
        assert_list(&g->nodes[1].after, 0, -1);
        assert_list(&g->nodes[1].before, 2, -1);
        assert_list(&g->nodes[2].after, 1, -1); /* listed twice, once in the graph */
        assert_list(&g->nodes[3].before, 0, -1);
        assert_list(&g->nodes[1].requires, 0, -1);
        assert_list(&g->nodes[0].required_by, 1, -1);
        assert_list(&g->nodes[2].wants, 1, -1);
        assert_list(&g->nodes[1].required_by, -1); /* Wants= has no reverse */
        for (size_t i = 0; i < g->n; i++) {
                assert_null(g->nodes[i].missing);
                assert_false(g->nodes[i].cycle_broken);
        }
        dep_graph_free(g);
}

/* A diamond: top requires left and right, both after bottom. */
static void test_diamond(void **state) {
        struct dep_node_spec s[] = {
                { .name = "top.service", .requires = V("left.service", "right.service"),
                  .after = V("left.service", "right.service") },
                { .name = "left.service", .after = V("bottom.service"), .binds_to = V("bottom.service") },
                { .name = "right.service", .after = V("bottom.service") },
                { .name = "bottom.service" },
        };
        struct dep_graph *g = build(s, ELEMENTSOF(s));
        assert_int_equal(g->n_cycles, 0);
        assert_list(&g->nodes[0].after, 1, 2, -1);
        assert_list(&g->nodes[3].before, 1, 2, -1);
        assert_list(&g->nodes[1].requires, 3, -1); /* BindsTo= is also a requirement */
        assert_list(&g->nodes[1].binds_to, 3, -1);
        assert_list(&g->nodes[3].bound_by, 1, -1);
        assert_list(&g->nodes[3].required_by, 1, -1);
        dep_graph_free(g);
}

/* Missing names: kept for Requires=/BindsTo=, dropped for the rest; a unit
 * naming itself is ignored. */
static void test_missing_and_self(void **state) {
        struct dep_node_spec s[] = {
                { .name = "a.service", .requires = V("gone.service", "a.service"), .binds_to = V("lost.service"),
                  .wants = V("nowhere.service"), .after = V("nowhere.service", "a.service"),
                  .before = V("never.service") },
        };
        struct dep_graph *g = build(s, 1);
        const struct dep_node *n = &g->nodes[0];
        assert_non_null(n->missing);
        assert_string_equal(n->missing[0], "gone.service");
        assert_string_equal(n->missing[1], "lost.service");
        assert_null(n->missing[2]);
        assert_list(&n->requires, -1);
        assert_list(&n->after, -1);
        assert_list(&n->wants, -1);
        assert_int_equal(g->n_cycles, 0);
        dep_graph_free(g);
}

/* SPEC §4 "Cycles": a → b → c → a, where b requires c: the first of the
 * cycle in name order that no other member requires is not started (a);
 * the cycle's ordering edges are dropped, the rest of the graph kept. */
static void test_cycle_broken_at_unrequired(void **state) {
        struct dep_node_spec s[] = {
                { .name = "c.service", .after = V("b.service") },
                { .name = "b.service", .after = V("a.service"), .requires = V("c.service") },
                { .name = "a.service", .after = V("c.service"), .requires = V("b.service") },
                { .name = "z.service", .after = V("a.service") },
        };
        struct dep_graph *g = build(s, ELEMENTSOF(s));
        assert_int_equal(g->n_cycles, 1);
        /* a is required by... nobody in the cycle? b requires c, a requires b:
         * a is the unrequired one. */
        assert_true(g->nodes[2].cycle_broken);
        assert_false(g->nodes[0].cycle_broken);
        assert_false(g->nodes[1].cycle_broken);
        assert_false(g->nodes[3].cycle_broken);
        for (size_t i = 0; i < 3; i++) {
                assert_int_equal(g->nodes[i].cycle, 1);
                assert_list(&g->nodes[i].after, -1);
        }
        assert_int_equal(g->nodes[3].cycle, 0);
        assert_list(&g->nodes[3].after, 2, -1); /* outside the cycle: kept */
        assert_list(&g->nodes[2].before, 3, -1);
        dep_graph_free(g);
}

/* Every member required by another: none is started. Two separate cycles
 * get two numbers. */
static void test_cycle_all_required(void **state) {
        struct dep_node_spec s[] = {
                { .name = "p.service", .after = V("q.service"), .requires = V("q.service") },
                { .name = "q.service", .after = V("p.service"), .requires = V("p.service") },
                { .name = "x.service", .before = V("y.service") },
                { .name = "y.service", .before = V("x.service") },
        };
        struct dep_graph *g = build(s, ELEMENTSOF(s));
        assert_int_equal(g->n_cycles, 2);
        assert_true(g->nodes[0].cycle_broken);
        assert_true(g->nodes[1].cycle_broken);
        assert_true(g->nodes[2].cycle_broken != g->nodes[3].cycle_broken);
        assert_true(g->nodes[2].cycle_broken); /* x before y in name order */
        assert_int_not_equal(g->nodes[0].cycle, g->nodes[2].cycle);
        dep_graph_free(g);
}

/* A chain of 20,000 units: no recursion to exhaust the stack, no cycle. */
static void test_long_chain(void **state) {
        enum { N = 20000 };
        struct dep_node_spec *s = calloc(N, sizeof *s);
        char (*names)[32] = calloc(N, 32);
        char *(*after)[2] = calloc(N, sizeof *after);
        assert_non_null(s);
        assert_non_null(names);
        assert_non_null(after);
        for (size_t i = 0; i < N; i++) {
                snprintf(names[i], 32, "u%05zu.service", i);
                s[i].name = names[i];
                if (i > 0) {
                        after[i][0] = names[i - 1];
                        s[i].after = after[i];
                }
        }
        struct dep_graph *g = build(s, N);
        assert_int_equal(g->n_cycles, 0);
        assert_list(&g->nodes[N - 1].after, N - 2, -1);
        dep_graph_free(g);
        /* Closing the chain makes one cycle of 20,000. */
        char *first[] = { names[N - 1], NULL };
        s[0].after = first;
        g = build(s, N);
        assert_int_equal(g->n_cycles, 1);
        assert_true(g->nodes[0].cycle_broken);
        for (size_t i = 0; i < N; i++)
                assert_int_equal(g->nodes[i].after.n, 0);
        dep_graph_free(g);
        free(after);
        free(names);
        free(s);
}

/* The keys beyond Requires=/Wants=/BindsTo=: each list, its reverse, and the
 * keys that name the other side (Conflicts= both ways, ReloadPropagatedFrom=
 * turned around). */
static void test_more_keys(void **state) {
        struct dep_node_spec s[] = {
                { .name = "a.service", .requisite = V("b.service", "gone.service"), .part_of = V("b.service"),
                  .conflicts = V("c.service"), .upholds = V("d.service"), .on_failure = V("e.service", "nope.service"),
                  .on_success = V("d.service"), .propagates_reload_to = V("c.service") },
                { .name = "b.service", .reload_propagated_from = V("a.service") },
                { .name = "c.service", .wants = V("d.service") },
                { .name = "d.service" },
                { .name = "e.service" },
        };
        struct dep_graph *g = build(s, ELEMENTSOF(s));
        const struct dep_node *a = &g->nodes[0], *b = &g->nodes[1], *c = &g->nodes[2], *d = &g->nodes[3];
        assert_list(&a->requisite, 1, -1);
        assert_list(&b->requisite_of, 0, -1);
        assert_list(&b->consists_of, 0, -1); /* PartOf=b on a: b's stop reaches a */
        assert_list(&a->consists_of, -1);
        assert_list(&a->conflicts, 2, -1);
        assert_list(&c->conflicted_by, 0, -1);
        assert_list(&c->conflicts, -1);
        assert_list(&a->upholds, 3, -1);
        assert_list(&d->upheld_by, 0, -1);
        assert_list(&d->wanted_by, 2, -1);
        assert_list(&a->on_failure, 4, -1); /* a missing OnFailure= unit is dropped, not missing */
        assert_list(&a->on_success, 3, -1);
        assert_list(&a->reload_to, 2, 1, -1); /* its own PropagatesReloadTo= and b's ReloadPropagatedFrom= */
        assert_list(&b->reload_to, -1);
        assert_list(&a->requires, -1); /* Requisite= is not Requires= */
        assert_list(&b->required_by, -1);
        assert_non_null(a->missing); /* a missing Requisite= unit fails the start as Requires= does */
        assert_string_equal(a->missing[0], "gone.service");
        assert_null(a->missing[1]);
        for (size_t i = 0; i < g->n; i++)
                assert_int_equal(dep_node_is_plain(&g->nodes[i]), i == 4); /* e: an OnFailure= target has no reverse */
        dep_graph_free(g);

        struct dep_node_spec lone[] = { { .name = "x.service", .conflicts = V("y.service") }, { .name = "z.service" } };
        g = build(lone, ELEMENTSOF(lone));
        assert_true(dep_node_is_plain(&g->nodes[0])); /* its only edge names no unit */
        assert_true(dep_node_is_plain(&g->nodes[1]));
        dep_graph_free(g);
}

/* The unit file's side: the lists out of line, OnFailureJobMode= and
 * StopWhenUnneeded= (docs/tend.service.5.md "DEPENDENCIES"). */
static void test_unit_file_keys(void **state) {
        static const char text[] = "[Unit]\n"
                                   "Requisite=b.service\nPartOf=b.service\nConflicts=c.service d.service\n"
                                   "Conflicts=\nConflicts=e.service\nUpholds=u.service\nOnFailure=h@%n.service\n"
                                   "OnSuccess=s.service\nPropagatesReloadTo=r.service\nReloadPropagatedFrom=p.service\n"
                                   "StopWhenUnneeded=yes\nOnFailureJobMode=fail\n"
                                   "[Service]\nExecStart=/bin/true\n";
        struct unit_file *f = NULL;
        assert_int_equal(unit_file_parse("a.service", "a.service", text, sizeof text - 1, &f, NULL), 0);
        const struct unit_dep_keys *k = unit_file_dep_keys(f);
        assert_non_null(f->dep_keys);
        assert_string_equal(k->requisite[0], "b.service");
        assert_string_equal(k->part_of[0], "b.service");
        assert_string_equal(k->conflicts[0], "e.service"); /* the empty assignment reset the list */
        assert_null(k->conflicts[1]);
        assert_string_equal(k->upholds[0], "u.service");
        assert_string_equal(k->on_failure[0], "h@a.service.service");
        assert_string_equal(k->on_success[0], "s.service");
        assert_string_equal(k->propagates_reload_to[0], "r.service");
        assert_string_equal(k->reload_propagated_from[0], "p.service");
        assert_true(f->stop_when_unneeded);
        assert_true(f->on_failure_mode_fail);
        unit_file_free(f);

        static const char plain[] = "[Service]\nExecStart=/bin/true\n";
        assert_int_equal(unit_file_parse("p.service", "p.service", plain, sizeof plain - 1, &f, NULL), 0);
        assert_null(f->dep_keys); /* nothing set: nothing allocated */
        assert_null(unit_file_dep_keys(f)->conflicts);
        assert_false(f->stop_when_unneeded);
        assert_false(f->on_failure_mode_fail);
        unit_file_free(f);

        /* corpus: replace-irreversibly is replace (tend has no job to make irreversible) */
        static const char irr[] = "[Unit]\nOnFailureJobMode=replace-irreversibly\n[Service]\nExecStart=/bin/true\n";
        assert_int_equal(unit_file_parse("r.service", "r.service", irr, sizeof irr - 1, &f, NULL), 0);
        assert_false(f->on_failure_mode_fail);
        unit_file_free(f);

        static const char isolate[] = "[Unit]\nOnFailureJobMode=isolate\n[Service]\nExecStart=/bin/true\n";
        assert_int_equal(unit_file_parse("i.service", "i.service", isolate, sizeof isolate - 1, &f, NULL),
                         -EOPNOTSUPP);
        static const char bad[] = "[Unit]\nOnFailureJobMode=sometimes\n[Service]\nExecStart=/bin/true\n";
        assert_int_equal(unit_file_parse("i.service", "i.service", bad, sizeof bad - 1, &f, NULL), -EINVAL);
}

static void test_empty(void **state) {
        struct dep_graph *g = build(NULL, 0);
        assert_int_equal(g->n_cycles, 0);
        dep_graph_free(g);
        assert_int_equal(dep_graph_build(NULL, 1, &g), -EINVAL);
}

int main(void) {
        log_set_max_level(LOG_EMERG); /* the cycles' warnings are expected */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_chain_and_before),
                cmocka_unit_test(test_diamond),
                cmocka_unit_test(test_missing_and_self),
                cmocka_unit_test(test_cycle_broken_at_unrequired),
                cmocka_unit_test(test_cycle_all_required),
                cmocka_unit_test(test_long_chain),
                cmocka_unit_test(test_more_keys),
                cmocka_unit_test(test_unit_file_keys),
                cmocka_unit_test(test_empty),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
