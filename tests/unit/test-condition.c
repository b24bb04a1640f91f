/* SPDX-License-Identifier: MIT */
/*
 * Condition*= and Assert*= (lang/unit-file-conditions.c parses them,
 * exec/condition.c checks them): a table of every condition type, each row a
 * unit file's assignment and what systemd.unit(5) says it answers — the
 * sentence cited above each group. Every row is run four ways: as written
 * (Condition…=), as its Assert…= twin, negated ('!', the opposite answer) and
 * triggering alone ('|', the same answer). Then lists (triggering mixed with
 * plain, the empty assignment's reset) and the parser's errors with file:line.
 *
 * The machine's facts are read from fixture roots (struct condition_env.root):
 * "plain" is a VM (QEMU) with a known kernel command line, os-release,
 * machine-id, memory, PSI, power supply, cgroup v2 controllers, security
 * modules; "boxed" is a docker container in a user namespace, on AC-less
 * hardware. Facts no root can stand for (the uid, CPU affinity, CPUID, the
 * architecture, the unit's own paths) are computed independently here from
 * other sources (getpwuid, /proc/self/status, /proc/cpuinfo, uname).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <syslog.h>
#include <unistd.h>
#include <linux/netlink.h>

#include <cmocka.h>

#include "condition.h"
#include "log.h"
#include "unit-file.h"
#include "testutil.h"

static char base[64], plain[128], boxed[128], files[128];

/* ---- fixture ---- */

static void put(const char *root, const char *path, const char *text, size_t len) {
        char p[PATH_MAX], dir[PATH_MAX];
        snprintf(p, sizeof p, "%s%s", root, path);
        for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
                snprintf(dir, sizeof dir, "%.*s", (int) (s - p), p);
                mkdir(dir, 0755);
        }
        if (len == (size_t) -1) {
                assert_true(mkdir(p, 0755) == 0 || errno == EEXIST);
                return;
        }
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, len), (ssize_t) len);
        close(fd);
}
#define PUT(root, path, text) put(root, path, text, strlen(text))
#define PUTN(root, path, text) put(root, path, text, sizeof text - 1) /* with NULs */
#define DIRECTORY(root, path) put(root, path, NULL, (size_t) -1)

static void make_plain(void) {
        PUT(plain, "/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet \"splash=a b\"\n");
        PUT(plain, "/proc/sys/kernel/osrelease", "6.1.0-13-amd64\n");
        PUT(plain, "/proc/sys/kernel/hostname", "web-01\n");
        PUT(plain, "/etc/machine-id", "0123456789abcdef0123456789abcdef\n");
        PUT(plain, "/etc/os-release", "NAME=\"Debian GNU/Linux\"\nID=debian\nVERSION_ID=\"12\"\n");
        PUT(plain, "/proc/meminfo", "MemTotal:        2048000 kB\nMemFree:  1 kB\n");
        PUT(plain, "/proc/self/status", "Name:\tx\nCapInh:\t0000000000000000\nCapBnd:\t0000000000000401\n");
        PUT(plain, "/proc/self/uid_map", "         0          0 4294967295\n");
        PUT(plain, "/proc/pressure/memory", "some avg10=1.00 avg60=2.00 avg300=3.00 total=9\n"
                                            "full avg10=0.50 avg60=20.00 avg300=5.25 total=9\n");
        PUT(plain, "/proc/pressure/cpu", "some avg10=50.00 avg60=0.00 avg300=0.00 total=9\n"
                                         "full avg10=99.00 avg60=99.00 avg300=99.00 total=9\n");
        PUT(plain, "/sys/class/dmi/id/sys_vendor", "QEMU\n");
        PUT(plain, "/sys/class/dmi/id/bios_vendor", "SeaBIOS\n");
        PUT(plain, "/sys/class/dmi/id/bios_version", "1.16.2-debian-1.16.2-1\n");
        PUT(plain, "/sys/class/power_supply/AC/type", "Mains\n");
        PUT(plain, "/sys/class/power_supply/AC/online", "0\n");
        PUT(plain, "/sys/class/power_supply/BAT0/type", "Battery\n");
        PUT(plain, "/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory\n");
        PUT(plain, "/sys/fs/cgroup/memory.max", "max\n");
        DIRECTORY(plain, "/sys/firmware/efi");
        PUTN(plain, "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e0cb4e9e2b8c", "\x06\0\0\0\x01");
        PUT(plain, "/sys/fs/selinux/enforce", "1\n");
        PUT(plain, "/sys/module/apparmor/parameters/enabled", "N\n");
        DIRECTORY(plain, "/sys/kernel/security/ima");
        DIRECTORY(plain, "/sys/class/tpmrm/tpmrm0");
        /* The block device under the fixture's files: dm-crypt in "plain". */
        struct stat st;
        assert_int_equal(stat(files, &st), 0);
        char dev[128];
        snprintf(dev, sizeof dev, "/sys/dev/block/%u:%u/dm/uuid", major(st.st_dev), minor(st.st_dev));
        PUT(plain, dev, "CRYPT-LUKS2-0123456789abcdef-root\n");
}

