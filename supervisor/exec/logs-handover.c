/* SPDX-License-Identifier: MIT */
/* reexec: a unit's log stream across execve (logs-handover.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logs-handover.h"
#include "logs-internal.h"
#include "macro.h"

static int set_cloexec(int fd, bool on) {
        int f = fcntl(fd, F_GETFD);
        if (f < 0 || fcntl(fd, F_SETFD, on ? f | FD_CLOEXEC : f & ~FD_CLOEXEC) < 0)
                return negative_errno();
        return 0;
}

int logs_stream_handover_get(logs_stream *s, bool cloexec, struct logs_handover *ret) {
        struct logs_pipe *p[2];
        *ret = (struct logs_handover) { .n_pipes = logs_stream_pipes(s, p) };
        ret->shared = s->pipe[0] && s->pipe[1] == s->pipe[0];
        for (unsigned i = 0; i < ret->n_pipes; i++) {
                /* The read end only (issue 19's fd budget: tend holds no
                 * write end between spawns; the next spawn opens one). */
                int k = set_cloexec(p[i]->rfd, cloexec);
                if (k < 0)
                        return k;
                ret->pipe[i] = (struct logs_handover_pipe) { .rfd = p[i]->rfd, .in = p[i]->in, .in_len = p[i]->in_len };
        }
        if (s->ring.buf && s->ring.count > 0) {
                ret->ring = s->ring.buf;
                ret->ring_cap = s->ring.cap;
                ret->ring_head = s->ring.head;
                ret->ring_used = s->ring.used;
                ret->ring_count = s->ring.count;
        }
        return 0;
}

/* p takes the handed pipe's unread bytes. */
static int pipe_take_in(struct logs_pipe *p, const struct logs_handover_pipe *h) {
        if (h->in_len == 0)
                return 0;
        if (!(p->in = malloc(h->in_len)))
                return -ENOMEM;
        memcpy(p->in, h->in, h->in_len);
        p->in_len = h->in_len;
        return 0;
}

/* The pipes made from h's read ends: on failure none is left, h's fds the caller's. */
static int pipes_take(logs_stream *s, const struct logs_handover *h) {
        int rfd[2] = { h->pipe[0].rfd, h->pipe[1].rfd }, k = 0;
        if (h->n_pipes == 0)
                return 0;
        for (unsigned i = 0; k >= 0 && i < h->n_pipes; i++)
                if (h->pipe[i].rfd < 0 || h->pipe[i].in_len > SCRATCH_SIZE)
                        k = -EINVAL;
        if (k >= 0)
                k = logs_stream_make_pipes(s, rfd, h->n_pipes);
        struct logs_pipe *p[2];
        unsigned n = logs_stream_pipes(s, p);
        for (unsigned i = 0; k >= 0 && i < n; i++)
                k = pipe_take_in(p[i], &h->pipe[i]);
        if (k < 0) {
                for (unsigned i = 0; i < n; i++)
                        logs_pipe_free(logs_pipe_disown(p[i]));
                s->pipe[0] = s->pipe[1] = NULL;
        }
        return k;
}

/* The ring as it was, when the new stream's is of the same size. */
static void ring_take(logs_stream *s, const struct logs_handover *h) {
        if (!h->ring || h->ring_cap != s->ring.cap || h->ring_head >= h->ring_cap || h->ring_used > h->ring_cap)
                return;
        uint8_t *buf = s->ring.buf ? s->ring.buf : malloc(h->ring_cap);
        if (!buf)
                return; /* the recent lines are not shown: nothing else is lost */
        memcpy(buf, h->ring, h->ring_cap);
        s->ring.buf = buf;
        s->ring.head = h->ring_head;
        s->ring.used = h->ring_used;
        s->ring.count = h->ring_count;
}

int logs_stream_handover_put(logs_stream *s, const struct logs_handover *h) {
        struct logs_pipe *p[2];
        bool shared;
        if (logs_stream_pipes(s, p) > 0)
                return -EEXIST;
        if (h->n_pipes > 0 && (logs_stream_pipe_layout(s, &shared) != h->n_pipes || shared != h->shared))
                return -ESTALE;
        int k = pipes_take(s, h);
        if (k < 0)
                return k;
        ring_take(s, h);
        return 0;
}
