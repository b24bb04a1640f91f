/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* CODE_FILE= and friends are the caller's, not this file's: we add them. */
#define SD_JOURNAL_SUPPRESS_LOCATION 1
/* tend-static (TEND_NO_JOURNAL) links no libsystemd: its messages go to stderr. */
#ifndef TEND_NO_JOURNAL
#include <systemd/sd-journal.h>
#endif

#include "log.h"
#include "unit-name-char.h"

static _Atomic int max_level = LOG_WARNING;
static const char *_Atomic program = "tend";
static _Atomic(log_sink_t) sink;
static void *_Atomic sink_userdata;
static _Atomic int target = LOG_TARGET_AUTO;
static pthread_once_t target_once = PTHREAD_ONCE_INIT;

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

/* Parses a decimal number ending at `end`; false if anything else is there. */
static bool parse_ull(const char *s, char end, unsigned long long *ret, const char **ret_next) {
        char *e;
        if (*s < '0' || *s > '9')
                return false;
        errno = 0;
        unsigned long long v = strtoull(s, &e, 10);
        if (errno != 0 || *e != end)
                return false;
        *ret = v;
        *ret_next = e;
        return true;
}

bool log_stream_is_journal(int fd, const char *journal_stream) {
        unsigned long long dev, ino;
        const char *p;
        struct stat st;

        if (!journal_stream || fd < 0)
                return false;
        int saved = errno;
        bool ok = parse_ull(journal_stream, ':', &dev, &p) && parse_ull(p + 1, '\0', &ino, &p) &&
                  fstat(fd, &st) >= 0 && (unsigned long long) st.st_dev == dev &&
                  (unsigned long long) st.st_ino == ino;
        errno = saved;
        return ok;
}

/* systemd's rule: the journal when $JOURNAL_STREAM names our stderr; else
 * stderr, timestamped unless it is a terminal (whoever reads a file or a
 * pipe later needs the time; a terminal's reader sees it now). */
static void target_detect(void) {
        int saved = errno;
        if (atomic_load(&target) == LOG_TARGET_AUTO) {
                enum log_target t = log_stream_is_journal(STDERR_FILENO, getenv("JOURNAL_STREAM")) ? LOG_TARGET_JOURNAL
                                    : isatty(STDERR_FILENO)                                      ? LOG_TARGET_STDERR
                                                                                                 : LOG_TARGET_STDERR_TIME;
                int expected = LOG_TARGET_AUTO;
                atomic_compare_exchange_strong(&target, &expected, (int) t);
        }
        errno = saved;
}

void log_set_target(enum log_target t) {
        atomic_store(&target, (int) t);
}

enum log_target log_get_target(void) {
        if (atomic_load(&target) == LOG_TARGET_AUTO)
                (void) pthread_once(&target_once, target_detect);
        return (enum log_target) atomic_load(&target);
}

size_t log_message_unit(const char *msg, char *buf, size_t size) {
        static const char suffix[] = ".service";
        const char *p = msg;

        if (!msg || !buf || size == 0)
                return 0;
        if (strncmp(p, "unit ", 5) == 0)
                p += 5;
        /* The name ends at the first ':' after ".service" (a name may hold ':'). */
        size_t n = 0, k = sizeof suffix - 1;
        for (; p[n] && (unit_name_char(p[n]) || p[n] == '@'); n++)
                if (p[n] == ':' && n > k && memcmp(p + n - k, suffix, k) == 0)
                        break;
        if (p[n] != ':' || n <= k || n >= size || memcmp(p + n - k, suffix, k) != 0)
                return 0;
        memcpy(buf, p, n);
        buf[n] = '\0';
        return n;
}

