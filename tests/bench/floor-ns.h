/* SPDX-License-Identifier: MIT */
/*
 * The floor of the hardening benchmark (docs/benchmarks.md "issue 17: the
 * cost of the mount namespace"): the system calls tend's child makes for
 * ProtectSystem=strict + PrivateTmp=yes + PrivateDevices=yes on this host
 * (exec/namespace.c, read from `strace -f` of tend's child), in the same
 * order, and nothing else: no plan, no checks (tend's 13 stat/statx calls
 * that find a missing path or a mount point are left out), no error
 * messages. A node or directory that is missing on the host is skipped, as
 * tend skips its optional entries.
 *
 * floor_ns_setup() runs in the child between fork and exec; 0 or -errno.
 */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/capability.h>

static const struct {
        const char *path;
        bool dir, recursive;
} floor_dev_nodes[] = {
        { "/dev/null", false, false },   { "/dev/zero", false, false },    { "/dev/full", false, false },
        { "/dev/random", false, false }, { "/dev/urandom", false, false }, { "/dev/tty", false, false },
        { "/dev/ptmx", false, false },   { "/dev/pts", true, true },       { "/dev/shm", true, true },
        { "/dev/mqueue", true, false },  { "/dev/hugepages", true, false }, { "/dev/log", false, false },
};

/* Under the read-only /, each kept as it is: its subtree cloned before, put back after. */
static const char *const floor_kept[] = { "/dev", "/home", "/proc", "/root", "/run/user", "/sys", "/tmp", "/var/tmp" };

static int floor_ns_dev(void) {
        int fds[sizeof floor_dev_nodes / sizeof floor_dev_nodes[0]];
        for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
                fds[i] = open_tree(AT_FDCWD, floor_dev_nodes[i].path,
                                   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (floor_dev_nodes[i].recursive ? AT_RECURSIVE : 0));
        if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC | MS_STRICTATIME, "mode=0755,size=4m") < 0)
                return -errno;
        for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
                if (fds[i] < 0)
                        continue;
                int fd = floor_dev_nodes[i].dir ? mkdir(floor_dev_nodes[i].path, 0755)
                                                : open(floor_dev_nodes[i].path, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOCTTY, 0666);
                if (fd < 0)
                        return -errno;
                if (!floor_dev_nodes[i].dir)
                        close(fd);
                if (move_mount(fds[i], "", AT_FDCWD, floor_dev_nodes[i].path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return -errno;
                close(fds[i]);
        }
        static const char *const links[][2] = { { "/proc/self/fd", "/dev/fd" }, { "/proc/self/fd/0", "/dev/stdin" },
                                                { "/proc/self/fd/1", "/dev/stdout" }, { "/proc/self/fd/2", "/dev/stderr" } };
        for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
                if (symlink(links[i][0], links[i][1]) < 0)
                        return -errno;
        return 0;
}

static int floor_ns_setup(void) {
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
                return -errno;
        int r = floor_ns_dev();
        if (r < 0)
                return r;
        static const char *const binds[] = { "/home", "/root", "/run/user" }; /* not mount points on the host */
        for (size_t i = 0; i < sizeof binds / sizeof binds[0]; i++)
                if (mount(binds[i], binds[i], NULL, MS_BIND | MS_REC, NULL) < 0 && errno != ENOENT)
                        return -errno;
        if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_STRICTATIME, "mode=1777") < 0 ||
            mount("tmpfs", "/var/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_STRICTATIME, "mode=1777") < 0)
                return -errno;
        int kept[sizeof floor_kept / sizeof floor_kept[0]];
        for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
                kept[i] = open_tree(AT_FDCWD, floor_kept[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
        if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) < 0)
                return -errno;
        for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
                if (kept[i] >= 0 && move_mount(kept[i], "", AT_FDCWD, floor_kept[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return -errno;
                if (kept[i] >= 0)
                        close(kept[i]);
        }
        if (mount_setattr(AT_FDCWD, "/dev", 0, &ro, sizeof ro) < 0)
                return -errno;
        if ((prctl(PR_CAPBSET_DROP, CAP_MKNOD, 0, 0, 0) < 0 || prctl(PR_CAPBSET_DROP, CAP_SYS_RAWIO, 0, 0, 0) < 0) &&
            errno != EINVAL)
                return -errno;
        return 0;
}
