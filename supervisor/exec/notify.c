/* SPDX-License-Identifier: MIT */
/*
 * The sd_notify protocol (notify.h; SPEC §1, §4; docs/notify.md): the
 * datagram parser, a unit's notify socket, and tend's own notifications to
 * the manager that started it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "log.h"
#include "macro.h"
#include "notify.h"
#include "unit-exec.h"

extern char **environ;

/* ---- parsing ---- */

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
static bool utf8_valid(const char *s) {
        const unsigned char *p = (const unsigned char *) s;
        while (*p) {
                unsigned c = *p, n;
                uint32_t cp;
                if (c < 0x80) {
                        p++;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf)
                        n = 1, cp = c & 0x1f;
                else if (c >= 0xe0 && c <= 0xef)
                        n = 2, cp = c & 0x0f;
                else if (c >= 0xf0 && c <= 0xf4)
                        n = 3, cp = c & 0x07;
                else
                        return false;
                for (unsigned i = 1; i <= n; i++) {
                        if ((p[i] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (p[i] & 0x3f);
                }
                if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
                    (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                p += n + 1;
        }
        return true;
}

/* A decimal number, digits only (no sign, no space), at most max. */
static int parse_decimal(const char *s, uint64_t max, uint64_t *ret) {
        if (!*s)
                return -EINVAL;
        uint64_t v = 0;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                unsigned d = (unsigned) (*s - '0');
                if (v > (max - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

static const char *value_of(const char *line, const char *key) {
        size_t n = strlen(key);
        return strncmp(line, key, n) == 0 ? line + n : NULL;
}

/* Keys whose first assignment counts, valid or not (systemd's strv_find_startswith). */
struct seen {
        bool status, main_pid, extend, errno_;
};

static void parse_line(const char *l, struct notify_message *m, struct seen *seen) {
        const char *v;
        uint64_t n;
        if (streq(l, "READY=1"))
                m->ready = true;
        else if (streq(l, "STOPPING=1"))
                m->stopping = true;
        else if (streq(l, "RELOADING=1"))
                m->reloading = true;
        else if (streq(l, "WATCHDOG=1"))
                m->watchdog_ping = true;
        else if (streq(l, "WATCHDOG=trigger"))
                m->watchdog_trigger = true;
        else if ((v = value_of(l, "STATUS="))) {
                if (seen->status)
                        return; /* the first one counts, as in systemd */
                seen->status = true;
                if (utf8_valid(v))
                        m->status = v;
                else
                        m->n_invalid++;
        } else if ((v = value_of(l, "MAINPID="))) {
                if (seen->main_pid)
                        return;
                seen->main_pid = true;
                if (parse_decimal(v, INT32_MAX, &n) == 0 && n > 0)
                        m->main_pid = (pid_t) n;
                else
                        m->n_invalid++;
        } else if ((v = value_of(l, "EXTEND_TIMEOUT_USEC="))) {
                if (seen->extend)
                        return;
                seen->extend = true;
                if (parse_decimal(v, UINT64_MAX, &n) == 0) {
                        m->has_extend_timeout = true;
                        m->extend_timeout_usec = n;
                } else
                        m->n_invalid++;
        } else if ((v = value_of(l, "ERRNO="))) {
                if (seen->errno_)
                        return;
                seen->errno_ = true;
                if (parse_decimal(v, 4095, &n) == 0) {
                        m->has_errno = true;
                        m->status_errno = (int) n;
                } else
                        m->n_invalid++;
        }
        /* Anything else (BARRIER=1, FDSTORE=1, MONOTONIC_USEC=, X_…) is ignored. */
}

int notify_parse(char *buf, size_t size, struct notify_message *ret) {
        if (!buf || !ret)
                return -EINVAL;
        if (size > NOTIFY_DATAGRAM_MAX)
                return -EMSGSIZE;
        if (memchr(buf, 0, size))
                return -EBADMSG;
        buf[size] = '\0';
        struct notify_message m = {};
        struct seen seen = {};
        for (char *line = buf; line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                if (*line)
                        parse_line(line, &m, &seen);
                line = nl ? nl + 1 : NULL;
        }
        *ret = m;
        return 0;
}

/* ---- a unit's socket ---- */

struct ratelimit {
        usec_t begin;
        unsigned n, suppressed;
};

struct notify_socket {
        int fd;
        sd_event_source *source;
        char *name;
        char address[sizeof(((struct sockaddr_un *) NULL)->sun_path) + 1];
        bool unlink_path;        /* parsefix: address is a path, removed with the socket */
        notify_handler_t handler;
        void *userdata;

        /* rate-limited logging (notify_socket_log_rejected, dropped datagrams) */
        struct ratelimit rejected, dropped;
        unsigned rejected_total;
};

/* Whether a rate-limited line may be logged now: NOTIFY_REJECT_LOG_BURST per
 * interval. *ret_suppressed: how many were not logged since the last one. */
static bool ratelimit(struct ratelimit *r, unsigned *ret_suppressed) {
        usec_t t = now_usec(CLOCK_MONOTONIC);
        if (r->n == 0 || t - r->begin >= NOTIFY_REJECT_LOG_INTERVAL_USEC) {
                r->begin = t;
                r->n = 0;
        }
        if (r->n >= NOTIFY_REJECT_LOG_BURST) {
                r->suppressed++;
                return false;
        }
        r->n++;
        *ret_suppressed = r->suppressed;
        r->suppressed = 0;
        return true;
}

unsigned notify_socket_log_rejected(struct notify_socket *s, pid_t pid, const char *why) {
        unsigned before;
        s->rejected_total++;
        if (ratelimit(&s->rejected, &before)) {
                if (before)
                        log_warning("%s: notification from pid %d ignored: %s (and %u more not logged)",
                                    s->name, (int) pid, why, before);
                else
                        log_warning("%s: notification from pid %d ignored: %s", s->name, (int) pid, why);
        }
        return s->rejected_total;
}

static void log_dropped(struct notify_socket *s, pid_t pid, const char *why) {
        unsigned before;
        if (!ratelimit(&s->dropped, &before))
                return;
        if (before)
                log_warning("%s: notification from pid %d dropped: %s (and %u more not logged)", s->name, (int) pid,
                            why, before);
        else
                log_warning("%s: notification from pid %d dropped: %s", s->name, (int) pid, why);
}

/* Closes every fd a datagram carried and finds its sender's pid. */
static pid_t take_control(struct msghdr *mh) {
        pid_t pid = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
                if (c->cmsg_level != SOL_SOCKET)
                        continue;
                if (c->cmsg_type == SCM_RIGHTS) {
                        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        const unsigned char *data = CMSG_DATA(c);
                        for (size_t i = 0; i < n; i++) {
                                int fd;
                                memcpy(&fd, data + i * sizeof(int), sizeof fd);
                                safe_close(fd);
                        }
                } else if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(struct ucred))) {
                        struct ucred cred;
                        memcpy(&cred, CMSG_DATA(c), sizeof cred);
                        pid = cred.pid;
                }
        }
        return pid;
}

/* Reads one datagram: 1 read (handled or dropped), 0 none queued, or an error. */
static int receive_one(struct notify_socket *s) {
        char buf[NOTIFY_DATAGRAM_MAX + 1];
        /* Room for the credentials and the most fds one message carries (SCM_MAX_FD). */
        union {
                struct cmsghdr align;
                char b[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * 253)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = NOTIFY_DATAGRAM_MAX };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof control };
        ssize_t n = recvmsg(s->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
        if (n < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : errno == EINTR ? 1 : -errno;
        pid_t pid = take_control(&mh);
        if ((size_t) n > NOTIFY_DATAGRAM_MAX || (mh.msg_flags & MSG_TRUNC)) {
                log_dropped(s, pid, "larger than 4096 bytes");
                return 1;
        }
        struct notify_message m;
        int k = notify_parse(buf, (size_t) n, &m);
        if (k < 0) {
                log_dropped(s, pid, "it contains a NUL byte");
                return 1;
        }
        if (m.n_invalid)
                log_debug("%s: %u invalid assignment%s in a notification from pid %d ignored", s->name, m.n_invalid,
                          m.n_invalid == 1 ? "" : "s", (int) pid);
        s->handler(s->userdata, pid, &m);
        return 1;
}

int notify_socket_dispatch(struct notify_socket *s) {
        int n = 0;
        while (n < NOTIFY_DISPATCH_MAX) {
                int k = receive_one(s);
                if (k < 0)
                        return k;
                if (k == 0)
                        break;
                n++;
        }
        return n;
}

static int on_readable(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct notify_socket *s = userdata;
        /* At most NOTIFY_DISPATCH_MAX, then back to the loop: the source is
         * level-triggered, and sd-event dispatches the sources pending longer
         * first, so a flood takes turns with everything else. */
        int k = notify_socket_dispatch(s);
        if (k < 0)
                log_warning_errno(k, "%s: reading its notify socket: %m", s->name);
        return 0;
}

/* The address fd is bound to: abstract as "@NAME", else its absolute path. */
static int socket_address(int fd, char ret[static sizeof(((struct sockaddr_un *) NULL)->sun_path) + 1]) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        socklen_t len = sizeof sa;
        if (getsockname(fd, (struct sockaddr *) &sa, &len) < 0)
                return negative_errno();
        size_t n = len - offsetof(struct sockaddr_un, sun_path);
        if (n >= 2 && sa.sun_path[0] == '/') { /* parsefix: a path socket (PrivateNetwork=) */
                memcpy(ret, sa.sun_path, n);
                ret[n] = '\0';
                return 0;
        }
        if (n < 2 || sa.sun_path[0] != '\0')
                return -EPROTO;
        ret[0] = '@';
        memcpy(ret + 1, sa.sun_path + 1, n - 1);
        ret[n] = '\0';
        return 0;
}

/*
 * parsefix: binds fd to DIR/<16 random hex digits> (DIR made 0755 if missing),
 * the file mode 0666 so that any User= may connect (the credentials decide
 * who may speak, as with the abstract address anyone may reach).
 */
static int bind_path(int fd, const char *dir, char ret[static sizeof(((struct sockaddr_un *) NULL)->sun_path) + 1]) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (mkdir(dir, 0755) >= 0) {
                if (chmod(dir, 0755) < 0) /* whatever tend's umask: every User= must reach its socket */
                        return negative_errno();
        } else if (errno != EEXIST)
                return negative_errno();
        for (int attempt = 0; attempt < 8; attempt++) {
                uint64_t id;
                if (getrandom(&id, sizeof id, 0) != sizeof id)
                        return -EIO;
                int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%016llx", dir, (unsigned long long) id);
                if (n < 0 || (size_t) n >= sizeof sa.sun_path)
                        return -ENAMETOOLONG;
                if (bind(fd, (struct sockaddr *) &sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n + 1)) < 0) {
                        if (errno == EADDRINUSE)
                                continue;
                        return negative_errno();
                }
                if (chmod(sa.sun_path, 0666) < 0) {
                        int k = negative_errno();
                        (void) unlink(sa.sun_path);
                        return k;
                }
                return socket_address(fd, ret);
        }
        return -EADDRINUSE;
}

static int bind_autobind(int fd, char ret[static sizeof(((struct sockaddr_un *) NULL)->sun_path) + 1]) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        /* Only the family: the kernel picks a free abstract name (5 hex digits). */
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa_family_t)) < 0)
                return negative_errno();
        return socket_address(fd, ret);
}

