/* SPDX-License-Identifier: MIT */
/*
 * tendctl's units as `show` answers them (tendctl-units.h): one `show`
 * request for the names asked (docs/control-protocol.md "show"), a name tend
 * does not know given systemd's not-found properties; a property's value as
 * systemctl prints it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "tendctl-print.h"
#include "tendctl-units.h"

/* Properties of a unit tend does not know, as systemd shows a unit that
 * does not load. */
static json *unknown_props(const char *given) {
        char id[300];
        size_t n = strlen(given);
        snprintf(id, sizeof id, n >= 8 && streq(given + n - 8, ".service") ? "%s" : "%s.service", given);
        json *p = json_object_new_object();
        json *names = json_object_new_array();
        if (!p || !names || json_object_array_add(names, json_object_new_string(id)) < 0 ||
            json_object_object_add(p, "Names", names) < 0) {
                json_object_put(names);
                json_object_put(p);
                return NULL;
        }
        static const char *const strs[][2] = {
                { "LoadState", "not-found" }, { "ActiveState", "inactive" }, { "SubState", "dead" },
                { "Result", "success" },      { "UnitFileState", "" },       { "FragmentPath", "" },
        };
        static const char *const zeros[] = { "MainPID", "ControlPID", "NRestarts", "ExecMainCode", "ExecMainStatus",
                                             "ActiveEnterTimestamp", "StateChangeTimestamp" };
        int r = control_add_string(p, "Id", id);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(strs); i++)
                r = control_add_string(p, strs[i][0], strs[i][1]);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(zeros); i++)
                r = control_add_int64(p, zeros[i], 0);
        if (r >= 0)
                r = control_add_string(p, "Description", id);
        if (r < 0) {
                json_object_put(p);
                return NULL;
        }
        return p;
}

void units_done(struct units *u) {
        for (size_t i = 0; i < u->n; i++)
                json_object_put(u->props[i]);
        free(u->props);
        free(u->found);
        *u = (struct units) {};
}

/* Marks the names the result says were not found. */
static void mark_missing(struct units *u, json *res, char *const *names) {
        json *list;
        if (!json_object_object_get_ex(res, "units", &list) || !json_object_is_type(list, json_type_array))
                return;
        for (size_t k = 0; k < json_object_array_length(list); k++) {
                const char *name = get_str(json_object_array_get_idx(list, k), "name", "");
                for (size_t i = 0; i < u->n; i++)
                        if (u->found[i] && !u->props[i] && streq(names[i], name)) {
                                u->found[i] = false;
                                break;
                        }
        }
}

/* Fills u from the answer: properties in the order asked (tend answers in
 * order, skipping the unknown names, which its result lists). */
static int read_units(int fd, char *const *names, struct units *u, json **ret_result) {
        _cleanup_json_ json *got = json_object_new_array(), *parts = NULL;
        for (;;) {
                _cleanup_json_ json *m = NULL;
                int r = recv_message(fd, &m);
                if (r < 0)
                        return r;
                json *props;
                const char *type = get_str(m, "type", "");
                if (streq(type, "properties") && json_object_object_get_ex(m, "properties", &props))
                        json_object_array_add(got, json_object_get(props));
                else if (streq(type, "result-part")) {
                        if (control_result_merge(&parts, m) < 0)
                                return -ENOMEM;
                } else if (streq(type, "result")) {
                        if (control_result_join(parts, m) < 0)
                                return -ENOMEM;
                        for (size_t i = 0; i < u->n; i++)
                                u->found[i] = true;
                        mark_missing(u, m, names);
                        size_t next = 0;
                        for (size_t i = 0; i < u->n; i++)
                                u->props[i] = u->found[i] && next < json_object_array_length(got)
                                                      ? json_object_get(json_object_array_get_idx(got, next++))
                                                      : unknown_props(names[i]);
                        *ret_result = TAKE_PTR(m);
                        return 0;
                }
        }
}

int units_fetch(int fd, char *const *names, size_t n, struct units *ret) {
        struct units u = { .n = n, .props = calloc(n ? n : 1, sizeof(json *)), .found = calloc(n ? n : 1, sizeof(bool)) };
        _cleanup_json_ json *req = request_new(CONTROL_CMD_SHOW, names, n), *res = NULL;
        int r = u.props && u.found ? send_request(fd, req) : -ENOMEM;
        /* A refused client's answer is already queued when tend closes: read it. */
        if (r >= 0 || r == -EPIPE || r == -ECONNRESET)
                r = read_units(fd, names, &u, &res);
        enum control_error e = r >= 0 ? control_error_from_string(get_str(res, "error", NULL)) : CONTROL_ERROR_FAILED;
        if (r >= 0 && !get_bool(res, "ok") && e != CONTROL_ERROR_NOT_FOUND) {
                fprintf(stderr, "tendctl: %s\n", get_str(res, "message", "show failed"));
                r = e == CONTROL_ERROR_PERMISSION_DENIED ? -EACCES : e == CONTROL_ERROR_TOO_LARGE ? -E2BIG : -EIO;
        }
        if (r < 0) {
                units_done(&u);
                return r;
        }
        *ret = u;
        return 0;
}

/* systemd's text for a value: yes/no, space-separated lists, timestamps. */
void format_value(const char *key, json *v, char *buf, size_t size) {
        size_t n = strlen(key);
        if (!v || json_object_is_type(v, json_type_null))
                snprintf(buf, size, "%s", "");
        else if (json_object_is_type(v, json_type_boolean))
                snprintf(buf, size, "%s", json_object_get_boolean(v) ? "yes" : "no");
        else if (n > 9 && streq(key + n - 9, "Timestamp")) {
                int64_t us = json_object_get_int64(v);
                buf[0] = 0;
                if (us > 0)
                        format_time(us, TIME_STATUS, buf, size);
        } else if (json_object_is_type(v, json_type_array)) {
                size_t off = 0;
                buf[0] = 0;
                for (size_t i = 0; i < json_object_array_length(v) && off < size; i++)
                        off += (size_t) snprintf(buf + off, size - off, "%s%s", i ? " " : "",
                                                 json_object_get_string(json_object_array_get_idx(v, i)));
        } else
                snprintf(buf, size, "%s", json_object_get_string(v));
}
