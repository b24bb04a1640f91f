/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser (unit-file.h, SPEC §3). One pass over the text: lines
 * (comments, continuations) → sections → one table of keys, each with its
 * parser; then the whole-unit checks systemd's service_verify() makes. Every
 * value is validated at load, so a unit that loads can be started.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "hash-util.h"
#include "log.h"
#include "signal-util.h"
#include "timespan.h"
#include "unit-exec.h"
#include "unit-file.h"

#define SWAP_PTR(a, b) do { char *_t = (a); (a) = (b); (b) = _t; } while (0)

#define WHITESPACE " \t\n\r"
#define QUOTE_MAX 160      /* bytes of a user string shown in a message */
#define MESSAGES_MAX 50    /* logged per file: a garbage file cannot flood the log */

enum section {
        SECTION_NONE,    /* before the first header */
        SECTION_UNIT,
        SECTION_SERVICE,
        SECTION_IGNORED, /* [Install], [X-…]: silently ignored */
        SECTION_UNKNOWN, /* warned once at its header, its keys ignored */
};

/* Lists that accumulate while parsing; moved into the unit at the end. */
enum {
        LIST_ENVIRONMENT,
        LIST_REQUIRES,
        LIST_WANTS,
        LIST_BINDS_TO,
        LIST_AFTER,
        LIST_BEFORE,
        LIST_SUPPLEMENTARY_GROUPS,
        _LIST_MAX,
};

struct strlist {
        char **v;
        size_t n, cap;
};

struct parse_ctx {
        const char *origin; /* the file, for messages */
        unsigned line;      /* line of the assignment being parsed; 0: the whole file */
        struct unit_file *u;
        const char *name;   /* specifiers: "foo@bar.service" */
        char *prefix;       /* "foo" */
        const char *instance; /* "bar", or NULL */
        int error;          /* the first error, a negative errno */
        char *message;      /* its message */
        unsigned n_messages;
        bool type_set, timeout_start_set;
        unsigned exec_start_extra_line, restart_line, type_line;
        unsigned ambient_line, syscall_filter_line;
        struct strlist lists[_LIST_MAX];
        struct unit_sandbox_keys sb; /* the sandboxing keys while parsing; moved out of line at the end */
        bool sb_set;                 /* a sandboxing key was assigned */
        struct unit_exit_statuses xs; /* the same for the exit status sets */
        bool xs_set;
};

struct key_def {
        enum section section;
        const char *key;
        int (*parse)(struct parse_ctx *c, const struct key_def *k, const char *value);
        size_t offset, size; /* the field in struct unit_file (KEY_SB: unit_sandbox_keys, KEY_XS: unit_exit_statuses) */
        const void *data;    /* the parser's own: an enum table, a list index */
};

static const struct unit_file unit_defaults = {
        .start_limit_interval = 10 * USEC_PER_SEC,
        .start_limit_burst = 5,
        .type = UNIT_TYPE_SIMPLE,
        .restart = UNIT_RESTART_NO,
        .restart_sec = 100 * USEC_PER_MSEC,
        .restart_max_delay = USEC_INFINITY,
        .timeout_start = 90 * USEC_PER_SEC,
        .timeout_stop = 10 * USEC_PER_SEC, /* SPEC §3; systemd's is 90s */
        .watchdog_signal = SIGABRT,
        .kill_mode = UNIT_KILL_CONTROL_GROUP,
        .kill_signal = SIGTERM,
        .final_kill_signal = SIGKILL,
        .send_sigkill = true,
        .ignore_sigpipe = true,
};

const struct unit_sandbox_keys unit_sandbox_defaults = {
        .umask = 0022,
        .capability_bounding_set = UINT64_MAX, /* unchanged */
};

const struct unit_exit_statuses unit_exit_statuses_none = {};

/* key_def.offset of a field in struct unit_sandbox_keys, in struct unit_exit_statuses. */
#define KEY_SB ((size_t) 1 << 30)
#define KEY_XS ((size_t) 1 << 29)
#define KEY_OFFSET(k) ((k)->offset & ~(KEY_SB | KEY_XS))

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

#define QUOTE_BUF (QUOTE_MAX * 4 + 8)

/* s in double quotes for a message: control bytes as \xHH, cut after QUOTE_MAX bytes. */
static const char *quote(char buf[static QUOTE_BUF], const char *s) {
        size_t o = 0;
        buf[o++] = '"';
        size_t end = strnlen(s, QUOTE_MAX + 1), i = 0;
        if (end > QUOTE_MAX) /* cut at a character boundary, never inside a UTF-8 sequence */
                for (end = QUOTE_MAX; end > 0 && ((unsigned char) s[end] & 0xc0) == 0x80;)
                        end--;
        for (; i < end; i++) {
                unsigned char ch = (unsigned char) s[i];
                if (ch < 0x20 || ch == 0x7f)
                        o += (size_t) snprintf(buf + o, 5, "\\x%02x", ch);
                else
                        buf[o++] = (char) ch;
        }
        if (s[i])
                o += (size_t) snprintf(buf + o, 5, "...");
        buf[o++] = '"';
        buf[o] = '\0';
        return buf;
}

/*
 * Logs "FILE:LINE: text" at level (the first MESSAGES_MAX of a file); an error
 * (level ≤ LOG_ERR) also becomes the unit's result if it is the first.
 * Returns -abs(error).
 */
_printf_(4, 5) static int report(struct parse_ctx *c, int level, int error, const char *fmt, ...) {
        char text[1024], msg[1400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        if (c->line)
                snprintf(msg, sizeof msg, "%s:%u: %s", c->origin, c->line, text);
        else
                snprintf(msg, sizeof msg, "%s: %s", c->origin, text);
        if (c->n_messages < MESSAGES_MAX)
                log_internal(level, 0, "%s", msg);
        else if (c->n_messages == MESSAGES_MAX)
                log_warning("%s: more than %d messages, the rest are not shown", c->origin, MESSAGES_MAX);
        c->n_messages++;
        if (level <= LOG_ERR && c->error == 0) {
                c->error = error ? -abs(error) : -EINVAL;
                c->message = strdup(msg); /* NULL on ENOMEM: the error itself stays */
        }
        return -abs(error);
}

#define syntax_error(c, ...) report((c), LOG_ERR, EINVAL, __VA_ARGS__)
#define invalid_value(c, k, v) ({                                               \
        char _q[QUOTE_BUF];                                                     \
        report((c), LOG_ERR, EINVAL, "%s=: invalid value %s", (k)->key, quote(_q, (v))); \
})

/* ------------------------------------------------------------------------ */
/* Names and specifiers                                                      */
/* ------------------------------------------------------------------------ */

static bool unit_name_char(char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || strchr(":-_.\\", ch);
}

static bool unit_name_chars(const char *s, size_t n, bool at_ok) {
        for (size_t i = 0; i < n; i++)
                if (!s[i] || !(unit_name_char(s[i]) || (at_ok && s[i] == '@')))
                        return false;
        return true;
}

bool unit_name_is_valid(const char *name, unsigned flags) {
        static const char suffix[] = ".service";
        size_t n = name ? strlen(name) : 0, ns = sizeof suffix - 1;
        if (n <= ns || n > UNIT_NAME_MAX || strcmp(name + n - ns, suffix) != 0)
                return false;
        size_t body = n - ns;
        const char *at = memchr(name, '@', body);
        if (!at)
                return (flags & UNIT_NAME_PLAIN) && unit_name_chars(name, body, false);
        size_t prefix = (size_t) (at - name), inst = body - prefix - 1;
        if (prefix == 0 || !unit_name_chars(name, prefix, false))
                return false;
        if (inst == 0)
                return flags & UNIT_NAME_TEMPLATE;
        return (flags & UNIT_NAME_INSTANCE) && unit_name_chars(at + 1, inst, true);
}

static int unhex_digit(char ch) {
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        if (ch >= 'a' && ch <= 'f')
                return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F')
                return ch - 'A' + 10;
        return -1;
}

/* systemd's unit-name unescaping: "-" is "/", "\xHH" a byte. */
static int unescape_name(struct unit_buf *b, const char *s) {
        int r = 0;
        for (; *s && r >= 0; s++) {
                int hi, lo;
                if (*s == '-')
                        r = unit_buf_putc(b, '/');
                else if (s[0] == '\\' && s[1] == 'x' && (hi = unhex_digit(s[2])) >= 0 && (lo = unhex_digit(s[3])) >= 0 &&
                         (hi | lo)) {
                        r = unit_buf_putc(b, (char) (hi * 16 + lo));
                        s += 3;
                } else
                        r = unit_buf_putc(b, *s);
        }
        return r;
}

/* Specifiers systemd has and tend does not resolve yet. */
#define SYSTEMD_SPECIFIERS "aAbBCdEgGhHlLmMoqsStTuUvVwWyY"

