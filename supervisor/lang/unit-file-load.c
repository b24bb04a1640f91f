/* SPDX-License-Identifier: MIT */
/*
 * Loading unit files (unit-file.h): a unit from its directory (an instance
 * from its template, masked units, drop-in warnings) and every unit of a
 * directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "log.h"

#include "unit-file-internal.h"

#define SWAP_PTR(a, b) do { char *_t = (a); (a) = (b); (b) = _t; } while (0)

/* ------------------------------------------------------------------------ */
/* Files and directories                                                     */
/* ------------------------------------------------------------------------ */

/* Logs an error of loading (outside the text) and keeps its message. */
_printf_(4, 5) static int load_error(char **ret_message, int level, int error, const char *fmt, ...) {
        char msg[1400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        log_internal(level, 0, "%s", msg);
        if (ret_message)
                *ret_message = strdup(msg);
        return -abs(error);
}

/* Opens a unit file. 1 if masked (empty, or /dev/null), 0 with *ret_fd, or a negative errno. */
static int open_unit_file(const char *path, int *ret_fd) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if ((S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) || (S_ISREG(st.st_mode) && st.st_size == 0))
                return 1;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Names: aliases and linked units                                           */
/* ------------------------------------------------------------------------ */

#define LINKS_MAX 32 /* hops followed, as the kernel's MAXSYMLINKS-ish limit of systemd */

/* Where a name of DIR leads (resolve()). */
struct resolved {
        char *name;     /* the unit's real name: the last name in DIR the links reach */
        char *path;     /* the file to read: DIR/file, or a linked unit's target (absolute) */
        bool masked;    /* a link to /dev/null */
};

static void resolved_done(struct resolved *r) {
        free(r->name);
        free(r->path);
        *r = (struct resolved) {};
}

/* Whether the directory of path (relative to dir) is dir itself (st). */
static bool in_dir(const char *dir, const struct stat *dir_st, const char *target) {
        const char *slash = strrchr(target, '/');
        if (!slash)
                return true;
        _cleanup_free_ char *d = NULL;
        struct stat st;
        if (asprintf(&d, "%s%s%.*s", target[0] == '/' ? "" : dir, target[0] == '/' ? "" : "/",
                     (int) (slash - target) + 1, target) < 0)
                return false;
        return stat(d, &st) == 0 && st.st_dev == dir_st->st_dev && st.st_ino == dir_st->st_ino;
}

/* The kind of a service name (UNIT_NAME_*), 0 if none. */
static unsigned name_kind(const char *name) {
        static const unsigned kinds[] = { UNIT_NAME_PLAIN, UNIT_NAME_TEMPLATE, UNIT_NAME_INSTANCE };
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                if (unit_name_is_valid(name, kinds[i]))
                        return kinds[i];
        return 0;
}

/* unit, one hop further: a file of kind `kind` named `next` in DIR. An
 * instance reaching a template stays an instance (of that template). */
static int hop_name(const char *unit, const char *next, char **ret) {
        const char *at = strchr(unit, '@');
        if (at && at[1] != '.' && name_kind(next) == UNIT_NAME_TEMPLATE) {
                const char *inst = at + 1;
                return asprintf(ret, "%.*s%s", (int) strcspn(next, "@") + 1, next, inst) < 0 ? -ENOMEM : 0;
        }
        *ret = strdup(next);
        return *ret ? 0 : -ENOMEM;
}

/* A link out of DIR (a linked unit, as systemctl link makes): followed to a
 * regular file whose name is a unit name of file's kind; anything else is
 * refused without reading it (a link to /etc/shadow is not a unit). */
static int linked_target(const char *dir, const char *file, const char *link_path, struct resolved *r,
                         char **ret_message) {
        char q[QUOTE_BUF];
        _cleanup_free_ char *real = realpath(link_path, NULL);
        if (!real) {
                int e = errno;
                return load_error(ret_message, LOG_ERR, e == ENOENT ? ENOENT : e, "%s/%s: a link to a file that %s",
                                  dir, file, e == ENOENT ? "does not exist" : "cannot be resolved");
        }
        if (streq(real, "/dev/null")) {
                r->masked = true;
                return 0;
        }
        const char *base = strrchr(real, '/') + 1;
        unsigned want = name_kind(file) == UNIT_NAME_PLAIN ? UNIT_NAME_PLAIN : UNIT_NAME_TEMPLATE;
        if (!unit_name_is_valid(base, want))
                return load_error(ret_message, LOG_ERR, EINVAL,
                                  "%s/%s: a link to %s, whose name is not a %s name: not read", dir, file, uf_quote(q, real),
                                  want == UNIT_NAME_PLAIN ? "service unit (NAME.service)" : "template (NAME@.service)");
        struct stat st;
        if (stat(real, &st) < 0 || !S_ISREG(st.st_mode))
                return load_error(ret_message, LOG_ERR, EINVAL, "%s/%s: a link to %s, which is not a regular file",
                                  dir, file, uf_quote(q, real));
        r->path = TAKE_PTR(real);
        return 0;
}

/*
 * Where name leads in dir: through links within dir (aliases: each hop a
 * name of the same unit) to a regular file in dir, or out of dir to a linked
 * unit's file. -ENOENT if name has no file (and, for an instance, neither
 * has its template), a logged error otherwise.
 */
static int resolve(const char *dir, const char *name, struct resolved *ret, char **ret_message) {
        struct stat dir_st;
        if (stat(dir, &dir_st) < 0)
                return load_error(ret_message, LOG_ERR, errno, "%s: cannot read the unit directory: %s", dir, strerror(errno));
        _cleanup_free_ char *unit = strdup(name), *file = strdup(name);
        struct resolved r = {};
        if (!unit || !file)
                return -ENOMEM;
        bool linked = false; /* a link was followed: a missing file is a dangling link */
        for (int hops = 0;; hops++) {
                _cleanup_free_ char *path = NULL, *target = NULL;
                struct stat st;
                if (asprintf(&path, "%s/%s", dir, file) < 0)
                        return -ENOMEM;
                if (lstat(path, &st) < 0) {
                        int e = errno;
                        const char *at = strchr(file, '@');
                        if (e == ENOENT && at && at[1] != '.') { /* an instance without its own file: its template's */
                                char *t = NULL;
                                if (asprintf(&t, "%.*s.service", (int) (at - file) + 1, file) < 0)
                                        return -ENOMEM;
                                free(file);
                                file = t;
                                continue;
                        }
                        if (e == ENOENT && linked)
                                return load_error(ret_message, LOG_ERR, ENOENT, "%s/%s: a link to %s, which does not exist",
                                                  dir, name, file);
                        return e == ENOENT ? -ENOENT : load_error(ret_message, LOG_ERR, e, "%s: %s", path, strerror(e));
                }
                if (!S_ISLNK(st.st_mode)) {
                        r.path = TAKE_PTR(path);
                        break;
                }
                linked = true;
                if (hops >= LINKS_MAX)
                        return load_error(ret_message, LOG_ERR, ELOOP, "%s/%s: too many levels of links", dir, name);
                char buf[PATH_MAX];
                ssize_t n = readlink(path, buf, sizeof buf - 1);
                if (n < 0)
                        return load_error(ret_message, LOG_ERR, errno, "%s: %s", path, strerror(errno));
                buf[n] = '\0';
                const char *base = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
                if (streq(buf, "/dev/null")) {
                        r.masked = true;
                        break;
                }
                unsigned kind = name_kind(file), to = name_kind(base);
                if (in_dir(dir, &dir_st, buf) && (to == kind || (kind == UNIT_NAME_INSTANCE && to == UNIT_NAME_TEMPLATE))) {
                        /* an alias: the same unit under another name of DIR (foo@bar.service →
                         * foo@.service: the instance of that template) */
                        char *next = NULL;
                        if (hop_name(unit, base, &next) < 0 || !(target = strdup(base))) {
                                free(next);
                                return -ENOMEM;
                        }
                        free(unit);
                        unit = next;
                        free(file);
                        file = TAKE_PTR(target);
                        continue;
                }
                int k = linked_target(dir, file, path, &r, ret_message);
                if (k < 0)
                        return k;
                break;
        }
        r.name = TAKE_PTR(unit);
        *ret = r;
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Drop-ins                                                                  */
/* ------------------------------------------------------------------------ */

/* The drop-in directories of a unit, most specific first (systemd.unit(5)):
 * each of its names' NAME.d, its template's, each dash prefix's
 * (foo-bar-.service.d, foo-.service.d), then service.d. */
static int dropin_dirs(const struct unit_file *u, struct strv_builder *dirs) {
        struct strv_builder names = {};
        int r = strv_builder_push(&names, strdup(u->name));
        for (char **a = u->aliases; r >= 0 && a && *a; a++)
                r = strv_builder_push(&names, strdup(*a));
        for (size_t i = 0; r >= 0 && i < names.n; i++) {
                const char *n = names.v[i], *at = strchr(n, '@');
                size_t prefix = at ? (size_t) (at - n) : strlen(n) - strlen(".service");
                char *d = NULL;
                r = asprintf(&d, "%s.d", n) < 0 ? -ENOMEM : strv_builder_push(dirs, d);
                if (r >= 0 && at && at[1] != '.')
                        r = asprintf(&d, "%.*s@.service.d", (int) prefix, n) < 0 ? -ENOMEM : strv_builder_push(dirs, d);
                for (size_t e = prefix; r >= 0 && e > 0; e--)
                        if (n[e - 1] == '-' && e > 1 && e - 1 < prefix)
                                r = asprintf(&d, "%.*s.service.d", (int) e, n) < 0 ? -ENOMEM : strv_builder_push(dirs, d);
        }
        strv_builder_clear(&names);
        if (r >= 0)
                r = strv_builder_push(dirs, strdup("service.d"));
        return r;
}

static int cmp_base(const void *a, const void *b) {
        const char *x = *(char *const *) a, *y = *(char *const *) b;
        return strcmp(strrchr(x, '/') + 1, strrchr(y, '/') + 1);
}

/* Adds DIR/d/'s *.conf files not already named in *files; more than
 * UNIT_DROPINS_MAX in all: -E2BIG, reported (the unit is refused: read in
 * part, a hardening drop-in could be the one left out). */
static int dropin_dir_files(const char *dir, const char *d, struct strv_builder *files, char **ret_message) {
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/%s", dir, d) < 0)
                return -ENOMEM;
        DIR *dd = opendir(path);
        /* ENAMETOOLONG: NAME.service.d of a name near NAME_MAX (255) cannot
         * exist, so there is no drop-in (QA19 low). */
        if (!dd)
                return errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG
                               ? 0
                               : log_warning_errno(errno, "%s/: cannot read drop-ins: %m", path);
        int r = 0;
        for (struct dirent *de; r >= 0 && (de = readdir(dd));) {
                size_t n = strlen(de->d_name);
                if (n <= 5 || !streq(de->d_name + n - 5, ".conf"))
                        continue;
                bool seen = false; /* a more specific directory's file of the same name wins */
                for (size_t i = 0; !seen && i < files->n; i++)
                        seen = streq(strrchr(files->v[i], '/') + 1, de->d_name);
                if (seen)
                        continue;
                if (files->n >= UNIT_DROPINS_MAX) {
                        r = load_error(ret_message, LOG_ERR, E2BIG,
                                       "%s/: more than %d drop-ins for the unit: not loaded (none may be left unread)",
                                       path, UNIT_DROPINS_MAX);
                        break;
                }
                char *f = NULL;
                r = asprintf(&f, "%s/%s", path, de->d_name) < 0 ? -ENOMEM : strv_builder_push(files, f);
        }
        closedir(dd);
        return r;
}

/* The drop-in files of u in dir, in the order they are parsed (by file name). */
static int dropin_files(const char *dir, const struct unit_file *u, struct strv_builder *files, char **ret_message) {
        struct strv_builder dirs = {};
        int r = dropin_dirs(u, &dirs);
        for (size_t i = 0; r >= 0 && i < dirs.n; i++) {
                bool dup = false;
                for (size_t j = 0; j < i; j++)
                        dup |= streq(dirs.v[i], dirs.v[j]);
                if (!dup)
                        r = dropin_dir_files(dir, dirs.v[i], files, ret_message);
        }
        strv_builder_clear(&dirs);
        if (r >= 0 && files->n > 1)
                qsort(files->v, files->n, sizeof *files->v, cmp_base);
        return r;
}

struct texts {
        struct unit_text t[UNIT_DROPINS_MAX + 1];
        char *data[UNIT_DROPINS_MAX + 1];
        size_t n;
};

static void texts_done(struct texts *t) {
        for (size_t i = 0; i < t->n; i++)
                free(t->data[i]);
        t->n = 0;
}

/* Reads path into the next text: 1 if read, 0 if masked (a drop-in that is
 * empty or links to /dev/null adds nothing), or a logged error. */
static int texts_read(struct texts *t, const char *path, char **ret_message) {
        _cleanup_close_ int fd = -1;
        int r = open_unit_file(path, &fd);
        if (r == 1)
                return 0;
        if (r == -EBADFD)
                return load_error(ret_message, LOG_ERR, EINVAL, "%s: not a regular file", path);
        if (r < 0)
                return load_error(ret_message, LOG_ERR, r, "%s: %s", path, strerror(-r));
        size_t size;
        r = unit_read_file(fd, UNIT_FILE_SIZE_MAX, &t->data[t->n], &size);
        if (r == -EFBIG)
                return load_error(ret_message, LOG_ERR, EFBIG, "%s: larger than %d bytes", path, UNIT_FILE_SIZE_MAX);
        if (r < 0)
                return load_error(ret_message, LOG_ERR, r, "%s: %s", path, strerror(-r));
        t->t[t->n] = (struct unit_text) { path, t->data[t->n], size };
        t->n++;
        return 1;
}

/* Adds the names of text's [Install] Alias= lines to names (a light scan
 * before the parse, which checks them: a name with a specifier, a quote or
 * an escape is left out). */
static int scan_alias_keys(const struct unit_text *t, struct strv_builder *names) {
        bool install = false;
        int r = 0;
        for (size_t i = 0; r >= 0 && i < t->size;) {
                const char *l = t->data + i, *nl = memchr(l, '\n', t->size - i);
                size_t n = nl ? (size_t) (nl - l) : t->size - i;
                i += n + 1;
                while (n > 0 && (*l == ' ' || *l == '\t'))
                        l++, n--;
                if (n > 0 && *l == '[')
                        install = n >= 9 && !strncmp(l, "[Install]", 9);
                if (!install || n <= 6 || strncmp(l, "Alias=", 6))
                        continue;
                _cleanup_free_ char *v = strndup(l + 6, n - 6);
                char *save = NULL;
                for (char *w = v ? strtok_r(v, " \t\r", &save) : NULL; r >= 0 && w; w = strtok_r(NULL, " \t\r", &save))
                        if (!strpbrk(w, "%\"'\\") && unit_name_is_valid(w, UNIT_NAME_PLAIN | UNIT_NAME_TEMPLATE))
                                r = strv_builder_push(names, strdup(w));
                if (!v)
                        r = -ENOMEM;
        }
        return r;
}

/* A drop-in that is a link (QA19 L2, the unit-file link rule): followed
 * only to /dev/null (masked: 0) or to a regular file named *.conf (1, its
 * path in *ret_real). Anything else is refused without reading it, in one
 * line naming the link only (a link to /etc/shadow must not tell its line
 * count through one parse error per line). 1 with *ret_real NULL: not a link. */
static int dropin_link(const char *path, char **ret_real, char **ret_message) {
        struct stat st;
        *ret_real = NULL;
        if (lstat(path, &st) < 0 || !S_ISLNK(st.st_mode))
                return 1; /* what open finds is said by texts_read */
        _cleanup_free_ char *real = realpath(path, NULL);
        if (real && streq(real, "/dev/null"))
                return 0;
        size_t n = real ? strlen(real) : 0;
        if (!real || n <= 5 || !streq(real + n - 5, ".conf") || stat(real, &st) < 0 || !S_ISREG(st.st_mode))
                return load_error(ret_message, LOG_ERR, EINVAL,
                                  "%s: a link to something that is not a regular *.conf file: not read", path);
        *ret_real = TAKE_PTR(real);
        return 1;
}

/* A drop-in into the next text (texts_read): a link through dropin_link;
 * the text keeps the link's path (what messages name). */
static int dropin_read(struct texts *t, const char *path, char **ret_message) {
        _cleanup_free_ char *real = NULL;
        int k = dropin_link(path, &real, ret_message);
        if (k <= 0)
                return k;
        k = texts_read(t, real ? real : path, ret_message);
        if (k > 0 && real)
                t->t[t->n - 1].origin = path; /* files' string: lives until the parse is done */
        return k;
}

/* Reads res's file and the drop-ins of names into t (their paths in files:
 * t's origins, kept until the parse is done); adds the [Install] Alias=
 * names of what was read to names when add_alias_keys: 1 if there were new
 * ones. */
static int read_texts(const char *dir, struct resolved *res, struct strv_builder *names, bool add_alias_keys,
                      struct texts *t, struct strv_builder *files, char **ret_message) {
        int k = texts_read(t, res->path, ret_message);
        if (k == 0)
                return load_error(ret_message, LOG_NOTICE, ERFKILL, "%s: masked (empty, or a link to /dev/null), not loaded", res->path);
        if (k < 0)
                return k;
        struct unit_file u = { .name = res->name, .aliases = names->v };
        k = dropin_files(dir, &u, files, ret_message);
        for (size_t i = 0; k >= 0 && i < files->n; i++)
                k = dropin_read(t, files->v[i], ret_message);
        size_t before = names->n;
        for (size_t i = 0; k >= 0 && add_alias_keys && i < t->n; i++)
                k = scan_alias_keys(&t->t[i], names);
        return k < 0 ? k : names->n > before;
}

/* Parses res's file and the drop-ins of the unit's names (its real name,
 * aliases: the alias links of DIR that lead to it; and its [Install] Alias=
 * names: systemd reads the drop-ins of every name of an enabled unit, and
 * tend treats Alias= as enabled). */
static int load_resolved(const char *dir, struct resolved *res, char **aliases, struct unit_file **ret,
                         char **ret_message) {
        _cleanup_free_ struct texts *t = calloc(1, sizeof *t); /* 33 KiB: not on a thread's stack */
        struct strv_builder names = {}, files = {};
        int k = t ? 0 : -ENOMEM;
        for (char **a = aliases; k >= 0 && a && *a; a++)
                k = strv_builder_push(&names, strdup(*a));
        if (k >= 0)
                k = read_texts(dir, res, &names, true, t, &files, ret_message);
        if (k > 0) { /* Alias= names: read again with their drop-ins too */
                texts_done(t);
                strv_builder_clear(&files);
                k = read_texts(dir, res, &names, false, t, &files, ret_message);
        }
        if (k >= 0)
                k = unit_file_parse_texts(res->name, t->t, t->n, ret, ret_message);
        if (t)
                texts_done(t);
        strv_builder_clear(&files);
        strv_builder_clear(&names);
        return k;
}

/* unit_load() with the alias links of DIR that lead to name (NULL: none known). */
static int load_named(const char *dir, const char *name, char **aliases, struct unit_file **ret, char **ret_message) {
        if (ret_message)
                *ret_message = NULL;
        if (!dir || !name || !ret)
                return -EINVAL;
        char q[QUOTE_BUF];
        if (unit_name_is_valid(name, UNIT_NAME_TEMPLATE))
                return load_error(ret_message, LOG_ERR, EINVAL, "%s: a template: only its instances (%.*s<instance>.service) run",
                                  name, (int) (strlen(name) - strlen(".service")), name);
        if (!unit_name_is_valid(name, UNIT_NAME_PLAIN | UNIT_NAME_INSTANCE))
                return load_error(ret_message, LOG_ERR, EINVAL, "%s: invalid unit name %s", dir, uf_quote(q, name));
        struct resolved r = {};
        char *said = NULL; /* why it does not resolve, when resolve() said it (a dangling link) */
        int k = resolve(dir, name, &r, &said);
        if (k == -ENOENT && !said)
                return load_error(ret_message, LOG_ERR, ENOENT, "%s/%s: no such unit file", dir, name);
        if (ret_message && k < 0)
                *ret_message = TAKE_PTR(said);
        free(said);
        if (k >= 0 && r.masked)
                k = load_error(ret_message, LOG_NOTICE, ERFKILL, "%s/%s: masked (a link to /dev/null), not loaded", dir, name);
        if (k >= 0)
                k = load_resolved(dir, &r, aliases, ret, ret_message);
        resolved_done(&r);
        return k;
}

bool unit_exists(const char *dir, const char *name) {
        if (!dir || !unit_name_is_valid(name, UNIT_NAME_PLAIN | UNIT_NAME_INSTANCE))
                return false;
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (lstat(path, &st) == 0)
                return true;
        const char *at = strchr(name, '@');
        snprintf(path, sizeof path, "%s/%.*s.service", dir, at ? (int) (at - name) + 1 : 0, name);
        return at && lstat(path, &st) == 0;
}

int unit_load(const char *dir, const char *name, struct unit_file **ret, char **ret_message) {
        return load_named(dir, name, NULL, ret, ret_message);
}

struct unit_set *unit_set_free(struct unit_set *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_units; i++)
                unit_file_free(s->units[i]);
        free(s->units);
        for (size_t i = 0; i < s->n_errors; i++) {
                free(s->errors[i].name);
                free(s->errors[i].message);
        }
        free(s->errors);
        free(s);
        return NULL;
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

void uf_strv_sort_unique(char **l) {
        size_t n = strv_length(l), k = 0;
        if (n < 2)
                return;
        qsort(l, n, sizeof *l, cmp_names);
        for (size_t i = 0; i < n; i++)
                if (k > 0 && streq(l[k - 1], l[i]))
                        free(l[i]);
                else
                        l[k++] = l[i];
        l[k] = NULL;
}

/* Files of DIR that are units of another type than service. */
struct other_types {
        struct strv_builder sockets, timers, others;
};

static void other_types_done(struct other_types *o) {
        strv_builder_clear(&o->sockets);
        strv_builder_clear(&o->timers);
        strv_builder_clear(&o->others);
}

/* Sorts file into *names (a service that is not a template) or o; 0 or -ENOMEM. */
static int list_entry(const char *file, struct strv_builder *names, struct other_types *o) {
        static const char *const other[] = { ".target", ".mount", ".automount", ".swap", ".path",
                                             ".device", ".slice", ".scope" };
        size_t n = strlen(file);
        struct strv_builder *to = NULL;
        if (n > 8 && streq(file + n - 8, ".service"))
                to = unit_name_is_valid(file, UNIT_NAME_TEMPLATE) ? NULL : names;
        else if (n > 7 && streq(file + n - 7, ".socket"))
                to = &o->sockets;
        else if (n > 6 && streq(file + n - 6, ".timer"))
                to = &o->timers;
        else
                for (size_t i = 0; i < ELEMENTSOF(other); i++)
                        if (n > strlen(other[i]) && streq(file + n - strlen(other[i]), other[i]))
                                to = &o->others;
        if (!to)
                return 0;
        char *s = strdup(file);
        return s ? strv_builder_push(to, s) : -ENOMEM;
}

/* The *.service names of dir that are not templates, sorted; o the other types. */
static int list_units(const char *dir, struct strv_builder *names, struct other_types *o) {
        DIR *d = opendir(dir);
        if (!d) {
                int r = negative_errno();
                return log_error_errno(r, "%s: cannot read the unit directory: %m", dir);
        }
        int r = 0;
        for (struct dirent *de; r >= 0 && (errno = 0, de = readdir(d));)
                r = list_entry(de->d_name, names, o);
        if (r >= 0 && errno)
                r = log_error_errno(errno, "%s: cannot read the unit directory: %m", dir);
        closedir(d);
        if (r >= 0 && names->n)
                qsort(names->v, names->n, sizeof *names->v, cmp_names);
        return r;
}

#define NAMED_MAX 20 /* names shown in the line about other unit types */

/* " (a.socket, b.socket)": the first NAMED_MAX of l, sorted. */
static void name_list(struct strv_builder *l, char *buf, size_t size) {
        size_t o = 0;
        qsort(l->v, l->n, sizeof *l->v, cmp_names);
        o += (size_t) snprintf(buf + o, size - o, " (");
        for (size_t i = 0; i < l->n && i < NAMED_MAX && o < size; i++) {
                char q[QUOTE_BUF];
                const char *shown = l->v[i];
                for (const char *p = l->v[i]; *p && shown == l->v[i]; p++)
                        if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
                                shown = uf_quote(q, l->v[i]); /* QA L3: never raw bytes of a file name */
                o += (size_t) snprintf(buf + o, size - o, "%s%s", i ? ", " : "", shown);
        }
        if (o < size)
                snprintf(buf + o, size - o, "%s)", l->n > NAMED_MAX ? ", …" : "");
}

/* Once per load: what DIR holds that tend does not run. */
static void report_other_types(const char *dir, struct other_types *o) {
        char s[NAMED_MAX * 260 + 16] = "", t[NAMED_MAX * 260 + 16] = "";
        if (o->sockets.n || o->timers.n) {
                if (o->sockets.n)
                        name_list(&o->sockets, s, sizeof s);
                if (o->timers.n)
                        name_list(&o->timers, t, sizeof t);
                char a[32] = "", b[32] = "";
                if (o->sockets.n)
                        snprintf(a, sizeof a, "%zu socket%s", o->sockets.n, o->sockets.n == 1 ? "" : "s");
                if (o->timers.n)
                        snprintf(b, sizeof b, "%zu timer%s", o->timers.n, o->timers.n == 1 ? "" : "s");
                log_warning("%s: tend runs services only: ignored %s%s%s%s%s", dir, a, s,
                            o->sockets.n && o->timers.n ? " and " : "", b, t);
        }
        if (o->others.n) {
                name_list(&o->others, s, sizeof s);
                log_info("%s: tend runs services only: ignored %zu other unit%s%s", dir, o->others.n,
                         o->others.n == 1 ? "" : "s", s);
        }
}

static int set_add(struct unit_set *s, char *name, int error, struct unit_file *u, char *message) {
        if (u) {
                struct unit_file **v = realloc(s->units, (s->n_units + 1) * sizeof *v);
                if (!v)
                        return -ENOMEM;
                s->units = v;
                s->units[s->n_units++] = u;
                free(name);
                free(message);
                return 0;
        }
        struct unit_load_error *e = realloc(s->errors, (s->n_errors + 1) * sizeof *e);
        if (!e)
                return -ENOMEM;
        s->errors = e;
        s->errors[s->n_errors++] = (struct unit_load_error) { name, error, message };
        return 0;
}

/* A name of DIR and where it leads. */
struct entry {
        char *name;        /* the file name in DIR */
        struct resolved r; /* r.name NULL: it does not resolve (error, message) */
        int error;
        char *message;
};

static int cmp_entries(const void *a, const void *b) {
        const struct entry *x = a, *y = b;
        int c = strcmp(x->r.name ? x->r.name : "", y->r.name ? y->r.name : "");
        if (c)
                return c;
        /* the unit's own file first, then its aliases by name */
        bool xo = x->r.name && streq(x->name, x->r.name), yo = y->r.name && streq(y->name, y->r.name);
        return xo != yo ? (xo ? -1 : 1) : strcmp(x->name, y->name);
}

/* Resolves every name; those that do not resolve become errors of s. */
static int resolve_all(const char *dir, struct strv_builder *names, struct unit_set *s, struct entry **ret, size_t *ret_n) {
        struct entry *e = calloc(names->n ? names->n : 1, sizeof *e);
        if (!e)
                return -ENOMEM;
        size_t n = 0;
        int r = 0;
        for (size_t i = 0; r >= 0 && i < names->n; i++) {
                char *message = NULL, q[QUOTE_BUF];
                struct resolved res = {};
                int k = unit_name_is_valid(names->v[i], UNIT_NAME_PLAIN | UNIT_NAME_INSTANCE)
                                ? resolve(dir, names->v[i], &res, &message)
                                : load_error(&message, LOG_ERR, EINVAL, "%s: invalid unit name %s", dir, uf_quote(q, names->v[i]));
                if (k >= 0 && res.masked) {
                        k = load_error(&message, LOG_NOTICE, ERFKILL, "%s/%s: masked (a link to /dev/null), not loaded",
                                       dir, names->v[i]);
                        resolved_done(&res);
                }
                if (k == -ENOENT && !message) /* gone since it was listed (a dangling link said why) */
                        k = load_error(&message, LOG_ERR, ENOENT, "%s/%s: no such unit file", dir, names->v[i]);
                if (k < 0) {
                        r = set_add(s, TAKE_PTR(names->v[i]), k, NULL, message);
                        continue;
                }
                e[n++] = (struct entry) { .name = TAKE_PTR(names->v[i]), .r = res };
        }
        if (n > 1)
                qsort(e, n, sizeof *e, cmp_entries);
        *ret = e;
        *ret_n = n;
        return r;
}

/* Loads the unit of e[0..n), the entries that lead to one real name: once,
 * its links' names its aliases. */
static int load_group(const char *dir, struct entry *e, size_t n, struct unit_set *s) {
        struct strv_builder aliases = {};
        int r = 0;
        for (size_t i = 0; r >= 0 && i < n; i++)
                if (!streq(e[i].name, e[i].r.name))
                        r = strv_builder_push(&aliases, strdup(e[i].name));
        struct unit_file *u = NULL;
        char *message = NULL, *name = strdup(e[0].r.name);
        int k = r < 0 || !name ? -ENOMEM : load_resolved(dir, &e[0].r, aliases.v, &u, &message);
        for (size_t i = 0; k >= 0 && i < aliases.n; i++) {
                k = strv_push(&u->aliases, aliases.v[i]);
                aliases.v[i] = NULL;
        }
        if (k >= 0 && u->aliases)
                uf_strv_sort_unique(u->aliases);
        strv_builder_clear(&aliases);
        if (k == -ENOMEM || !name) {
                unit_file_free(u);
                free(message);
                free(name);
                return -ENOMEM;
        }
        if (k < 0)
                u = unit_file_free(u);
        r = set_add(s, name, k < 0 ? k : 0, u, message);
        if (r < 0) {
                unit_file_free(u);
                free(message);
        }
        return r;
}

/* A name of a loaded unit. */
struct name_ref {
        const char *name;
        size_t unit;
        char **slot; /* the alias's element of its unit's aliases; NULL: the unit's own name */
};

static int cmp_refs(const void *a, const void *b) {
        const struct name_ref *x = a, *y = b;
        int c = strcmp(x->name, y->name);
        if (c)
                return c;
        if (!x->slot != !y->slot)
                return x->slot ? 1 : -1; /* a unit's own name first */
        return x->unit < y->unit ? -1 : x->unit > y->unit;
}

static const char dropped_alias[] = "";

/* Every name of every unit, sorted; an alias that is another unit's name (or
 * an earlier unit's alias) is dropped with a warning. */
static int name_refs(struct unit_set *s, struct name_ref **ret, size_t *ret_n) {
        size_t n = s->n_units;
        for (size_t i = 0; i < s->n_units; i++)
                n += strv_length(s->units[i]->aliases);
        struct name_ref *refs = calloc(n ? n : 1, sizeof *refs);
        if (!refs)
                return -ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < s->n_units; i++) {
                refs[k++] = (struct name_ref) { s->units[i]->name, i, NULL };
                for (char **a = s->units[i]->aliases; a && *a; a++)
                        refs[k++] = (struct name_ref) { *a, i, a };
        }
        qsort(refs, n, sizeof *refs, cmp_refs);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
                if (kept > 0 && streq(refs[kept - 1].name, refs[i].name)) {
                        if (refs[i].unit != refs[kept - 1].unit)
                                log_warning("%s: alias %s is already a name of %s, ignored", s->units[refs[i].unit]->path,
                                            refs[i].name, s->units[refs[kept - 1].unit]->name);
                        free(*refs[i].slot);
                        *refs[i].slot = (char *) dropped_alias;
                        continue;
                }
                refs[kept++] = refs[i];
        }
        for (size_t i = 0; i < s->n_units; i++) { /* the dropped ones out */
                char **a = s->units[i]->aliases, **o = a;
                for (; a && *a; a++)
                        if (*a != dropped_alias)
                                *o++ = *a;
                if (o)
                        *o = NULL;
        }
        *ret = refs;
        *ret_n = kept;
        return 0;
}

