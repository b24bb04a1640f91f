/* SPDX-License-Identifier: MIT */
/*
 * The condition checks that detect facts of the machine (condition.h):
 * virtualization, firmware, security modules, architecture, CPU features, AC
 * power, cgroup controllers, pressure (PSI), encrypted block devices. Each
 * reads what systemd 252 reads, under env->root.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/netlink.h>
#if defined(__i386__) || defined(__x86_64__)
#include <cpuid.h>
#endif

#include "condition-internal.h"
#include "condition-syntax.h"
#include "macro.h"
#include "unit-specifiers.h"

static bool exists(const struct condition_env *env, const char *path) {
        char p[PATH_MAX];
        return access(cond_path(env, path, p, sizeof p), F_OK) >= 0;
}

/* ---- virtualization (systemd-detect-virt's ids) ---- */

/* container= of PID 1's environment into buf; its length, or 0. */
static size_t pid1_container(const struct condition_env *env, char *buf, size_t size) {
        char environ_text[8192];
        ssize_t n = cond_read(env, "/proc/1/environ", environ_text, sizeof environ_text);
        for (size_t i = 0; n > 0 && i < (size_t) n; i += strlen(environ_text + i) + 1)
                if (strncmp(environ_text + i, "container=", 10) == 0) {
                        snprintf(buf, size, "%s", environ_text + i + 10);
                        return strlen(buf);
                }
        return 0;
}

static const char *detect_container(const struct condition_env *env) {
        static char id[64];
        char buf[256];
        if (exists(env, "/proc/vz") && !exists(env, "/proc/bc"))
                return "openvz";
        if (cond_read(env, "/proc/sys/kernel/osrelease", buf, sizeof buf) > 0 &&
            (strstr(buf, "Microsoft") || strstr(buf, "WSL")))
                return "wsl";
        if (cond_read(env, "/run/systemd/container", buf, sizeof buf) > 0 || pid1_container(env, buf, sizeof buf) > 0) {
                buf[strcspn(buf, "\n")] = 0;
                snprintf(id, sizeof id, "%.63s", streq(buf, "oci") ? "docker" : buf);
                if (*id)
                        return id;
        }
        if (exists(env, "/run/.containerenv"))
                return "podman";
        if (exists(env, "/.dockerenv"))
                return "docker";
        return NULL;
}

static const char *detect_vm(const struct condition_env *env) {
        static const struct {
                const char *vendor, *id;
        } dmi[] = {
                { "KVM", "kvm" },          { "OpenStack", "kvm" },    { "KubeVirt", "kvm" },
                { "Amazon EC2", "amazon" }, { "QEMU", "qemu" },        { "VMware", "vmware" },
                { "VMW", "vmware" },       { "innotek GmbH", "oracle" }, { "VirtualBox", "oracle" },
                { "Oracle Corporation", "oracle" }, { "Xen", "xen" },  { "Bochs", "bochs" },
                { "Parallels", "parallels" }, { "BHYVE", "bhyve" },    { "Hyper-V", "microsoft" },
                { "Microsoft Corporation", "microsoft" }, { "Apple Virtualization", "apple" },
                { "Google Compute Engine", "google" },
        };
        static const char *const files[] = { "/sys/class/dmi/id/product_name", "/sys/class/dmi/id/sys_vendor",
                                              "/sys/class/dmi/id/board_vendor", "/sys/class/dmi/id/bios_vendor",
                                              "/sys/class/dmi/id/product_version" };
        char buf[256];
        for (size_t f = 0; f < ELEMENTSOF(files); f++) {
                if (cond_read(env, files[f], buf, sizeof buf) <= 0)
                        continue;
                for (size_t i = 0; i < ELEMENTSOF(dmi); i++)
                        if (strncmp(buf, dmi[i].vendor, strlen(dmi[i].vendor)) == 0)
                                return dmi[i].id;
        }
        if (exists(env, "/proc/xen"))
                return "xen";
        static char cpuinfo[64 * 1024];
        if (cond_read(env, "/proc/cpuinfo", cpuinfo, sizeof cpuinfo) > 0 && strstr(cpuinfo, " hypervisor"))
                return "vm-other";
        return NULL;
}

const char *cond_detect_virtualization(const struct condition_env *env, bool *ret_container) {
        const char *id = detect_container(env);
        *ret_container = id != NULL;
        if (!id)
                id = detect_vm(env);
        return id ? id : "none";
}

static bool running_in_userns(const struct condition_env *env) {
        char buf[256];
        if (cond_read(env, "/proc/self/uid_map", buf, sizeof buf) <= 0)
                return false;
        unsigned long a, b, n;
        return sscanf(buf, "%lu %lu %lu", &a, &b, &n) != 3 || a != 0 || b != 0 || n != 4294967295UL;
}