int notify_socket_new(sd_event *event, const char *name, const char *dir, notify_handler_t handler, void *userdata,
                      struct notify_socket **ret) {
        if (!name || !handler || !ret)
                return -EINVAL;
        struct notify_socket *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->handler = handler;
        s->userdata = userdata;
        s->name = strdup(name);
        s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int k = !s->name ? -ENOMEM : s->fd < 0 ? negative_errno() : 0;
        int one = 1;
        /* SO_PASSCRED before the bind: no datagram arrives without credentials. */
        if (k >= 0 && setsockopt(s->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0)
                k = negative_errno();
        if (k >= 0 && dir) {
                k = bind_path(s->fd, dir, s->address);
                s->unlink_path = k >= 0;
        } else if (k >= 0)
                k = bind_autobind(s->fd, s->address);
        if (k >= 0 && event)
                k = sd_event_add_io(event, &s->source, s->fd, EPOLLIN, on_readable, s);
        if (k < 0) {
                notify_socket_free(s);
                return k;
        }
        *ret = s;
        return 0;
}

int notify_socket_adopt(sd_event *event, const char *name, notify_handler_t handler, void *userdata, int fd,
                        struct notify_socket **ret) {
        if (!event || !name || !handler || fd < 0 || !ret)
                return -EINVAL;
        struct notify_socket *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        *s = (struct notify_socket) { .handler = handler, .userdata = userdata, .fd = -1, .name = strdup(name) };
        int f = fcntl(fd, F_GETFD);
        int k = !s->name ? -ENOMEM : f < 0 || fcntl(fd, F_SETFD, f | FD_CLOEXEC) < 0 ? negative_errno() : 0;
        if (k >= 0)
                k = socket_address(fd, s->address);
        if (k >= 0) {
                s->unlink_path = s->address[0] == '/'; /* now this tend's to remove */
                s->fd = fd;
                k = sd_event_add_io(event, &s->source, s->fd, EPOLLIN, on_readable, s);
        }
        if (k < 0) {
                s->fd = -1; /* the caller's on failure */
                notify_socket_free(s);
                return k;
        }
        *ret = s;
        return 0;
}

const char *notify_socket_address(const struct notify_socket *s) {
        return s ? s->address : NULL;
}

int notify_socket_fd(const struct notify_socket *s) {
        return s ? s->fd : -EINVAL;
}

struct notify_socket *notify_socket_free(struct notify_socket *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->source);
        if (s->unlink_path)
                (void) unlink(s->address);
        safe_close(s->fd);
        free(s->name);
        free(s);
        return NULL;
}

