/* SPDX-License-Identifier: MIT */
/*
 * tendctl's verbs answered from the units' properties (tendctl-show.h): show,
 * is-active, is-failed, is-enabled, cat, list-dependencies, try-restart,
 * reload-or-restart; status NAME… in tendctl-status.c. One `show` request
 * (tendctl-units.c), then the verb's output and systemctl's exit status for
 * it (tendctl(1) "EXIT STATUS").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "tendctl-conn.h"
#include "tendctl-print.h"
#include "tendctl-session.h"
#include "tendctl-show.h"
#include "tendctl-status.h"
#include "tendctl-units.h"
#include "time-util.h"

static void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}

/* ---- show ---- */

static void show_prop(const struct args *a, const char *key, json *v) {
        char buf[4096];
        format_value(key, v, buf, sizeof buf);
        if (a->value)
                printf("%s\n", buf);
        else
                printf("%s=%s\n", key, buf);
}

/* The property named by the n bytes at name, if props has it. */
static void show_named(const struct args *a, json *props, const char *name, size_t n) {
        char key[128];
        json *v;
        if (n == 0 || n >= sizeof key)
                return;
        memcpy(key, name, n);
        key[n] = 0;
        /* a property tend does not have is left out, as systemd leaves out one it does not know */
        if (json_object_object_get_ex(props, key, &v))
                show_prop(a, key, v);
}

static void show_one(const struct args *a, json *props) {
        if (a->n_props == 0) {
                json_object_object_foreach(props, key, v)
                        show_prop(a, key, v);
                return;
        }
        /* in the order asked: each -p, each of its comma-separated names */
        for (size_t i = 0; i < a->n_props; i++)
                for (const char *p = a->props[i];;) {
                        size_t len = strcspn(p, ",");
                        show_named(a, props, p, len);
                        if (!p[len])
                                break;
                        p += len + 1;
                }
}

static int verb_show(const struct args *a, struct units *u) {
        if (a->json) {
                _cleanup_json_ json *all = json_object_new_array();
                for (size_t i = 0; all && i < u->n; i++)
                        json_object_array_add(all, json_object_get(u->props[i]));
                if (all)
                        print_json(all);
                return 0;
        }
        for (size_t i = 0; i < u->n; i++) {
                if (i > 0)
                        putchar('\n');
                show_one(a, u->props[i]);
        }
        return 0;
}

/* ---- is-active, is-failed, is-enabled ---- */

/* Whether name (as given, with or without ".service") names the unit id by
 * an alias: systemctl's is-enabled then says "alias". */
static bool is_alias(const char *name, const char *id) {
        size_t n = strlen(name), s = strlen(".service");
        size_t base = n > s && streq(name + n - s, ".service") ? n - s : n;
        return strlen(id) != base + s || strncmp(name, id, base) != 0;
}

static int verb_is(const struct args *a, struct units *u) {
        bool any = false;
        for (size_t i = 0; i < u->n; i++) {
                const char *active = get_str(u->props[i], "ActiveState", "inactive");
                if (a->verb == VERB_IS_ENABLED) {
                        if (!u->found[i]) {
                                fprintf(stderr, "Failed to get unit file state for %s: No such file or directory\n",
                                        get_str(u->props[i], "Id", a->names[i]));
                                continue;
                        }
                        const char *id = get_str(u->props[i], "Id", a->names[i]);
                        const char *state = is_alias(a->names[i], id) ? "alias"
                                            : get_str(u->props[i], "UnitFileState", "enabled");
                        any |= streq(state, "enabled") || streq(state, "static") || streq(state, "alias") ||
                               streq(state, "linked") || streq(state, "generated");
                        if (!a->quiet)
                                printf("%s\n", state);
                        continue;
                }
                if (a->verb == VERB_IS_ACTIVE)
                        any |= streq(active, "active") || streq(active, "reloading");
                else
                        any |= streq(active, "failed");
                if (!a->quiet)
                        printf("%s\n", active);
        }
        if (any)
                return 0;
        return a->verb == VERB_IS_ACTIVE ? EXIT_PROGRAM_NOT_RUNNING : EXIT_FAILED;
}

/* ---- cat ---- */

static int cat_file(const char *path, bool first) {
        _cleanup_(fclosep) FILE *f = fopen(path, "re");
        if (!f) {
                int e = errno;
                fprintf(stderr, "tendctl: %s: %s\n", path, strerror(e));
                return -e;
        }
        printf("%s# %s\n", first ? "" : "\n", path);
        char buf[8192];
        size_t n, last = 0;
        char end = '\n';
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
                fwrite(buf, 1, n, stdout);
                last = n;
                end = buf[n - 1];
        }
        if (last > 0 && end != '\n')
                putchar('\n');
        return 0;
}

static int verb_cat(const struct args *a, struct units *u) {
        int ret = 0;
        bool first = true;
        for (size_t i = 0; i < u->n; i++) {
                if (!u->found[i]) {
                        fprintf(stderr, "No files found for %s.\n", get_str(u->props[i], "Id", a->names[i]));
                        ret = EXIT_FAILED;
                        continue;
                }
                if (cat_file(get_str(u->props[i], "FragmentPath", ""), first) < 0)
                        ret = EXIT_FAILED;
                first = false;
                json *dropins;
                if (!json_object_object_get_ex(u->props[i], "DropInPaths", &dropins) ||
                    !json_object_is_type(dropins, json_type_array))
                        continue;
                for (size_t k = 0; k < json_object_array_length(dropins); k++)
                        if (cat_file(json_object_get_string(json_object_array_get_idx(dropins, k)), false) < 0)
                                ret = EXIT_FAILED;
        }
        fflush(stdout);
        return ret;
}

