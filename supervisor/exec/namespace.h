/* SPDX-License-Identifier: MIT */
/*
 * ns: a private mount namespace for each process of a unit (issue 17; SPEC
 * §3 "never less isolation than asked"; systemd.exec(5) "Sandboxing"; the
 * reference for users is docs/tend.service.5.md "HARDENING", "File system").
 *
 * The keys (unit-file-namespace.h) become a plan of mounts, computed before
 * the fork (STYLE.md "Reserve before fork"): each entry a path, a mode and
 * the key it came from, sorted by path (a parent before what is under it),
 * one entry per path (the stronger mode wins and takes the others'
 * read-only and noexec, as systemd's drop_duplicates), the entries
 * under an inaccessible path dropped. The child then, with system calls only
 * (namespace_pre_exec()):
 *   1. a non-root tend without CAP_SYS_ADMIN: unshare(CLONE_NEWUSER) with a
 *      map of tend's own uid and gid (systemd's user manager does the same);
 *      root without CAP_SYS_ADMIN is refused (its units would be root there);
 *   2. unshare(CLONE_NEWNS), then "/" MS_SLAVE|MS_REC: nothing it mounts
 *      propagates to the host, the host's later mounts still reach it;
 *   3. the mounts, in path order: binds, tmpfs (TemporaryFileSystem=,
 *      PrivateTmp=, ProtectHome=tmpfs), a minimal /dev (PrivateDevices=), a
 *      new /proc (ProtectProc=, ProcSubset=), inaccessible nodes; each path
 *      opened once with openat2(RESOLVE_NO_SYMLINKS) (a link put there since
 *      the plan: ELOOP), every mount of it, here and in steps 4 and 5, through
 *      that fd (open_tree, fsmount, move_mount, mount_setattr) and the mount's
 *      root fd kept (namespace-child.c);
 *   4. read-only (mount_setattr): each read-only entry's whole subtree except
 *      the other entries under it, which keep their own mode (systemd's
 *      "deny list", here by cloning those subtrees before and putting them
 *      back after);
 *   5. noexec / exec the same way (NoExecPaths=, ExecPaths=);
 *   5b. after step 1: unshare(CLONE_NEWUSER|CLONE_NEWNS) again, so the kernel
 *      locks every mount (a unit with capabilities in the user namespace cannot
 *      unmount or remount them);
 *   6. PrivateDevices=: CAP_MKNOD and CAP_SYS_RAWIO out of the bounding set;
 *   7. chdir to the working directory again (libexit entered it on the host's
 *      mounts, before the hook).
 * Needs Linux 5.12 (open_tree, move_mount, mount_setattr; fsopen, openat2).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "macro.h"

struct unit_file;
struct sandbox_self;

/* What a mount entry does. On one path the lowest value's entry is kept, and
 * it takes the others' read-only, noexec and exec (systemd 252's order and
 * merge): ReadOnlyPaths=/tmp makes PrivateTmp='s /tmp read-only, a bind
 * under ReadOnlyPaths= is read-only, noexec wins over exec. */
typedef enum namespace_mode {
        NAMESPACE_INACCESSIBLE,         /* an empty 0000 node of the same kind, read-only, noexec */
        NAMESPACE_BIND,                 /* BindPaths=…:norbind */
        NAMESPACE_BIND_RECURSIVE,       /* BindPaths= */
        NAMESPACE_PRIVATE_TMP,          /* a fresh tmpfs, mode 1777 */
        NAMESPACE_PRIVATE_DEV,          /* a tmpfs holding the minimal devices */
        NAMESPACE_PROCFS,               /* a new procfs instance with options */
        NAMESPACE_READ_ONLY,
        NAMESPACE_READ_WRITE,
        NAMESPACE_NO_EXEC,
        NAMESPACE_EXEC,                 /* noexec cleared (pass 5) */
        NAMESPACE_TMPFS,                /* options and flags of its own */
        NAMESPACE_READ_WRITE_IMPLICIT,  /* kept as it is under a read-only parent */
        _NAMESPACE_MODE_MAX,
} namespace_mode;

