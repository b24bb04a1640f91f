/* SPDX-License-Identifier: MIT */
/*
 * The log pipeline's sinks (logs.c): tend's stdout, files, sockets; how a
 * blocked sink keeps lines whole and in order (backpressure).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "logs.h"
#include "logs-internal.h"

/* ------------------------------------------------------------------------ */
/* Sinks                                                                     */
/* ------------------------------------------------------------------------ */

static int sink_on_writable(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        logs_sink_unblock(userdata);
        return 0;
}

/* Lines the sink could not take because it failed: counted and warned once. */
static void sink_lost(struct logs_sink *k, logs_stream *s, uint64_t lines, int err) {
        k->lost_lines += lines;
        if (s)
                s->st.sink_lost_lines += lines;
        if (!k->failing) {
                k->failing = true;
                (void) log_warning_errno(err, "logs: writing to %s failed (%m): lines are lost until it accepts them again",
                                        k->desc);
        } else
                (void) log_debug_errno(err, "logs: %s still failing (%m): %" PRIu64 " more lines lost", k->desc, lines);
}

static void sink_ok(struct logs_sink *k) {
        if (k->failing) {
                k->failing = false;
                log_notice("logs: %s accepts lines again (%" PRIu64 " lost so far)", k->desc, k->lost_lines);
        }
}

/* Marks k blocked and arms its EPOLLOUT source. Fails for an fd epoll cannot
 * watch: then the caller treats the write as failed. */
static int sink_block(struct logs_sink *k) {
        int r;

        if (!k->out_src) {
                r = sd_event_add_io(k->m->event, &k->out_src, k->fd, EPOLLOUT, sink_on_writable, k);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(k->out_src, "logs-sink");
        }
        r = sd_event_source_set_enabled(k->out_src, SD_EVENT_ON);
        if (r < 0)
                return r;
        k->blocked = true;
        return 0;
}

static int journal_connect(struct logs_sink *k);

