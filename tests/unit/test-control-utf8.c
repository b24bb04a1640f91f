/* SPDX-License-Identifier: MIT */
/* control-proto.h: bytes that are not UTF-8 in a log line's text, escaped for
 * JSON and undone by tendctl (docs/control-protocol.md, SPEC §5). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control-proto.h"

static bool all_utf8(const char *s, size_t len) {
        for (size_t i = 0, n; i < len; i += n)
                if ((n = control_utf8_span(s + i, len - i)) == 0)
                        return false;
        return true;
}

/* Escapes in (len bytes), checks the escaped text against want (NULL: sent
 * unchanged), that it is UTF-8, and that unescaping gives in back. */
static void check(const char *in, size_t len, const char *want) {
        char *esc;
        size_t n;
        assert_int_equal(control_text_escape(in, len, &esc, &n), 0);
        if (!want) {
                assert_null(esc);
                assert_int_equal(n, len);
                return;
        }
        assert_non_null(esc);
        assert_int_equal(n, strlen(want));
        assert_memory_equal(esc, want, n);
        assert_true(all_utf8(esc, n));
        assert_int_equal(control_text_unescape(esc, n), len);
        assert_memory_equal(esc, in, len);
        free(esc);
}

static void roundtrip(const char *in, size_t len) {
        char *esc;
        size_t n;
        assert_int_equal(control_text_escape(in, len, &esc, &n), 0);
        if (!esc) {
                assert_true(all_utf8(in, len));
                return;
        }
        assert_true(all_utf8(esc, n));
        assert_true(n <= 4 * len);
        assert_int_equal(control_text_unescape(esc, n), len);
        assert_memory_equal(esc, in, len);
        free(esc);
}

static void test_single_bytes(void **state) {
        (void) state;
        for (unsigned b = 0; b < 256; b++) {
                char in = (char) b, want[8];
                snprintf(want, sizeof want, "\\x%02x", b);
                check(&in, 1, b < 0x80 ? NULL : want);
        }
}

static void test_all_bytes_one_line(void **state) {
        (void) state;
        char in[256];
        for (unsigned b = 0; b < 256; b++)
                in[b] = (char) b;
        roundtrip(in, sizeof in);
        /* backslash doubled, an invalid byte \xHH, valid text unchanged */
        check("a\\b\xe9", 4, "a\\\\b\\xe9");
        /* a literal "\x41" in an escaped line stays itself */
        check("\\x41\xff", 5, "\\\\x41\\xff");
}

static void test_invalid_forms(void **state) {
        (void) state;
        check("\xc0\x80", 2, "\\xc0\\x80");                        /* overlong NUL */
        check("\xe0\x80\xaf", 3, "\\xe0\\x80\\xaf");               /* overlong '/' */
        check("\xf0\x82\x82\xac", 4, "\\xf0\\x82\\x82\\xac");      /* overlong € */
        check("\xed\xa0\x80", 3, "\\xed\\xa0\\x80");               /* U+D800 */
        check("\xed\xbf\xbf", 3, "\\xed\\xbf\\xbf");               /* U+DFFF */
        check("\xf4\x90\x80\x80", 4, "\\xf4\\x90\\x80\\x80");      /* above U+10FFFF */
        check("x\xe2\x82", 3, "x\\xe2\\x82");                      /* € truncated at the end */
        check("\xe2\x82x\xe2\x82\xac", 6, "\\xe2\\x82x\xe2\x82\xac"); /* truncated, then a whole € */
        check("\xf0\x9d\x84", 3, "\\xf0\\x9d\\x84");               /* 𝄞 truncated */
        check("\x80\xbf", 2, "\\x80\\xbf");                        /* lone continuations */
}

static void test_valid_unchanged(void **state) {
        (void) state;
        const char *s = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9d\x84\x9e \\ C:\\x41 \xed\x9f\xbf \xf4\x8f\xbf\xbf";
        check(s, strlen(s), NULL);
        check("", 0, NULL);
        check("a\0b", 3, NULL); /* a NUL is UTF-8 (JSON escapes it) */
}

static void test_random_roundtrip(void **state) {
        (void) state;
        uint32_t x = 2463534242u;
        char buf[64];
        for (int k = 0; k < 20000; k++) {
                size_t len = (x % sizeof buf);
                for (size_t i = 0; i < len; i++) {
                        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
                        /* mostly bytes near UTF-8's edges */
                        static const char pick[] = "\\xa\x80\xbf\xc2\xdf\xe0\xed\xef\xf0\xf4\xf5\xff\xc3\xa9";
                        buf[i] = (x & 1) ? (char) (x >> 8) : pick[(x >> 8) % (sizeof pick - 1)];
                }
                x ^= x << 13, x ^= x >> 17, x ^= x << 5;
                roundtrip(buf, len);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_single_bytes),
                cmocka_unit_test(test_all_bytes_one_line),
                cmocka_unit_test(test_invalid_forms),
                cmocka_unit_test(test_valid_unchanged),
                cmocka_unit_test(test_random_roundtrip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
