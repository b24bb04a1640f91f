/* SPDX-License-Identifier: MIT */
/*
 * ns: the child's step of the mount namespace (namespace.h, steps 1–7):
 * async-signal-safe, system calls only. Every target is opened once without
 * following a symbolic link (the plan resolved them before the fork), and
 * every mount goes through that fd, never through the path again.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/openat2.h>

#include "macro.h"
#include "namespace-internal.h"
#include "namespace.h"

#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif

/* ------------------------------------------------------------------------ */
/* The child: system calls only                                              */
/* ------------------------------------------------------------------------ */

/* PrivateDevices=: the host's nodes bound into the new /dev (dev_fds by index), as systemd's list. */
static const struct {
        const char *path;
        bool dir, recursive, optional;
} dev_nodes[] = {
        { "/dev/null", false, false, false },    { "/dev/zero", false, false, false },
        { "/dev/full", false, false, false },    { "/dev/random", false, false, false },
        { "/dev/urandom", false, false, false }, { "/dev/tty", false, false, true },
        { "/dev/ptmx", false, false, true },     { "/dev/pts", true, true, true },
        { "/dev/shm", true, true, true },        { "/dev/mqueue", true, false, true },
        { "/dev/hugepages", true, false, true }, { "/dev/log", false, false, true },
};
static const struct {
        const char *target, *path;
} dev_links[] = {
        { "/proc/self/fd", "/dev/fd" },
        { "/proc/self/fd/0", "/dev/stdin" },
        { "/proc/self/fd/1", "/dev/stdout" },
        { "/proc/self/fd/2", "/dev/stderr" },
};

static int write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t n = write(fd, text, strlen(text));
        int e = errno;
        close(fd);
        errno = e;
        return n == (ssize_t) strlen(text) ? 0 : -1;
}

/* Attributes of the mount whose root fd is (recursive: and of those under it). */
static int set_attr(int fd, bool recursive, uint64_t set, uint64_t clear) {
        struct mount_attr a = { .attr_set = set, .attr_clr = clear };
        return mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a, sizeof a);
}

