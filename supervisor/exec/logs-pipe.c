/* SPDX-License-Identifier: MIT */
/*
 * The log pipeline's pipes (logs.c): read, cut into lines, written in
 * batches to their sink; draining them at a main exit, shutdown and free.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include "log.h"
#include "logs.h"
#include "logs-internal.h"

static const char newline[] = "\n";
static const char marker[] = LOGS_CONTINUES_MARKER;

/* ------------------------------------------------------------------------ */
/* Pipes: read, cut into lines, write                                        */
/* ------------------------------------------------------------------------ */

static const char *const priority_fields[8] = {
        "PRIORITY=0\n", "PRIORITY=1\n", "PRIORITY=2\n", "PRIORITY=3\n",
        "PRIORITY=4\n", "PRIORITY=5\n", "PRIORITY=6\n", "PRIORITY=7\n",
};

/* A line as one journal entry: PRIORITY=, the stream's fields, then MESSAGE
 * in the protocol's binary form (its size, little-endian, then the bytes). */
static unsigned batch_journal_iov(struct batch *b, struct bline *l, struct iovec *v) {
        uint64_t size = l->len;
        for (unsigned i = 0; i < 8; i++)
                ((uint8_t *) &l->size_le)[i] = (uint8_t) (size >> (8 * i));
        v[0] = (struct iovec) { (void *) priority_fields[l->priority & 7], 11 };
        v[1] = (struct iovec) { (void *) b->prefix, b->prefix_len };
        v[2] = (struct iovec) { &l->size_le, sizeof l->size_le };
        v[3] = (struct iovec) { (void *) l->text, l->len };
        v[4] = (struct iovec) { (void *) newline, 1 };
        return 5;
}

static void batch_add(struct batch *b, const char *text, size_t len, unsigned flags, int priority, size_t end,
                      bool has_newline) {
        struct bline *l = &b->l[b->n++];
        struct iovec *v = b->iov + b->niov;
        unsigned n = 0;

        *l = (struct bline) { .text = text, .len = len, .flags = flags, .priority = (uint8_t) priority, .end = end,
                              .iov_start = b->niov };
        if (b->journal)
                n = batch_journal_iov(b, l, v);
        else {
                if (b->prefix_len)
                        v[n++] = (struct iovec) { (void *) b->prefix, b->prefix_len };
                /* A complete line is followed by its newline in the buffer: one iovec. */
                v[n++] = (struct iovec) { (void *) text, len + has_newline };
                if (flags & LOGS_LINE_CONTINUES)
                        v[n++] = (struct iovec) { (void *) marker, sizeof marker - 1 };
                if (!has_newline)
                        v[n++] = (struct iovec) { (void *) newline, 1 };
        }
        for (unsigned i = 0; i < n; i++)
                l->wire += v[i].iov_len;
        l->iov_n = n;
        b->niov += n;
        b->total += l->wire;
}

/* Offers the batch to the sink, delivers what it took. Returns the buffer
 * offset after the last line taken; *ret_all says whether all were. */
static size_t batch_flush(struct logs_pipe *p, struct batch *b, usec_t now, size_t consumed, bool *ret_all) {
        unsigned took = logs_sink_take(p->sink, b, p->s);

        for (unsigned i = 0; i < took; i++)
                logs_deliver(p, &b->l[i], now);
        *ret_all = took == b->n;
        if (took > 0)
                consumed = b->l[took - 1].end;
        b->n = b->niov = 0;
        b->total = 0;
        return consumed;
}

/* Cuts buf[0..len) into lines (SPEC §7: pieces of LOGS_LINE_MAX, marked) and
 * writes them. final: the tail without a newline is a line too. Returns the
 * bytes emitted; *ret_blocked when the sink stopped taking lines. */
/* Line buf[0..len) into the batch: its "<N>" prefix read (SyslogLevelPrefix=)
 * and, but for a file: sink, removed. */
static void pipe_add(const struct logs_pipe *p, struct batch *b, const char *buf, size_t len, unsigned flags,
                     size_t end, bool has_newline) {
        int level = p->s->priority & LOG_PRIMASK;
        size_t skip = p->s->level_prefix ? logs_parse_level_prefix(buf, len, &level) : 0;
        if (!p->sink->prefix && !p->sink->journal)
                skip = 0;
        batch_add(b, buf + skip, len - skip, flags, level, end, has_newline);
}

