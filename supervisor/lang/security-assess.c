/* SPDX-License-Identifier: MIT */
/* security: a unit's exposure as systemd-analyze security scores it (security-assess.h). */
#include <errno.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "security-assess.h"
#include "unit-file-internal.h"
#include "unit-hardening.h"

/* What the checks read, once the unit's assignments are replayed. */
struct info {
        const struct unit_file *f;
        bool privileged;                 /* runs as root: User= unset, 0 or root */
        bool default_dependencies;
        unsigned long restrict_ns;       /* namespaces the unit may still create */
        bool af_restricted[5];           /* inet, unix, netlink, packet, other */
        bool af_list, af_allow;          /* RestrictAddressFamilies= set, as an allow list */
        bool archs_native, archs_any;    /* SystemCallArchitectures= */
};

enum { AF_C_INET, AF_C_UNIX, AF_C_NETLINK, AF_C_PACKET, AF_C_OTHER };

#define NS_ALL (CLONE_NEWCGROUP | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUSER | CLONE_NEWUTS)

typedef int (*assess_fn)(const struct info *i, const void *param, const char **description);

struct check_def {
        const char *name, *key;
        unsigned weight, range;
        assess_fn assess;
        const void *param;
        bool default_dependencies_only;
        const char *good, *bad;
};

static bool apply_all; /* security_assess_test_apply_all() */

void security_assess_test_apply_all(bool on) {
        apply_all = on;
}

/* Whether tend applies f's key: it is in the key table (and not one it
 * refuses) and not accepted as weaker. */
static bool applied(const struct unit_file *f, const char *key) {
        bool known = apply_all ? !unit_hardening_refused_why(key) : uf_key_lookup(SECTION_SERVICE, key) != NULL;
        return known && !unit_hardening_accepts(f, key);
}

/* The value tend applies for key, or NULL (the default). */
static const char *value(const struct info *i, const char *key) {
        return applied(i->f, key) ? unit_hardening_value(i->f, key) : NULL;
}

static bool boolean(const struct info *i, const char *key) {
        const char *v = value(i, key);
        return v && uf_parse_boolean(v) > 0;
}

/* ------------------------------------------------------------------------ */
/* The checks                                                                */
/* ------------------------------------------------------------------------ */

static int assess_true(const struct info *i, const void *key, const char **d) {
        (void) d;
        return !boolean(i, key);
}

static int assess_false(const struct info *i, const void *key, const char **d) {
        (void) d;
        return boolean(i, key);
}

static int assess_user(const struct info *i, const void *param, const char **d) {
        (void) param;
        const char *u = unit_file_sandbox(i->f)->user;
        if (u && streq(u, "nobody")) {
                *d = "runs as nobody, a user no service should share";
                return 9;
        }
        if (!i->privileged) {
                *d = "runs as a user of its own, not root";
                return 0;
        }
        *d = "runs as root";
        return 10;
}

static int assess_supplementary(const struct info *i, const void *param, const char **d) {
        (void) param, (void) d;
        if (i->privileged)
                return SECURITY_NOT_APPLICABLE;
        return unit_file_sandbox(i->f)->supplementary_groups != NULL;
}

static int assess_remove_ipc(const struct info *i, const void *param, const char **d) {
        (void) param, (void) d;
        return i->privileged ? SECURITY_NOT_APPLICABLE : !boolean(i, "RemoveIPC");
}

static int assess_words(const struct info *i, const char *key, const char *const *words, const int *badness,
                        int other, const char **d) {
        const char *v = value(i, key);
        int b = v ? uf_parse_boolean(v) : 0;
        (void) d;
        if (b >= 0)
                return badness[b]; /* [0] no, [1] yes */
        for (size_t n = 0; words[n]; n++)
                if (streq(v, words[n]))
                        return badness[2 + n];
        return other;
}

