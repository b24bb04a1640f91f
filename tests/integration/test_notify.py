#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Readiness, notify sockets and watchdogs (SPEC §4 "Readiness and notify",
"Watchdog"), and tend's own sd_notify to the manager that started it (SPEC §1
"Under systemd"), on real processes: child-probe's `notify` mode as the
client (tests/helpers/child-probe.c), Debian's systemd-notify, redis-server
--supervised systemd, and a datagram socket this test binds as tend's
NOTIFY_SOCKET. Time-bounded: registered with is_parallel: false."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import PROBE, wait_until  # noqa: E402
from svctest import TENDCTL, ServiceTestCase, free_port, monotonic_us, wait_exec  # noqa: E402


def proc_env(pid):
    """{NAME: VALUE} of /proc/PID/environ, once PID exec'd its command: a
    unit has its main_pid (and a Type=simple one is running) at the fork,
    when the child's environ is still tend's (seen under load)."""
    wait_exec(pid)
    with open('/proc/%d/environ' % pid, 'rb') as f:
        items = [x.decode(errors='replace') for x in f.read().split(b'\0') if x]
    return dict(x.split('=', 1) for x in items if '=' in x)


def abstract(addr):
    """A NOTIFY_SOCKET value as a socket address."""
    return '\0' + addr[1:] if addr.startswith('@') else addr


def cpu_ticks(pid):
    """utime + stime of pid, in clock ticks."""
    with open('/proc/%d/stat' % pid) as f:
        rest = f.read().rsplit(')', 1)[1].split()
    return int(rest[11]) + int(rest[12])


def ctx_switches(pid):
    out = 0
    with open('/proc/%d/status' % pid) as f:
        for ln in f:
            if ln.startswith(('voluntary_ctxt_switches', 'nonvoluntary_ctxt_switches')):
                out += int(ln.split()[1])
    return out