static bool is_mount_root(int fd) {
        struct statx stx;
        if (statx(fd, "", AT_EMPTY_PATH, STATX_TYPE, &stx) < 0)
                return false;
        return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* path, opened (O_PATH) without following a symbolic link anywhere in it: the
 * plan resolved the links before the fork, so one there now was put there since
 * (a race, QA's M3: fails with ELOOP); every mount of the entry then goes
 * through this fd, never through the path again. */
static int open_exact(const char *path) {
        struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        return (int) syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
}

/* A detached mount (from open_tree or fsmount) on the object fd names; the
 * mount stays on tree (its root), which is returned. */
static int attach(int tree, int fd) {
        if (tree < 0)
                return -1;
        if (move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
                int e = errno;
                close(tree);
                errno = e;
                return -1;
        }
        return tree;
}

/* Clones of the host's device nodes, before anything covers /dev. */
static int clone_dev_nodes(struct namespace_plan *p) {
        for (size_t i = 0; i < ELEMENTSOF(dev_nodes); i++) {
                if (i == ELEMENTSOF(dev_nodes) - 1 && p->dev_log[0])
                        continue; /* /dev/log: a symbolic link, made again */
                unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (dev_nodes[i].recursive ? AT_RECURSIVE : 0);
                p->dev_fds[i] = open_tree(AT_FDCWD, dev_nodes[i].path, flags);
                if (p->dev_fds[i] < 0 && !(dev_nodes[i].optional && errno == ENOENT))
                        return -1;
        }
        return 0;
}

/* A tmpfs on /dev holding the clones and the links. */
static int mount_dev(struct namespace_plan *p, const struct namespace_mount *m) {
        bool ptmx = p->dev_fds[6] >= 0, pts = p->dev_fds[7] >= 0;
        if (mount("tmpfs", "/dev", "tmpfs", m->flags, m->options) < 0)
                return -1;
        for (size_t i = 0; i < ELEMENTSOF(dev_nodes); i++) {
                if (p->dev_fds[i] < 0)
                        continue;
                int fd = dev_nodes[i].dir ? mkdir(dev_nodes[i].path, 0755)
                                          : open(dev_nodes[i].path, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOCTTY, 0666);
                if (fd < 0)
                        return -1;
                if (!dev_nodes[i].dir)
                        close(fd);
                if (move_mount(p->dev_fds[i], "", AT_FDCWD, dev_nodes[i].path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return -1;
                close(p->dev_fds[i]);
                p->dev_fds[i] = -1;
        }
        for (size_t i = 0; i < ELEMENTSOF(dev_links); i++)
                if (symlink(dev_links[i].target, dev_links[i].path) < 0)
                        return -1;
        if (!ptmx && pts && symlink("pts/ptmx", "/dev/ptmx") < 0)
                return -1;
        if (p->dev_log[0] && symlink(p->dev_log, "/dev/log") < 0)
                return -1;
        return 0;
}

/* A bind's destination, made when missing (its leaf only, as the source's kind). */
static int make_destination(const struct namespace_mount *m, const struct stat *src) {
        struct stat st;
        if (fstatat(AT_FDCWD, m->path, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                return 0;
        if (errno != ENOENT)
                return -1;
        if (S_ISDIR(src->st_mode))
                return mkdir(m->path, 0755) < 0 && errno != EEXIST ? -1 : 0;
        int fd = open(m->path, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
        if (fd < 0)
                return -1;
        close(fd);
        return 0;
}

/* An entry's path opened (open_exact()) into m->fd; a missing optional one skipped (0, fd -1). */
static int open_entry(struct namespace_mount *m, const char *path, int *ret_fd) {
        *ret_fd = open_exact(path);
        if (*ret_fd >= 0)
                return 0;
        m->skipped = m->optional && errno == ENOENT;
        return m->skipped ? 0 : -1;
}

static int apply_bind(struct namespace_mount *m) {
        struct stat src;
        int sfd;
        if (open_entry(m, m->source, &sfd) < 0 || m->skipped)
                return m->skipped ? 0 : -1;
        int tree = fstat(sfd, &src) < 0 ? -1
                 : open_tree(sfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
                                          (m->mode == NAMESPACE_BIND_RECURSIVE ? AT_RECURSIVE : 0));
        close(sfd);
        int fd = tree >= 0 && make_destination(m, &src) >= 0 ? open_exact(m->path) : -1;
        m->fd = fd >= 0 ? attach(tree, fd) : -1;
        if (fd < 0 && tree >= 0)
                close(tree);
        if (fd >= 0)
                close(fd);
        return m->fd;
}

static int apply_inaccessible(const struct namespace_plan *p, struct namespace_mount *m, int fd,
                              const struct stat *st) {
        const char *src = S_ISDIR(st->st_mode) ? p->inaccessible_dir : p->inaccessible_reg;
        int tree = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (tree >= 0 && set_attr(tree, false, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                                   MOUNT_ATTR_NOEXEC, 0) < 0) {
                close(tree);
                return -1;
        }
        m->fd = attach(tree, fd);
        return m->fd;
}

/* MS_* of a tmpfs entry as MOUNT_ATTR_* for fsmount(). */
static unsigned tmpfs_attrs(unsigned long flags) {
        return (flags & MS_NOSUID ? MOUNT_ATTR_NOSUID : 0) | (flags & MS_NODEV ? MOUNT_ATTR_NODEV : 0) |
               (flags & MS_NOEXEC ? MOUNT_ATTR_NOEXEC : 0) | (flags & MS_NOATIME ? MOUNT_ATTR_NOATIME : 0) |
               (flags & MS_STRICTATIME ? MOUNT_ATTR_STRICTATIME : 0);
}

/* A new tmpfs (fsopen: its options one by one, "key=value") on the object fd names. */
static int apply_tmpfs(struct namespace_mount *m, int fd) {
        int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        const char *o = m->options ? m->options : "";
        bool ok = fs >= 0;
        while (ok && *o) {
                char opt[256];
                size_t n = strcspn(o, ",");
                if (n >= sizeof opt) {
                        errno = EINVAL;
                        ok = false;
                        break;
                }
                memcpy(opt, o, n);
                opt[n] = 0;
                o += n + (o[n] == ',');
                char *eq = strchr(opt, '=');
                if (eq)
                        *eq = 0;
                ok = n == 0 || fsconfig(fs, eq ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, opt, eq ? eq + 1 : NULL, 0) >= 0;
        }
        int mnt = ok && fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) >= 0
                ? fsmount(fs, FSMOUNT_CLOEXEC, tmpfs_attrs(m->flags)) : -1;
        int e = errno;
        if (fs >= 0)
                close(fs);
        errno = e;
        m->fd = attach(mnt, fd);
        return m->fd;
}

/* A file system mounted by its path (/dev, /proc: below "/", no other's to write), its root into m->fd. */
static int reopen_mounted(struct namespace_mount *m) {
        m->fd = open_exact(m->path);
        return m->fd;
}

/* Step 3, one entry: the path opened once (open_exact()), every mount through that fd,
 * the mount's root kept in m->fd for steps 4 and 5. */
static int apply_mount(struct namespace_plan *p, struct namespace_mount *m) {
        struct stat st;
        int fd, r;
        if (m->mode == NAMESPACE_BIND || m->mode == NAMESPACE_BIND_RECURSIVE)
                return apply_bind(m);
        if (open_entry(m, m->path, &fd) < 0 || m->skipped)
                return m->skipped ? 0 : -1;
        if (fstat(fd, &st) < 0) {
                close(fd);
                return -1;
        }
        switch (m->mode) {
        case NAMESPACE_INACCESSIBLE:
                r = apply_inaccessible(p, m, fd, &st);
                break;
        case NAMESPACE_PRIVATE_TMP:
        case NAMESPACE_TMPFS:
                r = apply_tmpfs(m, fd);
                break;
        case NAMESPACE_PRIVATE_DEV:
                r = mount_dev(p, m) < 0 ? -1 : reopen_mounted(m);
                break;
        case NAMESPACE_PROCFS:
                r = mount("proc", m->path, "proc", m->flags, m->options) < 0 ? -1 : reopen_mounted(m);
                break;
        default: /* read-only, read-write, exec, noexec: a mount of its own, its mode in steps 4 and 5 */
                if (is_mount_root(fd))
                        return m->fd = fd;
                r = m->fd = attach(open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE),
                                   fd);
        }
        int e = errno;
        close(fd);
        errno = e;
        return r;
}

/* Whether entry j is one of i's nearest entries below it (no other entry between). Every
 * entry keeps its own mode under another's read-only and noexec alike: systemd 252 means a
 * shorter deny list for noexec, but its loop leaves every entry in it (a ReadWritePaths=
 * under NoExecPaths=/ keeps exec). */
static bool nearest_below(const struct namespace_plan *p, size_t i, size_t j) {
        const struct namespace_mount *mj = &p->mounts[j];
        if (j == i || mj->skipped || !path_under(mj->path, p->mounts[i].path))
                return false;
        for (size_t k = 0; k < p->n_mounts; k++)
                if (k != i && k != j && !p->mounts[k].skipped && path_under(mj->path, p->mounts[k].path) &&
                    path_under(p->mounts[k].path, p->mounts[i].path))
                        return false;
        return true;
}

/* The same object (its inode), as fstat() says of a and b. */
static bool same_object(int a, int b) {
        struct stat x, y;
        return fstat(a, &x) >= 0 && fstat(b, &y) >= 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* Entry j's subtree was cloned and put back: the fds of the entries under it
 * name mounts now covered. Each is opened again inside the clone (relative to
 * its root, no link followed, not leaving it) and must be the same object as
 * before (else -ESTALE: a directory was swapped meanwhile). */
static int refresh_below(struct namespace_plan *p, size_t j) {
        const char *base = p->mounts[j].path;
        for (size_t k = 0; k < p->n_mounts; k++) {
                struct namespace_mount *mk = &p->mounts[k];
                if (mk->skipped || !path_under(mk->path, base))
                        continue;
                const char *rel = mk->path + (streq(base, "/") ? 1 : strlen(base) + 1);
                struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                                        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH };
                int fd = (int) syscall(SYS_openat2, p->mounts[j].fd, rel, &how, sizeof how);
                if (fd < 0)
                        return -1;
                if (!same_object(fd, mk->fd)) {
                        close(fd);
                        errno = ESTALE;
                        return -1;
                }
                close(mk->fd);
                mk->fd = fd;
        }
        return 0;
}

/* Steps 4, 5: sets and clears attributes on entry i's subtree (recursive) or
 * its own mount, the other entries below it kept as they are: their subtrees
 * cloned before, put back after (on their own mounts, through their fds; the
 * clone's root is then the entry's mount). */
static int protect(struct namespace_plan *p, size_t i, bool recursive, uint64_t set, uint64_t clear) {
        struct namespace_mount *m = &p->mounts[i];
        int r = 0;
        if (!recursive)
                return set_attr(m->fd, false, set, clear);
        for (size_t j = 0; j < p->n_mounts && r >= 0; j++)
                if (nearest_below(p, i, j)) {
                        p->mounts[j].clone_fd = open_tree(p->mounts[j].fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                                                   AT_EMPTY_PATH | AT_RECURSIVE);
                        r = p->mounts[j].clone_fd;
                }
        if (r >= 0)
                r = set_attr(m->fd, true, set, clear);
        for (size_t j = 0; j < p->n_mounts; j++) {
                struct namespace_mount *mj = &p->mounts[j];
                if (mj->clone_fd < 0)
                        continue;
                if (r >= 0 && (r = move_mount(mj->clone_fd, "", mj->fd, "",
                                              MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)) >= 0) {
                        close(mj->fd);
                        mj->fd = mj->clone_fd;
                        r = refresh_below(p, j);
                } else
                        close(mj->clone_fd);
                mj->clone_fd = -1;
        }
        return r;
}

/* Step 4's entries (inaccessible nodes are made read-only in step 3). */
static bool read_only_entry(const struct namespace_mount *m, bool *ret_recursive) {
        *ret_recursive = m->mode != NAMESPACE_TMPFS && m->mode != NAMESPACE_PRIVATE_DEV;
        return m->mode != NAMESPACE_INACCESSIBLE && entry_read_only(m);
}

#define STEP_FAIL(m)                                            \
        do {                                                    \
                *ret_key = key_index((m)->key);                 \
                return errno > 0 ? -errno : -EIO;               \
        } while (0)

/* A user namespace (flags: with more namespaces) mapping tend's uid and gid. */
static int enter_user_namespace(const struct namespace_plan *p, int flags) {
        if (unshare(CLONE_NEWUSER | flags) < 0 || write_file("/proc/self/setgroups", "deny") < 0 ||
            write_file("/proc/self/uid_map", p->uid_map) < 0 || write_file("/proc/self/gid_map", p->gid_map) < 0)
                return -1;
        return 0;
}

static int enter_namespaces(const struct namespace_plan *p) {
        if (p->user_namespace && enter_user_namespace(p, 0) < 0)
                return -1;
        if (unshare(CLONE_NEWNS) < 0)
                return -1;
        return mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL);
}

/* After the mounts, in tend's user namespace: a second user and mount namespace
 * below it, so the kernel locks every mount copied into it (MNT_LOCKED and its
 * read-only, noexec…): a unit holding capabilities there (file capabilities)
 * cannot unmount an inaccessible node nor remount a read-only path. */
static int lock_mounts(const struct namespace_plan *p) {
        return p->user_namespace ? enter_user_namespace(p, CLONE_NEWNS) : 0;
}

int namespace_pre_exec(struct namespace_plan *p, int *ret_key) {
        *ret_key = p->n_keys ? key_index(p->keys[0]) : 0;
        if (enter_namespaces(p) < 0 || (p->private_dev && clone_dev_nodes(p) < 0))
                return errno > 0 ? -errno : -EIO;
        for (size_t i = 0; i < p->n_mounts; i++)
                if (apply_mount(p, &p->mounts[i]) < 0)
                        STEP_FAIL(&p->mounts[i]);
        for (size_t i = 0; i < p->n_mounts; i++) {
                bool recursive;
                struct namespace_mount *m = &p->mounts[i];
                if (!m->skipped && read_only_entry(m, &recursive) && protect(p, i, recursive, MOUNT_ATTR_RDONLY, 0) < 0)
                        STEP_FAIL(m);
        }
        for (size_t i = 0; i < p->n_mounts; i++) {
                struct namespace_mount *m = &p->mounts[i];
                /* noexec wins over exec (systemd 252's make_noexec()); the others' own mounts keep their flags */
                bool no = entry_no_exec(m);
                if (m->skipped || m->mode == NAMESPACE_INACCESSIBLE || m->mode == NAMESPACE_PROCFS ||
                    (!no && !entry_exec(m)))
                        continue;
                if (protect(p, i, true, no ? MOUNT_ATTR_NOEXEC : 0, no ? 0 : MOUNT_ATTR_NOEXEC) < 0)
                        STEP_FAIL(m);
        }
        if (lock_mounts(p) < 0)
                return errno > 0 ? -errno : -EIO;
        if (p->private_dev && ((prctl(PR_CAPBSET_DROP, CAP_MKNOD, 0, 0, 0) < 0 && errno != EINVAL) ||
                               (prctl(PR_CAPBSET_DROP, CAP_SYS_RAWIO, 0, 0, 0) < 0 && errno != EINVAL))) {
                *ret_key = key_index("PrivateDevices=");
                return -errno;
        }
        if (p->working_directory[0] && chdir(p->working_directory) < 0)
                return -errno;
        return 0;
}