static int assess_protect_system(const struct info *i, const void *param, const char **d) {
        (void) param;
        static const char *const words[] = { "full", "strict", NULL };
        static const int badness[] = { 10, 5, 3, 0 };
        int b = assess_words(i, "ProtectSystem", words, badness, 10, d);
        *d = b == 0 ? "the OS hierarchy is read-only" : b == 10 ? "may write the OS hierarchy"
                                                                 : "may write parts of the OS hierarchy";
        return b;
}

static int assess_protect_home(const struct info *i, const void *param, const char **d) {
        (void) param;
        static const char *const words[] = { "read-only", "tmpfs", NULL };
        static const int badness[] = { 10, 0, 5, 1 };
        int b = assess_words(i, "ProtectHome", words, badness, 10, d);
        *d = b == 0 ? "no access to home directories" : b == 10 ? "full access to home directories"
                                                                 : "limited access to home directories";
        return b;
}

static int assess_protect_proc(const struct info *i, const void *param, const char **d) {
        (void) param, (void) d;
        const char *v = value(i, "ProtectProc");
        if (v && (streq(v, "invisible") || streq(v, "ptraceable")))
                return 0;
        return v && streq(v, "noaccess") ? 1 : 3;
}

static int assess_proc_subset(const struct info *i, const void *param, const char **d) {
        (void) param, (void) d;
        const char *v = value(i, "ProcSubset");
        return !(v && streq(v, "pid"));
}

static int assess_root_directory(const struct info *i, const void *param, const char **d) {
        (void) param, (void) d;
        const char *r = value(i, "RootDirectory"), *m = value(i, "RootImage");
        return (!r || !*r || streq(r, "/")) && (!m || !*m);
}

/* keyring: what tend gives the unit (unit_keyring_mode(): its value or tend's default), if it can. */
static bool keyring_private(const struct unit_file *f) {
        return applied(f, "KeyringMode") && unit_keyring_available() && unit_keyring_mode(f) == UNIT_KEYRING_PRIVATE;
}

static int assess_keyring(const struct info *i, const void *param, const char **d) {
        (void) param, (void) d;
        return !keyring_private(i->f);
}

static int assess_notify_access(const struct info *i, const void *param, const char **d) {
        (void) param, (void) d;
        return i->f->notify_access == UNIT_NOTIFY_ACCESS_ALL;
}

static int assess_umask(const struct info *i, const void *param, const char **d) {
        (void) param;
        mode_t m = unit_file_sandbox(i->f)->umask;
        static const struct { mode_t bit; int badness; const char *what; } t[] = {
                { 0002, 10, "new files are world-writable" }, { 0004, 5, "new files are world-readable" },
                { 0020, 2, "new files are group-writable" }, { 0040, 1, "new files are group-readable" },
        };
        for (size_t n = 0; n < ELEMENTSOF(t); n++)
                if (!(m & t[n].bit)) {
                        *d = t[n].what;
                        return t[n].badness;
                }
        *d = "new files are the user's alone";
        return 0;
}

static int assess_caps(const struct info *i, const void *mask, const char **d) {
        (void) d;
        return !!(unit_file_sandbox(i->f)->capability_bounding_set & *(const uint64_t *) mask);
}

static int assess_ambient(const struct info *i, const void *param, const char **d) {
        (void) param, (void) d;
        return unit_file_sandbox(i->f)->ambient_capabilities != 0;
}

static int assess_ns(const struct info *i, const void *flag, const char **d) {
        (void) d;
        return !!(i->restrict_ns & *(const unsigned long *) flag);
}

static int assess_af(const struct info *i, const void *class, const char **d) {
        (void) d;
        return !i->af_restricted[*(const int *) class];
}

static int assess_archs(const struct info *i, const void *param, const char **d) {
        (void) param;
        *d = i->archs_native ? "native system calls only" : i->archs_any ? "system calls of several ABIs"
                                                                         : "system calls of every ABI";
        return i->archs_native ? 0 : i->archs_any ? 8 : 10;
}

static int assess_ip(const struct info *i, const void *param, const char **d) {
        (void) i, (void) param;
        *d = "no IP address allow list (tend refuses IPAddressDeny=)";
        return 10;
}

