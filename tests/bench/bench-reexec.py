#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""daemon-reexec's cost (issue 19, docs/benchmarks.md "issue 19: daemon-reexec"):
for N running units (100 and 1,000 sleeps), R re-execs each; per re-exec the
exec's own time (tend's log: "re-executing" → "units resumed", which spans
writing the state, execve, tend's start-up, reading DIR and putting every unit
back) and the state's size; and tend's unavailability to tendctl: a client
loops on `tendctl list` throughout, and the longest call that overlaps the
re-exec is compared with the median call. tend runs in a cgroup of its own,
killed (cgroup.kill) at the end.

Usage: bench-reexec.py [--quick]   (TEND, TENDCTL from the environment)
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '../integration'))
from svctest import cgroup_usable  # noqa: E402

TEND = os.environ['TEND']
TENDCTL = os.environ['TENDCTL']


def ctl(sock, *args):
    return subprocess.run([TENDCTL, '--control-socket', sock] + list(args), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)


def stamps(text):
    out = []
    for m in re.finditer(r'T(\d\d):(\d\d):(\d\d\.\d+)\S* tend: info: (re-executing \S+ \(state: (\d+) bytes|'
                         r're-executed: \d+ units resumed)', text):
        out.append((int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)), m.group(5)))
    return out


def run(n, rounds, parent):
    tmp = tempfile.TemporaryDirectory(prefix='bench-reexec-')
    d, sock, err = os.path.join(tmp.name, 'units'), os.path.join(tmp.name, 'ctl'), os.path.join(tmp.name, 'err')
    os.mkdir(d)
    for i in range(n):
        with open(os.path.join(d, 'u%d.service' % i), 'w') as f:
            f.write('[Service]\nExecStart=/bin/sleep 100000\n')
    cg = os.path.join(parent, 'bench-reexec.%d' % os.getpid())
    os.mkdir(cg)
    with open(err, 'w') as e:
        tend = subprocess.Popen(['sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', cg, TEND, '--log-level',
                                 'info', '--config-dir', d, '--control-socket', sock],
                                stdout=subprocess.DEVNULL, stderr=e)
    try:
        deadline = time.monotonic() + 60
        while ctl(sock, 'list').stdout.count(' running ') < n:
            assert time.monotonic() < deadline, 'units never all running'
            time.sleep(0.1)
        calls, halt = [], threading.Event()

        def loop():
            while not halt.is_set():
                t = time.monotonic()
                p = ctl(sock, 'list')
                calls.append((t, time.monotonic() - t, p.returncode, p.stderr.strip()))
        th = threading.Thread(target=loop, daemon=True)
        th.start()
        marks = []
        for _ in range(rounds):
            time.sleep(0.5)
            t = time.monotonic()
            assert ctl(sock, 'daemon-reexec').returncode == 0
            marks.append(t)
            time.sleep(0.5)
        halt.set()
        th.join()
        with open(err) as f:
            s = stamps(f.read())
        execs = [(b[0] - a[0]) * 1000 for a, b in zip(s[0::2], s[1::2])]
        size = int(s[0][1])
        med = statistics.median(c[1] for c in calls) * 1000
        worst = [max([c[1] for c in calls if c[0] <= t + 0.5 and c[0] + c[1] >= t] or [0]) * 1000 for t in marks]
        failed = sum(1 for c in calls if c[2] != 0)
        for c in calls:
            if c[2] != 0:
                print('  a failed call: %s' % c[3])
        print('%5d units: exec median %.1f ms (max %.1f) over %d; state %d bytes; tendctl list median %.1f ms, '
              'longest overlapping a re-exec median %.1f ms (max %.1f); failed calls %d'
              % (n, statistics.median(execs), max(execs), len(execs), size, med, statistics.median(worst),
                 max(worst), failed))
        assert tend.poll() is None, 'tend exited'
    finally:
        with open(os.path.join(cg, 'cgroup.kill'), 'w') as f:
            f.write('1')
        tend.wait(10)
        for root, dirs, _ in sorted(os.walk(cg), key=lambda t: -t[0].count('/')):
            for _ in range(100):
                try:
                    os.rmdir(root)
                    break
                except OSError:
                    time.sleep(0.05)


def main():
    parent, why = cgroup_usable()
    if not parent:
        print('skipped: %s' % why)
        return 77
    quick = '--quick' in sys.argv
    for n in ((100,) if quick else (100, 1000)):
        run(n, 2 if quick else 10, parent)
    return 0


if __name__ == '__main__':
    sys.exit(main())
