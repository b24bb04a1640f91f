/* SPDX-License-Identifier: MIT */
/*
 * One hash table for libexit and the supervisor: open addressing, linear
 * probing, a power-of-two capacity kept at most half full, and
 * backward-shift deletion. Deleting leaves no tombstones: every probe chain
 * stays unbroken, so a table that sees millions of insert/remove pairs (the
 * hub's ledger, the reaper's pids) never degrades and never needs a rehash
 * to recover.
 *
 * Entries are the caller's own struct, stored inline, whose first member is
 * `uint64_t key`; key 0 marks an empty slot and is never stored. Integer keys
 * (exit ids, pids) are the key itself. A string-keyed table stores
 * hashmap_str_key(string) and keeps the string in the entry or behind its
 * pointer: keys may then repeat, so lookups walk every entry with the key
 * (NAME_get, then NAME_get_next) and compare the strings. The table is a
 * multimap: put never looks for the key; a caller that wants uniqueness
 * checks first.
 *
 * Allocation: only NAME_reserve (and NAME_insert, which reserves) allocates;
 * NAME_put, NAME_remove, lookups and iteration never do. A caller that may
 * not allocate at insertion time (the reaper after a fork, the hub's
 * publish) reserves first. An empty table owns no memory until its first
 * reserve. Capacity never shrinks; NAME_done frees it.
 *
 * Entry pointers returned by lookups, put and iteration stay valid until the
 * next remove, clear, or reserve or insert that grows the table (put fills an
 * empty slot and moves nothing). Do not remove while iterating: removal moves
 * entries, so a walk could see one twice or miss it.
 *
 * Thread-safety: none of its own. A table is plain data; the caller's lock
 * guards it like any other field.
 *
 * Usage, once per entry type:
 *
 *     struct pid_slot { uint64_t key; struct proc *proc; };
 *     HASHMAP_DEFINE(pid_map, struct pid_slot);
 *
 *     struct pid_map pids = {};
 *     r = pid_map_insert(&pids, (struct pid_slot) { .key = (uint64_t) pid, .proc = p });
 *     struct pid_slot *s = pid_map_get(&pids, (uint64_t) pid);
 *     for (struct pid_slot *e = NULL; (e = pid_map_next(&pids, e));) …
 *     pid_map_done(&pids);
 */
#pragma once

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hash-util.h"

/* The untyped table behind every HASHMAP_DEFINE type; use the typed functions. */
struct hashmap {
        void *slots;   /* 1 << bits entries of the entry size; NULL until the first reserve */
        size_t n;      /* entries stored */
        unsigned bits; /* 0 while slots is NULL */
};

#define HASHMAP_MIN_BITS 4u

/* A string's key for a string-keyed table: its FNV-1a hash, never 0. */
static inline uint64_t hashmap_str_key(const char *s) {
        uint64_t h = fnv1a_64_str(s);
        return h ? h : 1;
}

static inline size_t hashmap_capacity_(const struct hashmap *m) {
        return m->slots ? (size_t) 1 << m->bits : 0;
}

static inline void *hashmap_at_(const struct hashmap *m, size_t esz, size_t i) {
        return (char *) m->slots + i * esz;
}

/* The key is the entry's first member (HASHMAP_DEFINE checks it). */
static inline uint64_t hashmap_key_at_(const struct hashmap *m, size_t esz, size_t i) {
        return *(const uint64_t *) hashmap_at_(m, esz, i);
}

static inline size_t hashmap_index_(const struct hashmap *m, size_t esz, const void *e) {
        return (size_t) ((const char *) e - (const char *) m->slots) / esz;
}

/* The first entry with key at or after slot i along its probe chain, or NULL. */
static inline void *hashmap_probe_(const struct hashmap *m, size_t esz, uint64_t key, size_t i) {
        size_t mask = hashmap_capacity_(m) - 1;
        for (;; i = (i + 1) & mask) {
                uint64_t k = hashmap_key_at_(m, esz, i);
                if (k == key)
                        return hashmap_at_(m, esz, i);
                if (k == 0)
                        return NULL; /* at most half full: an empty slot always ends the chain */
        }
}

