#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ns: the file-system namespace keys (issue 17; docs/tend.service.5.md
"HARDENING", "File system"), each proved from inside the unit by a real
process (PROBE) trying the forbidden thing, beside its negative control (the
same unit without the key). Root only (mount namespaces on the real machine):
otherwise it skips (77). Everything the units mount happens in their own
mount namespaces: the test checks the host's mount table is unchanged."""
import os
import pwd
import shutil
import stat
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import ServiceTestCase  # noqa: E402

PYTHON = '/usr/bin/python3'

# argv: OP:PATH …; prints one line "OP PATH RESULT" each. RESULT: ok, an
# errno name, or what was found (a listing, a count, a content).
PROBE = r'''
import errno, os, stat, subprocess, sys
def res(f):
    try:
        return f()
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def write(p):
    with open(p, 'w') as f:
        f.write('unit')
    return 'ok'
def openw(p):
    os.close(os.open(p, os.O_WRONLY))
    return 'ok'
def blockdevs(p):
    n = 0
    for d, _, files in os.walk(p):
        for f in files:
            try:
                n += stat.S_ISBLK(os.lstat(os.path.join(d, f)).st_mode)
            except OSError:
                pass
    return str(n)
def run(p):
    return 'ok' if subprocess.run([p]).returncode == 0 else 'failed'
def execv(p):
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(p, [p])
        except OSError as e:
            os._exit(100 + e.errno)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return 'ok' if code == 0 else errno.errorcode.get(code - 100, 'exit %d' % code)
def capbnd(p):
    line = [l for l in open('/proc/self/status') if l.startswith('CapBnd:')][0]
    v = int(line.split()[1], 16)
    return 'mknod=%d rawio=%d' % ((v >> 27) & 1, (v >> 17) & 1)
OPS = {
    'write': write, 'openw': openw, 'blockdevs': blockdevs, 'exec': execv, 'capbnd': capbnd,
    'exists': lambda p: 'yes' if os.path.lexists(p) else 'no',
    'ls': lambda p: ','.join(sorted(os.listdir(p))) or 'empty',
    'read': lambda p: open(p).read().strip() or 'empty',
}
for a in sys.argv[1:]:
    op, path = a.split(':', 1)
    print(op, path, res(lambda: OPS[op](path)), flush=True)
'''