static void make_boxed(void) {
        PUT(boxed, "/.dockerenv", "");
        PUT(boxed, "/proc/cmdline", "quiet\n");
        PUTN(boxed, "/proc/1/cmdline", "/sbin/init\0systemd.unit=rescue.target\0--log-level=debug\0");
        PUT(boxed, "/proc/sys/kernel/osrelease", "5.10.0\n");
        PUT(boxed, "/proc/meminfo", "MemTotal:        2048000 kB\n");
        PUT(boxed, "/proc/self/uid_map", "         0     100000      65536\n");
        PUT(boxed, "/proc/self/status", "CapBnd:\t000001ffffffffff\n");
        PUT(boxed, "/sys/fs/cgroup/memory.max", "1073741824\n");
        DIRECTORY(boxed, "/sys/fs/cgroup/cpu"); /* cgroup v1: a hierarchy per controller */
        DIRECTORY(boxed, "/sys/fs/cgroup/memory");
        DIRECTORY(boxed, "/sys/firmware/devicetree");
        PUTN(boxed, "/proc/device-tree/compatible", "raspberrypi,4-model-b\0brcm,bcm2711\0");
        PUT(boxed, "/sys/module/apparmor/parameters/enabled", "Y\n");
        PUT(boxed, "/usr/lib/os-release", "ID=alpine\n");
}

static void make_files(void) {
        PUT(files, "/file", "x");
        PUT(files, "/empty", "");
        PUT(files, "/exe", "#!/bin/sh\n");
        assert_int_equal(chmod(strcat(strcpy((char[PATH_MAX]) {}, files), "/exe"), 0755), 0);
        DIRECTORY(files, "/dir");
        PUT(files, "/dir/entry", "");
        DIRECTORY(files, "/emptydir");
        PUT(files, "/hiddendir/.hidden", "");
        PUT(files, "/hiddendir/old.dpkg-old", "");
        char a[PATH_MAX], b[PATH_MAX];
        snprintf(a, sizeof a, "%s/dir", files);
        snprintf(b, sizeof b, "%s/link", files);
        assert_int_equal(symlink(a, b), 0);
        snprintf(b, sizeof b, "%s/dangling", files);
        assert_int_equal(symlink("/nonexistent-target", b), 0);
}

#define MAX_MSGS 16
static char msgs[MAX_MSGS][1024];
static size_t n_msgs;

static void sink(int level, const char *msg, void *userdata) {
        if (n_msgs < MAX_MSGS)
                snprintf(msgs[n_msgs], sizeof msgs[n_msgs], "%s", msg);
        n_msgs++;
}

static int setup(void **state) {
        snprintf(base, sizeof base, "/tmp/test-condition-XXXXXX");
        if (!mkdtemp(base))
                return -1;
        snprintf(plain, sizeof plain, "%s/plain", base);
        snprintf(boxed, sizeof boxed, "%s/boxed", base);
        snprintf(files, sizeof files, "%s/files", base);
        mkdir(plain, 0755);
        mkdir(boxed, 0755);
        mkdir(files, 0755);
        make_files();
        make_plain();
        make_boxed();
        log_set_sink(sink, NULL);
        return 0;
}

static int teardown(void **state) {
        log_set_sink(NULL, NULL);
        remove_tree(base);
        return 0;
}

/* ---- running a row ---- */

/* "@F" in a row stands for the fixture's files directory. */
static void expand(const char *in, char *out, size_t size) {
        size_t o = 0;
        for (const char *p = in; *p && o + 1 < size; p++) {
                if (p[0] == '@' && p[1] == 'F') {
                        o += (size_t) snprintf(out + o, size - o, "%s", files);
                        p++;
                } else
                        out[o++] = *p;
        }
        out[o < size ? o : size - 1] = 0;
}

/* Parses a unit with the [Unit] lines given (newline-separated); NULL on error. */
static struct unit_file *parse_unit(const char *lines, int *ret) {
        char text[4096], body[2048];
        expand(lines, body, sizeof body);
        snprintf(text, sizeof text, "[Unit]\n%s\n[Service]\nExecStart=/bin/true\n", body);
        struct unit_file *u = NULL;
        n_msgs = 0;
        *ret = unit_file_parse("a.service", "test/a.service", text, strlen(text), &u, NULL);
        return u;
}

/* The list's answer for one kind: 1 the start goes on, 0 not. */
static int run_list(const char *root, const char *lines, bool asserts, char *failed, size_t size) {
        int r;
        struct unit_file *u = parse_unit(lines, &r);
        if (!u)
                fail_msg("refused (%d): %s: %s", r, lines, n_msgs ? msgs[0] : "");
        struct condition_env env = { .root = root };
        const struct unit_condition *c = NULL;
        int k = condition_list_test(&env, u->conditions, asserts, "a.service", u->path, &c);
        if (failed)
                snprintf(failed, size, "%s", "");
        if (k == 0 && failed)
                condition_format(c, failed, size);
        unit_file_free(u);
        return k;
}

