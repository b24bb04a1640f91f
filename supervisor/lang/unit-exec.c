/* SPDX-License-Identifier: MIT */
/* Command lines and environments of a unit: the start-time half (unit-exec.h). */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash-util.h"
#include "hashmap.h"
#include "log.h"
#include "unit-exec.h"

#define WHITESPACE " \t\n\r"

/* ------------------------------------------------------------------------ */
/* Growable string and string vector                                         */
/* ------------------------------------------------------------------------ */

int unit_buf_grow(struct unit_buf *b, size_t more) {
        if (b->len + more + 1 <= b->cap)
                return 0;
        if (more > SIZE_MAX / 4 - b->len)
                return -ENOMEM;
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->len + more + 1)
                cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s)
                return -ENOMEM;
        b->s = s;
        b->cap = cap;
        return 0;
}

int unit_buf_put(struct unit_buf *b, const char *s, size_t n) {
        if (unit_buf_grow(b, n) < 0)
                return -ENOMEM;
        memcpy(b->s + b->len, s, n);
        b->len += n;
        b->s[b->len] = '\0';
        return 0;
}

int unit_buf_putc(struct unit_buf *b, char c) {
        return unit_buf_put(b, &c, 1);
}

char *unit_buf_take(struct unit_buf *b) {
        if (!b->s && unit_buf_grow(b, 0) < 0)
                return NULL;
        b->s[b->len] = '\0';
        char *s = b->s;
        if (b->cap > b->len + 1) { /* what a unit file keeps, it keeps at its size */
                char *fit = realloc(s, b->len + 1);
                if (fit)
                        s = fit;
        }
        *b = (struct unit_buf) {};
        return s;
}

/* ------------------------------------------------------------------------ */
/* Words                                                                     */
/* ------------------------------------------------------------------------ */

static int unhex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static size_t utf8_encode(uint32_t u, char out[static 4]) {
        if (u < 0x80) {
                out[0] = (char) u;
                return 1;
        }
        if (u < 0x800) {
                out[0] = (char) (0xc0 | (u >> 6));
                out[1] = (char) (0x80 | (u & 0x3f));
                return 2;
        }
        if (u < 0x10000) {
                out[0] = (char) (0xe0 | (u >> 12));
                out[1] = (char) (0x80 | ((u >> 6) & 0x3f));
                out[2] = (char) (0x80 | (u & 0x3f));
                return 3;
        }
        out[0] = (char) (0xf0 | (u >> 18));
        out[1] = (char) (0x80 | ((u >> 12) & 0x3f));
        out[2] = (char) (0x80 | ((u >> 6) & 0x3f));
        out[3] = (char) (0x80 | (u & 0x3f));
        return 4;
}

/* Reads n hex digits of p; -1 if one is missing. */
static int64_t unhex_n(const char *p, int n) {
        int64_t v = 0;
        for (int i = 0; i < n; i++) {
                int d = unhex(p[i]);
                if (d < 0)
                        return -1;
                v = v * 16 + d;
        }
        return v;
}

/*
 * One C escape, p just past the backslash (systemd.syntax(7) table). Writes
 * the bytes to out, their count to *ret_n; returns the number of characters
 * of p consumed, or -EINVAL for an escape not in the table (and for NUL,
 * which a C string cannot hold).
 */
