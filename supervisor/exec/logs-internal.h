/* SPDX-License-Identifier: MIT */
/*
 * What the log pipeline's files share (logs.c lists them and gives the
 * design); not for other modules, which use logs.h. Everything runs on the
 * manager's event loop thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "logs.h"

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

#define SCRATCH_SIZE LOGS_PIPE_BUFFER_MAX
#define BATCH_LINES 64u
#define IOV_PER_LINE 5u /* prefix, text (+ newline), marker, newline; journal: PRIORITY=, fields, size, text, newline */

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
        bool journal;   /* journald's native socket: one entry per line (fields, then MESSAGE) */
        bool connected; /* journal: connected to the manager's journal_path */
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
        uint8_t origin;        /* enum logs_origin, and the line's syslog level << RING_PRIORITY_SHIFT */
        uint8_t flags;
};
#define RING_ORIGIN_MASK 0x0fu
#define RING_PRIORITY_SHIFT 4
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
        const char *name;            /* borrowed (logs_stream_config) */
        char *ident;                 /* owned, or name (no SyslogIdentifier=) */
        struct logs_target target[2];
        char *path[2];
        struct logs_pipe *pipe[2];   /* [1] may equal [0]: one shared pipe */
        pid_t pid;
        uint8_t priority;            /* SyslogFacility= | SyslogLevel= */
        bool level_prefix;           /* SyslogLevelPrefix= */
        bool evict_logged, trunc_logged; /* (here: no hole, 232 B; one per unit, SPEC §8) */
        struct ring ring;
        logs_follower *followers;
        struct logs_stream_stats st;
};

struct logs_manager {
        sd_event *event;
        int console_orig;            /* borrowed: handed to INHERIT units */
        struct logs_sink *console;
        struct logs_sink *journal;   /* journald's native socket, made at the first journal stream */
        char *journal_path;
        int devnull;
        size_t ring_bytes, follower_bytes;
        bool resumed;                /* reexec: file: targets not truncated (logs_manager_options) */
        bool keep_partial;           /* reexec drain: a line's start is kept, not flushed (logs_manager_drain_lines) */
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
        uint8_t priority;      /* syslog level */
        uint64_t size_le;      /* journal: the MESSAGE size, little-endian */
        size_t end;            /* offset in the buffer just after the line */
        size_t wire;           /* bytes this line takes on the sink */
        unsigned iov_start, iov_n;
};

struct batch {
        struct bline l[BATCH_LINES];
        struct iovec iov[BATCH_LINES * IOV_PER_LINE];
        unsigned n, niov;
        size_t total;
        const char *prefix;    /* console: "NAME[PID]: "; journal: the stream's fields, then "MESSAGE\n" */
        size_t prefix_len;
        bool journal;          /* lines as journal entries */
};

/* The targets' names, by enum logs_target_type (logs.c). */
extern const char *const target_names[_LOGS_TARGET_MAX];

/* ------------------------------------------------------------------------ */
/* logs-ring.c: the ring and the followers                                   */
/* ------------------------------------------------------------------------ */

/* Unlinks f from its stream (if still linked) and marks it ended. */
void logs_follower_detach(logs_follower *f);

/* Line b of pipe p, which its sink accepted or committed at now: into the
 * stream's ring and to its followers. */
void logs_deliver(struct logs_pipe *p, const struct bline *b, usec_t now);

/* ------------------------------------------------------------------------ */
/* logs-sink.c: sinks                                                        */
/* ------------------------------------------------------------------------ */

/* Offers the batch to the sink. Returns how many lines it took (written,
 * committed, or lost to a failure); fewer than offered means it is blocked. */
unsigned logs_sink_take(struct logs_sink *k, const struct batch *b, logs_stream *s);

/* EPOLLOUT: finish the committed line, then let the paused pipes go on, in the
 * order they stopped, until one of them blocks the sink again. */
void logs_sink_unblock(struct logs_sink *k);

/* Takes p off k's queue of paused pipes, if it is on it. */
void logs_sink_unwait(struct logs_sink *k, struct logs_pipe *p);

/* A reference more; returns k. */
struct logs_sink *logs_sink_ref(struct logs_sink *k);
/* A reference less (the last frees k, its pending rest dropped); returns NULL. NULL is accepted. */
struct logs_sink *logs_sink_unref(struct logs_sink *k);