/* PrivateDevices= is systemd's closed device policy: pseudo devices alone,
 * the RTC too with ProtectClock= (an ACL with some devices: 5); tend refuses
 * DevicePolicy=closed|strict and DeviceAllow=. */
static int assess_devices(const struct info *i, const void *param, const char **d) {
        (void) param;
        if (boolean(i, "PrivateDevices")) {
                bool rtc = boolean(i, "ProtectClock");
                *d = rtc ? "pseudo devices and the RTC only (PrivateDevices=, ProtectClock=)"
                         : "pseudo devices only (PrivateDevices=)";
                return rtc ? 5 : 0;
        }
        *d = "no device access list (tend refuses DevicePolicy=closed|strict)";
        return 10;
}

/* Whether one of group's calls (nested groups included) passes f's filter. */
static bool group_passes(const struct sandbox_syscall_filter *f, const char *group, int depth) {
        const char *const *m = sandbox_syscall_group(group);
        for (; m && *m && depth < 8; m++) {
                if ((*m)[0] == '@') {
                        if (group_passes(f, *m, depth + 1))
                                return true;
                        continue;
                }
                int nr = seccomp_syscall_resolve_name(*m);
                if (nr == __NR_SCMP_ERROR)
                        continue;
                bool listed = false;
                for (size_t k = 0; k < f->n && !listed; k++)
                        listed = f->syscalls[k].nr == nr;
                if (listed == f->allow_list)
                        return true;
        }
        return false;
}

static int assess_syscalls(const struct info *i, const void *group, const char **d) {
        const struct sandbox_syscall_filter *f = &unit_file_sandbox(i->f)->syscall_filter;
        if (!f->set) {
                *d = "no system call filter";
                return 10;
        }
        bool passes = group_passes(f, group, 0);
        if (f->allow_list) {
                *d = passes ? "an allow list that lets some of the group through" : "an allow list without the group";
                return passes ? 9 : 0;
        }
        *d = passes ? "a deny list that lets some of the group through" : "a deny list with the whole group";
        return passes ? 10 : 0;
}

/* ------------------------------------------------------------------------ */
/* The table: systemd 252's checks, weights and ranges                       */
/* ------------------------------------------------------------------------ */

#define CAP(c) (UINT64_C(1) << (c))
static const uint64_t caps_admin = CAP(CAP_SYS_ADMIN);
static const uint64_t caps_setid = CAP(CAP_SETUID) | CAP(CAP_SETGID) | CAP(CAP_SETPCAP);
static const uint64_t caps_ptrace = CAP(CAP_SYS_PTRACE), caps_time = CAP(CAP_SYS_TIME);
static const uint64_t caps_net_admin = CAP(CAP_NET_ADMIN), caps_rawio = CAP(CAP_SYS_RAWIO);
static const uint64_t caps_module = CAP(CAP_SYS_MODULE);
static const uint64_t caps_audit = CAP(CAP_AUDIT_CONTROL) | CAP(CAP_AUDIT_READ) | CAP(CAP_AUDIT_WRITE);
static const uint64_t caps_syslog = CAP(CAP_SYSLOG), caps_nice = CAP(CAP_SYS_NICE) | CAP(CAP_SYS_RESOURCE);
static const uint64_t caps_mknod = CAP(CAP_MKNOD), caps_chown = CAP(CAP_CHOWN) | CAP(CAP_FSETID) | CAP(CAP_SETFCAP);
static const uint64_t caps_dac = CAP(CAP_DAC_OVERRIDE) | CAP(CAP_DAC_READ_SEARCH) | CAP(CAP_FOWNER) | CAP(CAP_IPC_OWNER);
static const uint64_t caps_kill = CAP(CAP_KILL);
static const uint64_t caps_net = CAP(CAP_NET_BIND_SERVICE) | CAP(CAP_NET_BROADCAST) | CAP(CAP_NET_RAW);
static const uint64_t caps_boot = CAP(CAP_SYS_BOOT), caps_mac = CAP(CAP_MAC_ADMIN) | CAP(CAP_MAC_OVERRIDE);
static const uint64_t caps_immutable = CAP(CAP_LINUX_IMMUTABLE), caps_ipc_lock = CAP(CAP_IPC_LOCK);
static const uint64_t caps_chroot = CAP(CAP_SYS_CHROOT), caps_suspend = CAP(CAP_BLOCK_SUSPEND);
static const uint64_t caps_alarm = CAP(CAP_WAKE_ALARM), caps_lease = CAP(CAP_LEASE);
static const uint64_t caps_tty = CAP(CAP_SYS_TTY_CONFIG), caps_pacct = CAP(CAP_SYS_PACCT);
static const uint64_t caps_bpf = CAP(CAP_BPF);
static const unsigned long ns_user = CLONE_NEWUSER, ns_mnt = CLONE_NEWNS, ns_ipc = CLONE_NEWIPC;
static const unsigned long ns_pid = CLONE_NEWPID, ns_cgroup = CLONE_NEWCGROUP, ns_net = CLONE_NEWNET;
static const unsigned long ns_uts = CLONE_NEWUTS;
static const int af_inet = AF_C_INET, af_unix = AF_C_UNIX, af_netlink = AF_C_NETLINK, af_packet = AF_C_PACKET;
static const int af_other = AF_C_OTHER;

