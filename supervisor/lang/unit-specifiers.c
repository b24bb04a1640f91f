/* SPDX-License-Identifier: MIT */
/*
 * Specifiers of the manager and the machine (systemd 252's table in
 * systemd.unit(5) "Specifiers"; unit-file.c resolves the unit's own: %n %N
 * %p %P %i %I %f %j %J %%). As systemd 252 does, they are resolved when the
 * file is loaded, and %u %U %g %G %h %s name the user tend runs as, never
 * User= (systemd: "not influenced by the User= setting"). The directory
 * roots are those of RuntimeDirectory= and friends (unit_dir_root()), the
 * system manager's for root and the user manager's for any other user.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "unit-file-internal.h"
#include "unit-specifiers.h"

/* ---- shared facts (unit-specifiers.h) ---- */

/* $NAME if absolute, else $HOME/fallback, then suffix. */
static int xdg_dir(const char *name, const char *fallback, const char *suffix, char **ret) {
        const char *v = getenv(name), *home = getenv("HOME");
        int n;
        if (v && v[0] == '/')
                n = asprintf(ret, "%s%s", v, suffix);
        else if (fallback && home && home[0] == '/')
                n = asprintf(ret, "%s/%s%s", home, fallback, suffix);
        else
                return -ENXIO;
        return n < 0 ? -ENOMEM : 0;
}

int unit_dir_root(unit_exec_dir t, uid_t euid, char **ret) {
        static const char *const system[_UNIT_EXEC_DIR_MAX] = { "/run", "/var/lib", "/var/cache", "/var/log", "/etc" };
        if (euid == 0)
                return (*ret = strdup(system[t])) ? 0 : -ENOMEM;
        switch (t) {
        case UNIT_EXEC_DIR_RUNTIME:
                return xdg_dir("XDG_RUNTIME_DIR", NULL, "", ret);
        case UNIT_EXEC_DIR_STATE:
                return xdg_dir("XDG_STATE_HOME", ".local/state", "", ret);
        case UNIT_EXEC_DIR_CACHE:
                return xdg_dir("XDG_CACHE_HOME", ".cache", "", ret);
        case UNIT_EXEC_DIR_LOGS:
                return xdg_dir("XDG_STATE_HOME", ".local/state", "/log", ret);
        default:
                return xdg_dir("XDG_CONFIG_HOME", ".config", "", ret);
        }
}

const char *unit_architecture_name(const char *machine) {
        static const struct {
                const char *pattern, *name;
        } map[] = {
                { "x86_64", "x86-64" }, { "i[3-6]86", "x86" },  { "aarch64", "arm64" }, { "aarch64_be", "arm64-be" },
                { "armv*b", "arm-be" }, { "arm*", "arm" },     { "ppc64le", "ppc64-le" }, { "ppc64", "ppc64" },
                { "ppcle", "ppc-le" },  { "ppc", "ppc" },      { "s390x", "s390x" },   { "s390", "s390" },
                { "riscv64", "riscv64" }, { "riscv32", "riscv32" }, { "mips64", "mips64" }, { "mips", "mips" },
                { "loongarch64", "loongarch64" }, { "ia64", "ia64" }, { "sparc64", "sparc64" }, { "sparc", "sparc" },
                { "alpha", "alpha" },   { "m68k", "m68k" },    { "parisc64", "parisc64" }, { "parisc", "parisc" },
                { "sh64", "sh64" },     { "sh*", "sh" },       { "arc", "arc" },       { "cris", "cris" },
        };
        for (size_t i = 0; i < ELEMENTSOF(map); i++)
                if (fnmatch(map[i].pattern, machine, 0) == 0)
                        return map[i].name;
        return machine;
}

void unit_os_release_value(const char *text, const char *key, char *out, size_t size) {
        size_t n = strlen(key);
        *out = 0;
        for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
                if (strncmp(l, key, n) != 0 || l[n] != '=')
                        continue;
                const char *s = l + n + 1;
                size_t len = strcspn(s, "\n");
                if (len >= 2 && (s[0] == '"' || s[0] == '\'') && s[len - 1] == s[0])
                        s++, len -= 2;
                snprintf(out, size, "%.*s", (int) len, s);
        }
}

