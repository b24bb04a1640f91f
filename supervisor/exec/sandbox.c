/* SPDX-License-Identifier: MIT */
/*
 * Sandboxing a unit's processes (sandbox.h): the plan computed before each
 * spawn, and the pre-exec hook that applies it. The values' vocabulary is
 * sandbox-values.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/seccomp.h>

#include "exec-dirs.h"
#include "hardening.h"
#include "libexit.h"
#include "log.h"
#include "sandbox-seccomp.h"
#include "namespace.h"
#include "sandbox-values-internal.h"
#include "sandbox.h"
#include "unit-exec.h"
#include "unit-file.h"
#include "unit-hardening.h"

/* 16-bit ids on some 32-bit ABIs: the 32-bit calls take gid_t/uid_t. */
#ifdef SYS_setgroups32
#define SYS_SETGROUPS SYS_setgroups32
#define SYS_SETRESGID SYS_setresgid32
#define SYS_SETRESUID SYS_setresuid32
#else
#define SYS_SETGROUPS SYS_setgroups
#define SYS_SETRESGID SYS_setresgid
#define SYS_SETRESUID SYS_setresuid
#endif

/* ------------------------------------------------------------------------ */
/* tend's own credentials                                                    */
/* ------------------------------------------------------------------------ */

static bool has_cap(uint64_t mask, int cap) {
        return (mask >> cap) & 1;
}

int sandbox_self_get(struct sandbox_self *ret) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {};
        if (syscall(SYS_capget, &h, d) < 0)
                return negative_errno();
        struct sandbox_self s = {
                .uid = geteuid(),
                .gid = getegid(),
                .effective = d[0].effective | (uint64_t) d[1].effective << 32,
                .permitted = d[0].permitted | (uint64_t) d[1].permitted << 32,
        };
        for (unsigned c = 0; c < sandbox_cap_count(); c++)
                if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) > 0)
                        s.bounding |= CAP_BIT(c);
        for (int i = 0; i < SANDBOX_RLIMIT_MAX; i++)
                if (getrlimit(i, &s.limits[i]) < 0)
                        return negative_errno();
        *ret = s;
        return 0;
}

/* ------------------------------------------------------------------------ */
/* The plan: users and groups                                                */
/* ------------------------------------------------------------------------ */

static int needs_privileges(const char *unit, const char *key) {
        return log_error_errno(EPERM, "%s: %s needs privileges tend lacks (EPERM)", unit, key);
}

/* A numeric id: all digits, below (id_t) -1 (the "no change" value). */
static bool parse_id(const char *s, uint32_t *ret) {
        uint64_t v;
        if (sandbox_parse_u64(s, strlen(s), &v) < 0 || v >= UINT32_MAX)
                return false;
        *ret = (uint32_t) v;
        return true;
}

struct user_info {
        bool found;   /* in the user database */
        uid_t uid;
        gid_t gid;
        char *name, *home, *shell;
};

static void user_info_done(struct user_info *u) {
        free(u->name);
        free(u->home);
        free(u->shell);
}

/* getpwnam_r/getpwuid_r with a growing buffer: 1 found, 0 not, or a negative errno. */
static int lookup_passwd(const char *name, uid_t uid, struct user_info *ret) {
        size_t size = 1024;
        for (;;) {
                _cleanup_free_ char *buf = malloc(size);
                struct passwd pw, *res = NULL;
                if (!buf)
                        return -ENOMEM;
                int e = name ? getpwnam_r(name, &pw, buf, size, &res) : getpwuid_r(uid, &pw, buf, size, &res);
                if (e == ERANGE && size < 1024 * 1024) {
                        size *= 4;
                        continue;
                }
                if (e && e != ENOENT && e != ESRCH)
                        return -e;
                if (!res)
                        return 0;
                *ret = (struct user_info) { true, pw.pw_uid, pw.pw_gid, strdup(pw.pw_name), strdup(pw.pw_dir),
                                            strdup(pw.pw_shell && *pw.pw_shell ? pw.pw_shell : "/bin/sh") };
                if (!ret->name || !ret->home || !ret->shell) {
                        user_info_done(ret);
                        return -ENOMEM;
                }
                return 1;
        }
}

/* getgrnam_r/getgrgid_r: 1 found (*ret_gid), 0 not, or a negative errno. */
static int lookup_group(const char *name, gid_t gid, gid_t *ret_gid) {
        size_t size = 1024;
        for (;;) {
                _cleanup_free_ char *buf = malloc(size);
                struct group gr, *res = NULL;
                if (!buf)
                        return -ENOMEM;
                int e = name ? getgrnam_r(name, &gr, buf, size, &res) : getgrgid_r(gid, &gr, buf, size, &res);
                if (e == ERANGE && size < 1024 * 1024) {
                        size *= 4;
                        continue;
                }
                if (e && e != ENOENT && e != ESRCH)
                        return -e;
                if (res)
                        *ret_gid = gr.gr_gid;
                return res ? 1 : 0;
        }
}