static int put_specifier(struct parse_ctx *c, struct unit_buf *b, char spec) {
        const char *inst = c->instance ? c->instance : "";
        const char *dash;
        switch (spec) {
        case '%':
                return unit_buf_putc(b, '%');
        case 'n':
                return unit_buf_put(b, c->name, strlen(c->name));
        case 'N':
                return unit_buf_put(b, c->name, strlen(c->name) - strlen(".service"));
        case 'p':
                return unit_buf_put(b, c->prefix, strlen(c->prefix));
        case 'P':
                return unescape_name(b, c->prefix);
        case 'i':
                return unit_buf_put(b, inst, strlen(inst));
        case 'I':
                return unescape_name(b, inst);
        case 'f': {
                const char *s = c->instance ? c->instance : c->prefix;
                if (streq(s, "-"))
                        return unit_buf_putc(b, '/');
                int r = s[0] == '/' ? 0 : unit_buf_putc(b, '/');
                return r < 0 ? r : unescape_name(b, s);
        }
        case 'j':
        case 'J':
                dash = strrchr(c->prefix, '-');
                dash = dash ? dash + 1 : c->prefix;
                return spec == 'j' ? unit_buf_put(b, dash, strlen(dash)) : unescape_name(b, dash);
        default:
                return -EBADSLT;
        }
}

/* Resolves %n %N %p %P %i %I %f %j %J %% in a value of key k into *ret. */
static int resolve_specifiers(struct parse_ctx *c, const struct key_def *k, const char *in, char **ret) {
        struct unit_buf b = {};
        int r = 0;
        for (const char *p = in; *p && r >= 0; p++) {
                if (*p != '%' || !p[1]) { /* a stray % at the end stays, as in systemd */
                        r = unit_buf_putc(&b, *p);
                        continue;
                }
                p++;
                r = put_specifier(c, &b, *p);
                if (r == -EBADSLT) {
                        char q[QUOTE_BUF];
                        if (strchr(SYSTEMD_SPECIFIERS, *p))
                                r = report(c, LOG_ERR, EOPNOTSUPP, "%s=: specifier %%%c is not supported yet in %s",
                                           k->key, *p, quote(q, in));
                        else
                                r = syntax_error(c, "%s=: unknown specifier %%%c in %s", k->key, *p, quote(q, in));
                }
        }
        char *s = r >= 0 ? unit_buf_take(&b) : NULL;
        if (!s) {
                free(b.s);
                return r < 0 ? r : -ENOMEM;
        }
        *ret = s;
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Value parsers                                                             */
/* ------------------------------------------------------------------------ */

/* The sandboxing keys being parsed, marked as assigned. */
static struct unit_sandbox_keys *sandbox_keys(struct parse_ctx *c) {
        c->sb_set = true;
        return &c->sb;
}

static void *key_field(struct parse_ctx *c, const struct key_def *k) {
        if (k->offset & KEY_SB)
                return (char *) sandbox_keys(c) + KEY_OFFSET(k);
        if (k->offset & KEY_XS) {
                c->xs_set = true;
                return (char *) &c->xs + KEY_OFFSET(k);
        }
        return (char *) c->u + k->offset;
}

static const void *key_default(const struct key_def *k) {
        if (k->offset & KEY_SB)
                return (const char *) &unit_sandbox_defaults + KEY_OFFSET(k);
        if (k->offset & KEY_XS)
                return (const char *) &unit_exit_statuses_none + KEY_OFFSET(k);
        return (const char *) &unit_defaults + k->offset;
}

#define FIELD(c, k, type) ((type *) key_field((c), (k)))

/* An empty assignment resets a scalar to its default. */
static void reset_default(struct parse_ctx *c, const struct key_def *k) {
        memcpy(key_field(c, k), key_default(k), k->size);
}

static int parse_string(struct parse_ctx *c, const struct key_def *k, const char *value) {
        char **field = FIELD(c, k, char *);
        char *s = NULL;
        if (*value) {
                int r = resolve_specifiers(c, k, value, &s);
                if (r < 0)
                        return r;
        }
        free(*field);
        *field = s;
        return 0;
}

static int parse_sec(struct parse_ctx *c, const struct key_def *k, const char *value, usec_t *ret) {
        char q[QUOTE_BUF];
        if (parse_timespan(value, USEC_PER_SEC, ret) < 0)
                return syntax_error(c, "%s=: invalid time span %s", k->key, quote(q, value));
        return 0;
}

static int parse_timespan_key(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value) {
                reset_default(c, k);
                return 0;
        }
        return parse_sec(c, k, value, FIELD(c, k, usec_t));
}

/* TimeoutStartSec=, TimeoutStopSec=, TimeoutSec= (both): 0 means no timeout, as in systemd. */
enum { TIMEOUT_START = 1, TIMEOUT_STOP = 2 };
static int parse_timeout(struct parse_ctx *c, const struct key_def *k, const char *value) {
        uintptr_t which = (uintptr_t) k->data;
        usec_t v = 0;
        if (*value) {
                int r = parse_sec(c, k, value, &v);
                if (r < 0)
                        return r;
                if (v == 0)
                        v = USEC_INFINITY;
        }
        if (which & TIMEOUT_START) {
                c->u->timeout_start = *value ? v : unit_defaults.timeout_start;
                c->timeout_start_set = *value;
        }
        if (which & TIMEOUT_STOP)
                c->u->timeout_stop = *value ? v : unit_defaults.timeout_stop;
        return 0;
}

static int parse_unsigned(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value) {
                reset_default(c, k);
                return 0;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        if (value[0] < '0' || value[0] > '9' || *end || errno || v > UINT_MAX)
                return invalid_value(c, k, value);
        *FIELD(c, k, unsigned) = (unsigned) v;
        return 0;
}

static int parse_bool(struct parse_ctx *c, const struct key_def *k, const char *value) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off" };
        if (!*value) {
                reset_default(c, k);
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(value, yes[i]) == 0 || strcasecmp(value, no[i]) == 0) {
                        *FIELD(c, k, bool) = strcasecmp(value, yes[i]) == 0;
                        return 0;
                }
        char q[QUOTE_BUF];
        return syntax_error(c, "%s=: invalid boolean %s", k->key, quote(q, value));
}

static int parse_signal(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value) {
                reset_default(c, k);
                return 0;
        }
        int sig = signal_from_string(value);
        char q[QUOTE_BUF];
        if (sig < 0)
                return syntax_error(c, "%s=: invalid signal %s", k->key, quote(q, value));
        *FIELD(c, k, int) = sig;
        return 0;
}

/* An enum's names in value order; systemd values tend refuses ("KEY=VALUE is not supported"). */
struct enum_table {
        const char *const *names;
        size_t n;
        const char *const *unsupported; /* NULL-terminated */
};

static int parse_enum(struct parse_ctx *c, const struct key_def *k, const char *value) {
        const struct enum_table *t = k->data;
        if (!*value) {
                reset_default(c, k);
                if (streq(k->key, "Type"))
                        c->type_set = false;
                return 0;
        }
        for (size_t i = 0; i < t->n; i++)
                if (t->names[i] && streq(value, t->names[i])) {
                        *FIELD(c, k, int) = (int) i;
                        if (streq(k->key, "Type"))
                                c->type_set = true, c->type_line = c->line;
                        if (streq(k->key, "Restart"))
                                c->restart_line = c->line;
                        return 0;
                }
        for (const char *const *s = t->unsupported; s && *s; s++)
                if (streq(value, *s))
                        return report(c, LOG_ERR, EOPNOTSUPP, "%s=%s is not supported", k->key, value);
        return invalid_value(c, k, value);
}

static const char *const type_names[] = { "simple", "exec", "notify", "oneshot" };
static const char *const type_unsupported[] = { "forking", "dbus", "idle", "notify-reload", NULL };
static const struct enum_table type_table = { type_names, ELEMENTSOF(type_names), type_unsupported };

static const char *const restart_names[] = { "no", "always", "on-success", "on-failure",
                                             "on-abnormal", "on-abort", "on-watchdog" };
static const struct enum_table restart_table = { restart_names, ELEMENTSOF(restart_names), NULL };

static const char *const action_names[] = { "none", "exit", "exit-force" };
static const char *const action_unsupported[] = {
        "reboot", "reboot-force", "reboot-immediate", "poweroff", "poweroff-force", "poweroff-immediate",
        "halt", "halt-force", "halt-immediate", "kexec", "kexec-force", "soft-reboot", "soft-reboot-force", NULL,
};
static const struct enum_table action_table = { action_names, ELEMENTSOF(action_names), action_unsupported };

static const char *const kill_mode_names[] = { "control-group", "mixed", "process" };
static const char *const kill_mode_unsupported[] = { "none", NULL };
static const struct enum_table kill_mode_table = { kill_mode_names, ELEMENTSOF(kill_mode_names), kill_mode_unsupported };