/* Dependencies that name an alias name its unit. */
static int rewrite_deps(struct unit_set *s) {
        struct name_ref *refs = NULL;
        size_t n = 0;
        int r = name_refs(s, &refs, &n);
        for (size_t i = 0; r >= 0 && i < s->n_units; i++) {
                struct unit_file *u = s->units[i];
                const struct unit_dep_keys *d = u->dep_keys;
                char **lists[] = { u->requires, u->wants, u->binds_to, u->after, u->before,
                                   d ? d->requisite : NULL, d ? d->part_of : NULL, d ? d->conflicts : NULL,
                                   d ? d->upholds : NULL, d ? d->on_failure : NULL, d ? d->on_success : NULL,
                                   d ? d->propagates_reload_to : NULL, d ? d->reload_propagated_from : NULL };
                for (size_t l = 0; r >= 0 && l < ELEMENTSOF(lists); l++)
                        for (char **p = lists[l]; r >= 0 && p && *p; p++) {
                                struct name_ref key = { .name = *p };
                                const struct name_ref *f = bsearch(&key, refs, n, sizeof *refs, cmp_names);
                                if (!f || !f->slot)
                                        continue;
                                char *real = strdup(s->units[f->unit]->name);
                                if (!real)
                                        r = -ENOMEM;
                                else {
                                        free(*p);
                                        *p = real;
                                }
                        }
        }
        free(refs);
        return r;
}

