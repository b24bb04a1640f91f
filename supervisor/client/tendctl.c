/* SPDX-License-Identifier: MIT */
/*
 * tendctl: the control client (SPEC §5; docs/tendctl.1.md is the manual,
 * docs/control-protocol.md the protocol). One connection, one request (or a
 * few, pipelined), the answer's messages read until its "result"; watch and
 * logs -f read until tend or the user ends them. This file: the verbs, their
 * options, tend's own verbs' sessions; tendctl-show.c the verbs answered from
 * the units' properties (systemctl's).
 *
 * Exit status: systemctl's for systemctl's verbs (tendctl(1) "EXIT STATUS",
 * one table per verb); else SPEC §5's: 0 done; 1 the operation failed;
 * 2 usage error; 3 unit not found; 4 permission denied; 5 tend is not running.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "signal-util.h"
#include "tendctl.h"
#include "time-util.h"

/* Which options and how many names each verb takes. */
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

/* unknown: the exit status for a unit tend does not know (systemctl's);
 * systemctl: the verb is systemctl's, so 5 and 4 mean what systemctl says. */
static const struct {
        const char *name;
        int cmd;
        unsigned options;
        size_t min_names, max_names;
        int unknown;
} verbs[_VERB_MAX] = {
        [VERB_STATUS] = { "status", CONTROL_CMD_STATUS, OPT_JSON | OPT_LINES, 0, SIZE_MAX, EXIT_UNKNOWN_STATUS },
        [VERB_LIST] = { "list", CONTROL_CMD_LIST, OPT_JSON, 0, 0, 0 },
        [VERB_LIST_UNITS] = { "list-units", CONTROL_CMD_LIST, OPT_JSON, 0, 0, 0 },
        [VERB_START] = { "start", CONTROL_CMD_START, OPT_NO_BLOCK | OPT_JSON, 1, SIZE_MAX, EXIT_NOT_INSTALLED },
        [VERB_STOP] = { "stop", CONTROL_CMD_STOP, OPT_NO_BLOCK | OPT_JSON, 1, SIZE_MAX, EXIT_NOT_INSTALLED },
        [VERB_RESTART] = { "restart", CONTROL_CMD_RESTART, OPT_NO_BLOCK | OPT_JSON, 1, SIZE_MAX, EXIT_NOT_INSTALLED },
        [VERB_RESET_FAILED] = { "reset-failed", CONTROL_CMD_RESET_FAILED, 0, 0, SIZE_MAX, EXIT_FAILED },
        [VERB_KILL] = { "kill", CONTROL_CMD_KILL, OPT_KILL, 1, 1, EXIT_FAILED },
        [VERB_RELOAD] = { "reload", CONTROL_CMD_RELOAD, OPT_NO_BLOCK, 1, SIZE_MAX, EXIT_NOT_INSTALLED },
        [VERB_LOGS] = { "logs", CONTROL_CMD_LOGS, OPT_LOGS | OPT_LINES | OPT_PROPS | OPT_JSON | OPT_FILTER, 1, 1, EXIT_NOT_FOUND },
        [VERB_WATCH] = { "watch", CONTROL_CMD_WATCH, OPT_EPHEMERAL | OPT_JSON, 0, 1, EXIT_NOT_FOUND },
        [VERB_DAEMON_RELOAD] = { "daemon-reload", CONTROL_CMD_DAEMON_RELOAD, OPT_JSON, 0, 0, 0 },
        [VERB_SHUTDOWN] = { "shutdown", CONTROL_CMD_SHUTDOWN, 0, 0, 0, 0 },
        [VERB_SHOW] = { "show", CONTROL_CMD_SHOW, OPT_PROPS | OPT_JSON, 1, SIZE_MAX, 0 },
        [VERB_IS_ACTIVE] = { "is-active", CONTROL_CMD_SHOW, 0, 1, SIZE_MAX, EXIT_PROGRAM_NOT_RUNNING },
        [VERB_IS_FAILED] = { "is-failed", CONTROL_CMD_SHOW, 0, 1, SIZE_MAX, EXIT_FAILED },
        [VERB_IS_ENABLED] = { "is-enabled", CONTROL_CMD_SHOW, 0, 1, SIZE_MAX, EXIT_FAILED },
        [VERB_CAT] = { "cat", CONTROL_CMD_SHOW, 0, 1, SIZE_MAX, EXIT_FAILED },
        [VERB_LIST_DEPENDENCIES] = { "list-dependencies", CONTROL_CMD_SHOW, 0, 1, 1, 0 },
        [VERB_TRY_RESTART] = { "try-restart", CONTROL_CMD_SHOW, OPT_NO_BLOCK, 1, SIZE_MAX, EXIT_NOT_INSTALLED },
        [VERB_RELOAD_OR_RESTART] = { "reload-or-restart", CONTROL_CMD_SHOW, OPT_NO_BLOCK, 1, SIZE_MAX,
                                     EXIT_NOT_INSTALLED },
        [VERB_SECURITY] = { "security", CONTROL_CMD_SECURITY, OPT_JSON, 1, SIZE_MAX, EXIT_NOT_FOUND },
        [VERB_ENABLE] = { "enable", CONTROL_CMD_ENABLE, OPT_NOW, 1, SIZE_MAX, EXIT_FAILED },
        [VERB_DISABLE] = { "disable", CONTROL_CMD_DISABLE, OPT_NOW, 1, SIZE_MAX, EXIT_FAILED },
        [VERB_DAEMON_REEXEC] = { "daemon-reexec", CONTROL_CMD_DAEMON_REEXEC, 0, 0, 0, 0 },
};