static const char *const notify_access_names[] = { NULL, "none", "main", "exec", "all" };
static const struct enum_table notify_access_table = { notify_access_names, ELEMENTSOF(notify_access_names), NULL };

/* --- lists ---------------------------------------------------------------- */

static int strlist_push(struct strlist *l, char *s) {
        if (l->n + 2 > l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 8;
                char **v = realloc(l->v, cap * sizeof *v);
                if (!v) {
                        free(s);
                        return -ENOMEM;
                }
                l->v = v;
                l->cap = cap;
        }
        l->v[l->n++] = s;
        l->v[l->n] = NULL;
        return 0;
}

static void strlist_clear(struct strlist *l) {
        unit_strv_free(l->v);
        *l = (struct strlist) {};
}

/* Extracts the next word of an assignment, reporting bad quoting; 1, 0 at the end, or an error. */
static int next_word(struct parse_ctx *c, const struct key_def *k, const char **p, const char *value, char **ret,
                     bool *bad_escape) {
        int r = unit_extract_word(p, EXTRACT_UNQUOTE | EXTRACT_CUNESCAPE, ret, bad_escape);
        char q[QUOTE_BUF];
        if (r == -EINVAL)
                return syntax_error(c, "%s=: unbalanced quoting in %s", k->key, quote(q, value));
        return r;
}

static void warn_bad_escape(struct parse_ctx *c, const struct key_def *k, const char *value, bool bad) {
        char q[QUOTE_BUF];
        if (bad)
                report(c, LOG_WARNING, 0, "%s=: unknown escape sequence kept as written in %s", k->key, quote(q, value));
}

static int parse_environment(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct strlist *l = &c->lists[(uintptr_t) k->data];
        if (!*value) {
                strlist_clear(l);
                return 0;
        }
        bool bad = false;
        int r;
        for (const char *p = value;;) {
                _cleanup_free_ char *w = NULL;
                char *a = NULL, q[QUOTE_BUF];
                r = next_word(c, k, &p, value, &w, &bad);
                if (r <= 0)
                        break;
                r = resolve_specifiers(c, k, w, &a);
                if (r < 0)
                        break;
                if (!unit_env_assignment_is_valid(a)) {
                        r = syntax_error(c, "%s=: invalid environment assignment %s", k->key, quote(q, a));
                        free(a);
                        break;
                }
                r = strlist_push(l, a);
                if (r < 0)
                        break;
        }
        warn_bad_escape(c, k, value, bad);
        return r;
}

/* Whether name is a valid name of a unit type other than service (systemd's
 * types): a dependency on it is ignored, not an error. */
static bool other_unit_type(const char *name) {
        static const char *const types[] = { ".target", ".socket", ".mount", ".automount", ".swap", ".path",
                                             ".timer", ".device", ".slice", ".scope" };
        size_t n = strlen(name);
        for (size_t i = 0; i < ELEMENTSOF(types); i++) {
                size_t t = strlen(types[i]);
                if (n > t && n - t <= UNIT_NAME_MAX && streq(name + n - t, types[i]) && name[0] != '@' &&
                    unit_name_chars(name, n - t, true))
                        return true;
        }
        return false;
}

static int parse_unit_names(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct strlist *l = &c->lists[(uintptr_t) k->data];
        if (!*value) {
                strlist_clear(l);
                return 0;
        }
        int r;
        for (const char *p = value;;) {
                _cleanup_free_ char *w = NULL;
                char *n = NULL, q[QUOTE_BUF];
                r = next_word(c, k, &p, value, &w, NULL);
                if (r <= 0)
                        break;
                r = resolve_specifiers(c, k, w, &n);
                if (r < 0)
                        break;
                if (other_unit_type(n)) {
                        /* After=network.target and the like: tend has only
                         * services, so nothing could ever satisfy it. */
                        bool needed = (uintptr_t) k->data == LIST_REQUIRES || (uintptr_t) k->data == LIST_BINDS_TO;
                        report(c, needed ? LOG_WARNING : LOG_INFO, 0, "%s=%s ignored: tend runs services only",
                               k->key, quote(q, n));
                        free(n);
                        continue;
                }
                if (!unit_name_is_valid(n, UNIT_NAME_PLAIN | UNIT_NAME_INSTANCE)) {
                        r = syntax_error(c, "%s=: invalid unit name %s", k->key, quote(q, n));
                        free(n);
                        break;
                }
                if (streq(n, c->name)) {
                        /* A unit cannot need or wait for itself (an ordering
                         * cycle of one); systemd drops it too. */
                        report(c, LOG_WARNING, 0, "%s=%s names the unit itself, ignored", k->key, quote(q, n));
                        free(n);
                        continue;
                }
                r = strlist_push(l, n);
                if (r < 0)
                        break;
        }
        return r;
}

static int parse_environment_file(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_file *u = c->u;
        if (!*value) {
                for (size_t i = 0; i < u->n_environment_files; i++)
                        free(u->environment_files[i].path);
                free(u->environment_files);
                u->environment_files = NULL;
                u->n_environment_files = 0;
                return 0;
        }
        bool optional = value[0] == '-';
        char *path = NULL, q[QUOTE_BUF];
        int r = resolve_specifiers(c, k, value + optional, &path);
        if (r < 0)
                return r;
        if (path[0] != '/') {
                r = syntax_error(c, "%s=: not an absolute path: %s", k->key, quote(q, path));
                free(path);
                return r;
        }
        size_t n = u->n_environment_files;
        if ((n & (n - 1)) == 0) { /* grow at powers of two: amortised appends */
                struct unit_env_file *v = realloc(u->environment_files, (n ? 2 * n : 1) * sizeof *v);
                if (!v) {
                        free(path);
                        return -ENOMEM;
                }
                u->environment_files = v;
        }
        u->environment_files[u->n_environment_files++] = (struct unit_env_file) { path, optional };
        return 0;
}

static int parse_working_directory(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_file *u = c->u;
        bool missing_ok = value[0] == '-';
        const char *v = value + missing_ok;
        char *path = NULL, q[QUOTE_BUF];
        if (!*value) {
                free(u->working_directory);
                u->working_directory = NULL;
                u->working_directory_missing_ok = false;
                u->working_directory_home = false;
                return 0;
        }
        if (streq(v, "~")) { /* the home of User= (sandbox.h), resolved at each start */
                free(u->working_directory);
                u->working_directory = NULL;
                u->working_directory_missing_ok = missing_ok;
                u->working_directory_home = true;
                return 0;
        }
        int r = resolve_specifiers(c, k, v, &path);
        if (r < 0)
                return r;
        if (path[0] != '/') {
                r = syntax_error(c, "%s=: not an absolute path: %s", k->key, quote(q, path));
                free(path);
                return r;
        }
        free(u->working_directory);
        u->working_directory = path;
        u->working_directory_missing_ok = missing_ok;
        u->working_directory_home = false;
        return 0;
}

static int parse_output(struct parse_ctx *c, const struct key_def *k, const char *value) {
        static const char *const unsupported[] = { "tty", "kmsg", "journal+console", "kmsg+console", "syslog",
                                                   "syslog+console", "socket", "fd:", "truncate:" };
        struct unit_output *o = FIELD(c, k, struct unit_output);
        bool is_stderr = streq(k->key, "StandardError");
        struct unit_output n = { UNIT_OUTPUT_DEFAULT, NULL };
        const char *path = NULL;
        char q[QUOTE_BUF];
        if (!*value)
                ;
        else if (streq(value, "inherit"))
                n.kind = is_stderr ? UNIT_OUTPUT_DEFAULT : UNIT_OUTPUT_INHERIT;
        else if (streq(value, "null"))
                n.kind = UNIT_OUTPUT_NULL;
        else if (streq(value, "journal"))
                n.kind = UNIT_OUTPUT_JOURNAL;
        else if (strncmp(value, "file:", 5) == 0)
                n.kind = UNIT_OUTPUT_FILE, path = value + 5;
        else if (strncmp(value, "append:", 7) == 0)
                n.kind = UNIT_OUTPUT_APPEND, path = value + 7;
        else {
                for (size_t i = 0; i < ELEMENTSOF(unsupported); i++) {
                        size_t l = strlen(unsupported[i]);
                        bool prefix = unsupported[i][l - 1] == ':';
                        if (prefix ? strncmp(value, unsupported[i], l) == 0 : streq(value, unsupported[i]))
                                return report(c, LOG_ERR, EOPNOTSUPP, "%s=%s%s is not supported", k->key, unsupported[i],
                                              prefix ? "…" : "");
                }
                return invalid_value(c, k, value);
        }
        if (path) {
                int r = resolve_specifiers(c, k, path, &n.path);
                if (r < 0)
                        return r;
                if (n.path[0] != '/') {
                        r = syntax_error(c, "%s=: not an absolute path: %s", k->key, quote(q, n.path));
                        free(n.path);
                        return r;
                }
        }
        free(o->path);
        *o = n;
        return 0;
}