int unit_load_dir(const char *dir, struct unit_set **ret) {
        if (!dir || !ret)
                return -EINVAL;
        struct strv_builder names = {};
        struct other_types other = {};
        int r = list_units(dir, &names, &other);
        if (r >= 0)
                report_other_types(dir, &other);
        other_types_done(&other);
        _cleanup_(unit_set_freep) struct unit_set *s = r >= 0 ? calloc(1, sizeof *s) : NULL;
        if (r >= 0 && !s)
                r = -ENOMEM;
        struct entry *e = NULL;
        size_t n = 0;
        if (r >= 0)
                r = resolve_all(dir, &names, s, &e, &n);
        for (size_t i = 0, j; r >= 0 && i < n; i = j) {
                for (j = i + 1; j < n && streq(e[j].r.name, e[i].r.name); j++)
                        ;
                r = load_group(dir, e + i, j - i, s);
        }
        for (size_t i = 0; e && i < n; i++) {
                free(e[i].name);
                resolved_done(&e[i].r);
        }
        free(e);
        for (size_t i = 0; i < names.n; i++) /* those not taken, after an error */
                free(names.v[i]);
        free(names.v);
        if (r >= 0)
                r = rewrite_deps(s);
        if (r >= 0 && s->n_errors > 1)
                qsort(s->errors, s->n_errors, sizeof *s->errors, cmp_names);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}
