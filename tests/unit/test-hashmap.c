/* SPDX-License-Identifier: MIT */
/*
 * The shared hash table (common/hashmap.h) and FNV-1a (common/hash-util.h):
 * insert, find, remove; growth and reserve (no allocation within a
 * reservation); deletion without tombstones (the probe-chain invariant after
 * heavy churn); colliding and repeated keys, wrapping around the end;
 * string keys; iteration; exact counts; freeing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hashmap.h"
#include "macro.h"

struct int_slot {
        uint64_t key;
        uint64_t val;
};
HASHMAP_DEFINE(int_map, struct int_slot);

struct str_slot {
        uint64_t key; /* hashmap_str_key(name), or a forced value to make collisions */
        const char *name;
        int val;
};
HASHMAP_DEFINE(str_map, struct str_slot);

struct obj {
        uint64_t id;
        char payload[24];
};

struct obj_slot {
        uint64_t key;
        struct obj *obj;
};
HASHMAP_DEFINE(obj_map, struct obj_slot);

static size_t capacity(const struct int_map *m) {
        return hashmap_capacity_(&m->raw);
}

/* Every entry sits in an unbroken run of full slots from its home slot (what
 * lookups rely on), the table is at most half full, and the count is exact:
 * no tombstones, nothing lost. */
static void assert_invariants(const struct int_map *m) {
        size_t cap = capacity(m), full = 0, mask = cap - 1;
        const struct int_slot *s = m->raw.slots;
        for (size_t i = 0; i < cap; i++) {
                if (s[i].key == 0)
                        continue;
                full++;
                for (size_t j = hash_fibonacci(s[i].key, m->raw.bits); j != i; j = (j + 1) & mask)
                        if (s[j].key == 0)
                                fail_msg("key %llu at slot %zu is cut off from its home by the empty slot %zu",
                                         (unsigned long long) s[i].key, i, j);
        }
        assert_int_equal(full, int_map_size(m));
        assert_true(int_map_size(m) * 2 <= cap);
}

static void test_empty_table_owns_nothing_and_finds_nothing(void **state) {
        struct int_map m = {};
        assert_int_equal(int_map_size(&m), 0);
        assert_null(m.raw.slots);
        assert_null(int_map_get(&m, 1));
        assert_null(int_map_get(&m, 0));
        assert_null(int_map_next(&m, NULL));
        int_map_clear(&m);
        int_map_done(&m);
        assert_null(m.raw.slots);

        assert_int_equal(int_map_insert(&m, (struct int_slot) { .key = 5, .val = 50 }), 0);
        assert_null(int_map_get(&m, 0)); /* key 0 marks empty slots: never found */
        int_map_done(&m);
}

static void test_insert_find_remove(void **state) {
        struct int_map m = {};
        for (uint64_t k = 1; k <= 1000; k++) {
                assert_int_equal(int_map_insert(&m, (struct int_slot) { .key = k, .val = k * 7 }), 0);
                assert_int_equal(int_map_size(&m), k);
        }
        for (uint64_t k = 1; k <= 1000; k++) {
                struct int_slot *s = int_map_get(&m, k);
                assert_non_null(s);
                assert_int_equal(s->key, k);
                assert_int_equal(s->val, k * 7);
                assert_null(int_map_get_next(&m, s)); /* unique keys: one entry each */
        }
        assert_null(int_map_get(&m, 1001));
        assert_null(int_map_get(&m, UINT64_MAX));

        for (uint64_t k = 1; k <= 1000; k += 2)
                int_map_remove(&m, int_map_get(&m, k));
        assert_int_equal(int_map_size(&m), 500);
        for (uint64_t k = 1; k <= 1000; k++) {
                struct int_slot *s = int_map_get(&m, k);
                if (k % 2)
                        assert_null(s);
                else {
                        assert_non_null(s);
                        assert_int_equal(s->val, k * 7);
                }
        }
        assert_invariants(&m);

        /* An entry returned by put is the stored one: writes through it stick. */
        assert_int_equal(int_map_reserve(&m, int_map_size(&m) + 1), 0);
        struct int_slot *s = int_map_put(&m, (struct int_slot) { .key = 3, .val = 1 });
        s->val = 33;
        assert_int_equal(int_map_get(&m, 3)->val, 33);
        assert_int_equal(int_map_size(&m), 501);
        int_map_done(&m);
        assert_int_equal(int_map_size(&m), 0);
}

