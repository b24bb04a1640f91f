/* SPDX-License-Identifier: MIT */
/*
 * Type=forking's keys (docs/tend.service.5.md "Type=forking"): PIDFile=.
 * GuessMainPID= is a plain boolean (unit-file-keys.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit-file-internal.h"

/* systemd's runtime directory, the root of a relative PIDFile=. */
#define PID_FILE_ROOT "/run"

/* PIDFile=: specifiers resolved; a relative path is taken under /run and
 * one under /var/run/ is moved to /run/ (its compatibility symlink), as
 * systemd does. */
int uf_parse_pid_file(struct parse_ctx *c, const struct key_def *k, const char *value) {
        char **field = (char **) uf_key_field(c, k);
        if (!*value) {
                free(*field);
                *field = NULL;
                return 0;
        }
        char *path = NULL;
        int r = uf_resolve_specifiers(c, k, value, &path);
        if (r < 0)
                return r;
        const char *rest = path[0] == '/' ? path : NULL;
        const char *root = path[0] == '/' ? "" : PID_FILE_ROOT "/";
        if (strncmp(path, "/var/run/", strlen("/var/run/")) == 0) {
                rest = path + strlen("/var/run/");
                root = PID_FILE_ROOT "/";
        } else if (!rest)
                rest = path;
        char *full = NULL;
        r = asprintf(&full, "%s%s", root, rest);
        free(path);
        if (r < 0)
                return -ENOMEM;
        if (strstr(full, "/../") || (strlen(full) >= 3 && streq(full + strlen(full) - 3, "/.."))) {
                char q[QUOTE_BUF];
                r = syntax_error(c, "%s=: a path with \"..\": %s", k->key, uf_quote(q, full));
                free(full);
                return r;
        }
        free(*field);
        *field = full;
        return 0;
}