/* The text before every line of the batch: "NAME[PID]: " on the console, the
 * stream's fields for the journal (docs/logging.md "journal"). */
static size_t batch_prefix(const struct logs_pipe *p, char *buf, size_t size) {
        const logs_stream *s = p->s;
        int n = 0;
        if (p->sink->journal) {
                n = snprintf(buf, size, "SYSLOG_FACILITY=%d\nSYSLOG_IDENTIFIER=%.255s\nTEND_UNIT=%s\n"
                             "OBJECT_SYSTEMD_UNIT=%s\n", LOG_FAC(s->priority), s->ident, s->name, s->name);
                if (p->read_pid > 0)
                        n += snprintf(buf + n, size - (size_t) n, "SYSLOG_PID=%d\n", (int) p->read_pid);
                n += snprintf(buf + n, size - (size_t) n, "MESSAGE\n");
        } else if (p->sink->prefix && p->sink->kind != SINK_DISCARD)
                n = p->read_pid > 0 ? snprintf(buf, size, "%s[%d]: ", s->name, (int) p->read_pid)
                                    : snprintf(buf, size, "%s: ", s->name);
        return (size_t) n;
}

/* Cuts buf[0..len) into lines (SPEC §7: pieces of LOGS_LINE_MAX, marked) and
 * writes them. final: the tail without a newline is a line too. Returns the
 * bytes emitted; *ret_blocked when the sink stopped taking lines. */
static size_t pipe_emit(struct logs_pipe *p, const char *buf, size_t len, bool final, bool *ret_blocked) {
        struct batch b;
        char prefix[3 * LOGS_NAME_MAX + 160];
        size_t off = 0, consumed = 0;
        usec_t now = now_usec(CLOCK_REALTIME);
        bool all = true;

        b.n = b.niov = 0;
        b.total = 0;
        b.prefix = prefix;
        b.journal = p->sink->journal;
        b.prefix_len = batch_prefix(p, prefix, sizeof prefix);

        while (all && off < len) {
                size_t rest = len - off;
                const char *nl = memchr(buf + off, '\n', MIN(rest, (size_t) LOGS_LINE_MAX + 1));
                if (nl)
                        pipe_add(p, &b, buf + off, (size_t) (nl - (buf + off)), 0, (size_t) (nl - buf) + 1, true);
                else if (rest > LOGS_LINE_MAX)
                        pipe_add(p, &b, buf + off, LOGS_LINE_MAX, LOGS_LINE_CONTINUES, off + LOGS_LINE_MAX, false);
                else if (final)
                        pipe_add(p, &b, buf + off, rest, LOGS_LINE_PARTIAL, len, false);
                else
                        break;
                off = b.l[b.n - 1].end;
                if (b.n == BATCH_LINES)
                        consumed = batch_flush(p, &b, now, consumed, &all);
        }
        if (all && b.n > 0)
                consumed = batch_flush(p, &b, now, consumed, &all);
        *ret_blocked = !all;
        return consumed;
}

/* Keeps buf[0..n) (bytes not yet emitted) in the pipe's own buffer. */
static void pipe_keep(struct logs_pipe *p, const char *buf, size_t n) {
        if (n == 0) {
                p->in = mfree(p->in);
                p->in_len = 0;
                return;
        }
        char *in = realloc(p->in, n);
        if (!in) {
                /* Cannot happen in practice (≤ 112 KiB); never silently. */
                log_error("unit %s: out of memory: %zu bytes of log output lost", p->s->name, n);
                p->s->st.sink_lost_lines++;
                p->in = mfree(p->in);
                p->in_len = 0;
                return;
        }
        memmove(in, buf, n);
        p->in = in;
        p->in_len = n;
}

static void pipe_pause(struct logs_pipe *p) {
        struct logs_sink *k = p->sink;

        p->paused = true;
        (void) logs_pipe_reading(p, false);
        p->s->st.sink_pauses++;
        if (!p->waiting) {
                p->waiting = true;
                if (k->wait_tail)
                        k->wait_tail->wait_next = p;
                else
                        k->wait_head = p;
                k->wait_tail = p;
        }
        log_debug("unit %s: %s is blocked: reading paused with %zu bytes buffered", p->s->name, k->desc, p->in_len);
}

