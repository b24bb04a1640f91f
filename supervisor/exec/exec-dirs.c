/* SPDX-License-Identifier: MIT */
/*
 * A unit's directories (exec-dirs.h): the roots, the walk that makes them
 * with openat(2), ownership, the variables, removal at stop.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec-dirs.h"
#include "log.h"
#include "unit-exec.h"
#include "unit-specifiers.h"

#define TREE_DEPTH_MAX 64 /* the recursive chown and removal stop descending here */

static const char *const dir_keys[_UNIT_EXEC_DIR_MAX] = {
        "RuntimeDirectory", "StateDirectory", "CacheDirectory", "LogsDirectory", "ConfigurationDirectory",
};
static const char *const dir_vars[_UNIT_EXEC_DIR_MAX] = {
        "RUNTIME_DIRECTORY", "STATE_DIRECTORY", "CACHE_DIRECTORY", "LOGS_DIRECTORY", "CONFIGURATION_DIRECTORY",
};

/* ---- roots ---- */

/* The roots are the specifiers' too (%t %S %C %L %E): one definition. */
int exec_dirs_root(unit_exec_dir t, uid_t euid, char **ret) {
        return unit_dir_root(t, euid, ret);
}

bool exec_dirs_any(const struct unit_file *f) {
        const struct unit_exec_keys *e = unit_file_exec(f);
        for (int t = 0; t < _UNIT_EXEC_DIR_MAX; t++)
                if (e->directories[t] && e->directories[t][0])
                        return true;
        return false;
}

/* ---- the walk ---- */

/* The directory name in at: not following a link unless root or tend owns it. */
static int open_dir_at(int at, const char *name) {
        int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 || (errno != ELOOP && errno != ENOTDIR))
                return fd >= 0 ? fd : negative_errno();
        struct stat st;
        if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        if (!S_ISLNK(st.st_mode))
                return -ENOTDIR;
        if (st.st_uid != 0 && st.st_uid != geteuid())
                return -ELOOP; /* a link another user controls */
        fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd >= 0 ? fd : negative_errno();
}

/* Opens the absolute path (with create, making what is missing: parents 0755,
 * the leaf leaf_mode); *ret_made says the leaf was made now. */
static int open_path(const char *path, bool create, mode_t leaf_mode, int *ret_fd, bool *ret_made) {
        _cleanup_close_ int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *copy = strdup(path);
        if (fd < 0 || !copy)
                return fd < 0 ? negative_errno() : -ENOMEM;
        bool made = false;
        char *save = NULL;
        for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                bool leaf = !save || !*save || save[strspn(save, "/")] == 0;
                made = create && mkdirat(fd, c, leaf ? leaf_mode : 0755) >= 0;
                if (create && !made && errno != EEXIST)
                        return negative_errno();
                int next = open_dir_at(fd, c);
                if (next < 0)
                        return next;
                safe_close(fd);
                fd = next;
        }
        *ret_fd = TAKE_FD(fd);
        *ret_made = made;
        return 0;
}

/* Chowns the tree under dir (an fd it takes), never following a link. */
static int chown_tree(int dir, uid_t uid, gid_t gid, unsigned depth) {
        DIR *d = fdopendir(dir);
        if (!d) {
                safe_close(dir);
                return negative_errno();
        }
        int r = 0;
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fchownat(dirfd(d), de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = negative_errno();
                        break;
                }
                if (de->d_type != DT_DIR || depth >= TREE_DEPTH_MAX)
                        continue;
                int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = sub < 0 ? negative_errno() : chown_tree(sub, uid, gid, depth + 1);
        }
        closedir(d);
        return r;
}

/* The leaf's mode and owner (systemd 252: the tree is chowned only when the leaf's owner differs). */
static int fix_leaf(int fd, mode_t mode, bool chown, uid_t uid, gid_t gid) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)
                return negative_errno();
        if (!chown || (st.st_uid == uid && st.st_gid == gid))
                return 0;
        if (fchown(fd, uid, gid) < 0)
                return negative_errno();
        int sub = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return sub < 0 ? negative_errno() : chown_tree(sub, uid, gid, 0);
}

static int setup_one(const char *unit, unit_exec_dir t, const char *root, const char *name, mode_t mode, bool chown,
                     uid_t uid, gid_t gid) {
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/%s", root, name) < 0)
                return -ENOMEM;
        int fd = -1;
        bool made = false;
        int r = open_path(path, true, mode, &fd, &made);
        if (r >= 0 && t == UNIT_EXEC_DIR_CONFIGURATION && !made) {
                struct stat st;
                if (fstat(fd, &st) >= 0 && (st.st_mode & 07777) != mode)
                        log_warning("%s: %s=: %s exists with mode %04o, not %04o: left as it is", unit, dir_keys[t],
                                    path, st.st_mode & 07777, mode);
        } else if (r >= 0) /* systemd.exec(5): ConfigurationDirectory= stays root's, not User='s */
                r = fix_leaf(fd, mode, chown && t != UNIT_EXEC_DIR_CONFIGURATION, uid, gid);
        safe_close(fd);
        if (r < 0 && r != -ENOMEM) {
                const char *n = strerrorname_np(-r);
                return log_error_errno(r, "%s: %s=: cannot create %s: %m (%s)", unit, dir_keys[t], path, n ? n : "?");
        }
        return r;
}

