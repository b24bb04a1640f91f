/* SPDX-License-Identifier: MIT */
/* The control protocol's shared vocabulary and json-c helpers (control-proto.h). */
#include <errno.h>
#include <string.h>

#include "control-proto.h"

static const char *const command_names[_CONTROL_CMD_MAX] = {
        [CONTROL_CMD_STATUS] = "status",
        [CONTROL_CMD_LIST] = "list",
        [CONTROL_CMD_START] = "start",
        [CONTROL_CMD_STOP] = "stop",
        [CONTROL_CMD_RESTART] = "restart",
        [CONTROL_CMD_RESET_FAILED] = "reset-failed",
        [CONTROL_CMD_KILL] = "kill",
        [CONTROL_CMD_RELOAD] = "reload",
        [CONTROL_CMD_LOGS] = "logs",
        [CONTROL_CMD_WATCH] = "watch",
        [CONTROL_CMD_DAEMON_RELOAD] = "daemon-reload",
        [CONTROL_CMD_SHUTDOWN] = "shutdown",
};

static const struct {
        const char *name;
        int exit_status;
} errors[_CONTROL_ERROR_MAX] = {
        [CONTROL_ERROR_FAILED] = { "failed", 1 },
        [CONTROL_ERROR_BAD_REQUEST] = { "bad-request", 2 },
        [CONTROL_ERROR_UNSUPPORTED_VERSION] = { "unsupported-version", 2 },
        [CONTROL_ERROR_TOO_LARGE] = { "too-large", 2 },
        [CONTROL_ERROR_NOT_FOUND] = { "not-found", 3 },
        [CONTROL_ERROR_PERMISSION_DENIED] = { "permission-denied", 4 },
        [CONTROL_ERROR_TOO_MANY_CLIENTS] = { "too-many-clients", 1 },
        [CONTROL_ERROR_CANCELLED] = { "cancelled", 1 },
        [CONTROL_ERROR_ABANDONED] = { "abandoned", 1 },
        [CONTROL_ERROR_LAGGED] = { "lagged", 1 },
        [CONTROL_ERROR_STREAM_ENDED] = { "stream-ended", 1 },
};

const char *control_command_to_string(enum control_command c) {
        return (unsigned) c < _CONTROL_CMD_MAX ? command_names[c] : NULL;
}

int control_command_from_string(const char *s) {
        for (size_t i = 0; s && i < _CONTROL_CMD_MAX; i++)
                if (streq(s, command_names[i]))
                        return (int) i;
        return -EINVAL;
}

const char *control_error_to_string(enum control_error e) {
        return (unsigned) e < _CONTROL_ERROR_MAX ? errors[e].name : NULL;
}

enum control_error control_error_from_string(const char *s) {
        for (size_t i = 0; s && i < _CONTROL_ERROR_MAX; i++)
                if (streq(s, errors[i].name))
                        return (enum control_error) i;
        return CONTROL_ERROR_FAILED;
}

int control_error_exit_status(enum control_error e) {
        return (unsigned) e < _CONTROL_ERROR_MAX ? errors[e].exit_status : 1;
}

struct json_object *control_message_new(const char *type) {
        _cleanup_json_ struct json_object *o = json_object_new_object();
        if (!o || control_add_int64(o, "version", CONTROL_PROTOCOL_VERSION) < 0 ||
            control_add_string(o, "type", type) < 0)
                return NULL;
        return TAKE_PTR(o);
}

int control_json_parse(const void *buf, size_t len, struct json_object **ret) {
        if (len > INT32_MAX)
                return -EBADMSG;
        struct json_tokener *tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        struct json_object *o = json_tokener_parse_ex(tok, buf, (int) len);
        enum json_tokener_error err = json_tokener_get_error(tok);
        size_t end = json_tokener_get_parse_end(tok);
        if (err == json_tokener_continue && !o) {
                /* A top-level number or literal is complete only at a delimiter:
                 * end the input with a NUL as json_tokener_parse() does. */
                o = json_tokener_parse_ex(tok, "", 1);
                err = json_tokener_get_error(tok);
                end = len;
        }
        json_tokener_free(tok);

        bool bad = err != json_tokener_success;
        for (const char *p = (const char *) buf + end; !bad && p < (const char *) buf + len; p++)
                bad = *p == '\0' || !strchr(" \t\r\n", *p);
        if (bad) {
                json_object_put(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

int control_message_parse(const void *buf, size_t len, struct json_object **ret) {
        struct json_object *o;
        int r = control_json_parse(buf, len, &o);
        if (r < 0)
                return r;
        if (!json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

int control_message_text(struct json_object *o, const char **ret_text, size_t *ret_len) {
        size_t len;
        const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
                                                          &len);
        if (!t)
                return -ENOMEM;
        *ret_text = t;
        *ret_len = len;
        return 0;
}

static int get_typed(struct json_object *o, const char *key, enum json_type type, struct json_object **ret) {
        struct json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !v)
                return -ENOENT;
        if (!json_object_is_type(v, type))
                return -EBADMSG;
        *ret = v;
        return 0;
}

int control_get_string(struct json_object *o, const char *key, const char **ret) {
        struct json_object *v;
        int r = get_typed(o, key, json_type_string, &v);
        if (r < 0)
                return r;
        *ret = json_object_get_string(v);
        return 0;
}

int control_get_int64(struct json_object *o, const char *key, int64_t *ret) {
        struct json_object *v;
        int r = get_typed(o, key, json_type_int, &v);
        if (r < 0)
                return r;
        *ret = json_object_get_int64(v);
        return 0;
}

int control_get_bool(struct json_object *o, const char *key, bool *ret) {
        struct json_object *v;
        int r = get_typed(o, key, json_type_boolean, &v);
        if (r < 0)
                return r;
        *ret = json_object_get_boolean(v);
        return 0;
}

int control_get_string_array(struct json_object *o, const char *key, struct json_object **ret, size_t *ret_n) {
        struct json_object *v;
        int r = get_typed(o, key, json_type_array, &v);
        if (r < 0)
                return r;
        size_t n = json_object_array_length(v);
        for (size_t i = 0; i < n; i++)
                if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_string))
                        return -EBADMSG;
        *ret = v;
        *ret_n = n;
        return 0;
}

static int add(struct json_object *o, const char *key, struct json_object *v, bool may_be_null) {
        if (!v && !may_be_null)
                return -ENOMEM;
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

int control_add_string(struct json_object *o, const char *key, const char *value) {
        return add(o, key, value ? json_object_new_string(value) : NULL, !value);
}

int control_add_int64(struct json_object *o, const char *key, int64_t value) {
        return add(o, key, json_object_new_int64(value), false);
}

int control_add_bool(struct json_object *o, const char *key, bool value) {
        return add(o, key, json_object_new_boolean(value), false);
}