const char *verb_name(enum verb v) {
        return (unsigned) v < _VERB_MAX ? verbs[v].name : "?";
}

int verb_exit_unknown(enum verb v) {
        return (unsigned) v < _VERB_MAX ? verbs[v].unknown : EXIT_FAILED;
}

/* "tend is not running" is 5 unless 5 means an unknown unit for the verb
 * (start, stop, …: systemctl's "not installed"), then 1 as systemctl's own
 * "cannot connect". */
int verb_exit_not_running(enum verb v) {
        return verb_exit_unknown(v) == EXIT_NOT_RUNNING ? EXIT_FAILED : EXIT_NOT_RUNNING;
}

/* "permission denied" is 4 for every verb (QA19 L7): for status too, where
 * 4 is also LSB's "status unknown" — which a refused status is (1 there
 * would be LSB's "dead, its pid file left"). stderr says which. */
int verb_exit_denied(enum verb v) {
        return EXIT_DENIED;
}

static int verb_from_string(const char *s) {
        for (size_t i = 0; i < _VERB_MAX; i++)
                if (streq(s, verbs[i].name))
                        return (int) i;
        return -EINVAL;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

static void help(void) {
        printf("tendctl [OPTIONS] COMMAND [NAME…]\n\n"
               "Control a running tend.\n\n"
               "Commands:\n"
               "  status [NAME…] [-n N]          the unit: state, processes, CPU, memory, last failure, log lines\n"
               "  list, list-units               every unit, one line each\n"
               "  start|stop|restart NAME…       and wait for the outcome (--no-block: do not wait)\n"
               "  try-restart NAME…              restart the units that run\n"
               "  reload NAME…                   run ExecReload= and wait for it (--no-block: do not wait)\n"
               "  reload-or-restart NAME…        reload a running unit that has ExecReload=, else restart\n"
               "  is-active|is-failed NAME…      the state, as systemctl prints it (-q: only the exit status)\n"
               "  is-enabled NAME…               whether tend starts the unit on its own (enabled, disabled, static)\n"
               "  enable|disable [--now] NAME…   whether tend starts the unit on its own (--now: start/stop it too)\n"
               "  show NAME… [-p PROP…] [--value] the unit's properties, systemd's names\n"
               "  cat NAME…                      the unit file and its drop-ins\n"
               "  list-dependencies NAME         the units NAME requires and wants, as a tree\n"
               "  security NAME…                 the unit's hardening and exposure, as systemd-analyze security\n"
               "  kill NAME [--signal SIG] [--main]\n"
               "                                 signal every process of the unit, or only the main one\n"
               "  reset-failed [NAME…]           failed units become inactive; start limits reset\n"
               "  watch [PREFIX] [--ephemeral]   the store's records, then their changes\n"
               "  logs NAME [-n N] [-f] [--since TIME] [-p PRIORITY]\n"
               "                                 recent lines of the unit's output, then follow\n"
               "  daemon-reload                  re-read the unit directory\n"
               "  daemon-reexec                  execute tend's binary anew, every unit kept running\n"
               "  shutdown                       stop every unit, then exit tend\n"
               "  --cluster list|hosts|status NAME  the cluster on etcd: every host's units, the\n"
               "                                 hosts, a singleton's holder (tend --store)\n\n"
               "Options:\n"
               "      --control-socket PATH  tend's socket (else $TEND_SOCKET, /run/tend/control for root,\n"
               "                             $XDG_RUNTIME_DIR/tend/control)\n"
               "      --json, -o json        machine-readable output\n"
               "      --no-block             start/stop/restart/reload/try-restart/reload-or-restart: do not wait\n"
               "  -s, --signal SIG           kill: the signal (default SIGTERM)\n"
               "      --main                 kill: only the main process\n"
               "  -n, --lines N              logs: the last N lines (default: the whole ring; \"all\");\n"
               "                             status: the last N lines (default 10)\n"
               "  -f, --follow               logs: then follow new lines\n"
               "  -S, --since TIME           logs: lines from TIME (\"2026-12-01 10:00[:00]\", \"-5min\", \"today\")\n"
               "  -p, --priority PRIO        logs: lines of PRIO or more urgent (\"err\", \"3\", …)\n"
               "  -p, --property PROP        show: only these properties (repeat, or \"A,B\")\n"
               "      --value                show: the values only\n"
               "  -q, --quiet                is-active, is-failed, is-enabled: print nothing\n"
               "      --no-pager             accepted (tendctl never pages)\n"
               "      --ephemeral            watch: the ephemeral keyspace (leases) instead of the durable one\n"
               "  -h, --help                 this text\n"
               "      --version              the version\n\n"
               "Exit status: systemctl's for its verbs (status: 3 not running, 4 no such unit; start, stop…:\n"
               "5 no such unit); else 0 done, 1 failed, 2 usage error, 3 unit not found, 4 permission denied,\n"
               "5 tend is not running. See tendctl(1).\n");
}

_printf_(1, 2) static int usage_error(const char *fmt, ...) {
        va_list ap;
        fputs("tendctl: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs("\nTry 'tendctl --help'.\n", stderr);
        return -EINVAL;
}

static int parse_lines(const char *s, int64_t *ret) {
        char *end;
        if (streq(s, "all")) {
                *ret = -1;
                return 0;
        }
        errno = 0;
        long long n = strtoll(s, &end, 10);
        if (errno || end == s || *end || n < 0)
                return usage_error("-n: \"%s\" is not a number of lines (or \"all\")", s);
        *ret = n;
        return 0;
}

/* journalctl's words: a level's name or number. */
static int parse_priority(const char *s) {
        static const char *const names[] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };
        for (int i = 0; i < (int) ELEMENTSOF(names); i++)
                if (streq(s, names[i]) || (s[0] == '0' + i && !s[1]))
                        return i;
        return usage_error("-p: \"%s\" is not a priority (emerg alert crit err warning notice info debug, 0-7)", s);
}

/* --since: "YYYY-MM-DD[ HH:MM[:SS]]", "HH:MM[:SS]" (today), "today",
 * "yesterday", "now", "-N[s|min|h|d]" (ago), "@SECONDS"; local time. */
static int parse_since(const char *s, int64_t *ret) {
        int64_t now = (int64_t) now_usec(CLOCK_REALTIME);
        time_t t = (time_t) (now / (int64_t) USEC_PER_SEC);
        struct tm tm;
        char *end;
        localtime_r(&t, &tm);
        if (s[0] == '-' || s[0] == '@') {
                errno = 0;
                long long n = strtoll(s + 1, &end, 10);
                static const struct { const char *unit; int64_t usec; } units[] = {
                        { "", USEC_PER_SEC }, { "s", USEC_PER_SEC }, { "min", 60 * USEC_PER_SEC },
                        { "h", 3600 * USEC_PER_SEC }, { "d", 86400 * USEC_PER_SEC },
                };
                for (size_t i = 0; !errno && end != s + 1 && n >= 0 && i < ELEMENTSOF(units); i++)
                        if (streq(end, units[i].unit) && (s[0] == '-' || i == 0)) {
                                *ret = s[0] == '@' ? n * (int64_t) USEC_PER_SEC : now - n * units[i].usec;
                                return 0;
                        }
                return usage_error("--since: \"%s\" is not a time", s);
        }
        if (streq(s, "now")) {
                *ret = now;
                return 0;
        }
        tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
        if (streq(s, "yesterday"))
                tm.tm_mday--;
        else if (!streq(s, "today")) {
                struct tm day = tm;
                const char *rest = strptime(s, "%Y-%m-%d", &day);
                if (rest)
                        tm = day;
                else
                        rest = s;
                if (*rest == ' ')
                        rest++;
                if (*rest && !(end = strptime(rest, "%H:%M:%S", &tm)) && !(end = strptime(rest, "%H:%M", &tm)))
                        return usage_error("--since: \"%s\" is not a time", s);
                if (*rest && *end)
                        return usage_error("--since: \"%s\" is not a time", s);
        }
        tm.tm_isdst = -1;
        time_t when = mktime(&tm);
        if (when == (time_t) -1)
                return usage_error("--since: \"%s\" is not a time", s);
        *ret = (int64_t) when * (int64_t) USEC_PER_SEC;
        return 0;
}

enum { ARG_SOCKET = 0x100, ARG_JSON, ARG_NO_BLOCK, ARG_NO_PAGER, ARG_MAIN, ARG_VALUE, ARG_EPHEMERAL, ARG_VERSION,
       ARG_NOW, ARG_CLUSTER };

/* Checks the options given against the verb; 0 or a usage error. */
static int check_verb(struct args *a, unsigned given) {
        unsigned allowed = verbs[a->verb].options;
        const char *v = verbs[a->verb].name;
        static const char *const names[] = { "--no-block", "--json", "-f", "--signal/--main", "--ephemeral",
                                             "-p/--value", "-n", "--since", "--now" };

        for (unsigned i = 0; i < ELEMENTSOF(names); i++)
                if ((given & (1u << i)) && !(allowed & (1u << i)))
                        return usage_error("%s: %s does not apply", v, names[i]);
        if (a->n_names < verbs[a->verb].min_names)
                return usage_error("%s: %s", v, a->verb == VERB_WATCH ? "too few arguments" : "which unit?");
        if (a->n_names > verbs[a->verb].max_names)
                return usage_error("%s: too many arguments", v);
        if (a->verb == VERB_LOGS && (a->value || a->n_props > 1))
                return usage_error("logs: %s", a->value ? "--value does not apply" : "one -p PRIORITY");
        if (a->verb == VERB_LOGS && a->n_props == 1 && (a->priority = parse_priority(a->props[0])) < 0)
                return -EINVAL;
        return 0;
}

static int add_prop(struct args *a, char *p) {
        char **v = reallocarray(a->props, a->n_props + 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        a->props = v;
        a->props[a->n_props++] = p;
        return 0;
}

/* One option into a (c is getopt's answer); 1 when --help/--version was
 * printed, 0, or a usage error. */
static int parse_option(int c, char **argv, struct args *a, unsigned *given) {
        switch (c) {
        case 'h':
                help();
                return 1;
        case ARG_VERSION:
                printf("tendctl %s\n", TEND_VERSION);
                return 1;
        case ARG_SOCKET:
                a->socket = optarg;
                return 0;
        case ARG_JSON:
                a->json = true, *given |= OPT_JSON;
                return 0;
        case 'o':
                if (!streq(optarg, "json") && !streq(optarg, "json-pretty") && !streq(optarg, "short"))
                        return usage_error("-o: output \"%s\" is not known (json, short)", optarg);
                a->json = !streq(optarg, "short");
                *given |= a->json ? OPT_JSON : 0;
                return 0;
        case ARG_NO_BLOCK:
                a->no_block = true, *given |= OPT_NO_BLOCK;
                return 0;
        case ARG_NO_PAGER:
                return 0;
        case 's':
                if ((a->signal = signal_from_string(optarg)) < 0)
                        return usage_error("--signal: unknown signal \"%s\"", optarg);
                *given |= OPT_KILL;
                return 0;
        case ARG_MAIN:
                a->main_only = true, *given |= OPT_KILL;
                return 0;
        case 'n':
                a->lines_given = true, *given |= OPT_LINES;
                return parse_lines(optarg, &a->lines) < 0 ? -EINVAL : 0;
        case 'f':
                a->follow = true, *given |= OPT_LOGS;
                return 0;
        case 'S':
                *given |= OPT_FILTER;
                return parse_since(optarg, &a->since) < 0 ? -EINVAL : 0;
        case 'p':
                *given |= OPT_PROPS;
                return add_prop(a, optarg) < 0 ? usage_error("out of memory") : 0;
        case ARG_VALUE:
                a->value = true, *given |= OPT_PROPS;
                return 0;
        case 'q':
                a->quiet = true;
                return 0;
        case ARG_EPHEMERAL:
                a->ephemeral = true, *given |= OPT_EPHEMERAL;
                return 0;
        case ARG_NOW:
                a->now = true, *given |= OPT_NOW;
                return 0;
        case ARG_CLUSTER: /* etcd */
                a->view = "";
                return 0;
        case ':':
                return usage_error("%s needs an argument", argv[optind - 1]);
        default:
                return usage_error("unknown option \"%s\"", argv[optind - 1]);
        }
}

/* etcd: --cluster VIEW [NAME]; only --json applies. */
static int parse_cluster_args(int argc, char **argv, struct args *a, unsigned given) {
        a->view = argv[optind];
        a->verb = VERB_LIST;
        a->cmd = CONTROL_CMD_CLUSTER;
        a->names = argv + optind + 1;
        a->n_names = (size_t) (argc - optind - 1);
        if (!streq(a->view, "list") && !streq(a->view, "hosts") && !streq(a->view, "status"))
                return usage_error("--cluster: list, hosts or status NAME, not \"%s\"", a->view);
        if (given & ~(unsigned) OPT_JSON)
                return usage_error("--cluster: only --json applies");
        if (streq(a->view, "status") != (a->n_names == 1))
                return usage_error("--cluster %s: %s", a->view, a->n_names ? "too many arguments" : "which unit?");
        return 0;
}

/* 0 to run, 1 when --help/--version was printed, or a usage error. */
static int parse_args(int argc, char **argv, struct args *a) {
        static const struct option options[] = {
                { "control-socket", required_argument, NULL, ARG_SOCKET },
                { "json", no_argument, NULL, ARG_JSON },
                { "output", required_argument, NULL, 'o' },
                { "no-block", no_argument, NULL, ARG_NO_BLOCK },
                { "no-pager", no_argument, NULL, ARG_NO_PAGER },
                { "signal", required_argument, NULL, 's' },
                { "main", no_argument, NULL, ARG_MAIN },
                { "lines", required_argument, NULL, 'n' },
                { "follow", no_argument, NULL, 'f' },
                { "since", required_argument, NULL, 'S' },
                { "priority", required_argument, NULL, 'p' },
                { "property", required_argument, NULL, 'p' },
                { "value", no_argument, NULL, ARG_VALUE },
                { "quiet", no_argument, NULL, 'q' },
                { "ephemeral", no_argument, NULL, ARG_EPHEMERAL },
                { "now", no_argument, NULL, ARG_NOW },
                { "cluster", no_argument, NULL, ARG_CLUSTER },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        unsigned given = 0;
        int c, v;

        *a = (struct args) { .lines = -1, .signal = SIGTERM, .priority = 7 };
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":hn:fs:o:S:p:q", options, NULL)) >= 0) {
                int r = parse_option(c, argv, a, &given);
                if (r != 0)
                        return r;
        }
        if (optind >= argc)
                return usage_error("no command given");
        if (a->view) /* etcd: --cluster list|hosts|status NAME */
                return parse_cluster_args(argc, argv, a, given);
        if ((v = verb_from_string(argv[optind])) < 0)
                return usage_error("unknown command \"%s\"", argv[optind]);
        a->verb = (enum verb) v;
        a->cmd = verbs[v].cmd;
        a->names = argv + optind + 1;
        a->n_names = (size_t) (argc - optind - 1);
        if (a->verb == VERB_STATUS && !a->lines_given)
                a->lines = 10;
        return check_verb(a, given);
}