#define BOOL(key, w, good, bad) { key "=", key, w, 1, assess_true, key, false, good, bad }
#define BOOL_DD(key, w, good, bad) { key "=", key, w, 1, assess_true, key, true, good, bad }
#define CAPS(name, w, mask, good, bad) \
        { "CapabilityBoundingSet=~" name, "CapabilityBoundingSet", w, 1, assess_caps, &(mask), false, good, bad }
#define NS(name, w, flag, what) \
        { "RestrictNamespaces=~" name, "RestrictNamespaces", w, 1, assess_ns, &(flag), false, \
          "cannot create " what " namespaces", "may create " what " namespaces" }
#define AF(name, w, class, what) \
        { "RestrictAddressFamilies=~" name, "RestrictAddressFamilies", w, 1, assess_af, &(class), false, \
          "cannot open " what " sockets", "may open " what " sockets" }
#define SYSCALLS(group, w) { "SystemCallFilter=~" group, "SystemCallFilter", w, 10, assess_syscalls, group, false, NULL, NULL }

static const struct check_def checks[] = {
        { "User=/DynamicUser=", "User", 2000, 10, assess_user, NULL, false, NULL, NULL },
        { "SupplementaryGroups=", "SupplementaryGroups", 200, 1, assess_supplementary, NULL, false,
          "no supplementary groups", "supplementary groups" },
        BOOL("PrivateDevices", 1000, "no hardware devices", "may reach hardware devices"),
        BOOL("PrivateMounts", 1000, "cannot install mounts for the system", "may install mounts for the system"),
        BOOL("PrivateNetwork", 2500, "no access to the host's network", "access to the host's network"),
        BOOL_DD("PrivateTmp", 1000, "a /tmp of its own", "shares /tmp with other software"),
        BOOL("PrivateUsers", 1000, "cannot see other users", "can see other users"),
        BOOL("ProtectControlGroups", 1000, "cannot write the cgroup tree", "may write the cgroup tree"),
        BOOL("ProtectKernelModules", 1000, "cannot load kernel modules", "may load kernel modules"),
        BOOL("ProtectKernelTunables", 1000, "cannot change kernel tunables", "may change kernel tunables"),
        BOOL("ProtectKernelLogs", 1000, "cannot reach the kernel log", "may reach the kernel log"),
        BOOL("ProtectClock", 1000, "cannot set the clocks", "may set the clocks"),
        { "ProtectHome=", "ProtectHome", 1000, 10, assess_protect_home, NULL, true, NULL, NULL },
        BOOL("ProtectHostname", 50, "cannot change the host name", "may change the host name"),
        { "ProtectSystem=", "ProtectSystem", 1000, 10, assess_protect_system, NULL, true, NULL, NULL },
        { "RootDirectory=/RootImage=", "RootDirectory", 200, 1, assess_root_directory, NULL, true,
          "a root directory of its own", "the host's root directory" },
        BOOL("LockPersonality", 100, "cannot change its personality", "may change its personality"),
        BOOL("MemoryDenyWriteExecute", 100, "no writable and executable memory", "may map writable and executable memory"),
        BOOL("NoNewPrivileges", 1000, "cannot gain privileges", "may gain privileges (setuid programs)"),
        CAPS("CAP_SYS_ADMIN", 1500, caps_admin, "no CAP_SYS_ADMIN", "CAP_SYS_ADMIN"),
        CAPS("CAP_SET(UID|GID|PCAP)", 1500, caps_setid, "cannot change identities", "may change identities"),
        CAPS("CAP_SYS_PTRACE", 1500, caps_ptrace, "cannot trace other processes", "may trace other processes"),
        CAPS("CAP_SYS_TIME", 1000, caps_time, "cannot set the clock", "may set the clock"),
        CAPS("CAP_NET_ADMIN", 1000, caps_net_admin, "cannot configure the network", "may configure the network"),
        CAPS("CAP_SYS_RAWIO", 1000, caps_rawio, "no raw I/O", "raw I/O"),
        CAPS("CAP_SYS_MODULE", 1000, caps_module, "cannot load modules", "may load modules"),
        CAPS("CAP_AUDIT_*", 500, caps_audit, "no audit access", "audit access"),
        CAPS("CAP_SYSLOG", 500, caps_syslog, "no kernel log access", "kernel log access"),
        CAPS("CAP_SYS_(NICE|RESOURCE)", 500, caps_nice, "cannot raise its resources", "may raise its resources"),
        CAPS("CAP_MKNOD", 500, caps_mknod, "cannot make device nodes", "may make device nodes"),
        CAPS("CAP_(CHOWN|FSETID|SETFCAP)", 1000, caps_chown, "cannot change owners and modes freely",
             "may change owners and modes freely"),
        CAPS("CAP_(DAC_*|FOWNER|IPC_OWNER)", 1000, caps_dac, "file permissions apply", "may bypass file permissions"),
        CAPS("CAP_KILL", 500, caps_kill, "cannot signal others' processes", "may signal any process"),
        CAPS("CAP_NET_(BIND_SERVICE|BROADCAST|RAW)", 500, caps_net, "no privileged networking", "privileged networking"),
        CAPS("CAP_SYS_BOOT", 100, caps_boot, "cannot reboot", "may reboot"),
        CAPS("CAP_MAC_*", 100, caps_mac, "cannot change MAC policy", "may change MAC policy"),
        CAPS("CAP_LINUX_IMMUTABLE", 75, caps_immutable, "cannot make files immutable", "may make files immutable"),
        CAPS("CAP_IPC_LOCK", 50, caps_ipc_lock, "cannot lock memory", "may lock memory"),
        CAPS("CAP_SYS_CHROOT", 50, caps_chroot, "cannot chroot", "may chroot"),
        CAPS("CAP_BLOCK_SUSPEND", 25, caps_suspend, "cannot block suspend", "may block suspend"),
        CAPS("CAP_WAKE_ALARM", 25, caps_alarm, "cannot set wake alarms", "may set wake alarms"),
        CAPS("CAP_LEASE", 25, caps_lease, "cannot take leases", "may take leases"),
        CAPS("CAP_SYS_TTY_CONFIG", 25, caps_tty, "cannot vhangup", "may vhangup"),
        CAPS("CAP_SYS_PACCT", 25, caps_pacct, "cannot use acct()", "may use acct()"),
        CAPS("CAP_BPF", 25, caps_bpf, "cannot load BPF programs", "may load BPF programs"),
        { "UMask=", "UMask", 100, 10, assess_umask, NULL, false, NULL, NULL },
        { "KeyringMode=", "KeyringMode", 1000, 1, assess_keyring, NULL, false,
          "a session keyring of its own", "shares tend's session keyring" },
        { "ProtectProc=", "ProtectProc", 1000, 3, assess_protect_proc, NULL, false,
          "sees only its own processes", "sees every process" },
        { "ProcSubset=", "ProcSubset", 10, 1, assess_proc_subset, NULL, false,
          "sees only the processes in /proc", "sees all of /proc" },
        { "NotifyAccess=", "NotifyAccess", 1000, 1, assess_notify_access, NULL, false,
          "children cannot change its state", "any process of it may change its state" },
        { "RemoveIPC=", "RemoveIPC", 100, 1, assess_remove_ipc, NULL, false,
          "its user's IPC objects are removed", "its user's IPC objects outlive it" },
        { "Delegate=", "Delegate", 100, 1, assess_false, "Delegate", false,
          "no delegated cgroup", "a delegated cgroup" },
        BOOL("RestrictRealtime", 500, "no realtime scheduling", "may take realtime scheduling"),
        BOOL("RestrictSUIDSGID", 1000, "cannot make setuid files", "may make setuid files"),
        NS("user", 1500, ns_user, "user"),
        NS("mnt", 500, ns_mnt, "mount"),
        NS("ipc", 500, ns_ipc, "IPC"),
        NS("pid", 500, ns_pid, "PID"),
        NS("cgroup", 500, ns_cgroup, "cgroup"),
        NS("net", 500, ns_net, "network"),
        NS("uts", 100, ns_uts, "UTS"),
        AF("AF_(INET|INET6)", 1500, af_inet, "internet"),
        AF("AF_UNIX", 25, af_unix, "local"),
        AF("AF_NETLINK", 200, af_netlink, "netlink"),
        AF("AF_PACKET", 1000, af_packet, "packet"),
        AF("…", 1250, af_other, "other"),
        { "SystemCallArchitectures=", "SystemCallArchitectures", 1000, 10, assess_archs, NULL, false, NULL, NULL },
        SYSCALLS("@swap", 1000),
        SYSCALLS("@obsolete", 250),
        SYSCALLS("@clock", 1000),
        SYSCALLS("@cpu-emulation", 250),
        SYSCALLS("@debug", 1000),
        SYSCALLS("@mount", 1000),
        SYSCALLS("@module", 1000),
        SYSCALLS("@raw-io", 1000),
        SYSCALLS("@reboot", 1000),
        SYSCALLS("@privileged", 700),
        SYSCALLS("@resources", 700),
        { "IPAddressDeny=", "IPAddressDeny", 1000, 10, assess_ip, NULL, false, NULL, NULL },
        { "DeviceAllow=", "DeviceAllow", 1000, 10, assess_devices, NULL, false, NULL, NULL },
        { "AmbientCapabilities=", "AmbientCapabilities", 500, 1, assess_ambient, NULL, false,
          "no ambient capabilities", "ambient capabilities" },
};
_Static_assert(ELEMENTSOF(checks) <= SECURITY_CHECKS_MAX, "struct security_assessment holds every check");

