/* SPDX-License-Identifier: MIT */
/*
 * The log pipeline for units (SPEC §4 "Logs", §7 limits). Not tend's own
 * diagnostics (that is log.h): this module carries what the units write.
 *
 * Three objects:
 *
 *   logs_manager   one per tend: the sd-event loop it registers its io
 *                  sources on, the shared sink "tend's stdout" (the console),
 *                  a shared /dev/null, the read scratch buffer.
 *   logs_stream    one per loaded unit: owns the pipe(s) the unit's processes
 *                  write to and keeps them across restarts (the write ends
 *                  are handed to every spawn; the read ends stay with tend),
 *                  so no line is lost when a unit crashes. It also owns the
 *                  unit's ring of recent lines and its followers.
 *   logs_follower  one per `tendctl logs -f`: a bounded queue of new lines.
 *
 *   unit process ──pipe──▶ stream: split lines ──▶ sink (console with the
 *                                  "NAME[PID]: " prefix, or file:/append:)
 *                                              ├─▶ ring (recent lines)
 *                                              └─▶ followers
 *
 * null and inherit targets have no pipe: the unit's fd is connected directly
 * (/dev/null, tend's own stdout), tend is not in the path, and such output
 * has no ring. The journal target has a pipe like the console: tend sends
 * each line to journald's native socket as one entry with the unit's fields
 * (docs/logging.md "journal").
 *
 * A line may start with a syslog level prefix "<N>" (SyslogLevelPrefix=,
 * logs_parse_level_prefix()): it gives the line's priority, and is removed
 * from the line shown on the console, sent to the journal and kept in the
 * ring; file:/append: targets get the unit's bytes as they are.
 *
 * Backpressure: sinks are written without blocking. When a sink would block,
 * the stream stops reading its pipe (its io source is disabled) and keeps the
 * unread bytes in a bounded buffer; it resumes when the sink is writable
 * again. The unit's writes then block in the kernel once its pipe is full:
 * nothing is lost and only units writing to that sink wait. A line whose
 * write was cut short is completed before any other line reaches that sink,
 * so lines from different units never interleave. Only the ring and the
 * followers drop lines; sinks lose lines only when they fail (EPIPE, EIO,
 * ENOSPC…) or stay blocked through the final drain, and both are counted and
 * logged. docs/logging.md is the user-facing description.
 *
 * Conventions, for every function unless its comment says otherwise:
 *  - Return: 0 (or the non-negative value the comment names) on success, a
 *    negative errno on failure; -EINVAL for a NULL required pointer or a bad
 *    argument. ret_* out-parameters are written only on success.
 *  - Thread-safety: none. Every function is called from tend's event-loop
 *    thread (the thread that runs the sd_event given to logs_manager_new()).
 *  - Callbacks (logs_line_fn, logs_follower_notify_fn) run inside the
 *    module; they must not free the stream or the manager, and a notify
 *    callback must not free its follower (schedule that instead).
 *  - Every fd the module creates is O_CLOEXEC and owned by the object that
 *    created it; never close it. Writing to a pipe sink whose reader is gone
 *    raises SIGPIPE: the caller keeps SIGPIPE blocked or ignored (tend blocks
 *    it for its signalfd); sockets are written with MSG_NOSIGNAL.
 *  - Times are µs; line timestamps are CLOCK_REALTIME, deadlines are absolute
 *    CLOCK_MONOTONIC (common/time-util.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <syslog.h>

#include <systemd/sd-event.h>

#include "macro.h"
#include "time-util.h"

/* ------------------------------------------------------------------------ */
/* Limits and defaults (SPEC §7)                                             */
/* ------------------------------------------------------------------------ */

/* Longest line, in bytes of the unit's output without the newline. A longer
 * line is split into pieces of this size; every piece but the last is marked
 * LOGS_LINE_CONTINUES and written to its sink followed by LOGS_CONTINUES_MARKER
 * (then a newline). */
#define LOGS_LINE_MAX (48u * 1024u)
#define LOGS_CONTINUES_MARKER " [line continues]"