/* User=: a name, or a numeric uid (with or without a database entry). */
static int resolve_user(const char *unit, const char *user, struct user_info *ret) {
        char q[64];
        uint32_t id;
        bool numeric = parse_id(user, &id);
        int r = lookup_passwd(numeric ? NULL : user, numeric ? id : 0, ret);
        if (r < 0)
                return log_error_errno(r, "%s: User=%s: %m", unit, user);
        if (r > 0)
                return 0;
        if (!numeric)
                return log_error_errno(ESRCH, "%s: User=%s: no such user", unit, user);
        /* A uid without an entry (a container's arbitrary uid): its number stands for its name. */
        snprintf(q, sizeof q, "%u", id);
        *ret = (struct user_info) { false, id, id, strdup(q), strdup("/"), strdup("/bin/sh") };
        if (!ret->name || !ret->home || !ret->shell)
                return -ENOMEM;
        return 0;
}

/* Group=, SupplementaryGroups=: a name, or a numeric gid (with or without an entry). */
static int resolve_group(const char *unit, const char *key, const char *group, gid_t *ret) {
        uint32_t id;
        if (parse_id(group, &id)) {
                *ret = id;
                return 0;
        }
        int r = lookup_group(group, 0, ret);
        if (r < 0)
                return log_error_errno(r, "%s: %s=%s: %m", unit, key, group);
        if (r == 0)
                return log_error_errno(ESRCH, "%s: %s=%s: no such group", unit, key, group);
        return 0;
}

static int groups_add(struct sandbox_plan *p, gid_t g) {
        for (size_t i = 0; i < p->n_groups; i++)
                if (p->groups[i] == g)
                        return 0;
        gid_t *v = realloc(p->groups, (p->n_groups + 1) * sizeof *v);
        if (!v)
                return -ENOMEM;
        p->groups = v;
        p->groups[p->n_groups++] = g;
        return 0;
}

/* The user's groups in the group database (initgroups' list: the primary one included). */
static int user_groups(const struct user_info *u, struct sandbox_plan *p) {
        if (!u->found)
                return groups_add(p, u->gid);
        int n = 64;
        for (;;) {
                _cleanup_free_ gid_t *list = malloc((size_t) n * sizeof *list);
                int got = n;
                if (!list)
                        return -ENOMEM;
                if (getgrouplist(u->name, u->gid, list, &got) < 0) {
                        if (got <= n || n > 65536)
                                return -EINVAL;
                        n = got;
                        continue;
                }
                for (int i = 0; i < got; i++)
                        if (groups_add(p, list[i]) < 0)
                                return -ENOMEM;
                return 0;
        }
}

/* USER, LOGNAME, HOME, SHELL (SPEC §3), then Environment=, which may override them. */
static int user_environment(const struct user_info *u, char *const *environment, char ***ret) {
        size_t n = 0;
        while (environment && environment[n])
                n++;
        char **v = calloc(n + 5, sizeof *v);
        if (!v)
                return -ENOMEM;
        if (asprintf(&v[0], "USER=%s", u->name) < 0 || asprintf(&v[1], "LOGNAME=%s", u->name) < 0 ||
            asprintf(&v[2], "HOME=%s", u->home) < 0 || asprintf(&v[3], "SHELL=%s", u->shell) < 0)
                goto oom;
        for (size_t i = 0; i < n; i++)
                if (!(v[4 + i] = strdup(environment[i])))
                        goto oom;
        *ret = v;
        return 0;
oom:
        strv_free(v);
        return -ENOMEM;
}

/* The home of tend's own user, for WorkingDirectory=~ without User=. */
static int own_home(const struct sandbox_self *self, char **ret) {
        struct user_info u = {};
        int r = lookup_passwd(NULL, self->uid, &u);
        if (r < 0)
                return r;
        *ret = strdup(r > 0 ? u.home : "/");
        user_info_done(&u);
        return *ret ? 0 : -ENOMEM;
}