/* tend's stdout (SPEC §4): our own description of it, non-blocking. 0 with
 * *ret (one reference, the caller's), or a negative errno. */
int logs_console_open(logs_manager *m, int fd, struct logs_sink **ret);

/* journald's native socket of m (made at the first call, one reference
 * more each call): 0 with *ret, or a negative errno. Not connected yet. */
int logs_journal_sink(logs_manager *m, struct logs_sink **ret);
/* Connects m's journal sink if it is not: 0 or a negative errno. */
int logs_journal_connect(logs_manager *m);

/* file:PATH, append:PATH of stream s: 0 with *ret (one reference, the
 * caller's), or a negative errno, logged. */
int logs_file_sink_open(logs_manager *m, const logs_stream *s, const struct logs_target *t, struct logs_sink **ret);

/* ------------------------------------------------------------------------ */
/* logs-pipe.c: pipes, draining                                              */
/* ------------------------------------------------------------------------ */

/* Reads one chunk (if do_read) after the leftover, emits the lines. A
 * pending flush caps the read at its offset and flushes the partial line
 * there. Returns nothing: errors are logged, the loop goes on. */
void logs_pipe_pump(struct logs_pipe *p, bool do_read);

/* Adds the pipe's read end to the manager's set, or takes it out. 0 or a
 * negative errno (epoll_ctl's). */
int logs_pipe_reading(struct logs_pipe *p, bool on);

/* The sd-event handler of the manager's pipe epoll set (userdata: the manager). */
int logs_pipes_on_readable(sd_event_source *src, int fd, uint32_t revents, void *userdata);
/* p's write end for a spawn: the one it has, or a new one opened through
 * /proc/self/fd (tend closes it after each spawn: issue 19's fd budget), and
 * p read again. The fd (owned by p) or a negative errno (-EMFILE, -ENOENT
 * without /proc). */
int logs_pipe_writer(struct logs_pipe *p);

/* Sets the flush point to what the pipe holds now. 0 or a negative errno. */
int logs_pipe_mark_flush(struct logs_pipe *p);
/* Reads and emits up to the flush point unless the sink blocks. */
void logs_pipe_run_to_flush(struct logs_pipe *p);

/* A pipe of stream s for origin, writing to target t: 0 with *ret (owned by
 * the stream), or a negative errno, logged. rfd < 0: a new pipe; else
 * (reexec) the read end of a pipe handed over by the previous tend, taken
 * on success (O_CLOEXEC and O_NONBLOCK set; no write end until the next
 * spawn, logs_pipe_writer), left to the caller on failure. */
int logs_pipe_new(logs_stream *s, enum logs_origin origin, const struct logs_target *t, int rfd,
                  struct logs_pipe **ret);
/* reexec: p's read end out of the epoll set and no longer p's (the caller
 * keeps it: a handover that failed); returns p, for logs_pipe_free(). */
struct logs_pipe *logs_pipe_disown(struct logs_pipe *p);
/* The pipes s's targets need (logs.c): *ret_shared when stdout and stderr
 * share one; returns how many distinct ones (0, 1, 2). */
unsigned logs_stream_pipe_layout(const logs_stream *s, bool *ret_shared);
/* logs_stream_open_pipes() with the read ends handed over (reexec): the
 * i-th pipe made takes rfd[i] (n of them; -ESTALE when more are needed).
 * rfd NULL: new pipes. 0 or a negative errno (logs_pipe_new's). */
int logs_stream_make_pipes(logs_stream *s, const int *rfd, unsigned n);
/* Frees p (its leftover dropped); returns NULL. NULL is accepted. */
struct logs_pipe *logs_pipe_free(struct logs_pipe *p);

/* s's distinct pipes (a shared one once) into out; returns how many. */
unsigned logs_stream_pipes(const logs_stream *s, struct logs_pipe *out[2]);

/* Runs every pipe of the streams (one stream, or all of m's) to its flush
 * point — what it holds now — waiting with poll() for blocked sinks until
 * deadline. 0; -ETIMEDOUT (the deadline passed first), -ENOMEM, or poll()'s error. */
int logs_drain(logs_manager *m, logs_stream *only, usec_t deadline);