struct row {
        const char *root; /* plain, boxed, or NULL: the real machine */
        const char *key;  /* the name after Condition/Assert */
        const char *value;
        int holds;        /* what systemd.unit(5) says; -1: skip the row here (said why) */
};

/* One row, four ways: Condition, Assert, '!', '|'. */
static void check_row(const struct row *w) {
        if (w->holds < 0)
                return;
        char line[1024], value[512];
        expand(w->value, value, sizeof value);
        const char *root = w->root;
        snprintf(line, sizeof line, "Condition%s=%s", w->key, w->value);
        if (run_list(root, line, false, NULL, 0) != w->holds)
                fail_msg("%s under %s: expected %s", line, root ? root : "/", w->holds ? "true" : "false");
        snprintf(line, sizeof line, "Assert%s=%s", w->key, w->value);
        if (run_list(root, line, true, NULL, 0) != w->holds)
                fail_msg("%s under %s: expected %s", line, root ? root : "/", w->holds ? "true" : "false");
        /* "The test may be negated by prepending an exclamation mark." */
        snprintf(line, sizeof line, "Condition%s=!%s", w->key, w->value);
        if (run_list(root, line, false, NULL, 0) != !w->holds)
                fail_msg("%s under %s: expected %s", line, root ? root : "/", w->holds ? "false" : "true");
        /* One triggering condition alone: "at least one of the triggering conditions … applies". */
        snprintf(line, sizeof line, "Condition%s=|%s", w->key, w->value);
        if (run_list(root, line, false, NULL, 0) != w->holds)
                fail_msg("%s under %s: expected %s", line, root ? root : "/", w->holds ? "true" : "false");
}

static void check_rows(const struct row *rows, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const char *root = rows[i].root == (const char *) 1 ? plain : rows[i].root == (const char *) 2 ? boxed
                                                                                                              : NULL;
                struct row w = rows[i];
                w.root = root;
                check_row(&w);
        }
}

#define PLAIN ((const char *) 1)
#define BOXED ((const char *) 2)
#define ROWS(...)                                                        \
        do {                                                             \
                const struct row rows_[] = { __VA_ARGS__ };              \
                check_rows(rows_, sizeof rows_ / sizeof rows_[0]);       \
        } while (0)

/* ---- the machine ---- */

static void test_architecture_virtualization_host(void **state) {
        struct utsname u;
        assert_int_equal(uname(&u), 0);
        bool x86_64 = strcmp(u.machine, "x86_64") == 0;
        /* ConditionArchitecture=: "Check whether the system is running on a specific architecture …
         * A special architecture name "native" is mapped to the architecture the system manager
         * itself is compiled for." (uname's machine here, independently) */
        ROWS({ NULL, "Architecture", "x86-64", x86_64 }, { NULL, "Architecture", "arm64", !x86_64 && !strcmp(u.machine, "aarch64") },
             { NULL, "Architecture", "native", 1 }, { NULL, "Architecture", "no-such-arch", 0 });
        /* ConditionVirtualization=: "Takes either boolean value to check if being executed in any
         * virtualized environment, or one of "vm" and "container" … or one of "qemu", "kvm", … to test
         * against a specific implementation, or "private-users" to check whether we are running in a
         * user namespace." */
        ROWS({ PLAIN, "Virtualization", "yes", 1 }, { PLAIN, "Virtualization", "vm", 1 },
             { PLAIN, "Virtualization", "qemu", 1 }, { PLAIN, "Virtualization", "kvm", 0 },
             { PLAIN, "Virtualization", "container", 0 }, { PLAIN, "Virtualization", "no", 0 },
             { PLAIN, "Virtualization", "private-users", 0 }, { BOXED, "Virtualization", "container", 1 },
             { BOXED, "Virtualization", "docker", 1 }, { BOXED, "Virtualization", "vm", 0 },
             { BOXED, "Virtualization", "private-users", 1 }, { BOXED, "Virtualization", "true", 1 });
        /* ConditionHost=: "either takes a hostname string (optionally with shell style globs) which is
         * tested against the locally set hostname …, or a machine ID formatted as string" */
        ROWS({ PLAIN, "Host", "web-01", 1 }, { PLAIN, "Host", "WEB-*", 1 }, { PLAIN, "Host", "db-*", 0 },
             { PLAIN, "Host", "0123456789abcdef0123456789abcdef", 1 },
             { PLAIN, "Host", "01234567-89ab-cdef-0123-456789abcdef", 1 },
             { PLAIN, "Host", "fedcba9876543210fedcba9876543210", 0 });
}

