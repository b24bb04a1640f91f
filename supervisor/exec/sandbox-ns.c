/* SPDX-License-Identifier: MIT */
/*
 * seccomp (issue 17): the namespaces other than the mount namespace
 * (sandbox-seccomp.h): PrivateUsers= (a user namespace mapping root and the
 * unit's user, as systemd 252), PrivateNetwork= (a network namespace with
 * only the loopback, brought up), PrivateIPC=, ProtectHostname= (a UTS
 * namespace). Planned in the manager, unshared in the child.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include "hardening.h"
#include "libexit.h"
#include "log.h"
#include "sandbox-seccomp.h"
#include "sandbox.h"
#include "unit-file.h"

#define GROUPS_MAPPED_MAX 150 /* gid_map lines: one write, under a page */

/* ------------------------------------------------------------------------ */
/* The plan                                                                  */
/* ------------------------------------------------------------------------ */

/* Whether this kernel has namespaces of kind ("net", "user"…). */
static bool kernel_has_ns(const char *kind) {
        char path[32];
        snprintf(path, sizeof path, "/proc/self/ns/%s", kind);
        return access(path, F_OK) == 0;
}

/* user.max_user_namespaces above 0 (a kernel may forbid them). */
static bool user_ns_allowed(void) {
        char buf[32] = {};
        int fd = open("/proc/sys/user/max_user_namespaces", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
                close(fd);
        return n <= 0 || atol(buf) > 0; /* unreadable: unshare will say */
}

static bool effective(const struct sandbox_self *self, int cap) {
        return (self->effective >> cap) & 1;
}

/* ids[0..*n) each once, in order (gid_map lines must not overlap). */
static void add_id(uint32_t *ids, size_t *n, uint32_t id) {
        for (size_t i = 0; i < *n; i++)
                if (ids[i] == id)
                        return;
        ids[(*n)++] = id;
}

/* The maps: root and the unit's user (systemd 252); the gids also each
 * supplementary group the process will hold, so setgroups works inside. */
static int plan_maps(const struct sandbox_self *self, const struct sandbox_plan *p, struct sandbox_hardening *s) {
        uint32_t uid = p->set_uid ? p->uid : self->uid, gid = p->set_gid ? p->gid : self->gid;
        uint32_t ids[GROUPS_MAPPED_MAX + 2];
        size_t n = 0;
        if (uid == 0)
                snprintf(s->uid_map, sizeof s->uid_map, "0 0 1\n");
        else
                snprintf(s->uid_map, sizeof s->uid_map, "0 0 1\n%u %u 1\n", uid, uid);
        add_id(ids, &n, 0);
        add_id(ids, &n, gid);
        for (size_t i = 0; p->set_groups && i < p->n_groups; i++) {
                if (n == ELEMENTSOF(ids))
                        return -E2BIG;
                add_id(ids, &n, p->groups[i]);
        }
        size_t size = n * 24 + 1;
        if (!(s->gid_map = malloc(size)))
                return -ENOMEM;
        size_t o = 0;
        for (size_t i = 0; i < n; i++)
                o += (size_t) snprintf(s->gid_map + o, size - o, "%u %u 1\n", ids[i], ids[i]);
        return 0;
}

/* One namespace key: wanted, and why it cannot be applied (NULL: it can). */
static int plan_one(const char *unit, const struct unit_file *f, bool wanted, const char *kind, const char *key,
                    const char *why, bool *ret) {
        char because[160];
        if (!wanted)
                return 0;
        if (!kernel_has_ns(kind)) {
                snprintf(because, sizeof because, "the kernel has no %s namespaces", kind);
                why = because;
        }
        int r = why ? hardening_cannot_apply(unit, f, key, why) : 0;
        if (r < 0)
                return r;
        *ret = r == 0;
        return 0;
}

int sandbox_ns_plan(const char *unit, const struct unit_file *f, const struct sandbox_self *self,
                    const struct sandbox_plan *p, struct sandbox_hardening *s) {
        const struct unit_hardening_keys *h = unit_file_hardening(f);
        const char *why = NULL;
        if (h->private_users && !user_ns_allowed())
                why = "the kernel forbids user namespaces (user.max_user_namespaces is 0)";
        else if (h->private_users && (!effective(self, CAP_SETUID) || !effective(self, CAP_SETGID)))
                why = "mapping root and the unit's user needs CAP_SETUID and CAP_SETGID";
        int r = plan_one(unit, f, h->private_users, "user", "PrivateUsers=", why, &s->private_users);
        if (r >= 0 && s->private_users && (r = plan_maps(self, p, s)) == -E2BIG)
                r = hardening_cannot_apply(unit, f, "PrivateUsers=", "more supplementary groups than tend maps");
        if (r < 0)
                return r;
        /* As systemd 252: a manager with CAP_SYS_ADMIN makes the user namespace last, so the
         * mount, network, IPC and UTS namespaces belong to the host's user namespace (a new
         * procfs for ProtectProc= needs CAP_SYS_ADMIN where the PID namespace belongs). */
        s->userns_last = s->private_users && effective(self, CAP_SYS_ADMIN);
        /* Without CAP_SYS_ADMIN, a namespace is tend's only inside the user namespace of PrivateUsers=. */
        why = effective(self, CAP_SYS_ADMIN) || s->private_users ? NULL : "needs CAP_SYS_ADMIN (or PrivateUsers=)";
        r = plan_one(unit, f, h->private_network, "net", "PrivateNetwork=", why, &s->private_network);
        if (r >= 0)
                r = plan_one(unit, f, h->private_ipc, "ipc", "PrivateIPC=", why, &s->private_ipc);
        if (r >= 0)
                r = plan_one(unit, f, h->protect_hostname, "uts", "ProtectHostname=", why, &s->protect_hostname);
        return r;
}

/* ------------------------------------------------------------------------ */
/* The child: async-signal-safe only                                         */
/* ------------------------------------------------------------------------ */

#define FAIL(stage)                                      \
        do {                                             \
                *ret_stage = EXIT_STAGE_HOOK + (stage);  \
                return errno > 0 ? -errno : -EIO;        \
        } while (0)

/* "/proc/PID/NAME" into buf, without stdio. */
static void proc_path(char buf[static 48], pid_t pid, const char *name) {
        char digits[16];
        size_t n = 0, o = 0;
        do
                digits[n++] = (char) ('0' + pid % 10);
        while ((pid /= 10) > 0);
        memcpy(buf, "/proc/", 6), o = 6;
        while (n > 0)
                buf[o++] = digits[--n];
        buf[o++] = '/';
        size_t l = strlen(name);
        memcpy(buf + o, name, l + 1);
}

static int write_file(pid_t pid, const char *name, const char *text) {
        char path[48];
        proc_path(path, pid, name);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        size_t len = strlen(text);
        ssize_t n = write(fd, text, len);
        int e = errno;
        close(fd);
        errno = n == (ssize_t) len ? 0 : n < 0 ? e : EIO;
        return errno ? -1 : 0;
}

/* The helper: once its parent has unshared (a byte on fd), writes its maps from outside. */
__attribute__((noreturn)) static void map_helper(const struct sandbox_hardening *h, pid_t parent, int fd) {
        char c;
        ssize_t n;
        while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
                ;
        if (n != 1)
                _exit(0); /* the parent did not unshare: it reports that itself */
        if (write_file(parent, "uid_map", h->uid_map) < 0 || write_file(parent, "gid_map", h->gid_map) < 0)
                _exit(errno & 0xff ? errno & 0xff : EIO);
        _exit(0);
}

int sandbox_userns_step(const struct sandbox_hardening *h, bool late, int *ret_stage) {
        if (!h || !h->private_users || h->userns_last != late)
                return 0;
        int fds[2], status = 0;
        if (pipe2(fds, O_CLOEXEC) < 0)
                FAIL(SANDBOX_STAGE_USERNS);
        pid_t parent = getpid();
        pid_t pid = (pid_t) syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0); /* a fork without libc's handlers */
        if (pid == 0) {
                close(fds[1]);
                map_helper(h, parent, fds[0]);
        }
        int e = errno;
        close(fds[0]);
        int r = pid < 0 ? -1 : unshare(CLONE_NEWUSER);
        e = r < 0 ? errno : e;
        if (r >= 0)
                (void) !write(fds[1], "u", 1);
        close(fds[1]);
        while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        errno = e;
        if (r < 0)
                FAIL(SANDBOX_STAGE_USERNS);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                errno = WIFEXITED(status) ? WEXITSTATUS(status) : ECHILD;
                FAIL(SANDBOX_STAGE_USERNS_MAP);
        }
        return 0;
}

/* "lo" up: the only interface of a new network namespace, down until then. */
static int loopback_up(void) {
        struct ifreq ifr = {};
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        memcpy(ifr.ifr_name, "lo", 3);
        int r = ioctl(fd, SIOCGIFFLAGS, &ifr);
        if (r >= 0) {
                ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
                r = ioctl(fd, SIOCSIFFLAGS, &ifr);
        }
        int e = errno;
        close(fd);
        errno = e;
        return r;
}

int sandbox_namespaces_step(const struct sandbox_hardening *h, int *ret_stage) {
        if (!h)
                return 0;
        if (h->private_network && unshare(CLONE_NEWNET) < 0)
                FAIL(SANDBOX_STAGE_NETNS);
        if (h->private_network && loopback_up() < 0)
                FAIL(SANDBOX_STAGE_LOOPBACK);
        if (h->private_ipc && unshare(CLONE_NEWIPC) < 0)
                FAIL(SANDBOX_STAGE_IPCNS);
        if (h->protect_hostname && unshare(CLONE_NEWUTS) < 0)
                FAIL(SANDBOX_STAGE_UTSNS);
        return 0;
}