/* ------------------------------------------------------------------------ */
/* Replaying the list keys                                                   */
/* ------------------------------------------------------------------------ */

static unsigned long ns_flag(const char *name) {
        static const struct { const char *name; unsigned long flag; } t[] = {
                { "cgroup", CLONE_NEWCGROUP }, { "ipc", CLONE_NEWIPC }, { "net", CLONE_NEWNET },
                { "mnt", CLONE_NEWNS }, { "pid", CLONE_NEWPID }, { "user", CLONE_NEWUSER }, { "uts", CLONE_NEWUTS },
        };
        for (size_t n = 0; n < ELEMENTSOF(t); n++)
                if (streq(t[n].name, name))
                        return t[n].flag;
        return 0;
}

static int af_class(const char *name) {
        if (streq(name, "AF_INET") || streq(name, "AF_INET6"))
                return AF_C_INET;
        if (streq(name, "AF_UNIX"))
                return AF_C_UNIX;
        if (streq(name, "AF_NETLINK"))
                return AF_C_NETLINK;
        return streq(name, "AF_PACKET") ? AF_C_PACKET : AF_C_OTHER;
}

/* Calls fn for each word of v (after a leading '~', told by *invert). */
static void each_word(const char *v, bool *invert, void (*fn)(struct info *i, const char *w, bool invert),
                      struct info *i) {
        *invert = v[0] == '~';
        char w[64];
        for (const char *p = v + *invert;;) {
                p += strspn(p, WHITESPACE);
                size_t n = strcspn(p, WHITESPACE);
                if (n == 0)
                        return;
                if (n < sizeof w) {
                        memcpy(w, p, n);
                        w[n] = '\0';
                        fn(i, w, *invert);
                }
                p += n;
        }
}