/* Key 0 is never stored: asking for it finds nothing. */
static inline void *hashmap_get_(const struct hashmap *m, size_t esz, uint64_t key) {
        if (!m->slots || key == 0)
                return NULL;
        return hashmap_probe_(m, esz, key, hash_fibonacci(key, m->bits));
}

/* The next entry after e with e's key: a chain holds every entry of a key
 * contiguously from its home slot, so the walk goes on from e. */
static inline void *hashmap_get_next_(const struct hashmap *m, size_t esz, const void *e) {
        size_t mask = hashmap_capacity_(m) - 1;
        return hashmap_probe_(m, esz, *(const uint64_t *) e, (hashmap_index_(m, esz, e) + 1) & mask);
}

/* Stores a copy of entry; the caller made room (reserve). Never allocates. */
static inline void *hashmap_put_(struct hashmap *m, size_t esz, const void *entry) {
        uint64_t key = *(const uint64_t *) entry;
        assert(key != 0 && (m->n + 1) * 2 <= hashmap_capacity_(m));
        size_t mask = hashmap_capacity_(m) - 1, i = hash_fibonacci(key, m->bits);
        while (hashmap_key_at_(m, esz, i) != 0)
                i = (i + 1) & mask;
        void *slot = hashmap_at_(m, esz, i);
        memcpy(slot, entry, esz);
        m->n++;
        return slot;
}

/* Backward-shift deletion: each later entry of the run moves into the hole
 * unless its home lies cyclically in (hole, j], where moving it would put it
 * before its home and off its chain. */
static inline void hashmap_remove_(struct hashmap *m, size_t esz, void *e) {
        size_t mask = hashmap_capacity_(m) - 1, hole = hashmap_index_(m, esz, e);
        assert(m->n > 0 && hole <= mask && hashmap_key_at_(m, esz, hole) != 0);
        for (size_t j = (hole + 1) & mask;; j = (j + 1) & mask) {
                uint64_t k = hashmap_key_at_(m, esz, j);
                if (k == 0)
                        break;
                size_t home = hash_fibonacci(k, m->bits);
                if (((j - home) & mask) < ((j - hole) & mask))
                        continue; /* home in (hole, j]: it stays */
                memcpy(hashmap_at_(m, esz, hole), hashmap_at_(m, esz, j), esz);
                hole = j;
        }
        memset(hashmap_at_(m, esz, hole), 0, esz);
        m->n--;
}

/* Room for `want` entries at a load of at most 1/2, so that many puts never
 * allocate. 0, or -ENOMEM (the table is unchanged). */
static inline int hashmap_reserve_(struct hashmap *m, size_t esz, size_t want) {
        if (want * 2 <= hashmap_capacity_(m))
                return 0;
        if (want > PTRDIFF_MAX / 4 / esz) /* the capacity is below 4 * want */
                return -ENOMEM;
        unsigned bits = HASHMAP_MIN_BITS;
        while (((size_t) 1 << bits) < want * 2)
                bits++;
        void *slots = calloc((size_t) 1 << bits, esz);
        if (!slots)
                return -ENOMEM;
        struct hashmap old = *m;
        *m = (struct hashmap) { .slots = slots, .bits = bits };
        for (size_t i = 0; i < hashmap_capacity_(&old); i++)
                if (hashmap_key_at_(&old, esz, i) != 0)
                        (void) hashmap_put_(m, esz, hashmap_at_(&old, esz, i));
        free(old.slots);
        return 0;
}

/* The entry after prev in slot order (the first for NULL), or NULL at the end. */
static inline void *hashmap_next_(const struct hashmap *m, size_t esz, const void *prev) {
        size_t cap = hashmap_capacity_(m);
        for (size_t i = prev ? hashmap_index_(m, esz, prev) + 1 : 0; i < cap; i++)
                if (hashmap_key_at_(m, esz, i) != 0)
                        return hashmap_at_(m, esz, i);
        return NULL;
}

/* Empties the table, keeping its memory. */
static inline void hashmap_clear_(struct hashmap *m, size_t esz) {
        if (m->slots)
                memset(m->slots, 0, hashmap_capacity_(m) * esz);
        m->n = 0;
}

