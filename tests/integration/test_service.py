#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tend's service and combined modes (SPEC §1, §3, §4, §5), driven as a user
would: unit files in a directory, the built tend and tendctl, real processes.
States and results are read from `tendctl status --json`; every wait is
bounded and names the likely cause.

As root on a writable cgroup2 mount each tend runs in a fresh cgroup of its
own (svctest.py); otherwise where the test runs (process-group fallback).
The cgroup-specific cases are in test_service_cgroup.py."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import PROBE, exited, wait_until, zombies_of  # noqa: E402
from svctest import (RECORD_FIELDS, RESULTS, STATES, TENDCTL, ServiceTestCase, kill_pid,  # noqa: E402
                     monotonic_us, pid_alive, wait_exec)


def gone_after(t, deadline_s, what):
    """Waits until CLOCK_MONOTONIC passes t + deadline_s: for checks that
    something does *not* happen (no event exists for that)."""
    wait_until(lambda: time.monotonic() >= t + deadline_s, deadline_s + 1, what)


# ---------------------------------------------------------------------------
# Restart= (systemd.service(5), table 2)
# ---------------------------------------------------------------------------

# The first run exits cleanly (0), with a failing code (1) or by SIGKILL;
# a second run (a restart) stays up, so every unit settles.
RUN_ONCE = '''
f="$0.$1.starts"
echo start >> "$f"
[ "$(wc -l < "$f")" -ge 2 ] && exec sleep 1000
case "$2" in
clean) exit 0;;
fail) exit 1;;
signal) kill -KILL $$;;
esac
'''

POLICIES = ['no', 'always', 'on-success', 'on-failure', 'on-abnormal', 'on-abort']
RESTARTED = {  # systemd.service(5): which exits restart under each Restart=
    'no': set(),
    'always': {'clean', 'fail', 'signal'},
    'on-success': {'clean'},
    'on-failure': {'fail', 'signal'},
    'on-abnormal': {'signal'},
    'on-abort': {'signal'},
}
DEAD = {  # the end of a run that is not restarted: state, result, last_exit
    'clean': ('inactive', 'success', {'code': 0}),
    'fail': ('failed', 'exit-code', {'code': 1}),
    'signal': ('failed', 'signal', {'signal': 9, 'core_dumped': False}),
}


class RestartPolicy(ServiceTestCase):
    def test_restart_table(self):
        run = self.script('run.sh', RUN_ONCE)
        names = {}
        for policy in POLICIES:
            for how in DEAD:
                name = 'r-%s-%s' % (policy, how)
                names[name] = (policy, how)
                self.unit(name, '''
                    [Service]
                    ExecStart=/bin/sh %s %s %s
                    Restart=%s
                    RestartSec=100ms
                ''' % (run, name, how, policy))
        self.start_tend()

        def settled():
            recs = self.statuses()
            for name, (policy, how) in names.items():
                r = recs[name + '.service']
                if how in RESTARTED[policy]:
                    # Running at the fork: the second run's line comes once
                    # its shell ran (read at once, a race under load).
                    if not (r['state'] == 'running' and r['restarts'] == 1 and
                            len(self.lines('%s.%s.starts' % (run, name))) >= 2):
                        return None
                elif r['state'] not in ('inactive', 'failed'):
                    return None
            return recs
        recs = wait_until(settled, 10, lambda: 'units never settled per the Restart= table: %r'
                          % {n: (r['state'], r['restarts']) for n, r in self.statuses().items()})
        # Nothing restarts later: a restart would come RestartSec after the death.
        latest = max(r['since_monotonic'] for r in recs.values()) / 1e6
        gone_after(latest, 0.5, 'waiting past RestartSec')
        recs = self.statuses()
        for name, (policy, how) in sorted(names.items()):
            with self.subTest(policy=policy, exit=how):
                r = recs[name + '.service']
                starts = self.lines('%s.%s.starts' % (run, name))
                if how in RESTARTED[policy]:
                    self.assertEqual((r['state'], r['restarts'], len(starts)), ('running', 1, 2),
                                     'Restart=%s must restart after a %s exit' % (policy, how))
                    self.assertEqual(r['last_exit'], DEAD[how][2])
                else:
                    self.assertEqual((r['state'], r['result'], r['last_exit'], r['restarts'], len(starts)),
                                     DEAD[how] + (0, 1),
                                     'Restart=%s must not restart after a %s exit' % (policy, how))


# ---------------------------------------------------------------------------
# Back-off, start limit
# ---------------------------------------------------------------------------

