/* SPDX-License-Identifier: MIT */
/*
 * Sandboxing a unit's processes (SPEC §1 "Unprivileged", §3; issue 9): User=,
 * Group=, SupplementaryGroups=, WorkingDirectory=~, Limit*=, NoNewPrivileges=,
 * CapabilityBoundingSet=, AmbientCapabilities=, SystemCallFilter=,
 * SystemCallErrorNumber=. (UMask= is libexit's attr.umask.) The reference for
 * users is docs/tend.service.5.md "SANDBOXING".
 *
 * Two halves:
 *  - the vocabulary of the values, for the unit-file parser: capability names
 *    (libcap), system-call names and tend's groups (libseccomp), errno names,
 *    resource limits. Pure and thread-safe; its own header, sandbox-values.h,
 *    which unit-file.h includes (this header reads unit files).
 *  - a plan, computed before each spawn (STYLE.md "Reserve before fork"): the
 *    ids and groups resolved now (getpwnam_r, getgrnam_r, getgrouplist), the
 *    capability sets, the seccomp BPF program exported by libseccomp, and the
 *    privilege checks an unprivileged tend needs (SPEC §1). The child then
 *    runs sandbox_pre_exec() as libexit's pre-exec hook: system calls only.
 *
 * The child's order (each step only when the unit asks for it), after
 * libexit's own set-up (umask, session, fds, chdir) and the process keys:
 *   0. the namespaces (issue 17): the mount namespace, then network, IPC,
 *      UTS (sandbox-ns.c); the user namespace (PrivateUsers=) before them
 *      when tend lacks CAP_SYS_ADMIN, after them when it has it (systemd
 *      252's order: a new /proc for ProtectProc= then works);
 *   1. setrlimit, each Limit*=;
 *   1b. ns: the mount namespace (namespace.h: namespace_pre_exec());
 *   2. PR_CAPBSET_DROP, each capability not in CapabilityBoundingSet=;
 *   3. capset with inheritable = AmbientCapabilities=, then
 *      PR_CAP_AMBIENT_RAISE each;
 *   4. PR_SET_KEEPCAPS, so the permitted set survives the uid change;
 *   5. setgroups, setresgid, setresuid (raw system calls: a child of clone3
 *      must not run glibc's set*id broadcast to its parent's threads);
 *   6. capset (effective = permitted = inheritable = ambient) and
 *      PR_CAP_AMBIENT_RAISE each again: the kernel cleared the ambient set
 *      when every uid became non-zero;
 *   7. PR_SET_PDEATHSIG again if the spawn asked for one (a credential change
 *      clears it), then the parent checked;
 *   7b. keyring: with a uid change and KeyringMode= other than inherit, a new
 *      session keyring joined (owned by the unit's user; with shared, its user
 *      keyring linked in); without a uid change libexit joins it before the
 *      hook (EXIT_SPAWN_SESSION_KEYRING), and a unit with no other key needs
 *      no hook;
 *   8. PR_SET_NO_NEW_PRIVS;
 *   9. PR_SET_SECCOMP with the hardening keys' programs (issue 17,
 *      sandbox-seccomp.c), then with SystemCallFilter='s — last: after it come only
 *      libexit's sigprocmask and execve, which tend never lets a filter deny.
 * A failing step ends the child before the exec (it never runs half
 * sandboxed); its stage code names the key (sandbox_stage_describe()).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "macro.h"
#include "sandbox-values.h"
#include "unit-file.h"

struct exit_spawn_attr;
struct namespace_plan;
struct unit_file;

/* ------------------------------------------------------------------------ */
/* The plan of one spawn                                                     */
/* ------------------------------------------------------------------------ */

/* tend's own credentials, as the plan's privilege checks see them: a seam for tests. */
struct sandbox_self {
        uid_t uid; /* effective */
        gid_t gid;
        uint64_t effective, permitted, bounding; /* capability masks */
        struct rlimit limits[SANDBOX_RLIMIT_MAX];
};

/* Reads the calling process's credentials into *ret. Returns 0 or a negative errno. */
int sandbox_self_get(struct sandbox_self *ret);