static int cunescape_one(const char *p, char out[static 4], size_t *ret_n) {
        static const char simple[] = "a\ab\bf\fn\nr\rt\tv\v\\\\\"\"''s ";
        for (const char *s = simple; *s; s += 2)
                if (p[0] == s[0]) {
                        out[0] = s[1];
                        *ret_n = 1;
                        return 1;
                }
        int64_t v;
        switch (p[0]) {
        case 'x':
                v = unhex_n(p + 1, 2);
                if (v <= 0)
                        return -EINVAL;
                out[0] = (char) v; /* a raw byte, as systemd allows */
                *ret_n = 1;
                return 3;
        case 'u':
        case 'U': {
                int digits = p[0] == 'u' ? 4 : 8;
                v = unhex_n(p + 1, digits);
                if (v <= 0 || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
                        return -EINVAL;
                *ret_n = utf8_encode((uint32_t) v, out);
                return digits + 1;
        }
        case '0' ... '7':
                if (p[1] < '0' || p[1] > '7' || p[2] < '0' || p[2] > '7')
                        return -EINVAL;
                v = (p[0] - '0') * 64 + (p[1] - '0') * 8 + (p[2] - '0');
                if (v == 0 || v > 255)
                        return -EINVAL;
                out[0] = (char) v;
                *ret_n = 1;
                return 3;
        default:
                return -EINVAL;
        }
}

/*
 * The character(s) a backslash at *s - 1 stands for; advances *s past them.
 * -EINVAL for a trailing backslash without EXTRACT_RELAX.
 */
static int put_escaped(struct unit_buf *b, const char **s, unsigned flags, bool *bad) {
        const char *e = *s;
        if (!*e)
                return flags & EXTRACT_RELAX ? unit_buf_putc(b, '\\') : -EINVAL;
        if (!(flags & EXTRACT_CUNESCAPE)) {
                *s = e + 1;
                return unit_buf_putc(b, *e);
        }
        char u[4];
        size_t n = 0;
        int k = cunescape_one(e, u, &n);
        if (k < 0) { /* kept verbatim, as systemd does after its warning */
                *bad = true;
                *s = e + 1;
                return unit_buf_put(b, e - 1, 2);
        }
        *s = e + k;
        return unit_buf_put(b, u, n);
}

int unit_extract_word(const char **p, unsigned flags, char **ret, bool *ret_bad_escape) {
        if (!p || !*p || !ret)
                return -EINVAL;
        const char *s = *p + strspn(*p, WHITESPACE);
        if (!*s) {
                *p = s;
                *ret = NULL;
                return 0;
        }
        struct unit_buf b = {};
        bool bad = false;
        char quote = 0;
        int r = 0;
        while (r >= 0) {
                char c = *s;
                if (c == '\\') {
                        s++;
                        r = put_escaped(&b, &s, flags, &bad);
                } else if (quote && !c) {
                        r = flags & EXTRACT_RELAX ? 1 : -EINVAL; /* an unbalanced quote */
                        if (r > 0)
                                break;
                } else if (quote) {
                        r = c == quote ? 0 : unit_buf_putc(&b, c);
                        quote = c == quote ? 0 : quote;
                        s++;
                } else if (!c || strchr(WHITESPACE, c))
                        break;
                else if ((flags & EXTRACT_UNQUOTE) && (c == '\'' || c == '"')) {
                        quote = c;
                        s++;
                } else {
                        r = unit_buf_putc(&b, c);
                        s++;
                }
        }
        char *w = r >= 0 ? unit_buf_take(&b) : NULL;
        if (!w) {
                free(b.s);
                return r < 0 ? r : -ENOMEM;
        }
        *p = s + strspn(s, WHITESPACE);
        *ret = w;
        if (ret_bad_escape && bad)
                *ret_bad_escape = true;
        return 1;
}

static bool env_name_char(char c, bool first) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (!first && c >= '0' && c <= '9');
}

static bool env_name_is_valid_n(const char *s, size_t n) {
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!env_name_char(s[i], i == 0))
                        return false;
        return true;
}

bool unit_env_name_is_valid(const char *s) {
        return s && env_name_is_valid_n(s, strlen(s));
}

bool unit_utf8_is_valid(const char *s, size_t len) {
        const unsigned char *p = (const unsigned char *) s;
        for (size_t i = 0; i < len;) {
                unsigned char c = p[i];
                size_t n;
                uint32_t u;
                if (c < 0x80) {
                        i++;
                        continue;
                } else if ((c & 0xe0) == 0xc0)
                        n = 2, u = c & 0x1f;
                else if ((c & 0xf0) == 0xe0)
                        n = 3, u = c & 0x0f;
                else if ((c & 0xf8) == 0xf0)
                        n = 4, u = c & 0x07;
                else
                        return false;
                if (len - i < n)
                        return false;
                for (size_t k = 1; k < n; k++) {
                        if ((p[i + k] & 0xc0) != 0x80)
                                return false;
                        u = (u << 6) | (p[i + k] & 0x3f);
                }
                static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
                if (u < min[n] || u > 0x10ffff || (u >= 0xd800 && u <= 0xdfff))
                        return false;
                i += n;
        }
        return true;
}

bool unit_env_assignment_is_valid(const char *s) {
        if (!s)
                return false;
        const char *eq = strchr(s, '=');
        return eq && env_name_is_valid_n(s, (size_t) (eq - s)) && unit_utf8_is_valid(eq + 1, strlen(eq + 1));
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

void unit_command_list_clear(struct unit_command_list *l) {
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++) {
                free(l->commands[i].path);
                free(l->commands[i].argv); /* packed */
        }
        free(l->commands);
        *l = (struct unit_command_list) {};
}