static json *build_request(const struct args *a) {
        bool takes_units = a->cmd != CONTROL_CMD_WATCH;
        _cleanup_json_ json *o = request_new(a->cmd, a->names, takes_units ? a->n_names : 0);
        int r = o ? 0 : -ENOMEM;
        switch (r < 0 ? -1 : a->cmd) {
        case CONTROL_CMD_START: case CONTROL_CMD_STOP: case CONTROL_CMD_RESTART: case CONTROL_CMD_RELOAD:
                r = control_add_bool(o, "no_block", a->no_block);
                break;
        case CONTROL_CMD_KILL:
                if ((r = control_add_int64(o, "signal", a->signal)) >= 0)
                        r = control_add_bool(o, "main", a->main_only);
                break;
        case CONTROL_CMD_LOGS:
                if ((r = control_add_bool(o, "follow", a->follow)) >= 0 && a->lines >= 0)
                        r = control_add_int64(o, "lines", a->lines);
                if (r >= 0 && a->since > 0)
                        r = control_add_int64(o, "since", a->since);
                if (r >= 0 && a->priority < 7)
                        r = control_add_int64(o, "priority", a->priority);
                break;
        case CONTROL_CMD_WATCH:
                json_object_object_del(o, "units");
                if ((r = control_add_string(o, "keyspace", a->ephemeral ? "ephemeral" : "durable")) >= 0)
                        r = control_add_string(o, "prefix", a->n_names ? a->names[0] : "");
                break;
        default:
                break;
        }
        return r < 0 ? NULL : TAKE_PTR(o);
}



