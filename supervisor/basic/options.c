/* SPDX-License-Identifier: MIT */
#include <ctype.h>
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
        OPT_ACCEPT_WEAKER, /* security: --accept-weaker-isolation */
        /* etcd: the cluster options (parse_cluster) */
        OPT_STORE, OPT_STORE_CA, OPT_STORE_CERT, OPT_STORE_KEY, OPT_STORE_USER,
        OPT_STORE_PASSWORD_FILE, OPT_HOST_ID, OPT_HOST_METADATA, OPT_CLUSTER_TTL,
};

/* tend-static (meson target, TEND_ENTRYPOINT_ONLY): entrypoint mode alone,
 * linked statically; the service options are refused, naming tend. */
#ifdef TEND_ENTRYPOINT_ONLY
#define ONLY_IN_TEND(opt) return usage_error("%s: this is tend-static, the entrypoint-only build; use tend", opt)
#else
#define ONLY_IN_TEND(opt) do {} while (0)
#endif

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
               "      --accept-weaker-isolation[=KEY,...]  run units whose hardening keys (these,\n"
               "                           or all) tend cannot apply, without them (tend(8))\n"
               "      --verify PATH...     check unit files (or the units of directories) as tend\n"
               "                           would load them; start nothing; exit 1 on an error\n"
               "  -g, --process-group      forward signals to CMD's process group\n"
               "      --remap FROM:TO      deliver signal TO when tend receives FROM (repeatable)\n"
               "      --stop-timeout SPAN  after CMD exits, SIGTERM its leftovers, SIGKILL after SPAN\n"
               "                           (default 5s)\n"
               "  -v, --verbose            more diagnostics on stderr (repeat for debug)\n"
               "      --store etcd://HOST:PORT[,HOST:PORT...]/PREFIX  share the cluster keys (hosts,\n"
               "                           singleton units, published records) in etcd (docs/cluster.md)\n"
               "      --store-ca, --store-cert, --store-key FILE  TLS to etcd (PEM)\n"
               "      --store-user USER, --store-password-file FILE  etcd authentication\n"
               "      --host-id ID         this host in the cluster (default /etc/machine-id)\n"
               "      --host-metadata K=V[,K=V...]  published with the host\n"
               "      --cluster-ttl SPAN   the host's and singletons' etcd lease (default 10s)\n"
               "  tini and dumb-init's options (entrypoint mode; tend(8), COMING FROM TINI):\n"
               "  -c, --single-child       signal CMD alone (tend's default; dumb-init's -c)\n"
               "  -r, --rewrite FROM:TO    as --remap; TO 0 drops the signal (dumb-init)\n"
               "  -e CODE                  exit 0 when CMD's status is CODE (repeatable; tini)\n"
               "  -p SIGNAL                receive SIGNAL (forwarded to CMD) when tend's parent dies\n"
               "  -s                       be a child subreaper (tend always is unless PID 1; tini)\n"
               "  -w                       a warning for each orphan reaped (tini)\n"
               "  -l                       show the license\n"
               "  -V                       show the version (dumb-init)\n"
               "      --log-level LEVEL    error, warning, notice, info or debug (default\n"
               "                           warning with --config-dir, else error)\n"
               "  -h, --help               show this help\n"
               "      --version            show the version\n\n"
               "See tend(8).\n");
#ifdef TEND_ENTRYPOINT_ONLY
        printf("\nThis is tend-static, entrypoint mode alone: --config-dir, --verify and the control\n"
               "options are tend's.\n");
#endif
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

/* --remap FROM:TO or dumb-init's -r/--rewrite FROM:TO; TO "0" drops FROM. */
static int parse_remap(struct tend_options *o, const char *opt, const char *arg) {
        char from[32], to[32];
        const char *colon = strchr(arg, ':');
        if (!colon || (size_t) (colon - arg) >= sizeof from || strlen(colon + 1) >= sizeof to)
                return usage_error("%s wants FROM:TO, not \"%s\"", opt, arg);
        memcpy(from, arg, (size_t) (colon - arg));
        from[colon - arg] = '\0';
        strcpy(to, colon + 1);
        int f = signal_from_string(from), t = streq(to, "0") ? -1 : signal_from_string(to);
        if (f < 0 || (t < 0 && !streq(to, "0")))
                return usage_error("%s: unknown signal in \"%s\"", opt, arg);
        o->remap[f] = t;
        return 0;
}

