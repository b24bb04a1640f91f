/* SPDX-License-Identifier: MIT */
/*
 * seccomp (issue 17): the unit-file parser's seccomp and non-mount namespace
 * keys (struct unit_hardening_keys in unit-file.h; exec/sandbox-seccomp.c and
 * exec/sandbox-ns.c apply them): RestrictAddressFamilies=,
 * RestrictNamespaces=, SystemCallArchitectures=, LockPersonality=,
 * MemoryDenyWriteExecute=, RestrictRealtime=, RestrictSUIDSGID=,
 * ProtectClock=, ProtectKernelModules=, ProtectKernelLogs=, ProtectHostname=,
 * PrivateNetwork=, PrivateIPC=, PrivateUsers=, SystemCallLog=. Values as systemd.exec(5)
 * defines them; an empty assignment resets a key to its default.
 */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "unit-file-internal.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

const struct unit_hardening_keys unit_hardening_defaults = {};

struct unit_hardening_keys *unit_hardening_keys_free(struct unit_hardening_keys *h) {
        if (h)
                sandbox_syscall_filter_clear(&h->syscall_log);
        free(h);
        return NULL;
}

const struct unit_hardening_keys *unit_file_hardening(const struct unit_file *f) {
        const struct unit_hardening_keys *h = unit_file_sandbox(f)->hardening;
        return h ? h : &unit_hardening_defaults;
}

/* The keys being parsed (allocated at the first, NULL on ENOMEM), marked as assigned. */
static struct unit_hardening_keys *hardening_keys(struct parse_ctx *c) {
        struct unit_sandbox_keys *sb = uf_sandbox_keys(c);
        if (!sb->hardening)
                sb->hardening = calloc(1, sizeof *sb->hardening);
        return sb->hardening;
}

#define AF(n) { #n, n }
static const struct {
        const char *name;
        int family;
} families[] = {
        AF(AF_UNIX), AF(AF_LOCAL), AF(AF_INET), AF(AF_AX25), AF(AF_IPX), AF(AF_APPLETALK), AF(AF_NETROM),
        AF(AF_BRIDGE), AF(AF_ATMPVC), AF(AF_X25), AF(AF_INET6), AF(AF_ROSE), AF(AF_NETBEUI), AF(AF_SECURITY),
        AF(AF_KEY), AF(AF_NETLINK), AF(AF_ROUTE), AF(AF_PACKET), AF(AF_ASH), AF(AF_ECONET), AF(AF_ATMSVC),
        AF(AF_RDS), AF(AF_SNA), AF(AF_IRDA), AF(AF_PPPOX), AF(AF_WANPIPE), AF(AF_LLC), AF(AF_IB), AF(AF_MPLS),
        AF(AF_CAN), AF(AF_TIPC), AF(AF_BLUETOOTH), AF(AF_IUCV), AF(AF_RXRPC), AF(AF_ISDN), AF(AF_PHONET),
        AF(AF_IEEE802154), AF(AF_CAIF), AF(AF_ALG), AF(AF_NFC), AF(AF_VSOCK), AF(AF_KCM), AF(AF_QIPCRTR),
        AF(AF_SMC), AF(AF_XDP), AF(AF_MCTP),
};
#undef AF

/* An address family's name ("AF_INET"): its number, or -1. */
static int family_from_name(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(families); i++)
                if (streq(families[i].name, name))
                        return families[i].family;
        return -1;
}

/*
 * RestrictAddressFamilies= (systemd's rules): "none" is an empty allow list;
 * the first assignment picks an allow list or, with "~", a deny list; a later
 * one of the same kind adds to it, of the other kind removes from it; empty
 * resets (every family). An unknown family is an error.
 */
static int parse_families(struct parse_ctx *c, const struct key_def *k, const char *value,
                          struct unit_hardening_keys *h) {
        if (!*value || streq(value, "none")) { /* empty: unset, as the defaults; none: an empty allow list */
                h->address_families_set = *value;
                h->address_families_allow = *value;
                h->address_families = 0;
                return 0;
        }
        bool invert = value[0] == '~';
        uint64_t mask = 0;
        for (const char *p = value + invert;;) {
                _cleanup_free_ char *w = NULL;
                char q[QUOTE_BUF];
                int r = uf_next_word(c, k, &p, value, &w, NULL);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                int af = family_from_name(w);
                if (af < 0 || af >= 64)
                        return syntax_error(c, "%s=: unknown address family %s", k->key, uf_quote(q, w));
                mask |= (uint64_t) 1 << af;
        }
        if (!h->address_families_set) {
                h->address_families_set = true;
                h->address_families_allow = !invert;
                h->address_families = mask;
        } else if (h->address_families_allow == !invert)
                h->address_families |= mask;
        else
                h->address_families &= ~mask;
        return 0;
}

static const struct {
        const char *name;
        unsigned long flag;
} namespaces[] = {
        { "cgroup", CLONE_NEWCGROUP }, { "ipc", CLONE_NEWIPC }, { "net", CLONE_NEWNET }, { "mnt", CLONE_NEWNS },
        { "pid", CLONE_NEWPID },       { "user", CLONE_NEWUSER }, { "uts", CLONE_NEWUTS }, { "time", CLONE_NEWTIME },
};

static unsigned long namespaces_all(void) {
        unsigned long all = 0;
        for (size_t i = 0; i < ELEMENTSOF(namespaces); i++)
                all |= namespaces[i].flag;
        return all;
}

/*
 * RestrictNamespaces=: yes (none allowed), no (all), a list of the kinds
 * allowed, "~" and the kinds denied; a later list adds to the allowed set,
 * a later "~" list removes from it (systemd's merge); empty resets.
 */