/* Exit codes by name (systemd's exit_status_from_string(): LSB and BSD names). */
static const struct {
        const char *name;
        int code;
} exit_names[] = {
        { "SUCCESS", 0 },         { "FAILURE", 1 },        { "INVALIDARGUMENT", 2 }, { "NOTIMPLEMENTED", 3 },
        { "NOPERMISSION", 4 },    { "NOTINSTALLED", 5 },   { "NOTCONFIGURED", 6 },   { "NOTRUNNING", 7 },
        { "USAGE", 64 },          { "DATAERR", 65 },       { "NOINPUT", 66 },        { "NOUSER", 67 },
        { "NOHOST", 68 },         { "UNAVAILABLE", 69 },   { "SOFTWARE", 70 },       { "OSERR", 71 },
        { "OSFILE", 72 },         { "CANTCREAT", 73 },     { "IOERR", 74 },          { "TEMPFAIL", 75 },
        { "PROTOCOL", 76 },       { "NOPERM", 77 },        { "CONFIG", 78 },
};

static int exit_code_from_string(const char *s) {
        if (s[0] >= '0' && s[0] <= '9') {
                char *end;
                errno = 0;
                unsigned long v = strtoul(s, &end, 10);
                return *end || errno || v > 255 ? -EINVAL : (int) v;
        }
        for (size_t i = 0; i < ELEMENTSOF(exit_names); i++)
                if (streq(s, exit_names[i].name))
                        return exit_names[i].code;
        return -EINVAL;
}

static int parse_exit_status(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_exit_status_set *set = FIELD(c, k, struct unit_exit_status_set);
        if (!*value) {
                *set = (struct unit_exit_status_set) {};
                return 0;
        }
        for (const char *p = value;;) {
                _cleanup_free_ char *w = NULL;
                char q[QUOTE_BUF];
                int r = unit_extract_word(&p, 0, &w, NULL);
                if (r <= 0)
                        return r;
                int code = exit_code_from_string(w);
                int sig = code < 0 && (w[0] < '0' || w[0] > '9') ? signal_from_string(w) : -EINVAL;
                if (code >= 0)
                        set->codes[code / 64] |= 1ULL << (code % 64);
                else if (sig > 0 && sig <= 64)
                        set->signals |= 1ULL << (sig - 1);
                else
                        return syntax_error(c, "%s=: invalid exit status or signal %s", k->key, quote(q, w));
        }
}

/* --- command lines ---------------------------------------------------------- */

static bool lone_token(const char *p, const char *token) {
        size_t n = strlen(token);
        return strncmp(p, token, n) == 0 && (!p[n] || strchr(WHITESPACE, p[n]));
}

static void command_done(struct unit_command *cmd) {
        free(cmd->path);
        free(cmd->argv); /* packed */
        *cmd = (struct unit_command) {};
}

static int command_list_append(struct unit_command_list *l, struct unit_command *cmd) {
        if ((l->n & (l->n - 1)) == 0) { /* grow at powers of two */
                struct unit_command *v = realloc(l->commands, (l->n ? 2 * l->n : 1) * sizeof *v);
                if (!v)
                        return -ENOMEM;
                l->commands = v;
        }
        l->commands[l->n++] = *cmd;
        *cmd = (struct unit_command) {};
        return 0;
}

/* The prefixes of the first word ('-', '@', ':'); '+', '!', '!!' are refused. */
static int command_prefixes(struct parse_ctx *c, const struct key_def *k, const char **f, unsigned *flags, bool *at) {
        for (;; (*f)++) {
                if (**f == '-' && !(*flags & UNIT_COMMAND_IGNORE_FAILURE))
                        *flags |= UNIT_COMMAND_IGNORE_FAILURE;
                else if (**f == '@' && !*at)
                        *at = true;
                else if (**f == ':' && !(*flags & UNIT_COMMAND_NO_ENV_EXPAND))
                        *flags |= UNIT_COMMAND_NO_ENV_EXPAND;
                else if (**f == '+' || **f == '!')
                        return report(c, LOG_ERR, EOPNOTSUPP, "%s=: the \"%s\" prefix is not supported yet", k->key,
                                      **f == '+' ? "+" : (*f)[1] == '!' ? "!!" : "!");
                else
                        return 0;
        }
}

static int check_executable(struct parse_ctx *c, const struct key_def *k, const char *path) {
        char q[QUOTE_BUF];
        if (!*path)
                return syntax_error(c, "%s=: empty executable path", k->key);
        if (path[0] == '$')
                return syntax_error(c, "%s=: the executable may not be a variable: %s", k->key, quote(q, path));
        for (const char *s = path; *s; s++)
                if ((unsigned char) *s < 0x20 || *s == 0x7f || strchr("\"'\\", *s))
                        return syntax_error(c, "%s=: executable path contains special characters: %s", k->key,
                                            quote(q, path));
        size_t n = strlen(path);
        if (path[n - 1] == '/')
                return syntax_error(c, "%s=: executable path is a directory: %s", k->key, quote(q, path));
        bool ok = path[0] == '/' ? n < PATH_MAX : n <= NAME_MAX && !strchr(path, '/') && !streq(path, ".") && !streq(path, "..");
        if (!ok)
                return syntax_error(c, "%s=: neither an absolute path nor a file name: %s", k->key, quote(q, path));
        return 0;
}

/*
 * One command line from *p up to a lone ';' (systemd.service(5) "COMMAND
 * LINES"); *more says a ';' ended it. Quotes, escapes and specifiers are
 * resolved; $VAR is checked and kept for start.
 */
static int parse_command(struct parse_ctx *c, const struct key_def *k, const char **p, const char *value,
                         struct unit_command *cmd, bool *more) {
        _cleanup_free_ char *first = NULL;
        struct strlist argv = {};
        bool at = false, bad = false;
        int r = next_word(c, k, p, value, &first, &bad);
        if (r <= 0)
                return r < 0 ? r : -EINVAL;
        const char *f = first;
        r = command_prefixes(c, k, &f, &cmd->flags, &at);
        if (r >= 0)
                r = resolve_specifiers(c, k, f, &cmd->path);
        if (r >= 0)
                r = check_executable(c, k, cmd->path);
        if (r >= 0 && !at) {
                char *s = strdup(cmd->path);
                r = s ? strlist_push(&argv, s) : -ENOMEM;
        }
        while (r >= 0) {
                *p += strspn(*p, WHITESPACE);
                char *w = NULL, *a = NULL;
                if (!**p)
                        break;
                if (lone_token(*p, ";")) { /* systemd still splits here, though it no longer documents it */
                        *p += 1;
                        *more = true;
                        break;
                }
                if (lone_token(*p, "\\;")) {
                        *p += 2;
                        w = strdup(";");
                        r = w ? 1 : -ENOMEM;
                } else
                        r = next_word(c, k, p, value, &w, &bad);
                if (r == 0)
                        break;
                if (r > 0)
                        r = resolve_specifiers(c, k, w, &a);
                free(w);
                if (r >= 0)
                        r = strlist_push(&argv, a);
        }
        warn_bad_escape(c, k, value, bad);
        char q[QUOTE_BUF];
        if (r >= 0 && argv.n == 0)
                r = syntax_error(c, "%s=: \"@\" without an argv[0] in %s", k->key, quote(q, value));
        for (size_t i = 0; r >= 0 && i < argv.n && !(cmd->flags & UNIT_COMMAND_NO_ENV_EXPAND); i++)
                if (!unit_word_variables_valid(argv.v[i]))
                        r = syntax_error(c, "%s=: invalid variable reference in %s (write $$ for a literal $)", k->key,
                                         quote(q, argv.v[i]));
        if (r < 0) {
                strlist_clear(&argv);
                return r;
        }
        return unit_strv_pack(argv.v, &cmd->argv);
}

static int parse_exec(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_command_list *l = FIELD(c, k, struct unit_command_list);
        bool is_start = l == &c->u->exec_start, separated = false;
        if (!*value) {
                unit_command_list_clear(l);
                if (is_start)
                        c->exec_start_extra_line = 0;
                return 0;
        }
        for (const char *p = value;;) {
                p += strspn(p, WHITESPACE);
                if (lone_token(p, ";")) {
                        p++;
                        continue;
                }
                if (!*p)
                        break;
                struct unit_command cmd = {};
                bool more = false;
                int r = parse_command(c, k, &p, value, &cmd, &more);
                if (r >= 0)
                        r = command_list_append(l, &cmd);
                command_done(&cmd);
                if (r < 0)
                        return r;
                if (is_start && l->n == 2 && !c->exec_start_extra_line)
                        c->exec_start_extra_line = c->line;
                separated |= more;
                if (!more)
                        break;
        }
        if (separated)
                report(c, LOG_WARNING, 0, "%s=: ';' separates commands here, as in systemd, which no longer documents it: "
                       "prefer one %s= line per command", k->key, k->key);
        return 0;
}

