/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser's process keys (issue 16; struct unit_exec_keys in
 * unit-file.h, applied by exec/sandbox.c and exec/exec-dirs.c): the
 * directories (RuntimeDirectory= …, their modes, RuntimeDirectoryPreserve=),
 * Nice=, OOMScoreAdjust=, IOScheduling*=, CPUScheduling*=, CPUAffinity=,
 * StandardInput=, StandardInputText=, TTYPath=, TTYReset=, TTYVHangup=,
 * TTYVTDisallocate=. Values as systemd.exec(5) defines them.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "unit-file-internal.h"

#define IOPRIO_CLASS_NONE_ 0
#define IOPRIO_CLASS_RT_ 1
#define IOPRIO_CLASS_BE_ 2
#define IOPRIO_CLASS_IDLE_ 3

const struct unit_exec_keys unit_exec_defaults = {
        .directory_modes = { 0755, 0755, 0755, 0755, 0755 },
        .io_priority = 4,
};

const struct unit_exec_keys *unit_file_exec(const struct unit_file *f) {
        const struct unit_exec_keys *e = unit_file_sandbox(f)->exec;
        return e ? e : &unit_exec_defaults;
}

void unit_exec_keys_clear(struct unit_exec_keys *e) {
        for (int i = 0; i < _UNIT_EXEC_DIR_MAX; i++)
                strv_free(e->directories[i]);
        free(e->standard_input_path);
        free(e->standard_input_text);
        free(e->tty_path);
        strv_free(e->unset_environment); /* corpus */
        *e = unit_exec_defaults;
}

/* The process keys being parsed (allocated at the first), marked as assigned. */
struct unit_exec_keys *uf_exec_keys(struct parse_ctx *c) {
        struct unit_sandbox_keys *sb = uf_sandbox_keys(c);
        if (!sb->exec) {
                sb->exec = malloc(sizeof *sb->exec);
                if (sb->exec)
                        *sb->exec = unit_exec_defaults;
        }
        return sb->exec;
}

/* A signed decimal in [min, max]. */
static int parse_int_range(const char *s, int min, int max, int *ret) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < min || v > max)
                return -ERANGE;
        *ret = (int) v;
        return 0;
}

/* --- directories ------------------------------------------------------------ */

/* A relative path without "." or ".." components, empty ones, or control bytes. */
static bool directory_is_safe(const char *s) {
        if (!*s || *s == '/' || strlen(s) >= 4096)
                return false;
        for (const char *p = s; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return false;
        for (const char *p = s; *p;) {
                size_t n = strcspn(p, "/");
                if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                p += n;
                p += *p == '/';
        }
        return s[strlen(s) - 1] != '/';
}

/* RuntimeDirectory= …: names separated by blanks, added; empty resets. */
int uf_parse_exec_directory(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_exec_keys *e = uf_exec_keys(c);
        if (!e)
                return -ENOMEM;
        char ***l = &e->directories[(uintptr_t) k->data];
        if (!*value) {
                *l = strv_free(*l);
                return 0;
        }
        for (const char *p = value;;) {
                char *n = NULL, q[QUOTE_BUF];
                int r = uf_next_word_resolved(c, k, &p, value, &n, NULL);
                if (r <= 0)
                        return r;
                /* systemd strips a trailing ":DEST" of the bind-mount form; tend has no namespaces. */
                if (!directory_is_safe(n)) {
                        r = syntax_error(c, "%s=: not a relative path without \"..\": %s", k->key, uf_quote(q, n));
                        free(n);
                        return r;
                }
                r = strv_push(l, n);
                if (r < 0)
                        return r;
        }
}

int uf_parse_exec_directory_mode(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_exec_keys *e = uf_exec_keys(c);
        if (!e)
                return -ENOMEM;
        mode_t *m = &e->directory_modes[(uintptr_t) k->data];
        if (!*value) {
                *m = 0755;
                return 0;
        }
        char *end;
        errno = 0;
        unsigned long v = strtoul(value, &end, 8);
        if (errno || end == value || *end || v > 07777 || *value == '-')
                return invalid_value(c, k, value);
        *m = (mode_t) v;
        return 0;
}

/* --- process keys ----------------------------------------------------------- */

enum {
        PK_PRESERVE,
        PK_NICE,
        PK_OOM,
        PK_IO_CLASS,
        PK_IO_PRIORITY,
        PK_SCHED_POLICY,
        PK_SCHED_PRIORITY,
        PK_SCHED_RESET,
        PK_TTY_RESET,
        PK_TTY_VHANGUP,
        PK_TTY_VT_DISALLOCATE,
};

static int lookup(const char *const *names, size_t n, const char *value) {
        for (size_t i = 0; i < n; i++)
                if (names[i] && streq(names[i], value))
                        return (int) i;
        return -EINVAL;
}

static int parse_boolean(const char *value) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off" };
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(value, yes[i]) == 0)
                        return 1;
                if (strcasecmp(value, no[i]) == 0)
                        return 0;
        }
        return -EINVAL;
}

