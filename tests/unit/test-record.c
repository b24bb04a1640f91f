/* SPDX-License-Identifier: MIT */
/*
 * The state record's JSON (supervisor/control/record.h; SPEC §5's fields): every
 * field, in SPEC §5's order, through transitions between null and a value,
 * parsed back by json-c and compared with the record a fresh tree gives.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "record.h"
#include "unit.h"

static const char *const fields[] = { "version", "name",      "state",  "main_pid", "since",  "since_monotonic",
                                      "restarts", "last_exit", "status", "result",   "waiters",
                                      "file_changed", "file_error" };

/* A position that shows state s (unit.h's table); finer ones differ by alt. */
static enum unit_pos pos_of(enum unit_state s, int alt) {
        static const enum unit_pos pos[_UNIT_STATE_MAX][2] = {
                [UNIT_INACTIVE] = { UNIT_POS_INACTIVE, UNIT_POS_WAIT_INACTIVE },
                [UNIT_STARTING] = { UNIT_POS_START_PRE, UNIT_POS_START },
                [UNIT_RUNNING] = { UNIT_POS_RUNNING, UNIT_POS_RELOAD },
                [UNIT_STOPPING] = { UNIT_POS_STOP_SIGTERM, UNIT_POS_STOP_CMD },
                [UNIT_FAILED] = { UNIT_POS_FAILED, UNIT_POS_WAIT_FAILED },
                [UNIT_BACKOFF] = { UNIT_POS_BACKOFF, UNIT_POS_WAIT_BACKOFF },
        };
        return pos[s][alt];
}

/* The record built the plain way, one new tree: what the writer must equal. */
static json_object *expected(const struct unit *u, int waiters) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "version", json_object_new_int(1));
        json_object_object_add(o, "name", json_object_new_string(u->name));
        json_object_object_add(o, "state", json_object_new_string(unit_state_to_string(unit_get_state(u))));
        json_object_object_add(o, "main_pid", u->main_pid > 0 ? json_object_new_int(u->main_pid) : NULL);
        json_object_object_add(o, "since", json_object_new_int64((int64_t) u->since_realtime));
        json_object_object_add(o, "since_monotonic", json_object_new_int64((int64_t) u->since_monotonic));
        json_object_object_add(o, "restarts", json_object_new_int64((int64_t) u->restarts));
        json_object *last = NULL;
        if (u->has_last_exit) {
                last = json_object_new_object();
                if (u->last_exit.kind == EXIT_REASON_EXITED)
                        json_object_object_add(last, "code", json_object_new_int(u->last_exit.status));
                else {
                        json_object_object_add(last, "signal", json_object_new_int(u->last_exit.status));
                        json_object_object_add(last, "core_dumped", json_object_new_boolean(u->last_exit.core_dumped));
                }
        }
        json_object_object_add(o, "last_exit", last);
        json_object_object_add(o, "status", u->status_text ? json_object_new_string(u->status_text) : NULL);
        json_object_object_add(o, "result", json_object_new_string(unit_result_to_string(u->result)));
        json_object_object_add(o, "waiters", json_object_new_int(waiters > 0 ? waiters : 0));
        json_object_object_add(o, "file_changed", json_object_new_boolean(0)); /* the manager's notes: none */
        json_object_object_add(o, "file_error", NULL);
        return o;
}

static void check(struct record_writer *w, const struct unit *u, int waiters) {
        size_t len = 0;
        const char *text = record_writer_format(w, u, waiters, &len);
        assert_non_null(text);
        assert_int_equal(len, strlen(text));
        json_object *got = json_tokener_parse(text), *want = expected(u, waiters);
        assert_non_null(got);
        if (!json_object_equal(got, want))
                fail_msg("record %s\n  want %s", text, json_object_to_json_string_ext(want, JSON_C_TO_STRING_PLAIN));
        /* SPEC §5's fields, exactly, in its order. */
        size_t i = 0;
        json_object_object_foreach(got, key, val) {
                (void) val;
                assert_true(i < sizeof fields / sizeof fields[0]);
                assert_string_equal(key, fields[i]);
                i++;
        }
        assert_int_equal(i, sizeof fields / sizeof fields[0]);
        json_object_put(got);
        json_object_put(want);
}

