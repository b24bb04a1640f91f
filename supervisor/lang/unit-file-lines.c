/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser's lines (unit-file.c; systemd.syntax(7)): comments,
 * continuations, section headers, assignments handed to the key table.
 */
#include <string.h>

#include "unit-file-internal.h"

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

/* Whether s is a key or section name as systemd writes them: only such a
 * token is ever quoted back (a file that is not a unit file, e.g. a link to
 * /etc/shadow, must not have its lines copied into the log). */
static bool name_token(const char *s, bool section) {
        size_t n = strlen(s);
        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '_' || s[i] == '-' || (section && s[i] == ' ')))
                        return false;
        return true;
}

static void parse_section_header(struct parse_ctx *c, char *l, enum section *section) {
        size_t n = strlen(l);
        if (l[n - 1] != ']' || n < 3 || strpbrk(l + 1, "[]") != l + n - 1) {
                syntax_error(c, "syntax error: invalid section header");
                *section = SECTION_UNKNOWN;
                return;
        }
        l[n - 1] = '\0';
        const char *name = l + 1;
        if (streq(name, "Unit"))
                *section = SECTION_UNIT;
        else if (streq(name, "Service"))
                *section = SECTION_SERVICE;
        else if (streq(name, "Install"))
                *section = SECTION_INSTALL;
        else if (streq(name, "X-Tend"))
                *section = SECTION_TEND;
        else if (strncmp(name, "X-", 2) == 0)
                *section = SECTION_IGNORED;
        else {
                if (name_token(name, true))
                        report(c, LOG_WARNING, 0, "unknown section [%s], ignoring its keys", name);
                else
                        report(c, LOG_WARNING, 0, "unknown section (not a section name), ignoring its keys");
                *section = SECTION_UNKNOWN;
        }
}

static void parse_assignment(struct parse_ctx *c, enum section section, char *l) {
        static const char *const section_names[] = {
                [SECTION_UNIT] = "Unit", [SECTION_SERVICE] = "Service", [SECTION_INSTALL] = "Install",
                [SECTION_TEND] = "X-Tend" };
        char *eq = strchr(l, '=');
        if (!eq) {
                syntax_error(c, "syntax error: neither a [section] nor a KEY=VALUE assignment");
                return;
        }
        *eq = '\0';
        char *key = strip(l), *value = strip(eq + 1);
        if (!*key) {
                syntax_error(c, "syntax error: assignment without a key");
                return;
        }
        if (section == SECTION_NONE) {
                if (name_token(key, false))
                        syntax_error(c, "syntax error: %s= before any [section]", key);
                else
                        syntax_error(c, "syntax error: an assignment before any [section]");
                return;
        }
        if (section != SECTION_UNIT && section != SECTION_SERVICE && section != SECTION_INSTALL &&
            section != SECTION_TEND)
                return;
        if (strncmp(key, "X-", 2) == 0)
                return;
        if (uf_empty_assignment(c, section, key, value)) /* parsefix: systemd ignores it, so does tend */
                return;
        if (section == SECTION_SERVICE || section == SECTION_UNIT) /* security: what tendctl security reads */
                (void) uf_hardening_note(c, key, value);
        const struct key_def *k = uf_key_lookup(section, key);
        if (k) {
                (void) k->parse(c, k, value); /* reports its own errors */
                return;
        }
        if (uf_refused_key(c, section, key, value)) /* security */
                return;
        if (uf_known_key(c, section, key))
                return;
        if (name_token(key, false))
                report(c, LOG_WARNING, 0, "unknown key \"%s\" in section [%s], ignoring", key, section_names[section]);
        else
                report(c, LOG_WARNING, 0, "unknown key (not a key name) in section [%s], ignoring",
                       section_names[section]);
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
int uf_parse_text(struct parse_ctx *c, const char *data, size_t size) {
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
                c->line = c->line_base | ++lineno;
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
                c->line = c->line_base | first;
                parse_logical_line(c, &section, logical.s);
        }
        if (cont && r >= 0) {
                c->line = c->line_base | first;
                parse_logical_line(c, &section, logical.s);
        }
        free(logical.s);
        return r;
}
