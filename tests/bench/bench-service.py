#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Service-mode benchmarks of SPEC §8, tend side by side with its peers in one run.

  restart   restart latency of a long-running unit: SIGKILL (the harness's clock,
            read just before the kill) → the new instance's first clock read after
            its exec. Rows interleaved round robin; each instance has run 1.2 s when
            it is killed (runit waits 1 s before restarting a service that ran less
            than 1 s: this is the long-running case). tend in cgroup mode runs in a
            group of its own, beside a floor of its own (see RESTART_GROUPS).
  crash     crash loop: the program exits 1 right after its stamp; the interval
            between two consecutive stamps (exit + reap + decision + spawn + exec,
            nothing subtracted). Fast rows run alone, in rounds (--rounds, 5): each
            round runs every fast row in turn for its share of the intervals, the
            order rotated, so that the floor and tend sample the same minutes of
            a shared machine. Rows that throttle (a first interval over 200 ms)
            run together afterwards, so their waits overlap.
  start     1,000 units (each the static stamp program, then pause()): from the
            harness's clock just before it forks the supervisor to the 1,000th stamp.
  footprint 1,000 running units whose log rings are filled (each writes 64 lines,
            5 KiB, to stdout; tend's console target is /dev/null) and ten
            `tendctl watch` clients: tend's PSS (smaps_rollup) and its wake-ups
            (context switches) over 10 s idle; the peers' PSS per service.

Rows: the minimal restart loop (tests/bench/restart-loop.c: waitpid + posix_spawn,
the floor every ratio names), tend (StartLimitIntervalSec=0, Restart=always,
RestartSec=0), runsv / runsvdir, s6-supervise / s6-svscan, supervisord
(autorestart=true, startsecs=0). Every row runs the same static program,
tests/bench/stamp.c (runsv and s6 exec it as ./run, a symlink). A missing peer
fails the benchmark (SPEC §8); it is never skipped.

Each supervisor runs in a cgroup of its own under tend-bench.PID (when the cgroup2
tree is writable), so tend owns a subtree as it would under systemd, and teardown
is one cgroup.kill; this process is a child subreaper, so nothing it started
outlives it either way. Timing is done by tests/bench/bench-restart.c.

    TEND=… TENDCTL=… BENCH_STAMP=… BENCH_LOOP=… BENCH_HARNESS=… bench-service.py
        [--quick] [--only restart,crash,start,footprint] [--kills N] [--rounds N]
        [--units N] [--repeats N] [--rows ROW,…] [--keep]

--rows keeps only the named rows (and the floor, 'loop'), e.g. --rows tend,tend-pg while
working on tend; a run for docs/benchmarks.md uses every row.

TEND_B=PATH (optional) adds the rows tend-b and tend-pg-b: a second tend binary (e.g. the
release build of an earlier commit) measured in the same rounds as the first, beside the
same floor — a before/after comparison of one run (issue 15; docs/benchmarks.md).

--quick (CI): a few iterations of everything, every peer exercised, nothing judged.
Exit status 1 when a row fails functionally (no restart, a missing peer, a lost
stamp), never because a target is missed (that is printed as "NOT met").
"""
import ctypes
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PEERS = ['runsv', 'runsvdir', 'sv', 's6-supervise', 's6-svscan', 's6-svc', 'supervisord']
# Row ids (the harness's NAMEs) and what the tables call them. tend-pg is tend with
# the cgroup2 mounts hidden (a private mount namespace): its process-group mode,
# the mode of a container without a writable cgroup.
ROWS = ['loop', 'tend', 'tend-pg', 'runsv', 's6-supervise', 'supervisord']
START_ROWS = ['loop', 'tend', 'tend-pg', 'runsvdir', 's6-svscan', 'supervisord']
FOOT_ROWS = ['tend', 'tend-pg', 'runsvdir', 's6-svscan', 'supervisord']
TENDS = ['tend', 'tend-pg']
SHOWN = {'loop': 'minimal restart loop (floor)', 'tend': 'tend (cgroup mode)', 'tend-pg': 'tend (process groups)',
         'tend-b': 'tend B (cgroup mode)', 'tend-pg-b': 'tend B (process groups)'}
if os.environ.get('TEND_B'):
    # B beside A in every table: right after it, so the rounds alternate them.
    for rows in (ROWS, START_ROWS, FOOT_ROWS, TENDS):
        for a, b in (('tend', 'tend-b'), ('tend-pg', 'tend-pg-b')):
            rows.insert(rows.index(a) + 1, b)


def shown(row):
    return SHOWN.get(row, row)


def fail(msg):
    print('bench-service: ' + msg, file=sys.stderr)
    raise SystemExit(1)


def env_path(name):
    p = os.environ.get(name)
    if not p or not os.access(p, os.X_OK):
        fail('%s=%r is not executable: run through meson test' % (name, p))
    return os.path.realpath(p)


def find(name):
    p = shutil.which(name)
    if not p:
        fail('%s not found: a missing peer fails the benchmark (SPEC §8)' % name)
    return p


def machine():
    cpu = 'unknown'
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next(ln.split(':', 1)[1].strip() for ln in f if ln.startswith('model name'))
    except (OSError, StopIteration):
        pass
    return '%d CPUs, %s, kernel %s' % (os.cpu_count(), cpu, platform.release())


def load():
    """Load average and the host's process count (the others' load; tend's
    process-group mode scans /proc, so its restarts grow with the count)."""
    n = sum(1 for d in os.listdir('/proc') if d.isdigit())
    return '%.2f %.2f %.2f, %d processes' % (os.getloadavg() + (n,))


def pct(values, p):
    v = sorted(values)
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * len(v))) - 1))
    return v[k]


def ms(ns):
    return ns / 1e6


# ---- processes and cgroups ------------------------------------------------

def make_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        fail('PR_SET_CHILD_SUBREAPER: %s' % os.strerror(ctypes.get_errno()))


def proc_table():
    """pid → (ppid, comm) for every process."""
    out = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % d) as f:
                s = f.read()
        except OSError:
            continue
        rp = s.rindex(')')
        out[int(d)] = (int(s[rp + 2:].split()[1]), s[s.index('(') + 1:rp])
    return out


def descendants(root):
    t = proc_table()
    kids = {}
    for pid, (ppid, _) in t.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def exe(pid):
    try:
        return os.readlink('/proc/%d/exe' % pid)
    except OSError:
        return None


def reap_orphans():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Cgroups:
    """tend-bench.PID under this process's cgroup2 directory, one child per row."""

    def __init__(self):
        self.base = None
        try:
            path = None
            with open('/proc/self/cgroup') as f:
                for ln in f:
                    if ln.startswith('0::'):
                        path = ln[3:].strip()
            mount = None
            with open('/proc/self/mountinfo') as f:
                for ln in f:
                    pre, post = ln.split(' - ', 1)
                    if post.split()[0] == 'cgroup2' and pre.split()[3] == '/':
                        mount = pre.split()[4]
            if path is None or mount is None:
                return
            base = os.path.join(mount, path.lstrip('/'), 'tend-bench.%d' % os.getpid())
            os.mkdir(base)
            self.base = base
        except OSError:
            self.base = None

    def row(self, name):
        if not self.base:
            return None
        d = os.path.join(self.base, name.replace(' ', '-'))
        os.mkdir(d)
        return d

    @staticmethod
    def kill(d):
        if not d or not os.path.isdir(d):
            return
        try:
            with open(os.path.join(d, 'cgroup.kill'), 'w') as f:
                f.write('1')
        except OSError:
            pass
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with open(os.path.join(d, 'cgroup.events')) as f:
                if 'populated 0' in f.read():
                    break
            reap_orphans()
            time.sleep(0.02)
        else:
            print('bench-service: %s still populated 20 s after cgroup.kill' % d, file=sys.stderr)
        reap_orphans()
        for top, dirs, _ in os.walk(d, topdown=False):
            for x in dirs:
                try:
                    os.rmdir(os.path.join(top, x))
                except OSError:
                    pass
        try:
            os.rmdir(d)
        except OSError as e:
            print('bench-service: rmdir %s: %s' % (d, e), file=sys.stderr)

    def done(self):
        if self.base:
            Cgroups.kill(self.base)


