/* SPDX-License-Identifier: MIT */
/*
 * The per-unit structures' budgets (SPEC §8: 1,000 units, rings filled, ten
 * watchers, under 8 MiB; docs/benchmarks.md "session 6"). Each of these is
 * allocated once per unit, and glibc serves an allocation of n bytes from a
 * chunk of n + 8 rounded up to 16: one byte past a budget costs 16 B for each
 * of 1,000 units. A field few units use goes out of line (struct unit_rare,
 * unit_file.sandbox); a new one for every unit needs its budget raised here,
 * with the footprint measured (tests/bench/bench-ab.py --only service).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "manager-internal.h"
#include "unit.h"

/* glibc's chunk for an allocation of n bytes (64-bit). */
static size_t chunk_of(size_t n) {
        size_t c = (n + 8 + 15) & ~(size_t) 15;
        return c < 32 ? 32 : c;
}

static void check(const char *what, size_t size, size_t budget) {
        if (chunk_of(size) > chunk_of(budget))
                fail_msg("%s is %zu B: a %zu-byte malloc chunk where the budget is %zu B (a %zu-byte chunk): "
                         "+%zu B for each of 1,000 units (SPEC §8) — move a rarely used field out of line",
                         what, size, chunk_of(size), budget, chunk_of(budget), chunk_of(size) - chunk_of(budget));
}

static void test_unit(void **state) {
        check("struct unit", sizeof(struct unit), 200);
}

static void test_unit_data(void **state) {
        check("struct unit_data (the manager's per-unit data)", sizeof(struct unit_data), 216);
        check("struct jobs_unit (in struct unit_data)", sizeof(struct jobs_unit), 24);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_unit),
                cmocka_unit_test(test_unit_data),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