/* The value of name[0..n) in envp, or NULL. */
static const char *env_lookup(char *const *envp, const char *name, size_t n) {
        for (; envp && *envp; envp++)
                if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
                        return *envp + n + 1;
        return NULL;
}

/* A word that is exactly $NAME (split expansion); NULL otherwise. */
static const char *split_reference(const char *w) {
        return w[0] == '$' && w[1] != '{' && w[1] != '$' ? w + 1 : NULL;
}

bool unit_word_variables_valid(const char *w) {
        const char *name = split_reference(w);
        if (name)
                return unit_env_name_is_valid(name);
        for (const char *p = w; (p = strchr(p, '$'));) {
                if (p[1] == '{') {
                        const char *close = strchr(p + 2, '}');
                        if (!close || !env_name_is_valid_n(p + 2, (size_t) (close - p - 2)))
                                return false;
                        p = close + 1;
                } else
                        p += p[1] == '$' ? 2 : 1;
        }
        return true;
}

static int note_unset(struct strv_builder *unset, const char *name, size_t n) {
        char *s = strndup(name, n);
        return s ? strv_builder_push(unset, s) : -ENOMEM;
}

/* ${NAME} and $$ inside one word; one word out. */
static int expand_word(const char *w, char *const *envp, struct strv_builder *out, struct strv_builder *unset) {
        struct unit_buf b = {};
        int r = 0;
        for (const char *p = w; *p && r >= 0;) {
                const char *close = p[0] == '$' && p[1] == '{' ? strchr(p + 2, '}') : NULL;
                if (close && env_name_is_valid_n(p + 2, (size_t) (close - p - 2))) {
                        size_t n = (size_t) (close - p - 2);
                        const char *v = env_lookup(envp, p + 2, n);
                        r = v ? unit_buf_put(&b, v, strlen(v)) : note_unset(unset, p + 2, n);
                        p = close + 1;
                } else if (p[0] == '$' && p[1] == '$') {
                        r = unit_buf_putc(&b, '$');
                        p += 2;
                } else
                        r = unit_buf_putc(&b, *p++);
        }
        char *s = r >= 0 ? unit_buf_take(&b) : NULL;
        if (!s) {
                free(b.s);
                return -ENOMEM;
        }
        return strv_builder_push(out, s);
}

/* $NAME as a whole word: the value split at whitespace, quotes respected and removed. */
static int expand_split(const char *name, char *const *envp, struct strv_builder *out, struct strv_builder *unset) {
        const char *v = env_lookup(envp, name, strlen(name));
        if (!v)
                return note_unset(unset, name, strlen(name));
        for (;;) {
                char *word;
                int r = unit_extract_word(&v, EXTRACT_UNQUOTE | EXTRACT_RELAX, &word, NULL);
                if (r <= 0)
                        return r;
                r = strv_builder_push(out, word);
                if (r < 0)
                        return r;
        }
}

int unit_command_expand(const struct unit_command *cmd, char *const *envp, char ***ret_argv, char ***ret_unset) {
        if (!cmd || !cmd->argv || !ret_argv)
                return -EINVAL;
        struct strv_builder out = {}, unset = {};
        int r = 0;
        for (char **w = cmd->argv; *w && r >= 0; w++) {
                const char *name = split_reference(*w);
                if (cmd->flags & UNIT_COMMAND_NO_ENV_EXPAND) {
                        char *c = strdup(*w);
                        r = c ? strv_builder_push(&out, c) : -ENOMEM;
                } else if (name && unit_env_name_is_valid(name))
                        r = expand_split(name, envp, &out, &unset);
                else
                        r = expand_word(*w, envp, &out, &unset);
        }
        if (r >= 0 && out.n == 0) { /* '@' with an argv[0] that expanded to nothing: never exec an empty argv */
                char *c = strdup(cmd->path);
                r = c ? strv_builder_push(&out, c) : -ENOMEM;
        }
        char **argv = r >= 0 ? strv_builder_take(&out) : NULL;
        if (!argv) {
                strv_free(out.v);
                strv_free(unset.v);
                return -ENOMEM;
        }
        *ret_argv = argv;
        if (ret_unset)
                *ret_unset = unset.v;
        else
                strv_free(unset.v);
        return 0;
}