int cond_virtualization(const struct condition_env *env, const char *v) {
        if (streq(v, "private-users"))
                return running_in_userns(env);
        bool container;
        const char *id = cond_detect_virtualization(env, &container);
        bool none = streq(id, "none");
        int b = condition_parse_boolean(v);
        if (b >= 0)
                return b == !none;
        if (streq(v, "vm"))
                return !none && !container;
        if (streq(v, "container"))
                return container;
        return !none && streq(v, id);
}

/* ---- firmware ---- */

static int smbios_field(const struct condition_env *env, const char *expr) {
        size_t n = strcspn(expr, "<>=!$");
        char field[128], path[256], value[512];
        while (n > 0 && expr[n - 1] == ' ')
                n--;
        if (n == 0 || n >= sizeof field || memchr(expr, '/', n))
                return -EINVAL;
        snprintf(field, sizeof field, "%.*s", (int) n, expr);
        const char *p = expr + strcspn(expr, "<>=!$");
        int op = condition_op_parse(&p, CONDITION_OP_STRING | CONDITION_OP_GLOB_OK);
        if (op < 0)
                return -EINVAL;
        p += strspn(p, " ");
        snprintf(path, sizeof path, "/sys/class/dmi/id/%s", field);
        ssize_t k = cond_read(env, path, value, sizeof value);
        if (k < 0)
                return k == -ENOENT ? 0 : (int) k;
        value[strcspn(value, "\n")] = 0;
        return condition_op_compare((enum condition_op) op, value, p);
}

static int dt_compatible(const struct condition_env *env, const char *want) {
        char buf[4096];
        ssize_t n = cond_read(env, "/proc/device-tree/compatible", buf, sizeof buf);
        if (n <= 0 || buf[n - 1] != 0)
                return 0;
        for (size_t i = 0; i < (size_t) n; i += strlen(buf + i) + 1)
                if (streq(buf + i, want))
                        return 1;
        return 0;
}

int cond_firmware(const struct condition_env *env, const char *v) {
        char arg[512];
        size_t n = strlen(v);
        if (streq(v, "uefi"))
                return exists(env, "/sys/firmware/efi");
        if (streq(v, "device-tree"))
                return exists(env, "/sys/firmware/devicetree");
        const char *fn[] = { "device-tree-compatible(", "smbios-field(" };
        for (size_t i = 0; i < ELEMENTSOF(fn); i++) {
                size_t m = strlen(fn[i]);
                if (strncmp(v, fn[i], m) != 0 || v[n - 1] != ')' || n - m - 1 >= sizeof arg)
                        continue;
                snprintf(arg, sizeof arg, "%.*s", (int) (n - m - 1), v + m);
                return i == 0 ? dt_compatible(env, arg) : smbios_field(env, arg);
        }
        return 0; /* an unknown firmware type does not match */
}

/* ---- security ---- */

static int use_audit(void) {
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_AUDIT);
        if (fd < 0)
                return !(errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT || errno == EPERM);
        close(fd);
        return 1;
}

static int has_tpm2(const struct condition_env *env) {
        char p[PATH_MAX];
        DIR *d = opendir(cond_path(env, "/sys/class/tpmrm", p, sizeof p));
        if (!d)
                return 0;
        int found = 0;
        for (struct dirent *e; !found && (e = readdir(d));)
                found = e->d_name[0] != '.';
        closedir(d);
        return found;
}

int cond_security(const struct condition_env *env, const char *v) {
        char buf[64];
        if (streq(v, "selinux"))
                return exists(env, "/sys/fs/selinux/enforce");
        if (streq(v, "apparmor"))
                return cond_read(env, "/sys/module/apparmor/parameters/enabled", buf, sizeof buf) > 0 && buf[0] == 'Y';
        if (streq(v, "smack"))
                return exists(env, "/sys/fs/smackfs");
        if (streq(v, "ima"))
                return exists(env, "/sys/kernel/security/ima");
        if (streq(v, "tomoyo"))
                return exists(env, "/sys/kernel/security/tomoyo/version");
        if (streq(v, "audit"))
                return use_audit();
        if (streq(v, "uefi-secureboot")) {
                ssize_t n = cond_read(env,
                                      "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e0cb4e9e2b8c",
                                      buf, sizeof buf);
                return n == 5 && buf[4] == 1;
        }
        if (streq(v, "tpm2"))
                return has_tpm2(env);
        return 0; /* an unknown technology is not enabled */
}

/* ---- architecture, CPU features ---- */

