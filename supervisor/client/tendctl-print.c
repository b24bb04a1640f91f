/* SPDX-License-Identifier: MIT */
/*
 * tendctl's human output of tend's own records and lines (tendctl-print.h):
 * `status` without a name, `list`, `logs`.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "signal-util.h"
#include "tendctl-print.h"
#include "time-util.h"

bool colour;

const char *state_colour(const char *state) {
        if (!colour)
                return "";
        if (streq(state, "running"))
                return "\033[0;1;32m";
        if (streq(state, "failed"))
                return "\033[0;1;31m";
        if (streq(state, "inactive"))
                return "";
        return "\033[0;1;33m"; /* starting, stopping, backoff */
}

const char *colour_off(void) {
        return colour ? "\033[0m" : "";
}

void format_time(int64_t usec, enum time_style style, char *buf, size_t size) {
        time_t t = (time_t) (usec / (int64_t) USEC_PER_SEC);
        struct tm tm;
        size_t n = 0;
        if (usec > 0 && localtime_r(&t, &tm))
                n = style == TIME_STATUS ? strftime(buf, size, "%a %Y-%m-%d %H:%M:%S %Z", &tm)
                    : style == TIME_LIST ? strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm)
                                         : strftime(buf, size, "%b %d %H:%M:%S", &tm);
        if (n == 0)
                snprintf(buf, size, "-");
}

/* "5min 3s ago", "2h 4min ago", "3 days ago" */
void format_ago(int64_t usec, char *buf, size_t size) {
        int64_t d = ((int64_t) now_usec(CLOCK_REALTIME) - usec) / (int64_t) USEC_PER_SEC;
        if (d < 0)
                d = 0;
        if (d < 60)
                snprintf(buf, size, "%" PRId64 "s ago", d);
        else if (d < 3600)
                snprintf(buf, size, "%" PRId64 "min %" PRId64 "s ago", d / 60, d % 60);
        else if (d < 86400)
                snprintf(buf, size, "%" PRId64 "h %" PRId64 "min ago", d / 3600, d % 3600 / 60);
        else
                snprintf(buf, size, "%" PRId64 " days ago", d / 86400);
}

static void format_last_exit(json *rec, char *buf, size_t size) {
        json *le;
        char sigbuf[24];
        if (!json_object_object_get_ex(rec, "last_exit", &le) || !json_object_is_type(le, json_type_object))
                snprintf(buf, size, "-");
        else if (get_int(le, "code", -1) >= 0)
                snprintf(buf, size, "exited, status=%" PRId64, get_int(le, "code", 0));
        else
                snprintf(buf, size, "killed, signal=%s%s", signal_to_string((int) get_int(le, "signal", 0), sigbuf),
                         get_bool(le, "core_dumped") ? " (core dumped)" : "");
}

void print_status(json *rec) {
        const char *state = get_str(rec, "state", "?"), *status = get_str(rec, "status", NULL);
        int64_t since = get_int(rec, "since", 0), pid = get_int(rec, "main_pid", 0);
        char when[64], ago[64], last[96];

        format_time(since, TIME_STATUS, when, sizeof when);
        format_ago(since, ago, sizeof ago);
        format_last_exit(rec, last, sizeof last);
        printf("%s●%s %s\n", state_colour(state), colour_off(), get_str(rec, "name", "?"));
        printf("     State: %s%s%s since %s; %s\n", state_colour(state), state, colour_off(), when, ago);
        if (pid > 0)
                printf("  Main PID: %" PRId64 "\n", pid);
        else
                printf("  Main PID: -\n");
        printf("  Restarts: %" PRId64 "\n", get_int(rec, "restarts", 0));
        printf(" Last exit: %s\n", last);
        printf("    Result: %s\n", get_str(rec, "result", "?"));
        if (status)
                printf("    Status: \"%s\"\n", status);
        const char *condition = get_str(rec, "condition", NULL); /* cond: a skipped or asserted start */
        if (condition)
                printf(" Condition: %s\n", condition);
        printf("   Waiters: %" PRId64 "\n", get_int(rec, "waiters", 0));
        /* tend(8) "RELOADING DIR": what a daemon-reload did not apply. */
        const char *file_error = get_str(rec, "file_error", NULL), *name = get_str(rec, "name", "?");
        if (file_error)
                printf("   Warning: its unit file no longer loads (%s); it is left as it is, on the last file that "
                       "loaded\n", file_error);
        if (get_bool(rec, "file_changed"))
                printf("   Warning: the unit file changed since the unit started; `tendctl restart %s` applies it\n",
                       name);
}

void print_list(json *records) {
        size_t n = json_object_array_length(records);
        printf("%-32s %-9s %8s %8s %-12s %s\n", "UNIT", "STATE", "MAIN PID", "RESTARTS", "RESULT", "SINCE");
        for (size_t i = 0; i < n; i++) {
                json *rec = json_object_array_get_idx(records, i);
                const char *state = get_str(rec, "state", "?");
                char when[64], pid[24];
                int64_t p = get_int(rec, "main_pid", 0);
                format_time(get_int(rec, "since", 0), TIME_LIST, when, sizeof when);
                if (p > 0)
                        snprintf(pid, sizeof pid, "%" PRId64, p);
                else
                        snprintf(pid, sizeof pid, "-");
                printf("%-32s %s%-9s%s %8s %8" PRId64 " %-12s %s\n", get_str(rec, "name", "?"), state_colour(state),
                       state, colour_off(), pid, get_int(rec, "restarts", 0), get_str(rec, "result", "?"), when);
        }
        printf("\n%zu unit%s listed.\n", n, n == 1 ? "" : "s");
}

void print_line(json *m, bool as_json) {
        if (as_json) {
                json_object_object_del(m, "version");
                json_object_object_del(m, "type");
                print_json(m);
                return;
        }
        char when[32], pid[24] = "";
        int64_t p = get_int(m, "pid", 0);
        json *text;
        format_time(get_int(m, "time", 0), TIME_LOG, when, sizeof when);
        if (p > 0)
                snprintf(pid, sizeof pid, "[%" PRId64 "]", p);
        printf("%s %s%s: ", when, get_str(m, "unit", "?"), pid);
        if (json_object_object_get_ex(m, "text", &text)) {
                /* docs/control-protocol.md "Bytes that are not UTF-8": the original bytes */
                size_t n = (size_t) json_object_get_string_len(text);
                _cleanup_free_ char *raw = get_bool(m, "escaped") ? malloc(n + 1) : NULL;
                if (raw) {
                        memcpy(raw, json_object_get_string(text), n);
                        n = control_text_unescape(raw, n);
                }
                fwrite(raw ? raw : json_object_get_string(text), 1, n, stdout);
        }
        if (get_bool(m, "continues"))
                fputs(" [line continues]", stdout);
        putchar('\n');
        fflush(stdout);
}

