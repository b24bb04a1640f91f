/* SPDX-License-Identifier: MIT */
/*
 * ns: the unit-file parser's file-system namespace keys (issue 17;
 * unit-file-namespace.h; applied by exec/namespace.c): PrivateTmp=,
 * ProtectSystem=, ProtectHome=, PrivateDevices=, ReadWritePaths=,
 * ReadOnlyPaths=, InaccessiblePaths=, ExecPaths=, NoExecPaths=,
 * TemporaryFileSystem=, BindPaths=, BindReadOnlyPaths=,
 * ProtectKernelTunables=, ProtectControlGroups=, ProtectProc=, ProcSubset=,
 * PrivateMounts=. Values as systemd.exec(5) (252) defines them; an empty
 * assignment resets the key (a list to empty).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "unit-file-internal.h"
#include "unit-file-namespace.h"

const struct unit_namespace_keys unit_namespace_defaults = {};

const struct unit_namespace_keys *unit_file_namespace(const struct unit_file *f) {
        const struct unit_namespace_keys *n = unit_file_sandbox(f)->ns;
        return n ? n : &unit_namespace_defaults;
}

bool unit_namespace_wanted(const struct unit_namespace_keys *n) {
        if (!n)
                return false;
        for (int i = 0; i < _UNIT_NS_LIST_MAX; i++)
                if (n->lists[i] && n->lists[i][0])
                        return true;
        return n->protect_system || n->protect_home || n->protect_proc || n->private_tmp || n->private_devices ||
               n->protect_kernel_tunables || n->protect_control_groups || n->private_mounts || n->proc_subset_pid;
}

struct unit_namespace_keys *unit_namespace_keys_free(struct unit_namespace_keys *n) {
        if (!n)
                return NULL;
        for (int i = 0; i < _UNIT_NS_LIST_MAX; i++)
                strv_free(n->lists[i]);
        free(n);
        return NULL;
}

const char *unit_ns_path_prefixes(const char *s, bool *ret_optional) {
        bool optional = false;
        if (*s == '-') {
                optional = true;
                s++;
        }
        if (*s == '+')
                s++; /* RootDirectory=: tend has none */
        if (ret_optional)
                *ret_optional = optional;
        return s;
}

int unit_ns_split_colon(const char *s, char **ret_a, char **ret_rest) {
        size_t n = strlen(s);
        char *a = malloc(n + 1), *o = a;
        const char *p = s;
        if (!a)
                return -ENOMEM;
        for (; *p && *p != ':'; p++) {
                if (p[0] == '\\' && p[1] == ':')
                        p++;
                *o++ = *p;
        }
        *o = 0;
        char *rest = NULL;
        if (*p == ':' && !(rest = strdup(p + 1))) {
                free(a);
                return -ENOMEM;
        }
        *ret_a = a;
        *ret_rest = rest;
        return 0;
}

/* The namespace keys being parsed (allocated at the first, NULL on ENOMEM), marked as assigned. */
static struct unit_namespace_keys *ns_keys(struct parse_ctx *c) {
        struct unit_sandbox_keys *sb = uf_sandbox_keys(c);
        if (!sb->ns)
                sb->ns = calloc(1, sizeof *sb->ns);
        return sb->ns;
}

