/* SPDX-License-Identifier: MIT */
/*
 * tendctl's parts (docs/tendctl.1.md): the verbs and their options
 * (tendctl.c), the connection and its messages (tendctl-conn.c), the human
 * output of records and lines (tendctl-print.c), the verbs answered from a
 * unit's properties, systemctl's (tendctl-show.c). Single-threaded.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control-proto.h"

typedef struct json_object json;

/* systemctl's and LSB's exit statuses; tendctl's own (SPEC §5) where the
 * verb is not systemctl's. */
#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_NOT_FOUND 3      /* tend's own verbs (logs, watch) */
#define EXIT_DENIED 4
#define EXIT_NOT_RUNNING 5
#define EXIT_PROGRAM_NOT_RUNNING 3 /* systemctl status/is-active: inactive or failed */
#define EXIT_UNKNOWN_STATUS 4      /* systemctl status: no such unit */
#define EXIT_NOT_INSTALLED 5       /* systemctl start/stop/…: no such unit */
#define EXIT_NOT_IMPLEMENTED 3     /* systemctl reload: no ExecReload= */

enum verb {
        VERB_STATUS,
        VERB_LIST,
        VERB_LIST_UNITS,
        VERB_START,
        VERB_STOP,
        VERB_RESTART,
        VERB_RESET_FAILED,
        VERB_KILL,
        VERB_RELOAD,
        VERB_LOGS,
        VERB_WATCH,
        VERB_DAEMON_RELOAD,
        VERB_SHUTDOWN,
        VERB_SHOW,
        VERB_IS_ACTIVE,
        VERB_IS_FAILED,
        VERB_IS_ENABLED,
        VERB_CAT,
        VERB_LIST_DEPENDENCIES,
        VERB_TRY_RESTART,
        VERB_RELOAD_OR_RESTART,
        VERB_SECURITY, /* security: tendctl-security.c */
        VERB_ENABLE,  /* pkg */
        VERB_DISABLE, /* pkg */
        VERB_DAEMON_REEXEC, /* reexec */
        _VERB_MAX,
};

struct args {
        enum verb verb;
        int cmd; /* the control command sent for the verb (enum control_command) */
        char **names;
        size_t n_names;
        const char *socket;
        bool json, no_block, follow, main_only, ephemeral, value, quiet;
        int signal;
        int64_t lines; /* -1: all (logs); status: 10 unless -n */
        bool lines_given;
        char **props;  /* show -p, each possibly "A,B" */
        size_t n_props;
        int64_t since; /* logs --since: CLOCK_REALTIME µs, 0: none */
        int priority;  /* logs -p: 0–7 */
        bool now;      /* pkg: enable --now starts, disable --now stops */
        const char *view; /* etcd: --cluster list|hosts|status (tendctl-cluster.c), NULL without */
};

/* The verb's exit statuses where tend cannot answer (tendctl(1) "EXIT STATUS"). */
int verb_exit_not_running(enum verb v);
int verb_exit_denied(enum verb v);
/* The verb's exit status for an unknown unit. */
int verb_exit_unknown(enum verb v);
const char *verb_name(enum verb v);

/* ---- tendctl-conn.c ---- */

/* A connected socket in *ret_fd, or the exit status for why not (message printed). */
int connect_tend(const struct args *a, int *ret_fd);
/* {"version": 1, "command": cmd, "units": [names…]}; NULL on ENOMEM. */
json *request_new(enum control_command cmd, char *const *names, size_t n);
/* 0 or a negative errno (-EPIPE, -ECONNRESET: tend closed). req NULL: -ENOMEM. */
int send_request(int fd, json *req);
/* The next message (blocking), *ret the caller's; -ECONNRESET, -EMSGSIZE, -EBADMSG. */
int recv_message(int fd, json **ret);
/* Prints why reading failed; returns EXIT_FAILED. */
int recv_error(int r);
const char *get_str(json *o, const char *key, const char *def);
int64_t get_int(json *o, const char *key, int64_t def);
bool get_bool(json *o, const char *key);
void print_json(json *o);

/* ---- tendctl-print.c ---- */

extern bool colour;
const char *state_colour(const char *state);
const char *colour_off(void);
enum time_style { TIME_STATUS, TIME_LIST, TIME_LOG };
void format_time(int64_t usec, enum time_style style, char *buf, size_t size);
void format_ago(int64_t usec, char *buf, size_t size);
void print_status(json *rec);
void print_list(json *records);
/* A log line message, as `logs` prints it (json: the message without its envelope). */
void print_line(json *m, bool as_json);

/* ---- tendctl-show.c ---- */

/* The verbs answered from the units' properties (show, is-active, is-failed,
 * is-enabled, cat, list-dependencies, status NAME…, try-restart,
 * reload-or-restart): runs the verb on fd, returns the exit status. */
int run_show_verb(const struct args *a, int fd);

/* security: tendctl security NAME… (tendctl-security.c): tend's assessment
 * printed as systemd-analyze security does, or as a JSON array with -o json.
 * Returns the exit status (0; 3 a unit not found; …). */
int run_security_verb(const struct args *a, int fd);

/* ---- tendctl.c ---- */

/* Sends a's request (a->cmd with a->names) on fd and reads its answer as
 * tend's own verbs do; returns the exit status. */
int run_session(const struct args *a, int fd);

/* tendctl-cluster.c, etcd: --cluster VIEW [NAME]: the cluster view; tendctl's exit status. */
int run_cluster(const struct args *a, int fd);
