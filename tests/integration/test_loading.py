#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Loading DIR (docs/tend.service.5.md "LOADING"; issue 16 "Aliases, drop-ins,
linked units", "Messages that mean something", `tend --verify`; issue 19 "a
unit file symlinked to /etc/shadow") on the built tend and tendctl: aliases
are names of one unit, a link out of DIR is a linked unit, drop-ins apply in
systemd's order and daemon-reload notices them, no message quotes a line of
a file that is not a unit file, socket and timer files are named once."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import TEND, wait_until  # noqa: E402
from svctest import ServiceTestCase  # noqa: E402

SLEEP = '/bin/sleep'

# Lines that look like /etc/shadow's: none may ever show in a message.
SECRET_LINES = [
    'root:$6$Zq9SECRETSALT$SECRETHASHxyzxyzxyzxyzxyzxyz:19000:0:99999:7:::',
    'daemon=SECRETVALUE-2 with spaces',
    '[SECRETSECTION',
    'SECRET-TOKEN-3',
]


def cmdline(pid):
    with open('/proc/%d/cmdline' % pid, 'rb') as f:
        return f.read().split(b'\0')[:-1]


class LoadingTestCase(ServiceTestCase):
    def write(self, rel, text):
        p = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'w') as f:
            f.write('\n'.join(ln.strip() for ln in text.strip().splitlines()) + '\n')
        return p

    def sleeper(self, name, seconds, extra=''):
        return self.unit(name, """
            [Service]
            ExecStart=%s %d
            %s
        """ % (SLEEP, seconds, extra))

    def wait_argv(self, name, want, message):
        """NAME's main process runs argv want (after its exec)."""
        def check():
            r = self.st(name)
            try:
                return r if r['state'] == 'running' and r['main_pid'] and cmdline(r['main_pid']) == want else None
            except FileNotFoundError:
                return None
        return wait_until(check, 10, lambda: '%s: %s; record %r; stderr %r'
                          % (name, message, self.st(name), self.stderr()[-2000:]))

    def verify(self, *paths):
        p = subprocess.run([TEND, '--verify'] + list(paths), capture_output=True, text=True, timeout=30)
        return p.returncode, p.stdout, p.stderr


class Paths(LoadingTestCase):
    def test_a_relative_dir_gives_absolute_unit_paths(self):
        """`tend --config-dir units/` from DIR's parent: every unit's path is
        absolute, as systemctl's FragmentPath (not "units//rel.service")."""
        self.unit('rel', '[Service]\nExecStart=/bin/sleep 1000\n')
        d = self.dir
        self.dir = os.path.basename(d) + '/'  # start_tend passes it as --config-dir
        try:
            self.start_tend(wrap=['sh', '-c', 'cd "$0" && exec "$@"', os.path.dirname(d)])
        finally:
            self.dir = d
        _, out, _ = self.ctl('show', '-p', 'FragmentPath', '--value', 'rel')
        self.assertEqual(out.strip(), os.path.join(d, 'rel.service'))


