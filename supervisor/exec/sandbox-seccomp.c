/* SPDX-License-Identifier: MIT */
/*
 * The seccomp programs of a sandbox plan (sandbox-seccomp.h): built with
 * libseccomp in the manager, exported as BPF for the child.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "hardening.h"
#include "libexit.h"
#include "log.h"
#include "sandbox-seccomp.h"
#include "sandbox-values-internal.h"
#include "sandbox.h"
#include "unit-file.h"

/* ------------------------------------------------------------------------ */

/* libseccomp's export, read back from a memfd into a plain array. */
static int export_bpf(scmp_filter_ctx ctx, void **ret, unsigned short *ret_len) {
        _cleanup_close_ int fd = memfd_create("tend-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        int r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        off_t size = lseek(fd, 0, SEEK_END);
        off_t insn = (off_t) sizeof(struct sock_filter);
        if (size <= 0 || size % insn || size / insn > BPF_MAXINSNS)
                return size < 0 ? negative_errno() : -E2BIG;
        void *buf = malloc((size_t) size);
        if (!buf)
                return -ENOMEM;
        if (pread(fd, buf, (size_t) size, 0) != (ssize_t) size) {
                free(buf);
                return -EIO;
        }
        *ret = buf;
        *ret_len = (unsigned short) (size / insn);
        return 0;
}

/* Another ABI this machine runs (i386, x32 on x86-64; arm on arm64): the
 * same filter applies there, as systemd's default SystemCallArchitectures=. */
static void add_secondary_archs(scmp_filter_ctx ctx) {
        uint32_t native = seccomp_arch_native();
        if (native == SCMP_ARCH_X86_64) {
                (void) seccomp_arch_add(ctx, SCMP_ARCH_X86);
                (void) seccomp_arch_add(ctx, SCMP_ARCH_X32);
        } else if (native == SCMP_ARCH_AARCH64)
                (void) seccomp_arch_add(ctx, SCMP_ARCH_ARM);
}

static int rule_add(scmp_filter_ctx ctx, uint32_t action, int nr) {
        int r = seccomp_rule_add(ctx, action, nr, 0);
        /* -EDOM/-EINVAL: a pseudo number no ABI of the filter has; -EEXIST: listed twice;
         * -EACCES: the filter's default action already. */
        return r == -EDOM || r == -EEXIST || r == -EACCES || (r == -EINVAL && nr < 0) ? 0 : r;
}

static int build_filter(const struct unit_file *f, scmp_filter_ctx ctx, uint32_t deny) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        const struct sandbox_syscall_filter *sf = &sb->syscall_filter;
        int r = 0;
        for (size_t i = 0; i < sf->n && r >= 0; i++) {
                const struct sandbox_syscall *s = &sf->syscalls[i];
                if (sf->allow_list)
                        r = rule_add(ctx, SCMP_ACT_ALLOW, s->nr);
                else if (!sandbox_syscall_is_exempt(s->nr))
                        r = rule_add(ctx, s->action == SANDBOX_ACTION_DEFAULT ? deny
                                          : s->action == 0                     ? SCMP_ACT_KILL_PROCESS
                                                                               : SCMP_ACT_ERRNO((uint32_t) s->action),
                                     s->nr);
        }
        if (!sf->allow_list)
                return r;
        struct sandbox_syscall_filter always = {};
        for (const char *const *s = sandbox_syscall_allow_always; *s && r >= 0; s++)
                r = sandbox_syscall_filter_add(&always, *s, false);
        for (size_t i = 0; i < always.n && r >= 0; i++)
                r = rule_add(ctx, SCMP_ACT_ALLOW, always.syscalls[i].nr);
        sandbox_syscall_filter_clear(&always);
        return r;
}

/* cost17: SystemCallFilter='s programs, shared by the unit files whose filter is the same
 * (the start of 100 copies of a unit compiles one); a unit file's cache holds a reference. */
struct shared_filter {
        struct shared_filter *next;
        unsigned refs;
        bool allow_list;
        int error_number;
        struct sandbox_syscall *syscalls; /* n, sorted by nr (the parser's order), owned */
        size_t n;
        struct unit_bpf_program program;  /* owned */
};
static struct shared_filter *shared_filters; /* manager thread only */