/* tini's -e CODE: 0..255, repeatable. */
static int parse_exit_zero(struct tend_options *o, const char *arg) {
        char *end;
        errno = 0;
        long code = strtol(arg, &end, 10);
        if (errno || end == arg || *end || code < 0 || code > 255)
                return usage_error("-e wants an exit code from 0 to 255, not \"%s\"", arg);
        o->exit_zero[code / 32] |= UINT32_C(1) << (code % 32);
        return 0;
}

/* tini's -p SIGNAL ("SIGKILL", "KILL", "9"). */
static int parse_parent_death(struct tend_options *o, const char *arg) {
        int sig = signal_from_string(arg);
        if (sig < 0)
                return usage_error("-p: unknown signal \"%s\"", arg);
        o->parent_death_signal = sig;
        return 0;
}

static int parse_group(struct tend_options *o, const char *arg) {
#ifdef TEND_ENTRYPOINT_ONLY
        return usage_error("--control-group: this is tend-static, the entrypoint-only build; use tend");
#else
        struct group *g = getgrnam(arg);
        char *end;
        unsigned long gid = strtoul(arg, &end, 10);
        if (g)
                o->control_group = g->gr_gid;
        else if (*arg && !*end)
                o->control_group = (gid_t) gid;
        else
                return usage_error("--control-group: no group \"%s\"", arg);
        return 0;
#endif
}

static void license(void) {
        printf("tend %s is free software under the MIT license (SPDX-License-Identifier: MIT):\n"
               "permission is granted to use, copy, modify and distribute it, with the copyright\n"
               "notice; it comes WITHOUT ANY WARRANTY. The full text is the LICENSE file of its source.\n",
               TEND_VERSION);
}

/* tini's and dumb-init's environment variables, read before the options
 * (which win over them). Returns 0 or -EINVAL after a message. */
