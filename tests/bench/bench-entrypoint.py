#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Startup + exit overhead of the entrypoint (SPEC §6, §8): the wall time from
spawn to reap of `tend -- true`, against `true` alone (the floor every ratio
names), `tini -- true`, `tini -s -- true` and `dumb-init true`, plus the
kernel's floor for a static trivial program when BENCH_TRIVIAL is set.

With BENCH_TRIVIAL and TEND_STATIC (tend-static, the self-contained
entrypoint), the same static trivial program also runs under tend-static,
tend, tini and dumb-init side by side (issue 18), and in full mode the
benchmark fails when tend-static's median is above 0.95 × tini's. TEND_STATIC_B
adds a row for a second tend-static build (an A/B of two builds).

Runs are interleaved round-robin (one of each, repeated) so drift and noise
from other load hit every row alike, in a new random order each round (seeded:
reproducible) so that no row always runs right after the same other one; each run is posix_spawn + waitpid from
this process, stdout/stderr to /dev/null. Full mode: 300 runs per row (after
20 warm-up rounds); --quick (CI): 5 runs, nothing judged. A missing peer fails
the benchmark (SPEC §8); it is never skipped.

    TEND=build/supervisor/tend tests/bench/bench-entrypoint.py [--quick] [--runs N]
"""
import os
import platform
import random
import shutil
import statistics
import sys
import time


def find(name):
    path = shutil.which(name)
    if not path:
        sys.exit('bench-entrypoint: %s not found: a missing peer fails the benchmark (SPEC §8)' % name)
    return path


def rows():
    tend = os.environ.get('TEND')
    if not tend or not os.access(tend, os.X_OK):
        sys.exit('bench-entrypoint: TEND=%r is not executable: run through meson test' % tend)
    true = find('true')
    tini, dumb = find('tini'), find('dumb-init')
    out = [
        ('true', [true]),
        ('tend -- true', [tend, '--', true]),
        ('tini -- true', [tini, '--', true]),
        ('tini -s -- true', [tini, '-s', '--', true]),
        ('dumb-init true', [dumb, true]),
    ]
    trivial = os.environ.get('BENCH_TRIVIAL')
    if trivial and os.access(trivial, os.X_OK):
        out.insert(0, ('static trivial (kernel floor)', [trivial]))
        static = os.environ.get('TEND_STATIC')
        if static and os.access(static, os.X_OK):
            out += [
                ('tend-static -- trivial', [static, '--', trivial]),
                ('tend -- trivial', [tend, '--', trivial]),
                ('tini -- trivial', [tini, '--', trivial]),
                ('tini -s -- trivial', [tini, '-s', '--', trivial]),
                ('dumb-init trivial', [dumb, trivial]),
            ]
            other = os.environ.get('TEND_STATIC_B')
            if other and os.access(other, os.X_OK):
                out.append(('tend-static B -- trivial', [other, '--', trivial]))
    return out


def one(argv, actions):
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
    _, status = os.waitpid(pid, 0)
    t1 = time.perf_counter_ns()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit('bench-entrypoint: %s exited with %d' % (' '.join(argv), os.waitstatus_to_exitcode(status)))
    return (t1 - t0) / 1000.0  # µs


def pct(sorted_values, p):
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * len(sorted_values))) - 1))
    return sorted_values[k]


def main():
    quick = '--quick' in sys.argv
    runs = 5 if quick else 300
    if '--runs' in sys.argv:
        runs = int(sys.argv[sys.argv.index('--runs') + 1])
    warm = 2 if quick else 20
    table = rows()
    actions = [(os.POSIX_SPAWN_OPEN, 1, '/dev/null', os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, '/dev/null', os.O_WRONLY, 0)]
    samples = {name: [] for name, _ in table}
    order = list(table)
    rng = random.Random(6)
    for i in range(warm + runs):
        rng.shuffle(order)
        for name, argv in order:
            us = one(argv, actions)
            if i >= warm:
                samples[name].append(us)

    cpu = 'unknown'
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next(ln.split(':', 1)[1].strip() for ln in f if ln.startswith('model name'))
    except (OSError, StopIteration):
        pass
    print('bench-entrypoint: %d runs per row%s; %d CPUs, %s, kernel %s, load average %s'
          % (runs, ' (quick: nothing judged)' if quick else '', os.cpu_count(), cpu, platform.release(),
             ' '.join('%.2f' % x for x in os.getloadavg())))
    base = sorted(samples['true'])
    bmed, bp99 = statistics.median(base), pct(base, 99)
    print('| command | median µs | p99 µs | median ÷ true | p99 ÷ true |')
    print('|---|---|---|---|---|')
    for name, _ in table:
        v = sorted(samples[name])
        med, p99 = statistics.median(v), pct(v, 99)
        print('| `%s` | %.0f | %.0f | %.2f× | %.2f× |' % (name, med, p99, med / bmed, p99 / bp99))
    return judge(samples, quick)


# tend-static's median must be at most this share of tini's: a tie is not "no
# slower" on a shared machine, where a coin toss decides it (docs/benchmarks.md
# "session 10": glibc's start-up was the tie, musl's start-up wins by ~40 %).
MARGIN = 0.95


def judge(samples, quick):
    """Issue 18: tend-static starts the trivial program clearly faster than tini."""
    if 'tend-static -- trivial' not in samples:
        return 0
    ours = statistics.median(samples['tend-static -- trivial'])
    tini = statistics.median(samples['tini -- trivial'])
    floor = statistics.median(samples['static trivial (kernel floor)'])
    ok = ours <= MARGIN * tini
    print('tend-static median %.0f µs, tini median %.0f µs, kernel floor %.0f µs: %.2f× tini, %.2f× the floor, '
          'tini %.2f× the floor (limit %.2f× tini): %s'
          % (ours, tini, floor, ours / tini, ours / floor, tini / floor, MARGIN, 'ok' if ok else 'SLOWER'))
    return 0 if quick or ok else 1


if __name__ == '__main__':
    sys.exit(main())
