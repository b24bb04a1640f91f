/* SPDX-License-Identifier: MIT */
/*
 * ns: the mount namespace of a unit's process (namespace.h): the plan from
 * the keys, before the fork (the child's step: namespace-child.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/capability.h>

#include "exec-dirs.h"
#include "hardening.h"
#include "log.h"
#include "namespace-internal.h"
#include "namespace.h"
#include "sandbox.h"
#include "unit-file-namespace.h"
#include "unit-file.h"

/* The keys a failure can name, by index (the stage code's offset, sandbox.h). */
static const char *const key_names[] = {
        "PrivateMounts=", "PrivateTmp=", "ProtectSystem=", "ProtectHome=", "PrivateDevices=",
        "ReadWritePaths=", "ReadOnlyPaths=", "InaccessiblePaths=", "ExecPaths=", "NoExecPaths=",
        "TemporaryFileSystem=", "BindPaths=", "BindReadOnlyPaths=", "ProtectKernelTunables=",
        "ProtectControlGroups=", "ProtectProc=", "ProcSubset=", "ProtectKernelModules=", "ProtectKernelLogs=",
};

const char *namespace_key_name(int index) {
        return index >= 0 && (size_t) index < ELEMENTSOF(key_names) ? key_names[index] : NULL;
}

/* The index of key in key_names (the same static string, or equal text); 0 if none. */
int key_index(const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(key_names); i++)
                if (key == key_names[i] || streq(key, key_names[i]))
                        return (int) i;
        return 0;
}

/* ------------------------------------------------------------------------ */
/* The plan: entries                                                         */
/* ------------------------------------------------------------------------ */

static void mount_done(struct namespace_mount *m) {
        free(m->path);
        free(m->source);
        free(m->options);
}

struct namespace_plan *namespace_plan_free(struct namespace_plan *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_mounts; i++)
                mount_done(&p->mounts[i]);
        free(p->mounts);
        free(p->inaccessible_dir);
        free(p->inaccessible_reg);
        free(p);
        return NULL;
}

static int plan_alloc(struct namespace_plan **p) {
        if (*p)
                return 0;
        *p = calloc(1, sizeof **p);
        if (!*p)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF((*p)->dev_fds); i++)
                (*p)->dev_fds[i] = -1;
        return 0;
}

static void note_key(struct namespace_plan *p, const char *key) {
        for (size_t i = 0; i < p->n_keys; i++)
                if (streq(p->keys[i], key))
                        return;
        if (p->n_keys < ELEMENTSOF(p->keys))
                p->keys[p->n_keys++] = key;
}

/* A new entry (path copied), or NULL on ENOMEM. */
static struct namespace_mount *plan_push(struct namespace_plan **pp, namespace_mode mode, const char *path,
                                         bool optional, const char *key) {
        if (plan_alloc(pp) < 0)
                return NULL;
        struct namespace_plan *p = *pp;
        if (p->n_mounts == p->allocated) {
                size_t n = p->allocated ? p->allocated * 2 : 16;
                struct namespace_mount *v = realloc(p->mounts, n * sizeof *v);
                if (!v)
                        return NULL;
                p->mounts = v;
                p->allocated = n;
        }
        char *copy = strdup(path);
        if (!copy)
                return NULL;
        note_key(p, key);
        struct namespace_mount *m = &p->mounts[p->n_mounts++];
        *m = (struct namespace_mount) { .path = copy, .key = key, .mode = mode, .optional = optional, .fd = -1,
                                        .clone_fd = -1 };
        return m;
}

int namespace_plan_add(struct namespace_plan **p, namespace_mode mode, const char *path, bool optional,
                       const char *key) {
        return plan_push(p, mode, path, optional, key) ? 0 : -ENOMEM;
}