/* Reads one chunk (if do_read) after the leftover, emits the lines. A
 * pending flush caps the read at its offset and flushes the partial line
 * there. Returns nothing: errors are logged, the loop goes on. */
void logs_pipe_pump(struct logs_pipe *p, bool do_read) {
        logs_stream *s = p->s;
        char *buf = s->m->scratch;
        size_t len = p->in_len;

        if (p->paused)
                return;
        if (len > 0)
                memcpy(buf, p->in, len);
        if (do_read) {
                size_t want = SCRATCH_SIZE - len;
                if (p->flush_pending)
                        want = MIN(want, p->flush_at - p->n_read);
                if (want > 0) {
                        ssize_t n = read(p->rfd, buf + len, want);
                        if (n > 0) {
                                len += (size_t) n;
                                p->n_read += (uint64_t) n;
                                s->st.bytes += (uint64_t) n;
                                /* Bytes in the pipe when the main process exited are its own. */
                                p->read_pid = p->flush_pending ? p->flush_pid : s->pid;
                        } else if (n == 0)
                                /* every writer gone (tend keeps no write end
                                 * between spawns, issue 19): out of the set
                                 * until the next spawn, or EPOLLHUP would spin */
                                (void) logs_pipe_reading(p, false);
                        else if (errno != EAGAIN && errno != EINTR)
                                (void) log_warning_errno(errno, "unit %s: reading its log pipe: %m", s->name);
                }
        }
        bool final = p->flush_pending && p->n_read == p->flush_at, blocked;
        /* before a re-exec the start of a line stays in p->in: it is carried
         * in the state (logs-handover.h) and its end joins it after the exec */
        size_t used = pipe_emit(p, buf, len, final && !s->m->keep_partial, &blocked);
        if (final && !blocked)
                p->flush_pending = false;
        pipe_keep(p, buf + used, len - used);
        if (blocked)
                pipe_pause(p);
}

/* Adds the pipe's read end to the manager's set, or takes it out (not
 * merely masked: a pipe whose writers are gone would report EPOLLHUP all
 * the while it is paused). */
int logs_pipe_reading(struct logs_pipe *p, bool on) {
        if (p->reading == on)
                return 0;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = p };
        if (epoll_ctl(p->s->m->pipes_ep, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, p->rfd, &ev) < 0)
                return negative_errno();
        p->reading = on;
        return 0;
}

/* One ready pipe per loop iteration, as one sd-event source each used to
 * be: the set stays readable while others are ready (level-triggered, and
 * epoll rotates its ready list, so every pipe gets its turn), and nothing
 * freed by a callback can be left in a batch of events. */
int logs_pipes_on_readable(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct epoll_event ev;
        if (epoll_wait(fd, &ev, 1, 0) == 1)
                logs_pipe_pump(ev.data.ptr, true);
        return 0;
}

/* Sets the flush point to what the pipe holds now. */
int logs_pipe_mark_flush(struct logs_pipe *p) {
        int n = 0;
        if (ioctl(p->rfd, FIONREAD, &n) < 0)
                return negative_errno();
        p->flush_at = p->n_read + (uint64_t) n;
        p->flush_pid = p->s->pid;
        p->flush_pending = true;
        return 0;
}

/* Reads and emits up to the flush point unless the sink blocks. */
void logs_pipe_run_to_flush(struct logs_pipe *p) {
        while (p->flush_pending && !p->paused) {
                uint64_t before = p->n_read;
                bool at_point = p->n_read == p->flush_at;
                logs_pipe_pump(p, true);
                if (!at_point && p->n_read == before && p->flush_pending && !p->paused)
                        p->flush_at = p->n_read; /* the bytes FIONREAD saw are gone: flush here */
        }
}

struct logs_pipe *logs_pipe_free(struct logs_pipe *p) {
        if (!p)
                return NULL;
        if (p->sink) {
                logs_sink_unwait(p->sink, p);
                if (p->sink->pending_owner == p->s)
                        p->sink->pending_owner = NULL;
                logs_sink_unref(p->sink);
        }
        if (p->rfd >= 0)
                (void) logs_pipe_reading(p, false);
        safe_close(p->rfd);
        safe_close(p->wfd);
        free(p->in);
        free(p);
        return NULL;
}

/* p's pipe: a new one (rfd < 0), or the read end rfd handed over by a
 * re-executing tend (reexec: no write end until the next spawn). */