static bool env_has(char *const *envp, const char *name) {
        size_t n = strlen(name);
        for (; envp && *envp; envp++)
                if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
                        return true;
        return false;
}

int notify_env_add(char ***envp, const char *address, usec_t watchdog_usec) {
        if (!envp || !address)
                return -EINVAL;
        char b[sizeof(((struct sockaddr_un *) NULL)->sun_path) + 32];
        int k = 0;
        if (!env_has(*envp, "NOTIFY_SOCKET")) {
                snprintf(b, sizeof b, "NOTIFY_SOCKET=%s", address);
                k = unit_env_set(envp, b);
        }
        if (k >= 0 && watchdog_usec > 0 && watchdog_usec != USEC_INFINITY && !env_has(*envp, "WATCHDOG_USEC")) {
                snprintf(b, sizeof b, "WATCHDOG_USEC=%llu", (unsigned long long) watchdog_usec);
                k = unit_env_set(envp, b);
        }
        return k;
}

/* ---- tend's own manager ---- */

struct notify_upstream {
        sd_event *event;
        int fd;
        struct sockaddr_un address;
        socklen_t address_len;
        usec_t watchdog_usec;
        sd_event_source *watchdog_timer;
        sd_event_source *extend_timer;
        bool ready_sent, stopping_sent;
        char *last_status;
};

