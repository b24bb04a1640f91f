/* SPDX-License-Identifier: MIT */
/*
 * seccomp (issue 17): the hardening keys as parsed (unit-file-hardening.c:
 * values, errors with file:line, empty assignments, "~" lists) and their
 * filters and namespaces applied in a child (exec/sandbox-seccomp.c,
 * exec/sandbox-ns.c) through the plan of sandbox.h.
 */
#include <errno.h>
#include <pwd.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "sandbox-seccomp.h"
#include "sandbox.h"
#include "sandbox-child.h"
#include "unit-file.h"

static char last_msg[1400];

static void sink(int level, const char *msg, void *userdata) {
        (void) level;
        (void) userdata;
        snprintf(last_msg, sizeof last_msg, "%s", msg);
}

/* A unit of [Service] lines; NULL (and *ret the error) if refused. */
static struct unit_file *parse(const char *lines, int *ret) {
        char text[4096];
        snprintf(text, sizeof text, "[Service]\nExecStart=/bin/true\n%s", lines);
        struct unit_file *u = NULL;
        last_msg[0] = 0;
        int r = unit_file_parse("h.service", "test/h.service", text, strlen(text), &u, NULL);
        if (ret)
                *ret = r;
        return r < 0 ? NULL : u;
}

static struct unit_file *parse_ok(const char *lines) {
        int r;
        struct unit_file *u = parse(lines, &r);
        if (!u)
                fail_msg("%s: refused (%d): %s", lines, r, last_msg);
        return u;
}

/* lines are refused with a message holding "test/h.service:LINE" and want. */
static void assert_refused(const char *lines, unsigned line, const char *want) {
        int r;
        char where[64];
        struct unit_file *u = parse(lines, &r);
        if (u)
                fail_msg("%s: accepted", lines);
        assert_int_equal(r, -EINVAL);
        snprintf(where, sizeof where, "test/h.service:%u", line);
        if (!strstr(last_msg, where) || !strstr(last_msg, want))
                fail_msg("%s: message \"%s\" lacks \"%s\" or \"%s\"", lines, last_msg, where, want);
}

#define BIT(af) ((uint64_t) 1 << (af))

static void test_defaults(void **state) {
        (void) state;
        struct unit_file *u = parse_ok("");
        const struct unit_hardening_keys *h = unit_file_hardening(u);
        assert_null(u->sandbox ? u->sandbox->hardening : NULL);
        assert_false(h->address_families_set);
        assert_false(h->namespaces_set);
        assert_int_equal(h->archs[0], 0);
        assert_false(h->lock_personality || h->private_network || h->private_users);
        unit_file_free(u);
}

static void test_address_families(void **state) {
        (void) state;
        struct unit_file *u = parse_ok("RestrictAddressFamilies=AF_UNIX AF_INET\nRestrictAddressFamilies=AF_INET6\n");
        const struct unit_hardening_keys *h = unit_file_hardening(u);
        assert_true(h->address_families_set && h->address_families_allow);
        assert_true(h->address_families == (BIT(AF_UNIX) | BIT(AF_INET) | BIT(AF_INET6)));
        unit_file_free(u);
        /* a "~" list after an allow list removes from it */
        u = parse_ok("RestrictAddressFamilies=AF_UNIX AF_INET\nRestrictAddressFamilies=~AF_INET\n");
        h = unit_file_hardening(u);
        assert_true(h->address_families_allow && h->address_families == BIT(AF_UNIX));
        unit_file_free(u);
        u = parse_ok("RestrictAddressFamilies=~AF_PACKET\nRestrictAddressFamilies=~AF_NETLINK\n");
        h = unit_file_hardening(u);
        assert_true(h->address_families_set && !h->address_families_allow);
        assert_true(h->address_families == (BIT(AF_PACKET) | BIT(AF_NETLINK)));
        unit_file_free(u);
        u = parse_ok("RestrictAddressFamilies=none\n");
        h = unit_file_hardening(u);
        assert_true(h->address_families_set && h->address_families_allow && h->address_families == 0);
        unit_file_free(u);
        /* empty resets */
        u = parse_ok("RestrictAddressFamilies=AF_UNIX\nRestrictAddressFamilies=\n");
        assert_false(unit_file_hardening(u)->address_families_set);
        unit_file_free(u);
        assert_refused("RestrictAddressFamilies=AF_UNIX AF_BOGUS\n", 3, "unknown address family \"AF_BOGUS\"");
}

