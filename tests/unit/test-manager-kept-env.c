/* SPDX-License-Identifier: MIT */
/*
 * The kept environment (supervisor/manager/kept-env.h; SPEC §8): kept only
 * once the unit has restarted, for a main process, without
 * EnvironmentFile= or User=; reused only for a file of the same text,
 * otherwise rebuilt.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kept-env.h"
#include "unit-exec.h"

static char **env_of(const char *entry) {
        char **v = calloc(2, sizeof *v);
        assert_non_null(v);
        v[0] = strdup(entry);
        assert_non_null(v[0]);
        return v;
}

static void test_wanted_only_when_all_hold(void **state) {
        assert_true(kept_env_wanted(true, 1, 0, false));
        assert_false(kept_env_wanted(false, 1, 0, false)); /* a control process */
        assert_false(kept_env_wanted(true, 0, 0, false));  /* never restarted: 1,000 units keep none */
        assert_false(kept_env_wanted(true, 1, 1, false));  /* EnvironmentFile= is read at each start */
        assert_false(kept_env_wanted(true, 1, 0, true));   /* User= is looked up at each start */
}

static void test_take_same_text_only(void **state) {
        struct kept_env k = {};
        assert_null(kept_env_take(&k, 10, 0xabc)); /* none kept */
        char **e = env_of("A=1");
        kept_env_keep(&k, e, 10, 0xabc);
        assert_null(kept_env_take(&k, 11, 0xabc)); /* the file's text changed: rebuilt */
        assert_null(kept_env_take(&k, 10, 0xabd));
        char **t = kept_env_take(&k, 10, 0xabc);
        assert_ptr_equal(t, e);
        assert_null(k.env);                        /* taken: the caller owns it */
        assert_null(kept_env_take(&k, 10, 0xabc));
        strv_free(t);
        kept_env_done(&k);
}

/* Keeping replaces what was kept (a stale one freed, ASan checks). */
static void test_keep_replaces(void **state) {
        struct kept_env k = {};
        kept_env_keep(&k, env_of("A=1"), 10, 1);
        char **b = env_of("A=2");
        kept_env_keep(&k, b, 12, 2);
        assert_null(kept_env_take(&k, 10, 1));
        char **t = kept_env_take(&k, 12, 2);
        assert_ptr_equal(t, b);
        assert_string_equal(t[0], "A=2");
        strv_free(t);
        kept_env_keep(&k, env_of("B=1"), 1, 1);
        kept_env_done(&k);
        assert_null(k.env);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_wanted_only_when_all_hold),
                cmocka_unit_test(test_take_same_text_only),
                cmocka_unit_test(test_keep_replaces),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
