/* SPDX-License-Identifier: MIT */
/*
 * The log pipeline for units (SPEC §4 "Logs"). The contract is logs.h; the
 * user-facing description docs/logging.md. Design in brief:
 *
 *  - A pipe is read one chunk (LOGS_READ_CHUNK) per wake-up into the
 *    manager's scratch buffer, after the pipe's own leftover (an incomplete
 *    line, or lines a blocked sink did not take). Lines are cut there and
 *    written in batches (one writev per up to BATCH_LINES lines). Only the
 *    leftover is copied into the pipe's heap buffer, which is freed when
 *    empty: an idle unit costs no buffer.
 *  - A sink takes a batch whole, or up to some byte. The line that byte falls
 *    in is *committed*: its unwritten rest moves into the sink's pending
 *    buffer (one line at most) and the sink is blocked. Lines after it stay
 *    with their pipe, which is paused (its io source disabled) and queued on
 *    the sink. EPOLLOUT on the sink writes the pending rest first, then
 *    resumes the queued pipes in order. A blocked sink is never written by
 *    anyone else, so a pipe that finds it blocked joins the queue without
 *    writing: that is what keeps lines of several units whole and in order.
 *  - A line reaches the ring and the followers when its sink accepted (or
 *    committed) it, so the ring's order is the sink's order.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

#include "log.h"
#include "logs.h"


static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

#define SCRATCH_SIZE LOGS_PIPE_BUFFER_MAX
#define BATCH_LINES 64u
#define IOV_PER_LINE 4u /* prefix, text (+ newline), marker, newline */

/* ------------------------------------------------------------------------ */
/* Types                                                                     */
/* ------------------------------------------------------------------------ */

enum sink_kind {
        SINK_DISCARD, /* tend's stdout is closed: rings and followers only */
        SINK_WRITE,   /* write()/writev() */
        SINK_SEND,    /* sendmsg(MSG_DONTWAIT|MSG_NOSIGNAL) */
};

struct logs_pipe;

struct logs_sink {
        unsigned n_ref;
        logs_manager *m;
        enum sink_kind kind;
        int fd;
        bool prefix;    /* console: "NAME[PID]: " before every line */
        bool pollable;  /* false for regular files: they never block */
        bool dgram;     /* a datagram socket: one line per send */
        bool blocked;   /* would block: nobody writes it before EPOLLOUT */
        bool failing;   /* its last write failed; warned once */
        char *desc;     /* "tend's stdout", "file:PATH": for messages */
        sd_event_source *out_src;   /* EPOLLOUT, enabled only while blocked */
        char *pending;              /* the unwritten rest of one committed line */
        size_t pending_len, pending_off;
        logs_stream *pending_owner; /* whose line it is (NULL once freed) */
        struct logs_pipe *wait_head, *wait_tail; /* paused pipes, in order */
        uint64_t lost_lines;
};

struct logs_pipe {
        logs_stream *s;
        enum logs_origin origin;
        int rfd, wfd;
        bool reading;          /* in the manager's pipe epoll set */
        struct logs_sink *sink;
        char *in;              /* bytes read, not yet emitted (≤ SCRATCH_SIZE) */
        size_t in_len;
        pid_t read_pid;        /* the stream's pid at the last read */
        uint64_t n_read;       /* bytes read since the pipe was created */
        uint64_t flush_at;     /* with flush_pending: flush a partial line at this offset */
        pid_t flush_pid;       /* the pid the bytes before flush_at are shown with */
        bool flush_pending;
        bool paused;           /* waiting for its sink; not reading */
        bool waiting;          /* on the sink's queue */
        struct logs_pipe *wait_next;
};

struct ring_hdr {
        uint64_t ts;
        int32_t pid;
        uint16_t len;
        uint8_t origin;
        uint8_t flags;
};
_Static_assert(sizeof(struct ring_hdr) == LOGS_RING_RECORD_OVERHEAD, "ring record header size");
_Static_assert(LOGS_LINE_MAX <= UINT16_MAX, "ring record length field");

struct ring {
        uint8_t *buf;          /* allocated at the first line */
        size_t cap, head, used, count;
};

struct frec {
        struct frec *next;
        struct logs_line line;
        char text[];
};

struct logs_follower {
        logs_stream *s;        /* NULL once ended */
        logs_follower *prev, *next;
        struct frec *head, *tail, *cur;
        size_t queued, max;
        bool ended;
        logs_follower_notify_fn notify;
        void *userdata;
};

struct logs_stream {
        logs_manager *m;
        logs_stream *prev, *next;
        char *name, *ident;          /* ident may be name (no SyslogIdentifier=) */
        struct logs_target target[2];
        char *path[2];
        struct logs_pipe *pipe[2];   /* [1] may equal [0]: one shared pipe */
        int journal_fd[2];           /* [1] may equal [0] */
        pid_t pid;
        struct ring ring;
        logs_follower *followers;
        struct logs_stream_stats st;
        bool evict_logged, trunc_logged;
};