/* An absolute path without "." or ".." components or control bytes, below PATH_MAX. */
static bool path_ok(const char *s) {
        if (*s != '/' || strlen(s) >= PATH_MAX)
                return false;
        for (const char *p = s; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return false;
        for (const char *p = s; *p;) {
                p += strspn(p, "/");
                size_t n = strcspn(p, "/");
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                p += n;
        }
        return true;
}

/* Removes repeated and trailing slashes in place (but "/" stays). */
static void path_simplify(char *s) {
        char *o = s;
        for (const char *p = s; *p; p++)
                if (!(*p == '/' && o > s && o[-1] == '/'))
                        *o++ = *p;
        if (o > s + 1 && o[-1] == '/')
                o--;
        *o = 0;
}

/* ReadWritePaths= …: "[-][+]/PATH", simplified in place. */
static int check_access_path(struct parse_ctx *c, const struct key_def *k, char *w) {
        char q[QUOTE_BUF];
        char *path = (char *) unit_ns_path_prefixes(w, NULL);
        if (!path_ok(path))
                return syntax_error(c, "%s=: not an absolute path without \"..\": %s", k->key, uf_quote(q, w));
        path_simplify(path);
        return 0;
}

/* TemporaryFileSystem=: "/PATH[:OPTIONS]", the options tmpfs's and the mount flags'. */
static int check_temporary(struct parse_ctx *c, const struct key_def *k, char *w) {
        static const char *const flags[] = { "ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec", "exec",
                                             "strictatime", "nostrictatime", "noatime", "relatime", NULL };
        static const char *const params[] = { "size=", "nr_blocks=", "nr_inodes=", "mode=", "uid=", "gid=",
                                              "huge=", "mpol=", NULL };
        _cleanup_free_ char *path = NULL, *opts = NULL;
        char q[QUOTE_BUF];
        if (unit_ns_split_colon(w, &path, &opts) < 0)
                return -ENOMEM;
        if (!path_ok(path))
                return syntax_error(c, "%s=: not an absolute path without \"..\": %s", k->key, uf_quote(q, path));
        for (char *o = opts, *save = NULL, *t; o && (t = strtok_r(o, ",", &save)); o = NULL) {
                bool known = false;
                for (size_t i = 0; flags[i] && !known; i++)
                        known = streq(t, flags[i]);
                for (size_t i = 0; params[i] && !known; i++)
                        known = strncmp(t, params[i], strlen(params[i])) == 0 && t[strlen(params[i])];
                if (!known)
                        return syntax_error(c, "%s=: unknown mount option %s", k->key, uf_quote(q, t));
        }
        return 0;
}

/* BindPaths=: "[-]/SRC[:/DEST[:rbind|norbind]]". */
static int check_bind(struct parse_ctx *c, const struct key_def *k, char *w) {
        _cleanup_free_ char *src = NULL, *rest = NULL, *dest = NULL, *opts = NULL;
        char q[QUOTE_BUF];
        if (unit_ns_split_colon(w + (w[0] == '-'), &src, &rest) < 0 ||
            (rest && unit_ns_split_colon(rest, &dest, &opts) < 0))
                return -ENOMEM;
        if (!path_ok(src) || (dest && !path_ok(dest)))
                return syntax_error(c, "%s=: not absolute paths without \"..\": %s", k->key, uf_quote(q, w));
        if (opts && !streq(opts, "rbind") && !streq(opts, "norbind"))
                return syntax_error(c, "%s=: unknown option %s (rbind or norbind)", k->key, uf_quote(q, opts));
        return 0;
}

static int parse_list(struct parse_ctx *c, const struct key_def *k, const char *value, unit_ns_list which) {
        struct unit_namespace_keys *n = ns_keys(c);
        if (!n)
                return -ENOMEM;
        if (!*value) {
                n->lists[which] = strv_free(n->lists[which]);
                return 0;
        }
        for (const char *p = value;;) {
                char *w = NULL;
                int r = uf_next_word_resolved(c, k, &p, value, &w, NULL);
                if (r <= 0)
                        return r;
                r = which == UNIT_NS_TEMPORARY ? check_temporary(c, k, w)
                  : which == UNIT_NS_BIND || which == UNIT_NS_BIND_READ_ONLY ? check_bind(c, k, w)
                  : check_access_path(c, k, w);
                if (r >= 0)
                        r = strv_push(&n->lists[which], w);
                else
                        free(w);
                if (r < 0)
                        return r;
        }
}

/* A boolean, or one of names (index 2, 3 … of the enum; "no" 0, "yes" 1). */
static int parse_enum(struct parse_ctx *c, const struct key_def *k, const char *value, const char *const *names,
                      int *ret) {
        int b = uf_parse_boolean(value);
        if (b >= 0) {
                *ret = b;
                return 0;
        }
        for (int i = 0; names[i]; i++)
                if (streq(value, names[i])) {
                        *ret = i + 2;
                        return 0;
                }
        return invalid_value(c, k, value);
}

static int parse_bool_key(struct parse_ctx *c, const struct key_def *k, const char *value, bool *field) {
        int b = uf_parse_boolean(value);
        if (b < 0)
                return invalid_value(c, k, value);
        *field = b;
        return 0;
}

static int parse_proc(struct parse_ctx *c, const struct key_def *k, const char *value, struct unit_namespace_keys *n) {
        static const char *const protect[] = { "default", "noaccess", "invisible", "ptraceable" };
        if (streq(k->key, "ProcSubset")) {
                if (!streq(value, "all") && !streq(value, "pid"))
                        return invalid_value(c, k, value);
                n->proc_subset_pid = streq(value, "pid");
                return 0;
        }
        for (int i = 0; i < 4; i++)
                if (streq(value, protect[i])) {
                        n->protect_proc = (unit_protect_proc) i;
                        return 0;
                }
        return invalid_value(c, k, value);
}

static int parse_scalar(struct parse_ctx *c, const struct key_def *k, const char *value, int which) {
        static const char *const system[] = { "full", "strict", NULL }, *const home[] = { "read-only", "tmpfs", NULL };
        struct unit_namespace_keys *n = ns_keys(c);
        int v = 0, r = 0;
        if (!n)
                return -ENOMEM;
        if (!*value)
                value = which == UF_NS_PROTECT_PROC ? "default" : which == UF_NS_PROC_SUBSET ? "all" : "no";
        switch (which) {
        case UF_NS_PROTECT_SYSTEM:
                if ((r = parse_enum(c, k, value, system, &v)) >= 0)
                        n->protect_system = (unit_protect_system) v;
                return r;
        case UF_NS_PROTECT_HOME:
                if ((r = parse_enum(c, k, value, home, &v)) >= 0)
                        n->protect_home = (unit_protect_home) v;
                return r;
        case UF_NS_PROTECT_PROC:
        case UF_NS_PROC_SUBSET:
                return parse_proc(c, k, value, n);
        case UF_NS_PRIVATE_TMP:
                return parse_bool_key(c, k, value, &n->private_tmp);
        case UF_NS_PRIVATE_DEVICES:
                return parse_bool_key(c, k, value, &n->private_devices);
        case UF_NS_PROTECT_KERNEL_TUNABLES:
                return parse_bool_key(c, k, value, &n->protect_kernel_tunables);
        case UF_NS_PROTECT_CONTROL_GROUPS:
                return parse_bool_key(c, k, value, &n->protect_control_groups);
        default:
                return parse_bool_key(c, k, value, &n->private_mounts);
        }
}

int uf_parse_namespace(struct parse_ctx *c, const struct key_def *k, const char *value) {
        int which = (int) (uintptr_t) k->data;
        if (which < _UNIT_NS_LIST_MAX)
                return parse_list(c, k, value, (unit_ns_list) which);
        return parse_scalar(c, k, value, which);
}
