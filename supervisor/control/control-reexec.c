/* SPDX-License-Identifier: MIT */
/*
 * daemon-reexec's deferred answer (control.h; docs/control-protocol.md
 * "daemon-reexec"): the request waits in CONN_REEXEC — no idle timeout, its
 * EPOLLIN off, EPOLLHUP still seen — until the manager abandons the re-exec
 * (answered failed here) or executes the new binary (the connection handed
 * over with the exec, answered by the new tend once it has resumed). A
 * client that goes away meanwhile changes nothing: the re-exec goes on.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "control-internal.h"

bool conn_reexec_waiting(const struct conn *c) {
        return c->phase == CONN_REEXEC && !c->dead;
}

void handle_daemon_reexec(struct conn *c) {
        struct control_server *s = c->s;
        char why[256] = "";
        /* Waiting before the manager is asked: it may abandon at once. */
        c->phase = CONN_REEXEC;
        c->reexec_abandoned = false;
        int r = s->ops.daemon_reexec ? s->ops.daemon_reexec(s->userdata, why, sizeof why) : -EOPNOTSUPP;
        if (r < 0) {
                conn_end_request(c);
                answer_error(c, CONTROL_ERROR_FAILED, "not re-executing: %s", why[0] ? why : strerror(-r));
        }
}

void control_server_reexec_abandoned(struct control_server *s, const char *why) {
        if (!s)
                return;
        bool any = false;
        for (struct conn *c = s->conns; c; c = c->next)
                if (conn_reexec_waiting(c))
                        any = c->reexec_abandoned = true;
        snprintf(s->reexec_why, sizeof s->reexec_why, "%s", why && *why ? why : "abandoned");
        if (any)
                (void) sd_event_source_set_enabled(s->reexec_source, SD_EVENT_ONESHOT);
}

int reexec_abandoned_cb(sd_event_source *src, void *userdata) {
        struct control_server *s = userdata;
        struct conn *next;
        for (struct conn *c = s->conns; c; c = next) {
                next = c->next;
                if (!conn_reexec_waiting(c) || !c->reexec_abandoned)
                        continue;
                conn_end_request(c);
                answer_error(c, CONTROL_ERROR_FAILED, "not re-executing: %s", s->reexec_why);
                conn_done(c);
        }
        return 0;
}

size_t control_server_handover_waiting(struct control_server *s, int *fds, size_t max, bool cloexec) {
        size_t n = 0;
        for (struct conn *c = s ? s->conns : NULL; c && n < max; c = c->next) {
                if (conn_reexec_waiting(c) && conn_handover_fd(c, cloexec))
                        fds[n++] = c->fd;
        }
        return n;
}

void control_server_adopt_answered(struct control_server *s, int fd) {
        struct conn *c = conn_adopt(s, fd);
        if (!c)
                return;
        conn_queue(c, answer_result(true));
        conn_done(c);
}
