/* SPDX-License-Identifier: MIT */
/*
 * The sandboxing keys' values (sandbox-values.h): Limit*=, capability and
 * errno names, SystemCallFilter= lists. The groups' members are in
 * sandbox-syscalls.c, the plan that applies the values in sandbox.c.
 */
#include <ctype.h>
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>

#include "sandbox-values-internal.h"
#include "sandbox-values.h"
#include "timespan.h"

/* ------------------------------------------------------------------------ */
/* Limit*=                                                                   */
/* ------------------------------------------------------------------------ */

enum limit_kind { LIMIT_NUMBER, LIMIT_BYTES, LIMIT_SECONDS, LIMIT_USEC, LIMIT_NICE };

#define L(name, kind) { "Limit" name, "Limit" name "=", kind }
static const struct {
        const char *key, *key_eq;
        enum limit_kind kind;
} limit_keys[SANDBOX_RLIMIT_MAX] = {
        [RLIMIT_CPU] = L("CPU", LIMIT_SECONDS),
        [RLIMIT_FSIZE] = L("FSIZE", LIMIT_BYTES),
        [RLIMIT_DATA] = L("DATA", LIMIT_BYTES),
        [RLIMIT_STACK] = L("STACK", LIMIT_BYTES),
        [RLIMIT_CORE] = L("CORE", LIMIT_BYTES),
        [RLIMIT_RSS] = L("RSS", LIMIT_BYTES),
        [RLIMIT_NPROC] = L("NPROC", LIMIT_NUMBER),
        [RLIMIT_NOFILE] = L("NOFILE", LIMIT_NUMBER),
        [RLIMIT_MEMLOCK] = L("MEMLOCK", LIMIT_BYTES),
        [RLIMIT_AS] = L("AS", LIMIT_BYTES),
        [RLIMIT_LOCKS] = L("LOCKS", LIMIT_NUMBER),
        [RLIMIT_SIGPENDING] = L("SIGPENDING", LIMIT_NUMBER),
        [RLIMIT_MSGQUEUE] = L("MSGQUEUE", LIMIT_BYTES),
        [RLIMIT_NICE] = L("NICE", LIMIT_NICE),
        [RLIMIT_RTPRIO] = L("RTPRIO", LIMIT_NUMBER),
        [RLIMIT_RTTIME] = L("RTTIME", LIMIT_USEC),
};
#undef L

int sandbox_rlimit_from_key(const char *key) {
        for (int i = 0; key && i < SANDBOX_RLIMIT_MAX; i++)
                if (limit_keys[i].key && streq(limit_keys[i].key, key))
                        return i;
        return -EINVAL;
}

const char *sandbox_rlimit_key(int resource) {
        return resource >= 0 && resource < SANDBOX_RLIMIT_MAX ? limit_keys[resource].key : NULL;
}

const char *sandbox_rlimit_key_eq(int resource) {
        return resource >= 0 && resource < SANDBOX_RLIMIT_MAX ? limit_keys[resource].key_eq : NULL;
}

