/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's shared vocabulary (SPEC §5, docs/control-protocol.md):
 * limits, commands, error codes and the exit statuses tendctl maps them to,
 * the socket path, and small json-c helpers both the server (control.c) and
 * tendctl use. No I/O policy lives here: each side sends and receives on its
 * own terms. This is the client side's whole library (tendproto in
 * supervisor/meson.build: this, signal-util and json-c), so nothing here may
 * need the server's dependencies (libsystemd, libcap, libseccomp).
 *
 * Conventions: functions return 0 (or a non-negative count) or a negative
 * errno; ret_* out-parameters are written only on success. json-c objects
 * returned are the caller's reference (json_object_put()). Thread-safety:
 * none needed (pure functions over the caller's objects).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "macro.h"

#define CONTROL_PROTOCOL_VERSION 1

/* SPEC §7: a request is at most 64 KiB; a bigger one is answered "too-large". */
#define CONTROL_REQUEST_MAX (64u * 1024u)
/* The largest message tend sends. Answers are cut into messages well below
 * it (unit batches of CONTROL_BATCH_BYTES, log lines in pieces of
 * CONTROL_LINE_PIECE bytes), so only a single huge store value comes near. */
#define CONTROL_MESSAGE_MAX (128u * 1024u)
#define CONTROL_BATCH_BYTES (32u * 1024u)
#define CONTROL_LINE_PIECE (8u * 1024u)
/* SPEC §7: at most 2048 control clients. */
#define CONTROL_MAX_CLIENTS_DEFAULT 2048u

/* The durable keys holding the units' records: "service/NAME". */
#define CONTROL_RECORD_PREFIX "service/"

enum control_command {
        CONTROL_CMD_STATUS,
        CONTROL_CMD_LIST,
        CONTROL_CMD_START,
        CONTROL_CMD_STOP,
        CONTROL_CMD_RESTART,
        CONTROL_CMD_RESET_FAILED,
        CONTROL_CMD_KILL,
        CONTROL_CMD_RELOAD,
        CONTROL_CMD_LOGS,
        CONTROL_CMD_WATCH,
        CONTROL_CMD_DAEMON_RELOAD,
        CONTROL_CMD_SHUTDOWN,
        CONTROL_CMD_SHOW, /* ctl: the units' properties, systemd's names (docs/control-protocol.md "show") */
        CONTROL_CMD_SECURITY, /* security: the units' exposure (docs/control-protocol.md "security") */
        CONTROL_CMD_ENABLE,  /* pkg: whether tend starts the units on its own (docs/control-protocol.md "enable") */
        CONTROL_CMD_DISABLE, /* pkg */
        CONTROL_CMD_DAEMON_REEXEC, /* reexec: tend executes its binary anew, keeping every unit (tend(8)) */
        CONTROL_CMD_CLUSTER, /* etcd: the cluster view (docs/control-protocol.md "cluster") */
        _CONTROL_CMD_MAX,
};

/* "status", "reset-failed", …; NULL when out of range. */
const char *control_command_to_string(enum control_command c);
/* The command named s, or -EINVAL. */
int control_command_from_string(const char *s);

/*
 * Error codes carried in an answer's "error" field. Each maps to one tendctl
 * exit status (SPEC §5: 1 failed, 2 usage, 3 not found, 4 permission denied).
 */
enum control_error {
        CONTROL_ERROR_FAILED,              /* the operation failed; "message" says why */
        CONTROL_ERROR_BAD_REQUEST,         /* malformed JSON, wrong field, unknown command */
        CONTROL_ERROR_UNSUPPORTED_VERSION, /* "version" is not one tend speaks */
        CONTROL_ERROR_TOO_LARGE,           /* request over CONTROL_REQUEST_MAX */
        CONTROL_ERROR_NOT_FOUND,           /* no such unit */
        CONTROL_ERROR_PERMISSION_DENIED,   /* peer not authorised (SO_PEERCRED/SO_PEERGROUPS) */
        CONTROL_ERROR_TOO_MANY_CLIENTS,    /* max_clients connections are open */
        CONTROL_ERROR_CANCELLED,           /* start/restart: the flight was cancelled (a stop) */
        CONTROL_ERROR_ABANDONED,           /* start/restart: the work ended without an answer */
        CONTROL_ERROR_LAGGED,              /* watch: the client fell behind; re-watch */
        CONTROL_ERROR_STREAM_ENDED,        /* logs -f: the stream ended or the client fell behind */
        _CONTROL_ERROR_MAX,
};

/* "failed", "bad-request", …; NULL when out of range. */
const char *control_error_to_string(enum control_error e);
/* The code named s; an unknown or NULL name is CONTROL_ERROR_FAILED (forward
 * compatibility: a newer tend's error still fails the command). */
enum control_error control_error_from_string(const char *s);
/* tendctl's exit status for e (1, 2, 3 or 4). */
int control_error_exit_status(enum control_error e);

/*
 * A decoded request (docs/control-protocol.md "Requests"): the envelope, the
 * units the command takes, its own fields with their defaults. Fields a
 * command does not take are ignored (not even type-checked).
 */
struct control_request {
        struct json_object *o;      /* the message; owned (control_request_done()) */
        enum control_command cmd;
        struct json_object *units;  /* borrowed from o: an array of strings, or NULL */
        size_t n_units;
        bool no_block;              /* start, stop, restart, reload */
        bool main_only;             /* kill: "main" */
        int signal;                 /* kill: 1 … _NSIG-1; SIGTERM */
        int64_t lines;              /* logs: ≥ 0; -1 (absent): the whole ring */
        bool follow;                /* logs */
        int64_t since;              /* ctl: logs: only lines read at or after this CLOCK_REALTIME µs; 0: all */
        int max_priority;           /* ctl: logs: only lines of this syslog level or more urgent (0–7); 7: all */
        const char *prefix;         /* watch: borrowed from o; "" (absent): every key */
        bool ephemeral;             /* watch: "keyspace" "ephemeral" (default "durable") */
        const char *view;           /* etcd: cluster: "list", "hosts" or "status" (borrowed from o) */
};

/*
 * The control-message decoder: parses buf[0..len) as one request and checks
 * it whole — envelope ("version", "command"), "units" as the command takes
 * them, each of its fields' type and range — before anything is done.
 * 0 with *ret filled (ret->o is the caller's). On refusal, reason[0..size)
 * receives the answer's message and the return says its error:
 * -EPROTONOSUPPORT unsupported-version ("version" absent or not 1),
 * -EBADMSG bad-request (not one JSON object, bytes that are not UTF-8,
 * unknown command, a field of the wrong type or out of range, a string with a
 * NUL inside, units missing or unexpected); -ENOMEM.
 * Pure: no I/O, no global state (tests/fuzz/fuzz-control.c fuzzes it).
 */
int control_request_decode(const void *buf, size_t len, struct control_request *ret, char *reason, size_t size);

/* Releases q->o; q may be reused. */
void control_request_done(struct control_request *q);

/* The request's i-th unit name (i < q->n_units). */
const char *control_request_unit(const struct control_request *q, size_t i);

/* A message {"version": 1, "type": type}; NULL on ENOMEM. */
struct json_object *control_message_new(const char *type);

/*
 * Parses exactly one JSON value filling buf[0..len) (trailing whitespace
 * allowed). *ret is the caller's; JSON null gives *ret = NULL. -EBADMSG: not
 * JSON, or trailing bytes; -ENOMEM.
 */
int control_json_parse(const void *buf, size_t len, struct json_object **ret);

/* As control_json_parse(), but the value must be an object (a message). */
int control_message_parse(const void *buf, size_t len, struct json_object **ret);

/* The compact text of o (owned by o, valid until o changes or is put) and
 * its length. -ENOMEM. */
int control_message_text(struct json_object *o, const char **ret_text, size_t *ret_len);

/*
 * Typed field getters. Absent or null: -ENOENT (ret untouched). Present with
 * another type, or a string with a NUL inside (a C string would end there):
 * -EBADMSG. Strings stay owned by o.
 */
int control_get_string(struct json_object *o, const char *key, const char **ret);
int control_get_int64(struct json_object *o, const char *key, int64_t *ret);
int control_get_bool(struct json_object *o, const char *key, bool *ret);
/* An array of strings: *ret the array object (borrowed), *ret_n its length. */
int control_get_string_array(struct json_object *o, const char *key, struct json_object **ret, size_t *ret_n);

/* Adds key → a new string (or null for NULL) / int64 / bool. -ENOMEM. */
int control_add_string(struct json_object *o, const char *key, const char *value);
int control_add_int64(struct json_object *o, const char *key, int64_t value);
int control_add_bool(struct json_object *o, const char *key, bool value);

/*
 * Bytes that are not UTF-8 (SPEC §5, docs/control-protocol.md "Bytes that are
 * not UTF-8"). control_utf8_span() returns the length in bytes (1-4) of the
 * strict UTF-8 sequence at s[0..len) — no overlong forms, no surrogates,
 * nothing above U+10FFFF — or 0 when s does not start with one. Pure; any
 * thread.
 */
size_t control_utf8_span(const char *s, size_t len);

/*
 * The escaped form of the len bytes at s: NULL in *ret when they are valid
 * UTF-8 (sent unchanged, no flag). Otherwise *ret is a new NUL-terminated
 * string (caller frees) where each byte of an invalid sequence is written
 * `\xHH` (lower-case hex) and each backslash `\\`, all else unchanged, and
 * *ret_len its length (at most 4·len bytes). 0 or -ENOMEM. Any thread.
 */
int control_text_escape(const char *s, size_t len, char **ret, size_t *ret_len);

/*
 * QA L3: a file name (NUL-terminated) as an answer shows it: NULL in *ret
 * when it is UTF-8 without control characters; else *ret (caller frees) as
 * control_text_escape() writes it, control characters (below 0x20, 0x7f)
 * written `\xHH` too (docs/control-protocol.md). 0 or -ENOMEM. Any thread.
 */
int control_name_escape(const char *name, char **ret);

/*
 * Undoes control_text_escape() in place: s[0..len) becomes the original
 * bytes, their length returned (never more than len). A `\` not followed by
 * `\` or `xHH` is kept as it is. Any thread.
 */
size_t control_text_unescape(char *s, size_t len);

/*
 * Answers of any size (docs/control-protocol.md "Results in parts"): a result
 * whose text exceeds CONTROL_MESSAGE_MAX is sent as zero or more
 * {"type": "result-part"} messages, each holding some elements of the
 * result's array fields ("units", "added", …) in order and at most about
 * part_bytes of text, then the result itself with those arrays emptied.
 *
 * control_result_split: moves every element of every array field of result
 * (borrowed, changed in place) into parts, calling emit(part, userdata) for
 * each (the part is emit's: taken also on failure). 0, -ENOMEM, or emit's
 * negative return. Pure (no I/O).
 */
int control_result_split(struct json_object *result, size_t part_bytes,
                         int (*emit)(struct json_object *part, void *userdata), void *userdata);

/*
 * The client's side: control_result_merge appends each array field of part
 * (borrowed) to the same-named array of *acc (created on first use; the
 * caller's, put with json_object_put). control_result_join puts acc's arrays
 * in front of result's (borrowed, changed in place); acc may be NULL.
 * 0 or -ENOMEM.
 */
int control_result_merge(struct json_object **acc, struct json_object *part);
int control_result_join(struct json_object *acc, struct json_object *result);

static inline void json_object_putp(struct json_object **o) {
        if (*o)
                json_object_put(*o);
}
#define _cleanup_json_ _cleanup_(json_object_putp)

/*
 * The socket path SPEC §5 prescribes: opt (--control-socket) if set, else
 * $TEND_SOCKET, else /run/tend/control for root, else
 * $XDG_RUNTIME_DIR/tend/control. *ret is the caller's (free()). -ENOENT if none applies,
 * -EINVAL (ret NULL), -ENOMEM. Reads the environment: not thread-safe
 * against setenv().
 */
int control_socket_path(const char *opt, char **ret);