/* --- sandboxing (sandbox.h) ------------------------------------------------- */

/* systemd's relaxed user and group names: anything but blanks, control
 * characters, ':' and '/' (numeric ids are names too). */
static bool user_name_is_valid(const char *s) {
        if (!*s || strlen(s) > 255 || streq(s, ".") || streq(s, ".."))
                return false;
        for (; *s; s++)
                if ((unsigned char) *s <= ' ' || *s == 0x7f || *s == ':' || *s == '/')
                        return false;
        return true;
}

/* User=, Group=: one name, specifiers resolved; looked up at each start. */
static int parse_user(struct parse_ctx *c, const struct key_def *k, const char *value) {
        char **field = FIELD(c, k, char *), *s = NULL, q[QUOTE_BUF];
        if (*value) {
                int r = resolve_specifiers(c, k, value, &s);
                if (r < 0)
                        return r;
                if (!user_name_is_valid(s)) {
                        r = syntax_error(c, "%s=: invalid %s name %s", k->key, streq(k->key, "User") ? "user" : "group",
                                         quote(q, s));
                        free(s);
                        return r;
                }
        }
        free(*field);
        *field = s;
        return 0;
}

static int parse_supplementary_groups(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct strlist *l = &c->lists[(uintptr_t) k->data];
        if (!*value) {
                strlist_clear(l);
                return 0;
        }
        int r;
        for (const char *p = value;;) {
                _cleanup_free_ char *w = NULL;
                char *n = NULL, q[QUOTE_BUF];
                r = next_word(c, k, &p, value, &w, NULL);
                if (r <= 0)
                        break;
                r = resolve_specifiers(c, k, w, &n);
                if (r < 0)
                        break;
                if (!user_name_is_valid(n)) {
                        r = syntax_error(c, "%s=: invalid group name %s", k->key, quote(q, n));
                        free(n);
                        break;
                }
                r = strlist_push(l, n);
                if (r < 0)
                        break;
        }
        return r;
}

static int parse_umask(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value) {
                reset_default(c, k);
                return 0;
        }
        char *end;
        errno = 0;
        unsigned long v = strtoul(value, &end, 8);
        if (value[0] < '0' || value[0] > '7' || *end || errno || v > 07777)
                return invalid_value(c, k, value);
        *FIELD(c, k, mode_t) = (mode_t) v;
        return 0;
}

/* Limit*=: k->data is the resource. */
static int parse_limit(struct parse_ctx *c, const struct key_def *k, const char *value) {
        int resource = (int) (uintptr_t) k->data;
        struct sandbox_limit *l = &sandbox_keys(c)->limits[resource];
        char q[QUOTE_BUF];
        if (!*value) {
                *l = (struct sandbox_limit) {};
                return 0;
        }
        int r = sandbox_parse_limit(resource, value, &l->rl);
        if (r == -EDOM)
                return syntax_error(c, "%s=: the soft limit is above the hard limit in %s", k->key, quote(q, value));
        if (r == -ERANGE)
                return syntax_error(c, "%s=: out of range: %s", k->key, quote(q, value));
        if (r < 0)
                return invalid_value(c, k, value);
        l->set = true;
        return 0;
}

/*
 * CapabilityBoundingSet=, AmbientCapabilities= (systemd's rules): "~"
 * inverts; the first assignment (or one naming nothing) replaces the
 * default, later ones merge by OR, or by AND NOT with "~"; empty is the empty set.
 */
static int parse_capabilities(struct parse_ctx *c, const struct key_def *k, const char *value) {
        uint64_t *set = FIELD(c, k, uint64_t), initial, sum = 0;
        memcpy(&initial, key_default(k), sizeof initial);
        bool invert = value[0] == '~';
        int r;
        for (const char *p = value + invert;;) {
                _cleanup_free_ char *w = NULL;
                char q[QUOTE_BUF];
                r = next_word(c, k, &p, value, &w, NULL);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                int cap = sandbox_capability_from_name(w);
                if (cap < 0)
                        return syntax_error(c, "%s=: unknown capability %s", k->key, quote(q, w));
                sum |= UINT64_C(1) << cap;
        }
        if (streq(k->key, "AmbientCapabilities"))
                c->ambient_line = c->line;
        if (sum == 0 || *set == initial)
                *set = invert ? ~sum : sum;
        else if (invert)
                *set &= ~sum;
        else
                *set |= sum;
        return 0;
}

/* SystemCallFilter=: names and @groups (sandbox.h); "~" makes a deny list. */
static int parse_syscall_filter(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct sandbox_syscall_filter *f = &sandbox_keys(c)->syscall_filter;
        if (!*value) {
                sandbox_syscall_filter_clear(f);
                return 0;
        }
        bool invert = value[0] == '~';
        if (!f->set) { /* "~" alone: a deny list denying nothing yet */
                f->set = true;
                f->allow_list = !invert;
        }
        c->syscall_filter_line = c->line;
        for (const char *p = value + invert;;) {
                _cleanup_free_ char *w = NULL;
                char q[QUOTE_BUF];
                int r = next_word(c, k, &p, value, &w, NULL);
                if (r <= 0)
                        return r;
                r = sandbox_syscall_filter_add(f, w, invert);
                if (r == -EINVAL)
                        return syntax_error(c, "%s=: unknown system call %s", k->key, quote(q, w));
                if (r == -ENOENT)
                        return syntax_error(c, "%s=: unknown system call group %s", k->key, quote(q, w));
                if (r == -EBADMSG)
                        return syntax_error(c, "%s=: invalid error number in %s", k->key, quote(q, w));
                if (r == -EDOM)
                        return syntax_error(c, "%s=: an error number (%s) is only allowed in a deny list (\"~\")",
                                            k->key, quote(q, w));
                if (r < 0)
                        return r;
        }
}

static int parse_errno(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value) {
                reset_default(c, k);
                return 0;
        }
        int e = sandbox_errno_from_name(value);
        char q[QUOTE_BUF];
        if (e < 0)
                return syntax_error(c, "%s=: invalid error number %s", k->key, quote(q, value));
        *FIELD(c, k, int) = e;
        return 0;
}

/* ------------------------------------------------------------------------ */
/* The keys                                                                  */
/* ------------------------------------------------------------------------ */

#define F(field) offsetof(struct unit_file, field), sizeof(((struct unit_file *) 0)->field)
#define SB(field) (KEY_SB | offsetof(struct unit_sandbox_keys, field)), sizeof(((struct unit_sandbox_keys *) 0)->field)
#define XS(field) (KEY_XS | offsetof(struct unit_exit_statuses, field)), sizeof(((struct unit_exit_statuses *) 0)->field)
#define U SECTION_UNIT
#define S SECTION_SERVICE
#define LIST(i) ((const void *) (uintptr_t) (i))
#define RESOURCE(r) ((const void *) (uintptr_t) (r))