static bool same_filter(const struct shared_filter *e, const struct unit_sandbox_keys *sb) {
        const struct sandbox_syscall_filter *sf = &sb->syscall_filter;
        return e->allow_list == sf->allow_list && e->error_number == sb->syscall_error_number && e->n == sf->n &&
               (!e->n || !memcmp(e->syscalls, sf->syscalls, e->n * sizeof *e->syscalls));
}

static void shared_filter_unref(struct shared_filter *e) {
        if (!e || --e->refs > 0)
                return;
        for (struct shared_filter **pp = &shared_filters; *pp; pp = &(*pp)->next)
                if (*pp == e) {
                        *pp = e->next;
                        break;
                }
        free(e->syscalls);
        free(e->program.filter);
        free(e);
}

static void bpf_cache_release(struct unit_bpf_cache *c) {
        shared_filter_unref(c->filter_shared);
        for (size_t i = 0; i < c->n_programs; i++)
                free(c->programs[i].filter);
        free(c);
}

/* f's cache of compiled programs (unit-file.h), made at its first use;
 * NULL on ENOMEM. f->sandbox is set: only a unit with seccomp keys asks. */
static struct unit_bpf_cache *bpf_cache(const struct unit_file *f) {
        struct unit_sandbox_keys *sb = f->sandbox;
        assert(sb);
        if (!sb->bpf_cache && (sb->bpf_cache = calloc(1, sizeof *sb->bpf_cache)))
                sb->bpf_cache->release = bpf_cache_release;
        return sb->bpf_cache;
}

/* SystemCallFilter='s program, compiled (libseccomp) and exported into *ret. */
static int compile_filter(const struct unit_file *f, struct unit_bpf_program *ret) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        uint32_t deny = sb->syscall_error_number > 0 ? SCMP_ACT_ERRNO((uint32_t) sb->syscall_error_number)
                                                    : SCMP_ACT_KILL_PROCESS;
        scmp_filter_ctx ctx = seccomp_init(sb->syscall_filter.allow_list ? deny : SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0); /* the hook sets it, in its place */
        /* cost17: the calls sorted into a binary tree (libseccomp ≥ 2.5): the same decisions, but
         * the kernel checks and prepares a shorter program at each start (the child's load of
         * @system-service: 0.95 → 0.35 ms, docs/benchmarks.md) and runs it in O(log n) per call. */
        if (r >= 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        if (r >= 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, deny);
        if (r >= 0) {
                add_secondary_archs(ctx);
                r = build_filter(f, ctx, deny);
        }
        if (r >= 0)
                r = export_bpf(ctx, &ret->filter, &ret->len);
        seccomp_release(ctx);
        return r;
}

/* The shared program of f's filter: found, or compiled now and shared; NULL on failure (*ret_error). */
static struct shared_filter *shared_filter_get(const struct unit_file *f, int *ret_error) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        for (struct shared_filter *e = shared_filters; e; e = e->next)
                if (same_filter(e, sb)) {
                        e->refs++;
                        return e;
                }
        struct shared_filter *e = calloc(1, sizeof *e);
        size_t size = sb->syscall_filter.n * sizeof *e->syscalls;
        *ret_error = -ENOMEM;
        if (!e || (size && !(e->syscalls = malloc(size)))) {
                free(e);
                return NULL;
        }
        *ret_error = compile_filter(f, &e->program);
        if (*ret_error < 0) {
                free(e->syscalls);
                free(e);
                return NULL;
        }
        if (size)
                memcpy(e->syscalls, sb->syscall_filter.syscalls, size);
        e->n = sb->syscall_filter.n;
        e->allow_list = sb->syscall_filter.allow_list;
        e->error_number = sb->syscall_error_number;
        e->refs = 1;
        e->next = shared_filters;
        return shared_filters = e;
}

int sandbox_seccomp_plan(const char *unit, const struct unit_file *f, bool sys_admin, struct sandbox_plan *p) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        if (!sb->syscall_filter.set)
                return 0;
        /* systemd's rule: without CAP_SYS_ADMIN at the filter, NoNewPrivileges=yes is implied. */
        p->no_new_privs |= !sys_admin;
        struct unit_bpf_cache *c = bpf_cache(f);
        int r = c ? 0 : -ENOMEM;
        if (r >= 0 && !c->filter_built) { /* cost17: the first start gets it, the next ones reuse it */
                struct shared_filter *e = shared_filter_get(f, &r);
                if (e) {
                        c->filter_shared = e;
                        c->filter = e->program;
                        c->filter_built = true;
                }
        }
        if (r < 0)
                return log_error_errno(r, "%s: SystemCallFilter=: cannot build the filter: %m", unit);
        p->seccomp_filter = c->filter.filter;
        p->seccomp_len = c->filter.len;
        return 0;
}

