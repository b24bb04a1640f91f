#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tend -- CMD under a container seccomp profile that refuses the pidfd system
calls (issue 18, qa18 findings 0 and 0b). tests/helpers/seccomp-refuse loads a
filter answering EPERM (docker < 20.10) or ENOSYS for the named calls, then
execs tend. pidfd_send_signal refused: signals still reach CMD (libexit falls
back to kill(2) on its unreaped child) and tend says so once. pidfd_open,
prctl or eventfd2 refused: tend exits 1 with a line naming the call."""
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import PROBE, TEND, TendTestCase  # noqa: E402

REFUSE = os.environ.get('SECCOMP_REFUSE', '')
BUILDS = [('tend', TEND)] + ([('tend-static', os.environ['TEND_STATIC'])] if os.environ.get('TEND_STATIC') else [])
ERRNOS = [('EPERM', 1), ('ENOSYS', 38)]


class SeccompTestCase(TendTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not os.access(REFUSE, os.X_OK):
            raise unittest.SkipTest('SECCOMP_REFUSE=%r is not executable: run through meson test' % REFUSE)

    def refused(self, binary, errno, calls, *args):
        """Starts binary ARGS under a filter refusing calls with errno."""
        return self.start([REFUSE, str(errno), calls, binary] + list(args))

    def run_refused(self, binary, errno, calls, *args):
        p = self.refused(binary, errno, calls, *args)
        p.popen.stdin.close()
        p.popen.stdin = None
        p.read_until_eof(10, 'tend under seccomp did not finish its output')
        return p.wait(10, 'tend under seccomp did not exit'), p.stderr_text()


class SignalRefused(SeccompTestCase):
    def test_signals_reach_cmd_through_kill(self):
        for build, binary in BUILDS:
            for name, errno in ERRNOS:
                with self.subTest(build=build, errno=name):
                    p = self.refused(binary, errno, 'pidfd_send_signal', '--log-level', 'warning',
                                     '--', PROBE, 'record', '-', 'TERM', '7', '0')
                    child = int(p.readline(5, 'child-probe record never said ready').split()[1])
                    os.kill(p.pid, signal.SIGUSR1)
                    self.assertEqual(p.readline(5, 'SIGUSR1 to tend never reached CMD (no kill(2) fallback '
                                                   'when seccomp refuses pidfd_send_signal?)'),
                                     'sig %d USR1' % child)
                    os.kill(p.pid, signal.SIGTERM)  # docker stop
                    self.assertEqual(p.readline(5, 'SIGTERM to tend never reached CMD (no kill(2) fallback?)'),
                                     'sig %d TERM' % child)
                    self.assertEqual(p.wait(5, 'CMD did not exit on the forwarded SIGTERM'), 7)
                    err = p.stderr_text()
                    said = 'pidfd_send_signal refused (%s): a seccomp profile' % name
                    self.assertEqual(err.count(said), 1, 'the fallback is not said exactly once: %r' % err)
                    self.assertIn('kill(2)', err)
                    self.assertNotIn('forwarding', err, 'a forwarded signal failed: %r' % err)

    def test_silent_at_the_default_level(self):
        """The fallback works: nothing is an error, the default level prints nothing."""
        status, err = self.run_refused(TEND, 38, 'pidfd_send_signal', '--', PROBE, 'exit', '3')
        self.assertEqual((status, err), (3, ''))


class SetupRefused(SeccompTestCase):
    def test_setup_call_named(self):
        """pidfd_open (docker <= 19.03 refuses it too), and calls the pidfd probe
        never names (prctl, eventfd2): the line names the call and seccomp,
        never "(null)" or "the kernel lacks"."""
        calls = [('pidfd_open', 'pidfd_open'), ('pidfd_open,pidfd_send_signal', 'pidfd_open'),
                 ('prctl', 'prctl(PR_SET_CHILD_SUBREAPER)'), ('eventfd2', 'eventfd2')]
        for build, binary in BUILDS:
            for name, errno in ERRNOS:
                for calls_, said in calls:
                    with self.subTest(build=build, errno=name, calls=calls_):
                        status, err = self.run_refused(binary, errno, calls_, '--', PROBE, 'exit', '0')
                        self.assertEqual(status, 1, err)
                        self.assertIn('%s refused or missing (%s)' % (said, name), err)
                        self.assertIn('seccomp', err)
                        self.assertNotIn('(null)', err)
                        self.assertNotIn('the kernel lacks', err)
                        self.assertEqual(err.count('\n'), 1, 'not one line: %r' % err)


if __name__ == '__main__':
    unittest.main(verbosity=2)
