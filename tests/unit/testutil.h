/* SPDX-License-Identifier: MIT */
/*
 * Small helpers the cmocka tests share (tests/unit/), header-only.
 */
#pragma once

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The number of fds this process has open (the directory stream's own not
 * counted), or -1 when /proc/self/fd cannot be read. Tests compare it before
 * and after, to find leaks. */
static inline int count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        if (!d)
                return -1;
        int n = 0;
        for (struct dirent *e; (e = readdir(d));)
                n += e->d_name[0] != '.';
        closedir(d);
        return n - 1;
}

/* Removes path and everything under it, following no symbolic link (a link
 * is unlinked, not its target); errors ignored: a test's own scratch tree. */
static inline void remove_tree(const char *path) {
        DIR *d = opendir(path);
        if (d) {
                for (struct dirent *de; (de = readdir(d));) {
                        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                                continue;
                        char p[PATH_MAX];
                        int n = snprintf(p, sizeof p, "%s/%s", path, de->d_name);
                        if (n < 0 || (size_t) n >= sizeof p)
                                continue;
                        struct stat st;
                        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                                remove_tree(p);
                        else
                                unlink(p);
                }
                closedir(d);
        }
        rmdir(path);
}