/* Stage codes the hook reports (EXIT_STAGE_HOOK + one of these). */
enum {
        SANDBOX_STAGE_BOUNDING = 1,
        SANDBOX_STAGE_AMBIENT,
        SANDBOX_STAGE_KEEPCAPS,
        SANDBOX_STAGE_SETGROUPS,      /* SupplementaryGroups= */
        SANDBOX_STAGE_SETGROUPS_USER, /* User='s groups alone */
        SANDBOX_STAGE_SETGID,         /* Group= */
        SANDBOX_STAGE_SETGID_USER,    /* User='s primary group */
        SANDBOX_STAGE_SETUID,
        SANDBOX_STAGE_AMBIENT_AGAIN,
        SANDBOX_STAGE_PDEATHSIG,
        SANDBOX_STAGE_NO_NEW_PRIVS,
        SANDBOX_STAGE_SECCOMP,
        /* exec (issue 16): the process keys, before the limits */
        SANDBOX_STAGE_TTY,
        SANDBOX_STAGE_OOM,
        SANDBOX_STAGE_NICE,
        SANDBOX_STAGE_SCHED,
        SANDBOX_STAGE_AFFINITY,
        SANDBOX_STAGE_IOPRIO,
        /* seccomp (issue 17): the non-mount namespaces, the hardening keys' programs (sandbox-seccomp.h) */
        SANDBOX_STAGE_USERNS,
        SANDBOX_STAGE_USERNS_MAP,
        SANDBOX_STAGE_NETNS,
        SANDBOX_STAGE_LOOPBACK,
        SANDBOX_STAGE_IPCNS,
        SANDBOX_STAGE_UTSNS,
        SANDBOX_STAGE_HARDENING_SECCOMP,
        /* keyring: KeyringMode= after the uid change (libexit's EXIT_STAGE_KEYRING without one) */
        SANDBOX_STAGE_KEYRING,
        SANDBOX_STAGE_LIMIT = 32, /* + the resource */
        _SANDBOX_STAGE_END = SANDBOX_STAGE_LIMIT + SANDBOX_RLIMIT_MAX,
        /* ns: the mount namespace (namespace.h), + the key's index (namespace_key_name()) */
        SANDBOX_STAGE_NAMESPACE = 64,
        _SANDBOX_STAGE_NAMESPACE_END = SANDBOX_STAGE_NAMESPACE + 32,
};

/*
 * Everything the child needs, computed by sandbox_plan_new(). Read-only
 * outside this module (tests inspect it).
 */
struct sandbox_plan {
        /* for the parent */
        char **environment;       /* with User=: USER= LOGNAME= HOME= SHELL=, then the unit's
                                   * Environment= (owned); else the unit's own (borrowed) */
        bool environment_owned;
        const char *working_directory; /* WorkingDirectory=, or the home for "~"; NULL: "/" */
        char *home;               /* WorkingDirectory=~: User='s home, or tend's user's */
        bool hook;                /* the child has work to do: sandbox_plan_apply() sets the hook */

        /* for the child, in its order */
        struct { int resource; struct rlimit rl; } limits[SANDBOX_RLIMIT_MAX];
        size_t n_limits;
        uint64_t bounding_drop;   /* capabilities to drop from the bounding set */
        unsigned cap_last;        /* the kernel's last capability */
        uint64_t ambient;
        uint32_t caps_before[6];  /* capset data (v3: effective, permitted, inheritable × 2) of step 3 */
        uint32_t caps_after[6];   /* of step 6 */
        bool keep_caps;
        bool set_groups;
        gid_t *groups;
        size_t n_groups;
        bool set_gid, set_uid;
        gid_t gid;
        uid_t uid;
        int groups_stage, gid_stage; /* SANDBOX_STAGE_…: the key the groups and the gid came from */
        bool ambient_again;
        int pdeath_signal;        /* from the spawn attributes (sandbox_plan_apply) */
        pid_t parent;
        bool no_new_privs;
        void *seccomp_filter;     /* struct sock_filter[seccomp_len], borrowed from the unit file's bpf_cache (cost17) */
        unsigned short seccomp_len;
        /* exec (issue 16): the process keys, applied first (systemd's order) */
        int tty_force;            /* StandardInput=tty*: TIOCSCTTY's argument; -1: no terminal */
        bool oom_set, nice_set, sched_set, affinity_set, ioprio_set;
        char oom_text[8];         /* OOMScoreAdjust= as written to /proc/self/oom_score_adj */
        int nice, sched_policy, sched_priority, ioprio;
        uint64_t affinity[UNIT_CPU_SET_WORDS];
        /* seccomp (issue 17): the namespaces and programs of the hardening keys (sandbox-seccomp.h) */
        struct sandbox_hardening *hardening; /* owned; NULL: none */
        /* ns: the mount namespace (namespace.h), made after the process keys and the limits */
        struct namespace_plan *ns; /* owned; NULL: none */
        /* keyring: KeyringMode= (enum unit_keyring_mode, resolved): without a uid change,
         * libexit's EXIT_SPAWN_SESSION_KEYRING flag (no hook needed); with one, the hook
         * joins it after setresuid, so the keyring is the unit user's (step 7b) */
        unsigned char keyring;
        bool keyring_in_hook;
};