static int parse_scheduling(struct unit_exec_keys *e, int which, const char *value) {
        static const char *const io_classes[] = { "none", "realtime", "best-effort", "idle" };
        static const char *const policies[] = { [SCHED_OTHER] = "other", [SCHED_FIFO] = "fifo", [SCHED_RR] = "rr",
                                                [SCHED_BATCH] = "batch", [SCHED_IDLE] = "idle" };
        int v, r = 0;
        switch (which) {
        case PK_IO_CLASS:
                if ((v = lookup(io_classes, ELEMENTSOF(io_classes), value)) < 0)
                        r = parse_int_range(value, 0, 3, &v);
                if (r >= 0)
                        e->io_class = v, e->io_set = true;
                return r;
        case PK_IO_PRIORITY:
                r = parse_int_range(value, 0, 7, &v);
                if (r >= 0) {
                        if (!e->io_set)
                                e->io_class = IOPRIO_CLASS_BE_;
                        e->io_priority = v, e->io_set = true;
                }
                return r;
        case PK_SCHED_POLICY:
                if ((v = lookup(policies, ELEMENTSOF(policies), value)) < 0)
                        return -EINVAL;
                e->cpu_sched_policy = v, e->cpu_sched_set = true;
                return 0;
        default: /* PK_SCHED_PRIORITY: checked against the policy at the end (uf_verify_process) */
                r = parse_int_range(value, 0, 99, &v);
                if (r >= 0)
                        e->cpu_sched_priority = v, e->cpu_sched_set = true;
                return r;
        }
}

/* The scalar process keys, by k->data (PK_*); empty resets to the default. */
int uf_parse_process(struct parse_ctx *c, const struct key_def *k, const char *value) {
        static const char *const preserve[] = { "no", "yes", "restart" };
        struct unit_exec_keys *e = uf_exec_keys(c);
        int which = (int) (uintptr_t) k->data, r = 0, v;
        if (!e)
                return -ENOMEM;
        if (!*value) {
                struct unit_exec_keys d = unit_exec_defaults;
                switch (which) {
                case PK_PRESERVE: e->runtime_directory_preserve = d.runtime_directory_preserve; break;
                case PK_NICE: e->nice_set = false; break;
                case PK_OOM: e->oom_score_adjust_set = false; break;
                case PK_IO_CLASS: case PK_IO_PRIORITY: e->io_set = false, e->io_priority = d.io_priority; break;
                case PK_SCHED_POLICY: case PK_SCHED_PRIORITY: e->cpu_sched_set = false; break;
                default: break;
                }
                return 0;
        }
        switch (which) {
        case PK_PRESERVE:
                if ((v = lookup(preserve, ELEMENTSOF(preserve), value)) < 0 && (v = parse_boolean(value)) < 0)
                        r = v;
                else
                        e->runtime_directory_preserve = (unit_preserve) v;
                break;
        case PK_NICE:
                r = parse_int_range(value, -20, 19, &e->nice);
                e->nice_set = r >= 0;
                break;
        case PK_OOM:
                r = parse_int_range(value, -1000, 1000, &e->oom_score_adjust);
                e->oom_score_adjust_set = r >= 0;
                break;
        case PK_SCHED_RESET: case PK_TTY_RESET: case PK_TTY_VHANGUP: case PK_TTY_VT_DISALLOCATE:
                if ((r = v = parse_boolean(value)) < 0)
                        break;
                *(which == PK_SCHED_RESET ? &e->cpu_sched_reset_on_fork
                  : which == PK_TTY_RESET ? &e->tty_reset
                  : which == PK_TTY_VHANGUP ? &e->tty_vhangup : &e->tty_vt_disallocate) = v;
                break;
        default:
                r = parse_scheduling(e, which, value);
        }
        if (r == -ERANGE) {
                char q[QUOTE_BUF];
                return syntax_error(c, "%s=: out of range: %s", k->key, uf_quote(q, value));
        }
        return r < 0 ? invalid_value(c, k, value) : 0;
}

