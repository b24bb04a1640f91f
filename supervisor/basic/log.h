/* SPDX-License-Identifier: MIT */
/*
 * Logging for tend and tendctl (STYLE.md: only programs log; libexit returns
 * errors). One line per message on stderr, "tend: LEVEL: text". Messages name
 * the unit and, for configuration, file:line.
 *
 * log_*_errno() return -abs(error), so a caller logs and returns in one
 * statement: `return log_error_errno(r, "unit %s: ...: %m", name);`. They set
 * errno from error (either sign) while the message is formatted, so `%m`
 * names the error, as systemd's do; errno is as it was after the call.
 * An error that no system call returned (the caller decided it) is written
 * SYNTHETIC_ERRNO(E): returned as -E like any other, and marked so a reader
 * of the call knows `%m` there names a choice, not a failure.
 *
 * Thread-safety: every function may be called from any thread; each message
 * reaches the sink in one write.
 */
#pragma once

#include <syslog.h>

#include "macro.h"

/* Messages above this level (syslog numbering: LOG_ERR=3 … LOG_DEBUG=7) are
 * dropped. Default LOG_WARNING. */
void log_set_max_level(int level);
int log_get_max_level(void);

/* Prefix of every line ("tend", "tendctl"); the string must outlive logging. */
void log_set_program(const char *name);

/*
 * Test seam: route every message to sink instead of stderr (NULL restores
 * stderr). The sink runs in the logging thread and must be thread-safe if
 * several threads log; msg is valid only during the call.
 */
typedef void (*log_sink_t)(int level, const char *msg, void *userdata);
void log_set_sink(log_sink_t sink, void *userdata);

/* Marks an errno the caller chose (see above); log_*_errno() strip the mark. */
#define SYNTHETIC_ERRNO(num) (LOG_SYNTHETIC_FLAG | (num))
#define LOG_SYNTHETIC_FLAG (1 << 30)

/* The errno that error (either sign, SYNTHETIC_ERRNO() or not) names: > 0. */
static inline int log_errno_value(int error) {
        int e = error < 0 ? -error : error;
        return e & ~LOG_SYNTHETIC_FLAG;
}

/* Formats and emits one message if level passes, with errno set to
 * log_errno_value(error) for `%m` (when error is not 0); returns
 * -log_errno_value(error) (0 if error is 0). */
int log_internal(int level, int error, const char *fmt, ...) _printf_(3, 4);

#define log_full_errno(level, error, ...) log_internal((level), (error), __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_ERR, (error), __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, (error), __VA_ARGS__)
#define log_debug_errno(error, ...) log_full_errno(LOG_DEBUG, (error), __VA_ARGS__)
#define log_error(...) ((void) log_full_errno(LOG_ERR, 0, __VA_ARGS__))
#define log_warning(...) ((void) log_full_errno(LOG_WARNING, 0, __VA_ARGS__))
#define log_notice(...) ((void) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__))
#define log_info(...) ((void) log_full_errno(LOG_INFO, 0, __VA_ARGS__))
#define log_debug(...) ((void) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__))
