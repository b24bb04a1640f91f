/* SPDX-License-Identifier: MIT */
/*
 * tendctl: the control client (SPEC §5; docs/tendctl.1.md is the manual,
 * docs/control-protocol.md the protocol). One connection, one request (or a
 * few, pipelined), the answer's messages read until its "result"; watch and
 * logs -f read until tend or the user ends them. This file: the command line
 * and which part runs the verb: tendctl-verbs.c the verbs' table,
 * tendctl-session.c tend's own verbs' sessions, tendctl-show.c the verbs
 * answered from the units' properties (systemctl's), tendctl-security.c,
 * tendctl-cluster.c. Calls go one way: this file → the verbs' runners →
 * tendctl-conn.c, tendctl-print.c → tendctl-verbs.c.
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
#include "tendctl-cluster.h"
#include "tendctl-conn.h"
#include "tendctl-print.h"
#include "tendctl-security.h"
#include "tendctl-session.h"
#include "tendctl-show.h"
#include "tendctl-verbs.h"
#include "time-util.h"

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
        unsigned allowed = verb_info(a->verb)->options;
        const char *v = verb_info(a->verb)->name;
        static const char *const names[] = { "--no-block", "--json", "-f", "--signal/--main", "--ephemeral",
                                             "-p/--value", "-n", "--since", "--now" };

        for (unsigned i = 0; i < ELEMENTSOF(names); i++)
                if ((given & (1u << i)) && !(allowed & (1u << i)))
                        return usage_error("%s: %s does not apply", v, names[i]);
        if (a->n_names < verb_info(a->verb)->min_names)
                return usage_error("%s: %s", v, a->verb == VERB_WATCH ? "too few arguments" : "which unit?");
        if (a->n_names > verb_info(a->verb)->max_names)
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
        a->cmd = verb_info(a->verb)->cmd;
        a->names = argv + optind + 1;
        a->n_names = (size_t) (argc - optind - 1);
        if (a->verb == VERB_STATUS && !a->lines_given)
                a->lines = 10;
        return check_verb(a, given);
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