static const struct key_def unit_keys[] = {
        { U, "Description", parse_string, F(description), NULL },
        { U, "Requires", parse_unit_names, 0, 0, LIST(LIST_REQUIRES) },
        { U, "Wants", parse_unit_names, 0, 0, LIST(LIST_WANTS) },
        { U, "BindsTo", parse_unit_names, 0, 0, LIST(LIST_BINDS_TO) },
        { U, "After", parse_unit_names, 0, 0, LIST(LIST_AFTER) },
        { U, "Before", parse_unit_names, 0, 0, LIST(LIST_BEFORE) },
        { U, "StartLimitIntervalSec", parse_timespan_key, F(start_limit_interval), NULL },
        { U, "StartLimitInterval", parse_timespan_key, F(start_limit_interval), NULL },
        { U, "StartLimitBurst", parse_unsigned, F(start_limit_burst), NULL },
        { U, "SuccessAction", parse_enum, F(success_action), &action_table },
        { U, "FailureAction", parse_enum, F(failure_action), &action_table },

        { S, "Type", parse_enum, F(type), &type_table },
        { S, "ExecStartPre", parse_exec, F(exec_start_pre), NULL },
        { S, "ExecStart", parse_exec, F(exec_start), NULL },
        { S, "ExecStartPost", parse_exec, F(exec_start_post), NULL },
        { S, "ExecStop", parse_exec, F(exec_stop), NULL },
        { S, "ExecReload", parse_exec, F(exec_reload), NULL },
        { S, "Restart", parse_enum, F(restart), &restart_table },
        { S, "RestartSec", parse_timespan_key, F(restart_sec), NULL },
        { S, "RestartSteps", parse_unsigned, F(restart_steps), NULL },
        { S, "RestartMaxDelaySec", parse_timespan_key, F(restart_max_delay), NULL },
        { S, "RemainAfterExit", parse_bool, F(remain_after_exit), NULL },
        { S, "SuccessExitStatus", parse_exit_status, XS(success), NULL },
        { S, "RestartPreventExitStatus", parse_exit_status, XS(restart_prevent), NULL },
        { S, "TimeoutStartSec", parse_timeout, 0, 0, (const void *) (uintptr_t) TIMEOUT_START },
        { S, "TimeoutStopSec", parse_timeout, 0, 0, (const void *) (uintptr_t) TIMEOUT_STOP },
        { S, "TimeoutSec", parse_timeout, 0, 0, (const void *) (uintptr_t) (TIMEOUT_START | TIMEOUT_STOP) },
        { S, "WatchdogSec", parse_timespan_key, F(watchdog), NULL },
        { S, "WatchdogSignal", parse_signal, F(watchdog_signal), NULL },
        { S, "NotifyAccess", parse_enum, F(notify_access), &notify_access_table },
        { S, "KillMode", parse_enum, F(kill_mode), &kill_mode_table },
        { S, "KillSignal", parse_signal, F(kill_signal), NULL },
        { S, "FinalKillSignal", parse_signal, F(final_kill_signal), NULL },
        { S, "SendSIGKILL", parse_bool, F(send_sigkill), NULL },
        { S, "IgnoreSIGPIPE", parse_bool, F(ignore_sigpipe), NULL },
        { S, "Environment", parse_environment, 0, 0, LIST(LIST_ENVIRONMENT) },
        { S, "EnvironmentFile", parse_environment_file, 0, 0, NULL },
        { S, "WorkingDirectory", parse_working_directory, 0, 0, NULL },
        { S, "StandardOutput", parse_output, F(standard_output), NULL },
        { S, "StandardError", parse_output, F(standard_error), NULL },
        { S, "SyslogIdentifier", parse_string, F(syslog_identifier), NULL },
        /* systemd's names in [Service] for [Unit] keys */
        { S, "StartLimitInterval", parse_timespan_key, F(start_limit_interval), NULL },
        { S, "StartLimitBurst", parse_unsigned, F(start_limit_burst), NULL },
        { S, "FailureAction", parse_enum, F(failure_action), &action_table },
        /* sandboxing (sandbox.h) */
        { S, "User", parse_user, SB(user), NULL },
        { S, "Group", parse_user, SB(group), NULL },
        { S, "SupplementaryGroups", parse_supplementary_groups, 0, 0, LIST(LIST_SUPPLEMENTARY_GROUPS) },
        { S, "UMask", parse_umask, SB(umask), NULL },
        { S, "NoNewPrivileges", parse_bool, SB(no_new_privileges), NULL },
        { S, "CapabilityBoundingSet", parse_capabilities, SB(capability_bounding_set), NULL },
        { S, "AmbientCapabilities", parse_capabilities, SB(ambient_capabilities), NULL },
        { S, "SystemCallFilter", parse_syscall_filter, 0, 0, NULL },
        { S, "SystemCallErrorNumber", parse_errno, SB(syscall_error_number), NULL },
        { S, "LimitCPU", parse_limit, 0, 0, RESOURCE(RLIMIT_CPU) },
        { S, "LimitFSIZE", parse_limit, 0, 0, RESOURCE(RLIMIT_FSIZE) },
        { S, "LimitDATA", parse_limit, 0, 0, RESOURCE(RLIMIT_DATA) },
        { S, "LimitSTACK", parse_limit, 0, 0, RESOURCE(RLIMIT_STACK) },
        { S, "LimitCORE", parse_limit, 0, 0, RESOURCE(RLIMIT_CORE) },
        { S, "LimitRSS", parse_limit, 0, 0, RESOURCE(RLIMIT_RSS) },
        { S, "LimitNOFILE", parse_limit, 0, 0, RESOURCE(RLIMIT_NOFILE) },
        { S, "LimitAS", parse_limit, 0, 0, RESOURCE(RLIMIT_AS) },
        { S, "LimitNPROC", parse_limit, 0, 0, RESOURCE(RLIMIT_NPROC) },
        { S, "LimitMEMLOCK", parse_limit, 0, 0, RESOURCE(RLIMIT_MEMLOCK) },
        { S, "LimitLOCKS", parse_limit, 0, 0, RESOURCE(RLIMIT_LOCKS) },
        { S, "LimitSIGPENDING", parse_limit, 0, 0, RESOURCE(RLIMIT_SIGPENDING) },
        { S, "LimitMSGQUEUE", parse_limit, 0, 0, RESOURCE(RLIMIT_MSGQUEUE) },
        { S, "LimitNICE", parse_limit, 0, 0, RESOURCE(RLIMIT_NICE) },
        { S, "LimitRTPRIO", parse_limit, 0, 0, RESOURCE(RLIMIT_RTPRIO) },
        { S, "LimitRTTIME", parse_limit, 0, 0, RESOURCE(RLIMIT_RTTIME) },
};

static const struct key_def *key_lookup(enum section section, const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(unit_keys); i++)
                if (unit_keys[i].section == section && streq(unit_keys[i].key, key))
                        return &unit_keys[i];
        return NULL;
}

/* ------------------------------------------------------------------------ */
/* Lines                                                                     */
/* ------------------------------------------------------------------------ */

static char *strip(char *s) {
        s += strspn(s, WHITESPACE);
        size_t n = strlen(s);
        while (n > 0 && strchr(WHITESPACE, s[n - 1]))
                s[--n] = '\0';
        return s;
}

static void parse_section_header(struct parse_ctx *c, char *l, enum section *section) {
        size_t n = strlen(l);
        char q[QUOTE_BUF];
        if (l[n - 1] != ']' || n < 3 || strpbrk(l + 1, "[]") != l + n - 1) {
                syntax_error(c, "syntax error: invalid section header %s", quote(q, l));
                *section = SECTION_UNKNOWN;
                return;
        }
        l[n - 1] = '\0';
        const char *name = l + 1;
        if (streq(name, "Unit"))
                *section = SECTION_UNIT;
        else if (streq(name, "Service"))
                *section = SECTION_SERVICE;
        else if (streq(name, "Install") || strncmp(name, "X-", 2) == 0)
                *section = SECTION_IGNORED;
        else {
                const char *qn = quote(q, name); /* control bytes escaped; shown without its quotes */
                report(c, LOG_WARNING, 0, "unknown section [%.*s], ignoring its keys", (int) strlen(qn) - 2, qn + 1);
                *section = SECTION_UNKNOWN;
        }
}

static void parse_assignment(struct parse_ctx *c, enum section section, char *l) {
        static const char *const section_names[] = { [SECTION_UNIT] = "Unit", [SECTION_SERVICE] = "Service" };
        char q[QUOTE_BUF];
        char *eq = strchr(l, '=');
        if (!eq) {
                syntax_error(c, "syntax error: missing '=' in %s", quote(q, l));
                return;
        }
        *eq = '\0';
        char *key = strip(l), *value = strip(eq + 1);
        if (!*key) {
                syntax_error(c, "syntax error: assignment without a key");
                return;
        }
        if (section == SECTION_NONE) {
                syntax_error(c, "syntax error: %s= before any [section]", key);
                return;
        }
        if (section != SECTION_UNIT && section != SECTION_SERVICE)
                return;
        if (strncmp(key, "X-", 2) == 0)
                return;
        const struct key_def *k = key_lookup(section, key);
        if (!k) {
                report(c, LOG_WARNING, 0, "unknown key %s in section [%s], ignoring", quote(q, key),
                       section_names[section]);
                return;
        }
        (void) k->parse(c, k, value); /* reports its own errors */
}

static void parse_logical_line(struct parse_ctx *c, enum section *section, char *line) {
        char *l = strip(line);
        if (!*l)
                return;
        if (l[0] == '[')
                parse_section_header(c, l, section);
        else
                parse_assignment(c, *section, l);
}

/* True if the physical line p[0..n) ends in an unescaped backslash (then replaced by a space in the copy). */
static bool continues(const char *p, size_t n) {
        while (n > 0 && strchr(WHITESPACE, p[n - 1]))
                n--;
        bool escaped = false;
        for (size_t i = 0; i < n; i++)
                escaped = !escaped && p[i] == '\\';
        return escaped;
}

/*
 * systemd.syntax(7): a line ending in a backslash continues on the next (the
 * backslash becomes a space); comment lines inside a continuation are skipped;
 * messages name the first line of the assignment.
 */
