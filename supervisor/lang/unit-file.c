/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser (unit-file.h, SPEC §3). One pass over the text: lines
 * (comments, continuations) → sections → one table of keys, each with its
 * parser; then the whole-unit checks systemd's service_verify() makes. Every
 * value is validated at load, so a unit that loads can be started.
 *
 * The parser's files (unit-file-internal.h says what they share):
 *   unit-file.c           messages, names and specifiers, words, the unit as a whole
 *   unit-file-lines.c     lines, continuations, sections, assignments
 *   unit-file-keys.c      the key table, the defaults, the scalar values
 *   unit-file-values.c    lists, paths, outputs, exit statuses
 *   unit-file-commands.c  Exec*= command lines
 *   unit-file-sandbox.c   the sandboxing keys (sandbox-values.h)
 *   unit-file-load.c      files and directories
 *   unit-file-extra.c     the Debian corpus's keys (UnsetEnvironment=, TasksMax=…)
 *   unit-specifiers.c     the manager's and the machine's specifiers (%H %m %t …)
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash-util.h"
#include "log.h"
#include "timespan.h"
#include "unit-exec.h"
#include "unit-file.h"
#include "unit-file-internal.h"
#include "unit-name-char.h"

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

/* s in double quotes for a message: control bytes as \xHH, cut after QUOTE_MAX bytes. */
const char *uf_quote(char buf[static QUOTE_BUF], const char *s) {
        size_t o = 0;
        buf[o++] = '"';
        size_t end = strnlen(s, QUOTE_MAX + 1), i = 0;
        if (end > QUOTE_MAX) /* cut at a character boundary, never inside a UTF-8 sequence */
                for (end = QUOTE_MAX; end > 0 && ((unsigned char) s[end] & 0xc0) == 0x80;)
                        end--;
        for (; i < end; i++) {
                unsigned char ch = (unsigned char) s[i];
                /* a byte that does not start a whole UTF-8 character is
                 * escaped too (issue 19: a file name in Latin-1 is quoted as
                 * \xe9, never raw into the log or a JSON answer) */
                size_t n = ch < 0x80 ? 1 : (ch & 0xe0) == 0xc0 ? 2 : (ch & 0xf0) == 0xe0 ? 3 : (ch & 0xf8) == 0xf0 ? 4 : 0;
                if (n > 1 && i + n <= end && unit_utf8_is_valid(s + i, n)) {
                        memcpy(buf + o, s + i, n);
                        o += n;
                        i += n - 1;
                } else if (ch < 0x20 || ch >= 0x7f)
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
_printf_(4, 5) int report(struct parse_ctx *c, int level, int error, const char *fmt, ...) {
        char text[1024], msg[1400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        if (c->line) /* a drop-in's lines carry its index (UF_LINE_FILE_SHIFT) */
                snprintf(msg, sizeof msg, "%s:%u: %s", uf_line_origin(c, c->line), c->line & UF_LINE_MASK, text);
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

/* ------------------------------------------------------------------------ */
/* Names and specifiers                                                      */
/* ------------------------------------------------------------------------ */

bool uf_unit_name_chars(const char *s, size_t n, bool at_ok) {
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
                return (flags & UNIT_NAME_PLAIN) && uf_unit_name_chars(name, body, false);
        size_t prefix = (size_t) (at - name), inst = body - prefix - 1;
        if (prefix == 0 || !uf_unit_name_chars(name, prefix, false))
                return false;
        if (inst == 0)
                return flags & UNIT_NAME_TEMPLATE;
        return (flags & UNIT_NAME_INSTANCE) && uf_unit_name_chars(at + 1, inst, true);
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

/* Specifiers of later systemd versions than 252 (%q: the pretty host name, 254). */
#define LATER_SPECIFIERS "q"

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
        default: /* the manager's and the machine's (unit-specifiers.c) */
                return uf_put_system_specifier(c, b, spec);
        }
}

/* Resolves every specifier of systemd 252 in a value of key k into *ret. */
int uf_resolve_specifiers(struct parse_ctx *c, const struct key_def *k, const char *in, char **ret) {
        struct unit_buf b = {};
        int r = 0;
        for (const char *p = in; *p && r >= 0; p++) {
                if (*p != '%' || !p[1]) { /* a stray % at the end stays, as in systemd */
                        r = unit_buf_putc(&b, *p);
                        continue;
                }
                p++;
                r = put_specifier(c, &b, *p);
                char q[QUOTE_BUF];
                if (r == -EBADSLT && strchr(LATER_SPECIFIERS, *p))
                        r = report(c, LOG_ERR, EOPNOTSUPP, "%s=: specifier %%%c is newer than systemd 252: not supported in %s",
                                   k->key, *p, uf_quote(q, in));
                else if (r == -EBADSLT)
                        r = syntax_error(c, "%s=: unknown specifier %%%c in %s", k->key, *p, uf_quote(q, in));
                else if (r == -ENXIO && strchr("tSCLEd", *p))
                        r = report(c, LOG_ERR, ENXIO, "%s=: specifier %%%c: %s is not set in tend's environment in %s",
                                   k->key, *p, *p == 't' || *p == 'd' ? "$XDG_RUNTIME_DIR" : "$HOME", uf_quote(q, in));
                else if (r < 0 && r != -ENOMEM)
                        r = report(c, LOG_ERR, -r, "%s=: specifier %%%c cannot be resolved (%s) in %s", k->key, *p,
                                   strerror(-r), uf_quote(q, in));
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
/* Words and lists                                                           */
/* ------------------------------------------------------------------------ */

/* Extracts the next word of an assignment, reporting bad quoting; 1, 0 at the end, or an error. */
int uf_next_word(struct parse_ctx *c, const struct key_def *k, const char **p, const char *value, char **ret,
              bool *bad_escape) {
        int r = unit_extract_word(p, EXTRACT_UNQUOTE | EXTRACT_CUNESCAPE, ret, bad_escape);
        char q[QUOTE_BUF];
        if (r == -EINVAL)
                return syntax_error(c, "%s=: unbalanced quoting in %s", k->key, uf_quote(q, value));
        return r;
}

int uf_next_word_resolved(struct parse_ctx *c, const struct key_def *k, const char **p, const char *value, char **ret,
                          bool *bad_escape) {
        _cleanup_free_ char *w = NULL;
        int r = uf_next_word(c, k, p, value, &w, bad_escape);
        if (r <= 0)
                return r;
        r = uf_resolve_specifiers(c, k, w, ret);
        return r < 0 ? r : 1;
}

void uf_warn_bad_escape(struct parse_ctx *c, const struct key_def *k, const char *value, bool bad) {
        char q[QUOTE_BUF];
        if (bad)
                report(c, LOG_WARNING, 0, "%s=: unknown escape sequence kept as written in %s", k->key, uf_quote(q, value));
}

/* ------------------------------------------------------------------------ */
/* The unit as a whole                                                       */
/* ------------------------------------------------------------------------ */

/* Environment=: a later NAME replaces an earlier one in place (systemd's strv_env_replace). */
static int finish_environment(struct parse_ctx *c) {
        struct strv_builder *l = &c->lists[LIST_ENVIRONMENT];
        return l->n ? unit_env_merge(&c->u->environment, l->v) : 0;
}

static int finish_lists(struct parse_ctx *c) {
        char ***dst[_LIST_MAX] = {
                [LIST_REQUIRES] = &c->u->requires, [LIST_WANTS] = &c->u->wants, [LIST_BINDS_TO] = &c->u->binds_to,
                [LIST_AFTER] = &c->u->after,       [LIST_BEFORE] = &c->u->before,
                [LIST_SUPPLEMENTARY_GROUPS] = &c->sb.supplementary_groups,
                [LIST_ALIAS] = &c->u->aliases,
        };
        if (c->lists[LIST_SUPPLEMENTARY_GROUPS].v)
                c->sb_set = true;
        for (int i = 0; i < _LIST_MAX; i++)
                if (dst[i]) {
                        *dst[i] = c->lists[i].v;
                        c->lists[i] = (struct strv_builder) {};
                }
        if (c->u->aliases) /* sorted, once each: load merges them with DIR's symlinks */
                uf_strv_sort_unique(c->u->aliases);
        int k = uf_finish_dep_keys(c);
        if (k >= 0)
                k = uf_finish_cluster_keys(c); /* etcd */
        return k < 0 ? k : finish_environment(c);
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
        if (u->type == UNIT_TYPE_IDLE) /* systemd's only difference is console ordering */
                u->type = UNIT_TYPE_SIMPLE;
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
        uf_verify_process(c); /* exec */
        uf_finish_extra(c);   /* corpus */
}

static void sandbox_keys_clear(struct unit_sandbox_keys *s) {
        free(s->user);
        free(s->group);
        strv_free(s->supplementary_groups);
        sandbox_syscall_filter_clear(&s->syscall_filter);
        if (s->exec) /* exec: issue 16's process keys */
                unit_exec_keys_clear(s->exec);
        free(s->exec);
        unit_hardening_keys_free(s->hardening); /* seccomp */
        unit_namespace_keys_free(s->ns); /* ns */
        if (s->bpf_cache) /* cost17: exec's, freed as exec says */
                s->bpf_cache->release(s->bpf_cache);
        *s = unit_sandbox_defaults;
}

struct unit_file *unit_file_free(struct unit_file *u) {
        if (!u)
                return NULL;
        free(u->name);
        free(u->path);
        free(u->instance);
        free(u->description);
        strv_free(u->requires);
        strv_free(u->wants);
        strv_free(u->binds_to);
        strv_free(u->after);
        strv_free(u->before);
        uf_dep_keys_free(u->dep_keys);
        unit_command_list_clear(&u->exec_start_pre);
        unit_command_list_clear(&u->exec_start);
        unit_command_list_clear(&u->exec_start_post);
        unit_command_list_clear(&u->exec_stop);
        unit_command_list_clear(&u->exec_reload);
        strv_free(u->environment);
        for (size_t i = 0; i < u->n_environment_files; i++)
                free(u->environment_files[i].path);
        free(u->environment_files);
        free(u->working_directory);
        free(u->standard_output.path);
        free(u->standard_error.path);
        free(u->syslog_identifier);
        free(u->pid_file);
        if (u->sandbox) {
                sandbox_keys_clear(u->sandbox);
                free(u->sandbox);
        }
        free(u->exit_statuses);
        unit_conditions_free(u->conditions);
        strv_free(u->aliases);
        strv_free(u->dropins);
        unit_hardening_free(u->hardening); /* security */
        unit_cluster_keys_free(u->cluster_keys); /* etcd */
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
        uf_hardening_parse_free(c); /* security */
        for (int i = 0; i < _LIST_MAX; i++)
                strv_builder_clear(&c->lists[i]);
}

/* The drop-ins' paths, kept for status and --verify. */
static int keep_dropins(struct parse_ctx *c, const struct unit_text *texts, size_t n) {
        if (n < 2)
                return 0;
        c->u->dropins = calloc(n, sizeof(char *));
        if (!c->u->dropins)
                return -ENOMEM;
        for (size_t i = 1; i < n; i++)
                if (!(c->u->dropins[i - 1] = strdup(texts[i].origin)))
                        return -ENOMEM;
        return 0;
}

/* Every text parsed in order (the main file, then its drop-ins): each line
 * number carries its text's index, so that messages name the right file. */
static int parse_all(struct parse_ctx *c, const struct unit_text *texts, size_t n) {
        int r = keep_dropins(c, texts, n);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                c->line_base = (unsigned) i << UF_LINE_FILE_SHIFT;
                r = uf_parse_text(c, texts[i].data ? texts[i].data : "", texts[i].size);
        }
        c->line_base = 0;
        c->line = 0;
        return r;
}

/* The fingerprint of every text and its file name (a renamed drop-in
 * changes the order). Not a defence against crafted collisions (whoever
 * writes DIR runs commands anyway). */
static void fingerprint(struct unit_file *u, const struct unit_text *texts, size_t n) {
        uint64_t h = fnv1a_64(texts[0].data, texts[0].size);
        size_t size = texts[0].size;
        for (size_t i = 1; i < n; i++) {
                uint64_t parts[3] = { h, fnv1a_64_str(texts[i].origin), fnv1a_64(texts[i].data, texts[i].size) };
                h = fnv1a_64(parts, sizeof parts);
                size += texts[i].size + 1;
        }
        u->text_size = size;
        u->text_hash = h;
}

int unit_file_parse(const char *name, const char *origin, const char *data, size_t size, struct unit_file **ret,
                    char **ret_message) {
        const struct unit_text t = { origin, data, size };
        if (!origin)
                return -EINVAL;
        return unit_file_parse_texts(name, &t, 1, ret, ret_message);
}

int unit_file_parse_texts(const char *name, const struct unit_text *texts, size_t n, struct unit_file **ret,
                          char **ret_message) {
        if (!name || !texts || n == 0 || n > UNIT_DROPINS_MAX + 1 || !ret)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!texts[i].origin || (!texts[i].data && texts[i].size))
                        return -EINVAL;
        if (ret_message)
                *ret_message = NULL;
        const char *origin = texts[0].origin;
        char q[QUOTE_BUF];
        if (!unit_name_is_valid(name, UNIT_NAME_PLAIN | UNIT_NAME_INSTANCE))
                return log_error_errno(EINVAL, "%s: invalid unit name %s", origin, uf_quote(q, name));
        for (size_t i = 0; i < n; i++)
                if (texts[i].size > UNIT_FILE_SIZE_MAX)
                        return log_error_errno(EFBIG, "%s: larger than %d bytes", texts[i].origin, UNIT_FILE_SIZE_MAX);
        struct parse_ctx c;
        int r = ctx_init(&c, name, origin);
        c.texts = texts;
        c.n_texts = n;
        if (r >= 0)
                r = parse_all(&c, texts, n);
        if (r >= 0 && !c.error)
                r = finish_lists(&c);
        if (r >= 0 && !c.error)
                verify(&c);
        if (r >= 0 && !c.error)
                r = uf_finish_hardening(&c); /* security */
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
                r = log_error_errno(r, "%s: %m", origin);
        else
                r = c.error;
        if (r < 0) {
                if (ret_message)
                        *ret_message = TAKE_PTR(c.message);
                ctx_done(&c);
                return r;
        }
        fingerprint(c.u, texts, n);
        *ret = TAKE_PTR(c.u);
        ctx_done(&c);
        return 0;
}