struct logs_manager {
        sd_event *event;
        int console_orig;            /* borrowed: handed to INHERIT units */
        struct logs_sink *console;
        int devnull;
        size_t ring_bytes, follower_bytes;
        /* Every pipe's read end, in one epoll set of its own behind one
         * sd-event source: a source per pipe was 300 B of tend's memory per
         * unit (docs/benchmarks.md "service mode"). */
        int pipes_ep;
        sd_event_source *pipes_src;
        char *scratch;               /* SCRATCH_SIZE: one pipe's bytes being cut */
        char *linebuf;               /* LOGS_LINE_MAX + 1: a ring line for a callback */
        logs_stream *streams;
};

/* One batch of lines cut from one buffer, ready for one writev. */
struct bline {
        const char *text;
        size_t len;
        unsigned flags;
        size_t end;            /* offset in the buffer just after the line */
        size_t wire;           /* bytes this line takes on the sink */
        unsigned iov_start, iov_n;
};

struct batch {
        struct bline l[BATCH_LINES];
        struct iovec iov[BATCH_LINES * IOV_PER_LINE];
        unsigned n, niov;
        size_t total;
        const char *prefix;
        size_t prefix_len;
};

static const char newline[] = "\n";
static const char marker[] = LOGS_CONTINUES_MARKER;

static void pipe_pump(struct logs_pipe *p, bool do_read);
static void sink_unblock(struct logs_sink *k);

/* ------------------------------------------------------------------------ */
/* Targets                                                                   */
/* ------------------------------------------------------------------------ */

static const char *const target_names[_LOGS_TARGET_MAX] = {
        [LOGS_TARGET_CONSOLE] = "console",
        [LOGS_TARGET_FILE] = "file",
        [LOGS_TARGET_APPEND] = "append",
        [LOGS_TARGET_NULL] = "null",
        [LOGS_TARGET_INHERIT] = "inherit",
        [LOGS_TARGET_JOURNAL] = "journal",
};

const char *logs_target_type_to_string(enum logs_target_type t) {
        if ((unsigned) t >= _LOGS_TARGET_MAX)
                return NULL;
        return target_names[t];
}

int logs_target_parse(const char *s, struct logs_target *ret) {
        if (!s || !ret)
                return -EINVAL;
        for (int t = LOGS_TARGET_CONSOLE; t < _LOGS_TARGET_MAX; t++) {
                if (t == LOGS_TARGET_FILE || t == LOGS_TARGET_APPEND) {
                        size_t n = strlen(target_names[t]);
                        if (strncmp(s, target_names[t], n) == 0 && s[n] == ':') {
                                if (s[n + 1] != '/')
                                        return -EINVAL;
                                *ret = (struct logs_target) { .type = t, .path = s + n + 1 };
                                return 0;
                        }
                } else if (streq(s, target_names[t])) {
                        *ret = (struct logs_target) { .type = t };
                        return 0;
                }
        }
        return -EINVAL;
}

/* Parses a decimal number ending at `end`; false if anything else is there. */
static bool parse_u64(const char *s, char end, unsigned long long *ret, const char **ret_next) {
        char *e;
        if (*s < '0' || *s > '9')
                return false;
        errno = 0;
        unsigned long long v = strtoull(s, &e, 10);
        if (errno != 0 || *e != end)
                return false;
        *ret = v;
        *ret_next = e;
        return true;
}