int cond_architecture(const char *v) {
        struct utsname u;
        if (uname(&u) < 0)
                return -errno;
        const char *have = unit_architecture_name(u.machine);
#if defined(__x86_64__)
        const char *native = "x86-64";
#elif defined(__aarch64__)
        const char *native = "arm64";
#elif defined(__i386__)
        const char *native = "x86";
#else
        const char *native = have;
#endif
        return streq(have, streq(v, "native") ? native : v);
}

int cond_cpu_feature(const char *v) {
#if defined(__i386__) || defined(__x86_64__)
        static const struct {
                const char *name;
                unsigned leaf, reg, bit; /* reg: 0 ebx, 1 ecx, 2 edx */
        } f[] = {
                { "fpu", 1, 2, 0 },    { "vme", 1, 2, 1 },      { "de", 1, 2, 2 },      { "pse", 1, 2, 3 },
                { "tsc", 1, 2, 4 },    { "msr", 1, 2, 5 },      { "pae", 1, 2, 6 },     { "mce", 1, 2, 7 },
                { "cx8", 1, 2, 8 },    { "apic", 1, 2, 9 },     { "sep", 1, 2, 11 },    { "mtrr", 1, 2, 12 },
                { "pge", 1, 2, 13 },   { "mca", 1, 2, 14 },     { "cmov", 1, 2, 15 },   { "pat", 1, 2, 16 },
                { "pse36", 1, 2, 17 }, { "clflush", 1, 2, 19 }, { "mmx", 1, 2, 23 },    { "fxsr", 1, 2, 24 },
                { "sse", 1, 2, 25 },   { "sse2", 1, 2, 26 },    { "ht", 1, 2, 28 },     { "pni", 1, 1, 0 },
                { "pclmul", 1, 1, 1 }, { "monitor", 1, 1, 3 },  { "ssse3", 1, 1, 9 },   { "fma3", 1, 1, 12 },
                { "cx16", 1, 1, 13 },  { "sse4_1", 1, 1, 19 },  { "sse4_2", 1, 1, 20 }, { "movbe", 1, 1, 22 },
                { "popcnt", 1, 1, 23 }, { "aes", 1, 1, 25 },    { "xsave", 1, 1, 26 },  { "osxsave", 1, 1, 27 },
                { "avx", 1, 1, 28 },   { "f16c", 1, 1, 29 },    { "rdrand", 1, 1, 30 }, { "bmi1", 7, 0, 3 },
                { "avx2", 7, 0, 5 },   { "bmi2", 7, 0, 8 },     { "rdseed", 7, 0, 18 }, { "adx", 7, 0, 19 },
                { "sha_ni", 7, 0, 29 }, { "syscall", 0x80000001, 2, 11 }, { "rdtscp", 0x80000001, 2, 27 },
                { "lm", 0x80000001, 2, 29 }, { "lahf_lm", 0x80000001, 1, 0 }, { "abm", 0x80000001, 1, 5 },
                { "constant_tsc", 0x80000007, 2, 8 },
        };
        for (size_t i = 0; i < ELEMENTSOF(f); i++) {
                if (strcasecmp(v, f[i].name) != 0)
                        continue;
                unsigned r[4] = {}; /* eax, ebx, ecx, edx */
                if (!__get_cpuid_count(f[i].leaf, 0, &r[0], &r[1], &r[2], &r[3]))
                        return 0;
                return (r[f[i].reg + 1] >> f[i].bit) & 1;
        }
#endif
        return 0; /* another processor, or an unknown feature: not supported */
}

/* ---- power ---- */

/* AC power unless at least one AC connector is known and none is online. */
int cond_ac_power(const struct condition_env *env, const char *v) {
        int want = condition_parse_boolean(v);
        if (want < 0)
                return want;
        char p[PATH_MAX], buf[64];
        DIR *d = opendir(cond_path(env, "/sys/class/power_supply", p, sizeof p));
        bool found_offline = false, found_online = false;
        for (struct dirent *e; d && !found_online && (e = readdir(d));) {
                if (e->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof p, "/sys/class/power_supply/%s/type", e->d_name);
                if (cond_read(env, p, buf, sizeof buf) <= 0 || strncmp(buf, "Mains", 5) != 0)
                        continue;
                snprintf(p, sizeof p, "/sys/class/power_supply/%s/online", e->d_name);
                if (cond_read(env, p, buf, sizeof buf) <= 0)
                        continue;
                found_online = buf[0] == '1';
                found_offline = found_offline || buf[0] == '0';
        }
        if (d)
                closedir(d);
        bool on_ac = found_online || !found_offline;
        return on_ac == (want > 0);
}

/* ---- cgroup controllers ---- */

/* Whether controller c is available: v2 lists it in the root's
 * cgroup.controllers (cpuacct comes with cpu, devices is always there);
 * v1 mounts its hierarchy. -ENOENT: a controller systemd does not know. */