/*
 * Builds the plan of one process of unit (its name, for messages) from the
 * keys of f, for a command with the prefixes cmd_flags (UNIT_COMMAND_*,
 * systemd.service(5)): '+' plans none of User=, Group=, SupplementaryGroups=,
 * capabilities, NoNewPrivileges=, SystemCallFilter= (limits and the process
 * keys still apply); '!' none of User=, Group=, SupplementaryGroups= (the rest
 * applies); '!!' is '!' on a kernel without ambient capabilities, else
 * nothing. The environment gets the directories' variables (exec-dirs.h).
 * Limit*= above what tend may set is not refused: the child sets the closest
 * value (systemd's setrlimit_closest; sandbox_start_notices() says so). User=, Group=, SupplementaryGroups= are resolved now (numeric
 * ids accepted), so a start after a user is created sees it. self is tend's
 * credentials (NULL: read them now). Every failure is logged, naming the unit
 * and the key, and returned:
 *   -ESRCH   "NAME.service: User=bob: no such user" (Group=, SupplementaryGroups=: "no such group");
 *   -EPERM   "NAME.service: KEY needs privileges tend lacks (EPERM)" (SPEC §1): another user
 *            or group without CAP_SETUID/CAP_SETGID, dropping the bounding set without
 *            CAP_SETPCAP, an ambient capability tend does not hold, a hard limit above
 *            tend's own without CAP_SYS_RESOURCE;
 *   -ENOMEM, or an error of the lookups or of libseccomp.
 * On success *ret is owned by the caller (sandbox_plan_free()); it must
 * outlive the spawn it is applied to, and f must outlive it: the seccomp
 * programs are borrowed from f's cache (cost17: compiled by the first plan of
 * f, reused by the next ones; f is not const there: manager thread only).
 */
int sandbox_plan_new(const char *unit, const struct unit_file *f, unsigned cmd_flags, const struct sandbox_self *self,
                     struct sandbox_plan **ret);

/*
 * The owner of f's directories: User='s uid and its primary gid (Group='s if
 * set); without User=, tend's own ids. Logged and returned as
 * sandbox_plan_new() does (-ESRCH, -ENOMEM). Exec-dirs.h's caller.
 */
int sandbox_owner(const char *unit, const struct unit_file *f, uid_t *ret_uid, gid_t *ret_gid);

/*
 * Once per start (the manager's prepare): a notice for each setting the
 * child will not get as written, as systemd says it: a Limit*= above the hard
 * limit tend may set (clamped to the closest value), an OOMScoreAdjust= below
 * tend's own without CAP_SYS_RESOURCE (skipped). Returns nothing.
 */
void sandbox_start_notices(const char *unit, const struct unit_file *f);

/* Frees p; returns NULL. NULL is accepted. */
struct sandbox_plan *sandbox_plan_free(struct sandbox_plan *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct sandbox_plan *, sandbox_plan_free);

/*
 * Hooks p into a spawn: sets a->pre_exec and a->pre_exec_userdata when the
 * child has work to do (a unit without sandboxing keys keeps libexit's fast
 * path), and takes a->pdeath_signal and the caller's pid for step 7.
 */
void sandbox_plan_apply(struct sandbox_plan *p, struct exit_spawn_attr *a);

/* The hook (libexit's pre_exec): async-signal-safe; 0, or a negative errno
 * with *ret_stage = EXIT_STAGE_HOOK + SANDBOX_STAGE_…. */
int sandbox_pre_exec(void *userdata, int *ret_stage);

/*
 * What a stage of the hook names: the key ("User=", "LimitNOFILE=") and the
 * step ("setresuid"); false if stage is not one of the hook's.
 */
bool sandbox_stage_describe(int stage, const char **ret_key, const char **ret_step);

/* Logs "UNIT: KEY: STEP failed: strerror (ENAME)" when a process's exec
 * failure (error < 0, stage) is one of the hook's; otherwise nothing. */
void sandbox_log_exec_failure(const char *unit, int error, int stage);
