/* SPDX-License-Identifier: MIT */
/* Held records: see held-records.h. */
#include <assert.h>
#include <stdlib.h>

#include "held-records.h"

void held_records_hold(struct held_records *h) {
        h->depth++;
}

void held_records_flush(struct held_records *h, held_records_store_t store, void *userdata) {
        /* n is cleared first: a write cannot add to the array (it is not held). */
        size_t n = h->n;
        h->n = 0;
        for (size_t i = 0; i < n; i++)
                store(userdata, h->v[i].u, &h->v[i].fields);
}

void held_records_release(struct held_records *h, held_records_store_t store, void *userdata) {
        assert(h->depth > 0);
        if (--h->depth == 0)
                held_records_flush(h, store, userdata);
}

static bool hold(struct held_records *h, struct unit *u, const struct record_fields *f) {
        if (h->depth == 0 || f->has_status) /* a STATUS= text is the unit's current one */
                return false;
        if (h->n == h->n_max) {
                size_t n = h->n_max ? 2 * h->n_max : 8;
                struct held_record *v = reallocarray(h->v, n, sizeof *v);
                if (!v)
                        return false; /* written now instead */
                h->v = v;
                h->n_max = n;
        }
        h->v[h->n++] = (struct held_record) { u, *f };
        return true;
}

bool held_records_write(struct held_records *h, struct unit *u, const struct record_fields *f,
                        held_records_store_t store, void *userdata) {
        if (hold(h, u, f))
                return true;
        held_records_flush(h, store, userdata); /* the ones held before it go first */
        store(userdata, u, f);
        return false;
}

void held_records_done(struct held_records *h) {
        assert(h->n == 0);
        free(h->v);
        *h = (struct held_records) {};
}