static int controller_available(const struct condition_env *env, bool v2, const char *controllers, const char *c) {
        static const char *const known[] = { "cpu", "cpuacct", "cpuset", "io", "blkio", "memory", "devices", "pids" };
        bool is_known = false;
        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                is_known = is_known || streq(c, known[i]);
        if (!is_known)
                return -ENOENT;
        if (!v2) {
                char p[256];
                snprintf(p, sizeof p, "/sys/fs/cgroup/%s", c);
                return exists(env, p);
        }
        if (streq(c, "devices"))
                return 1;
        const char *w = streq(c, "cpuacct") ? "cpu" : c;
        size_t n = strlen(w);
        for (const char *s = controllers; (s = strstr(s, w)); s += n)
                if ((s == controllers || s[-1] == ' ') && (s[n] == 0 || s[n] == ' ' || s[n] == '\n'))
                        return 1;
        return 0;
}

int cond_control_group_controller(const struct condition_env *env, const char *v) {
        char controllers[1024] = "";
        bool v2 = cond_read(env, "/sys/fs/cgroup/cgroup.controllers", controllers, sizeof controllers) >= 0;
        if (streq(v, "v2"))
                return v2;
        if (streq(v, "v1"))
                return !v2;
        _cleanup_free_ char *copy = strdup(v);
        if (!copy)
                return -ENOMEM;
        char *save = NULL;
        for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                int r = controller_available(env, v2, controllers, w);
                if (r == 0)
                        return 0; /* unknown ones (-ENOENT) are ignored */
        }
        return 1;
}

/* ---- pressure ---- */

int cond_pressure(const struct condition_env *env, unit_condition_type t, const char *v) {
        const char *slice;
        size_t slice_len;
        unsigned limit, window;
        if (condition_parse_pressure(v, &slice, &slice_len, &limit, &window) < 0)
                return -EINVAL;
        /* tend runs no slices: a slice's cgroup does not exist, and systemd
         * skips the check of a cgroup that does not exist. */
        if (slice)
                return 1;
        const char *kind = t == UNIT_CONDITION_MEMORY_PRESSURE ? "memory" : t == UNIT_CONDITION_CPU_PRESSURE ? "cpu" : "io";
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/pressure/%s", kind);
        if (cond_read(env, path, buf, sizeof buf) < 0)
                return 1; /* no PSI: systemd skips the check */
        /* "full" first; the system's CPU has only a meaningful "some". */
        const char *line = t == UNIT_CONDITION_CPU_PRESSURE ? NULL : strstr(buf, "full ");
        if (!line)
                line = strstr(buf, "some ");
        char key[16];
        snprintf(key, sizeof key, "avg%u=", window);
        const char *a = line ? strstr(line, key) : NULL;
        if (!a)
                return -EIO;
        unsigned whole = 0, frac = 0;
        if (sscanf(a + strlen(key), "%u.%2u", &whole, &frac) < 1)
                return -EIO;
        return whole * 100 + frac <= limit;
}

/* ---- encrypted block devices ---- */

/* Whether block device maj:min or one of the devices under it is dm-crypt. */
static int block_is_encrypted(const struct condition_env *env, unsigned maj, unsigned min, int depth) {
        char p[256], buf[128], dir[PATH_MAX];
        snprintf(p, sizeof p, "/sys/dev/block/%u:%u/dm/uuid", maj, min);
        if (cond_read(env, p, buf, sizeof buf) > 0 && strncmp(buf, "CRYPT-", 6) == 0)
                return 1;
        if (depth > 8)
                return 0;
        snprintf(p, sizeof p, "/sys/dev/block/%u:%u/slaves", maj, min);
        DIR *d = opendir(cond_path(env, p, dir, sizeof dir));
        int found = 0;
        for (struct dirent *e; d && !found && (e = readdir(d));) {
                unsigned a, b;
                char q[PATH_MAX];
                if (e->d_name[0] == '.')
                        continue;
                snprintf(q, sizeof q, "/sys/dev/block/%u:%u/slaves/%s/dev", maj, min, e->d_name);
                if (cond_read(env, q, buf, sizeof buf) > 0 && sscanf(buf, "%u:%u", &a, &b) == 2)
                        found = block_is_encrypted(env, a, b, depth + 1);
        }
        if (d)
                closedir(d);
        return found;
}

int cond_path_is_encrypted(const struct condition_env *env, const char *path) {
        struct stat st;
        if (stat(path, &st) < 0 || major(st.st_dev) == 0)
                return 0; /* missing, or not on a block device */
        return block_is_encrypted(env, major(st.st_dev), minor(st.st_dev), 0);
}