static int plan_supplementary(const char *unit, const struct unit_file *f, struct sandbox_plan *p) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        for (char **g = sb->supplementary_groups; g && *g; g++) {
                gid_t gid;
                int r = resolve_group(unit, "SupplementaryGroups", *g, &gid);
                if (r < 0)
                        return r;
                if (groups_add(p, gid) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* User=, Group=, SupplementaryGroups=, and what follows from User=: its
 * environment and home (SPEC §3). */
static int plan_credentials(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                            struct sandbox_plan *p) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        struct user_info u = {};
        bool supplementary = sb->supplementary_groups && sb->supplementary_groups[0];
        int r = 0;
        if (sb->user)
                r = resolve_user(unit, sb->user, &u);
        if (r >= 0 && sb->group)
                r = resolve_group(unit, "Group", sb->group, &p->gid);
        else if (r >= 0 && sb->user)
                p->gid = u.gid;
        if (r >= 0 && sb->user)
                r = user_groups(&u, p);
        if (r >= 0)
                r = plan_supplementary(unit, f, p);
        if (r >= 0 && sb->user) {
                r = user_environment(&u, f->environment, &p->environment);
                p->environment_owned = r >= 0;
        }
        if (r >= 0 && f->working_directory_home)
                r = sb->user ? ((p->home = strdup(u.home)) ? 0 : -ENOMEM) : own_home(self, &p->home);
        p->uid = u.uid;
        p->set_uid = sb->user;
        p->set_gid = sb->user || sb->group;
        p->set_groups = sb->user || supplementary;
        p->gid_stage = sb->group ? SANDBOX_STAGE_SETGID : SANDBOX_STAGE_SETGID_USER;
        p->groups_stage = supplementary ? SANDBOX_STAGE_SETGROUPS : SANDBOX_STAGE_SETGROUPS_USER;
        user_info_done(&u);
        return r;
}

/* SPEC §1: an unprivileged tend runs units as itself; asking for another
 * user or group fails the start before the fork. */
static int check_credentials(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                             struct sandbox_plan *p) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        bool setuid_ok = has_cap(self->effective, CAP_SETUID), setgid_ok = has_cap(self->effective, CAP_SETGID);
        bool supplementary = sb->supplementary_groups && sb->supplementary_groups[0];
        if (p->set_uid && !setuid_ok) {
                if (p->uid != self->uid)
                        return needs_privileges(unit, "User=");
                p->set_uid = false; /* already that user */
        }
        if (p->set_gid && !setgid_ok) {
                if (p->gid != self->gid)
                        return needs_privileges(unit, sb->group ? "Group=" : "User=");
                p->set_gid = false;
        }
        if (p->set_groups && !setgid_ok) {
                if (supplementary)
                        return needs_privileges(unit, "SupplementaryGroups=");
                p->set_groups = false; /* tend's own groups, as its own user */
        }
        return 0;
}

/* ------------------------------------------------------------------------ */
/* The plan: limits, capabilities                                            */
/* ------------------------------------------------------------------------ */

/* /proc/sys/fs/nr_open: LimitNOFILE=infinity means this (as in systemd). */
static rlim_t nr_open(void) {
        char buf[32] = {};
        int fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        safe_close(fd);
        uint64_t v;
        return n > 0 && sandbox_parse_u64(buf, strcspn(buf, "\n"), &v) >= 0 ? (rlim_t) v : 1024 * 1024;
}

/* Limit*= as the child asks for it (LimitNOFILE=infinity: nr_open). */
static struct rlimit wanted_limit(const struct unit_sandbox_keys *sb, int i) {
        struct rlimit rl = sb->limits[i].rl;
        if (i == RLIMIT_NOFILE) {
                rlim_t max = nr_open();
                rl.rlim_cur = rl.rlim_cur == RLIM_INFINITY ? max : rl.rlim_cur;
                rl.rlim_max = rl.rlim_max == RLIM_INFINITY ? max : rl.rlim_max;
        }
        return rl;
}

/* The child sets each limit, or the closest value the hard limit allows
 * (systemd's setrlimit_closest): never a refusal here (sandbox_start_notices()). */
static int plan_limits(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                       struct sandbox_plan *p) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        for (int i = 0; i < SANDBOX_RLIMIT_MAX; i++) {
                if (!sb->limits[i].set)
                        continue;
                p->limits[p->n_limits].resource = i;
                p->limits[p->n_limits++].rl = wanted_limit(sb, i);
        }
        return 0;
}

static void caps_data(uint32_t d[6], uint64_t effective, uint64_t permitted, uint64_t inheritable) {
        /* struct __user_cap_data_struct[2]: { effective, permitted, inheritable } × low/high words */
        d[0] = (uint32_t) effective, d[1] = (uint32_t) permitted, d[2] = (uint32_t) inheritable;
        d[3] = (uint32_t) (effective >> 32), d[4] = (uint32_t) (permitted >> 32), d[5] = (uint32_t) (inheritable >> 32);
}

/* Whether every uid becomes non-zero from a process with a zero one: the
 * kernel then clears the ambient set (and, without keep-caps, the permitted). */
static bool drops_root(const struct sandbox_self *self, const struct sandbox_plan *p) {
        return self->uid == 0 && p->set_uid && p->uid != 0;
}

static int plan_capabilities(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                             struct sandbox_plan *p) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        uint64_t all = sandbox_capability_all();
        p->cap_last = sandbox_cap_count() - 1;
        p->bounding_drop = self->bounding & ~sb->capability_bounding_set & all;
        if (p->bounding_drop && !has_cap(self->effective, CAP_SETPCAP))
                return needs_privileges(unit, "CapabilityBoundingSet=");
        p->ambient = sb->ambient_capabilities & all;
        if (p->ambient & ~(self->permitted & self->bounding & ~p->bounding_drop))
                return needs_privileges(unit, "AmbientCapabilities=");
        if (!p->ambient)
                return 0;
        caps_data(p->caps_before, self->effective, self->permitted, p->ambient);
        p->keep_caps = p->ambient_again = drops_root(self, p);
        caps_data(p->caps_after, p->ambient, p->ambient, p->ambient);
        return 0;
}

