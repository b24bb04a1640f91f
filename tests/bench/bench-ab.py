#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Before/after: two release builds of tend measured in alternating rounds of one run.

    bench-ab.py OLD_BUILD NEW_BUILD [--rounds N] [--quick] [--only PART,…]

OLD_BUILD and NEW_BUILD are meson build directories configured with
--buildtype=release (e.g. a `git worktree` of the commit before a change, and
the change). Each round runs every part once for each build, the order of the
builds swapped every round, and reports new ÷ old per round; a metric's
verdict is "regression" when its ratios' whole spread across rounds lies above
1.05 (for a metric where more is better, below 1/1.05), as issue 15 defines.

Parts (all SPEC §8 figures, measured by the project's own benchmarks):
  service   tests/bench/bench-service.py with TEND=new and TEND_B=old in the same
            run (restart of a long-running unit, crash loop, start of N units,
            footprint with ten watchers; cgroup and process-group modes), beside
            the same minimal-restart-loop floor
  hub       libexit's batch and ping-pong runs (tests/bench/bench-exit-hub.c)
  storm     the exit storm (tests/bench/bench-reaper.c: 10,000 orphans)
  sf        the single-flight table (tests/bench/bench-singleflight.c)

Every round's numbers are printed (docs/benchmarks.md keeps them). Run as root
on a quiet machine; MALLOC_PERTURB_ is 0 as in `meson test --suite bench`.
"""
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PARTS = ['service', 'hub', 'storm', 'sf']


def run(argv, env=None, timeout=3600):
    e = dict(os.environ, MALLOC_PERTURB_='0')
    e.update(env or {})
    p = subprocess.run(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode(errors='replace')
    if p.returncode != 0:
        print(out)
        raise SystemExit('bench-ab: %s failed (exit %d): a benchmark broke, not a ratio' % (argv[0], p.returncode))
    return out


def num(s):
    return float(s.replace(',', '').split()[0])


# ---- parts: each returns {metric: (value, higher_is_better)} per build ----

def service(old, new, quick, units, swap):
    """One bench-service run holds both builds (rows tend / tend B): returns (old, new).
    swap puts old in the rows "tend" and new in "tend B" (the rows' order
    matters: in the restart bench the row killed first was seen 10-15 % slower
    whichever build it ran, so the builds take turns)."""
    if swap:
        o, n = service(new, old, quick, units, False)
        return n, o
    b = os.path.join(new, 'tests', 'bench')
    argv = ['python3', os.path.join(HERE, 'bench-service.py'), '--rows', 'tend,tend-pg,tend-b,tend-pg-b',
            '--rounds', '1', '--repeats', '1']
    argv += ['--quick'] if quick else ['--kills', '40', '--units', str(units)]
    out = run(argv, env={'TEND': os.path.join(new, 'supervisor', 'tend'),
                         'TEND_B': os.path.join(old, 'supervisor', 'tend'),
                         'TENDCTL': os.path.join(new, 'supervisor', 'tendctl'),
                         'BENCH_STAMP': os.path.join(b, 'stamp'), 'BENCH_LOOP': os.path.join(b, 'restart-loop'),
                         'BENCH_HARNESS': os.path.join(b, 'bench-restart')})
    got = ({}, {})
    section = None
    for line in out.splitlines():
        if line.startswith('### '):
            section = {'long': 'restart', 'cras': 'crash'}.get(line[4:8])
        elif line.startswith('## start'):
            section = 'start'
        elif line.startswith('## footprint'):
            section = 'footprint'
        m = re.match(r'\| tend( B)? \((cgroup mode|process groups)\) \|(.*)', line)
        if not m or not section:
            continue
        which = 0 if m.group(1) else 1
        mode = 'cg' if m.group(2) == 'cgroup mode' else 'pg'
        cols = [c.strip() for c in m.group(3).split('|')]
        if section in ('restart', 'crash'):  # n | median | p99 | …
            got[which]['%s %s median ms' % (section, mode)] = (num(cols[1]), False)
            got[which]['%s %s p99 ms' % (section, mode)] = (num(cols[2]), False)
        elif section == 'start':  # median | min | max | first
            got[which]['start %s ms' % mode] = (num(cols[0]), False)
        elif section == 'footprint':  # processes | PSS total | of which anonymous | …
            got[which]['footprint %s PSS MiB' % mode] = (num(cols[1]), False)
            # The anonymous part (the heap): what tend's code decides. The rest, its binary's and
            # libraries' pages, is shared with whatever else maps them: it moves with the host.
            got[which]['footprint %s anonymous PSS MiB' % mode] = (num(cols[2]), False)
    return got


def hub(build, quick):
    out = run([os.path.join(build, 'tests', 'bench', 'bench-exit-hub')] + (['--quick'] if quick else []))
    got, part = {}, None
    for line in out.splitlines():
        if line.startswith('(a)'):
            part = 'batch'
        elif line.startswith('(b)'):
            part = 'ping-pong'
        elif line.startswith('(c)'):
            part = None
        m = re.match(r'\s+(.+?)\s{2,}([\d.]+) /s median', line)
        if m and part:
            got['hub %s: %s /s' % (part, m.group(1).strip())] = (float(m.group(2)), True)
    return got


def storm(build, quick):
    out = run([os.path.join(build, 'tests', 'bench', 'bench-reaper')] + (['--quick'] if quick else []),
              env={'BENCH_TRIVIAL': os.path.join(build, 'tests', 'bench', 'trivial'),
                   'BENCH_BLOCK_CHILD': os.path.join(build, 'tests', 'bench', 'block-child')})
    got = {}
    for line in out.splitlines():
        m = re.match(r'(reaper, .+?)\s{2,}([\d.]+) ms', line)
        if m:
            got['storm %s ms' % m.group(1)] = (float(m.group(2)), False)
    return got


def sf(build, quick):
    out = run([os.path.join(build, 'tests', 'bench', 'bench-singleflight')] + (['--quick'] if quick else []))
    got = {}
    for line in out.splitlines():
        m = re.match(r'(.{44}) +(\d+) +(\d+) +([\d.]+) +([\d.]+) ', line)
        if m:
            got['sf %s (%s threads) ns/cycle' % (m.group(1).strip(), m.group(2))] = (float(m.group(5)), False)
    return got


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        raise SystemExit(__doc__)
    old, new = os.path.abspath(args[0]), os.path.abspath(args[1])
    rounds = int(args[args.index('--rounds') + 1]) if '--rounds' in args else 5
    units = int(args[args.index('--units') + 1]) if '--units' in args else 1000
    quick = '--quick' in args
    only = args[args.index('--only') + 1].split(',') if '--only' in args else PARTS
    ratios = {}  # metric -> [new/old per round]
    for r in range(rounds):
        order = [(old, 'old'), (new, 'new')] if r % 2 == 0 else [(new, 'new'), (old, 'old')]
        print('\n=== round %d of %d (order: %s; service rows: %s), load %.2f'
              % (r + 1, rounds, ', '.join(n for _, n in order), 'tend = old' if r % 2 else 'tend = new',
                 os.getloadavg()[0]), flush=True)
        vals = {'old': {}, 'new': {}}
        if 'service' in only:
            o, n = service(old, new, quick, units, r % 2 == 1)
            vals['old'].update(o)
            vals['new'].update(n)
        for part, fn in (('hub', hub), ('storm', storm), ('sf', sf)):
            if part in only:
                for build, name in order:
                    vals[name].update(fn(build, quick))
        for metric in sorted(vals['new']):
            if metric not in vals['old']:
                continue
            (o, better_high), (n, _) = vals['old'][metric], vals['new'][metric]
            ratio = n / o if o else float('nan')
            ratios.setdefault(metric, ([], better_high))[0].append(ratio)
            print('  %-64s old %12.3f  new %12.3f  new/old %.3f' % (metric, o, n, ratio), flush=True)
    print('\n| metric | new ÷ old per round | median | verdict |')
    print('|---|---|---:|---|')
    bad = 0
    for metric, (rs, better_high) in sorted(ratios.items()):
        worse = min(rs) > 1.05 if not better_high else max(rs) < 1 / 1.05
        reference = 'baseline' in metric  # the machine's own figure (a bare eventfd), not tend's code
        bad += worse and not reference
        verdict = 'reference (not tend)' if reference else 'regression' if worse else 'no regression'
        print('| %s | %s | %.3f | %s |' % (metric, ' '.join('%.2f' % x for x in rs), statistics.median(rs), verdict))
    print('\n%d metric(s) regressed (a spread wholly beyond 5 %%)' % bad)
    return 0


if __name__ == '__main__':
    sys.exit(main())