static void test_transitions(void **state) {
        struct record_writer *w = NULL;
        assert_int_equal(record_writer_new(&w), 0);
        struct unit u = { .name = (char *) "web.service", .pos = UNIT_POS_INACTIVE, .result = UNIT_RESULT_SUCCESS };
        check(w, &u, 0);
        u.pos = UNIT_POS_RUNNING;
        u.main_pid = 4242;
        u.since_realtime = 1796026420287743ull;
        u.since_monotonic = 11427658141ull;
        check(w, &u, 3);
        u.status_text = (char *) "serving \"quotes\", \\ and \n newlines, é";
        check(w, &u, -1);
        u.has_last_exit = true;
        u.last_exit = (struct exit_reason) { .kind = EXIT_REASON_KILLED, .status = SIGKILL, .core_dumped = true };
        u.main_pid = 0;
        u.pos = UNIT_POS_BACKOFF;
        u.result = UNIT_RESULT_SIGNAL;
        u.restarts = 1ull << 40;
        check(w, &u, 0);
        u.last_exit = (struct exit_reason) { .kind = EXIT_REASON_EXITED, .status = 3 };
        u.status_text = NULL;
        check(w, &u, 0);
        u.last_exit = (struct exit_reason) { .kind = EXIT_REASON_KILLED, .status = SIGTERM };
        u.name = (char *) "a-much-longer-name@with-an-instance.service";
        u.status_text = (char *) "";
        check(w, &u, 1000);
        u.has_last_exit = false;
        check(w, &u, 0);
        record_writer_free(w);
}

/* Many records through one writer: the sanitizer build sees no leak and no
 * stale value (each checked). */
static void test_many(void **state) {
        struct record_writer *w = NULL;
        assert_int_equal(record_writer_new(&w), 0);
        char status[64];
        for (int i = 0; i < 2000; i++) {
                snprintf(status, sizeof status, "step %d", i);
                struct unit u = { .name = (char *) "x.service", .pos = pos_of((enum unit_state) (i % _UNIT_STATE_MAX), 0),
                                  .result = (enum unit_result) (i % _UNIT_RESULT_MAX), .main_pid = i % 3 ? i : 0,
                                  .has_last_exit = i % 4 != 0, .status_text = i % 5 ? status : NULL,
                                  .last_exit = { .kind = i % 2 ? EXIT_REASON_EXITED : EXIT_REASON_KILLED,
                                                 .status = i % 256 } };
                check(w, &u, i % 7);
        }
        record_writer_free(w);
}

/* record_fields_equal() may skip a write only when the record would be the
 * same: over units drawn from a small domain (so that many pairs share
 * fields), equal fields always give the same text, and each field that
 * shows in the record makes the fields differ. */
static struct unit variant(int i, char *status) {
        return (struct unit) { .name = (char *) "v.service", .pos = pos_of((enum unit_state) (i % 3), i % 2),
                               .result = (enum unit_result) (i / 3 % 2), .main_pid = i / 6 % 2 ? 77 : 0,
                               .since_realtime = (usec_t) (i / 12 % 2), .since_monotonic = (usec_t) (i / 24 % 2),
                               .restarts = (uint64_t) (i / 48 % 2), .has_last_exit = i / 96 % 2,
                               .last_exit = { .kind = i / 192 % 2 ? EXIT_REASON_EXITED : EXIT_REASON_KILLED,
                                              .status = i / 384 % 2 + 1, .core_dumped = i / 768 % 2 },
                               .status_text = i / 1536 % 2 ? status : NULL };
}

static void test_fields_equal(void **state) {
        struct record_writer *w = NULL;
        assert_int_equal(record_writer_new(&w), 0);
        enum { N = 3072 };
        char status[] = "ready";
        static char *text[N];
        static struct record_fields f[N];
        for (int i = 0; i < N; i++) {
                struct unit u = variant(i, status);
                int waiters = i % 5 == 0;
                size_t len;
                text[i] = strdup(record_writer_format(w, &u, waiters, &len));
                record_fields_of(&u, waiters, &f[i]);
        }
        unsigned same = 0;
        for (int i = 0; i < N; i += 7)
                for (int j = 0; j < N; j++)
                        if (record_fields_equal(&f[i], &f[j])) {
                                same++;
                                if (strcmp(text[i], text[j]) != 0)
                                        fail_msg("fields equal, records differ:\n%s\n%s", text[i], text[j]);
                        } else if (strcmp(text[i], text[j]) == 0 && !f[i].has_status)
                                fail_msg("records equal, fields differ (a write not skipped is harmless, but "
                                         "every field should count): %d %d", i, j);
        assert_true(same > N / 7); /* the pairs that could be skipped were there to check */
        for (int i = 0; i < N; i++)
                free(text[i]);
        record_writer_free(w);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_transitions),
                cmocka_unit_test(test_many),
                cmocka_unit_test(test_fields_equal),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
