#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Dependencies between units (SPEC §4 "Start jobs", "Cycles", "Propagation",
"Shutdown") on the built tend and tendctl with real processes.

Ordering is proven without timing: a "gated" unit is Type=notify and sends
READY=1 only once the test opens its gate (a FIFO the unit's script reads),
so the test holds a start job open for as long as it likes and checks that
the units ordered after it have not started meanwhile. Each unit stamps
CLOCK_MONOTONIC into files (child-probe stamp) when it starts, when it is
ready and when its ExecStop= runs; the stamps give the order afterwards."""
import os
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import PROBE, wait_until  # noqa: E402
from svctest import TENDCTL, ServiceTestCase, kill_pid, pid_alive  # noqa: E402


class DepsTestCase(ServiceTestCase):
    def setUp(self):
        super().setUp()
        self.stamps = self.path('stamps')
        os.mkdir(self.stamps)

    def stamp_path(self, name, what):
        return os.path.join(self.stamps, '%s.%s' % (name, what))

    def stamp(self, name, what):
        """The CLOCK_MONOTONIC time (s) child-probe stamped, or None (also
        while the file exists but child-probe has not written it yet)."""
        try:
            with open(self.stamp_path(name, what)) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        return float(text.split()[-1]) if text.endswith('\n') else None

    def gate(self, name):
        p = os.path.join(self.stamps, name + '.gate')
        if not os.path.exists(p):
            os.mkfifo(p)
        return p

    def open_gate(self, name, timeout=5):
        """Lets the unit's script past its gate: a FIFO can be opened for
        writing without blocking only once its reader is there."""
        p = self.gate(name)

        def try_open():
            try:
                fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                return None  # ENXIO: the script is not reading yet
            os.write(fd, b'go\n')
            os.close(fd)
            return True
        wait_until(try_open, timeout, lambda: '%s never read its gate %s; tend stderr %r'
                   % (name, p, self.stderr()[-2000:]))

    def gated_unit(self, name, unit_keys='', service_keys='', stop_gate=False):
        """A Type=notify unit: stamps NAME.start, waits at its gate, stamps
        NAME.ready, sends READY=1 and pauses. Its ExecStop= stamps NAME.stop,
        then with stop_gate waits at the gate NAME-stop."""
        self.gate(name)
        stop = '%s stamp %s' % (PROBE, self.stamp_path(name, 'stop'))
        if stop_gate:
            self.gate(name + '-stop')
            stop += '; read x < %s' % self.gate(name + '-stop')
        self.unit(name, '''
            [Unit]
            %s
            [Service]
            Type=notify
            NotifyAccess=all
            ExecStart=/bin/sh -c '%s stamp %s; read x < %s; %s stamp %s; %s notify --barrier READY=1; exec %s pause'
            ExecStop=/bin/sh -c '%s'
            TimeoutStartSec=30
            TimeoutStopSec=30
            %s
        ''' % (unit_keys, PROBE, self.stamp_path(name, 'start'), self.gate(name), PROBE,
               self.stamp_path(name, 'ready'), PROBE, PROBE, stop, service_keys))

    def simple_unit(self, name, unit_keys='', service_keys=''):
        """A simple unit that stamps NAME.start and pauses."""
        self.unit(name, '''
            [Unit]
            %s
            [Service]
            ExecStart=/bin/sh -c '%s stamp %s; exec %s pause'
            %s
        ''' % (unit_keys, PROBE, self.stamp_path(name, 'start'), PROBE, service_keys))

    def wait_stamp(self, name, what, timeout=5):
        return wait_until(lambda: self.stamp(name, what), timeout,
                          lambda: '%s never stamped %s; statuses %r; tend stderr %r'
                          % (name, what, self.statuses(), self.stderr()[-3000:]))

    def settle(self, probe):
        """Proves that tend has looked at every waiting start job since the
        last change: `tendctl start PROBE` (a unit with no dependency) is
        answered only after tend's loop handled what came before it."""
        self.ctl('restart', probe)


class Ordering(DepsTestCase):
    def test_chain_starts_in_order_and_stops_in_reverse(self):
        """a ← b ← c: b starts only once a is ready, c once b is; at
        shutdown c stops first, then b, then a (each ExecStop= held by the
        test until it checked the next one has not begun)."""
        self.gated_unit('a', stop_gate=True)
        self.gated_unit('b', 'After=a.service\nRequires=a.service', stop_gate=True)
        self.gated_unit('c', 'After=b.service\nWants=b.service', stop_gate=True)
        self.simple_unit('probe')
        self.start_tend()
        self.wait_stamp('a', 'start')
        self.wait_running('probe')
        self.settle('probe')
        self.assertIsNone(self.stamp('b', 'start'), 'b started before a was ready')
        self.assertIsNone(self.stamp('c', 'start'))
        st = self.statuses()
        self.assertEqual(st['a.service']['state'], 'starting')
        self.assertEqual(st['b.service']['state'], 'inactive', 'a waiting start job shows the state it had')
        self.assertEqual(st['c.service']['state'], 'inactive')

        self.open_gate('a')
        self.wait_running('a')
        self.wait_stamp('b', 'start')
        self.settle('probe')
        self.assertIsNone(self.stamp('c', 'start'), 'c started before b was ready')
        self.open_gate('b')
        self.wait_running('b')
        self.wait_stamp('c', 'start')
        self.open_gate('c')
        self.wait_running('c')
        self.assertGreaterEqual(self.stamp('b', 'start'), self.stamp('a', 'ready'))
        self.assertGreaterEqual(self.stamp('c', 'start'), self.stamp('b', 'ready'))
        st = self.statuses()
        self.assertLessEqual(st['a.service']['since_monotonic'], st['b.service']['since_monotonic'])

        os.kill(self.tend_pid, signal.SIGTERM)
        self.wait_stamp('c', 'stop')
        self.assertIsNone(self.stamp('b', 'stop'), 'b stopped while c (ordered after it) was stopping')
        self.open_gate('c-stop')
        self.wait_stamp('b', 'stop')
        self.assertIsNone(self.stamp('a', 'stop'), 'a stopped while b was stopping')
        self.open_gate('b-stop')
        self.wait_stamp('a', 'stop')
        self.open_gate('a-stop')
        self.assertEqual(self.tend_proc.wait(15, 'tend did not exit after SIGTERM'), 0)

    def test_diamond(self):
        """bottom ← left, right ← top: left and right start together once
        bottom is ready (in parallel: both are held at their gates at once),
        top only when both are; top stops first, bottom last."""
        self.gated_unit('bottom', stop_gate=True)
        self.gated_unit('left', 'After=bottom.service\nRequires=bottom.service', stop_gate=True)
        self.gated_unit('right', 'After=bottom.service\nRequires=bottom.service', stop_gate=True)
        self.gated_unit('top', 'After=left.service right.service\nRequires=left.service right.service',
                        stop_gate=True)
        self.simple_unit('probe')
        self.start_tend()
        self.wait_stamp('bottom', 'start')
        self.settle('probe')
        self.assertIsNone(self.stamp('left', 'start'))
        self.open_gate('bottom')
        self.wait_stamp('left', 'start')
        self.wait_stamp('right', 'start')  # both held at their gates: parallel
        self.open_gate('left')
        self.wait_running('left')
        self.settle('probe')
        self.assertIsNone(self.stamp('top', 'start'), 'top started before right was ready')
        self.open_gate('right')
        self.wait_stamp('top', 'start')
        self.open_gate('top')
        self.wait_running('top')
        self.assertGreaterEqual(self.stamp('top', 'start'), max(self.stamp('left', 'ready'),
                                                                self.stamp('right', 'ready')))

        os.kill(self.tend_pid, signal.SIGTERM)
        self.wait_stamp('top', 'stop')
        self.settle_stop_check(['left', 'right', 'bottom'], 'top')
        self.open_gate('top-stop')
        self.wait_stamp('left', 'stop')
        self.wait_stamp('right', 'stop')  # in parallel again
        self.assertIsNone(self.stamp('bottom', 'stop'), 'bottom stopped before left and right')
        self.open_gate('left-stop')
        self.assertIsNone(self.stamp('bottom', 'stop'), 'bottom stopped before right')
        self.open_gate('right-stop')
        self.wait_stamp('bottom', 'stop')
        self.open_gate('bottom-stop')
        self.assertEqual(self.tend_proc.wait(15, 'tend did not exit after SIGTERM'), 0)

    def settle_stop_check(self, later, holder):
        for name in later:
            self.assertIsNone(self.stamp(name, 'stop'), '%s stopped while %s was stopping' % (name, holder))

    def test_oneshot_before_server(self):
        """A oneshot ordered before a server (Before= on the oneshot,
        Requires= on the server): the server starts once the oneshot exited
        0, and finds its file."""
        data = self.path('data.txt')
        self.unit('setup', '''
            [Unit]
            Before=server.service
            [Service]
            Type=oneshot
            ExecStart=/bin/sh -c 'read x < %s; echo ready > %s'
        ''' % (self.gate('setup'), data))
        self.unit('server', '''
            [Unit]
            Requires=setup.service
            [Service]
            ExecStart=/bin/sh -c 'test -s %s || exit 3; %s stamp %s; exec %s pause'
            Restart=no
        ''' % (data, PROBE, self.stamp_path('server', 'start'), PROBE))
        self.simple_unit('probe')
        self.start_tend()
        self.wait_running('probe')
        self.settle('probe')
        self.assertEqual(self.st('setup')['state'], 'starting')
        self.assertEqual(self.st('server')['state'], 'inactive')
        self.open_gate('setup')
        self.wait_running('server')
        r = self.st('setup')
        self.assertEqual((r['state'], r['result']), ('inactive', 'success'))
        # Type=simple is running at the fork: the stamp comes once its shell ran.
        wait_until(lambda: self.stamp('server', 'start'), 5,
                   'the server never stamped: it did not find the oneshot\'s file (exit 3?)')


class Stopping(DepsTestCase):
    def test_stop_of_a_unit_not_ready_yet_is_not_held_by_its_start(self):
        """A stop while a notify unit waits for READY=1 applies at once; it
        is not queued until TimeoutStartSec= (30 s here, more than tendctl's
        15 s) and the unit ends inactive, not failed with result timeout.
        The client of the interrupted start learns it was stopped."""
        self.gated_unit('n')
        self.start_tend()
        self.wait_stamp('n', 'start')
        start = self.start([TENDCTL, '--control-socket', self.sock, 'start', 'n'], stdin=subprocess.DEVNULL)
        # tend's own start at boot is one waiter of the flight already: the
        # client's request has joined only once there are two. Seen under
        # load: with `>= 1` the stop ran before tendctl's request arrived,
        # which then started the unit anew (starting, a new pid, 1 waiter).
        self.wait_state('n', lambda r: r['waiters'] >= 2, 5,
                        'the start request never joined (tend\'s own boot start is the other waiter)')
        self.ctl('stop', 'n')
        r = self.st('n')
        self.assertEqual((r['state'], r['result'], r['main_pid']), ('inactive', 'success', None), r)
        self.assertEqual(start.wait(5, 'the start was never answered'), 1)
        self.assertIn('stopped before it was up', start.stderr_text())

    def test_shutdown_while_starts_wait(self):
        """SIGTERM while a chain waits on a unit that is not ready: tend
        stops everything and exits, well before the start timeouts."""
        self.gated_unit('a')
        self.gated_unit('b', 'After=a.service\nRequires=a.service')
        self.start_tend()
        self.wait_stamp('a', 'start')
        self.assertEqual(self.stop_tend(timeout=15), 0, self.stderr())
        self.assertIsNone(self.stamp('b', 'start'))


class Requirements(DepsTestCase):
    def test_failed_requires_blocks_failed_wants_does_not(self):
        self.unit('db', '''
            [Service]
            Type=notify
            ExecStart=/bin/sh -c 'exit 4'
        ''')
        self.simple_unit('app', 'Requires=db.service\nAfter=db.service')
        self.simple_unit('viewer', 'Wants=db.service\nAfter=db.service')
        self.simple_unit('sidecar', 'After=db.service')
        self.start_tend()
        self.wait_running('viewer')
        self.wait_running('sidecar')
        r = self.wait_state('app', lambda r: r['state'] == 'failed', 5, 'app never failed')
        self.assertEqual(r['result'], 'dependency')
        self.assertIsNone(r['main_pid'])
        self.assertIsNone(self.stamp('app', 'start'), 'app ran although its requirement failed')
        self.assertEqual(self.st('db')['result'], 'exit-code')
        self.assertIn('app.service: not started: required unit db.service failed (result exit-code)', self.stderr())
        # tendctl start of it fails the same way, with exit status 1.
        status, _, err = self.ctl('start', 'app', check=False)
        self.assertEqual(status, 1, err)
        self.assertIn('app.service failed to start (result dependency): required unit db.service failed', err)
        self.assertEqual(self.st('app')['result'], 'dependency')

    def test_missing_requirement(self):
        self.simple_unit('app', 'Requires=nothere.service')
        self.simple_unit('ok', 'Wants=nothere.service\nAfter=nothere.service')
        self.start_tend()
        self.wait_running('ok')
        r = self.wait_state('app', lambda r: r['state'] == 'failed', 5, 'app never failed')
        self.assertEqual(r['result'], 'dependency')
        self.assertIn('app.service: not started: required unit nothere.service is not loaded', self.stderr())

    def test_missing_wants_is_one_notice_per_load(self):
        """A Wants= of a unit that is not in DIR has no impact (systemd) and
        is one notice per unit and load — a plain name as an instance's —
        not repeated when the dependency graph is rebuilt (starts, stops)."""
        self.simple_unit('ok', 'Wants=missing-xyz.service tpl@x.service')
        self.start_tend(log_level='notice')
        self.wait_running('ok')
        plain = 'ok.service: Wants=missing-xyz.service: no such unit in %s (no impact, as under systemd)' % self.dir
        inst = 'ok.service: Wants=tpl@x.service: no such unit in %s' % self.dir
        self.ctl('restart', 'ok')
        self.ctl('stop', 'ok')
        self.ctl('start', 'ok')
        self.wait_running('ok')
        self.assertEqual((self.stderr().count(plain), self.stderr().count(inst)), (1, 1), self.stderr())
        self.ctl('daemon-reload')
        wait_until(lambda: self.stderr().count(plain) == 2, 5, lambda: 'not said again at the reload (a load): %r'
                   % self.stderr())

    def test_start_pulls_requirements(self):
        """tendctl start of a unit starts the units it requires (and wants)
        that are not running, first when ordered so."""
        self.simple_unit('db')
        self.simple_unit('cache')
        self.simple_unit('app', 'Requires=db.service\nWants=cache.service\nAfter=db.service cache.service')
        self.start_tend()
        for n in ('db', 'cache', 'app'):
            self.wait_running(n)
        self.ctl('stop', 'db')  # stops app too (Requires=)
        self.ctl('stop', 'cache')
        self.wait_state('app', lambda r: r['state'] == 'inactive', 5, 'app did not stop with db')
        self.ctl('start', 'app')
        st = self.statuses()
        for n in ('db', 'cache', 'app'):
            self.assertEqual(st[n + '.service']['state'], 'running', st)
        self.assertLessEqual(st['db.service']['since_monotonic'], st['app.service']['since_monotonic'])

    def test_template_instance_referenced(self):
        """NAME@INST exists when another unit references it (SPEC §3)."""
        self.unit('db@', '''
            [Service]
            ExecStart=/bin/sh -c '%s stamp %s.%%i; exec %s pause'
        ''' % (PROBE, self.stamp_path('db', 'start'), PROBE))
        self.simple_unit('web', 'Requires=db@blue.service\nAfter=db@blue.service')
        self.start_tend()
        self.wait_running('web')
        self.assertEqual(self.st('db@blue')['state'], 'running')
        # Type=simple is running at the fork: the instance's stamp comes once
        # its shell ran child-probe (a race under load when read at once).
        self.wait_stamp('db', 'start.blue')
        self.assertTrue(os.path.exists(self.stamp_path('db', 'start') + '.blue'))


class Propagation(DepsTestCase):
    def test_automatic_restart_restarts_requires_dependents(self):
        self.simple_unit('db', service_keys='Restart=always\nRestartSec=50ms')
        self.simple_unit('app', 'Requires=db.service\nAfter=db.service')
        self.simple_unit('viewer', 'Wants=db.service\nAfter=db.service')
        self.start_tend()
        db = self.wait_running('db')
        app = self.wait_running('app')
        viewer = self.wait_running('viewer')
        kill_pid(db['main_pid'])
        db2 = self.wait_running('db', other_than=db['main_pid'])
        app2 = self.wait_running('app', other_than=app['main_pid'])
        self.assertFalse(pid_alive(app['main_pid']), 'the old app still runs')
        self.assertEqual(app2['restarts'], app['restarts'] + 1)
        self.assertGreaterEqual(app2['since_monotonic'], db2['since_monotonic'],
                                'app restarted before db was running again')
        self.assertEqual(self.st('viewer')['main_pid'], viewer['main_pid'], 'Wants= propagates nothing')

    def test_restart_waiting_for_its_requirement_shows_inactive(self):
        """X restarts and is held before READY=1: its running Requires=
        dependent stops, then waits for X, shown inactive without a pid."""
        self.gated_unit('x')
        self.simple_unit('d', 'Requires=x.service\nAfter=x.service')
        self.start_tend()
        self.open_gate('x')
        self.wait_running('x')
        d = self.wait_running('d')
        self.ctl('restart', 'x', '--no-block')
        r = self.wait_state('d', lambda r: r['state'] == 'inactive', 5, 'd did not stop with x\'s restart')
        self.assertIsNone(r['main_pid'])
        self.assertFalse(pid_alive(d['main_pid']))
        self.open_gate('x')
        d2 = self.wait_running('d', other_than=d['main_pid'])
        self.assertGreaterEqual(d2['since_monotonic'], self.st('x')['since_monotonic'])

    def test_removed_requirement_stops_its_dependents(self):
        """daemon-reload removing X stops it as tendctl stop would: its
        Requires= dependents too."""
        self.simple_unit('x')
        self.simple_unit('d', 'Requires=x.service\nAfter=x.service')
        self.simple_unit('w', 'Wants=x.service')
        self.start_tend()
        for n in ('x', 'd', 'w'):
            self.wait_running(n)
        w = self.st('w')
        os.unlink(os.path.join(self.dir, 'x.service'))
        self.ctl('daemon-reload')
        self.wait_state('d', lambda r: r['state'] == 'inactive', 5, 'd kept running without x')
        self.assertEqual(self.st('w')['main_pid'], w['main_pid'])

    def test_bindsto_stops_with_its_unit(self):
        self.simple_unit('x', service_keys='Restart=no')
        self.simple_unit('y', 'BindsTo=x.service\nAfter=x.service')
        self.simple_unit('z', 'Requires=x.service\nAfter=x.service')
        self.start_tend()
        x = self.wait_running('x')
        self.wait_running('y')
        z = self.wait_running('z')
        kill_pid(x['main_pid'])
        self.wait_state('x', lambda r: r['state'] == 'failed', 5, 'x did not fail')
        self.wait_state('y', lambda r: r['state'] == 'inactive', 5, 'y (BindsTo=x) did not stop when x failed')
        self.assertEqual(self.st('z')['main_pid'], z['main_pid'], 'Requires= alone does not stop with a dead x')

    def test_explicit_stop_stops_requires_and_bindsto(self):
        self.simple_unit('x')
        self.simple_unit('y', 'BindsTo=x.service')
        self.simple_unit('z', 'Requires=x.service')
        self.simple_unit('w', 'Wants=x.service')
        self.simple_unit('zz', 'Requires=z.service')
        self.start_tend()
        for n in ('x', 'y', 'z', 'w', 'zz'):
            self.wait_running(n)
        w = self.st('w')
        self.ctl('stop', 'x')
        for n in ('x', 'y', 'z', 'zz'):
            self.wait_state(n, lambda r: r['state'] == 'inactive', 5, 'not stopped with x')
        self.assertEqual(self.st('w')['main_pid'], w['main_pid'])


class Cycles(DepsTestCase):
    def test_cycle_is_broken_never_a_hang(self):
        self.simple_unit('a', 'After=b.service')
        self.simple_unit('b', 'After=c.service\nRequires=c.service')
        self.simple_unit('c', 'After=a.service\nRequires=a.service')
        self.start_tend()
        # c requires a, b requires c: only b is required by no member.
        r = self.wait_state('b', lambda r: r['state'] == 'failed', 5, 'b (breaking the cycle) did not fail')
        self.assertEqual(r['result'], 'dependency')
        self.wait_running('a')
        self.wait_running('c')
        err = self.stderr()
        self.assertIn('ordering cycle between a.service, b.service, c.service: b.service is not started', err)
        self.assertIn('b.service: not started: not started to break ordering cycle', err)
        self.assertEqual(self.stop_tend(), 0)

    def test_cycle_added_by_daemon_reload_is_broken_before_any_start(self):
        self.simple_unit('base')
        self.start_tend()
        self.wait_running('base')
        self.simple_unit('e1', 'After=e2.service')
        self.simple_unit('e2', 'After=e1.service')
        self.ctl('daemon-reload')
        r = self.wait_state('e1', lambda r: r['state'] == 'failed', 5, 'e1 (breaking the new cycle) did not fail')
        self.assertEqual(r['result'], 'dependency')
        self.assertIsNone(self.stamp('e1', 'start'), 'e1 ran before its cycle was found')
        self.wait_running('e2')
        self.assertEqual(self.stderr().count('ordering cycle between e1.service, e2.service'), 1, self.stderr())

    def test_cycle_of_required_units_starts_none(self):
        self.simple_unit('p', 'After=q.service\nRequires=q.service')
        self.simple_unit('q', 'After=p.service\nRequires=p.service')
        self.simple_unit('other')
        self.start_tend()
        self.wait_running('other')
        for n in ('p', 'q'):
            r = self.wait_state(n, lambda r: r['state'] == 'failed', 5, 'not failed')
            self.assertEqual(r['result'], 'dependency')
        self.assertIn('each is required by another, so none of them is started', self.stderr())


class Cancellation(DepsTestCase):
    def test_clients_killed_while_waiting_leave_the_unit_inactive(self):
        """Issue 8: clients start w@1, ordered After= a notify unit that is
        not ready; the clients are killed; once the dependency is ready, w@1
        is still inactive and never ran (SPEC §2.3: the flight was cancelled
        before its point of no return)."""
        self.gated_unit('dep')
        self.unit('w@', '''
            [Unit]
            After=dep.service
            [Service]
            ExecStart=/bin/sh -c '%s stamp %s.%%i; exec %s pause'
        ''' % (PROBE, self.stamp_path('w', 'start'), PROBE))
        self.start_tend()
        self.wait_stamp('dep', 'start')
        clients = [self.start([TENDCTL, '--control-socket', self.sock, 'start', 'w@1'], stdin=subprocess.DEVNULL)
                   for _ in range(3)]
        self.wait_state('w@1', lambda r: r['waiters'] == 3, 5, 'the three clients never joined the start')
        self.assertEqual(self.st('w@1')['state'], 'inactive')
        for c in clients:
            kill_pid(c.pid)
        for c in clients:
            c.wait(5, 'a killed tendctl did not exit')
        self.wait_state('w@1', lambda r: r['waiters'] == 0, 5, 'the killed clients still hold shares')
        self.open_gate('dep')
        self.wait_running('dep')
        # w@2 waits on the same dependency: once it runs, tend has looked at
        # every waiting start job after dep became ready.
        self.ctl('start', 'w@2')
        self.assertEqual(self.st('w@2')['state'], 'running')
        r = self.st('w@1')
        self.assertEqual(r['state'], 'inactive', r)
        self.assertIsNone(r['main_pid'])
        self.assertFalse(os.path.exists(self.stamp_path('w', 'start') + '.1'), 'w@1 ran after its clients left')
        self.assertIn('w@1.service: start cancelled while it waited for its dependencies', self.stderr())

    def test_stop_while_waiting(self):
        self.gated_unit('dep')
        self.simple_unit('app', 'After=dep.service')
        self.simple_unit('probe')
        self.start_tend()
        self.wait_stamp('dep', 'start')
        self.ctl('stop', 'app')
        self.assertEqual(self.st('app')['state'], 'inactive')
        self.open_gate('dep')
        self.wait_running('dep')
        self.settle('probe')
        self.assertIsNone(self.stamp('app', 'start'), 'app ran although it was stopped while waiting')
        self.assertEqual(self.st('app')['state'], 'inactive')


class ConflictsKey(DepsTestCase):
    def test_start_stops_the_conflicting_unit_both_ways(self):
        """a Conflicts=b: at tend's start a wins (its Conflicts= names b) and
        b is not started; `tendctl start b` stops a (the relation holds from
        b's side too), `tendctl start a` stops b again. c and d, without the
        key, run side by side throughout."""
        self.simple_unit('a', 'Conflicts=b.service')
        self.simple_unit('b')
        self.simple_unit('c')
        self.simple_unit('d')
        self.simple_unit('probe')
        self.start_tend()
        a = self.wait_running('a')
        self.wait_running('probe')
        self.settle('probe')
        r = self.st('b')
        self.assertEqual((r['state'], r['main_pid']), ('inactive', None), r)
        self.assertIsNone(self.stamp('b', 'start'), 'b ran although a, which conflicts with it, started')
        self.assertIn('b.service: not started, as a.service starts (Conflicts=)', self.stderr())
        c, d = self.wait_running('c'), self.wait_running('d')

        self.ctl('start', 'b')
        self.wait_state('a', lambda r: r['state'] == 'inactive', 5, 'a kept running when b started')
        self.assertFalse(pid_alive(a['main_pid']))
        b = self.wait_running('b')
        self.assertIn('a.service: stopping, as b.service starts (Conflicts=)', self.stderr())

        self.ctl('start', 'a')
        self.wait_state('b', lambda r: r['state'] == 'inactive', 5, 'b kept running when a started')
        self.assertFalse(pid_alive(b['main_pid']))
        self.wait_running('a')
        st = self.statuses()
        self.assertEqual((st['c.service']['main_pid'], st['d.service']['main_pid']), (c['main_pid'], d['main_pid']),
                         'units without Conflicts= were touched')

    def test_start_waits_for_the_stop_it_is_ordered_after(self):
        """b Conflicts=a, After=a, added by a daemon-reload while a runs:
        b's start begins only once a has stopped (a's ExecStop= held by the
        test)."""
        self.gated_unit('a', stop_gate=True)
        self.simple_unit('probe')
        self.start_tend()
        self.open_gate('a')
        self.wait_running('a')
        self.simple_unit('b', 'Conflicts=a.service\nAfter=a.service')
        self.ctl('daemon-reload')
        self.wait_stamp('a', 'stop')
        self.settle('probe')
        self.assertIsNone(self.stamp('b', 'start'), 'b started while a (ordered before it) was stopping')
        self.open_gate('a-stop')
        self.wait_running('b')
        self.wait_stamp('b', 'start')
        self.assertEqual(self.st('a')['state'], 'inactive')
        self.assertGreaterEqual(self.stamp('b', 'start'), self.stamp('a', 'stop'))


class PartOfKey(DepsTestCase):
    def test_stop_and_restart_reach_the_part_start_does_not(self):
        self.simple_unit('parent')
        self.simple_unit('child', 'PartOf=parent.service')
        self.simple_unit('other')
        self.simple_unit('probe')
        self.start_tend()
        child, other = self.wait_running('child'), self.wait_running('other')
        self.wait_running('parent')

        self.ctl('restart', 'parent')
        child2 = self.wait_running('child', other_than=child['main_pid'])
        self.assertFalse(pid_alive(child['main_pid']), 'the old child still runs')
        self.assertIn('child.service: restarting, as parent.service (PartOf=) restarts on request', self.stderr())

        self.ctl('stop', 'parent')
        self.wait_state('child', lambda r: r['state'] == 'inactive', 5, 'child kept running when parent stopped')
        self.assertFalse(pid_alive(child2['main_pid']))

        self.ctl('start', 'parent')
        self.settle('probe')
        r = self.st('child')
        self.assertEqual((r['state'], r['main_pid']), ('inactive', None), 'a start of parent started child: %r' % r)
        self.assertEqual(self.st('other')['main_pid'], other['main_pid'], 'a unit without PartOf= was touched')

        # One direction only: child's restart and stop leave parent alone.
        parent = self.st('parent')
        self.ctl('start', 'child')
        self.ctl('restart', 'child')
        self.ctl('stop', 'child')
        self.assertEqual(self.st('parent')['main_pid'], parent['main_pid'])


class RequisiteKey(DepsTestCase):
    def test_fails_at_once_when_inactive_never_starts_it(self):
        self.simple_unit('dep', service_keys='Restart=no')
        self.simple_unit('app', 'Requisite=dep.service\nAfter=dep.service')
        self.simple_unit('probe')
        self.start_tend()
        self.wait_running('dep')
        app = self.wait_running('app')  # dep was being started with it: waited for, then up

        self.ctl('stop', 'dep')  # Requisite= dependents stop with it
        self.wait_state('app', lambda r: r['state'] == 'inactive', 5, 'app kept running when dep stopped')
        self.assertFalse(pid_alive(app['main_pid']))

        status, _, err = self.ctl('start', 'app', check=False, timeout=5)
        self.assertEqual(status, 1, err)
        self.assertIn('requisite unit dep.service is not active', err)
        r = self.st('app')
        self.assertEqual((r['state'], r['result'], r['main_pid']), ('failed', 'dependency', None), r)
        self.settle('probe')
        r = self.st('dep')
        self.assertEqual((r['state'], r['main_pid']), ('inactive', None), 'Requisite= started dep: %r' % r)

        self.ctl('start', 'dep')
        self.ctl('start', 'app')
        self.assertEqual(self.st('app')['state'], 'running')

    def test_failed_requisite(self):
        """dep's start job (Type=notify: done at READY=1) is waited for, then fails."""
        self.unit('dep', '''
            [Service]
            Type=notify
            ExecStart=/bin/sh -c 'exit 3'
        ''')
        self.simple_unit('app', 'Requisite=dep.service\nAfter=dep.service')
        self.start_tend()
        r = self.wait_state('app', lambda r: r['state'] == 'failed', 5, 'app did not fail with dep')
        self.assertEqual(r['result'], 'dependency')
        self.assertIsNone(self.stamp('app', 'start'))
        self.assertIn('app.service: not started: requisite unit dep.service is not active', self.stderr())


class OnFailureKey(DepsTestCase):
    def handler(self, name='handler'):
        """A template whose instance %i writes `tendctl status %i` into
        stamps/NAME.seen.%i (what the failed unit's record says) and pauses."""
        seen = self.stamp_path(name, 'seen')
        self.unit(name + '@', '''
            [Service]
            ExecStart=/bin/sh -c '%s --control-socket %s status %%i > %s.%%i.tmp; mv %s.%%i.tmp %s.%%i; exec %s pause'
        ''' % (TENDCTL, self.sock, seen, seen, seen, PROBE))

    def seen(self, name, inst):
        try:
            with open('%s.%s' % (self.stamp_path(name, 'seen'), inst)) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def test_failure_starts_the_handler_which_sees_it(self):
        self.handler()
        self.unit('bad', '''
            [Unit]
            OnFailure=handler@%%N.service
            [Service]
            ExecStart=/bin/sh -c 'read x < %s; exit 1'
            Restart=no
        ''' % self.gate('bad'))
        self.simple_unit('clean', 'OnFailure=handler@%N.service')
        self.simple_unit('probe')
        self.start_tend()
        self.wait_running('clean')
        self.settle('probe')
        self.assertEqual(self.st('handler@bad')['state'], 'inactive', 'the handler ran before bad failed')
        self.open_gate('bad')
        self.wait_state('bad', lambda r: r['state'] == 'failed', 5, 'bad did not fail')
        self.wait_running('handler@bad')
        text = wait_until(lambda: self.seen('handler', 'bad'), 5, 'the handler never wrote what it saw')
        self.assertIn('failed', text)
        self.assertIn('exit-code', text)
        self.assertIn('handler@bad.service: starting, as bad.service failed (OnFailure=)', self.stderr())

        # A clean stop is not a failure.
        self.ctl('stop', 'clean')
        self.settle('probe')
        r = self.st('handler@clean')
        self.assertEqual((r['state'], r['main_pid']), ('inactive', None), r)
        self.assertIsNone(self.seen('handler', 'clean'))

    def test_no_trigger_while_restarting(self):
        """With Restart=on-failure the unit goes to back-off, not failed
        (systemd: OnFailure= waits until no restart follows): only the
        start-limit failure triggers it, once."""
        self.handler()
        self.unit('flaky', '''
            [Unit]
            OnFailure=handler@%N.service
            StartLimitBurst=3
            StartLimitIntervalSec=60
            [Service]
            ExecStart=/bin/sh -c 'exit 1'
            Restart=on-failure
            RestartSec=100ms
        ''')
        self.start_tend()
        r = self.wait_state('flaky', lambda r: r['state'] == 'failed', 10, 'flaky never hit its start limit')
        self.assertEqual(r['result'], 'start-limit')
        self.assertGreaterEqual(r['restarts'], 2)
        self.wait_running('handler@flaky')
        self.assertEqual(self.stderr().count('handler@flaky.service: starting, as flaky.service failed'), 1,
                         self.stderr())


class OnSuccessKey(DepsTestCase):
    def test_success_starts_the_unit_failure_does_not(self):
        for name, code in (('good', 0), ('bad', 4)):
            self.unit(name, '''
                [Unit]
                OnSuccess=next@%%N.service
                [Service]
                Type=oneshot
                ExecStart=/bin/sh -c 'read x < %s; exit %d'
            ''' % (self.gate(name), code))
        self.unit('next@', '''
            [Service]
            ExecStart=%s pause
        ''' % PROBE)
        self.simple_unit('probe')
        self.start_tend()
        self.wait_running('probe')
        self.settle('probe')
        self.assertEqual(self.st('next@good')['state'], 'inactive', 'next@good ran before good ended')
        self.open_gate('bad')
        self.wait_state('bad', lambda r: r['state'] == 'failed', 5, 'bad did not fail')
        self.open_gate('good')
        self.wait_state('good', lambda r: r['state'] == 'inactive' and r['result'] == 'success', 5,
                        'good did not succeed')
        self.wait_running('next@good')
        self.settle('probe')
        r = self.st('next@bad')
        self.assertEqual((r['state'], r['main_pid']), ('inactive', None), 'OnSuccess= fired on a failure: %r' % r)
        self.assertIn('next@good.service: starting, as good.service succeeded (OnSuccess=)', self.stderr())


class PropagatesReloadToKey(DepsTestCase):
    def reloadable(self, name, unit_keys=''):
        self.unit(name, '''
            [Unit]
            %s
            [Service]
            ExecStart=%s pause
            ExecReload=/bin/sh -c '%s stamp %s'
        ''' % (unit_keys, PROBE, PROBE, self.stamp_path(name, 'reload')))

    def test_reload_reaches_the_units_it_propagates_to(self):
        self.reloadable('a', 'PropagatesReloadTo=b.service')
        self.reloadable('b')
        self.reloadable('c', 'ReloadPropagatedFrom=a.service')
        self.reloadable('d')
        self.start_tend()
        for n in 'abcd':
            self.wait_running(n)
        self.ctl('reload', 'a')
        self.wait_stamp('a', 'reload')
        self.wait_stamp('b', 'reload')
        self.wait_stamp('c', 'reload')
        self.assertIn('b.service: reloading, as a.service reloads (PropagatesReloadTo=)', self.stderr())
        self.assertIn('c.service: reloading, as a.service reloads (PropagatesReloadTo=)', self.stderr())
        self.assertIsNone(self.stamp('d', 'reload'), 'a unit without the keys was reloaded')
        # One direction: b's reload reaches neither a nor c.
        os.unlink(self.stamp_path('a', 'reload'))
        os.unlink(self.stamp_path('c', 'reload'))
        os.unlink(self.stamp_path('b', 'reload'))
        wait_until(lambda: self.ctl('reload', 'b', check=False)[0] == 0, 5, 'b\'s reload was refused')
        self.wait_stamp('b', 'reload')
        self.ctl('reload', 'd')
        self.wait_stamp('d', 'reload')  # tend handled the reload of b before d's
        self.assertIsNone(self.stamp('a', 'reload'), 'b\'s reload reached a')
        self.assertIsNone(self.stamp('c', 'reload'), 'b\'s reload reached c')


class StopWhenUnneededKey(DepsTestCase):
    def test_stopping_the_last_wanting_unit_stops_it(self):
        self.simple_unit('helper', 'StopWhenUnneeded=yes')
        self.simple_unit('user1', 'Wants=helper.service')
        self.simple_unit('user2', 'Requires=helper.service')
        self.simple_unit('kept')  # the same without the key
        self.simple_unit('keeper', 'Wants=kept.service')
        self.simple_unit('probe')
        self.start_tend()
        helper = self.wait_running('helper')
        for n in ('user1', 'user2', 'kept', 'keeper'):
            self.wait_running(n)
        kept = self.st('kept')
        self.ctl('stop', 'user1')
        self.settle('probe')
        self.assertEqual(self.st('helper')['main_pid'], helper['main_pid'], 'helper stopped while user2 needs it')
        self.ctl('stop', 'user2')
        self.wait_state('helper', lambda r: r['state'] == 'inactive', 5, 'helper kept running, unneeded')
        self.assertFalse(pid_alive(helper['main_pid']))
        self.assertIn('helper.service: stopping, as no unit needs it any more (StopWhenUnneeded=)', self.stderr())
        self.ctl('stop', 'keeper')
        self.settle('probe')
        self.assertEqual(self.st('kept')['main_pid'], kept['main_pid'], 'a unit without the key stopped')
        # Started again with its user, it stays up.
        self.ctl('start', 'user1')
        self.settle('probe')
        self.assertEqual(self.st('helper')['state'], 'running')


class UpholdsKey(DepsTestCase):
    def test_killed_upheld_unit_restarts_while_the_upholder_runs(self):
        self.simple_unit('keeper', 'Upholds=kept.service')
        self.simple_unit('kept', service_keys='Restart=no')
        self.simple_unit('probe')
        self.start_tend()
        self.wait_running('keeper')
        kept = self.wait_running('kept')
        kill_pid(kept['main_pid'])
        kept2 = self.wait_running('kept', other_than=kept['main_pid'])
        self.assertIn('kept.service: starting, as keeper.service upholds it (Upholds=)', self.stderr())

        self.ctl('stop', 'keeper')  # Upholds= propagates no stop
        self.settle('probe')
        self.assertEqual(self.st('kept')['main_pid'], kept2['main_pid'])
        kill_pid(kept2['main_pid'])
        self.wait_state('kept', lambda r: r['state'] == 'failed', 5, 'kept did not fail')
        self.settle('probe')
        r = self.st('kept')
        self.assertEqual((r['state'], r['main_pid']), ('failed', None), 'restarted without its upholder: %r' % r)

    def test_upholding_ends_at_the_start_limit(self):
        self.simple_unit('keeper', 'Upholds=crashy.service')
        self.unit('crashy', '''
            [Unit]
            StartLimitBurst=3
            StartLimitIntervalSec=60
            [Service]
            ExecStart=/bin/sh -c 'exit 1'
        ''')
        self.simple_unit('probe')
        self.start_tend()
        self.wait_running('keeper')
        r = self.wait_state('crashy', lambda r: r['state'] == 'failed' and r['result'] == 'start-limit', 10,
                            'crashy never hit its start limit')
        self.settle('probe')
        self.assertEqual(self.st('crashy')['restarts'], r['restarts'], 'upheld again after its start limit')


if __name__ == '__main__':
    unittest.main(verbosity=2)