static void test_firmware_security_capability(void **state) {
        /* ConditionFirmware=: ""uefi" matches systems with EFI. "device-tree" matches systems with a
         * device tree. "device-tree-compatible(value)" … "smbios-field(field operator value)" matches
         * systems with a SMBIOS field containing a certain value." */
        ROWS({ PLAIN, "Firmware", "uefi", 1 }, { PLAIN, "Firmware", "device-tree", 0 },
             { BOXED, "Firmware", "uefi", 0 }, { BOXED, "Firmware", "device-tree", 1 },
             { BOXED, "Firmware", "device-tree-compatible(brcm,bcm2711)", 1 },
             { BOXED, "Firmware", "device-tree-compatible(brcm,bcm2835)", 0 },
             { PLAIN, "Firmware", "smbios-field(bios_vendor = SeaBIOS)", 1 },
             { PLAIN, "Firmware", "smbios-field(bios_vendor $= Sea*)", 1 },
             { PLAIN, "Firmware", "smbios-field(bios_version >= 1.16)", 1 },
             { PLAIN, "Firmware", "smbios-field(bios_version < 1.10)", 0 },
             { PLAIN, "Firmware", "smbios-field(board_name = x)", 0 });
        /* ConditionSecurity=: "check whether the given security technology is enabled on the system.
         * Currently, the recognized values are "selinux", "apparmor", "tomoyo", "ima", "smack",
         * "audit", "uefi-secureboot" and "tpm2"." */
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
        int audit = fd >= 0 || !(errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT || errno == EPERM);
        if (fd >= 0)
                close(fd);
        ROWS({ PLAIN, "Security", "selinux", 1 }, { PLAIN, "Security", "apparmor", 0 },
             { BOXED, "Security", "apparmor", 1 }, { BOXED, "Security", "selinux", 0 },
             { PLAIN, "Security", "ima", 1 }, { PLAIN, "Security", "smack", 0 }, { PLAIN, "Security", "tomoyo", 0 },
             { PLAIN, "Security", "uefi-secureboot", 1 }, { BOXED, "Security", "uefi-secureboot", 0 },
             { PLAIN, "Security", "tpm2", 1 }, { BOXED, "Security", "tpm2", 0 },
             { PLAIN, "Security", "no-such-thing", 0 }, { NULL, "Security", "audit", audit });
        /* ConditionCapability=: "Check whether the given capability exists in the capability bounding
         * set of the service manager" (CapBnd 0x401: CAP_CHOWN and CAP_NET_BIND_SERVICE) */
        ROWS({ PLAIN, "Capability", "CAP_CHOWN", 1 }, { PLAIN, "Capability", "CAP_NET_BIND_SERVICE", 1 },
             { PLAIN, "Capability", "CAP_SYS_ADMIN", 0 }, { BOXED, "Capability", "CAP_SYS_ADMIN", 1 });
}

static void test_kernel_environment_credential(void **state) {
        /* ConditionKernelCommandLine=: "The argument must either be a single word, or an assignment …
         * In the former case the kernel command line is searched for the word appearing as is, or as
         * left hand side of an assignment. In the latter case, the exact assignment is looked for …
         * except when the service manager is invoked as payload of a container manager, in which case
         * the command line of PID 1 is used instead" */
        ROWS({ PLAIN, "KernelCommandLine", "quiet", 1 }, { PLAIN, "KernelCommandLine", "root", 1 },
             { PLAIN, "KernelCommandLine", "root=/dev/sda1", 1 }, { PLAIN, "KernelCommandLine", "root=/dev/sdb", 0 },
             { PLAIN, "KernelCommandLine", "qui", 0 }, { PLAIN, "KernelCommandLine", "splash=a b", 1 },
             { BOXED, "KernelCommandLine", "systemd.unit", 1 }, { BOXED, "KernelCommandLine", "quiet", 0 });
        /* ConditionKernelVersion=: "Each expression starts with one of "=" or "!=" for string
         * comparisons, "<", "<=", "==", "<>", ">=", ">" for version comparisons, or "$=", "!$=" for a
         * shell-style glob match. If no operator is specified, "$=" is implied." (6.1.0-13-amd64) */
        ROWS({ PLAIN, "KernelVersion", ">=6.1", 1 }, { PLAIN, "KernelVersion", "<6", 0 },
             { PLAIN, "KernelVersion", "6.1.*", 1 }, { PLAIN, "KernelVersion", "$=5.*", 0 },
             { PLAIN, "KernelVersion", "!$=5.*", 1 }, { PLAIN, "KernelVersion", "=6.1.0-13-amd64", 1 },
             { PLAIN, "KernelVersion", "!=6.1.0-13-amd64", 0 }, { PLAIN, "KernelVersion", ">= 5", 1 },
             { PLAIN, "KernelVersion", ">=5 <7", 1 }, { PLAIN, "KernelVersion", ">=5 <6", 0 },
             { PLAIN, "KernelVersion", "==6.1.0-13-amd64", 1 }, { PLAIN, "KernelVersion", "<>6.1.0", 1 },
             { PLAIN, "KernelVersion", ">6.1.0-2-amd64", 1 }, { BOXED, "KernelVersion", "<5.10.1", 1 });
        /* ConditionEnvironment=: "The argument may be a single word, to check if the variable with this
         * name is defined in the environment block, or an assignment ("name=value"), to check if the
         * variable with this exact value is defined." (the env seam is tend's environ: set here) */
        setenv("TEND_COND_TEST", "bar", 1);
        unsetenv("TEND_COND_UNSET");
        ROWS({ NULL, "Environment", "TEND_COND_TEST", 1 }, { NULL, "Environment", "TEND_COND_TEST=bar", 1 },
             { NULL, "Environment", "TEND_COND_TEST=baz", 0 }, { NULL, "Environment", "TEND_COND_TES", 0 },
             { NULL, "Environment", "TEND_COND_UNSET", 0 });
        /* ConditionCredential=: "check whether a credential by the specified name was passed into the
         * service manager" — tend is passed none (as systemd with none): false. */
        ROWS({ NULL, "Credential", "password", 0 }, { PLAIN, "Credential", "x", 0 });
        /* ConditionNeedsUpdate=: "whether the specified directory requires an update" — tend answers as
         * systemd with no update pending: false. ConditionFirstBoot=: "whether the system is booting up
         * for the first time" — not the first boot: yes is false, no is true. */
        ROWS({ NULL, "NeedsUpdate", "/etc", 0 }, { NULL, "NeedsUpdate", "/var", 0 },
             { NULL, "FirstBoot", "yes", 0 }, { NULL, "FirstBoot", "no", 1 }, { NULL, "FirstBoot", "true", 0 });
}

