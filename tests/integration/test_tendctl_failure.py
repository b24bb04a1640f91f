#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`tendctl status` names the last failed command (issue 18; tendctl(1)
"status"): which Exec*= command (key, path, its place in its list), its pid,
how it ended (exit status with systemd's LSB word, signal, or why its exec
failed) and when — systemctl's "Process: 123 ExecStartPre=/bin/false
(code=exited, status=1/FAILURE)" line — and `show`'s FailedCommand*
properties. Every wait is bounded and names the likely cause."""
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import TENDCTL, ServiceTestCase  # noqa: E402
from tendtest import wait_until  # noqa: E402

TIME = r'\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d'


class FailedCommand(ServiceTestCase):
    def props(self, name):
        out = self.ctl('show', name)[1]
        return dict(ln.split('=', 1) for ln in out.splitlines() if ln.startswith('FailedCommand'))

    def failed(self, name):
        return self.wait_state(name, lambda r: r['state'] == 'failed', 5, 'never failed')

    def test_exec_start_pre_exit_status(self):
        pidfile = self.path('pre.pid')
        self.unit('pre', '''
            [Service]
            ExecStartPre=/bin/true
            ExecStartPre=/bin/sh -c 'echo $$$$ > %s; exit 3'
            ExecStart=/bin/sleep 1100
        ''' % pidfile)
        before = time.time()
        self.start_tend()
        self.failed('pre')
        after = time.time()
        with open(pidfile) as f:
            pid = int(f.read())
        st, out, _ = self.ctl('status', 'pre', '-n', '0', check=False)
        self.assertEqual(st, 3)
        self.assertRegex(out, r'\n +Process: %d ExecStartPre=/bin/sh \(code=exited, status=3/NOTIMPLEMENTED\), '
                         r'command 2 of 2, at %s' % (pid, TIME))
        p = self.props('pre')
        self.assertEqual({k: v for k, v in p.items() if k != 'FailedCommandTimestamp'},
                         {'FailedCommand': 'ExecStartPre', 'FailedCommandIndex': '1', 'FailedCommandCount': '2',
                          'FailedCommandPath': '/bin/sh', 'FailedCommandPID': str(pid), 'FailedCommandCode': '1',
                          'FailedCommandStatus': '3', 'FailedCommandErrno': '0'})
        props = __import__('json').loads(self.ctl('show', 'pre', '-o', 'json')[1])[0]
        self.assertTrue(before * 1e6 - 1e6 <= props['FailedCommandTimestamp'] <= after * 1e6 + 1e6,
                        'the failure\'s time is when it happened: %r' % props['FailedCommandTimestamp'])

    def test_main_killed_and_exec_failed(self):
        self.unit('killed', "[Service]\nExecStart=/bin/sh -c 'kill -KILL $$$$'\n")
        self.unit('noexec', '[Service]\nExecStart=%s\n' % self.path('no-such-program'))
        self.start_tend()
        self.failed('killed')
        self.failed('noexec')
        out = self.ctl('status', 'killed', '-n', '0', check=False)[1]
        self.assertRegex(out, r'Process: \d+ ExecStart=/bin/sh \(code=killed, signal=KILL\), command 1 of 1, at ')
        out = self.ctl('status', 'noexec', '-n', '0', check=False)[1]
        self.assertRegex(out, r'Process: \d+ ExecStart=%s \(exec failed: No such file or directory\)'
                         % re.escape(self.path('no-such-program')))
        self.assertEqual(self.props('noexec')['FailedCommandCode'], '0')
        self.assertEqual(self.props('noexec')['FailedCommandErrno'], '2')

    def test_ignored_clean_and_later_failures(self):
        # '-' commands and clean exits are no failure; a running unit keeps its last one shown
        self.unit('web', '''
            [Service]
            ExecStartPre=-/bin/false
            ExecStart=/bin/sleep 1101
            ExecStartPost=/bin/true
            ExecReload=/bin/sh -c 'exit 9'
        ''')
        self.start_tend()
        self.wait_running('web')
        out = self.ctl('status', 'web', '-n', '0')[1]
        self.assertNotIn('Process:', out, 'a failure of a \'-\' command is ignored, as systemd')
        self.assertEqual(self.props('web'), {})
        # QA L5: reload waits for ExecReload=, and says its failure as systemctl does (exit 1).
        st, _, err = self.ctl('reload', 'web', check=False)
        self.assertEqual(st, 1, err)
        self.assertIn('web.service: reload failed: ExecReload=/bin/sh exited with status 9', err)
        wait_until(lambda: 'Process:' in self.ctl('status', 'web', '-n', '0')[1], 5,
                   lambda: 'the failed ExecReload= never shown; stderr %r' % self.stderr()[-2000:])
        out = self.ctl('status', 'web', '-n', '0')[1]
        self.assertRegex(out, r'Active: active \(running\)')
        self.assertRegex(out, r'Process: \d+ ExecReload=/bin/sh \(code=exited, status=9\), command 1 of 1, at ')



class ReloadWaits(ServiceTestCase):
    """QA L5: `tendctl reload` waits for ExecReload= to run, as `systemctl
    reload` waits for its reload job; exits 1 when a command failed; the
    unit runs on. --no-block does not wait; no ExecReload= is 3, as before."""

    def test_reload_waits_for_exec_reload(self):
        done, go = self.path('reloaded'), self.path('go')
        self.unit('slow', """
            [Service]
            ExecStart=/bin/sleep 1102
            ExecReload=/bin/sh -c 'sleep 1; touch %s'
            ExecReload=-/bin/false
        """ % done)
        self.unit('held', """
            [Service]
            ExecStart=/bin/sleep 1103
            ExecReload=/bin/sh -c 'while [ ! -e %s ]; do sleep 0.02; done; exit 0'
        """ % go)
        self.unit('bad', "[Service]\nExecStart=/bin/sleep 1104\nExecReload=/bin/true\nExecReload=%s" % self.path('nope'))
        self.unit('plain', '[Service]\nExecStart=/bin/sleep 1105')
        self.start_tend()
        r = {n: self.wait_running(n) for n in ('slow', 'held', 'bad', 'plain')}
        t = time.monotonic()
        st, _, err = self.ctl('reload', 'slow', check=False)
        took = time.monotonic() - t
        self.assertEqual(st, 0, err)
        self.assertGreaterEqual(took, 0.9, 'tendctl reload did not wait for ExecReload= (%.2f s)' % took)
        self.assertTrue(os.path.exists(done), 'reload answered before ExecReload= ended')
        # --no-block: answered at once, the reload still runs.
        t = time.monotonic()
        st, _, err = self.ctl('reload', '--no-block', 'held', check=False)
        self.assertEqual(st, 0, err)
        self.assertLess(time.monotonic() - t, 0.9, '--no-block waited')
        open(go, 'w').close()
        # A command that cannot be executed fails the reload: 1, the unit runs on.
        st, _, err = self.ctl('reload', 'bad', check=False)
        self.assertEqual(st, 1, err)
        self.assertIn('bad.service: reload failed: ExecReload=%s could not be executed' % self.path('nope'), err)
        # No ExecReload=: 3, as before.
        st, _, err = self.ctl('reload', 'plain', check=False)
        self.assertEqual(st, 3, err)
        self.assertIn('no ExecReload=', err)
        for n in ('slow', 'held', 'bad', 'plain'):
            z = self.st(n)
            self.assertEqual((z['state'], z['main_pid'], z['restarts']), ('running', r[n]['main_pid'], 0), n)

    def test_refused_second_reload_keeps_the_first_waiting(self):
        """QA19B M1: a second `tendctl reload` while one runs is refused (busy);
        the first client is still answered when ExecReload= ends (it was
        never answered: the refusal unmarked its wait)."""
        began, gate = self.path('began'), self.path('gate')
        self.unit('gated', """
            [Service]
            ExecStart=/bin/sleep 1106
            ExecReload=/bin/sh -c 'touch %s; while [ ! -e %s ]; do sleep 0.02; done'
        """ % (began, gate))
        self.start_tend()
        self.wait_running('gated')
        first = subprocess.Popen([TENDCTL, '--control-socket', self.sock, 'reload', 'gated'],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: os.path.exists(began), 10, 'ExecReload= never began (the first reload not started?)')
            st, _, err = self.ctl('reload', 'gated', check=False)
            self.assertNotEqual(st, 0, 'a second reload while one runs was not refused')
            self.assertIn('busy', err.lower())
            open(gate, 'w').close()
            try:
                out, err = first.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.fail('the first tendctl reload was never answered after ExecReload= ended '
                          '(its wait unmarked by the refused second one?)')
            self.assertEqual(first.returncode, 0, err)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()


if __name__ == '__main__':
    unittest.main()
