#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tend's entrypoint mode as PID 1 of a new PID namespace (SPEC §1, §6):
`unshare -pf --mount-proc --kill-child tend -- …`. tend is found by pid as
the child of unshare (after its exec), and signalled by that pid from outside
the namespace. Skips (exit 77) when a PID namespace cannot be created."""
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import (LEFTOVERS_SCRIPT, PROBE, TEND, TendTestCase, check_leftovers,  # noqa: E402
                      children_of, leftovers_by_role, wait_until, zombies_of)

UNSHARE = ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child']


def can_unshare():
    try:
        r = subprocess.run(UNSHARE + ['true'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=10)
    except FileNotFoundError:
        return 'unshare(1) is not installed'
    if r.returncode != 0:
        return 'cannot create a PID namespace here (%s)' % r.stderr.decode().strip()
    return None


def ns_pid(pid):
    """pid's pid in its innermost namespace (the last NSpid field)."""
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('NSpid:'):
                return int(line.split()[-1])
    return None


class Pid1(TendTestCase):
    def start_pid1(self, *args, **kw):
        """Starts unshare … tend ARGS; returns (unshare's Proc, tend's pid)."""
        p = self.start(UNSHARE + [TEND] + list(args), **kw)
        tend_exe = os.path.realpath(TEND)

        def tend_pid():
            for c in children_of(p.pid):
                try:
                    if os.readlink('/proc/%d/exe' % c) == tend_exe:
                        return c
                except FileNotFoundError:
                    pass
            return None
        pid = wait_until(tend_pid, 5, 'unshare did not start tend (exec failed?); stderr %r' % p.stderr_text())
        self.assertEqual(ns_pid(pid), 1, 'tend is not PID 1 of its namespace')
        return p, pid

    def test_orphans_reaped(self):
        p, tend = self.start_pid1('--log-level', 'debug', '--', PROBE, 'orphans', '100', '4')
        self.assertEqual(p.readline(10, 'child-probe orphans did not finish forking'), 'spawned 100')
        wait_until(lambda: p.stderr_text().count('reaped orphan') >= 100, 10,
                   lambda: 'tend (PID 1) did not reap 100 orphans: %d reaped, zombies under it %r'
                   % (p.stderr_text().count('reaped orphan'), zombies_of(tend)))
        wait_until(lambda: not zombies_of(tend), 5, lambda: 'zombies left under tend (PID 1): %r' % zombies_of(tend))
        p.write(b'\n')
        self.assertEqual(p.wait(5, 'tend (PID 1) did not exit'), 4)
        self.assertEqual(p.stderr_text().count('reaped orphan'), 100)

    def test_signals_reach_child_exit_status(self):
        p, tend = self.start_pid1('--', PROBE, 'record', '-', 'TERM', '7', '0')
        child_ns = int(p.readline(5, 'child-probe record never said ready').split()[1])
        for name in ('HUP', 'USR1', 'INT', 'TERM'):
            os.kill(tend, getattr(signal, 'SIG' + name))
            self.assertEqual(p.readline(5, 'SIG%s sent to tend (PID 1) never reached the child' % name),
                             'sig %d %s' % (child_ns, name))
        self.assertEqual(p.wait(5, 'tend (PID 1) did not exit with its child'), 7)

    def test_sigterm_kills_default_child_143(self):
        p, tend = self.start_pid1('--', PROBE, 'pause')
        p.readline(5, 'child-probe pause never said ready')
        os.kill(tend, signal.SIGTERM)
        self.assertEqual(p.wait(5, 'SIGTERM to tend (PID 1) did not reach its child'), 143)

    def test_leftovers_term_then_kill(self):
        slow, stubborn = self.path('slow'), self.path('stubborn')
        p, tend = self.start_pid1('--stop-timeout', '2500ms', '--log-level', 'info', '--', 'sh', '-c',
                                  LEFTOVERS_SCRIPT, PROBE, slow, stubborn)
        # The probes print their namespace pids; map them to ours through the
        # process tree (all three are children of the sh, the child of tend).
        child = wait_until(lambda: children_of(tend), 5, 'tend has no child')[0]
        kids = wait_until(lambda: len(children_of(child)) == 3 and children_of(child), 5,
                          'the leftovers did not start')
        by_ns = {ns_pid(k): k for k in kids}
        left = leftovers_by_role(p, slow, stubborn, translate=by_ns)
        t0 = time.monotonic()
        p.write(b'\n')
        self.assertEqual(p.wait(10, 'tend (PID 1) did not exit after its child'), 5)
        check_leftovers(self, left, slow, stubborn, time.monotonic() - t0, p.stderr_text())


if __name__ == '__main__':
    why = can_unshare()
    if why:
        print('skip: %s' % why)
        sys.exit(77)
    unittest.main(verbosity=2)
