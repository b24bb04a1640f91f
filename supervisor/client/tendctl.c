/* SPDX-License-Identifier: MIT */
/*
 * tendctl: the control client (SPEC §5; docs/tendctl.1.md is the manual,
 * docs/control-protocol.md the protocol). One connection, one request, the
 * answer's messages read until its "result"; watch and logs -f read until
 * tend or the user ends them.
 *
 * Exit status (SPEC §5): 0 done; 1 the operation failed; 2 usage error;
 * 3 unit not found; 4 permission denied; 5 tend is not running.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control-proto.h"
#include "macro.h"
#include "signal-util.h"
#include "time-util.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_NOT_FOUND 3
#define EXIT_DENIED 4
#define EXIT_NOT_RUNNING 5

typedef struct json_object json;

struct args {
        int cmd;
        char **names;
        size_t n_names;
        const char *socket;
        bool json, no_block, follow, main_only, ephemeral;
        int signal;
        int64_t lines; /* -1: all */
};

/* Which options and how many names each command takes. */
enum { OPT_NO_BLOCK = 1, OPT_JSON = 2, OPT_LOGS = 4, OPT_KILL = 8, OPT_EPHEMERAL = 16 };

static const struct {
        unsigned options;
        size_t min_names, max_names;
} command_rules[_CONTROL_CMD_MAX] = {
        [CONTROL_CMD_STATUS] = { OPT_JSON, 0, SIZE_MAX },
        [CONTROL_CMD_LIST] = { OPT_JSON, 0, 0 },
        [CONTROL_CMD_START] = { OPT_NO_BLOCK | OPT_JSON, 1, SIZE_MAX },
        [CONTROL_CMD_STOP] = { OPT_NO_BLOCK | OPT_JSON, 1, SIZE_MAX },
        [CONTROL_CMD_RESTART] = { OPT_NO_BLOCK | OPT_JSON, 1, SIZE_MAX },
        [CONTROL_CMD_RESET_FAILED] = { 0, 0, SIZE_MAX },
        [CONTROL_CMD_KILL] = { OPT_KILL, 1, 1 },
        [CONTROL_CMD_RELOAD] = { 0, 1, SIZE_MAX },
        [CONTROL_CMD_LOGS] = { OPT_LOGS | OPT_JSON, 1, 1 },
        [CONTROL_CMD_WATCH] = { OPT_EPHEMERAL | OPT_JSON, 0, 1 },
        [CONTROL_CMD_DAEMON_RELOAD] = { OPT_JSON, 0, 0 },
        [CONTROL_CMD_SHUTDOWN] = { 0, 0, 0 },
};

static bool colour;

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