/* ------------------------------------------------------------------------ */
/* The plan                                                                  */
/* ------------------------------------------------------------------------ */

struct sandbox_plan *sandbox_plan_free(struct sandbox_plan *p) {
        if (!p)
                return NULL;
        if (p->environment_owned)
                strv_free(p->environment);
        free(p->home);
        free(p->groups);
        sandbox_hardening_free(p->hardening); /* seccomp */
        namespace_plan_free(p->ns); /* ns */
        free(p);
        return NULL;
}

/* Whether f asks for anything checked against tend's own credentials: a
 * unit without sandboxing keys costs its spawn no system call here. */
static bool needs_self(const struct unit_file *f) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        if (sb->user || sb->group || sb->supplementary_groups || f->working_directory_home || sb->ambient_capabilities ||
            sb->capability_bounding_set != UINT64_MAX || sb->syscall_filter.set || sb->hardening)
                return true;
        for (int i = 0; i < SANDBOX_RLIMIT_MAX; i++)
                if (sb->limits[i].set)
                        return true;
        return false;
}

/* Whether the kernel has ambient capabilities (Linux ≥ 4.3): '!!' is then no prefix at all. */
static bool ambient_supported(void) {
        return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 0, 0, 0) >= 0;
}

/* The sandbox a command's prefixes leave out (systemd.service(5) "COMMAND LINES"). */
static void plan_prefixes(unsigned cmd_flags, struct sandbox_plan *p) {
        bool no_setuid = cmd_flags & (UNIT_COMMAND_FULL_PRIVILEGES | UNIT_COMMAND_NO_SETUID) ||
                         (cmd_flags & UNIT_COMMAND_AMBIENT_MAGIC && !ambient_supported());
        if (no_setuid)
                p->set_uid = p->set_gid = p->set_groups = false;
}

/* The directories' variables under the unit's Environment= (which may override them, as in systemd). */
static int plan_directories(const char *unit, const struct unit_file *f, struct sandbox_plan *p) {
        if (!exec_dirs_any(f))
                return 0;
        char **env = NULL;
        int r = exec_dirs_environment(f, &env);
        if (r >= 0 && (p->environment_owned ? p->environment : f->environment))
                r = unit_env_merge(&env, p->environment_owned ? p->environment : f->environment);
        if (r < 0) {
                strv_free(env);
                return r == -ENXIO ? log_error_errno(r, "%s: the directories have no root: $XDG_RUNTIME_DIR or $HOME "
                                                     "is not set", unit) : r;
        }
        if (p->environment_owned)
                strv_free(p->environment);
        p->environment = env;
        p->environment_owned = true;
        return 0;
}

/* Nice=, OOMScoreAdjust=, the schedulers, CPUAffinity=, StandardInput=tty*: for the child. */
static void plan_process(const struct unit_file *f, struct sandbox_plan *p) {
        const struct unit_exec_keys *e = unit_file_exec(f);
        p->tty_force = e->standard_input == UNIT_INPUT_TTY_FORCE ? 1
                     : e->standard_input == UNIT_INPUT_TTY || e->standard_input == UNIT_INPUT_TTY_FAIL ? 0 : -1;
        if ((p->oom_set = e->oom_score_adjust_set))
                snprintf(p->oom_text, sizeof p->oom_text, "%d", e->oom_score_adjust);
        p->nice_set = e->nice_set, p->nice = e->nice;
        p->sched_set = e->cpu_sched_set;
        p->sched_policy = e->cpu_sched_policy | (e->cpu_sched_reset_on_fork ? SCHED_RESET_ON_FORK : 0);
        p->sched_priority = e->cpu_sched_priority;
        if ((p->affinity_set = e->cpu_affinity_set))
                memcpy(p->affinity, e->cpu_affinity, sizeof p->affinity);
        p->ioprio_set = e->io_set;
        p->ioprio = e->io_class << 13 | (e->io_class == 3 || e->io_class == 0 ? 0 : e->io_priority);
}

static bool plan_has_process(const struct sandbox_plan *p) {
        return p->tty_force >= 0 || p->oom_set || p->nice_set || p->sched_set || p->affinity_set || p->ioprio_set;
}