/* ------------------------------------------------------------------------ */
/* Human output                                                              */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Answers                                                                   */
/* ------------------------------------------------------------------------ */

/* The exit status of a result; its failures are printed on stderr. */
static int result_status(json *res, enum verb verb) {
        if (get_bool(res, "ok"))
                return 0;
        /* systemctl kill of a unit with no process left succeeds, silently */
        if (verb == VERB_KILL && strstr(get_str(res, "message", ""), ": no process to signal"))
                return 0;
        json *units;
        size_t printed = 0;
        if (json_object_object_get_ex(res, "units", &units) && json_object_is_type(units, json_type_array))
                for (size_t i = 0; i < json_object_array_length(units); i++) {
                        json *u = json_object_array_get_idx(units, i);
                        if (!get_bool(u, "ok")) {
                                fprintf(stderr, "tendctl: %s\n", get_str(u, "message", get_str(u, "error", "failed")));
                                printed++;
                        }
                }
        if (printed == 0)
                fprintf(stderr, "tendctl: %s\n", get_str(res, "message", get_str(res, "error", "failed")));
        enum control_error e = control_error_from_string(get_str(res, "error", NULL));
        if (e == CONTROL_ERROR_NOT_FOUND)
                return verb_exit_unknown(verb) ? verb_exit_unknown(verb) : EXIT_NOT_FOUND;
        if (e == CONTROL_ERROR_PERMISSION_DENIED)
                return verb_exit_denied(verb);
        if (verb == VERB_RELOAD && strstr(get_str(res, "message", ""), "no ExecReload="))
                return EXIT_NOT_IMPLEMENTED;
        return control_error_exit_status(e);
}