char *log_format_time(uint64_t t, char *buf) {
        time_t sec = (time_t) (t / 1000000);
        struct tm tm;
        char date[64], zone[16];

        if (!localtime_r(&sec, &tm))
                memset(&tm, 0, sizeof tm);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
        strftime(zone, sizeof zone, "%z", &tm);
        snprintf(buf, LOG_TIME_MAX, "%s.%03u%s", date, (unsigned) (t / 1000 % 1000), zone);
        return buf;
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

static void write_stderr(int level, const char *msg, bool with_time) {
        char line[2300], ts[LOG_TIME_MAX] = "";
        struct timespec now;

        if (with_time && clock_gettime(CLOCK_REALTIME, &now) >= 0) {
                log_format_time((uint64_t) now.tv_sec * 1000000 + (uint64_t) now.tv_nsec / 1000, ts);
                strcat(ts, " ");
        }
        int n = snprintf(line, sizeof line, "%s%s: %s: %s\n", ts, atomic_load(&program), level_name(level), msg);
        if (n > (int) sizeof line - 1)
                n = (int) sizeof line - 1, line[n - 1] = '\n';
        /* One write per message so concurrent lines never interleave. */
        (void) !write(STDERR_FILENO, line, (size_t) n);
}

/* CODE_FILE= relative to the source tree: from "supervisor/" or "libexit/" on. */
static const char *source_path(const char *file) {
        const char *p = strstr(file, "supervisor/");
        if (!p)
                p = strstr(file, "libexit/");
        return p ?: file;
}

struct log_loc {
        const char *file, *func;
        int line;
};

#define FIELD(iov, n, buf, ...) \
        (iov)[(n)++] = (struct iovec) { (buf), (size_t) snprintf((buf), sizeof(buf), __VA_ARGS__) }

/* One native journal entry; false if the journal refused it. */
static bool write_journal(int level, int error, const char *msg, const struct log_loc *loc) {
        char prio[16], ident[64], errno_f[24], file[256], line[24], func[128], unit[300], object[320];
        char name[256];
        struct iovec iov[10];
        size_t n = 0;

        iov[n++] = (struct iovec) { (char *) "MESSAGE=", 8 }; /* joined below */
        FIELD(iov, n, prio, "PRIORITY=%d", level & LOG_PRIMASK);
        FIELD(iov, n, ident, "SYSLOG_IDENTIFIER=%s", atomic_load(&program));
        if (error != 0)
                FIELD(iov, n, errno_f, "ERRNO=%d", log_errno_value(error));
        if (loc && loc->file) {
                FIELD(iov, n, file, "CODE_FILE=%s", source_path(loc->file));
                FIELD(iov, n, line, "CODE_LINE=%d", loc->line);
                FIELD(iov, n, func, "CODE_FUNC=%s", loc->func);
        }
        if (log_message_unit(msg, name, sizeof name) > 0) {
                FIELD(iov, n, unit, "TEND_UNIT=%s", name);
                /* journalctl -u NAME trusts this field from root senders (_UID=0). */
                FIELD(iov, n, object, "OBJECT_SYSTEMD_UNIT=%s", name);
        }
        char message[2100];
        iov[0] = (struct iovec) { message, (size_t) snprintf(message, sizeof message, "MESSAGE=%s", msg) };
        if (iov[0].iov_len >= sizeof message)
                iov[0].iov_len = sizeof message - 1;
#ifdef TEND_NO_JOURNAL
        return false;
#else
        return sd_journal_sendv(iov, (int) n) >= 0;
#endif
}

_printf_(4, 0) static int log_emit(int level, int error, const struct log_loc *loc, const char *fmt, va_list ap) {
        int ret = -log_errno_value(error);
        if (level > atomic_load(&max_level))
                return ret;

        int saved_errno = errno;
        if (error != 0)
                errno = -ret;
        char msg[2048];
        vsnprintf(msg, sizeof msg, fmt, ap);

        log_sink_t s = atomic_load(&sink);
        if (s)
                s(level, msg, atomic_load(&sink_userdata));
        else {
                enum log_target t = log_get_target();
                if (t != LOG_TARGET_JOURNAL || !write_journal(level, error, msg, loc))
                        write_stderr(level, msg, t == LOG_TARGET_STDERR_TIME);
        }
        errno = saved_errno;
        return ret;
}

int log_internal(int level, int error, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = log_emit(level, error, NULL, fmt, ap);
        va_end(ap);
        return r;
}

int log_internal_loc(int level, int error, const char *file, int line, const char *func, const char *fmt, ...) {
        struct log_loc loc = { .file = file, .func = func, .line = line };
        va_list ap;
        va_start(ap, fmt);
        int r = log_emit(level, error, &loc, fmt, ap);
        va_end(ap);
        return r;
}