/* CPUAffinity=: CPU numbers and ranges ("0-3 5", commas too), added; empty resets. */
int uf_parse_cpu_affinity(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_exec_keys *e = uf_exec_keys(c);
        if (!e)
                return -ENOMEM;
        if (!*value) {
                memset(e->cpu_affinity, 0, sizeof e->cpu_affinity);
                e->cpu_affinity_set = false;
                return 0;
        }
        for (const char *p = value; *p;) {
                p += strspn(p, WHITESPACE ",");
                if (!*p)
                        break;
                char *end;
                errno = 0;
                unsigned long a = strtoul(p, &end, 10), b = a;
                if (end != p && *end == '-') {
                        const char *q = end + 1;
                        b = strtoul(q, &end, 10);
                        if (end == q)
                                return invalid_value(c, k, value);
                }
                if (errno || end == p || (*end && !strchr(WHITESPACE ",", *end)) || b < a)
                        return invalid_value(c, k, value);
                if (b >= UNIT_CPU_SET_WORDS * 64) {
                        char q[QUOTE_BUF];
                        return syntax_error(c, "%s=: CPU number above %d in %s", k->key, UNIT_CPU_SET_WORDS * 64 - 1,
                                            uf_quote(q, value));
                }
                for (unsigned long i = a; i <= b; i++)
                        e->cpu_affinity[i / 64] |= UINT64_C(1) << (i % 64);
                p = end;
        }
        e->cpu_affinity_set = true;
        return 0;
}

/* StandardInput=: null, tty, tty-force, tty-fail, file:PATH, data (StandardInputText=). */
int uf_parse_standard_input(struct parse_ctx *c, const struct key_def *k, const char *value) {
        static const char *const names[] = { "null", "tty", "tty-force", "tty-fail" };
        struct unit_exec_keys *e = uf_exec_keys(c);
        char q[QUOTE_BUF];
        if (!e)
                return -ENOMEM;
        int v = *value ? lookup(names, ELEMENTSOF(names), value) : UNIT_INPUT_NULL;
        if (v >= 0) {
                e->standard_input = (unit_input_kind) v;
                return 0;
        }
        if (streq(value, "data")) {
                e->standard_input = UNIT_INPUT_DATA;
                return 0;
        }
        if (strncmp(value, "file:", 5) != 0)
                return report(c, LOG_ERR, EOPNOTSUPP, "%s=%s is not supported (null, tty, tty-force, tty-fail, "
                              "data, file:PATH are)", k->key, uf_quote(q, value));
        char *path = NULL;
        int r = uf_resolve_specifiers(c, k, value + 5, &path);
        if (r < 0)
                return r;
        if (path[0] != '/') {
                free(path);
                return syntax_error(c, "%s=: not an absolute path: %s", k->key, uf_quote(q, value + 5));
        }
        free(e->standard_input_path);
        e->standard_input_path = path;
        e->standard_input = UNIT_INPUT_FILE;
        return 0;
}

/* StandardInputText=: C escapes and specifiers resolved, a newline after each line; empty resets. */
int uf_parse_standard_input_text(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_exec_keys *e = uf_exec_keys(c);
        if (!e)
                return -ENOMEM;
        if (!*value) {
                free(e->standard_input_text);
                e->standard_input_text = NULL;
                return 0;
        }
        _cleanup_free_ char *s = NULL;
        int r = uf_resolve_specifiers(c, k, value, &s);
        if (r < 0)
                return r;
        size_t old = e->standard_input_text ? strlen(e->standard_input_text) : 0, n = strlen(s);
        if (old + n + 2 > UNIT_ENV_FILE_SIZE_MAX)
                return syntax_error(c, "%s=: the text is longer than %d bytes", k->key, UNIT_ENV_FILE_SIZE_MAX);
        char *t = realloc(e->standard_input_text, old + n + 2);
        if (!t)
                return -ENOMEM;
        memcpy(t + old, s, n);
        t[old + n] = '\n';
        t[old + n + 1] = 0;
        e->standard_input_text = t;
        return 0;
}

/* TTYPath=: an absolute path (a bare name is under /dev/, as systemd). */
int uf_parse_tty_path(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_exec_keys *e = uf_exec_keys(c);
        char *s = NULL, q[QUOTE_BUF];
        if (!e)
                return -ENOMEM;
        if (*value) {
                int r = uf_resolve_specifiers(c, k, value, &s);
                if (r < 0)
                        return r;
                if (s[0] != '/') {
                        char *d = NULL;
                        if (strchr(s, '/') || asprintf(&d, "/dev/%s", s) < 0) {
                                r = strchr(s, '/') ? syntax_error(c, "%s=: not an absolute path: %s", k->key, uf_quote(q, s))
                                                   : -ENOMEM;
                                free(s);
                                return r;
                        }
                        free(s);
                        s = d;
                }
        }
        free(e->tty_path);
        e->tty_path = s;
        return 0;
}

/* The keys that depend on each other, at the end of the file. */
void uf_verify_process(struct parse_ctx *c) {
        struct unit_exec_keys *e = c->sb.exec;
        if (!e || !e->cpu_sched_set)
                return;
        bool rt = e->cpu_sched_policy == SCHED_FIFO || e->cpu_sched_policy == SCHED_RR;
        /* systemd clamps the priority into the policy's range: 1…99 for fifo and rr, 0 for the others. */
        if (rt && e->cpu_sched_priority < 1)
                e->cpu_sched_priority = 1;
        else if (!rt)
                e->cpu_sched_priority = 0;
}
