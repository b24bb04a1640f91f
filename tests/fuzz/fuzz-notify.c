/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target of the notify datagram parser (supervisor/exec/notify.h; SPEC §4
 * "Readiness and notify", §7 "oversized or malformed notify datagrams").
 * Each input is one datagram. Checked with abort(): the size and NUL rules;
 * every flag against an independent line-by-line reading of the input;
 * STATUS= points into the buffer, holds no newline and is valid UTF-8 (as
 * the parser's contract says, so the JSON record never gets a broken
 * string); the numbers are in range; the environment a unit would get from
 * it (notify_env_add) is well formed.
 *
 * Built two ways (tests/fuzz/meson.build, tests/fuzz/README.md):
 *  - -DLIBFUZZER with -fsanitize=fuzzer: libFuzzer calls
 *    LLVMFuzzerTestOneInput() (.ci/run runs it, bounded in time);
 *  - otherwise: main() replays every file of the directories or files it is
 *    given (test fuzz-notify-replay: corpus/notify, in every build).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "notify.h"
#include "unit-exec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void quiet(int level, const char *msg, void *userdata) {
}

#define CHECK(cond)                                                                      \
        do {                                                                             \
                if (!(cond)) {                                                           \
                        fprintf(stderr, "fuzz-notify: invariant broken: %s\n", #cond);   \
                        abort();                                                         \
                }                                                                        \
        } while (0)

/* Whether the input has a line exactly equal to want (an independent reading). */
static bool has_line(const uint8_t *data, size_t size, const char *want) {
        size_t n = strlen(want);
        for (size_t i = 0; i <= size;) {
                const uint8_t *nl = memchr(data + i, '\n', size - i);
                size_t len = nl ? (size_t) (nl - (data + i)) : size - i;
                if (len == n && memcmp(data + i, want, n) == 0)
                        return true;
                if (!nl)
                        break;
                i += len + 1;
        }
        return false;
}

/* Strict UTF-8, written apart from the parser's. */
static bool utf8_ok(const unsigned char *s) {
        while (*s) {
                int n = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1 : (*s & 0xf0) == 0xe0 ? 2 : (*s & 0xf8) == 0xf0 ? 3 : -1;
                if (n < 0)
                        return false;
                uint32_t cp = n == 0 ? *s : *s & (0x3f >> n);
                for (int i = 1; i <= n; i++) {
                        if ((s[i] & 0xc0) != 0x80)
                                return false;
                        cp = cp << 6 | (s[i] & 0x3f);
                }
                static const uint32_t min[] = { 0, 0x80, 0x800, 0x10000 };
                if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
                        return false;
                s += n + 1;
        }
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        log_set_sink(quiet, NULL);
        char *buf = malloc(size + 1);
        if (!buf)
                return 0;
        if (size)
                memcpy(buf, data, size);
        struct notify_message m;
        int r = notify_parse(buf, size, &m);
        if (size > NOTIFY_DATAGRAM_MAX)
                CHECK(r == -EMSGSIZE);
        else if (size && memchr(data, 0, size))
                CHECK(r == -EBADMSG);
        else {
                CHECK(r == 0);
                CHECK(m.ready == has_line(data, size, "READY=1"));
                CHECK(m.stopping == has_line(data, size, "STOPPING=1"));
                CHECK(m.reloading == has_line(data, size, "RELOADING=1"));
                CHECK(m.watchdog_ping == has_line(data, size, "WATCHDOG=1"));
                CHECK(m.watchdog_trigger == has_line(data, size, "WATCHDOG=trigger"));
                if (m.status) {
                        CHECK(m.status >= buf + 7 && m.status <= buf + size);
                        CHECK(memcmp(m.status - 7, "STATUS=", 7) == 0);
                        CHECK(!strchr(m.status, '\n'));
                        CHECK(utf8_ok((const unsigned char *) m.status));
                }
                CHECK(m.main_pid >= 0);
                CHECK(!m.has_errno || (m.status_errno >= 0 && m.status_errno <= 4095));
                CHECK(m.has_errno || m.status_errno == 0);
                CHECK(m.has_extend_timeout || m.extend_timeout_usec == 0);

                char **env = NULL;
                CHECK(unit_env_set(&env, "PATH=/usr/bin") == 0);
                r = notify_env_add(&env, "@0a1b2", m.extend_timeout_usec);
                CHECK(r == 0 || r == -ENOMEM);
                if (r == 0) {
                        CHECK(env[0] && env[1] && streq(env[1], "NOTIFY_SOCKET=@0a1b2"));
                        bool wd = m.extend_timeout_usec > 0 && m.extend_timeout_usec != USEC_INFINITY;
                        CHECK(wd ? env[2] && !strncmp(env[2], "WATCHDOG_USEC=", 14) && !env[3] : !env[2]);
                }
                strv_free(env);
        }
        free(buf);
        return 0;
}

#ifndef LIBFUZZER
#define FUZZ_NAME "fuzz-notify"
#include "replay.h"
#endif