class Backoff(ServiceTestCase):
    def test_delay_grows_over_restart_steps(self):
        # Each instance appends its CLOCK_MONOTONIC time (child-probe stamp:
        # a C program, so its start-up adds about a millisecond to a gap).
        # The delay is timed on tend's own records too: from the back-off
        # record (the delay is armed as the unit enters it) to the start the
        # timer began. A gap between two stamps also holds the exit of one
        # instance, its reaping and the fork and exec of the next: on a loaded
        # machine (load in the hundreds) those alone took 0.3-5 s, so the
        # upper bound and the growth are judged on tend's back-off only.
        stamps = self.path('stamps')
        self.gate_unit('gate')
        self.unit('grow', '''
            [Unit]
            After=gate.service
            StartLimitIntervalSec=0
            [Service]
            ExecStart=%s stamp %s
            Restart=always
            RestartSec=100ms
            RestartSteps=3
            RestartMaxDelaySec=800ms
        ''' % (PROBE, stamps))
        self.start_tend()
        w = self.watch_records('grow')  # held behind the gate: no back-off yet
        self.open_gate('gate')
        # restart_delay(): 100 · 8^(n/3) ms for step n = 0, 1, 2, 3, then the maximum.
        want = [0.1, 0.2, 0.4, 0.8, 0.8]
        backoffs, entered, seen = [], None, []
        while len(backoffs) < len(want):
            r = self.next_record(w, 10, lambda: 'only %d back-offs ended; records %r; tend stderr %r'
                                 % (len(backoffs), seen[-10:], self.stderr()[-2000:]))
            seen.append((r['state'], r['restarts'], r['since_monotonic']))
            if r['state'] == 'backoff':
                entered = r['since_monotonic']
            elif entered is not None:
                self.assertIn(r['state'], ('starting', 'running'), 'back-off did not end in a start: %r' % seen)
                backoffs.append((r['since_monotonic'] - entered) / 1e6)
                entered = None
        wait_until(lambda: len(self.lines(stamps)) >= len(want) + 1, 8,
                   lambda: 'only %d starts; tend stderr %r' % (len(self.lines(stamps)), self.stderr()[-2000:]))
        self.ctl('stop', 'grow')
        t = [float(x) for x in self.lines(stamps)][:len(want) + 1]
        gaps = [b - a for a, b in zip(t, t[1:])]
        for i, (gap, backoff, delay) in enumerate(zip(gaps, backoffs, want)):
            with self.subTest(gap=i):
                self.assertGreaterEqual(gap, delay, 'restart %d came before its delay: gaps %r' % (i + 1, gaps))
                self.assertGreaterEqual(backoff, delay, 'back-off %d ended before its delay: back-offs %r'
                                        % (i + 1, backoffs))
                self.assertLessEqual(backoff, delay + 0.3, 'restart %d came late (tend\'s loop stalled?): '
                                     'back-offs %r, gaps between the starts %r' % (i + 1, backoffs, gaps))
        self.assertGreaterEqual(backoffs[-1], 4 * backoffs[0], 'the delay did not grow: back-offs %r' % backoffs)

    def test_default_start_limit_trips_at_sixth_start(self):
        starts = self.path('starts')
        self.unit('burst', '''
            [Service]
            ExecStart=/bin/sh -c 'echo x >> %s'
            Restart=always
        ''' % starts)
        self.start_tend()
        r = self.wait_state('burst', lambda r: r['state'] == 'failed', 5, 'never failed by the start limit')
        self.assertEqual((r['result'], r['restarts'], len(self.lines(starts))), ('start-limit', 5, 5),
                         'StartLimitBurst=5 within 10s: the 6th start must be refused')
        self.assertIsNone(r['main_pid'])
        gone_after(r['since_monotonic'] / 1e6, 0.5, 'waiting past RestartSec')
        r = self.st('burst')
        self.assertEqual((r['state'], r['result'], len(self.lines(starts))), ('failed', 'start-limit', 5),
                         'restarted after the start limit')
        # reset-failed clears it; an explicit start runs again.
        self.ctl('reset-failed', 'burst')
        self.assertEqual(self.st('burst')['state'], 'inactive')
        self.ctl('start', 'burst')
        wait_until(lambda: len(self.lines(starts)) >= 6, 5, 'tendctl start after reset-failed did not start')
        self.ctl('stop', 'burst')

    def test_stop_during_backoff_spawns_nothing(self):
        starts = self.path('starts')
        self.unit('slow', '''
            [Service]
            ExecStart=/bin/sh -c 'echo x >> %s; exit 1'
            Restart=on-failure
            RestartSec=1s
        ''' % starts)
        self.start_tend()
        r = self.wait_state('slow', lambda r: r['state'] == 'backoff', 5, 'never in backoff')
        self.ctl('stop', 'slow')
        self.assertEqual(self.st('slow')['state'], 'inactive')
        gone_after(r['since_monotonic'] / 1e6, 1.5, 'waiting past RestartSec')
        r = self.st('slow')
        self.assertEqual((r['state'], r['main_pid'], len(self.lines(starts))), ('inactive', None, 1),
                         'a stop during back-off must cancel the restart')


class KillStorm(ServiceTestCase):
    def test_100_sigkills_100_restarts_no_leak(self):
        self.unit('storm', '''
            [Unit]
            StartLimitIntervalSec=0
            [Service]
            ExecStart=%s pause
            Restart=always
            RestartSec=0
        ''' % PROBE)
        self.start_tend()
        r = self.wait_running('storm')
        tend = self.tend_pid

        def fds():
            return sorted(os.listdir('/proc/%d/fd' % tend), key=int)
        # A tendctl connection tend has not closed yet may be in the
        # baseline: the count must not grow (a leak per restart would show).
        base = len(fds())
        pid = r['main_pid']
        for i in range(100):
            kill_pid(pid)
            r = self.wait_running('storm', other_than=pid)
            pid = r['main_pid']
        self.assertEqual(r['restarts'], 100)
        self.assertEqual(r['last_exit'], {'signal': 9, 'core_dumped': False})
        wait_until(lambda: not zombies_of(tend), 5, lambda: 'zombies under tend: %r' % zombies_of(tend))
        wait_until(lambda: len(fds()) <= base, 5,
                   lambda: 'tend\'s fd count went from %d to %d: %r' % (base, len(fds()), fds()))


# ---------------------------------------------------------------------------
# Type=exec (SPEC §3): started at a successful exec
# ---------------------------------------------------------------------------

EXEC_STARTED_WITHIN = 3  # s: an exec takes milliseconds; a bound for a loaded machine
EXEC_NOT_HEARD = ('still starting although its exec succeeded: its exec result was queued without '
                  'waking the loop (libexit\'s reaper fd not readable for a queued exec event?)')