/* The mount parts of the seccomp keys ProtectKernelModules= and ProtectKernelLogs= (systemd.exec(5)). */
static int plan_implied_mounts(const struct unit_file *f, struct namespace_plan **ns) {
        const struct unit_hardening_keys *h = unit_file_sandbox(f)->hardening;
        int r = 0;
        if (h && h->protect_kernel_modules)
                r = namespace_plan_add(ns, NAMESPACE_INACCESSIBLE, "/usr/lib/modules", true, "ProtectKernelModules=");
        if (r >= 0 && h && h->protect_kernel_logs)
                r = namespace_plan_add(ns, NAMESPACE_INACCESSIBLE, "/proc/kmsg", true, "ProtectKernelLogs=");
        if (r >= 0 && h && h->protect_kernel_logs)
                r = namespace_plan_add(ns, NAMESPACE_INACCESSIBLE, "/dev/kmsg", true, "ProtectKernelLogs=");
        return r;
}

/* keyring: KeyringMode=, resolved (unit-hardening.h); after the credentials (set_uid). */
static int plan_keyring(const char *unit, const struct unit_file *f, struct sandbox_plan *p) {
        enum unit_keyring_mode m = unit_keyring_mode(f);
        if (m != UNIT_KEYRING_INHERIT && !unit_keyring_available()) {
                int r = hardening_cannot_apply(unit, f, "KeyringMode=",
                                               "keyctl(2) is missing or denied here (a seccomp policy?)");
                if (r < 0)
                        return r;
                m = UNIT_KEYRING_INHERIT;
        }
        p->keyring = (unsigned char) m;
        p->keyring_in_hook = m != UNIT_KEYRING_INHERIT && p->set_uid;
        return 0;
}

int sandbox_plan_new(const char *unit, const struct unit_file *f, unsigned cmd_flags, const struct sandbox_self *self,
                     struct sandbox_plan **ret) {
        if (!unit || !f || !ret)
                return -EINVAL;
        struct sandbox_self own = {};
        if (!self && !needs_self(f))
                self = &own; /* unread: nothing below compares against it */
        if (!self) {
                int r = sandbox_self_get(&own);
                if (r < 0)
                        return log_error_errno(r, "%s: cannot read tend's credentials: %m", unit);
                self = &own;
        }
        _cleanup_(sandbox_plan_freep) struct sandbox_plan *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        bool full = cmd_flags & UNIT_COMMAND_FULL_PRIVILEGES;
        int r = plan_credentials(unit, f, self, p);
        plan_prefixes(cmd_flags, p);
        if (r >= 0)
                r = check_credentials(unit, f, self, p);
        if (r >= 0)
                r = plan_limits(unit, f, self, p);
        if (r >= 0 && !full)
                r = plan_capabilities(unit, f, self, p);
        if (r >= 0)
                r = plan_keyring(unit, f, p); /* keyring */
        bool sys_admin = has_cap(drops_root(self, p) ? p->ambient : self->effective, CAP_SYS_ADMIN);
        if (r >= 0 && !full) {
                p->no_new_privs = unit_file_sandbox(f)->no_new_privileges;
                r = sandbox_seccomp_plan(unit, f, sys_admin, p);
        }
        if (r >= 0 && !full) /* seccomp (issue 17): after the capabilities, whose bounding set it extends */
                r = sandbox_hardening_plan(unit, f, self, sys_admin, p);
        if (r >= 0)
                r = plan_directories(unit, f, p);
        if (r >= 0 && !full) /* ns: the mount namespace */
                r = namespace_plan_new(unit, f, &p->ns);
        if (r >= 0 && !full) /* other keys' implied mounts */
                r = plan_implied_mounts(f, &p->ns);
        if (r >= 0 && !full)
                r = namespace_plan_finish(unit, f, NULL, &p->ns);
        if (r < 0)
                return r;
        plan_process(f, p);
        if (!p->environment_owned)
                p->environment = f->environment; /* borrowed */
        p->working_directory = f->working_directory_home ? p->home : f->working_directory;
        p->hook = p->n_limits || p->bounding_drop || p->ambient || p->set_groups || p->set_gid || p->set_uid ||
                  p->no_new_privs || p->seccomp_filter || plan_has_process(p) || p->hardening || p->ns;
        *ret = TAKE_PTR(p);
        return 0;
}

int sandbox_owner(const char *unit, const struct unit_file *f, uid_t *ret_uid, gid_t *ret_gid) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        struct user_info u = {};
        uid_t uid = geteuid();
        gid_t gid = getegid();
        int r = 0;
        if (sb->user && (r = resolve_user(unit, sb->user, &u)) >= 0)
                uid = u.uid, gid = u.gid;
        if (r >= 0 && sb->group)
                r = resolve_group(unit, "Group", sb->group, &gid);
        user_info_done(&u);
        if (r < 0)
                return r;
        *ret_uid = uid;
        *ret_gid = gid;
        return 0;
}

/* tend's own /proc/self/oom_score_adj, or 0. */
static int own_oom_score_adj(void) {
        char buf[16] = {};
        int fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        safe_close(fd);
        return n > 0 ? atoi(buf) : 0;
}