static void test_namespaces(void **state) {
        (void) state;
        struct unit_file *u = parse_ok("RestrictNamespaces=yes\n");
        const struct unit_hardening_keys *h = unit_file_hardening(u);
        assert_true(h->namespaces_set && h->namespaces_allowed == 0);
        unit_file_free(u);
        u = parse_ok("RestrictNamespaces=net ipc\nRestrictNamespaces=uts\n");
        h = unit_file_hardening(u);
        assert_true(h->namespaces_set && h->namespaces_allowed == (CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS));
        unit_file_free(u);
        u = parse_ok("RestrictNamespaces=~user mnt\n");
        h = unit_file_hardening(u);
        assert_true(h->namespaces_set);
        assert_true(h->namespaces_allowed & CLONE_NEWNET);
        assert_false(h->namespaces_allowed & (CLONE_NEWUSER | CLONE_NEWNS));
        unit_file_free(u);
        u = parse_ok("RestrictNamespaces=yes\nRestrictNamespaces=no\n");
        assert_false(unit_file_hardening(u)->namespaces_set);
        unit_file_free(u);
        u = parse_ok("RestrictNamespaces=yes\nRestrictNamespaces=\n");
        assert_false(unit_file_hardening(u)->namespaces_set);
        unit_file_free(u);
        assert_refused("Description=x\nRestrictNamespaces=net bogus\n", 4, "unknown namespace type \"bogus\"");
}

static void test_archs_and_booleans(void **state) {
        (void) state;
        struct unit_file *u = parse_ok("SystemCallArchitectures=native\nLockPersonality=yes\nMemoryDenyWriteExecute=true\n"
                                       "RestrictRealtime=1\nRestrictSUIDSGID=on\nProtectClock=yes\n"
                                       "ProtectKernelModules=yes\nProtectKernelLogs=yes\nProtectHostname=yes\n"
                                       "PrivateNetwork=yes\nPrivateIPC=yes\nPrivateUsers=yes\n");
        const struct unit_hardening_keys *h = unit_file_hardening(u);
        assert_int_equal(h->archs[0], seccomp_arch_native());
        assert_int_equal(h->archs[1], 0);
        assert_true(h->lock_personality && h->memory_deny_write_execute && h->restrict_realtime &&
                    h->restrict_suid_sgid && h->protect_clock && h->protect_kernel_modules && h->protect_kernel_logs &&
                    h->protect_hostname && h->private_network && h->private_ipc && h->private_users);
        unit_file_free(u);
        u = parse_ok("SystemCallArchitectures=native x86 x86-64\nSystemCallArchitectures=native\n");
        h = unit_file_hardening(u);
        assert_int_equal(h->archs[0], seccomp_arch_native());
        assert_int_not_equal(h->archs[1], 0);
        assert_int_equal(h->archs[2], 0); /* native is x86-64 here: once */
        unit_file_free(u);
        u = parse_ok("SystemCallArchitectures=native\nSystemCallArchitectures=\nPrivateNetwork=yes\nPrivateNetwork=\n");
        h = unit_file_hardening(u);
        assert_int_equal(h->archs[0], 0);
        assert_true(h->private_network); /* parsefix: systemd 252 ignores an empty boolean */
        unit_file_free(u);
        assert_refused("SystemCallArchitectures=native pdp11\n", 3, "unknown architecture \"pdp11\"");
        assert_refused("SystemCallArchitectures=x86_64\n", 3, "unknown architecture");
        assert_refused("LockPersonality=maybe\n", 3, "LockPersonality=: invalid boolean \"maybe\"");
}