/* ---- list-dependencies ---- */

/* The unit's Requires=, BindsTo=, Wants= names, in that order, deduplicated
 * (systemd's list-dependencies follows these). n: their count. */
static char **dependency_names(json *props, size_t *ret_n) {
        static const char *const keys[] = { "Requires", "BindsTo", "Wants" };
        size_t n = 0;
        char **v = NULL;
        for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                json *a;
                if (!json_object_object_get_ex(props, keys[k], &a) || !json_object_is_type(a, json_type_array))
                        continue;
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        const char *s = json_object_get_string(json_object_array_get_idx(a, i));
                        bool dup = false;
                        for (size_t j = 0; j < n && !dup; j++)
                                dup = streq(v[j], s);
                        char **w = dup ? v : reallocarray(v, n + 1, sizeof *v);
                        if (!w)
                                break;
                        v = w;
                        if (!dup)
                                v[n++] = (char *) s;
                }
        }
        *ret_n = n;
        return v;
}

static int verb_list_dependencies(const struct args *a, int fd, struct units *u) {
        printf("%s\n", get_str(u->props[0], "Id", a->names[0]));
        if (!u->found[0])
                return 0;
        size_t n = 0;
        _cleanup_free_ char **deps = dependency_names(u->props[0], &n);
        struct units d = {};
        if (n > 0 && units_fetch(fd, deps, n, &d) < 0)
                return EXIT_FAILED;
        for (size_t i = 0; i < n; i++) {
                const char *state = get_str(d.props[i], "ActiveState", "inactive");
                const char *on = colour ? (streq(state, "active") ? "\033[0;1;32m" : "\033[0;1;31m") : "";
                printf("%s●%s %s%s\n", on, colour_off(), i + 1 < n ? "├─" : "└─", deps[i]);
        }
        units_done(&d);
        return 0;
}

/* ---- try-restart, reload-or-restart ---- */

/* Restarts (or reloads) the units of u that pass; unknown ones fail with
 * systemctl's 5. */
static int restart_some(const struct args *a, int fd, struct units *u) {
        _cleanup_free_ char **restart = calloc(u->n + 1, sizeof(char *)), **reload = calloc(u->n + 1, sizeof(char *));
        size_t n_restart = 0, n_reload = 0;
        int ret = 0;
        if (!restart || !reload)
                return EXIT_FAILED;
        for (size_t i = 0; i < u->n; i++) {
                const char *state = get_str(u->props[i], "ActiveState", "inactive");
                bool up = streq(state, "active") || streq(state, "activating") || streq(state, "reloading");
                if (!u->found[i]) {
                        fprintf(stderr, "Failed to %s %s: Unit %s not found.\n", verb_name(a->verb), a->names[i],
                                get_str(u->props[i], "Id", a->names[i]));
                        ret = EXIT_NOT_INSTALLED;
                } else if (a->verb == VERB_RELOAD_OR_RESTART && up && get_bool(u->props[i], "CanReload"))
                        reload[n_reload++] = a->names[i];
                else if (a->verb == VERB_RELOAD_OR_RESTART || up)
                        restart[n_restart++] = a->names[i];
        }
        struct args b = *a;
        int r;
        if (n_reload > 0) {
                b.cmd = CONTROL_CMD_RELOAD, b.names = reload, b.n_names = n_reload;
                if ((r = run_session(&b, fd)) != 0 && ret == 0)
                        ret = r;
        }
        if (n_restart > 0) {
                b.cmd = CONTROL_CMD_RESTART, b.names = restart, b.n_names = n_restart, b.json = false;
                if ((r = run_session(&b, fd)) != 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

int run_show_verb(const struct args *a, int fd) {
        struct units u = {};
        int r = units_fetch(fd, a->names, a->n_names, &u);
        if (r == -EACCES)
                return verb_exit_denied(a->verb);
        if (r == -E2BIG) /* too-large: as the other verbs, a usage error's status */
                return control_error_exit_status(CONTROL_ERROR_TOO_LARGE);
        if (r < 0) {
                if (r != -EIO)
                        recv_error(r);
                return EXIT_FAILED;
        }
        switch (a->verb) {
        case VERB_SHOW:
                r = verb_show(a, &u);
                break;
        case VERB_IS_ACTIVE: case VERB_IS_FAILED: case VERB_IS_ENABLED:
                r = verb_is(a, &u);
                break;
        case VERB_CAT:
                r = verb_cat(a, &u);
                break;
        case VERB_LIST_DEPENDENCIES:
                r = verb_list_dependencies(a, fd, &u);
                break;
        case VERB_STATUS:
                r = verb_status(a, fd, &u);
                break;
        default:
                r = restart_some(a, fd, &u);
                break;
        }
        fflush(stdout);
        units_done(&u);
        return r;
}
