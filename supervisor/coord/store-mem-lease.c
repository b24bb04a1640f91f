/* SPDX-License-Identifier: MIT */
/*
 * Lease objects of the in-memory backend (docs/store.md §1.9). A lease's
 * deadline is USEC_INFINITY while kept alive (the holder is this process:
 * renewed at every instant, no timer, no wake-up), else its last renewal +
 * its TTL; store-mem.c's expiry ends it like a key. Its keys are found by
 * scanning the ephemeral map when it ends (a lease ends once).
 */
#include <errno.h>
#include <stdlib.h>

#include "store-mem-internal.h"

struct mem_lease *mem_lease_first(const struct store_mem *s) {
        struct mem_lease *first = NULL;

        for (struct mem_lease *l = s->leases; l; l = l->next)
                if (!l->ended && (!first || l->deadline < first->deadline))
                        first = l;
        return first;
}

void mem_lease_unlink(struct store_mem *s, struct mem_lease *l) {
        if (l->prev)
                l->prev->next = l->next;
        else
                s->leases = l->next;
        if (l->next)
                l->next->prev = l->prev;
        free(l);
}

int mem_lease_end(struct store_mem *s, struct mem_lease *l) {
        struct keyspace *k = &s->ks[STORE_EPHEMERAL];
        int n = 0;

        l->ended = true;
        for (size_t idx = 0; idx < k->n_entries;) {
                struct entry *e = k->entries[idx];
                if (e->lease != l) {
                        idx++;
                        continue;
                }
                struct store_event *ev = mem_delete_event_new(k, e);
                mem_entry_delete(k, idx, ev, STORE_CAUSE_EXPIRED);
                store_event_unref(ev);
                n++;
        }
        if (l->owner_gone)
                mem_lease_unlink(s, l);
        return n;
}


static struct mem_lease *to_lease(struct store_lease *l) {
        return container_of(l, struct mem_lease, base);
}

int mem_lease_grant(struct store *base, usec_t ttl, struct store_lease **ret) {
        struct store_mem *s = to_mem(base);
        struct mem_lease *l = calloc(1, sizeof(*l));

        if (!l)
                return -ENOMEM;
        usec_t now = mem_op_begin(s, STORE_EPHEMERAL);
        l->base.store = base;
        l->ttl = ttl ?: s->default_ttl;
        l->deadline = mem_deadline_after(now, l->ttl);
        l->next = s->leases;
        if (s->leases)
                s->leases->prev = l;
        s->leases = l;
        mem_op_end(s);
        *ret = &l->base;
        return 0;
}

int mem_lease_keep_alive(struct store_lease *base, bool on) {
        struct store_mem *s = to_mem(base->store);
        struct mem_lease *l = to_lease(base);
        usec_t now = mem_op_begin(s, STORE_EPHEMERAL);
        int r = 0;

        if (l->ended)
                r = on ? -ENOENT : 0;
        else if (on)
                l->deadline = USEC_INFINITY; /* renewed at every instant */
        else if (l->deadline == USEC_INFINITY)
                l->deadline = mem_deadline_after(now, l->ttl); /* the last renewal: now */
        mem_op_end(s);
        return r;
}

int mem_lease_revoke(struct store_lease *base) {
        struct store_mem *s = to_mem(base->store);
        struct mem_lease *l = to_lease(base);

        (void) mem_op_begin(s, STORE_EPHEMERAL);
        if (!l->ended)
                (void) mem_lease_end(s, l);
        mem_op_end(s);
        return 0;
}

void mem_lease_free(struct store_lease *base) {
        struct store_mem *s = to_mem(base->store);
        struct mem_lease *l = to_lease(base);

        usec_t now = mem_op_begin(s, STORE_EPHEMERAL);
        l->owner_gone = true;
        if (l->ended)
                mem_lease_unlink(s, l);
        else if (l->deadline == USEC_INFINITY)
                l->deadline = mem_deadline_after(now, l->ttl);
        mem_op_end(s);
}

usec_t mem_lease_expiry(struct store_lease *base) {
        struct store_mem *s = to_mem(base->store);
        struct mem_lease *l = to_lease(base);

        (void) mem_op_begin(s, STORE_EPHEMERAL);
        usec_t r = l->ended ? 0 : l->deadline;
        mem_op_end(s);
        return r;
}

int mem_create_leased(struct store *base, const char *key, const void *value, size_t size,
                             struct store_lease *lease, uint64_t *ret_revision) {
        struct store_mem *s = to_mem(base);
        struct mem_lease *l = to_lease(lease);
        usec_t now = mem_op_begin(s, STORE_EPHEMERAL);
        int r = l->ended ? -ENOENT
                         : mem_create_locked(s, &s->ks[STORE_EPHEMERAL], key, value, size, now, 0, l,
                                         ret_revision);
        mem_op_end(s);
        return r;
}

