#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 17, helper "keyring": KeyringMode= proven from inside the unit. Each
unit runs a small python3 probe (PROBE) that reads its session keyring with
keyctl(2) — the id, its description (type;uid;gid;perm;name) and whether its
user keyring is linked into it — and writes them to its output file; the test
compares them with the test's own session keyring, which tend inherits:
private (and tend's default as root) → a keyring of its own, different from
tend's and from every other unit's; inherit → tend's (the negative control);
shared → its own, with the user keyring linked in; with User= the keyring
belongs to the unit's user. Root only (otherwise it skips, 77)."""
import os
import pwd
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import ServiceTestCase  # noqa: E402

PYTHON = '/usr/bin/python3'

# probe.py: prints "ID DESCRIPTION linked|unlinked" of its session keyring.
PROBE = r'''
import ctypes, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_keyctl = 250  # x86-64
GET_KEYRING_ID, DESCRIBE, READ = 0, 6, 11
SESSION, USER = -3, -4
L = ctypes.c_long

def fail(what):
    print('error', what, ctypes.get_errno())
    sys.exit(0)

s = libc.syscall(L(SYS_keyctl), L(GET_KEYRING_ID), L(SESSION), L(0))
if s < 0:
    fail('get @s')
buf = ctypes.create_string_buffer(512)
if libc.syscall(L(SYS_keyctl), L(DESCRIBE), L(SESSION), buf, L(512)) < 0:
    fail('describe @s')
u = libc.syscall(L(SYS_keyctl), L(GET_KEYRING_ID), L(USER), L(1))
if u < 0:
    fail('get @u')
links = ctypes.create_string_buffer(4096)
n = libc.syscall(L(SYS_keyctl), L(READ), L(SESSION), links, L(4096))
if n < 0:
    fail('read @s')
n = min(n, 4096) // 4
ids = struct.unpack('<%di' % n, links.raw[:n * 4])
print(s, buf.value.decode(), 'linked' if u in ids else 'unlinked')
'''


@unittest.skipUnless(os.uname().machine == 'x86_64', 'the probe calls keyctl by its x86-64 number')
class Keyring(ServiceTestCase):
    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest('needs root (tend as root: the system manager default, User=)')
        self.public_probe(PROBE)

    def out(self, name):
        return os.path.join(self.pub, name + '.out')

    def oneshot(self, name, keys):
        self.unit(name, '[Service]\nType=oneshot\nExecStart=%s %s\nStandardOutput=file:%s\nStandardError=file:%s\n%s\n'
                  % (PYTHON, self.probe, self.out(name), self.out(name), keys))

    def outcome(self, name):
        r = self.wait_state(name, lambda r: r['state'] == 'failed' or (r['state'] == 'inactive' and r['last_exit']),
                            15, 'the start never ended')
        try:
            with open(self.out(name)) as f:
                text = f.read().strip()
        except FileNotFoundError:
            text = ''
        self.assertEqual((r['state'], r['result']), ('inactive', 'success'),
                         '%s: %r; output %r; tend stderr %r' % (name, r, text, self.stderr()[-3000:]))
        words = text.split()
        self.assertEqual(len(words), 3, '%s: the probe said %r' % (name, text))
        self.assertNotEqual(words[0], 'error', '%s: the probe said %r' % (name, text))
        ident, desc, linked = words
        kind, uid, _gid, _perm, keyname = desc.split(';', 4)
        self.assertEqual(kind, 'keyring', text)
        return int(ident), int(uid), keyname, linked

    def own_keyring(self):
        """The test's session keyring, which tend inherits."""
        out = subprocess.run([PYTHON, self.probe], capture_output=True, text=True, check=True).stdout.split()
        self.assertEqual(len(out), 3, 'the probe on the host: %r' % out)
        return int(out[0])

    def test_modes_from_inside_the_unit(self):
        nobody = pwd.getpwnam('nobody').pw_uid
        self.oneshot('k-default', '')
        self.oneshot('k-default2', '')
        self.oneshot('k-private', 'KeyringMode=private')
        self.oneshot('k-inherit', 'KeyringMode=inherit')
        self.oneshot('k-shared', 'KeyringMode=shared')
        self.oneshot('k-user', 'User=nobody\nKeyringMode=private')
        self.oneshot('k-user-shared', 'User=nobody\nKeyringMode=shared')
        self.oneshot('k-user-inherit', 'User=nobody\nKeyringMode=inherit')
        tends = self.own_keyring()
        self.start_tend()
        got = {n: self.outcome(n) for n in ('k-default', 'k-default2', 'k-private', 'k-inherit', 'k-shared',
                                            'k-user', 'k-user-shared', 'k-user-inherit')}
        # the negative controls: inherit keeps tend's keyring, root's or not
        self.assertEqual(got['k-inherit'][0], tends, 'KeyringMode=inherit: not tend\'s session keyring')
        self.assertEqual(got['k-user-inherit'][0], tends, 'User= with KeyringMode=inherit: not tend\'s keyring')
        own = ('k-default', 'k-default2', 'k-private', 'k-shared', 'k-user', 'k-user-shared')
        for n in own:
            ident, uid, keyname, _ = got[n]
            self.assertNotEqual(ident, tends, '%s: shares tend\'s session keyring' % n)
            self.assertEqual(keyname, '_ses', '%s: not a new anonymous session keyring' % n)
            self.assertEqual(uid, nobody if n.startswith('k-user') else 0, '%s: the keyring\'s owner' % n)
        ids = [got[n][0] for n in own]
        self.assertEqual(len(set(ids)), len(ids), 'two units share a session keyring: %r' % got)
        # shared: the unit user's keyring linked in; private: nothing linked
        for n in ('k-shared', 'k-user-shared'):
            self.assertEqual(got[n][3], 'linked', '%s: the user keyring is not linked into @s' % n)
        for n in ('k-default', 'k-private', 'k-user'):
            self.assertEqual(got[n][3], 'unlinked', '%s: the user keyring is linked into a private keyring' % n)

    def test_restart_gets_a_new_keyring(self):
        """Each process tree its own: a unit started twice gets two keyrings."""
        out = self.out('k-again')
        self.unit('k-again', '[Service]\nType=oneshot\nExecStart=%s %s\nStandardOutput=append:%s\n'
                  % (PYTHON, self.probe, out))
        self.start_tend()
        self.wait_state('k-again', lambda r: r['state'] == 'inactive' and r['last_exit'], 15, 'the start never ended')
        self.ctl('start', 'k-again')
        self.wait_state('k-again', lambda r: r['state'] == 'inactive' and len(self.lines(out)) == 2, 15,
                        'the second start never ended (or its probe said nothing)')
        first, second = (ln.split()[0] for ln in self.lines(out))
        self.assertNotEqual(first, 'error', self.lines(out))
        self.assertNotEqual(second, first, 'the second start kept the first keyring: %r' % self.lines(out))

if __name__ == '__main__':
    unittest.main()
