/* SPDX-License-Identifier: MIT */
/*
 * enable/disable (issue 18; docs/tendctl.1.md "enable", docs/tend.8.md
 * "DISABLED UNITS"): which units of DIR tend starts on its own. Every
 * non-template unit of DIR is enabled unless a marker DIR/NAME.disabled (an
 * entry of any type: its existence is what counts) sits next to its file. A
 * disabled unit is loaded as any other — shown, started by `tendctl start`,
 * pulled in by another unit's Wants=/Requires= as under systemd — but not
 * started at tend's start nor as new at daemon-reload. The marker is read
 * where those starts happen, so a marker made by hand (configuration
 * management) counts at the next start or reload as one made by `tendctl
 * disable`. The marker lies next to the file it affects so that `ls DIR`
 * shows it; the loader ignores it (not a *.service name).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "log.h"
#include "macro.h"
#include "manager-internal.h"
#include "unit.h"

#define DISABLED_SUFFIX ".disabled"

const char *unit_enablement_to_string(enum unit_enablement e) {
        static const char *const words[] = { [UNIT_ENABLED] = "enabled", [UNIT_DISABLED] = "disabled",
                                             [UNIT_STATIC] = "static" };
        return (unsigned) e < ELEMENTSOF(words) ? words[e] : "enabled";
}

/* DIR/NAME[suffix] into buf; false when it does not fit. */
static bool dir_path(const struct manager *m, const char *name, const char *suffix, char *buf, size_t size) {
        int n = snprintf(buf, size, "%s/%s%s", m->opts->config_dir, name, suffix);
        return n > 0 && (size_t) n < size;
}

static bool entry_exists(const char *path) {
        struct stat st;
        return fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

enum unit_enablement manager_unit_enablement(const struct manager *m, const struct unit *u) {
        char path[PATH_MAX];
        if (!m->opts->config_dir || !dir_path(m, u->name, "", path, sizeof path) || !entry_exists(path))
                return UNIT_STATIC;
        if (dir_path(m, u->name, DISABLED_SUFFIX, path, sizeof path) && entry_exists(path))
                return UNIT_DISABLED;
        return UNIT_ENABLED;
}

bool manager_unit_starts_on_its_own(const struct manager *m, const struct unit *u) {
        if (manager_unit_enablement(m, u) != UNIT_DISABLED)
                return true;
        log_info("%s: disabled (%s/%s" DISABLED_SUFFIX "): not started", u->name, m->opts->config_dir, u->name);
        return false;
}

static const char marker_text[] =
        "# tendctl disable: tend does not start this unit on its own (at its start, at daemon-reload).\n"
        "# Remove this file, or run `tendctl enable`, to undo. See tendctl(1).\n";

static int marker_create(const char *path) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return errno == EEXIST ? 0 : -errno; /* there already (any type): disabled */
        ssize_t n = write(fd, marker_text, sizeof marker_text - 1);
        int r = n < 0 ? -errno : 0;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        return r; /* a short or failed write leaves a marker all the same: still disabled */
}

int manager_unit_set_enabled(struct manager *m, struct unit *u, bool enabled) {
        char path[PATH_MAX];
        if (manager_unit_enablement(m, u) == UNIT_STATIC)
                return -EADDRNOTAVAIL;
        if (!dir_path(m, u->name, DISABLED_SUFFIX, path, sizeof path))
                return -ENAMETOOLONG;
        int r = enabled ? (unlink(path) < 0 && errno != ENOENT ? -errno : 0) : marker_create(path);
        if (r < 0)
                return log_warning_errno(r, "%s: cannot %s it (%s): %m", u->name, enabled ? "enable" : "disable",
                                         path);
        log_info("%s: %s (%s)", u->name, enabled ? "enabled" : "disabled", path);
        return 0;
}