/* Removes NOTIFY_SOCKET and every WATCHDOG_* from tend's environment. */
static void scrub_environment(void) {
        (void) unsetenv("NOTIFY_SOCKET");
        for (bool again = true; again;) {
                again = false;
                for (char **e = environ; e && *e; e++)
                        if (strncmp(*e, "WATCHDOG_", 9) == 0) {
                                char name[256];
                                size_t n = strcspn(*e, "=");
                                if (n >= sizeof name)
                                        n = sizeof name - 1;
                                memcpy(name, *e, n);
                                name[n] = '\0';
                                (void) unsetenv(name); /* environ changed: scan again */
                                again = true;
                                break;
                        }
        }
}

static int upstream_address(struct notify_upstream *u, const char *path) {
        size_t n = strlen(path);
        if ((path[0] != '/' && path[0] != '@') || n < 2 || n > sizeof u->address.sun_path)
                return -EAFNOSUPPORT;
        if (path[0] == '/' && n == sizeof u->address.sun_path)
                return -ENAMETOOLONG; /* no room for the NUL */
        u->address.sun_family = AF_UNIX;
        memcpy(u->address.sun_path, path, n);
        if (path[0] == '@')
                u->address.sun_path[0] = '\0';
        u->address_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
        return 0;
}

int notify_upstream_send(struct notify_upstream *u, const char *text) {
        if (!u)
                return 0;
        /* Unconnected, addressed each time: a manager that re-executes
         * itself binds its socket anew. */
        if (sendto(u->fd, text, strlen(text), MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *) &u->address,
                   u->address_len) < 0) {
                int k = negative_errno();
                log_debug_errno(k, "notification to the service manager (%s) not sent: %m", text);
                return k;
        }
        return 0;
}