static int parse_peer_env(struct tend_options *o, bool *level_given) {
        /* TINI_SUBREAPER: tend is a child subreaper whenever it is not PID 1. */
        if (getenv("TINI_KILL_PROCESS_GROUP"))
                o->process_group = true;
        const char *v = getenv("TINI_VERBOSITY");
        if (v) {
                static const int levels[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
                char *end;
                long n = strtol(v, &end, 10);
                if (end == v || *end || n < 0)
                        return usage_error("TINI_VERBOSITY wants a number, 0 or more (3 or more: debug), not \"%s\"",
                                           v);
                o->log_level = levels[n > 3 ? 3 : n];
                *level_given = true;
        }
        v = getenv("DUMB_INIT_SETSID");
        if (v && streq(v, "0"))
                o->same_group = true;
        return 0;
}

/* What the options say together; called once they are all read. */
static int check_entrypoint_options(const struct tend_options *o) {
        bool peers = o->single_child || o->same_group || o->warn_on_reap || o->parent_death_signal;
        for (size_t i = 0; i < ELEMENTSOF(o->exit_zero); i++)
                peers = peers || o->exit_zero[i];
        if (peers && o->config_dir)
                return usage_error("-c, -e, -p, -w and DUMB_INIT_SETSID=0 are entrypoint-mode options: "
                                   "not with --config-dir");
        if (o->process_group && o->single_child)
                return usage_error("-g (or TINI_KILL_PROCESS_GROUP) and -c contradict each other");
        if (o->process_group && o->same_group)
                return usage_error("-g and DUMB_INIT_SETSID=0 do not go together: CMD is in tend's own "
                                   "process group (dumb-init implies -c then)");
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

bool options_host_id_valid(const char *id) {
        size_t n = id ? strlen(id) : 0;
        return n >= 1 && n <= TEND_HOST_ID_MAX &&
               strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-") == n;
}

/* --host-id: refused unless options_host_id_valid(); the id shown with each
 * byte outside the set as '?' (the message stays one line). */
static int parse_host_id(const char *arg) {
        if (options_host_id_valid(arg))
                return 0;
        char shown[TEND_HOST_ID_MAX + 4];
        size_t n = 0;
        for (const char *p = arg; *p && n < TEND_HOST_ID_MAX; p++)
                shown[n++] = options_host_id_valid((char[]) { *p, 0 }) ? *p : '?';
        strcpy(shown + n, strlen(arg) > n ? "..." : "");
        return usage_error("--host-id \"%s\": want 1-%d characters of A-Z a-z 0-9 . _ : @ -", shown,
                           TEND_HOST_ID_MAX);
}

/* etcd: --store and its companions (tend(8) CLUSTER); 0 or -EINVAL. */
static int parse_cluster(struct tend_options *o, int c, const char *arg) {
        struct tend_cluster_options *t = &o->cluster;
        const char **slot[] = {
                [OPT_STORE - OPT_STORE] = &t->store, [OPT_STORE_CA - OPT_STORE] = &t->ca,
                [OPT_STORE_CERT - OPT_STORE] = &t->cert, [OPT_STORE_KEY - OPT_STORE] = &t->key,
                [OPT_STORE_USER - OPT_STORE] = &t->user, [OPT_STORE_PASSWORD_FILE - OPT_STORE] = &t->password_file,
                [OPT_HOST_ID - OPT_STORE] = &t->host_id, [OPT_HOST_METADATA - OPT_STORE] = &t->metadata,
        };
        ONLY_IN_TEND("--store");
        if (c == OPT_CLUSTER_TTL) {
                if (parse_span("--cluster-ttl", arg, &t->ttl) < 0)
                        return -EINVAL;
                if (t->ttl < 2 * USEC_PER_SEC || t->ttl > 3600 * USEC_PER_SEC)
                        return usage_error("--cluster-ttl: %s is outside 2s..1h (etcd's leases are whole "
                                           "seconds, at least 2)", arg);
                return 0;
        }
        if (c == OPT_STORE && strncmp(arg, "etcd://", 7) != 0)
                return usage_error("--store wants etcd://HOST:PORT[,HOST:PORT...]/PREFIX, not \"%s\"", arg);
        if (c == OPT_HOST_ID && parse_host_id(arg) < 0)
                return -EINVAL;
        *slot[c - OPT_STORE] = arg;
        return 0;
}

/* The parse in progress: what the command line said, beside the options. */
struct parse_state {
        bool level_given, verify, g_flag, c_flag;
};

/* security: --accept-weaker-isolation[=KEY,…]: keys (with or without '=') or every one. */
static int parse_accept_weaker(struct tend_options *o, const char *arg) {
        if (!arg || !*arg) {
                o->accept_weaker_isolation = "yes";
                return 0;
        }
        for (const char *p = arg; *p;) {
                size_t n = strcspn(p, ","), k = strcspn(p, "=,");
                if (k == 0 || (k != n && k + 1 != n))
                        return usage_error("--accept-weaker-isolation: \"%.*s\" is not a key", (int) n, p);
                for (size_t i = 0; i < k; i++)
                        if (!isalnum((unsigned char) p[i]) && p[i] != '_' && p[i] != '-')
                                return usage_error("--accept-weaker-isolation: \"%.*s\" is not a key", (int) n, p);
                p += n + (p[n] == ',');
        }
        o->accept_weaker_isolation = arg;
        return 0;
}

/* One option of getopt_long's; 0 to go on, 1 after --help/--version/-l, or -EINVAL. */
static int parse_one(struct tend_options *o, struct parse_state *st, int c, char **argv) {
        int k;
        if (c >= OPT_STORE && c <= OPT_CLUSTER_TTL)
                return parse_cluster(o, c, optarg);
        switch (c) {
        case 'g':
                o->process_group = st->g_flag = true;
                return 0;
        case 'c':
                o->single_child = st->c_flag = true;
                return 0;
        case 'v':
                st->level_given = true;
                o->log_level = o->log_level < LOG_INFO ? LOG_INFO : LOG_DEBUG;
                return 0;
        case 's': /* tini's -s: tend is a child subreaper whenever it is not PID 1 */
                return 0;
        case 'w':
                o->warn_on_reap = true;
                return 0;
        case 'e':
                return parse_exit_zero(o, optarg);
        case 'p':
                return parse_parent_death(o, optarg);
        case 'r':
                return parse_remap(o, "-r/--rewrite", optarg);
        case OPT_REMAP:
                return parse_remap(o, "--remap", optarg);
        case OPT_LOG_LEVEL:
                if ((k = parse_log_level(optarg)) < 0)
                        return usage_error("unknown log level \"%s\"", optarg);
                o->log_level = k;
                st->level_given = true;
                return 0;
        case OPT_STOP_TIMEOUT:
                return parse_span("--stop-timeout", optarg, &o->stop_timeout);
        case OPT_SHUTDOWN_TIMEOUT:
                ONLY_IN_TEND("--shutdown-timeout");
                return parse_span("--shutdown-timeout", optarg, &o->shutdown_timeout);
        case OPT_CONFIG_DIR:
                ONLY_IN_TEND("--config-dir");
                o->config_dir = optarg;
                return 0;
        case OPT_CONTROL_SOCKET:
                ONLY_IN_TEND("--control-socket");
                o->control_socket = optarg;
                return 0;
        case OPT_CONTROL_GROUP:
                return parse_group(o, optarg);
        case OPT_ACCEPT_WEAKER:
                ONLY_IN_TEND("--accept-weaker-isolation");
                return parse_accept_weaker(o, optarg);
        case OPT_VERIFY:
                ONLY_IN_TEND("--verify");
                st->verify = true;
                return 0;
        case 'h':
                help();
                return 1;
        case 'l':
                license();
                return 1;
        case 'V':
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

static int finish_verify(int argc, char **argv, struct tend_options *o, const struct parse_state *st) {
        if (optind < argc && streq(argv[optind], "--"))
                optind++;
        if (optind >= argc)
                return usage_error("--verify needs at least one unit file or directory");
        if (o->config_dir)
                return usage_error("--verify and --config-dir do not go together");
        o->verify = argv + optind;
        if (!st->level_given)
                o->log_level = LOG_NOTICE;
        return 0;
}

int options_parse(int argc, char **argv, struct tend_options *o) {
        static const struct option longopts[] = {
                { "process-group", no_argument, NULL, 'g' },
                { "single-child", no_argument, NULL, 'c' },
                { "rewrite", required_argument, NULL, 'r' },
                { "remap", required_argument, NULL, OPT_REMAP },
                { "stop-timeout", required_argument, NULL, OPT_STOP_TIMEOUT },
                { "shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN_TIMEOUT },
                { "config-dir", required_argument, NULL, OPT_CONFIG_DIR },
                { "verbose", no_argument, NULL, 'v' },
                { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
                { "control-socket", required_argument, NULL, OPT_CONTROL_SOCKET },
                { "control-group", required_argument, NULL, OPT_CONTROL_GROUP },
                { "accept-weaker-isolation", optional_argument, NULL, OPT_ACCEPT_WEAKER },
                { "verify", no_argument, NULL, OPT_VERIFY },
                { "store", required_argument, NULL, OPT_STORE },
                { "store-ca", required_argument, NULL, OPT_STORE_CA },
                { "store-cert", required_argument, NULL, OPT_STORE_CERT },
                { "store-key", required_argument, NULL, OPT_STORE_KEY },
                { "store-user", required_argument, NULL, OPT_STORE_USER },
                { "store-password-file", required_argument, NULL, OPT_STORE_PASSWORD_FILE },
                { "host-id", required_argument, NULL, OPT_HOST_ID },
                { "host-metadata", required_argument, NULL, OPT_HOST_METADATA },
                { "cluster-ttl", required_argument, NULL, OPT_CLUSTER_TTL },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, OPT_VERSION },
                {}
        };
        *o = (struct tend_options) {
                .stop_timeout = TEND_DEFAULT_STOP_TIMEOUT,
                .shutdown_timeout = getpid() == 1 ? 9 * USEC_PER_SEC : 90 * USEC_PER_SEC,
                .log_level = LOG_ERR,
                .control_group = (gid_t) -1,
                .cluster.ttl = TEND_DEFAULT_CLUSTER_TTL,
        };
        struct parse_state st = {};
        int c, k = parse_peer_env(o, &st.level_given);
        if (k < 0)
                return k;
        opterr = 0;
        optind = 1;
        /* "+": stop at the first non-option, so CMD's own options are never ours. */
        while ((c = getopt_long(argc, argv, "+:gcvhswlVe:p:r:", longopts, NULL)) >= 0)
                if ((k = parse_one(o, &st, c, argv)) != 0)
                        return k;
        if (st.c_flag && !st.g_flag)
                o->process_group = false; /* -c wins over TINI_KILL_PROCESS_GROUP */
        if (o->warn_on_reap && o->log_level < LOG_WARNING)
                o->log_level = LOG_WARNING; /* -w's warnings are shown, as tini's are */
        if (st.verify) /* tend --verify PATH…: the rest are paths, not a command */
                return finish_verify(argc, argv, o, &st);
        if (optind < argc)
                o->cmd = argv + optind;
        /* A supervisor of units says what it ignored in their files (unknown
         * keys, odd escapes: FILE:LINE warnings); an entrypoint stays as
         * quiet as the program it runs. */
        if (!st.level_given && o->config_dir)
                o->log_level = LOG_WARNING;
        if (o->cluster.store && !o->config_dir)
                return usage_error("--store needs --config-dir (the cluster runs units)");
        if (!o->cmd && !o->config_dir)
                return usage_error("no command given: tend [OPTIONS] -- CMD [ARG...] or tend --config-dir DIR");
        return check_entrypoint_options(o);
}
