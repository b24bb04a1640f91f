/* SPDX-License-Identifier: MIT */
/*
 * The trivial program the service-mode benchmarks run under every supervisor
 * (SPEC §8; tests/bench/bench-service.py). Linked statically, so the dynamic
 * loader does not dominate what is measured.
 *
 * The first thing main() does is read CLOCK_MONOTONIC; then it writes one
 * struct bench_stamp (16 bytes, atomic: < PIPE_BUF) to the FIFO and does what
 * the mode asks:
 *
 *   hold   close the FIFO and pause() until killed      (a long-running unit)
 *   exit   exit 1 at once                                (a crash loop)
 *   fill   first write FILL_LINES lines of 80 bytes to stdout (> 4 KiB: a
 *          filled log ring), then stamp, then pause()    (the footprint run)
 *
 * Configuration: `stamp FIFO MODE`, or, when run without arguments (runsv
 * and s6-supervise exec ./run bare), $STAMP_FIFO and $STAMP_MODE.
 * Exit status 111 when the FIFO cannot be written (the harness then times
 * out naming the row).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench-stamp.h"

#define FILL_LINES 64

static void fill(void) {
        char line[80];
        memset(line, 'x', sizeof line);
        memcpy(line, "bench fill line ", 16);
        line[sizeof line - 1] = '\n';
        for (int i = 0; i < FILL_LINES; i++)
                if (write(STDOUT_FILENO, line, sizeof line) < 0)
                        return;
}

int main(int argc, char **argv) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);

        const char *fifo = argc > 2 ? argv[1] : getenv("STAMP_FIFO");
        const char *mode = argc > 2 ? argv[2] : getenv("STAMP_MODE");
        if (!fifo || !mode)
                return 111;
        if (!strcmp(mode, "fill")) {
                fill();
                clock_gettime(CLOCK_MONOTONIC, &ts); /* "started" = the lines are out */
        }
        struct bench_stamp s = {
                .ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec,
                .pid = getpid(),
                .magic = BENCH_STAMP_MAGIC,
        };
        int fd = open(fifo, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, &s, sizeof s) != (ssize_t) sizeof s)
                return 111;
        if (!strcmp(mode, "exit"))
                _exit(1);
        close(fd);
        for (;;)
                pause();
}