static void help(void) {
        printf("tendctl [OPTIONS] COMMAND [NAME…]\n\n"
               "Control a running tend.\n\n"
               "Commands:\n"
               "  status [NAME…]                 state, pid, since, restarts, last exit, STATUS= text\n"
               "  list                           every unit, one line each\n"
               "  start|stop|restart NAME…       and wait for the outcome (--no-block: do not wait)\n"
               "  reload NAME…                   run ExecReload=\n"
               "  kill NAME [--signal SIG] [--main]\n"
               "                                 signal every process of the unit, or only the main one\n"
               "  reset-failed [NAME…]           failed units become inactive; start limits reset\n"
               "  watch [PREFIX] [--ephemeral]   the store's records, then their changes\n"
               "  logs NAME [-n N] [-f]          recent lines of the unit's output, then follow\n"
               "  daemon-reload                  re-read the unit directory\n"
               "  shutdown                       stop every unit, then exit tend\n\n"
               "Options:\n"
               "      --control-socket PATH  tend's socket (else $TEND_SOCKET, /run/tend/control for root,\n"
               "                             $XDG_RUNTIME_DIR/tend/control)\n"
               "      --json                 machine-readable output (status, list, watch, logs; the\n"
               "                             result of start, stop, restart, daemon-reload)\n"
               "      --no-block             start/stop/restart: do not wait\n"
               "  -s, --signal SIG           kill: the signal (default SIGTERM)\n"
               "      --main                 kill: only the main process\n"
               "  -n, --lines N              logs: the last N lines (default: the whole ring; \"all\")\n"
               "  -f, --follow               logs: then follow new lines\n"
               "      --ephemeral            watch: the ephemeral keyspace (leases) instead of the durable one\n"
               "  -h, --help                 this text\n"
               "      --version              the version\n\n"
               "Exit status: 0 done, 1 failed, 2 usage error, 3 unit not found, 4 permission denied,\n"
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

/* Checks the options given against the command; 0 or a usage error. */
static int check_command(struct args *a, unsigned given) {
        unsigned allowed = command_rules[a->cmd].options;
        const char *cmd = control_command_to_string(a->cmd);
        static const char *const names[] = { "--no-block", "--json", "-n/-f", "--signal/--main", "--ephemeral" };

        for (unsigned i = 0; i < ELEMENTSOF(names); i++)
                if ((given & (1u << i)) && !(allowed & (1u << i)))
                        return usage_error("%s: %s does not apply", cmd, names[i]);
        if (a->n_names < command_rules[a->cmd].min_names)
                return usage_error("%s: %s", cmd, a->cmd == CONTROL_CMD_WATCH ? "too few arguments" : "which unit?");
        if (a->n_names > command_rules[a->cmd].max_names)
                return usage_error("%s: too many arguments", cmd);
        return 0;
}

/* 0 to run, 1 when --help/--version was printed, or a usage error. */
static int parse_args(int argc, char **argv, struct args *a) {
        enum { ARG_SOCKET = 0x100, ARG_JSON, ARG_NO_BLOCK, ARG_MAIN, ARG_EPHEMERAL, ARG_VERSION };
        static const struct option options[] = {
                { "control-socket", required_argument, NULL, ARG_SOCKET },
                { "json", no_argument, NULL, ARG_JSON },
                { "no-block", no_argument, NULL, ARG_NO_BLOCK },
                { "signal", required_argument, NULL, 's' },
                { "main", no_argument, NULL, ARG_MAIN },
                { "lines", required_argument, NULL, 'n' },
                { "follow", no_argument, NULL, 'f' },
                { "ephemeral", no_argument, NULL, ARG_EPHEMERAL },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        unsigned given = 0;
        int c;

        *a = (struct args) { .lines = -1, .signal = SIGTERM };
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":hn:fs:", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 1;
                case ARG_VERSION:
                        printf("tendctl %s\n", TEND_VERSION);
                        return 1;
                case ARG_SOCKET:
                        a->socket = optarg;
                        break;
                case ARG_JSON:
                        a->json = true, given |= OPT_JSON;
                        break;
                case ARG_NO_BLOCK:
                        a->no_block = true, given |= OPT_NO_BLOCK;
                        break;
                case 's':
                        if ((a->signal = signal_from_string(optarg)) < 0)
                                return usage_error("--signal: unknown signal \"%s\"", optarg);
                        given |= OPT_KILL;
                        break;
                case ARG_MAIN:
                        a->main_only = true, given |= OPT_KILL;
                        break;
                case 'n':
                        if (parse_lines(optarg, &a->lines) < 0)
                                return -EINVAL;
                        given |= OPT_LOGS;
                        break;
                case 'f':
                        a->follow = true, given |= OPT_LOGS;
                        break;
                case ARG_EPHEMERAL:
                        a->ephemeral = true, given |= OPT_EPHEMERAL;
                        break;
                case ':':
                        return usage_error("%s needs an argument", argv[optind - 1]);
                default:
                        return usage_error("unknown option \"%s\"", argv[optind - 1]);
                }
        }
        if (optind >= argc)
                return usage_error("no command given");
        if ((a->cmd = control_command_from_string(argv[optind])) < 0)
                return usage_error("unknown command \"%s\"", argv[optind]);
        a->names = argv + optind + 1;
        a->n_names = (size_t) (argc - optind - 1);
        return check_command(a, given);
}

/* ------------------------------------------------------------------------ */
/* The connection                                                            */
/* ------------------------------------------------------------------------ */

/*
 * Is the listener tend? SO_PEERCRED on a connected socket gives the
 * credentials of the process that called listen(): tendctl talks only to a
 * server running as root, as its own user, or as the uid $TEND_SERVER_UID
 * names (the caller's explicit trust in another user's tend), never to one
 * another user put in tend's place (docs/threat-model.md). 0, or the exit
 * status (4) after saying why.
 */
static int check_server_uid(int fd, const char *path) {
        struct ucred cred = { .uid = (uid_t) -1 };
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                fprintf(stderr, "tendctl: %s: cannot tell who listens there: %s\n", path, strerror(errno));
                return EXIT_DENIED;
        }
        const char *trusted = getenv("TEND_SERVER_UID");
        char *end = NULL;
        unsigned long t = trusted && *trusted ? strtoul(trusted, &end, 10) : ULONG_MAX;
        if (cred.uid == 0 || cred.uid == geteuid() || (end && *end == '\0' && t == cred.uid))
                return 0;
        fprintf(stderr, "tendctl: refused: the socket %s is served by uid %u (pid %d), not by root or your own user: "
                        "not talking to it (set TEND_SERVER_UID=%u to trust it)\n", path, (unsigned) cred.uid,
                (int) cred.pid, (unsigned) cred.uid);
        return EXIT_DENIED;
}

