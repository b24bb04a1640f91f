/* SPDX-License-Identifier: MIT */
/*
 * Condition*= and Assert*= (systemd.unit(5) "Conditions and Asserts"): the
 * keys' parser (unit-file.c) and their value grammar (condition-syntax.h).
 * A condition is checked at each start (exec/condition.h); here its value is
 * checked as far as systemd's grammar goes, so that a typo is a load error
 * with its file:line rather than a start that is silently skipped.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "condition-syntax.h"
#include "sandbox-values.h"
#include "unit-file-internal.h"

static const char *const type_names[_UNIT_CONDITION_TYPE_MAX] = {
        [UNIT_CONDITION_ARCHITECTURE] = "Architecture",
        [UNIT_CONDITION_FIRMWARE] = "Firmware",
        [UNIT_CONDITION_VIRTUALIZATION] = "Virtualization",
        [UNIT_CONDITION_HOST] = "Host",
        [UNIT_CONDITION_KERNEL_COMMAND_LINE] = "KernelCommandLine",
        [UNIT_CONDITION_KERNEL_VERSION] = "KernelVersion",
        [UNIT_CONDITION_CREDENTIAL] = "Credential",
        [UNIT_CONDITION_ENVIRONMENT] = "Environment",
        [UNIT_CONDITION_SECURITY] = "Security",
        [UNIT_CONDITION_CAPABILITY] = "Capability",
        [UNIT_CONDITION_AC_POWER] = "ACPower",
        [UNIT_CONDITION_NEEDS_UPDATE] = "NeedsUpdate",
        [UNIT_CONDITION_FIRST_BOOT] = "FirstBoot",
        [UNIT_CONDITION_PATH_EXISTS] = "PathExists",
        [UNIT_CONDITION_PATH_EXISTS_GLOB] = "PathExistsGlob",
        [UNIT_CONDITION_PATH_IS_DIRECTORY] = "PathIsDirectory",
        [UNIT_CONDITION_PATH_IS_SYMBOLIC_LINK] = "PathIsSymbolicLink",
        [UNIT_CONDITION_PATH_IS_MOUNT_POINT] = "PathIsMountPoint",
        [UNIT_CONDITION_PATH_IS_READ_WRITE] = "PathIsReadWrite",
        [UNIT_CONDITION_PATH_IS_ENCRYPTED] = "PathIsEncrypted",
        [UNIT_CONDITION_DIRECTORY_NOT_EMPTY] = "DirectoryNotEmpty",
        [UNIT_CONDITION_FILE_NOT_EMPTY] = "FileNotEmpty",
        [UNIT_CONDITION_FILE_IS_EXECUTABLE] = "FileIsExecutable",
        [UNIT_CONDITION_USER] = "User",
        [UNIT_CONDITION_GROUP] = "Group",
        [UNIT_CONDITION_CONTROL_GROUP_CONTROLLER] = "ControlGroupController",
        [UNIT_CONDITION_MEMORY] = "Memory",
        [UNIT_CONDITION_CPUS] = "CPUs",
        [UNIT_CONDITION_CPU_FEATURE] = "CPUFeature",
        [UNIT_CONDITION_OS_RELEASE] = "OSRelease",
        [UNIT_CONDITION_MEMORY_PRESSURE] = "MemoryPressure",
        [UNIT_CONDITION_CPU_PRESSURE] = "CPUPressure",
        [UNIT_CONDITION_IO_PRESSURE] = "IOPressure",
};

const char *unit_condition_type_name(unit_condition_type t) {
        return (unsigned) t < _UNIT_CONDITION_TYPE_MAX ? type_names[t] : NULL;
}

struct unit_conditions *unit_conditions_free(struct unit_conditions *l) {
        if (!l)
                return NULL;
        for (size_t i = 0; i < l->n; i++)
                free(l->items[i].parameter);
        free(l);
        return NULL;
}

/* ---- the value grammar (condition-syntax.h) ---- */

