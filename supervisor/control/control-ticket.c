/* SPDX-License-Identifier: MIT */
/*
 * Deferred answers (control.h "tickets"; docs/control-protocol.md "cluster"):
 * a request whose answer the manager gives later, from its own completion
 * (the cluster view's hosts: etcd's LeaseTimeToLive asked without blocking
 * the loop). The connection waits in CONN_TICKET — no idle timeout, its
 * EPOLLIN off, EPOLLHUP still seen — holding one reference on its ticket,
 * the manager another. control_ticket_answer() records the answer and wakes
 * the server's defer source, which queues it with the request's own
 * formatter: never from inside the manager's call. A client that goes away
 * detaches the ticket (c NULL): the manager's late answer is then dropped.
 */
#include <errno.h>
#include <stdlib.h>

#include <json-c/json.h>

#include "control-internal.h"

struct control_ticket {
        unsigned n_ref;
        struct conn *c; /* NULL once the client has gone (or was answered) */
        ticket_answer_fn answer;
        bool answered;
        int r;
        struct json_object *items;
};

struct control_ticket *conn_ticket_new(struct conn *c, ticket_answer_fn answer) {
        struct control_ticket *t = calloc(1, sizeof *t);
        if (!t)
                return NULL;
        *t = (struct control_ticket) { .n_ref = 1, .c = c, .answer = answer };
        c->ticket = t;
        c->phase = CONN_TICKET;
        return t;
}

void conn_ticket_release(struct conn *c) {
        struct control_ticket *t = c->ticket;
        if (!t)
                return;
        c->ticket = NULL;
        t->c = NULL;
        json_object_put(t->items);
        t->items = NULL;
        (void) control_ticket_unref(t);
}

struct control_ticket *control_ticket_ref(struct control_ticket *t) {
        if (t)
                t->n_ref++;
        return t;
}

struct control_ticket *control_ticket_unref(struct control_ticket *t) {
        if (t && --t->n_ref == 0) {
                json_object_put(t->items);
                free(t);
        }
        return NULL;
}

bool control_ticket_waiting(const struct control_ticket *t) {
        return t && t->c && !t->c->dead && !t->answered;
}

void control_ticket_answer(struct control_ticket *t, int r, struct json_object *items) {
        if (!control_ticket_waiting(t))
                return; /* the client has gone: dropped */
        t->answered = true;
        t->r = r;
        t->items = json_object_get(items);
        (void) sd_event_source_set_enabled(t->c->s->tickets_source, SD_EVENT_ONESHOT);
}

int tickets_answered_cb(sd_event_source *src, void *userdata) {
        struct control_server *s = userdata;
        struct conn *next;
        for (struct conn *c = s->conns; c; c = next) {
                next = c->next;
                struct control_ticket *t = c->ticket;
                if (c->phase != CONN_TICKET || !t || !t->answered || c->dead)
                        continue;
                struct json_object *items = json_object_get(t->items);
                int r = t->r;
                ticket_answer_fn answer = t->answer;
                conn_end_request(c); /* releases the ticket */
                answer(c, r, items);
                json_object_put(items);
                conn_done(c);
        }
        return 0;
}
