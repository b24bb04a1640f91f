/* SPDX-License-Identifier: MIT */
/*
 * Every process of a unit (cgroup.h): discovery of tend's cgroup, tend's
 * tree and its leaf. A unit's own cgroup (or process group) is
 * cgroup-unit.c; cgroup-internal.h holds what the two share.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "macro.h"
#include "cgroup-internal.h"

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */
/* ------------------------------------------------------------------------ */

/* Reads a whole (small, pseudo-) file relative to dir_fd into a malloc'ed,
 * NUL-terminated string. */
int cgroup_read_file_at(int dir_fd, const char *path, char **ret) {
        _cleanup_close_ int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        size_t n = 0, cap = 4096;
        _cleanup_free_ char *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                if (cap - n < 2) {
                        char *b = realloc(buf, cap * 2);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                        cap *= 2;
                }
                ssize_t k = read(fd, buf + n, cap - n - 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        buf[n] = '\0';
        *ret = TAKE_PTR(buf);
        return 0;
}

int cgroup_write_string_at(int dir_fd, const char *path, const char *s) {
        _cleanup_close_ int fd = openat(dir_fd, path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        size_t n = strlen(s);
        ssize_t k = write(fd, s, n);
        if (k < 0)
                return negative_errno();
        return (size_t) k == n ? 0 : -EIO;
}

char *cgroup_strdup_printf(const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int k = vasprintf(&s, fmt, ap);
        va_end(ap);
        return k < 0 ? NULL : s;
}

/* ------------------------------------------------------------------------ */
/* Discovery, pure                                                          */
/* ------------------------------------------------------------------------ */

int cgroup_parse_self(const char *text, char **ret_path) {
        if (!text || !ret_path)
                return -EINVAL;
        for (const char *line = text; *line; ) {
                const char *eol = strchrnul(line, '\n');
                if (strncmp(line, "0::", 3) == 0) {
                        const char *p = line + 3;
                        if (p == eol || *p != '/')
                                return -EINVAL;
                        char *s = strndup(p, (size_t) (eol - p));
                        if (!s)
                                return -ENOMEM;
                        *ret_path = s;
                        return 0;
                }
                line = *eol ? eol + 1 : eol;
        }
        return -ENOENT;
}

/* Decodes mountinfo's octal escapes (\040 space, \011 tab, \012 newline,
 * \134 backslash) of a field [s, s+n) into a new string. */
static char *mountinfo_unescape(const char *s, size_t n) {
        char *out = malloc(n + 1), *o = out;
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '\\' && i + 3 < n &&
                    s[i + 1] >= '0' && s[i + 1] <= '3' &&
                    s[i + 2] >= '0' && s[i + 2] <= '7' &&
                    s[i + 3] >= '0' && s[i + 3] <= '7') {
                        *o++ = (char) ((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
                        i += 3;
                } else
                        *o++ = s[i];
        }
        *o = '\0';
        return out;
}

/* Splits one mountinfo line [line, eol) into at most max space-separated
 * fields; returns how many. */
static size_t split_fields(const char *line, const char *eol, const char **f, size_t *len, size_t max) {
        size_t n = 0;
        const char *p = line;
        while (p < eol && n < max) {
                while (p < eol && *p == ' ')
                        p++;
                if (p == eol)
                        break;
                const char *e = p;
                while (e < eol && *e != ' ')
                        e++;
                f[n] = p;
                len[n++] = (size_t) (e - p);
                p = e;
        }
        return n;
}

static bool has_dotdot(const char *path) {
        for (const char *p = path; (p = strstr(p, "..")); p += 2)
                if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
                        return true;
        return false;
}

/* P relative to root ("" or "/…"), or NULL if P is outside root. */
static const char *path_relative(const char *root, const char *path) {
        if (has_dotdot(root) || has_dotdot(path))
                return NULL;
        if (streq(root, "/"))
                return path;
        size_t n = strlen(root);
        while (n > 1 && root[n - 1] == '/')
                n--;
        if (strncmp(path, root, n) != 0 || (path[n] != '\0' && path[n] != '/'))
                return NULL;
        return path + n;
}

/* The mount point and root of the cgroup2 mount that mountinfo line
 * [line, eol) describes: 1 if it is one, 0 if not, or -ENOMEM. */
static int mountinfo_cgroup2(const char *line, const char *eol, char **ret_mount, char **ret_root) {
        const char *f[64];
        size_t len[64];
        size_t n = split_fields(line, eol, f, len, ELEMENTSOF(f));
        /* id parent maj:min root mount-point options [optional…] - fstype source super */
        size_t sep = 6;
        while (sep < n && !(len[sep] == 1 && f[sep][0] == '-'))
                sep++;
        if (n < 5 || sep + 1 >= n || len[sep + 1] != 7 || strncmp(f[sep + 1], "cgroup2", 7) != 0)
                return 0;
        _cleanup_free_ char *root = mountinfo_unescape(f[3], len[3]);
        _cleanup_free_ char *mount = mountinfo_unescape(f[4], len[4]);
        if (!root || !mount)
                return -ENOMEM;
        *ret_root = TAKE_PTR(root);
        *ret_mount = TAKE_PTR(mount);
        return 1;
}

static char *path_join(const char *dir, const char *rel) {
        if (!*rel || streq(rel, "/"))
                return strdup(dir);
        if (streq(dir, "/"))
                return strdup(rel);
        return cgroup_strdup_printf("%s%s", dir, rel);
}

int cgroup_locate(const char *mountinfo, const char *self_cgroup, struct cgroup_location *ret) {
        if (!mountinfo || !self_cgroup || !ret)
                return -EINVAL;
        _cleanup_free_ char *path = NULL, *mount = NULL, *dir = NULL;
        int r = cgroup_parse_self(self_cgroup, &path);
        if (r < 0)
                return r;
        bool any = false;
        for (const char *line = mountinfo; *line; ) {
                const char *eol = strchrnul(line, '\n');
                _cleanup_free_ char *m = NULL, *root = NULL;
                r = mountinfo_cgroup2(line, eol, &m, &root);
                if (r < 0)
                        return r;
                line = *eol ? eol + 1 : eol;
                if (r == 0)
                        continue;
                any = true;
                const char *rel = path_relative(root, path);
                if (!rel)
                        continue;
                /* The last match wins: a later mount shadows an earlier one. */
                char *d = path_join(m, rel);
                if (!d)
                        return -ENOMEM;
                free(dir);
                dir = d;
                free(mount);
                mount = TAKE_PTR(m);
        }
        if (!dir)
                return any ? -EXDEV : -ENODEV;
        *ret = (struct cgroup_location) {
                .mount = TAKE_PTR(mount),
                .path = TAKE_PTR(path),
                .dir = TAKE_PTR(dir),
        };
        return 0;
}

void cgroup_location_done(struct cgroup_location *loc) {
        if (!loc)
                return;
        free(loc->mount);
        free(loc->path);
        free(loc->dir);
        *loc = (struct cgroup_location) { 0 };
}

/* ------------------------------------------------------------------------ */
/* tend's cgroup                                                            */
/* ------------------------------------------------------------------------ */

static struct cgroup_tree *tree_alloc(void) {
        struct cgroup_tree *t = calloc(1, sizeof *t);
        if (t) {
                t->mode = CGROUP_MODE_FALLBACK;
                t->dir_fd = -1;
        }
        return t;
}

struct cgroup_tree *cgroup_tree_free(struct cgroup_tree *tree) {
        if (!tree)
                return NULL;
        safe_close(tree->dir_fd);
        free(tree->dir);
        free(tree->path);
        free(tree->describe);
        free(tree);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct cgroup_tree *, cgroup_tree_free)

/* Sets FALLBACK mode, closing what CGROUP mode had opened. */
static int tree_set_fallback(struct cgroup_tree *t, char *cause) {
        if (!cause)
                return -ENOMEM;
        free(t->describe);
        t->describe = cgroup_strdup_printf("%s: using process groups", cause);
        free(cause);
        t->mode = CGROUP_MODE_FALLBACK;
        t->dir_fd = safe_close(t->dir_fd);
        t->dir = (free(t->dir), NULL);
        t->path = (free(t->path), NULL);
        return t->describe ? 0 : -ENOMEM;
}

int cgroup_tree_open_fallback(const char *why, struct cgroup_tree **ret_tree) {
        if (!ret_tree)
                return -EINVAL;
        _cleanup_(cgroup_tree_freep) struct cgroup_tree *t = tree_alloc();
        if (!t)
                return -ENOMEM;
        int r = tree_set_fallback(t, strdup(why ? why : "cgroups not used"));
        if (r < 0)
                return r;
        *ret_tree = TAKE_PTR(t);
        return 0;
}

/*
 * The probe (SPEC §4 "cgroups"): a child cgroup of tend's own, where
 * cgroup.kill and cgroup.events exist if the kernel has them (the root cgroup
 * has neither). Returns 0, or a negative errno with *ret_step naming what
 * failed. Leaves nothing behind.
 */
static int tree_probe(struct cgroup_tree *t, const char **ret_step) {
        char name[64], pid[32];
        snprintf(name, sizeof name, "tend-probe.%d", (int) getpid());
        snprintf(pid, sizeof pid, "%d", (int) getpid());

        *ret_step = "writing its cgroup.procs";
        /* A no-op move of tend into its own cgroup: checks the delegation
         * (write access to the cgroup.procs of the common ancestor). A
         * re-executed tend already in its leaf stays there (reexec). */
        int r = t->in_leaf ? 0 : cgroup_write_string_at(t->dir_fd, "cgroup.procs", pid);
        if (r < 0)
                return r;
        *ret_step = "mkdir";
        if (mkdirat(t->dir_fd, name, 0755) < 0) {
                if (errno != EEXIST)
                        return negative_errno();
                /* A stale probe of an earlier process with our pid. */
                if (unlinkat(t->dir_fd, name, AT_REMOVEDIR) < 0 || mkdirat(t->dir_fd, name, 0755) < 0)
                        return negative_errno();
        }
        _cleanup_close_ int probe_fd = openat(t->dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = probe_fd < 0 ? negative_errno() : 0;
        static const struct { const char *file; int flags; } need[] = {
                { "cgroup.procs", O_WRONLY },
                { "cgroup.kill", O_WRONLY },
                { "cgroup.events", O_RDONLY },
        };
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(need); i++) {
                int fd = openat(probe_fd, need[i].file, need[i].flags | O_CLOEXEC);
                if (fd < 0) {
                        *ret_step = need[i].file;
                        r = negative_errno();
                }
                safe_close(fd);
        }
        if (unlinkat(t->dir_fd, name, AT_REMOVEDIR) < 0 && r == 0) {
                *ret_step = "rmdir";
                r = negative_errno();
        }
        return r;
}

/* CGROUP mode if tend's cgroup at loc is writable and has cgroup.kill. */
static int tree_try(struct cgroup_tree *t, struct cgroup_location *loc) {
        t->dir_fd = open(loc->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        const char *step = "open";
        int r = t->dir_fd < 0 ? negative_errno() : tree_probe(t, &step);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT && streq(step, "cgroup.kill"))
                return tree_set_fallback(t, cgroup_strdup_printf("no cgroup.kill in the cgroup v2 subtree at %s (Linux < 5.14)", loc->dir));
        if (r < 0)
                return tree_set_fallback(t, cgroup_strdup_printf("no writable cgroup v2 subtree at %s (%s: %s)",
                                                          loc->dir, step, strerror(-r)));
        t->mode = CGROUP_MODE_CGROUP;
        t->dir = TAKE_PTR(loc->dir);
        t->path = TAKE_PTR(loc->path);
        t->describe = cgroup_strdup_printf("using the cgroup v2 subtree at %s", t->dir);
        return t->describe ? 0 : -ENOMEM;
}

static char *locate_failure(int r, const char *self) {
        _cleanup_free_ char *p = NULL;
        switch (r) {
        case -ENOENT:
                return strdup("no cgroup v2 hierarchy in /proc/self/cgroup (no \"0::\" line)");
        case -ENODEV:
                return strdup("no cgroup2 mount in /proc/self/mountinfo");
        case -EXDEV:
                (void) cgroup_parse_self(self, &p);
                return cgroup_strdup_printf("tend's cgroup \"%s\" is outside the root of every cgroup2 mount",
                                     p ? p : "?");
        default:
                return cgroup_strdup_printf("cannot resolve tend's cgroup: %s", strerror(-r));
        }
}

/* reexec: a re-executed tend is in its leaf already: its cgroup is the leaf's parent. */
static int leaf_strip(struct cgroup_tree *t, struct cgroup_location *loc) {
        char *d = strrchr(loc->dir, '/'), *p = strrchr(loc->path, '/');
        if (!d || !p || !streq(d + 1, CGROUP_TEND_LEAF) || !streq(p + 1, CGROUP_TEND_LEAF))
                return 0;
        *d = '\0';
        *(p == loc->path ? p + 1 : p) = '\0';
        t->in_leaf = true;
        return 1;
}

static int tree_open(struct cgroup_tree **ret_tree, bool resumed) {
        if (!ret_tree)
                return -EINVAL;
        _cleanup_(cgroup_tree_freep) struct cgroup_tree *t = tree_alloc();
        if (!t)
                return -ENOMEM;
        _cleanup_free_ char *mountinfo = NULL, *self = NULL;
        int r = cgroup_read_file_at(AT_FDCWD, "/proc/self/mountinfo", &mountinfo);
        if (r >= 0)
                r = cgroup_read_file_at(AT_FDCWD, "/proc/self/cgroup", &self);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                r = tree_set_fallback(t, cgroup_strdup_printf("cannot read /proc/self: %s", strerror(-r)));
        else {
                struct cgroup_location loc = { 0 };
                r = cgroup_locate(mountinfo, self, &loc);
                if (r == -ENOMEM)
                        return r;
                if (r >= 0 && resumed)
                        (void) leaf_strip(t, &loc);
                r = r < 0 ? tree_set_fallback(t, locate_failure(r, self)) : tree_try(t, &loc);
                cgroup_location_done(&loc);
        }
        if (r < 0)
                return r;
        if (t->mode != CGROUP_MODE_CGROUP)
                t->in_leaf = false;
        *ret_tree = TAKE_PTR(t);
        return 0;
}

int cgroup_tree_open(struct cgroup_tree **ret_tree) {
        return tree_open(ret_tree, false);
}

int cgroup_tree_open_resumed(struct cgroup_tree **ret_tree) {
        return tree_open(ret_tree, true);
}

enum cgroup_mode cgroup_tree_mode(const struct cgroup_tree *tree) {
        return tree ? tree->mode : CGROUP_MODE_FALLBACK;
}

const char *cgroup_tree_dir(const struct cgroup_tree *tree) {
        return tree ? tree->dir : NULL;
}

const char *cgroup_tree_describe(const struct cgroup_tree *tree) {
        return tree ? tree->describe : NULL;
}

/* ------------------------------------------------------------------------ */
/* tend's own leaf                                                          */
/* ------------------------------------------------------------------------ */

/* Makes CGROUP_TEND_LEAF afresh: 0, or 1 when a populated one was left as it
 * is (rmdir answers EBUSY for a populated cgroup, and for one with children). */
static int leaf_make(struct cgroup_tree *t) {
        if (mkdirat(t->dir_fd, CGROUP_TEND_LEAF, 0755) == 0)
                return 0;
        if (errno != EEXIST)
                return negative_errno();
        /* A previous tend's: a cgroup.kill of tend's cgroup counted in every
         * cgroup below it, this one included, so only a new one is sure to
         * match the units' new cgroups. */
        if (unlinkat(t->dir_fd, CGROUP_TEND_LEAF, AT_REMOVEDIR) < 0)
                return errno == EBUSY ? 1 : negative_errno();
        return mkdirat(t->dir_fd, CGROUP_TEND_LEAF, 0755) < 0 ? negative_errno() : 0;
}

int cgroup_tree_enter_leaf(struct cgroup_tree *tree) {
        if (!tree)
                return -EINVAL;
        if (tree->mode != CGROUP_MODE_CGROUP)
                return -EOPNOTSUPP;
        if (tree->in_leaf)
                return 0;
        int made = leaf_make(tree);
        if (made < 0)
                return made;
        char pid[32];
        snprintf(pid, sizeof pid, "%d", (int) getpid());
        _cleanup_close_ int fd = openat(tree->dir_fd, CGROUP_TEND_LEAF, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r = fd < 0 ? negative_errno() : cgroup_write_string_at(fd, "cgroup.procs", pid);
        if (r < 0) {
                if (made == 0)
                        (void) unlinkat(tree->dir_fd, CGROUP_TEND_LEAF, AT_REMOVEDIR);
                return r;
        }
        tree->in_leaf = true;
        return made;
}

bool cgroup_tree_in_leaf(const struct cgroup_tree *tree) {
        return tree && tree->in_leaf;
}

void cgroup_tree_leave_leaf(struct cgroup_tree *tree) {
        if (!tree || !tree->in_leaf)
                return;
        char pid[32];
        snprintf(pid, sizeof pid, "%d", (int) getpid());
        if (cgroup_write_string_at(tree->dir_fd, "cgroup.procs", pid) < 0)
                return;
        tree->in_leaf = false;
        (void) unlinkat(tree->dir_fd, CGROUP_TEND_LEAF, AT_REMOVEDIR); /* EBUSY: CMD's orphans are in it */
}