int condition_op_parse(const char **s, unsigned flags) {
        static const struct {
                const char *text;
                enum condition_op op, string_op;
                bool glob;
        } ops[] = { /* longest first */
                { "!$=", CONDITION_OP_NOT_GLOB, CONDITION_OP_NOT_GLOB, true },
                { "<=", CONDITION_OP_LE, CONDITION_OP_LE, false },
                { ">=", CONDITION_OP_GE, CONDITION_OP_GE, false },
                { "==", CONDITION_OP_EQ, CONDITION_OP_EQ, false },
                { "<>", CONDITION_OP_NE, CONDITION_OP_NE, false },
                { "!=", CONDITION_OP_NE, CONDITION_OP_STR_NE, false },
                { "$=", CONDITION_OP_GLOB, CONDITION_OP_GLOB, true },
                { "<", CONDITION_OP_LT, CONDITION_OP_LT, false },
                { ">", CONDITION_OP_GT, CONDITION_OP_GT, false },
                { "=", CONDITION_OP_EQ, CONDITION_OP_STR_EQ, false },
        };
        for (size_t i = 0; i < ELEMENTSOF(ops); i++) {
                size_t n = strlen(ops[i].text);
                if (strncmp(*s, ops[i].text, n) != 0)
                        continue;
                if (ops[i].glob && !(flags & CONDITION_OP_GLOB_OK))
                        return -EINVAL;
                *s += n;
                return (int) (flags & CONDITION_OP_STRING ? ops[i].string_op : ops[i].op);
        }
        return -EINVAL;
}

bool condition_op_holds(enum condition_op op, int cmp) {
        switch (op) {
        case CONDITION_OP_LT:
                return cmp < 0;
        case CONDITION_OP_LE:
                return cmp <= 0;
        case CONDITION_OP_EQ:
        case CONDITION_OP_STR_EQ:
                return cmp == 0;
        case CONDITION_OP_NE:
        case CONDITION_OP_STR_NE:
                return cmp != 0;
        case CONDITION_OP_GE:
                return cmp >= 0;
        case CONDITION_OP_GT:
                return cmp > 0;
        default:
                return false;
        }
}

/* The segment separators of a version: '~' older than anything, '-' and '^'
 * older than more segments, '.' newer than none. */
static int version_separator(const char **a, const char **b, char sep, int when_a) {
        if (**a != sep && **b != sep)
                return 2;
        if (**a != sep)
                return -when_a;
        if (**b != sep)
                return when_a;
        (*a)++, (*b)++;
        return 3; /* both: go on */
}

static int version_numbers(const char **a, const char **b) {
        while (**a == '0')
                (*a)++;
        while (**b == '0')
                (*b)++;
        size_t na = strspn(*a, "0123456789"), nb = strspn(*b, "0123456789");
        int r = na != nb ? (na < nb ? -1 : 1) : memcmp(*a, *b, na);
        *a += na, *b += nb;
        return r < 0 ? -1 : r > 0;
}

static int version_letters(const char **a, const char **b) {
        size_t na = 0, nb = 0;
        while (isalpha((unsigned char) (*a)[na]))
                na++;
        while (isalpha((unsigned char) (*b)[nb]))
                nb++;
        int r = strncmp(*a, *b, na < nb ? na : nb);
        if (r == 0)
                r = na < nb ? -1 : na > nb;
        *a += na, *b += nb;
        return r < 0 ? -1 : r > 0;
}

