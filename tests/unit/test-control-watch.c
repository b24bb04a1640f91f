/* SPDX-License-Identifier: MIT */
/*
 * Watch messages spliced from the stored text (supervisor/control/control-watch.h):
 * for unit records of every shape (made by the real record writer: status
 * null, or text with quotes, backslashes, control characters, slashes,
 * UTF-8; last_exit null, a code, a signal with or without a core; main_pid
 * null or a pid), for keys that need escaping and for both keyspaces, the
 * spliced message is byte for byte the message built the old way (value
 * parsed, message tree serialised). Random json-c trees are canonical and
 * splice the same; texts that are not canonical (whitespace, \/, \u00e9,
 * duplicate keys, doubles, -0, trailing bytes, too deep) are refused, and
 * random mutations of records either are refused or still splice the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "control-proto.h"
#include "control-watch.h"
#include "record.h"

/* The message the old way (tree), as text the caller frees. */
static char *tree_text(const struct store_event *ev) {
        struct json_object *o = watch_message_tree(ev);
        const char *text;
        size_t len;
        assert_non_null(o);
        assert_int_equal(control_message_text(o, &text, &len), 0);
        char *copy = strndup(text, len);
        assert_non_null(copy);
        json_object_put(o);
        return copy;
}

/* The spliced message (which must exist) equals the tree's, and parses. */
static void assert_splices_same(const struct store_event *ev) {
        size_t n = watch_splice_size(ev);
        if (n == 0)
                fail_msg("value not spliced (not canonical?): %.*s", (int) ev->value_size, ev->value);
        char *buf = malloc(n + 1);
        assert_non_null(buf);
        watch_splice_write(ev, buf, n);
        buf[n] = '\0';
        char *want = tree_text(ev);
        if (strcmp(buf, want) != 0)
                fail_msg("spliced  %s\ntree     %s", buf, want);
        struct json_object *o = NULL;
        assert_int_equal(control_message_parse(buf, n, &o), 0);
        json_object_put(o);
        free(want);
        free(buf);
}

static struct store_event put_event(const char *key, const char *value, size_t len, uint64_t revision) {
        return (struct store_event) { .type = STORE_EVENT_PUT, .keyspace = STORE_DURABLE, .revision = revision,
                                      .key = key, .value = value, .value_size = len };
}

static void check_record(struct record_writer *w, const char *name, const char *status,
                         const struct record_fields *f) {
        size_t len = 0;
        const char *text = record_writer_format_fields(w, name, status, f->has_file_error ? "w.service:3: Restart=: invalid value \"sometimes\"" : NULL, f, &len);
        assert_non_null(text);
        assert_true(watch_value_is_canonical(text, len));
        char key[300];
        snprintf(key, sizeof key, CONTROL_RECORD_PREFIX "%s", name);
        struct store_event ev = put_event(key, text, len, 17);
        assert_splices_same(&ev);
}

static void test_records(void **state) {
        static const char *const statuses[] = {
                NULL,
                "",
                "Ready",
                "say \"hi\" \\ back\\slash",
                "path /var/lib/x and </script>",
                "tab\tnewline\nreturn\rbell\a\x01\x1f esc\x1b del\x7f",
                "UTF-8: caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                "\\u0041 is not an escape here; \\\" neither",
        };
        struct record_writer *w = NULL;
        assert_int_equal(record_writer_new(&w), 0);
        for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
                for (int shape = 0; shape < 4; shape++) {
                        struct record_fields f = {
                                .shown = {
                                        .state = (enum unit_state) (shape % 2 ? UNIT_RUNNING : UNIT_FAILED),
                                        .result = shape % 2 ? UNIT_RESULT_SUCCESS : UNIT_RESULT_EXIT_CODE,
                                        .main_pid = shape % 2 ? 4242 : 0,
                                        .since_realtime = 1796026420287743ull,
                                        .since_monotonic = 5000000ull * (uint64_t) shape,
                                        .restarts = (uint64_t) i,
                                        .has_last_exit = shape > 0,
                                        .last_exit = { .kind = shape == 1 ? EXIT_REASON_EXITED : EXIT_REASON_KILLED,
                                                       .status = shape == 1 ? 3 : 9, .core_dumped = shape == 3 },
                                },
                                .waiters = (int) i,
                                .has_status = statuses[i] != NULL,
                        };
                        check_record(w, "web.service", statuses[i], &f);
                        check_record(w, "a\\b\"c@inst.service", statuses[i], &f);
                }
        record_writer_free(w);
}

/* Keys and keyspaces: the fields before the value are json-c's too. */
static void test_keys(void **state) {
        static const char *const keys[] = { "service/web.service", "a/b", "q\"uote", "back\\slash", "ctl\x01\x1f\n\t",
                                            "caf\xc3\xa9", "del\x7f" };
        const char value[] = "{\"a\":1}";
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
                struct store_event ev = put_event(keys[i], value, strlen(value), i + 1);
                assert_splices_same(&ev);
                ev.keyspace = STORE_EPHEMERAL;
                ev.revision = UINT64_C(9007199254740993);
                assert_splices_same(&ev);
        }
}

/* Events that carry no value, values that are no object, and a value whose
 * message would not fit: the tree builds them (the splice declines). */