static int pipe_fds(struct logs_pipe *p, int rfd) {
        int fds[2];
        /* The write end stays blocking: its description is the one the child's
         * fd 1/2 will share. Only tend's read end is O_NONBLOCK. */
        if (rfd < 0 && pipe2(fds, O_CLOEXEC) < 0)
                return log_error_errno(negative_errno(), "unit %s: pipe2: %m", p->s->name);
        p->rfd = rfd < 0 ? fds[0] : rfd;
        p->wfd = rfd < 0 ? fds[1] : -1;
        int f = fcntl(p->rfd, F_GETFD);
        if (f < 0 || fcntl(p->rfd, F_SETFD, f | FD_CLOEXEC) < 0 || fcntl(p->rfd, F_SETFL, O_NONBLOCK) < 0)
                return log_error_errno(negative_errno(), "unit %s: fcntl: %m", p->s->name);
        return 0;
}

int logs_pipe_new(logs_stream *s, enum logs_origin origin, const struct logs_target *t, int rfd,
                  struct logs_pipe **ret) {
        logs_manager *m = s->m;
        int r;

        struct logs_pipe *p = calloc(1, sizeof *p);
        if (!p)
                return log_error_errno(-ENOMEM, "unit %s: out of memory", s->name);
        *p = (struct logs_pipe) { .s = s, .origin = origin, .rfd = -1, .wfd = -1 };

        if (t->type == LOGS_TARGET_CONSOLE)
                p->sink = logs_sink_ref(m->console);
        else if (t->type == LOGS_TARGET_JOURNAL) {
                if ((r = logs_journal_sink(m, &p->sink)) < 0) {
                        r = log_error_errno(r, "unit %s: cannot make a socket for the journal: %m", s->name);
                        goto fail;
                }
        } else if ((r = logs_file_sink_open(m, s, t, &p->sink)) < 0)
                goto fail;

        if ((r = pipe_fds(p, rfd)) < 0)
                goto fail;
        r = logs_pipe_reading(p, true);
        if (r < 0) {
                r = log_error_errno(r, "unit %s: epoll_ctl: %m", s->name);
                goto fail;
        }
        *ret = p;
        return 0;
fail:
        logs_pipe_free(rfd < 0 ? p : logs_pipe_disown(p));
        return r;
}

struct logs_pipe *logs_pipe_disown(struct logs_pipe *p) {
        if (p && p->rfd >= 0) {
                (void) logs_pipe_reading(p, false);
                p->rfd = -1;
        }
        return p;
}

/* ------------------------------------------------------------------------ */
/* Draining (main exit, shutdown, free)                                      */
/* ------------------------------------------------------------------------ */

unsigned logs_stream_pipes(const logs_stream *s, struct logs_pipe *out[2]) {
        unsigned n = 0;
        if (s->pipe[0])
                out[n++] = s->pipe[0];
        if (s->pipe[1] && s->pipe[1] != s->pipe[0])
                out[n++] = s->pipe[1];
        return n;
}

static bool pipe_done(const struct logs_pipe *p) {
        return !p->flush_pending && !p->paused && (p->in_len == 0 || p->s->m->keep_partial) &&
               (p->sink->pending_owner != p->s || p->sink->pending_len == 0);
}

/* The sinks to wait for: each blocked sink once, with its pollfd. */
struct drain_wait {
        struct pollfd *pfd;
        struct logs_sink **sink;
        size_t n;
};

static void drain_wait_add(struct drain_wait *w, struct logs_sink *k) {
        for (size_t i = 0; i < w->n; i++)
                if (w->sink[i] == k)
                        return;
        w->pfd[w->n] = (struct pollfd) { .fd = k->fd, .events = POLLOUT };
        w->sink[w->n++] = k;
}

#define FOREACH_DRAIN_STREAM(s, m, only) \
        for (logs_stream *s = (only) ?: (m)->streams; s; s = (only) ? NULL : s->next)

/* One pass: every pipe runs to its flush point; returns true if all are done,
 * else collects the blocked sinks in w. */
static bool drain_pass(logs_manager *m, logs_stream *only, struct drain_wait *w) {
        bool done = true;

        w->n = 0;
        FOREACH_DRAIN_STREAM(s, m, only) {
                struct logs_pipe *ps[2];
                for (unsigned i = 0, n = logs_stream_pipes(s, ps); i < n; i++) {
                        logs_pipe_run_to_flush(ps[i]);
                        if (pipe_done(ps[i]))
                                continue;
                        done = false;
                        if (ps[i]->sink->blocked)
                                drain_wait_add(w, ps[i]->sink);
                }
        }
        return done;
}