class TypeExec(ServiceTestCase):
    def test_lone_exec_unit_running_at_its_exec(self):
        """A lone Type=exec unit is running as soon as its exec succeeded,
        with no other child of tend exiting to wake the loop: at tend's start,
        then on each of 50 starts (after a stop, and through restarts, whose
        spawn happens while tend handles the old process's exit)."""
        self.unit('lone', '''
            [Service]
            Type=exec
            ExecStart=/bin/sleep infinity
        ''')
        self.start_tend()
        r = self.wait_state('lone', lambda r: r['state'] == 'running', EXEC_STARTED_WITHIN, EXEC_NOT_HEARD)
        for i in range(50):
            pid = r['main_pid']
            if i % 2:
                self.ctl('restart', 'lone', '--no-block')
            else:
                self.ctl('stop', 'lone')
                self.assertFalse(pid_alive(pid), 'stop returned before the main process was gone')
                self.ctl('start', 'lone', '--no-block')
            r = self.wait_state('lone', lambda r: r['state'] == 'running' and r['main_pid'] not in (pid, None),
                                EXEC_STARTED_WITHIN, 'start %d: %s' % (i + 1, EXEC_NOT_HEARD))


# ---------------------------------------------------------------------------
# Stop
# ---------------------------------------------------------------------------

KEEP_CHILD = '''
sleep 1000 &
echo $! > "$1"
exec "$2" pause
'''


class Stop(ServiceTestCase):
    def test_mixed_leftovers_killed_at_once_after_main_death(self):
        """KillMode=mixed (nginx.service): the main process SIGKILLed leaves a
        worker that ignores SIGTERM; no stop signal reaches a living process,
        so nothing is waited for: the worker gets SIGKILL at once (systemd
        252), not after TimeoutStopSec=, and the result is the main's."""
        wpid = self.path('worker.pid')
        master = self.script('master', '''
            sh -c 'trap "" TERM; echo $$ > %s.tmp; mv %s.tmp %s; exec sleep 1000' &
            wait
        ''' % (wpid, wpid, wpid))
        self.unit('mx', '''
            [Service]
            KillMode=mixed
            TimeoutStopSec=30
            ExecStart=%s
        ''' % master)
        self.start_tend()
        main = self.wait_running('mx')['main_pid']
        worker = int(wait_until(lambda: self.lines(wpid) and self.lines(wpid)[0], 5, 'the worker never started'))
        self.addCleanup(kill_pid, worker)
        fd = os.pidfd_open(worker)
        self.addCleanup(os.close, fd)
        kill_pid(main)
        wait_until(lambda: exited(fd), 3, lambda: 'the worker outlived its main process (waits TimeoutStopSec=?); '
                   'tend stderr %r' % self.stderr()[-2000:])
        r = self.wait_state('mx', lambda r: r['state'] == 'failed', 5, 'never failed')
        self.assertEqual((r['result'], r['last_exit']), ('signal', {'signal': 9, 'core_dumped': False}))
        self.assertNotIn('still running TimeoutStopSec=', self.stderr())

    def test_sigterm_trap_gets_sigkill_after_timeout_stop(self):
        rec = self.path('rec')
        self.unit('stubborn', '''
            [Service]
            ExecStart=%s record %s 0 0 0
            TimeoutStopSec=1s
        ''' % (PROBE, rec))
        self.start_tend()
        pid = self.wait_running('stubborn')['main_pid']
        wait_until(lambda: 'ready %d' % pid in self.output(), 5, 'child-probe never blocked its signals')
        fd = os.pidfd_open(pid)
        self.addCleanup(os.close, fd)
        t0 = time.monotonic()
        self.ctl('stop', 'stubborn')
        elapsed = time.monotonic() - t0
        self.assertTrue(exited(fd), 'the main process survived the stop')
        self.assertGreaterEqual(elapsed, 1.0, 'SIGKILL before TimeoutStopSec=1s')
        self.assertLess(elapsed, 2.5, 'the stop took too long after TimeoutStopSec=1s')
        self.assertIn('sig %d TERM' % pid, self.lines(rec), 'KillSignal= never reached the process')
        # As systemd: a stop that needed the final kill signal ends
        # failed/timeout (tests/unit/test-unit.c test_stop_escalation).
        r = self.st('stubborn')
        self.assertEqual((r['state'], r['result'], r['main_pid']), ('failed', 'timeout', None))
        self.assertEqual(r['last_exit'], {'signal': 9, 'core_dumped': False})

    def test_hung_exec_stop_is_killed_after_timeout_stop(self):
        # SPEC §4 "Stop": TimeoutStopSec= bounds ExecStop= too; at the
        # deadline it is killed and KillSignal= follows (systemd: result
        # timeout; tests/unit/test-unit.c test_stop_cmd_timeout).
        pidfile = self.path('stop-pid')
        hang = self.script('hang.sh', 'echo $$ > "$1"\nexec sleep 1000\n')
        self.unit('hung', '''
            [Service]
            ExecStart=/bin/sleep 1000
            ExecStop=/bin/sh %s %s
            TimeoutStopSec=1s
        ''' % (hang, pidfile))
        self.start_tend()
        main = self.wait_running('hung')['main_pid']
        t0 = time.monotonic()
        try:
            self.ctl('stop', 'hung', timeout=10)
        except subprocess.TimeoutExpired:
            self.fail('tendctl stop still waits 10 s into a stop with TimeoutStopSec=1s: the hung ExecStop= '
                      'holds the stop (no deadline while it runs?); record %r; tend stderr %r'
                      % (self.st('hung'), self.stderr()[-2000:]))
        elapsed = time.monotonic() - t0
        stop_pid = int(wait_until(lambda: self.lines(pidfile), 1, 'ExecStop= never wrote its pid')[0])
        self.assertGreaterEqual(elapsed, 1.0, 'ExecStop= cut short before TimeoutStopSec=1s')
        self.assertLess(elapsed, 5, 'the stop took too long after TimeoutStopSec=1s')
        self.assertFalse(pid_alive(stop_pid), 'the hung ExecStop= survived its deadline')
        self.assertFalse(pid_alive(main), 'KillSignal= never stopped the main process')
        r = self.st('hung')
        self.assertEqual((r['state'], r['result'], r['main_pid']), ('failed', 'timeout', None))
        self.assertIn('ExecStop= still running after TimeoutStopSec=', self.stderr())

    def test_kill_mode_process_leaves_the_child_and_logs_it(self):
        child = self.path('child')
        run = self.script('keep.sh', KEEP_CHILD)
        self.unit('proc', '''
            [Service]
            ExecStart=/bin/sh %s %s %s
            KillMode=process
        ''' % (run, child, PROBE))
        self.start_tend()
        main = self.wait_running('proc')['main_pid']
        kid = int(wait_until(lambda: self.lines(child), 5, 'the unit never started its child')[0])
        self.addCleanup(kill_pid, kid)
        self.ctl('stop', 'proc')
        r = self.st('proc')
        self.assertEqual((r['state'], r['main_pid']), ('inactive', None))
        self.assertFalse(pid_alive(main), 'the main process survived the stop')
        self.assertTrue(pid_alive(kid), 'KillMode=process must leave the other processes alone')
        wait_until(lambda: 'KillMode=process' in self.stderr(), 5,
                   lambda: 'the survivor was not logged; stderr %r' % self.stderr())