static void test_not_spliced(void **state) {
        struct store_event ev = put_event("k", "{}", 2, 1);
        assert_true(watch_splice_size(&ev) > 0);
        ev.type = STORE_EVENT_DELETE;
        assert_int_equal(watch_splice_size(&ev), 0);
        ev.type = STORE_EVENT_SNAPSHOT_DONE;
        assert_int_equal(watch_splice_size(&ev), 0);

        static const char *const values[] = { "[1,2]", "\"s\"", "12", "null", "true", "not json", "" };
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
                ev = put_event("k", values[i], strlen(values[i]), 1);
                assert_int_equal(watch_splice_size(&ev), 0);
        }

        size_t big = CONTROL_MESSAGE_MAX;
        char *v = malloc(big);
        assert_non_null(v);
        memset(v, 'x', big);
        memcpy(v, "{\"a\":\"", 6);
        memcpy(v + big - 2, "\"}", 2);
        assert_true(watch_value_is_canonical(v, big));
        ev = put_event("k", v, big, 1);
        assert_int_equal(watch_splice_size(&ev), 0);
        char *t = tree_text(&ev);
        assert_non_null(strstr(t, "\"value\":null,\"value_omitted\":true"));
        free(t);
        free(v);
}

/* What json-c would write otherwise: refused. */
static void test_not_canonical(void **state) {
        static const char *const texts[] = {
                "{ \"a\":1}", "{\"a\": 1}", "{\"a\":1}\n", "{\"a\":\"\\/\"}", "{\"a\":\"\\u00e9\"}",
                "{\"a\":\"\\u001F\"}", "{\"a\":\"\\u000a\"}", "{\"a\":\"\\u0000\"}", "{\"a\":1,\"a\":2}",
                "{\"a\":{\"b\":1,\"b\":1}}", "{\"a\":1.0}", "{\"a\":1e2}", "{\"a\":-0}", "{\"a\":01}",
                "{\"a\":1234567890123456789}", "{\"a\":\"x\ty\"}", "{\"a\":tru}", "{\"a\":1}}", "{\"a\":1",
                "{\"a\"}", "{,}", "{\"a\":[1,]}", "{\"a\":'x'}", "{\"a\":\"x\\q\"}", "{\"a\":NaN}",
                "{\"a\":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}",
        };
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
                if (watch_value_is_canonical(texts[i], strlen(texts[i])))
                        fail_msg("accepted as canonical: %s", texts[i]);
        static const char nul_escape[] = "{\"a\":\"\\\0\"}";
        assert_false(watch_value_is_canonical(nul_escape, sizeof nul_escape - 1));
        static const char all[] = "{\"a\":[1,-2,true,false,null,{},[],\"\\u001f\\b\"],\"\":0}";
        assert_true(watch_value_is_canonical(all, strlen(all)));
}

/* ---- random trees and mutations ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static unsigned rnd(unsigned n) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return (unsigned) (rng % n);
}

static struct json_object *random_value(unsigned depth);

static struct json_object *random_string(void) {
        char s[12];
        size_t n = rnd(sizeof s);
        for (size_t i = 0; i < n; i++)
                s[i] = (char) (rnd(4) == 0 ? (int) (1 + rnd(255)) : " az/\"\\\t\n\x01\x7f\xc3\xa9"[rnd(12)]);
        return json_object_new_string_len(s, (int) n);
}

static struct json_object *random_object(unsigned depth) {
        struct json_object *o = json_object_new_object();
        for (unsigned i = rnd(6); i > 0; i--) {
                char key[8];
                snprintf(key, sizeof key, "%c%c", "ab\"/\\\n"[rnd(6)], 'a' + rnd(3));
                json_object_object_add(o, key, random_value(depth + 1));
        }
        return o;
}

static struct json_object *random_value(unsigned depth) {
        switch (depth > 5 ? rnd(5) : rnd(7)) {
        case 0:
                return NULL;
        case 1:
                return json_object_new_boolean(rnd(2));
        case 2: {
                unsigned shift = rnd(64);
                int64_t sign = rnd(2) ? 1 : -1;
                return json_object_new_int64((int64_t) (rng >> shift) * sign);
        }
        case 3:
        case 4:
                return random_string();
        case 5:
                return random_object(depth);
        default: {
                struct json_object *a = json_object_new_array();
                for (unsigned i = rnd(4); i > 0; i--)
                        json_object_array_add(a, random_value(depth + 1));
                return a;
        }
        }
}

static void test_random(void **state) {
        unsigned accepted = 0, mutated_accepted = 0;
        for (int round = 0; round < 3000; round++) {
                struct json_object *o = random_object(0);
                size_t len;
                const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
                                                                  &len);
                char text[4096];
                if (len >= sizeof text) {
                        json_object_put(o);
                        continue;
                }
                memcpy(text, t, len);
                json_object_put(o);
                struct store_event ev = put_event("service/x.service", text, len, (uint64_t) round);
                /* Integers of 19 digits are json-c's but left to the tree; the rest splices. */
                if (watch_splice_size(&ev) > 0) {
                        assert_splices_same(&ev);
                        accepted++;
                }
                /* One byte changed: refused, or spliced as the tree would build it. */
                size_t at = rnd((unsigned) len);
                text[at] = "{}[],:\"\\ 0-.e/u"[rnd(16)];
                if (watch_splice_size(&ev) > 0) {
                        assert_splices_same(&ev);
                        mutated_accepted++;
                }
        }
        print_message("spliced %u of 3000 random trees, %u of their mutations\n", accepted, mutated_accepted);
        assert_true(accepted > 1500); /* the random trees are mostly spliced */
        assert_true(mutated_accepted > 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_records),     cmocka_unit_test(test_keys),   cmocka_unit_test(test_not_spliced),
                cmocka_unit_test(test_not_canonical), cmocka_unit_test(test_random),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
