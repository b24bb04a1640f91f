/* SPDX-License-Identifier: MIT */
/*
 * The seccomp programs of a sandbox plan (sandbox-seccomp.h): built with
 * libseccomp in the manager, exported as BPF for the child.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/filter.h>

#include "log.h"
#include "sandbox-seccomp.h"
#include "sandbox-values-internal.h"
#include "sandbox.h"
#include "unit-file.h"

/* ------------------------------------------------------------------------ */

/* libseccomp's export, read back from a memfd into a plain array. */
static int export_bpf(scmp_filter_ctx ctx, struct sandbox_plan *p) {
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
        p->seccomp_filter = buf;
        p->seccomp_len = (unsigned short) (size / insn);
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

int sandbox_seccomp_plan(const char *unit, const struct unit_file *f, bool sys_admin, struct sandbox_plan *p) {
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        if (!sb->syscall_filter.set)
                return 0;
        /* systemd's rule: without CAP_SYS_ADMIN at the filter, NoNewPrivileges=yes is implied. */
        p->no_new_privs |= !sys_admin;
        uint32_t deny = sb->syscall_error_number > 0 ? SCMP_ACT_ERRNO((uint32_t) sb->syscall_error_number)
                                                    : SCMP_ACT_KILL_PROCESS;
        scmp_filter_ctx ctx = seccomp_init(sb->syscall_filter.allow_list ? deny : SCMP_ACT_ALLOW);
        if (!ctx)
                return log_error_errno(ENOMEM, "%s: SystemCallFilter=: cannot create the filter", unit);
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0); /* the hook sets it, in its place */
        if (r >= 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, deny);
        if (r >= 0) {
                add_secondary_archs(ctx);
                r = build_filter(f, ctx, deny);
        }
        if (r >= 0)
                r = export_bpf(ctx, p);
        seccomp_release(ctx);
        if (r < 0)
                return log_error_errno(r, "%s: SystemCallFilter=: cannot build the filter: %m", unit);
        return 0;
}