# ---------------------------------------------------------------------------
# Logs
# ---------------------------------------------------------------------------

class Logs(ServiceTestCase):
    def test_one_megabyte_then_crash_every_line_in_order(self):
        sink = self.path('big.log')
        n = 80000  # "line 00000001\n": 14 bytes each, 1.1 MB
        run = self.script('big.sh', 'seq -f "line %%08.0f" 1 %d\nkill -KILL $$' % n)
        self.unit('big', '''
            [Service]
            ExecStart=/bin/sh %s
            StandardOutput=file:%s
        ''' % (run, sink))
        self.start_tend()
        self.wait_state('big', lambda r: r['state'] == 'failed', 10, 'never died of its SIGKILL')
        size = 14 * n
        wait_until(lambda: os.path.getsize(sink) >= size, 10,
                   lambda: 'the sink holds %d of %d bytes' % (os.path.getsize(sink), size))
        got = self.lines(sink)
        self.assertEqual(len(got), n)
        self.assertEqual(got, ['line %08d' % i for i in range(1, n + 1)], 'lines lost or out of order')
        self.assertEqual(self.st('big')['result'], 'signal')

    def test_blocked_fifo_sink_stalls_only_its_unit(self):
        fifo = self.path('fifo')
        os.mkfifo(fifo)
        # A reader that never reads: tend's open succeeds, its writes fill the FIFO.
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.addCleanup(os.close, rfd)
        other = self.path('other.log')
        self.unit('flood', '''
            [Service]
            ExecStart=/usr/bin/yes flood
            StandardOutput=file:%s
        ''' % fifo)
        self.unit('steady', '''
            [Service]
            ExecStart=/bin/sh -c 'i=0; while :; do echo "steady $i"; i=$((i+1)); sleep 0.02; done'
            StandardOutput=file:%s
        ''' % other)
        self.start_tend(log_level='debug')
        wait_until(lambda: 'file:%s is blocked' % fifo in self.stderr(), 5,
                   lambda: 'tend never paused the unit of the full FIFO; stderr %r' % self.stderr()[-2000:])
        # flood is blocked now: steady keeps logging, and tend keeps answering.
        start = len(self.lines(other))
        t0 = time.monotonic()
        wait_until(lambda: len(self.lines(other)) >= start + 25, 5,
                   'the unit with its own sink stalled behind the blocked FIFO')
        self.assertEqual(self.st('flood')['state'], 'running')
        self.assertLess(time.monotonic() - t0, 5)
        # Draining the FIFO lets flood go on (tend resumes on EPOLLOUT).
        got = b''
        deadline = time.monotonic() + 5
        while len(got) < 256 * 1024 and time.monotonic() < deadline:
            try:
                got += os.read(rfd, 65536)
            except BlockingIOError:
                time.sleep(0.01)
        self.assertGreaterEqual(len(got), 256 * 1024, 'flood never resumed after the FIFO drained')
        self.assertTrue(all(ln == b'flood' for ln in got.split(b'\n')[:-1]), 'bytes mangled in the FIFO sink')


# ---------------------------------------------------------------------------
# Loading, exec failures
# ---------------------------------------------------------------------------

