/* SPDX-License-Identifier: MIT */
/*
 * Property fuzzing of tend's small parsers (time spans, signal names) with
 * seeded random inputs built from the grammar's own tokens plus noise. Each
 * input must be refused or round-trip: parse → format → parse gives the same
 * value. Run in CI under ASan+UBSan, where any out-of-bounds read is fatal.
 * Usage: fuzz-parsers [ITERATIONS [SEED]]; a failure prints the input and seed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signal-util.h"
#include "timespan.h"

static const char *const tokens[] = {
        "0", "1", "5", "59", "1000", ".", ".5", " ", "  ", "s", "ms", "us", "min", "m", "h", "d", "w", "y",
        "sec", "msec", "usec", "hour", "days", "infinity", "x", "-", "+", "\t", "µs", "99999999999999999999",
        "SIG", "TERM", "RTMIN", "RTMAX", "rtmin", "KILL", "64", "65", ":", "HUP", "sigusr1",
};

static unsigned long long seed;

static unsigned rnd(unsigned n) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        return (unsigned) ((seed >> 33) % n);
}

static void make_input(char *buf, size_t size) {
        size_t len = 0;
        unsigned n = rnd(6) + 1;
        buf[0] = '\0';
        for (unsigned i = 0; i < n; i++) {
                const char *t;
                char noise[2] = { (char) (rnd(255) + 1), 0 };
                t = rnd(10) == 0 ? noise : tokens[rnd(sizeof tokens / sizeof tokens[0])];
                size_t l = strlen(t);
                if (len + l + 1 >= size)
                        break;
                memcpy(buf + len, t, l + 1);
                len += l;
        }
}

static int check_timespan(const char *in) {
        usec_t v = 0;
        if (parse_timespan(in, USEC_PER_SEC, &v) < 0)
                return 0;
        char buf[64];
        usec_t again = 0;
        const char *f = format_timespan(v, buf);
        if (parse_timespan(f, USEC_PER_SEC, &again) < 0 || again != v) {
                fprintf(stderr, "timespan \"%s\" = %llu formats as \"%s\", which parses as %llu\n", in,
                        (unsigned long long) v, f, (unsigned long long) again);
                return -1;
        }
        return 1;
}

static int check_signal(const char *in) {
        int sig = signal_from_string(in);
        if (sig == -EINVAL)
                return 0;
        char buf[24];
        if (sig < 1 || sig >= _NSIG || signal_from_string(signal_to_string(sig, buf)) != sig) {
                fprintf(stderr, "signal \"%s\" = %d does not round-trip\n", in, sig);
                return -1;
        }
        return 1;
}

int main(int argc, char **argv) {
        long iterations = argc > 1 ? atol(argv[1]) : 200000;
        seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 20261130;
        unsigned long long first_seed = seed;
        long accepted_spans = 0, accepted_signals = 0;
        for (long i = 0; i < iterations; i++) {
                char in[128];
                make_input(in, sizeof in);
                int a = check_timespan(in), b = check_signal(in);
                if (a < 0 || b < 0) {
                        fprintf(stderr, "fuzz-parsers: failed at iteration %ld (seed %llu)\n", i, first_seed);
                        return 1;
                }
                accepted_spans += a;
                accepted_signals += b;
        }
        /* A generator that never produces a valid input tests nothing. */
        if (accepted_spans < iterations / 100 || accepted_signals < iterations / 1000) {
                fprintf(stderr, "fuzz-parsers: too few valid inputs (%ld spans, %ld signals): the generator is broken\n",
                        accepted_spans, accepted_signals);
                return 1;
        }
        printf("fuzz-parsers: %ld inputs, %ld valid time spans and %ld valid signal names round-tripped (seed %llu)\n",
               iterations, accepted_spans, accepted_signals, first_seed);
        return 0;
}
