/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static _Atomic int max_level = LOG_WARNING;
static const char *_Atomic program = "tend";
static _Atomic(log_sink_t) sink;
static void *_Atomic sink_userdata;

void log_set_max_level(int level) {
        atomic_store(&max_level, level);
}

int log_get_max_level(void) {
        return atomic_load(&max_level);
}

void log_set_program(const char *name) {
        atomic_store(&program, name);
}

void log_set_sink(log_sink_t s, void *userdata) {
        atomic_store(&sink_userdata, userdata);
        atomic_store(&sink, s);
}

static const char *level_name(int level) {
        switch (level) {
        case LOG_EMERG: case LOG_ALERT: case LOG_CRIT: case LOG_ERR:
                return "error";
        case LOG_WARNING:
                return "warning";
        case LOG_NOTICE:
                return "notice";
        case LOG_INFO:
                return "info";
        default:
                return "debug";
        }
}

int log_internal(int level, int error, const char *fmt, ...) {
        int ret = -log_errno_value(error);
        if (level > atomic_load(&max_level))
                return ret;

        int saved_errno = errno;
        if (error != 0)
                errno = -ret;
        char msg[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);

        log_sink_t s = atomic_load(&sink);
        if (s) {
                s(level, msg, atomic_load(&sink_userdata));
        } else {
                char line[2200];
                int n = snprintf(line, sizeof line, "%s: %s: %s\n", atomic_load(&program), level_name(level), msg);
                if (n > (int) sizeof line - 1)
                        n = (int) sizeof line - 1, line[n - 1] = '\n';
                /* One write per message so concurrent lines never interleave. */
                (void) !write(STDERR_FILENO, line, (size_t) n);
        }
        errno = saved_errno;
        return ret;
}