static int parse_text(struct parse_ctx *c, const char *data, size_t size) {
        struct unit_buf logical = {};
        enum section section = SECTION_NONE;
        unsigned lineno = 0, first = 0;
        bool cont = false;
        int r = 0;
        for (const char *p = data, *end = data + size; p < end && r >= 0;) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t n = (size_t) ((nl ? nl : end) - p);
                const char *l = p;
                p = nl ? nl + 1 : end;
                c->line = ++lineno;
                if (memchr(l, '\0', n)) {
                        syntax_error(c, "syntax error: NUL byte in line");
                        continue;
                }
                if (!unit_utf8_is_valid(l, n)) {
                        syntax_error(c, "syntax error: line is not valid UTF-8");
                        continue;
                }
                size_t lead = 0; /* data is not NUL-terminated: every scan stays within n */
                while (lead < n && strchr(" \t\r", l[lead]))
                        lead++;
                if (lead < n && (l[lead] == '#' || l[lead] == ';'))
                        continue;
                if (!cont) {
                        logical.len = 0;
                        first = lineno;
                }
                if (logical.len + n > UNIT_FILE_SIZE_MAX)
                        r = -EFBIG;
                else
                        r = unit_buf_put(&logical, l, n);
                if (r < 0)
                        break;
                cont = continues(l, n);
                if (cont) {
                        size_t e = logical.len;
                        while (strchr(WHITESPACE, logical.s[e - 1]))
                                e--;
                        logical.s[e - 1] = ' ';
                        continue;
                }
                c->line = first;
                parse_logical_line(c, &section, logical.s);
        }
        if (cont && r >= 0) {
                c->line = first;
                parse_logical_line(c, &section, logical.s);
        }
        free(logical.s);
        return r;
}

/* ------------------------------------------------------------------------ */
/* The unit as a whole                                                       */
/* ------------------------------------------------------------------------ */

/* Environment=: a later NAME replaces an earlier one in place (systemd's strv_env_replace). */
static int finish_environment(struct parse_ctx *c) {
        struct strlist *l = &c->lists[LIST_ENVIRONMENT];
        return l->n ? unit_env_merge(&c->u->environment, l->v) : 0;
}

static int finish_lists(struct parse_ctx *c) {
        char ***dst[_LIST_MAX] = {
                [LIST_REQUIRES] = &c->u->requires, [LIST_WANTS] = &c->u->wants, [LIST_BINDS_TO] = &c->u->binds_to,
                [LIST_AFTER] = &c->u->after,       [LIST_BEFORE] = &c->u->before,
                [LIST_SUPPLEMENTARY_GROUPS] = &c->sb.supplementary_groups,
        };
        if (c->lists[LIST_SUPPLEMENTARY_GROUPS].v)
                c->sb_set = true;
        for (int i = 0; i < _LIST_MAX; i++)
                if (dst[i]) {
                        *dst[i] = c->lists[i].v;
                        c->lists[i] = (struct strlist) {};
                }
        return finish_environment(c);
}

/* The sandboxing keys that depend on each other (sandbox.h). */
static void verify_sandbox(struct parse_ctx *c) {
        const struct unit_sandbox_keys *u = &c->sb;
        uint64_t outside = u->ambient_capabilities & ~u->capability_bounding_set & sandbox_capability_all();
        if (outside) {
                char name[64];
                sandbox_capability_name(__builtin_ctzll(outside), name, sizeof name);
                c->line = c->ambient_line;
                syntax_error(c, "AmbientCapabilities=: %s is not in CapabilityBoundingSet=", name);
        }
        char exempt[128];
        sandbox_syscall_filter_exempt(&u->syscall_filter, exempt, sizeof exempt);
        if (*exempt) {
                c->line = c->syscall_filter_line;
                report(c, LOG_WARNING, 0, "SystemCallFilter=: %s stay allowed: tend needs them to start the program",
                       exempt);
        }
        c->line = 0;
}

/* systemd's service_verify(), and its defaults that depend on other keys. */
static void verify(struct parse_ctx *c) {
        struct unit_file *u = c->u;
        char b1[64], b2[64];
        if (!c->type_set)
                u->type = u->exec_start.n > 0 ? UNIT_TYPE_SIMPLE : UNIT_TYPE_ONESHOT;
        c->line = 0;
        if (u->type != UNIT_TYPE_ONESHOT && u->exec_start.n == 0)
                syntax_error(c, "no ExecStart=, which only Type=oneshot allows");
        else if (u->exec_start.n == 0 && u->exec_stop.n == 0 && u->success_action == UNIT_ACTION_NONE)
                syntax_error(c, "no ExecStart=, ExecStop= or SuccessAction=");
        else if (u->exec_start.n == 0 && !u->remain_after_exit && u->success_action == UNIT_ACTION_NONE)
                syntax_error(c, "no ExecStart= and no SuccessAction=, which needs RemainAfterExit=yes");
        if (u->type != UNIT_TYPE_ONESHOT && u->exec_start.n > 1) {
                c->line = c->exec_start_extra_line;
                syntax_error(c, "ExecStart=: more than one command, which only Type=oneshot allows");
        }
        if (u->type == UNIT_TYPE_ONESHOT && (u->restart == UNIT_RESTART_ALWAYS || u->restart == UNIT_RESTART_ON_SUCCESS)) {
                c->line = c->restart_line;
                syntax_error(c, "Restart=%s is not allowed for Type=oneshot", restart_names[u->restart]);
        }
        c->line = 0;
        if (u->type == UNIT_TYPE_ONESHOT && !c->timeout_start_set)
                u->timeout_start = USEC_INFINITY;
        if (u->restart_steps > 0 && u->restart_max_delay == USEC_INFINITY) {
                report(c, LOG_WARNING, 0, "RestartSteps= without RestartMaxDelaySec=, ignoring RestartSteps=");
                u->restart_steps = 0;
        } else if (u->restart_steps == 0 && u->restart_max_delay != USEC_INFINITY) {
                report(c, LOG_WARNING, 0, "RestartMaxDelaySec= without RestartSteps=, ignoring RestartMaxDelaySec=");
                u->restart_max_delay = USEC_INFINITY;
        }
        if (u->restart_max_delay < u->restart_sec) {
                report(c, LOG_WARNING, 0, "RestartMaxDelaySec=%s is shorter than RestartSec=%s, using it for both",
                       format_timespan(u->restart_max_delay, b1), format_timespan(u->restart_sec, b2));
                u->restart_sec = u->restart_max_delay;
        }
        verify_sandbox(c);
}

static void sandbox_keys_clear(struct unit_sandbox_keys *s) {
        free(s->user);
        free(s->group);
        unit_strv_free(s->supplementary_groups);
        sandbox_syscall_filter_clear(&s->syscall_filter);
        *s = unit_sandbox_defaults;
}

struct unit_file *unit_file_free(struct unit_file *u) {
        if (!u)
                return NULL;
        free(u->name);
        free(u->path);
        free(u->instance);
        free(u->description);
        unit_strv_free(u->requires);
        unit_strv_free(u->wants);
        unit_strv_free(u->binds_to);
        unit_strv_free(u->after);
        unit_strv_free(u->before);
        unit_command_list_clear(&u->exec_start_pre);
        unit_command_list_clear(&u->exec_start);
        unit_command_list_clear(&u->exec_start_post);
        unit_command_list_clear(&u->exec_stop);
        unit_command_list_clear(&u->exec_reload);
        unit_strv_free(u->environment);
        for (size_t i = 0; i < u->n_environment_files; i++)
                free(u->environment_files[i].path);
        free(u->environment_files);
        free(u->working_directory);
        free(u->standard_output.path);
        free(u->standard_error.path);
        free(u->syslog_identifier);
        if (u->sandbox) {
                sandbox_keys_clear(u->sandbox);
                free(u->sandbox);
        }
        free(u->exit_statuses);
        free(u);
        return NULL;
}

static int ctx_init(struct parse_ctx *c, const char *name, const char *origin) {
        size_t body = strlen(name) - strlen(".service");
        const char *at = memchr(name, '@', body);
        *c = (struct parse_ctx) { .origin = origin, .name = name, .sb = unit_sandbox_defaults };
        c->u = malloc(sizeof *c->u);
        if (c->u)
                *c->u = unit_defaults;
        c->prefix = strndup(name, at ? (size_t) (at - name) : body);
        if (!c->u || !c->prefix)
                return -ENOMEM;
        c->u->name = strdup(name);
        c->u->path = strdup(origin);
        if (at)
                c->u->instance = strndup(at + 1, body - (size_t) (at - name) - 1);
        c->instance = c->u->instance;
        if (!c->u->name || !c->u->path || (at && !c->u->instance))
                return -ENOMEM;
        return 0;
}

static void ctx_done(struct parse_ctx *c) {
        unit_file_free(c->u);
        sandbox_keys_clear(&c->sb);
        free(c->prefix);
        free(c->message);
        for (int i = 0; i < _LIST_MAX; i++)
                strlist_clear(&c->lists[i]);
}