/* An unsigned decimal integer, all of s[0..n). */
int sandbox_parse_u64(const char *s, size_t n, uint64_t *ret) {
        uint64_t v = 0;
        if (n == 0)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                if (v > (UINT64_MAX - (uint64_t) (s[i] - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        *ret = v;
        return 0;
}

/* "4096", "64K", "16G" (base 1024). */
static int parse_bytes(const char *s, size_t n, uint64_t *ret) {
        static const char suffixes[] = "KMGTPE";
        unsigned shift = 0;
        const char *p = n ? strchr(suffixes, s[n - 1]) : NULL;
        if (p && s[n - 1]) {
                shift = 10 * (unsigned) (p - suffixes + 1);
                n--;
        }
        uint64_t v;
        int r = sandbox_parse_u64(s, n, &v);
        if (r < 0)
                return r;
        if (shift && v > (UINT64_MAX >> shift))
                return -ERANGE;
        *ret = v << shift;
        return 0;
}

static int parse_limit_value(enum limit_kind kind, const char *s, size_t n, rlim_t *ret) {
        char buf[64];
        uint64_t v;
        usec_t u;
        int r;
        if (n == strlen("infinity") && strncmp(s, "infinity", n) == 0) {
                *ret = RLIM_INFINITY;
                return 0;
        }
        switch (kind) {
        case LIMIT_BYTES:
                r = parse_bytes(s, n, &v);
                break;
        case LIMIT_SECONDS:
        case LIMIT_USEC:
                if (n >= sizeof buf)
                        return -EINVAL;
                memcpy(buf, s, n);
                buf[n] = '\0';
                r = parse_timespan(buf, kind == LIMIT_SECONDS ? USEC_PER_SEC : 1, &u);
                if (r < 0)
                        return r;
                if (u == USEC_INFINITY)
                        return -EINVAL;
                v = kind == LIMIT_SECONDS ? (u + USEC_PER_SEC - 1) / USEC_PER_SEC : u; /* CPU: rounded up */
                break;
        case LIMIT_NICE:
                if (n > 0 && (s[0] == '+' || s[0] == '-')) {
                        r = sandbox_parse_u64(s + 1, n - 1, &v);
                        if (r < 0)
                                return r;
                        if (s[0] == '-' ? v > 20 : v > 19)
                                return -ERANGE;
                        v = s[0] == '-' ? 20 + v : 20 - v; /* the kernel's 40..1 for nice -20..19 */
                        break;
                }
                r = sandbox_parse_u64(s, n, &v);
                if (r >= 0 && v > 40)
                        return -ERANGE;
                break;
        default:
                r = sandbox_parse_u64(s, n, &v);
                break;
        }
        if (r < 0)
                return r;
        if ((rlim_t) v == RLIM_INFINITY)
                return -ERANGE;
        *ret = (rlim_t) v;
        return 0;
}

int sandbox_parse_limit(int resource, const char *value, struct rlimit *ret) {
        if (!sandbox_rlimit_key(resource) || !value || !ret)
                return -EINVAL;
        enum limit_kind kind = limit_keys[resource].kind;
        const char *colon = strchr(value, ':');
        struct rlimit rl;
        size_t n = colon ? (size_t) (colon - value) : strlen(value);
        int r = parse_limit_value(kind, value, n, &rl.rlim_cur);
        if (r < 0)
                return r;
        rl.rlim_max = rl.rlim_cur;
        if (colon) {
                r = parse_limit_value(kind, colon + 1, strlen(colon + 1), &rl.rlim_max);
                if (r < 0)
                        return r;
                if (rl.rlim_cur > rl.rlim_max) /* RLIM_INFINITY is the largest */
                        return -EDOM;
        }
        *ret = rl;
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Capabilities, errno names                                                 */
/* ------------------------------------------------------------------------ */

unsigned sandbox_cap_count(void) {
        int n = cap_max_bits();
        return n <= 0 ? 1 : n > 64 ? 64 : (unsigned) n;
}

uint64_t sandbox_capability_all(void) {
        unsigned n = sandbox_cap_count();
        return n >= 64 ? UINT64_MAX : CAP_BIT(n) - 1;
}

int sandbox_capability_from_name(const char *name) {
        cap_value_t c;
        if (!name || !*name || cap_from_name(name, &c) < 0 || c < 0 || (unsigned) c >= sandbox_cap_count())
                return -EINVAL;
        return (int) c;
}

void sandbox_capability_name(int cap, char *buf, size_t size) {
        char *name = cap_to_name((cap_value_t) cap);
        snprintf(buf, size, "%s", name ? name : "?");
        for (char *p = buf; *p; p++)
                *p = (char) toupper((unsigned char) *p);
        cap_free(name);
}

int sandbox_errno_from_name(const char *s) {
        if (!s || !*s)
                return -EINVAL;
        if (streq(s, "kill"))
                return 0;
        if (s[0] >= '0' && s[0] <= '9') {
                uint64_t v;
                return sandbox_parse_u64(s, strlen(s), &v) < 0 || v < 1 || v > 4095 ? -EINVAL : (int) v;
        }
        for (int e = 1; e <= 4095; e++) {
                const char *name = strerrorname_np(e);
                if (name && streq(name, s))
                        return e;
        }
        return -EINVAL;
}

/* ------------------------------------------------------------------------ */
/* SystemCallFilter=                                                         */
/* ------------------------------------------------------------------------ */

void sandbox_syscall_filter_clear(struct sandbox_syscall_filter *f) {
        free(f->syscalls);
        *f = (struct sandbox_syscall_filter) {};
}

/* The index of nr in f, or where it goes (with *found false). */
static size_t filter_find(const struct sandbox_syscall_filter *f, int nr, bool *found) {
        size_t lo = 0, hi = f->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (f->syscalls[mid].nr < nr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = lo < f->n && f->syscalls[lo].nr == nr;
        return lo;
}

static int filter_put(struct sandbox_syscall_filter *f, int nr, int action, bool add) {
        bool found;
        size_t i = filter_find(f, nr, &found);
        if (!add) {
                if (found)
                        memmove(f->syscalls + i, f->syscalls + i + 1, (f->n-- - i - 1) * sizeof *f->syscalls);
                return 0;
        }
        if (found) {
                f->syscalls[i].action = action;
                return 0;
        }
        if ((f->n & (f->n + 1)) == 0 || f->n == 0) { /* grow at 1, 2, 4, … - 1: amortised inserts */
                struct sandbox_syscall *v = realloc(f->syscalls, (2 * f->n + 2) * sizeof *v);
                if (!v)
                        return -ENOMEM;
                f->syscalls = v;
        }
        memmove(f->syscalls + i + 1, f->syscalls + i, (f->n - i) * sizeof *f->syscalls);
        f->syscalls[i] = (struct sandbox_syscall) { nr, action };
        f->n++;
        return 0;
}

/* A group's members, nested groups included; unknown names skipped. */
static int filter_put_group(struct sandbox_syscall_filter *f, const char *const *members, int action, bool add,
                            unsigned depth) {
        int r = 0;
        for (; *members && r >= 0; members++) {
                if ((*members)[0] == '@') {
                        const char *const *g = sandbox_syscall_group(*members);
                        if (g && depth < 4)
                                r = filter_put_group(f, g, action, add, depth + 1);
                        continue;
                }
                int nr = seccomp_syscall_resolve_name(*members);
                if (nr != __NR_SCMP_ERROR)
                        r = filter_put(f, nr, action, add);
        }
        return r;
}

int sandbox_syscall_filter_add(struct sandbox_syscall_filter *f, const char *word, bool invert) {
        if (!f || !word || !*word)
                return -EINVAL;
        char name[128];
        const char *colon = strchr(word, ':');
        size_t n = colon ? (size_t) (colon - word) : strlen(word);
        int action = SANDBOX_ACTION_DEFAULT;
        if (n == 0 || n >= sizeof name)
                return -EINVAL;
        memcpy(name, word, n);
        name[n] = '\0';
        if (colon) {
                if (!invert)
                        return -EDOM;
                action = sandbox_errno_from_name(colon + 1);
                if (action < 0)
                        return -EBADMSG;
        }
        const char *const *group = name[0] == '@' ? sandbox_syscall_group(name) : NULL;
        int nr = name[0] == '@' ? 0 : seccomp_syscall_resolve_name(name);
        if (name[0] == '@' && !group)
                return -ENOENT;
        if (name[0] != '@' && nr == __NR_SCMP_ERROR)
                return -EINVAL;
        if (!f->set) {
                f->set = true;
                f->allow_list = !invert;
        }
        bool add = invert != f->allow_list; /* the list's own kind adds, the other removes */
        return group ? filter_put_group(f, group, action, add, 0) : filter_put(f, nr, action, add);
}

static const char *const exempt_names[] = { "execve", "exit", "exit_group", "rt_sigprocmask" };

bool sandbox_syscall_is_exempt(int nr) {
        for (size_t i = 0; i < ELEMENTSOF(exempt_names); i++)
                if (seccomp_syscall_resolve_name(exempt_names[i]) == nr)
                        return true;
        return false;
}

void sandbox_syscall_filter_exempt(const struct sandbox_syscall_filter *f, char *buf, size_t size) {
        size_t o = 0;
        if (size)
                buf[0] = '\0';
        if (!f->set || f->allow_list)
                return;
        for (size_t i = 0; i < ELEMENTSOF(exempt_names); i++) {
                bool found;
                (void) filter_find(f, seccomp_syscall_resolve_name(exempt_names[i]), &found);
                if (found && o < size)
                        o += (size_t) snprintf(buf + o, size - o, "%s%s", o ? " " : "", exempt_names[i]);
        }
}