int unit_command_find_executable(const struct unit_command *cmd, char *const *envp, char **ret) {
        if (!cmd || !cmd->path || !*cmd->path || !ret)
                return -EINVAL;
        if (cmd->path[0] == '/') {
                char *s = strdup(cmd->path);
                if (!s)
                        return -ENOMEM;
                *ret = s;
                return 0;
        }
        const char *path = env_lookup(envp, "PATH", 4);
        if (!path)
                path = UNIT_DEFAULT_PATH;
        int r = -ENOENT;
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, ":");
                if (n > 0 && p[0] == '/') { /* relative entries would depend on tend's cwd: skipped */
                        char *candidate;
                        if (asprintf(&candidate, "%.*s/%s", (int) n, p, cmd->path) < 0)
                                return -ENOMEM;
                        struct stat st;
                        if (stat(candidate, &st) == 0 && S_ISREG(st.st_mode)) {
                                if (access(candidate, X_OK) == 0) {
                                        *ret = candidate;
                                        return 0;
                                }
                                r = -EACCES; /* found but not executable: exit 126, not 127 */
                        }
                        free(candidate);
                }
                p += n + (p[n] == ':');
        }
        return r;
}

/* ------------------------------------------------------------------------ */
/* Environment                                                               */
/* ------------------------------------------------------------------------ */

bool unit_env_is_private(const char *a) {
        static const char *const exact[] = { "NOTIFY_SOCKET", "JOURNAL_STREAM" };
        static const char *const prefix[] = { "WATCHDOG_", "LISTEN_", "TEND_" };
        if (!a)
                return false;
        size_t n = strcspn(a, "=");
        for (size_t i = 0; i < ELEMENTSOF(exact); i++)
                if (n == strlen(exact[i]) && strncmp(a, exact[i], n) == 0)
                        return true;
        for (size_t i = 0; i < ELEMENTSOF(prefix); i++)
                if (n >= strlen(prefix[i]) && strncmp(a, prefix[i], strlen(prefix[i])) == 0)
                        return true;
        return false;
}

/*
 * An environment under construction: a strv in order plus a hash index of
 * names (common/hashmap.h, keyed by the FNV-1a of the name), so that a start
 * with a large EnvironmentFile= stays linear.
 */
struct env_slot {
        uint64_t key;  /* the name's hash, never 0 */
        size_t index;  /* into sv.v */
};
HASHMAP_DEFINE(env_index, struct env_slot);

struct envb {
        struct strv_builder sv;
        struct env_index index;
};

static uint64_t env_key(const char *name, size_t n) {
        uint64_t h = fnv1a_64(name, n);
        return h ? h : 1;
}

/* The index entry of name[0..n), or NULL. */
static struct env_slot *envb_find(struct envb *b, const char *name, size_t n) {
        for (struct env_slot *e = env_index_get(&b->index, env_key(name, n)); e; e = env_index_get_next(&b->index, e)) {
                const char *a = b->sv.v[e->index];
                if (strncmp(a, name, n) == 0 && a[n] == '=')
                        return e;
        }
        return NULL;
}

/* Sets assignment ("NAME=VALUE", taken, freed on failure); replace selects override or keep-first. */
static int envb_set(struct envb *b, char *a, bool replace) {
        size_t n = strcspn(a, "=");
        struct env_slot *e = envb_find(b, a, n);
        if (e) {
                if (replace) {
                        free(b->sv.v[e->index]);
                        b->sv.v[e->index] = a;
                } else
                        free(a);
                return 0;
        }
        if (env_index_reserve(&b->index, env_index_size(&b->index) + 1) < 0) {
                free(a);
                return -ENOMEM;
        }
        int r = strv_builder_push(&b->sv, a);
        if (r < 0)
                return r;
        (void) env_index_put(&b->index, (struct env_slot) { .key = env_key(a, n), .index = b->sv.n - 1 });
        return 0;
}

static int envb_set_copy(struct envb *b, const char *a, bool replace) {
        char *c = strdup(a);
        return c ? envb_set(b, c, replace) : -ENOMEM;
}

static void envb_done(struct envb *b) {
        strv_free(b->sv.v);
        env_index_done(&b->index);
        *b = (struct envb) {};
}