/* The CPUs of this process's affinity mask, from /proc/self/status's list. */
static unsigned cpus_allowed(void) {
        char buf[8192];
        FILE *f = fopen("/proc/self/status", "re");
        unsigned n = 0;
        while (f && fgets(buf, sizeof buf, f))
                if (strncmp(buf, "Cpus_allowed_list:", 18) == 0)
                        for (char *s = buf + 18, *tok; (tok = strtok(s, ",\n")); s = NULL) {
                                unsigned a, b;
                                int k = sscanf(tok, "%u-%u", &a, &b);
                                n += k == 2 ? b - a + 1 : k == 1;
                        }
        if (f)
                fclose(f);
        return n;
}

static bool cpuinfo_flag(const char *flag) {
        static char buf[1 << 16];
        FILE *f = fopen("/proc/cpuinfo", "re");
        bool found = false;
        while (f && !found && fgets(buf, sizeof buf, f))
                if (strncmp(buf, "flags", 5) == 0) {
                        char pat[64];
                        snprintf(pat, sizeof pat, " %s", flag);
                        for (char *s = buf; (s = strstr(s, pat)); s++)
                                found = found || s[strlen(pat)] == ' ' || s[strlen(pat)] == '\n';
                        break;
                }
        if (f)
                fclose(f);
        return found;
}

static void test_hardware(void **state) {
        /* ConditionACPower=: "If set to "true", the condition will hold only if at least one AC
         * connector of the system is connected to a power source, or if no AC connectors are known.
         * Conversely, if set to "false", … at least one AC connector known and all AC connectors are
         * disconnected" (plain: one, offline; boxed: none) */
        ROWS({ PLAIN, "ACPower", "true", 0 }, { PLAIN, "ACPower", "false", 1 }, { BOXED, "ACPower", "true", 1 },
             { BOXED, "ACPower", "false", 0 });
        /* ConditionControlGroupController=: "Multiple controllers may be passed with a space separating
         * them; in this case the condition will only pass if all listed controllers are available for
         * use. Controllers unknown to systemd are ignored. … "v2" will pass if the unified v2 cgroup
         * hierarchy is used, and "v1" will pass if the legacy v1 hierarchy or the hybrid hierarchy are
         * used." */
        ROWS({ PLAIN, "ControlGroupController", "v2", 1 }, { PLAIN, "ControlGroupController", "v1", 0 },
             { PLAIN, "ControlGroupController", "cpu memory", 1 }, { PLAIN, "ControlGroupController", "pids", 0 },
             { PLAIN, "ControlGroupController", "cpu frobnicate", 1 }, { PLAIN, "ControlGroupController", "io pids", 0 },
             { BOXED, "ControlGroupController", "v1", 1 }, { BOXED, "ControlGroupController", "memory", 1 },
             { BOXED, "ControlGroupController", "io", 0 });
        /* ConditionMemory=: "Takes a memory size in bytes as argument, optionally prefixed with a
         * comparison operator "<", "<=", "=" (or "=="), "!=" (or "<>"), ">=", ">". … In containers
         * compares the amount of memory assigned to the container instead." (MemTotal 2048000 kB =
         * 2097152000 bytes; boxed: memory.max 1G); no operator: at least (systemd's >=) */
        ROWS({ PLAIN, "Memory", "1G", 1 }, { PLAIN, "Memory", "2G", 0 }, { PLAIN, "Memory", "<2G", 1 },
             { PLAIN, "Memory", "=2097152000", 1 }, { PLAIN, "Memory", "==2097152000", 1 },
             { PLAIN, "Memory", "!=2097152000", 0 }, { PLAIN, "Memory", "<>1G", 1 }, { PLAIN, "Memory", ">2000000K", 1 },
             { PLAIN, "Memory", "<=1.5G", 0 }, { BOXED, "Memory", "=1G", 1 }, { BOXED, "Memory", ">1G", 0 });
        /* ConditionCPUs=: "Compares the number of CPUs in the CPU affinity mask configured of the service
         * manager itself with the specified number" */
        unsigned n = cpus_allowed();
        char eq[32], gt[32], lt1[32], n1[32];
        snprintf(eq, sizeof eq, "=%u", n);
        snprintf(gt, sizeof gt, ">%u", n);
        snprintf(lt1, sizeof lt1, "<%u", n + 1);
        snprintf(n1, sizeof n1, "%u", n + 1);
        ROWS({ NULL, "CPUs", ">=1", 1 }, { NULL, "CPUs", eq, 1 }, { NULL, "CPUs", gt, 0 }, { NULL, "CPUs", lt1, 1 },
             { NULL, "CPUs", n1, 0 });
        /* ConditionCPUFeature=: "Verify that a given CPU feature is available via the "CPUID"
         * instruction. … On other processors it is assumed that the CPU does not support the given
         * feature." (the kernel's /proc/cpuinfo flags, independently; fma3 is cpuinfo's fma) */
        ROWS({ NULL, "CPUFeature", "sse2", cpuinfo_flag("sse2") }, { NULL, "CPUFeature", "fpu", cpuinfo_flag("fpu") },
             { NULL, "CPUFeature", "lm", cpuinfo_flag("lm") }, { NULL, "CPUFeature", "aes", cpuinfo_flag("aes") },
             { NULL, "CPUFeature", "fma3", cpuinfo_flag("fma") }, { NULL, "CPUFeature", "no-such-feature", 0 });
        /* ConditionMemoryPressure=, ConditionCPUPressure=, ConditionIOPressure=: "Verify that the overall
         * system … pressure is below or equal to a threshold. … measured as an average over the last
         * five minutes … Alternatively, … "10%/1min" … The "full" PSI will be checked first, and if
         * not found "some" will be checked." (a system without the file: the check is skipped, true;
         * a slice tend does not run has no cgroup: skipped too, as systemd skips a missing one) */
        ROWS({ PLAIN, "MemoryPressure", "10%", 1 }, { PLAIN, "MemoryPressure", "5%", 0 },
             { PLAIN, "MemoryPressure", "5.25%", 1 }, { PLAIN, "MemoryPressure", "30%/1min", 1 },
             { PLAIN, "MemoryPressure", "10%/1min", 0 }, { PLAIN, "MemoryPressure", "1%/10sec", 1 },
             { PLAIN, "CPUPressure", "10%/10sec", 0 }, { PLAIN, "CPUPressure", "60%/10sec", 1 },
             { PLAIN, "IOPressure", "1%", 1 }, { PLAIN, "MemoryPressure", "foo.slice:1%", 1 });
}

