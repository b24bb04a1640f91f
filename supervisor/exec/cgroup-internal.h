/* SPDX-License-Identifier: MIT */
/*
 * What cgroup.c (discovery, tend's tree) shares with cgroup-unit.c (a unit's
 * processes); not for other modules, which use cgroup.h. Conventions as
 * there: 0 or a negative errno, one thread.
 */
#pragma once

#include <stdbool.h>

#include "cgroup.h"
#include "macro.h"

struct cgroup_tree {
        enum cgroup_mode mode;
        char *dir;    /* CGROUP: tend's cgroup directory */
        char *path;   /* CGROUP: P, as /proc/PID/cgroup names it */
        int dir_fd;   /* CGROUP: tend's cgroup directory */
        char *describe;
        bool in_leaf; /* CGROUP: tend moved itself into CGROUP_TEND_LEAF */
};

/* Reads a whole (small, pseudo-) file relative to dir_fd into *ret, a
 * malloc'ed, NUL-terminated string owned by the caller. 0 or a negative errno. */
int cgroup_read_file_at(int dir_fd, const char *path, char **ret);

/* Writes s to the file path relative to dir_fd in one write(). 0, -EIO (a
 * short write), or the open/write error. */
int cgroup_write_string_at(int dir_fd, const char *path, const char *s);

/* A new string formatted as printf does, owned by the caller; NULL on ENOMEM. */
char *cgroup_strdup_printf(const char *fmt, ...) _printf_(1, 2);
