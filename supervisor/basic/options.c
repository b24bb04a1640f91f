/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "options.h"
#include "signal-util.h"
#include "timespan.h"

enum {
        OPT_VERSION = 0x100,
        OPT_REMAP,
        OPT_STOP_TIMEOUT,
        OPT_SHUTDOWN_TIMEOUT,
        OPT_CONFIG_DIR,
        OPT_LOG_LEVEL,
        OPT_CONTROL_SOCKET,
        OPT_CONTROL_GROUP,
        OPT_VERIFY,
};

static void help(void) {
        printf("Usage: tend [OPTIONS] -- CMD [ARG...]\n"
               "       tend [OPTIONS] --config-dir DIR [-- CMD [ARG...]]\n"
               "       tend [OPTIONS] --verify PATH...\n"
               "Run CMD as a container entrypoint: forward signals to it, reap every orphan,\n"
               "exit with its status. With --config-dir, supervise the units in DIR (and run\n"
               "CMD once they have started).\n\n"
               "      --config-dir DIR     supervise the units (NAME.service files) in DIR\n"
               "      --control-socket PATH  tendctl's socket (default $TEND_SOCKET, /run/tend/control\n"
               "                           as root, else $XDG_RUNTIME_DIR/tend/control)\n"
               "      --control-group GROUP  members of GROUP may use tendctl too\n"
               "      --shutdown-timeout SPAN  the whole shutdown's deadline (default 9s as PID 1,\n"
               "                           else 90s)\n"
               "      --verify PATH...     check unit files (or the units of directories) as tend\n"
               "                           would load them; start nothing; exit 1 on an error\n"
               "  -g, --process-group      forward signals to CMD's process group\n"
               "      --remap FROM:TO      deliver signal TO when tend receives FROM (repeatable)\n"
               "      --stop-timeout SPAN  after CMD exits, SIGTERM its leftovers, SIGKILL after SPAN\n"
               "                           (default 5s)\n"
               "  -v, --verbose            more diagnostics on stderr (repeat for debug)\n"
               "      --log-level LEVEL    error, warning, notice, info or debug (default\n"
               "                           warning with --config-dir, else error)\n"
               "  -h, --help               show this help\n"
               "      --version            show the version\n\n"
               "See tend(8).\n");
}

static int usage_error(const char *fmt, ...) _printf_(1, 2);
static int usage_error(const char *fmt, ...) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fprintf(stderr, "tend: %s (see tend --help)\n", msg);
        return -EINVAL;
}

static int parse_remap(struct tend_options *o, const char *arg) {
        char from[32], to[32];
        const char *colon = strchr(arg, ':');
        if (!colon || (size_t) (colon - arg) >= sizeof from || strlen(colon + 1) >= sizeof to)
                return usage_error("--remap wants FROM:TO, not \"%s\"", arg);
        memcpy(from, arg, (size_t) (colon - arg));
        from[colon - arg] = '\0';
        strcpy(to, colon + 1);
        int f = signal_from_string(from), t = signal_from_string(to);
        if (f < 0 || t < 0)
                return usage_error("--remap: unknown signal in \"%s\"", arg);
        o->remap[f] = t;
        return 0;
}

static int parse_log_level(const char *arg) {
        static const struct { const char *name; int level; } levels[] = {
                { "error", LOG_ERR }, { "err", LOG_ERR }, { "warning", LOG_WARNING }, { "warn", LOG_WARNING },
                { "notice", LOG_NOTICE }, { "info", LOG_INFO }, { "debug", LOG_DEBUG },
        };
        for (size_t i = 0; i < ELEMENTSOF(levels); i++)
                if (strcasecmp(arg, levels[i].name) == 0)
                        return levels[i].level;
        return -EINVAL;
}

static int parse_span(const char *opt, const char *arg, usec_t *ret) {
        if (parse_timespan(arg, USEC_PER_SEC, ret) < 0)
                return usage_error("%s: invalid time span \"%s\"", opt, arg);
        return 0;
}