static void test_reserve_sizes_and_puts_within_it_never_move_the_table(void **state) {
        struct int_map m = {};
        assert_int_equal(int_map_reserve(&m, 0), 0);
        assert_null(m.raw.slots); /* nothing wanted: nothing allocated */
        assert_int_equal(int_map_reserve(&m, 1), 0);
        assert_int_equal(capacity(&m), 16); /* the minimum */
        assert_int_equal(int_map_reserve(&m, 8), 0);
        assert_int_equal(capacity(&m), 16); /* 8 fit at half load */
        assert_int_equal(int_map_reserve(&m, 9), 0);
        assert_int_equal(capacity(&m), 32);
        assert_int_equal(int_map_reserve(&m, 100), 0);
        assert_int_equal(capacity(&m), 256);

        /* Within the reservation, put never reallocates: the reaper puts after
         * its fork, the hub in publish. */
        void *slots = m.raw.slots;
        for (uint64_t k = 1; k <= 100; k++)
                (void) int_map_put(&m, (struct int_slot) { .key = k * 1000003, .val = k });
        assert_ptr_equal(m.raw.slots, slots);
        assert_int_equal(int_map_size(&m), 100);
        assert_int_equal(int_map_reserve(&m, 100), 0);
        assert_ptr_equal(m.raw.slots, slots);

        /* Growth by insert keeps every entry and the load at most 1/2. */
        for (uint64_t k = 101; k <= 5000; k++) {
                assert_int_equal(int_map_insert(&m, (struct int_slot) { .key = k * 1000003, .val = k }), 0);
                assert_true(int_map_size(&m) * 2 <= capacity(&m));
        }
        assert_int_equal(capacity(&m), 16384);
        for (uint64_t k = 1; k <= 5000; k++)
                assert_int_equal(int_map_get(&m, k * 1000003)->val, k);
        assert_invariants(&m);

        /* Capacity never shrinks: removing everything keeps the memory. */
        while (int_map_size(&m) > 0)
                int_map_remove(&m, int_map_next(&m, NULL));
        assert_int_equal(capacity(&m), 16384);
        int_map_done(&m);
}

static void test_impossible_reservation_fails_and_changes_nothing(void **state) {
        struct int_map m = {};
        assert_int_equal(int_map_insert(&m, (struct int_slot) { .key = 9, .val = 90 }), 0);
        void *slots = m.raw.slots;
        assert_int_equal(int_map_reserve(&m, SIZE_MAX / 2), -ENOMEM);
        assert_int_equal(int_map_reserve(&m, SIZE_MAX / 64), -ENOMEM);
        assert_ptr_equal(m.raw.slots, slots);
        assert_int_equal(int_map_size(&m), 1);
        assert_int_equal(int_map_get(&m, 9)->val, 90);
        int_map_done(&m);
}

/* The pattern of the hub's ledger and the reaper's pids: ids rise forever, a
 * window of them is live. Without tombstones the table neither grows nor
 * degrades: the same capacity, every chain intact, after a million pairs. */