/* Runs every pipe of the streams (one stream, or all of m's) to its flush
 * point — what it holds now — waiting with poll() for blocked sinks until
 * deadline. */
int logs_drain(logs_manager *m, logs_stream *only, usec_t deadline) {
        size_t n_pipes = 0;
        int r = 0;

        FOREACH_DRAIN_STREAM(s, m, only) {
                struct logs_pipe *ps[2];
                for (unsigned i = 0, n = logs_stream_pipes(s, ps); i < n; i++, n_pipes++)
                        if (!ps[i]->flush_pending)
                                (void) logs_pipe_mark_flush(ps[i]);
        }
        struct drain_wait w = {
                .pfd = calloc(n_pipes + 1, sizeof *w.pfd),
                .sink = calloc(n_pipes + 1, sizeof *w.sink),
        };
        if (!w.pfd || !w.sink) {
                r = -ENOMEM;
                goto out;
        }
        while (!drain_pass(m, only, &w)) {
                usec_t now = now_usec(CLOCK_MONOTONIC);
                if (w.n == 0 || now >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                usec_t ms = (deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
                if (poll(w.pfd, w.n, ms > INT_MAX ? INT_MAX : (int) ms) < 0 && errno != EINTR) {
                        r = negative_errno();
                        break;
                }
                for (size_t i = 0; i < w.n; i++)
                        if (w.pfd[i].revents && w.sink[i]->blocked)
                                logs_sink_unblock(w.sink[i]);
        }
out:
        free(w.pfd);
        free(w.sink);
        return r;
}

int logs_stream_drain(logs_stream *s, usec_t deadline) {
        if (!s)
                return -EINVAL;
        return logs_drain(s->m, s, deadline);
}

int logs_manager_drain(logs_manager *m, usec_t deadline) {
        if (!m)
                return -EINVAL;
        return logs_drain(m, NULL, deadline);
}

int logs_manager_drain_lines(logs_manager *m, usec_t deadline) {
        if (!m)
                return -EINVAL;
        m->keep_partial = true;
        int r = logs_drain(m, NULL, deadline);
        m->keep_partial = false;
        return r;
}

/* ------------------------------------------------------------------------ */
/* Closing a dead unit's pipes (issue 19's fd budget)                        */
/* ------------------------------------------------------------------------ */

/* Whether p may be freed without losing a byte: everything it held was read
 * and taken by its sink. */
static bool pipe_empty_done(struct logs_pipe *p) {
        int left = 0;
        if (logs_pipe_mark_flush(p) < 0)
                return false;
        logs_pipe_run_to_flush(p);
        return pipe_done(p) && ioctl(p->rfd, FIONREAD, &left) >= 0 && left == 0;
}

int logs_stream_close_pipes(logs_stream *s) {
        struct logs_pipe *ps[2];
        if (!s)
                return -EINVAL;
        /* a file: sink is opened (and truncated) with its pipe: kept, so
         * that it is truncated once, at the first start, not at each */
        for (unsigned i = 0; i < 2; i++)
                if (s->target[i].type == LOGS_TARGET_FILE || s->target[i].type == LOGS_TARGET_APPEND)
                        return -EBUSY;
        unsigned n = logs_stream_pipes(s, ps);
        for (unsigned i = 0; i < n; i++)
                if (!pipe_empty_done(ps[i]))
                        return -EBUSY;
        for (unsigned i = 0; i < n; i++)
                logs_pipe_free(ps[i]);
        s->pipe[0] = s->pipe[1] = NULL;
        return 0;
}

int logs_pipe_writer(struct logs_pipe *p) {
        char path[64];
        if (p->wfd >= 0)
                return p->wfd;
        /* A new write end of the same pipe (a pipe opens as a FIFO through
         * /proc): bytes still in it keep their order, its ring goes on. */
        snprintf(path, sizeof path, "/proc/self/fd/%d", p->rfd);
        p->wfd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (p->wfd < 0)
                return negative_errno();
        if (!p->paused)
                (void) logs_pipe_reading(p, true);
        return p->wfd;
}
