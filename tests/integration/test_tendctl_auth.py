#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Who may use tend's control socket (SPEC §5, docs/control-protocol.md "Who
may connect"): SO_PEERCRED and SO_PEERGROUPS checked by tend itself on every
connection. Root only (setpriv to another uid, groupadd): skips with 77
otherwise. The clients run as nobody (65534) through util-linux's setpriv."""
import grp
import os
import shutil
import stat
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import PROBE  # noqa: E402
from svctest import TENDCTL, ServiceTestCase  # noqa: E402

NOBODY = 65534


def why_not():
    if os.geteuid() != 0:
        return 'not root'
    for tool in ('setpriv', 'groupadd', 'groupdel'):
        if not shutil.which(tool):
            return '%s is not installed' % tool
    return None


class Auth(ServiceTestCase):
    def setUp(self):
        super().setUp()
        # nobody must reach the socket and run tendctl: a copy of it, and
        # directories it may traverse (the test's temp dir is 0700).
        os.chmod(self.tmp.name, 0o711)
        self.tendctl = self.path('tendctl')
        shutil.copy(TENDCTL, self.tendctl)
        os.chmod(self.tendctl, 0o755)
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)

    def as_nobody(self, *args, groups=None):
        """tendctl ARGS run as uid/gid 65534, with only the given
        supplementary groups: (status, stdout, stderr)."""
        cred = ['--reuid=%d' % NOBODY, '--regid=%d' % NOBODY]
        cred += ['--groups=%s' % ','.join(str(g) for g in groups)] if groups else ['--clear-groups']
        p = subprocess.run(['setpriv'] + cred + [self.tendctl, '--control-socket', self.sock] + list(args),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=15)
        return p.returncode, p.stdout, p.stderr

    def test_other_uid_refused_by_tend(self):
        self.start_tend(log_level='warning')
        self.wait_running('web')
        st = os.stat(self.sock)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(self.sock)).st_mode), 0o700)
        # Open the file system's doors: only tend's own check is left.
        os.chmod(self.sock, 0o666)
        os.chmod(os.path.dirname(self.sock), 0o711)
        status, out, err = self.as_nobody('status', 'web')
        # status: 4 for a refusal as for every verb, LSB's "status unknown" (QA19 L7; tendctl(1) EXIT STATUS)
        self.assertEqual(status, 4, 'a peer with another uid must be refused with 4: %r %r' % (out, err))
        self.assertIn('permission denied', err)
        self.assertRegex(self.stderr(), r'control: refused client pid \d+ uid %d gid %d' % (NOBODY, NOBODY),
                         'tend logs the refused peer')
        self.assertEqual(self.as_nobody('restart', 'web')[0], 4)
        self.ctl('status', 'web')  # root is still served

    def test_control_group_as_supplementary_group(self):
        name = 'tendit%d' % os.getpid()
        subprocess.run(['groupadd', name], check=True, capture_output=True, timeout=30)
        self.addCleanup(subprocess.run, ['groupdel', name], capture_output=True, timeout=30)
        gid = grp.getgrnam(name).gr_gid
        self.start_tend('--control-group', name, log_level='warning')
        self.wait_running('web')
        d, st = os.stat(os.path.dirname(self.sock)), os.stat(self.sock)
        self.assertEqual((stat.S_IMODE(d.st_mode), d.st_gid), (0o710, gid), 'the directory: 0710, the control group')
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_gid), (0o660, gid), 'the socket: 0660, the control group')
        # G only as a supplementary group (the primary one is nobody's).
        status, out, err = self.as_nobody('status', 'web', '--json', groups=[gid])
        self.assertEqual(status, 0, err)
        self.assertEqual(__import__('json').loads(out)[0]['name'], 'web.service')
        self.assertEqual(self.as_nobody('restart', 'web', groups=[gid])[0], 0)
        # Without the group: the directory keeps nobody out (EACCES), and with
        # the doors opened, tend itself refuses.
        self.assertEqual(self.as_nobody('list')[0], 4)
        self.assertEqual(self.as_nobody('status')[0], 4, 'status refused: 4 as every verb (tendctl(1))')
        os.chmod(self.sock, 0o666)
        os.chmod(os.path.dirname(self.sock), 0o711)
        status, _, err = self.as_nobody('list')
        self.assertEqual(status, 4, err)
        self.assertIn('permission denied', err)
        self.assertIn('not in the control group', self.stderr())

    def test_tendctl_refuses_a_server_of_another_uid(self):
        """Another user who can put a socket where tendctl looks (a directory
        of theirs) must not get root's requests, nor fake tend's answers:
        tendctl checks the server's SO_PEERCRED (root or its own uid)."""
        d = self.path('fake')
        os.mkdir(d)
        os.chown(d, NOBODY, NOBODY)
        sock = os.path.join(d, 'control')
        fake = self.start(['setpriv', '--reuid=%d' % NOBODY, '--regid=%d' % NOBODY, '--clear-groups',
                           sys.executable, '-c', FAKE_TEND, sock], stdin=subprocess.DEVNULL)
        self.assertEqual(fake.readline(10, 'the fake tend did not listen'), 'listening')
        p = subprocess.run([TENDCTL, '--control-socket', sock, 'stop', 'web'], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=15)
        self.assertEqual(p.returncode, 4, 'root\'s tendctl must refuse a server of uid %d: %r' % (NOBODY, p))
        self.assertIn('is served by uid %d' % NOBODY, p.stderr)
        self.assertEqual(p.stdout, '')
        self.assertEqual(fake.readline(10, 'the fake tend did not report'), 'got nothing',
                         'tendctl must not send its request to a server it does not trust')


# A server as another user: answers "ok" to whatever it gets, and says
# whether it got a request.
FAKE_TEND = r'''
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen()
print('listening', flush=True)
c, _ = s.accept()
c.settimeout(5)
try:
    data = c.recv(65536)
except OSError:
    data = b''
if data:
    c.send(b'{"version": 1, "type": "result", "ok": true, "units": [{"name": "web.service", "ok": true}]}')
print('got a request' if data else 'got nothing', flush=True)
'''


if __name__ == '__main__':
    reason = why_not()
    if reason:
        print('skip: %s' % reason)
        sys.exit(77)
    unittest.main(verbosity=2)
