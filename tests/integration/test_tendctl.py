#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tendctl and the control socket (SPEC §5, §2.3, §7; issue 8), driven as a
user would: the built tend and tendctl on real units, plus raw protocol
clients (docs/control-protocol.md) where a test needs a thousand clients or
bytes tendctl would never send. Every wait is bounded and names the likely
cause. The peer-credential tests need root: test_tendctl_auth.py.

Not covered here: the cancellation case that orders a unit After= a notify
unit that is not ready yet (dependencies are not built)."""
import errno
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import PROBE, TEND, wait_until  # noqa: E402
from svctest import (RECORD_FIELDS, RESULTS, STATES, TENDCTL, ServiceTestCase, kill_pid, pid_alive,  # noqa: E402
                     wait_exec)

COMPLETION = os.environ.get('TENDCTL_COMPLETION', os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               '../../supervisor/client/tendctl.bash-completion'))
WATCH_FIELDS = RECORD_FIELDS | {'key', 'revision', 'keyspace', 'event'}
MSG_MAX = 1 << 17  # messages from tend are at most 128 KiB


# ---------------------------------------------------------------------------
# A raw protocol client
# ---------------------------------------------------------------------------

class Conn:
    """One SOCK_SEQPACKET connection to tend: one JSON object per message."""

    def __init__(self, path, timeout=15):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(timeout)
        self.s.connect(path)

    def send(self, obj):
        self.s.send(obj if isinstance(obj, bytes) else json.dumps(obj).encode())

    def recv(self):
        data = self.s.recv(MSG_MAX)
        if not data:
            raise AssertionError('tend closed the connection')
        return json.loads(data)

    def result(self):
        """Messages until the result: (result, [data messages])."""
        data = []
        while True:
            m = self.recv()
            if m.get('type') == 'result':
                return m, data
            data.append(m)

    def ask(self, obj):
        self.send(obj)
        return self.result()[0]

    def close(self):
        self.s.close()


def req(command, units=None, **fields):
    o = {'version': 1, 'command': command}
    if units is not None:
        o['units'] = list(units)
    o.update(fields)
    return o


class CtlTestCase(ServiceTestCase):
    def conn(self, timeout=15):
        c = Conn(self.sock, timeout)
        self.addCleanup(c.close)
        return c

    def ctl_json(self, *args, status=0):
        """tendctl ARGS --json: the parsed output (one JSON document)."""
        st, out, err = self.ctl(*args, '--json', check=False)
        self.assertEqual(st, status, 'tendctl %s --json: status %d, stderr %r' % (' '.join(args), st, err))
        return json.loads(out)

    def fifo_unit(self, name, extra=''):
        """A unit whose ExecStop= blocks on a FIFO the test holds until
        self.release(name) opens it (afterwards ExecStop= returns at once)."""
        fifo, opened = self.path(name + '.fifo'), self.path(name + '.opened')
        os.mkfifo(fifo)
        self.unit(name, '''
            [Service]
            ExecStart=%s pause
            ExecStop=/bin/sh -c '[ -e %s ] || cat %s > /dev/null'
            TimeoutStopSec=infinity
            %s
        ''' % (PROBE, opened, fifo, extra))
        return fifo

    def release(self, name, timeout=10):
        """Opens the FIFO of fifo_unit(name) once its ExecStop= reads it."""
        fifo = self.path(name + '.fifo')
        open(self.path(name + '.opened'), 'w').close()

        def try_open():
            try:
                return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    return None
                raise
        fd = wait_until(try_open, timeout, lambda: '%s: ExecStop= never opened its FIFO (is it running? tend '
                        'stderr %r)' % (name, self.stderr()[-2000:]))
        os.close(fd)  # EOF: ExecStop= exits 0


def raise_own_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(want, soft)), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


# ---------------------------------------------------------------------------
# Every command, human and --json, and its exit codes
# ---------------------------------------------------------------------------

class Commands(CtlTestCase):
    def setUp(self):
        super().setUp()
        self.rl_out = self.path('reloads')
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.unit('talk', '''
            [Service]
            ExecStart=/bin/sh -c 'echo one; echo two >&2; echo three; exec sleep 1000'
            ExecReload=/bin/sh -c 'echo reloaded >> %s'
        ''' % self.rl_out)
        self.unit('quiet', '[Service]\nExecStart=%s pause\nStandardOutput=null' % PROBE)
        self.unit('bad', '[Service]\nType=oneshot\nExecStart=/bin/sh -c "exit 4"')
        self.start_tend()
        self.wait_running('web')
        self.wait_running('talk')
        self.wait_state('bad', lambda r: r['state'] == 'failed', 5, 'a oneshot exiting 4 did not fail')

    def check_record(self, r):
        self.assertEqual(set(r), RECORD_FIELDS, 'SPEC §5 field names')
        self.assertIn(r['state'], STATES)
        self.assertIn(r['result'], RESULTS)
        self.assertTrue(r['main_pid'] is None or isinstance(r['main_pid'], int))
        self.assertIsInstance(r['since'], int)
        self.assertIsInstance(r['since_monotonic'], int)
        self.assertIsInstance(r['restarts'], int)
        self.assertIsInstance(r['waiters'], int)
        le = r['last_exit']
        self.assertTrue(le is None or set(le) in ({'code'}, {'signal', 'core_dumped'}), le)
        self.assertTrue(r['status'] is None or isinstance(r['status'], str))

    def test_status_and_list(self):
        arr = self.ctl_json('status')
        self.assertIsInstance(arr, list)
        self.assertEqual({r['name'] for r in arr}, {'web.service', 'talk.service', 'quiet.service', 'bad.service'})
        for r in arr:
            self.check_record(r)
        one = self.ctl_json('status', 'web')
        self.assertIsInstance(one, list, 'status --json is an array for one unit too')
        self.assertEqual([r['name'] for r in one], ['web.service'])
        self.assertEqual(self.ctl_json('status', 'web.service')[0]['main_pid'], one[0]['main_pid'])
        bad = self.ctl_json('status', 'bad')[0]
        self.assertEqual((bad['state'], bad['result'], bad['last_exit'], bad['main_pid']),
                         ('failed', 'exit-code', {'code': 4}, None))

        st, out, _ = self.ctl('status', 'web')
        pid = one[0]['main_pid']
        self.assertIn('● web.service', out)
        self.assertRegex(out, r'Active: active \(running\) since \w{3} \d{4}-\d\d-\d\d')
        self.assertIn('Main PID: %d (child-probe)' % pid, out)
        self.assertIn('tend: running, restarts 0, result success', out)
        self.assertNotIn('Last exit:', out)
        self.assertNotIn('\033[', out, 'colour only on a terminal')
        st, out, _ = self.ctl('status', 'bad', check=False)
        self.assertIn('Last exit: code=exited, status=4', out)
        self.assertEqual(st, 3, 'status of a failed unit: systemctl\'s 3')

        # Not found: systemctl's 4; the found ones are still shown.
        st, out, err = self.ctl('status', 'web', 'nosuch', check=False)
        self.assertEqual(st, 4, err)
        self.assertIn('● web.service', out)
        self.assertIn('nosuch', err)
        # A failed request with no record prints nothing on stdout (issue 19),
        # neither an empty JSON array nor an empty listing.
        for args in (('status', 'nosuch', '--json'), ('status', 'nosuch'), ('status', 'nosuch', 'other')):
            st, out, err = self.ctl(*args, check=False)
            self.assertEqual((st, out), (4, ''), 'tendctl %s: %r' % (' '.join(args), err))
            self.assertIn('nosuch', err)

        lst = self.ctl_json('list')
        self.assertEqual(sorted(r['name'] for r in lst), ['bad.service', 'quiet.service', 'talk.service', 'web.service'])
        for r in lst:
            self.check_record(r)
        _, out, _ = self.ctl('list')
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ['UNIT', 'STATE', 'MAIN', 'PID', 'RESTARTS', 'RESULT', 'SINCE'])
        self.assertTrue(any(ln.split()[:3] == ['web.service', 'running', str(pid)] for ln in lines), out)
        self.assertIn('4 units listed.', out)
        self.assertEqual(self.ctl('list', 'web', check=False)[0], 2, 'list takes no name')

    def test_start_stop_restart(self):
        pid = self.st('web')['main_pid']
        # Human: silent on success.
        st, out, err = self.ctl('stop', 'web')
        self.assertEqual((out, err), ('', ''))
        r = self.st('web')
        self.assertEqual((r['state'], r['main_pid'], r['last_exit']), ('inactive', None, {'signal': 15, 'core_dumped': False}))
        self.assertFalse(pid_alive(pid))
        res = self.ctl_json('start', 'web')
        self.assertEqual(set(res), {'ok', 'units'})
        u = res['units'][0]
        self.assertEqual((res['ok'], u['name'], u['ok'], u['answer'], u['result']), (True, 'web.service', True, 'ok', 'success'))
        self.assertEqual(u['main_pid'], self.st('web')['main_pid'])
        res = self.ctl_json('restart', 'web.service')
        new = res['units'][0]['main_pid']
        self.assertNotEqual(new, u['main_pid'])
        r = self.st('web')
        self.assertEqual((r['state'], r['main_pid'], r['restarts']), ('running', new, 1))
        res = self.ctl_json('stop', 'web')
        self.assertEqual(res['units'][0], {'name': 'web.service', 'ok': True})
        self.assertEqual(self.st('web')['state'], 'inactive')
        # --no-block: answered at once ("queued"), the start goes on.
        res = self.ctl_json('start', '--no-block', 'web')
        self.assertEqual(res['units'][0]['answer'], 'queued')
        self.wait_running('web')
        self.ctl('stop', '--no-block', 'web')
        self.wait_state('web', lambda r: r['state'] == 'inactive', 5, 'stop --no-block did not stop it')
        # Several units: the first failure decides; bad fails (1), with its result.
        st, out, err = self.ctl('start', 'web', 'bad', '--json', check=False)
        self.assertEqual(st, 1, err)
        res = json.loads(out)
        self.assertEqual([(u['name'], u['ok']) for u in res['units']], [('web.service', True), ('bad.service', False)])
        self.assertEqual((res['error'], res['units'][1]['result']), ('failed', 'exit-code'))
        self.assertIn('exit-code', err)
        # Not found: systemctl's 5; usage 2.
        for cmd in ('start', 'stop', 'restart'):
            self.assertEqual(self.ctl(cmd, 'nosuch', check=False)[0], 5, cmd)
            self.assertEqual(self.ctl(cmd, check=False)[0], 2, cmd)
        self.assertEqual(self.ctl('start', 'web', '--main', check=False)[0], 2, '--main does not apply to start')

    def test_reload_kill_reset_failed(self):
        self.ctl('reload', 'talk')
        wait_until(lambda: self.lines(self.rl_out) == ['reloaded'], 5, 'ExecReload= did not run')
        st, _, err = self.ctl('reload', 'web', check=False)
        self.assertEqual(st, 3, 'systemctl\'s 3: reload does not apply')
        self.assertIn('no ExecReload=', err)
        self.assertEqual(self.ctl('reload', 'nosuch', check=False)[0], 5)

        pid = self.st('web')['main_pid']
        self.ctl('kill', 'web', '--signal', 'KILL', '--main')
        r = self.wait_state('web', lambda r: r['state'] in ('inactive', 'failed'), 5, 'SIGKILL did not end it')
        self.assertEqual(r['last_exit'], {'signal': 9, 'core_dumped': False})
        self.assertFalse(pid_alive(pid))
        st, _, err = self.ctl('kill', 'web', check=False)
        self.assertEqual((st, err), (0, ''), 'nothing to signal: systemctl kill succeeds, silently')
        self.assertEqual(self.ctl('kill', 'nosuch', check=False)[0], 1)
        self.assertEqual(self.ctl('kill', 'web', '--signal', 'NOPE', check=False)[0], 2)
        self.assertEqual(self.ctl('kill', 'web', 'talk', check=False)[0], 2, 'kill takes one unit')

        self.ctl('reset-failed', 'web')
        self.assertEqual(self.st('web')['state'], 'inactive')
        self.ctl('reset-failed')
        self.assertEqual((self.st('bad')['state'], self.st('bad')['result']), ('inactive', 'success'))
        self.assertEqual(self.ctl('reset-failed', 'nosuch', check=False)[0], 1)

    def test_logs(self):
        wait_until(lambda: len(self.ctl('logs', 'talk')[1].splitlines()) >= 3, 5, 'talk\'s lines never reached its ring')
        _, out, _ = self.ctl('logs', 'talk', '-n', '2')
        lines = out.splitlines()
        self.assertEqual(len(lines), 2, out)
        self.assertRegex(lines[-1], r'^\w{3} \d\d \d\d:\d\d:\d\d talk\.service\[\d+\]: three$')
        arr = [json.loads(ln) for ln in self.ctl('logs', 'talk', '--json')[1].splitlines()]
        # stdout and stderr share one pipe when they go to one target: one stream.
        self.assertEqual([(o['text'], o['stream']) for o in arr], [('one', 'stdout'), ('two', 'stdout'), ('three', 'stdout')])
        for o in arr:
            self.assertTrue({'unit', 'time', 'pid', 'stream', 'text'} <= set(o), o)
            self.assertEqual(o['unit'], 'talk.service')
        st, _, err = self.ctl('logs', 'quiet', check=False)
        self.assertEqual(st, 1)
        self.assertIn('no log ring', err)
        self.assertEqual(self.ctl('logs', 'nosuch', check=False)[0], 3)
        self.assertEqual(self.ctl('logs', check=False)[0], 2)
        self.assertEqual(self.ctl('logs', 'talk', '-n', 'x', check=False)[0], 2)
        # -f: the ring's last line, then new lines (a restart writes them
        # again). The ring is sent and the follower attached in one loop
        # iteration, so once the ring's line is read no new line can be missed.
        f = self.start([TENDCTL, '--control-socket', self.sock, 'logs', 'talk', '-f', '-n', '1'], stdin=subprocess.DEVNULL)
        self.assertTrue(f.readline(5, 'logs -f printed no ring line').endswith(': three'))
        self.ctl('restart', 'talk')
        got = [f.readline(5, 'logs -f showed no new line after a restart') for _ in range(3)]
        self.assertEqual([g.rsplit(': ', 1)[1] for g in got], ['one', 'two', 'three'])

    def test_watch(self):
        w = self.start([TENDCTL, '--control-socket', self.sock, 'watch', 'service/web', '--json'],
                       stdin=subprocess.DEVNULL)
        first = json.loads(w.readline(5, 'watch --json showed no snapshot'))
        self.assertEqual(set(first), WATCH_FIELDS)
        self.assertEqual((first['name'], first['key'], first['keyspace'], first['event'], first['state']),
                         ('web.service', 'service/web.service', 'durable', 'put', 'running'))
        self.assertEqual(first['waiters'], 0, 'the stored record of a unit whose start was answered counts no '
                                              'request (SPEC §5: requests currently sharing its flight)')
        self.ctl('stop', 'web')
        seen = []
        while not seen or seen[-1]['state'] != 'inactive':
            seen.append(json.loads(w.readline(5, 'watch did not show the stop: %r' % seen)))
        revs = [first['revision']] + [e['revision'] for e in seen]
        self.assertEqual(revs, sorted(set(revs)), 'revisions strictly increase')
        h = self.start([TENDCTL, '--control-socket', self.sock, 'watch', 'service/'], stdin=subprocess.DEVNULL)
        lines = {ln.split()[2]: ln for ln in (h.readline(5, 'human watch printed no snapshot') for _ in range(4))}
        self.assertRegex(lines['service/web.service'], r'^\d+ put +service/web\.service inactive$')
        self.assertRegex(lines['service/quiet.service'], r'^\d+ put +service/quiet\.service running pid \d+$')
        self.assertEqual(self.ctl('watch', 'a', 'b', check=False)[0], 2)
        self.assertEqual(self.ctl('watch', '--no-block', check=False)[0], 2)

    def test_usage_not_running_shutdown(self):
        for args in (('frobnicate',), (), ('status', '--frob'), ('status', '--no-block'), ('kill', 'web', '--json'),
                     ('daemon-reload', 'web'), ('shutdown', 'web'), ('logs', 'web', '-n')):
            st, _, err = self.ctl(*args, check=False)
            self.assertEqual(st, 2, '%r: %r' % (args, err))
            self.assertIn('tendctl --help', err)
        self.assertEqual(subprocess.run([TENDCTL, '--help'], capture_output=True).returncode, 0)
        res = self.ctl_json('daemon-reload')
        self.assertEqual((res['ok'], res['added'], res['changed'], res['removed'], res['units']), (True, [], [], [], []))
        self.assertEqual(self.ctl('daemon-reload'), (0, '', ''))
        pids = [self.st(n)['main_pid'] for n in ('web', 'talk')]
        self.ctl('shutdown')
        self.assertEqual(self.tend_proc.wait(10, 'tend did not exit after shutdown'), 0)
        self.assertFalse(any(pid_alive(p) for p in pids))
        st, _, err = self.ctl('status', check=False)
        self.assertEqual(st, 5, err)
        self.assertIn('not running', err)
        env = dict(os.environ)
        env.pop('TEND_SOCKET', None)
        env.pop('XDG_RUNTIME_DIR', None)
        if os.geteuid() != 0:
            p = subprocess.run([TENDCTL, 'status'], capture_output=True, env=env, timeout=10)
            self.assertEqual(p.returncode, 5)
        env['TEND_SOCKET'] = self.path('nobody-listens')
        p = subprocess.run([TENDCTL, 'status'], capture_output=True, env=env, timeout=10)
        self.assertEqual(p.returncode, 5, '$TEND_SOCKET is the socket when no option is given')


# ---------------------------------------------------------------------------
# The socket: a second tend, a stale file
# ---------------------------------------------------------------------------

class Socket(CtlTestCase):
    def test_second_tend_exits_1_already_running(self):
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        other = self.path('other-units')
        os.mkdir(other)
        p = self.start([TEND, '--config-dir', other, '--control-socket', self.sock],
                       stdin=subprocess.DEVNULL)
        self.assertEqual(p.wait(10, 'a second tend on a live socket did not exit'), 1)
        self.assertIn('already running', p.stderr_text())
        self.ctl('status', 'web')  # the first one still serves, on its own socket file
        self.assertTrue(self.tend_proc.running())

    def test_stale_socket_file_is_replaced(self):
        os.mkdir(os.path.dirname(self.sock), 0o700)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.bind(self.sock)
        s.close()  # the file stays; nobody listens
        self.assertTrue(os.path.exists(self.sock))
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        self.wait_running('web')
        self.assertIn('stale', self.stderr())
        st = os.stat(self.sock)
        self.assertEqual(st.st_mode & 0o777, 0o600)


# ---------------------------------------------------------------------------
# Single flight: 1,000 concurrent restarts, one restart (SPEC §2.3)
# ---------------------------------------------------------------------------

N_CLIENTS = 1000
N_TENDCTL = 200  # real tendctl processes among them; the rest are protocol clients
TEND_NOFILE = 8192


class Coalescing(CtlTestCase):
    def test_1000_concurrent_restarts_one_restart(self):
        soft, hard = raise_own_nofile(N_CLIENTS + 512)
        if soft < N_CLIENTS + 256:
            self.skipTest('skip: RLIMIT_NOFILE hard limit %d is too low for %d clients' % (hard, N_CLIENTS))
        if os.geteuid() != 0 and hard < TEND_NOFILE:
            self.skipTest('skip: cannot give tend a hard RLIMIT_NOFILE of %d (hard limit %d, not root)'
                          % (TEND_NOFILE, hard))
        self.fifo_unit('web')
        self.start_tend(wrap=['prlimit', '--nofile=%d:%d' % (TEND_NOFILE, TEND_NOFILE)])
        with open('/proc/%d/limits' % self.tend_pid) as f:
            line = next(ln for ln in f if ln.startswith('Max open files'))
        self.assertGreaterEqual(int(line.split()[4]), 4096, 'tend\'s hard RLIMIT_NOFILE: %s' % line)
        r = self.wait_running('web')
        before, restarts = r['main_pid'], r['restarts']

        outs = []
        procs = []
        conns = []
        try:
            for i in range(N_CLIENTS):
                if i % (N_CLIENTS // N_TENDCTL) == 0:
                    out = tempfile.TemporaryFile(mode='w+')
                    outs.append(out)
                    procs.append(subprocess.Popen([TENDCTL, '--control-socket', self.sock, 'restart', 'web', '--json'],
                                                  stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT))
                else:
                    c = Conn(self.sock, timeout=120)
                    c.send(req('restart', ['web']))
                    conns.append(c)
            self.assertEqual((len(procs), len(conns)), (N_TENDCTL, N_CLIENTS - N_TENDCTL))

            def counted():
                last = self.st('web')
                return last if last['waiters'] == N_CLIENTS else None
            r = wait_until(counted, 60, lambda: 'tend never counted %d waiters (last record %r): clients refused '
                           '(RLIMIT_NOFILE? too many clients?) or the flight ended early (ExecStop= not blocked on '
                           'its FIFO?); tend stderr %r' % (N_CLIENTS, self.st('web'), self.stderr()[-2000:]),
                           interval=0.1)
            self.assertEqual((r['state'], r['restarts']), ('stopping', restarts))
            self.release('web')

            answers = [c.result()[0] for c in conns]
            pids = set()
            for a in answers:
                self.assertTrue(a['ok'], a)
                pids.add(a['units'][0]['main_pid'])
            for p, out in zip(procs, outs):
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    raise AssertionError('a tendctl restart never got its answer')
                out.seek(0)
                text = out.read()
                self.assertEqual(p.returncode, 0, text)
                pids.add(json.loads(text)['units'][0]['main_pid'])
        finally:
            for c in conns:
                c.close()
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for out in outs:
                out.close()
        r = self.st('web')
        self.assertEqual(len(pids), 1, 'the 1,000 clients saw different outcomes: %r' % pids)
        self.assertEqual(pids, {r['main_pid']})
        self.assertNotEqual(r['main_pid'], before)
        self.assertEqual((r['state'], r['restarts'], r['waiters']), ('running', restarts + 1, 0),
                         'exactly one restart for 1,000 concurrent requests')


# ---------------------------------------------------------------------------
# Cancellation (SPEC §2.3). The After= case waits for dependencies.
# ---------------------------------------------------------------------------

class Cancellation(CtlTestCase):
    def test_stop_during_backoff_no_spawn(self):
        starts = self.path('starts')
        self.unit('slow', '''
            [Service]
            ExecStart=/bin/sh -c 'echo x >> %s; exit 1'
            Restart=on-failure
            RestartSec=1500ms
        ''' % starts)
        self.start_tend()
        r = self.wait_state('slow', lambda r: r['state'] == 'backoff', 5, 'never in backoff')
        # A client joins the restart's flight while it waits; the stop cancels it.
        waiter = self.start([TENDCTL, '--control-socket', self.sock, 'start', 'slow'], stdin=subprocess.DEVNULL)
        wait_until(lambda: self.st('slow')['waiters'] >= 2, 5, 'the client never joined the back-off flight')
        self.ctl('stop', 'slow')
        self.assertEqual(waiter.wait(5, 'the waiting start was not answered by the stop'), 1)
        self.assertIn('cancelled', waiter.stderr_text())
        self.assertEqual(self.st('slow')['state'], 'inactive')
        wait_until(lambda: time.monotonic() * 1e6 > r['since_monotonic'] + 2.5e6, 4, 'waiting past RestartSec')
        r = self.st('slow')
        self.assertEqual((r['state'], r['main_pid'], len(self.lines(starts))), ('inactive', None, 1),
                         'a stop during back-off must cancel the restart: no spawn')

    def slow_start(self, name):
        """A unit whose start waits in ExecStartPre= (a process of the unit
        runs: its flight is past the point of no return) and a client's
        `tendctl start` waiting on that flight."""
        self.unit(name, '''
            [Service]
            ExecStartPre=/bin/sleep 60
            ExecStart=%s pause
        ''' % PROBE)
        self.start_tend()
        self.wait_state(name, lambda r: r['state'] == 'starting', 5, 'the start never began')
        waiter = self.start([TENDCTL, '--control-socket', self.sock, 'start', name], stdin=subprocess.DEVNULL)
        wait_until(lambda: self.st(name)['waiters'] >= 2, 5, 'the client never joined the start\'s flight')
        return waiter

    def test_start_ended_by_the_units_removal_is_abandoned(self):
        """SPEC §2.3: a start that a reload removing the unit ends is answered
        `abandoned`, with an error naming the unit (a stop would cancel it)."""
        waiter = self.slow_start('slow')
        os.unlink(os.path.join(self.dir, 'slow.service'))
        self.ctl('daemon-reload')
        self.assertEqual(waiter.wait(10, 'the waiting start was not answered by the removal'), 1)
        self.assertIn('start of slow.service was abandoned', waiter.stderr_text())
        self.assertIn("flight 'slow.service': the work ended without an answer", self.stderr())
        self.assertIn('slow.service: its start is abandoned: its file is gone', self.stderr())

    def test_start_ended_by_shutdown_is_abandoned(self):
        waiter = self.slow_start('slow')
        self.assertEqual(self.stop_tend(), 0, self.stderr())
        self.assertEqual(waiter.wait(10, 'the waiting start was not answered by the shutdown'), 1)
        self.assertIn('start of slow.service was abandoned', waiter.stderr_text())
        self.assertIn("flight 'slow.service': the work ended without an answer", self.stderr())

    def test_shutdown_during_backoff_without_clients_is_no_error(self):
        """A restart in back-off that only tend's own restart policy waits for
        is stopped by the shutdown quietly (nobody to answer): no error."""
        self.unit('bo', '''
            [Service]
            ExecStart=/bin/false
            Restart=on-failure
            RestartSec=5s
        ''')
        self.start_tend()
        self.wait_state('bo', lambda r: r['state'] == 'backoff', 5, 'never in backoff')
        self.assertEqual(self.stop_tend(), 0, self.stderr())
        self.assertNotIn('error:', self.stderr())

    def test_stop_during_publishing_restart_ends_inactive(self):
        self.fifo_unit('web')
        self.start_tend(log_level='debug')
        before = self.wait_running('web')['main_pid']
        restart = self.start([TENDCTL, '--control-socket', self.sock, 'restart', 'web', '--json'],
                             stdin=subprocess.DEVNULL)
        # Past its point of no return: the old instance was signalled (ExecStop= runs).
        self.wait_state('web', lambda r: r['state'] == 'stopping' and r['waiters'] == 1, 5,
                        'the restart never reached ExecStop=')
        stop = self.start([TENDCTL, '--control-socket', self.sock, 'stop', 'web'], stdin=subprocess.DEVNULL)
        # No state changes when a stop is queued: tend's debug log says the request arrived.
        seen = 'client pid %d (uid %d): stop' % (stop.pid, os.geteuid())
        wait_until(lambda: seen in self.stderr(), 5, 'tend never logged the stop request (%r)' % seen)
        self.release('web')
        self.assertEqual(stop.wait(10, 'the stop never completed'), 0, stop.stderr_text())
        self.assertEqual(restart.wait(10, 'the restart was never answered'), 0, restart.stderr_text())
        res = json.loads(restart.read_until_eof(5, 'no --json output'))
        new = res['units'][0]['main_pid']
        r = self.st('web')
        self.assertEqual((r['state'], r['main_pid']), ('inactive', None), 'the queued stop must apply')
        self.assertNotEqual(new, before, 'the restart completed (SPEC §2.3), then the stop applied')
        self.assertFalse(pid_alive(new))
        self.assertFalse(pid_alive(before))
        self.assertNotIn('abandoned', self.stderr())


# ---------------------------------------------------------------------------
# watch (SPEC §5, §2.4)
# ---------------------------------------------------------------------------

RESTARTS = 50


class Watch(CtlTestCase):
    def watcher(self, prefix='service/'):
        return self.start([TENDCTL, '--control-socket', self.sock, 'watch', prefix, '--json'], stdin=subprocess.DEVNULL)

    def restarter(self, *units, n=RESTARTS):
        """Another process: `tendctl restart UNITS` n times, one after the other."""
        cmd = 'i=0; while [ $i -lt %d ]; do "$0" --control-socket "$1" restart %s || exit 1; i=$((i+1)); done' % (
            n, ' '.join(units))
        return self.start(['sh', '-c', cmd, TENDCTL, self.sock], stdin=subprocess.DEVNULL)

    def test_50_restarts_every_transition_once(self):
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        r0 = self.wait_running('web')
        w = self.watcher('service/web.service')
        snap = json.loads(w.readline(5, 'no snapshot'))
        self.assertEqual(snap['restarts'], r0['restarts'])

        def read_until(restarts):
            # A restart ends with the record of its answered flight: running,
            # no request sharing a flight any more.
            evs = []
            while not (evs and evs[-1]['restarts'] == restarts and evs[-1]['state'] == 'running' and
                       evs[-1]['waiters'] == 0):
                evs.append(json.loads(w.readline(10, 'watch stopped short of restart %d: %r' % (restarts, evs[-5:]))))
            return evs
        # One restart: the transitions it makes.
        self.ctl('restart', 'web')
        one = read_until(r0['restarts'] + 1)
        per_restart = [e['state'] for e in one]
        self.assertEqual(per_restart[0], 'stopping')
        self.assertIn('starting', per_restart)

        p = self.restarter('web')
        self.assertEqual(p.wait(120, 'the restart loop did not finish'), 0, p.stderr_text())
        evs = read_until(r0['restarts'] + 1 + RESTARTS)
        revs = [snap['revision']] + [e['revision'] for e in one + evs]
        self.assertEqual(revs, sorted(set(revs)), 'every revision once, strictly increasing')
        self.assertEqual(len(evs), RESTARTS * len(per_restart),
                         'the count must equal %d x the %d transitions of one restart' % (RESTARTS, len(per_restart)))
        self.assertEqual([e['state'] for e in evs], per_restart * RESTARTS)
        for e in evs:
            self.assertEqual(set(e), WATCH_FIELDS)
        self.assertNotIn('fell behind', self.stderr())

    def test_small_watch_queue_rewatches_without_gap(self):
        # TEND_WATCH_QUEUE=4 (docs/tend.8.md, a test knob): a restart of five
        # units in one request writes ten records in one loop iteration, more
        # than the watch queue holds, so the watch lags and tendctl re-watches.
        names = ['web', 'a', 'b', 'c', 'd']
        for n in names:
            self.unit(n, '[Service]\nExecStart=%s pause' % PROBE)
        env = dict(os.environ, TEND_WATCH_QUEUE='4')
        self.start_tend(env=env)
        for n in names:
            self.wait_running(n)
        w = self.watcher()
        shown = {}
        for _ in names:
            e = json.loads(w.readline(5, 'no snapshot'))
            shown.setdefault(e['key'], []).append(e)
        # A burst no timing can spread: a reload adding five units writes
        # fifteen records (loaded, starting, running) in one loop iteration.
        extra = ['e1', 'e2', 'e3', 'e4', 'e5']
        for n in extra:
            self.unit(n, '[Service]\nExecStart=%s pause' % PROBE)
        self.ctl('daemon-reload')
        p = self.restarter(*names)
        self.assertEqual(p.wait(120, 'the restart loop did not finish'), 0, p.stderr_text())
        final = self.statuses()
        self.assertTrue(all(final[n + '.service']['restarts'] == RESTARTS for n in names), final)
        self.assertTrue(all(r['state'] == 'running' for r in final.values()), final)

        def caught_up():
            for n, r in final.items():
                evs = shown.get('service/' + n, [])
                if not evs or (evs[-1]['main_pid'], evs[-1]['restarts']) != (r['main_pid'], r['restarts']):
                    return False
            return True
        while not caught_up():
            e = json.loads(w.readline(15, lambda: 'watch never showed the final state of every unit (a gap): %r'
                                      % {k: (v[-1]['state'], v[-1]['restarts']) for k, v in shown.items()}))
            shown.setdefault(e['key'], []).append(e)
        self.assertIn('fell behind its watch', self.stderr(), 'TEND_WATCH_QUEUE=4 must force a re-watch')
        for key, evs in shown.items():
            revs = [e['revision'] for e in evs]
            self.assertEqual(revs, sorted(set(revs)), '%s: a duplicate or a step back after the re-watch' % key)
            restarts = [e['restarts'] for e in evs]
            self.assertEqual(restarts, sorted(restarts), key)


# ---------------------------------------------------------------------------
# Robustness: silent clients, bad messages (SPEC §7)
# ---------------------------------------------------------------------------

class Robustness(CtlTestCase):
    def test_client_that_never_reads_delays_nobody(self):
        # Bursts of 2,000 lines of 200 bytes: more than a follower's queue holds.
        chatty = self.script('chatty.sh', '''
            line=$(printf '%0200d' 0)
            while :; do
                i=0; while [ $i -lt 2000 ]; do echo "$line"; i=$((i+1)); done
                sleep 0.2
            done
        ''')
        self.unit('chatty', '[Service]\nExecStart=%s' % chatty)
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        self.wait_running('web')
        silent = []
        for r in (req('logs', ['chatty'], follow=True), req('watch', prefix=''), req('status')):
            c = self.conn()
            c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.send(r)
            silent.append(c)  # never read
        idle = self.conn()  # connects and sends nothing
        worst = 0
        for _ in range(30):
            t = time.monotonic()
            self.ctl('restart', 'web', timeout=5)
            self.ctl('status', timeout=5)
            worst = max(worst, time.monotonic() - t)
        self.assertLess(worst, 2.0, 'a restart + status took %.2fs while clients did not read' % worst)
        self.assertTrue(self.tend_proc.running())
        idle.send(req('status', ['web']))
        self.assertTrue(idle.result()[0]['ok'])
        # The follower that did not read was dropped with a note: its stream
        # ends (what it had queued first), its connection stays usable.
        res, msgs = silent[0].result()
        self.assertEqual(res['error'], 'stream-ended')
        self.assertTrue(any(m.get('note') for m in msgs), 'no note said the follower was dropped')

    def test_garbage_truncated_oversized(self):
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        self.wait_running('web')
        c = self.conn()
        cases = [
            (b'garbage', 'bad-request'),
            (b'\x00\xff\xfe', 'bad-request'),
            (b'{"version":1,"command":', 'bad-request'),              # truncated
            (b'{"version":1,"command":"status"}\x00', 'bad-request'),  # trailing NUL
            (b'[1,2]', 'bad-request'),
            (b'{"version":1,"command":"frobnicate"}', 'bad-request'),
            (b'{"version":1,"command":"start","units":[1]}', 'bad-request'),
            (b'{"version":1,"command":"kill","units":["web"],"signal":65}', 'bad-request'),
            (b'{"version":2,"command":"list"}', 'unsupported-version'),
            (b'{"version":1,"command":"list"}' + b' ' * (64 * 1024), 'too-large'),  # 64 KiB + 30
        ]
        for data, error in cases:
            c.send(data)
            res, extra = c.result()
            self.assertEqual((res['ok'], res['error'], extra), (False, error, []), data[:60])
            self.assertTrue(res['message'])
        # The connection stays open (docs/control-protocol.md) and tend serves it and others.
        self.assertTrue(c.ask(req('status', ['web']))['ok'])
        self.ctl('status', 'web')
        self.assertTrue(self.st('web')['state'] == 'running')
        # A stream socket is the wrong type: refused by the kernel, tend unaffected.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with self.assertRaises(OSError):
            s.connect(self.sock)
        s.close()
        # An empty message reads as the client's end (recv() cannot tell them
        # apart on SOCK_SEQPACKET): tend closes that connection.
        e = self.conn()
        e.send(b'')
        self.assertEqual(e.s.recv(MSG_MAX), b'')
        # A client that sends half a request and leaves.
        d = Conn(self.sock)
        d.s.send(b'{"version":1,')
        d.close()
        self.ctl('status', 'web')
        self.assertTrue(self.tend_proc.running())

    def test_names_with_nul_or_not_utf8_are_refused(self):
        """Issue 19: a unit name with a NUL inside acted on the name before the
        NUL (`stop "web\\u0000evil"` stopped web); bytes that are not UTF-8
        were echoed raw into the answer, which strict JSON parsers reject.
        Both are refused, and every answer is UTF-8 JSON."""
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        pid = self.wait_running('web')['main_pid']
        c = self.conn()
        for data in (b'{"version":1,"command":"stop","units":["web\\u0000evil"]}',
                     b'{"version":1,"command":"stop","units":["web.service\\u0000"]}',
                     b'{"version":1,"command":"stop\\u0000x","units":["web"]}',
                     b'{"version":1,"command":"status","units":["\xff\xfeweb"]}',
                     b'{"version":1,"command":"stop","units":["web\xc0\xae"]}'):
            c.s.send(data)
            raw = c.s.recv(MSG_MAX)
            res = json.loads(raw.decode('utf-8', errors='strict'))  # UnicodeDecodeError: not UTF-8
            self.assertEqual((res['type'], res['ok'], res['error']), ('result', False, 'bad-request'), data)
        r = self.st('web')
        self.assertEqual((r['state'], r['main_pid']), ('running', pid), 'a refused name acted on a unit')

    def test_names_outside_the_unit_name_characters_are_refused(self):
        """Issue 19: a name with characters systemd's unit names do not have
        (a space, "/", "*", a non-ASCII letter) is refused with the reason,
        as at load: it is never looked up (it was answered "not found")."""
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        pid = self.wait_running('web')['main_pid']
        c = self.conn()
        for name in ('web service', 'web/..', 'w*b', 'w\u00e9b.service', '', 'web\u00e9' * 40):
            c.s.send(json.dumps({'version': 1, 'command': 'stop', 'units': [name]}).encode())
            raw = c.s.recv(MSG_MAX)
            res = json.loads(raw.decode('utf-8', errors='strict'))
            self.assertEqual((res['type'], res['ok'], res['error']), ('result', False, 'bad-request'), (name, res))
            self.assertIn('invalid unit name', res['message'], res)
        st, out, err = self.ctl('status', 'a b', check=False)
        self.assertNotEqual(st, 0)
        self.assertEqual(out, '', 'tendctl printed on stdout for a refused request')
        self.assertIn('invalid unit name', err)
        r = self.st('web')
        self.assertEqual((r['state'], r['main_pid']), ('running', pid), 'a refused name acted on a unit')
        # the valid forms still work: with and without the suffix, an instance
        self.assertEqual(self.ctl('status', 'web.service', check=False)[0], 0)


# ---------------------------------------------------------------------------
# daemon-reload: the difference rules (SPEC §5)
# ---------------------------------------------------------------------------

class DaemonReload(CtlTestCase):
    def setup_five(self):
        self.unit('keep', '[Service]\nExecStart=/bin/sleep 1000')
        self.unit('change', '[Service]\nExecStart=/bin/sleep 1001')
        gone = self.unit('gone', '[Service]\nExecStart=/bin/sleep 1002')
        self.unit('broken', '[Service]\nExecStart=/bin/sleep 1003')
        self.start_tend()
        pids = {n: self.wait_running(n)['main_pid'] for n in ('keep', 'change', 'gone', 'broken')}
        self.unit('change', '[Service]\nExecStart=/bin/sleep 1011')
        os.unlink(gone)
        self.unit('broken', '[Service]\nExecStart=/bin/sleep 1003\nRestart=sometimes')
        self.unit('added', '[Service]\nExecStart=/bin/sleep 1004')
        return pids

    def cmdline(self, pid):
        wait_exec(pid)  # running at the fork: before its exec the cmdline is tend's
        with open('/proc/%d/cmdline' % pid) as f:
            return f.read().split('\0')[:2]

    def check_five(self, pids):
        self.wait_running('added')
        # tend(8) "RELOADING DIR": a changed unit is never restarted by a reload.
        r = self.st('change')
        self.assertEqual((r['state'], r['main_pid'], r['restarts']), ('running', pids['change'], 0),
                         'a changed running unit is not restarted')
        self.assertEqual(self.cmdline(r['main_pid']), ['/bin/sleep', '1001'], 'its process runs on as it started')
        self.assertIs(r['file_changed'], True, 'its record says its file changed since it started')
        wait_until(lambda: not pid_alive(pids['gone']), 5, 'the removed unit was not stopped')
        wait_until(lambda: 'gone.service' not in self.statuses(), 5, 'the removed unit is still listed once dead')
        self.assertEqual(self.ctl('status', 'gone', check=False)[0], 4, 'its record is deleted (systemctl: 4, no such unit)')
        if self.cgroup:
            wait_until(lambda: not os.path.exists(os.path.join(self.cgroup, 'gone.service')), 5,
                       'the removed unit\'s cgroup was not removed')
            self.assertTrue(os.path.isdir(os.path.join(self.cgroup, 'keep.service')))
        recs = self.statuses()
        self.assertEqual((recs['keep.service']['main_pid'], recs['keep.service']['restarts'],
                          recs['keep.service']['file_changed'], recs['keep.service']['file_error']),
                         (pids['keep'], 0, False, None), 'an unchanged unit is not touched')
        self.assertEqual((recs['broken.service']['state'], recs['broken.service']['main_pid']),
                         ('running', pids['broken']), 'a bad file leaves its running unit as it was')
        self.assertRegex(recs['broken.service']['file_error'] or '', r'broken\.service:3: Restart=: invalid value',
                         'its record says why its file does not load')
        self.assertEqual(sorted(recs), ['added.service', 'broken.service', 'change.service', 'keep.service'])
        self.assertRegex(self.stderr(), r'broken\.service:3: Restart=: invalid value "sometimes"')
        out = self.ctl('status', 'broken')[1]
        self.assertRegex(out, r'Warning: its unit file no longer loads \(.*broken\.service:3: Restart=: invalid value')
        out = self.ctl('status', 'change')[1]
        self.assertIn('Warning: the unit file changed since the unit started; `tendctl restart change.service` '
                      'applies it', out)
        # tendctl restart applies the new file: its new command runs.
        self.ctl('restart', 'change')
        r = self.wait_running('change', other_than=pids['change'])
        self.assertEqual(self.cmdline(r['main_pid']), ['/bin/sleep', '1011'], 'the restart runs the new file')
        self.assertIs(self.st('change')['file_changed'], False, 'once restarted, it runs its file')
        self.assertNotIn('Warning', self.ctl('status', 'change')[1])
        self.assertFalse(pid_alive(pids['change']))

    def test_added_changed_removed_untouched_broken(self):
        pids = self.setup_five()
        st, out, err = self.ctl('daemon-reload', '--json', check=False)
        self.assertEqual(st, 1, 'a file that does not load fails daemon-reload: %r' % err)
        res = json.loads(out)
        self.assertEqual((res['added'], res['changed'], res['removed']),
                         (['added.service'], ['change.service'], ['gone.service']))
        self.assertEqual([(u['name'], u['ok'], u['error']) for u in res['units']], [('broken.service', False, 'failed')])
        self.assertRegex(res['message'], r'broken\.service: .*broken\.service:3: Restart=: invalid value')
        self.assertRegex(err, r'broken\.service:3: Restart=: invalid value "sometimes"', 'tendctl says why')
        self.check_five(pids)
        # Nothing changed since: a second reload touches nothing.
        before = {n: (r['main_pid'], r['restarts']) for n, r in self.statuses().items()}
        self.assertEqual(self.ctl('daemon-reload', check=False)[0], 1)
        self.assertEqual({n: (r['main_pid'], r['restarts']) for n, r in self.statuses().items()}, before)
        # The file fixed: the unit takes it, still without a restart.
        self.unit('broken', '[Service]\nExecStart=/bin/sleep 1013')
        res = self.ctl_json('daemon-reload')
        self.assertEqual((res['ok'], res['changed']), (True, ['broken.service']))
        r = self.st('broken')
        self.assertEqual((r['main_pid'], r['file_error'], r['file_changed']), (pids['broken'], None, True))

    def test_sighup_applies_the_same_rules(self):
        pids = self.setup_five()
        os.kill(self.tend_pid, signal.SIGHUP)
        self.check_five(pids)

    def test_template_instances(self):
        self.unit('inst@', '[Service]\nExecStart=/bin/sleep 1020')
        self.unit('other', '[Service]\nExecStart=/bin/sleep 1021')
        self.start_tend()
        self.ctl('start', 'inst@x')
        pid = self.wait_running('inst@x')['main_pid']
        res = self.ctl_json('daemon-reload')
        self.assertEqual((res['added'], res['changed'], res['removed']), ([], [], []),
                         'an instance of an unchanged template is untouched')
        self.assertEqual(self.st('inst@x')['main_pid'], pid)
        self.unit('inst@', '[Service]\nExecStart=/bin/sleep 1022')
        res = self.ctl_json('daemon-reload')
        self.assertEqual(res['changed'], ['inst@x.service'], 'its template\'s text counts')
        r = self.st('inst@x')
        self.assertEqual((r['main_pid'], r['file_changed']), (pid, True), 'changed, not restarted')
        os.unlink(os.path.join(self.dir, 'inst@.service'))
        res = self.ctl_json('daemon-reload')
        self.assertEqual(res['removed'], ['inst@x.service'])
        wait_until(lambda: 'inst@x.service' not in self.statuses(), 5, 'the instance was not removed')

    def test_restarts_keep_the_environment_of_the_file_they_run(self):
        """A main process's environment is kept between its restarts (manager.c
        op_spawn): the process running at a reload keeps its own, the restart
        after the reload gets the new file's, and the restarts after that the
        new one too."""
        def environ(pid):
            # Type=simple is running at the fork: before its exec (and inside
            # it) the child's environ is tend's or empty (seen under load).
            wait_exec(pid)
            with open('/proc/%d/environ' % pid) as f:
                got = [e for e in f.read().split('\0') if e.startswith('GREETING=')]
            if not got:  # a process that exits has no environ left: say what tend did
                print('pid %d: no GREETING=; status %r; tend said:\n%s'
                      % (pid, self.st('envy'), self.stderr()[-3000:]), file=sys.stderr)
            return got

        self.unit('envy', '[Service]\nEnvironment=GREETING=one\nExecStart=/bin/sleep 1040\nRestart=always\n'
                          'RestartSec=0\n')
        self.start_tend()
        pid = self.wait_running('envy')['main_pid']
        self.assertEqual(environ(pid), ['GREETING=one'])
        os.kill(pid, signal.SIGKILL)
        pid = self.wait_running('envy', other_than=pid)['main_pid']
        self.assertEqual(environ(pid), ['GREETING=one'], 'an automatic restart gets the same environment')
        self.unit('envy', '[Service]\nEnvironment=GREETING=two\nExecStart=/bin/sleep 1040\nRestart=always\n'
                          'RestartSec=0\n')
        self.assertEqual(self.ctl_json('daemon-reload')['changed'], ['envy.service'])
        self.assertEqual(self.st('envy')['main_pid'], pid, 'a reload restarts nothing')
        self.assertEqual(environ(pid), ['GREETING=one'], 'the running process keeps what it got')
        os.kill(pid, signal.SIGKILL)
        pid = self.wait_running('envy', other_than=pid)['main_pid']
        self.assertEqual(environ(pid), ['GREETING=two'], 'the changed file\'s environment, not the kept one')
        os.kill(pid, signal.SIGKILL)
        pid = self.wait_running('envy', other_than=pid)['main_pid']
        self.assertEqual(environ(pid), ['GREETING=two'], 'and at the restarts after it')

    def test_stopped_unit_takes_new_file_at_next_start(self):
        self.unit('web', '[Service]\nExecStart=/bin/sleep 1030')
        self.start_tend()
        self.wait_running('web')
        self.ctl('stop', 'web')
        self.unit('web', '[Service]\nExecStart=/bin/sleep 1031')
        self.assertEqual(self.ctl_json('daemon-reload')['changed'], ['web.service'])
        self.assertEqual(self.st('web')['state'], 'inactive', 'a stopped unit is not started by a reload')
        self.ctl('start', 'web')
        pid = self.st('web')['main_pid']
        wait_exec(pid)  # the start is answered at the fork: before its exec the cmdline is tend's
        with open('/proc/%d/cmdline' % pid) as f:
            self.assertEqual(f.read().split('\0')[1], '1031')


    def test_changed_restart_policy_applies_at_once(self):
        """Issue 16: Restart=always → no keeps the pid, and the new policy
        governs the next exit: killed, the unit stays failed."""
        self.unit('db', '[Service]\nExecStart=/bin/sleep 1050\nRestart=always\nRestartSec=0')
        self.start_tend()
        pid = self.wait_running('db')['main_pid']
        self.unit('db', '[Service]\nExecStart=/bin/sleep 1050\nRestart=no\nRestartSec=0')
        self.assertEqual(self.ctl_json('daemon-reload')['changed'], ['db.service'])
        r = self.st('db')
        self.assertEqual((r['state'], r['main_pid'], r['restarts']), ('running', pid, 0), 'a reload restarted it')
        self.assertTrue(pid_alive(pid))
        kill_pid(pid)
        r = self.wait_state('db', lambda r: r['state'] in ('failed', 'inactive') or r['main_pid'] not in (None, pid),
                            5, 'the killed unit never settled')
        self.assertEqual((r['state'], r['result'], r['main_pid'], r['restarts']), ('failed', 'signal', None, 0),
                         'Restart=no (the new file) must leave it failed, not restarted')

    def test_changed_exec_start_applies_at_restart(self):
        """ExecStart= changed: the running process stays (same pid, same
        command), status says the file changed, and `tendctl restart` runs the
        new command."""
        self.unit('web', '[Service]\nExecStart=/bin/sleep 1060')
        self.start_tend()
        pid = self.wait_running('web')['main_pid']
        self.unit('web', '[Service]\nExecStart=/bin/sleep 1061')
        self.assertEqual(self.ctl_json('daemon-reload')['changed'], ['web.service'])
        r = self.st('web')
        self.assertEqual((r['main_pid'], r['restarts'], r['file_changed']), (pid, 0, True))
        self.assertEqual(self.cmdline(pid), ['/bin/sleep', '1060'])
        self.assertIn('the unit file changed since the unit started', self.ctl('status', 'web')[1])
        self.ctl('restart', 'web')
        r = self.wait_running('web', other_than=pid)
        self.assertEqual(self.cmdline(r['main_pid']), ['/bin/sleep', '1061'], 'the restart runs the new ExecStart=')
        self.assertIs(r['file_changed'], False)

    def test_changed_restart_sec_governs_the_next_backoff(self):
        """RestartSec= changed while running governs the next back-off; a unit
        already in back-off keeps its delay but restarts with its new file."""
        self.unit('b', '[Service]\nExecStart=/bin/sleep 1070\nRestart=always\nRestartSec=1h')
        self.start_tend()
        pid = self.wait_running('b')['main_pid']
        self.unit('b', '[Service]\nExecStart=/bin/sleep 1071\nRestart=always\nRestartSec=100ms')
        self.ctl('daemon-reload')
        self.assertEqual(self.st('b')['main_pid'], pid, 'a reload restarted it')
        kill_pid(pid)
        r = self.wait_running('b', other_than=pid, timeout=5)  # with RestartSec=1h (the old file) it would wait
        self.assertEqual(self.cmdline(r['main_pid']), ['/bin/sleep', '1071'])
        # In back-off (3 s): the reload gives it RestartSec=1h and a new
        # command; the back-off under way keeps its delay, the start runs 1072.
        self.unit('b', '[Service]\nExecStart=/bin/sleep 1071\nRestart=always\nRestartSec=3')
        self.ctl('daemon-reload')
        pid = r['main_pid']
        kill_pid(pid)
        self.wait_state('b', lambda r: r['state'] == 'backoff', 5, 'not in back-off after its kill')
        self.unit('b', '[Service]\nExecStart=/bin/sleep 1072\nRestart=always\nRestartSec=1h')
        self.ctl('daemon-reload')
        r = self.wait_running('b', other_than=pid, timeout=15)
        self.assertEqual(self.cmdline(r['main_pid']), ['/bin/sleep', '1072'], 'the back-off restarts with the new file')

# ---------------------------------------------------------------------------
# ctl (issue 18): systemctl's verbs, status as an operator reads it, logs filters
# ---------------------------------------------------------------------------

class SystemctlVerbs(CtlTestCase):
    def setUp(self):
        super().setUp()
        self.unit('web', '[Unit]\nDescription=the web server\n[Service]\n'
                  'ExecStart=/bin/sh -c \'echo "<3>an error"; echo "<6>info one"; echo plain; %s pause & exec %s pause\'\n'
                  'ExecReload=/bin/true\n' % (PROBE, PROBE))
        os.mkdir(os.path.join(self.dir, 'web.service.d'))
        with open(os.path.join(self.dir, 'web.service.d', 'env.conf'), 'w') as f:
            f.write('[Service]\nEnvironment=A=1\n')
        self.unit('db', '[Unit]\nRequires=web.service\nWants=cache.service\n[Service]\nExecStart=%s pause\n' % PROBE)
        self.unit('bad', '[Service]\nType=oneshot\nExecStart=/bin/sh -c "exit 7"\n')
        self.unit('once', '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n')
        self.start_tend()
        self.wait_running('web')
        self.wait_running('db')
        self.wait_state('bad', lambda r: r['state'] == 'failed', 5, 'bad never failed')
        # three lines, then child-probe's "ready PID" of each of its two processes
        wait_until(lambda: len(self.ctl('logs', 'web')[1].splitlines()) >= 5, 5, 'web\'s lines never reached its ring')

    def test_status_display(self):
        st, out, err = self.ctl('status', 'web', check=False)
        self.assertEqual(st, 0, err)
        pid = self.st('web')['main_pid']
        self.assertIn('● web.service - the web server', out)
        self.assertIn('Loaded: loaded (%s/web.service; enabled)' % self.dir, out)
        self.assertIn('Drop-In: %s/web.service.d/env.conf' % self.dir, out)
        self.assertRegex(out, r'Active: active \(running\) since \w{3} \d{4}-\d\d-\d\d')
        self.assertIn('tend: running, restarts 0, result success', out)
        self.assertIn('Main PID: %d (child-probe)' % pid, out)
        if self.cgroup:
            self.assertIn('CGroup: ', out)
            self.assertRegex(out, r'[├└]─%d .*child-probe pause' % pid)
            self.assertEqual(len(re.findall(r'[├└]─\d+ .*child-probe pause', out)), 2, 'both processes listed')
            self.assertRegex(out, r'CPU: \d+\.\d{3}s')
        self.assertRegex(out, r'\n\n.* web\.service\[\d+\]: an error\n(.* web\.service\[\d+\]: .*\n){4}$',
                         'the last log lines close the display')
        st, out, _ = self.ctl('status', 'web', '-n', '1', check=False)
        self.assertEqual(len([ln for ln in out.splitlines() if 'web.service[' in ln]), 1, out)
        st, out, _ = self.ctl('status', 'web', '-n', '0', check=False)
        self.assertNotIn('web.service[', out)
        st, out, _ = self.ctl('status', 'bad', check=False)
        self.assertEqual(st, 3)
        self.assertIn('Active: failed (failed)', out)
        self.assertIn('Last exit: code=exited, status=7', out)
        self.assertRegex(out, r'Failed: result exit-code at \w{3} \d{4}')
        st, out, _ = self.ctl('status', 'once', check=False)
        self.assertEqual(st, 0, 'a RemainAfterExit= oneshot is active')
        self.assertIn('Active: active (exited)', out)

    def test_show_is_cat(self):
        self.assertEqual(self.ctl('show', 'web', '-p', 'ActiveState', '--value')[1], 'active\n')
        self.assertEqual(self.ctl('show', 'web', '-p', 'SubState,Description', '-p', 'CanReload')[1],
                         'SubState=running\nDescription=the web server\nCanReload=yes\n')
        self.assertEqual(self.ctl('show', 'once', '-p', 'SubState', '--value')[1], 'exited\n')
        self.assertEqual(self.ctl('show', 'bad', '-p', 'Result,ExecMainCode,ExecMainStatus', '--value')[1],
                         'exit-code\n1\n7\n')
        props = json.loads(self.ctl('show', 'web', 'nosuch', '-o', 'json')[1])
        self.assertEqual((props[0]['MainPID'], props[1]['LoadState']), (self.st('web')['main_pid'], 'not-found'))
        self.assertEqual(props[0]['DropInPaths'], [os.path.join(self.dir, 'web.service.d', 'env.conf')])
        self.assertEqual(self.ctl('is-active', 'web', 'bad', check=False)[:2], (0, 'active\nfailed\n'))
        self.assertEqual(self.ctl('is-active', 'bad', 'nosuch', check=False)[:2], (3, 'failed\ninactive\n'))
        self.assertEqual(self.ctl('is-active', '-q', 'bad', check=False)[:2], (3, ''))
        self.assertEqual(self.ctl('is-failed', 'bad', check=False)[0], 0)
        self.assertEqual(self.ctl('is-failed', 'web', check=False)[0], 1)
        self.assertEqual(self.ctl('is-enabled', 'web', check=False)[:2], (0, 'enabled\n'))
        self.assertEqual(self.ctl('is-enabled', 'nosuch', check=False)[0], 1)
        out = self.ctl('cat', 'web', '--no-pager')[1]
        self.assertTrue(out.startswith('# %s/web.service\n[Unit]\nDescription=the web server\n' % self.dir), out)
        self.assertIn('\n\n# %s/web.service.d/env.conf\n[Service]\nEnvironment=A=1\n' % self.dir, out)
        st, out, err = self.ctl('cat', 'nosuch', check=False)
        self.assertEqual((st, out), (1, ''))
        self.assertIn('No files found for nosuch.service.', err)
        self.assertEqual(self.ctl('list-dependencies', 'db')[1], 'db.service\n● ├─web.service\n● └─cache.service\n')
        units = self.ctl('list-units', '--no-pager')[1].splitlines()
        self.assertEqual((units[0], units[-1]), (self.ctl('list')[1].splitlines()[0], '4 units listed.'))

    def test_try_restart_reload_or_restart(self):
        web, db = self.st('web')['main_pid'], self.st('db')['main_pid']
        self.ctl('stop', 'db')
        self.assertEqual(self.ctl('try-restart', 'web', 'db', check=False)[0], 0)
        self.wait_running('web', other_than=web)
        self.assertEqual(self.st('db')['state'], 'inactive', 'try-restart leaves a unit that is not active alone')
        self.assertEqual(self.ctl('try-restart', 'nosuch', check=False)[0], 5)
        web = self.st('web')['main_pid']
        self.assertEqual(self.ctl('reload-or-restart', 'web', 'db', check=False)[0], 0)
        self.assertEqual(self.st('web')['main_pid'], web, 'web has ExecReload=: reloaded, not restarted')
        self.assertNotEqual(self.wait_running('db')['main_pid'], db, 'db was not running: started')
        self.assertEqual(self.ctl('reload-or-restart', 'nosuch', check=False)[0], 5)

    def test_logs_since_priority(self):
        self.assertEqual([ln.split(': ', 1)[1] for ln in self.ctl('logs', 'web', '-p', 'err')[1].splitlines()],
                         ['an error'])
        self.assertEqual([ln.split(': ', 1)[1] for ln in self.ctl('logs', 'web', '-p', '3', '-n', '5')[1].splitlines()],
                         ['an error'], '-n counts the lines selected')
        arr = [json.loads(ln) for ln in self.ctl('logs', 'web', '--json')[1].splitlines()]
        self.assertEqual([(o['text'], o['priority']) for o in arr][:3], [('an error', 3), ('info one', 6), ('plain', 6)])
        self.assertEqual(self.ctl('logs', 'web', '--since', '-1h')[1].count('\n'), 5)
        self.assertEqual(self.ctl('logs', 'web', '--since', '+1h', check=False)[0], 2)
        time.sleep(1.1)  # --since takes whole seconds: the lines are at least a second old now
        self.assertEqual(self.ctl('logs', 'web', '--since', 'now')[1], '')
        self.assertEqual(self.ctl('logs', 'web', '-p', 'nope', check=False)[0], 2)
        self.assertEqual(self.ctl('show', 'web', '--since', 'now', check=False)[0], 2)


# ---------------------------------------------------------------------------
# Bash completion
# ---------------------------------------------------------------------------

class Completion(CtlTestCase):
    def complete(self, *words):
        """COMPREPLY for the command line `tendctl WORDS` (the last word being completed)."""
        script = ('source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tendctl; '
                  'printf "%s\\n" "${COMPREPLY[@]}"')
        env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(TENDCTL)) + ':' + os.environ.get('PATH', ''))
        p = subprocess.run(['bash', '--norc', '-c', script, COMPLETION, 'tendctl'] + list(words),
                           capture_output=True, text=True, timeout=20, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return sorted(x for x in p.stdout.splitlines() if x)

    def test_commands_options_units(self):
        if not os.path.exists(COMPLETION):
            self.skipTest('skip: %s not found' % COMPLETION)
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.unit('worker', '[Service]\nExecStart=%s pause' % PROBE)
        self.unit('db', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        self.assertEqual(self.complete('st'), ['start', 'status', 'stop'])
        self.assertEqual(self.complete('daemon'), ['daemon-reexec', 'daemon-reload'])
        self.assertEqual(self.complete('--control-s'), ['--control-socket'])
        s = ['--control-socket', self.sock]
        self.assertEqual(self.complete(*s, 'restart', 'w'), ['web', 'worker'])
        self.assertEqual(self.complete(*s, 'status', 'web', ''), ['db', 'web', 'worker'])
        self.assertEqual(self.complete(*s, 'kill', 'web', '--'), ['--control-socket', '--main', '--signal'])
        self.assertEqual(self.complete(*s, 'kill', 'web', '--signal', 'KI'), ['KILL'])
        self.assertEqual(self.complete(*s, 'list', ''), [])
        self.assertEqual(self.complete(*s, 'logs', 'web', '-'),
                         ['--control-socket', '--follow', '--json', '--lines', '--priority', '--since'])
        # ctl (issue 18): systemctl's verbs
        self.assertEqual(self.complete('is-'), ['is-active', 'is-enabled', 'is-failed'])
        self.assertEqual(self.complete('list'), ['list', 'list-dependencies', 'list-units'])
        self.assertEqual(self.complete('re'), ['reload', 'reload-or-restart', 'reset-failed', 'restart'])
        self.assertEqual(self.complete('try'), ['try-restart'])
        self.assertEqual(self.complete('ca'), ['cat'])
        self.assertEqual(self.complete(*s, 'is-active', 'w'), ['web', 'worker'])
        self.assertEqual(self.complete(*s, 'show', 'web', '--v'), ['--value'])
        self.assertEqual(self.complete(*s, 'show', 'web', '--property', 'ActiveS'), ['ActiveState'])
        # pkg (issue 18): enable/disable
        self.assertEqual(self.complete('dis'), ['disable'])
        self.assertEqual(self.complete(*s, 'enable', 'w'), ['web', 'worker'])
        self.assertEqual(self.complete(*s, 'disable', 'web', '--n'), ['--now'])
        self.assertEqual(self.complete(*s, 'logs', 'web', '-p', 'er'), ['err'])



# ---------------------------------------------------------------------------
# Bytes that are not UTF-8 (SPEC §5, docs/control-protocol.md; issue 19)
# ---------------------------------------------------------------------------

def strict_json(data):
    """json.loads of bytes that must be strict UTF-8 (no lone surrogates either)."""
    text = data.decode('utf-8', errors='strict')
    text.encode('utf-8', errors='strict')
    return json.loads(text)


class NotUtf8(CtlTestCase):
    # Latin-1 "café \x41", a valid "€", an encoded surrogate, a cut "€", a
    # backslash, and a last line that is valid UTF-8 with a backslash.
    LINES = [b'caf\xe9 \\x41 \xe2\x82\xac', b'\xed\xa0\x80 \xe2\x82', b'\xff\\', b'ok \xc3\xa9 \\x41']

    def setUp(self):
        super().setUp()
        script = self.path('latin1.py')
        with open(script, 'w') as f:
            f.write('import sys\nfor ln in %r:\n    sys.stdout.buffer.write(ln + b"\\n")\n'
                    'sys.stdout.flush()\nimport time\ntime.sleep(3600)\n' % (self.LINES,))
        self.unit('latin', '[Service]\nExecStart=%s %s\n' % (sys.executable, script))
        self.start_tend()
        self.wait_running('latin')

    def raw_logs(self):
        p = subprocess.run([TENDCTL, '--control-socket', self.sock, 'logs', 'latin'], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=15)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [ln.split(b': ', 1)[1] for ln in p.stdout.splitlines()]

    def test_logs_escaped(self):
        wait_until(lambda: len(self.raw_logs()) >= len(self.LINES), 5, "latin's lines never reached its ring")
        self.assertEqual(self.raw_logs(), self.LINES, 'tendctl logs prints the original bytes')
        # The raw socket answer: every message strict UTF-8 JSON.
        c = self.conn()
        c.send(req('logs', ['latin']))
        msgs = []
        while not msgs or msgs[-1].get('type') != 'result':
            data = c.s.recv(MSG_MAX)
            self.assertTrue(data, 'tend closed the connection')
            msgs.append(strict_json(data))
        self.assertEqual(msgs[-1].get('error'), None, msgs[-1])
        texts = [(m['text'], m.get('escaped')) for m in msgs[:-1]]
        self.assertEqual(texts, [('caf\\xe9 \\\\x41 \u20ac', True), ('\\xed\\xa0\\x80 \\xe2\\x82', True),
                                 ('\\xff\\\\', True), ('ok \u00e9 \\x41', None)])
        p = subprocess.run([TENDCTL, '--control-socket', self.sock, 'logs', 'latin', '--json'],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=15)
        self.assertEqual(p.returncode, 0, p.stderr)
        arr = [strict_json(ln) for ln in p.stdout.splitlines()]
        self.assertEqual([(o['text'], o.get('escaped')) for o in arr], texts, '--json keeps the escaped form')


if __name__ == '__main__':
    unittest.main(verbosity=2)
