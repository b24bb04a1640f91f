/* SPDX-License-Identifier: MIT */
/*
 * The one string-vector helper of libexit and the supervisor.
 *
 * A "strv" is a NULL-terminated array of malloc'ed strings in one malloc'ed
 * array (an "envp" is a strv of "NAME=VALUE"); NULL is the empty strv for
 * every function here. strv_free() frees the strings and the array.
 * A struct strv_builder grows one with amortised appends (a unit file's
 * lists, an environment being built), NULL-terminated throughout; take it
 * with strv_builder_take() or drop it with strv_builder_clear().
 *
 * Errors: 0 or -ENOMEM. Functions that take a string (strv_push,
 * strv_builder_push) free it on failure, so the caller never does.
 * Thread-safety: none needed (plain data).
 */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

/* Frees every string and the array; returns NULL. */
static inline char **strv_free(char **l) {
        if (l) {
                for (char **i = l; *i; i++)
                        free(*i);
                free(l);
        }
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* The number of strings in l. */
static inline size_t strv_length(char *const *l) {
        size_t n = 0;
        while (l && l[n])
                n++;
        return n;
}

/* Appends s (taken; freed on failure) to *l, which may be NULL. */
static inline int strv_push(char ***l, char *s) {
        size_t n = strv_length(*l);
        char **v = realloc(*l, (n + 2) * sizeof *v);
        if (!v) {
                free(s);
                return -ENOMEM;
        }
        v[n] = s;
        v[n + 1] = NULL;
        *l = v;
        return 0;
}

/* Appends a copy of s to *l, which may be NULL. */
static inline int strv_extend(char ***l, const char *s) {
        char *c = strdup(s);
        return c ? strv_push(l, c) : -ENOMEM;
}

/*
 * v (a strv, taken: freed also on failure) as one allocation, the pointers
 * followed by the strings: *ret is freed with free() alone, and costs one
 * allocation instead of n + 1.
 */
static inline int strv_pack(char **v, char ***ret) {
        size_t n = 0, bytes = 0;
        for (; v && v[n]; n++)
                bytes += strlen(v[n]) + 1;
        char **p = malloc((n + 1) * sizeof *p + bytes);
        if (!p) {
                strv_free(v);
                return -ENOMEM;
        }
        char *s = (char *) (p + n + 1);
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(v[i]) + 1;
                p[i] = memcpy(s, v[i], len);
                s += len;
        }
        p[n] = NULL;
        strv_free(v);
        *ret = p;
        return 0;
}

/* A strv under construction. Zero-initialised is empty. */
struct strv_builder {
        char **v;  /* NULL-terminated once it holds anything */
        size_t n, cap;
};

/* Appends s (taken; freed on failure). */
static inline int strv_builder_push(struct strv_builder *b, char *s) {
        if (b->n + 2 > b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 8;
                char **v = realloc(b->v, cap * sizeof *v);
                if (!v) {
                        free(s);
                        return -ENOMEM;
                }
                b->v = v;
                b->cap = cap;
        }
        b->v[b->n++] = s;
        b->v[b->n] = NULL;
        return 0;
}

/* The strv built (an empty one is still an array), the builder emptied; NULL
 * when out of memory (the builder then keeps what it had). */
static inline char **strv_builder_take(struct strv_builder *b) {
        if (!b->v && strv_builder_push(b, NULL) < 0)
                return NULL;
        char **v = b->v;
        *b = (struct strv_builder) {};
        return v;
}

/* Frees what was built. */
static inline void strv_builder_clear(struct strv_builder *b) {
        strv_free(b->v);
        *b = (struct strv_builder) {};
}