static void test_os_release_identity(void **state) {
        /* ConditionOSRelease=: "Verify that a specific "key=value" pair is set in the host's
         * os-release(5). Other than exact string matching (with "=" and "!="), relative comparisons are
         * supported for versioned parameters … and shell-style wildcard comparisons … with "$=" …
         * If the given key is not found in the file, the match is done against an empty value." */
        ROWS({ PLAIN, "OSRelease", "ID=debian", 1 }, { PLAIN, "OSRelease", "ID!=debian", 0 },
             { PLAIN, "OSRelease", "VERSION_ID>=11", 1 }, { PLAIN, "OSRelease", "VERSION_ID<12", 0 },
             { PLAIN, "OSRelease", "NAME$=Debian*", 1 }, { PLAIN, "OSRelease", "NAME!$=Debian*", 0 },
             { PLAIN, "OSRelease", "MISSING!=x", 1 }, { PLAIN, "OSRelease", "ID=debian VERSION_ID=11", 0 },
             { BOXED, "OSRelease", "ID=alpine", 1 });
        /* ConditionUser=: "takes a numeric "UID", a UNIX user name, or the special value "@system"… to
         * check whether the service manager is running as the given user." */
        uid_t uid = getuid();
        struct passwd *pw = getpwuid(uid);
        char me[32], other[32];
        snprintf(me, sizeof me, "%u", (unsigned) uid);
        snprintf(other, sizeof other, "%u", (unsigned) uid + 4242);
        ROWS({ NULL, "User", me, 1 }, { NULL, "User", other, 0 }, { NULL, "User", pw ? pw->pw_name : me, 1 },
             { NULL, "User", "@system", uid <= 999 }, { NULL, "User", "no-such-user-xyz", 0 },
             { NULL, "User", "root", uid == 0 });
        /* ConditionGroup=: "verifies that the service manager's real or effective group, or any of its
         * auxiliary groups, match the specified group or GID." */
        gid_t gid = getgid();
        struct group *gr = getgrgid(gid);
        char mine[32], notmine[32];
        snprintf(mine, sizeof mine, "%u", (unsigned) gid);
        snprintf(notmine, sizeof notmine, "%u", 54321u);
        gid_t groups[256];
        int ng = getgroups(256, groups);
        bool member = false;
        for (int i = 0; i < ng; i++)
                member = member || groups[i] == 54321u;
        ROWS({ NULL, "Group", mine, 1 }, { NULL, "Group", gr ? gr->gr_name : mine, 1 },
             { NULL, "Group", notmine, member || getegid() == 54321u }, { NULL, "Group", "no-such-group-xyz", 0 });
}

