/* SPDX-License-Identifier: MIT */
/* tend's command line (docs/tend.8.md). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "time-util.h"

struct tend_options {
        char **cmd;               /* CMD ARG… after "--" (borrowed from argv), or NULL */
        const char *config_dir;   /* --config-dir, or NULL */
        bool process_group;       /* -g: forward signals to CMD's process group */
        int remap[_NSIG];         /* --remap FROM:TO; 0 = unchanged */
        usec_t stop_timeout;      /* --stop-timeout: SIGTERM → SIGKILL for leftovers (µs) */
        usec_t shutdown_timeout;  /* --shutdown-timeout (µs) */
        int log_level;            /* syslog level: -v raises it, --log-level sets it */
        const char *control_socket; /* --control-socket PATH, or NULL (SPEC §5 rules) */
        gid_t control_group;      /* --control-group NAME|GID, or (gid_t) -1 */
        char **verify;            /* --verify PATH…: the paths (borrowed from argv), or NULL */
};

#define TEND_DEFAULT_STOP_TIMEOUT (5 * USEC_PER_SEC)

/*
 * Parses argv. Returns 0 to run, 1 when --help or --version was printed (exit
 * 0), or -EINVAL after printing a one-line message to stderr (exit 2, SPEC §6).
 */
int options_parse(int argc, char **argv, struct tend_options *ret);

/* The signal to deliver for sig after --remap. */
static inline int options_remap(const struct tend_options *o, int sig) {
        return sig > 0 && sig < _NSIG && o->remap[sig] ? o->remap[sig] : sig;
}