int condition_version_compare(const char *a, const char *b) {
        static const char keep[] = "~-^.";
        for (;;) {
                while (*a && !isalnum((unsigned char) *a) && !strchr(keep, *a))
                        a++;
                while (*b && !isalnum((unsigned char) *b) && !strchr(keep, *b))
                        b++;
                int r = version_separator(&a, &b, '~', -1);
                if (r == 3)
                        continue;
                if (r != 2)
                        return r;
                if (!*a || !*b) /* more segments are newer */
                        return (*a != 0) - (*b != 0);
                const char *seps = "-^.";
                for (r = 2; *seps && r == 2; seps++)
                        r = version_separator(&a, &b, *seps, *seps == '.' ? 1 : -1);
                if (r == 3)
                        continue;
                if (r != 2)
                        return r;
                bool da = isdigit((unsigned char) *a), db = isdigit((unsigned char) *b);
                if (da || db) {
                        if (da != db) /* numbers are newer than letters */
                                return da ? 1 : -1;
                        r = version_numbers(&a, &b);
                } else
                        r = version_letters(&a, &b);
                if (r != 0)
                        return r;
        }
}

int condition_op_compare(enum condition_op op, const char *actual, const char *expected) {
        switch (op) {
        case CONDITION_OP_GLOB:
                return fnmatch(expected, actual, 0) == 0;
        case CONDITION_OP_NOT_GLOB:
                return fnmatch(expected, actual, 0) != 0;
        case CONDITION_OP_STR_EQ:
                return streq(actual, expected);
        case CONDITION_OP_STR_NE:
                return !streq(actual, expected);
        default:
                return condition_op_holds(op, condition_version_compare(actual, expected));
        }
}

int condition_parse_size(const char *s, uint64_t *ret) {
        static const char suffixes[] = "BKMGTPE";
        char *end;
        s += strspn(s, " \t");
        if (!isdigit((unsigned char) *s))
                return -EINVAL;
        errno = 0;
        unsigned long long whole = strtoull(s, &end, 10);
        if (errno)
                return -ERANGE;
        uint64_t frac = 0, frac_div = 1;
        if (*end == '.') {
                for (end++; isdigit((unsigned char) *end); end++)
                        if (frac_div < 1000000000000ULL)
                                frac = frac * 10 + (uint64_t) (*end - '0'), frac_div *= 10;
        }
        end += strspn(end, " \t");
        const char *x = *end ? strchr(suffixes, toupper((unsigned char) *end)) : NULL;
        if (*end && (!x || end[1]))
                return -EINVAL;
        unsigned shift = x ? 10 * (unsigned) (x - suffixes) : 0;
        if (shift && whole > (UINT64_MAX >> shift))
                return -ERANGE;
        uint64_t unit = (uint64_t) 1 << shift;
        *ret = (uint64_t) whole * unit + (uint64_t) ((long double) frac / (long double) frac_div * (long double) unit);
        return 0;
}

int condition_parse_boolean(const char *s) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off" };
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0)
                        return 1;
                if (strcasecmp(s, no[i]) == 0)
                        return 0;
        }
        return -EINVAL;
}

/* "N%" or "N.NN%": hundredths of a percent, at most 100%. */
static int parse_permyriad(const char *s, size_t n, unsigned *ret) {
        unsigned whole = 0, frac = 0, digits = 0;
        size_t i = 0;
        for (; i < n && isdigit((unsigned char) s[i]) && whole <= 100; i++)
                whole = whole * 10 + (unsigned) (s[i] - '0');
        if (i == 0)
                return -EINVAL;
        if (i < n && s[i] == '.')
                for (i++; i < n && isdigit((unsigned char) s[i]) && digits < 2; i++, digits++)
                        frac = frac * 10 + (unsigned) (s[i] - '0');
        if (digits == 1)
                frac *= 10;
        if (i + 1 != n || s[i] != '%' || whole * 100 + frac > 10000)
                return -EINVAL;
        *ret = whole * 100 + frac;
        return 0;
}