/* ---- reading the machine ---- */

/* The start of the file at path into buf (NUL-terminated); its length or a negative errno. */
static ssize_t read_text(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        int e = errno;
        close(fd);
        if (n < 0)
                return -e;
        buf[n] = 0;
        return n;
}

/* A 128-bit id of a file as systemd prints it: 32 hex digits, no dashes. */
static int read_id128(const char *path, char out[static 33]) {
        char buf[128];
        ssize_t n = read_text(path, buf, sizeof buf);
        if (n < 0)
                return (int) n;
        size_t j = 0;
        for (const char *p = buf; *p && *p != '\n' && j < 32; p++)
                if (*p != '-')
                        out[j++] = *p;
        out[j] = 0;
        return j == 32 && strspn(out, "0123456789abcdef") == 32 ? 0 : -EBADMSG;
}

static int put_os_release(struct unit_buf *b, const char *key) {
        static char text[16 * 1024];
        char value[512];
        ssize_t n = read_text("/etc/os-release", text, sizeof text);
        if (n == -ENOENT)
                n = read_text("/usr/lib/os-release", text, sizeof text);
        if (n < 0) /* systemd: a missing field (or file) is empty */
                text[0] = 0;
        unit_os_release_value(text, key, value, sizeof value);
        return unit_buf_put(b, value, strlen(value));
}

static int put_hostname(struct unit_buf *b, bool short_name) {
        char h[HOST_NAME_MAX + 1] = "";
        if (gethostname(h, sizeof h) < 0 || !*h || streq(h, "(none)"))
                snprintf(h, sizeof h, "localhost");
        return unit_buf_put(b, h, short_name ? strcspn(h, ".") : strlen(h));
}

static int put_uname(struct unit_buf *b, bool release) {
        struct utsname u;
        if (uname(&u) < 0)
                return -errno;
        const char *s = release ? u.release : unit_architecture_name(u.machine);
        return unit_buf_put(b, s, strlen(s));
}

/* %T and %V: $TMPDIR, $TEMP or $TMP if absolute, else fallback (systemd's tmp_dir()). */
static int put_tmp(struct unit_buf *b, const char *fallback) {
        static const char *const vars[] = { "TMPDIR", "TEMP", "TMP" };
        const char *d = fallback;
        for (size_t i = 0; i < ELEMENTSOF(vars); i++) {
                const char *v = getenv(vars[i]);
                if (v && v[0] == '/') {
                        d = v;
                        break;
                }
        }
        return unit_buf_put(b, d, strlen(d));
}

/* ---- the manager's user ---- */

/* %u %U %g %G %h %s of the user tend runs as: root's without NSS, as systemd. */
static int put_user(struct unit_buf *b, char spec) {
        uid_t uid = geteuid();
        gid_t gid = getegid();
        char num[32];
        const char *s = NULL, *env = NULL;
        struct passwd pw, *pwp = NULL;
        struct group gr, *grp = NULL;
        char buf[4096];
        if (spec == 'U' || spec == 'G') {
                snprintf(num, sizeof num, "%u", spec == 'U' ? (unsigned) uid : (unsigned) gid);
                return unit_buf_put(b, num, strlen(num));
        }
        if (spec == 'h' || spec == 's') { /* systemd: $HOME, $SHELL first when absolute */
                env = getenv(spec == 'h' ? "HOME" : "SHELL");
                if (uid == 0)
                        s = spec == 'h' ? "/root" : "/bin/sh";
                else if (env && env[0] == '/')
                        s = env;
        } else if ((spec == 'u' && uid == 0) || (spec == 'g' && gid == 0))
                s = "root";
        if (!s && spec == 'g') {
                if (getgrgid_r(gid, &gr, buf, sizeof buf, &grp) == 0 && grp)
                        s = grp->gr_name;
        } else if (!s && getpwuid_r(uid, &pw, buf, sizeof buf, &pwp) == 0 && pwp)
                s = spec == 'u' ? pwp->pw_name : spec == 'h' ? pwp->pw_dir : pwp->pw_shell;
        if (!s) { /* no entry: the number, as systemd's uid_to_name(); no home or shell */
                if (spec == 'h' || spec == 's')
                        return -ESRCH;
                snprintf(num, sizeof num, "%u", spec == 'u' ? (unsigned) uid : (unsigned) gid);
                s = num;
        }
        return unit_buf_put(b, s, strlen(s));
}

