/* SPDX-License-Identifier: MIT */
/* tend's command line (docs/tend.8.md). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "time-util.h"

struct tend_options {
        char **cmd;               /* CMD ARG… after "--" (borrowed from argv), or NULL */
        const char *config_dir;   /* --config-dir, or NULL */
        bool process_group;       /* -g: forward signals to CMD's process group */
        int remap[_NSIG];         /* --remap FROM:TO; 0 = unchanged, -1 = dropped (TO "0") */
        usec_t stop_timeout;      /* --stop-timeout: SIGTERM → SIGKILL for leftovers (µs) */
        usec_t shutdown_timeout;  /* --shutdown-timeout (µs) */
        int log_level;            /* syslog level: -v raises it, --log-level sets it */
        const char *control_socket; /* --control-socket PATH, or NULL (SPEC §5 rules) */
        gid_t control_group;      /* --control-group NAME|GID, or (gid_t) -1 */
        char **verify;            /* --verify PATH…: the paths (borrowed from argv), or NULL */
        const char *accept_weaker_isolation; /* security: --accept-weaker-isolation: "yes" (every key),
                                              * "KEY,…" (borrowed from argv), NULL: none (tend(8)) */
        /* tini and dumb-init's options (entrypoint mode only; docs/tend.8.md, COMING FROM
         * TINI OR DUMB-INIT) */
        bool single_child;        /* -c (dumb-init): signals to CMD alone, the default */
        bool same_group;          /* DUMB_INIT_SETSID=0: CMD stays in tend's process group */
        bool warn_on_reap;        /* -w (tini): a warning for each orphan reaped */
        int parent_death_signal;  /* -p SIG (tini): PR_SET_PDEATHSIG for tend; 0 = none */
        uint32_t exit_zero[8];    /* -e CODE (tini): CMD's status CODE (0..255) becomes 0 */
        /* etcd: the cluster store (issue 20; docs/cluster.md, tend(8) CLUSTER). Strings
         * borrowed from argv; all NULL without --store. */
        struct tend_cluster_options {
                const char *store;         /* --store etcd://HOST:PORT[,HOST:PORT…]/PREFIX */
                const char *ca, *cert, *key; /* --store-ca, --store-cert, --store-key (PEM files) */
                const char *user;          /* --store-user */
                const char *password_file; /* --store-password-file */
                const char *host_id;       /* --host-id; NULL: /etc/machine-id */
                const char *metadata;      /* --host-metadata K=V[,K=V…] */
                usec_t ttl;                /* --cluster-ttl: the host's and singletons' lease (µs) */
        } cluster;
};

#define TEND_DEFAULT_CLUSTER_TTL (10 * USEC_PER_SEC)

#define TEND_DEFAULT_STOP_TIMEOUT (5 * USEC_PER_SEC)

/*
 * Parses argv. Returns 0 to run, 1 when --help or --version was printed (exit
 * 0), or -EINVAL after printing a one-line message to stderr (exit 2, SPEC §6).
 */
int options_parse(int argc, char **argv, struct tend_options *ret);

/* Whether id can be a host id (--host-id, or the machine id by default;
 * tend(8) CLUSTER): 1 to TEND_HOST_ID_MAX characters of [A-Za-z0-9._:@-],
 * what fits one etcd key segment and one log line (a machine id and a
 * hostname do). id borrowed, NULL false. Thread-safe. */
#define TEND_HOST_ID_MAX 64
bool options_host_id_valid(const char *id);

/* The signal to deliver for sig after --remap; 0 when it is dropped
 * (--remap SIG:0, dumb-init's -r SIG:0). */
static inline int options_remap(const struct tend_options *o, int sig) {
        if (sig <= 0 || sig >= _NSIG || o->remap[sig] == 0)
                return sig;
        return o->remap[sig] < 0 ? 0 : o->remap[sig];
}

/* tend's exit status for CMD's status after -e: 0 for a status -e names. */
static inline int options_exit_status(const struct tend_options *o, int status) {
        if (status >= 0 && status < 256 && (o->exit_zero[status / 32] & (UINT32_C(1) << (status % 32))))
                return 0;
        return status;
}
