/* SPDX-License-Identifier: MIT */
/*
 * PID files (pid-file.h): a path walk in the manner of systemd's
 * chase(CHASE_SAFE), written from its documented rule, and the read.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "pid-file.h"

bool pid_file_unsafe_step(uid_t from_uid, uid_t to_uid) {
        return from_uid != 0 && from_uid != to_uid;
}

/* The walk's state: the directory reached, its owner, and what is left. */
struct walk {
        int dir;                 /* O_PATH fd of the directory reached */
        struct stat dir_st;
        char todo[PATH_MAX];     /* the rest of the path, components separated by '/' */
        unsigned links;
        bool safe;
};

static int walk_root(struct walk *w) {
        int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        safe_close(w->dir);
        w->dir = fd;
        return fstat(fd, &w->dir_st) < 0 ? negative_errno() : 0;
}

/* A symlink's target replaces its name in what is left to walk. */
static int walk_link(struct walk *w, int fd, const char *rest) {
        if (++w->links > PID_FILE_MAX_LINKS)
                return -ELOOP;
        char target[PATH_MAX];
        ssize_t n = readlinkat(fd, "", target, sizeof target - 1);
        if (n < 0)
                return negative_errno();
        target[n] = '\0';
        char next[PATH_MAX];
        if ((size_t) snprintf(next, sizeof next, "%s/%s", target, rest) >= sizeof next)
                return -ENAMETOOLONG;
        memcpy(w->todo, next, sizeof next);
        /* An absolute target starts again at the root (its step from the
         * symlink's directory was checked with the symlink itself). */
        return target[0] == '/' ? walk_root(w) : 0;
}

/* Takes the next component of w->todo into name; false when none is left. */
static bool next_component(struct walk *w, char *name, size_t size, const char **ret_rest) {
        char *p = w->todo;
        while (*p == '/')
                p++;
        if (!*p)
                return false;
        size_t l = strcspn(p, "/");
        if (l >= size)
                l = size - 1; /* NAME_MAX bounds a real entry: openat answers */
        memcpy(name, p, l);
        name[l] = '\0';
        *ret_rest = p + strcspn(p, "/");
        return true;
}

/* One step: name in w->dir. 1 when it was the last and *ret_fd is it. */
static int walk_step(struct walk *w, const char *name, const char *rest, int *ret_fd, struct stat *ret_st) {
        _cleanup_close_ int fd = openat(w->dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (w->safe && pid_file_unsafe_step(w->dir_st.st_uid, st.st_uid))
                return -ENOLINK;
        if (S_ISLNK(st.st_mode)) {
                char left[PATH_MAX];
                snprintf(left, sizeof left, "%s", rest);
                return walk_link(w, fd, left);
        }
        bool last = strspn(rest, "/") == strlen(rest);
        if (last) {
                *ret_fd = TAKE_FD(fd);
                *ret_st = st;
                return 1;
        }
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        safe_close(w->dir);
        w->dir = TAKE_FD(fd);
        w->dir_st = st;
        memmove(w->todo, rest, strlen(rest) + 1);
        return 0;
}

static int walk(struct walk *w, int *ret_fd, struct stat *ret_st) {
        for (;;) {
                char name[NAME_MAX + 2];
                const char *rest;
                if (!next_component(w, name, sizeof name, &rest))
                        return -EINVAL; /* a path ending in a directory */
                if (streq(name, ".")) {
                        memmove(w->todo, rest, strlen(rest) + 1);
                        continue;
                }
                int k = walk_step(w, name, rest, ret_fd, ret_st);
                if (k != 0)
                        return k;
        }
}

int pid_file_open(const char *path, bool safe, int *ret_fd, uid_t *ret_uid) {
        if (!path || path[0] != '/')
                return -EINVAL;
        struct walk *w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->dir = -1;
        w->safe = safe;
        int k = strlen(path) < sizeof w->todo ? 0 : -ENAMETOOLONG;
        if (k == 0) {
                strcpy(w->todo, path);
                k = walk_root(w);
        }
        int fd = -1;
        struct stat st;
        if (k == 0)
                k = walk(w, &fd, &st);
        safe_close(w->dir);
        free(w);
        if (k < 0)
                return k;
        _cleanup_close_ int path_fd = fd;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", path_fd);
        int rfd = open(proc, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (rfd < 0)
                return negative_errno();
        *ret_fd = rfd;
        *ret_uid = st.st_uid;
        return 0;
}

int pid_file_read(int fd, pid_t *ret) {
        char buf[64];
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (n < 0)
                return negative_errno();
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        char *p = buf;
        while (isblank((unsigned char) *p))
                p++;
        if (!*p)
                return -ENODATA;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        while (isblank((unsigned char) *end))
                end++;
        if (errno || end == p || *end || v < 1 || v > INT_MAX || !isdigit((unsigned char) *p))
                return -EINVAL;
        *ret = (pid_t) v;
        return 0;
}
