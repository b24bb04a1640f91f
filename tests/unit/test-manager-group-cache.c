/* SPDX-License-Identifier: MIT */
/*
 * The per-iteration cgroup cache (supervisor/manager/group-cache.h; SPEC §8):
 * an "empty" answer is reused only within the loop iteration it was read
 * in, and never after a spawn into the cgroup; "populated" and errors are
 * never reused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "group-cache.h"

static void test_nothing_known_at_first(void **state) {
        struct group_cache c = {};
        /* Iteration 0 included: "1 + iteration" keeps a zeroed cache unknown. */
        assert_false(group_cache_known_empty(&c, 0));
        assert_false(group_cache_known_empty(&c, 7));
        assert_false(group_cache_known_empty(&c, UINT64_MAX));
}

static void test_empty_reused_within_its_iteration_only(void **state) {
        struct group_cache c = {};
        group_cache_answer(&c, 5, 0);
        assert_true(group_cache_known_empty(&c, 5));
        assert_true(group_cache_known_empty(&c, 5)); /* asked again in the same dispatch */
        assert_false(group_cache_known_empty(&c, 6));
        assert_false(group_cache_known_empty(&c, 4));
        group_cache_answer(&c, 0, 0);
        assert_true(group_cache_known_empty(&c, 0));
        assert_false(group_cache_known_empty(&c, 1));
}

static void test_never_after_a_spawn(void **state) {
        struct group_cache c = {};
        group_cache_answer(&c, 9, 0);
        group_cache_spawning(&c);
        assert_false(group_cache_known_empty(&c, 9));
}

static void test_populated_and_errors_not_kept(void **state) {
        struct group_cache c = {};
        group_cache_answer(&c, 3, 0);
        group_cache_answer(&c, 3, 1); /* populated since (a spawn not seen here): forgotten */
        assert_false(group_cache_known_empty(&c, 3));
        group_cache_answer(&c, 3, 0);
        group_cache_answer(&c, 3, -EIO);
        assert_false(group_cache_known_empty(&c, 3));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_nothing_known_at_first),
                cmocka_unit_test(test_empty_reused_within_its_iteration_only),
                cmocka_unit_test(test_never_after_a_spawn),
                cmocka_unit_test(test_populated_and_errors_not_kept),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