static int add_tmpfs(struct namespace_plan **p, namespace_mode mode, const char *path, const char *options,
                     unsigned long flags, bool read_only, bool optional, const char *key) {
        struct namespace_mount *m = plan_push(p, mode, path, optional, key);
        if (!m || !(m->options = strdup(options)))
                return -ENOMEM;
        m->flags = flags;
        m->read_only = read_only;
        return 0;
}

/* A static table's entries. */
struct fixed {
        const char *path;
        namespace_mode mode;
        bool optional;
};

static int add_table(struct namespace_plan **p, const struct fixed *t, size_t n, const char *key) {
        for (size_t i = 0; i < n; i++)
                if (namespace_plan_add(p, t[i].mode, t[i].path, t[i].optional, key) < 0)
                        return -ENOMEM;
        return 0;
}

/* ProtectSystem=, as systemd 252's tables (a merged /usr: no /bin, /lib entries). */
static int add_protect_system(struct namespace_plan **p, unit_protect_system v) {
        static const struct fixed yes[] = {
                { "/usr", NAMESPACE_READ_ONLY, false },
                { "/boot", NAMESPACE_READ_ONLY, true },
                { "/efi", NAMESPACE_READ_ONLY, true },
        };
        static const struct fixed strict[] = {
                { "/", NAMESPACE_READ_ONLY, false },
                { "/proc", NAMESPACE_READ_WRITE_IMPLICIT, false },
                { "/sys", NAMESPACE_READ_WRITE_IMPLICIT, false },
                { "/dev", NAMESPACE_READ_WRITE_IMPLICIT, false },
                { "/home", NAMESPACE_READ_WRITE_IMPLICIT, true },
                { "/run/user", NAMESPACE_READ_WRITE_IMPLICIT, true },
                { "/root", NAMESPACE_READ_WRITE_IMPLICIT, true },
        };
        const char *key = "ProtectSystem=";
        if (v == UNIT_PROTECT_SYSTEM_STRICT)
                return add_table(p, strict, ELEMENTSOF(strict), key);
        if (v == UNIT_PROTECT_SYSTEM_FULL && namespace_plan_add(p, NAMESPACE_READ_ONLY, "/etc", false, key) < 0)
                return -ENOMEM;
        return v ? add_table(p, yes, ELEMENTSOF(yes), key) : 0;
}