/* ---- directories and the fragment ---- */

static int put_root(struct parse_ctx *c, struct unit_buf *b, unit_exec_dir t, const char *suffix) {
        _cleanup_free_ char *root = NULL;
        int r = unit_dir_root(t, geteuid(), &root);
        if (r < 0)
                return r;
        r = unit_buf_put(b, root, strlen(root));
        if (r >= 0 && suffix) {
                r = unit_buf_put(b, suffix, strlen(suffix));
                if (r >= 0)
                        r = unit_buf_put(b, c->name, strlen(c->name));
        }
        return r;
}

/* %y: the unit's file with its links resolved (a linked unit's target); %Y: its directory. */
static int put_fragment(struct parse_ctx *c, struct unit_buf *b, bool directory) {
        const char *origin = c->texts ? c->texts[0].origin : c->origin;
        _cleanup_free_ char *real = realpath(origin, NULL);
        const char *p = real ? real : origin;
        size_t n = strlen(p);
        if (directory) {
                const char *slash = strrchr(p, '/');
                n = !slash ? 0 : slash == p ? 1 : (size_t) (slash - p);
                if (n == 0)
                        return unit_buf_putc(b, '.');
        }
        return unit_buf_put(b, p, n);
}

int uf_put_system_specifier(struct parse_ctx *c, struct unit_buf *b, char spec) {
        static const char *const os_keys[128] = {
                ['A'] = "IMAGE_VERSION", ['B'] = "BUILD_ID", ['M'] = "IMAGE_ID",
                ['o'] = "ID",            ['w'] = "VERSION_ID", ['W'] = "VARIANT_ID",
        };
        char id[33];
        int r;
        if (spec > 0 && os_keys[(unsigned char) spec])
                return put_os_release(b, os_keys[(unsigned char) spec]);
        switch (spec) {
        case 'a':
        case 'v':
                return put_uname(b, spec == 'v');
        case 'b':
        case 'm':
                r = read_id128(spec == 'b' ? "/proc/sys/kernel/random/boot_id" : "/etc/machine-id", id);
                return r < 0 ? r : unit_buf_put(b, id, 32);
        case 'H':
        case 'l':
                return put_hostname(b, spec == 'l');
        case 'T':
        case 'V':
                return put_tmp(b, spec == 'T' ? "/tmp" : "/var/tmp");
        case 'u': case 'U': case 'g': case 'G': case 'h': case 's':
                return put_user(b, spec);
        case 't':
                return put_root(c, b, UNIT_EXEC_DIR_RUNTIME, NULL);
        case 'S':
                return put_root(c, b, UNIT_EXEC_DIR_STATE, NULL);
        case 'C':
                return put_root(c, b, UNIT_EXEC_DIR_CACHE, NULL);
        case 'L':
                return put_root(c, b, UNIT_EXEC_DIR_LOGS, NULL);
        case 'E':
                return put_root(c, b, UNIT_EXEC_DIR_CONFIGURATION, NULL);
        case 'd': /* systemd's $CREDENTIALS_DIRECTORY; tend never makes it (LoadCredential= is not applied) */
                return put_root(c, b, UNIT_EXEC_DIR_RUNTIME, "/credentials/");
        case 'y':
        case 'Y':
                return put_fragment(c, b, spec == 'Y');
        default:
                return -EBADSLT;
        }
}