static void test_churn_leaves_no_tombstones(void **state) {
        struct int_map m = {};
        const uint64_t window = 48, total = 1000000;
        assert_int_equal(int_map_reserve(&m, window), 0);
        size_t cap = capacity(&m);
        void *slots = m.raw.slots;
        for (uint64_t k = 1; k <= total; k++) {
                (void) int_map_put(&m, (struct int_slot) { .key = k, .val = k });
                if (k > window)
                        int_map_remove(&m, int_map_get(&m, k - window));
                if (k % 99991 == 0)
                        assert_invariants(&m);
        }
        assert_ptr_equal(m.raw.slots, slots);
        assert_int_equal(capacity(&m), cap);
        assert_int_equal(int_map_size(&m), window);
        for (uint64_t k = total - window + 1; k <= total; k++)
                assert_int_equal(int_map_get(&m, k)->val, k);
        assert_null(int_map_get(&m, total - window));
        assert_invariants(&m);

        /* Random removal order from a full-ish table: chains stay intact after each. */
        int_map_clear(&m);
        assert_int_equal(int_map_reserve(&m, 2000), 0);
        uint64_t keys[2000];
        uint64_t x = 88172645463325252u;
        for (size_t i = 0; i < 2000; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                keys[i] = x | 1;
                (void) int_map_put(&m, (struct int_slot) { .key = keys[i], .val = i });
        }
        for (size_t i = 0; i < 2000; i++) {
                size_t j = i + (size_t) (keys[i] % (2000 - i));
                uint64_t t = keys[i];
                keys[i] = keys[j], keys[j] = t;
                int_map_remove(&m, int_map_get(&m, keys[i]));
                assert_null(int_map_get(&m, keys[i]));
                if (i % 50 == 0)
                        assert_invariants(&m);
        }
        assert_int_equal(int_map_size(&m), 0);
        int_map_done(&m);
}

/* `n` distinct keys whose home slot in a table of 1 << bits slots is `home`. */
static void colliding_keys(unsigned bits, size_t home, uint64_t *ret, size_t n) {
        size_t found = 0;
        for (uint64_t k = 1; found < n; k++)
                if (hash_fibonacci(k, bits) == home)
                        ret[found++] = k;
}

static void test_collisions_across_the_end_of_the_table(void **state) {
        struct int_map m = {};
        assert_int_equal(int_map_reserve(&m, 8), 0);
        assert_int_equal(m.raw.bits, 4);
        /* Five keys at home 14: the run fills 14, 15 and wraps to 0, 1, 2. */
        uint64_t k[5];
        colliding_keys(4, 14, k, 5);
        /* One key whose home is slot 1, behind the wrapped run. */
        uint64_t other;
        colliding_keys(4, 1, &other, 1);
        for (size_t i = 0; i < 5; i++)
                (void) int_map_put(&m, (struct int_slot) { .key = k[i], .val = i });
        (void) int_map_put(&m, (struct int_slot) { .key = other, .val = 99 });
        const struct int_slot *s = m.raw.slots;
        assert_int_equal(s[14].key, k[0]);
        assert_int_equal(s[15].key, k[1]);
        assert_int_equal(s[0].key, k[2]);
        assert_int_equal(s[3].key, other); /* pushed past the run */
        assert_invariants(&m);

        /* Removing the run's head pulls every later member back one slot,
         * across the end, and the key homed at 1 with them. */
        int_map_remove(&m, int_map_get(&m, k[0]));
        assert_invariants(&m);
        assert_int_equal(s[14].key, k[1]);
        assert_int_equal(s[15].key, k[2]);
        assert_int_equal(s[1].key, k[4]);
        assert_int_equal(s[2].key, other);
        assert_int_equal(s[3].key, 0);
        for (size_t i = 1; i < 5; i++)
                assert_int_equal(int_map_get(&m, k[i])->val, i);
        assert_int_equal(int_map_get(&m, other)->val, 99);
        assert_null(int_map_get(&m, k[0]));

        /* A middle member, then the one past the end. */
        int_map_remove(&m, int_map_get(&m, k[3]));
        assert_invariants(&m);
        int_map_remove(&m, int_map_get(&m, k[2]));
        assert_invariants(&m);
        assert_int_equal(int_map_get(&m, k[1])->val, 1);
        assert_int_equal(int_map_get(&m, k[4])->val, 4);
        assert_int_equal(int_map_get(&m, other)->val, 99);
        assert_int_equal(int_map_size(&m), 3);
        int_map_done(&m);
}