static void test_syscall_log(void **state) {
        (void) state;
        struct unit_file *u = parse_ok("SystemCallLog=@clock\nSystemCallLog=~clock_settime\n");
        const struct sandbox_syscall_filter *l = &unit_file_hardening(u)->syscall_log;
        assert_true(l->set && l->allow_list);
        bool settime = false, adjtimex = false;
        for (size_t i = 0; i < l->n; i++) {
                settime |= l->syscalls[i].nr == seccomp_syscall_resolve_name("clock_settime");
                adjtimex |= l->syscalls[i].nr == seccomp_syscall_resolve_name("adjtimex");
        }
        assert_true(adjtimex && !settime); /* "~" after an allow list removes */
        unit_file_free(u);
        u = parse_ok("SystemCallLog=~@mount\nSystemCallLog=\n");
        assert_false(unit_file_hardening(u)->syscall_log.set);
        unit_file_free(u);
        assert_refused("SystemCallLog=~mount:EPERM\n", 3, "SystemCallLog=: no action may follow a system call: \"~mount:EPERM\"");
        assert_refused("SystemCallLog=nosuchcall\n", 3, "SystemCallLog=: unknown system call \"nosuchcall\"");
        assert_refused("SystemCallLog=@nosuchgroup\n", 3, "unknown system call group \"@nosuchgroup\"");
}

/* ------------------------------------------------------------------------ */
/* The plan applied in a child                                               */
/* ------------------------------------------------------------------------ */

/* Runs the hook of lines' plan (for this process's credentials) in a child,
 * then check() there: the child's wait status; *ret_error, *ret_stage: the hook's failure. */
static int run_hook(const char *lines, int (*check)(void), int *ret_error, int *ret_stage) {
        struct sandbox_self self;
        assert_int_equal(sandbox_self_get(&self), 0);
        struct unit_file *u = parse_ok(lines);
        struct sandbox_plan *p = NULL;
        int k = sandbox_plan_new("h.service", u, 0, &self, &p);
        if (k < 0)
                fail_msg("%s: no plan (%d): %s", lines, k, last_msg);
        int status = sandbox_hook_in_child(p, check, ret_error, ret_stage);
        sandbox_plan_free(p);
        unit_file_free(u);
        return status;
}

/* check() exits 0 under lines; 1 without the key (the negative control: the forbidden thing works). */
static void assert_check(const char *lines, int (*check)(void)) {
        int error, stage, status = run_hook(lines, check, &error, &stage);
        if (error)
                fail_msg("%s: the hook failed at stage %d: %s", lines, stage, strerror(-error));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("%s: the check failed (wait status 0x%x)", lines, status);
        status = run_hook("Nice=0\n", check, &error, &stage);
        if (!WIFEXITED(status) || WEXITSTATUS(status) == 0)
                fail_msg("%s: the check passes without the key too: it proves nothing", lines);
}

static bool is_root(void) {
        return geteuid() == 0;
}

#define DENIED(call, e) ((call) < 0 && errno == (e))

static int check_families(void) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 2)
                return 2;
        close(fd);
        return DENIED(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), EAFNOSUPPORT) &&
                       DENIED(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0), EAFNOSUPPORT) ? 0 : 1;
}

static int check_families_deny(void) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return 2;
        close(fd);
        return DENIED(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0), EAFNOSUPPORT) ? 0 : 1;
}

/* SystemCallLog=clock_getres: a program loaded that logs the call, never denies it. */
static int check_logged(void) {
        struct timespec ts;
        if (syscall(SYS_clock_getres, CLOCK_REALTIME, &ts) < 0 || DENIED(clock_settime(CLOCK_MONOTONIC, &ts), EPERM))
                return 2;
        return prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2 ? 0 : 1;
}

static int check_namespaces(void) {
        if (!DENIED(unshare(CLONE_NEWUSER), EPERM) || !DENIED(unshare(CLONE_NEWUTS), EPERM))
                return 1;
        return DENIED(syscall(SYS_clone3, NULL, 0), ENOSYS) ? 0 : 3;
}

static int check_namespaces_list(void) {
        if (unshare(CLONE_NEWNET) < 0 || unshare(CLONE_NEWIPC) < 0) /* allowed */
                return 2;
        return DENIED(unshare(CLONE_NEWUTS), EPERM) ? 0 : 1;
}

