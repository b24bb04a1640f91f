#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""daemon-reexec (issue 19; tend(8) "RE-EXECUTING"): tend executes its binary
anew and resumes with no unit restarted, no log line lost, no exit lost.

tend runs from a copy of the built binary in the test's temp dir; before the
re-exec the copy is replaced on disk (a new file renamed over it: a new inode,
with a marker appended, so its bytes differ too), and the test checks that the
process now runs that file (/proc/PID/exe names the new inode, not a deleted
one). 100 units run: 80 idle, 10 crash loops (Restart=always, exit 1 after
50 ms) and 10 writers of 1,000 numbered lines/s each to append: files; one
more unit exits (status 7) the moment tend's binary changes, i.e. during the
exec. A client loops on `tendctl list` throughout and the test reports the
longest call (tend's unavailability) and the exec's own time (tend's log).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import TENDCTL, ServiceTestCase, pid_alive  # noqa: E402
from tendtest import TEND, wait_until, zombies_of  # noqa: E402
from sdtest import run_under_systemd, why_not_systemd  # noqa: E402

N_IDLE, N_CRASH, N_WRITE = 80, 10, 10

WRITER = r'''
import os, signal, sys, time
i = 0
stop = False


def term(*_):  # noted only: a handler run between "i += 1" and the write would count an unwritten line
    global stop
    stop = True


signal.signal(signal.SIGTERM, term)
t0 = time.monotonic()
while True:
    i += 1
    os.write(1, b"%d\n" % i)
    if stop:  # the number of the last line written, for the test to compare
        with open(sys.argv[1], 'w') as f:
            f.write('%d\n' % i)
        os._exit(0)
    d = t0 + i / 1000.0 - time.monotonic()
    if d > 0:
        time.sleep(d)
'''

# Exits at once, leaving a process that writes numbered lines on the unit's stdout every 5 ms until
# 100 lines after tend's binary changed (tend's pid: $PPID), then "linger-done".
LINGERER = r'''
(
    ino=$(stat -L -c %i /proc/$PPID/exe)
    n=0
    end=0
    while [ $end = 0 ] || [ $n -lt $end ]; do
        n=$((n + 1))
        echo linger-$n
        [ $end = 0 ] && [ "$(stat -L -c %i /proc/$PPID/exe)" != "$ino" ] && end=$((n + 100))
        sleep 0.005
    done
    echo linger-done
) &
exit 1
'''

# READY=1, then WATCHDOG=1 and a counting STATUS= every 50 ms, on $NOTIFY_SOCKET.
NOTIFIER = r'''
import os, socket, time
addr = os.environ['NOTIFY_SOCKET']
addr = '\0' + addr[1:] if addr.startswith('@') else addr
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b'READY=1', addr)
n = 0
while True:
    n += 1
    s.sendto(b'WATCHDOG=1\nSTATUS=n=%d' % n, addr)
    time.sleep(0.05)
'''

# A state document of format 1, frozen as tend 0.1 wrote it: every later tend
# must resume from it (tend(8) "RE-EXECUTING", the state format's rule). No
# process, no fd: the units are put back as the document says.
STATE_V1 = '''{"version": 1, "control_fd": 0, "control_conns": [], "units": [
 {"name": "kept-failed.service", "pos": "failed", "result": "exit-code", "want_up": true, "finished": false,
  "watchdog_held": false, "main_pid": 0, "since_realtime": 1700000000000000, "since_monotonic": 1000,
  "deadline": 18446744073709551615, "restarts": 5, "restart_step": 0, "starts": [],
  "last_exit_kind": 1, "last_exit_status": 3, "last_exit_core": 0, "status_text": "was failing",
  "started_text_size": 0, "started_text_hash": 0},
 {"name": "kept-inactive.service", "pos": "inactive", "result": "success", "want_up": false, "finished": false,
  "watchdog_held": false, "main_pid": 0, "since_realtime": 1700000000000000, "since_monotonic": 1000,
  "deadline": 18446744073709551615, "restarts": 0, "restart_step": 0, "starts": [],
  "started_text_size": 0, "started_text_hash": 0},
 {"name": "in-backoff.service", "pos": "backoff", "result": "exit-code", "want_up": true, "finished": false,
  "watchdog_held": false, "main_pid": 0, "since_realtime": 1700000000000000, "since_monotonic": 1000,
  "deadline": 1000, "restarts": 2, "restart_step": 1, "starts": [900, 950],
  "last_exit_kind": 1, "last_exit_status": 1, "last_exit_core": 0,
  "started_text_size": 0, "started_text_hash": 0}]}'''

# A document of format 2 (issue 19's fd budget), frozen as this release writes it: a unit in
# back-off carries its pipe's read end only (fd 8), a stopped unit no pipe.
STATE_V2 = '''{"version": 2, "control_fd": 0, "control_conns": [], "units": [
 {"name": "in-backoff.service", "pos": "backoff", "result": "exit-code", "want_up": true, "finished": false,
  "watchdog_held": false, "main_pid": 0, "since_realtime": 1700000000000000, "since_monotonic": 1000,
  "deadline": 1000, "restarts": 2, "restart_step": 0, "starts": [900, 950],
  "last_exit_kind": 1, "last_exit_status": 1, "last_exit_core": 0,
  "started_text_size": 0, "started_text_hash": 0,
  "logs": {"pipes": [{"rfd": 8, "in": "66697273742d"}], "shared": true}},
 {"name": "kept-inactive.service", "pos": "inactive", "result": "success", "want_up": false, "finished": false,
  "watchdog_held": false, "main_pid": 0, "since_realtime": 1700000000000000, "since_monotonic": 1000,
  "deadline": 18446744073709551615, "restarts": 0, "restart_step": 0, "starts": [],
  "started_text_size": 0, "started_text_hash": 0}]}'''


class ListLoop(threading.Thread):
    """`tendctl list` in a loop: every call's duration and status."""

    def __init__(self, sock):
        super().__init__(daemon=True)
        self.sock, self.calls, self.halt = sock, [], threading.Event()

    def run(self):
        while not self.halt.is_set():
            t = time.monotonic()
            p = subprocess.run([TENDCTL, '--control-socket', self.sock, 'list'], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=30)
            self.calls.append((t, time.monotonic() - t, p.returncode, p.stderr[-300:]))


class Reexec(ServiceTestCase):
    def binary_copy(self):
        os.mkdir(self.path('bin'))
        b = self.path('bin/tend')
        shutil.copy2(TEND, b)
        return b

    def replace_binary(self, b, data):
        """A new file renamed over b, as a package upgrade does; its inode."""
        with open(b + '.new', 'wb') as f:
            f.write(data)
        os.chmod(b + '.new', 0o755)
        os.rename(b + '.new', b)
        return os.stat(b).st_ino

    def tend_fds(self):
        """{fd: what it names} of tend (an fd closed while read, a /proc read of tend's own, is left out)."""
        fds = {}
        for fd in os.listdir('/proc/%d/fd' % self.tend_pid):
            try:
                fds[int(fd)] = os.readlink('/proc/%d/fd/%s' % (self.tend_pid, fd))
            except FileNotFoundError:
                pass
        return fds

    def exe_inode(self):
        return os.stat('/proc/%d/exe' % self.tend_pid).st_ino

    def make_units(self):
        for i in range(N_IDLE):
            self.unit('idle%d' % i, '[Service]\nExecStart=/bin/sleep 1000')
        for i in range(N_CRASH):
            self.unit('crash%d' % i, """
                [Unit]
                StartLimitIntervalSec=0
                [Service]
                ExecStart=/bin/sh -c 'echo $$$$ >> %s; sleep 0.05; echo crash%d-ran-$$$$; exit 1'
                Restart=always
                RestartSec=50ms
            """ % (self.path('crash%d.runs' % i), i))
        writer = self.path('writer.py')
        with open(writer, 'w') as f:
            f.write(WRITER)
        for i in range(N_WRITE):
            self.unit('writer%d' % i, """
                [Service]
                ExecStart=/usr/bin/python3 %s %s
                StandardOutput=append:%s
            """ % (writer, self.path('writer%d.last' % i), self.path('writer%d.log' % i)))
        # In back-off (for an hour) from its start, its pipe kept: a process it left (KillMode=process)
        # writes numbered lines into it before, during and until 100 lines after the exec.
        lingerer = self.path('lingerer.sh')
        with open(lingerer, 'w') as f:
            f.write(LINGERER)
        self.unit('lingerer', '''
            [Service]
            ExecStart=/bin/sh %s
            KillMode=process
            Restart=always
            RestartSec=1h
        ''' % lingerer)
        # Its ring of recent lines (console target) is carried over.
        self.unit('talker', "[Service]\nExecStart=/bin/sh -c 'echo said-before-the-exec; exec sleep 1000'")
        # Exits 7 once tend's binary is another inode: during the exec.
        self.unit('atexec', """
            [Service]
            ExecStart=/bin/sh -c 'i=$$(stat -L -c %%i /proc/$$PPID/exe); while [ "$$(stat -L -c %%i /proc/$$PPID/exe)" = "$$i" ]; do sleep 0.005; done; exit 7'
        """)

    def all_up(self):
        s = self.statuses()
        if s.get('lingerer.service', {}).get('state') != 'backoff':
            return None
        want = ['idle%d' % i for i in range(N_IDLE)] + ['writer%d' % i for i in range(N_WRITE)] + ['atexec', 'talker']
        if any(s.get(n + '.service', {}).get('state') != 'running' for n in want):
            return None
        if any(s['crash%d.service' % i]['restarts'] < 2 for i in range(N_CRASH)):
            return None
        return s

    def check_lines(self, name):
        with open(self.path(name + '.log')) as f:
            text = f.read()
        got = [int(x) for x in text.split()]
        self.assertTrue(got, '%s wrote nothing' % name)
        written = int(wait_until(lambda: ''.join(self.lines(self.path(name + '.last'))), 5,
                                 '%s never said how many lines it wrote (SIGTERM not delivered?)' % name))
        self.assertEqual(got[-1:], [written], '%s: its last lines never reached its file (%d of %d)'
                         % (name, len(got), written))
        missing = sorted(set(range(1, got[-1] + 1)) - set(got))
        self.assertEqual(got, list(range(1, len(got) + 1)),
                         '%s: lines lost, repeated or out of order across the re-exec: %d lines, last %d, '
                         'missing %r' % (name, len(got), got[-1], missing[:20]))
        return len(got)

    def test_reexec_keeps_everything(self):
        b = self.binary_copy()
        self.make_units()
        self.start_tend(binary=b)
        before = wait_until(self.all_up, 30, lambda: 'units never all up; tend stderr %r' % self.stderr()[-3000:],
                            interval=0.1)
        pid = self.tend_pid
        with open(b, 'rb') as f:
            new_ino = self.replace_binary(b, f.read() + b'\0tend-test-reexec-marker\0')
        self.assertNotEqual(self.exe_inode(), new_ino)

        loop = ListLoop(self.sock)
        loop.start()
        time.sleep(0.3)
        t = time.monotonic()
        self.ctl('daemon-reexec')
        wait_until(lambda: self.exe_inode() == new_ino, 10,
                   lambda: 'tend never ran the replaced binary; tend stderr %r' % self.stderr()[-3000:])
        self.assertEqual(self.tend_proc.running(), True, 'tend exited: %r' % self.stderr()[-3000:])
        self.assertFalse(os.readlink('/proc/%d/exe' % pid).endswith('(deleted)'))
        time.sleep(1.0)
        loop.halt.set()
        loop.join(30)
        after = self.statuses()

        # pids and counts of every steady unit unchanged; nothing restarted.
        for n in ['idle%d' % i for i in range(N_IDLE)] + ['writer%d' % i for i in range(N_WRITE)]:
            a, z = before[n + '.service'], after[n + '.service']
            self.assertEqual((z['state'], z['main_pid'], z['restarts'], z['since'], z['file_changed']),
                             ('running', a['main_pid'], a['restarts'], a['since'], False), n)
        # The exit during the exec: seen, with its status.
        r = self.wait_state('atexec', lambda r: r['state'] in ('failed', 'inactive'), 5,
                            'its exit during the exec was lost')
        self.assertEqual((r['result'], r['last_exit']), ('exit-code', {'code': 7}))
        # The crash loops' exits make zombies all the while; none may stay one.
        seen = set(zombies_of(pid))
        wait_until(lambda: not seen & set(zombies_of(pid)), 5,
                   lambda: 'exits left unreaped after the re-exec: %r' % sorted(seen & set(zombies_of(pid))))
        self.assertIn('said-before-the-exec', self.ctl('logs', 'talker')[1], 'its ring was not carried over')

        # Crash loops go on, their counts consistent with their runs.
        for i in range(N_CRASH):
            self.assertGreater(after['crash%d.service' % i]['restarts'], before['crash%d.service' % i]['restarts'])
        self.ctl('stop', *['crash%d' % i for i in range(N_CRASH)] + ['writer%d' % i for i in range(N_WRITE)])
        final = self.statuses()
        # A unit's pipe in back-off: every line its leftover process wrote, once, in order.
        wait_until(lambda: 'linger-done' in self.output(), 10,
                   lambda: 'the lingerer\'s last line never came (its pipe in back-off lost across the re-exec?); '
                   'last lines %r' % re.findall(r'linger-\w+', self.output())[-3:])
        out = self.output()
        got = [int(x) for x in re.findall(r'linger-(\d+)', out)]
        self.assertEqual(got, list(range(1, len(got) + 1)), 'the lingerer\'s lines lost, repeated or out of order')
        self.assertEqual(self.st('lingerer')['state'], 'backoff')
        for i in range(N_CRASH):
            runs = self.lines(self.path('crash%d.runs' % i))
            restarts = final['crash%d.service' % i]['restarts']
            self.assertIn(len(runs) - restarts, (0, 1), 'crash%d: %d runs but %d restarts: an exit lost or counted '
                          'twice' % (i, len(runs), restarts))
            # Each run's last line, written as it exits (the unit then in back-off, its pipe read by
            # whichever tend runs): every one on tend's stdout, once. The last run may have been stopped.
            said = re.findall(r'crash%d-ran-(\d+)' % i, out)
            self.assertEqual(len(said), len(set(said)), 'crash%d: a line repeated across the re-exec' % i)
            lost = [r for r in runs[:-1] if r not in said]
            self.assertEqual(lost, [], 'crash%d: the last line of %d of its %d runs lost (its pipe in back-off '
                             'across the re-exec?)' % (i, len(lost), len(runs)))

        self.assertNotRegex(self.stderr(), 'Sanitizer|runtime error', 'ASan/UBSan said something')
        # Every line, once, in order.
        n_lines = [self.check_lines('writer%d' % i) for i in range(N_WRITE)]

        # What it cost: tendctl's longest call around the exec, and the exec's own time.
        failed = [c for c in loop.calls if c[2] != 0]
        self.assertEqual(failed, [], 'tendctl list failed during the re-exec')
        around = [c[1] for c in loop.calls if c[0] + c[1] >= t - 0.05 and c[0] <= t + 2]
        err = self.stderr()
        stamps = re.findall(r'T\d\d:(\d\d):(\d\d\.\d+)\S* tend: info: (re-executing|re-executed: \d+ units resumed)', err)
        secs = [int(m) * 60 + float(s) for m, s, _ in stamps]
        exec_ms = (secs[-1] - secs[0]) * 1000 if len(secs) >= 2 else float('nan')
        sys.stderr.write('reexec: %d units; exec (state written → units resumed) %.1f ms; tendctl list: %d calls, '
                         'longest around the exec %.1f ms, median %.1f ms; lines per writer %d..%d\n'
                         % (len(after), exec_ms, len(loop.calls), max(around) * 1000,
                            sorted(c[1] for c in loop.calls)[len(loop.calls) // 2] * 1000, min(n_lines), max(n_lines)))

    def test_notify_and_watchdog_carried(self):
        """SIGUSR2: a Type=notify unit with WatchdogSec= keeps notifying
        through the same socket after the re-exec: its STATUS= goes on
        counting, its watchdog does not fire, its pid stays."""
        b = self.binary_copy()
        notifier = self.path('notifier.py')
        with open(notifier, 'w') as f:
            f.write(NOTIFIER)
        self.unit('notifier', """
            [Service]
            Type=notify
            WatchdogSec=1s
            ExecStart=/usr/bin/python3 %s
        """ % notifier)
        self.start_tend(binary=b)
        w = self.watch_records('notifier')
        r = self.wait_state('notifier', lambda r: r['state'] == 'running' and (r['status'] or '').startswith('n='),
                            10, 'never ready with a STATUS=')
        before = int(r['status'][2:])
        os.kill(self.tend_pid, signal.SIGUSR2)  # the signal's way, as `tendctl daemon-reexec`
        wait_until(lambda: 're-executed: ' in self.stderr(), 10,
                   lambda: 'tend never re-executed: %r' % self.stderr()[-2000:])
        # A watch is a request in progress: answered "retry", then closed.
        out = w.read_until_eof(10, 'tendctl watch was not ended by the re-exec')
        self.assertNotEqual(w.wait(5, 'tendctl watch did not exit'), 0)
        self.assertIn('tend re-executes: retry', w.stderr_text(), out[-500:])
        time.sleep(2.5)  # past two WatchdogSec= periods
        z = self.wait_state('notifier', lambda z: int((z['status'] or 'n=0')[2:]) > before + 10, 5,
                            'its notifications stopped reaching tend after the re-exec')
        self.assertEqual((z['state'], z['main_pid'], z['restarts']), ('running', r['main_pid'], 0),
                         'the unit was restarted (its watchdog fired?): %r' % self.stderr()[-2000:])
        self.assertNotRegex(self.stderr(), 'Sanitizer|runtime error', 'ASan/UBSan said something')

    def test_failed_exec_runs_on(self):
        """The binary passes the check, then cannot be executed (it makes
        itself non-executable while answering): tend runs on as it was, and
        the fds it had opened up for the exec are O_CLOEXEC again."""
        b = self.binary_copy()
        self.unit('idle', '[Service]\nExecStart=/bin/sleep 1000')
        self.start_tend(binary=b)
        r = self.wait_running('idle')
        self.replace_binary(b, b'#!/bin/sh\n[ "$1" = --check-state-version ] && chmod -x "$0" && '
                            b'echo "tend state format $2 readable" && exit 0\nexit 99\n')
        rc, out, err = self.ctl('daemon-reexec', check=False)
        self.assertEqual((rc, out), (1, ''), 'a failed exec answered as a success (QA L1): %r' % err)
        self.assertRegex(err, r'not re-executing: executing .* failed: Permission denied: tend runs on as it was')
        wait_until(lambda: 'tend runs on as it was' in self.stderr(), 10,
                   lambda: 'no failed exec in tend\'s log: %r' % self.stderr()[-2000:])
        self.assertTrue(self.tend_proc.running())
        z = self.st('idle')
        self.assertEqual((z['state'], z['main_pid']), ('running', r['main_pid']))
        open_fds = []
        for fd in os.listdir('/proc/%d/fdinfo' % self.tend_pid):
            try:
                with open('/proc/%d/fdinfo/%s' % (self.tend_pid, fd)) as f:
                    flags = int(re.search(r'^flags:\s+(\d+)', f.read(), re.M).group(1), 8)
            except FileNotFoundError:
                continue
            if int(fd) > 2 and not flags & 0o2000000:
                open_fds.append((fd, os.readlink('/proc/%d/fd/%s' % (self.tend_pid, fd))))
        self.assertEqual(open_fds, [], 'fds of tend left without O_CLOEXEC after the failed exec')
        self.ctl('restart', 'idle')
        self.wait_running('idle', other_than=r['main_pid'])

    def test_format_1_read(self):
        """A frozen format-1 document (STATE_V1) is read: units are put back
        as it says, not started as at a first start."""
        for name in ('kept-failed', 'kept-inactive', 'in-backoff'):
            self.unit(name, '[Service]\nExecStart=/bin/sleep 1000\nRestart=always')
        with open(self.path('state-v1.json'), 'w') as f:
            f.write(STATE_V1)
        # fd 7: the document, as the memfd a re-executing tend leaves (read with fstat and pread).
        self.start_tend(wrap=['sh', '-c', 'exec 7<"$0" && exec "$@"', self.path('state-v1.json')],
                        env=dict(os.environ, TEND_REEXEC_STATE_FD='7'))
        z = self.st('kept-failed')
        self.assertEqual((z['state'], z['result'], z['restarts'], z['last_exit'], z['status'], z['main_pid']),
                         ('failed', 'exit-code', 5, {'code': 3}, 'was failing', None))
        z = self.st('kept-inactive')
        self.assertEqual((z['state'], z['main_pid'], z['restarts']), ('inactive', None, 0))
        # Its back-off was due: it restarts, counted on from the document's count.
        z = self.wait_state('in-backoff', lambda z: z['state'] == 'running', 5, 'its due restart never came')
        self.assertEqual(z['restarts'], 3)
        self.assertIn('resuming from the previous tend\'s state (format 1)', self.stderr())

    def test_format_1_pipes_read(self):
        """A format-1 document names both ends of every unit's pipes, stopped
        units' too (tend then held them all): the reader of 1 takes each read
        end with the bytes in it and in "in", closes each write end (the
        next spawn opens its own), and closes a stopped unit's pipe once
        read to its end (issue 19's fd budget)."""
        self.unit('in-backoff', '[Service]\nExecStart=/bin/sleep 1000\nRestart=always')
        self.unit('kept-inactive', '[Service]\nExecStart=/bin/sleep 1000')
        busy_r, busy_w = os.pipe()
        idle_r, idle_w = os.pipe()
        self.addCleanup(lambda: [os.close(fd) for fd in (busy_r, busy_w, idle_r, idle_w)])
        os.write(busy_w, b'half\nwritten-before-the-exec\n')
        os.write(idle_w, b'the-stopped-unit-said\n')

        def entry(name, pos, result, pipe):
            return ('{"name": "%s.service", "pos": "%s", "result": "%s", "want_up": %s, "finished": false, '
                    '"watchdog_held": false, "main_pid": 0, "since_realtime": 1700000000000000, '
                    '"since_monotonic": 1000, "deadline": %s, "restarts": 0, "restart_step": 0, "starts": [], '
                    '"started_text_size": 0, "started_text_hash": 0, "logs": {"pipes": [%s], "shared": true}}'
                    % (name, pos, result, 'true' if pos == 'backoff' else 'false',
                       1000 if pos == 'backoff' else 18446744073709551615, pipe))
        state = ('{"version": 1, "control_fd": 0, "control_conns": [], "units": [%s, %s]}'
                 % (entry('in-backoff', 'backoff', 'exit-code', '{"rfd": 8, "wfd": 9, "in": "%s"}'
                          % b'first-'.hex()),
                    entry('kept-inactive', 'inactive', 'success', '{"rfd": 10, "wfd": 11, "in": ""}')))
        with open(self.path('state-v1.json'), 'w') as f:
            f.write(state)
        # The fds as a format-1 tend left them: the pipes' ends, at the numbers the document names.
        me = '/proc/%d/fd/' % os.getpid()
        self.start_tend(wrap=['bash', '-c', 'exec 7<"$0" 8<%s%d 9>%s%d 10<%s%d 11>%s%d && exec "$@"'
                              % (me, busy_r, me, busy_w, me, idle_r, me, idle_w), self.path('state-v1.json')],
                        env=dict(os.environ, TEND_REEXEC_STATE_FD='7'))
        z = self.wait_state('in-backoff', lambda z: z['state'] == 'running', 5, 'its due restart never came')
        self.assertEqual(z['restarts'], 1, '%r %s' % (z, self.stderr()))
        os.write(busy_w, b'written-after-the-exec\n')
        wait_until(lambda: 'written-after-the-exec' in self.ctl('logs', 'in-backoff')[1], 5,
                   lambda: 'the carried pipe is not read: %r' % self.ctl('logs', 'in-backoff')[1])
        said = self.ctl('logs', 'in-backoff')[1]
        for line in ('first-half', 'written-before-the-exec'):
            self.assertIn(line, said, 'a line of the carried pipe lost')
        wait_until(lambda: 'the-stopped-unit-said' in self.ctl('logs', 'kept-inactive')[1], 5,
                   lambda: 'the stopped unit\'s pipe was not read to its end: %r' % self.ctl('logs', 'kept-inactive')[1])
        fds = self.tend_fds()
        ino = lambda fd: 'pipe:[%d]' % os.fstat(fd).st_ino  # noqa: E731
        # (fd numbers are reused: the pipes are told by their inode, both ends have the same one)
        self.assertEqual([fd for fd, what in fds.items() if what == ino(busy_r)], [8],
                         'the running unit\'s pipe: its read end kept, its write end (9) not: %r' % fds)
        self.assertEqual([fd for fd, what in fds.items() if what == ino(idle_r)], [],
                         'the stopped unit\'s pipe (10, 11) still open in tend: %r' % fds)
        self.assertIn('resuming from the previous tend\'s state (format 1)', self.stderr())

    def test_format_2_read(self):
        """The frozen format-2 document (STATE_V2): the back-off unit's pipe
        is made from the read end carried (the bytes in it and in "in"
        read), its restart opens a write end of the same pipe."""
        self.unit('in-backoff', "[Service]\nExecStart=/bin/sh -c 'echo from-the-restart; exec sleep 1000'\n"
                  "Restart=always")
        self.unit('kept-inactive', '[Service]\nExecStart=/bin/sleep 1000')
        r, w = os.pipe()
        self.addCleanup(lambda: [os.close(fd) for fd in (r, w)])
        os.write(w, b'half\n')
        with open(self.path('state-v2.json'), 'w') as f:
            f.write(STATE_V2)
        self.start_tend(wrap=['sh', '-c', 'exec 7<"$0" 8</proc/%d/fd/%d && exec "$@"' % (os.getpid(), r),
                              self.path('state-v2.json')], env=dict(os.environ, TEND_REEXEC_STATE_FD='7'))
        z = self.wait_state('in-backoff', lambda z: z['state'] == 'running', 5, 'its due restart never came')
        self.assertEqual(z['restarts'], 3)
        wait_until(lambda: 'from-the-restart' in self.ctl('logs', 'in-backoff')[1], 5,
                   lambda: 'the restart\'s line never came: %r' % self.ctl('logs', 'in-backoff')[1])
        said = self.ctl('logs', 'in-backoff')[1]
        self.assertIn('first-half', said, 'the carried pipe\'s bytes lost')
        fds = list(self.tend_fds().values())
        self.assertEqual(fds.count('pipe:[%d]' % os.fstat(r).st_ino), 1, 'not the read end alone: %r' % fds)
        self.assertEqual(self.st('kept-inactive')['state'], 'inactive')
        self.assertIn('resuming from the previous tend\'s state (format 2)', self.stderr())

    def start_with_state(self, doc, **kw):
        """tend started as a re-executed one, its state the document doc (fd 7)."""
        with open(self.path('state.json'), 'w') as f:
            f.write(doc)
        self.start_tend(wrap=['sh', '-c', 'exec 7<"$0" && exec "$@"', self.path('state.json')],
                        env=dict(os.environ, TEND_REEXEC_STATE_FD='7'), **kw)

    def test_state_without_spawned_judged_by_history(self):
        """QA19 H1: a format-2 state written before "spawned" existed: a
        unit the old tend ran (a last exit) had its cgroup's processes
        spawned by it, left alone at its start; one with no history never
        ran under it, and what its cgroup holds is a previous tend's, killed."""
        cg = self.make_cgroup(required=True)
        planted = {}
        for name in ('ran', 'never'):
            self.unit(name, '[Service]\nExecStart=/bin/sleep 1000')
            d = os.path.join(cg, name + '.service')
            os.mkdir(d)
            planted[name] = self.start(['sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec sleep 1000', d])
            wait_until(lambda: str(planted[name].pid) in open(os.path.join(d, 'cgroup.procs')).read(), 5,
                       'the planted process never joined %s' % d)

        def entry(name, history):
            return ('{"name": "%s.service", "pos": "%s", "result": "%s", "want_up": false, "finished": false, '
                    '"watchdog_held": false, "main_pid": 0, "since_realtime": 1700000000000000, '
                    '"since_monotonic": 1000, "deadline": 18446744073709551615, "restarts": 0, "restart_step": 0, '
                    '"starts": [], %s"started_text_size": 0, "started_text_hash": 0}'
                    % ((name, 'failed', 'exit-code', '"last_exit_kind": 1, "last_exit_status": 1, '
                        '"last_exit_core": 0, ') if history else (name, 'inactive', 'success', '')))
        self.start_with_state('{"version": 2, "control_fd": 0, "control_conns": [], "units": [%s, %s]}'
                              % (entry('ran', True), entry('never', False)), cgroup=cg)
        self.ctl('start', 'ran', 'never')
        self.wait_running('ran')
        self.wait_running('never')
        wait_until(lambda: not pid_alive(planted['never'].pid), 5,
                   lambda: 'the leftover of a unit never run was not killed: %s' % self.stderr()[-2000:])
        self.assertTrue(pid_alive(planted['ran'].pid), 'the process of a unit the old tend ran was killed: %s'
                        % self.stderr()[-2000:])
        self.assertIn('ran.service: Found left-over process %d (sleep)' % planted['ran'].pid, self.stderr())
        self.assertIn('never.service: killed 1 leftover process of a previous tend', self.stderr())

    def test_bad_state_refused_without_abort(self):
        """QA19 L1: a state document whose "units" is not an array made tend
        abort (a json-c assertion): tend refuses it, says why and exits 1
        (the service manager restarts it)."""
        self.unit('a', '[Service]\nExecStart=/bin/sleep 1000')
        self.start_with_state('{"version": 2, "control_fd": 0, "control_conns": [], "units": {"a": 1}}',
                              wait_ready=False)
        status = self.tend_proc.wait(10, 'tend did not exit on a bad state')
        self.assertEqual(status, 1, 'tend did not refuse the bad state with exit 1 (-6: an abort): %s'
                         % self.stderr()[-2000:])
        self.assertIn('the previous tend\'s state is unreadable ("units" is not an array; format 2', self.stderr())

    def test_state_without_units_refused(self):
        """A state document without "units" (tend always writes it) was read
        as "no units": every unit started anew beside the old processes.
        Refused as a wrong-typed "units" is: exit 1 with the reason."""
        self.unit('a', '[Service]\nExecStart=/bin/sleep 1000')
        self.start_with_state('{"version": 2, "control_fd": 0, "control_conns": []}', wait_ready=False)
        status = self.tend_proc.wait(10, 'tend did not exit on a state without units')
        self.assertEqual(status, 1, 'tend did not refuse the state without units with exit 1: %s'
                         % self.stderr()[-2000:])
        self.assertIn('the previous tend\'s state is unreadable (no "units"; format 2', self.stderr())

    def test_bad_state_entries_dropped(self):
        """QA19 L1: a unit entry with a key of the wrong type, and a
        "control_fd" that is not a socket (1: stdout), are refused with a
        message naming them; tend runs on: that unit starts as at a first
        start, the other is resumed, and a new control socket answers."""
        for name in ('bad', 'kept', 'negative'):
            self.unit(name, '[Service]\nExecStart=/bin/sleep 1000\nRestart=always')

        def entry(name, restarts):
            return ('{"name": "%s.service", "pos": "failed", "result": "exit-code", "want_up": false, '
                    '"finished": false, "watchdog_held": false, "main_pid": 0, "since_realtime": 1700000000000000, '
                    '"since_monotonic": 1000, "deadline": 18446744073709551615, "restarts": %s, "restart_step": 0, '
                    '"starts": [], "started_text_size": 0, "started_text_hash": 0}' % (name, restarts))
        self.start_with_state('{"version": 2, "control_fd": 1, "control_conns": [], "units": [%s, %s, %s]}'
                              % (entry('bad', '"three"'), entry('kept', 4), entry('negative', -3)))
        self.assertIn('the previous tend\'s state has a bad "restarts" in units[0] (bad.service): that unit is not '
                      'resumed', self.stderr())
        # A negative count was read as 0: refused as a wrong type is.
        self.assertIn('the previous tend\'s state has a bad "restarts" in units[2] (negative.service): that unit is '
                      'not resumed', self.stderr())
        self.assertIn('the previous tend\'s state names a control socket that is not one (1): a new one is made',
                      self.stderr())
        self.wait_running('bad')
        self.wait_running('negative')
        z = self.st('kept')
        self.assertEqual((z['state'], z['restarts']), ('failed', 4), 'the good entry was not resumed')

    def test_bad_state_fds_dropped(self):
        """QA19B M3: an entry whose fds are not what it says (a notify socket
        that is no socket or not open) is refused before any is used: the
        fd, another unit's, is neither taken nor closed (a double close
        aborted tend)."""
        for name in ('liar', 'kept'):
            self.unit(name, '[Service]\nExecStart=/bin/sleep 1000\nRestart=always')

        def entry(name, extra=''):
            return ('{"name": "%s.service", "pos": "failed", "result": "exit-code", "want_up": false, '
                    '"finished": false, "watchdog_held": false, "main_pid": 0, "since_realtime": 1700000000000000, '
                    '"since_monotonic": 1000, "deadline": 18446744073709551615, "restarts": 2, "restart_step": 0, '
                    '"starts": [], "started_text_size": 0, "started_text_hash": 0%s}' % (name, extra))
        self.start_with_state('{"version": 2, "control_fd": 0, "control_conns": [], "units": [%s, %s]}'
                              % (entry('liar', ', "notify_fd": 3'), entry('kept')))
        err = self.stderr()
        self.assertRegex(err, r'the previous tend\'s state has a bad "(a notify socket that is not a socket|an fd '
                         r'that is not open)" in units\[0\] \(liar.service\)', 'the entry\'s fd was not checked')
        self.wait_running('liar')
        z = self.st('kept')
        self.assertEqual((z['state'], z['restarts']), ('failed', 2), 'the good entry was not resumed')

    def test_during_the_initial_starts(self):
        """SIGUSR2 while the start of DIR's units is still spread over the
        loop's turns (256 a turn, manager.c): the rest are started before the
        state is written, each once, and run on after the re-exec."""
        n = 600
        for i in range(n):
            self.unit('u%03d' % i, '[Service]\nExecStart=/bin/sleep 1000')
        self.start_tend(wait_ready=False)
        # SIGUSR2 blocked (tend's signal sources exist): sent now, it is read at the loop's first turn,
        # when the first 256 units have started and the rest wait for their turns.
        def blocked():
            with open('/proc/%d/status' % self.tend_pid) as f:
                return int(re.search(r'^SigBlk:\s+(\w+)', f.read(), re.M).group(1), 16) & (1 << (signal.SIGUSR2 - 1))
        wait_until(lambda: not self.tend_proc.running() or blocked(), 10,
                   lambda: 'tend never blocked SIGUSR2: %r' % self.stderr()[-2000:], interval=0.001)
        os.kill(self.tend_pid, signal.SIGUSR2)
        wait_until(lambda: 're-executed: ' in self.stderr(), 30,
                   lambda: 'tend never re-executed: %r' % self.stderr()[-2000:])
        names = ['u%03d.service' % i for i in range(n)]

        def all_running():
            s = self.statuses()
            return s if all(s[x]['state'] == 'running' for x in names) else None
        s = wait_until(all_running, 30, lambda: 'units left unstarted after the re-exec: %r' % sorted(
            x for x, r in self.statuses().items() if r['state'] != 'running')[:20])
        self.assertEqual([x for x in names if s[x]['restarts'] != 0], [], 'units restarted')
        m = re.search(r'the start of DIR\'s units finished first \((\d+) were still to be reached\)', self.stderr())
        self.assertIsNotNone(m, 'the re-exec did not come during the staged starts: %r' % self.stderr()[-2000:])
        self.assertGreater(int(m.group(1)), 0)
        pids = {s[x]['main_pid'] for x in names}
        self.assertEqual(len(pids), n)
        with open('/proc/%d/task/%d/children' % (self.tend_pid, self.tend_pid)) as f:
            children = sorted(int(c) for c in f.read().split())
        self.assertEqual(children, sorted(pids), 'tend\'s children are not its units\' '
                         'main processes, one each')
        self.assertNotRegex(self.stderr(), 'Sanitizer|runtime error', 'ASan/UBSan said something')

    def test_incompatible_state_refused(self):
        b = self.binary_copy()
        self.unit('idle', '[Service]\nExecStart=/bin/sleep 1000')
        self.start_tend(binary=b)
        r = self.wait_running('idle')
        old_ino = self.exe_inode()
        # The question the old tend asks the new binary: the built one reads formats 1 and 2 (this one's), not 3.
        for version, status in (('1', 0), ('2', 0), ('3', 1), ('0', 1), ('x', 1)):
            p = subprocess.run([TEND, '--check-state-version', version], capture_output=True, text=True, timeout=10)
            said = ('tend state format %s readable\n' % version if status == 0 else
                    'tend state format %s not readable: this tend reads 1 to 2\n' % version)
            self.assertEqual((p.returncode, p.stdout), (status, said), 'tend --check-state-version %s' % version)
        # A "new build" that cannot read the running tend's state format.
        self.replace_binary(b, b'#!/bin/sh\n[ "$1" = --check-state-version ] && exit 1\nexit 99\n')
        rc, out, err = self.ctl('daemon-reexec', check=False)
        self.assertNotEqual(rc, 0, 'an incompatible binary was not refused: %r' % out)
        self.assertIn('cannot read', err)
        self.assertEqual(out, '')
        os.kill(self.tend_pid, signal.SIGUSR2)  # the same check, refused too
        wait_until(lambda: self.stderr().count('cannot read tend\'s state format') >= 2, 5,
                   lambda: 'SIGUSR2 was not refused: %r' % self.stderr()[-2000:])
        self.assertTrue(self.tend_proc.running(), 'the old tend let go: %r' % self.stderr()[-2000:])
        self.assertEqual(self.exe_inode(), old_ino, 'tend executed the incompatible binary')
        z = self.st('idle')
        self.assertEqual((z['state'], z['main_pid'], z['restarts']), ('running', r['main_pid'], 0))

    def test_answer_not_tends_refused(self):
        """QA M2: a binary that exits 0 to --check-state-version without
        tend's answer ("tend state format N readable") is not executed:
        it is not tend, or not one that resumes."""
        b = self.binary_copy()
        self.unit('idle', '[Service]\nExecStart=/bin/sleep 1000')
        self.start_tend(binary=b)
        r = self.wait_running('idle')
        old_ino = self.exe_inode()
        for script in (b'#!/bin/sh\nexit 0\n', b'#!/bin/sh\necho 2\nexit 0\n',
                       b'#!/bin/sh\necho "tend state format 1 readable"\nexit 0\n',
                       b'#!/bin/sh\necho "tend state format $2 readable"\nexit 1\n'):
            self.replace_binary(b, script)
            rc, out, err = self.ctl('daemon-reexec', check=False)
            self.assertNotEqual(rc, 0, 'a binary answering %r was accepted' % script)
            self.assertIn('cannot read', err)
        self.assertTrue(self.tend_proc.running(), 'the old tend let go: %r' % self.stderr()[-2000:])
        self.assertEqual(self.exe_inode(), old_ino, 'tend executed a binary that is not tend')
        z = self.st('idle')
        self.assertEqual((z['state'], z['main_pid'], z['restarts']), ('running', r['main_pid'], 0))

    def logs_json(self, name):
        """NAME's ring as `tendctl logs --json` shows it: the records."""
        out = self.ctl('logs', name, '--json')[1]
        return [json.loads(ln) for ln in out.splitlines() if ln.strip()]

    def reexec_and_wait(self):
        """`tendctl daemon-reexec`, then until the new tend said it resumed."""
        n = self.stderr().count('re-executed: ')
        self.ctl('daemon-reexec')
        wait_until(lambda: self.stderr().count('re-executed: ') > n, 10,
                   lambda: 'tend never re-executed: %r' % self.stderr()[-2000:])

    def test_partial_line_carried_whole(self):
        """QA H3: a line whose start was read before the exec and its end
        after is one line, not a partial one and another."""
        b = self.binary_copy()
        go = self.path('go')
        self.unit('halfline', """
            [Service]
            ExecStart=/bin/sh -c 'printf partial-no-newline; while [ ! -e %s ]; do sleep 0.01; done; printf " end\\nnext\\n"; exec sleep 100000'
        """ % go)
        self.start_tend(binary=b)
        r = self.wait_running('halfline')
        self.reexec_and_wait()
        open(go, 'w').close()
        wait_until(lambda: any(x.get('text') == 'next' for x in self.logs_json('halfline')), 5,
                   lambda: 'the unit\'s lines after the exec never shown: %r' % self.logs_json('halfline'))
        got = [(x.get('text'), bool(x.get('partial'))) for x in self.logs_json('halfline')]
        self.assertEqual(got, [('partial-no-newline end', False), ('next', False)],
                         'the line cut short at the exec was not carried whole')
        self.assertEqual(self.st('halfline')['main_pid'], r['main_pid'], 'the unit was restarted')

    def test_template_instance_resumed(self):
        """QA H1: an instance started from its template (no file of its
        own in DIR) is resumed, not left running unsupervised; it stops
        with tend's shutdown."""
        b = self.binary_copy()
        self.unit('tmpl@', '[Service]\nExecStart=/bin/sleep 100000')
        self.start_tend(binary=b)
        self.ctl('start', 'tmpl@inst2')
        r = self.wait_running('tmpl@inst2')
        self.reexec_and_wait()
        self.assertNotIn('unsupervised', self.stderr(), 'the instance was dropped at the re-exec')
        z = self.st('tmpl@inst2')
        self.assertEqual((z['state'], z['main_pid'], z['restarts']), ('running', r['main_pid'], 0),
                         'the instance was not resumed as it was')
        self.ctl('stop', 'tmpl@inst2')
        self.wait_state('tmpl@inst2', lambda z: z['state'] == 'inactive', 10, 'the resumed instance did not stop')
        wait_until(lambda: not os.path.exists('/proc/%d' % r['main_pid']), 5,
                   'the instance\'s process outlived its stop')

    def test_unit_that_would_not_resume_refused(self):
        """QA H2: a running unit whose file does not load now (it runs on
        its last good file after a daemon-reload), or whose file is gone,
        could not be resumed: daemon-reexec is refused before the exec,
        naming it; tend and the unit run on. Fixed, the re-exec goes on."""
        b = self.binary_copy()
        good = '[Service]\nExecStart=/bin/sleep 100000'
        self.unit('edited', good)
        self.unit('other', good)
        self.start_tend(binary=b)
        r = self.wait_running('edited')
        o = self.wait_running('other')
        self.unit('edited', good + '\nRestart=bogus')
        self.ctl('daemon-reload', check=False)
        wait_until(lambda: 'not reloaded' in self.stderr(), 5,
                   lambda: 'daemon-reload did not keep the unit on its last file: %r' % self.stderr()[-2000:])
        st, _, err = self.ctl('daemon-reexec', check=False)
        self.assertNotEqual(st, 0, 'daemon-reexec accepted with a unit the new tend could not resume')
        self.assertIn('edited.service', err)
        self.assertIn('Restart=', err, 'the refusal does not say why the file does not load')
        os.unlink(os.path.join(self.dir, 'other.service'))
        self.unit('edited', good)
        st, _, err = self.ctl('daemon-reexec', check=False)
        self.assertNotEqual(st, 0, 'daemon-reexec accepted with a running unit whose file is gone')
        self.assertIn('other.service', err)
        self.assertNotIn('info: re-executing', self.stderr(), 'tend re-executed anyway')
        for name, was in (('edited', r), ('other', o)):
            z = self.st(name)
            self.assertEqual((z['state'], z['main_pid'], z['restarts']), ('running', was['main_pid'], 0))
        self.unit('other', good)
        self.reexec_and_wait()
        for name, was in (('edited', r), ('other', o)):
            z = self.st(name)
            self.assertEqual((z['state'], z['main_pid'], z['restarts']), ('running', was['main_pid'], 0),
                             '%s was not resumed' % name)


    def slow_checker(self, b, seconds):
        """Replaces b by a wrapper of the real binary (kept beside it) whose
        --check-state-version answers after `seconds`."""
        real = b + '.real'
        if not os.path.exists(real):
            shutil.copy2(TEND, real)
        self.replace_binary(b, ('#!/bin/sh\n[ "$1" = --check-state-version ] && echo asked >> %s && sleep %s\n'
                                'exec %s "$@"\n' % (self.path('asked'), seconds, real)).encode())
        return real

    def checks_asked(self):
        """How many times the wrapper was asked --check-state-version."""
        return len(self.lines(self.path('asked'))) if os.path.exists(self.path('asked')) else 0

    def test_check_does_not_block_the_loop(self):
        """QA M1: while the new binary takes 3 s to answer
        --check-state-version, tend answers `tendctl list` within 1 s and
        reaps a unit's exit; daemon-reexec answers once the new tend took
        over (exit 0), every unit kept."""
        b = self.binary_copy()
        go = self.path('go')
        self.unit('idle', '[Service]\nExecStart=/bin/sleep 100000')
        self.unit('exiter', "[Service]\nExecStart=/bin/sh -c 'while [ ! -e %s ]; do sleep 0.01; done; exit 3'" % go)
        self.start_tend(binary=b)
        r = self.wait_running('idle')
        self.wait_running('exiter')
        real = self.slow_checker(b, 3)
        t0 = time.monotonic()
        p = subprocess.Popen([TENDCTL, '--control-socket', self.sock, 'daemon-reexec'], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: self.checks_asked() == 1, 2,
                       lambda: 'tend never started the check: %r' % self.stderr()[-2000:])
            open(go, 'w').close()
            t = time.monotonic()
            self.ctl('list', timeout=5)
            took = time.monotonic() - t
            self.assertLess(took, 1.0, 'tendctl list took %.2f s while the new binary was asked (the check blocks '
                            'tend\'s loop?)' % took)
            z = self.wait_state('exiter', lambda z: z['state'] == 'failed', 1.5,
                                'the unit\'s exit was not reaped while the check ran (tend\'s loop blocked?)')
            self.assertEqual(z['last_exit'], {'code': 3})
            self.assertIsNone(p.poll(), 'daemon-reexec answered before the check ended (%.2f s): %r'
                              % (time.monotonic() - t0, p.stderr.read() if p.poll() is not None else ''))
            out, err = p.communicate(timeout=15)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertEqual(p.returncode, 0, 'daemon-reexec failed: %r; tend %r' % (err, self.stderr()[-2000:]))
        self.assertGreater(time.monotonic() - t0, 2.5, 'daemon-reexec answered before the check ended')
        self.assertIn('re-executed: ', self.stderr(), 'daemon-reexec answered 0 before the new tend resumed')
        self.assertEqual(os.stat('/proc/%d/exe' % self.tend_pid).st_ino, os.stat(real).st_ino,
                         'tend does not run the new binary')
        z = self.st('idle')
        self.assertEqual((z['state'], z['main_pid'], z['restarts']), ('running', r['main_pid'], 0))
        self.assertNotRegex(self.stderr(), 'Sanitizer|runtime error', 'ASan/UBSan said something')

    def test_abandoned_reexec_fails(self):
        """QA L1: a re-exec abandoned after tend took the request — the new
        binary does not answer within 5 s, or a unit does not settle within
        5 s — makes `tendctl daemon-reexec` exit 1 with tend's reason; the
        old tend runs on. A client that leaves while it waits changes
        nothing."""
        b = self.binary_copy()
        go = self.path('go')
        self.unit('idle', '[Service]\nExecStart=/bin/sleep 100000')
        self.unit('slowstop', """
            [Service]
            ExecStart=/bin/sleep 100000
            ExecStop=/bin/sh -c 'while [ ! -e %s ]; do sleep 0.05; done'
            TimeoutStopSec=60
        """ % go)
        self.start_tend(binary=b)
        r = self.wait_running('idle')
        self.wait_running('slowstop')
        old_ino = self.exe_inode()
        self.slow_checker(b, 30)
        t = time.monotonic()
        rc, out, err = self.ctl('daemon-reexec', check=False, timeout=20)
        self.assertEqual((rc, out), (1, ''), 'daemon-reexec said success while the check timed out: %r' % err)
        self.assertIn('no answer in time', err)
        self.assertLess(time.monotonic() - t, 8, 'the check was not killed at its deadline')
        self.assertEqual(self.exe_inode(), old_ino, 'tend executed the binary that did not answer')
        # The check passes now; a unit stopping for longer than 5 s keeps the re-exec from settling.
        self.slow_checker(b, 0)
        self.ctl('stop', '--no-block', 'slowstop')
        self.wait_state('slowstop', lambda z: z['state'] == 'stopping', 5, 'the unit never began to stop')
        rc, out, err = self.ctl('daemon-reexec', check=False, timeout=20)
        self.assertEqual((rc, out), (1, ''), 'daemon-reexec said success while a unit did not settle: %r' % err)
        self.assertIn('slowstop.service', err)
        self.assertIn('after 5 s', err)
        self.assertEqual(self.exe_inode(), old_ino, 'tend executed while a unit was stopping')
        # A client that goes away while its re-exec is under way: the re-exec goes on.
        open(go, 'w').close()
        self.wait_state('slowstop', lambda z: z['state'] == 'inactive', 5, 'the unit never stopped')
        self.slow_checker(b, 1)
        p = subprocess.Popen([TENDCTL, '--control-socket', self.sock, 'daemon-reexec'], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: self.checks_asked() >= 3, 5,
                   lambda: 'tend never started the third check: %r' % self.stderr()[-2000:])
        p.kill()
        p.wait()
        wait_until(lambda: 're-executed: ' in self.stderr(), 10,
                   lambda: 'the re-exec did not go on without its client: %r' % self.stderr()[-2000:])
        self.assertTrue(self.tend_proc.running(), 'tend exited: %r' % self.stderr()[-2000:])
        z = self.st('idle')
        self.assertEqual((z['state'], z['main_pid'], z['restarts']), ('running', r['main_pid'], 0))
        self.assertNotRegex(self.stderr(), 'Sanitizer|runtime error', 'ASan/UBSan said something')


    def test_load_warnings_not_repeated(self):
        """QA L2: a unit file's warnings were logged by the tend that loaded
        it: the re-executed tend does not log them again while its text (and
        its drop-ins') is the same; a file changed since, a drop-in added
        since and a new file are warned about as at any load."""
        b = self.binary_copy()
        self.unit('warned', '[Service]\nExecStart=/bin/sleep 100000\nBogusKeyWarned=1')
        self.unit('edited', '[Service]\nExecStart=/bin/sleep 100000\nBogusKeyEdited=1')
        self.unit('withdropin', '[Service]\nExecStart=/bin/sleep 100000')
        os.mkdir(os.path.join(self.dir, 'withdropin.service.d'))
        with open(os.path.join(self.dir, 'withdropin.service.d', 'a.conf'), 'w') as f:
            f.write('[Service]\nBogusKeyDropin=1\n')
        self.start_tend(binary=b)
        for n in ('warned', 'edited', 'withdropin'):
            self.wait_running(n)
        for key in ('BogusKeyWarned', 'BogusKeyEdited', 'BogusKeyDropin'):
            self.assertEqual(self.stderr().count('"%s"' % key), 1, 'no single warning about %s at the first load: %r'
                             % (key, self.stderr()[-2000:]))
        self.unit('edited', '[Service]\nExecStart=/bin/sleep 100000\nBogusKeyEdited=1\nBogusKeyAdded=1')
        with open(os.path.join(self.dir, 'withdropin.service.d', 'b.conf'), 'w') as f:
            f.write('[Service]\nBogusKeyDropin2=1\n')
        self.unit('fresh', '[Service]\nExecStart=/bin/sleep 100000\nBogusKeyFresh=1')
        self.reexec_and_wait()
        err = self.stderr()
        counts = {k: err.count('"%s"' % k) for k in ('BogusKeyWarned', 'BogusKeyEdited', 'BogusKeyAdded',
                                                     'BogusKeyDropin', 'BogusKeyDropin2', 'BogusKeyFresh')}
        self.assertEqual(counts, {'BogusKeyWarned': 1, 'BogusKeyEdited': 2, 'BogusKeyAdded': 1, 'BogusKeyDropin': 2,
                                  'BogusKeyDropin2': 1, 'BogusKeyFresh': 1},
                         'warnings repeated by the re-executed tend, or a changed file\'s not logged: %r' % err[-3000:])
        self.assertRegex(err, r'warned\.service:3: unknown key "BogusKeyWarned"', 'the warning names FILE:LINE')
        self.wait_running('fresh')


    def test_last_failed_command_carried(self):
        """Issue 18: the last failed command (status's "Process:" line,
        show's FailedCommand* properties) is the same after the re-exec; a
        running unit's failed ExecReload= too."""
        b = self.binary_copy()
        self.unit('pre', """
            [Service]
            ExecStartPre=/bin/true
            ExecStartPre=/bin/sh -c 'exit 3'
            ExecStart=/bin/sleep 100000
        """)
        self.unit('reloader', "[Service]\nExecStart=/bin/sleep 100000\nExecReload=/bin/sh -c 'exit 5'")
        self.start_tend(binary=b)
        self.wait_state('pre', lambda z: z['state'] == 'failed', 10, 'the unit did not fail')
        self.wait_running('reloader')
        self.ctl('reload', 'reloader', check=False)
        wait_until(lambda: 'FailedCommand' in self.ctl('show', 'reloader', '-o', 'json')[1], 5,
                   'the failed ExecReload= was never shown')

        def seen():
            out = {}
            for n in ('pre', 'reloader'):
                props = json.loads(self.ctl('show', n, '-o', 'json')[1])[0]
                out[n] = {k: v for k, v in props.items() if k.startswith('FailedCommand')}
                status = self.ctl('status', n, '-n', '0', check=False)[1]
                out[n]['line'] = re.findall(r'Process: .*', status)
            return out
        before = seen()
        self.assertEqual(before['pre']['FailedCommand'], 'ExecStartPre')
        self.assertEqual(before['reloader']['FailedCommand'], 'ExecReload')
        self.assertEqual(len(before['pre']['line']), 1, before)
        self.reexec_and_wait()
        self.assertEqual(seen(), before, 'the last failed command changed across the re-exec')


    def session_unit(self, name):
        """A unit like ssh.service: KillMode=process, its main process forks a
        "session" (its pid appended to NAME.sessions) that must outlive
        a restart of the unit."""
        self.unit(name, "[Service]\nKillMode=process\nExecStart=/bin/sh -c 'sleep 100000 & echo $! >> %s; "
                  "exec sleep 100000'" % self.path(name + '.sessions'))

    def sessions(self, name):
        return [int(x) for x in self.lines(self.path(name + '.sessions'))]

    def test_killmode_process_survivors_kept(self):
        """QA19 H1: after a re-exec, the processes a KillMode=process unit
        leaves are still its own (systemd's "Found left-over process …
        Ignoring."), not a previous tend's leftovers to kill: a unit running
        across the re-exec and restarted after it (ssh.service after a
        package upgrade), and one stopped before the re-exec, started after."""
        b = self.binary_copy()
        self.session_unit('running')
        self.session_unit('stopped')
        self.start_tend(binary=b)
        if not self.cgroup:
            self.skipTest('no cgroup: the leftovers of a previous tend are killed in cgroup mode only')
        r = self.wait_running('running')
        self.wait_running('stopped')
        wait_until(lambda: len(self.sessions('running')) == 1 and len(self.sessions('stopped')) == 1, 5,
                   'the units\' sessions never started')
        self.ctl('stop', 'stopped')
        self.reexec_and_wait()
        self.ctl('restart', 'running')
        self.ctl('start', 'stopped')
        self.wait_running('running', other_than=r['main_pid'])
        self.wait_running('stopped')
        for name in ('running', 'stopped'):
            pid = self.sessions(name)[0]
            self.assertTrue(pid_alive(pid), '%s: its session %d was killed at its start after the re-exec: %s'
                            % (name, pid, self.stderr()[-2000:]))
            self.assertIn('%s.service: Found left-over process %d (sleep) in control group while starting unit. '
                          'Ignoring.' % (name, pid), self.stderr())
        self.assertNotIn('of a previous tend', self.stderr())

    def test_on_failure_not_started_again(self):
        """QA19 H2: a unit that failed before three re-execs (its OnFailure=
        unit started then): the re-execs do not start the handler again."""
        b = self.binary_copy()
        alerts = self.path('alerts')
        self.unit('alert', "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo alert >> %s'" % alerts)
        self.unit('job', "[Unit]\nOnFailure=alert.service\n[Service]\nExecStart=/bin/sh -c 'exit 1'")
        # disabled (tendctl(1) "disable"): not started with DIR's units, where a
        # handler still starting when job.service fails would not be started again
        open(os.path.join(self.dir, 'alert.service.disabled'), 'w').close()
        self.start_tend(binary=b)
        said = 'alert.service: starting, as job.service failed (OnFailure=)'
        wait_until(lambda: said in self.stderr(), 10, lambda: 'the handler never started: %s' % self.stderr()[-2000:])
        self.wait_state('alert', lambda z: z['state'] == 'inactive', 5, 'the handler never finished')
        before = len(self.lines(alerts))
        self.assertEqual(before, 1, 'the handler ran %d times for one failure' % before)
        for _ in range(3):
            self.reexec_and_wait()
            # A start the resumed state triggered would be queued by the resume
            # and logged by the jobs pass that runs before this request's answer.
            self.assertEqual(self.st('job')['state'], 'failed')
        self.assertEqual(self.stderr().count(said), 1, 'the re-execs started the handler again: %s'
                         % self.stderr()[-3000:])
        self.wait_state('alert', lambda z: z['state'] == 'inactive', 5, 'the handler never finished')
        self.assertEqual(len(self.lines(alerts)), before, 'the handler ran again after a re-exec')

# Run by sdtest.run_under_systemd while a private systemd --user answers.
UNDER_SYSTEMD = r'''
show() { systemctl --user show -p MainPID -p ActiveState -p SubState -p NRestarts \
         -p ExecMainStartTimestampMonotonic tend-it.service | sed "s/^/$1 /"; }
rc=0
systemctl --user start tend-it.service || rc=92
if [ $rc = 0 ]; then
    show before
    echo "idle_before $("$TENDCTL" --control-socket "$SOCK" show -p MainPID --value idle)"
    mv "$BIN.new" "$BIN"
    ino=$(stat -c %i "$BIN")
    "$TENDCTL" --control-socket "$SOCK" daemon-reexec || rc=93
    main=$(systemctl --user show -p MainPID --value tend-it.service)
    for i in $(seq 200); do [ "$(stat -L -c %i /proc/$main/exe)" = "$ino" ] && break; sleep 0.05; done
    echo "exe_is_new $([ "$(stat -L -c %i /proc/$main/exe)" = "$ino" ] && echo yes || echo no)"
    for i in $(seq 200); do [ "$(systemctl --user show -p SubState --value tend-it.service)" = running ] && break; sleep 0.05; done
    show after
    echo "idle_after $("$TENDCTL" --control-socket "$SOCK" show -p MainPID --value idle)"
    systemctl --user stop tend-it.service
fi
exit $rc
'''


class ReexecUnderSystemd(ServiceTestCase):
    """tend.service (Type=notify) under a private systemd --user manager:
    active, the same MainPID, no restart across daemon-reexec."""

    def test_same_main_pid(self):
        if why_not_systemd():
            self.skipTest(why_not_systemd())
        home, rt, b = self.path('home'), self.path('rt'), self.path('tend-copy')
        os.makedirs(os.path.join(home, '.config/systemd/user'))
        os.mkdir(rt, 0o700)
        shutil.copy2(TEND, b)
        with open(TEND, 'rb') as f, open(b + '.new', 'wb') as g:
            g.write(f.read() + b'\0tend-test-reexec-marker\0')
        os.chmod(b + '.new', 0o755)
        self.unit('idle', '[Service]\nExecStart=/bin/sleep 1000')
        with open(os.path.join(home, '.config/systemd/user/tend-it.service'), 'w') as f:
            f.write('[Service]\nType=notify\nExecStart=%s --config-dir %s --control-socket %s\n'
                    % (b, self.dir, self.sock))
        env = dict(os.environ, HOME=home, XDG_RUNTIME_DIR=rt, TMP=self.tmp.name, BIN=b, TENDCTL=TENDCTL,
                   SOCK=self.sock)
        p, why = run_under_systemd(UNDER_SYSTEMD, env, 'tend-sd-reexec', 60)
        if p is None:
            self.skipTest(why)
        self.assertEqual(p.returncode, 0, 'under systemd --user (%d): %s; %s' % (p.returncode, p.stdout, p.stderr))
        shown, said = {}, {}
        for line in p.stdout.splitlines():
            when, rest = line.split(' ', 1)
            if '=' in rest:
                k, v = rest.split('=', 1)
                shown[(when, k)] = v
            else:
                said[when] = rest
        self.assertEqual(said.get('exe_is_new'), 'yes', 'the replaced binary never ran: %r' % p.stdout)
        for k in ('MainPID', 'ExecMainStartTimestampMonotonic', 'NRestarts'):
            self.assertEqual(shown[('after', k)], shown[('before', k)], '%s changed: %r' % (k, p.stdout))
        self.assertEqual((shown[('after', 'ActiveState')], shown[('after', 'SubState')], shown[('after', 'NRestarts')]),
                         ('active', 'running', '0'), p.stdout)
        self.assertEqual(said.get('idle_after'), said.get('idle_before'), 'a unit restarted: %r' % p.stdout)
        self.assertNotIn(said.get('idle_after'), (None, '', '0'), p.stdout)

if __name__ == '__main__':
    unittest.main()
