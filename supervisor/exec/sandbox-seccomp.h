/* SPDX-License-Identifier: MIT */
/*
 * The seccomp half of a sandbox plan (sandbox.h; issue 9's SystemCallFilter=,
 * SystemCallErrorNumber=): sandbox.c's parts, not for other modules. The BPF
 * programs are built with libseccomp and exported before the fork (STYLE.md
 * "Reserve before fork"); the child only loads them (sandbox_pre_exec()).
 */
#pragma once

#include <stdbool.h>

struct sandbox_plan;
struct sandbox_self;
struct unit_file;

/*
 * SystemCallFilter= of f into p->seccomp_filter (borrowed from f's bpf_cache,
 * compiled at f's first plan: cost17) and
 * p->no_new_privs: without CAP_SYS_ADMIN at the filter (sys_admin false),
 * NoNewPrivileges=yes is implied, as in systemd. unit names the unit in the
 * message logged on failure. Returns 0, or a negative errno of libseccomp
 * (-ENOMEM, -E2BIG: a program over BPF_MAXINSNS). Manager thread.
 */
int sandbox_seccomp_plan(const char *unit, const struct unit_file *f, bool sys_admin, struct sandbox_plan *p);

/* ------------------------------------------------------------------------ */
/* seccomp (issue 17): the seccomp keys and the non-mount namespaces         */
/* ------------------------------------------------------------------------ */

#define SANDBOX_HARDENING_PROGRAMS 7 /* per architecture (native, i386, x32): the rules, SystemCallLog='s; and the architectures' */

/* What the child does for the hardening keys (unit_file_hardening()), all
 * prepared by sandbox_hardening_plan(); owned by the plan (p->hardening). */
struct sandbox_hardening {
        /* PrivateUsers= (sandbox-ns.c): the maps a helper child writes from outside */
        bool private_users;
        /* made after the other namespaces (tend has CAP_SYS_ADMIN: they are then the host
         * user namespace's, so a new /proc for ProtectProc= can be mounted), else first */
        bool userns_last;
        char uid_map[48];          /* "0 0 1\nUID UID 1\n" */
        char *gid_map;             /* "0 0 1\nGID GID 1\n" and each supplementary group, owned */
        /* PrivateNetwork= (with the loopback brought up), PrivateIPC=, ProtectHostname= */
        bool private_network, private_ipc, protect_hostname;
        /* the seccomp programs, loaded before SystemCallFilter='s (sandbox-seccomp.c) */
        struct {
                void *filter;      /* struct sock_filter[len], borrowed from the unit file's bpf_cache (cost17) */
                unsigned short len;
        } programs[SANDBOX_HARDENING_PROGRAMS];
        size_t n_programs;
};

/*
 * The hardening keys of f into p->hardening (NULL when the unit sets none),
 * p->bounding_drop (ProtectClock=: CAP_SYS_TIME, CAP_WAKE_ALARM;
 * ProtectKernelModules=: CAP_SYS_MODULE; ProtectKernelLogs=: CAP_SYSLOG, as
 * systemd drops them) and p->no_new_privs (implied without CAP_SYS_ADMIN,
 * sys_admin false, as for SystemCallFilter=). self is tend's credentials.
 * A key tend cannot apply here (no CAP_SYS_ADMIN for a namespace without
 * PrivateUsers=, no user namespaces, no CAP_SETPCAP for the bounding set) goes
 * to hardening_cannot_apply(): -EPERM refuses the start, else the key is
 * skipped. Returns 0, -EPERM, -ENOMEM or libseccomp's error (logged, naming
 * the unit). The mount parts of ProtectKernelModules= and ProtectKernelLogs=
 * are the mount namespace's ("ns": its plan reads the same keys).
 */
int sandbox_hardening_plan(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                           bool sys_admin, struct sandbox_plan *p);

/* sandbox-ns.c: PrivateUsers=, PrivateNetwork=, PrivateIPC=, ProtectHostname= of f
 * into s, for p's credentials (p->uid, p->gid, p->groups). Fails as
 * sandbox_hardening_plan() (hardening_cannot_apply()). */
int sandbox_ns_plan(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                    const struct sandbox_plan *p, struct sandbox_hardening *s);

/* Frees h and what it owns; NULL. NULL is accepted. */
struct sandbox_hardening *sandbox_hardening_free(struct sandbox_hardening *h);

/*
 * The child's steps (async-signal-safe; 0, or a negative errno with
 * *ret_stage = EXIT_STAGE_HOOK + SANDBOX_STAGE_…), each a no-op when h is NULL:
 *  - sandbox_userns_step(): PrivateUsers=: a helper child (forked here)
 *    writes the maps once this process has unshared its user namespace;
 *    called twice, before the mount namespace (late false) and after the
 *    other namespaces (late true): it acts at the call where late equals
 *    h->userns_last (systemd 252's order: last when the manager has
 *    CAP_SYS_ADMIN, first when it needs the user namespace for the others);
 *  - sandbox_namespaces_step(): PrivateNetwork= (and "lo" up), PrivateIPC=,
 *    ProtectHostname=;
 *  - sandbox_hardening_seccomp_step(): the programs, just before SystemCallFilter='s.
 */
int sandbox_userns_step(const struct sandbox_hardening *h, bool late, int *ret_stage);
int sandbox_namespaces_step(const struct sandbox_hardening *h, int *ret_stage);
int sandbox_hardening_seccomp_step(const struct sandbox_hardening *h, int *ret_stage);
