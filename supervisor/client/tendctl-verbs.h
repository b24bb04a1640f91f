/* SPDX-License-Identifier: MIT */
/*
 * tendctl's verbs (tendctl-verbs.c; docs/tendctl.1.md): what each verb sends,
 * which options and how many names it takes, its exit statuses (SPEC §5), and
 * the parsed command line every part of tendctl reads. The lowest of
 * tendctl's parts: it calls none of the others. Single-threaded.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Which options a verb takes (struct verb_info.options), one bit each, in
 * the order tendctl.c names them in its usage errors. */
enum {
        OPT_NO_BLOCK = 1,
        OPT_JSON = 2,
        OPT_LOGS = 4,     /* -f */
        OPT_KILL = 8,
        OPT_EPHEMERAL = 16,
        OPT_PROPS = 32,   /* -p, --value: show's properties, logs' priority */
        OPT_LINES = 64,   /* -n */
        OPT_FILTER = 128, /* logs --since */
        OPT_NOW = 256,    /* enable/disable --now */
};

/* One verb: its name, the control command it sends (enum control_command),
 * its options (OPT_*), how many names it takes; unknown: the exit status for
 * a unit tend does not know (systemctl's; 0: none of its own). */
struct verb_info {
        const char *name;
        int cmd;
        unsigned options;
        size_t min_names, max_names;
        int unknown;
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

/* The verb's entry of the table (static, never NULL; v must be < _VERB_MAX). */
const struct verb_info *verb_info(enum verb v);
/* The verb named s (a command line's word), or -EINVAL for none. */
int verb_from_string(const char *s);
/* The verb's exit statuses where tend cannot answer (tendctl(1) "EXIT STATUS"). */
int verb_exit_not_running(enum verb v);
int verb_exit_denied(enum verb v);
/* The verb's exit status for an unknown unit. */
int verb_exit_unknown(enum verb v);
/* The verb's name (static); "?" for none. */
const char *verb_name(enum verb v);