static void ns_word(struct info *i, const char *w, bool invert) {
        i->restrict_ns = invert ? i->restrict_ns & ~ns_flag(w) : i->restrict_ns | ns_flag(w);
}

static void af_word(struct info *i, const char *w, bool invert) {
        if (streq(w, "none"))
                return;
        i->af_restricted[af_class(w)] = invert;
}

static void arch_word(struct info *i, const char *w, bool invert) {
        (void) invert;
        if (streq(w, "native"))
                i->archs_native = true;
        i->archs_any = true;
}

static void replay_namespaces(struct info *i, const char *v) {
        int b = uf_parse_boolean(v);
        bool invert;
        if (!*v || b == 0)
                i->restrict_ns = NS_ALL;
        else if (b > 0)
                i->restrict_ns = 0;
        else {
                if (v[0] != '~' && i->restrict_ns == NS_ALL)
                        i->restrict_ns = 0; /* an allow list: only those */
                each_word(v, &invert, ns_word, i);
        }
}

static void replay_families(struct info *i, const char *v) {
        bool invert = v[0] == '~';
        if (!*v) {
                memset(i->af_restricted, 0, sizeof i->af_restricted);
                i->af_list = false;
                return;
        }
        if (!i->af_list) { /* the first list decides its kind */
                i->af_list = true;
                i->af_allow = !invert;
                for (size_t n = 0; n < ELEMENTSOF(i->af_restricted); n++)
                        i->af_restricted[n] = i->af_allow;
        }
        each_word(v, &invert, af_word, i);
}