/* Bytes of ring per unit (SPEC §7: 4 KiB). Each line costs its text plus
 * LOGS_RING_RECORD_OVERHEAD bytes; a line longer than the ring is kept cut to
 * fit (LOGS_LINE_TRUNCATED). */
#define LOGS_RING_DEFAULT (4u * 1024u)
#define LOGS_RING_MIN 64u
#define LOGS_RING_MAX (16u * 1024u * 1024u)
#define LOGS_RING_RECORD_OVERHEAD 16u

/* Bytes a follower may have queued (text plus LOGS_RING_RECORD_OVERHEAD per
 * line) before it is dropped with a note. */
#define LOGS_FOLLOWER_QUEUE_DEFAULT (64u * 1024u)
#define LOGS_FOLLOWER_QUEUE_MIN 1024u

/* Bytes read from a pipe per wake-up, and the most a paused pipe buffers in
 * tend: one read plus one incomplete line. */
#define LOGS_READ_CHUNK (64u * 1024u)
#define LOGS_PIPE_BUFFER_MAX (LOGS_READ_CHUNK + LOGS_LINE_MAX)

/* Longest unit name (the prefix is "NAME[PID]: "). */
#define LOGS_NAME_MAX 255u

/* ------------------------------------------------------------------------ */
/* Targets                                                                   */
/* ------------------------------------------------------------------------ */

enum logs_target_type {
        LOGS_TARGET_CONSOLE,  /* tend's stdout, "NAME[PID]: " prefix, ring */
        LOGS_TARGET_FILE,     /* file:PATH, truncated when the stream opens it; ring */
        LOGS_TARGET_APPEND,   /* append:PATH; ring */
        LOGS_TARGET_NULL,     /* /dev/null: no pipe, no ring */
        LOGS_TARGET_INHERIT,  /* tend's own stdout fd itself: no prefix, no pipe, no ring */
        LOGS_TARGET_JOURNAL,  /* journald's native socket, one entry per line; ring */
        _LOGS_TARGET_MAX,
};

struct logs_target {
        enum logs_target_type type;
        const char *path;     /* absolute path for FILE/APPEND, NULL otherwise */
};

/* Parses a StandardOutput=/StandardError= value: "inherit", "null",
 * "journal", "file:PATH", "append:PATH" (PATH absolute), and "console" (tend's
 * own word for the prefixed stdout target; the unit parser uses it for the
 * default). ret->path points into s (borrowed). -EINVAL for anything else,
 * including systemd targets tend does not implement (tty, kmsg, socket, fd:…). */
int logs_target_parse(const char *s, struct logs_target *ret);

/* "console", "file", "append", "null", "inherit", "journal"; NULL if out of range. */
const char *logs_target_type_to_string(enum logs_target_type t);

/* True if journal_stream ("DEVICE:INODE", decimal, as systemd sets
 * $JOURNAL_STREAM) names the file fd refers to. False for NULL, malformed
 * text, or a bad fd. */
bool logs_journal_stream_matches(int fd, const char *journal_stream);

/* The default target for units that set none (SPEC §4): JOURNAL when
 * $JOURNAL_STREAM matches tend's stderr (tend runs under systemd with its
 * stderr connected to the journal), CONSOLE otherwise (e.g. in a container). */
enum logs_target_type logs_target_default(void);

/* ------------------------------------------------------------------------ */
/* Lines                                                                     */
/* ------------------------------------------------------------------------ */

/* journald's own socket for native entries. */
#define LOGS_JOURNAL_SOCKET "/run/systemd/journal/socket"

/* The default priority of a unit's lines: SyslogFacility=daemon, SyslogLevel=info. */
#define LOGS_PRIORITY_DEFAULT (LOG_DAEMON | LOG_INFO)

/* A syslog level prefix at the start of text[0..len), as journald reads one
 * on a stream (SyslogLevelPrefix=): "<N>", "<0N>" or "<00N>" with N in 0..7.
 * Returns the bytes it takes (3 to 5) and sets *level to N; 0 if text does not
 * start with one (*level untouched). Pure. */
