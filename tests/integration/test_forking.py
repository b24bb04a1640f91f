#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Type=forking (SPEC §4; docs/tend.service.5.md "Type=forking") with a small
real daemon (tests/helpers/forkd.py: double fork, PID file, a TCP port that
answers the daemon's pid): the main process from PIDFile= and guessed
(GuessMainPID=), systemd 252's PID-file trust (another user's file naming a
process outside the unit; an unsafe symlink), a daemon that exits at once or
before its file is read keeps its exact status, the start process failing
or hanging, SIGKILL of the main process with and without Restart=, $MAINPID
for ExecReload=, MAINPID= from the notify socket, and Type=dbus refused."""
import os
import shlex
import shutil
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import wait_until  # noqa: E402
from svctest import ServiceTestCase, cgroup_procs, free_port, kill_pid, pid_alive  # noqa: E402

FORKD = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'helpers', 'forkd.py')
NOBODY = 65534


def ask(port):
    """The pid the daemon on port answers, or None."""
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=2) as s:
            return int(s.recv(64).decode().strip())
    except (OSError, ValueError):
        return None


class ForkdCase(ServiceTestCase):
    """Units that run tests/helpers/forkd.py."""

    def forkd(self, name, args, extra=''):
        self.unit(name, '''
            [Service]
            Type=forking
            ExecStart=%s %s %s
            %s
        ''' % (sys.executable, FORKD, args, extra))

    def failed_with(self, name, result, timeout=10):
        return self.wait_state(name, lambda r: r['state'] == 'failed', timeout,
                               'never failed (expected result %s)' % result)

    def family(self, name, main):
        if self.cgroup:
            return cgroup_procs(os.path.join(self.cgroup, name + '.service'))
        out = subprocess.run(['pgrep', '-s', str(main)], capture_output=True, text=True).stdout.split()
        return [int(p) for p in out]



class Forking(ForkdCase):
    def test_pid_file(self):
        """The main process is the pid in PIDFile=, the daemon serves, and
        a stop ends it (exit 0 on SIGTERM: inactive, success)."""
        port, pidfile = free_port(), self.path('d.pid')
        self.forkd('d', '--pidfile %s --port %d --workers 2' % (pidfile, port), 'PIDFile=%s' % pidfile)
        self.start_tend()
        r = self.wait_running('d', timeout=10)
        with open(pidfile) as f:
            self.assertEqual(r['main_pid'], int(f.read()))
        self.assertEqual(ask(port), r['main_pid'], 'the daemon on the port is not the main process')
        # systemd's ExecMainStatus: the main process's; the start process's exit 0 is not one.
        self.assertIsNone(r['last_exit'], 'a running forking unit shows its start process\'s exit')
        pids = self.family('d', r['main_pid'])
        self.assertEqual(len(pids), 3, 'the daemon and its 2 workers: %r' % pids)
        for p in pids:
            self.addCleanup(kill_pid, p)
        self.ctl('stop', 'd')
        r = self.st('d')
        self.assertEqual((r['state'], r['result']), ('inactive', 'success'))
        self.assertEqual(r['last_exit'], {'code': 0})
        wait_until(lambda: not any(pid_alive(p) for p in pids), 5, 'processes of the daemon outlived its stop')

    def test_late_pid_file(self):
        """A PID file written after the start process exited is read when
        it appears (systemd waits for it within TimeoutStartSec=)."""
        port, pidfile = free_port(), self.path('d.pid')
        self.forkd('d', '--pidfile %s --port %d --late-pidfile 0.5' % (pidfile, port), 'PIDFile=%s' % pidfile)
        self.start_tend()
        r = self.wait_running('d', timeout=10)
        self.assertEqual(ask(port), r['main_pid'])
        self.addCleanup(kill_pid, r['main_pid'])

    def test_guess(self):
        """Without PIDFile=: the one child of tend left in the unit (the
        daemon; its workers are its own children)."""
        port = free_port()
        self.forkd('d', '--port %d --workers 2' % port)
        self.start_tend()
        r = self.wait_running('d', timeout=10)
        self.addCleanup(kill_pid, r['main_pid'])
        self.assertEqual(ask(port), r['main_pid'], 'the guessed main process is not the daemon')

    def test_guess_off(self):
        """GuessMainPID=no: running without a main process; a stop still
        ends every process of the unit."""
        port = free_port()
        self.forkd('d', '--port %d' % port, 'GuessMainPID=no')
        self.start_tend()
        r = self.wait_state('d', lambda r: r['state'] == 'running', 10, 'never running')
        self.assertIsNone(r['main_pid'])
        daemon = ask(port)
        self.assertIsNotNone(daemon, 'the daemon does not answer')
        self.addCleanup(kill_pid, daemon)
        self.ctl('stop', 'd')
        wait_until(lambda: not pid_alive(daemon), 5, 'the daemon outlived the stop of a unit without a main pid')

    @unittest.skipUnless(os.geteuid() == 0, 'needs root to write a file as another user')
    def test_untrusted_pid_file(self):
        """Another user's PID file is trusted only for a process of the
        unit (systemd 252): a pid outside the unit fails the start with the
        file and the reason; the same file naming the daemon is accepted."""
        outsider = self.start(['sleep', '60'])
        pidfile = self.path('o.pid')
        self.forkd('o', '--pidfile %s --owner %d --write-pid %d' % (pidfile, NOBODY, outsider.pid),
                   'PIDFile=%s' % pidfile)
        inside = self.path('i.pid')
        self.forkd('i', '--pidfile %s --owner %d' % (inside, NOBODY), 'PIDFile=%s' % inside)
        self.start_tend()
        r = self.failed_with('o', 'resources')
        self.assertEqual(r['result'], 'resources')
        self.assertIn('PIDFile=%s refused: owned by uid %d' % (pidfile, NOBODY), self.stderr())
        self.assertIn('PID %d is not a process of the unit' % outsider.pid, self.stderr())
        self.assertTrue(pid_alive(outsider.pid), 'the outsider was signalled')
        r = self.wait_running('i', timeout=10)
        self.addCleanup(kill_pid, r['main_pid'])
        with open(inside) as f:
            self.assertEqual(r['main_pid'], int(f.read()))

    @unittest.skipUnless(os.geteuid() == 0, 'needs root to own files as other users')
    def test_unsafe_symlink(self):
        """A PID file reached through a symlink owned by another user than
        its directory's (CHASE_SAFE's unsafe step) names a pid outside the
        unit: refused, although the file itself is root's."""
        outsider = self.start(['sleep', '60'])
        real = self.path('real.pid')
        d = self.path('nobodys')
        os.mkdir(d)
        os.chown(d, NOBODY, NOBODY)
        link = os.path.join(d, 'd.pid')
        os.symlink(real, link)
        os.lchown(link, NOBODY - 1, NOBODY - 1)
        self.forkd('d', '--pidfile %s --write-pid %d' % (real, outsider.pid), 'PIDFile=%s' % link)
        self.start_tend()
        r = self.failed_with('d', 'resources')
        self.assertEqual(r['result'], 'resources')
        self.assertIn('PIDFile=%s refused: reached through an unsafe symlink' % link, self.stderr())
        self.assertTrue(pid_alive(outsider.pid))

    @unittest.skipUnless(os.geteuid() == 0, 'a root-owned file naming another process')
    def test_pid_file_problems_said_once(self):
        """Each PID file that names no main process says why, once, then the
        start fails: at TimeoutStartSec= while the file may still be
        rewritten (systemd waits likewise), at once for init's pid."""
        dead = subprocess.Popen(['true'])
        dead.wait()
        outsider = self.start(['sleep', '60'])
        no_pid = 'holds no PID (a decimal number > 0 on its first line): waiting for it to be rewritten'
        cases = {
            'abc': ('abc', no_pid), 'neg': ('-5', no_pid), 'big': ('99999999999', no_pid),
            'zero': ('0', no_pid),
            'dead': ('  %d  ' % dead.pid, 'names PID %d, which does not exist' % dead.pid),
            'outsider': ('%d' % outsider.pid, 'names PID %d, which is not tend\'s child' % outsider.pid),
            'missing': (None, 'is not there yet: waiting for it'),
        }
        for name, (text, _) in cases.items():
            pidfile = self.path(name + '.pid')
            args = '--pidfile %s --pid-text=%s' % (pidfile, shlex.quote(text)) if text else ''
            self.forkd(name, args, 'PIDFile=%s\nTimeoutStartSec=1' % pidfile)
        self.forkd('one', '--pidfile %s --pid-text 1' % self.path('one.pid'), 'PIDFile=%s' % self.path('one.pid'))
        self.start_tend()
        for name, (_, why) in cases.items():
            r = self.failed_with(name, 'timeout')
            self.assertEqual(r['result'], 'timeout', name)
            said = '%s.service: PIDFile=%s %s' % (name, self.path(name + '.pid'), why)
            self.assertEqual(self.stderr().count(said), 1, '%s: %r not said once in %r' % (name, said, self.stderr()))
        r = self.failed_with('one', 'resources')
        self.assertEqual(r['result'], 'resources')
        self.assertIn("one.service: PIDFile=%s refused: PID 1 is tend's or init's" % self.path('one.pid'),
                      self.stderr())
        self.assertTrue(pid_alive(outsider.pid), 'the outsider was signalled')

    def test_daemon_exits_at_once(self):
        """The daemon exits with 7 right after its start process exited 0:
        it is the main process and the unit fails with its status."""
        pidfile = self.path('d.pid')
        self.forkd('d', '--pidfile %s --daemon-exit 7' % pidfile, 'PIDFile=%s' % pidfile)
        self.start_tend()
        r = self.failed_with('d', 'exit-code')
        self.assertEqual((r['result'], r['last_exit']), ('exit-code', {'code': 7}))
        # As systemd: a dead unit's PID file is removed (no stale pid next time).
        self.assertFalse(os.path.exists(pidfile), 'the PID file of the failed unit is still there')

    def test_daemon_exits_before_read(self):
        """The daemon is gone — reaped by tend as an orphan — before its
        start process exits: its status 7 is still the unit's."""
        pidfile = self.path('d.pid')
        self.forkd('d', '--pidfile %s --daemon-exit 7 --exit-before-read' % pidfile, 'PIDFile=%s' % pidfile)
        self.start_tend()
        r = self.failed_with('d', 'exit-code')
        self.assertEqual((r['result'], r['last_exit']), ('exit-code', {'code': 7}))
        self.assertIn('exited before tend read the file', self.stderr())

    def test_start_process_fails(self):
        self.forkd('d', '--parent-exit 1')
        self.start_tend()
        r = self.failed_with('d', 'exit-code')
        self.assertEqual((r['result'], r['last_exit']), ('exit-code', {'code': 1}))

    def test_start_process_hangs(self):
        self.forkd('d', '--parent-hang', 'TimeoutStartSec=1')
        self.start_tend()
        r = self.failed_with('d', 'timeout', timeout=10)
        self.assertEqual(r['result'], 'timeout')

    def test_sigkill_main(self):
        """SIGKILL of the main process: failed/signal, its workers gone (the
        stop sequence after a main death); with Restart=on-failure a new
        main process."""
        pidfile = self.path('d.pid')
        self.forkd('d', '--pidfile %s --workers 2' % pidfile, 'PIDFile=%s' % pidfile)
        pidfile2, port2 = self.path('r.pid'), free_port()
        self.forkd('r', '--pidfile %s --workers 2 --port %d' % (pidfile2, port2),
                   'PIDFile=%s\nRestart=on-failure\nRestartSec=100ms' % pidfile2)
        self.start_tend()
        for name in ('d', 'r'):
            r = self.wait_running(name, timeout=10)
            pids = self.family(name, r['main_pid'])
            self.assertEqual(len(pids), 3, '%s: the daemon and its 2 workers: %r' % (name, pids))
            for p in pids:
                self.addCleanup(kill_pid, p)
            kill_pid(r['main_pid'])
            if name == 'd':
                r = self.failed_with('d', 'signal')
                self.assertEqual((r['result'], r['last_exit']), ('signal', {'signal': 9, 'core_dumped': False}))
            else:
                r2 = self.wait_running('r', timeout=10, other_than=r['main_pid'])
                self.assertEqual(ask(port2), r2['main_pid'])
                self.addCleanup(kill_pid, r2['main_pid'])
            wait_until(lambda: not any(pid_alive(p) for p in pids), 5,
                       '%s: workers outlived the death of their main process' % name)

    def test_reload_mainpid(self):
        """ExecReload= and ExecStop= see $MAINPID (systemd sets it for
        control processes while the main process is known)."""
        pidfile, hup, seen = self.path('d.pid'), self.path('hup.log'), self.path('seen')
        self.forkd('d', '--pidfile %s --hup-log %s' % (pidfile, hup),
                   'PIDFile=%s\nExecReload=/bin/sh -c \'echo reload $MAINPID >> %s; kill -HUP $MAINPID\'\n'
                   'ExecStop=/bin/sh -c \'echo stop $MAINPID >> %s; kill $MAINPID\'' % (pidfile, seen, seen))
        self.start_tend()
        r = self.wait_running('d', timeout=10)
        self.addCleanup(kill_pid, r['main_pid'])
        self.ctl('reload', 'd')
        wait_until(lambda: self.lines(hup) == ['hup %d' % r['main_pid']], 5, 'the daemon did not get SIGHUP')
        self.ctl('stop', 'd')
        self.assertEqual(self.lines(seen), ['reload %d' % r['main_pid'], 'stop %d' % r['main_pid']])

    def test_notify_mainpid(self):
        """MAINPID= from the notify socket (NotifyAccess=all) names the main
        process of a forking unit."""
        child = self.path('child')
        self.forkd('d', '--notify-mainpid %s' % child, 'GuessMainPID=no\nNotifyAccess=all')
        self.start_tend()
        r = self.wait_running('d', timeout=10)
        with open(child) as f:
            self.assertEqual(r['main_pid'], int(f.read()))
        for p in self.family('d', r['main_pid']):
            self.addCleanup(kill_pid, p)

    def test_dbus_refused(self):
        self.unit('b', '[Service]\nType=dbus\nBusName=org.example.B\nExecStart=/bin/true')
        self.start_tend()
        self.assertIn('Type=dbus is not supported: tend does not watch D-Bus names', self.stderr())


