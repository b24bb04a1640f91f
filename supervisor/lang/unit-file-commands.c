/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser's command lines (unit-file.c; systemd.service(5)
 * "COMMAND LINES"): ExecStartPre=, ExecStart=, ExecStartPost=, ExecStop=,
 * ExecReload=.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "unit-file-internal.h"

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

/*
 * The prefixes of the first word, in any order, each once (systemd.service(5)
 * "COMMAND LINES"): '-', '@', ':', and one of '+', '!', '!!' (a second '!'
 * anywhere in the prefixes makes "!!", as in systemd).
 */
static int command_prefixes(const char **f, unsigned *flags, bool *at) {
        const unsigned privileged = UNIT_COMMAND_FULL_PRIVILEGES | UNIT_COMMAND_NO_SETUID | UNIT_COMMAND_AMBIENT_MAGIC;
        for (;; (*f)++) {
                if (**f == '-' && !(*flags & UNIT_COMMAND_IGNORE_FAILURE))
                        *flags |= UNIT_COMMAND_IGNORE_FAILURE;
                else if (**f == '@' && !*at)
                        *at = true;
                else if (**f == ':' && !(*flags & UNIT_COMMAND_NO_ENV_EXPAND))
                        *flags |= UNIT_COMMAND_NO_ENV_EXPAND;
                else if (**f == '+' && !(*flags & privileged))
                        *flags |= UNIT_COMMAND_FULL_PRIVILEGES;
                else if (**f == '!' && !(*flags & (UNIT_COMMAND_FULL_PRIVILEGES | UNIT_COMMAND_AMBIENT_MAGIC)))
                        *flags = *flags & UNIT_COMMAND_NO_SETUID ? (*flags & ~UNIT_COMMAND_NO_SETUID) | UNIT_COMMAND_AMBIENT_MAGIC
                                                                 : *flags | UNIT_COMMAND_NO_SETUID;
                else
                        return 0;
        }
}

static int check_executable(struct parse_ctx *c, const struct key_def *k, const char *path) {
        char q[QUOTE_BUF];
        if (!*path)
                return syntax_error(c, "%s=: empty executable path", k->key);
        if (path[0] == '$')
                return syntax_error(c, "%s=: the executable may not be a variable: %s", k->key, uf_quote(q, path));
        for (const char *s = path; *s; s++)
                if ((unsigned char) *s < 0x20 || *s == 0x7f || strchr("\"'\\", *s))
                        return syntax_error(c, "%s=: executable path contains special characters: %s", k->key,
                                            uf_quote(q, path));
        size_t n = strlen(path);
        if (path[n - 1] == '/')
                return syntax_error(c, "%s=: executable path is a directory: %s", k->key, uf_quote(q, path));
        bool ok = path[0] == '/' ? n < PATH_MAX : n <= NAME_MAX && !strchr(path, '/') && !streq(path, ".") && !streq(path, "..");
        if (!ok)
                return syntax_error(c, "%s=: neither an absolute path nor a file name: %s", k->key, uf_quote(q, path));
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
        struct strv_builder argv = {};
        bool at = false, bad = false;
        int r = uf_next_word(c, k, p, value, &first, &bad);
        if (r <= 0)
                return r < 0 ? r : -EINVAL;
        const char *f = first;
        command_prefixes(&f, &cmd->flags, &at);
        r = uf_resolve_specifiers(c, k, f, &cmd->path);
        if (r >= 0)
                r = check_executable(c, k, cmd->path);
        if (r >= 0 && !at) {
                char *s = strdup(cmd->path);
                r = s ? strv_builder_push(&argv, s) : -ENOMEM;
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
                        r = uf_next_word(c, k, p, value, &w, &bad);
                if (r == 0)
                        break;
                if (r > 0)
                        r = uf_resolve_specifiers(c, k, w, &a);
                free(w);
                if (r >= 0)
                        r = strv_builder_push(&argv, a);
        }
        uf_warn_bad_escape(c, k, value, bad);
        char q[QUOTE_BUF];
        if (r >= 0 && argv.n == 0)
                r = syntax_error(c, "%s=: \"@\" without an argv[0] in %s", k->key, uf_quote(q, value));
        for (size_t i = 0; r >= 0 && i < argv.n && !(cmd->flags & UNIT_COMMAND_NO_ENV_EXPAND); i++)
                if (!unit_word_variables_valid(argv.v[i]))
                        r = syntax_error(c, "%s=: invalid variable reference in %s (write $$ for a literal $)", k->key,
                                         uf_quote(q, argv.v[i]));
        if (r < 0) {
                strv_builder_clear(&argv);
                return r;
        }
        return strv_pack(argv.v, &cmd->argv);
}

int uf_parse_exec(struct parse_ctx *c, const struct key_def *k, const char *value) {
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
