#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Condition*= and Assert*= (docs/tend.service.5.md "CONDITIONS") on the built
tend and tendctl with real processes: a condition unmet skips the start
(inactive, the record and `tendctl status` name the condition, `tendctl start`
exits 0, a Requires= dependent still starts); the same unit with its path
created starts; an assert unmet fails `tendctl start` with the assert named
and runs nothing; triggering conditions ('|') need one of them to hold.

What a skipped unit did not do is proven by a marker file its command would
create, checked after the start was answered (the answer comes after the
start job's decision, so no wait is involved)."""
import os
import shutil
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import ServiceTestCase  # noqa: E402
from tendtest import wait_until  # noqa: E402


class ConditionsTest(ServiceTestCase):
    def marked_unit(self, name, conditions, extra=''):
        """A unit whose command creates NAME.ran, then sleeps; conditions are
        [Unit] lines."""
        marker = self.path(name + '.ran')
        self.unit(name, """
            [Unit]
            %s
            %s
            [Service]
            ExecStart=/bin/sh -c 'touch %s; exec sleep 300'
        """ % ('\n'.join(conditions), extra, marker))
        return marker

    def test_condition_unmet_skips_and_dependent_starts(self):
        flag = self.path('flag')
        marker = self.marked_unit('guarded', ['ConditionPathExists=%s' % flag])
        self.unit('dependent', """
            [Unit]
            Requires=guarded.service
            After=guarded.service
            [Service]
            ExecStart=/bin/sleep 300
        """)
        self.start_tend()
        # systemd: a Requires= on a unit whose condition failed does not fail the dependent.
        self.wait_running('dependent')
        want = 'start condition unmet: ConditionPathExists=%s' % flag
        rec = self.wait_state('guarded', lambda r: r.get('condition') == want, 5,
                              'the skipped start is not recorded with its condition')
        self.assertEqual(rec['state'], 'inactive')
        self.assertEqual(rec['result'], 'success')
        self.assertIsNone(rec['main_pid'])
        self.assertFalse(os.path.exists(marker), 'the skipped unit ran its command')
        # An explicit start of it is answered success (as systemctl start) and skips again.
        st, out, err = self.ctl('start', 'guarded', check=False)
        self.assertEqual(st, 0, 'tendctl start of a skipped unit failed: %r %r' % (out, err))
        self.assertFalse(os.path.exists(marker), 'tendctl start ran the command of a unit whose condition fails')
        st, text, _ = self.ctl('status', 'guarded', check=False)
        self.assertEqual(st, 3, 'systemctl status of an inactive unit: 3')
        self.assertIn('Condition: ' + want, text)
        self.assertIn('inactive', text)
        self.assertIn('ConditionPathExists=%s' % flag, self.stderr())
        # The same unit with its path created starts, and the condition is no longer shown.
        open(flag, 'w').close()
        self.ctl('start', 'guarded')
        rec = self.wait_running('guarded')
        self.assertNotIn('condition', rec)
        wait_until(lambda: os.path.exists(marker), 5, 'the started unit never ran its command (%s)' % marker)

    def test_assert_unmet_fails_start(self):
        missing = self.path('missing')
        marker = self.marked_unit('asserted', ['AssertPathExists=%s' % missing])
        self.unit('needs-asserted', """
            [Unit]
            Requires=asserted.service
            After=asserted.service
            [Service]
            ExecStart=/bin/sleep 300
        """)
        self.start_tend()
        st, out, err = self.ctl('start', 'asserted', check=False)
        self.assertNotEqual(st, 0, 'tendctl start of a unit whose assert fails succeeded: %r' % out)
        want = 'assertion failed: AssertPathExists=%s' % missing
        self.assertIn(want, err)
        self.assertFalse(os.path.exists(marker), 'the asserted unit ran its command')
        rec = self.st('asserted')
        self.assertEqual(rec['state'], 'inactive')
        self.assertEqual(rec.get('condition'), want)
        # systemd: the assert fails the start job, and with it the jobs that require it.
        dep = self.wait_state('needs-asserted', lambda r: r['state'] == 'failed', 5,
                              'a Requires= dependent of a unit failed by its assert did not fail')
        self.assertEqual(dep['result'], 'dependency')
        self.assertIn('asserted.service', self.stderr())

    def test_triggering_conditions(self):
        present = self.path('present')
        open(present, 'w').close()
        absent = self.path('absent')
        # One of the triggering conditions holds: started.
        one = self.marked_unit('one', ['ConditionPathExists=|%s' % absent, 'ConditionPathExists=|%s' % present])
        # None holds: skipped, the first triggering one named.
        none = self.marked_unit('none', ['ConditionPathExists=|%s' % absent,
                                         'ConditionPathIsDirectory=|%s' % present])
        # A triggering one holds but a plain one fails: skipped, the plain one named.
        mixed = self.marked_unit('mixed', ['ConditionPathExists=|%s' % present, 'ConditionPathExists=!%s' % present])
        self.start_tend()
        self.wait_running('one')
        wait_until(lambda: os.path.exists(one), 5, 'the unit with a triggering condition held never ran')
        self.wait_state('none', lambda r: r.get('condition') == 'start condition unmet: ConditionPathExists=|%s'
                        % absent, 5, 'no triggering condition held, yet not skipped with the first named')
        self.wait_state('mixed', lambda r: r.get('condition') == 'start condition unmet: ConditionPathExists=!%s'
                        % present, 5, 'a plain condition failed, yet not skipped with it named')
        self.assertFalse(os.path.exists(none))
        self.assertFalse(os.path.exists(mixed))

    # Conditions about this machine, each answered by systemd 252 itself
    # (`systemd-analyze condition`, exit 0 when it holds) and by tend (the
    # unit started, or skipped). NeedsUpdate=, Credential= and FirstBoot= are
    # tend's fixed answers (docs) and Environment= reads each program's own
    # environment: not compared here.
    ORACLE = [
        'ConditionVirtualization=container', 'ConditionVirtualization=docker', 'ConditionVirtualization=vm',
        'ConditionVirtualization=yes', 'ConditionVirtualization=private-users',
        'ConditionKernelCommandLine=quiet', 'ConditionKernelCommandLine=rdinit',
        'ConditionKernelCommandLine=--auth-required', 'ConditionKernelCommandLine=no.such.word',
        'ConditionKernelVersion=>=5', 'ConditionKernelVersion=<5', 'ConditionKernelVersion=6.*',
        'ConditionHost=%H', 'ConditionHost=no-such-host*', 'ConditionArchitecture=native',
        'ConditionArchitecture=x86-64', 'ConditionArchitecture=arm64', 'ConditionSecurity=apparmor',
        'ConditionSecurity=selinux', 'ConditionSecurity=audit', 'ConditionSecurity=tpm2',
        'ConditionSecurity=uefi-secureboot', 'ConditionCapability=CAP_SYS_ADMIN', 'ConditionCapability=CAP_MKNOD',
        'ConditionACPower=true', 'ConditionACPower=false', 'ConditionUser=root', 'ConditionUser=@system',
        'ConditionUser=1000', 'ConditionGroup=root', 'ConditionGroup=5000',
        'ConditionControlGroupController=v1', 'ConditionControlGroupController=v2',
        'ConditionControlGroupController=cpu', 'ConditionControlGroupController=memory',
        'ConditionControlGroupController=pids', 'ConditionControlGroupController=io',
        'ConditionMemory=>1G', 'ConditionMemory=<1M', 'ConditionCPUs=>=1', 'ConditionCPUs=>100',
        'ConditionCPUFeature=sse2', 'ConditionCPUFeature=rdrand', 'ConditionCPUFeature=sha_ni',
        'ConditionOSRelease=ID=debian', 'ConditionOSRelease=VERSION_ID>=12', 'ConditionOSRelease=ID=fedora',
        'ConditionMemoryPressure=100%', 'ConditionFirmware=uefi', 'ConditionFirmware=device-tree',
        'ConditionPathIsMountPoint=/proc', 'ConditionPathIsMountPoint=/etc', 'ConditionPathIsReadWrite=/',
        'ConditionPathIsEncrypted=/', 'ConditionDirectoryNotEmpty=/etc', 'ConditionPathExistsGlob=/etc/*-release',
    ]

    def test_same_answers_as_systemd(self):
        analyze = shutil.which('systemd-analyze')
        if not analyze:
            self.skipTest('no systemd-analyze to compare with')
        expected = {}
        for i, line in enumerate(self.ORACLE):
            line = line.replace('%H', socket.gethostname())  # tend has no %H yet
            p = subprocess.run([analyze, 'condition', line],
                               capture_output=True, text=True, timeout=30)
            if p.returncode not in (0, 1):
                self.fail('systemd-analyze condition %s: status %d %r' % (line, p.returncode, p.stderr))
            expected['c%d' % i] = (line, p.returncode == 0)
            self.unit('c%d' % i, """
                [Unit]
                %s
                [Service]
                Type=oneshot
                RemainAfterExit=yes
                ExecStart=/bin/true
            """ % line)
        self.start_tend()
        differ = []
        for name, (line, holds) in sorted(expected.items()):
            rec = self.wait_state(name, lambda r: r['state'] == 'running' or r.get('condition'), 10,
                                  'neither started nor skipped')
            if (rec['state'] == 'running') != holds:
                differ.append('%s: systemd %s, tend %s' % (line, holds, rec['state'] == 'running'))
        self.assertEqual(differ, [], 'tend and systemd-analyze answer differently')


if __name__ == '__main__':
    unittest.main()
