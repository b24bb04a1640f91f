/* SPDX-License-Identifier: MIT */
/*
 * A unit's state record, service/NAME in the store (SPEC §5's fields:
 * version, name, state, main_pid, since, since_monotonic, restarts,
 * last_exit, status, result, waiters), as JSON text.
 *
 * Every state change writes one, four per restart, so the writer keeps one
 * json-c tree and updates its values in place rather than building a tree
 * per record (a few dozen allocations): a record costs the two strings, name
 * and STATUS= text, and json-c grows its output buffer only when a longer
 * record comes. The text is json-c's own serialisation.
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
 * The record of u with waiters requests sharing its flight (negative: 0):
 * the JSON text (NUL-terminated, owned by w, valid until the next call) and
 * its length in bytes in *ret_len. NULL when json-c runs out of memory (the
 * record is then not written; the next change writes it).
 */
const char *record_writer_format(struct record_writer *w, const struct unit *u, int waiters, size_t *ret_len);
