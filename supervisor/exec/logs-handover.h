/* SPDX-License-Identifier: MIT */
/*
 * reexec: a unit's log stream handed from one tend to the next across
 * execve (docs/tend.8.md "RE-EXECUTING"). What is carried is what exists
 * (issue 19's fd budget): a unit that holds no pipe (stopped) carries none;
 * one that does carries each pipe's READ end only — tend holds no write end
 * between spawns, the unit's processes hold theirs, and the new tend opens
 * one through /proc/self/fd at the unit's next spawn, as for any spawn. The
 * read ends keep their numbers through execve (the old tend clears their
 * O_CLOEXEC), so the unit's processes go on writing into the same pipes and
 * the bytes they hold are read by the new tend: no line is lost. The bytes
 * read but not yet cut into lines and the ring of recent lines travel as data.
 * A line cut short at the exec is carried whole: logs_manager_drain_lines()
 * keeps its start (it is not flushed as a partial line), its end is read after.
 * Single-threaded (tend's loop), like logs.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "logs.h"

struct logs_handover_pipe {
        int rfd;         /* the read end */
        const void *in;  /* bytes read, not yet emitted (borrowed) */
        size_t in_len;
};

struct logs_handover {
        unsigned n_pipes;            /* 0, 1 or 2 */
        bool shared;                 /* stdout and stderr share pipe[0] */
        struct logs_handover_pipe pipe[2];
        const void *ring;            /* the ring's bytes (borrowed), NULL when it holds none */
        size_t ring_cap, ring_head, ring_used, ring_count;
};

/* The old tend: fills *ret from s (pointers borrowed from s, valid until s
 * changes): its pipes' read ends (none when it holds no pipe). With cloexec
 * false they lose O_CLOEXEC (for the execve; true puts it back when the
 * re-exec failed). 0 or the errno of fcntl. */
int logs_stream_handover_get(logs_stream *s, bool cloexec, struct logs_handover *ret);

/* The new tend: s, made from the same output settings and holding no pipe
 * yet (pipes are made at a start, none at load), has its pipes built from
 * h's read ends (O_CLOEXEC again, no write end until its next spawn), and
 * takes h's unread bytes and ring. On success h's fds are the stream's; on
 * failure the caller keeps them (and s has no pipe). -ESTALE: h's pipes do
 * not fit s (the unit's output settings changed: the caller closes h's
 * fds), -EEXIST (s has pipes already), -EINVAL (an fd < 0, too many unread
 * bytes), -ENOMEM, the errno of fcntl, epoll_ctl, or of opening a file:
 * target. */
int logs_stream_handover_put(logs_stream *s, const struct logs_handover *h);