class Aliases(LoadingTestCase):
    def test_alias_link_and_install_alias_are_one_unit(self):
        """sshd.service → ssh.service (as Debian installs it) and [Install]
        Alias=secure.service: one unit, started once, found by every name;
        a dependency on an alias is a dependency on the unit."""
        self.unit('ssh', """
            [Service]
            ExecStart=%s 1001
            [Install]
            Alias=secure.service
            WantedBy=multi-user.target
        """ % SLEEP)
        os.symlink('ssh.service', os.path.join(self.dir, 'sshd.service'))
        self.unit('client', """
            [Unit]
            Requires=sshd.service
            After=secure.service
            [Service]
            ExecStart=%s 1002
        """ % SLEEP)
        self.start_tend()
        pid = self.wait_running('ssh')['main_pid']
        self.wait_running('client')
        names = sorted(self.statuses().keys())
        self.assertEqual(names, ['client.service', 'ssh.service'], 'an alias became a unit of its own')
        sleeps = [p for p in os.listdir('/proc') if p.isdigit() and self._runs(int(p), b'1001')]
        self.assertEqual(len(sleeps), 1, 'the unit runs %d times' % len(sleeps))
        for alias in ('sshd', 'sshd.service', 'secure', 'ssh'):
            self.assertEqual({n: r['main_pid'] for n, r in self.statuses(alias).items()}, {'ssh.service': pid},
                             'status %s' % alias)
        # a stop by an alias stops the unit; Requires= of the alias propagates
        self.ctl('stop', 'sshd')
        self.wait_state('ssh', lambda r: r['state'] == 'inactive', 10, 'stop sshd did not stop ssh.service')
        self.wait_state('client', lambda r: r['state'] == 'inactive', 10,
                        'Requires=sshd.service did not make client depend on ssh.service')
        self.ctl('start', 'secure')
        self.wait_running('ssh', other_than=pid)
        self.ctl('restart', 'sshd.service')
        self.assertNotIn('error', self.stderr().lower(), 'aliases produced errors')
        # a link added later is a name of the unit once DIR is reloaded
        os.symlink('ssh.service', os.path.join(self.dir, 'openssh.service'))
        self.ctl('daemon-reload')
        self.assertEqual(list(self.statuses('openssh')), ['ssh.service'], 'a new alias link is not a name after reload')
        self.assertEqual(sorted(self.statuses()), ['client.service', 'ssh.service'])
        # names outside systemd's unit-name characters are refused, not resolved
        st, out, err = self.ctl('status', 'ssh service', check=False)
        self.assertNotEqual(st, 0, 'an invalid name was answered: %r' % out)

    def test_install_alias_drop_ins_are_read(self):
        """[Install] Alias= names are names of the unit: their drop-in
        directories are read as the link aliases' are (systemd reads every
        name's of an enabled unit; tend treats Alias= as enabled)."""
        self.unit('ssh', """
            [Service]
            ExecStart=%s 1031
            [Install]
            Alias=secure.service
        """ % SLEEP)
        self.write('secure.service.d/override.conf', """
            [Service]
            ExecStart=
            ExecStart=%s 1032
        """ % SLEEP)
        self.start_tend()
        self.wait_argv('ssh', [SLEEP.encode(), b'1032'], 'the drop-in of the Alias= name was not read')
        st, out, err = self.verify(self.dir)
        self.assertEqual(st, 0, err)

    @staticmethod
    def _runs(pid, arg):
        try:
            argv = cmdline(pid)
        except (FileNotFoundError, ProcessLookupError):
            return False
        return argv[:1] == [SLEEP.encode()] and arg in argv


