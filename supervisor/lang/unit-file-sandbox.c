/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser's sandboxing keys (unit-file.c; their values'
 * vocabulary is sandbox-values.h): User=, Group=, SupplementaryGroups=,
 * UMask=, Limit*=, CapabilityBoundingSet=, AmbientCapabilities=,
 * SystemCallFilter=, SystemCallErrorNumber=.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unit-file-internal.h"

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
int uf_parse_user(struct parse_ctx *c, const struct key_def *k, const char *value) {
        char **field = FIELD(c, k, char *), *s = NULL, q[QUOTE_BUF];
        if (*value) {
                int r = uf_resolve_specifiers(c, k, value, &s);
                if (r < 0)
                        return r;
                if (!user_name_is_valid(s)) {
                        r = syntax_error(c, "%s=: invalid %s name %s", k->key, streq(k->key, "User") ? "user" : "group",
                                         uf_quote(q, s));
                        free(s);
                        return r;
                }
        }
        free(*field);
        *field = s;
        return 0;
}

int uf_parse_supplementary_groups(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct strv_builder *l = &c->lists[(uintptr_t) k->data];
        if (!*value) {
                strv_builder_clear(l);
                return 0;
        }
        int r;
        for (const char *p = value;;) {
                char *n = NULL, q[QUOTE_BUF];
                r = uf_next_word_resolved(c, k, &p, value, &n, NULL);
                if (r <= 0)
                        break;
                if (!user_name_is_valid(n)) {
                        r = syntax_error(c, "%s=: invalid group name %s", k->key, uf_quote(q, n));
                        free(n);
                        break;
                }
                r = strv_builder_push(l, n);
                if (r < 0)
                        break;
        }
        return r;
}

int uf_parse_umask(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value) {
                uf_reset_default(c, k);
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
int uf_parse_limit(struct parse_ctx *c, const struct key_def *k, const char *value) {
        int resource = (int) (uintptr_t) k->data;
        struct sandbox_limit *l = &uf_sandbox_keys(c)->limits[resource];
        char q[QUOTE_BUF];
        if (!*value) {
                *l = (struct sandbox_limit) {};
                return 0;
        }
        int r = sandbox_parse_limit(resource, value, &l->rl);
        if (r == -EDOM)
                return syntax_error(c, "%s=: the soft limit is above the hard limit in %s", k->key, uf_quote(q, value));
        if (r == -ERANGE)
                return syntax_error(c, "%s=: out of range: %s", k->key, uf_quote(q, value));
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
int uf_parse_capabilities(struct parse_ctx *c, const struct key_def *k, const char *value) {
        uint64_t *set = FIELD(c, k, uint64_t), initial, sum = 0;
        memcpy(&initial, uf_key_default(k), sizeof initial);
        bool invert = value[0] == '~';
        int r;
        for (const char *p = value + invert;;) {
                _cleanup_free_ char *w = NULL;
                char q[QUOTE_BUF];
                r = uf_next_word(c, k, &p, value, &w, NULL);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                int cap = sandbox_capability_from_name(w);
                if (cap < 0)
                        return syntax_error(c, "%s=: unknown capability %s", k->key, uf_quote(q, w));
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
int uf_parse_syscall_filter(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (*value)
                c->syscall_filter_line = c->line;
        return uf_parse_syscall_list(c, k, value, &uf_sandbox_keys(c)->syscall_filter);
}

int uf_parse_syscall_list(struct parse_ctx *c, const struct key_def *k, const char *value,
                          struct sandbox_syscall_filter *f) {
        if (!*value) {
                sandbox_syscall_filter_clear(f);
                return 0;
        }
        bool invert = value[0] == '~';
        if (!f->set) { /* "~" alone: a deny list denying nothing yet */
                f->set = true;
                f->allow_list = !invert;
        }
        for (const char *p = value + invert;;) {
                _cleanup_free_ char *w = NULL;
                char q[QUOTE_BUF];
                int r = uf_next_word(c, k, &p, value, &w, NULL);
                if (r <= 0)
                        return r;
                r = sandbox_syscall_filter_add(f, w, invert);
                if (r == -EINVAL)
                        return syntax_error(c, "%s=: unknown system call %s", k->key, uf_quote(q, w));
                if (r == -ENOENT)
                        return syntax_error(c, "%s=: unknown system call group %s", k->key, uf_quote(q, w));
                if (r == -EBADMSG)
                        return syntax_error(c, "%s=: invalid error number in %s", k->key, uf_quote(q, w));
                if (r == -EDOM)
                        return syntax_error(c, "%s=: an error number (%s) is only allowed in a deny list (\"~\")",
                                            k->key, uf_quote(q, w));
                if (r < 0)
                        return r;
        }
}

int uf_parse_errno(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value) {
                uf_reset_default(c, k);
                return 0;
        }
        int e = sandbox_errno_from_name(value);
        char q[QUOTE_BUF];
        if (e < 0)
                return syntax_error(c, "%s=: invalid error number %s", k->key, uf_quote(q, value));
        *FIELD(c, k, int) = e;
        return 0;
}