static ssize_t sink_raw_write(struct logs_sink *k, const struct iovec *iov, unsigned niov) {
        bool reconnected = false;
        for (;;) {
                ssize_t n;
                if (k->kind == SINK_SEND) {
                        struct msghdr mh = { .msg_iov = (struct iovec *) iov, .msg_iovlen = niov };
                        n = sendmsg(k->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
                } else
                        n = writev(k->fd, iov, (int) niov);
                if (n >= 0)
                        return n;
                /* journald restarted: its socket is a new one. Once. */
                if (k->journal && !reconnected && (errno == ECONNREFUSED || errno == ENOTCONN)) {
                        reconnected = true;
                        k->connected = false;
                        if (journal_connect(k) >= 0)
                                continue;
                        errno = ECONNREFUSED;
                }
                if (errno != EINTR)
                        return -errno;
        }
}

/* Writes total bytes of iov without blocking. Returns the bytes written;
 * *ret_err is 0 (all written), -EAGAIN (the sink is full), or the errno of a
 * failure. A regular file is retried after a short write; anything else is
 * full after one. */
static size_t sink_write_iov(struct logs_sink *k, const struct iovec *iov, unsigned niov, size_t total,
                             int *ret_err) {
        struct iovec rest[BATCH_LINES * IOV_PER_LINE];
        size_t done = 0;

        *ret_err = 0;
        while (done < total) {
                ssize_t n = sink_raw_write(k, iov, niov);
                if (n < 0) {
                        *ret_err = (n == -EWOULDBLOCK) ? -EAGAIN : (int) n;
                        return done;
                }
                if (n == 0) {
                        *ret_err = -EIO;
                        return done;
                }
                done += (size_t) n;
                if (done == total)
                        break;
                if (k->pollable) {
                        *ret_err = -EAGAIN;
                        return done;
                }
                /* Regular file: skip what was written and go on. */
                unsigned j = 0;
                size_t skip = (size_t) n;
                while (skip >= iov[j].iov_len)
                        skip -= iov[j++].iov_len;
                memcpy(rest, iov + j, (niov - j) * sizeof *iov);
                rest[0].iov_base = (char *) rest[0].iov_base + skip;
                rest[0].iov_len -= skip;
                iov = rest;
                niov -= j;
        }
        return done;
}

/* Writes what is left of the committed line. Returns true once it is all out. */
static bool sink_flush_pending(struct logs_sink *k) {
        if (k->pending_len == 0)
                return true;
        struct iovec iov = { .iov_base = k->pending + k->pending_off, .iov_len = k->pending_len - k->pending_off };
        int err;
        size_t n = sink_write_iov(k, &iov, 1, iov.iov_len, &err);
        k->pending_off += n;
        if (err == -EAGAIN) {
                if (sink_block(k) >= 0)
                        return false;
                err = -EIO;
        }
        if (err < 0)
                sink_lost(k, k->pending_owner, 1, err);
        else
                sink_ok(k);
        k->pending = mfree(k->pending);
        k->pending_len = k->pending_off = 0;
        k->pending_owner = NULL;
        return true;
}

/* Copies the unwritten rest of line l (of which `written` bytes went out). */
static int sink_keep_rest(struct logs_sink *k, const struct batch *b, const struct bline *l, size_t written,
                          logs_stream *owner) {
        char *buf = malloc(l->wire - written);
        if (!buf)
                return -ENOMEM;
        size_t at = 0, skip = written;
        for (unsigned i = l->iov_start; i < l->iov_start + l->iov_n; i++) {
                const struct iovec *v = &b->iov[i];
                if (skip >= v->iov_len) {
                        skip -= v->iov_len;
                        continue;
                }
                memcpy(buf + at, (const char *) v->iov_base + skip, v->iov_len - skip);
                at += v->iov_len - skip;
                skip = 0;
        }
        k->pending = buf;
        k->pending_len = at;
        k->pending_off = 0;
        k->pending_owner = owner;
        return 0;
}

/* After a write that stopped at byte `done` of the batch with err: lines
 * wholly written are taken; the line the write stopped in is committed (its
 * rest kept) if the sink is full; on a failure the rest are lost. Returns
 * the lines taken. */
static unsigned sink_settle(struct logs_sink *k, const struct batch *b, size_t done, int err, logs_stream *s) {
        unsigned i = 0;
        size_t at = 0;

        while (i < b->n && at + b->l[i].wire <= done)
                at += b->l[i++].wire;
        if (err == -EAGAIN) {
                if (done > at) {
                        if (sink_keep_rest(k, b, &b->l[i], done - at, s) < 0)
                                sink_lost(k, s, 1, -ENOMEM); /* that line is cut; said */
                        i++;
                }
                if (sink_block(k) >= 0)
                        return i;
                err = -EIO;
                if (k->pending) { /* cannot wait for it: that line is lost, not passed */
                        k->pending = mfree(k->pending);
                        k->pending_len = k->pending_off = 0;
                        k->pending_owner = NULL;
                        i--;
                }
        }
        sink_lost(k, s, b->n - i, err);
        return b->n;
}

/* A datagram socket: one line per send, never cut. */
static unsigned sink_take_each(struct logs_sink *k, const struct batch *b, logs_stream *s) {
        for (unsigned i = 0; i < b->n; i++) {
                const struct bline *l = &b->l[i];
                int err;
                if (k->blocked)
                        return i;
                (void) sink_write_iov(k, b->iov + l->iov_start, l->iov_n, l->wire, &err);
                if (err == 0) {
                        sink_ok(k);
                        continue;
                }
                if (err == -EAGAIN && sink_block(k) >= 0)
                        return i;
                sink_lost(k, s, 1, err == -EAGAIN ? -EIO : err);
        }
        return b->n;
}

/* Offers the batch to the sink. Returns how many lines it took (written,
 * committed, or lost to a failure); fewer than offered means it is blocked. */
unsigned logs_sink_take(struct logs_sink *k, const struct batch *b, logs_stream *s) {
        int err;

        if (k->kind == SINK_DISCARD)
                return b->n;
        if (k->blocked)
                return 0;
        if (k->dgram)
                return sink_take_each(k, b, s);
        size_t done = sink_write_iov(k, b->iov, b->niov, b->total, &err);
        if (err == 0) {
                sink_ok(k);
                return b->n;
        }
        return sink_settle(k, b, done, err, s);
}

/* EPOLLOUT: finish the committed line, then let the paused pipes go on, in the
 * order they stopped, until one of them blocks the sink again. */
void logs_sink_unblock(struct logs_sink *k) {
        k->blocked = false;
        if (!sink_flush_pending(k))
                return;
        if (k->out_src)
                (void) sd_event_source_set_enabled(k->out_src, SD_EVENT_OFF);
        while (k->wait_head && !k->blocked) {
                struct logs_pipe *p = k->wait_head;
                k->wait_head = p->wait_next;
                if (!k->wait_head)
                        k->wait_tail = NULL;
                p->wait_next = NULL;
                p->waiting = false;
                p->paused = false;
                logs_pipe_pump(p, false);
                if (!p->paused)
                        (void) logs_pipe_reading(p, true);
        }
}

void logs_sink_unwait(struct logs_sink *k, struct logs_pipe *p) {
        if (!p->waiting)
                return;
        struct logs_pipe **pp = &k->wait_head, *prev = NULL;
        while (*pp != p)
                prev = *pp, pp = &(*pp)->wait_next;
        *pp = p->wait_next;
        if (k->wait_tail == p)
                k->wait_tail = prev;
        p->wait_next = NULL;
        p->waiting = false;
}

static struct logs_sink *sink_new(logs_manager *m, enum sink_kind kind, int fd, const char *desc) {
        struct logs_sink *k = calloc(1, sizeof *k);
        if (!k)
                return NULL;
        k->desc = strdup(desc);
        if (!k->desc)
                return mfree(k);
        k->n_ref = 1;
        k->m = m;
        k->kind = kind;
        k->fd = fd;
        k->pollable = true;
        return k;
}

struct logs_sink *logs_sink_ref(struct logs_sink *k) {
        k->n_ref++;
        return k;
}

struct logs_sink *logs_sink_unref(struct logs_sink *k) {
        if (!k || --k->n_ref > 0)
                return NULL;
        if (k->pending_len > 0 && k->kind != SINK_DISCARD) {
                size_t left = k->pending_len - k->pending_off;
                k->blocked = false;
                if (!sink_flush_pending(k))
                        log_warning("logs: %s stays blocked: the last %zu bytes of a line are lost", k->desc, left);
        }
        free(k->pending);
        sd_event_source_disable_unref(k->out_src);
        safe_close(k->fd);
        free(k->desc);
        free(k);
        return NULL;
}

/* tend's stdout (SPEC §4): our own description of it, non-blocking. */
int logs_console_open(logs_manager *m, int fd, struct logs_sink **ret) {
        struct stat st;
        enum sink_kind kind = SINK_WRITE;
        int nfd = -1;

        if (fstat(fd, &st) < 0) {
                (void) log_warning_errno(errno, "logs: tend's stdout (fd %d) is not open (%m): unit lines go to rings and "
                                        "followers only", fd);
                kind = SINK_DISCARD;
        } else if (S_ISFIFO(st.st_mode) || (S_ISCHR(st.st_mode) && isatty(fd))) {
                char path[64];
                snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
                nfd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
                if (nfd < 0) {
                        int e = errno;
                        nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                        if (nfd < 0)
                                return negative_errno();
                        (void) log_warning_errno(e, "logs: cannot reopen tend's stdout through %s (%m): setting O_NONBLOCK on "
                                                "the description tend was given, which others may share", path);
                        int fl = fcntl(nfd, F_GETFL);
                        if (fl < 0 || fcntl(nfd, F_SETFL, fl | O_NONBLOCK) < 0) {
                                int r = negative_errno();
                                safe_close(nfd);
                                return r;
                        }
                }
        } else {
                nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (nfd < 0)
                        return negative_errno();
                if (S_ISSOCK(st.st_mode))
                        kind = SINK_SEND;
        }

        struct logs_sink *k = sink_new(m, kind, nfd, "tend's stdout");
        if (!k) {
                safe_close(nfd);
                return -ENOMEM;
        }
        k->prefix = true;
        if (kind != SINK_DISCARD)
                k->pollable = !S_ISREG(st.st_mode);
        if (kind == SINK_SEND) {
                int type = 0;
                socklen_t len = sizeof type;
                if (getsockopt(nfd, SOL_SOCKET, SO_TYPE, &type, &len) >= 0)
                        k->dgram = type != SOCK_STREAM;
        }
        *ret = k;
        return 0;
}

/* journald's native socket (systemd's journal protocol): a datagram socket
 * connected to the manager's journal path, with a large send buffer so a
 * burst waits in the kernel rather than in the unit's pipe. */
static int journal_connect(struct logs_sink *k) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = k->m->journal_path;

        if (k->connected)
                return 0;
        if (strlen(path) >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        if (connect(k->fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return negative_errno();
        k->connected = true;
        return 0;
}

int logs_journal_sink(logs_manager *m, struct logs_sink **ret) {
        if (!m->journal) {
                int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        return negative_errno();
                int size = 8 * 1024 * 1024;
                if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0)
                        (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
                struct logs_sink *k = sink_new(m, SINK_SEND, fd, "the journal");
                if (!k) {
                        safe_close(fd);
                        return -ENOMEM;
                }
                k->dgram = k->journal = true;
                m->journal = k;
        }
        *ret = logs_sink_ref(m->journal);
        return 0;
}

int logs_journal_connect(logs_manager *m) {
        struct logs_sink *k = m->journal;
        if (!k)
                return -ENOTCONN;
        return journal_connect(k);
}

int logs_file_sink_open(logs_manager *m, const logs_stream *s, const struct logs_target *t,
                   struct logs_sink **ret) {
        int flags = O_WRONLY | O_CREAT | O_NOCTTY | O_CLOEXEC | O_NONBLOCK |
                    (t->type == LOGS_TARGET_APPEND ? O_APPEND : m->resumed ? 0 : O_TRUNC);
        _cleanup_close_ int fd = open(t->path, flags, 0644);
        if (fd >= 0 && m->resumed && t->type != LOGS_TARGET_APPEND)
                (void) lseek(fd, 0, SEEK_END); /* reexec: on after the first tend's lines */
        struct stat st;
        char desc[PATH_MAX + 16];

        if (fd < 0) {
                int r = negative_errno();
                if (r == -ENXIO)
                        return log_error_errno(r, "unit %s: %s:%s is a FIFO with no reader", s->name,
                                               target_names[t->type], t->path);
                return log_error_errno(r, "unit %s: cannot open %s:%s: %m", s->name, target_names[t->type],
                                       t->path);
        }
        if (fstat(fd, &st) < 0)
                return log_error_errno(negative_errno(), "unit %s: fstat %s: %m", s->name, t->path);
        snprintf(desc, sizeof desc, "%s:%s", target_names[t->type], t->path);
        struct logs_sink *k = sink_new(m, S_ISSOCK(st.st_mode) ? SINK_SEND : SINK_WRITE, fd, desc);
        if (!k)
                return log_error_errno(-ENOMEM, "unit %s: out of memory", s->name);
        TAKE_FD(fd);
        k->pollable = !S_ISREG(st.st_mode);
        *ret = k;
        return 0;
}