static int envb_from_strv(struct envb *b, char *const *l) {
        for (; l && *l; l++) {
                int r = envb_set_copy(b, *l, true);
                if (r < 0)
                        return r;
        }
        return 0;
}

int unit_env_set(char ***envp, const char *a) {
        if (!envp || !a || !strchr(a, '='))
                return -EINVAL;
        size_t n = strcspn(a, "=");
        for (char **e = *envp; e && *e; e++)
                if (strncmp(*e, a, n) == 0 && (*e)[n] == '=') {
                        char *c = strdup(a);
                        if (!c)
                                return -ENOMEM;
                        free(*e);
                        *e = c;
                        return 0;
                }
        return strv_extend(envp, a);
}

int unit_env_merge(char ***envp, char *const *l) {
        if (!envp)
                return -EINVAL;
        struct envb b = {};
        int r = env_index_reserve(&b.index, 64);
        if (r >= 0)
                r = envb_from_strv(&b, *envp);
        if (r >= 0)
                r = envb_from_strv(&b, l);
        char **v = r >= 0 ? strv_builder_take(&b.sv) : NULL;
        if (!v) {
                envb_done(&b);
                return r < 0 ? r : -ENOMEM;
        }
        env_index_done(&b.index);
        strv_free(*envp);
        *envp = v;
        return 0;
}

/* The EnvironmentFile= state machine (systemd's env-file format). */
enum env_state {
        ENV_PRE_KEY,
        ENV_KEY,
        ENV_PRE_VALUE,
        ENV_VALUE,
        ENV_VALUE_ESCAPE,
        ENV_SINGLE_QUOTE,
        ENV_DOUBLE_QUOTE,
        ENV_DOUBLE_QUOTE_ESCAPE,
        ENV_COMMENT,
        ENV_COMMENT_ESCAPE,
};

struct env_parser {
        const char *origin;
        unsigned line, key_line;
        struct unit_buf key, value;
        size_t key_trim, value_trim; /* length without trailing unquoted whitespace */
        struct envb *b;
        int count;
};

static int env_push(struct env_parser *ep) {
        size_t kn = ep->key_trim, vn = ep->value_trim;
        const char *k = ep->key.s ? ep->key.s : "", *v = ep->value.s ? ep->value.s : "";
        int r = 0;
        if (!env_name_is_valid_n(k, kn) || !unit_utf8_is_valid(k, kn))
                log_warning("%s:%u: invalid variable name \"%.*s\", ignoring", ep->origin, ep->key_line,
                            (int) (kn > 200 ? 200 : kn), k);
        else if (!unit_utf8_is_valid(v, vn))
                log_warning("%s:%u: value of %.*s is not valid UTF-8, ignoring", ep->origin, ep->key_line, (int) kn, k);
        else {
                char *a;
                if (asprintf(&a, "%.*s=%.*s", (int) kn, k, (int) vn, v) < 0)
                        r = -ENOMEM;
                else
                        r = envb_set(ep->b, a, true);
                if (r >= 0)
                        ep->count++;
        }
        ep->key.len = ep->value.len = ep->key_trim = ep->value_trim = 0;
        return r;
}

static void env_drop_key(struct env_parser *ep) {
        size_t kn = ep->key_trim;
        log_warning("%s:%u: line without '=' ignored: \"%.*s\"", ep->origin, ep->key_line, (int) (kn > 200 ? 200 : kn),
                    ep->key.s ? ep->key.s : "");
        ep->key.len = ep->key_trim = 0;
}

/* Appends c to the value; unquoted whitespace is trimmed at the end of the value. */
static int env_value_putc(struct env_parser *ep, char c, bool quoted) {
        int r = unit_buf_putc(&ep->value, c);
        if (quoted || !strchr(WHITESPACE, c))
                ep->value_trim = ep->value.len;
        return r;
}

