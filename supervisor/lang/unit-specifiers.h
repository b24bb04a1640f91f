/* SPDX-License-Identifier: MIT */
/*
 * The facts of the manager and the machine that specifiers resolve to
 * (systemd.unit(5) "Specifiers", SPEC §3), shared with what else needs them:
 * the directory roots (RuntimeDirectory= and friends, exec-dirs.h; %t %S %C
 * %L %E), systemd's architecture names (%a, ConditionArchitecture=) and
 * os-release fields (%A %B %M %o %w %W, ConditionOSRelease=).
 * Thread-safe as getenv() is; no state.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "unit-exec.h"

/*
 * The root of directories of type t for a manager whose effective uid is euid,
 * as systemd's system or user manager has it:
 *   root:           /run, /var/lib, /var/cache, /var/log, /etc;
 *   any other user: $XDG_RUNTIME_DIR, $XDG_STATE_HOME (~/.local/state),
 *                   $XDG_CACHE_HOME (~/.cache), $XDG_STATE_HOME/log,
 *                   $XDG_CONFIG_HOME (~/.config).
 * *ret is owned by the caller. Returns 0, -ENXIO (no $XDG_RUNTIME_DIR for
 * the runtime root; no $XDG_… and no absolute $HOME for the others), -ENOMEM.
 */
int unit_dir_root(unit_exec_dir t, uid_t euid, char **ret);

/* systemd's name of the architecture of uname(2)'s machine ("x86_64" →
 * "x86-64", "aarch64" → "arm64"…); machine itself when unknown. Static or
 * machine: not owned by the caller. */
const char *unit_architecture_name(const char *machine);

/* KEY's value in os-release text (one pair of quotes removed) into out
 * (size bytes, cut to fit), "" when absent. */
void unit_os_release_value(const char *text, const char *key, char *out, size_t size);