class Load(ServiceTestCase):
    def test_missing_binary_exec_failed_and_policy_followed(self):
        self.unit('gone', '''
            [Service]
            ExecStart=/nonexistent/tend-it-binary
        ''')
        # Held at boot behind a gate until the test watches its records: its
        # back-off windows (100 ms each) are too short to be seen by polling
        # `tendctl status` on a loaded machine (each poll is a process).
        self.gate_unit('gate')
        self.unit('gone-retry', '''
            [Unit]
            After=gate.service
            [Service]
            ExecStart=/nonexistent/tend-it-binary
            Restart=on-failure
            RestartSec=100ms
        ''')
        self.unit('fine', '''
            [Service]
            ExecStart=%s pause
        ''' % PROBE)
        self.start_tend()
        w = self.watch_records('gone-retry')
        self.open_gate('gate')
        r = self.wait_state('gone', lambda r: r['state'] == 'failed', 5, 'a missing ExecStart= never failed')
        self.assertEqual((r['result'], r['restarts'], r['main_pid']), ('exec-failed', 0, None))
        # Between two attempts (backoff) the result is the last attempt's.
        seen = []
        while not seen or seen[-1]['state'] != 'failed':
            seen.append(self.next_record(w, 10, 'gone-retry never failed: records %r'
                                         % [(x['state'], x['restarts'], x['result']) for x in seen]))
        backoffs = [x for x in seen if x['restarts'] >= 2 and x['state'] == 'backoff']
        self.assertTrue(backoffs, 'Restart=on-failure did not retry an exec failure: records %r'
                        % [(x['state'], x['restarts'], x['result']) for x in seen])
        self.assertEqual(backoffs[0]['result'], 'exec-failed')
        r = seen[-1]
        self.assertEqual(r['result'], 'start-limit', 'never hit the start limit')
        self.assertTrue(self.tend_proc.running(), 'tend died')
        self.assertEqual(self.st('fine')['state'], 'running')
        self.assertIn('gone.service: cannot execute /nonexistent/tend-it-binary: No such file or directory',
                      self.stderr())

    def test_missing_working_directory_names_the_key(self):
        """A failed chdir is not reported as a failed exec of a binary that exists."""
        self.unit('nowd', '''
            [Service]
            ExecStart=%s pause
            WorkingDirectory=/nonexistent/tend-it-dir
        ''' % PROBE)
        self.start_tend()
        r = self.wait_state('nowd', lambda r: r['state'] == 'failed', 5, 'a missing WorkingDirectory= never failed')
        self.assertEqual(r['result'], 'exec-failed')
        err = self.stderr()
        self.assertIn('nowd.service: WorkingDirectory=/nonexistent/tend-it-dir: cannot enter it: '
                      'No such file or directory', err)
        self.assertNotIn('cannot execute', err)

    def test_oneshot_runs_its_start_post_commands(self):
        """ExecStartPost= of a Type=oneshot unit runs after its ExecStart=
        commands, with RemainAfterExit= or without; one that fails fails the
        start. A missing ExecStartPre= binary is an exec failure, said with
        its path and errno."""
        ran = self.path('ran')
        self.unit('post', '''
            [Service]
            Type=oneshot
            ExecStart=/bin/true
            ExecStartPost=/bin/sh -c 'echo post >> %s'
        ''' % ran)
        self.unit('postfail', '''
            [Service]
            Type=oneshot
            ExecStart=/bin/true
            ExecStartPost=/bin/false
        ''')
        self.unit('nopre', '''
            [Service]
            ExecStartPre=/nonexistent/tend-it-pre
            ExecStart=%s pause
        ''' % PROBE)
        self.start_tend()
        r = self.wait_state('post', lambda r: r['state'] == 'inactive' and r['last_exit'], 5, 'post never ended')
        self.assertEqual(r['result'], 'success')
        wait_until(lambda: os.path.exists(ran), 5, 'ExecStartPost= of the oneshot never ran')
        self.assertEqual(self.lines(ran), ['post'])
        r = self.wait_state('postfail', lambda r: r['state'] == 'failed', 5, 'a failing ExecStartPost= never failed it')
        self.assertEqual(r['result'], 'exit-code')
        r = self.wait_state('nopre', lambda r: r['state'] == 'failed', 5, 'a missing ExecStartPre= never failed')
        self.assertEqual((r['result'], r['main_pid']), ('exec-failed', None))
        self.assertIn('nopre.service: cannot execute /nonexistent/tend-it-pre: No such file or directory',
                      self.stderr())

    def test_what_a_file_gets_wrong_is_said_by_default(self):
        """Without --log-level, a supervisor of units warns about what it
        ignores in a unit file, with FILE:LINE (an entrypoint stays quiet)."""
        path = self.unit('odd', '''
            [Service]
            ExecStart=%s pause
            NoSuchKey=1
        ''' % PROBE)
        self.start_tend(log_level=None)
        self.wait_running('odd')
        self.assertIn('%s:3: unknown key "NoSuchKey" in section [Service], ignoring' % path, self.stderr())

    def test_a_failure_before_the_fork_is_said_once_with_its_result(self):
        """A start that fails before any process exists says why in one line,
        naming what failed, and gets the result of what failed: a missing
        EnvironmentFile= is `resources` (as systemd), an executable on no
        directory of PATH `exec-failed`; no second, generic line."""
        self.unit('noenv', '''
            [Service]
            ExecStart=%s pause
            EnvironmentFile=/nonexistent/tend-it-env
        ''' % PROBE)
        self.unit('nopath', '''
            [Service]
            ExecStart=tend-it-no-such-command
        ''')
        self.start_tend()
        r = self.wait_state('noenv', lambda r: r['state'] == 'failed', 5, 'a missing EnvironmentFile= never failed')
        self.assertEqual((r['result'], r['main_pid']), ('resources', None))
        r = self.wait_state('nopath', lambda r: r['state'] == 'failed', 5, 'a command on no PATH never failed')
        self.assertEqual((r['result'], r['main_pid']), ('exec-failed', None))
        err = self.stderr()
        self.assertEqual(err.count('noenv.service: EnvironmentFile="/nonexistent/tend-it-env": '
                                   'No such file or directory'), 1, err)
        self.assertEqual(err.count('nopath.service: tend-it-no-such-command: executable not found'), 1, err)
        self.assertNotIn('cannot start', err)

    def test_dependency_on_other_unit_types_is_ignored(self):
        # SPEC §3: an existing unit usually runs unchanged. After=network.target
        # names a unit type tend does not have: noted with FILE:LINE, ignored.
        path = self.unit('web', '''
            [Unit]
            Description=a unit written for systemd
            After=network.target
            Wants=network-online.target
            [Service]
            ExecStart=%s pause
        ''' % PROBE)
        self.start_tend()
        self.wait_running('web')
        self.assertIn('%s:3: After="network.target" ignored: tend runs services only' % path, self.stderr())