size_t logs_parse_level_prefix(const char *text, size_t len, int *level);

enum logs_origin {
        LOGS_ORIGIN_STDOUT = 1, /* also lines of a pipe stdout and stderr share */
        LOGS_ORIGIN_STDERR = 2,
        LOGS_ORIGIN_TEND = 3,   /* a note from tend (LOGS_LINE_NOTE) */
};

#define LOGS_LINE_CONTINUES 0x1u /* piece of an over-long line; the next line continues it */
#define LOGS_LINE_PARTIAL   0x2u /* had no newline: flushed when the main process exited */
#define LOGS_LINE_TRUNCATED 0x4u /* ring only: text cut to fit the ring */
#define LOGS_LINE_NOTE      0x8u /* written by tend, not by the unit */

struct logs_line {
        usec_t realtime_usec;   /* CLOCK_REALTIME when tend read the line */
        pid_t pid;              /* the stream's pid when the line was read (0: none) */
        enum logs_origin origin;
        unsigned flags;         /* LOGS_LINE_* */
        int priority;           /* syslog level, LOG_EMERG (0) … LOG_DEBUG (7): the line's
                                 * "<N>" prefix, or the stream's SyslogLevel= */
        const char *text;       /* len bytes, NUL-terminated, no newline; may hold NULs */
        size_t len;
};

/* Receives one line; return 0 to go on, a negative errno to stop (it is
 * returned to the caller). line and its text are valid only during the call. */
typedef int (*logs_line_fn)(const struct logs_line *line, void *userdata);

/* ------------------------------------------------------------------------ */
/* Manager                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct logs_manager logs_manager;
typedef struct logs_stream logs_stream;
typedef struct logs_follower logs_follower;

struct logs_manager_options {
        /* The fd tend's console sink writes to; -1 = STDOUT_FILENO. Borrowed:
         * it must stay open while the manager lives. A pipe, FIFO or terminal
         * is reopened through /proc/self/fd/N to get tend's own file
         * description, which is then set O_NONBLOCK (the original description,
         * shared with whoever started tend, is left as it was); a socket is
         * written with send(MSG_DONTWAIT|MSG_NOSIGNAL); anything else (a
         * regular file, /dev/null) is written as it is. A closed fd makes the
         * console discard lines (rings and followers still get them), with a
         * warning. The INHERIT target hands this fd itself to units. */
        int console_fd;
        size_t ring_bytes;           /* per-stream default; 0 = LOGS_RING_DEFAULT */
        size_t follower_queue_bytes; /* per follower; 0 = LOGS_FOLLOWER_QUEUE_DEFAULT */
        const char *journal_socket;  /* journald's native socket; NULL = LOGS_JOURNAL_SOCKET (tests
                                      * give their own); copied */
        /* reexec: the manager of a re-executed tend: file: targets are opened
         * without truncating them (the first tend did, once: tend(8)
         * "RE-EXECUTING"). */
        bool resumed;
};

/* Creates the manager on event (a reference is taken). o may be NULL (all
 * defaults). Errors: -EINVAL (bad option), -ENOMEM, or the errno of opening the
 * console (a failed reopen falls back to a duplicate of console_fd set
 * O_NONBLOCK, with a warning, and is not an error). */
int logs_manager_new(sd_event *event, const struct logs_manager_options *o, logs_manager **ret);

/* Frees every stream still open (as logs_stream_free() does), makes one
 * non-blocking attempt to finish a line cut short on the console (a warning
 * says what is lost otherwise), closes every fd, drops the event reference.
 * Accepts NULL; returns NULL. */