static int env_step(struct env_parser *ep, enum env_state *st, char c) {
        bool nl = c == '\n' || c == '\r';
        switch (*st) {
        case ENV_PRE_KEY:
                if (c == '#' || c == ';')
                        *st = ENV_COMMENT;
                else if (!strchr(WHITESPACE, c)) {
                        *st = ENV_KEY;
                        ep->key_line = ep->line;
                        ep->key_trim = 1;
                        return unit_buf_putc(&ep->key, c);
                }
                return 0;
        case ENV_KEY:
                if (nl) {
                        env_drop_key(ep);
                        *st = ENV_PRE_KEY;
                } else if (c == '=')
                        *st = ENV_PRE_VALUE;
                else {
                        int r = unit_buf_putc(&ep->key, c);
                        if (!strchr(WHITESPACE, c))
                                ep->key_trim = ep->key.len;
                        return r;
                }
                return 0;
        case ENV_PRE_VALUE:
                if (nl) {
                        *st = ENV_PRE_KEY;
                        return env_push(ep);
                }
                if (c == '\'')
                        *st = ENV_SINGLE_QUOTE;
                else if (c == '"')
                        *st = ENV_DOUBLE_QUOTE;
                else if (c == '\\')
                        *st = ENV_VALUE_ESCAPE;
                else if (!strchr(WHITESPACE, c)) {
                        *st = ENV_VALUE;
                        return env_value_putc(ep, c, false);
                }
                return 0;
        case ENV_VALUE:
                if (nl) {
                        *st = ENV_PRE_KEY;
                        return env_push(ep);
                }
                if (c == '\\') {
                        *st = ENV_VALUE_ESCAPE;
                        return 0;
                }
                return env_value_putc(ep, c, false);
        case ENV_VALUE_ESCAPE:
                *st = ENV_VALUE;
                return nl ? 0 : env_value_putc(ep, c, true); /* an escaped newline continues the line */
        case ENV_SINGLE_QUOTE:
                if (c == '\'') {
                        *st = ENV_PRE_VALUE;
                        return 0;
                }
                return env_value_putc(ep, c, true);
        case ENV_DOUBLE_QUOTE:
                if (c == '"')
                        *st = ENV_PRE_VALUE;
                else if (c == '\\')
                        *st = ENV_DOUBLE_QUOTE_ESCAPE;
                else
                        return env_value_putc(ep, c, true);
                return 0;
        case ENV_DOUBLE_QUOTE_ESCAPE:
                *st = ENV_DOUBLE_QUOTE;
                if (strchr("\"\\`$", c))
                        return env_value_putc(ep, c, true);
                if (c == '\n')
                        return 0;
                int r = env_value_putc(ep, '\\', true); /* like the shell, other escapes keep their backslash */
                return r < 0 ? r : env_value_putc(ep, c, true);
        case ENV_COMMENT:
                if (c == '\\')
                        *st = ENV_COMMENT_ESCAPE;
                else if (nl)
                        *st = ENV_PRE_KEY;
                return 0;
        case ENV_COMMENT_ESCAPE:
                *st = nl ? ENV_PRE_KEY : ENV_COMMENT;
                return 0;
        }
        return 0;
}

static int env_parse_into(const char *data, size_t size, const char *origin, struct envb *b) {
        struct env_parser ep = { .origin = origin ? origin : "environment file", .line = 1, .b = b };
        enum env_state st = ENV_PRE_KEY;
        int r = 0;
        for (size_t i = 0; i < size && r >= 0; i++) {
                r = env_step(&ep, &st, data[i] ? data[i] : '\n'); /* a NUL ends a line, as systemd's reader does */
                if (data[i] == '\n')
                        ep.line++;
        }
        if (r >= 0) {
                if (st == ENV_KEY)
                        env_drop_key(&ep);
                else if (st != ENV_PRE_KEY && st != ENV_COMMENT && st != ENV_COMMENT_ESCAPE)
                        r = env_push(&ep);
        }
        free(ep.key.s);
        free(ep.value.s);
        return r < 0 ? r : ep.count;
}

int unit_env_file_parse(const char *data, size_t size, const char *origin, char ***envp) {
        if ((!data && size) || !envp)
                return -EINVAL;
        struct envb b = {};
        int r = envb_from_strv(&b, *envp);
        int count = r < 0 ? r : env_parse_into(data, size, origin, &b);
        char **v = count >= 0 ? strv_builder_take(&b.sv) : NULL;
        if (!v) {
                envb_done(&b);
                return count < 0 ? count : -ENOMEM;
        }
        env_index_done(&b.index);
        strv_free(*envp);
        *envp = v;
        return count;
}