int condition_parse_pressure(const char *s, const char **ret_slice, size_t *ret_slice_len,
                             unsigned *ret_permyriad, unsigned *ret_window_sec) {
        const char *colon = strchr(s, ':'), *v = colon ? colon + 1 : s;
        v += strspn(v, " \t");
        const char *slash = strchr(v, '/');
        size_t n = slash ? (size_t) (slash - v) : strlen(v);
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                n--;
        unsigned window = 300, p;
        if (parse_permyriad(v, n, &p) < 0)
                return -EINVAL;
        if (slash) {
                const char *w = slash + 1 + strspn(slash + 1, " \t");
                if (strncmp(w, "10sec", 5) == 0)
                        window = 10;
                else if (strncmp(w, "1min", 4) == 0)
                        window = 60;
                else if (strncmp(w, "5min", 4) != 0)
                        return -EINVAL;
        }
        if (colon && colon == s)
                return -EINVAL;
        *ret_slice = colon ? s : NULL;
        *ret_slice_len = colon ? (size_t) (colon - s) : 0;
        *ret_permyriad = p;
        *ret_window_sec = window;
        return 0;
}

static bool env_name_valid(const char *s, size_t n) {
        if (n == 0 || isdigit((unsigned char) s[0]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char) s[i]) && s[i] != '_')
                        return false;
        return true;
}

/* One expression of a list: "[OP]VERSION" (an operator alone takes the next
 * word, in the first expression only, as systemd allows) or "KEY OP VALUE". */
static int one_expression(const char *word, const char **p, bool first, bool os_release, condition_expr_fn each,
                          void *userdata) {
        _cleanup_free_ char *key = NULL, *next = NULL;
        const char *s = word;
        if (os_release) {
                size_t n = strcspn(s, "<>=!$");
                if (!env_name_valid(s, n))
                        return -EINVAL;
                key = strndup(s, n);
                if (!key)
                        return -ENOMEM;
                s += n;
        }
        int op = condition_op_parse(&s, CONDITION_OP_STRING | CONDITION_OP_GLOB_OK);
        if (op < 0 && os_release)
                return -EINVAL;
        if (op < 0)
                op = CONDITION_OP_GLOB;
        if (!os_release)
                s += strspn(s, " \t");
        if (!*s && first && !os_release) {
                int r = unit_extract_word(p, 0, &next, NULL);
                if (r <= 0)
                        return r < 0 ? r : -EINVAL;
                s = next;
        }
        if (!*s || strchr(" \t", *s))
                return -EINVAL;
        return each ? each(key, (enum condition_op) op, s, userdata) : 1;
}

int condition_expressions(const char *list, bool os_release, condition_expr_fn each, void *userdata) {
        bool first = true;
        for (const char *p = list;;) {
                _cleanup_free_ char *word = NULL;
                int r = unit_extract_word(&p, EXTRACT_UNQUOTE, &word, NULL);
                if (r < 0)
                        return r == -ENOMEM ? r : -EINVAL;
                if (r == 0)
                        return first ? -EINVAL : 1;
                r = one_expression(word, &p, first, os_release, each, userdata);
                if (r <= 0)
                        return r;
                first = false;
        }
}

/* ---- the keys ---- */

static bool takes_path(unit_condition_type t) {
        return (t >= UNIT_CONDITION_PATH_EXISTS && t <= UNIT_CONDITION_FILE_IS_EXECUTABLE) ||
               t == UNIT_CONDITION_NEEDS_UPDATE;
}

