/* SPDX-License-Identifier: MIT */
/*
 * The hash functions libexit and the supervisor share: FNV-1a for byte
 * strings, Fibonacci hashing to spread an integer over a power-of-two table.
 * Neither is a defence against crafted collisions; every table that hashes
 * input an attacker controls must not depend on them for its complexity.
 * Pure functions, thread-safe.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define FNV1A_64_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV1A_64_PRIME UINT64_C(0x100000001b3)

/* FNV-1a, 64 bits, over data[0..size). data may be NULL when size is 0. */
static inline uint64_t fnv1a_64(const void *data, size_t size) {
        const unsigned char *p = data;
        uint64_t h = FNV1A_64_OFFSET;
        for (size_t i = 0; i < size; i++)
                h = (h ^ p[i]) * FNV1A_64_PRIME;
        return h;
}

/* FNV-1a, 64 bits, over a NUL-terminated string (the NUL not included):
 * equal to fnv1a_64(s, strlen(s)) in one pass. */
static inline uint64_t fnv1a_64_str(const char *s) {
        uint64_t h = FNV1A_64_OFFSET;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                h = (h ^ *p) * FNV1A_64_PRIME;
        return h;
}

/* Fibonacci hashing: the top `bits` bits (1..64) of key * 2^64/phi. Sequential
 * keys (exit ids, pids) land evenly spread, and any hash's bits all count. */
static inline size_t hash_fibonacci(uint64_t key, unsigned bits) {
        return (size_t) ((key * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - bits));
}
