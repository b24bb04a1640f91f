/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target of the control-message decoder (supervisor/control/control-proto.h;
 * SPEC §5, §7: "tend keeps serving" whatever a client sends). Each input is
 * one message as it arrives on the socket:
 *  - decoded as a request (control_request_decode(): JSON, envelope, units,
 *    fields). A refusal must say why (a non-empty reason) with one of the
 *    documented errors; an accepted request must respect every rule of
 *    docs/control-protocol.md "Requests", and the message's own compact text
 *    must decode to the same request (what tend accepts is stable);
 *  - read as an answer the way tendctl reads one (type, error → exit status).
 * Invariants are checked with abort().
 *
 * Built two ways (tests/fuzz/meson.build, tests/fuzz/README.md):
 *  - -DLIBFUZZER with -fsanitize=fuzzer: libFuzzer calls
 *    LLVMFuzzerTestOneInput() (.ci/run runs it, bounded in time);
 *  - otherwise: replay.h's main() replays corpus/control/ (test
 *    fuzz-control-replay, every build).
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                        \
        do {                                                                               \
                if (!(cond)) {                                                             \
                        fprintf(stderr, "fuzz-control: invariant broken: %s\n", #cond);    \
                        abort();                                                           \
                }                                                                          \
        } while (0)

static bool takes_units(enum control_command c) {
        return c != CONTROL_CMD_LIST && c != CONTROL_CMD_WATCH && c != CONTROL_CMD_DAEMON_RELOAD &&
               c != CONTROL_CMD_SHUTDOWN && c != CONTROL_CMD_DAEMON_REEXEC;
}

static bool needs_units(enum control_command c) {
        return takes_units(c) && c != CONTROL_CMD_STATUS && c != CONTROL_CMD_RESET_FAILED && c != CONTROL_CMD_CLUSTER;
}

static void check_request(const struct control_request *q) {
        int64_t version;
        CHECK(q->o && json_object_is_type(q->o, json_type_object));
        CHECK(control_get_int64(q->o, "version", &version) == 0 && version == CONTROL_PROTOCOL_VERSION);
        CHECK((unsigned) q->cmd < _CONTROL_CMD_MAX);
        CHECK(control_command_to_string(q->cmd));
        CHECK(takes_units(q->cmd) || q->n_units == 0);
        CHECK(!needs_units(q->cmd) || q->n_units >= 1);
        CHECK(q->cmd != CONTROL_CMD_LOGS || q->n_units == 1);
        CHECK((q->n_units == 0) || (q->units && json_object_array_length(q->units) == q->n_units));
        for (size_t i = 0; i < q->n_units; i++)
                CHECK(control_request_unit(q, i));
        CHECK(q->signal >= 1 && q->signal < _NSIG);
        CHECK(q->lines >= -1);
        CHECK(q->prefix);
}

static bool same_request(const struct control_request *a, const struct control_request *b) {
        if (a->cmd != b->cmd || a->n_units != b->n_units || a->no_block != b->no_block ||
            a->main_only != b->main_only || a->signal != b->signal || a->lines != b->lines ||
            a->follow != b->follow || a->ephemeral != b->ephemeral || strcmp(a->prefix, b->prefix) != 0)
                return false;
        for (size_t i = 0; i < a->n_units; i++)
                if (strcmp(control_request_unit(a, i), control_request_unit(b, i)) != 0)
                        return false;
        return true;
}

static void decode(const uint8_t *data, size_t size) {
        char reason[256];
        struct control_request q;
        memset(reason, 'x', sizeof reason);
        int r = control_request_decode(data, size, &q, reason, sizeof reason);
        if (r < 0) {
                CHECK(r == -EBADMSG || r == -EPROTONOSUPPORT || r == -ENOMEM);
                CHECK(r == -ENOMEM || (memchr(reason, '\0', sizeof reason) && reason[0] != '\0'));
                return;
        }
        check_request(&q);
        const char *text;
        size_t len;
        CHECK(control_message_text(q.o, &text, &len) == 0);
        struct control_request again;
        r = control_request_decode(text, len, &again, reason, sizeof reason);
        if (r == -ENOMEM) {
                control_request_done(&q);
                return;
        }
        CHECK(r == 0);
        CHECK(same_request(&q, &again));
        control_request_done(&again);
        control_request_done(&q);
        CHECK(q.o == NULL);
}

/* tendctl's side: any message read as an answer maps to a known exit status. */
static void read_as_answer(const uint8_t *data, size_t size) {
        struct json_object *m = NULL, *a = NULL;
        const char *s = NULL;
        int64_t i;
        bool b;
        size_t n;
        if (control_message_parse(data, size, &m) < 0)
                return;
        (void) control_get_string(m, "type", &s);
        (void) control_get_bool(m, "ok", &b);
        (void) control_get_int64(m, "main_pid", &i);
        (void) control_get_string_array(m, "units", &a, &n);
        s = NULL;
        (void) control_get_string(m, "error", &s);
        int status = control_error_exit_status(control_error_from_string(s));
        CHECK(status >= 1 && status <= 4);
        CHECK(control_error_to_string(control_error_from_string(s)));
        json_object_put(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > CONTROL_REQUEST_MAX)
                return 0; /* refused "too-large" before decoding */
        decode(data, size);
        read_as_answer(data, size);
        struct json_object *v = NULL;
        if (control_json_parse(data, size, &v) == 0)
                json_object_put(v);
        return 0;
}

#ifndef LIBFUZZER
#define FUZZ_NAME "fuzz-control"
#include "replay.h"
#endif