struct session {
        const struct args *a;
        int fd;
        json *records; /* status/list */
        /* watch: key → last revision shown (negative: deleted at that revision) */
        json *seen, *snapshot;
        bool resync;
        json *parts; /* a result's arrays sent ahead in result-part messages (control-proto.h) */
};

static int on_units(struct session *x, json *m) {
        json *units;
        if (!json_object_object_get_ex(m, "units", &units) || !json_object_is_type(units, json_type_array))
                return 0;
        for (size_t i = 0; i < json_object_array_length(units); i++)
                if (json_object_array_add(x->records, json_object_get(json_object_array_get_idx(units, i))) < 0)
                        return -ENOMEM;
        return 0;
}

static int finish_units(struct session *x, json *res) {
        size_t n = json_object_array_length(x->records);
        /* A failed request that gives no record prints nothing on stdout, not an
         * empty list: only its error, on stderr (issue 19). */
        if (n == 0 && !get_bool(res, "ok"))
                return result_status(res, x->a->verb);
        if (x->a->json)
                print_json(x->records);
        else if (x->a->verb == VERB_LIST || x->a->verb == VERB_LIST_UNITS)
                print_list(x->records);
        else
                for (size_t i = 0; i < n; i++) {
                        if (i > 0)
                                putchar('\n');
                        print_status(json_object_array_get_idx(x->records, i));
                }
        fflush(stdout);
        return result_status(res, x->a->verb);
}

