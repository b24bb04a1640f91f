/* SPDX-License-Identifier: MIT */
/* The control protocol's shared vocabulary and json-c helpers (control-proto.h). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
        [CONTROL_CMD_SHOW] = "show",
        [CONTROL_CMD_SECURITY] = "security",
        [CONTROL_CMD_ENABLE] = "enable",
        [CONTROL_CMD_DISABLE] = "disable",
        [CONTROL_CMD_DAEMON_REEXEC] = "daemon-reexec",
        [CONTROL_CMD_CLUSTER] = "cluster",
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

/* control_json_parse() with the tokener's flags (JSON_TOKENER_VALIDATE_UTF8). */
static int json_parse_flags(const void *buf, size_t len, int flags, struct json_object **ret) {
        if (len > INT32_MAX)
                return -EBADMSG;
        struct json_tokener *tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, flags);
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

int control_json_parse(const void *buf, size_t len, struct json_object **ret) {
        return json_parse_flags(buf, len, 0, ret);
}

/* A JSON object (any string bytes: what tend's own answers carry), or with
 * strict, a request: only valid UTF-8 (issue 19: bytes that are not are
 * never echoed into an answer). */
static int message_parse(const void *buf, size_t len, bool strict, struct json_object **ret) {
        struct json_object *o;
        int r = json_parse_flags(buf, len, strict ? JSON_TOKENER_VALIDATE_UTF8 : 0, &o);
        if (r < 0)
                return r;
        if (!json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

int control_message_parse(const void *buf, size_t len, struct json_object **ret) {
        return message_parse(buf, len, false, ret);
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
        return strlen(*ret) == (size_t) json_object_get_string_len(v) ? 0 : -EBADMSG; /* no NUL inside */
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
        for (size_t i = 0; i < n; i++) {
                struct json_object *e = json_object_array_get_idx(v, i);
                if (!json_object_is_type(e, json_type_string) ||
                    strlen(json_object_get_string(e)) != (size_t) json_object_get_string_len(e))
                        return -EBADMSG; /* not a string, or one with a NUL inside */
        }
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

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

/* Which commands take "units": required (≥ 1), exactly one, optional, or none. */
enum units_rule { UNITS_NONE, UNITS_OPTIONAL, UNITS_REQUIRED, UNITS_ONE };

static const enum units_rule units_rules[_CONTROL_CMD_MAX] = {
        [CONTROL_CMD_STATUS] = UNITS_OPTIONAL,      [CONTROL_CMD_LIST] = UNITS_NONE,
        [CONTROL_CMD_START] = UNITS_REQUIRED,       [CONTROL_CMD_STOP] = UNITS_REQUIRED,
        [CONTROL_CMD_RESTART] = UNITS_REQUIRED,     [CONTROL_CMD_RESET_FAILED] = UNITS_OPTIONAL,
        [CONTROL_CMD_KILL] = UNITS_REQUIRED,        [CONTROL_CMD_RELOAD] = UNITS_REQUIRED,
        [CONTROL_CMD_LOGS] = UNITS_ONE,             [CONTROL_CMD_WATCH] = UNITS_NONE,
        [CONTROL_CMD_DAEMON_RELOAD] = UNITS_NONE,   [CONTROL_CMD_SHUTDOWN] = UNITS_NONE,
        [CONTROL_CMD_SHOW] = UNITS_REQUIRED,
        [CONTROL_CMD_SECURITY] = UNITS_REQUIRED,
        [CONTROL_CMD_ENABLE] = UNITS_REQUIRED,      [CONTROL_CMD_DISABLE] = UNITS_REQUIRED,
        [CONTROL_CMD_DAEMON_REEXEC] = UNITS_NONE,
        [CONTROL_CMD_CLUSTER] = UNITS_OPTIONAL,
};

_printf_(4, 5) static int refuse(int error, char *reason, size_t size, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (size > 0)
                vsnprintf(reason, size, fmt, ap);
        va_end(ap);
        return error;
}

/* The text of a field for a message (a value of any type, or "(missing)"). */
static const char *field_text(struct json_object *o, const char *key) {
        struct json_object *v = NULL;
        if (!json_object_object_get_ex(o, key, &v) || !v)
                return "(missing)";
        return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
}

static int decode_envelope(struct control_request *q, char *reason, size_t size) {
        int64_t version;
        const char *cmd;
        int r = control_get_int64(q->o, "version", &version);
        if (r < 0 || version != CONTROL_PROTOCOL_VERSION)
                return refuse(-EPROTONOSUPPORT, reason, size, "protocol version %.64s is not supported (tend speaks 1)",
                              field_text(q->o, "version"));
        if (control_get_string(q->o, "command", &cmd) < 0 || (r = control_command_from_string(cmd)) < 0)
                return refuse(-EBADMSG, reason, size, "unknown or missing command %.64s", field_text(q->o, "command"));
        q->cmd = (enum control_command) r;
        q->units = NULL;
        q->n_units = 0;
        r = control_get_string_array(q->o, "units", &q->units, &q->n_units);
        enum units_rule rule = units_rules[q->cmd];
        if (rule == UNITS_ONE && r >= 0 && q->n_units > 1)
                return refuse(-EBADMSG, reason, size, "%s takes exactly one unit", cmd);
        if (r == -EBADMSG || (rule == UNITS_NONE && q->n_units > 0) || (rule >= UNITS_REQUIRED && q->n_units == 0))
                return refuse(-EBADMSG, reason, size, "%s: \"units\" must be an array of unit names, without NUL (required: "
                              "start stop restart kill reload logs; not taken: list watch daemon-reload daemon-reexec shutdown)", cmd);
        return 0;
}

static int decode_fields(struct control_request *q, char *reason, size_t size) {
        int64_t sig = SIGTERM, prio = 7;
        const char *ks = "durable";
        switch (q->cmd) {
        case CONTROL_CMD_START:
        case CONTROL_CMD_STOP:
        case CONTROL_CMD_RESTART:
        case CONTROL_CMD_RELOAD: /* QA L5: reload waits for ExecReload= unless no_block */
                if (control_get_bool(q->o, "no_block", &q->no_block) == -EBADMSG)
                        return refuse(-EBADMSG, reason, size, "%s", "\"no_block\" is a boolean");
                return 0;
        case CONTROL_CMD_KILL:
                if (control_get_bool(q->o, "main", &q->main_only) == -EBADMSG)
                        return refuse(-EBADMSG, reason, size, "%s", "\"main\" is a boolean");
                if (control_get_int64(q->o, "signal", &sig) == -EBADMSG || sig < 1 || sig >= _NSIG)
                        return refuse(-EBADMSG, reason, size, "\"signal\" must be a signal number (1 to %d)", _NSIG - 1);
                q->signal = (int) sig;
                return 0;
        case CONTROL_CMD_LOGS:
                if (control_get_int64(q->o, "lines", &q->lines) == -EBADMSG || q->lines < -1 ||
                    control_get_bool(q->o, "follow", &q->follow) == -EBADMSG)
                        return refuse(-EBADMSG, reason, size, "%s",
                                      "\"lines\" is a number of lines (>= 0), \"follow\" a boolean");
                prio = 7;
                if (control_get_int64(q->o, "since", &q->since) == -EBADMSG || q->since < 0 ||
                    control_get_int64(q->o, "priority", &prio) == -EBADMSG || prio < 0 || prio > 7)
                        return refuse(-EBADMSG, reason, size, "%s",
                                      "\"since\" is µs since the epoch (>= 0), \"priority\" a syslog level (0 to 7)");
                q->max_priority = (int) prio;
                return 0;
        case CONTROL_CMD_WATCH:
                if (control_get_string(q->o, "prefix", &q->prefix) == -EBADMSG ||
                    control_get_string(q->o, "keyspace", &ks) == -EBADMSG)
                        return refuse(-EBADMSG, reason, size, "%s", "\"prefix\" and \"keyspace\" are strings");
                if (!streq(ks, "durable") && !streq(ks, "ephemeral"))
                        return refuse(-EBADMSG, reason, size, "unknown keyspace \"%.64s\"", ks);
                q->ephemeral = streq(ks, "ephemeral");
                return 0;
        case CONTROL_CMD_CLUSTER: /* etcd */
                if (control_get_string(q->o, "view", &q->view) < 0 ||
                    (!streq(q->view, "list") && !streq(q->view, "hosts") && !streq(q->view, "status")) ||
                    (streq(q->view, "status") != (q->n_units == 1)) || (!streq(q->view, "status") && q->n_units))
                        return refuse(-EBADMSG, reason, size, "%s", "cluster: \"view\" is \"list\", \"hosts\" "
                                      "(no units) or \"status\" (one unit)");
                return 0;
        default:
                return 0;
        }
}

int control_request_decode(const void *buf, size_t len, struct control_request *ret, char *reason, size_t size) {
        struct control_request q = { .signal = SIGTERM, .lines = -1, .prefix = "", .max_priority = 7 };
        if ((!buf && len) || !ret || (!reason && size))
                return -EINVAL;
        int r = message_parse(buf ? buf : "", len, true, &q.o);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(-EBADMSG, reason, size, "%s", "the request is not one JSON object in UTF-8");
        r = decode_envelope(&q, reason, size);
        if (r >= 0)
                r = decode_fields(&q, reason, size);
        if (r < 0) {
                control_request_done(&q);
                return r;
        }
        *ret = q;
        return 0;
}

void control_request_done(struct control_request *q) {
        if (q->o)
                json_object_put(q->o);
        *q = (struct control_request) { .signal = SIGTERM, .lines = -1, .prefix = "", .max_priority = 7 };
}

const char *control_request_unit(const struct control_request *q, size_t i) {
        return json_object_get_string(json_object_array_get_idx(q->units, i));
}

/* The socket path (SPEC §5): the client and the server agree on it. */
int control_socket_path(const char *opt, char **ret) {
        const char *env = getenv("TEND_SOCKET"), *xdg = getenv("XDG_RUNTIME_DIR");
        char *p = NULL;

        if (!ret)
                return -EINVAL;
        if (opt && *opt)
                p = strdup(opt);
        else if (env && *env)
                p = strdup(env);
        else if (geteuid() == 0)
                p = strdup("/run/tend/control");
        else if (xdg && *xdg) {
                if (asprintf(&p, "%s/tend/control", xdg) < 0)
                        p = NULL;
        } else
                return -ENOENT;
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Results in parts                                                          */
/* ------------------------------------------------------------------------ */

struct splitter {
        size_t part_bytes;
        int (*emit)(struct json_object *part, void *userdata);
        void *userdata;
        struct json_object *part; /* being filled; NULL: none */
        size_t bytes;             /* its approximate text size */
};

static int splitter_flush(struct splitter *sp) {
        if (!sp->part)
                return 0;
        struct json_object *part = sp->part;
        sp->part = NULL;
        sp->bytes = 0;
        return sp->emit(part, sp->userdata);
}

/* Adds elem (a new reference taken here) to the part's array key. */
static int splitter_add(struct splitter *sp, const char *key, struct json_object *elem) {
        size_t len = 0;
        if (!json_object_to_json_string_length(elem, JSON_C_TO_STRING_PLAIN, &len))
                return -ENOMEM;
        if (sp->part && sp->bytes + len + strlen(key) + 8 > sp->part_bytes) {
                int r = splitter_flush(sp);
                if (r < 0)
                        return r;
        }
        if (!sp->part && !(sp->part = control_message_new("result-part")))
                return -ENOMEM;
        struct json_object *arr;
        if (!json_object_object_get_ex(sp->part, key, &arr)) {
                arr = json_object_new_array();
                if (!arr || json_object_object_add(sp->part, key, arr) < 0) {
                        json_object_put(arr);
                        return -ENOMEM;
                }
                sp->bytes += strlen(key) + 8;
        }
        if (json_object_array_add(arr, json_object_get(elem)) < 0) {
                json_object_put(elem);
                return -ENOMEM;
        }
        sp->bytes += len + 1;
        return 0;
}

int control_result_split(struct json_object *result, size_t part_bytes,
                         int (*emit)(struct json_object *part, void *userdata), void *userdata) {
        struct splitter sp = { .part_bytes = part_bytes, .emit = emit, .userdata = userdata };
        int r = 0;
        json_object_object_foreach(result, key, val) {
                if (!json_object_is_type(val, json_type_array))
                        continue;
                for (size_t i = 0; r >= 0 && i < json_object_array_length(val); i++)
                        r = splitter_add(&sp, key, json_object_array_get_idx(val, i));
                if (r >= 0)
                        r = json_object_array_del_idx(val, 0, json_object_array_length(val)) < 0 ? -ENOMEM : 0;
                if (r < 0)
                        break;
        }
        if (r >= 0)
                return splitter_flush(&sp);
        json_object_put(sp.part);
        return r;
}

int control_result_merge(struct json_object **acc, struct json_object *part) {
        if (!*acc && !(*acc = json_object_new_object()))
                return -ENOMEM;
        json_object_object_foreach(part, key, val) {
                if (!json_object_is_type(val, json_type_array))
                        continue;
                struct json_object *arr;
                if (!json_object_object_get_ex(*acc, key, &arr)) {
                        arr = json_object_new_array();
                        if (!arr || json_object_object_add(*acc, key, arr) < 0) {
                                json_object_put(arr);
                                return -ENOMEM;
                        }
                }
                for (size_t i = 0; i < json_object_array_length(val); i++)
                        if (json_object_array_add(arr, json_object_get(json_object_array_get_idx(val, i))) < 0)
                                return -ENOMEM;
        }
        return 0;
}

int control_result_join(struct json_object *acc, struct json_object *result) {
        if (!acc)
                return 0;
        json_object_object_foreach(acc, key, val) {
                struct json_object *rest;
                if (json_object_object_get_ex(result, key, &rest) && json_object_is_type(rest, json_type_array))
                        for (size_t i = 0; i < json_object_array_length(rest); i++)
                                if (json_object_array_add(val, json_object_get(json_object_array_get_idx(rest, i))) < 0)
                                        return -ENOMEM;
                if (json_object_object_add(result, key, json_object_get(val)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Bytes that are not UTF-8                                                  */
/* ------------------------------------------------------------------------ */

size_t control_utf8_span(const char *s, size_t len) {
        const unsigned char *p = (const unsigned char *) s;
        if (len == 0)
                return 0;
        if (p[0] < 0x80)
                return 1;
        size_t n;
        uint32_t cp;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                n = 2, cp = p[0] & 0x1fu;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                n = 3, cp = p[0] & 0x0fu;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                n = 4, cp = p[0] & 0x07u;
        else
                return 0;
        if (len < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3fu);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

/* A byte written \xHH: the start of no valid UTF-8 sequence (n 0), or
 * with controls a control character (below 0x20, 0x7f). */
static bool escaped_byte(const char *s, size_t n, bool controls) {
        return n == 0 || (controls && ((unsigned char) *s < 0x20 || *s == 0x7f));
}

static bool text_plain(const char *s, size_t len, bool controls) {
        for (size_t i = 0, n; i < len; i += n)
                if (escaped_byte(s + i, (n = control_utf8_span(s + i, len - i)), controls))
                        return false;
        return true;
}

static int escape(const char *s, size_t len, bool controls, char **ret, size_t *ret_len) {
        *ret = NULL;
        *ret_len = len;
        if (text_plain(s, len, controls))
                return 0;
        char *out = malloc(4 * len + 1), *o = out;
        if (!out)
                return -ENOMEM;
        for (size_t i = 0, n; i < len; i += n) {
                n = control_utf8_span(s + i, len - i);
                if (escaped_byte(s + i, n, controls)) {
                        o += sprintf(o, "\\x%02x", (unsigned char) s[i]);
                        n = 1;
                } else if (s[i] == '\\') {
                        *o++ = '\\';
                        *o++ = '\\';
                } else {
                        memcpy(o, s + i, n);
                        o += n;
                }
        }
        *o = '\0';
        *ret = out;
        *ret_len = (size_t) (o - out);
        return 0;
}

int control_text_escape(const char *s, size_t len, char **ret, size_t *ret_len) {
        return escape(s, len, false, ret, ret_len);
}

int control_name_escape(const char *name, char **ret) {
        size_t len;
        return escape(name, strlen(name), true, ret, &len);
}

static int hex_digit(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

size_t control_text_unescape(char *s, size_t len) {
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
                int hi, lo;
                if (s[i] == '\\' && i + 1 < len && s[i + 1] == '\\')
                        s[o++] = s[i++];
                else if (s[i] == '\\' && i + 3 < len && s[i + 1] == 'x' && (hi = hex_digit(s[i + 2])) >= 0 &&
                         (lo = hex_digit(s[i + 3])) >= 0) {
                        s[o++] = (char) (hi << 4 | lo);
                        i += 3;
                } else
                        s[o++] = s[i];
        }
        return o;
}