static int parse_namespaces(struct parse_ctx *c, const struct key_def *k, const char *value,
                            struct unit_hardening_keys *h) {
        if (!*value) { /* reset: the defaults */
                h->namespaces_set = false;
                h->namespaces_allowed = 0;
                return 0;
        }
        int b = uf_parse_boolean(value);
        if (b >= 0) {
                h->namespaces_set = b;
                h->namespaces_allowed = b ? 0 : namespaces_all();
                return 0;
        }
        bool invert = value[0] == '~';
        unsigned long mask = 0;
        for (const char *p = value + invert;;) {
                _cleanup_free_ char *w = NULL;
                char q[QUOTE_BUF];
                int r = uf_next_word(c, k, &p, value, &w, NULL), found = 0;
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                for (size_t i = 0; i < ELEMENTSOF(namespaces); i++)
                        if (streq(namespaces[i].name, w))
                                mask |= namespaces[i].flag, found = 1;
                if (!found)
                        return syntax_error(c, "%s=: unknown namespace type %s", k->key, uf_quote(q, w));
        }
        if (!h->namespaces_set)
                h->namespaces_allowed = invert ? namespaces_all() & ~mask : mask;
        else
                h->namespaces_allowed = invert ? h->namespaces_allowed & ~mask : h->namespaces_allowed | mask;
        h->namespaces_set = true;
        return 0;
}

/* systemd's architecture names ("x86-64") as libseccomp's tokens; "native": this one. */
static uint32_t arch_from_name(const char *name) {
        static const struct {
                const char *systemd, *libseccomp;
        } renamed[] = { { "x86-64", "x86_64" }, { "arm64", "aarch64" } };
        if (streq(name, "native"))
                return seccomp_arch_native();
        for (size_t i = 0; i < ELEMENTSOF(renamed); i++)
                if (streq(renamed[i].systemd, name))
                        return seccomp_arch_resolve_name(renamed[i].libseccomp);
        if (strchr(name, '_')) /* libseccomp's own spelling is not systemd's */
                return 0;
        return seccomp_arch_resolve_name(name);
}

/* SystemCallArchitectures=: names added to the set; empty resets (any architecture). */
static int parse_archs(struct parse_ctx *c, const struct key_def *k, const char *value,
                       struct unit_hardening_keys *h) {
        if (!*value) {
                memset(h->archs, 0, sizeof h->archs);
                return 0;
        }
        for (const char *p = value;;) {
                _cleanup_free_ char *w = NULL;
                char q[QUOTE_BUF];
                int r = uf_next_word(c, k, &p, value, &w, NULL);
                if (r <= 0)
                        return r;
                uint32_t a = arch_from_name(w);
                if (!a)
                        return syntax_error(c, "%s=: unknown architecture %s", k->key, uf_quote(q, w));
                size_t i = 0;
                while (i < UNIT_ARCHS_MAX && h->archs[i] && h->archs[i] != a)
                        i++;
                if (i == UNIT_ARCHS_MAX)
                        return syntax_error(c, "%s=: more than %d architectures", k->key, UNIT_ARCHS_MAX);
                h->archs[i] = a;
        }
}

/* SystemCallLog=: SystemCallFilter='s syntax and merging, without ":ERRNO" (no action: logged); empty resets. */
static int parse_syscall_log(struct parse_ctx *c, const struct key_def *k, const char *value,
                             struct unit_hardening_keys *h) {
        char q[QUOTE_BUF];
        if (strchr(value, ':'))
                return syntax_error(c, "%s=: no action may follow a system call: %s", k->key, uf_quote(q, value));
        return uf_parse_syscall_list(c, k, value, &h->syscall_log);
}

/* The boolean key k->data names, in h. */
static bool *bool_field(struct unit_hardening_keys *h, uintptr_t which) {
        switch (which) {
        case UF_HARDENING_LOCK_PERSONALITY: return &h->lock_personality;
        case UF_HARDENING_MDWE: return &h->memory_deny_write_execute;
        case UF_HARDENING_REALTIME: return &h->restrict_realtime;
        case UF_HARDENING_SUID_SGID: return &h->restrict_suid_sgid;
        case UF_HARDENING_CLOCK: return &h->protect_clock;
        case UF_HARDENING_MODULES: return &h->protect_kernel_modules;
        case UF_HARDENING_LOGS: return &h->protect_kernel_logs;
        case UF_HARDENING_HOSTNAME: return &h->protect_hostname;
        case UF_HARDENING_NETWORK: return &h->private_network;
        case UF_HARDENING_IPC: return &h->private_ipc;
        default: return &h->private_users;
        }
}

int uf_parse_hardening(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_hardening_keys *h = hardening_keys(c);
        char q[QUOTE_BUF];
        if (!h)
                return -ENOMEM;
        switch ((uintptr_t) k->data) {
        case UF_HARDENING_ADDRESS_FAMILIES:
                return parse_families(c, k, value, h);
        case UF_HARDENING_NAMESPACES:
                return parse_namespaces(c, k, value, h);
        case UF_HARDENING_ARCHS:
                return parse_archs(c, k, value, h);
        case UF_HARDENING_SYSCALL_LOG:
                return parse_syscall_log(c, k, value, h);
        default: {
                int b = *value ? uf_parse_boolean(value) : 0;
                if (b < 0)
                        return syntax_error(c, "%s=: invalid boolean %s", k->key, uf_quote(q, value));
                *bool_field(h, (uintptr_t) k->data) = b;
                return 0;
        }
        }
}
