/* SPDX-License-Identifier: MIT */
/*
 * Condition*= and Assert*= evaluated (condition.h): the list rule, the
 * checks of paths, identities, the kernel's command line and version,
 * os-release, memory and CPUs. The checks that detect the machine's
 * virtualization, firmware, security modules, CPU features, power, cgroup
 * controllers and pressure are in condition-machine.c.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "condition-internal.h"
#include "condition-syntax.h"
#include "log.h"
#include "macro.h"
#include "sandbox-values.h"
#include "unit-specifiers.h"

extern char **environ;

/* systemd's SYSTEM_UID_MAX as Debian builds it (login.defs' SYS_UID_MAX). */
#define SYSTEM_UID_MAX 999

const char *cond_path(const struct condition_env *env, const char *path, char *buf, size_t size) {
        const char *root = env && env->root && *env->root ? env->root : "";
        snprintf(buf, size, "%s%s", root, path);
        return buf;
}

ssize_t cond_read(const struct condition_env *env, const char *path, char *buf, size_t size) {
        char p[PATH_MAX];
        int fd = open(cond_path(env, path, p, sizeof p), O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        size_t n = 0;
        while (n + 1 < size) {
                ssize_t k = read(fd, buf + n, size - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        int e = -errno;
                        close(fd);
                        return e;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        close(fd);
        buf[n] = 0;
        return (ssize_t) n;
}

/* ---- paths (the unit's own, never moved under env->root) ---- */

static int path_is_mount_point(const char *path) {
        struct statx sx;
        if (statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &sx) < 0)
                return 0;
        if (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
                return !!(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
        /* Older kernels: another device than the parent's, or the root. */
        char parent[PATH_MAX];
        struct stat a, b;
        snprintf(parent, sizeof parent, "%s/..", path);
        if (stat(path, &a) < 0 || stat(parent, &b) < 0)
                return 0;
        return a.st_dev != b.st_dev || a.st_ino == b.st_ino;
}

/* A directory with an entry other than ".", "..", hidden files and backups
 * (systemd's dir_is_empty() with its ignore list). */
static int directory_not_empty(const char *path) {
        DIR *d = opendir(path);
        if (!d)
                return 0;
        int found = 0;
        for (struct dirent *e; !found && (e = readdir(d));) {
                size_t n = strlen(e->d_name);
                bool hidden = e->d_name[0] == '.' || (n > 0 && e->d_name[n - 1] == '~');
                static const char *const backup[] = { ".rpmnew", ".rpmsave", ".rpmorig", ".dpkg-old", ".dpkg-new",
                                                      ".dpkg-dist", ".dpkg-bak", ".dpkg-backup", ".dpkg-remove",
                                                      ".ucf-new", ".ucf-old", ".ucf-dist", ".swp", ".bak",
                                                      ".old", ".new" };
                for (size_t i = 0; !hidden && i < ELEMENTSOF(backup); i++) {
                        size_t m = strlen(backup[i]);
                        hidden = n > m && streq(e->d_name + n - m, backup[i]);
                }
                found = !hidden;
        }
        closedir(d);
        return found;
}

static int glob_exists(const char *pattern) {
        glob_t g = {};
        int r = glob(pattern, GLOB_NOSORT | GLOB_BRACE, NULL, &g);
        bool any = r == 0 && g.gl_pathc > 0;
        globfree(&g);
        return r == GLOB_NOSPACE ? -ENOMEM : any;
}

static int test_path(const struct unit_condition *c) {
        const char *p = c->parameter;
        struct stat st;
        struct statvfs sv;
        switch (c->type) {
        case UNIT_CONDITION_PATH_EXISTS:
                return access(p, F_OK) >= 0;
        case UNIT_CONDITION_PATH_EXISTS_GLOB:
                return glob_exists(p);
        case UNIT_CONDITION_PATH_IS_DIRECTORY:
                return stat(p, &st) >= 0 && S_ISDIR(st.st_mode);
        case UNIT_CONDITION_PATH_IS_SYMBOLIC_LINK:
                return lstat(p, &st) >= 0 && S_ISLNK(st.st_mode);
        case UNIT_CONDITION_PATH_IS_MOUNT_POINT:
                return path_is_mount_point(p);
        case UNIT_CONDITION_PATH_IS_READ_WRITE:
                return statvfs(p, &sv) >= 0 && !(sv.f_flag & ST_RDONLY);
        case UNIT_CONDITION_DIRECTORY_NOT_EMPTY:
                return directory_not_empty(p);
        case UNIT_CONDITION_FILE_NOT_EMPTY:
                return stat(p, &st) >= 0 && S_ISREG(st.st_mode) && st.st_size > 0;
        case UNIT_CONDITION_FILE_IS_EXECUTABLE:
                return stat(p, &st) >= 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
        default:
                return -EINVAL;
        }
}

/* ---- identities ---- */

static int test_user(const char *v) {
        uid_t uid = getuid(), euid = geteuid();
        if (streq(v, "@system"))
                return uid <= SYSTEM_UID_MAX || euid <= SYSTEM_UID_MAX;
        char *end;
        errno = 0;
        unsigned long id = strtoul(v, &end, 10);
        if (*v && !*end && !errno && id < (uid_t) -1)
                return id == uid || id == euid;
        struct passwd *pw = getpwnam(v);
        return pw && (pw->pw_uid == uid || pw->pw_uid == euid);
}

static int in_gid(gid_t g) {
        if (g == getgid() || g == getegid())
                return 1;
        int n = getgroups(0, NULL);
        if (n <= 0)
                return n < 0 ? -errno : 0;
        _cleanup_free_ gid_t *l = calloc((size_t) n, sizeof *l);
        if (!l)
                return -ENOMEM;
        n = getgroups(n, l);
        for (int i = 0; i < n; i++)
                if (l[i] == g)
                        return 1;
        return n < 0 ? -errno : 0;
}

static int test_group(const char *v) {
        char *end;
        errno = 0;
        unsigned long id = strtoul(v, &end, 10);
        if (*v && !*end && !errno && id < (gid_t) -1)
                return in_gid((gid_t) id);
        struct group *gr = getgrnam(v);
        return gr ? in_gid(gr->gr_gid) : 0;
}

/* ---- words of the machine ---- */

/* A word of the kernel's command line, or a NAME= assignment's left side. */
static bool word_matches(const char *word, const char *v) {
        if (strchr(v, '='))
                return streq(word, v);
        size_t n = strlen(v);
        return strncmp(word, v, n) == 0 && (word[n] == 0 || word[n] == '=');
}

static int test_kernel_command_line(const struct condition_env *env, const char *v) {
        static char buf[64 * 1024]; /* single-threaded: tend's loop */
        bool container;
        (void) cond_detect_virtualization(env, &container);
        /* In a container, PID 1's command line stands for the kernel's (systemd.unit(5)). */
        ssize_t n = cond_read(env, container ? "/proc/1/cmdline" : "/proc/cmdline", buf, sizeof buf);
        if (n < 0)
                return (int) n;
        if (container) {
                for (size_t i = 0; i < (size_t) n; i += strlen(buf + i) + 1)
                        if (word_matches(buf + i, v))
                                return 1;
                return 0;
        }
        for (const char *p = buf;;) {
                _cleanup_free_ char *w = NULL;
                int r = unit_extract_word(&p, EXTRACT_UNQUOTE | EXTRACT_RELAX, &w, NULL);
                if (r <= 0)
                        return r;
                if (word_matches(w, v))
                        return 1;
        }
}

static int test_environment(const struct condition_env *env, const char *v) {
        char **e = env && env->environ ? env->environ : environ;
        for (; e && *e; e++)
                if (word_matches(*e, v))
                        return 1;
        return 0;
}

static int test_host(const struct condition_env *env, const char *v) {
        char buf[256], id[33] = "";
        size_t j = 0;
        for (const char *p = v; *p && j < 33; p++)
                if (*p != '-')
                        id[j++] = (char) tolower((unsigned char) *p);
        if (j == 32 && strspn(id, "0123456789abcdef") == 32 && strlen(v) <= 36) {
                id[32] = 0;
                ssize_t n = cond_read(env, "/etc/machine-id", buf, sizeof buf);
                if (n < 0)
                        return (int) n;
                return strncmp(buf, id, 32) == 0;
        }
        ssize_t n = cond_read(env, "/proc/sys/kernel/hostname", buf, sizeof buf);
        if (n < 0)
                return (int) n;
        buf[strcspn(buf, "\n")] = 0;
        return fnmatch(v, buf, FNM_CASEFOLD) == 0;
}

/* ---- versions, os-release, sizes ---- */

static int expr_version(const char *key, enum condition_op op, const char *expected, void *userdata) {
        return condition_op_compare(op, userdata, expected);
}

static int test_kernel_version(const struct condition_env *env, const char *v) {
        char release[256];
        ssize_t n = cond_read(env, "/proc/sys/kernel/osrelease", release, sizeof release);
        if (n < 0)
                return (int) n;
        release[strcspn(release, "\n")] = 0;
        return condition_expressions(v, false, expr_version, release);
}

static int expr_os_release(const char *key, enum condition_op op, const char *expected, void *userdata) {
        char value[512];
        unit_os_release_value(userdata, key, value, sizeof value);
        return condition_op_compare(op, value, expected);
}

static int test_os_release(const struct condition_env *env, const char *v) {
        static char text[16 * 1024];
        ssize_t n = cond_read(env, "/etc/os-release", text, sizeof text);
        if (n == -ENOENT)
                n = cond_read(env, "/usr/lib/os-release", text, sizeof text);
        if (n < 0)
                return (int) n;
        return condition_expressions(v, true, expr_os_release, text);
}

/* Memory for this system: MemTotal, or the cgroup's limit if lower (a container's). */
static int physical_memory(const struct condition_env *env, uint64_t *ret) {
        char buf[4096];
        ssize_t n = cond_read(env, "/proc/meminfo", buf, sizeof buf);
        if (n < 0)
                return (int) n;
        const char *m = strstr(buf, "MemTotal:");
        if (!m)
                return -EIO;
        uint64_t kib = strtoull(m + strlen("MemTotal:"), NULL, 10), limit;
        *ret = kib * 1024;
        if (cond_read(env, "/sys/fs/cgroup/memory.max", buf, sizeof buf) > 0 &&
            condition_parse_size(strtok(buf, "\n"), &limit) == 0 && limit < *ret)
                *ret = limit;
        return 0;
}

static int test_amount(const struct condition_env *env, unit_condition_type t, const char *v) {
        const char *p = v;
        int op = condition_op_parse(&p, 0);
        if (op < 0)
                op = CONDITION_OP_GE; /* no operator: at least */
        uint64_t have, want;
        if (t == UNIT_CONDITION_MEMORY) {
                int r = physical_memory(env, &have);
                if (r < 0 || (r = condition_parse_size(p, &want)) < 0)
                        return r;
        } else {
                cpu_set_t set;
                if (sched_getaffinity(0, sizeof set, &set) < 0)
                        return -errno;
                have = (uint64_t) CPU_COUNT(&set);
                want = strtoull(p + strspn(p, " \t"), NULL, 10);
        }
        return condition_op_holds((enum condition_op) op, have < want ? -1 : have > want);
}

/* ---- the dispatch and the list ---- */

static int test_capability(const struct condition_env *env, const char *v) {
        char buf[4096];
        int cap = sandbox_capability_from_name(v);
        if (cap < 0)
                return -EINVAL;
        ssize_t n = cond_read(env, "/proc/self/status", buf, sizeof buf);
        if (n < 0)
                return (int) n;
        const char *b = strncmp(buf, "CapBnd:", 7) == 0 ? buf : strstr(buf, "\nCapBnd:");
        if (!b)
                return -EIO;
        return (strtoull(strchr(b, ':') + 1, NULL, 16) >> cap) & 1;
}

static int test_raw(const struct condition_env *env, const struct unit_condition *c) {
        const char *v = c->parameter;
        int b;
        switch (c->type) {
        case UNIT_CONDITION_ARCHITECTURE:
                return cond_architecture(v);
        case UNIT_CONDITION_FIRMWARE:
                return cond_firmware(env, v);
        case UNIT_CONDITION_VIRTUALIZATION:
                return cond_virtualization(env, v);
        case UNIT_CONDITION_HOST:
                return test_host(env, v);
        case UNIT_CONDITION_KERNEL_COMMAND_LINE:
                return test_kernel_command_line(env, v);
        case UNIT_CONDITION_KERNEL_VERSION:
                return test_kernel_version(env, v);
        case UNIT_CONDITION_CREDENTIAL:
                return 0; /* tend is passed no credentials */
        case UNIT_CONDITION_ENVIRONMENT:
                return test_environment(env, v);
        case UNIT_CONDITION_SECURITY:
                return cond_security(env, v);
        case UNIT_CONDITION_CAPABILITY:
                return test_capability(env, v);
        case UNIT_CONDITION_AC_POWER:
                return cond_ac_power(env, v);
        case UNIT_CONDITION_NEEDS_UPDATE:
                return 0; /* no update is pending */
        case UNIT_CONDITION_FIRST_BOOT:
                b = condition_parse_boolean(v);
                return b < 0 ? b : b == 0; /* this is not the first boot */
        case UNIT_CONDITION_PATH_IS_ENCRYPTED:
                return cond_path_is_encrypted(env, v);
        case UNIT_CONDITION_USER:
                return test_user(v);
        case UNIT_CONDITION_GROUP:
                return test_group(v);
        case UNIT_CONDITION_CONTROL_GROUP_CONTROLLER:
                return cond_control_group_controller(env, v);
        case UNIT_CONDITION_MEMORY:
        case UNIT_CONDITION_CPUS:
                return test_amount(env, c->type, v);
        case UNIT_CONDITION_CPU_FEATURE:
                return cond_cpu_feature(v);
        case UNIT_CONDITION_OS_RELEASE:
                return test_os_release(env, v);
        case UNIT_CONDITION_MEMORY_PRESSURE:
        case UNIT_CONDITION_CPU_PRESSURE:
        case UNIT_CONDITION_IO_PRESSURE:
                return cond_pressure(env, c->type, v);
        default:
                return test_path(c);
        }
}

int condition_test(const struct condition_env *env, const struct unit_condition *c) {
        int r = test_raw(env, c);
        if (r < 0)
                return r;
        return (r > 0) != c->negate;
}

void condition_format(const struct unit_condition *c, char *buf, size_t size) {
        snprintf(buf, size, "%s%s=%s%s%s", c->is_assert ? "Assert" : "Condition", unit_condition_type_name(c->type),
                 c->trigger ? "|" : "", c->negate ? "!" : "", c->parameter);
}

int condition_list_test(const struct condition_env *env, const struct unit_conditions *l, bool asserts,
                        const char *unit, const char *path, const struct unit_condition **ret_failed) {
        const struct unit_condition *first_trigger = NULL;
        bool any_trigger_held = false;
        for (size_t i = 0; l && i < l->n; i++) {
                const struct unit_condition *c = &l->items[i];
                if (c->is_assert != asserts)
                        continue;
                int r = condition_test(env, c);
                if (r < 0) {
                        char text[512];
                        condition_format(c, text, sizeof text);
                        log_warning_errno(r, "%s: %s:%u: cannot determine %s, assuming it failed: %m", unit, path,
                                          c->line, text);
                }
                if (!c->trigger && r <= 0) {
                        *ret_failed = c;
                        return 0;
                }
                if (c->trigger) {
                        first_trigger = first_trigger ? first_trigger : c;
                        any_trigger_held = any_trigger_held || r > 0;
                }
        }
        if (first_trigger && !any_trigger_held) {
                *ret_failed = first_trigger;
                return 0;
        }
        return 1;
}
