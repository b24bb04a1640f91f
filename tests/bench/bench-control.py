#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The control socket under load (SPEC §5, §2.3; docs/benchmarks.md "control socket").

  status    tend with 1,000 running units: the time from sending a request to
            receiving its result on one connection (docs/control-protocol.md),
            for `status` of every unit (1,000 records, in batches) and `status`
            of one unit; median and p99. For reference, the wall time of a whole
            `tendctl status --json` process (connect, request, print 1,000 records).
  coalesce  N concurrent `restart` requests of one unit (one connection each),
            the unit's ExecStop= held on a FIFO so that every request joins the
            one flight: the intake (first request sent → tend counts N waiters),
            the fan-out (the FIFO released → the last of the N answers received),
            and the check that there was exactly one restart and one new pid.

tend runs in a cgroup of its own when the cgroup2 tree is writable (as root),
with a hard RLIMIT_NOFILE of 8,192; the units run /bin/sleep.

    TEND=… TENDCTL=… bench-control.py [--quick] [--units N] [--requests N] [--clients N]

--quick (CI): 100 units, 20 requests, 100 clients; nothing judged. Exit status 1
when something fails functionally (tend does not answer, more than one restart),
never because of a number: no floor is set for these in SPEC §8.
"""
import ctypes
import json
import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))
from svctest import cgroup_remove, cgroup_usable  # noqa: E402

TEND_NOFILE = 8192
MSG_MAX = 1 << 17


def fail(msg):
    print('bench-control: ' + msg, file=sys.stderr)
    raise SystemExit(1)


def env_path(name):
    p = os.environ.get(name)
    if not p or not os.access(p, os.X_OK):
        fail('%s=%r is not executable: run through meson test' % (name, p))
    return os.path.realpath(p)


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def wait_until(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            fail('%s (waited %.0f s)' % (what, timeout))
        time.sleep(0.01)


class Conn:
    def __init__(self, path, timeout=120):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(timeout)
        self.s.connect(path)

    def send(self, obj):
        self.s.send(json.dumps(obj).encode())

    def result(self):
        n = 0
        while True:
            data = self.s.recv(MSG_MAX)
            if not data:
                fail('tend closed a connection')
            m = json.loads(data)
            if m.get('type') == 'result':
                return m, n
            n += len(m.get('units', []))

    def close(self):
        self.s.close()


class Tend:
    """tend --config-dir DIR with n units, its own socket and cgroup."""

    def __init__(self, tend, n, extra_units=()):
        self.tmp = tempfile.mkdtemp(prefix='tend-bench-ctl-')
        self.dir = os.path.join(self.tmp, 'units')
        os.mkdir(self.dir)
        self.sock = os.path.join(self.tmp, 'ctl', 'control')
        for i in range(n):
            with open(os.path.join(self.dir, 'u%04d.service' % i), 'w') as f:
                f.write('[Service]\nExecStart=/bin/sleep 100000\n')
        for name, text in extra_units:
            with open(os.path.join(self.dir, name + '.service'), 'w') as f:
                f.write(text)
        self.cgroup = None
        parent, _ = cgroup_usable()
        argv = [tend, '--config-dir', self.dir, '--control-socket', self.sock]
        if parent:
            self.cgroup = os.path.join(parent, 'tend-bench-ctl.%d' % os.getpid())
            cgroup_remove(self.cgroup)
            os.mkdir(self.cgroup)
            argv = ['sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cgroup] + argv
        argv = ['prlimit', '--nofile=%d:%d' % (TEND_NOFILE, TEND_NOFILE)] + argv
        self.err = open(os.path.join(self.tmp, 'tend.err'), 'w+')
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err,
                                     preexec_fn=lambda: ctypes.CDLL(None).prctl(1, 9, 0, 0, 0))  # PDEATHSIG KILL
        self.n = n + len(extra_units)

        def all_running():
            if self.proc.poll() is not None:
                self.err.seek(0)
                fail('tend exited at start: %s' % self.err.read()[-2000:])
            try:
                c = Conn(self.sock, timeout=30)
            except OSError:
                return False
            try:
                c.send({'version': 1, 'command': 'status'})
                states = []
                while True:
                    m = json.loads(c.s.recv(MSG_MAX))
                    if m['type'] == 'result':
                        break
                    states += [u['state'] for u in m['units']]
                return len(states) == self.n and all(s == 'running' for s in states)
            finally:
                c.close()
        wait_until(all_running, 120, 'the %d units never all ran' % self.n)

    def record(self, name):
        c = Conn(self.sock)
        c.send({'version': 1, 'command': 'status', 'units': [name]})
        rec = json.loads(c.s.recv(MSG_MAX))['units'][0]
        c.close()
        return rec

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.cgroup:
            cgroup_remove(self.cgroup)
        self.err.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def timed(c, request, expect):
    t = time.perf_counter_ns()
    c.send(request)
    res, n = c.result()
    dt = time.perf_counter_ns() - t
    if not res.get('ok') or n != expect:
        fail('status answered %r with %d records, %d expected' % (res, n, expect))
    return dt


def row(name, ns):
    print('| %s | %.3f | %.3f | %d |' % (name, statistics.median(ns) / 1e6, pct(ns, 99) / 1e6, len(ns)))


def bench_status(tend, tendctl, units, requests):
    t = Tend(tend, units)
    try:
        c = Conn(t.sock)
        every = {'version': 1, 'command': 'status'}
        one = {'version': 1, 'command': 'status', 'units': ['u0000']}
        for _ in range(5):  # warm-up
            timed(c, every, units)
        all_ns, one_ns, proc_ns = [], [], []
        for _ in range(requests):  # interleaved, so load drift hits all alike
            all_ns.append(timed(c, every, units))
            one_ns.append(timed(c, one, 1))
        for _ in range(max(5, requests // 10)):
            t0 = time.perf_counter_ns()
            p = subprocess.run([tendctl, '--control-socket', t.sock, 'status', '--json'], capture_output=True)
            proc_ns.append(time.perf_counter_ns() - t0)
            if p.returncode != 0 or len(json.loads(p.stdout)) != units:
                fail('tendctl status --json failed: %r' % p.stderr)
        c.close()
        print('\n### status with %d units (one connection, request → result)\n' % units)
        print('| request | median ms | p99 ms | requests |')
        print('|---|---|---|---|')
        row('`status` (every unit)', all_ns)
        row('`status u0000` (one unit)', one_ns)
        row('`tendctl status --json` process (wall)', proc_ns)
    finally:
        t.stop()


def bench_coalesce(tend, clients):
    tmp = tempfile.mkdtemp(prefix='tend-bench-fifo-')
    fifo = os.path.join(tmp, 'gate')
    os.mkfifo(fifo)
    opened = os.path.join(tmp, 'opened')
    web = ('web', '[Service]\nExecStart=/bin/sleep 100000\nTimeoutStopSec=infinity\n'
                  "ExecStop=/bin/sh -c '[ -e %s ] || cat %s > /dev/null'\n" % (opened, fifo))
    t = Tend(tend, 0, [web])
    conns = []
    try:
        r0 = t.record('web')
        t0 = time.perf_counter_ns()
        for _ in range(clients):
            c = Conn(t.sock)
            c.send({'version': 1, 'command': 'restart', 'units': ['web']})
            conns.append(c)
        wait_until(lambda: t.record('web')['waiters'] == clients, 120,
                   'tend never counted %d waiters' % clients)
        t1 = time.perf_counter_ns()
        # ExecStop= holds the stop until the FIFO's writer goes: wait for its
        # reader first (its shell may not have reached `cat` yet), and only
        # then let later stops through (`opened`), so that this one cannot
        # see the file before it blocks.
        fd = wait_until(lambda: _open_writer(fifo), 10, 'ExecStop= never opened its FIFO')
        open(opened, 'w').close()
        t2 = time.perf_counter_ns()
        os.close(fd)
        pids = set()
        for c in conns:
            res, _ = c.result()
            if not res['ok']:
                fail('a restart failed: %r' % res)
            pids.add(res['units'][0]['main_pid'])
        t3 = time.perf_counter_ns()
        r1 = t.record('web')
        if len(pids) != 1 or r1['restarts'] != r0['restarts'] + 1 or pids != {r1['main_pid']}:
            fail('%d concurrent restarts: pids %r, restarts %d → %d' % (clients, pids, r0['restarts'], r1['restarts']))
        print('\n### %d concurrent restarts of one unit (one connection each)\n' % clients)
        print('| phase | ms | per request µs |')
        print('|---|---|---|')
        print('| intake: first request sent → %d waiters counted | %.1f | %.1f |'
              % (clients, (t1 - t0) / 1e6, (t1 - t0) / 1e3 / clients))
        print('| fan-out: FIFO released → last answer received (stop, start, %d answers) | %.1f | %.1f |'
              % (clients, (t3 - t2) / 1e6, (t3 - t2) / 1e3 / clients))
        print('\nrestarts: %d → %d (one), one new pid for all %d clients' % (r0['restarts'], r1['restarts'], clients))
    finally:
        for c in conns:
            c.close()
        t.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _open_writer(fifo):
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None


def main():
    args = sys.argv[1:]

    def opt(name, default):
        if name in args:
            return int(args[args.index(name) + 1])
        return default
    quick = '--quick' in args
    units = opt('--units', 100 if quick else 1000)
    requests = opt('--requests', 20 if quick else 300)
    clients = opt('--clients', 100 if quick else 1000)
    tend, tendctl = env_path('TEND'), env_path('TENDCTL')
    if not shutil.which('prlimit'):
        fail('prlimit (util-linux) is not installed')
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < clients + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: nothing outlives us
    print('bench-control%s: %s, %d CPUs, load average %.1f, cgroups: %s'
          % (' (quick: nothing judged)' if quick else '', platform.release(), os.cpu_count(), os.getloadavg()[0],
             'yes' if cgroup_usable()[0] else 'no (process groups)'))
    bench_status(tend, tendctl, units, requests)
    bench_coalesce(tend, clients)


if __name__ == '__main__':
    main()
