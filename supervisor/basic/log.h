/* SPDX-License-Identifier: MIT */
/*
 * Logging for tend and tendctl (STYLE.md: only programs log; libexit returns
 * errors). Messages name the unit and, for configuration, file:line.
 *
 * Where a message goes is decided once, at the first message (systemd's rule,
 * docs/logging.md "tend's own messages"):
 *  - the journal, when $JOURNAL_STREAM names tend's stderr (tend runs as a
 *    systemd service whose stderr is the journal): one native entry per
 *    message with PRIORITY=, SYSLOG_IDENTIFIER=, ERRNO=, CODE_FILE=,
 *    CODE_LINE=, CODE_FUNC=, and TEND_UNIT= + OBJECT_SYSTEMD_UNIT= when the
 *    message names a unit (it starts "NAME.service: " or "unit NAME.service: ",
 *    tend's convention); stderr is the fallback if the journal refuses;
 *  - stderr, "tend: LEVEL: text", preceded by a local timestamp
 *    "YYYY-MM-DDTHH:MM:SS.mmm+ZZZZ " when stderr is not a terminal (a file, a
 *    pipe: nobody else adds the time).
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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

/* The same, with the code location for the journal's CODE_FILE=, CODE_LINE=,
 * CODE_FUNC= (file and func: static strings, e.g. __FILE__, __func__). */
int log_internal_loc(int level, int error, const char *file, int line, const char *func, const char *fmt, ...)
        _printf_(6, 7);

/* Where messages go (see above). LOG_TARGET_AUTO (the default) decides at the
 * first message from $JOURNAL_STREAM and stderr; tests and tools may force one. */
enum log_target {
        LOG_TARGET_AUTO,
        LOG_TARGET_STDERR,      /* "tend: LEVEL: text" */
        LOG_TARGET_STDERR_TIME, /* the same after a timestamp */
        LOG_TARGET_JOURNAL,     /* native journal entries (stderr if refused) */
};
void log_set_target(enum log_target t);
/* The target in use (AUTO resolved: never LOG_TARGET_AUTO). */
enum log_target log_get_target(void);

/* True if journal_stream ("DEVICE:INODE", decimal, as systemd sets
 * $JOURNAL_STREAM) names the file fd refers to. False for NULL, malformed
 * text, or a bad fd. */
bool log_stream_is_journal(int fd, const char *journal_stream);

/* The unit a message is about, by tend's convention: msg starts with
 * "NAME.service: " or "unit NAME.service: " (NAME of unit-name characters).
 * Copies NAME.service NUL-terminated into buf (size bytes); returns its
 * length, or 0 if msg names no unit or the name does not fit. Pure. */
size_t log_message_unit(const char *msg, char *buf, size_t size);

/* Local time t (CLOCK_REALTIME µs) as "YYYY-MM-DDTHH:MM:SS.mmm+ZZZZ" into buf
 * (at least LOG_TIME_MAX bytes). Returns buf. */
#define LOG_TIME_MAX 96
char *log_format_time(uint64_t t, char *buf);

#define log_full_errno(level, error, ...) \
        log_internal_loc((level), (error), __FILE__, __LINE__, __func__, __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_ERR, (error), __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, (error), __VA_ARGS__)
#define log_debug_errno(error, ...) log_full_errno(LOG_DEBUG, (error), __VA_ARGS__)
#define log_error(...) ((void) log_full_errno(LOG_ERR, 0, __VA_ARGS__))
#define log_warning(...) ((void) log_full_errno(LOG_WARNING, 0, __VA_ARGS__))
#define log_notice(...) ((void) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__))
#define log_info(...) ((void) log_full_errno(LOG_INFO, 0, __VA_ARGS__))
#define log_debug(...) ((void) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__))