struct namespace_mount {
        char *path;              /* absolute, simplified; owned */
        char *source;            /* binds, inaccessible nodes: owned; NULL */
        char *options;           /* tmpfs, procfs: the data string; owned; NULL */
        unsigned long flags;     /* tmpfs, procfs: MS_* */
        const char *key;         /* static: "ReadOnlyPaths=" — the key it came from */
        namespace_mode mode;
        bool optional;           /* '-': a missing path (or bind source) is skipped */
        bool read_only;          /* made read-only in step 4 (binds, tmpfs; merged entries) */
        bool no_exec, exec;      /* merged from other entries on the path: noexec set (wins), or cleared */
        /* the child's own copy: */
        bool skipped;
        int fd;                  /* the mount's root after step 3 (every later step goes through it) */
        int clone_fd;            /* steps 4, 5: its subtree, cloned aside */
};

/* The plan of one spawn. Read-only outside namespace.c (tests inspect it). */
struct namespace_plan {
        struct namespace_mount *mounts;
        size_t n_mounts, allocated;
        const char *keys[24];    /* the keys asked for (static strings), for refusals */
        size_t n_keys;
        bool user_namespace;     /* step 1 */
        char uid_map[32], gid_map[32];
        bool private_dev;        /* step 6 */
        char dev_log[256];       /* PrivateDevices=: /dev/log's target if a symbolic link, else "" */
        char *inaccessible_dir, *inaccessible_reg; /* the empty 0000 nodes bound on inaccessible paths; owned */
        char working_directory[4096]; /* step 7 (namespace_plan_set_cwd()) */
        int dev_fds[16];         /* the child's: clones of the host's device nodes */
        int stage_key;           /* the child's: the key index of a failure (namespace_stage_describe()) */
};

/*
 * The plan of f's namespace keys for a process of unit (its name, for
 * messages): *ret is NULL when f asks for none (no namespace), else owned by
 * the caller (namespace_plan_free()). Another key's owner may add entries
 * with namespace_plan_add() before namespace_plan_finish(). 0, or -ENOMEM,
 * -ENXIO (no root for the unit's directories, exec-dirs.h).
 */
int namespace_plan_new(const char *unit, const struct unit_file *f, struct namespace_plan **ret);

/*
 * Adds an entry (e.g. ProtectKernelModules=: NAMESPACE_INACCESSIBLE,
 * "/usr/lib/modules", true, "ProtectKernelModules="): *p is allocated if
 * NULL, so a unit with only that key gets a namespace. path is copied; key
 * must be a static string ending in '='. 0 or -ENOMEM.
 */
int namespace_plan_add(struct namespace_plan **p, namespace_mode mode, const char *path, bool optional,
                       const char *key);

/*
 * Before the fork, after every namespace_plan_add(): sorts and merges the
 * entries, checks the paths that must exist ("UNIT: KEY PATH: No such file or
 * directory", -ENOENT), prepares the inaccessible nodes (<runtime
 * root>/tend/inaccessible/{dir,reg}, made once, as systemd's
 * /run/systemd/inaccessible), and decides how the namespace is made: with
 * self (NULL: read now) lacking CAP_SYS_ADMIN, in a user namespace if self is
 * not root and the kernel allows unprivileged ones (ProtectProc=, ProcSubset= excepted: a new
 * /proc needs a PID namespace of that user namespace), else each key goes
 * through hardening_cannot_apply() (-EPERM refuses the start; accepted keys
 * are dropped, and the plan may become empty: *p is then freed and NULL).
 * A path in /proc/self (or tend's own /proc/PID) is refused: -EINVAL.
 * 0 or a negative errno (logged, naming the unit and the key, except -ENOMEM).
 */
int namespace_plan_finish(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                          struct namespace_plan **p);

/* The working directory libexit enters (cwd; NULL: tend's own, read now), entered again in step 7. */
void namespace_plan_set_cwd(struct namespace_plan *p, const char *cwd);

/* Frees p; returns NULL. NULL is accepted. */
struct namespace_plan *namespace_plan_free(struct namespace_plan *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct namespace_plan *, namespace_plan_free);

/*
 * The child's step (sandbox_pre_exec()'s first): async-signal-safe, system
 * calls only, p changed only in the child's copy. 0, or a negative errno
 * with *ret_key set to the index of the key that failed (namespace_key_name()).
 */
int namespace_pre_exec(struct namespace_plan *p, int *ret_key);

/* The key of an index from namespace_pre_exec() ("PrivateTmp="), or NULL. */
const char *namespace_key_name(int index);