static void replay(struct info *i) {
        const struct unit_hardening *h = i->f->hardening;
        bool ns = applied(i->f, "RestrictNamespaces"), af = applied(i->f, "RestrictAddressFamilies");
        bool archs = applied(i->f, "SystemCallArchitectures"), invert;
        for (char **a = h ? h->assignments : NULL; a && *a; a++) {
                const char *v = strchr(*a, '=') + 1;
                if (ns && strncmp(*a, "RestrictNamespaces=", 19) == 0)
                        replay_namespaces(i, v);
                else if (af && strncmp(*a, "RestrictAddressFamilies=", 24) == 0)
                        replay_families(i, v);
                else if (archs && strncmp(*a, "SystemCallArchitectures=", 24) == 0) {
                        if (!*v)
                                i->archs_native = i->archs_any = false;
                        each_word(v, &invert, arch_word, i);
                }
        }
}

static void info_init(struct info *i, const struct unit_file *f) {
        *i = (struct info) { .f = f, .restrict_ns = NS_ALL, .default_dependencies = true };
        const char *u = unit_file_sandbox(f)->user;
        i->privileged = !u || !*u || streq(u, "0") || streq(u, "root");
        const char *dd = unit_hardening_value(f, "DefaultDependencies");
        if (dd && uf_parse_boolean(dd) == 0)
                i->default_dependencies = false;
        replay(i);
}