class ForkingFallback(ForkdCase):
    """Without cgroups (SPEC §4's process-group fallback, forced as
    test_service_cgroup.py does: cgroup2 read-only in a mount namespace), a
    classic daemon (fork, setsid, fork) is outside the start process's
    group: found through PIDFile= or the guess among the processes
    re-parented to tend during the start, its process group signalled."""

    def start_tend(self, *extra, **kw):
        if not shutil.which('unshare'):
            self.skipTest('no unshare(1)')
        with open('/proc/self/mountinfo') as f:
            mount_point = next((ln.split()[4] for ln in f if ' - cgroup2 ' in ln), None)
        if not mount_point:
            self.skipTest('no cgroup2 mount')
        probe = subprocess.run(['unshare', '-m', 'mount', '-o', 'remount,bind,ro', mount_point],
                               capture_output=True, text=True, timeout=10)
        if probe.returncode != 0:
            self.skipTest('cannot remount %s read-only in a mount namespace: %s' % (mount_point, probe.stderr))
        wrap = ['unshare', '-m', 'sh', '-c', 'mount -o remount,bind,ro "$0" && exec "$@"', mount_point]
        p = super().start_tend(*extra, cgroup=False, wrap=wrap, **kw)
        self.assertIn('using process groups', self.stderr(), 'the fallback was not forced')
        return p

    def group(self, main):
        """The processes of main's process group (the daemon's and its workers')."""
        out = subprocess.run(['pgrep', '-g', str(os.getpgid(main))], capture_output=True, text=True).stdout.split()
        return [int(p) for p in out]

    def daemon_with_worker(self, name, args, extra=''):
        self.forkd(name, args + ' --workers 1', extra)
        self.start_tend()
        r = self.wait_running(name, timeout=10)
        pids = self.group(r['main_pid'])
        for p in pids:
            self.addCleanup(kill_pid, p)
        self.assertEqual(len(pids), 2, 'the daemon and its worker: %r' % pids)
        return r, pids

    def test_fallback_pid_file_written_late(self):
        """The start process exits before its daemon (forked after setsid)
        writes the file: the unit waits for it, the file's pid is the main
        process, and a stop ends the daemon and its worker; started again,
        tend's shutdown ends them too (SPEC §7)."""
        port, pidfile = free_port(), self.path('d.pid')
        r, pids = self.daemon_with_worker('d', '--no-wait --pidfile %s --port %d' % (pidfile, port),
                                          'PIDFile=%s' % pidfile)
        with open(pidfile) as f:
            self.assertEqual(r['main_pid'], int(f.read()))
        self.assertEqual(ask(port), r['main_pid'], 'the daemon on the port is not the main process')
        self.ctl('stop', 'd')
        self.assertEqual((self.st('d')['state'], self.st('d')['result']), ('inactive', 'success'))
        wait_until(lambda: not any(pid_alive(p) for p in pids), 5, 'the daemon or its worker outlived the stop')
        self.ctl('start', 'd')
        r = self.wait_running('d', timeout=10)
        pids = self.group(r['main_pid'])
        for p in pids:
            self.addCleanup(kill_pid, p)
        self.ctl('shutdown')
        wait_until(lambda: self.tend_proc.running() is False, 15, 'tend did not exit at shutdown')
        wait_until(lambda: not any(pid_alive(p) for p in pids), 5, 'processes of the unit outlived tend')

    def test_fallback_guess(self):
        """Without PIDFile=: the daemon re-parented to tend during the start
        is guessed; the unit runs while it does and a stop ends it and its
        worker (before: inactive/success, the daemon left running)."""
        port = free_port()
        r, pids = self.daemon_with_worker('d', '--port %d' % port)
        self.assertEqual(ask(port), r['main_pid'], 'the guessed main process is not the daemon')
        self.ctl('stop', 'd')
        wait_until(lambda: not any(pid_alive(p) for p in pids), 5, 'the daemon or its worker outlived the stop')

    def test_fallback_sigkill_main_takes_the_worker(self):
        """The daemon SIGKILLed: failed/signal, and its worker (in the
        daemon's process group, outside the start process's) is gone."""
        pidfile = self.path('d.pid')
        r, pids = self.daemon_with_worker('d', '--pidfile %s' % pidfile, 'PIDFile=%s' % pidfile)
        kill_pid(r['main_pid'])
        r = self.failed_with('d', 'signal')
        self.assertEqual(r['result'], 'signal')
        wait_until(lambda: not any(pid_alive(p) for p in pids), 5, 'the worker outlived its daemon')


if __name__ == '__main__':
    unittest.main(verbosity=2)
