/* SPDX-License-Identifier: MIT */
/*
 * A unit's state record, service/NAME in the store (SPEC §5's fields:
 * version, name, state, main_pid, since, since_monotonic, restarts,
 * last_exit, status, result, waiters; then the manager's notes of its file,
 * tend(8) "RELOADING DIR": file_changed, file_error), as JSON text.
 *
 * Every state change writes one (a change that leaves every field as it was,
 * a phase within one state, none: record_fields_equal()), so the writer keeps one
 * json-c tree and updates its values in place rather than building a tree
 * per record (a few dozen allocations): a record costs the two strings, name
 * and STATUS= text, and json-c grows its output buffer only when a longer
 * record comes. The text is json-c's own serialisation (PLAIN | NOSLASHESCAPE:
 * the canonical form control-watch.h splices into watch messages unparsed).
 *
 * Single-threaded: one writer per event loop.
 */
#pragma once

#include <stddef.h>

#include "unit.h"

struct record_writer;

/* 0 and *ret (the caller's, record_writer_free), or -ENOMEM. */
int record_writer_new(struct record_writer **ret);

struct record_writer *record_writer_free(struct record_writer *w);

/*
 * The record of u with waiters requests sharing its flight (negative: 0),
 * file_changed false and file_error null (the manager's notes: see
 * record_writer_format_fields()):
 * the JSON text (NUL-terminated, owned by w, valid until the next call) and
 * its length in bytes in *ret_len. NULL when json-c runs out of memory (the
 * record is then not written; the next change writes it).
 */
const char *record_writer_format(struct record_writer *w, const struct unit *u, int waiters, size_t *ret_len);

/* What a record is made of: equal fields make an equal record, so a change
 * that changed none of them (a phase within the same state) needs no new one. */
struct record_fields {
        struct unit_shown shown; /* what the unit shows (unit.h), last_exit zeroed when there is none */
        int waiters;
        bool has_status; /* STATUS= text: never compared, a record with one is always written */
        bool has_condition; /* cond: u->condition_text, as has_status */
        /* The manager's notes of u's file (daemon-reload), record_fields_of() leaves them false: */
        bool file_changed;   /* a process of u runs that was started from another text of its file */
        bool has_file_error; /* its file does not load now: never compared, as has_status */
};

/* The fields of u's record with waiters requests sharing its flight. */
void record_fields_of(const struct unit *u, int waiters, struct record_fields *ret);

/* True if a and b make the same record (false whenever either has a STATUS= text). */
bool record_fields_equal(const struct record_fields *a, const struct record_fields *b);

/*
 * The record made of f for the unit called name, with STATUS= text status
 * and file_error the message of why its file does not load (each NULL:
 * none; only f->has_status and f->has_file_error say whether there is one
 * for the comparison); all borrowed: as record_writer_format(), which is
 * this with u's own fields.
 * For a record taken at a change and written later (manager.c holds the
 * records of an exit's changes until its restart has spawned).
 */
const char *record_writer_format_fields(struct record_writer *w, const char *name, const char *status,
                                       const char *file_error, const struct record_fields *f, size_t *ret_len);

/* cond: the "condition" field of the records that follow (text borrowed for
 * the next format call: why the last start was skipped or failed by an
 * assert), NULL: the field is absent. record_writer_format() sets it from u. */
void record_writer_set_condition(struct record_writer *w, const char *text);