bool logs_journal_stream_matches(int fd, const char *journal_stream) {
        unsigned long long dev, ino;
        const char *p;
        struct stat st;

        if (!journal_stream || fd < 0)
                return false;
        if (!parse_u64(journal_stream, ':', &dev, &p) || !parse_u64(p + 1, '\0', &ino, &p))
                return false;
        if (fstat(fd, &st) < 0)
                return false;
        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

enum logs_target_type logs_target_default(void) {
        if (logs_journal_stream_matches(STDERR_FILENO, getenv("JOURNAL_STREAM")))
                return LOGS_TARGET_JOURNAL;
        return LOGS_TARGET_CONSOLE;
}

static bool target_has_pipe(const struct logs_target *t) {
        return t->type == LOGS_TARGET_CONSOLE || t->type == LOGS_TARGET_FILE || t->type == LOGS_TARGET_APPEND;
}

static bool target_same(const struct logs_target *a, const struct logs_target *b) {
        if (a->type != b->type)
                return false;
        if (a->type == LOGS_TARGET_FILE || a->type == LOGS_TARGET_APPEND)
                return streq(a->path, b->path);
        return true;
}

/* ------------------------------------------------------------------------ */
/* Ring                                                                      */
/* ------------------------------------------------------------------------ */

static void ring_copy_in(struct ring *r, size_t off, const void *src, size_t n) {
        off %= r->cap;
        size_t first = MIN(n, r->cap - off);
        memcpy(r->buf + off, src, first);
        memcpy(r->buf, (const uint8_t *) src + first, n - first);
}

static void ring_copy_out(const struct ring *r, size_t off, void *dst, size_t n) {
        off %= r->cap;
        size_t first = MIN(n, r->cap - off);
        memcpy(dst, r->buf + off, first);
        memcpy((uint8_t *) dst + first, r->buf, n - first);
}

static void ring_evict(logs_stream *s) {
        struct ring *r = &s->ring;
        struct ring_hdr h;

        ring_copy_out(r, r->head, &h, sizeof h);
        r->head = (r->head + sizeof h + h.len) % r->cap;
        r->used -= sizeof h + h.len;
        r->count--;
        s->st.ring_evicted++;
        if (!s->evict_logged) {
                s->evict_logged = true;
                log_debug("unit %s: log ring full (%zu bytes): evicting the oldest lines from now on "
                          "(counted in ring_evicted)", s->name, r->cap);
        }
}

static void ring_push(logs_stream *s, const struct logs_line *l) {
        struct ring *r = &s->ring;

        if (!r->buf) {
                r->buf = malloc(r->cap);
                if (!r->buf) {
                        s->st.ring_evicted++;
                        log_debug("unit %s: no memory for the log ring; line not kept", s->name);
                        return;
                }
        }
        size_t len = MIN(l->len, r->cap - sizeof(struct ring_hdr));
        struct ring_hdr h = {
                .ts = l->realtime_usec,
                .pid = (int32_t) l->pid,
                .len = (uint16_t) len,
                .origin = (uint8_t) l->origin,
                .flags = (uint8_t) (l->flags | (len < l->len ? LOGS_LINE_TRUNCATED : 0)),
        };
        if (len < l->len) {
                s->st.ring_truncated++;
                if (!s->trunc_logged) {
                        s->trunc_logged = true;
                        log_debug("unit %s: a %zu-byte line is cut to %zu bytes to fit the log ring "
                                  "(counted in ring_truncated)", s->name, l->len, len);
                }
        }
        while (r->cap - r->used < sizeof h + len)
                ring_evict(s);
        size_t off = r->head + r->used;
        ring_copy_in(r, off, &h, sizeof h);
        ring_copy_in(r, off + sizeof h, l->text, len);
        r->used += sizeof h + len;
        r->count++;
}

int logs_stream_ring(logs_stream *s, size_t n, logs_line_fn fn, void *userdata) {
        if (!s || !fn)
                return -EINVAL;
        struct ring *r = &s->ring;
        size_t skip = r->count > n ? r->count - n : 0, off = r->head;
        int passed = 0;

        for (size_t i = 0; i < r->count; i++) {
                struct ring_hdr h;
                ring_copy_out(r, off, &h, sizeof h);
                if (i >= skip) {
                        char *text = s->m->linebuf;
                        ring_copy_out(r, off + sizeof h, text, h.len);
                        text[h.len] = '\0';
                        struct logs_line l = {
                                .realtime_usec = h.ts, .pid = h.pid, .origin = h.origin,
                                .flags = h.flags, .text = text, .len = h.len,
                        };
                        int k = fn(&l, userdata);
                        if (k < 0)
                                return k;
                        passed++;
                }
                off += sizeof h + h.len;
        }
        return passed;
}

/* ------------------------------------------------------------------------ */
/* Followers                                                                 */
/* ------------------------------------------------------------------------ */

static struct frec *frec_new(const struct logs_line *l) {
        struct frec *f = malloc(sizeof *f + l->len + 1);
        if (!f)
                return NULL;
        f->next = NULL;
        f->line = *l;
        memcpy(f->text, l->text, l->len);
        f->text[l->len] = '\0';
        f->line.text = f->text;
        return f;
}

static void follower_clear(logs_follower *f) {
        for (struct frec *r = f->head, *n; r; r = n) {
                n = r->next;
                free(r);
        }
        f->head = f->tail = NULL;
        f->queued = 0;
}

static void follower_append(logs_follower *f, struct frec *r) {
        bool was_empty = !f->head;
        if (f->tail)
                f->tail->next = r;
        else
                f->head = r;
        f->tail = r;
        if (was_empty && f->notify)
                f->notify(f, f->userdata);
}

static void follower_detach(logs_follower *f) {
        logs_stream *s = f->s;
        if (!s)
                return;
        if (f->prev)
                f->prev->next = f->next;
        else
                s->followers = f->next;
        if (f->next)
                f->next->prev = f->prev;
        f->prev = f->next = NULL;
        f->s = NULL;
        f->ended = true;
}

/* The follower fell behind: its queue is replaced by one note, and it ends. */
static void follower_drop(logs_follower *f, const struct logs_line *l) {
        logs_stream *s = f->s;
        size_t lines = 0;
        char note[LOGS_NAME_MAX + 200];

        for (struct frec *r = f->head; r; r = r->next)
                lines++;
        int n = snprintf(note, sizeof note,
                         "tend: follow of unit %s ended: fell behind by %zu lines (%zu bytes queued, limit %zu); "
                         "the unit's log is unaffected", s->name, lines + 1, f->queued, f->max);
        follower_clear(f);
        s->st.followers_dropped++;
        log_debug("unit %s: a log follower fell behind (%zu lines, %zu bytes queued, limit %zu): dropped",
                  s->name, lines + 1, f->queued + LOGS_RING_RECORD_OVERHEAD + l->len, f->max);
        follower_detach(f);
        struct logs_line nl = {
                .realtime_usec = l->realtime_usec, .pid = 0, .origin = LOGS_ORIGIN_TEND,
                .flags = LOGS_LINE_NOTE, .text = note, .len = (size_t) MIN(n, (int) sizeof note - 1),
        };
        struct frec *r = frec_new(&nl);
        if (r)
                follower_append(f, r); /* notifies: the queue was just emptied */
        else if (f->notify)
                f->notify(f, f->userdata);
}

static void follower_push(logs_follower *f, const struct logs_line *l) {
        size_t cost = LOGS_RING_RECORD_OVERHEAD + l->len;
        if (f->queued + cost > f->max) {
                follower_drop(f, l);
                return;
        }
        struct frec *r = frec_new(l);
        if (!r) {
                follower_drop(f, l);
                return;
        }
        f->queued += cost;
        follower_append(f, r);
}

int logs_stream_follow(logs_stream *s, size_t max_bytes, logs_follower_notify_fn notify, void *userdata,
                       logs_follower **ret) {
        if (!s || !ret)
                return -EINVAL;
        if (max_bytes == 0)
                max_bytes = s->m->follower_bytes;
        if (max_bytes < LOGS_FOLLOWER_QUEUE_MIN)
                return -EINVAL;
        logs_follower *f = calloc(1, sizeof *f);
        if (!f)
                return -ENOMEM;
        *f = (logs_follower) { .s = s, .next = s->followers, .max = max_bytes, .notify = notify, .userdata = userdata };
        if (s->followers)
                s->followers->prev = f;
        s->followers = f;
        *ret = f;
        return 0;
}

int logs_follower_next(logs_follower *f, struct logs_line *ret_line) {
        if (!f || !ret_line)
                return -EINVAL;
        f->cur = mfree(f->cur);
        struct frec *r = f->head;
        if (!r)
                return f->ended ? -EPIPE : 0;
        f->head = r->next;
        if (!f->head)
                f->tail = NULL;
        if (!(r->line.flags & LOGS_LINE_NOTE))
                f->queued -= LOGS_RING_RECORD_OVERHEAD + r->line.len;
        f->cur = r;
        *ret_line = r->line;
        return 1;
}

logs_follower *logs_follower_free(logs_follower *f) {
        if (!f)
                return NULL;
        follower_detach(f);
        follower_clear(f);
        free(f->cur);
        free(f);
        return NULL;
}

/* ------------------------------------------------------------------------ */
/* Delivery: a line the sink accepted goes to the ring and the followers     */
/* ------------------------------------------------------------------------ */

static void deliver(struct logs_pipe *p, const struct bline *b, usec_t now) {
        logs_stream *s = p->s;
        struct logs_line l = {
                .realtime_usec = now, .pid = p->read_pid, .origin = p->origin,
                .flags = b->flags, .text = b->text, .len = b->len,
        };

        s->st.lines++;
        if (b->flags & LOGS_LINE_CONTINUES) {
                s->st.split_pieces++;
                log_debug("unit %s: a line longer than %u bytes is split; this piece is marked \"%s\"",
                          s->name, LOGS_LINE_MAX, LOGS_CONTINUES_MARKER);
        }
        if (b->flags & LOGS_LINE_PARTIAL)
                s->st.partial_lines++;
        ring_push(s, &l);
        for (logs_follower *f = s->followers, *n; f; f = n) {
                n = f->next; /* a dropped follower leaves the list */
                follower_push(f, &l);
        }
}

/* ------------------------------------------------------------------------ */
/* Sinks                                                                     */
/* ------------------------------------------------------------------------ */

static int sink_on_writable(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        sink_unblock(userdata);
        return 0;
}

/* Lines the sink could not take because it failed: counted and warned once. */
static void sink_lost(struct logs_sink *k, logs_stream *s, uint64_t lines, int err) {
        k->lost_lines += lines;
        if (s)
                s->st.sink_lost_lines += lines;
        if (!k->failing) {
                k->failing = true;
                log_warning("logs: writing to %s failed (%s): lines are lost until it accepts them again",
                            k->desc, strerror(-err));
        } else
                log_debug("logs: %s still failing (%s): %" PRIu64 " more lines lost", k->desc, strerror(-err), lines);
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

static ssize_t sink_raw_write(struct logs_sink *k, const struct iovec *iov, unsigned niov) {
        for (;;) {
                ssize_t n;
                if (k->kind == SINK_SEND) {
                        struct msghdr mh = { .msg_iov = (struct iovec *) iov, .msg_iovlen = niov };
                        n = sendmsg(k->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
                } else
                        n = writev(k->fd, iov, (int) niov);
                if (n >= 0)
                        return n;
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
static unsigned sink_take(struct logs_sink *k, const struct batch *b, logs_stream *s) {
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

static int pipe_reading(struct logs_pipe *p, bool on);

/* EPOLLOUT: finish the committed line, then let the paused pipes go on, in the
 * order they stopped, until one of them blocks the sink again. */
static void sink_unblock(struct logs_sink *k) {
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
                pipe_pump(p, false);
                if (!p->paused)
                        (void) pipe_reading(p, true);
        }
}

static void sink_unwait(struct logs_sink *k, struct logs_pipe *p) {
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

static struct logs_sink *sink_ref(struct logs_sink *k) {
        k->n_ref++;
        return k;
}

static struct logs_sink *sink_unref(struct logs_sink *k) {
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
static int console_open(logs_manager *m, int fd, struct logs_sink **ret) {
        struct stat st;
        enum sink_kind kind = SINK_WRITE;
        int nfd = -1;

        if (fstat(fd, &st) < 0) {
                log_warning("logs: tend's stdout (fd %d) is not open (%s): unit lines go to rings and followers only",
                            fd, strerror(errno));
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
                        log_warning("logs: cannot reopen tend's stdout through %s (%s): setting O_NONBLOCK on the "
                                    "description tend was given, which others may share", path, strerror(e));
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

static int file_sink_open(logs_manager *m, const logs_stream *s, const struct logs_target *t,
                          struct logs_sink **ret) {
        int flags = O_WRONLY | O_CREAT | O_NOCTTY | O_CLOEXEC | O_NONBLOCK |
                    (t->type == LOGS_TARGET_APPEND ? O_APPEND : O_TRUNC);
        _cleanup_close_ int fd = open(t->path, flags, 0644);
        struct stat st;
        char desc[PATH_MAX + 16];

        if (fd < 0) {
                int r = negative_errno();
                if (r == -ENXIO)
                        return log_error_errno(r, "unit %s: %s:%s is a FIFO with no reader", s->name,
                                               target_names[t->type], t->path);
                return log_error_errno(r, "unit %s: cannot open %s:%s: %s", s->name, target_names[t->type],
                                       t->path, strerror(-r));
        }
        if (fstat(fd, &st) < 0)
                return log_error_errno(negative_errno(), "unit %s: fstat %s: %s", s->name, t->path, strerror(errno));
        snprintf(desc, sizeof desc, "%s:%s", target_names[t->type], t->path);
        struct logs_sink *k = sink_new(m, S_ISSOCK(st.st_mode) ? SINK_SEND : SINK_WRITE, fd, desc);
        if (!k)
                return log_error_errno(-ENOMEM, "unit %s: out of memory", s->name);
        TAKE_FD(fd);
        k->pollable = !S_ISREG(st.st_mode);
        *ret = k;
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Pipes: read, cut into lines, write                                        */
/* ------------------------------------------------------------------------ */

static void batch_add(struct batch *b, const char *text, size_t len, unsigned flags, size_t end,
                      bool has_newline) {
        struct bline *l = &b->l[b->n++];
        struct iovec *v = b->iov + b->niov;
        unsigned n = 0;

        *l = (struct bline) { .text = text, .len = len, .flags = flags, .end = end, .iov_start = b->niov };
        if (b->prefix_len)
                v[n++] = (struct iovec) { (void *) b->prefix, b->prefix_len };
        /* A complete line is followed by its newline in the buffer: one iovec. */
        v[n++] = (struct iovec) { (void *) text, len + has_newline };
        if (flags & LOGS_LINE_CONTINUES)
                v[n++] = (struct iovec) { (void *) marker, sizeof marker - 1 };
        if (!has_newline)
                v[n++] = (struct iovec) { (void *) newline, 1 };
        for (unsigned i = 0; i < n; i++)
                l->wire += v[i].iov_len;
        l->iov_n = n;
        b->niov += n;
        b->total += l->wire;
}

/* Offers the batch to the sink, delivers what it took. Returns the buffer
 * offset after the last line taken; *ret_all says whether all were. */
static size_t batch_flush(struct logs_pipe *p, struct batch *b, usec_t now, size_t consumed, bool *ret_all) {
        unsigned took = sink_take(p->sink, b, p->s);

        for (unsigned i = 0; i < took; i++)
                deliver(p, &b->l[i], now);
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
static size_t pipe_emit(struct logs_pipe *p, const char *buf, size_t len, bool final, bool *ret_blocked) {
        struct batch b;
        char prefix[LOGS_NAME_MAX + 32];
        size_t off = 0, consumed = 0;
        usec_t now = now_usec(CLOCK_REALTIME);
        bool all = true;

        b.n = b.niov = 0;
        b.total = 0;
        b.prefix = prefix;
        b.prefix_len = 0;
        if (p->sink->prefix && p->sink->kind != SINK_DISCARD) {
                int n = p->read_pid > 0 ? snprintf(prefix, sizeof prefix, "%s[%d]: ", p->s->name, (int) p->read_pid)
                                        : snprintf(prefix, sizeof prefix, "%s: ", p->s->name);
                b.prefix_len = (size_t) n;
        }

        while (all && off < len) {
                size_t rest = len - off;
                const char *nl = memchr(buf + off, '\n', MIN(rest, (size_t) LOGS_LINE_MAX + 1));
                if (nl)
                        batch_add(&b, buf + off, (size_t) (nl - (buf + off)), 0, (size_t) (nl - buf) + 1, true);
                else if (rest > LOGS_LINE_MAX)
                        batch_add(&b, buf + off, LOGS_LINE_MAX, LOGS_LINE_CONTINUES, off + LOGS_LINE_MAX, false);
                else if (final)
                        batch_add(&b, buf + off, rest, LOGS_LINE_PARTIAL, len, false);
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
        (void) pipe_reading(p, false);
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
static void pipe_pump(struct logs_pipe *p, bool do_read) {
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
                        } else if (n < 0 && errno != EAGAIN && errno != EINTR)
                                log_warning("unit %s: reading its log pipe: %s", s->name, strerror(errno));
                }
        }
        bool final = p->flush_pending && p->n_read == p->flush_at, blocked;
        size_t used = pipe_emit(p, buf, len, final, &blocked);
        if (final && !blocked)
                p->flush_pending = false;
        pipe_keep(p, buf + used, len - used);
        if (blocked)
                pipe_pause(p);
}

/* Adds the pipe's read end to the manager's set, or takes it out (not
 * merely masked: a pipe whose writers are gone would report EPOLLHUP all
 * the while it is paused). */
static int pipe_reading(struct logs_pipe *p, bool on) {
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
static int pipes_on_readable(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct epoll_event ev;
        if (epoll_wait(fd, &ev, 1, 0) == 1)
                pipe_pump(ev.data.ptr, true);
        return 0;
}

/* Sets the flush point to what the pipe holds now. */
static int pipe_mark_flush(struct logs_pipe *p) {
        int n = 0;
        if (ioctl(p->rfd, FIONREAD, &n) < 0)
                return negative_errno();
        p->flush_at = p->n_read + (uint64_t) n;
        p->flush_pid = p->s->pid;
        p->flush_pending = true;
        return 0;
}

/* Reads and emits up to the flush point unless the sink blocks. */
static void pipe_run_to_flush(struct logs_pipe *p) {
        while (p->flush_pending && !p->paused) {
                uint64_t before = p->n_read;
                bool at_point = p->n_read == p->flush_at;
                pipe_pump(p, true);
                if (!at_point && p->n_read == before && p->flush_pending && !p->paused)
                        p->flush_at = p->n_read; /* the bytes FIONREAD saw are gone: flush here */
        }
}

static struct logs_pipe *pipe_free(struct logs_pipe *p) {
        if (!p)
                return NULL;
        if (p->sink) {
                sink_unwait(p->sink, p);
                if (p->sink->pending_owner == p->s)
                        p->sink->pending_owner = NULL;
                sink_unref(p->sink);
        }
        if (p->rfd >= 0)
                (void) pipe_reading(p, false);
        safe_close(p->rfd);
        safe_close(p->wfd);
        free(p->in);
        free(p);
        return NULL;
}

static int pipe_new(logs_stream *s, enum logs_origin origin, const struct logs_target *t, struct logs_pipe **ret) {
        logs_manager *m = s->m;
        int fds[2], r;

        struct logs_pipe *p = calloc(1, sizeof *p);
        if (!p)
                return log_error_errno(-ENOMEM, "unit %s: out of memory", s->name);
        *p = (struct logs_pipe) { .s = s, .origin = origin, .rfd = -1, .wfd = -1 };

        if (t->type == LOGS_TARGET_CONSOLE)
                p->sink = sink_ref(m->console);
        else if ((r = file_sink_open(m, s, t, &p->sink)) < 0)
                goto fail;

        /* The write end stays blocking: its description is the one the child's
         * fd 1/2 will share. Only tend's read end is O_NONBLOCK. */
        if (pipe2(fds, O_CLOEXEC) < 0) {
                r = log_error_errno(negative_errno(), "unit %s: pipe2: %s", s->name, strerror(errno));
                goto fail;
        }
        p->rfd = fds[0];
        p->wfd = fds[1];
        if (fcntl(p->rfd, F_SETFL, O_NONBLOCK) < 0) {
                r = log_error_errno(negative_errno(), "unit %s: fcntl: %s", s->name, strerror(errno));
                goto fail;
        }
        r = pipe_reading(p, true);
        if (r < 0) {
                r = log_error_errno(r, "unit %s: epoll_ctl: %s", s->name, strerror(-r));
                goto fail;
        }
        *ret = p;
        return 0;
fail:
        pipe_free(p);
        return r;
}

/* ------------------------------------------------------------------------ */
/* Draining (main exit, shutdown, free)                                      */
/* ------------------------------------------------------------------------ */

static unsigned stream_pipes(const logs_stream *s, struct logs_pipe *out[2]) {
        unsigned n = 0;
        if (s->pipe[0])
                out[n++] = s->pipe[0];
        if (s->pipe[1] && s->pipe[1] != s->pipe[0])
                out[n++] = s->pipe[1];
        return n;
}

static bool pipe_done(const struct logs_pipe *p) {
        return !p->flush_pending && !p->paused && p->in_len == 0 &&
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
                for (unsigned i = 0, n = stream_pipes(s, ps); i < n; i++) {
                        pipe_run_to_flush(ps[i]);
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
static int drain(logs_manager *m, logs_stream *only, usec_t deadline) {
        size_t n_pipes = 0;
        int r = 0;

        FOREACH_DRAIN_STREAM(s, m, only) {
                struct logs_pipe *ps[2];
                for (unsigned i = 0, n = stream_pipes(s, ps); i < n; i++, n_pipes++)
                        if (!ps[i]->flush_pending)
                                (void) pipe_mark_flush(ps[i]);
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
                                sink_unblock(w.sink[i]);
        }
out:
        free(w.pfd);
        free(w.sink);
        return r;
}

int logs_stream_drain(logs_stream *s, usec_t deadline) {
        if (!s)
                return -EINVAL;
        return drain(s->m, s, deadline);
}

int logs_manager_drain(logs_manager *m, usec_t deadline) {
        if (!m)
                return -EINVAL;
        return drain(m, NULL, deadline);
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */

static int stream_check_config(const logs_manager *m, const struct logs_stream_config *c) {
        if (!c->name || !c->name[0] || strlen(c->name) > LOGS_NAME_MAX)
                return -EINVAL;
        size_t ring = c->ring_bytes ?: m->ring_bytes;
        if (ring < LOGS_RING_MIN || ring > LOGS_RING_MAX)
                return -EINVAL;
        const struct logs_target *t[2] = { &c->stdout_target, &c->stderr_target };
        for (unsigned i = 0; i < 2; i++) {
                if ((unsigned) t[i]->type >= _LOGS_TARGET_MAX)
                        return -EINVAL;
                bool file = t[i]->type == LOGS_TARGET_FILE || t[i]->type == LOGS_TARGET_APPEND;
                if (file != (t[i]->path != NULL) || (file && t[i]->path[0] != '/'))
                        return -EINVAL;
        }
        return 0;
}

static int stream_copy_config(logs_stream *s, const struct logs_stream_config *c) {
        const struct logs_target *t[2] = { &c->stdout_target, &c->stderr_target };

        s->name = strdup(c->name);
        s->ident = c->syslog_identifier ? strdup(c->syslog_identifier) : s->name; /* shared when the same */
        if (!s->name || !s->ident)
                return -ENOMEM;
        for (unsigned i = 0; i < 2; i++) {
                s->target[i] = *t[i];
                if (t[i]->path) {
                        s->path[i] = strdup(t[i]->path);
                        if (!s->path[i])
                                return -ENOMEM;
                        s->target[i].path = s->path[i];
                }
        }
        return 0;
}

static int stream_open_pipes(logs_stream *s) {
        for (unsigned i = 0; i < 2; i++) {
                if (!target_has_pipe(&s->target[i]))
                        continue;
                if (i == 1 && s->pipe[0] && target_same(&s->target[0], &s->target[1])) {
                        s->pipe[1] = s->pipe[0]; /* one pipe for both (SPEC §4) */
                        continue;
                }
                int r = pipe_new(s, i == 0 ? LOGS_ORIGIN_STDOUT : LOGS_ORIGIN_STDERR, &s->target[i], &s->pipe[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int logs_stream_new(logs_manager *m, const struct logs_stream_config *c, logs_stream **ret) {
        int r;

        if (!m || !c || !ret)
                return -EINVAL;
        if ((r = stream_check_config(m, c)) < 0)
                return log_error_errno(r, "unit %s: invalid log configuration", c->name ? c->name : "(null)");
        _cleanup_(logs_stream_freep) logs_stream *s = calloc(1, sizeof *s);
        if (!s)
                return log_error_errno(-ENOMEM, "unit %s: out of memory", c->name);
        s->m = m;
        s->journal_fd[0] = s->journal_fd[1] = -1;
        s->ring.cap = c->ring_bytes ?: m->ring_bytes;
        /* Linked first so that a failure below is undone by logs_stream_free(). */
        s->next = m->streams;
        if (m->streams)
                m->streams->prev = s;
        m->streams = s;
        if ((r = stream_copy_config(s, c)) < 0)
                return log_error_errno(r, "unit %s: out of memory", c->name);
        if ((r = stream_open_pipes(s)) < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

/* What a free leaves behind unwritten: counted and said once. */
static void stream_note_loss(logs_stream *s) {
        struct logs_pipe *ps[2];
        size_t lost = 0;

        for (unsigned i = 0, n = stream_pipes(s, ps); i < n; i++) {
                int left = 0;
                lost += ps[i]->in_len;
                if (ioctl(ps[i]->rfd, FIONREAD, &left) >= 0 && left > 0)
                        lost += (size_t) left;
                if (ps[i]->sink->n_ref == 1 && ps[i]->sink->pending_owner == s)
                        lost += ps[i]->sink->pending_len - ps[i]->sink->pending_off;
        }
        if (lost > 0) {
                s->st.sink_lost_lines++;
                log_warning("unit %s: %zu bytes of log output lost: its sink stayed blocked until the unit's "
                            "log was closed", s->name, lost);
        }
}

logs_stream *logs_stream_free(logs_stream *s) {
        if (!s)
                return NULL;
        logs_manager *m = s->m;
        struct logs_pipe *ps[2];
        unsigned n = stream_pipes(s, ps);

        if (n > 0) {
                (void) drain(m, s, 0);
                stream_note_loss(s);
        }
        while (s->followers) {
                logs_follower *f = s->followers;
                follower_detach(f);
                if (f->notify)
                        f->notify(f, f->userdata);
        }
        for (unsigned i = 0; i < n; i++)
                pipe_free(ps[i]);
        logs_stream_spawn_done(s);
        if (s->prev)
                s->prev->next = s->next;
        else if (m->streams == s)
                m->streams = s->next;
        if (s->next)
                s->next->prev = s->prev;
        free(s->ring.buf);
        if (s->ident != s->name)
                free(s->ident);
        free(s->name);
        free(s->path[0]);
        free(s->path[1]);
        free(s);
        return NULL;
}

static int devnull_fd(logs_manager *m) {
        if (m->devnull < 0)
                m->devnull = open("/dev/null", O_WRONLY | O_NOCTTY | O_CLOEXEC);
        return m->devnull >= 0 ? m->devnull : negative_errno();
}

static int journal_open(logs_stream *s, unsigned i) {
        if (i == 1 && s->journal_fd[0] >= 0 && target_same(&s->target[0], &s->target[1])) {
                s->journal_fd[1] = s->journal_fd[0];
                return s->journal_fd[1];
        }
        int fd = sd_journal_stream_fd(s->ident, LOG_INFO, 0);
        if (fd < 0)
                return log_error_errno(fd, "unit %s: cannot connect %s to the journal (is systemd-journald running?): %s",
                                       s->name, i == 0 ? "stdout" : "stderr", strerror(-fd));
        s->journal_fd[i] = fd;
        return fd;
}

int logs_stream_prepare_spawn(logs_stream *s, int *ret_stdout, int *ret_stderr) {
        int fd[2];

        if (!s || !ret_stdout || !ret_stderr)
                return -EINVAL;
        logs_stream_spawn_done(s);
        for (unsigned i = 0; i < 2; i++) {
                switch (s->target[i].type) {
                case LOGS_TARGET_CONSOLE:
                case LOGS_TARGET_FILE:
                case LOGS_TARGET_APPEND:
                        fd[i] = s->pipe[i]->wfd;
                        break;
                case LOGS_TARGET_NULL:
                        fd[i] = devnull_fd(s->m);
                        if (fd[i] < 0)
                                return log_error_errno(fd[i], "unit %s: open /dev/null: %s", s->name, strerror(-fd[i]));
                        break;
                case LOGS_TARGET_INHERIT:
                        fd[i] = s->m->console_orig;
                        break;
                case LOGS_TARGET_JOURNAL:
                default:
                        fd[i] = journal_open(s, i);
                        if (fd[i] < 0) {
                                logs_stream_spawn_done(s);
                                return fd[i];
                        }
                        break;
                }
        }
        *ret_stdout = fd[0];
        *ret_stderr = fd[1];
        return 0;
}

void logs_stream_spawn_done(logs_stream *s) {
        if (!s)
                return;
        if (s->journal_fd[1] != s->journal_fd[0])
                safe_close(s->journal_fd[1]);
        s->journal_fd[0] = safe_close(s->journal_fd[0]);
        s->journal_fd[1] = -1;
}

void logs_stream_set_pid(logs_stream *s, pid_t pid) {
        if (s)
                s->pid = pid > 0 ? pid : 0;
}

int logs_stream_main_exited(logs_stream *s) {
        struct logs_pipe *ps[2];
        int r = 0;

        if (!s)
                return -EINVAL;
        for (unsigned i = 0, n = stream_pipes(s, ps); i < n; i++) {
                int k = pipe_mark_flush(ps[i]);
                if (k < 0) {
                        r = log_warning_errno(k, "unit %s: FIONREAD on its log pipe: %s", s->name, strerror(-k));
                        continue;
                }
                pipe_run_to_flush(ps[i]);
        }
        return r;
}

void logs_stream_get_stats(const logs_stream *s, struct logs_stream_stats *ret) {
        if (s && ret)
                *ret = s->st;
}

unsigned logs_stream_n_pipes(const logs_stream *s) {
        struct logs_pipe *ps[2];
        return s ? stream_pipes(s, ps) : 0;
}

/* ------------------------------------------------------------------------ */
/* Manager                                                                   */
/* ------------------------------------------------------------------------ */

int logs_manager_new(sd_event *event, const struct logs_manager_options *o, logs_manager **ret) {
        struct logs_manager_options def = { .console_fd = -1 };
        int r;

        if (!event || !ret)
                return -EINVAL;
        if (!o)
                o = &def;
        size_t ring = o->ring_bytes ?: LOGS_RING_DEFAULT;
        size_t follow = o->follower_queue_bytes ?: LOGS_FOLLOWER_QUEUE_DEFAULT;
        if (ring < LOGS_RING_MIN || ring > LOGS_RING_MAX || follow < LOGS_FOLLOWER_QUEUE_MIN)
                return -EINVAL;

        _cleanup_(logs_manager_freep) logs_manager *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(event);
        m->devnull = -1;
        m->pipes_ep = epoll_create1(EPOLL_CLOEXEC);
        if (m->pipes_ep < 0)
                return negative_errno();
        if ((r = sd_event_add_io(event, &m->pipes_src, m->pipes_ep, EPOLLIN, pipes_on_readable, m)) < 0)
                return r;
        (void) sd_event_source_set_description(m->pipes_src, "logs-pipes");
        m->console_orig = o->console_fd >= 0 ? o->console_fd : STDOUT_FILENO;
        m->ring_bytes = ring;
        m->follower_bytes = follow;
        m->scratch = malloc(SCRATCH_SIZE);
        m->linebuf = malloc(LOGS_LINE_MAX + 1);
        if (!m->scratch || !m->linebuf)
                return -ENOMEM;
        if ((r = console_open(m, m->console_orig, &m->console)) < 0)
                return log_error_errno(r, "logs: cannot open tend's stdout: %s", strerror(-r));
        *ret = TAKE_PTR(m);
        return 0;
}

logs_manager *logs_manager_free(logs_manager *m) {
        if (!m)
                return NULL;
        while (m->streams)
                logs_stream_free(m->streams);
        sd_event_source_disable_unref(m->pipes_src);
        safe_close(m->pipes_ep);
        sink_unref(m->console);
        safe_close(m->devnull);
        free(m->scratch);
        free(m->linebuf);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

int logs_manager_console_fd(const logs_manager *m) {
        if (!m || !m->console || m->console->kind == SINK_DISCARD)
                return -1;
        return m->console->fd;
}
