#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The cost of issue 17's mount namespace (docs/benchmarks.md "issue 17: the cost
of hardening"): units with ProtectSystem=strict + PrivateTmp=yes + PrivateDevices=yes
beside the same units without, and beside two floors, in one run:

  loop      the minimal restart loop (restart-loop.c: posix_spawn, waitpid)
  loop-ns   the same loop whose child makes the namespace tend makes for the three
            keys before its exec (restart-loop-ns.c, floor-ns.h: the same system
            calls, nothing else)
  tend      tend, units without the keys (Restart=always, RestartSec=0)
  tend-ns   tend, the same units with the three keys
  tend-hook tend, the units with Nice=0 only: a pre-exec hook, so tend forks (clone3
            without CLONE_VM) as for the keys, but makes no namespace
  tend-cwd  tend, the units with WorkingDirectory=/run only: no hook, but off the vfork
            path (a working directory other than /): libexit's shared-memory path
            (clone3(CLONE_VM) without CLONE_VFORK; before it, clone3 without CLONE_VM)
  tend-ns-sc  the same with SystemCallFilter=@system-service (the seccomp programs'
            cost: compiled once per unit file, cost17), beside loop-ns (no seccomp floor)

  restart   SIGKILL → the new instance's first clock read (bench-restart kill),
            the rows interleaved round robin, each instance killed after 1.2 s.
  start     N units (default 100) from the fork of the supervisor to the N-th stamp,
            the rows interleaved, --repeats times.

