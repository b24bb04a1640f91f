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
                int k;
                if ((k = set_cloexec(p[i]->rfd, cloexec)) < 0 || (k = set_cloexec(p[i]->wfd, cloexec)) < 0)
                        return k;
                ret->pipe[i] = (struct logs_handover_pipe) {
                        .rfd = p[i]->rfd, .wfd = p[i]->wfd, .in = p[i]->in, .in_len = p[i]->in_len,
                };
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

/* p takes the handed pipe's fds and unread bytes. */
static int pipe_take(struct logs_pipe *p, const struct logs_handover_pipe *h) {
        char *in = NULL;
        if (h->in_len > SCRATCH_SIZE)
                return -EINVAL;
        if (h->in_len > 0 && !(in = malloc(h->in_len)))
                return -ENOMEM;
        int k = logs_pipe_reading(p, false);
        if (k < 0) {
                free(in);
                return k;
        }
        safe_close(p->rfd);
        safe_close(p->wfd);
        p->rfd = h->rfd;
        p->wfd = h->wfd;
        (void) set_cloexec(p->rfd, true);
        (void) set_cloexec(p->wfd, true);
        (void) fcntl(p->rfd, F_SETFL, O_NONBLOCK);
        free(p->in);
        if (in)
                memcpy(in, h->in, h->in_len);
        p->in = in;
        p->in_len = h->in_len;
        return logs_pipe_reading(p, true);
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
        unsigned n = logs_stream_pipes(s, p);
        bool shared = s->pipe[0] && s->pipe[1] == s->pipe[0];
        if (n != h->n_pipes || shared != h->shared)
                return -ESTALE;
        for (unsigned i = 0; i < n; i++) {
                int k = pipe_take(p[i], &h->pipe[i]);
                if (k < 0)
                        return k;
        }
        ring_take(s, h);
        return 0;
}