int unit_read_file(int fd, size_t max, char **ret, size_t *ret_size) {
        struct unit_buf b = {};
        for (;;) {
                if (unit_buf_grow(&b, 4096) < 0) {
                        free(b.s);
                        return -ENOMEM;
                }
                ssize_t n = read(fd, b.s + b.len, b.cap - b.len - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = negative_errno();
                        free(b.s);
                        return r;
                }
                if (n == 0)
                        break;
                b.len += (size_t) n;
                if (b.len > max) {
                        free(b.s);
                        return -EFBIG;
                }
        }
        b.s[b.len] = '\0';
        *ret_size = b.len;
        *ret = b.s;
        return 0;
}

static int env_file_read_one(const char *unit, const char *path, struct envb *b) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                int r = negative_errno();
                return log_error_errno(r, "%s: EnvironmentFile=\"%s\": %m", unit, path);
        }
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return log_error_errno(EINVAL, "%s: EnvironmentFile=\"%s\": not a regular file", unit, path);
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r = unit_read_file(fd, UNIT_ENV_FILE_SIZE_MAX, &data, &size);
        if (r == -EFBIG)
                return log_error_errno(r, "%s: EnvironmentFile=\"%s\": larger than %d bytes", unit, path,
                                       UNIT_ENV_FILE_SIZE_MAX);
        if (r < 0)
                return log_error_errno(r, "%s: EnvironmentFile=\"%s\": %m", unit, path);
        r = env_parse_into(data, size, path, b);
        return r < 0 ? r : 0;
}

static int env_files_load_into(const char *unit, const struct unit_env_file *files, size_t n, struct envb *b) {
        for (size_t i = 0; i < n; i++) {
                glob_t g = {};
                int k = glob(files[i].path, 0, NULL, &g);
                if (k == GLOB_NOMATCH) {
                        globfree(&g);
                        if (files[i].optional)
                                continue;
                        return log_error_errno(ENOENT, "%s: EnvironmentFile=\"%s\": %m", unit, files[i].path);
                }
                if (k != 0) {
                        globfree(&g);
                        return log_error_errno(k == GLOB_NOSPACE ? ENOMEM : EIO, "%s: EnvironmentFile=\"%s\": cannot expand",
                                               unit, files[i].path);
                }
                int r = 0;
                for (size_t j = 0; j < g.gl_pathc && r >= 0; j++)
                        r = env_file_read_one(unit, g.gl_pathv[j], b);
                globfree(&g);
                if (r < 0)
                        return r;
        }
        return 0;
}

int unit_env_files_load(const char *unit, const struct unit_env_file *files, size_t n, char ***envp) {
        if (!unit || (!files && n) || !envp)
                return -EINVAL;
        struct envb b = {};
        int r = envb_from_strv(&b, *envp);
        if (r >= 0)
                r = env_files_load_into(unit, files, n, &b);
        char **v = r >= 0 ? strv_builder_take(&b.sv) : NULL;
        if (!v) {
                envb_done(&b);
                return r < 0 ? r : -ENOMEM;
        }
        env_index_done(&b.index);
        strv_free(*envp);
        *envp = v;
        return 0;
}

static int build_base(struct envb *b, char *const *base, pid_t main_pid) {
        int r = 0;
        for (char *const *e = base; e && *e && r >= 0; e++)
                if (strchr(*e, '=') && **e != '=' && !unit_env_is_private(*e))
                        r = envb_set_copy(b, *e, false); /* of duplicates the first wins, as getenv() sees it */
        if (r >= 0 && !envb_find(b, "PATH", 4))
                r = envb_set_copy(b, "PATH=" UNIT_DEFAULT_PATH, true);
        if (r >= 0 && main_pid > 0) {
                char *a;
                r = asprintf(&a, "MAINPID=%ld", (long) main_pid) < 0 ? -ENOMEM : envb_set(b, a, true);
        }
        return r;
}

int unit_build_environment(const char *unit, char *const *base, pid_t main_pid, char *const *environment,
                           const struct unit_env_file *files, size_t n, char ***ret_envp) {
        if (!unit || (!files && n) || !ret_envp)
                return -EINVAL;
        struct envb b = {};
        int r = env_index_reserve(&b.index, 64);
        if (r >= 0)
                r = build_base(&b, base, main_pid);
        if (r >= 0)
                r = envb_from_strv(&b, environment);
        if (r >= 0)
                r = env_files_load_into(unit, files, n, &b);
        char **v = r >= 0 ? strv_builder_take(&b.sv) : NULL;
        if (!v) {
                envb_done(&b);
                return r < 0 ? r : -ENOMEM;
        }
        env_index_done(&b.index);
        *ret_envp = v;
        return 0;
}