def kill_descendants():
    """Without cgroups: every process we started is a descendant (subreaper)."""
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while descendants(os.getpid()) and time.monotonic() < deadline:
        reap_orphans()
        time.sleep(0.02)
    reap_orphans()


# ---- the rows ---------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.quick = '--quick' in args
        self.tend = env_path('TEND')
        self.tend_b = env_path('TEND_B') if os.environ.get('TEND_B') else None
        self.tendctl = env_path('TENDCTL')
        self.stamp = env_path('BENCH_STAMP')
        self.loop = env_path('BENCH_LOOP')
        self.harness = env_path('BENCH_HARNESS')
        self.bin = {p: find(p) for p in PEERS}
        self.tmp = tempfile.mkdtemp(prefix='tend-bench.')
        self.cg = Cgroups()
        self.running = []  # (name, Popen, cgroup dir)
        self.seq = 0

    def fresh(self, name):
        self.seq += 1
        d = os.path.join(self.tmp, '%02d-%s' % (self.seq, name.replace(' ', '-')))
        os.mkdir(d)
        fifo = os.path.join(d, 'fifo')
        os.mkfifo(fifo, 0o600)
        return d, fifo

    def env(self, fifo, mode):
        e = dict(os.environ)
        e.update(STAMP_FIFO=fifo, STAMP_MODE=mode)
        return e

    def write(self, path, text):
        with open(path, 'w') as f:
            f.write(text)

    def service_dir(self, d):
        os.mkdir(d)
        os.symlink(self.stamp, os.path.join(d, 'run'))

    def unit(self, units, name, fifo, mode):
        self.write(os.path.join(units, name + '.service'),
                   '[Unit]\nDescription=bench %s\nStartLimitIntervalSec=0\n\n'
                   '[Service]\nExecStart=%s %s %s\nRestart=always\nRestartSec=0\n' % (name, self.stamp, fifo, mode))

    def supervisord_conf(self, d, fifo, mode, n):
        conf = os.path.join(d, 'supervisord.conf')
        prog = ('[program:bench]\ncommand=%s %s %s\nautostart=true\nautorestart=true\nstartsecs=0\n'
                'startretries=1000000\nstdout_logfile=NONE\nstderr_logfile=NONE\n' % (self.stamp, fifo, mode))
        if n > 1:
            prog += 'numprocs=%d\nprocess_name=%%(program_name)s-%%(process_num)04d\n' % n
        self.write(conf, '[supervisord]\nnodaemon=true\n%sloglevel=warn\nminfds=%d\nminprocs=%d\n'
                   'logfile=%s/supervisord.log\npidfile=%s/supervisord.pid\nchildlogdir=%s\n\n%s'
                   % ('user=root\n' if os.getuid() == 0 else '', min(4 * n + 64, 16384), 2 * n + 64, d, d, d, prog))
        return conf

    def argv(self, row, d, fifo, mode, n):
        """The command line that supervises n copies of `stamp FIFO MODE`."""
        if row == 'loop':
            return [self.loop] + (['--spawn', str(n)] if n > 1 else []) + [self.stamp, fifo, mode]
        if row in TENDS:
            units = os.path.join(d, 'units')
            os.mkdir(units)
            for i in range(n):
                self.unit(units, 'bench' if n == 1 else 'bench-%04d' % i, fifo, mode)
            tend = self.tend_b if row.endswith('-b') else self.tend
            return [tend, '--config-dir', units, '--control-socket', os.path.join(d, 'control')]
        if row == 'runsv':
            self.service_dir(os.path.join(d, 'sv'))
            return [self.bin['runsv'], os.path.join(d, 'sv')]
        if row == 's6-supervise':
            self.service_dir(os.path.join(d, 'sv'))
            return [self.bin['s6-supervise'], os.path.join(d, 'sv')]
        if row in ('runsvdir', 's6-svscan'):
            scan = os.path.join(d, 'scan')
            os.mkdir(scan)
            for i in range(n):
                self.service_dir(os.path.join(scan, 'bench-%04d' % i))
            # s6-svscan supervises at most 500 services unless told (-c).
            return [self.bin[row]] + (['-c', str(max(n, 500))] if row == 's6-svscan' else []) + [scan]
        if row == 'supervisord':
            return [self.bin['supervisord'], '-n', '-c', self.supervisord_conf(d, fifo, mode, n)]
        raise ValueError(row)

    def launch_opts(self, row, cg):
        return (['--cgroup', cg] if cg else []) + (['--no-cgroup2'] if row.startswith('tend-pg') else [])

    def start_row(self, row, mode):
        d, fifo = self.fresh(row)
        argv = self.argv(row, d, fifo, mode, 1)
        cg = self.cg.row('%02d-%s' % (self.seq, row))
        err = open(os.path.join(d, 'stderr'), 'w')
        p = subprocess.Popen([self.harness, 'exec'] + self.launch_opts(row, cg) + ['--'] + argv,
                             env=self.env(fifo, mode), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=err, start_new_session=True)
        err.close()
        self.running.append((row, p, cg, d))
        return '%s=%s' % (row, fifo)

    def stop_all(self):
        for row, p, cg, d in self.running:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    print('bench-service: %s did not exit within 15 s of SIGTERM' % row, file=sys.stderr)
            Cgroups.kill(cg)
        if not self.cg.base:
            kill_descendants()
        for _, p, _, _ in self.running:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.running = []

    def check_running(self):
        for row, p, _, d in self.running:
            if p.poll() is not None:
                with open(os.path.join(d, 'stderr')) as f:
                    fail('%s exited with status %s: %s' % (row, p.returncode, f.read().strip()[-2000:]))

    def run_harness(self, args, what):
        r = subprocess.run([self.harness] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            self.check_running()
            fail('%s: %s' % (what, r.stderr.strip()))
        samples = {}
        for ln in r.stdout.splitlines():
            w = ln.split()
            if w[0] == 'sample':
                samples.setdefault(w[1], []).append(int(w[2]))
        return samples

    # ---- restart latency ----

    @staticmethod
    def table(title, entries):
        """entries: (label, samples, the floor's samples measured beside them)."""
        print('\n### %s\n' % title)
        print('| supervisor | n | median ms | p99 ms | min ms | max ms | median ÷ floor | p99 ÷ floor |')
        print('|---|---:|---:|---:|---:|---:|---:|---:|')
        for label, v, f in entries:
            m, p = statistics.median(v), pct(v, 99)
            fm, fp = statistics.median(f), pct(f, 99)
            print('| %s | %d | %.3f | %.3f | %.3f | %.3f | %.2f× | %.2f× |'
                  % (label, len(v), ms(m), ms(p), ms(min(v)), ms(max(v)), m / fm, p / fp))

    def verdict(self, what, samples, floors):
        """floors: tend row → the floor's samples measured beside it."""
        if self.quick:
            return
        print()
        peers = [r for r in ROWS if r not in TENDS and r != 'loop']
        for row in TENDS:
            t, f = samples[row], floors[row]
            m, p = statistics.median(t), pct(t, 99)
            fm, fp = statistics.median(f), pct(f, 99)
            below = all(m < statistics.median(samples[r]) and p < pct(samples[r], 99) for r in peers)
            print('target (%s, %s): within 1.2× of the minimal loop (median %.2f×, p99 %.2f×): %s; '
                  'below every peer (median and p99): %s'
                  % (what, shown(row), m / fm, p / fp, 'met' if m <= 1.2 * fm and p <= 1.2 * fp else 'NOT met',
                     'met' if below else 'NOT met'))

    # tend in cgroup mode spins on a CPU while a unit runs (docs/benchmarks.md
    # "service mode"); interleaved with the others it would slow the floor and
    # the peers on a 2-CPU machine and flatter its own ratios. So it runs in a
    # group of its own with a floor of its own; ratios name the floor beside.
    RESTART_GROUPS = [['loop', 'tend'], ['loop', 'tend-pg', 'runsv', 's6-supervise', 'supervisord']]
    if os.environ.get('TEND_B'):
        RESTART_GROUPS = [['loop', 'tend', 'tend-b'],
                          ['loop', 'tend-pg', 'tend-pg-b', 'runsv', 's6-supervise', 'supervisord']]

    def bench_restart(self, kills, hold):
        print('\n## restart latency: long-running unit killed (SIGKILL → next stamp)')
        warm = 1 if self.quick else 5
        print('%d kills per row after %d warm-up rounds; each instance killed after %d ms; rows interleaved '
              'within a group, groups one after the other: %s'
              % (kills, warm, hold, ' | '.join(', '.join(shown(r) for r in g) for g in self.RESTART_GROUPS)))
        samples, floors, entries = {}, {}, []
        for g in self.RESTART_GROUPS:
            print('group %s: load before %s' % (', '.join(shown(r) for r in g), load()))
            rows = [self.start_row(r, 'hold') for r in g]
            try:
                s = self.run_harness(['kill', '--count', str(kills), '--warmup', str(warm), '--hold-ms', str(hold)]
                                     + rows, 'restart latency')
            finally:
                self.stop_all()
            print('  load after %s' % load())
            for r in g:
                label = shown(r) if r != 'loop' else '%s, beside %s' % (
                    shown(r), shown('tend') if 'tend' in g else 'the rows below')
                entries.append((label, s[r], s['loop']))
                if r != 'loop':
                    samples[r], floors[r] = s[r], s['loop']
        self.table('long-running unit, SIGKILL → new instance', entries)
        self.verdict('restart, long-running', samples, floors)
        return samples

    def bench_crash(self, count, rounds):
        print('\n## restart latency: crash loop (stamp → exit 1 → next stamp)')
        warm = 1 if self.quick else 5
        rounds = max(1, min(rounds, count))
        print('%d intervals per row after %d warm-up, in %d rounds (the rows in turn, the order rotated each round); '
              'load before: %s' % (count, warm, rounds, load()))
        # A crash loop cannot be paused, so the rows run one at a time. Short
        # rounds in turn put the floor and tend under the same conditions of
        # a shared machine, which a row measured in one go (≈ 0.1 s) does not.
        out, slow = {}, []
        fast = list(ROWS)
        for n in range(rounds):
            per = count // rounds + (1 if n < count % rounds else 0)
            for row in fast[n % len(fast):] + fast[:n % len(fast)]:
                if row in slow:
                    continue
                fifo = self.start_row(row, 'exit')
                try:
                    if n == 0:
                        probe = self.run_harness(['crash', '--count', '1', '--warmup', '0', fifo], 'crash loop ' + row)
                        if max(probe[row]) > 200e6:
                            slow.append(row)
                            continue
                    got = self.run_harness(['crash', '--count', str(per), '--warmup', str(warm), fifo],
                                           'crash loop ' + row)
                    out.setdefault(row, []).extend(got[row])
                finally:
                    self.stop_all()
        if slow:
            print('throttled rows (first interval > 200 ms), measured together: %s' % ', '.join(slow))
            fifos = [self.start_row(r, 'exit') for r in slow]
            try:
                # ≈ 1 s an interval: at most 200 of them (SPEC §8's minimum).
                out.update(self.run_harness(['crash', '--count', str(min(count, 200)), '--warmup', str(warm)] + fifos,
                                        'crash loop ' + ', '.join(slow)))
            finally:
                self.stop_all()
        print('load after: %s' % load())
        self.table('crash loop, interval between consecutive stamps',
                   [(shown(r), out[r], out['loop']) for r in ROWS])
        self.verdict('crash loop', out, {r: out['loop'] for r in TENDS})
        return out

    # ---- start of N units, footprint ----

    def start_supervisor(self, row, n, mode, timeout_ms=120000):
        """Runs row's supervisor for n units through the harness; returns
        (Popen, elapsed ns, first ns, pid, dir, cgroup) with the units running."""
        d, fifo = self.fresh(row)
        argv = self.argv(row, d, fifo, mode, n)
        cg = self.cg.row('%02d-%s' % (self.seq, row))
        args = [self.harness, 'start', '--count', str(n), '--timeout-ms', str(timeout_ms)] + self.launch_opts(row, cg)
        err = open(os.path.join(d, 'stderr'), 'w')
        h = subprocess.Popen(args + [fifo, '--'] + argv, env=self.env(fifo, mode), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
        err.close()
        got = {}
        while len(got) < 3:
            ln = h.stdout.readline()
            if not ln:
                h.wait()
                Cgroups.kill(cg)
                with open(os.path.join(d, 'stderr')) as f:
                    fail('%s with %d units: %s' % (row, n, f.read().strip()[-3000:]))
            k, v = ln.split()
            got[k] = int(v)
        return h, got['elapsed'], got['first'], got['pid'], d, cg

    def stop_supervisor(self, h, cg):
        h.stdin.close()
        rest = h.stdout.read()
        h.wait()
        Cgroups.kill(cg)
        if not self.cg.base:
            kill_descendants()
        return rest

    def bench_start(self, n, repeats):
        print('\n## start of %d units (harness clock before the fork of the supervisor → the %d-th stamp)'
              % (n, n))
        print('%d repetitions per row, rows interleaved; load before: %s' % (repeats, load()))
        res = {r: [] for r in START_ROWS}
        firsts = {r: [] for r in START_ROWS}
        for _ in range(repeats):
            for row in START_ROWS:
                h, el, first, _, _, cg = self.start_supervisor(row, n, 'hold')
                self.stop_supervisor(h, cg)
                res[row].append(el)
                firsts[row].append(first)
        print('load after: %s' % load())
        print('\n| supervisor | median ms | min ms | max ms | first unit ms (median) | median ÷ floor |')
        print('|---|---:|---:|---:|---:|---:|')
        fm = statistics.median(res['loop'])
        for row in START_ROWS:
            v = res[row]
            print('| %s | %.1f | %.1f | %.1f | %.2f | %.2f× |' % (shown(row), ms(statistics.median(v)), ms(min(v)),
                                                                  ms(max(v)), ms(statistics.median(firsts[row])),
                                                                  statistics.median(v) / fm))
        if not self.quick:
            print()
            for row in TENDS:
                r = statistics.median(res[row]) / fm
                print('target (%s): %d units within 1.5× of the minimal loop: %.2f× — %s'
                      % (shown(row), n, r, 'met' if r <= 1.5 else 'NOT met'))
        return res

    def supervisor_pids(self, top):
        return [p for p in [top] + descendants(top) if exe(p) != self.stamp]

    @staticmethod
    def pss_kib(pid, field='Pss:'):
        """PSS, or with field='Pss_Anon:' its anonymous part (the heap: what the
        supervisor itself holds; the file-backed rest varies with how many other
        processes on the host share its libraries)."""
        try:
            with open('/proc/%d/smaps_rollup' % pid) as f:
                for ln in f:
                    if ln.startswith(field):
                        return int(ln.split()[1])
        except OSError:
            pass
        return 0

    @staticmethod
    def activity(pids):
        """(context switches, voluntary and not, over every thread; CPU ticks)."""
        sw = ticks = 0
        for pid in pids:
            try:
                with open('/proc/%d/stat' % pid) as f:
                    st = f.read()
                w = st[st.rindex(')') + 2:].split()
                ticks += int(w[11]) + int(w[12])  # utime, stime
                for t in os.listdir('/proc/%d/task' % pid):
                    with open('/proc/%d/task/%s/status' % (pid, t)) as f:
                        for ln in f:
                            if ln.startswith(('voluntary_ctxt_switches', 'nonvoluntary_ctxt_switches')):
                                sw += int(ln.split()[1])
            except (OSError, ValueError, IndexError):
                pass
        return sw, ticks

    def settle(self, pids, quiet_s=1.0, limit_s=30.0):
        """Waits until pids neither switch nor use CPU for quiet_s (bounded)."""
        deadline = time.monotonic() + limit_s
        last, since = self.activity(pids), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            c = self.activity(pids)
            if c != last:
                last, since = c, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return True
        return False

    def watchers(self, d, k, n):
        outs, procs = [], []
        for i in range(k):
            path = os.path.join(d, 'watch-%d.out' % i)
            f = open(path, 'w')
            procs.append(subprocess.Popen([self.tendctl, '--control-socket', os.path.join(d, 'control'), 'watch'],
                                          stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT))
            f.close()
            outs.append(path)
        deadline = time.monotonic() + 60
        for path, p in zip(outs, procs):
            while True:
                with open(path) as f:
                    lines = sum(1 for _ in f)
                if lines >= n:
                    break
                if p.poll() is not None or time.monotonic() > deadline:
                    fail('tendctl watch did not print its %d-unit snapshot (exit %s, %d lines)' % (n, p.poll(), lines))
                time.sleep(0.05)
        return procs

    @staticmethod
    def perf_switches(pid, seconds):
        """sched:sched_switch events of pid over seconds, or None without perf."""
        perf = shutil.which('perf')
        if not perf:
            return None
        r = subprocess.run([perf, 'stat', '-x', ',', '-e', 'sched:sched_switch', '-p', str(pid), '--', 'sleep',
                            str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for ln in r.stderr.splitlines():
            w = ln.split(',')
            if len(w) > 2 and 'sched_switch' in ln and w[0].strip().isdigit():
                return int(w[0])
        return None

    def footprint_row(self, row, n, n_watch, idle):
        h, _, _, top, d, cg = self.start_supervisor(row, n, 'fill')
        w = []
        try:
            note = ''
            if row in TENDS:
                w = self.watchers(d, n_watch, n)
                r = subprocess.run([self.tendctl, '--control-socket', os.path.join(d, 'control'), 'logs',
                                    'bench-0000', '-n', 'all'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                note = 'ring of bench-0000 holds %d lines (%d bytes as shown)' % (r.stdout.count(b'\n'),
                                                                                  len(r.stdout))
            pids = self.supervisor_pids(top)
            quiet = self.settle(pids, limit_s=5 if self.quick else 30)
            pss = sum(self.pss_kib(p) for p in pids)
            anon = sum(self.pss_kib(p, 'Pss_Anon:') for p in pids)
            (s0, c0), t0 = self.activity(pids), time.monotonic()
            perf = self.perf_switches(top, idle) if row in TENDS else None
            if perf is None:
                time.sleep(idle)
            (s1, c1), secs = self.activity(pids), time.monotonic() - t0
            cpu_ms = (c1 - c0) * 1000.0 / os.sysconf('SC_CLK_TCK')
            return dict(row=row, procs=len(pids), pss=pss, anon=anon, switches=s1 - s0, cpu_ms=cpu_ms, secs=secs, perf=perf,
                        quiet=quiet, note=note)
        finally:
            for p in w:
                p.terminate()
                p.wait()
            self.stop_supervisor(h, cg)

    def bench_footprint(self, n, n_watch, idle):
        print('\n## footprint: %d running units, rings filled (64 lines, 5 KiB each), %d `tendctl watch` '
              'attached to each tend; idle %d s' % (n, n_watch, idle))
        print('load before: %s' % load())
        rows = [self.footprint_row(row, n, n_watch, idle) for row in FOOT_ROWS]
        print('load after: %s' % load())
        print('\n| supervisor | processes | PSS total | of which anonymous | PSS per unit | context switches in %d s '
              'idle | CPU time in the same %d s |' % (idle, idle))
        print('|---|---:|---:|---:|---:|---:|---:|')
        for r in rows:
            extra = '' if r['perf'] is None else ' (perf: %d sched_switch)' % r['perf']
            print('| %s | %d | %.2f MiB | %.2f MiB | %.1f KiB | %d in %.1f s%s%s | %.0f ms |'
                  % (shown(r['row']), r['procs'], r['pss'] / 1024.0, r['anon'] / 1024.0, r['pss'] / float(n),
                     r['switches'], r['secs'],
                     extra, '' if r['quiet'] else ' (never settled)', r['cpu_ms']))
        for r in rows:
            if r['note']:
                print('%s: %s' % (shown(r['row']), r['note']))
        if not self.quick:
            print()
            for r in rows[:len(TENDS)]:
                print('target (%s): PSS under 8 MiB with %d units and %d watchers: %.2f MiB — %s'
                      % (shown(r['row']), n, n_watch, r['pss'] / 1024.0, 'met' if r['pss'] < 8 * 1024 else 'NOT met'))
                idle_ok = r['switches'] == 0 and r['cpu_ms'] == 0
                print('target (%s): zero wake-ups while idle: %d context switches, %.0f ms CPU in %.1f s — %s'
                      % (shown(r['row']), r['switches'], r['cpu_ms'], r['secs'], 'met' if idle_ok else 'NOT met'))
        return rows


def main():
    args = sys.argv[1:]

    def opt(name, default):
        return int(args[args.index(name) + 1]) if name in args else default

    if '--rows' in args:
        keep = set(args[args.index('--rows') + 1].split(',')) | {'loop'}
        global ROWS, START_ROWS, FOOT_ROWS, TENDS
        ROWS = [r for r in ROWS if r in keep]
        START_ROWS = [r for r in START_ROWS if r in keep]
        FOOT_ROWS = [r for r in FOOT_ROWS if r in keep]
        TENDS = [r for r in TENDS if r in keep]
        Bench.RESTART_GROUPS = [g for g in ([r for r in g if r in keep] for g in Bench.RESTART_GROUPS)
                                if len(g) > 1]
    b = Bench(args)
    quick = b.quick
    only = args[args.index('--only') + 1].split(',') if '--only' in args else ['restart', 'crash', 'start', 'footprint']
    make_subreaper()
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    print('bench-service%s: %s; load average %s; RLIMIT_NOFILE %s; cgroups: %s'
          % (' (quick: nothing judged)' if quick else '', machine(), load(),
             open('/proc/self/limits').read().split('Max open files')[1].split()[0:2],
             b.cg.base or 'none (process groups, subreaper cleanup)'))
    try:
        if 'restart' in only:
            b.bench_restart(opt('--kills', 3 if quick else 200), opt('--hold-ms', 1100 if quick else 1200))
        if 'crash' in only:
            b.bench_crash(opt('--kills', 3 if quick else 1000), opt('--rounds', 1 if quick else 5))
        if 'start' in only:
            b.bench_start(opt('--units', 50 if quick else 1000), opt('--repeats', 1 if quick else 5))
        if 'footprint' in only:
            b.bench_footprint(opt('--units', 50 if quick else 1000), 2 if quick else 10, 2 if quick else 10)
    finally:
        b.stop_all()
        b.cg.done()
        if not b.cg.base:
            kill_descendants()
        if '--keep' not in args:
            shutil.rmtree(b.tmp, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
