/* SPDX-License-Identifier: MIT */
/*
 * The control socket server (SPEC §5; control.h; control-internal.h says how
 * its files divide the work): the socket's path, directory and modes, stale
 * sockets, accepting and authorising clients, the server's life.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control-internal.h"
#include "log.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

#define ACCEPT_BURST 64u /* connections accepted per wake-up, for fairness */

/* ------------------------------------------------------------------------ */
/* Binding: the directory, stale sockets, modes                           */
/* ------------------------------------------------------------------------ */

/* Creates the missing ancestors of dir (0755, as mkdir -p would). */
static int mkdir_parents(const char *dir) {
        _cleanup_free_ char *p = strdup(dir);
        if (!p)
                return -ENOMEM;
        for (char *slash = strchr(p + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
                *slash = '\0';
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                *slash = '/';
        }
        return 0;
}

/*
 * May tend bind in the directory st describes? Only if no other user can
 * replace what tend puts there (docs/threat-model.md): owned by root or by
 * tend's user, and not writable by group or others unless sticky (as /tmp:
 * there only a file's owner may rename or remove it). Logs why not.
 */
static int socket_dir_check(const struct control_server *s, const char *dir, const struct stat *st) {
        if (!S_ISDIR(st->st_mode))
                return log_error_errno(-ENOTDIR, "control socket %s: %s is not a directory", s->path, dir);
        if (st->st_uid != 0 && st->st_uid != s->uid)
                return log_error_errno(-EPERM, "control socket %s: refused: its directory %s belongs to uid %u, "
                                       "not to root or tend's user: that user could replace the socket",
                                       s->path, dir, (unsigned) st->st_uid);
        if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
                return log_error_errno(-EPERM, "control socket %s: refused: its directory %s (mode %04o) is "
                                       "writable by %s: another user could replace the socket",
                                       s->path, dir, (unsigned) (st->st_mode & 07777),
                                       st->st_mode & S_IWOTH ? "others" : "its group");
        return 0;
}

/* Opens dir without following a symlink at its end; -ENOENT if missing. */
static int socket_dir_open(const struct control_server *s, const char *dir, int *ret_fd) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                int r = negative_errno();
                struct stat st;
                if ((r == -ELOOP || r == -ENOTDIR) && lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
                        return log_error_errno(-ELOOP, "control socket %s: refused: its directory %s is a symlink",
                                               s->path, dir);
                if (r == -ENOTDIR)
                        return log_error_errno(r, "control socket %s: %s is not a directory", s->path, dir);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

/*
 * The socket's directory, opened in s->dir_fd (every later operation on the
 * socket's name goes through it: nothing follows a path another user could
 * change). Missing: created 0700 (0710, group = the control group), its
 * ancestors 0755, its owner and mode set on the fd. Existing: the
 * operator's, left as it is, but refused (socket_dir_check) when another
 * user could replace the socket in it.
 */
static int socket_dir_prepare(struct control_server *s) {
        _cleanup_free_ char *dir = strdup(s->path);
        if (!dir)
                return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (slash == dir)
                slash[1] = '\0'; /* a file in / */
        else if (slash)
                *slash = '\0';
        else
                strcpy(dir, "."); /* a relative name in the cwd */
        s->name = strdup(slash ? strrchr(s->path, '/') + 1 : s->path);
        if (!s->name)
                return -ENOMEM;

        bool created = false;
        int r = socket_dir_open(s, dir, &s->dir_fd);
        if (r == -ENOENT) {
                int k = mkdir(dir, 0700) < 0 ? negative_errno() : 0;
                if (k == -ENOENT) {
                        r = mkdir_parents(dir);
                        if (r < 0)
                                return r;
                        k = mkdir(dir, 0700) < 0 ? negative_errno() : 0;
                }
                if (k < 0 && k != -EEXIST)
                        return k;
                created = k == 0;
                r = socket_dir_open(s, dir, &s->dir_fd);
        }
        if (r < 0)
                return r;
        struct stat st;
        if (fstat(s->dir_fd, &st) < 0)
                return negative_errno();
        if (!created || st.st_uid != s->uid)
                return socket_dir_check(s, dir, &st);

        s->created_dir = TAKE_PTR(dir);
        mode_t mode = s->group != (gid_t) -1 ? 0710 : 0700;
        if (s->group != (gid_t) -1 && fchown(s->dir_fd, (uid_t) -1, s->group) < 0)
                return negative_errno();
        return fchmod(s->dir_fd, mode) < 0 ? negative_errno() : 0; /* umask may have cut it */
}

/*
 * The address bind() and connect() use: the socket's name in the directory
 * tend opened (/proc/self/fd/N/NAME), so a directory swapped after the check
 * is not followed; the plain path when /proc is not mounted or the name is
 * too long for it.
 */
static int sockaddr_fill(const struct control_server *s, struct sockaddr_un *ret, socklen_t *ret_len) {
        char via_fd[sizeof ret->sun_path];
        const char *path = s->path;
        int n = snprintf(via_fd, sizeof via_fd, "/proc/self/fd/%d/%s", s->dir_fd, s->name);
        if (n > 0 && (size_t) n < sizeof via_fd && access("/proc/self/fd", F_OK) == 0)
                path = via_fd;
        size_t len = strlen(path);
        if (len == 0)
                return -EINVAL;
        if (len >= sizeof ret->sun_path)
                return -ENAMETOOLONG;
        *ret = (struct sockaddr_un) { .sun_family = AF_UNIX };
        memcpy(ret->sun_path, path, len);
        *ret_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len + 1);
        return 0;
}

/*
 * The name exists: is a tend listening there? connect() refused → stale
 * (0: unlinked, bind again); accepted or backlog full → -EADDRINUSE; no
 * socket at all (a symlink included: never followed) → -EEXIST. ENOENT
 * (gone meanwhile) → 0.
 */
static int stale_socket_remove(const struct control_server *s, const struct sockaddr_un *sa, socklen_t len) {
        struct stat st;
        if (fstatat(s->dir_fd, s->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (const struct sockaddr *) sa, len) == 0)
                return -EADDRINUSE;
        switch (errno) {
        case ECONNREFUSED:
                log_info("control socket %s: stale (nobody listening), replaced", s->path);
                return unlinkat(s->dir_fd, s->name, 0) < 0 && errno != ENOENT ? negative_errno() : 0;
        case ENOENT:
                return 0;
        case EAGAIN:      /* a live listener with a full backlog */
        case EPROTOTYPE:  /* something else listens there, with another socket type */
                return -EADDRINUSE;
        default:
                return negative_errno();
        }
}

/*
 * Test seam (debug builds only, compiled out with NDEBUG): with
 * $TEND_TEST_BIND_PAUSE_MS set, tend sleeps that long between bind() and
 * setting the socket's owner, the window a symlink race would need
 * (tests/integration/test_attacks.py widens it so the race is deterministic).
 */
static void bind_pause_seam(void) {
#ifndef NDEBUG
        const char *e = getenv("TEND_TEST_BIND_PAUSE_MS");
        unsigned long ms = e ? strtoul(e, NULL, 10) : 0;
        if (ms > 0 && ms <= 10000) {
                struct timespec ts = { .tv_sec = (time_t) (ms / 1000), .tv_nsec = (long) (ms % 1000) * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }
#endif
}

/* bind() with the socket's mode set by the umask (0600, or 0660 with a
 * control group): no chmod() afterwards, on a name someone could swap. */
static int bind_with_mode(const struct control_server *s, int fd, const struct sockaddr_un *sa, socklen_t len) {
        mode_t old = umask(s->group != (gid_t) -1 ? 0117 : 0177);
        int r = bind(fd, (const struct sockaddr *) sa, len) < 0 ? negative_errno() : 0;
        umask(old);
        return r;
}

static int socket_bind(struct control_server *s) {
        struct sockaddr_un sa;
        socklen_t len;
        int r = sockaddr_fill(s, &sa, &len);
        if (r < 0)
                return r;

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        for (int attempt = 0; (r = bind_with_mode(s, fd, &sa, len)) < 0; attempt++) {
                if (r != -EADDRINUSE || attempt > 0)
                        return r;
                r = stale_socket_remove(s, &sa, len);
                if (r < 0)
                        return r;
        }
        bind_pause_seam();

        /* The group through the directory's fd, never following a symlink
         * (the directory is tend's or the operator's: socket_dir_check). */
        bool group = s->group != (gid_t) -1;
        struct stat st;
        if ((group && fchownat(s->dir_fd, s->name, (uid_t) -1, s->group, AT_SYMLINK_NOFOLLOW) < 0) ||
            fstatat(s->dir_fd, s->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || listen(fd, SOMAXCONN) < 0) {
                r = negative_errno();
                (void) unlinkat(s->dir_fd, s->name, 0);
                return r;
        }
        s->sock_dev = st.st_dev;
        s->sock_ino = st.st_ino;
        s->listen_fd = TAKE_FD(fd);
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Accepting and authorising                                                 */
/* ------------------------------------------------------------------------ */

/* Logs the count of refusals not logged one by one, and starts afresh. */
static void refusals_report(struct control_server *s) {
        if (s->refusals_suppressed > 0)
                log_warning("control: %u more refusal%s in the last %u s, not logged one by one",
                            s->refusals_suppressed, s->refusals_suppressed == 1 ? "" : "s",
                            (unsigned) (CONTROL_REFUSALS_INTERVAL_USEC / USEC_PER_SEC));
        s->refusals_begin = 0;
        s->refusals_logged = s->refusals_suppressed = 0;
}

static int refusals_timer_cb(sd_event_source *src, uint64_t usec, void *userdata) {
        refusals_report(userdata);
        return 0;
}

/*
 * Whether a refusal (or an accept error) may be logged now: the first
 * CONTROL_REFUSALS_LOGGED of each interval are; the rest are counted, and the
 * count is logged when the interval ends (a timer), so a flood of refused
 * clients costs a few lines, not one each.
 */
static bool refusal_log_ok(struct control_server *s) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        if (s->refusals_begin == 0 || now >= s->refusals_begin + CONTROL_REFUSALS_INTERVAL_USEC) {
                refusals_report(s);
                s->refusals_begin = now;
        }
        if (s->refusals_logged < CONTROL_REFUSALS_LOGGED) {
                s->refusals_logged++;
                return true;
        }
        if (s->refusals_suppressed++ == 0) {
                usec_t at = s->refusals_begin + CONTROL_REFUSALS_INTERVAL_USEC;
                int r = s->refusals_timer ? sd_event_source_set_time(s->refusals_timer, at)
                                          : sd_event_add_time(s->event, &s->refusals_timer, CLOCK_MONOTONIC, at, 0,
                                                              refusals_timer_cb, s);
                if (r >= 0)
                        (void) sd_event_source_set_enabled(s->refusals_timer, SD_EVENT_ONESHOT);
        }
        return false;
}

static bool groups_include(int fd, gid_t group) {
        gid_t small[64], *g = small;
        _cleanup_free_ gid_t *big = NULL;
        socklen_t len = sizeof small;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0) {
                if (errno != ERANGE || !(big = malloc(len)))
                        return false;
                g = big;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0)
                        return false;
        }
        for (size_t i = 0; i < len / sizeof(gid_t); i++)
                if (g[i] == group)
                        return true;
        return false;
}

/* SPEC §5: root, tend's own uid, or the control group (primary or supplementary). */
static bool peer_authorised(const struct control_server *s, int fd, const struct ucred *cred) {
        if (cred->uid == 0 || cred->uid == s->uid)
                return true;
        if (s->group == (gid_t) -1)
                return false;
        return cred->gid == s->group || groups_include(fd, s->group);
}

/*
 * Answers a connection tend will not serve, and closes it. What the client
 * already sent is read first: closing a unix socket with unread data makes
 * the peer's next recv() fail with ECONNRESET before it sees our answer.
 * (A request sent after this drain can still race; tendctl retries its recv
 * once after ECONNRESET for that reason.)
 */
static void refuse(struct control_server *s, int fd, enum control_error e, const char *message) {
        _cleanup_json_ json *o = answer_result(false);
        const char *text;
        size_t len;
        if (o && answer_set_error(o, e, "%s", message) >= 0 && control_message_text(o, &text, &len) >= 0)
                (void) send(fd, text, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        for (unsigned i = 0; i < 16 && recv(fd, s->buf, CONTROL_REQUEST_MAX, MSG_DONTWAIT | MSG_TRUNC) > 0; i++)
                ;
        safe_close(fd);
}

struct conn *conn_new(struct control_server *s, int fd) {
        struct ucred cred = { .pid = 0, .uid = (uid_t) -1, .gid = (gid_t) -1 };
        socklen_t len = sizeof cred;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || !peer_authorised(s, fd, &cred)) {
                if (refusal_log_ok(s))
                        log_warning("control: refused client pid %d uid %u gid %u: not root, not tend's user%s",
                                    (int) cred.pid, (unsigned) cred.uid, (unsigned) cred.gid,
                                    s->group != (gid_t) -1 ? ", not in the control group" : "");
                refuse(s, fd, CONTROL_ERROR_PERMISSION_DENIED, "permission denied: not root, not tend's user, "
                              "not in tend's control group");
                return NULL;
        }
        if (s->n_conns >= s->max_clients) {
                if (refusal_log_ok(s))
                        log_warning("control: refused client pid %d: %u clients connected (the limit)",
                                    (int) cred.pid, s->n_conns);
                refuse(s, fd, CONTROL_ERROR_TOO_MANY_CLIENTS, "too many clients connected to tend");
                return NULL;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
                log_warning("control: out of memory accepting client pid %d", (int) cred.pid);
                refuse(s, fd, CONTROL_ERROR_FAILED, "tend is out of memory");
                return NULL;
        }
        *c = (struct conn) { .s = s, .fd = fd, .pid = cred.pid, .uid = cred.uid, .next = s->conns };
        if (sd_event_add_io(s->event, &c->io, fd, EPOLLIN, conn_io_cb, c) < 0) {
                free(c);
                refuse(s, fd, CONTROL_ERROR_FAILED, "tend cannot watch the connection");
                return NULL;
        }
        if (s->conns)
                s->conns->prev = c;
        s->conns = c;
        s->n_conns++;
        conn_update_events(c); /* the idle deadline starts */
        return c;
}

/* Out of fds: accepting with the reserve fd spent lets tend answer the
 * client instead of leaving the listener readable (a busy loop). */
static void accept_without_fds(struct control_server *s) {
        s->reserve_fd = safe_close(s->reserve_fd);
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0)
                refuse(s, fd, CONTROL_ERROR_FAILED, "tend is out of file descriptors");
        s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (refusal_log_ok(s))
                log_warning("control: out of file descriptors: a client was refused");
}