class LinkedUnits(LoadingTestCase):
    def test_linked_unit_with_drop_in_in_dir(self):
        """A link out of DIR is a unit named by the link; a drop-in in DIR
        resets ExecStart= and sets another; the target's own drop-in
        directory is not read (systemd reads drop-ins from its search path
        only)."""
        elsewhere = self.path('pkg')
        os.mkdir(elsewhere)
        target = os.path.join(elsewhere, 'packaged.service')
        with open(target, 'w') as f:
            f.write('[Service]\nExecStart=%s 1011\n' % SLEEP)
        os.mkdir(target + '.d')
        with open(os.path.join(target + '.d', 'x.conf'), 'w') as f:
            f.write('[Service]\nExecStart=\nExecStart=%s 1099\n' % SLEEP)
        os.symlink(target, os.path.join(self.dir, 'web.service'))
        self.write('web.service.d/override.conf', """
            [Service]
            ExecStart=
            ExecStart=%s 1012
        """ % SLEEP)
        self.start_tend()
        self.wait_argv('web', [SLEEP.encode(), b'1012'], 'the drop-in in DIR did not replace ExecStart=')
        self.assertEqual(sorted(self.statuses()), ['web.service'])

    def test_dangling_link_is_one_error(self):
        """A linked unit whose target does not exist is one error, with
        --verify and when tend loads DIR."""
        os.symlink(self.path('nonexistent.service'), os.path.join(self.dir, 'gone.service'))
        self.sleeper('fine', 1041)
        st, out, err = self.verify(self.dir)
        self.assertNotEqual(st, 0)
        self.assertEqual(err.count('error:'), 1, err)
        self.assertIn('gone.service: a link to a file that does not exist', err)
        self.start_tend()
        self.wait_running('fine')
        self.assertEqual(self.stderr().count('error:'), 1, self.stderr())

    def test_link_to_a_secret_file_is_refused_unquoted(self):
        """issue 19: a link in DIR to a file that is not a unit file (its
        name has no unit suffix) is refused without reading it; a link to a
        unit-named file of garbage fails with messages that quote no line of
        it; neither tend's log nor the daemon-reload answer shows a line."""
        secret = self.path('shadow')
        with open(secret, 'w') as f:
            f.write('\n'.join(SECRET_LINES) + '\n')
        garbage = self.path('garbage.service')  # a unit name, a secret's lines
        with open(garbage, 'w') as f:
            f.write('\n'.join(SECRET_LINES) + '\n')
        os.symlink(secret, os.path.join(self.dir, 'evil.service'))
        os.symlink(garbage, os.path.join(self.dir, 'junk.service'))
        self.sleeper('fine', 1021)
        self.start_tend()
        self.wait_running('fine')
        st, out, err = self.ctl('daemon-reload', '--json', check=False)
        log = self.stderr()
        self.assertIn('evil.service: a link to', log)
        self.assertIn("whose name is not a service unit", log)
        self.assertIn('%s:1: syntax error' % garbage, log)  # a linked unit's messages name its file
        for secret_text in ('SECRET', '$6$', ':19000:'):
            self.assertNotIn(secret_text, log, 'tend quoted a line of a linked file in its log')
            self.assertNotIn(secret_text, out + err, 'the daemon-reload answer quoted a line of a linked file')
        failed = [u['name'] for u in json.loads(out)['units'] if not u['ok']]
        self.assertIn('evil.service', failed)
        self.assertIn('junk.service', failed)


class DropIns(LoadingTestCase):
    def test_order_prefixes_and_override(self):
        """Drop-ins of NAME.service.d/, foo-.service.d/ and service.d/ apply
        by file name; the most specific directory's file of a name hides the
        others'; an empty ExecStart= resets it; Environment= accumulates."""
        self.unit('foo-bar', """
            [Service]
            ExecStart=/bin/sh -c 'echo "A=$A B=$B C=$C"; exec %s 1031'
        """ % SLEEP)
        self.write('service.d/10-all.conf', '[Service]\nEnvironment=A=top B=top C=top\n')
        self.write('foo-.service.d/20-prefix.conf', '[Service]\nEnvironment=B=prefix C=prefix\n')
        self.write('foo-.service.d/30-same.conf', '[Service]\nEnvironment=C=hidden\n')
        self.write('foo-bar.service.d/30-same.conf', '[Service]\nEnvironment=C=own\n')
        self.start_tend()
        self.wait_running('foo-bar')
        self.wait_output('A=top B=prefix C=own', 10, 'drop-ins applied in the wrong order')

    def test_daemon_reload_notices_a_changed_drop_in(self):
        self.sleeper('web', 1041)
        self.start_tend()
        self.wait_running('web')
        res = json.loads(self.ctl('daemon-reload', '--json')[1])
        self.assertEqual(res['changed'], [], 'nothing changed yet')
        self.write('web.service.d/restart.conf', '[Service]\nExecStart=\nExecStart=%s 1042\n' % SLEEP)
        res = json.loads(self.ctl('daemon-reload', '--json')[1])
        self.assertEqual(res['changed'], ['web.service'], 'a new drop-in went unnoticed')
        self.write('web.service.d/restart.conf', '[Service]\nExecStart=\nExecStart=%s 1043\n' % SLEEP)
        res = json.loads(self.ctl('daemon-reload', '--json')[1])
        self.assertEqual(res['changed'], ['web.service'], 'a changed drop-in went unnoticed')
        self.ctl('restart', 'web')
        self.wait_argv('web', [SLEEP.encode(), b'1043'], 'the changed drop-in did not apply at the restart')


