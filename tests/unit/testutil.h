/* SPDX-License-Identifier: MIT */
/*
 * Small helpers the cmocka tests share (tests/unit/), header-only.
 */
#pragma once

#include <dirent.h>

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
