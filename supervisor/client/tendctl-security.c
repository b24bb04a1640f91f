/* SPDX-License-Identifier: MIT */
/*
 * security: `tendctl security NAME…` (tendctl(1) "security"), as
 * `systemd-analyze security UNIT` prints it: one row per check (✓ good, ✗
 * bad, blank: does not apply), the worst first, then the overall exposure.
 * tend computes it (docs/control-protocol.md "security"): this file only
 * prints. A check whose key tend does not apply is marked "(not applied)".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control-proto.h"
#include "macro.h"
#include "tendctl-conn.h"
#include "tendctl-security.h"

/* The checks' order: the largest exposure first, then by name (systemd's). */
static int by_exposure(const void *x, const void *y) {
        json *a = *(json *const *) x, *b = *(json *const *) y;
        int64_t ea = get_int(a, "exposure", 0), eb = get_int(b, "exposure", 0);
        if (ea != eb)
                return ea > eb ? -1 : 1;
        return -strcmp(get_str(a, "name", ""), get_str(b, "name", ""));
}

/* The description column: the check's outcome, and whether tend applies its key. */
static void describe(json *c, char *buf, size_t size) {
        snprintf(buf, size, "%s%s", get_str(c, "description", ""), get_bool(c, "applied") ? "" : " (not applied)");
}

/* Columns in characters: the names and descriptions are ASCII but for "…". */
static int width(const char *s) {
        int n = 0;
        for (; *s; s++)
                n += ((unsigned char) *s & 0xc0) != 0x80;
        return n;
}

static void print_check(json *c, int name_width, int desc_width) {
        json *b = NULL;
        bool na = !json_object_object_get_ex(c, "badness", &b) || !b;
        int64_t badness = na ? 0 : json_object_get_int64(b), exposure = get_int(c, "exposure", 0);
        const char *mark = na ? " " : badness == 0 ? "✓" : "✗", *name = get_str(c, "name", "?");
        char e[48] = "", d[256];
        if (exposure > 0)
                snprintf(e, sizeof e, "%" PRId64 ".%" PRId64, exposure / 10, exposure % 10);
        describe(c, d, sizeof d);
        printf("%s %s%*s %s%*s %8s\n", mark, name, name_width - width(name), "", d, desc_width - width(d), "", e);
}

static int print_assessment(const char *name, json *a) {
        json *checks;
        if (!json_object_object_get_ex(a, "checks", &checks) || !json_object_is_type(checks, json_type_array))
                return -EBADMSG;
        size_t n = json_object_array_length(checks);
        _cleanup_free_ json **v = calloc(n ? n : 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                v[i] = json_object_array_get_idx(checks, i);
        qsort(v, n, sizeof *v, by_exposure);
        int nw = 4, dw = 11;
        for (size_t i = 0; i < n; i++) {
                char d[256];
                describe(v[i], d, sizeof d);
                int w = width(get_str(v[i], "name", "?"));
                nw = w > nw ? w : nw;
                dw = width(d) > dw ? width(d) : dw;
        }
        printf("  %-*s %-*s %8s\n", nw, "NAME", dw, "DESCRIPTION", "EXPOSURE");
        for (size_t i = 0; i < n; i++)
                print_check(v[i], nw, dw);
        int64_t x = get_int(a, "exposure", 0);
        printf("\n→ Overall exposure level for %s: %" PRId64 ".%" PRId64 " %s\n", name, x / 10, x % 10,
               get_str(a, "level", "?"));
        return 0;
}

/* One message per unit found, then the result (its "units" lists the unknown names). */
int run_security_verb(const struct args *a, int fd) {
        _cleanup_json_ json *req = request_new(CONTROL_CMD_SECURITY, a->names, a->n_names), *all = json_object_new_array();
        int r = req && all ? send_request(fd, req) : -ENOMEM;
        if (r < 0 && r != -EPIPE && r != -ECONNRESET)
                return recv_error(r);
        for (;;) {
                _cleanup_json_ json *m = NULL;
                if ((r = recv_message(fd, &m)) < 0)
                        return recv_error(r);
                const char *type = get_str(m, "type", "");
                json *as;
                if (streq(type, "security") && json_object_object_get_ex(m, "assessment", &as)) {
                        if (a->json) {
                                json_object_object_add(as, "name", json_object_new_string(get_str(m, "name", "")));
                                json_object_array_add(all, json_object_get(as));
                        } else if (print_assessment(get_str(m, "name", "?"), as) < 0)
                                return recv_error(-EBADMSG);
                } else if (streq(type, "result")) {
                        if (a->json)
                                print_json(all);
                        if (get_bool(m, "ok"))
                                return 0;
                        enum control_error e = control_error_from_string(get_str(m, "error", NULL));
                        fprintf(stderr, "tendctl: %s\n", get_str(m, "message", "security failed"));
                        return control_error_exit_status(e);
                }
        }
}