/* A connected socket, or the exit status for why not. */
static int connect_tend(const char *opt, int *ret_fd) {
        _cleanup_free_ char *path = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        int r = control_socket_path(opt, &path);
        if (r == -ENOENT) {
                fprintf(stderr, "tendctl: tend is not running (no socket: set --control-socket, $TEND_SOCKET "
                                "or $XDG_RUNTIME_DIR)\n");
                return EXIT_NOT_RUNNING;
        }
        if (r < 0 || strlen(path) >= sizeof sa.sun_path) {
                fprintf(stderr, "tendctl: control socket path: %s\n", strerror(r < 0 ? -r : ENAMETOOLONG));
                return EXIT_FAILED;
        }
        memcpy(sa.sun_path, path, strlen(path));

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int e = errno;
                if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR) {
                        fprintf(stderr, "tendctl: tend is not running (%s: %s)\n", path, strerror(e));
                        return EXIT_NOT_RUNNING;
                }
                fprintf(stderr, "tendctl: cannot connect to tend at %s: %s\n", path, strerror(e));
                return e == EACCES || e == EPERM ? EXIT_DENIED : EXIT_FAILED;
        }
        r = check_server_uid(fd, path);
        if (r != 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static json *build_request(const struct args *a) {
        _cleanup_json_ json *o = json_object_new_object();
        json *units = json_object_new_array();
        if (!o || !units || json_object_object_add(o, "units", units) < 0) {
                json_object_put(units);
                return NULL;
        }
        if (control_add_int64(o, "version", CONTROL_PROTOCOL_VERSION) < 0 ||
            control_add_string(o, "command", control_command_to_string(a->cmd)) < 0)
                return NULL;
        bool takes_units = a->cmd != CONTROL_CMD_WATCH;
        for (size_t i = 0; takes_units && i < a->n_names; i++)
                if (json_object_array_add(units, json_object_new_string(a->names[i])) < 0)
                        return NULL;
        int r = 0;
        switch (a->cmd) {
        case CONTROL_CMD_START: case CONTROL_CMD_STOP: case CONTROL_CMD_RESTART:
                r = control_add_bool(o, "no_block", a->no_block);
                break;
        case CONTROL_CMD_KILL:
                if ((r = control_add_int64(o, "signal", a->signal)) >= 0)
                        r = control_add_bool(o, "main", a->main_only);
                break;
        case CONTROL_CMD_LOGS:
                if ((r = control_add_bool(o, "follow", a->follow)) >= 0 && a->lines >= 0)
                        r = control_add_int64(o, "lines", a->lines);
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

static int send_request(int fd, json *req) {
        const char *text;
        size_t len;
        if (!req || control_message_text(req, &text, &len) < 0)
                return -ENOMEM;
        if (send(fd, text, len, MSG_NOSIGNAL) < 0)
                return negative_errno();
        return 0;
}

/* The next message from tend (blocking). -ECONNRESET when tend closed the
 * connection, -EMSGSIZE, -EBADMSG. */
static int recv_message(int fd, json **ret) {
        static char buf[CONTROL_MESSAGE_MAX + 1];
        ssize_t n;
        do
                n = recv(fd, buf, sizeof buf, MSG_TRUNC);
        while (n < 0 && errno == EINTR);
        /* tend closed a connection holding our unread request (a refusal):
         * the error comes first, its answer may still be queued behind it. */
        if (n < 0 && errno == ECONNRESET)
                n = recv(fd, buf, sizeof buf, MSG_TRUNC | MSG_DONTWAIT);
        if (n < 0 && errno == EAGAIN)
                errno = ECONNRESET;
        if (n < 0)
                return negative_errno();
        if (n == 0)
                return -ECONNRESET;
        if ((size_t) n > sizeof buf)
                return -EMSGSIZE;
        return control_message_parse(buf, (size_t) n, ret);
}

static const char *get_str(json *o, const char *key, const char *def) {
        const char *s;
        return control_get_string(o, key, &s) < 0 ? def : s;
}

static int64_t get_int(json *o, const char *key, int64_t def) {
        int64_t v;
        return control_get_int64(o, key, &v) < 0 ? def : v;
}

static bool get_bool(json *o, const char *key) {
        bool v;
        return control_get_bool(o, key, &v) >= 0 && v;
}

static void print_json(json *o) {
        const char *text;
        size_t len;
        if (control_message_text(o, &text, &len) >= 0)
                printf("%.*s\n", (int) len, text);
}

/* ------------------------------------------------------------------------ */
/* Human output                                                              */
/* ------------------------------------------------------------------------ */

static const char *state_colour(const char *state) {
        if (!colour)
                return "";
        if (streq(state, "running"))
                return "\033[0;1;32m";
        if (streq(state, "failed"))
                return "\033[0;1;31m";
        if (streq(state, "inactive"))
                return "";
        return "\033[0;1;33m"; /* starting, stopping, backoff */
}

static const char *colour_off(void) {
        return colour ? "\033[0m" : "";
}

enum time_style { TIME_STATUS, TIME_LIST, TIME_LOG };

static void format_time(int64_t usec, enum time_style style, char *buf, size_t size) {
        time_t t = (time_t) (usec / (int64_t) USEC_PER_SEC);
        struct tm tm;
        size_t n = 0;
        if (usec > 0 && localtime_r(&t, &tm))
                n = style == TIME_STATUS ? strftime(buf, size, "%a %Y-%m-%d %H:%M:%S %Z", &tm)
                    : style == TIME_LIST ? strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm)
                                         : strftime(buf, size, "%b %d %H:%M:%S", &tm);
        if (n == 0)
                snprintf(buf, size, "-");
}

/* "5min 3s ago", "2h 4min ago", "3 days ago" */
static void format_ago(int64_t usec, char *buf, size_t size) {
        int64_t d = ((int64_t) now_usec(CLOCK_REALTIME) - usec) / (int64_t) USEC_PER_SEC;
        if (d < 0)
                d = 0;
        if (d < 60)
                snprintf(buf, size, "%" PRId64 "s ago", d);
        else if (d < 3600)
                snprintf(buf, size, "%" PRId64 "min %" PRId64 "s ago", d / 60, d % 60);
        else if (d < 86400)
                snprintf(buf, size, "%" PRId64 "h %" PRId64 "min ago", d / 3600, d % 3600 / 60);
        else
                snprintf(buf, size, "%" PRId64 " days ago", d / 86400);
}

static void format_last_exit(json *rec, char *buf, size_t size) {
        json *le;
        char sigbuf[24];
        if (!json_object_object_get_ex(rec, "last_exit", &le) || !json_object_is_type(le, json_type_object))
                snprintf(buf, size, "-");
        else if (get_int(le, "code", -1) >= 0)
                snprintf(buf, size, "exited, status=%" PRId64, get_int(le, "code", 0));
        else
                snprintf(buf, size, "killed, signal=%s%s", signal_to_string((int) get_int(le, "signal", 0), sigbuf),
                         get_bool(le, "core_dumped") ? " (core dumped)" : "");
}

static void print_status(json *rec) {
        const char *state = get_str(rec, "state", "?"), *status = get_str(rec, "status", NULL);
        int64_t since = get_int(rec, "since", 0), pid = get_int(rec, "main_pid", 0);
        char when[64], ago[64], last[96];

        format_time(since, TIME_STATUS, when, sizeof when);
        format_ago(since, ago, sizeof ago);
        format_last_exit(rec, last, sizeof last);
        printf("%s●%s %s\n", state_colour(state), colour_off(), get_str(rec, "name", "?"));
        printf("     State: %s%s%s since %s; %s\n", state_colour(state), state, colour_off(), when, ago);
        if (pid > 0)
                printf("  Main PID: %" PRId64 "\n", pid);
        else
                printf("  Main PID: -\n");
        printf("  Restarts: %" PRId64 "\n", get_int(rec, "restarts", 0));
        printf(" Last exit: %s\n", last);
        printf("    Result: %s\n", get_str(rec, "result", "?"));
        if (status)
                printf("    Status: \"%s\"\n", status);
        const char *condition = get_str(rec, "condition", NULL); /* cond: a skipped or asserted start */
        if (condition)
                printf(" Condition: %s\n", condition);
        printf("   Waiters: %" PRId64 "\n", get_int(rec, "waiters", 0));
        /* tend(8) "RELOADING DIR": what a daemon-reload did not apply. */
        const char *file_error = get_str(rec, "file_error", NULL), *name = get_str(rec, "name", "?");
        if (file_error)
                printf("   Warning: its unit file no longer loads (%s); it is left as it is, on the last file that "
                       "loaded\n", file_error);
        if (get_bool(rec, "file_changed"))
                printf("   Warning: the unit file changed since the unit started; `tendctl restart %s` applies it\n",
                       name);
}

static void print_list(json *records) {
        size_t n = json_object_array_length(records);
        printf("%-32s %-9s %8s %8s %-12s %s\n", "UNIT", "STATE", "MAIN PID", "RESTARTS", "RESULT", "SINCE");
        for (size_t i = 0; i < n; i++) {
                json *rec = json_object_array_get_idx(records, i);
                const char *state = get_str(rec, "state", "?");
                char when[64], pid[24];
                int64_t p = get_int(rec, "main_pid", 0);
                format_time(get_int(rec, "since", 0), TIME_LIST, when, sizeof when);
                if (p > 0)
                        snprintf(pid, sizeof pid, "%" PRId64, p);
                else
                        snprintf(pid, sizeof pid, "-");
                printf("%-32s %s%-9s%s %8s %8" PRId64 " %-12s %s\n", get_str(rec, "name", "?"), state_colour(state),
                       state, colour_off(), pid, get_int(rec, "restarts", 0), get_str(rec, "result", "?"), when);
        }
        printf("\n%zu unit%s listed.\n", n, n == 1 ? "" : "s");
}

/* ------------------------------------------------------------------------ */
/* Answers                                                                   */
/* ------------------------------------------------------------------------ */

/* The exit status of a result; its failures are printed on stderr. */
static int result_status(json *res) {
        if (get_bool(res, "ok"))
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
        return control_error_exit_status(control_error_from_string(get_str(res, "error", NULL)));
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
                return result_status(res);
        if (x->a->json)
                print_json(x->records);
        else if (x->a->cmd == CONTROL_CMD_LIST)
                print_list(x->records);
        else
                for (size_t i = 0; i < n; i++) {
                        if (i > 0)
                                putchar('\n');
                        print_status(json_object_array_get_idx(x->records, i));
                }
        fflush(stdout);
        return result_status(res);
}

static void on_line(struct session *x, json *m) {
        if (x->a->json) {
                json_object_object_del(m, "version");
                json_object_object_del(m, "type");
                print_json(m);
                return;
        }
        char when[32], pid[24] = "";
        int64_t p = get_int(m, "pid", 0);
        json *text;
        format_time(get_int(m, "time", 0), TIME_LOG, when, sizeof when);
        if (p > 0)
                snprintf(pid, sizeof pid, "[%" PRId64 "]", p);
        printf("%s %s%s: ", when, get_str(m, "unit", "?"), pid);
        if (json_object_object_get_ex(m, "text", &text))
                fwrite(json_object_get_string(text), 1, (size_t) json_object_get_string_len(text), stdout);
        if (get_bool(m, "continues"))
                fputs(" [line continues]", stdout);
        putchar('\n');
        fflush(stdout);
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

static int recv_error(int r) {
        if (r == -ECONNRESET || r == -EPIPE)
                fprintf(stderr, "tendctl: tend closed the connection\n");
        else
                fprintf(stderr, "tendctl: reading tend's answer: %s\n", strerror(-r));
        return EXIT_FAILED;
}

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
                        on_line(x, m);
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
                        return result_status(m);
                }
                /* Unknown types come from a newer tend: ignored. */
        }
}

int main(int argc, char **argv) {
        struct args a;
        _cleanup_close_ int fd = -1;

        int r = parse_args(argc, argv, &a);
        if (r != 0)
                return r > 0 ? 0 : EXIT_USAGE;
        const char *term = getenv("TERM");
        colour = isatty(STDOUT_FILENO) && !getenv("NO_COLOR") && !(term && streq(term, "dumb"));

        r = connect_tend(a.socket, &fd);
        if (r != 0)
                return r;
        _cleanup_json_ json *req = build_request(&a);
        r = send_request(fd, req);
        /* A refused client's answer is already queued when tend closes: read it. */
        if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
                fprintf(stderr, "tendctl: sending to tend: %s\n", strerror(-r));
                return EXIT_FAILED;
        }
        struct session x = { .a = &a, .fd = fd, .records = json_object_new_array(), .seen = json_object_new_object() };
        if (!x.records || !x.seen)
                return recv_error(-ENOMEM);
        r = session_run(&x);
        json_object_put(x.records);
        json_object_put(x.seen);
        json_object_put(x.snapshot);
        json_object_put(x.parts);
        return r;
}
