#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""security (issue 17): fail closed, the opt-out, `tendctl security`.

- A unit with a key tend cannot honour (IPAddressDeny=any: a cgroup BPF
  program) is not started, and tend's message names the key; with
  [X-Tend] AcceptWeakerIsolation= in a drop-in (the unit's file unchanged),
  or tend --accept-weaker-isolation=KEY, it runs and one line says what was
  not applied.
- `tendctl security` beside `systemd-analyze security --offline=true`
  (systemd 252; no running systemd) on redis-server, memcached and apache2's
  own unit files and on hand-written units: the same checks; every check
  whose badness differs is one tend reports as not applied (naming its key);
  the exposure equals systemd's once those checks take tend's badness (within
  0.1). So once a key is honoured (in tend's key table), its check must agree
  with systemd's: nothing here needs changing when more keys are applied.
- The exposure rises when a key is accepted under the opt-out.
- RemoveIPC= (root only: User=): the user's IPC objects go when the unit stops."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import wait_until  # noqa: E402
from svctest import ServiceTestCase  # noqa: E402

SYSTEM = '/lib/systemd/system'
DAEMONS = ['redis-server', 'memcached', 'apache2']

# Hand-written units of keys tend applies (User=, NoNewPrivileges=,
# CapabilityBoundingSet=, AmbientCapabilities=, SystemCallFilter=, UMask=,
# SupplementaryGroups=, NotifyAccess=).
HAND = {
    'empty': '',
    'tight': ('User=daemon\nNoNewPrivileges=yes\nCapabilityBoundingSet=\nUMask=0077\n'
              'SystemCallFilter=@system-service\nSystemCallFilter=~@privileged @resources\n'),
    'mixed': ('User=nobody\nSupplementaryGroups=adm\nCapabilityBoundingSet=CAP_NET_BIND_SERVICE CAP_KILL\n'
              'AmbientCapabilities=CAP_NET_BIND_SERVICE\nNotifyAccess=all\n'
              'SystemCallFilter=~@mount @swap @reboot\nUMask=0002\n'),
}

ROW = re.compile(r'^(.) (\S+)\s+.*?\s(\d+)\s+(\d+)\s+(\d+)\s*(\S*)\s*$')


def div_up(a, b):
    return -(-a // b)


def systemd_analyze(path):
    """{check: (weight, badness or None, range)}, overall (tenths) of
    systemd-analyze 252's table (SYSTEMD_ANALYZE_DEBUG shows weight, badness
    and range; "not applicable" is UINT64_MAX)."""
    env = dict(os.environ, SYSTEMD_ANALYZE_DEBUG='1', SYSTEMD_COLORS='0', SYSTEMD_URLIFY='0', LC_ALL='C.UTF-8')
    p = subprocess.run(['systemd-analyze', 'security', '--offline=true', '--no-pager', path], env=env,
                       capture_output=True, text=True, timeout=60)
    checks, overall = {}, None
    for line in p.stdout.splitlines():
        m = ROW.match(line)
        if m and m.group(2) != 'NAME':
            b = int(m.group(4))
            checks[m.group(2)] = (int(m.group(3)), None if b > int(m.group(5)) else b, int(m.group(5)))
        m = re.search(r'Overall exposure level for .*: (\d+)\.(\d) ', line)
        if m:
            overall = int(m.group(1)) * 10 + int(m.group(2))
    assert checks and overall is not None, 'systemd-analyze security %s: %r %r' % (path, p.stdout[-500:], p.stderr)
    return checks, overall


def exposure(checks):
    """systemd's overall exposure (tenths) of {name: (weight, badness, range)}."""
    bs = ws = 0
    for w, b, r in checks.values():
        if b is not None:
            bs += div_up(b * w, r)
            ws += w
    return div_up(bs * 100, ws)


@unittest.skipUnless(shutil.which('systemd-analyze'), 'no systemd-analyze')
class Security(ServiceTestCase):
    def tend_security(self, name):
        _, out, _ = self.ctl('security', name, '-o', 'json')
        arr = json.loads(out)
        self.assertEqual(len(arr), 1, out)
        return arr[0]

    def compare(self, name, path):
        """The checks of tendctl security NAME against systemd-analyze's of
        path; returns the keys of the checks that differ."""
        want, overall = systemd_analyze(path)
        got = self.tend_security(name)
        checks = {c['name']: c for c in got['checks']}
        self.assertEqual(set(checks), set(want), '%s: the checks differ from systemd-analyze 252' % name)
        differ, expected = set(), dict(want)
        for n, (w, b, r) in want.items():
            c = checks[n]
            self.assertEqual((c['weight'], c['range']), (w, r), '%s: %s weight/range' % (name, n))
            if c['badness'] != b:
                self.assertFalse(c['applied'], '%s: %s: badness %r, systemd %r, yet tend says it applies %s='
                                 % (name, n, c['badness'], b, c['key']))
                differ.add(c['key'])
                expected[n] = (w, c['badness'], r)
        self.assertEqual(exposure(want), overall, '%s: systemd\'s own sum' % name)
        self.assertLessEqual(abs(got['exposure'] - exposure(expected)), 1,
                             '%s: exposure %d, systemd %d with tend\'s badness for %s'
                             % (name, got['exposure'], exposure(expected), sorted(differ)))
        return differ, overall, got

    def daemon_unit(self, name):
        """NAME's package unit file, unchanged; a drop-in runs sleep instead
        of the daemon (no daemon starts here: tendctl security reads the file)."""
        src = os.path.join(SYSTEM, name + '.service')
        if not os.path.exists(src):
            self.skipTest('%s is not installed' % src)
        shutil.copy(src, os.path.join(self.dir, name + '.service'))
        os.mkdir(os.path.join(self.dir, name + '.service.d'))
        with open(os.path.join(self.dir, name + '.service.d', 'test.conf'), 'w') as f:
            f.write('[Service]\nType=simple\nExecStart=\n'
                    'ExecStart=/bin/sleep 600\nExecStop=\nExecReload=\nExecStartPre=\nExecStartPost=\n'
                    'PIDFile=\n')
        return src

    def test_daemons_beside_systemd_analyze(self):
        srcs = {n: self.daemon_unit(n) for n in DAEMONS}
        self.start_tend()
        for n, src in srcs.items():
            differ, overall, got = self.compare(n, src)
            # every key of the three files is applied (test_hardened_daemons.py proves each on
            # the running daemon), KeyringMode= too: tend as root gives systemd's default, private
            self.assertEqual(differ, set(), n)
            self.assertLessEqual(abs(got['exposure'] - overall), 1,
                                 '%s: exposure %d, systemd-analyze %d' % (n, got['exposure'], overall))
            print('%s: systemd %.1f, tend %.1f, differ on %s' % (n, overall / 10, got['exposure'] / 10,
                                                                 sorted(differ)), file=sys.stderr)

    def test_hand_written_beside_systemd_analyze(self):
        paths = {}
        for n, body in HAND.items():
            paths[n] = self.unit(n, '[Service]\nExecStart=/bin/sleep 600\n' + body)
        self.start_tend()
        for n, p in paths.items():
            differ, overall, got = self.compare(n, p)
            # every key of these units tend applies, KeyringMode='s default (private) too
            self.assertEqual(differ, set(), n)
            self.assertLessEqual(abs(got['exposure'] - overall), 1,
                                 '%s: exposure %d, systemd-analyze %d' % (n, got['exposure'], overall))

    def test_opt_out_raises_exposure(self):
        self.unit('a', '[Service]\nExecStart=/bin/sleep 600\n' + HAND['tight'])
        self.start_tend()
        before = self.tend_security('a')
        os.mkdir(os.path.join(self.dir, 'a.service.d'))
        with open(os.path.join(self.dir, 'a.service.d', 'weaker.conf'), 'w') as f:
            f.write('[X-Tend]\nAcceptWeakerIsolation=NoNewPrivileges= CapabilityBoundingSet\n')
        self.ctl('daemon-reload')
        after = self.tend_security('a')
        self.assertGreater(after['exposure'], before['exposure'])
        nnp = [c for c in after['checks'] if c['name'] == 'NoNewPrivileges=']
        self.assertEqual((nnp[0]['badness'], nnp[0]['applied']), (1, False))
        _, out, _ = self.ctl('security', 'a')
        self.assertRegex(out, r'✗ NoNewPrivileges=\s+.*\(not applied\)')
        self.assertIn('Overall exposure level for a.service: %d.%d' % divmod(after['exposure'], 10), out)


COMPLETION = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'supervisor', 'client',
                          'tendctl.bash-completion')


class Completion(ServiceTestCase):
    def test_security_verb(self):
        """bash completion: the verb, its options, the units."""
        self.unit('web', '[Service]\nExecStart=/bin/sleep 600\n')
        self.start_tend()
        script = ('source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tendctl; '
                  'printf "%s\\n" "${COMPREPLY[@]}"')
        env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(os.environ['TENDCTL'])) + ':' + os.environ['PATH'])

        def complete(*words):
            p = subprocess.run(['bash', '--norc', '-c', script, COMPLETION, 'tendctl'] + list(words),
                               capture_output=True, text=True, timeout=20, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            return sorted(x for x in p.stdout.splitlines() if x)
        self.assertEqual(complete('sec'), ['security'])
        self.assertEqual(complete('--control-socket', self.sock, 'security', 'w'), ['web'])
        self.assertEqual(complete('--control-socket', self.sock, 'security', 'web', '--'),
                         ['--control-socket', '--json', '--output'])


UID = 4242  # no such user: a regular uid (≥ 1000), whose IPC objects RemoveIPC= removes


def shm_ids(uid):
    """The System V shared memory segments uid owns."""
    with open('/proc/sysvipc/shm') as f:
        head = f.readline().split()
        rows = [ln.split() for ln in f]
    return {int(r[head.index('shmid')]) for r in rows if int(r[head.index('uid')]) == uid}


@unittest.skipUnless(os.geteuid() == 0 and shutil.which('ipcmk'), 'needs root (User=) and ipcmk(1)')
class RemoveIPC(ServiceTestCase):
    """RemoveIPC=yes: when the unit stops, its user's System V segment and
    POSIX shared memory file are gone; without the key they stay."""

    def run_unit(self, remove):
        d = tempfile.mkdtemp(prefix='tend-ipc-', dir='/tmp')  # the test's dir is 0700: not the unit's
        self.addCleanup(shutil.rmtree, d, True)
        os.chmod(d, 0o777)
        shm = '/dev/shm/tend-it-%d-%s' % (os.getpid(), remove)
        self.addCleanup(lambda: os.path.exists(shm) and os.unlink(shm))
        self.unit('ipc', """
            [Service]
            User=%d
            RemoveIPC=%s
            ExecStart=/bin/sh -c 'ipcmk -M 4096 > %s/made && touch %s && echo ready > %s/ready && exec sleep 600'
        """ % (UID, remove, d, shm, d))
        self.start_tend()
        wait_until(lambda: os.path.exists(d + '/ready'), 10,
                   lambda: 'the unit never made its IPC objects; output %r, tend stderr %r' % (self.output(), self.stderr()[-800:]))
        ids = shm_ids(UID)
        for i in ids:
            self.addCleanup(subprocess.run, ['ipcrm', '-m', str(i)], capture_output=True)
        self.assertTrue(ids, 'ipcmk made no segment of uid %d' % UID)
        self.assertTrue(os.path.exists(shm))
        self.ctl('stop', 'ipc')
        return ids, shm

    def test_removed_at_stop(self):
        ids, shm = self.run_unit('yes')
        self.assertFalse(ids & shm_ids(UID), 'the segments outlived the unit')
        self.assertFalse(os.path.exists(shm), '%s outlived the unit' % shm)

    def test_kept_without_the_key(self):
        ids, shm = self.run_unit('no')
        self.assertEqual(ids & shm_ids(UID), ids)
        self.assertTrue(os.path.exists(shm))


class FailClosed(ServiceTestCase):
    UNIT = '[Service]\nExecStart=/bin/sleep 600\nIPAddressDeny=any\n'

    def test_refused_names_the_key(self):
        self.unit('a', self.UNIT)
        self.unit('b', '[Service]\nExecStart=/bin/sleep 600\n')
        self.start_tend()
        self.wait_running('b')
        st, _, err = self.ctl('start', 'a', check=False)
        self.assertNotEqual(st, 0, 'a unit with IPAddressDeny= started')
        self.assertRegex(self.stderr(), r'a\.service:3: IPAddressDeny= cannot be applied \(needs a cgroup BPF')
        self.assertNotIn('not applying', self.stderr())

    def test_opt_out_in_a_drop_in(self):
        path = self.unit('a', self.UNIT)
        os.mkdir(path + '.d')
        with open(path + '.d/weaker.conf', 'w') as f:
            f.write('[X-Tend]\nAcceptWeakerIsolation=IPAddressDeny\n')
        self.start_tend()
        self.wait_running('a')
        line = 'a.service: weaker isolation accepted: not applying IPAddressDeny= (needs a cgroup BPF'
        self.assertEqual(self.stderr().count(line), 1, self.stderr())

    def test_opt_out_global(self):
        self.unit('a', self.UNIT)
        self.start_tend('--accept-weaker-isolation=IPAddressDeny=')
        self.wait_running('a')
        self.assertIn('a.service: weaker isolation accepted: not applying IPAddressDeny=', self.stderr())

    def test_refused_after_reload_runs_the_last_good_file_and_says_so(self):
        """parsefix (M5): a daemon-reload whose new file is refused leaves the unit on its last
        good file (issue 16's rule); `tendctl status` warns, and each later start (tendctl
        restart, Restart=always) logs once that it runs that file, naming the refused key."""
        path = self.unit('a', '[Service]\nExecStart=/bin/sleep 600\nRestart=always\nRestartSec=100ms\n')
        self.start_tend()
        first = self.wait_running('a')['main_pid']
        with open(path, 'a') as f:
            f.write('ProtectSystem=strict\nIPAddressDeny=any\n')
        self.ctl('daemon-reload', check=False)
        self.wait_state('a', lambda r: r.get('file_error'), 10, 'the reload did not record the refused file')
        self.assertIn('IPAddressDeny=', self.st('a')['file_error'])
        _, out, _ = self.ctl('status', 'a', check=False)
        self.assertIn('no longer loads', out, 'tendctl status does not warn: %r' % out)
        self.assertIn('IPAddressDeny=', out)
        line = 'a.service: starting on the last file that loaded: its current file does not ('
        self.assertEqual(self.stderr().count(line), 0, 'warned before any start')
        self.ctl('restart', 'a')
        second = self.wait_running('a', other_than=first)['main_pid']
        wait_until(lambda: self.stderr().count(line) == 1, 5,
                   lambda: 'tendctl restart ran the old file without one warning: %r' % self.stderr()[-3000:])
        err = self.stderr()
        self.assertRegex(err[err.index(line):].splitlines()[0], r'a\.service:\d+: IPAddressDeny= cannot be applied')
        os.kill(second, 9)  # Restart=always: the same warning at the automatic restart
        self.wait_running('a', other_than=second)
        wait_until(lambda: self.stderr().count(line) == 2, 5,
                   lambda: 'Restart=always ran the old file without a warning: %r' % self.stderr()[-3000:])


if __name__ == '__main__':
    unittest.main(verbosity=2)