/* ------------------------------------------------------------------------ */
/* seccomp (issue 17): the hardening keys' programs                          */
/* ------------------------------------------------------------------------ */

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* One rule on arch, for the call libseccomp names by its native number:
 * skipped where the call does not exist (-EDOM), or is multiplexed (i386's
 * socketcall and ipc: -EINVAL) and cannot be filtered by its arguments, as
 * systemd skips it. */
static int hrule(scmp_filter_ctx ctx, uint32_t arch, uint32_t action, const char *name, unsigned n,
                 const struct scmp_arg_cmp *args) {
        int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR)
                return 0;
        int r = seccomp_rule_add_exact_array(ctx, action, nr, n, args);
        return r == -EDOM || r == -EEXIST || (r == -EINVAL && arch != seccomp_arch_native()) ? 0 : r;
}

#define RULE(name, action, ...)                                                                                 \
        ({                                                                                                      \
                const struct scmp_arg_cmp _a[] = { __VA_ARGS__ };                                               \
                hrule(ctx, arch, (action), (name), ELEMENTSOF(_a), _a);                                          \
        })
#define RULE0(name, action) hrule(ctx, arch, (action), (name), 0, NULL)
#define EPERM_ SCMP_ACT_ERRNO(EPERM)

/* RestrictAddressFamilies=: socket() of a family not allowed fails with EAFNOSUPPORT (systemd's errno). */
static int rules_families(scmp_filter_ctx ctx, uint32_t arch, const struct unit_hardening_keys *h) {
        const uint32_t deny = SCMP_ACT_ERRNO(EAFNOSUPPORT);
        int r = 0;
        if (!h->address_families_allow) {
                for (int af = 0; af < 64 && r >= 0; af++)
                        if ((h->address_families >> af) & 1)
                                r = RULE("socket", deny, SCMP_A0(SCMP_CMP_EQ, (uint64_t) af));
                return r;
        }
        if (!h->address_families)
                return RULE0("socket", deny);
        int max = 63 - __builtin_clzll(h->address_families);
        r = RULE("socket", deny, SCMP_A0(SCMP_CMP_GT, (uint64_t) max));
        for (int af = 0; af < max && r >= 0; af++)
                if (!((h->address_families >> af) & 1))
                        r = RULE("socket", deny, SCMP_A0(SCMP_CMP_EQ, (uint64_t) af));
        return r;
}

/* RestrictNamespaces=: unshare, clone, setns with a kind not allowed fail
 * with EPERM; clone3 (flags in memory) with ENOSYS, so libc falls back to clone. */
