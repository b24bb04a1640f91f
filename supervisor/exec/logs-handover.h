/* SPDX-License-Identifier: MIT */
/*
 * reexec: a unit's log stream handed from one tend to the next across
 * execve (docs/tend.8.md "RE-EXECUTING"). The pipes' fds keep their numbers
 * through execve (the old tend clears their O_CLOEXEC), so the unit's
 * processes go on writing into the same pipes and the bytes they hold are
 * read by the new tend: no line is lost. The bytes read but not yet cut into
 * lines and the ring of recent lines travel as data.
 * Single-threaded (tend's loop), like logs.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "logs.h"

struct logs_handover_pipe {
        int rfd, wfd;
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
 * changes). With cloexec false the pipes' fds lose O_CLOEXEC (for the
 * execve; true puts it back when the re-exec failed). 0 or the errno of fcntl. */
int logs_stream_handover_get(logs_stream *s, bool cloexec, struct logs_handover *ret);

/* The new tend: s, made from the same output settings, takes h's pipes
 * instead of its own (closed), O_CLOEXEC again, and h's unread bytes and
 * ring. On success h's fds are the stream's; on failure the caller keeps
 * them. -ESTALE: h's pipes do not fit s (the unit's output settings
 * changed: the caller closes h's fds), -ENOMEM, the errno of epoll_ctl. */
int logs_stream_handover_put(logs_stream *s, const struct logs_handover *h);