static int add_protect_home(struct namespace_plan **p, unit_protect_home v) {
        static const char *const homes[] = { "/home", "/run/user", "/root" };
        const char *key = "ProtectHome=";
        for (size_t i = 0; v && i < ELEMENTSOF(homes); i++) {
                int r = v == UNIT_PROTECT_HOME_TMPFS
                      ? add_tmpfs(p, NAMESPACE_TMPFS, homes[i], i == 2 ? "mode=0700" : "mode=0755",
                                  MS_NODEV | MS_STRICTATIME, true, true, key)
                      : namespace_plan_add(p, v == UNIT_PROTECT_HOME_YES ? NAMESPACE_INACCESSIBLE : NAMESPACE_READ_ONLY,
                                           homes[i], true, key);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_kernel_tunables(struct namespace_plan **p) {
        static const struct fixed t[] = {
                { "/proc/acpi", NAMESPACE_READ_ONLY, true },    { "/proc/apm", NAMESPACE_READ_ONLY, true },
                { "/proc/asound", NAMESPACE_READ_ONLY, true },  { "/proc/bus", NAMESPACE_READ_ONLY, true },
                { "/proc/fs", NAMESPACE_READ_ONLY, true },      { "/proc/irq", NAMESPACE_READ_ONLY, true },
                { "/proc/kallsyms", NAMESPACE_INACCESSIBLE, true }, { "/proc/kcore", NAMESPACE_INACCESSIBLE, true },
                { "/proc/latency_stats", NAMESPACE_READ_ONLY, true }, { "/proc/mtrr", NAMESPACE_READ_ONLY, true },
                { "/proc/scsi", NAMESPACE_READ_ONLY, true },    { "/proc/sys", NAMESPACE_READ_ONLY, true },
                { "/proc/sysrq-trigger", NAMESPACE_READ_ONLY, true }, { "/proc/timer_stats", NAMESPACE_READ_ONLY, true },
                { "/sys", NAMESPACE_READ_ONLY, false },         { "/sys/fs/bpf", NAMESPACE_READ_ONLY, true },
                { "/sys/fs/cgroup", NAMESPACE_READ_WRITE_IMPLICIT, false },
                { "/sys/fs/selinux", NAMESPACE_READ_WRITE_IMPLICIT, true },
                { "/sys/kernel/debug", NAMESPACE_READ_ONLY, true }, { "/sys/kernel/tracing", NAMESPACE_READ_ONLY, true },
        };
        return add_table(p, t, ELEMENTSOF(t), "ProtectKernelTunables=");
}

/* ReadWritePaths= …: "[-][+]/PATH". */
static int add_access_list(struct namespace_plan **p, char **l, namespace_mode mode, const char *key) {
        for (; l && *l; l++) {
                bool optional;
                const char *path = unit_ns_path_prefixes(*l, &optional);
                if (namespace_plan_add(p, mode, path, optional, key) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* TemporaryFileSystem=: "/PATH[:OPTIONS]", tmpfs's defaults as systemd's (nodev, strictatime, mode=0755). */
static int add_temporary(struct namespace_plan **p, char **l) {
        static const struct { const char *name; unsigned long set, clear; } flags[] = {
                { "nosuid", MS_NOSUID, 0 }, { "suid", 0, MS_NOSUID },   { "nodev", MS_NODEV, 0 },
                { "dev", 0, MS_NODEV },     { "noexec", MS_NOEXEC, 0 }, { "exec", 0, MS_NOEXEC },
                { "strictatime", MS_STRICTATIME, 0 }, { "nostrictatime", 0, MS_STRICTATIME },
                { "noatime", MS_NOATIME, 0 }, { "relatime", MS_RELATIME, 0 },
        };
        for (; l && *l; l++) {
                _cleanup_free_ char *path = NULL, *opts = NULL;
                char data[1024] = "mode=0755";
                unsigned long f = MS_NODEV | MS_STRICTATIME;
                bool ro = false;
                if (unit_ns_split_colon(*l, &path, &opts) < 0)
                        return -ENOMEM;
                for (char *o = opts, *save = NULL, *t; o && (t = strtok_r(o, ",", &save)); o = NULL) {
                        bool flag = streq(t, "ro") || streq(t, "rw");
                        ro = streq(t, "ro") ? true : streq(t, "rw") ? false : ro;
                        for (size_t i = 0; i < ELEMENTSOF(flags); i++)
                                if (streq(t, flags[i].name)) {
                                        f = (f | flags[i].set) & ~flags[i].clear;
                                        flag = true;
                                }
                        if (!flag && strlen(data) + strlen(t) + 2 < sizeof data)
                                strcat(strcat(data, ","), t);
                }
                if (add_tmpfs(p, NAMESPACE_TMPFS, path, data, f, ro, false, "TemporaryFileSystem=") < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* BindPaths=: "[-]/SRC[:/DEST[:rbind|norbind]]". */
static int add_binds(struct namespace_plan **p, char **l, bool read_only) {
        const char *key = read_only ? "BindReadOnlyPaths=" : "BindPaths=";
        for (; l && *l; l++) {
                bool optional = **l == '-';
                _cleanup_free_ char *src = NULL, *rest = NULL, *dest = NULL, *opts = NULL;
                if (unit_ns_split_colon(*l + optional, &src, &rest) < 0 ||
                    (rest && unit_ns_split_colon(rest, &dest, &opts) < 0))
                        return -ENOMEM;
                bool recursive = !opts || !streq(opts, "norbind");
                struct namespace_mount *m = plan_push(p, recursive ? NAMESPACE_BIND_RECURSIVE : NAMESPACE_BIND,
                                                      dest ? dest : src, optional, key);
                if (!m)
                        return -ENOMEM;
                m->source = TAKE_PTR(src);
                m->read_only = read_only;
        }
        return 0;
}

/* ProtectProc=, ProcSubset=: a new procfs on /proc with hidepid= and subset=. */
static int add_procfs(struct namespace_plan **p, const struct unit_namespace_keys *n) {
        static const char *const hide[] = { NULL, "noaccess", "invisible", "ptraceable" };
        char data[64] = "";
        if (n->protect_proc)
                snprintf(data, sizeof data, "hidepid=%s", hide[n->protect_proc]);
        if (n->proc_subset_pid)
                strcat(data, *data ? ",subset=pid" : "subset=pid");
        return add_tmpfs(p, NAMESPACE_PROCFS, "/proc", data, MS_NOSUID | MS_NODEV | MS_NOEXEC, false, false,
                         n->protect_proc ? "ProtectProc=" : "ProcSubset=");
}

/* The unit's RuntimeDirectory=, StateDirectory=, CacheDirectory=, LogsDirectory=: writable (systemd). */
static int add_exec_dirs(struct namespace_plan **p, const struct unit_file *f) {
        static const unit_exec_dir types[] = { UNIT_EXEC_DIR_RUNTIME, UNIT_EXEC_DIR_STATE, UNIT_EXEC_DIR_CACHE,
                                               UNIT_EXEC_DIR_LOGS };
        const struct unit_exec_keys *e = unit_file_exec(f);
        for (size_t i = 0; i < ELEMENTSOF(types); i++) {
                _cleanup_free_ char *root = NULL;
                if (!e->directories[types[i]])
                        continue;
                int r = exec_dirs_root(types[i], geteuid(), &root);
                if (r < 0)
                        return r;
                for (char **d = e->directories[types[i]]; *d; d++) {
                        _cleanup_free_ char *path = NULL;
                        if (asprintf(&path, "%s/%s", root, *d) < 0 ||
                            namespace_plan_add(p, NAMESPACE_READ_WRITE, path, false, "ProtectSystem=") < 0)
                                return -ENOMEM;
                }
        }
        return 0;
}

static int add_keys(struct namespace_plan **p, const struct unit_file *f, const struct unit_namespace_keys *n) {
        int r = add_protect_system(p, n->protect_system);
        if (r >= 0)
                r = add_protect_home(p, n->protect_home);
        if (r >= 0 && n->private_tmp)
                r = add_tmpfs(p, NAMESPACE_PRIVATE_TMP, "/tmp", "mode=1777", MS_NOSUID | MS_NODEV | MS_STRICTATIME,
                              false, false, "PrivateTmp=") < 0 ||
                    add_tmpfs(p, NAMESPACE_PRIVATE_TMP, "/var/tmp", "mode=1777", MS_NOSUID | MS_NODEV | MS_STRICTATIME,
                              false, true, "PrivateTmp=") < 0 ? -ENOMEM : 0;
        if (r >= 0 && n->private_devices)
                r = add_tmpfs(p, NAMESPACE_PRIVATE_DEV, "/dev", "mode=0755,size=4m", MS_NOSUID | MS_NOEXEC | MS_STRICTATIME,
                              true, false, "PrivateDevices=");
        if (r >= 0 && n->protect_kernel_tunables)
                r = add_kernel_tunables(p);
        if (r >= 0 && n->protect_control_groups)
                r = namespace_plan_add(p, NAMESPACE_READ_ONLY, "/sys/fs/cgroup", false, "ProtectControlGroups=");
        if (r >= 0 && (n->protect_proc || n->proc_subset_pid))
                r = add_procfs(p, n);
        static const namespace_mode modes[] = { NAMESPACE_READ_WRITE, NAMESPACE_READ_ONLY, NAMESPACE_INACCESSIBLE,
                                                NAMESPACE_EXEC, NAMESPACE_NO_EXEC };
        static const char *const keys[] = { "ReadWritePaths=", "ReadOnlyPaths=", "InaccessiblePaths=", "ExecPaths=",
                                            "NoExecPaths=" };
        for (int i = 0; r >= 0 && i < 5; i++)
                r = add_access_list(p, n->lists[i], modes[i], keys[i]);
        if (r >= 0)
                r = add_temporary(p, n->lists[UNIT_NS_TEMPORARY]);
        if (r >= 0)
                r = add_binds(p, n->lists[UNIT_NS_BIND], false);
        if (r >= 0)
                r = add_binds(p, n->lists[UNIT_NS_BIND_READ_ONLY], true);
        if (r >= 0 && *p)
                r = add_exec_dirs(p, f);
        return r;
}

int namespace_plan_new(const char *unit, const struct unit_file *f, struct namespace_plan **ret) {
        const struct unit_namespace_keys *n = unit_file_namespace(f);
        _cleanup_(namespace_plan_freep) struct namespace_plan *p = NULL;
        (void) unit;
        *ret = NULL;
        if (!unit_namespace_wanted(n))
                return 0;
        if (plan_alloc(&p) < 0)
                return -ENOMEM;
        if (n->private_mounts)
                note_key(p, "PrivateMounts=");
        int r = add_keys(&p, f, n);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

/* ------------------------------------------------------------------------ */
/* The plan: merged, checked, and how it is made                             */
/* ------------------------------------------------------------------------ */

/* Whether path is strictly under parent. */
bool path_under(const char *path, const char *parent) {
        size_t n = strlen(parent);
        if (streq(parent, "/"))
                return path[1] != 0;
        return strncmp(path, parent, n) == 0 && path[n] == '/';
}

/* Path order, '/' below every other byte: a directory right before what is under it. */
static int path_compare(const char *a, const char *b) {
        for (; *a && *a == *b; a++, b++)
                ;
        unsigned char x = *a == '/' ? 1 : (unsigned char) *a, y = *b == '/' ? 1 : (unsigned char) *b;
        return x < y ? -1 : x > y;
}

static int mount_compare(const void *a, const void *b) {
        const struct namespace_mount *x = a, *y = b;
        int c = path_compare(x->path, y->path);
        return c ? c : (x->mode > y->mode) - (x->mode < y->mode);
}

/* Drops the mounts for which drop() holds, keeping the others' order. */
static void plan_filter(struct namespace_plan *p, bool (*drop)(const struct namespace_plan *p, size_t i)) {
        size_t o = 0;
        for (size_t i = 0; i < p->n_mounts; i++)
                if (drop(p, i))
                        p->mounts[i].key = NULL; /* marks it for the second loop */
        for (size_t i = 0; i < p->n_mounts; i++) {
                if (p->mounts[i].key)
                        p->mounts[o++] = p->mounts[i];
                else
                        mount_done(&p->mounts[i]);
        }
        p->n_mounts = o;
}

/* What an entry makes read-only, noexec, exec of its path (systemd 252's mount_entry_read_only() …). */
bool entry_read_only(const struct namespace_mount *m) {
        return m->read_only || m->mode == NAMESPACE_READ_ONLY || m->mode == NAMESPACE_INACCESSIBLE;
}

bool entry_no_exec(const struct namespace_mount *m) {
        return m->no_exec || m->mode == NAMESPACE_NO_EXEC || m->mode == NAMESPACE_INACCESSIBLE ||
               m->mode == NAMESPACE_PROCFS;
}

bool entry_exec(const struct namespace_mount *m) {
        return m->exec || m->mode == NAMESPACE_EXEC;
}

/* Gives each path's first entry (the lower mode won the sort; it is kept) the
 * read-only, noexec and exec of the others on the path (systemd 252's
 * drop_duplicates: ReadOnlyPaths=/tmp with PrivateTmp= is a read-only private
 * /tmp, a bind under ReadOnlyPaths= of its path read-only, NoExecPaths= beats
 * ExecPaths=). */
static void merge_duplicates(struct namespace_plan *p) {
        for (size_t i = 1, first = 0; i < p->n_mounts; i++) {
                const struct namespace_mount *m = &p->mounts[i];
                struct namespace_mount *kept = &p->mounts[first];
                if (!streq(kept->path, m->path)) {
                        first = i;
                        continue;
                }
                kept->read_only = kept->read_only || entry_read_only(m);
                kept->no_exec = kept->no_exec || entry_no_exec(m);
                kept->exec = kept->exec || entry_exec(m);
        }
}

/* ExecPaths=/NoExecPaths= change only the exec flag: an entry of theirs inside a
 * read-only tree (ProtectSystem=, ReadOnlyPaths=, ProtectHome=read-only…) stays
 * read-only, as the nearest entry above it says. Without this its bind, a copy of
 * the host's read-write mount, would keep the other keys' read-only step away from
 * it (redis-server's ExecPaths=/usr/lib under ProtectSystem=strict was writable).
 * Stricter than systemd 252, whose deny list leaves such a path writable. Entries
 * in path order, a directory before what is under it; after merge_duplicates(). */
static void inherit_read_only(struct namespace_plan *p) {
        for (size_t i = 0; i < p->n_mounts; i++) {
                struct namespace_mount *m = &p->mounts[i];
                if ((m->mode != NAMESPACE_EXEC && m->mode != NAMESPACE_NO_EXEC) || m->read_only)
                        continue;
                for (size_t j = i; j-- > 0;)
                        if (path_under(m->path, p->mounts[j].path)) {
                                m->read_only = entry_read_only(&p->mounts[j]);
                                break;
                        }
        }
}

/* The same path as the entry before it: merged into the first (merge_duplicates()). */
static bool is_duplicate(const struct namespace_plan *p, size_t i) {
        return i > 0 && streq(p->mounts[i - 1].path, p->mounts[i].path);
}

/* Under an inaccessible path: nothing there to mount on (systemd drops them too). */
static bool is_hidden(const struct namespace_plan *p, size_t i) {
        for (size_t j = 0; j < i; j++)
                if (p->mounts[j].mode == NAMESPACE_INACCESSIBLE && path_under(p->mounts[i].path, p->mounts[j].path))
                        return true;
        return false;
}

static bool makes_tree(namespace_mode m) {
        return m <= NAMESPACE_PROCFS || m == NAMESPACE_TMPFS;
}

/* A path that must exist on the host (not made by another entry): "UNIT: KEY PATH: error". */
static int check_paths(const char *unit, const struct namespace_plan *p) {
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct namespace_mount *m = &p->mounts[i];
                const char *path = m->source ? m->source : m->path;
                bool made = false;
                for (size_t j = 0; j < i && !made; j++)
                        made = makes_tree(p->mounts[j].mode) && path_under(m->path, p->mounts[j].path);
                struct stat st;
                if (m->optional || (made && !m->source) || stat(path, &st) >= 0)
                        continue;
                int e = errno;
                return log_error_errno(e, "%s: %s%s: %m (%s)", unit, m->key, path, strerrorname_np(e) ?: "?");
        }
        return 0;
}

static bool needs_inaccessible(const struct namespace_plan *p) {
        for (size_t i = 0; i < p->n_mounts; i++)
                if (p->mounts[i].mode == NAMESPACE_INACCESSIBLE)
                        return true;
        return false;
}

/* mkdir, an existing directory (not a link) accepted. */
static int mkdir_ok(const char *path, mode_t mode) {
        struct stat st;
        if (mkdir(path, mode) >= 0)
                return 0;
        if (errno != EEXIST)
                return negative_errno();
        if (lstat(path, &st) < 0)
                return negative_errno();
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* An empty mode-0000 regular file, an existing one (not a link) accepted:
 * opening it again with O_CREAT fails with EACCES for a non-root tend. */
static int make_empty_file(const char *path) {
        struct stat st;
        int fd = -1;
        for (int tries = 0; tries < 2 && fd < 0; tries++) { /* a second: made by another meanwhile */
                if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                        return S_ISREG(st.st_mode) ? 0 : -EEXIST;
                if (errno != ENOENT)
                        return negative_errno();
                fd = open(path, O_CREAT | O_EXCL | O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0);
                if (fd < 0 && errno != EEXIST)
                        return negative_errno();
        }
        if (fd < 0)
                return -EEXIST;
        safe_close(fd);
        return 0;
}

/* <runtime root>/tend/inaccessible/{dir,reg}: empty, mode 0000. */
static int make_inaccessible(const char *unit, struct namespace_plan *p) {
        _cleanup_free_ char *root = NULL, *tend = NULL, *base = NULL;
        int r = exec_dirs_root(UNIT_EXEC_DIR_RUNTIME, geteuid(), &root);
        if (r < 0)
                return log_error_errno(r, "%s: InaccessiblePaths=: no runtime directory for the inaccessible nodes: %m",
                                       unit);
        if (asprintf(&tend, "%s/tend", root) < 0 || asprintf(&base, "%s/inaccessible", tend) < 0 ||
            asprintf(&p->inaccessible_dir, "%s/dir", base) < 0 || asprintf(&p->inaccessible_reg, "%s/reg", base) < 0)
                return -ENOMEM;
        r = mkdir_ok(tend, 0755);
        if (r >= 0)
                r = mkdir_ok(base, 0755);
        if (r >= 0)
                r = mkdir_ok(p->inaccessible_dir, 0);
        if (r >= 0)
                r = make_empty_file(p->inaccessible_reg);
        if (r < 0)
                return log_error_errno(r, "%s: cannot make the inaccessible nodes in %s: %m", unit, base);
        return 0;
}

/* Whether this kernel lets an unprivileged process make a user namespace. */
static bool userns_allowed(void) {
        static const char *const knobs[] = { "/proc/sys/kernel/unprivileged_userns_clone",
                                             "/proc/sys/user/max_user_namespaces" };
        for (size_t i = 0; i < ELEMENTSOF(knobs); i++) {
                char buf[32] = {};
                int fd = open(knobs[i], O_RDONLY | O_CLOEXEC);
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
                safe_close(fd);
                if (n > 0 && atoi(buf) == 0)
                        return false;
        }
        return true;
}

static const char *drop_key; /* plan_filter()'s argument: the manager's thread only */
static bool has_drop_key(const struct namespace_plan *p, size_t i) {
        return streq(p->mounts[i].key, drop_key);
}

/* Each key through hardening_cannot_apply(): -EPERM, or the accepted keys' entries dropped. */
static int cannot_apply(const char *unit, const struct unit_file *f, struct namespace_plan *p, bool procfs_only,
                        const char *why) {
        for (size_t k = 0; k < p->n_keys; k++) {
                const char *key = p->keys[k];
                if (procfs_only && !streq(key, "ProtectProc=") && !streq(key, "ProcSubset="))
                        continue;
                int r = hardening_cannot_apply(unit, f, key, why);
                if (r < 0)
                        return r;
                drop_key = key;
                plan_filter(p, has_drop_key);
                p->keys[k--] = p->keys[--p->n_keys];
        }
        return 0;
}

static int plan_privileges(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                           struct namespace_plan *p) {
        struct sandbox_self own;
        if (!self) {
                int r = sandbox_self_get(&own);
                if (r < 0)
                        return log_error_errno(r, "%s: cannot read tend's credentials: %m", unit);
                self = &own;
        }
        if ((self->effective >> CAP_SYS_ADMIN) & 1)
                return 0;
        /* A user namespace of tend's own only for a non-root tend, whose units run as its
         * uid: root's units would be root in it, with every capability over the mount
         * namespace (and none on the host's network, no setgroups). */
        if (self->uid == 0 || !userns_allowed())
                return cannot_apply(unit, f, p, false, "needs a mount namespace: tend lacks CAP_SYS_ADMIN");
        p->user_namespace = true;
        snprintf(p->uid_map, sizeof p->uid_map, "%u %u 1\n", (unsigned) self->uid, (unsigned) self->uid);
        snprintf(p->gid_map, sizeof p->gid_map, "%u %u 1\n", (unsigned) self->gid, (unsigned) self->gid);
        return cannot_apply(unit, f, p, true, "needs a new /proc: tend lacks CAP_SYS_ADMIN");
}

/* Each existing path (and bind source) with its symbolic links resolved, as
 * systemd chases them: /var/run/x is /run/x, /lib is /usr/lib; a mount lands
 * where the link points, and two names of one directory are one entry. */
static bool path_in(const char *path, const char *dir) {
        return streq(path, dir) || path_under(path, dir);
}

static int canonicalize(const char *unit, struct namespace_plan *p) {
        char self[32];
        snprintf(self, sizeof self, "/proc/%d", (int) getpid());
        for (size_t i = 0; i < p->n_mounts; i++) {
                char **fields[] = { &p->mounts[i].path, &p->mounts[i].source };
                for (size_t k = 0; k < ELEMENTSOF(fields); k++) {
                        char *c = *fields[k] ? realpath(*fields[k], NULL) : NULL;
                        if (!c && *fields[k] && errno == ENOMEM)
                                return -ENOMEM;
                        /* resolved here, /proc/self is tend's process, not the unit's (QA's M4) */
                        const char *t = c ? c : *fields[k];
                        if (t && (path_in(t, self) || path_in(t, "/proc/self") || path_in(t, "/proc/thread-self"))) {
                                log_error("%s: %s%s: names a process's own /proc directory (/proc/self), which tend "
                                          "would resolve to its own: not supported", unit, p->mounts[i].key, *fields[k]);
                                free(c);
                                return -EINVAL;
                        }
                        if (!c)
                                continue;
                        free(*fields[k]);
                        *fields[k] = c;
                }
        }
        return 0;
}

static bool is_dev(const struct namespace_plan *p, size_t i) {
        return p->mounts[i].mode == NAMESPACE_PRIVATE_DEV;
}

int namespace_plan_finish(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                          struct namespace_plan **pp) {
        struct namespace_plan *p = *pp;
        if (!p)
                return 0;
        int r = canonicalize(unit, p);
        if (r < 0)
                return r;
        if (p->n_mounts > 0) /* qsort(NULL, 0, …) is undefined */
                qsort(p->mounts, p->n_mounts, sizeof *p->mounts, mount_compare);
        merge_duplicates(p);
        plan_filter(p, is_duplicate);
        plan_filter(p, is_hidden);
        inherit_read_only(p);
        r = plan_privileges(unit, f, self, p);
        if (r < 0)
                return r;
        if (p->n_keys == 0) {
                *pp = namespace_plan_free(p);
                return 0;
        }
        r = check_paths(unit, p);
        if (r >= 0 && needs_inaccessible(p))
                r = make_inaccessible(unit, p);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p->n_mounts; i++)
                p->private_dev = p->private_dev || is_dev(p, i);
        ssize_t n = p->private_dev ? readlink("/dev/log", p->dev_log, sizeof p->dev_log - 1) : -1;
        p->dev_log[n > 0 ? n : 0] = 0;
        return 0;
}

void namespace_plan_set_cwd(struct namespace_plan *p, const char *cwd) {
        if (!p)
                return;
        if (cwd)
                snprintf(p->working_directory, sizeof p->working_directory, "%s", cwd);
        else if (!getcwd(p->working_directory, sizeof p->working_directory))
                snprintf(p->working_directory, sizeof p->working_directory, "/");
}
