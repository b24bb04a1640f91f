/* SPDX-License-Identifier: MIT */
/*
 * The sandboxing keys' values (sandbox.h; SPEC §3; docs/tend.service.5.md
 * "SANDBOXING"): the vocabulary the unit-file parser checks them against —
 * resource limits, capability names (libcap), system-call names and tend's
 * groups (libseccomp), errno names — and the types a unit file stores them
 * in. Pure and thread-safe. Its own module so that the parser (unit-file.h)
 * and the plan (sandbox.h, which reads unit files) depend on it, not on each
 * other.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include "macro.h"

/* Limit*=: one per setrlimit(2) resource systemd names (RLIMIT_CPU … RLIMIT_RTTIME). */
#define SANDBOX_RLIMIT_MAX 16

struct sandbox_limit {
        bool set;        /* false: inherited from tend */
        struct rlimit rl;
};

/* The resource of key "LimitNOFILE" etc., or -EINVAL. */
int sandbox_rlimit_from_key(const char *key);
/* "LimitNOFILE" for RLIMIT_NOFILE; NULL for a resource outside 0..SANDBOX_RLIMIT_MAX-1. */
const char *sandbox_rlimit_key(int resource);

/*
 * Parses the value of Limit*= for resource (systemd.exec(5)): "VALUE" (soft
 * and hard) or "SOFT:HARD"; "infinity"; sizes with K, M, G, T, P, E (base
 * 1024) for the byte limits; time spans for LimitCPU= (seconds, rounded up)
 * and LimitRTTIME= (µs by default); LimitNICE= as a nice value "+N"/"-N"
 * (-20…19) or a raw 0…40. Returns 0; -EINVAL (syntax), -ERANGE (out of
 * range), -EDOM (the soft limit above the hard one).
 */
int sandbox_parse_limit(int resource, const char *value, struct rlimit *ret);

/* The number of capability name ("CAP_NET_BIND_SERVICE", any case, or a
 * number) in 0..63 known to libcap and the kernel, or -EINVAL. */
int sandbox_capability_from_name(const char *name);
/* Every capability the running kernel knows, as a mask (bit n = capability n). */
uint64_t sandbox_capability_all(void);
/* Writes capability cap's name ("CAP_NET_BIND_SERVICE", or its number if
 * libcap has no name for it) to buf. */
void sandbox_capability_name(int cap, char *buf, size_t size);

/* An errno as SystemCallErrorNumber= takes it: a name ("EPERM") or 1…4095;
 * "kill" is 0. Returns it, or -EINVAL. */
int sandbox_errno_from_name(const char *s);

/* SystemCallFilter= (systemd.exec(5)). */
#define SANDBOX_ACTION_DEFAULT (-1) /* the unit's action: SystemCallErrorNumber=, else kill */
struct sandbox_syscall {
        int nr;     /* libseccomp's number (negative: a pseudo number, another ABI's call) */
        int action; /* deny lists: SANDBOX_ACTION_DEFAULT, 0 (kill) or an errno ("name:EPERM") */
};
struct sandbox_syscall_filter {
        bool set;                    /* false: no filter */
        bool allow_list;             /* the first assignment's kind: without "~" an allow list */
        struct sandbox_syscall *syscalls; /* n, sorted by nr, owned */
        size_t n;
};

void sandbox_syscall_filter_clear(struct sandbox_syscall_filter *f);

/*
 * One word of a SystemCallFilter= assignment: a system call name or a group
 * ("@system-service"), with ":ERRNO" or ":kill" after it in a deny list. The
 * first word of the unit decides the kind (invert: the assignment began with
 * "~"); later words of the same kind add, of the other kind remove (as
 * systemd). Returns 0; -EINVAL (an unknown system call), -ENOENT (an unknown
 * group), -EBADMSG (a bad errno after ':'), -EDOM (':' in an allow list),
 * -ENOMEM. A group's members unknown to libseccomp are skipped.
 */
int sandbox_syscall_filter_add(struct sandbox_syscall_filter *f, const char *word, bool invert);

/*
 * The calls tend needs between the filter and the program (libexit's
 * sigprocmask and execve, exit): a deny list never denies them. Writes the
 * names f denies among them to buf ("execve rt_sigprocmask"), empty if none.
 */
void sandbox_syscall_filter_exempt(const struct sandbox_syscall_filter *f, char *buf, size_t size);

/* tend's groups: the names ("@basic-io", …) in order, NULL-terminated, and a
 * group's members (names, "@group" for a nested one), NULL-terminated; NULL
 * for an unknown group. */
extern const char *const sandbox_syscall_group_names[];
const char *const *sandbox_syscall_group(const char *name);
/* The calls every allow list permits (execve's needs), NULL-terminated. */
extern const char *const sandbox_syscall_allow_always[];