static int rules_namespaces(scmp_filter_ctx ctx, uint32_t arch, unsigned long allowed) {
        static const unsigned long kinds[] = { CLONE_NEWCGROUP, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS,
                                               CLONE_NEWPID,    CLONE_NEWUSER, CLONE_NEWUTS, CLONE_NEWTIME };
        bool s390 = arch == SCMP_ARCH_S390 || arch == SCMP_ARCH_S390X; /* clone's flags: its second argument */
        int r = RULE0("clone3", SCMP_ACT_ERRNO(ENOSYS));
        if (r >= 0)
                r = allowed ? RULE("setns", EPERM_, SCMP_A1(SCMP_CMP_EQ, 0)) : RULE0("setns", EPERM_);
        for (size_t i = 0; i < ELEMENTSOF(kinds) && r >= 0; i++) {
                uint64_t f = kinds[i];
                if (allowed & f)
                        continue;
                r = RULE("unshare", EPERM_, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
                if (r >= 0)
                        r = s390 ? RULE("clone", EPERM_, SCMP_A1(SCMP_CMP_MASKED_EQ, f, f))
                                 : RULE("clone", EPERM_, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
                if (r >= 0 && allowed)
                        r = RULE("setns", EPERM_, SCMP_A1(SCMP_CMP_MASKED_EQ, f, f));
        }
        return r;
}

/* MemoryDenyWriteExecute=: a mapping both writable and executable, or made
 * executable later, fails with EPERM (mmap, mprotect, pkey_mprotect, shmat). */
static int rules_wx(scmp_filter_ctx ctx, uint32_t arch) {
        const uint64_t wx = PROT_WRITE | PROT_EXEC;
        /* i386's mmap takes its arguments in memory: denied outright, mmap2 is filtered (as in systemd) */
        int r = arch == SCMP_ARCH_X86 ? RULE0("mmap", EPERM_) : RULE("mmap", EPERM_, SCMP_A2(SCMP_CMP_MASKED_EQ, wx, wx));
        if (r >= 0)
                r = RULE("mmap2", EPERM_, SCMP_A2(SCMP_CMP_MASKED_EQ, wx, wx));
        if (r >= 0)
                r = RULE("mprotect", EPERM_, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
        if (r >= 0)
                r = RULE("pkey_mprotect", EPERM_, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
        if (r >= 0)
                r = RULE("shmat", EPERM_, SCMP_A2(SCMP_CMP_MASKED_EQ, SHM_EXEC, SHM_EXEC));
        return r;
}

/* RestrictRealtime=: sched_setscheduler to a policy other than SCHED_OTHER,
 * SCHED_BATCH, SCHED_IDLE (a flag such as SCHED_RESET_ON_FORK included) fails with EPERM. */
static int rules_realtime(scmp_filter_ctx ctx, uint32_t arch) {
        int r = RULE("sched_setscheduler", EPERM_, SCMP_A1(SCMP_CMP_GT, SCHED_IDLE));
        for (int policy = 0; policy < SCHED_IDLE && r >= 0; policy++)
                if (policy != SCHED_OTHER && policy != SCHED_BATCH)
                        r = RULE("sched_setscheduler", EPERM_, SCMP_A1(SCMP_CMP_EQ, (uint64_t) policy));
        return r;
}

/* RestrictSUIDSGID=: a mode with S_ISUID or S_ISGID fails with EPERM where
 * a call sets it (chmod…, mknod…, open… creating a file); openat2 (its mode
 * in memory) with ENOSYS, so libc falls back to openat. */
static int rules_suid(scmp_filter_ctx ctx, uint32_t arch) {
        static const uint64_t bits[] = { S_ISUID, S_ISGID };
        static const uint64_t creating[] = { O_CREAT, O_TMPFILE };
        int r = RULE0("openat2", SCMP_ACT_ERRNO(ENOSYS));
        for (size_t i = 0; i < ELEMENTSOF(bits) && r >= 0; i++) {
                uint64_t m = bits[i];
                r = RULE("chmod", EPERM_, SCMP_A1(SCMP_CMP_MASKED_EQ, m, m));
                if (r >= 0)
                        r = RULE("fchmod", EPERM_, SCMP_A1(SCMP_CMP_MASKED_EQ, m, m));
                if (r >= 0)
                        r = RULE("fchmodat", EPERM_, SCMP_A2(SCMP_CMP_MASKED_EQ, m, m));
                if (r >= 0)
                        r = RULE("fchmodat2", EPERM_, SCMP_A2(SCMP_CMP_MASKED_EQ, m, m));
                if (r >= 0)
                        r = RULE("mknod", EPERM_, SCMP_A1(SCMP_CMP_MASKED_EQ, m, m));
                if (r >= 0)
                        r = RULE("mknodat", EPERM_, SCMP_A2(SCMP_CMP_MASKED_EQ, m, m));
                if (r >= 0)
                        r = RULE("creat", EPERM_, SCMP_A1(SCMP_CMP_MASKED_EQ, m, m));
                for (size_t j = 0; j < ELEMENTSOF(creating) && r >= 0; j++) {
                        uint64_t c = creating[j];
                        r = RULE("open", EPERM_, SCMP_A1(SCMP_CMP_MASKED_EQ, c, c), SCMP_A2(SCMP_CMP_MASKED_EQ, m, m));
                        if (r >= 0)
                                r = RULE("openat", EPERM_, SCMP_A2(SCMP_CMP_MASKED_EQ, c, c),
                                         SCMP_A3(SCMP_CMP_MASKED_EQ, m, m));
                }
        }
        return r;
}

/* Every member of a group (sandbox-syscalls.c), denied with EPERM. */
static int rules_group(scmp_filter_ctx ctx, uint32_t arch, const char *group) {
        const char *const *m = sandbox_syscall_group(group);
        int r = 0;
        for (; m && *m && r >= 0; m++)
                r = RULE0(*m, EPERM_);
        return r;
}

/* LockPersonality=: personality() with any other than the current one fails
 * with EPERM (a query with 0xffffffff too, as in systemd 252: libseccomp
 * cannot compare one argument twice in a rule). */
static int rules_personality(scmp_filter_ctx ctx, uint32_t arch, unsigned long current) {
        return RULE("personality", EPERM_, SCMP_A0(SCMP_CMP_NE, current));
}

static int hardening_rules(scmp_filter_ctx ctx, uint32_t arch, const struct unit_hardening_keys *h) {
        int r = 0;
        if (h->address_families_set && arch != SCMP_ARCH_X86) /* i386's socketcall: see hrule() */
                r = rules_families(ctx, arch, h);
        if (r >= 0 && h->namespaces_set)
                r = rules_namespaces(ctx, arch, h->namespaces_allowed);
        if (r >= 0 && h->memory_deny_write_execute)
                r = rules_wx(ctx, arch);
        if (r >= 0 && h->restrict_realtime)
                r = rules_realtime(ctx, arch);
        if (r >= 0 && h->restrict_suid_sgid)
                r = rules_suid(ctx, arch);
        if (r >= 0 && h->lock_personality)
                r = rules_personality(ctx, arch, (unsigned long) personality(0xffffffff));
        if (r >= 0 && h->protect_clock)
                r = rules_group(ctx, arch, "@clock");
        if (r >= 0 && h->protect_kernel_modules)
                r = rules_group(ctx, arch, "@module");
        if (r >= 0 && h->protect_kernel_logs)
                r = RULE0("syslog", EPERM_);
        if (r >= 0 && h->protect_hostname)
                r = RULE0("sethostname", EPERM_), r = r >= 0 ? RULE0("setdomainname", EPERM_) : r;
        return r;
}

/* ctx with NoNewPrivileges left to tend and badarch the action for other
 * architectures; NULL (ctx released) when r or setting them failed. */
static scmp_filter_ctx filter_finish(scmp_filter_ctx ctx, int r, uint32_t badarch) {
        if (r >= 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r >= 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, badarch);
        if (r < 0 && ctx) {
                seccomp_release(ctx);
                return NULL;
        }
        return ctx;
}

/* A filter of one architecture with the default action (other architectures pass it). */
static scmp_filter_ctx arch_filter(uint32_t arch, uint32_t action) {
        scmp_filter_ctx ctx = seccomp_init(action);
        uint32_t native = seccomp_arch_native();
        int r = ctx ? 0 : -ENOMEM;
        if (r >= 0 && arch != native) {
                r = seccomp_arch_add(ctx, arch);
                if (r >= 0)
                        r = seccomp_arch_remove(ctx, native);
        }
        return filter_finish(ctx, r, SCMP_ACT_ALLOW);
}

/* Whether a key with rules of its own is set (SystemCallArchitectures= has a program of its own). */
static bool seccomp_rules_set(const struct unit_hardening_keys *h) {
        return h->address_families_set || h->namespaces_set || h->memory_deny_write_execute || h->restrict_realtime ||
               h->restrict_suid_sgid || h->lock_personality || h->protect_clock || h->protect_kernel_modules ||
               h->protect_kernel_logs || h->protect_hostname;
}

/* SystemCallLog= on arch: without "~" the calls listed are logged, with "~" every call but those
 * (SCMP_ACT_LOG: the kernel's audit log; the call proceeds). */
static scmp_filter_ctx log_filter(uint32_t arch, const struct sandbox_syscall_filter *l) {
        scmp_filter_ctx ctx = arch_filter(arch, l->allow_list ? SCMP_ACT_ALLOW : SCMP_ACT_LOG);
        int r = ctx ? 0 : -ENOMEM;
        for (size_t i = 0; i < l->n && r >= 0; i++)
                r = rule_add(ctx, l->allow_list ? SCMP_ACT_LOG : SCMP_ACT_ALLOW, l->syscalls[i].nr);
        if (r < 0 && ctx) {
                seccomp_release(ctx);
                return NULL;
        }
        return ctx;
}

/* The architectures the rules cover: those the unit allows, or every one this machine runs. */
static size_t rule_archs(const struct unit_hardening_keys *h, uint32_t out[SANDBOX_HARDENING_PROGRAMS - 1]) {
        size_t n = 0;
        uint32_t native = seccomp_arch_native();
        out[n++] = native;
        uint32_t secondary[2] = {};
        if (native == SCMP_ARCH_X86_64)
                secondary[0] = SCMP_ARCH_X86, secondary[1] = SCMP_ARCH_X32;
        else if (native == SCMP_ARCH_AARCH64)
                secondary[0] = SCMP_ARCH_ARM;
        for (size_t i = 0; i < ELEMENTSOF(secondary) && secondary[i]; i++) {
                bool allowed = !h->archs[0];
                for (size_t j = 0; j < UNIT_ARCHS_MAX && h->archs[j]; j++)
                        allowed |= h->archs[j] == secondary[i];
                if (allowed)
                        out[n++] = secondary[i];
        }
        return n;
}

/* SystemCallArchitectures=: a call of another architecture kills the process (libseccomp's bad-arch action). */
static scmp_filter_ctx archs_filter(const struct unit_hardening_keys *h) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        uint32_t native = seccomp_arch_native();
        bool keep_native = false;
        int r = ctx ? 0 : -ENOMEM;
        for (size_t i = 0; i < UNIT_ARCHS_MAX && h->archs[i] && r >= 0; i++) {
                keep_native |= h->archs[i] == native;
                r = seccomp_arch_add(ctx, h->archs[i]);
                r = r == -EEXIST ? 0 : r;
        }
        if (r >= 0 && !keep_native)
                r = seccomp_arch_remove(ctx, native);
        return filter_finish(ctx, r, SCMP_ACT_KILL_PROCESS);
}

static int add_program(struct unit_bpf_cache *c, scmp_filter_ctx ctx) {
        if (!ctx)
                return -ENOMEM;
        assert(c->n_programs < UNIT_BPF_PROGRAMS);
        int r = export_bpf(ctx, &c->programs[c->n_programs].filter, &c->programs[c->n_programs].len);
        seccomp_release(ctx);
        if (r >= 0)
                c->n_programs++;
        return r;
}

/* The hardening keys' programs, compiled into c (empty on entry); on failure c holds none. */
static int compile_programs(const struct unit_hardening_keys *h, struct unit_bpf_cache *c) {
        uint32_t archs[SANDBOX_HARDENING_PROGRAMS - 1];
        size_t n = rule_archs(h, archs);
        int r = 0;
        bool rules = seccomp_rules_set(h);
        for (size_t i = 0; rules && i < n && r >= 0; i++) {
                scmp_filter_ctx ctx = arch_filter(archs[i], SCMP_ACT_ALLOW);
                r = ctx ? hardening_rules(ctx, archs[i], h) : -ENOMEM;
                if (r < 0 && ctx)
                        seccomp_release(ctx);
                if (r >= 0)
                        r = add_program(c, ctx);
        }
        for (size_t i = 0; h->syscall_log.set && i < n && r >= 0; i++)
                r = add_program(c, log_filter(archs[i], &h->syscall_log));
        if (r >= 0 && h->archs[0])
                r = add_program(c, archs_filter(h));
        for (size_t i = 0; r < 0 && i < c->n_programs; i++)
                free(c->programs[i].filter);
        if (r < 0)
                c->n_programs = 0;
        return r;
}

/* The programs into s, borrowed from f's cache (cost17: compiled at the first start, a
 * unit without such keys gets no cache). */
static int plan_programs(const struct unit_file *f, const struct unit_hardening_keys *h, struct sandbox_hardening *s) {
        static_assert(SANDBOX_HARDENING_PROGRAMS <= UNIT_BPF_PROGRAMS, "the cache holds every program");
        if (!seccomp_rules_set(h) && !h->syscall_log.set && !h->archs[0])
                return 0;
        struct unit_bpf_cache *c = bpf_cache(f);
        if (!c)
                return -ENOMEM;
        if (!c->programs_built) {
                int r = compile_programs(h, c);
                if (r < 0)
                        return r;
                c->programs_built = true;
        }
        for (size_t i = 0; i < c->n_programs; i++) {
                s->programs[i].filter = c->programs[i].filter;
                s->programs[i].len = c->programs[i].len;
        }
        s->n_programs = c->n_programs;
        return 0;
}

/* ProtectClock=, ProtectKernelModules=, ProtectKernelLogs=: their capabilities out of the bounding set;
 * under PrivateUsers=, also those tend's own bounding set lacks (CapabilityBoundingSet=). */
static int plan_bounding(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                         const struct sandbox_hardening *s, struct sandbox_plan *p) {
        const struct unit_hardening_keys *h = unit_file_hardening(f);
        static const struct {
                size_t offset;
                const char *key;
                uint64_t caps;
        } drops[] = {
                { offsetof(struct unit_hardening_keys, protect_clock), "ProtectClock=",
                  CAP_BIT(CAP_SYS_TIME) | CAP_BIT(CAP_WAKE_ALARM) },
                { offsetof(struct unit_hardening_keys, protect_kernel_modules), "ProtectKernelModules=",
                  CAP_BIT(CAP_SYS_MODULE) },
                { offsetof(struct unit_hardening_keys, protect_kernel_logs), "ProtectKernelLogs=", CAP_BIT(CAP_SYSLOG) },
        };
        bool setpcap = (self->effective >> CAP_SETPCAP) & 1 || s->private_users; /* all of them in its namespace */
        /* A new user namespace starts with a full bounding set: what tend's own lacks comes
         * back in it (redis-server's CapabilityBoundingSet= kept CAP_SYS_RESOURCE under a
         * tend without it), so every capability the unit does not keep is dropped. */
        uint64_t bounding = s->private_users ? sandbox_capability_all() : self->bounding;
        if (s->private_users) /* with or without CapabilityBoundingSet=: never more than tend's own */
                p->bounding_drop |= bounding & ~(unit_file_sandbox(f)->capability_bounding_set & self->bounding);
        for (size_t i = 0; i < ELEMENTSOF(drops); i++) {
                if (!*(const bool *) ((const char *) h + drops[i].offset))
                        continue;
                uint64_t more = drops[i].caps & bounding & ~p->bounding_drop;
                if (!more)
                        continue;
                int r = setpcap ? 0 : hardening_cannot_apply(unit, f, drops[i].key,
                                                             "dropping capabilities from the bounding set needs "
                                                             "CAP_SETPCAP");
                if (r < 0)
                        return r;
                if (r == 0)
                        p->bounding_drop |= more;
        }
        if (p->bounding_drop && !p->cap_last)
                p->cap_last = sandbox_cap_count() - 1;
        return 0;
}

struct sandbox_hardening *sandbox_hardening_free(struct sandbox_hardening *h) {
        if (!h)
                return NULL;
        free(h->gid_map); /* the programs are the unit file's (its bpf_cache) */
        free(h);
        return NULL;
}

int sandbox_hardening_plan(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                           bool sys_admin, struct sandbox_plan *p) {
        const struct unit_hardening_keys *h = unit_file_hardening(f);
        if (!unit_file_sandbox(f)->hardening)
                return 0;
        struct sandbox_hardening *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        int r = sandbox_ns_plan(unit, f, self, p, s);
        if (r >= 0)
                r = plan_bounding(unit, f, self, s, p);
        if (r >= 0) {
                r = plan_programs(f, h, s);
                if (r < 0)
                        r = log_error_errno(r, "%s: cannot build the seccomp programs of the hardening keys: %m", unit);
        }
        if (r < 0) {
                sandbox_hardening_free(s);
                return r;
        }
        /* systemd's rule, as for SystemCallFilter=: without CAP_SYS_ADMIN, NoNewPrivileges=yes is implied. */
        if (s->n_programs && !sys_admin)
                p->no_new_privs = true;
        if (!s->n_programs && !s->private_users && !s->private_network && !s->private_ipc && !s->protect_hostname)
                s = sandbox_hardening_free(s);
        p->hardening = s;
        return 0;
}

int sandbox_hardening_seccomp_step(const struct sandbox_hardening *h, int *ret_stage) {
        for (size_t i = 0; h && i < h->n_programs; i++) {
                struct sock_fprog prog = { .len = h->programs[i].len, .filter = h->programs[i].filter };
                if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
                        *ret_stage = EXIT_STAGE_HOOK + SANDBOX_STAGE_HARDENING_SECCOMP;
                        return -errno;
                }
        }
        return 0;
}