class Control:
    """A raw control connection (docs/control-protocol.md), to time one request."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.connect(path)

    def request(self, command, timeout=5, **fields):
        self.s.settimeout(timeout)
        self.s.send(json.dumps(dict(version=1, command=command, **fields)).encode())
        msgs = []
        while True:
            m = json.loads(self.s.recv(131072))
            msgs.append(m)
            if m.get('type') == 'result':
                return msgs

    def close(self):
        self.s.close()


class NotifyTestCase(ServiceTestCase):
    def trigger(self, name):
        """A file path; a unit script waits for it to exist."""
        return self.path('trigger-' + name)

    def wait_for_file(self, path):
        return 'while [ ! -e %s ]; do sleep 0.02; done' % path

    def log_has(self, text, timeout=5):
        return wait_until(lambda: text in self.stderr(), timeout,
                          lambda: '%r not in tend stderr %r' % (text, self.stderr()[-3000:]))

    def addr_of(self, name):
        """The NOTIFY_SOCKET tend gave unit NAME (its main process's environment)."""
        r = self.wait_state(name, lambda r: r['main_pid'], 5, 'no main pid')
        return proc_env(r['main_pid'])['NOTIFY_SOCKET']


class Readiness(NotifyTestCase):
    def test_starting_until_ready_then_running_with_status(self):
        t = self.trigger('a')
        self.unit('a', '''
            [Service]
            Type=notify
            ExecStart=/bin/sh -c '%s; exec %s notify --then-pause "STATUS=serving\\\\nREADY=1"'
        ''' % (self.wait_for_file(t), PROBE))
        self.start_tend()
        r = self.wait_state('a', lambda r: r['main_pid'], 5, 'never spawned')
        self.assertEqual(r['state'], 'starting')
        env = proc_env(r['main_pid'])
        self.assertTrue(env['NOTIFY_SOCKET'].startswith('@') and len(env['NOTIFY_SOCKET']) <= 8,
                        'NOTIFY_SOCKET is not a short abstract address: %r' % env['NOTIFY_SOCKET'])
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # no READY=1 yet: starting throughout
            self.assertEqual(self.st('a')['state'], 'starting')
            time.sleep(0.05)
        open(t, 'w').close()
        r = self.wait_running('a')
        self.assertEqual(r['status'], 'serving')

    def test_child_ready_counts_only_with_notify_access_all(self):
        for name, access in (('main', ''), ('all', 'NotifyAccess=all')):
            self.unit(name, '''
                [Service]
                Type=notify
                %s
                ExecStart=/bin/sh -c '%s notify --barrier "READY=1\\\\nSTATUS=from-child"; exec %s pause'
            ''' % (access, PROBE, PROBE))
        # --barrier: the child is alive until tend has read its message (a
        # sender that is gone cannot be placed in a unit: SPEC §4, as systemd).
        self.start_tend()
        self.wait_running('all')
        self.assertEqual(self.st('all')['status'], 'from-child')
        # The child of main.service said READY=1: logged, no effect.
        self.log_has('main.service: notification from pid ')
        err = self.stderr()
        line = err[err.index('main.service: notification from pid '):].splitlines()[0]
        self.assertIn('NotifyAccess=main and it is not the main process', line)
        r = self.st('main')
        self.assertEqual((r['state'], r['status']), ('starting', None))

    def test_other_units_process_and_outsider_cannot_speak_for_a_unit(self):
        addr_file = self.path('addr')
        self.unit('a', '''
            [Service]
            Type=notify
            NotifyAccess=all
            ExecStart=%s pause
        ''' % PROBE)
        self.unit('b', '''
            [Service]
            ExecStart=/bin/sh -c 'while [ ! -s %s ]; do sleep 0.02; done; exec %s notify --to "$(cat %s)" --then-pause "READY=1\\\\nSTATUS=spoof"'
        ''' % (addr_file, PROBE, addr_file))
        self.start_tend()
        a = self.wait_state('a', lambda r: r['main_pid'], 5, 'never spawned')
        addr = self.addr_of('a')
        with open(addr_file + '.tmp', 'w') as f:
            f.write(addr)
        os.rename(addr_file + '.tmp', addr_file)
        b = self.wait_running('b')
        self.log_has('a.service: notification from pid %d ignored: NotifyAccess=all and it is not a process of the unit'
                     % b['main_pid'])
        r = self.st('a')
        self.assertEqual((r['state'], r['status'], r['main_pid']), ('starting', None, a['main_pid']))

        # An outsider (this test) with READY=1 and MAINPID=: nothing changes.
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(b'READY=1\nMAINPID=%d\nSTATUS=outsider' % os.getpid(), abstract(addr))
        self.log_has('a.service: notification from pid %d ignored' % os.getpid())
        r = self.st('a')
        self.assertEqual((r['state'], r['status'], r['main_pid']), ('starting', None, a['main_pid']))

    def test_systemd_notify_ready(self):
        if not shutil.which('systemd-notify'):
            self.skipTest('systemd-notify is not installed (Debian: the systemd package)')
        # Run from a subshell, so its parent is not the main process: as root,
        # systemd-notify sends on behalf of its parent (getppid(), faking
        # SCM_CREDENTIALS), which NotifyAccess=main would rightly accept.
        for name, access in (('all', 'NotifyAccess=all'), ('main', '')):
            self.unit(name, '''
                [Service]
                Type=notify
                %s
                ExecStart=/bin/sh -c '(systemd-notify --ready --status=via-systemd-notify; echo "rc=$?"); exec %s pause'
            ''' % (access, PROBE))
        self.start_tend()
        r = self.wait_running('all')
        self.assertEqual(r['status'], 'via-systemd-notify')
        # Both return 0: tend closed the barrier's fd at once in both cases.
        self.wait_output('all.service[%d]: rc=0' % r['main_pid'])
        m = self.st('main')
        self.wait_output('main.service[%d]: rc=0' % m['main_pid'])
        self.log_has('main.service: notification from pid ')
        m = self.st('main')
        self.assertEqual((m['state'], m['status']), ('starting', None))

    def test_never_ready_fails_after_timeout_start(self):
        self.unit('slow', '''
            [Service]
            Type=notify
            TimeoutStartSec=1s
            ExecStart=%s pause
        ''' % PROBE)
        t0 = monotonic_us()
        self.start_tend()
        r = self.wait_state('slow', lambda r: r['state'] == 'failed', 5, 'never failed')
        self.assertEqual(r['result'], 'timeout')
        took = (r['since_monotonic'] - t0) / 1e6
        self.assertTrue(0.9 <= took < 3, 'failed after %.2fs, TimeoutStartSec=1s' % took)

    def test_flood_leaves_tend_responsive(self):
        """100,000 datagrams in a burst: a status request on a connection
        opened before the burst is answered within 100 ms throughout, and the
        other units' events all happen (a READY=1, a crash and its restart)."""
        go, ready_b = self.trigger('flood'), self.trigger('b')
        self.unit('flood', '''
            [Service]
            WatchdogSec=60
            ExecStart=/bin/sh -c '%s; exec %s notify --count 100000 --then-pause "WATCHDOG=1\\\\nSTATUS=flooding"'
        ''' % (self.wait_for_file(go), PROBE))
        self.unit('b', '''
            [Service]
            Type=notify
            ExecStart=/bin/sh -c '%s; exec %s notify --then-pause "READY=1\\\\nSTATUS=b-ready"'
        ''' % (self.wait_for_file(ready_b), PROBE))
        self.unit('crashy', '''
            [Unit]
            StartLimitIntervalSec=0
            [Service]
            Restart=always
            RestartSec=50ms
            ExecStart=/bin/sh -c '%s; sleep 0.2; exit 3'
        ''' % self.wait_for_file(go))
        self.start_tend()
        self.wait_running('flood')
        self.wait_running('crashy')
        ctl = Control(self.sock)
        self.addCleanup(ctl.close)
        ctl.request('status')
        open(go, 'w').close()
        samples, done_at = [], None
        t_end = time.monotonic() + 30
        while time.monotonic() < t_end:
            t = time.monotonic()
            msgs = ctl.request('status')
            samples.append(time.monotonic() - t)
            self.assertTrue(msgs[-1]['ok'], msgs)
            if len(samples) == 5:
                open(ready_b, 'w').close()  # b's READY=1 arrives during the flood
            if 'sent 100000' in self.output():
                done_at = len(samples)
                break
            time.sleep(0.01)
        self.assertIsNotNone(done_at, 'the flood did not finish in 30 s; output %r' % self.output()[-1000:])
        self.assertGreaterEqual(done_at, 5, 'the flood ended before 5 samples: nothing was measured')
        worst = max(samples)
        self.assertLess(worst, 0.1, 'a status request took %.1f ms during the flood (samples %d, median %.1f ms)'
                        % (worst * 1e3, len(samples), sorted(samples)[len(samples) // 2] * 1e3))
        r = self.wait_running('b')
        self.assertEqual(r['status'], 'b-ready')
        self.assertEqual(self.st('flood')['status'], 'flooding')
        wait_until(lambda: self.st('crashy')['restarts'] >= 2, 5,
                   lambda: 'crashy was not restarted during the flood: %r' % self.st('crashy'))
        sys.stderr.write('flood: %d status requests during 100,000 datagrams, worst %.1f ms, median %.1f ms\n'
                         % (len(samples), worst * 1e3, sorted(samples)[len(samples) // 2] * 1e3))


class RealDaemon(NotifyTestCase):
    def test_redis_supervised_systemd(self):
        """redis-server --supervised systemd reaches running only through
        its READY=1 (its STATUS= is in the record, it answers at once), and a
        unit ordered After= it starts only then: its since_monotonic is not
        before redis's, and its first act, a redis-cli ping, is answered."""
        redis = shutil.which('redis-server')
        if not redis or not shutil.which('redis-cli'):
            self.skipTest('redis-server/redis-cli are not installed')
        port = free_port()
        d = self.path('redis')
        os.mkdir(d)
        self.unit('redis', '''
            [Service]
            Type=notify
            ExecStart=%s --port %d --bind 127.0.0.1 --dir %s --save "" --appendonly no --supervised systemd
            TimeoutStartSec=20
        ''' % (redis, port, d))
        pong = self.path('client.pong')
        self.unit('client', '''
            [Unit]
            Requires=redis.service
            After=redis.service
            [Service]
            ExecStart=/bin/sh -c 'redis-cli -p %d ping > %s; exec %s pause'
        ''' % (port, pong, PROBE))
        self.start_tend()
        r = self.wait_state('redis', lambda r: r['state'] != 'starting', 20, 'redis never left starting')
        self.assertEqual(r['state'], 'running', r)
        self.assertIn('Ready to accept connections', r['status'] or '')
        p = subprocess.run(['redis-cli', '-p', str(port), 'ping'], capture_output=True, text=True, timeout=5)
        self.assertEqual(p.stdout.strip(), 'PONG', 'running, but redis does not answer: %r' % p.stderr)
        c = self.wait_running('client')
        self.assertGreaterEqual(c['since_monotonic'], self.st('redis')['since_monotonic'],
                                'the client started before redis was running')
        wait_until(lambda: self.lines(pong), 5, 'the client never wrote its ping\'s answer')
        self.assertEqual(self.lines(pong), ['PONG'], 'the client started before redis answered')


class Watchdog(NotifyTestCase):
    def watch(self, *args):
        """`tendctl watch --json ARGS…` as a process; each line read carries
        the time it was read (CLOCK_MONOTONIC µs)."""
        return self.start([TENDCTL, '--control-socket', self.sock, 'watch', '--json'] + list(args),
                          stdin=subprocess.DEVNULL)

    def next_event(self, w, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError('%s: not seen in %.1fs; tend stderr %r' % (what, timeout, self.stderr()[-2000:]))
            ev = json.loads(w.readline(left, what))
            ev['_at'] = monotonic_us()
            if pred(ev):
                return ev

    def test_pinging_unit_stays_up(self):
        self.unit('pinger', '''
            [Service]
            WatchdogSec=1
            Restart=on-failure
            ExecStart=%s notify --every 100 --count 0 WATCHDOG=1
        ''' % PROBE)
        self.start_tend()
        r = self.wait_running('pinger')
        env = proc_env(r['main_pid'])
        self.assertEqual((env.get('WATCHDOG_USEC'), env.get('WATCHDOG_PID')), ('1000000', str(r['main_pid'])))
        time.sleep(5)  # the interval under test, not a wait for an event
        r2 = self.st('pinger')
        self.assertEqual((r2['state'], r2['main_pid'], r2['restarts'], r2['result']),
                         ('running', r['main_pid'], 0, 'success'))
        self.assertNotIn('watchdog', self.stderr())

    def test_silent_unit_gets_sigabrt_and_restarts_in_time(self):
        self.unit('silent', '''
            [Service]
            WatchdogSec=1
            Restart=on-failure
            ExecStart=%s notify --every 100 --count 5 --then-pause WATCHDOG=1
        ''' % PROBE)
        self.start_tend()
        leases = self.watch('watchdog/silent.service', '--ephemeral')
        records = self.watch('service/silent.service')
        first = self.next_event(records, lambda e: e.get('state') == 'running', 5, 'first running record')
        last_put = self.next_event(leases, lambda e: e['event'] == 'put', 5, 'the lease')
        while True:
            ev = self.next_event(leases, lambda e: True, 5, 'the lease expiring')
            if ev['event'] == 'delete':
                break
            last_put = ev
        self.assertEqual(ev.get('cause'), 'expired', ev)
        backoff = self.next_event(records, lambda e: e.get('state') == 'backoff', 5, 'backoff after the watchdog')
        self.assertEqual(backoff['result'], 'watchdog')
        self.assertEqual(backoff['last_exit'], {'signal': signal.SIGABRT, 'core_dumped': False})
        again = self.next_event(records, lambda e: e.get('state') == 'running' and e['main_pid'] != first['main_pid'],
                                5, 'running again')
        late = (again['since_monotonic'] - last_put['_at']) / 1e6
        self.assertLess(late, 1.5, 'restarted %.2fs after the last ping (WatchdogSec=1 + 500 ms)' % late)
        self.assertGreater(late, 0.9, 'restarted %.2fs after the last ping: before WatchdogSec=1' % late)
        self.assertEqual(again['restarts'], 1)
        self.log_has('silent.service: watchdog timeout (1000ms): sending SIGABRT')

    def test_stop_and_shutdown_are_not_watchdog_failures(self):
        self.unit('wd', '''
            [Service]
            WatchdogSec=1
            Restart=always
            ExecStart=%s notify --every 100 --count 0 WATCHDOG=1
        ''' % PROBE)
        self.start_tend()
        leases = self.watch('watchdog/', '--ephemeral')
        records = self.watch('service/wd.service')
        self.next_event(leases, lambda e: e['event'] == 'put', 5, 'the lease')
        self.ctl('stop', 'wd')
        ev = self.next_event(leases, lambda e: e['event'] == 'delete', 5, 'the lease deleted at stop')
        self.assertEqual(ev.get('cause'), 'deleted', ev)
        r = self.st('wd')
        self.assertEqual((r['state'], r['result']), ('inactive', 'success'))
        time.sleep(1.5)  # past WatchdogSec: a lease left behind would expire now
        self.assertEqual(self.st('wd')['state'], 'inactive')
        self.ctl('start', 'wd')
        self.next_event(leases, lambda e: e['event'] == 'put', 5, 'the lease of the second run')
        self.assertEqual(self.stop_tend(), 0)
        seen = []
        for w in (records,):
            try:
                while True:
                    seen.append(json.loads(w.readline(5, 'watch ended')))
            except AssertionError:
                pass
        self.assertEqual([e for e in seen if e.get('result') == 'watchdog'], [])
        self.assertNotIn('watchdog timeout', self.stderr())


class UnderSystemd(NotifyTestCase):
    """tend with a NOTIFY_SOCKET of its own: the test is its service manager."""

    def manager_socket(self):
        path = self.path('notify')
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(path)
        self.addCleanup(s.close)
        return s, path

    def recv_all(self, s, until, timeout, what):
        """Datagrams received (text, CLOCK_MONOTONIC µs) until until(text)."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError('%s: not received in %.1fs; got %r; tend stderr %r'
                                     % (what, timeout, out, self.stderr()[-2000:]))
            s.settimeout(left)
            try:
                text = s.recv(4096).decode()
            except socket.timeout:
                continue
            out.append((text, monotonic_us()))
            if until(text):
                return out

    def test_ready_after_settled_watchdog_stopping_and_clean_children(self):
        s, path = self.manager_socket()
        t = self.trigger('slow')
        env_file = self.path('env-plain')
        self.unit('slow', '''
            [Service]
            Type=notify
            ExecStart=/bin/sh -c '%s; env > %s.slow; exec %s notify --then-pause READY=1'
        ''' % (self.wait_for_file(t), env_file, PROBE))
        self.unit('plain', '''
            [Service]
            ExecStart=/bin/sh -c 'env > %s; exec %s pause'
        ''' % (env_file, PROBE))
        env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC='200000')
        self.start_tend(wrap=['sh', '-c', 'WATCHDOG_PID=$$ exec "$@"', 'sh'], env=env)
        self.wait_running('plain')
        time.sleep(0.5)
        open(t, 'w').close()
        got = self.recv_all(s, lambda x: 'READY=1' in x, 10, 'READY=1')
        ready_at = got[-1][1]
        slow = self.wait_running('slow')
        self.assertLessEqual(slow['since_monotonic'], ready_at, 'READY=1 came before the units settled: %r, %r'
                             % (got, slow))
        self.assertIn('STATUS=2 units: 2 running, 0 failed', got[-1][0])
        self.assertFalse([x for x, _ in got[:-1] if 'READY=1' in x], got)

        # WATCHDOG=1 at half of WATCHDOG_USEC=200000: every ~100 ms.
        pings = []
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end:
            s.settimeout(0.5)
            try:
                if s.recv(4096) == b'WATCHDOG=1':
                    pings.append(time.monotonic())
            except socket.timeout:
                pass
        gaps = sorted(b - a for a, b in zip(pings, pings[1:]))
        self.assertGreaterEqual(len(pings), 11, 'pings %r' % gaps)
        self.assertLessEqual(len(pings), 17, 'pings %r' % gaps)
        median = gaps[len(gaps) // 2]
        self.assertTrue(0.08 <= median <= 0.13, 'median interval %.3fs, want 0.1s' % median)

        # RELOADING=1 … READY=1 around a reload.
        os.kill(self.tend_pid, signal.SIGHUP)
        got = self.recv_all(s, lambda x: x == 'READY=1', 5, 'READY=1 after RELOADING=1')
        texts = [x for x, _ in got if x != 'WATCHDOG=1']
        self.assertTrue(texts[0].startswith('RELOADING=1\nMONOTONIC_USEC='), texts)

        # The units' environment holds nothing of tend's manager.
        for f in (env_file, env_file + '.slow'):
            with open(f) as fh:
                names = dict(ln.split('=', 1) for ln in fh.read().splitlines() if '=' in ln)
            self.assertEqual([n for n in names if n.startswith('WATCHDOG_')], [], f)
            self.assertNotEqual(names.get('NOTIFY_SOCKET'), path, f)
        with open(env_file) as fh:
            self.assertNotIn('NOTIFY_SOCKET=', fh.read())

        # STOPPING=1 at shutdown, before tend exits.
        os.kill(self.tend_pid, signal.SIGTERM)
        self.recv_all(s, lambda x: x == 'STOPPING=1', 10, 'STOPPING=1')
        self.assertEqual(self.tend_proc.wait(15, 'tend did not exit'), 0)

    def test_combined_mode_cmd_gets_nothing_of_tends_manager(self):
        s, path = self.manager_socket()
        out = self.path('cmd-env')
        self.unit('side', '''
            [Service]
            ExecStart=%s pause
        ''' % PROBE)
        env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC='5000000', WATCHDOG_X='y')
        self.start_tend(cmd=['sh', '-c', 'env > %s; exec %s pause' % (out, PROBE)],
                        wrap=['sh', '-c', 'WATCHDOG_PID=$$ exec "$@"', 'sh'], env=env)
        self.recv_all(s, lambda x: 'READY=1' in x, 10, 'READY=1')
        wait_until(lambda: os.path.exists(out) and os.path.getsize(out) > 0, 5, 'CMD never ran')
        with open(out) as f:
            text = f.read()
        self.assertNotIn('NOTIFY_SOCKET=', text)
        self.assertNotIn('WATCHDOG_', text)

    def test_no_notify_socket_sends_nothing_and_entrypoint_passes_it(self):
        # Entrypoint mode: NOTIFY_SOCKET passes to CMD, tend sends nothing itself.
        s, path = self.manager_socket()
        env = dict(os.environ, NOTIFY_SOCKET=path)
        p = self.tend('--', 'sh', '-c', 'echo "$NOTIFY_SOCKET"', env=env)
        self.assertEqual(p.readline(5, 'CMD said nothing'), path)
        self.assertEqual(p.wait(5, 'tend did not exit'), 0)
        s.settimeout(0.2)
        with self.assertRaises(socket.timeout):
            s.recv(4096)


class Idle(NotifyTestCase):
    def test_idle_units_zero_context_switches(self):
        """SPEC §1: with no watchdog, an idle tend makes zero wake-ups. 10
        idle units (5 simple, 5 Type=notify that said READY=1): tend's
        voluntary + nonvoluntary context switches over 10 s must not move."""
        for i in range(5):
            self.unit('simple%d' % i, '''
                [Service]
                ExecStart=%s pause
            ''' % PROBE)
            self.unit('notify%d' % i, '''
                [Service]
                Type=notify
                ExecStart=%s notify --then-pause READY=1
            ''' % PROBE)
        self.start_tend()
        wait_until(lambda: all(r['state'] == 'running' for r in self.statuses().values())
                   and len(self.statuses()) == 10, 10, lambda: 'not all running: %r' % self.statuses())
        time.sleep(0.5)  # let the last control connection's close be read
        before, cpu = ctx_switches(self.tend_pid), cpu_ticks(self.tend_pid)
        time.sleep(10)  # the measured interval
        after, cpu = ctx_switches(self.tend_pid), cpu_ticks(self.tend_pid) - cpu
        sys.stderr.write('idle: 10 units, %d context switches and %d CPU ticks of tend in 10 s\n'
                         % (after - before, cpu))
        self.assertEqual(after - before, 0, 'tend woke up while idle')
        # A spinning tend need not switch context on an idle machine: its CPU time must not move either.
        self.assertEqual(cpu, 0, 'tend used CPU while idle')


if __name__ == '__main__':
    unittest.main(verbosity=2)