/* ---- the unit's own paths ---- */

static void test_paths(void **state) {
        /* "Except for ConditionPathIsSymbolicLink=, all path checks follow symlinks."
         * ConditionPathExists=: "If the specified absolute path name does not exist, the condition will
         * fail." ConditionPathExistsGlob=: "checks for the existence of at least one file or directory
         * matching the specified globbing pattern." */
        ROWS({ NULL, "PathExists", "@F/file", 1 }, { NULL, "PathExists", "@F/absent", 0 },
             { NULL, "PathExists", "@F/link", 1 }, { NULL, "PathExists", "@F/dangling", 0 },
             { NULL, "PathExistsGlob", "@F/e*", 1 }, { NULL, "PathExistsGlob", "@F/nomatch*", 0 },
             { NULL, "PathExistsGlob", "@F/{absent,dir}", 1 });
        /* ConditionPathIsDirectory=: "verifies that a certain path exists and is a directory."
         * ConditionPathIsSymbolicLink=: "… exists and is a symbolic link." */
        ROWS({ NULL, "PathIsDirectory", "@F/dir", 1 }, { NULL, "PathIsDirectory", "@F/link", 1 },
             { NULL, "PathIsDirectory", "@F/file", 0 }, { NULL, "PathIsSymbolicLink", "@F/link", 1 },
             { NULL, "PathIsSymbolicLink", "@F/dangling", 1 }, { NULL, "PathIsSymbolicLink", "@F/dir", 0 });
        /* ConditionPathIsMountPoint=: "… exists and is a mount point." ConditionPathIsReadWrite=:
         * "verifies that the underlying file system is readable and writable (i.e. not mounted
         * read-only)." (a missing path is not: systemd 252 answers false) */
        ROWS({ NULL, "PathIsMountPoint", "/proc", 1 }, { NULL, "PathIsMountPoint", "@F/dir", 0 },
             { NULL, "PathIsMountPoint", "@F/absent", 0 }, { NULL, "PathIsReadWrite", "@F/dir", 1 },
             { NULL, "PathIsReadWrite", "@F/absent", 0 });
        /* ConditionPathIsEncrypted=: "verifies that the underlying file system's backing block device is
         * encrypted using dm-crypt/LUKS." (plain's /sys says the fixture's device is dm-crypt) */
        ROWS({ PLAIN, "PathIsEncrypted", "@F/file", 1 }, { BOXED, "PathIsEncrypted", "@F/file", 0 },
             { PLAIN, "PathIsEncrypted", "/proc", 0 }, { PLAIN, "PathIsEncrypted", "@F/absent", 0 });
        /* ConditionDirectoryNotEmpty=: "… exists and is a non-empty directory." (hidden files and
         * package backups do not count, as systemd's dir_is_empty()) ConditionFileNotEmpty=: "… exists
         * and refers to a regular file with a non-zero size." ConditionFileIsExecutable=: "… exists, is
         * a regular file, and marked executable." */
        ROWS({ NULL, "DirectoryNotEmpty", "@F/dir", 1 }, { NULL, "DirectoryNotEmpty", "@F/emptydir", 0 },
             { NULL, "DirectoryNotEmpty", "@F/hiddendir", 0 }, { NULL, "DirectoryNotEmpty", "@F/file", 0 },
             { NULL, "FileNotEmpty", "@F/file", 1 }, { NULL, "FileNotEmpty", "@F/empty", 0 },
             { NULL, "FileNotEmpty", "@F/dir", 0 }, { NULL, "FileIsExecutable", "@F/exe", 1 },
             { NULL, "FileIsExecutable", "@F/file", 0 }, { NULL, "FileIsExecutable", "@F/dir", 0 });
}

/* ---- lists: triggering, plain, reset ---- */

static void expect_list(const char *lines, bool asserts, int want, const char *failed_want) {
        char failed[512], w[512];
        int k = run_list(plain, lines, asserts, failed, sizeof failed);
        if (k != want)
                fail_msg("%s: expected %d, got %d", lines, want, k);
        expand(failed_want ? failed_want : "", w, sizeof w);
        if (failed_want && strcmp(failed, w) != 0)
                fail_msg("%s: expected the failed one %s, got %s", lines, w, failed);
}