void sandbox_start_notices(const char *unit, const struct unit_file *f) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        const struct unit_exec_keys *e = unit_file_exec(f);
        struct sandbox_self self;
        if (sandbox_self_get(&self) < 0)
                return;
        bool resource_ok = has_cap(self.effective, CAP_SYS_RESOURCE);
        for (int i = 0; i < SANDBOX_RLIMIT_MAX; i++) {
                if (!sb->limits[i].set)
                        continue;
                struct rlimit rl = wanted_limit(sb, i);
                rlim_t hard = self.limits[i].rlim_max;
                bool over = (rl.rlim_max > hard && !resource_ok) || (i == RLIMIT_NOFILE && rl.rlim_max > nr_open());
                char want[24] = "infinity"; /* as written: never RLIM_INFINITY's number */
                if (rl.rlim_max != RLIM_INFINITY)
                        snprintf(want, sizeof want, "%llu", (unsigned long long) rl.rlim_max);
                if (over && hard != RLIM_INFINITY)
                        log_notice("%s: %s%s is above the hard limit tend may set: the closest value, %llu, is used",
                                   unit, sandbox_rlimit_key_eq(i), want, (unsigned long long) hard);
        }
        if (e->oom_score_adjust_set && !resource_ok && e->oom_score_adjust < own_oom_score_adj())
                log_notice("%s: OOMScoreAdjust=%d: tend may not lower the OOM score adjustment (no CAP_SYS_RESOURCE): "
                           "skipped, as systemd does in a container", unit, e->oom_score_adjust);
}

void sandbox_plan_apply(struct sandbox_plan *p, struct exit_spawn_attr *a) {
        if (!p || !a)
                return;
        if (p->keyring != UNIT_KEYRING_INHERIT && !p->keyring_in_hook) /* keyring: libexit's, no hook */
                a->flags |= p->keyring == UNIT_KEYRING_SHARED ? EXIT_SPAWN_SESSION_KEYRING_SHARED
                                                              : EXIT_SPAWN_SESSION_KEYRING;
        if (!p->hook)
                return;
        p->pdeath_signal = a->pdeath_signal;
        p->parent = getpid();
        namespace_plan_set_cwd(p->ns, a->cwd); /* ns */
        a->pre_exec = sandbox_pre_exec;
        a->pre_exec_userdata = p;
}

/* ------------------------------------------------------------------------ */
/* The child: async-signal-safe only                                         */
/* ------------------------------------------------------------------------ */

static int set_caps(const uint32_t data[6]) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {
                { .effective = data[0], .permitted = data[1], .inheritable = data[2] },
                { .effective = data[3], .permitted = data[4], .inheritable = data[5] },
        };
        return (int) syscall(SYS_capset, &h, d);
}

/* The inheritable set from data, then each ambient capability raised (it
 * must be in both the permitted and the inheritable set). */
static int raise_ambient(const struct sandbox_plan *p, const uint32_t data[6]) {
        if (set_caps(data) < 0)
                return -1;
        for (unsigned c = 0; c <= p->cap_last; c++)
                if ((p->ambient >> c) & 1 && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0)
                        return -1;
        return 0;
}

#define FAIL(stage)                                      \
        do {                                             \
                *ret_stage = EXIT_STAGE_HOOK + (stage);  \
                return errno > 0 ? -errno : -EIO;        \
        } while (0)

/* setrlimit, or on EPERM the closest value the hard limit allows (systemd's setrlimit_closest). */
static int set_limit_closest(int resource, const struct rlimit *rl) {
        if (setrlimit(resource, rl) >= 0)
                return 0;
        struct rlimit cur;
        if (errno != EPERM || getrlimit(resource, &cur) < 0)
                return -1;
        if (cur.rlim_max == RLIM_INFINITY) {
                errno = EPERM;
                return -1;
        }
        struct rlimit fixed = { MIN(rl->rlim_cur, cur.rlim_max), MIN(rl->rlim_max, cur.rlim_max) };
        return setrlimit(resource, &fixed);
}

/* OOMScoreAdjust=: a refusal by privilege is skipped (systemd: "assuming containerized execution"). */
static int set_oom(const struct sandbox_plan *p) {
        int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == EACCES || errno == EPERM ? 0 : -1;
        ssize_t n = write(fd, p->oom_text, strlen(p->oom_text));
        int e = errno;
        close(fd);
        errno = e;
        return n >= 0 || e == EACCES || e == EPERM ? 0 : -1;
}