static int check_wx(void) {
        void *m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
                return 2;
        if (mmap(NULL, 4096, PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED || errno != EPERM)
                return 1;
        void *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return w != MAP_FAILED && DENIED(mprotect(w, 4096, PROT_READ | PROT_EXEC), EPERM) ? 0 : 1;
}

static int check_personality(void) {
        if (personality(PER_LINUX) < 0)
                return 2;
        return DENIED(personality(PER_LINUX32), EPERM) ? 0 : 1;
}

static int check_realtime(void) {
        struct sched_param sp = { .sched_priority = 1 }, none = { 0 };
        if (sched_setscheduler(0, SCHED_BATCH, &none) < 0)
                return 2;
        return DENIED(sched_setscheduler(0, SCHED_FIFO, &sp), EPERM) && DENIED(sched_setscheduler(0, SCHED_RR, &sp), EPERM)
                       ? 0 : 1;
}

static int check_suid(void) {
        char path[] = "/tmp/tend-test-hardening-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0)
                return 2;
        close(fd);
        int ok = chmod(path, 0755) == 0 && DENIED(chmod(path, 04755), EPERM) && DENIED(chmod(path, 02755), EPERM);
        unlink(path);
        char created[] = "/tmp/tend-test-hardening-suid";
        unlink(created);
        ok = ok && DENIED(open(created, O_CREAT | O_WRONLY | O_CLOEXEC, 04755), EPERM);
        unlink(created);
        return ok ? 0 : 1;
}

static int check_clock(void) {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return 2;
        if (prctl(PR_CAPBSET_READ, CAP_SYS_TIME, 0, 0, 0) != 0 || prctl(PR_CAPBSET_READ, CAP_WAKE_ALARM, 0, 0, 0) != 0)
                return 1;
        return DENIED(clock_settime(CLOCK_REALTIME, &ts), EPERM) ? 0 : 1;
}

static int check_modules_logs(void) {
        if (prctl(PR_CAPBSET_READ, CAP_SYS_MODULE, 0, 0, 0) != 0 || prctl(PR_CAPBSET_READ, CAP_SYSLOG, 0, 0, 0) != 0)
                return 1;
        return DENIED(syscall(SYS_delete_module, "tend-no-such-module", 0), EPERM) &&
                       DENIED(syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0), EPERM) ? 0 : 1;
}

static char host_before[128];

static int check_hostname(void) {
        char now[128] = {};
        if (!DENIED(sethostname("tend-test", 9), EPERM))
                return 1;
        /* the UTS namespace: a change made from outside the filter is the namespace's own */
        return gethostname(now, sizeof now) == 0 && streq(now, host_before) ? 0 : 2;
}

static int check_network(void) {
        struct if_nameindex *l = if_nameindex();
        if (!l)
                return 2;
        bool only_lo = l[0].if_name && streq(l[0].if_name, "lo") && !l[1].if_name;
        if_freenameindex(l);
        if (!only_lo)
                return 1;
        struct ifreq ifr = { .ifr_name = "lo" };
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int up = fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
        close(fd);
        return up ? 0 : 3;
}

static int host_shm = -1;

static int check_ipc(void) {
        return DENIED(shmctl(host_shm, IPC_STAT, &(struct shmid_ds) {}), EINVAL) ? 0 : 1;
}

static int check_users(void) {
        char buf[128] = {};
        int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read(fd, buf, sizeof buf - 1) <= 0)
                return 2;
        close(fd);
        /* one line: root to root (the unit runs as root here) */
        unsigned a, b, n;
        int consumed = 0;
        return sscanf(buf, "%u %u %u%n", &a, &b, &n, &consumed) == 3 && a == 0 && b == 0 && n == 1 &&
                       !strchr(buf + consumed + 1, '\n') ? 0 : 1;
}

/* PrivateUsers= with User=nobody: root and nobody mapped, and the process is nobody inside. */
static uid_t nobody_uid = 65534;

static int check_users_nobody(void) {
        char buf[256] = {}, want[64];
        int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read(fd, buf, sizeof buf - 1) <= 0)
                return 2;
        close(fd);
        snprintf(want, sizeof want, "%u", (unsigned) nobody_uid);
        unsigned a, b, n, c, d, m;
        if (sscanf(buf, "%u %u %u %u %u %u", &a, &b, &n, &c, &d, &m) != 6)
                return 1;
        return a == 0 && b == 0 && n == 1 && c == nobody_uid && d == nobody_uid && m == 1 && getuid() == nobody_uid
                       ? 0 : 3;
}

#if defined(__x86_64__)
static int check_i386_call(void) {
        long ret;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20) /* i386 getpid */ : "memory");
        return ret == getpid() ? 1 : 2; /* under SystemCallArchitectures=native: SIGSYS before this */
}
#endif