# ---------------------------------------------------------------------------
# Combined mode, actions
# ---------------------------------------------------------------------------

class ClosedStdio(ServiceTestCase):
    def test_closed_stdin_stdout_hold_dev_null_not_tends_fds(self):
        """tend started with 0 and 1 closed (SPEC §7: no fd of tend's leaks
        into a child): its first fds (signalfd, epoll) must not land on 0/1,
        where a unit with StandardOutput=inherit and CMD would get them."""
        self.unit('inh', '''
            [Service]
            ExecStart=%s pause
            StandardOutput=inherit
        ''' % PROBE)
        seen = self.path('cmd-fds')
        # CMD is python (a shell would show its own redirections in /proc/$$/fd).
        code = ('import os, signal; open(%r, "w").write("".join(os.readlink("/proc/self/fd/%%d" %% i) + "\\n" '
                'for i in range(3))); signal.pause()' % seen)
        self.start_tend(cmd=[sys.executable, '-c', code],
                        wrap=['sh', '-c', 'exec "$@" <&- >&-', 'sh'])
        r = self.wait_running('inh')
        for fd in (0, 1):
            self.assertEqual(os.readlink('/proc/%d/fd/%d' % (self.tend_pid, fd)), '/dev/null')
        # Running at the fork: before its exec the unit's fds are being set up.
        wait_exec(r['main_pid'])
        for fd in (0, 1, 2):
            target = os.readlink('/proc/%d/fd/%d' % (r['main_pid'], fd))
            self.assertNotIn('anon_inode', target, 'the unit got one of tend\'s own fds as fd %d' % fd)
        lines = wait_until(lambda: len(self.lines(seen)) == 3 and self.lines(seen), 5, 'CMD never listed its fds')
        self.assertEqual(lines[:2], ['/dev/null', '/dev/null'], lines)
        self.assertNotIn('anon_inode', lines[2])