Every row runs tests/bench/stamp.c; the FIFOs live under /run (PrivateTmp= hides /tmp;
a FIFO stays writable under ProtectSystem=strict). tend runs in cgroup mode when the
cgroup2 tree is writable (bench-service.py's Cgroups). Needs root (the namespace).

TEND_B=PATH adds tend-b, tend-hook-b, tend-cwd-b, tend-ns-b and tend-ns-sc-b: a second
tend binary measured in the same rounds (a before/after of one run).

    TEND=… TENDCTL=… BENCH_STAMP=… BENCH_LOOP=… BENCH_LOOP_NS=… BENCH_HARNESS=…
        bench-hardening.py [--quick] [--only restart,start] [--kills N] [--units N] [--repeats N]
        [--rows ROW,…]   (keeps those rows and the two floors)

--quick (CI): a few iterations, nothing judged. Not root: skipped (exit status 77). A full run prints the ratios and a
"met"/"NOT met" line per target (tend-ns within 1.2× of loop-ns on restart, median and
p99; the start of N units within 1.5× of loop-ns). Exit status 1 only when a row fails
functionally.
"""
import importlib.util
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location('bench_service', os.path.join(HERE, 'bench-service.py'))
bs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bs)

KEYS = 'ProtectSystem=strict\nPrivateTmp=yes\nPrivateDevices=yes\n'
FILTER = 'SystemCallFilter=@system-service\n'
HOOK = 'Nice=0\n'
CWD = 'WorkingDirectory=/run\n'
ROWS = ['loop', 'loop-ns', 'tend', 'tend-hook', 'tend-cwd', 'tend-ns', 'tend-ns-sc']
if os.environ.get('TEND_B'):
    ROWS += ['tend-b', 'tend-hook-b', 'tend-cwd-b', 'tend-ns-b', 'tend-ns-sc-b']
SHOWN = {'loop': 'minimal restart loop (floor)', 'loop-ns': 'minimal loop + the namespace (floor-ns)',
         'tend': 'tend, no keys', 'tend-ns': 'tend, the three keys',
         'tend-hook': 'tend, Nice=0 (a pre-exec hook, no namespace)',
         'tend-cwd': 'tend, WorkingDirectory=/run (no hook, off the vfork path)',
         'tend-hook-b': 'tend B, Nice=0', 'tend-cwd-b': 'tend B, WorkingDirectory=/run',
         'tend-ns-sc': 'tend, the three keys + SystemCallFilter=@system-service',
         'tend-b': 'tend B, no keys', 'tend-ns-b': 'tend B, the three keys',
         'tend-ns-sc-b': 'tend B, the three keys + SystemCallFilter=@system-service'}


def keys_of(row):
    return ((KEYS if '-ns' in row else '') + (FILTER if '-sc' in row else '') + (HOOK if '-hook' in row else '')
            + (CWD if '-cwd' in row else ''))


def floor_of(row):
    return 'loop-ns' if '-ns' in row else 'loop'


class Hardening(bs.Bench):
    def __init__(self, args):
        tempfile.tempdir = '/run' if os.access('/run', os.W_OK) else None
        super().__init__(args)
        self.loop_ns = bs.env_path('BENCH_LOOP_NS')

    def hard_unit(self, units, name, fifo, mode, keys):
        self.write(os.path.join(units, name + '.service'),
                   '[Unit]\nDescription=bench %s\nStartLimitIntervalSec=0\n\n[Service]\nExecStart=%s %s %s\n'
                   'Restart=always\nRestartSec=0\n%s' % (name, self.stamp, fifo, mode, keys))

    def argv(self, row, d, fifo, mode, n):
        if row in ('loop', 'loop-ns'):
            prog = self.loop if row == 'loop' else self.loop_ns
            return [prog] + (['--spawn', str(n)] if n > 1 else []) + [self.stamp, fifo, mode]
        units = os.path.join(d, 'units')
        os.mkdir(units)
        for i in range(n):
            self.hard_unit(units, 'bench' if n == 1 else 'bench-%04d' % i, fifo, mode, keys_of(row))
        tend = self.tend_b if row.endswith('-b') else self.tend
        return [tend, '--config-dir', units, '--control-socket', os.path.join(d, 'control')]

    def launch_opts(self, row, cg):
        return ['--cgroup', cg] if cg else []

    def table(self, title, res):
        print('\n### %s\n' % title)
        print('| row | n | median ms | p99 ms | min ms | max ms | ÷ loop (median) | ÷ loop-ns (median) |')
        print('|---|---:|---:|---:|---:|---:|---:|---:|')
        lm, nm = statistics.median(res['loop']), statistics.median(res['loop-ns'])
        for r in ROWS:
            v = res[r]
            m = statistics.median(v)
            print('| %s | %d | %.3f | %.3f | %.3f | %.3f | %.2f× | %.2f× |'
                  % (SHOWN[r], len(v), bs.ms(m), bs.ms(bs.pct(v, 99)), bs.ms(min(v)), bs.ms(max(v)), m / lm, m / nm))
        if 'tend-hook' in res and 'tend-ns' in res:
            print('tend, Nice=0: the fork path (a hook, no namespace) adds %.3f ms (median) to tend; the namespace '
                  'then %.3f ms' % (bs.ms(statistics.median(res['tend-hook']) - statistics.median(res['tend'])),
                                    bs.ms(statistics.median(res['tend-ns']) - statistics.median(res['tend-hook']))))
        for t in [r for r in ROWS if r.replace('tend', 'tend-ns') in res and '-ns' not in r and r != 'loop'
                  and '-hook' not in r and '-cwd' not in r]:
            ns = t.replace('tend', 'tend-ns')
            print('%s: the namespace adds %.3f ms (median) to tend, %.3f ms to the loop'
                  % (SHOWN[ns], bs.ms(statistics.median(res[ns]) - statistics.median(res[t])), bs.ms(nm - lm)))

    def run_harness(self, args, what):
        """bench-service's, keeping the harness's "pid NAME PID" lines in self.pids."""
        r = bs.subprocess.run([self.harness] + args, stdout=bs.subprocess.PIPE, stderr=bs.subprocess.PIPE, text=True)
        if r.returncode != 0:
            self.check_running()
            bs.fail('%s: %s' % (what, r.stderr.strip()))
        samples, self.pids = {}, {}
        for ln in r.stdout.splitlines():
            w = ln.split()
            if w[0] == 'sample':
                samples.setdefault(w[1], []).append(int(w[2]))
            elif w[0] == 'pid':
                self.pids[w[1]] = int(w[2])
        return samples

    def check_namespaces(self):
        """Each row's last instance: a mount namespace of its own with a tmpfs on /tmp
        exactly when the row asks for the keys, /run its working directory exactly when
        the row sets it (a row that measured nothing fails)."""
        own = os.readlink('/proc/self/ns/mnt')
        for row, pid in sorted(self.pids.items()):
            try:
                mnt = os.readlink('/proc/%d/ns/mnt' % pid)
                with open('/proc/%d/mountinfo' % pid) as f:
                    tmp = any(ln.split()[4] == '/tmp' and ln.split(' - ')[1].startswith('tmpfs ') for ln in f)
            except OSError as e:
                bs.fail('%s: instance %d: %s' % (row, pid, e))
            if ('-ns' in row) != (mnt != own and tmp):
                bs.fail('%s: instance %d: own mount namespace %s, tmpfs on /tmp %s: the row does not measure what '
                        'it says' % (row, pid, mnt != own, tmp))
            cwd = os.readlink('/proc/%d/cwd' % pid)
            if ('-cwd' in row) != (cwd == '/run'):
                bs.fail('%s: instance %d runs in %s: the row does not measure what it says' % (row, pid, cwd))

    def restart(self, kills, hold):
        print('\n## restart latency: long-running unit killed (SIGKILL → next stamp)')
        warm = 1 if self.quick else 5
        print('%d kills per row after %d warm-up rounds, each instance killed after %d ms, rows interleaved; '
              'load before: %s' % (kills, warm, hold, bs.load()))
        fifos = [self.start_row(r, 'hold') for r in ROWS]
        try:
            res = self.run_harness(['kill', '--count', str(kills), '--warmup', str(warm), '--hold-ms', str(hold)]
                                   + fifos, 'restart latency')
            self.check_namespaces()
        finally:
            self.stop_all()
        print('load after: %s' % bs.load())
        self.table('restart latency, SIGKILL → new instance', res)
        if not self.quick:
            print()
            for r in [r for r in ROWS if r.startswith('tend-ns') and '-sc' not in r]:
                v, f = res[r], res['loop-ns']
                m, p = statistics.median(v) / statistics.median(f), bs.pct(v, 99) / bs.pct(f, 99)
                print('target (%s): restart within 1.2× of loop-ns (median %.2f×, p99 %.2f×): %s'
                      % (SHOWN[r], m, p, 'met' if m <= 1.2 and p <= 1.2 else 'NOT met'))

    def start(self, n, repeats):
        print('\n## start of %d units (harness clock before the fork of the supervisor → the %d-th stamp)' % (n, n))
        print('%d repetitions per row, rows interleaved; load before: %s' % (repeats, bs.load()))
        res = {r: [] for r in ROWS}
        for _ in range(repeats):
            for row in ROWS:
                h, el, _, _, _, cg = self.start_supervisor(row, n, 'hold')
                self.stop_supervisor(h, cg)
                res[row].append(el)
        print('load after: %s' % bs.load())
        self.table('start of %d units' % n, res)
        if not self.quick:
            print()
            for r in [r for r in ROWS if r.startswith('tend-ns') and '-sc' not in r]:
                m = statistics.median(res[r]) / statistics.median(res['loop-ns'])
                print('target (%s): %d units within 1.5× of loop-ns: %.2f× — %s'
                      % (SHOWN[r], n, m, 'met' if m <= 1.5 else 'NOT met'))


def main():
    args = sys.argv[1:]

    def opt(name, default):
        return int(args[args.index(name) + 1]) if name in args else default

    if '--rows' in args:
        global ROWS
        keep = set(args[args.index('--rows') + 1].split(',')) | {'loop', 'loop-ns'}
        ROWS = [r for r in ROWS if r in keep]
    if os.geteuid() != 0:
        print('bench-hardening: skipped: needs root (the mount namespace, tend\'s and the floor\'s)', file=sys.stderr)
        return 77
    b = Hardening(args)
    only = args[args.index('--only') + 1].split(',') if '--only' in args else ['restart', 'start']
    bs.make_subreaper()
    print('bench-hardening%s: %s; load average %s; cgroups: %s'
          % (' (quick: nothing judged)' if b.quick else '', bs.machine(), bs.load(), b.cg.base or 'none'))
    try:
        if 'restart' in only:
            b.restart(opt('--kills', 3 if b.quick else 200), opt('--hold-ms', 1100 if b.quick else 1200))
        if 'start' in only:
            b.start(opt('--units', 20 if b.quick else 100), opt('--repeats', 1 if b.quick else 5))
    finally:
        b.stop_all()
        b.cg.done()
        if not b.cg.base:
            bs.kill_descendants()
        import shutil
        shutil.rmtree(b.tmp, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
