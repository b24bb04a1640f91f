/* SPDX-License-Identifier: MIT */
/*
 * The log pipeline's ring and followers (logs.c): a line its sink accepted
 * is delivered to both, in the sink's order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "log.h"
#include "logs.h"
#include "logs-internal.h"

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
                .origin = (uint8_t) (l->origin | (l->priority & LOG_PRIMASK) << RING_PRIORITY_SHIFT),
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
                                .realtime_usec = h.ts, .pid = h.pid, .origin = h.origin & RING_ORIGIN_MASK,
                                .priority = h.origin >> RING_PRIORITY_SHIFT,
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

void logs_follower_detach(logs_follower *f) {
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
        logs_follower_detach(f);
        struct logs_line nl = {
                .realtime_usec = l->realtime_usec, .pid = 0, .origin = LOGS_ORIGIN_TEND, .priority = LOG_NOTICE,
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
        logs_follower_detach(f);
        follower_clear(f);
        free(f->cur);
        free(f);
        return NULL;
}

/* ------------------------------------------------------------------------ */
/* Delivery: a line the sink accepted goes to the ring and the followers     */
/* ------------------------------------------------------------------------ */

void logs_deliver(struct logs_pipe *p, const struct bline *b, usec_t now) {
        logs_stream *s = p->s;
        struct logs_line l = {
                .realtime_usec = now, .pid = p->read_pid, .origin = p->origin,
                .flags = b->flags, .priority = b->priority, .text = b->text, .len = b->len,
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