static void test_lists(void **state) {
        /* "If multiple conditions are specified, the unit will be executed if all of them apply … If at
         * least one triggering condition is defined for a unit, then the unit will be started if at
         * least one of the triggering conditions of the unit applies and all of the regular (i.e.
         * non-triggering) conditions apply." */
        expect_list("ConditionPathExists=|@F/absent\nConditionPathExists=|@F/file", false, 1, NULL);
        expect_list("ConditionPathExists=|@F/absent\nConditionHost=|db-*", false, 0, "ConditionPathExists=|@F/absent");
        expect_list("ConditionPathExists=@F/file\nConditionPathExists=|@F/absent", false, 0,
                    "ConditionPathExists=|@F/absent");
        expect_list("ConditionPathExists=!@F/absent\nConditionHost=|web-*", false, 1, NULL);
        expect_list("ConditionHost=|web-*\nConditionPathExists=@F/absent", false, 0, "ConditionPathExists=@F/absent");
        expect_list("ConditionPathExists=@F/file\nConditionHost=web-01", false, 1, NULL);
        /* "If you prefix an argument with the pipe symbol and an exclamation mark, the pipe symbol must
         * be passed first, the exclamation second." */
        expect_list("ConditionPathExists=|!@F/file\nConditionPathExists=|!@F/absent", false, 1, NULL);
        expect_list("ConditionPathExists=| ! @F/absent", false, 1, NULL);
        /* "If any of these options is assigned the empty string, the list of conditions is reset
         * completely, all previous condition settings (of any kind) will have no effect." Asserts are
         * their own list: a condition's reset leaves them. */
        expect_list("ConditionPathExists=@F/absent\nConditionHost=db\nConditionPathExists=", false, 1, NULL);
        expect_list("ConditionHost=db\nConditionPathExists=\nConditionHost=web-01\nConditionHost=x", false, 0,
                    "ConditionHost=x");
        expect_list("AssertPathExists=@F/absent\nConditionPathExists=", true, 0, "AssertPathExists=@F/absent");
        expect_list("AssertPathExists=@F/absent\nAssertHost=", true, 1, NULL);
        expect_list("AssertPathExists=@F/absent\nConditionPathExists=@F/file", false, 1, NULL);
        /* Asserts combine as conditions do. */
        expect_list("AssertPathExists=|@F/absent\nAssertHost=|web-01", true, 1, NULL);
        expect_list("AssertPathExists=|@F/absent\nAssertHost=|db", true, 0, "AssertPathExists=|@F/absent");
        /* Specifiers are resolved as in other keys. */
        expect_list("ConditionPathExists=@F/%N", false, 0, "ConditionPathExists=@F/a");
        expect_list("ConditionHost=!%n", false, 1, NULL);
}

/* ---- the parser's errors ---- */

static void expect_error(const char *line, const char *message) {
        int r;
        struct unit_file *u = parse_unit(line, &r);
        if (u || r >= 0)
                fail_msg("%s: accepted", line);
        if (n_msgs == 0 || !strstr(msgs[0], "test/a.service:2:") || !strstr(msgs[0], message))
                fail_msg("%s: message %s, expected test/a.service:2: … %s", line, n_msgs ? msgs[0] : "(none)", message);
}

static void test_parse_errors(void **state) {
        log_set_max_level(LOG_INFO);
        expect_error("ConditionPathExists=relative/path", "ConditionPathExists=: \"relative/path\" is not an absolute path");
        expect_error("AssertDirectoryNotEmpty=~", "is not an absolute path");
        expect_error("ConditionNeedsUpdate=etc", "is not an absolute path");
        expect_error("ConditionFirstBoot=maybe", "ConditionFirstBoot=: \"maybe\" is not a boolean");
        expect_error("AssertACPower=sometimes", "is not a boolean");
        expect_error("ConditionCapability=CAP_NO_SUCH", "is not a capability name");
        expect_error("ConditionMemory=lots", "is not [OPERATOR]SIZE");
        expect_error("ConditionCPUs=>many", "is not [OPERATOR]NUMBER");
        expect_error("ConditionKernelVersion=>=", "is not a list of [OPERATOR]VERSION");
        expect_error("ConditionOSRelease=ID", "is not a list of KEY OPERATOR VALUE");
        expect_error("ConditionOSRelease=ID= debian", "is not a list of KEY OPERATOR VALUE");
        expect_error("ConditionMemoryPressure=200%", "PERCENT");
        expect_error("ConditionIOPressure=10%/2min", "PERCENT");
        expect_error("ConditionPathExists=|", "no value after its prefixes");
        expect_error("ConditionHost=%z", "unknown specifier");
        /* An unknown condition key is an unknown key: a warning with file:line, the unit loads. */
        int r;
        struct unit_file *u = parse_unit("ConditionFrobnicate=yes", &r);
        assert_non_null(u);
        assert_null(u->conditions);
        assert_true(n_msgs >= 1 && strstr(msgs[0], "test/a.service:2:") && strstr(msgs[0], "ConditionFrobnicate"));
        unit_file_free(u);
        /* The line of each condition is kept for the start's message. */
        u = parse_unit("Description=x\nConditionHost=a\nAssertHost=b", &r);
        assert_non_null(u);
        assert_int_equal(u->conditions->n, 2);
        assert_int_equal(u->conditions->items[0].line, 3);
        assert_int_equal(u->conditions->items[1].line, 4);
        assert_true(u->conditions->items[1].is_assert);
        unit_file_free(u);
        log_set_max_level(LOG_WARNING);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_architecture_virtualization_host),
                cmocka_unit_test(test_firmware_security_capability),
                cmocka_unit_test(test_kernel_environment_credential),
                cmocka_unit_test(test_hardware),
                cmocka_unit_test(test_os_release_identity),
                cmocka_unit_test(test_paths),
                cmocka_unit_test(test_lists),
                cmocka_unit_test(test_parse_errors),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