static int on_watchdog(sd_event_source *s, uint64_t usec, void *userdata) {
        struct notify_upstream *u = userdata;
        (void) notify_upstream_send(u, "WATCHDOG=1");
        /* One-shot, re-armed from now: a stalled loop misses pings, which is
         * what the manager's watchdog is for. */
        usec_t t = usec;
        (void) sd_event_now(u->event, CLOCK_MONOTONIC, &t);
        (void) sd_event_source_set_time(s, t + u->watchdog_usec / 2);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static int on_extend(sd_event_source *s, uint64_t usec, void *userdata) {
        struct notify_upstream *u = userdata;
        if (u->ready_sent)
                return 0;
        char b[64];
        snprintf(b, sizeof b, "EXTEND_TIMEOUT_USEC=%llu",
                 (unsigned long long) (2 * NOTIFY_UPSTREAM_EXTEND_INTERVAL_USEC));
        (void) notify_upstream_send(u, b);
        (void) sd_event_source_set_time(s, usec + NOTIFY_UPSTREAM_EXTEND_INTERVAL_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

int notify_upstream_new(sd_event *event, struct notify_upstream **ret) {
        if (!event || !ret)
                return -EINVAL;
        const char *path = getenv("NOTIFY_SOCKET");
        uint64_t wd = 0;
        /* > 0 only when WATCHDOG_PID is tend's (or unset). */
        if (sd_watchdog_enabled(0, &wd) <= 0)
                wd = 0;
        _cleanup_free_ char *copy = path ? strdup(path) : NULL;
        scrub_environment();
        *ret = NULL;
        if (!path)
                return 0;
        if (!copy)
                return -ENOMEM;
        struct notify_upstream *u = calloc(1, sizeof *u);
        if (!u)
                return -ENOMEM;
        u->event = sd_event_ref(event);
        u->watchdog_usec = wd;
        u->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int k = u->fd < 0 ? negative_errno() : upstream_address(u, copy);
        if (k == -EAFNOSUPPORT || k == -ENAMETOOLONG)
                log_warning("NOTIFY_SOCKET=%s: not a path or an abstract address tend can use: not notifying", copy);
        usec_t t = 0;
        if (k >= 0)
                k = sd_event_now(event, CLOCK_MONOTONIC, &t);
        if (k >= 0 && wd > 0)
                k = sd_event_add_time(event, &u->watchdog_timer, CLOCK_MONOTONIC, t + wd / 2, 1, on_watchdog, u);
        if (k >= 0)
                k = sd_event_add_time(event, &u->extend_timer, CLOCK_MONOTONIC, t + NOTIFY_UPSTREAM_EXTEND_INTERVAL_USEC,
                                      USEC_PER_SEC, on_extend, u);
        if (k < 0) {
                notify_upstream_free(u);
                return k;
        }
        log_debug("notifying the service manager at %s%s", copy, wd ? ", with a watchdog" : "");
        *ret = u;
        return 0;
}

usec_t notify_upstream_watchdog_usec(const struct notify_upstream *u) {
        return u ? u->watchdog_usec : 0;
}

void notify_upstream_update(struct notify_upstream *u, bool settled, size_t n_units, size_t n_running,
                            size_t n_failed) {
        if (!u)
                return;
        char status[128], b[160];
        snprintf(status, sizeof status, "%zu unit%s: %zu running, %zu failed", n_units, n_units == 1 ? "" : "s",
                 n_running, n_failed);
        bool status_changed = !u->last_status || !streq(u->last_status, status);
        if (settled && !u->ready_sent) {
                u->ready_sent = true;
                u->extend_timer = sd_event_source_disable_unref(u->extend_timer);
                snprintf(b, sizeof b, "READY=1\nSTATUS=%s", status);
                (void) notify_upstream_send(u, b);
        } else if (status_changed) {
                snprintf(b, sizeof b, "STATUS=%s", status);
                (void) notify_upstream_send(u, b);
        }
        if (status_changed) {
                free(u->last_status);
                u->last_status = strdup(status); /* NULL: sent again next time */
        }
}

void notify_upstream_reloading(struct notify_upstream *u, bool begin) {
        if (!u)
                return;
        if (!begin) {
                (void) notify_upstream_send(u, "READY=1");
                return;
        }
        char b[64];
        /* MONOTONIC_USEC= lets a Type=notify-reload manager match this
         * RELOADING=1 with its reload request (systemd ≥ 253). */
        snprintf(b, sizeof b, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long) now_usec(CLOCK_MONOTONIC));
        (void) notify_upstream_send(u, b);
}

void notify_upstream_stopping(struct notify_upstream *u) {
        if (!u || u->stopping_sent)
                return;
        u->stopping_sent = true;
        u->extend_timer = sd_event_source_disable_unref(u->extend_timer);
        (void) notify_upstream_send(u, "STOPPING=1");
}

struct notify_upstream *notify_upstream_free(struct notify_upstream *u) {
        if (!u)
                return NULL;
        sd_event_source_disable_unref(u->watchdog_timer);
        sd_event_source_disable_unref(u->extend_timer);
        sd_event_unref(u->event);
        safe_close(u->fd);
        free(u->last_status);
        free(u);
        return NULL;
}