class Combined(ServiceTestCase):
    def test_units_first_then_cmd_then_units_stop(self):
        marker = self.path('marker')
        self.unit('setup', '''
            [Service]
            Type=oneshot
            RemainAfterExit=yes
            ExecStart=/bin/sh -c 'echo setup-done > %s'
        ''' % marker)
        self.unit('side', '''
            [Service]
            ExecStart=%s pause
        ''' % PROBE)
        cmd = ['sh', '-c', 'cat "$0"; "$1" --control-socket "$2" status side --json; echo cmd-output; exit 3',
               marker, TENDCTL, self.sock]
        p = self.start_tend(cmd=cmd, wait_ready=False, log_level='notice')
        status = p.wait(10, 'tend did not exit after CMD')
        self.assertEqual(status, 3, 'tend must exit with CMD\'s status')
        out = self.output()
        lines = out.splitlines()
        self.assertIn('setup-done', lines, 'the oneshot unit had not run when CMD started: %r' % out)
        recs = [json.loads(ln) for ln in lines if ln.startswith('[')]
        self.assertEqual(len(recs), 1, out)
        side = recs[0][0]
        self.assertEqual(side['state'], 'running', 'side was not running when CMD started')
        self.assertLess(lines.index('setup-done'), lines.index('cmd-output'))
        self.assertFalse(pid_alive(side['main_pid']), 'a unit process outlived tend')
        if self.cgroup:
            from svctest import cgroup_procs
            self.assertEqual(cgroup_procs(self.cgroup), [], 'processes left in tend\'s cgroup')

    def test_combined_sigterm_gives_cmds_status(self):
        # SPEC §1: SIGTERM in combined mode goes to CMD; tend exits with CMD's
        # status (here the trap's 5), not 0.
        self.unit('side', '''
            [Service]
            ExecStart=%s pause
        ''' % PROBE)
        ready = self.path('cmd-ready')
        cmd = ['sh', '-c', 'trap "exit 5" TERM; touch "$0"; while :; do sleep 0.05; done', ready]
        p = self.start_tend(cmd=cmd, wait_ready=False)
        wait_until(lambda: os.path.exists(ready), 5, 'CMD never started (units not settled?)')
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.wait(10, 'tend did not exit after SIGTERM'), 5, 'tend must exit with CMD\'s status')

    def test_units_stop_after_cmd_on_sigterm(self):
        # SPEC §1, combined mode: SIGTERM → KillSignal to CMD, wait for it
        # (up to --stop-timeout), then the units stop: a CMD that still
        # talks to its sidecars on its way out finds them up (QA: they were
        # stopped at the same time as CMD).
        # The side unit's trap uses builtins only: a `date` it forked while
        # tend's stop was signalling the cgroup got the SIGTERM too and died
        # before writing (an empty stamp under ASan) — as under systemd.
        stamps = self.path('stamps')
        os.mkdir(stamps)
        self.unit('side', '''
            [Service]
            ExecStart=/bin/sh -c 'trap "if [ -e %s/cmd-exit ]; then echo after; else echo before; fi > %s/side-term; exit 0" TERM; while :; do sleep 0.05; done'
        ''' % (stamps, stamps))
        ready = self.path('cmd-ready')
        cmd = ['sh', '-c', 'trap \'date +%s.%N > "$1/cmd-term"; sleep 1; date +%s.%N > "$1/cmd-exit"; exit 5\' TERM; '
               'touch "$0"; while :; do sleep 0.05; done', ready, stamps]
        p = self.start_tend(cmd=cmd, wait_ready=False)
        wait_until(lambda: os.path.exists(ready), 5, 'CMD never started (units not settled?)')
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.wait(10, 'tend did not exit after SIGTERM'), 5, 'tend must exit with CMD\'s status')

        for name in ('cmd-term', 'cmd-exit', 'side-term'):
            self.assertTrue(os.path.exists(os.path.join(stamps, name)), '%s missing: %s' % (name, self.stderr()))
        with open(os.path.join(stamps, 'side-term')) as f:
            self.assertEqual(f.read().strip(), 'after',
                             'the units were stopped before CMD had exited (SPEC §1: CMD first, then the units)')

    def test_cmd_exec_failure_127_126_as_in_entrypoint_mode(self):
        # SPEC §6: exec failure → 127 not found (ENOENT, ENOTDIR), 126 not
        # executable (EACCES); the same codes and message as entrypoint mode
        # (test_entrypoint.py Exec), and the units still stop.
        not_exec = self.script('not-executable', 'exit 0', mode=0o644)
        self.unit('side', '''
            [Service]
            ExecStart=%s pause
        ''' % PROBE)
        for cmd, status, why in (('/nonexistent/tend-it-cmd', 127, 'No such file or directory'),
                                 ('/etc/passwd/tend-it-cmd', 127, 'Not a directory'),
                                 (not_exec, 126, 'Permission denied')):
            with self.subTest(cmd=cmd):
                p = self.start_tend(cmd=[cmd], wait_ready=False)
                self.assertEqual(p.wait(10, 'tend did not exit after CMD failed to exec'), status, self.stderr())
                self.assertIn('%s: %s' % (cmd, why), self.stderr(), 'no message on stderr naming CMD and why')

    def test_failure_action_exit_gives_the_units_status(self):
        self.unit('dies', '''
            [Unit]
            FailureAction=exit
            [Service]
            ExecStart=/bin/sh -c 'sleep 0.5; exit 7'
        ''')
        self.unit('bystander', '''
            [Service]
            ExecStart=%s pause
        ''' % PROBE)
        p = self.start_tend(wait_ready=False)
        line = wait_until(lambda: [ln for ln in self.output().splitlines() if 'bystander.service[' in ln], 5,
                          'bystander never started')[0]
        pid = int(line.split()[-1])
        status = p.wait(10, 'FailureAction=exit did not make tend exit')
        self.assertEqual(status, 7, 'tend must exit with the failed unit\'s status')
        self.assertFalse(pid_alive(pid), 'the other unit was not stopped')


# ---------------------------------------------------------------------------
# Signals to tend
# ---------------------------------------------------------------------------

