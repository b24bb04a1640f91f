/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser's list and path values (unit-file.c): Environment=,
 * dependencies, EnvironmentFile=, WorkingDirectory=, StandardOutput= and
 * StandardError=, SuccessExitStatus= and RestartPreventExitStatus=.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "signal-util.h"

#include "unit-file-internal.h"
#include "unit-name-char.h"

/* ------------------------------------------------------------------------ */
/* Lists, paths, outputs, exit statuses                                      */
/* ------------------------------------------------------------------------ */

int uf_parse_environment(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct strv_builder *l = &c->lists[(uintptr_t) k->data];
        if (!*value) {
                strv_builder_clear(l);
                return 0;
        }
        bool bad = false;
        int r;
        for (const char *p = value;;) {
                char *a = NULL, q[QUOTE_BUF];
                r = uf_next_word_resolved(c, k, &p, value, &a, &bad);
                if (r <= 0)
                        break;
                if (!unit_env_assignment_is_valid(a)) {
                        r = syntax_error(c, "%s=: invalid environment assignment %s", k->key, uf_quote(q, a));
                        free(a);
                        break;
                }
                r = strv_builder_push(l, a);
                if (r < 0)
                        break;
        }
        uf_warn_bad_escape(c, k, value, bad);
        return r;
}

/* Whether name is a valid name of a unit type other than service (systemd's
 * types): a dependency on it is ignored, not an error. */
static bool other_unit_type(const char *name) {
        const char *suffix = unit_name_other_suffix(name);
        size_t n = strlen(name), t = suffix ? strlen(suffix) : 0;
        return suffix && n - t <= UNIT_NAME_MAX && name[0] != '@' && uf_unit_name_chars(name, n - t, true);
}

int uf_parse_unit_names(struct parse_ctx *c, const struct key_def *k, const char *value) {
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
                if (other_unit_type(n)) {
                        /* After=network.target, Requires=dbus.socket and the
                         * like: tend has only services (issue 16: other unit
                         * types are ignored with an info line, whatever the key). */
                        report(c, LOG_INFO, 0, "%s=%s ignored: tend runs services only", k->key, uf_quote(q, n));
                        free(n);
                        continue;
                }
                if (!unit_name_is_valid(n, UNIT_NAME_PLAIN | UNIT_NAME_INSTANCE)) {
                        r = syntax_error(c, "%s=: invalid unit name %s", k->key, uf_quote(q, n));
                        free(n);
                        break;
                }
                if (streq(n, c->name)) {
                        /* A unit cannot need or wait for itself (an ordering
                         * cycle of one); systemd drops it too. */
                        report(c, LOG_WARNING, 0, "%s=%s names the unit itself, ignored", k->key, uf_quote(q, n));
                        free(n);
                        continue;
                }
                r = strv_builder_push(l, n);
                if (r < 0)
                        break;
        }
        return r;
}

int uf_parse_environment_file(struct parse_ctx *c, const struct key_def *k, const char *value) {
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
        int r = uf_resolve_specifiers(c, k, value + optional, &path);
        if (r < 0)
                return r;
        if (path[0] != '/') {
                r = syntax_error(c, "%s=: not an absolute path: %s", k->key, uf_quote(q, path));
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

int uf_parse_working_directory(struct parse_ctx *c, const struct key_def *k, const char *value) {
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
        int r = uf_resolve_specifiers(c, k, v, &path);
        if (r < 0)
                return r;
        if (path[0] != '/') {
                r = syntax_error(c, "%s=: not an absolute path: %s", k->key, uf_quote(q, path));
                free(path);
                return r;
        }
        free(u->working_directory);
        u->working_directory = path;
        u->working_directory_missing_ok = missing_ok;
        u->working_directory_home = false;
        return 0;
}

/* corpus: systemd's outputs that tend maps to its closest own: syslog is the
 * journal (as systemd 252 maps it); kmsg and the +console ones are tend's
 * default output, the journal when tend runs under systemd, else tend's
 * stdout (the container's console), with one notice. */
static bool mapped_output(struct parse_ctx *c, const struct key_def *k, const char *value, struct unit_output *n) {
        static const char *const to_default[] = { "kmsg", "journal+console", "kmsg+console", "syslog+console" };
        if (streq(value, "syslog")) {
                n->kind = UNIT_OUTPUT_JOURNAL;
                return true;
        }
        for (size_t i = 0; i < ELEMENTSOF(to_default); i++)
                if (streq(value, to_default[i])) {
                        n->kind = UNIT_OUTPUT_DEFAULT;
                        report(c, LOG_NOTICE, 0,
                               "%s=%s: the lines go to tend's default output instead (the journal when tend runs "
                               "under systemd, else tend's stdout)", k->key, value);
                        return true;
                }
        return false;
}

int uf_parse_output(struct parse_ctx *c, const struct key_def *k, const char *value) {
        static const struct {
                const char *value, *why;
        } unsupported[] = {
                { "socket", "tend has no socket activation" },
                { "fd:", "tend has no socket activation (no socket units to name)" },
                { "truncate:", "use file: or append:" },
        };
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
        else if (streq(value, "tty")) /* exec: TTYPath= */
                n.kind = UNIT_OUTPUT_TTY;
        else if (strncmp(value, "file:", 5) == 0)
                n.kind = UNIT_OUTPUT_FILE, path = value + 5;
        else if (strncmp(value, "append:", 7) == 0)
                n.kind = UNIT_OUTPUT_APPEND, path = value + 7;
        else if (!mapped_output(c, k, value, &n)) {
                for (size_t i = 0; i < ELEMENTSOF(unsupported); i++) {
                        const char *u = unsupported[i].value;
                        size_t l = strlen(u);
                        bool prefix = u[l - 1] == ':';
                        if (prefix ? strncmp(value, u, l) == 0 : streq(value, u))
                                return report(c, LOG_ERR, EOPNOTSUPP, "%s=%s%s is not supported: %s", k->key, u,
                                              prefix ? "…" : "", unsupported[i].why);
                }
                return invalid_value(c, k, value);
        }
        if (path) {
                int r = uf_resolve_specifiers(c, k, path, &n.path);
                if (r < 0)
                        return r;
                if (n.path[0] != '/') {
                        r = syntax_error(c, "%s=: not an absolute path: %s", k->key, uf_quote(q, n.path));
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

int uf_parse_exit_status(struct parse_ctx *c, const struct key_def *k, const char *value) {
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
                        return syntax_error(c, "%s=: invalid exit status or signal %s", k->key, uf_quote(q, w));
        }
}