/* ------------------------------------------------------------------------ */
/* The assessment                                                            */
/* ------------------------------------------------------------------------ */

#define DIV_ROUND_UP(a, b) (((a) + (b) - 1) / (b))

static const char *level_of(unsigned exposure) {
        static const struct { unsigned from; const char *name; } t[] = {
                { 100, "DANGEROUS" }, { 90, "UNSAFE" }, { 75, "EXPOSED" }, { 50, "MEDIUM" },
                { 10, "OK" }, { 1, "SAFE" }, { 0, "PERFECT" },
        };
        size_t n = 0;
        while (exposure < t[n].from)
                n++;
        return t[n].name;
}

/* Whether tend's outcome for d may differ from systemd's for f. */
static bool not_applied(const struct unit_file *f, const struct check_def *d) {
        if (streq(d->key, "KeyringMode")) { /* keyring: systemd's default is private, tend's only as root */
                const char *v = unit_hardening_value(f, d->key);
                bool systemd_private = !v || !*v || streq(v, "private");
                return systemd_private != keyring_private(f) || !applied(f, d->key);
        }
        bool set = unit_hardening_value(f, d->key) != NULL;
        if (streq(d->key, "RootDirectory"))
                set = set || unit_hardening_value(f, "RootImage");
        if (streq(d->key, "DeviceAllow")) /* PrivateDevices= and ProtectClock= make the device ACL */
                return set || unit_hardening_value(f, "DevicePolicy") ||
                       (unit_hardening_value(f, "PrivateDevices") && !applied(f, "PrivateDevices")) ||
                       (unit_hardening_value(f, "ProtectClock") && !applied(f, "ProtectClock"));
        if (streq(d->key, "IPAddressDeny"))
                set = set || unit_hardening_value(f, "IPAddressAllow");
        if (streq(d->key, "User"))
                set = set || unit_hardening_value(f, "DynamicUser");
        return set && !applied(f, d->key);
}

int security_assess(const struct unit_file *f, struct security_assessment *ret) {
        struct info i;
        info_init(&i, f);
        *ret = (struct security_assessment) { .n = ELEMENTSOF(checks) };
        uint64_t badness_sum = 0, weight_sum = 0;
        for (size_t n = 0; n < ELEMENTSOF(checks); n++) {
                const struct check_def *d = &checks[n];
                struct security_check *c = &ret->checks[n];
                *c = (struct security_check) { .name = d->name, .key = d->key, .weight = d->weight, .range = d->range };
                c->badness = d->default_dependencies_only && !i.default_dependencies ? SECURITY_NOT_APPLICABLE
                                                                                      : d->assess(&i, d->param, &c->description);
                if (!c->description)
                        c->description = c->badness == 0 ? d->good : c->badness > 0 ? d->bad : "does not apply";
                c->not_applied = not_applied(f, d);
                if (c->badness == SECURITY_NOT_APPLICABLE)
                        continue;
                badness_sum += DIV_ROUND_UP((uint64_t) c->badness * d->weight, d->range);
                weight_sum += d->weight;
        }
        for (size_t n = 0; n < ret->n; n++) {
                struct security_check *c = &ret->checks[n];
                if (c->badness > 0)
                        c->exposure = (unsigned) DIV_ROUND_UP(DIV_ROUND_UP((uint64_t) c->badness * c->weight * 100, c->range),
                                                              weight_sum);
        }
        ret->exposure = (unsigned) DIV_ROUND_UP(badness_sum * 100, weight_sum);
        ret->level = level_of(ret->exposure);
        return 0;
}

bool security_assess_reads(const char *key) {
        static const char *const more[] = { "DefaultDependencies", "DynamicUser", "RootImage", "DevicePolicy",
                                            "IPAddressAllow", NULL };
        for (size_t n = 0; n < ELEMENTSOF(checks); n++)
                if (streq(checks[n].key, key))
                        return true;
        for (const char *const *m = more; *m; m++)
                if (streq(*m, key))
                        return true;
        return false;
}