int unit_file_parse(const char *name, const char *origin, const char *data, size_t size, struct unit_file **ret,
                    char **ret_message) {
        if (!name || !origin || (!data && size) || !ret)
                return -EINVAL;
        if (ret_message)
                *ret_message = NULL;
        char q[QUOTE_BUF];
        if (!unit_name_is_valid(name, UNIT_NAME_PLAIN | UNIT_NAME_INSTANCE))
                return log_error_errno(EINVAL, "%s: invalid unit name %s", origin, quote(q, name));
        if (size > UNIT_FILE_SIZE_MAX)
                return log_error_errno(EFBIG, "%s: larger than %d bytes", origin, UNIT_FILE_SIZE_MAX);
        struct parse_ctx c;
        int r = ctx_init(&c, name, origin);
        if (r >= 0)
                r = parse_text(&c, data ? data : "", size);
        if (r >= 0 && !c.error)
                r = finish_lists(&c);
        if (r >= 0 && !c.error)
                verify(&c);
        if (r >= 0 && !c.error && c.sb_set) {
                c.u->sandbox = malloc(sizeof *c.u->sandbox);
                if (c.u->sandbox) {
                        *c.u->sandbox = c.sb;
                        c.sb = unit_sandbox_defaults;
                } else
                        r = -ENOMEM;
        }
        if (r >= 0 && !c.error && c.xs_set && memcmp(&c.xs, &unit_exit_statuses_none, sizeof c.xs) != 0) {
                c.u->exit_statuses = malloc(sizeof *c.u->exit_statuses);
                if (c.u->exit_statuses)
                        *c.u->exit_statuses = c.xs;
                else
                        r = -ENOMEM;
        }
        if (r == -EFBIG)
                r = log_error_errno(EFBIG, "%s: a line is longer than %d bytes", origin, UNIT_FILE_SIZE_MAX);
        else if (r < 0)
                r = log_error_errno(r, "%s: %s", origin, strerror(-r));
        else
                r = c.error;
        if (r < 0) {
                if (ret_message)
                        *ret_message = TAKE_PTR(c.message);
                ctx_done(&c);
                return r;
        }
        c.u->text_size = size;
        /* A fingerprint of the unit's text, not a defence against crafted
         * collisions (whoever writes DIR runs commands anyway). */
        c.u->text_hash = fnv1a_64(data, size);
        *ret = TAKE_PTR(c.u);
        ctx_done(&c);
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Files and directories                                                     */
/* ------------------------------------------------------------------------ */

/* Logs an error of loading (outside the text) and keeps its message. */
_printf_(4, 5) static int load_error(char **ret_message, int level, int error, const char *fmt, ...) {
        char msg[1400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        log_internal(level, 0, "%s", msg);
        if (ret_message)
                *ret_message = strdup(msg);
        return -abs(error);
}

/* Opens a unit file. 1 if masked (empty, or /dev/null), 0 with *ret_fd, or a negative errno. */
static int open_unit_file(const char *path, int *ret_fd) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if ((S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) || (S_ISREG(st.st_mode) && st.st_size == 0))
                return 1;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static void warn_drop_ins(const char *dir, const char *name) {
        _cleanup_free_ char *d = NULL;
        struct stat st;
        if (asprintf(&d, "%s/%s.d", dir, name) >= 0 && stat(d, &st) == 0 && S_ISDIR(st.st_mode))
                log_warning("%s/: drop-in directories are not read", d);
}

int unit_load(const char *dir, const char *name, struct unit_file **ret, char **ret_message) {
        if (ret_message)
                *ret_message = NULL;
        if (!dir || !name || !ret)
                return -EINVAL;
        char q[QUOTE_BUF];
        if (unit_name_is_valid(name, UNIT_NAME_TEMPLATE))
                return load_error(ret_message, LOG_ERR, EINVAL, "%s: a template: only its instances (%.*s<instance>.service) run",
                                  name, (int) (strlen(name) - strlen(".service")), name);
        if (!unit_name_is_valid(name, UNIT_NAME_PLAIN | UNIT_NAME_INSTANCE))
                return load_error(ret_message, LOG_ERR, EINVAL, "%s: invalid unit name %s", dir, quote(q, name));
        _cleanup_free_ char *path = NULL, *template = NULL, *template_path = NULL;
        _cleanup_close_ int fd = -1;
        const char *at = strchr(name, '@');
        if (asprintf(&path, "%s/%s", dir, name) < 0 ||
            (at && (asprintf(&template, "%.*s@.service", (int) (at - name), name) < 0 ||
                    asprintf(&template_path, "%s/%s", dir, template) < 0)))
                return -ENOMEM;
        int r = open_unit_file(path, &fd);
        bool from_template = false;
        if (r == -ENOENT && at) { /* an instance without its own file: its template's */
                r = open_unit_file(template_path, &fd);
                from_template = r != -ENOENT;
                if (from_template)
                        SWAP_PTR(path, template_path);
        }
        if (r == -ENOENT)
                return load_error(ret_message, LOG_ERR, ENOENT, "%s: no such unit file", path);
        if (r == 1)
                return load_error(ret_message, LOG_NOTICE, ERFKILL, "%s: masked (empty, or a link to /dev/null), not loaded", path);
        if (r == -EBADFD)
                return load_error(ret_message, LOG_ERR, EINVAL, "%s: not a regular file", path);
        if (r < 0)
                return load_error(ret_message, LOG_ERR, r, "%s: %s", path, strerror(-r));
        warn_drop_ins(dir, name);
        if (from_template)
                warn_drop_ins(dir, template);
        _cleanup_free_ char *data = NULL;
        size_t size;
        r = unit_read_file(fd, UNIT_FILE_SIZE_MAX, &data, &size);
        if (r == -EFBIG)
                return load_error(ret_message, LOG_ERR, EFBIG, "%s: larger than %d bytes", path, UNIT_FILE_SIZE_MAX);
        if (r < 0)
                return load_error(ret_message, LOG_ERR, r, "%s: %s", path, strerror(-r));
        return unit_file_parse(name, path, data, size, ret, ret_message);
}

struct unit_set *unit_set_free(struct unit_set *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_units; i++)
                unit_file_free(s->units[i]);
        free(s->units);
        for (size_t i = 0; i < s->n_errors; i++) {
                free(s->errors[i].name);
                free(s->errors[i].message);
        }
        free(s->errors);
        free(s);
        return NULL;
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The *.service names of dir that are not templates, sorted. */
static int list_units(const char *dir, struct strlist *names) {
        DIR *d = opendir(dir);
        if (!d) {
                int r = negative_errno();
                return log_error_errno(r, "%s: cannot read the unit directory: %s", dir, strerror(-r));
        }
        int r = 0;
        for (struct dirent *de; r >= 0 && (errno = 0, de = readdir(d));) {
                size_t n = strlen(de->d_name);
                if (n <= 8 || strcmp(de->d_name + n - 8, ".service") != 0 || unit_name_is_valid(de->d_name, UNIT_NAME_TEMPLATE))
                        continue;
                char *s = strdup(de->d_name);
                r = s ? strlist_push(names, s) : -ENOMEM;
        }
        if (r >= 0 && errno)
                r = log_error_errno(errno, "%s: cannot read the unit directory: %s", dir, strerror(errno));
        closedir(d);
        if (r >= 0 && names->n)
                qsort(names->v, names->n, sizeof *names->v, cmp_names);
        return r;
}

static int set_add(struct unit_set *s, char *name, int error, struct unit_file *u, char *message) {
        if (u) {
                struct unit_file **v = realloc(s->units, (s->n_units + 1) * sizeof *v);
                if (!v)
                        return -ENOMEM;
                s->units = v;
                s->units[s->n_units++] = u;
                free(name);
                free(message);
                return 0;
        }
        struct unit_load_error *e = realloc(s->errors, (s->n_errors + 1) * sizeof *e);
        if (!e)
                return -ENOMEM;
        s->errors = e;
        s->errors[s->n_errors++] = (struct unit_load_error) { name, error, message };
        return 0;
}

int unit_load_dir(const char *dir, struct unit_set **ret) {
        if (!dir || !ret)
                return -EINVAL;
        struct strlist names = {};
        int r = list_units(dir, &names);
        _cleanup_(unit_set_freep) struct unit_set *s = r >= 0 ? calloc(1, sizeof *s) : NULL;
        if (r >= 0 && !s)
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < names.n; i++) {
                struct unit_file *u = NULL;
                char *message = NULL;
                int k = unit_load(dir, names.v[i], &u, &message);
                r = set_add(s, names.v[i], k < 0 ? k : 0, u, message);
                if (r < 0) {
                        unit_file_free(u);
                        free(message);
                } else
                        names.v[i] = NULL; /* taken */
        }
        for (size_t i = 0; i < names.n; i++)
                free(names.v[i]);
        free(names.v);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}