/* --- watch: print each change once, across re-watches (dedupe by revision) --- */

static const char *key_name(const char *key) {
        const char *slash = strchr(key, '/');
        return slash ? slash + 1 : key;
}

static void print_event(struct session *x, json *m, const char *event, int64_t rev) {
        const char *key = get_str(m, "key", "");
        json *value = NULL;
        bool put = streq(event, "put");
        if (put)
                json_object_object_get_ex(m, "value", &value);

        if (!x->a->json) {
                const char *state = value ? get_str(value, "state", NULL) : NULL;
                int64_t pid = value ? get_int(value, "main_pid", 0) : 0;
                printf("%" PRId64 " %-6s %s", rev, event, key);
                if (state && pid > 0)
                        printf(" %s%s%s pid %" PRId64 "\n", state_colour(state), state, colour_off(), pid);
                else if (state)
                        printf(" %s%s%s\n", state_colour(state), state, colour_off());
                else if (put)
                        printf(" %s\n", value ? json_object_to_json_string_ext(value, JSON_C_TO_STRING_PLAIN) : "null");
                else
                        printf(" (%s)\n", get_str(m, "cause", "deleted"));
                fflush(stdout);
                return;
        }
        _cleanup_json_ json *o = json_object_new_object();
        if (!o)
                return;
        if (value && json_object_is_type(value, json_type_object)) {
                json_object_object_foreach(value, k, v)
                        json_object_object_add(o, k, json_object_get(v));
        } else if (put)
                json_object_object_add(o, "value", json_object_get(value));
        if (!json_object_object_get_ex(o, "name", NULL))
                control_add_string(o, "name", key_name(key));
        control_add_string(o, "key", key);
        control_add_int64(o, "revision", rev);
        control_add_string(o, "keyspace", get_str(m, "keyspace", "durable"));
        control_add_string(o, "event", event);
        if (!put && get_str(m, "cause", NULL))
                control_add_string(o, "cause", get_str(m, "cause", NULL));
        print_json(o);
        fflush(stdout);
}

