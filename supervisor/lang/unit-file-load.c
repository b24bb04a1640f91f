/* SPDX-License-Identifier: MIT */
/*
 * Loading unit files (unit-file.h): a unit from its directory (an instance
 * from its template, masked units, drop-in warnings) and every unit of a
 * directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

static void warn_drop_ins(const char *dir, const char *name) {
        _cleanup_free_ char *d = NULL;
        struct stat st;
        if (asprintf(&d, "%s/%s.d", dir, name) >= 0 && stat(d, &st) == 0 && S_ISDIR(st.st_mode))
                log_warning("%s/: drop-in directories are not read", d);
}

int unit_load(const char *dir, const char *name, struct unit_file **ret, char **ret_message) {
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
        _cleanup_free_ char *path = NULL, *template = NULL, *template_path = NULL;
        _cleanup_close_ int fd = -1;
        const char *at = strchr(name, '@');
        if (asprintf(&path, "%s/%s", dir, name) < 0 ||
            (at && (asprintf(&template, "%.*s@.service", (int) (at - name), name) < 0 ||
                    asprintf(&template_path, "%s/%s", dir, template) < 0)))
                return -ENOMEM;
        int r = open_unit_file(path, &fd);
        bool from_template = false;
        if (r == -ENOENT && at) { /* an instance without its own file: its template's */
                r = open_unit_file(template_path, &fd);
                from_template = r != -ENOENT;
                if (from_template)
                        SWAP_PTR(path, template_path);
        }
        if (r == -ENOENT)
                return load_error(ret_message, LOG_ERR, ENOENT, "%s: no such unit file", path);
        if (r == 1)
                return load_error(ret_message, LOG_NOTICE, ERFKILL, "%s: masked (empty, or a link to /dev/null), not loaded", path);
        if (r == -EBADFD)
                return load_error(ret_message, LOG_ERR, EINVAL, "%s: not a regular file", path);
        if (r < 0)
                return load_error(ret_message, LOG_ERR, r, "%s: %s", path, strerror(-r));
        warn_drop_ins(dir, name);
        if (from_template)
                warn_drop_ins(dir, template);
        _cleanup_free_ char *data = NULL;
        size_t size;
        r = unit_read_file(fd, UNIT_FILE_SIZE_MAX, &data, &size);
        if (r == -EFBIG)
                return load_error(ret_message, LOG_ERR, EFBIG, "%s: larger than %d bytes", path, UNIT_FILE_SIZE_MAX);
        if (r < 0)
                return load_error(ret_message, LOG_ERR, r, "%s: %s", path, strerror(-r));
        return unit_file_parse(name, path, data, size, ret, ret_message);
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

/* The *.service names of dir that are not templates, sorted. */
static int list_units(const char *dir, struct strv_builder *names) {
        DIR *d = opendir(dir);
        if (!d) {
                int r = negative_errno();
                return log_error_errno(r, "%s: cannot read the unit directory: %m", dir);
        }
        int r = 0;
        for (struct dirent *de; r >= 0 && (errno = 0, de = readdir(d));) {
                size_t n = strlen(de->d_name);
                if (n <= 8 || strcmp(de->d_name + n - 8, ".service") != 0 || unit_name_is_valid(de->d_name, UNIT_NAME_TEMPLATE))
                        continue;
                char *s = strdup(de->d_name);
                r = s ? strv_builder_push(names, s) : -ENOMEM;
        }
        if (r >= 0 && errno)
                r = log_error_errno(errno, "%s: cannot read the unit directory: %m", dir);
        closedir(d);
        if (r >= 0 && names->n)
                qsort(names->v, names->n, sizeof *names->v, cmp_names);
        return r;
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

int unit_load_dir(const char *dir, struct unit_set **ret) {
        if (!dir || !ret)
                return -EINVAL;
        struct strv_builder names = {};
        int r = list_units(dir, &names);
        _cleanup_(unit_set_freep) struct unit_set *s = r >= 0 ? calloc(1, sizeof *s) : NULL;
        if (r >= 0 && !s)
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < names.n; i++) {
                struct unit_file *u = NULL;
                char *message = NULL;
                int k = unit_load(dir, names.v[i], &u, &message);
                r = set_add(s, names.v[i], k < 0 ? k : 0, u, message);
                if (r < 0) {
                        unit_file_free(u);
                        free(message);
                } else
                        names.v[i] = NULL; /* taken */
        }
        for (size_t i = 0; i < names.n; i++)
                free(names.v[i]);
        free(names.v);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}