logs_manager *logs_manager_free(logs_manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(logs_manager *, logs_manager_free);

/* The final drain at shutdown: reads what every stream's pipes hold now and
 * writes it, waiting for blocked sinks with poll() until deadline (absolute
 * CLOCK_MONOTONIC µs; 0 = do not wait). Bytes still unwritten at the deadline
 * stay buffered (logs_stream_free() or logs_manager_free() counts and reports
 * them). Returns 0 if everything was written, -ETIMEDOUT otherwise. */
int logs_manager_drain(logs_manager *m, usec_t deadline);

/* The drain before a re-exec (reexec.c): as logs_manager_drain(), but an
 * incomplete last line is not flushed: its bytes stay in the pipe's buffer,
 * for logs_stream_handover_get() to carry across the exec (SPEC §12,
 * tend(8) RE-EXECUTING). Same returns. Not thread-safe (the loop's thread). */
int logs_manager_drain_lines(logs_manager *m, usec_t deadline);

/* The fd the console sink writes to (tend's own description; -1 if the
 * console discards). Borrowed: for diagnostics and tests. */
int logs_manager_console_fd(const logs_manager *m);

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */

struct logs_stream_config {
        const char *name;               /* unit name: the prefix, and messages; borrowed: it must outlive
                                         * the stream (the unit's own name: not copied, SPEC §8) */
        const char *syslog_identifier;  /* journal identifier; NULL = name; copied */
        struct logs_target stdout_target, stderr_target; /* paths copied */
        size_t ring_bytes;              /* 0 = the manager's default */
        int syslog_priority;            /* SyslogFacility= | SyslogLevel= of lines without a prefix;
                                         * 0 = LOGS_PRIORITY_DEFAULT */
        bool no_level_prefix;           /* SyslogLevelPrefix=no: "<N>" is text like any other */
};

/* Creates a unit's stream when the unit is loaded: its ring and settings,
 * no fd (issue 19's fd budget: its pipes are made before a start,
 * logs_stream_open_pipes). Errors: -EINVAL (empty or too long name, bad
 * target, ring size out of range), -ENOMEM; each is logged naming the unit. */
int logs_stream_new(logs_manager *m, const struct logs_stream_config *c, logs_stream **ret);

/* The stream's pipes, made if they are not (idempotent; called before each
 * start, and by logs_stream_prepare_spawn): one pipe if stdout and stderr go
 * to the same ring-bearing target (console, journal, or the same file:/
 * append: path), two if to two of them, none for null/inherit. A file:/
 * append: target is opened with its pipe (file: is truncated then, once: its
 * pipe is never closed, and lines of every later instance follow); a FIFO is
 * opened O_NONBLOCK and must have a reader (-ENXIO otherwise). Errors:
 * -EINVAL, -ENOMEM, -EMFILE/-ENFILE (the caller fails the start "out of file
 * descriptors"), or the errno of opening the file; each logged naming the unit. */
int logs_stream_open_pipes(logs_stream *s);

/* The unit is dead (no process left): its pipes are read to the end (a last
 * partial line flushed as a line) and closed; the ring and the followers
 * stay. -EBUSY (nothing closed) when a sink still holds bytes of it (a
 * blocked console: the caller tries again at the next death) or a target is
 * a file:/append: path (kept open, see above); -EINVAL for NULL. */
int logs_stream_close_pipes(logs_stream *s);

/* Drains without waiting (what the pipes hold now is read and written where
 * the sinks take it), then frees the stream: closes its pipes and the
 * journal fds, ends its followers (they get their queued lines, then
 * -EPIPE). Bytes a blocked sink did not take are lost: counted and reported
 * in one warning naming the unit. Accepts NULL; returns NULL. */
logs_stream *logs_stream_free(logs_stream *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(logs_stream *, logs_stream_free);

/* Before each fork of any of the unit's processes: *ret_stdout and
 * *ret_stderr receive the fds the child must get as its fd 1 and 2 (the same
 * fd for both when they share a target). They are borrowed and O_CLOEXEC
 * (except tend's own stdout for INHERIT): the spawn code dup2()s them in the
 * child. For a journal target the manager's socket to journald is
 * connected here if it is not yet; failure (journald not reachable: -ENOENT,
 * -ECONNREFUSED, …) is logged naming the unit and returned. Call
 * logs_stream_spawn_done() once the child exists (or the spawn failed). */
int logs_stream_prepare_spawn(logs_stream *s, int *ret_stdout, int *ret_stderr);

/* After the fork (or a failed spawn): the pipes' write ends are closed (the
 * child has its copies; the next logs_stream_prepare_spawn opens new ones
 * through /proc/self/fd). Idempotent; NULL accepted. */
void logs_stream_spawn_done(logs_stream *s);

/* The pid shown in the prefix and recorded with each line, as of now: the
 * unit's main pid (the manager may set a control process's pid while
 * ExecStartPre= runs). 0 = none: the prefix is then "NAME: ". Lines already
 * read keep the pid they were read with. */
void logs_stream_set_pid(logs_stream *s, pid_t pid);

/* The main process exited: whatever its pipes hold now is read (up to that
 * point only: a new instance's bytes are not mixed in) and shown with the
 * current pid, and an incomplete last line is flushed as a line
 * (LOGS_LINE_PARTIAL). Synchronous unless a sink is blocked; then it happens
 * when the sink takes the bytes, still with that pid. Call it before
 * logs_stream_set_pid() with the next pid. Returns 0, or the errno of FIONREAD. */
int logs_stream_main_exited(logs_stream *s);

/* Calls fn for the last n lines of the ring (all with SIZE_MAX), oldest
 * first. Returns the number of lines passed, or fn's negative answer. To
 * follow without a gap, call logs_stream_follow() in the same loop iteration. */
int logs_stream_ring(logs_stream *s, size_t n, logs_line_fn fn, void *userdata);

/* Reads and writes what s holds, waiting for its blocked sinks with poll()
 * until deadline (as logs_manager_drain() does for every stream). Returns 0 if
 * everything was written, -ETIMEDOUT otherwise. */
int logs_stream_drain(logs_stream *s, usec_t deadline);

struct logs_stream_stats {
        uint64_t bytes;            /* read from the pipes */
        uint64_t lines;            /* emitted (pieces of a split line count one each) */
        uint64_t split_pieces;     /* LOGS_LINE_CONTINUES pieces */
        uint64_t partial_lines;    /* LOGS_LINE_PARTIAL flushes */
        uint64_t ring_evicted;     /* lines pushed out of the ring (its bound) */
        uint64_t ring_truncated;   /* lines cut to fit the ring */
        uint64_t followers_dropped;/* followers that fell behind */
        uint64_t sink_pauses;      /* times reading stopped because a sink was blocked */
        uint64_t sink_lost_lines;  /* lines a failing sink did not take */
};

/* Counters since the stream was created. */
void logs_stream_get_stats(const logs_stream *s, struct logs_stream_stats *ret);

/* Number of pipes the stream owns (0, 1 or 2). */
unsigned logs_stream_n_pipes(const logs_stream *s);

/* ------------------------------------------------------------------------ */
/* Followers (`tendctl logs -f`)                                            */
/* ------------------------------------------------------------------------ */

/* Called when the follower's queue goes from empty to non-empty, and when the
 * follower ends (dropped, or its stream freed). Typically enables the control
 * connection's EPOLLOUT source. Must not free the follower or the stream. */
typedef void (*logs_follower_notify_fn)(logs_follower *f, void *userdata);

/* Subscribes to the lines s emits from now on. max_bytes bounds the queue (0 =
 * the manager's default; at least LOGS_FOLLOWER_QUEUE_MIN). A follower whose
 * queue would exceed it is dropped: its queued lines are discarded and
 * replaced by one LOGS_LINE_NOTE line saying so, it is detached (counted in
 * followers_dropped, a debug message), and after the note logs_follower_next()
 * answers -EPIPE. The sinks and the ring are unaffected. */
int logs_stream_follow(logs_stream *s, size_t max_bytes, logs_follower_notify_fn notify, void *userdata,
                       logs_follower **ret);

/* Takes the next queued line into *ret_line; its text stays valid until the
 * next call on f or its free. Returns 1 with a line, 0 if none is queued now,
 * -EPIPE once the queue is empty and the follower has ended. */
int logs_follower_next(logs_follower *f, struct logs_line *ret_line);

/* Unsubscribes and frees. Accepts NULL; returns NULL. */
logs_follower *logs_follower_free(logs_follower *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(logs_follower *, logs_follower_free);