static void on_event(struct session *x, json *m) {
        const char *key = get_str(m, "key", ""), *event = get_str(m, "event", "put");
        int64_t rev = get_int(m, "revision", 0), last = 0;
        json *prev;

        if (json_object_object_get_ex(x->seen, key, &prev))
                last = json_object_get_int64(prev);
        if (x->resync && streq(event, "put"))
                json_object_object_add(x->snapshot, key, NULL);
        if (rev <= (last < 0 ? -last : last))
                return; /* shown already, before the re-watch */
        json_object_object_add(x->seen, key, json_object_new_int64(streq(event, "delete") ? -rev : rev));
        print_event(x, m, event, rev);
}

/* After a re-watch's snapshot: a key shown as present that the snapshot
 * lacks was deleted while we were behind. Its delete is shown at the
 * snapshot's revision (the real one was lost with the lag). */
static void on_snapshot_done(struct session *x, json *m) {
        if (!x->resync)
                return;
        int64_t rev = get_int(m, "revision", 0);
        json_object_object_foreach(x->seen, key, v) {
                if (json_object_get_int64(v) <= 0 || json_object_object_get_ex(x->snapshot, key, NULL))
                        continue;
                _cleanup_json_ json *d = json_object_new_object();
                if (!d || control_add_string(d, "key", key) < 0 ||
                    control_add_string(d, "keyspace", get_str(m, "keyspace", "durable")) < 0)
                        continue;
                json_object_object_add(x->seen, key, json_object_new_int64(-rev));
                print_event(x, d, "delete", rev);
        }
        x->resync = false;
        json_object_put(x->snapshot);
        x->snapshot = NULL;
}