static void test_seccomp_keys(void **state) {
        (void) state;
        assert_check("RestrictAddressFamilies=AF_UNIX\n", check_families);
        assert_check("RestrictAddressFamilies=~AF_PACKET\n", check_families_deny);
        assert_check("RestrictNamespaces=yes\n", check_namespaces);
        assert_check("MemoryDenyWriteExecute=yes\n", check_wx);
        assert_check("LockPersonality=yes\n", check_personality);
        assert_check("RestrictSUIDSGID=yes\n", check_suid);
        assert_check("SystemCallLog=clock_getres\n", check_logged);
        if (!is_root())
                return; /* the rest needs what root has (the negative controls: the call succeeding) */
        assert_check("RestrictNamespaces=net ipc\n", check_namespaces_list);
        assert_check("RestrictRealtime=yes\n", check_realtime);
        assert_check("ProtectClock=yes\n", check_clock);
        assert_check("ProtectKernelModules=yes\nProtectKernelLogs=yes\n", check_modules_logs);
}

static void test_architectures(void **state) {
        (void) state;
#if defined(__x86_64__)
        int error, stage;
        int status = run_hook("SystemCallArchitectures=native\n", check_i386_call, &error, &stage);
        assert_int_equal(error, 0);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS)
                fail_msg("an i386 call under SystemCallArchitectures=native: wait status 0x%x, not SIGSYS", status);
        status = run_hook("Nice=0\n", check_i386_call, &error, &stage);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 1)
                skip(); /* a kernel without IA32 emulation: nothing to compare with */
        status = run_hook("SystemCallArchitectures=native x86\n", check_i386_call, &error, &stage);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
#else
        skip();
#endif
}

static void test_namespaces_applied(void **state) {
        (void) state;
        if (!is_root())
                skip();
        assert_int_equal(gethostname(host_before, sizeof host_before), 0);
        assert_check("ProtectHostname=yes\n", check_hostname);
        assert_check("PrivateNetwork=yes\n", check_network);
        host_shm = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
        assert_true(host_shm >= 0);
        assert_check("PrivateIPC=yes\n", check_ipc);
        shmctl(host_shm, IPC_RMID, NULL);
        if (access("/proc/self/ns/user", F_OK) != 0)
                return;
        assert_check("PrivateUsers=yes\n", check_users);
        struct passwd *nobody = getpwnam("nobody");
        if (!nobody)
                return;
        nobody_uid = nobody->pw_uid;
        assert_check("PrivateUsers=yes\nUser=nobody\n", check_users_nobody);
}

/* Without CAP_SYS_ADMIN and without PrivateUsers=, PrivateNetwork= cannot be
 * applied: the plan is refused, naming the key (hardening_cannot_apply()). */
static void test_cannot_apply(void **state) {
        (void) state;
        struct sandbox_self self;
        assert_int_equal(sandbox_self_get(&self), 0);
        self.effective &= ~((uint64_t) 1 << CAP_SYS_ADMIN);
        struct unit_file *u = parse_ok("PrivateNetwork=yes\n");
        struct sandbox_plan *p = NULL;
        assert_int_equal(sandbox_plan_new("h.service", u, 0, &self, &p), -EPERM);
        assert_non_null(strstr(last_msg, "h.service: PrivateNetwork= cannot be applied (needs CAP_SYS_ADMIN"));
        unit_file_free(u);
        /* SystemCallFilter='s rule: no CAP_SYS_ADMIN implies NoNewPrivileges= */
        u = parse_ok("LockPersonality=yes\n");
        assert_int_equal(sandbox_plan_new("h.service", u, 0, &self, &p), 0);
        assert_true(p->no_new_privs && p->hardening && p->hardening->n_programs >= 1);
        sandbox_plan_free(p);
        self.effective |= (uint64_t) 1 << CAP_SYS_ADMIN;
        assert_int_equal(sandbox_plan_new("h.service", u, 0, &self, &p), 0);
        assert_false(p->no_new_privs);
        sandbox_plan_free(p);
        unit_file_free(u);
}

int main(void) {
        log_set_sink(sink, NULL);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_address_families),
                cmocka_unit_test(test_namespaces),
                cmocka_unit_test(test_archs_and_booleans),
                cmocka_unit_test(test_syscall_log),
                cmocka_unit_test(test_seccomp_keys),
                cmocka_unit_test(test_architectures),
                cmocka_unit_test(test_namespaces_applied),
                cmocka_unit_test(test_cannot_apply),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