/* The process keys, in systemd's order (exec_child): terminal, OOM, nice, scheduler, affinity, I/O. */
static int apply_process(const struct sandbox_plan *p, int *ret_stage) {
        if (p->tty_force >= 0 && ioctl(STDIN_FILENO, TIOCSCTTY, p->tty_force) < 0)
                FAIL(SANDBOX_STAGE_TTY);
        if (p->oom_set && set_oom(p) < 0)
                FAIL(SANDBOX_STAGE_OOM);
        if (p->nice_set && setpriority(PRIO_PROCESS, 0, p->nice) < 0)
                FAIL(SANDBOX_STAGE_NICE);
        struct sched_param sp = { .sched_priority = p->sched_priority };
        if (p->sched_set && syscall(SYS_sched_setscheduler, 0, p->sched_policy, &sp) < 0)
                FAIL(SANDBOX_STAGE_SCHED);
        if (p->affinity_set && syscall(SYS_sched_setaffinity, 0, sizeof p->affinity, p->affinity) < 0)
                FAIL(SANDBOX_STAGE_AFFINITY);
        if (p->ioprio_set && syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0, p->ioprio) < 0)
                FAIL(SANDBOX_STAGE_IOPRIO);
        return 0;
}

/* keyring: a new session keyring of the (new) uid; shared: its user keyring linked in. */
static int join_keyring(const struct sandbox_plan *p) {
        if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, 0L, 0L, 0L, 0L) < 0)
                return -1;
        if (p->keyring == UNIT_KEYRING_SHARED &&
            syscall(SYS_keyctl, KEYCTL_LINK, (long) KEY_SPEC_USER_KEYRING, (long) KEY_SPEC_SESSION_KEYRING, 0L, 0L) < 0)
                return -1;
        return 0;
}