class Signals(ServiceTestCase):
    def test_sigterm_stops_every_unit_and_exits_0(self):
        rec = self.path('rec')
        self.unit('a', '[Service]\nExecStart=%s pause' % PROBE)
        self.unit('b', '[Service]\nExecStart=/bin/sleep 1000')
        self.unit('c', '[Service]\nExecStart=%s record %s TERM 0 500' % (PROBE, rec))
        self.start_tend('--shutdown-timeout', '5s')
        pids = [self.wait_running(n)['main_pid'] for n in ('a', 'b', 'c')]
        t0 = time.monotonic()
        self.assertEqual(self.stop_tend(timeout=10), 0)
        self.assertLess(time.monotonic() - t0, 5, 'not within --shutdown-timeout')
        for pid in pids:
            self.assertFalse(pid_alive(pid), 'pid %d outlived tend' % pid)
        self.assertEqual(self.lines(rec)[-1:], ['exit %d 0' % pids[2]], 'c was not given time to finish')

    def test_second_sigterm_kills_everything_at_once(self):
        self.unit('slow', '''
            [Service]
            ExecStart=%s record - 0 0 0
            TimeoutStopSec=30s
        ''' % PROBE)
        self.start_tend()
        pid = self.wait_running('slow')['main_pid']
        self.wait_output('ready %d' % pid, message='child-probe never blocked its signals')
        os.kill(self.tend_pid, signal.SIGTERM)
        self.wait_output('sig %d TERM' % pid, message='the first SIGTERM did not reach the unit')
        self.assertTrue(self.tend_proc.running())
        t0 = time.monotonic()
        os.kill(self.tend_pid, signal.SIGTERM)
        status = self.tend_proc.wait(5, 'the second SIGTERM did not end the shutdown')
        self.assertLess(time.monotonic() - t0, 2)
        self.assertEqual(status, 0)
        self.assertFalse(pid_alive(pid))

    def test_sighup_starts_added_and_stops_removed_units(self):
        self.unit('keep', '[Service]\nExecStart=%s pause' % PROBE)
        old = self.unit('old', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        self.wait_running('keep')
        oldpid = self.wait_running('old')['main_pid']
        keeppid = self.st('keep')['main_pid']
        self.unit('new', '[Service]\nExecStart=%s pause' % PROBE)
        os.unlink(old)
        os.kill(self.tend_pid, signal.SIGHUP)
        self.wait_running('new')
        wait_until(lambda: not pid_alive(oldpid), 5, 'the removed unit was not stopped')
        recs = self.statuses()
        self.assertTrue('old.service' not in recs or recs['old.service']['state'] == 'inactive', recs)
        self.assertEqual(recs['keep.service']['main_pid'], keeppid, 'an unchanged unit was touched')
        # Back in DIR: it starts again.
        self.unit('old', '[Service]\nExecStart=%s pause' % PROBE)
        os.kill(self.tend_pid, signal.SIGHUP)
        self.wait_running('old', other_than=oldpid)
        self.assertEqual(self.st('keep')['main_pid'], keeppid)


# ---------------------------------------------------------------------------
# tendctl
# ---------------------------------------------------------------------------

def raw_request(path, command, units):
    """One request on the control socket (docs/control-protocol.md): the result."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(15)
    try:
        s.connect(path)
        s.send(json.dumps({'version': 1, 'command': command, 'units': units}).encode())
        while True:
            m = json.loads(s.recv(1 << 20))
            if m.get('type') == 'result':
                return m
    finally:
        s.close()


class Tendctl(ServiceTestCase):
    def test_commands_and_status_fields(self):
        self.unit('svc', '[Service]\nExecStart=%s pause' % PROBE)
        self.unit('bad', '[Service]\nType=oneshot\nExecStart=/bin/sh -c "exit 4"')
        self.start_tend()
        r = self.wait_running('svc')
        self.assertEqual(set(r), RECORD_FIELDS)
        self.assertEqual((r['version'], r['name'], r['restarts'], r['last_exit'], r['status'], r['result'],
                          r['waiters']), (1, 'svc.service', 0, None, None, 'success', 0))
        self.assertIsInstance(r['main_pid'], int)
        self.assertLess(abs(r['since'] - time.time() * 1e6), 60e6, 'since is not µs of CLOCK_REALTIME')
        self.assertLess(abs(r['since_monotonic'] - monotonic_us()), 60e6,
                        'since_monotonic is not µs of CLOCK_MONOTONIC')
        self.assertLessEqual(r['since_monotonic'], monotonic_us())
        # NAME and NAME.service; an array for one unit too.
        self.assertEqual(json.loads(self.ctl('status', 'svc.service', '--json')[1])[0]['name'], 'svc.service')
        b = self.wait_state('bad', lambda r: r['state'] == 'failed', 5, 'a oneshot exiting 4 did not fail')
        self.assertEqual((b['result'], b['last_exit'], b['main_pid']), ('exit-code', {'code': 4}, None))
        for rec in self.statuses().values():
            self.assertIn(rec['state'], STATES)
            self.assertIn(rec['result'], RESULTS)

        pid = r['main_pid']
        self.ctl('stop', 'svc')
        r = self.st('svc')
        self.assertEqual((r['state'], r['main_pid'], r['result']), ('inactive', None, 'success'))
        self.assertFalse(pid_alive(pid))
        self.assertEqual(r['last_exit'], {'signal': 15, 'core_dumped': False})
        self.ctl('start', 'svc')
        r = self.st('svc')
        self.assertEqual(r['state'], 'running')
        pid = r['main_pid']
        self.ctl('restart', 'svc')
        r = self.st('svc')
        self.assertEqual((r['state'], r['restarts']), ('running', 1))
        self.assertNotEqual(r['main_pid'], pid)
        self.assertFalse(pid_alive(pid))

        status, _, err = self.ctl('start', 'bad', check=False)
        self.assertEqual(status, 1, 'a failed start must exit 1: %r' % err)
        self.assertIn('exit-code', err)
        self.ctl('reset-failed', 'bad')
        b = self.st('bad')
        self.assertEqual((b['state'], b['result']), ('inactive', 'success'))
        self.assertEqual(self.ctl('status', 'nosuch', check=False)[0], 4)
        self.assertEqual(self.ctl('start', 'nosuch', check=False)[0], 5)
        self.assertEqual(self.ctl('frobnicate', check=False)[0], 2)
        self.assertEqual(self.ctl('start', check=False)[0], 2)
        p = subprocess.run([TENDCTL, '--control-socket', self.path('nobody-here'), 'status'],
                           capture_output=True, timeout=10)
        self.assertEqual(p.returncode, 5)

    def test_20_concurrent_restarts_share_one(self):
        self.unit('one', '''
            [Service]
            ExecStartPre=/bin/sleep 1
            ExecStart=%s pause
        ''' % PROBE)
        self.start_tend()
        r = self.wait_running('one', timeout=5)
        before, restarts = r['main_pid'], r['restarts']
        procs = [subprocess.Popen([TENDCTL, '--control-socket', self.sock, 'restart', 'one'],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(20)]
        # Protocol clients too: they see the outcome's main pid.
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(10) as ex:
            answers = list(ex.map(lambda _: raw_request(self.sock, 'restart', ['one']), range(10)))
        for p in procs:
            try:
                out, err = p.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                raise AssertionError('tendctl restart hung')
            self.assertEqual(p.returncode, 0, err)
        pids = {a['units'][0]['main_pid'] for a in answers}
        self.assertTrue(all(a['ok'] for a in answers), answers)
        r = self.st('one')
        self.assertEqual(pids, {r['main_pid']}, 'the concurrent restarts did not share one outcome')
        self.assertNotEqual(r['main_pid'], before)
        self.assertEqual(r['restarts'], restarts + 1, 'more than one restart for concurrent requests')


if __name__ == '__main__':
    unittest.main(verbosity=2)