class Messages(LoadingTestCase):
    def test_silent_keys_other_types_and_wants(self):
        """Documentation=, DefaultDependencies=, [Install] say nothing; a key
        that changes what the process gets warns once per unit; .socket and
        .timer files are named once; a Wants= of a missing unit is no error."""
        self.unit('web', """
            [Unit]
            Documentation=man:web(8)
            DefaultDependencies=no
            Wants=nowhere.service nowhere@x.service
            [Service]
            ExecStart=%s 1051
            CPUQuota=10%%
            CPUQuota=20%%
            [Install]
            WantedBy=multi-user.target
        """ % SLEEP)
        for f in ('a.socket', 'b.socket', 'c.timer', 'x.target'):
            with open(os.path.join(self.dir, f), 'w') as fh:
                fh.write('[Unit]\n')
        self.start_tend(log_level='notice')
        self.wait_running('web')
        log = self.stderr()
        self.assertNotIn('Documentation', log)
        self.assertNotIn('DefaultDependencies', log)
        self.assertNotIn('WantedBy', log)
        self.assertEqual(log.count('CPUQuota= is not supported: the unit runs without the CPU quota'), 1, log)
        self.assertEqual(log.count('tend runs services only: ignored 2 sockets (a.socket, b.socket) '
                                   'and 1 timer (c.timer)'), 1, log)
        self.assertNotIn('error', log, 'a Wants= of a missing unit is not an error')


class Verify(LoadingTestCase):
    def test_template_alias_verified_once(self):
        """autovt@.service → getty@.service (as Debian installs it): one
        template, its messages said once."""
        self.unit('getty@', '[Service]\nExecStart=/bin/true %i\nCPUQuota=50%%\n')
        os.symlink('getty@.service', os.path.join(self.dir, 'autovt@.service'))
        st, out, err = self.verify(self.dir)
        self.assertEqual(err.count('CPUQuota= is not supported'), 1, err)
        self.assertIn('1 unit: 1 loaded', out + err, 'the alias was verified as a second template')

    def test_verify_exit_codes_and_messages(self):
        good = self.sleeper('good', 1)
        self.write('good.service.d/x.conf', '[Service]\nRestart=sometimes\n')
        code, out, err = self.verify(good)
        self.assertEqual(code, 1, 'a bad drop-in is an error: %r' % err)
        self.assertIn('%s/good.service.d/x.conf:2: Restart=: invalid value "sometimes"' % self.dir, err)
        os.unlink(os.path.join(self.dir, 'good.service.d/x.conf'))
        code, out, err = self.verify(good)
        self.assertEqual((code, err), (0, ''))
        self.assertEqual(out, '1 unit: 1 loaded, 0 masked, 0 with errors\n')
        self.unit('warned', '[Service]\nExecStart=/bin/true\nNoSuchKey=1\n')
        self.write('tmpl@.service', '[Service]\nExecStart=/bin/echo %i\n')
        code, out, err = self.verify(self.dir)
        self.assertEqual(code, 0, err)
        self.assertIn('warned.service:3: unknown key "NoSuchKey"', err)
        self.assertEqual(out, '3 units: 3 loaded, 0 masked, 0 with errors\n')
        self.unit('bad', '[Service]\nType=dbus\nExecStart=/bin/true\n')
        code, out, err = self.verify(self.dir)
        self.assertEqual(code, 1)
        self.assertIn('bad.service:2: Type=dbus is not supported', err)
        # nothing started, no socket made
        self.assertFalse(os.path.exists(self.sock))
        self.assertEqual(self.verify(self.path('nope'))[0], 1)

    def test_verify_debian_units(self):
        """The installed units (aliases such as sshd.service among them) load
        through --verify without a crash, each at most once."""
        d = '/lib/systemd/system'
        if not os.path.isdir(d):
            raise unittest.SkipTest('no %s' % d)
        code, out, err = self.verify(d)
        self.assertIn(code, (0, 1), err)
        self.assertRegex(out, r'^\d+ units: \d+ loaded, \d+ masked, \d+ with errors\n$')


if __name__ == '__main__':
    unittest.main()
