/* SPDX-License-Identifier: MIT */
/* common/strv.h: the one string-vector helper. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strv.h"

static void test_push_extend_length_free(void **state) {
        char **l = NULL;
        assert_int_equal(strv_length(l), 0);
        assert_int_equal(strv_extend(&l, "a"), 0);
        assert_int_equal(strv_push(&l, strdup("b")), 0);
        assert_int_equal(strv_extend(&l, ""), 0);
        assert_int_equal(strv_length(l), 3);
        assert_string_equal(l[0], "a");
        assert_string_equal(l[1], "b");
        assert_string_equal(l[2], "");
        assert_null(l[3]);
        assert_null(strv_free(l));
        assert_null(strv_free(NULL));
}

static void test_pack_is_one_allocation_with_the_same_strings(void **state) {
        char **l = NULL, **p = NULL;
        assert_int_equal(strv_extend(&l, "/bin/sleep"), 0);
        assert_int_equal(strv_extend(&l, "1000"), 0);
        assert_int_equal(strv_pack(l, &p), 0); /* l taken */
        assert_int_equal(strv_length(p), 2);
        assert_string_equal(p[0], "/bin/sleep");
        assert_string_equal(p[1], "1000");
        /* The strings live right after the pointers, in the same block. */
        assert_ptr_equal(p[0], (char *) (p + 3));
        assert_ptr_equal(p[1], p[0] + strlen(p[0]) + 1);
        free(p);
        assert_int_equal(strv_pack(NULL, &p), 0);
        assert_int_equal(strv_length(p), 0);
        assert_null(p[0]);
        free(p);
}

static void test_builder_grows_and_stays_terminated(void **state) {
        struct strv_builder b = {};
        char **empty = strv_builder_take(&b);
        assert_non_null(empty); /* an empty strv is still an array */
        assert_null(empty[0]);
        strv_free(empty);
        for (int i = 0; i < 1000; i++) {
                char s[16];
                snprintf(s, sizeof s, "K%d=%d", i, i);
                assert_int_equal(strv_builder_push(&b, strdup(s)), 0);
                assert_int_equal(b.n, (size_t) i + 1);
                assert_null(b.v[b.n]);
        }
        char **v = strv_builder_take(&b);
        assert_int_equal(strv_length(v), 1000);
        assert_string_equal(v[999], "K999=999");
        assert_null(b.v);
        assert_int_equal(b.n, 0);
        strv_free(v);
        assert_int_equal(strv_builder_push(&b, strdup("x")), 0);
        strv_builder_clear(&b);
        assert_null(b.v);
        assert_int_equal(b.cap, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_push_extend_length_free),
                cmocka_unit_test(test_pack_is_one_allocation_with_the_same_strings),
                cmocka_unit_test(test_builder_grows_and_stays_terminated),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