static void test_a_repeated_key_holds_every_entry(void **state) {
        struct int_map m = {};
        assert_int_equal(int_map_reserve(&m, 8), 0);
        for (uint64_t v = 1; v <= 4; v++)
                (void) int_map_put(&m, (struct int_slot) { .key = 42, .val = v });
        (void) int_map_put(&m, (struct int_slot) { .key = 43, .val = 9 });
        unsigned seen = 0;
        for (struct int_slot *s = int_map_get(&m, 42); s; s = int_map_get_next(&m, s)) {
                assert_int_equal(s->key, 42);
                seen |= 1u << s->val;
        }
        assert_int_equal(seen, 0x1e);

        /* Remove the entry holding 2: the other three stay reachable. */
        struct int_slot *s = int_map_get(&m, 42);
        while (s->val != 2)
                s = int_map_get_next(&m, s);
        int_map_remove(&m, s);
        seen = 0;
        for (s = int_map_get(&m, 42); s; s = int_map_get_next(&m, s))
                seen |= 1u << s->val;
        assert_int_equal(seen, 0x1a);
        assert_int_equal(int_map_get(&m, 43)->val, 9);
        assert_int_equal(int_map_size(&m), 4);
        assert_invariants(&m);
        int_map_done(&m);
}

static struct str_slot *str_find(const struct str_map *m, uint64_t key, const char *name) {
        for (struct str_slot *s = str_map_get(m, key); s; s = str_map_get_next(m, s))
                if (strcmp(s->name, name) == 0)
                        return s;
        return NULL;
}

static void test_string_keys_and_hash_collisions(void **state) {
        static const char *const names[] = { "a.service", "b.service", "web@1.service", "web@2.service", "" };
        struct str_map m = {};
        for (int i = 0; i < (int) ELEMENTSOF(names); i++)
                assert_int_equal(str_map_insert(&m, (struct str_slot) { .key = hashmap_str_key(names[i]),
                                                                       .name = names[i], .val = i }), 0);
        for (int i = 0; i < (int) ELEMENTSOF(names); i++)
                assert_int_equal(str_find(&m, hashmap_str_key(names[i]), names[i])->val, i);
        assert_null(str_find(&m, hashmap_str_key("c.service"), "c.service"));

        /* Two names forced onto one hash: each is still found by its string,
         * and removing one leaves the other. */
        const uint64_t same = 0x5eed;
        assert_int_equal(str_map_insert(&m, (struct str_slot) { .key = same, .name = "x", .val = 100 }), 0);
        assert_int_equal(str_map_insert(&m, (struct str_slot) { .key = same, .name = "y", .val = 101 }), 0);
        assert_int_equal(str_find(&m, same, "x")->val, 100);
        assert_int_equal(str_find(&m, same, "y")->val, 101);
        assert_null(str_find(&m, same, "z"));
        str_map_remove(&m, str_find(&m, same, "x"));
        assert_null(str_find(&m, same, "x"));
        assert_int_equal(str_find(&m, same, "y")->val, 101);
        assert_int_equal(str_map_size(&m), ELEMENTSOF(names) + 1);
        str_map_done(&m);
}

static void test_fnv1a_vectors(void **state) {
        /* The published FNV-1a 64 test vectors. */
        assert_int_equal(fnv1a_64("", 0), UINT64_C(0xcbf29ce484222325));
        assert_int_equal(fnv1a_64(NULL, 0), UINT64_C(0xcbf29ce484222325));
        assert_int_equal(fnv1a_64("a", 1), UINT64_C(0xaf63dc4c8601ec8c));
        assert_int_equal(fnv1a_64("foobar", 6), UINT64_C(0x85944171f73967e8));
        assert_int_equal(fnv1a_64_str("foobar"), UINT64_C(0x85944171f73967e8));
        assert_int_equal(fnv1a_64_str(""), UINT64_C(0xcbf29ce484222325));
        /* Bytes above 0x7f hash as unsigned. */
        assert_int_equal(fnv1a_64("\xff", 1), fnv1a_64_str("\xff"));
        assert_int_equal(fnv1a_64("\xff", 1), (UINT64_C(0xcbf29ce484222325) ^ 0xff) * UINT64_C(0x100000001b3));
        assert_int_equal(hashmap_str_key("foobar"), UINT64_C(0x85944171f73967e8));
        /* hash_fibonacci puts 16 sequential keys in 16 distinct slots. */
        unsigned hit = 0;
        for (uint64_t k = 1; k <= 16; k++)
                hit |= 1u << hash_fibonacci(k, 4);
        assert_int_equal(hit, 0xffff);
}

