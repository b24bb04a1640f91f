/* SPDX-License-Identifier: MIT */
/* The record tests/bench/stamp.c writes to the harness's FIFO. */
#pragma once

#include <stdint.h>

#define BENCH_STAMP_MAGIC 0x504d5453u /* "STMP" */

struct bench_stamp {
        uint64_t ns;    /* CLOCK_MONOTONIC, read first thing in main() */
        int32_t pid;
        uint32_t magic;
};
