/* SPDX-License-Identifier: MIT */
/*
 * One store event as a watch message (docs/control-protocol.md "watch"):
 *   {"version":1,"type":"event","keyspace":K,"revision":N,"event":E,"key":KEY,
 *    "value":V}  (PUT; DELETE has "cause" and "prev_revision" instead of
 *   "value"; SNAPSHOT_DONE is {"version":1,"type":"snapshot-done",
 *   "keyspace":K,"revision":N}).
 *
 * A value that is JSON is sent as that JSON, anything else as a string; a
 * message that would not fit CONTROL_MESSAGE_MAX has "value": null and
 * "value_omitted": true.
 *
 * Two ways to build it, giving the same bytes:
 *  - splice (the path of every unit record): the value's text is copied
 *    between the watch fields and the closing brace, unparsed. Only for a
 *    value in canonical form: a JSON object exactly as json-c writes it
 *    with JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE (no
 *    whitespace, integers only, json-c's escapes, no duplicate keys), which
 *    is what parsing and re-serialising it would give back. record.c writes
 *    records in that form.
 *  - tree: parse the value, build the message with json-c, serialise it
 *    (any other value).
 * tests/unit/test-control-watch.c checks that both give the same text.
 *
 * Pure functions: no I/O, no global state; any thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "store.h"

/* True if text[0..len) is a JSON object in canonical form (above). */
bool watch_value_is_canonical(const char *text, size_t len);

/*
 * The length of ev's spliced message (a PUT whose value is canonical and
 * whose message fits CONTROL_MESSAGE_MAX with room to spare, as the tree
 * path would send it whole), or 0 when it must be built as a tree.
 */
size_t watch_splice_size(const struct store_event *ev);

/* Writes ev's spliced message to buf, which holds watch_splice_size(ev)
 * bytes (a non-zero size; no NUL is written). */
void watch_splice_write(const struct store_event *ev, char *buf, size_t size);

/* ev's message as a json-c tree (the caller's reference); NULL on ENOMEM. */
struct json_object *watch_message_tree(const struct store_event *ev);