int options_parse(int argc, char **argv, struct tend_options *o) {
        static const struct option longopts[] = {
                { "process-group", no_argument, NULL, 'g' },
                { "remap", required_argument, NULL, OPT_REMAP },
                { "stop-timeout", required_argument, NULL, OPT_STOP_TIMEOUT },
                { "shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN_TIMEOUT },
                { "config-dir", required_argument, NULL, OPT_CONFIG_DIR },
                { "verbose", no_argument, NULL, 'v' },
                { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
                { "control-socket", required_argument, NULL, OPT_CONTROL_SOCKET },
                { "control-group", required_argument, NULL, OPT_CONTROL_GROUP },
                { "verify", no_argument, NULL, OPT_VERIFY },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, OPT_VERSION },
                {}
        };
        *o = (struct tend_options) {
                .stop_timeout = TEND_DEFAULT_STOP_TIMEOUT,
                .shutdown_timeout = getpid() == 1 ? 9 * USEC_PER_SEC : 90 * USEC_PER_SEC,
                .log_level = LOG_ERR,
                .control_group = (gid_t) -1,
        };
        opterr = 0;
        optind = 1;
        int c, k;
        bool level_given = false, verify = false;
        /* "+": stop at the first non-option, so CMD's own options are never ours. */
        while ((c = getopt_long(argc, argv, "+:gvh", longopts, NULL)) >= 0) {
                switch (c) {
                case 'g':
                        o->process_group = true;
                        break;
                case 'v':
                        level_given = true;
                        o->log_level = o->log_level < LOG_INFO ? LOG_INFO : LOG_DEBUG;
                        break;
                case OPT_LOG_LEVEL:
                        if ((k = parse_log_level(optarg)) < 0)
                                return usage_error("unknown log level \"%s\"", optarg);
                        o->log_level = k;
                        level_given = true;
                        break;
                case OPT_REMAP:
                        if ((k = parse_remap(o, optarg)) < 0)
                                return k;
                        break;
                case OPT_STOP_TIMEOUT:
                        if ((k = parse_span("--stop-timeout", optarg, &o->stop_timeout)) < 0)
                                return k;
                        break;
                case OPT_SHUTDOWN_TIMEOUT:
                        if ((k = parse_span("--shutdown-timeout", optarg, &o->shutdown_timeout)) < 0)
                                return k;
                        break;
                case OPT_CONFIG_DIR:
                        o->config_dir = optarg;
                        break;
                case OPT_CONTROL_SOCKET:
                        o->control_socket = optarg;
                        break;
                case OPT_CONTROL_GROUP: {
                        struct group *g = getgrnam(optarg);
                        char *end;
                        unsigned long gid = strtoul(optarg, &end, 10);
                        if (g)
                                o->control_group = g->gr_gid;
                        else if (*optarg && !*end)
                                o->control_group = (gid_t) gid;
                        else
                                return usage_error("--control-group: no group \"%s\"", optarg);
                        break;
                }
                case OPT_VERIFY:
                        verify = true;
                        break;
                case 'h':
                        help();
                        return 1;
                case OPT_VERSION:
                        printf("tend %s\n", TEND_VERSION);
                        return 1;
                case '?':
                        if (optopt > 0 && optopt < 0x100)
                                return usage_error("unknown option -%c", optopt);
                        return usage_error("unknown option \"%s\"", argv[optind - 1]);
                default:
                        return usage_error("option \"%s\" needs an argument", argv[optind - 1]);
                }
        }
        if (verify) { /* tend --verify PATH…: the rest are paths, not a command */
                if (optind < argc && streq(argv[optind], "--"))
                        optind++;
                if (optind >= argc)
                        return usage_error("--verify needs at least one unit file or directory");
                if (o->config_dir)
                        return usage_error("--verify and --config-dir do not go together");
                o->verify = argv + optind;
                if (!level_given)
                        o->log_level = LOG_NOTICE;
                return 0;
        }
        if (optind < argc)
                o->cmd = argv + optind;
        /* A supervisor of units says what it ignored in their files (unknown
         * keys, odd escapes: FILE:LINE warnings); an entrypoint stays as
         * quiet as the program it runs. */
        if (!level_given && o->config_dir)
                o->log_level = LOG_WARNING;
        if (!o->cmd && !o->config_dir)
                return usage_error("no command given: tend [OPTIONS] -- CMD [ARG...] or tend --config-dir DIR");
        return 0;
}
