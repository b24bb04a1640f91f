#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Keys of the Debian corpus (issue 16, helper "corpus"; docs/tend.service.5.md
"MORE KEYS"), each observed on a real process under the built tend:
UnsetEnvironment=, RestartKillSignal=, SendSIGHUP=, PermissionsStartOnly=,
TasksMax= (cgroup mode: pids.max and a fork refused past it; process-group
mode: the warning), the specifiers (%H %m %t …) in what a process gets, and
StandardOutput=journal+console (tend's default output). Root only (User=,
cgroups): otherwise it skips (77)."""
import os
import pwd
import shutil
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import ServiceTestCase, wait_exec  # noqa: E402
from tendtest import wait_until  # noqa: E402


class UnitKeys(ServiceTestCase):
    def setUp(self):
        super().setUp()
        os.chmod(self.tmp.name, 0o755)
        self.pub = self.path('pub')
        os.mkdir(self.pub)
        os.chmod(self.pub, 0o777)

    def out(self, name):
        return os.path.join(self.pub, name + '.out')

    def read(self, name):
        try:
            with open(self.out(name)) as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def wait_file(self, name, pred, message, timeout=10):
        wait_until(lambda: pred(self.read(name)), timeout,
                   lambda: '%s: %r; statuses %r; tend stderr %r' % (message, self.read(name), self.statuses(),
                                                                    self.stderr()[-3000:]))
        return self.read(name)

    def test_unset_environment(self):
        """Names and exact assignments are removed from what the process
        gets, after Environment= and EnvironmentFile= (and tend's own: $PATH
        too); an assignment that does not match exactly stays."""
        env_file = self.path('env')
        with open(env_file, 'w') as f:
            f.write('FROM_FILE=1\nKEEP_FILE=2\n')
        self.unit('env', """
            [Service]
            Type=oneshot
            Environment=A=1 B=2 C=3
            EnvironmentFile=%s
            UnsetEnvironment=A C=4 FROM_FILE PATH
            ExecStart=/usr/bin/env
            StandardOutput=file:%s
        """ % (env_file, self.out('env')))
        self.start_tend()
        out = self.wait_file('env', lambda t: 'KEEP_FILE=2' in t, 'env never wrote its environment')
        lines = out.splitlines()
        self.assertNotIn('A=1', lines)
        self.assertIn('B=2', lines)
        self.assertIn('C=3', lines)  # C=4 names another value
        self.assertFalse([ln for ln in lines if ln.startswith(('FROM_FILE=', 'PATH='))], lines)

    def stop_signal_unit(self, name, extra):
        """A unit whose shell records each signal it gets, by name, and exits
        on TERM/INT/USR1."""
        log = self.out(name)
        self.unit(name, """
            [Service]
            ExecStart=/bin/sh -c 'for s in HUP TERM INT USR1 CONT; do trap "echo $s >> %s; case $s in HUP|CONT) ;; *) exit 0;; esac" $s; done; echo up >> %s; while :; do sleep 0.1; done'
            %s
        """ % (log, log, extra))
        return log

    def test_restart_kill_signal(self):
        """tendctl restart stops with RestartKillSignal=, tendctl stop with
        KillSignal= (systemd.kill(5))."""
        self.stop_signal_unit('rks', 'KillSignal=SIGINT\nRestartKillSignal=SIGUSR1')
        self.start_tend()
        first = self.wait_running('rks')['main_pid']
        self.wait_file('rks', lambda t: 'up' in t, 'the shell never started')
        self.ctl('restart', 'rks')
        self.wait_running('rks', other_than=first)
        out = self.wait_file('rks', lambda t: t.count('up') == 2, 'no second start')
        self.assertIn('USR1', out.split())
        self.assertNotIn('INT', out.split())
        self.ctl('stop', 'rks')
        out = self.wait_file('rks', lambda t: 'INT' in t.split(), 'the stop did not send KillSignal=SIGINT')
        self.assertEqual(out.split().count('USR1'), 1, out)

    def test_send_sighup(self):
        """SendSIGHUP=yes: SIGHUP right after KillSignal=; without it no
        SIGHUP (the shells' TERM traps do not exit)."""
        log = self.out('hup')
        self.unit('hup', """
            [Service]
            ExecStart=/bin/sh -c 'trap "echo TERM >> %s" TERM; trap "echo HUP >> %s; exit 0" HUP; echo up >> %s; while :; do sleep 0.1; done'
            SendSIGHUP=yes
        """ % (log, log, log))
        self.unit('nohup', """
            [Service]
            ExecStart=/bin/sh -c 'trap "echo TERM >> %s" TERM; trap "echo HUP >> %s; exit 0" HUP; echo up >> %s; while :; do sleep 0.1; done'
            TimeoutStopSec=1
        """ % ((self.out('nohup'),) * 3))
        self.start_tend()
        self.wait_file('hup', lambda t: 'up' in t, 'the shell never started')
        self.wait_file('nohup', lambda t: 'up' in t, 'the shell never started')
        self.ctl('stop', 'hup')
        out = self.wait_file('hup', lambda t: 'HUP' in t, 'SendSIGHUP=yes sent no SIGHUP')
        self.assertEqual(out.split()[0], 'up')  # the shell runs its traps by signal number: HUP, then TERM
        self.ctl('stop', 'nohup')
        self.wait_state('nohup', lambda r: r['state'] in ('inactive', 'failed'), 10, 'nohup never stopped')
        self.assertNotIn('HUP', self.read('nohup').split())

    def test_permissions_start_only(self):
        """PermissionsStartOnly=yes: ExecStartPre= runs as root (as with '+'),
        ExecStart= as User=; without it both as User=."""
        try:
            pwd.getpwnam('nobody')
        except KeyError:
            self.skipTest('no user "nobody"')
        for name, pso in (('pso', 'yes'), ('plain', 'no')):
            self.unit(name, """
                [Service]
                Type=oneshot
                User=nobody
                PermissionsStartOnly=%s
                ExecStartPre=/bin/sh -c 'id -u > %s'
                ExecStart=/bin/sh -c 'id -u > %s'
            """ % (pso, self.out(name + '-pre'), self.out(name + '-start')))
        self.start_tend()
        nobody = str(pwd.getpwnam('nobody').pw_uid)
        for name, pre in (('pso', '0'), ('plain', nobody)):
            self.wait_file(name + '-start', lambda t: t.strip(), '%s never ran ExecStart=' % name)
            self.assertEqual((self.read(name + '-pre').strip(), self.read(name + '-start').strip()), (pre, nobody),
                             name)

    def test_tasks_max_cgroup(self):
        """TasksMax=4 in cgroup mode: the unit's cgroup has pids.max 4, and
        forks past it fail in the unit. Where cgroup2 has no pids controller
        (a hybrid hierarchy) tend says it cannot enforce it."""
        self.unit('tasks', """
            [Service]
            TasksMax=4
            ExecStart=/bin/sh -c 'for i in 1 2 3 4 5 6; do sleep 30 & done; echo forked >> %s; wait'
        """ % self.out('tasks'))
        cg = self.make_cgroup()
        if not cg:
            self.skipTest('no cgroup for tend')
        with open(os.path.join(cg, 'cgroup.controllers')) as f:
            has_pids = 'pids' in f.read().split()
        self.start_tend(cgroup=cg)
        self.wait_running('tasks')
        self.wait_file('tasks', lambda t: 'forked' in t, 'the loop never ended')
        if not has_pids:
            wait_until(lambda: 'tasks.service: TasksMax= is not enforced: cannot set pids.max' in self.stderr(), 5,
                       lambda: 'no warning: %r' % self.stderr())
            self.skipTest('cgroup2 here has no pids controller (the warning is said)')
        d = next(os.path.join(cg, n) for n in os.listdir(cg) if n.startswith('tasks'))
        with open(os.path.join(d, 'pids.max')) as f:
            self.assertEqual(f.read().strip(), '4')
        with open(os.path.join(d, 'pids.current')) as f:
            self.assertLessEqual(int(f.read()), 4)
        with open(os.path.join(d, 'pids.events')) as f:
            self.assertNotEqual(f.read().split(), ['max', '0'], 'no fork was refused')

    def test_tasks_max_process_groups(self):
        """In the process-group fallback (cgroup2 read-only) TasksMax= cannot
        be enforced: one warning at the start names it."""
        if not shutil.which('unshare'):
            self.skipTest('no unshare(1)')
        with open('/proc/self/mountinfo') as f:
            mount_point = next(ln.split()[4] for ln in f if ' - cgroup2 ' in ln)
        self.unit('tasks', """
            [Service]
            TasksMax=4
            ExecStart=/bin/sleep 30
        """)
        wrap = ['unshare', '-m', 'sh', '-c', 'mount -o remount,bind,ro "$0" && exec "$@"', mount_point]
        self.start_tend(cgroup=False, wrap=wrap)
        self.wait_running('tasks')
        wait_until(lambda: 'tasks.service: TasksMax= is not enforced: tend runs without cgroups' in self.stderr(), 5,
                   lambda: 'no warning: %r' % self.stderr())
        self.assertEqual(self.stderr().count('TasksMax='), 1, self.stderr())

    def test_specifiers_and_console_output(self):
        """%H %m %t %u %y in what the process gets, as systemd's system manager
        resolves them; StandardOutput=journal+console goes to tend's default
        output (stdout with a prefix, tend not under systemd)."""
        path = self.unit('spec', """
            [Service]
            Type=oneshot
            ExecStart=/bin/echo host=%H machine=%m run=%t user=%u file=%y
            StandardOutput=journal+console
        """)
        env = dict(os.environ)
        env.pop('JOURNAL_STREAM', None)
        self.start_tend(env=env)
        with open('/etc/machine-id') as f:
            mid = f.read().strip()
        want = 'host=%s machine=%s run=/run user=root file=%s' % (socket.gethostname(), mid, os.path.realpath(path))
        wait_until(lambda: want in self.output(), 10,
                   lambda: 'no %r on tend stdout: %r; stderr %r' % (want, self.output(), self.stderr()[-2000:]))
        self.assertIn('spec.service[', self.output())


if __name__ == '__main__':
    if os.geteuid() != 0:
        print('needs root (User=, cgroups)')
        sys.exit(77)
    unittest.main()