int sandbox_pre_exec(void *userdata, int *ret_stage) {
        const struct sandbox_plan *p = userdata;
        int r = apply_process(p, ret_stage);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p->n_limits; i++)
                if (set_limit_closest(p->limits[i].resource, &p->limits[i].rl) < 0)
                        FAIL(SANDBOX_STAGE_LIMIT + p->limits[i].resource);
        /* The namespaces (issue 17), before the credentials and capabilities: the mount
         * namespace, then network, IPC, UTS; the user namespace (PrivateUsers=) first when
         * tend lacks CAP_SYS_ADMIN, else last (systemd 252's order; sandbox-seccomp.h). */
        if ((r = sandbox_userns_step(p->hardening, false, ret_stage)) < 0)
                return r;
        int key;
        if (p->ns && (r = namespace_pre_exec(p->ns, &key)) < 0) {
                *ret_stage = EXIT_STAGE_HOOK + SANDBOX_STAGE_NAMESPACE + key;
                return r;
        }
        if ((r = sandbox_namespaces_step(p->hardening, ret_stage)) < 0)
                return r;
        if ((r = sandbox_userns_step(p->hardening, true, ret_stage)) < 0)
                return r;
        for (unsigned c = 0; p->bounding_drop && c <= p->cap_last; c++)
                if ((p->bounding_drop >> c) & 1 && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
                        FAIL(SANDBOX_STAGE_BOUNDING);
        if (p->ambient && raise_ambient(p, p->caps_before) < 0)
                FAIL(SANDBOX_STAGE_AMBIENT);
        if (p->keep_caps && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
                FAIL(SANDBOX_STAGE_KEEPCAPS);
        if (p->set_groups && syscall(SYS_SETGROUPS, p->n_groups, p->groups) < 0)
                FAIL(p->groups_stage);
        if (p->set_gid && syscall(SYS_SETRESGID, p->gid, p->gid, p->gid) < 0)
                FAIL(p->gid_stage);
        if (p->set_uid && syscall(SYS_SETRESUID, p->uid, p->uid, p->uid) < 0)
                FAIL(SANDBOX_STAGE_SETUID);
        if (p->ambient_again && raise_ambient(p, p->caps_after) < 0)
                FAIL(SANDBOX_STAGE_AMBIENT_AGAIN);
        if (p->pdeath_signal && (p->set_uid || p->set_gid)) {
                if (prctl(PR_SET_PDEATHSIG, p->pdeath_signal, 0, 0, 0) < 0)
                        FAIL(SANDBOX_STAGE_PDEATHSIG);
                if (getppid() != p->parent) {
                        errno = ESRCH; /* the parent died before the signal was armed again */
                        FAIL(SANDBOX_STAGE_PDEATHSIG);
                }
        }
        if (p->keyring_in_hook && join_keyring(p) < 0) /* keyring: the unit user's own */
                FAIL(SANDBOX_STAGE_KEYRING);
        if (p->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                FAIL(SANDBOX_STAGE_NO_NEW_PRIVS);
        if ((r = sandbox_hardening_seccomp_step(p->hardening, ret_stage)) < 0) /* seccomp (issue 17) */
                return r;
        if (p->seccomp_filter) {
                struct sock_fprog prog = { .len = p->seccomp_len, .filter = p->seccomp_filter };
                if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
                        FAIL(SANDBOX_STAGE_SECCOMP);
        }
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Failures, for the parent                                                  */
/* ------------------------------------------------------------------------ */

bool sandbox_stage_describe(int stage, const char **ret_key, const char **ret_step) {
        static const struct {
                const char *key, *step;
        } stages[] = {
                [SANDBOX_STAGE_BOUNDING] = { "CapabilityBoundingSet=", "PR_CAPBSET_DROP" },
                [SANDBOX_STAGE_AMBIENT] = { "AmbientCapabilities=", "capset, PR_CAP_AMBIENT_RAISE" },
                [SANDBOX_STAGE_KEEPCAPS] = { "AmbientCapabilities=", "PR_SET_KEEPCAPS" },
                [SANDBOX_STAGE_SETGROUPS] = { "SupplementaryGroups=", "setgroups" },
                [SANDBOX_STAGE_SETGROUPS_USER] = { "User=", "setgroups" },
                [SANDBOX_STAGE_SETGID] = { "Group=", "setresgid" },
                [SANDBOX_STAGE_SETGID_USER] = { "User=", "setresgid" },
                [SANDBOX_STAGE_SETUID] = { "User=", "setresuid" },
                [SANDBOX_STAGE_AMBIENT_AGAIN] = { "AmbientCapabilities=",
                                                  "capset, PR_CAP_AMBIENT_RAISE after the uid change" },
                [SANDBOX_STAGE_PDEATHSIG] = { "User=", "PR_SET_PDEATHSIG after the uid change" },
                [SANDBOX_STAGE_NO_NEW_PRIVS] = { "NoNewPrivileges=", "PR_SET_NO_NEW_PRIVS" },
                [SANDBOX_STAGE_SECCOMP] = { "SystemCallFilter=", "PR_SET_SECCOMP" },
                [SANDBOX_STAGE_TTY] = { "StandardInput=", "TIOCSCTTY" },
                [SANDBOX_STAGE_OOM] = { "OOMScoreAdjust=", "writing /proc/self/oom_score_adj" },
                [SANDBOX_STAGE_NICE] = { "Nice=", "setpriority" },
                [SANDBOX_STAGE_SCHED] = { "CPUSchedulingPolicy=", "sched_setscheduler" },
                [SANDBOX_STAGE_AFFINITY] = { "CPUAffinity=", "sched_setaffinity" },
                [SANDBOX_STAGE_IOPRIO] = { "IOSchedulingClass=", "ioprio_set" },
                /* seccomp (issue 17) */
                [SANDBOX_STAGE_USERNS] = { "PrivateUsers=", "unshare(CLONE_NEWUSER)" },
                [SANDBOX_STAGE_USERNS_MAP] = { "PrivateUsers=", "writing uid_map and gid_map" },
                [SANDBOX_STAGE_NETNS] = { "PrivateNetwork=", "unshare(CLONE_NEWNET)" },
                [SANDBOX_STAGE_LOOPBACK] = { "PrivateNetwork=", "bringing up lo" },
                [SANDBOX_STAGE_IPCNS] = { "PrivateIPC=", "unshare(CLONE_NEWIPC)" },
                [SANDBOX_STAGE_UTSNS] = { "ProtectHostname=", "unshare(CLONE_NEWUTS)" },
                [SANDBOX_STAGE_HARDENING_SECCOMP] = { "RestrictAddressFamilies=/RestrictNamespaces=/…",
                                                      "PR_SET_SECCOMP" },
                [SANDBOX_STAGE_KEYRING] = { "KeyringMode=", "keyctl(KEYCTL_JOIN_SESSION_KEYRING) after the uid change" },
        };
        int s = stage - EXIT_STAGE_HOOK;
        const char *key = NULL, *step = NULL;
        if (stage == EXIT_STAGE_KEYRING) { /* keyring: libexit's join */
                key = "KeyringMode=", step = "keyctl(KEYCTL_JOIN_SESSION_KEYRING)";
        } else if (s >= SANDBOX_STAGE_LIMIT && s < _SANDBOX_STAGE_END) {
                key = sandbox_rlimit_key_eq(s - SANDBOX_STAGE_LIMIT), step = "setrlimit";
        } else if (s >= SANDBOX_STAGE_NAMESPACE && s < _SANDBOX_STAGE_NAMESPACE_END) { /* ns */
                key = namespace_key_name(s - SANDBOX_STAGE_NAMESPACE), step = "setting up the mount namespace";
        } else if (s > 0 && (size_t) s < ELEMENTSOF(stages) && stages[s].key)
                key = stages[s].key, step = stages[s].step;
        if (!key)
                return false;
        if (ret_key)
                *ret_key = key;
        if (ret_step)
                *ret_step = step;
        return true;
}

void sandbox_log_exec_failure(const char *unit, int error, int stage) {
        const char *key, *step, *name;
        if (error >= 0 || !sandbox_stage_describe(stage, &key, &step))
                return;
        name = strerrorname_np(-error);
        (void) log_error_errno(error, "%s: %s %s failed: %m (%s)", unit, key, step, name ? name : "?");
}