static inline void hashmap_done_(struct hashmap *m) {
        free(m->slots);
        *m = (struct hashmap) {};
}

/*
 * Defines `struct NAME`, a table of `type` entries (zero-initialise it:
 * `struct NAME m = {}` is an empty table), and its functions, each with the
 * contract of the untyped one above:
 *
 *   size_t NAME_size(const struct NAME *m)             entries stored
 *   int    NAME_reserve(struct NAME *m, size_t want)   room for want entries; 0 or -ENOMEM
 *   type  *NAME_put(struct NAME *m, type entry)        the caller reserved room; never allocates
 *   int    NAME_insert(struct NAME *m, type entry)     reserve for one more, then put; 0 or -ENOMEM
 *   type  *NAME_get(const struct NAME *m, uint64_t key)        first entry with key, or NULL (always for 0)
 *   type  *NAME_get_next(const struct NAME *m, const type *e)  next entry with e's key, or NULL
 *   void   NAME_remove(struct NAME *m, type *e)        e from get/get_next/next/put
 *   type  *NAME_next(const struct NAME *m, const type *prev)   iteration: NULL starts it, NULL ends it
 *   void   NAME_clear(struct NAME *m)                  remove all, keep the memory
 *   void   NAME_done(struct NAME *m)                   free the memory; the table is empty and usable
 *
 * Use as a declaration: HASHMAP_DEFINE(NAME, type); the functions a file does not
 * use are marked unused (clang warns of unused static inline functions in a .c).
 */
#define HASHMAP_DEFINE(name, type)                                                                  \
        struct name {                                                                               \
                struct hashmap raw;                                                                 \
        };                                                                                          \
        static inline __attribute__((unused)) size_t name##_size(const struct name *m) {                                    \
                return m->raw.n;                                                                    \
        }                                                                                           \
        static inline __attribute__((unused)) int name##_reserve(struct name *m, size_t want) {                             \
                return hashmap_reserve_(&m->raw, sizeof(type), want);                               \
        }                                                                                           \
        static inline __attribute__((unused)) type *name##_put(struct name *m, type entry) {                                \
                return hashmap_put_(&m->raw, sizeof(type), &entry);                                 \
        }                                                                                           \
        static inline __attribute__((unused)) int name##_insert(struct name *m, type entry) {                               \
                int r_ = hashmap_reserve_(&m->raw, sizeof(type), m->raw.n + 1);                     \
                if (r_ < 0)                                                                         \
                        return r_;                                                                  \
                (void) hashmap_put_(&m->raw, sizeof(type), &entry);                                 \
                return 0;                                                                           \
        }                                                                                           \
        static inline __attribute__((unused)) type *name##_get(const struct name *m, uint64_t key) {                        \
                return hashmap_get_(&m->raw, sizeof(type), key);                                    \
        }                                                                                           \
        static inline __attribute__((unused)) type *name##_get_next(const struct name *m, const type *e) {                  \
                return hashmap_get_next_(&m->raw, sizeof(type), e);                                 \
        }                                                                                           \
        static inline __attribute__((unused)) void name##_remove(struct name *m, type *e) {                                 \
                hashmap_remove_(&m->raw, sizeof(type), e);                                          \
        }                                                                                           \
        static inline __attribute__((unused)) type *name##_next(const struct name *m, const type *prev) {                   \
                return hashmap_next_(&m->raw, sizeof(type), prev);                                  \
        }                                                                                           \
        static inline __attribute__((unused)) void name##_clear(struct name *m) {                                           \
                hashmap_clear_(&m->raw, sizeof(type));                                              \
        }                                                                                           \
        static inline __attribute__((unused)) void name##_done(struct name *m) {                                            \
                hashmap_done_(&m->raw);                                                             \
        }                                                                                           \
        _Static_assert(offsetof(type, key) == 0 &&                                                  \
                               __builtin_types_compatible_p(__typeof__(((type *) NULL)->key), uint64_t), \
                       #type " must begin with uint64_t key")