static void test_iteration_visits_each_entry_once(void **state) {
        struct int_map m = {};
        assert_null(int_map_next(&m, NULL));
        uint64_t sum = 0;
        for (uint64_t k = 1; k <= 777; k++) {
                assert_int_equal(int_map_insert(&m, (struct int_slot) { .key = k * 3, .val = 0 }), 0);
                sum += k * 3;
        }
        size_t n = 0;
        uint64_t got = 0;
        for (struct int_slot *s = NULL; (s = int_map_next(&m, s));) {
                assert_int_equal(s->val, 0); /* not seen before */
                s->val = 1;
                n++;
                got += s->key;
        }
        assert_int_equal(n, 777);
        assert_int_equal(got, sum);

        /* Clear empties it, keeps the memory, and the table is usable again. */
        void *slots = m.raw.slots;
        int_map_clear(&m);
        assert_int_equal(int_map_size(&m), 0);
        assert_null(int_map_next(&m, NULL));
        assert_null(int_map_get(&m, 3));
        assert_ptr_equal(m.raw.slots, slots);
        (void) int_map_put(&m, (struct int_slot) { .key = 3, .val = 4 });
        assert_int_equal(int_map_get(&m, 3)->val, 4);
        assert_int_equal(int_map_size(&m), 1);
        int_map_done(&m);
}

/* Owned objects behind the entries: iterate to free them, then done. The
 * sanitizer build's leak check holds this test to it. */
static void test_freeing_owned_entries(void **state) {
        struct obj_map m = {};
        for (uint64_t id = 1; id <= 300; id++) {
                struct obj *o = calloc(1, sizeof *o);
                assert_non_null(o);
                o->id = id;
                assert_int_equal(obj_map_insert(&m, (struct obj_slot) { .key = id, .obj = o }), 0);
        }
        /* Take some out, as the hub's take does: remove, then free. */
        for (uint64_t id = 10; id <= 300; id += 10) {
                struct obj_slot *s = obj_map_get(&m, id);
                struct obj *o = s->obj;
                obj_map_remove(&m, s);
                assert_int_equal(o->id, id);
                free(o);
        }
        assert_int_equal(obj_map_size(&m), 270);
        size_t freed = 0;
        for (struct obj_slot *s = NULL; (s = obj_map_next(&m, s));) {
                assert_int_equal(s->obj->id, s->key);
                free(s->obj);
                freed++;
        }
        assert_int_equal(freed, 270);
        obj_map_done(&m);
        assert_null(m.raw.slots);
        assert_int_equal(obj_map_size(&m), 0);
        /* Done leaves an empty, usable table. */
        assert_null(obj_map_get(&m, 1));
        assert_int_equal(obj_map_insert(&m, (struct obj_slot) { .key = 1, .obj = NULL }), 0);
        assert_int_equal(obj_map_size(&m), 1);
        obj_map_done(&m);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_empty_table_owns_nothing_and_finds_nothing),
                cmocka_unit_test(test_insert_find_remove),
                cmocka_unit_test(test_reserve_sizes_and_puts_within_it_never_move_the_table),
                cmocka_unit_test(test_impossible_reservation_fails_and_changes_nothing),
                cmocka_unit_test(test_churn_leaves_no_tombstones),
                cmocka_unit_test(test_collisions_across_the_end_of_the_table),
                cmocka_unit_test(test_a_repeated_key_holds_every_entry),
                cmocka_unit_test(test_string_keys_and_hash_collisions),
                cmocka_unit_test(test_fnv1a_vectors),
                cmocka_unit_test(test_iteration_visits_each_entry_once),
                cmocka_unit_test(test_freeing_owned_entries),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
