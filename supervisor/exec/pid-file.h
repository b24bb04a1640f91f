/* SPDX-License-Identifier: MIT */
/*
 * A Type=forking daemon's PID file (SPEC §4; docs/tend.service.5.md
 * "Type=forking"), opened and read as systemd 252 does before it trusts
 * the pid in it.
 *
 * The path is walked one component at a time through O_PATH fds, never
 * following a symlink blindly. With `safe`, every step must be a safe
 * transition (systemd's CHASE_SAFE): from a directory owned by root
 * anything may follow, from one owned by another user only an entry of
 * that same user — so a user who owns a directory on the path cannot
 * point tend at a file of another user, and a symlink planted by a user
 * in someone else's directory is refused. The caller decides what an
 * unsafe path means (tend: its pid is accepted only if it is a process of
 * the unit).
 *
 * Conventions: 0 or a negative errno; ret_ parameters written only on
 * success; no function logs. Every fd is O_CLOEXEC and the caller's.
 * Thread-safe (no shared state).
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Symlinks followed at most while walking a path (as the kernel's 40). */
#define PID_FILE_MAX_LINKS 40

/*
 * Opens the regular file at path (absolute) for reading, walking it as
 * above. *ret_fd is the caller's (O_RDONLY | O_CLOEXEC); *ret_uid the
 * file's owner. Errors: -ENOLINK (safe, and a step is unsafe: nothing was
 * opened), -ENOENT (a component is missing: not written yet), -ELOOP (too
 * many symlinks), -ENOTDIR, -EINVAL (not absolute, or not a regular file),
 * -ENAMETOOLONG, -ENOMEM, the errno of openat/fstat/readlinkat.
 */
int pid_file_open(const char *path, bool safe, int *ret_fd, uid_t *ret_uid);

/*
 * Reads the pid on fd's first line: decimal, >= 1 (leading and trailing
 * blanks allowed). Errors: -ENODATA (empty: being written), -EINVAL (not a
 * pid), -errno of read.
 */
int pid_file_read(int fd, pid_t *ret);

/* Whether systemd's CHASE_SAFE refuses the step from an entry owned by
 * from_uid to one owned by to_uid: only root's entries may lead to another
 * user's. Pure; exported for the unit test. */
bool pid_file_unsafe_step(uid_t from_uid, uid_t to_uid);
