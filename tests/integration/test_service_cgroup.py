#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Service mode with cgroups (SPEC §4 "cgroups", "Stop", "Signals to
groups"), and the process-group fallback's documented limit. Suite
`privileged`: needs root and a writable cgroup2 mount (found as SPEC §4 says,
from /proc/self/mountinfo); without them it prints "skip: reason" and exits 77.

Each test makes a fresh cgroup of its own under this process's cgroup, starts
tend inside it (its pid written to that cgroup.procs before exec), and
removes it at the end (svctest.ServiceTestCase)."""
import os
import shutil
import subprocess
import sys
import unittest
from time import monotonic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import PROBE, exited, wait_pidfd, wait_until  # noqa: E402
from svctest import (ServiceTestCase, cgroup_populated, cgroup_procs, cgroup_usable, kill_pid,  # noqa: E402
                     pid_alive)

# The main process starts a grandchild that leaves the unit's session and
# process group (setsid), which records its own pid, then waits.
SETSID_GRANDCHILD = '''
setsid sh -c 'echo $$ > "$0"; exec sleep 1000' "$1" &
exec "$2" pause
'''


class ControlGroup(ServiceTestCase):
    def setUp(self):
        super().setUp()
        self.run_sh = self.script('gc.sh', SETSID_GRANDCHILD)
        self.gc_file = self.path('grandchild')

    def unit_with_grandchild(self, name, extra=''):
        self.unit(name, '''
            [Service]
            ExecStart=/bin/sh %s %s %s
            %s
        ''' % (self.run_sh, self.gc_file, PROBE, extra))

    def grandchild(self):
        pid = int(wait_until(lambda: self.lines(self.gc_file), 5, 'the grandchild never started')[0])
        self.addCleanup(kill_pid, pid)
        return pid

    def test_stop_leaves_no_grandchild_even_after_setsid(self):
        self.unit_with_grandchild('gc')
        self.start_tend(cgroup=self.make_cgroup(required=True))
        self.assertIn('units run in cgroups under %s' % self.cgroup, self.stderr())
        main = self.wait_running('gc')['main_pid']
        gc = self.grandchild()
        unit_cg = os.path.join(self.cgroup, 'gc.service')
        self.assertEqual(sorted(cgroup_procs(unit_cg)), sorted([main, gc]), 'not both in the unit\'s cgroup')
        fd = os.pidfd_open(gc)
        self.addCleanup(os.close, fd)
        self.ctl('stop', 'gc')
        self.assertEqual(self.st('gc')['state'], 'inactive')
        wait_pidfd(fd, 0.5, 'the setsid grandchild survived KillMode=control-group')
        self.assertFalse(cgroup_populated(unit_cg), 'the unit\'s cgroup is not empty after the stop')

    def test_main_death_takes_the_grandchild_along(self):
        # SPEC §4: the stop sequence also runs when the main process exits on its own.
        self.unit_with_grandchild('gc2')
        self.start_tend(cgroup=self.make_cgroup(required=True))
        main = self.wait_running('gc2')['main_pid']
        gc = self.grandchild()
        fd = os.pidfd_open(gc)
        self.addCleanup(os.close, fd)
        kill_pid(main)
        r = self.wait_state('gc2', lambda r: r['state'] == 'failed', 5, 'never failed after SIGKILL')
        self.assertEqual((r['result'], r['last_exit']), ('signal', {'signal': 9, 'core_dumped': False}))
        self.assertTrue(exited(fd), 'a dead daemon\'s grandchild outlived it')

    def test_fallback_setsid_grandchild_survives(self):
        # Force the process-group fallback: cgroup2 read-only in a private
        # mount namespace, so tend cannot write its cgroup.procs.
        if not shutil.which('unshare'):
            self.skipTest('no unshare(1)')
        with open('/proc/self/mountinfo') as f:
            mount_point = next(ln.split()[4] for ln in f if ' - cgroup2 ' in ln)
        probe = subprocess.run(['unshare', '-m', 'mount', '-o', 'remount,bind,ro', mount_point],
                               capture_output=True, text=True, timeout=10)
        if probe.returncode != 0:
            self.skipTest('cannot remount %s read-only in a mount namespace: %s' % (mount_point, probe.stderr))
        self.unit_with_grandchild('gcf')
        wrap = ['unshare', '-m', 'sh', '-c', 'mount -o remount,bind,ro "$0" && exec "$@"', mount_point]
        self.start_tend(cgroup=False, wrap=wrap, log_level='notice')
        # SPEC §4: the fallback is said once.
        self.assertEqual(self.stderr().count('using process groups'), 1, self.stderr())
        main = self.wait_running('gcf')['main_pid']
        gc = self.grandchild()
        self.ctl('stop', 'gcf')
        self.assertEqual(self.st('gcf')['state'], 'inactive')
        self.assertFalse(pid_alive(main))
        # docs/cgroups.md "What it cannot do": a process that left the group survives.
        self.assertTrue(pid_alive(gc), 'documented limit changed: the setsid grandchild was killed')
        kill_pid(gc)


class Leftovers(ServiceTestCase):
    def test_leftovers_of_a_previous_tend_are_killed_before_the_start(self):
        cg = self.make_cgroup(required=True)
        unit_cg = os.path.join(cg, 'left.service')
        os.mkdir(unit_cg)
        planted = self.start(['sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec sleep 1000', unit_cg],
                             stdout=subprocess.DEVNULL)
        wait_until(lambda: cgroup_procs(unit_cg) == [planted.pid], 5, 'the leftover never joined the cgroup')
        seen = self.path('seen')
        # Shell builtins only: the unit's one process lists its cgroup.
        run = self.script('list.sh', 'while read -r p; do echo "$p"; done < "$1/cgroup.procs" > "$2"\nexec sleep 1000')
        self.unit('left', '''
            [Service]
            ExecStart=/bin/sh %s %s %s
        ''' % (run, unit_cg, seen))
        self.start_tend(cgroup=cg)
        main = self.wait_running('left')['main_pid']
        wait_pidfd(planted.pidfd, 5, 'the leftover was not killed; stderr %r' % self.stderr())
        wait_until(lambda: self.lines(seen), 5, 'the unit never listed its cgroup')
        self.assertEqual(self.lines(seen), [str(main)], 'the unit started beside a leftover')
        self.assertIn('left.service: killed 1 leftover process', self.stderr())
        self.assertEqual(planted.wait(1, 'leftover'), -9)
        self.assertEqual(self.st('left')['last_exit'], None, 'the new main process died')


class AfterCgroupKill(ServiceTestCase):
    def test_start_after_the_final_kill_signal(self):
        # The stop escalates to cgroup.kill; the next start must run (Linux
        # kills every clone3(CLONE_INTO_CGROUP) child of a killed cgroup:
        # tend renews the cgroup, cgroup.h unit_group_renew).
        self.unit('tough', '''
            [Service]
            ExecStart=%s record - 0 0 0
            TimeoutStopSec=300ms
        ''' % PROBE)
        self.start_tend(cgroup=self.make_cgroup(required=True))
        pid = self.wait_running('tough')['main_pid']
        self.wait_output('ready %d' % pid, message='child-probe never blocked its signals')
        self.ctl('stop', 'tough')
        self.assertEqual(self.st('tough')['last_exit'], {'signal': 9, 'core_dumped': False})
        self.ctl('start', 'tough')
        pid2 = self.wait_running('tough', other_than=pid)['main_pid']
        self.wait_output('ready %d' % pid2, message='the new main process never ran (killed at birth?)')
        r = self.st('tough')
        self.assertEqual((r['state'], r['main_pid']), ('running', pid2), 'the new main process died')
        self.assertEqual(sorted(cgroup_procs(os.path.join(self.cgroup, 'tough.service'))), [pid2])


def cgroup_kill_once(test, cg):
    """Empties cg with cgroup.kill, as systemd does when it stops or restarts
    a service: a throwaway process is put in first (an empty cgroup has
    nothing to kill, but the kernel counts the kill either way; a process
    makes the scenario the real one)."""
    victim = test.start(['sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec sleep 1000', cg], stdout=subprocess.DEVNULL)
    wait_until(lambda: victim.pid in cgroup_procs(cg), 5, 'the throwaway process never joined %s' % cg)
    with open(os.path.join(cg, 'cgroup.kill'), 'w') as f:
        f.write('1')
    wait_pidfd(victim.pidfd, 5, 'cgroup.kill of %s did not kill the throwaway process' % cg)
    wait_until(lambda: not cgroup_populated(cg), 5, '%s still populated after cgroup.kill' % cg)


def proc_cgroup(pid):
    with open('/proc/%d/cgroup' % pid) as f:
        return next(ln[3:] for ln in f.read().splitlines() if ln.startswith('0::'))


class KilledCgroup(ServiceTestCase):
    """tend started in a cgroup that was once emptied with cgroup.kill (systemd
    restarting tend.service). Linux counts the kill in that cgroup and in every
    cgroup below it then; a child clone3(CLONE_INTO_CGROUP) puts into a cgroup
    whose count differs from the spawner's own cgroup's is SIGKILLed at birth
    (cgroup.h). tend runs from a new leaf of its own, tend.scope, so its count
    matches the units' new cgroups."""

    def stamp_unit(self, name):
        self.stamps = self.path(name + '.stamps')
        self.unit(name, """
            [Unit]
            StartLimitIntervalSec=0
            [Service]
            ExecStart=/bin/sh -c 'echo $$$$ >> "$0"; exec sleep 1000' %s
            Restart=always
            RestartSec=0
        """ % self.stamps)

    def assert_runs_once(self, name):
        """The unit's first main process runs and stays: no restart over a
        bounded window (its one stamp is its pid)."""
        first = self.wait_running(name)
        wait_until(lambda: self.lines(self.stamps), 5,
                   lambda: '%s never wrote its stamp: its process is killed at birth (the kill counts of tend\'s '
                           'cgroup and the unit\'s differ: tend not in a new leaf, or a leftover unit cgroup not '
                           'renewed?); record %r, stderr %r' % (name, self.st(name), self.stderr()[-2000:]))
        deadline = monotonic() + 1.0
        while monotonic() < deadline:
            r = self.st(name)
            self.assertEqual((r['state'], r['main_pid'], r['restarts']), ('running', first['main_pid'], 0),
                             '%s restarted: its processes are SIGKILLed at birth (kill_seq of its cgroup differs '
                             'from tend\'s); stamps %r' % (name, self.lines(self.stamps)[:10]))
        self.assertEqual(self.lines(self.stamps), [str(first['main_pid'])])
        self.assertEqual(cgroup_procs(os.path.join(self.cgroup, name + '.service')), [first['main_pid']])

    def assert_tend_in_leaf(self):
        rel = proc_cgroup(self.tend_pid)
        self.assertTrue(rel.endswith('/tend.scope'), 'tend is in %s, not in its leaf tend.scope' % rel)
        self.assertEqual(cgroup_procs(os.path.join(self.cgroup, 'tend.scope')), [self.tend_pid])

    def test_units_run_in_a_cgroup_killed_before_tend_started(self):
        cg = self.make_cgroup(required=True)
        cgroup_kill_once(self, cg)
        self.stamp_unit('stamp')
        self.start_tend(cgroup=cg)
        self.assert_runs_once('stamp')
        self.assert_tend_in_leaf()
        self.assertNotIn('cannot move into', self.stderr())

    def test_leftover_leaf_and_unit_cgroup_counted_in_the_kill(self):
        # A previous tend's tend.scope and unit cgroup existed when the kill
        # came, so the kill counted in them too: both are made afresh.
        cg = self.make_cgroup(required=True)
        os.mkdir(os.path.join(cg, 'tend.scope'))
        os.mkdir(os.path.join(cg, 'stamp.service'))
        cgroup_kill_once(self, cg)
        self.stamp_unit('stamp')
        self.start_tend(cgroup=cg)
        self.assert_runs_once('stamp')
        self.assert_tend_in_leaf()
        # Restarted in place: the next tend finds the leaf (empty again) and
        # the unit's cgroup, and runs as well.
        self.assertEqual(self.stop_tend(), 0)
        self.assertFalse(os.path.exists(os.path.join(cg, 'tend.scope')), 'tend left its leaf behind at exit')
        os.unlink(self.stamps)
        os.mkdir(os.path.join(cg, 'tend.scope'))
        self.start_tend(cgroup=cg)
        self.assert_runs_once('stamp')
        self.assert_tend_in_leaf()


def main():
    d, why = cgroup_usable()
    if not d:
        print('skip: %s' % why)
        sys.exit(77)
    unittest.main(verbosity=2)


if __name__ == '__main__':
    main()
