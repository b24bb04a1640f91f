/* SPDX-License-Identifier: MIT */
/*
 * Held records (SPEC §5 records, §8 restart latency): while an exit is
 * handled, the state records of the changes it makes are taken (their
 * fields, at the change) and written once it is handled, so that a restart
 * spawns first and the records of its stop, back-off and start follow.
 *
 * The invariant (tests/unit/test-manager-records.c):
 *  - a record taken while held is written after the hold ends, in the order
 *    of the changes, each with a write of its own (a revision of its own:
 *    none is merged with the next one of the same unit);
 *  - a record with a STATUS= text is never held: the ones held before it are
 *    written first, then it, at once;
 *  - held_records_flush() writes every held record now (a unit being freed:
 *    none of its records may outlive it).
 *
 * Nothing reads a record in between (the control socket is answered from a
 * later event). Single-threaded; the unit pointers are borrowed: a unit is
 * flushed before it is freed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "record.h"

struct unit;

struct held_record {
        struct unit *u;
        struct record_fields fields;
};

struct held_records {
        unsigned depth;          /* > 0: records are held (nested holds: the last release writes) */
        struct held_record *v;   /* in the order of the changes */
        size_t n, n_max;
};

/* Writes u's record made of f (the store's write; called in order). */
typedef void (*held_records_store_t)(void *userdata, struct unit *u, const struct record_fields *f);

/* Records are held from now until the matching held_records_release(). */
void held_records_hold(struct held_records *h);

/* Ends one hold; the last writes every held record through store, in order. */
void held_records_release(struct held_records *h, held_records_store_t store, void *userdata);

/* Writes every held record now through store, in order (holds stay). */
void held_records_flush(struct held_records *h, held_records_store_t store, void *userdata);

/* u's record made of f is to be written: held (a copy of f kept) while a
 * hold lasts and f has no STATUS= text; otherwise the held ones are written
 * first, then this one. Out of memory to hold it: written now, the same way.
 * Returns whether it was held. */
bool held_records_write(struct held_records *h, struct unit *u, const struct record_fields *f,
                        held_records_store_t store, void *userdata);

/* Frees the array (nothing held may be left: flush first). */
void held_records_done(struct held_records *h);