/* The value's syntax, where systemd's grammar fixes one; NULL if fine, else what is wrong. */
static const char *check_value(unit_condition_type t, const char *s) {
        uint64_t size;
        const char *slice, *p = s;
        size_t n;
        unsigned a, b;
        if (takes_path(t))
                return s[0] == '/' ? NULL : "is not an absolute path";
        switch (t) {
        case UNIT_CONDITION_FIRST_BOOT:
        case UNIT_CONDITION_AC_POWER:
                return condition_parse_boolean(s) < 0 ? "is not a boolean" : NULL;
        case UNIT_CONDITION_CAPABILITY:
                return sandbox_capability_from_name(s) < 0 ? "is not a capability name" : NULL;
        case UNIT_CONDITION_MEMORY:
                (void) condition_op_parse(&p, 0);
                return condition_parse_size(p, &size) < 0 ? "is not [OPERATOR]SIZE" : NULL;
        case UNIT_CONDITION_CPUS:
                (void) condition_op_parse(&p, 0);
                p += strspn(p, " \t");
                return !*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 9 ? "is not [OPERATOR]NUMBER" : NULL;
        case UNIT_CONDITION_KERNEL_VERSION:
                return condition_expressions(s, false, NULL, NULL) < 0 ? "is not a list of [OPERATOR]VERSION" : NULL;
        case UNIT_CONDITION_OS_RELEASE:
                return condition_expressions(s, true, NULL, NULL) < 0 ? "is not a list of KEY OPERATOR VALUE" : NULL;
        case UNIT_CONDITION_MEMORY_PRESSURE:
        case UNIT_CONDITION_CPU_PRESSURE:
        case UNIT_CONDITION_IO_PRESSURE:
                return condition_parse_pressure(s, &slice, &n, &a, &b) < 0 ? "is not [SLICE:]PERCENT%[/10sec|1min|5min]"
                                                                            : NULL;
        default:
                return NULL;
        }
}

/* An empty assignment resets every condition (for Assert*=: every assert)
 * assigned before it, of any type (systemd.unit(5)). */
static void reset(struct unit_conditions *l, bool is_assert) {
        size_t kept = 0;
        for (size_t i = 0; l && i < l->n; i++) {
                if (l->items[i].is_assert == is_assert)
                        free(l->items[i].parameter);
                else
                        l->items[kept++] = l->items[i];
        }
        if (l)
                l->n = kept;
}

static int append(struct parse_ctx *c, const struct unit_condition *cond) {
        struct unit_conditions *l = c->u->conditions;
        size_t n = l ? l->n : 0;
        /* Grown by one each time: a unit has a handful. */
        l = realloc(l, sizeof *l + (n + 1) * sizeof l->items[0]);
        if (!l)
                return -ENOMEM;
        l->n = n + 1;
        l->items[n] = *cond;
        c->u->conditions = l;
        return 0;
}

/* Condition*=, Assert*=: "[|][!]VALUE", specifiers resolved. */
int uf_parse_condition(struct parse_ctx *c, const struct key_def *k, const char *value) {
        uintptr_t data = (uintptr_t) k->data;
        struct unit_condition cond = {
                .type = (unit_condition_type) (data & 0xff),
                .is_assert = data & UF_CONDITION_ASSERT,
                .line = c->line,
        };
        char q[QUOTE_BUF];
        if (!*value) {
                reset(c->u->conditions, cond.is_assert);
                return 0;
        }
        const char *v = value;
        if ((cond.trigger = *v == '|'))
                v += 1 + strspn(v + 1, WHITESPACE);
        if ((cond.negate = *v == '!'))
                v += 1 + strspn(v + 1, WHITESPACE);
        if (!*v)
                return syntax_error(c, "%s=: no value after its prefixes in %s", k->key, uf_quote(q, value));
        /* A '%' before anything but a letter or '%' is kept as written, as
         * systemd does ("10%/1min"): doubled for the resolver. */
        _cleanup_free_ char *escaped = malloc(2 * strlen(v) + 1);
        if (!escaped)
                return -ENOMEM;
        char *e = escaped;
        for (const char *p = v; *p; p++) {
                *e++ = *p;
                if (*p == '%' && p[1] != '%' && !isalpha((unsigned char) p[1]))
                        *e++ = '%';
                else if (*p == '%' && p[1] == '%')
                        *e++ = *++p;
        }
        *e = 0;
        int r = uf_resolve_specifiers(c, k, escaped, &cond.parameter);
        if (r < 0)
                return r;
        const char *bad = check_value(cond.type, cond.parameter);
        if (bad)
                r = syntax_error(c, "%s=: %s %s", k->key, uf_quote(q, cond.parameter), bad);
        else
                r = append(c, &cond);
        if (r < 0)
                free(cond.parameter);
        return r;
}