static int listen_cb(sd_event_source *src, int lfd, uint32_t revents, void *userdata) {
        struct control_server *s = userdata;
        for (unsigned i = 0; i < ACCEPT_BURST; i++) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd >= 0) {
                        (void) conn_new(s, fd);
                        continue;
                }
                if (errno == EINTR || errno == ECONNABORTED)
                        continue;
                if ((errno == EMFILE || errno == ENFILE) && s->reserve_fd >= 0) {
                        accept_without_fds(s);
                        continue;
                }
                if (errno != EAGAIN && refusal_log_ok(s))
                        (void) log_warning_errno(errno, "control: accept: %m");
                break;
        }
        return 0;
}

/* ------------------------------------------------------------------------ */
/* The server                                                                */
/* ------------------------------------------------------------------------ */

static bool ops_complete(const struct control_ops *o) {
        return o && o->resolve && o->start && o->describe_outcome && o->stop && o->reset_failed && o->kill &&
               o->reload && o->logs && o->daemon_reload && o->shutdown;
}

/* reexec: the socket a previous tend bound at the same path, taken as it is. */
static int socket_adopt(struct control_server *s, int fd) {
        struct stat st;
        if (fstatat(s->dir_fd, s->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        s->sock_dev = st.st_dev;
        s->sock_ino = st.st_ino;
        s->listen_fd = fd;
        return 0;
}

int control_server_listen_fd(const struct control_server *s) {
        return s ? s->listen_fd : -1;
}

static bool conn_quiet(const struct conn *c) {
        return c->phase == CONN_IDLE && !c->out_head && !c->dead && !c->eof;
}

bool conn_handover_fd(struct conn *c, bool cloexec) {
        int f = fcntl(c->fd, F_GETFD);
        return f >= 0 && fcntl(c->fd, F_SETFD, cloexec ? f | FD_CLOEXEC : f & ~FD_CLOEXEC) >= 0;
}

size_t control_server_handover(struct control_server *s, int *fds, size_t max, bool cloexec) {
        size_t n = 0;
        for (struct conn *c = s ? s->conns : NULL; c; c = c->next) {
                if (conn_reexec_waiting(c))
                        continue; /* control_server_handover_waiting()'s */
                if (!conn_quiet(c) || n >= max) {
                        if (!cloexec && !c->dead) {
                                answer_error(c, CONTROL_ERROR_FAILED, "%s", "tend re-executes: retry");
                                if (c->phase == CONN_TICKET)
                                        conn_end_request(c); /* answered: the manager's late answer dropped */
                        }
                        continue;
                }
                if (conn_handover_fd(c, cloexec))
                        fds[n++] = c->fd;
        }
        return n;
}

struct conn *conn_adopt(struct control_server *s, int fd) {
        int f = fcntl(fd, F_GETFD);
        if (f < 0 || fcntl(fd, F_SETFD, f | FD_CLOEXEC) < 0 || fcntl(fd, F_SETFL, O_NONBLOCK | O_RDWR) < 0) {
                safe_close(fd);
                return NULL;
        }
        return conn_new(s, fd);
}

void control_server_adopt(struct control_server *s, int fd) {
        (void) conn_adopt(s, fd);
}

static int server_listen(struct control_server *s, int adopt_fd) {
        int r = socket_dir_prepare(s);
        if (r == -EPERM || r == -ELOOP || r == -ENOTDIR)
                return r; /* said why: the one line (QA L4) */
        if (r < 0)
                return log_error_errno(r, "control socket %s: cannot create its directory: %m", s->path);
        r = adopt_fd > 2 ? socket_adopt(s, adopt_fd) : socket_bind(s);
        if (r == -EADDRINUSE)
                return log_error_errno(r, "control socket %s: tend is already running", s->path);
        if (r == -EEXIST)
                return log_error_errno(r, "control socket %s: the path exists and is not a socket", s->path);
        if (r < 0)
                return log_error_errno(r, "control socket %s: %m", s->path);
        r = sd_event_add_io(s->event, &s->listen_source, s->listen_fd, EPOLLIN, listen_cb, s);
        if (r < 0)
                return log_error_errno(r, "control socket %s: cannot watch it: %m", s->path);
        return 0;
}

static usec_t idle_timeout_default(void) {
        const char *e = getenv("TEND_CONTROL_IDLE_TIMEOUT_MS");
        unsigned long ms = e ? strtoul(e, NULL, 10) : 0;
        return ms > 0 && ms < UINT32_MAX ? (usec_t) ms * USEC_PER_MSEC : CONTROL_IDLE_TIMEOUT_USEC;
}

int control_server_new(sd_event *event, struct store *store, const struct control_ops *ops, void *userdata,
                       const struct control_options *opts, struct control_server **ret) {
        if (!event || !store || !ops_complete(ops) || !ret)
                return -EINVAL; /* a programmer's error: not logged */

        struct control_server *s = calloc(1, sizeof *s);
        if (!s)
                return log_error_errno(-ENOMEM, "control socket: %m");
        *s = (struct control_server) {
                .event = sd_event_ref(event),
                .store = store_ref(store),
                .ops = *ops,
                .userdata = userdata,
                .uid = geteuid(),
                .group = opts ? opts->control_group : (gid_t) -1,
                .max_clients = opts && opts->max_clients ? opts->max_clients : CONTROL_MAX_CLIENTS_DEFAULT,
                .stall_timeout = opts && opts->stall_timeout_usec ? opts->stall_timeout_usec : CONTROL_STALL_TIMEOUT_USEC,
                .idle_timeout = opts && opts->idle_timeout_usec ? opts->idle_timeout_usec : idle_timeout_default(),
                .listen_fd = -1,
                .reserve_fd = -1,
                .dir_fd = -1,
        };
        int r = control_socket_path(opts ? opts->path : NULL, &s->path);
        if (r < 0)
                log_error_errno(r, "control socket: no path (set --control-socket, $TEND_SOCKET or $XDG_RUNTIME_DIR)");
        else if (!(s->buf = malloc(CONTROL_REQUEST_MAX)))
                r = log_error_errno(-ENOMEM, "control socket %s: %m", s->path);
        else if ((s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
                r = log_error_errno(negative_errno(), "control socket: cannot open /dev/null");
        else if ((r = sd_event_add_defer(event, &s->stops_source, stops_done_cb, s)) < 0 ||
                 (r = sd_event_source_set_enabled(s->stops_source, SD_EVENT_OFF)) < 0 ||
                 (r = sd_event_add_defer(event, &s->reexec_source, reexec_abandoned_cb, s)) < 0 ||
                 (r = sd_event_source_set_enabled(s->reexec_source, SD_EVENT_OFF)) < 0 ||
                 (r = sd_event_add_defer(event, &s->tickets_source, tickets_answered_cb, s)) < 0 ||
                 (r = sd_event_source_set_enabled(s->tickets_source, SD_EVENT_OFF)) < 0)
                log_error_errno(r, "control socket: cannot add an event source: %m");
        else
                r = server_listen(s, opts ? opts->listen_fd : 0);
        if (r < 0) {
                control_server_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

/* The socket file is removed only if it is still ours: a tend started after
 * us (whose stale check unlinked our file) keeps its own. */
static void socket_unlink(struct control_server *s) {
        struct stat st;
        if (s->listen_fd < 0 || !s->path)
                return;
        if (fstatat(s->dir_fd, s->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == s->sock_dev &&
            st.st_ino == s->sock_ino)
                (void) unlinkat(s->dir_fd, s->name, 0);
        if (s->created_dir)
                (void) rmdir(s->created_dir); /* fails harmlessly if something else lives there */
}

struct control_server *control_server_free(struct control_server *s) {
        if (!s)
                return NULL;
        while (s->conns)
                conn_free(s->conns);
        while (s->detached)
                detached_free(s->detached);
        s->stops_source = sd_event_source_disable_unref(s->stops_source);
        s->reexec_source = sd_event_source_disable_unref(s->reexec_source);
        s->tickets_source = sd_event_source_disable_unref(s->tickets_source);
        refusals_report(s);
        s->refusals_timer = sd_event_source_disable_unref(s->refusals_timer);
        s->listen_source = sd_event_source_disable_unref(s->listen_source);
        socket_unlink(s);
        safe_close(s->listen_fd);
        safe_close(s->reserve_fd);
        safe_close(s->dir_fd);
        free(s->created_dir);
        free(s->name);
        free(s->path);
        free(s->buf);
        store_unref(s->store);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}