class HardeningFs(ServiceTestCase):
    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest('needs root: mount namespaces on the real machine')
        with open('/proc/self/mountinfo') as f:
            self.host_mounts = sorted(ln.split()[4] for ln in f)
        self.addCleanup(self.check_host_mounts)
        # Outside /tmp (PrivateTmp= hides it) and /home: the probe, and the paths the units try.
        self.run_dir = tempfile.mkdtemp(prefix='tend-ns-', dir='/run')
        os.chmod(self.run_dir, 0o755)
        self.addCleanup(shutil.rmtree, self.run_dir, True)
        self.probe = os.path.join(self.run_dir, 'probe.py')
        with open(self.probe, 'w') as f:
            f.write(PROBE.lstrip())
        os.chmod(self.probe, 0o644)

    def check_host_mounts(self):
        with open('/proc/self/mountinfo') as f:
            now = sorted(ln.split()[4] for ln in f)
        self.assertEqual(now, self.host_mounts, 'the host mount table changed: a unit mounted outside its namespace')

    def rpath(self, *names):
        return os.path.join(self.run_dir, *names)

    def host_dir(self, parent, name='tend-ns-%d' % os.getpid()):
        """A directory the test makes under parent (/usr/local, /etc, /root…), removed after."""
        d = os.path.join(parent, name)
        os.makedirs(d, exist_ok=True)
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def out(self, name):
        return self.path(name + '.out')

    def oneshot(self, name, keys, *ops):
        self.unit(name, '[Service]\nType=oneshot\nExecStart=%s %s %s\nStandardOutput=file:%s\nStandardError=file:%s\n%s'
                  % (PYTHON, self.probe, ' '.join(ops), self.out(name), self.out(name), keys))

    def finished(self, name, timeout=15):
        return self.wait_state(name, lambda r: r['state'] == 'failed' or (r['state'] == 'inactive' and r['last_exit']),
                               timeout, 'the start never ended')

    def results(self, name):
        """{(op, path): result} of NAME's probe, which must have succeeded."""
        r = self.finished(name)
        with open(self.out(name)) as f:
            text = f.read()
        self.assertEqual((r['state'], r['result']), ('inactive', 'success'),
                         '%s: %r; its output %r; tend stderr %r' % (name, r, text, self.stderr()[-3000:]))
        res = {}
        for line in text.splitlines():
            op, path, result = line.split(' ', 2)
            res[op, path] = result
        return res

    def check(self, cases):
        """cases: {unit: (keys, {(op, path): expected})}; all started by one tend."""
        for name, (keys, want) in cases.items():
            self.oneshot(name, keys, *('%s:%s' % k for k in want))
        self.start_tend()
        for name, (keys, want) in cases.items():
            got = self.results(name)
            for k, v in want.items():
                self.assertEqual(got.get(k), v, '%s (%s): %s %s: %r, expected %r; all: %r'
                                 % (name, keys.replace('\n', ' '), k[0], k[1], got.get(k), v, got))

    # ---- ProtectSystem=, ReadWritePaths=, the unit's directories ----

    def test_protect_system(self):
        pid = os.getpid()
        usr, rw, etc = self.host_dir('/usr/local'), self.host_dir('/usr/local', 'tend-ns-rw-%d' % pid), self.host_dir('/etc')
        state = '/var/lib/tend-ns-%d' % pid
        self.addCleanup(shutil.rmtree, state, True)
        u = lambda n: os.path.join(usr, n)  # noqa: E731
        e = lambda n: os.path.join(etc, n)  # noqa: E731
        self.check({
            'strict': ('ProtectSystem=strict', {('write', u('a')): 'EROFS', ('write', e('a')): 'EROFS',
                                                ('write', os.path.join(rw, 'a')): 'EROFS',
                                                ('write', self.rpath('a')): 'EROFS', ('write', '/dev/shm/x'): 'ok'}),
            'strict-rw': ('ProtectSystem=strict\nReadWritePaths=%s' % rw,
                          {('write', u('b')): 'EROFS', ('write', os.path.join(rw, 'b')): 'ok'}),
            'strict-dirs': ('ProtectSystem=strict\nStateDirectory=tend-ns-%d' % pid,
                            {('write', state + '/c'): 'ok', ('write', u('c')): 'EROFS'}),
            'full': ('ProtectSystem=full', {('write', e('d')): 'EROFS', ('write', u('d')): 'EROFS',
                                            ('write', self.rpath('d')): 'ok'}),
            'yes': ('ProtectSystem=yes', {('write', u('e')): 'EROFS', ('write', e('e')): 'ok'}),
            'none': ('', {('write', u('f')): 'ok', ('write', e('f')): 'ok'}),
        })
        os.unlink('/dev/shm/x')
        self.assertTrue(os.path.exists(os.path.join(rw, 'b')), 'ReadWritePaths= wrote elsewhere than the host path')

    # ---- PrivateTmp= ----

    def test_private_tmp(self):
        marker = '/tmp/tend-ns-marker-%d' % os.getpid()
        mine = '/tmp/tend-ns-unit-%d' % os.getpid()
        open(marker, 'w').close()
        self.addCleanup(os.unlink, marker)
        self.check({
            'ptmp': ('PrivateTmp=yes', {('exists', marker): 'no', ('ls', '/tmp'): 'empty', ('ls', '/var/tmp'): 'empty',
                                        ('write', mine): 'ok', ('exists', mine): 'yes'}),
            'ptmp-strict': ('PrivateTmp=yes\nProtectSystem=strict', {('write', '/tmp/x'): 'ok',
                                                                    ('write', '/var/tmp/x'): 'ok'}),
            'ptmp-no': ('', {('exists', marker): 'yes'}),
        })
        self.assertFalse(os.path.exists(mine), "the unit's private /tmp file is visible on the host")

    # ---- PrivateDevices= ----

    def test_private_devices(self):
        host_blk = sum(stat.S_ISBLK(os.lstat(os.path.join(d, f)).st_mode)
                       for d, _, files in os.walk('/dev') for f in files)
        if host_blk == 0:
            self.skipTest('no block device in /dev: the negative control could not fail')
        self.check({
            'pdev': ('PrivateDevices=yes', {('blockdevs', '/dev'): '0', ('write', '/dev/null'): 'ok',
                                            ('exists', '/dev/urandom'): 'yes', ('exists', '/dev/pts'): 'yes',
                                            ('exists', '/dev/shm'): 'yes', ('write', '/dev/new'): 'EROFS',
                                            ('capbnd', '-'): 'mknod=0 rawio=0'}),
            'pdev-no': ('', {('blockdevs', '/dev'): str(host_blk), ('capbnd', '-'): 'mknod=1 rawio=1'}),
        })

    # ---- ProtectHome= ----

    def test_protect_home(self):
        d = self.host_dir('/root')
        m = os.path.join(d, 'm')
        open(m, 'w').close()
        self.check({
            'home-yes': ('ProtectHome=yes', {('exists', m): 'no', ('ls', '/root'): 'empty', ('ls', '/home'): 'empty',
                                             ('write', '/root/x'): 'EROFS'}),
            'home-ro': ('ProtectHome=read-only', {('exists', m): 'yes', ('write', os.path.join(d, 'x')): 'EROFS'}),
            'home-tmpfs': ('ProtectHome=tmpfs', {('exists', m): 'no', ('ls', '/home'): 'empty',
                                                 ('write', '/home/x'): 'EROFS'}),
            'home-no': ('', {('exists', m): 'yes', ('write', os.path.join(d, 'y')): 'ok'}),
        })


if __name__ == '__main__':
    if os.geteuid() != 0:
        print('skip: needs root (mount namespaces)')
        sys.exit(77)
    unittest.main(verbosity=2)