int exec_dirs_setup(const char *unit, const struct unit_file *f, uid_t owner, gid_t group) {
        const struct unit_exec_keys *e = unit_file_exec(f);
        uid_t euid = geteuid();
        for (int t = 0; t < _UNIT_EXEC_DIR_MAX; t++) {
                if (!e->directories[t] || !e->directories[t][0])
                        continue;
                _cleanup_free_ char *root = NULL;
                int r = exec_dirs_root(t, euid, &root);
                static const char *const vars[_UNIT_EXEC_DIR_MAX] = {
                        "$XDG_RUNTIME_DIR is not set", "neither $XDG_STATE_HOME nor $HOME is set",
                        "neither $XDG_CACHE_HOME nor $HOME is set", "neither $XDG_STATE_HOME nor $HOME is set",
                        "neither $XDG_CONFIG_HOME nor $HOME is set" };
                if (r == -ENXIO)
                        return log_error_errno(r, "%s: %s=: no root for it: %s", unit, dir_keys[t], vars[t]);
                if (r < 0)
                        return r;
                for (char **n = e->directories[t]; *n; n++)
                        if ((r = setup_one(unit, t, root, *n, e->directory_modes[t], euid == 0, owner, group)) < 0)
                                return r;
        }
        return 0;
}

/* ---- variables ---- */

int exec_dirs_environment(const struct unit_file *f, char ***envp) {
        const struct unit_exec_keys *e = unit_file_exec(f);
        for (int t = 0; t < _UNIT_EXEC_DIR_MAX; t++) {
                if (!e->directories[t] || !e->directories[t][0])
                        continue;
                _cleanup_free_ char *root = NULL;
                int r = exec_dirs_root(t, geteuid(), &root);
                if (r < 0)
                        return r;
                struct unit_buf b = {};
                r = unit_buf_put(&b, dir_vars[t], strlen(dir_vars[t]));
                for (char **n = e->directories[t]; r >= 0 && *n; n++) {
                        r = unit_buf_putc(&b, n == e->directories[t] ? '=' : ':');
                        if (r >= 0)
                                r = unit_buf_put(&b, root, strlen(root));
                        if (r >= 0)
                                r = unit_buf_putc(&b, '/');
                        if (r >= 0)
                                r = unit_buf_put(&b, *n, strlen(*n));
                }
                _cleanup_free_ char *s = unit_buf_take(&b);
                if (r < 0 || !s)
                        return -ENOMEM;
                r = unit_env_set(envp, s);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- removal ---- */

/* Removes everything under dir (an fd it takes), never following a link. */
static int remove_tree(int dir, unsigned depth) {
        DIR *d = fdopendir(dir);
        if (!d) {
                safe_close(dir);
                return negative_errno();
        }
        int r = 0;
        for (struct dirent *de; (de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (unlinkat(dirfd(d), de->d_name, 0) >= 0)
                        continue;
                if (errno != EISDIR && errno != EPERM) {
                        r = negative_errno();
                        continue;
                }
                int sub = depth < TREE_DEPTH_MAX ? openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
                int k = sub < 0 ? -ENOTEMPTY : remove_tree(sub, depth + 1);
                if (k >= 0 && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0)
                        k = negative_errno();
                if (k < 0)
                        r = k;
        }
        closedir(d);
        return r;
}

static void remove_one(const char *unit, const char *root, const char *name) {
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/%s", root, name) < 0)
                return;
        /* The parent is opened as the walk does; the leaf itself is never followed. */
        char *slash = strrchr(path, '/');
        *slash = 0;
        int parent = -1, r = 0;
        bool made;
        r = open_path(path, false, 0, &parent, &made);
        *slash = '/';
        if (r >= 0) {
                int fd = openat(parent, slash + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = fd < 0 ? negative_errno() : remove_tree(fd, 0);
                if (r >= 0 && unlinkat(parent, slash + 1, AT_REMOVEDIR) < 0)
                        r = negative_errno();
        }
        safe_close(parent);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "%s: RuntimeDirectory=: cannot remove %s: %m", unit, path);
}

void exec_dirs_remove_runtime(const char *unit, const struct unit_file *f, bool restarting) {
        const struct unit_exec_keys *e = unit_file_exec(f);
        char **names = e->directories[UNIT_EXEC_DIR_RUNTIME];
        if (!names || e->runtime_directory_preserve == UNIT_PRESERVE_YES ||
            (restarting && e->runtime_directory_preserve == UNIT_PRESERVE_RESTART))
                return;
        _cleanup_free_ char *root = NULL;
        if (exec_dirs_root(UNIT_EXEC_DIR_RUNTIME, geteuid(), &root) < 0)
                return;
        for (char **n = names; *n; n++)
                remove_one(unit, root, *n);
}
