/* SPDX-License-Identifier: MIT */
/*
 * tendctl's human output of tend's own records and lines (tendctl-print.c):
 * `status` without a name, `list`, `logs`. Single-threaded.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "tendctl-conn.h"

/* Colours on stdout (set once by main). */
extern bool colour;
/* The escape that colours state, "" without colour (static). */
const char *state_colour(const char *state);
const char *colour_off(void);
enum time_style { TIME_STATUS, TIME_LIST, TIME_LOG };
/* usec (CLOCK_REALTIME µs) as the style prints it, into buf. */
void format_time(int64_t usec, enum time_style style, char *buf, size_t size);
/* "5min ago" for usec (CLOCK_REALTIME µs), into buf. */
void format_ago(int64_t usec, char *buf, size_t size);
void print_status(json *rec);
void print_list(json *records);
/* A log line message, as `logs` prints it (json: the message without its envelope). */
void print_line(json *m, bool as_json);