static int rewatch(struct session *x) {
        _cleanup_json_ json *req = build_request(x->a);
        x->resync = true;
        json_object_put(x->snapshot);
        x->snapshot = json_object_new_object();
        if (!x->snapshot)
                return -ENOMEM;
        return send_request(x->fd, req);
}

/* ------------------------------------------------------------------------ */
/* main                                                                      */
/* ------------------------------------------------------------------------ */

/* Reads messages until the result; returns the exit status. */
static int session_run(struct session *x) {
        for (;;) {
                _cleanup_json_ json *m = NULL;
                int r = recv_message(x->fd, &m);
                if (r < 0)
                        return recv_error(r);
                const char *type = get_str(m, "type", "");
                if (streq(type, "units")) {
                        if (on_units(x, m) < 0)
                                return recv_error(-ENOMEM);
                } else if (streq(type, "line"))
                        print_line(m, x->a->json);
                else if (streq(type, "event"))
                        on_event(x, m);
                else if (streq(type, "snapshot-done"))
                        on_snapshot_done(x, m);
                else if (streq(type, "result-part")) {
                        if (control_result_merge(&x->parts, m) < 0)
                                return recv_error(-ENOMEM);
                } else if (streq(type, "result")) {
                        if (control_result_join(x->parts, m) < 0)
                                return recv_error(-ENOMEM);
                        if (x->a->cmd == CONTROL_CMD_WATCH &&
                            control_error_from_string(get_str(m, "error", NULL)) == CONTROL_ERROR_LAGGED) {
                                if ((r = rewatch(x)) < 0)
                                        return recv_error(r);
                                continue;
                        }
                        if (x->a->cmd == CONTROL_CMD_STATUS || x->a->cmd == CONTROL_CMD_LIST)
                                return finish_units(x, m);
                        if (x->a->json && x->a->cmd != CONTROL_CMD_LOGS && x->a->cmd != CONTROL_CMD_WATCH) {
                                /* start/stop/restart/daemon-reload: the result itself */
                                json_object_object_del(m, "version");
                                json_object_object_del(m, "type");
                                print_json(m);
                                fflush(stdout);
                        }
                        return result_status(m, x->a->verb);
                }
                /* Unknown types come from a newer tend: ignored. */
        }
}

/* tend's own verbs: one request, its answer. */
int run_session(const struct args *a, int fd) {
        _cleanup_json_ json *req = build_request(a);
        int r = send_request(fd, req);
        /* A refused client's answer is already queued when tend closes: read it. */
        if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
                fprintf(stderr, "tendctl: sending to tend: %s\n", strerror(-r));
                return EXIT_FAILED;
        }
        struct session x = { .a = a, .fd = fd, .records = json_object_new_array(), .seen = json_object_new_object() };
        if (!x.records || !x.seen)
                r = recv_error(-ENOMEM);
        else
                r = session_run(&x);
        json_object_put(x.records);
        json_object_put(x.seen);
        json_object_put(x.snapshot);
        json_object_put(x.parts);
        return r;
}

int main(int argc, char **argv) {
        struct args a;
        _cleanup_close_ int fd = -1;

        int r = parse_args(argc, argv, &a);
        if (r != 0) {
                free(a.props);
                return r > 0 ? 0 : EXIT_USAGE;
        }
        const char *term = getenv("TERM");
        colour = isatty(STDOUT_FILENO) && !getenv("NO_COLOR") && !(term && streq(term, "dumb"));

        r = connect_tend(&a, &fd);
        if (r == 0 && a.verb == VERB_SECURITY)
                r = run_security_verb(&a, fd);
        else if (r == 0 && a.view)
                r = run_cluster(&a, fd);
        else if (r == 0 && (a.cmd == CONTROL_CMD_SHOW || (a.verb == VERB_STATUS && a.n_names > 0 && !a.json)))
                r = run_show_verb(&a, fd);
        else if (r == 0)
                r = run_session(&a, fd);
        if (r == 0 && a.now) { /* enable --now, disable --now: then start or stop, as systemctl */
                struct args b = a;
                b.cmd = a.verb == VERB_ENABLE ? CONTROL_CMD_START : CONTROL_CMD_STOP;
                r = run_session(&b, fd);
        }
        free(a.props);
        return r;
}

