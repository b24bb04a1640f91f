/* SPDX-License-Identifier: MIT */
/*
 * The value grammar of Condition*=/Assert*= (systemd.unit(5) "Conditions and
 * Asserts") that the parser (unit-file-conditions.c, which implements this)
 * checks and the evaluator (exec/condition.c) uses: comparison operators,
 * version comparison, sizes, pressure thresholds, booleans.
 * Pure functions: no state, thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* A comparison operator. */
enum condition_op {
        CONDITION_OP_LT,        /* <  */
        CONDITION_OP_LE,        /* <= */
        CONDITION_OP_EQ,        /* == (and = without CONDITION_OP_STRING) */
        CONDITION_OP_NE,        /* <> (and != without CONDITION_OP_STRING) */
        CONDITION_OP_GE,        /* >= */
        CONDITION_OP_GT,        /* >  */
        CONDITION_OP_STR_EQ,    /* =  string equality (CONDITION_OP_STRING) */
        CONDITION_OP_STR_NE,    /* != string inequality (CONDITION_OP_STRING) */
        CONDITION_OP_GLOB,      /* $=  fnmatch(3) matches (CONDITION_OP_GLOB) */
        CONDITION_OP_NOT_GLOB,  /* !$= fnmatch(3) does not match (CONDITION_OP_GLOB) */
};

enum {
        CONDITION_OP_STRING = 1 << 0, /* = and != compare strings, == and <> versions */
        CONDITION_OP_GLOB_OK = 1 << 1, /* $= and !$= are allowed */
};

/* The operator at the start of *s (the longest that matches), *s moved past
 * it; -EINVAL (and *s unchanged) if none. */
int condition_op_parse(const char **s, unsigned flags);

/* Whether cmp (<0, 0, >0: actual against expected) satisfies an order operator
 * (LT…GT, STR_EQ/STR_NE as EQ/NE). */
bool condition_op_holds(enum condition_op op, int cmp);

/* Compares two version strings as systemd's strverscmp_improved() orders them
 * (numbers as numbers, '~' before anything, letters after the end…):
 * <0, 0, >0. */
int condition_version_compare(const char *a, const char *b);

/* actual <op> expected: versions (LT…GT), strings (STR_*), globs (GLOB*).
 * 1 true, 0 false. */
int condition_op_compare(enum condition_op op, const char *actual, const char *expected);

/* A size in bytes, with an optional fraction and K, M, G, T, P, E suffix
 * (base 1024, as systemd's parse_size()). 0 or -EINVAL, -ERANGE. */
int condition_parse_size(const char *s, uint64_t *ret);

/* systemd's booleans: 1 (1 yes y true t on), 0 (0 no n false f off), or -EINVAL. */
int condition_parse_boolean(const char *s);

/* A pressure threshold "[SLICE:]N%[/10sec|/1min|/5min]": *ret_slice points
 * into s (its length in *ret_slice_len, 0: the whole system), the threshold in
 * hundredths of a percent, the window in seconds (300 by default).
 * 0 or -EINVAL. */
int condition_parse_pressure(const char *s, const char **ret_slice, size_t *ret_slice_len,
                             unsigned *ret_permyriad, unsigned *ret_window_sec);

/* Checks a ConditionKernelVersion= list ("[OP]VERSION …", no operator: $=)
 * or, with os_release, a ConditionOSRelease= list ("KEY OP VALUE …"). Calls
 * each(actual-key-or-NULL, op, expected, userdata) for each expression; stops
 * at the first that returns ≤ 0 and returns that. Returns 1 when every one held,
 * -EINVAL on bad syntax, -ENOMEM. each NULL: the syntax alone is checked (1). */
typedef int (*condition_expr_fn)(const char *key, enum condition_op op, const char *expected, void *userdata);
int condition_expressions(const char *list, bool os_release, condition_expr_fn each, void *userdata);
