/* SPDX-License-Identifier: MIT */
/*
 * A unit's directories (issue 16; systemd.exec(5) "RuntimeDirectory="):
 * RuntimeDirectory=, StateDirectory=, CacheDirectory=, LogsDirectory=,
 * ConfigurationDirectory=, made by tend (the manager, before each start's
 * first spawn: a failure names the path and the errno in tend's own log,
 * which a child could not) under the roots of the manager systemd would be:
 *   tend as root:   /run, /var/lib, /var/cache, /var/log, /etc;
 *   any other user: $XDG_RUNTIME_DIR, $XDG_STATE_HOME (~/.local/state),
 *                   $XDG_CACHE_HOME (~/.cache), $XDG_STATE_HOME/log,
 *                   $XDG_CONFIG_HOME (~/.config) — systemd's user manager.
 * Missing parents are made 0755; the leaf gets *DirectoryMode= and, as root,
 * User=/Group='s ownership (the whole tree chowned when the leaf's owner
 * differs, as systemd 252); an existing ConfigurationDirectory= is left as
 * it is (a warning when its mode differs). Paths are walked with openat(2):
 * a symbolic link is followed only when root or tend's own user owns it, and
 * the recursive chown and removal never follow one.
 * Single-threaded (tend's loop) except where noted; 0 or a negative errno.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "unit-file.h"

/*
 * The root of directories of type t for a tend whose effective uid is euid
 * (root: the system's; else from the environment, as systemd --user).
 * *ret is owned by the caller. Returns 0, -ENXIO (an unprivileged tend
 * without $XDG_RUNTIME_DIR, or without $HOME for the others), -ENOMEM.
 * Thread-safe as getenv() is.
 */
int exec_dirs_root(unit_exec_dir t, uid_t euid, char **ret);

/*
 * Makes every directory of f (see above). owner/group are User=/Group='s
 * ids (sandbox_owner()); chown only when tend is root. Each failure is logged
 * "UNIT: KEY=: cannot create PATH: error (ENAME)" and returned; the caller
 * fails the start (result resources).
 */
int exec_dirs_setup(const char *unit, const struct unit_file *f, uid_t owner, gid_t group);

/*
 * Adds RUNTIME_DIRECTORY=, STATE_DIRECTORY=, CACHE_DIRECTORY=,
 * LOGS_DIRECTORY=, CONFIGURATION_DIRECTORY= (absolute paths, ':'-separated)
 * for each type f sets, to *envp (unit_env_set()). Returns 0, -ENXIO (as
 * exec_dirs_root()), -ENOMEM.
 */
int exec_dirs_environment(const struct unit_file *f, char ***envp);

/* Whether f has any directory (RuntimeDirectory= … ConfigurationDirectory=). */
bool exec_dirs_any(const struct unit_file *f);

/*
 * Removes f's RuntimeDirectory= paths (each a whole tree, links not
 * followed) unless RuntimeDirectoryPreserve=yes, or =restart while
 * restarting. Failures are logged as warnings; nothing is returned.
 */
void exec_dirs_remove_runtime(const char *unit, const struct unit_file *f, bool restarting);
