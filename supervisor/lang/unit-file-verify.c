/* SPDX-License-Identifier: MIT */
/*
 * tend --verify PATH… (docs/tend.8.md "VERIFYING UNIT FILES"), like
 * systemd-analyze verify: each unit loaded as tend would load it (links,
 * drop-ins, aliases), every message logged with its FILE:LINE, nothing
 * started.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

#include "unit-file-internal.h"

/* The instance a template is verified as (its %i). */
#define VERIFY_INSTANCE "instance"

struct verify_counts {
        size_t loaded, masked, failed;
};

static void count(struct verify_counts *n, int r) {
        if (r >= 0)
                n->loaded++;
        else if (r == -ERFKILL)
                n->masked++;
        else
                n->failed++;
}

/* One unit of dir, a template as its instance VERIFY_INSTANCE. */
static void verify_one(const char *dir, const char *name, struct verify_counts *n) {
        char inst[UNIT_NAME_MAX + 64];
        if (unit_name_is_valid(name, UNIT_NAME_TEMPLATE)) {
                snprintf(inst, sizeof inst, "%.*s" VERIFY_INSTANCE ".service", (int) strcspn(name, "@") + 1, name);
                name = inst;
        }
        struct unit_file *u = NULL;
        int r = unit_load(dir, name, &u, NULL);
        unit_file_free(u);
        count(n, r);
}

/* Whether name in dir is a link to another template of dir (autovt@.service
 * → getty@.service): an alias, the same template, verified once. */
static bool template_alias(const char *dir, const char *name) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        struct stat st;
        if (lstat(path, &st) < 0 || !S_ISLNK(st.st_mode))
                return false;
        _cleanup_free_ char *real = realpath(path, NULL), *real_dir = realpath(dir, NULL);
        const char *slash = real ? strrchr(real, '/') : NULL;
        return slash && real_dir && (size_t) (slash - real) == strlen(real_dir) && !strncmp(real, real_dir, slash - real) &&
               !streq(slash + 1, name) && unit_name_is_valid(slash + 1, UNIT_NAME_TEMPLATE);
}

/* The templates of dir (unit_load_dir() loads their instances only). */
static void verify_templates(const char *dir, struct verify_counts *n) {
        DIR *d = opendir(dir);
        if (!d)
                return;
        struct strv_builder t = {};
        for (struct dirent *de; (de = readdir(d));)
                if (unit_name_is_valid(de->d_name, UNIT_NAME_TEMPLATE) && !template_alias(dir, de->d_name))
                        (void) strv_builder_push(&t, strdup(de->d_name));
        closedir(d);
        if (t.n)
                uf_strv_sort_unique(t.v);
        for (size_t i = 0; t.v && t.v[i]; i++)
                verify_one(dir, t.v[i], n);
        strv_builder_clear(&t);
}

static int verify_dir(const char *dir, struct verify_counts *n) {
        struct unit_set *s = NULL;
        int r = unit_load_dir(dir, &s);
        if (r < 0)
                return r;
        n->loaded += s->n_units;
        for (size_t i = 0; i < s->n_errors; i++)
                count(n, s->errors[i].error);
        unit_set_free(s);
        verify_templates(dir, n);
        return 0;
}

static int verify_path(const char *path, struct verify_counts *n) {
        struct stat st;
        if (stat(path, &st) < 0)
                return log_error_errno(errno, "%s: %m", path);
        if (S_ISDIR(st.st_mode))
                return verify_dir(path, n);
        char buf[PATH_MAX];
        snprintf(buf, sizeof buf, "%s", path);
        char *slash = strrchr(buf, '/');
        const char *name = slash ? slash + 1 : buf, *dir = slash ? (slash == buf ? "/" : buf) : ".";
        if (slash)
                *slash = '\0';
        if (!unit_name_is_valid(name, UNIT_NAME_ANY)) {
                char q[QUOTE_BUF];
                return log_error_errno(EINVAL, "%s: not a service unit's name: %s", path, uf_quote(q, name));
        }
        verify_one(dir, name, n);
        return 0;
}

int unit_verify(char *const *paths) {
        struct verify_counts n = {};
        bool bad_path = false;
        for (char *const *p = paths; p && *p; p++)
                bad_path |= verify_path(*p, &n) < 0;
        printf("%zu unit%s: %zu loaded, %zu masked, %zu with errors\n", n.loaded + n.masked + n.failed,
               n.loaded + n.masked + n.failed == 1 ? "" : "s", n.loaded, n.masked, n.failed);
        return n.failed > 0 || bad_path ? 1 : 0;
}
