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
import subprocess
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
def libc_call(name, *args):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return 'ok'
MS_REMOUNT, MS_BIND = 32, 4096
OPS = {
    'umount': lambda p: libc_call('umount2', p.encode(), 0),
    'remount-rw': lambda p: libc_call('mount', None, p.encode(), None, MS_REMOUNT | MS_BIND, None),
    'write': write, 'openw': openw, 'blockdevs': blockdevs, 'exec': execv, 'capbnd': capbnd,
    'exists': lambda p: 'yes' if os.path.lexists(p) else 'no',
    'ls': lambda p: ','.join(sorted(os.listdir(p))) or 'empty',
    'read': lambda p: open(p).read().strip() or 'empty',
    'kind': lambda p: 'char' if stat.S_ISCHR(os.stat(p).st_mode) else 'dir' if os.path.isdir(p) else 'other',
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
        link = os.path.join(usr, 'link')
        os.symlink(rw, link)
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
            'strict-link': ('ProtectSystem=strict\nReadWritePaths=%s' % link,  # a link: where it points
                            {('write', os.path.join(rw, 'l')): 'ok', ('write', u('l')): 'EROFS'}),
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
        self.addCleanup(lambda: os.path.exists(mine) and os.unlink(mine))  # a failed run's leftover
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

    # ---- the path lists ----

    def test_path_lists(self):
        r = self.rpath
        for d in ('secret', 'ro', 'src', 'dst', 'tfs', 'sub'):
            os.mkdir(r(d))
        for f, text in (('secret/f', 'secret'), ('secretfile', 'secret'), ('src/f', 'bound'), ('tfs/m', 'm')):
            with open(r(f), 'w') as fh:
                fh.write(text)
        # executables where /run's noexec cannot be the reason: the test's own directory under /usr/local
        bin_dir = self.host_dir('/usr/local', 'tend-ns-bin-%d' % os.getpid())
        os.mkdir(os.path.join(bin_dir, 'sub'))
        for d in (bin_dir, os.path.join(bin_dir, 'sub')):
            shutil.copy('/bin/true', os.path.join(d, 'true'))
        true, sub_true = os.path.join(bin_dir, 'true'), os.path.join(bin_dir, 'sub', 'true')
        bin_link = self.rpath('bin-link')
        os.symlink(bin_dir, bin_link)
        self.check({
            'inacc': ('InaccessiblePaths=%s %s' % (r('secret'), r('secretfile')),
                      {('ls', r('secret')): 'empty', ('read', r('secretfile')): 'empty',
                       ('write', r('secret/x')): 'EROFS', ('exists', r('ro')): 'yes'}),
            'inacc-no': ('', {('ls', r('secret')): 'f', ('read', r('secretfile')): 'secret'}),
            'ro': ('ReadOnlyPaths=%s' % r('ro'), {('write', r('ro/x')): 'EROFS', ('write', r('sub/x')): 'ok'}),
            'ro-plus': ('ReadOnlyPaths=+%s' % r('ro'), {('write', r('ro/y')): 'EROFS'}),
            'ro-no': ('', {('write', r('ro/z')): 'ok'}),
            'ro-rw': ('ReadOnlyPaths=%s\nReadWritePaths=%s' % (self.run_dir, r('sub')),
                      {('write', r('ro/w')): 'EROFS', ('write', r('sub/w')): 'ok'}),
            'bind': ('BindPaths=%s:%s' % (r('src'), r('dst')), {('read', r('dst/f')): 'bound',
                                                                 ('write', r('dst/w')): 'ok'}),
            'bind-ro': ('BindReadOnlyPaths=%s:%s' % (r('src'), r('dst')),
                        {('read', r('dst/f')): 'bound', ('write', r('dst/x')): 'EROFS'}),
            'bind-no': ('', {('read', r('dst/f')): 'ENOENT'}),
            'tfs': ('TemporaryFileSystem=%s' % r('tfs'), {('ls', r('tfs')): 'empty', ('write', r('tfs/x')): 'ok'}),
            'tfs-ro': ('TemporaryFileSystem=%s:ro' % r('tfs'), {('ls', r('tfs')): 'empty',
                                                                ('write', r('tfs/y')): 'EROFS'}),
            'tfs-no': ('', {('ls', r('tfs')): 'm'}),
            'noexec': ('NoExecPaths=%s' % bin_dir, {('exec', true): 'EACCES', ('exec', sub_true): 'EACCES'}),
            'noexec-exec': ('NoExecPaths=%s\nExecPaths=%s' % (bin_dir, os.path.join(bin_dir, 'sub')),
                            {('exec', true): 'EACCES', ('exec', sub_true): 'ok'}),
            'exec-no': ('', {('exec', true): 'ok'}),
            # ExecPaths=/NoExecPaths= inside a read-only tree stay read-only (QA N1: the bind of
            # the exec entry, a copy of the host's rw mount, was skipped by the read-only step)
            'exec-in-ro': ('ProtectSystem=strict\nExecPaths=%s' % bin_dir,
                           {('write', os.path.join(bin_dir, 'w')): 'EROFS', ('exec', true): 'ok'}),
            'noexec-in-ro': ('ReadOnlyPaths=%s\nNoExecPaths=%s' % (bin_dir, os.path.join(bin_dir, 'sub')),
                             {('write', os.path.join(bin_dir, 'sub', 'w')): 'EROFS', ('exec', sub_true): 'EACCES'}),
            'noexec-in-rw': ('ProtectSystem=strict\nReadWritePaths=%s\nNoExecPaths=%s'
                             % (bin_dir, os.path.join(bin_dir, 'sub')),
                             {('write', os.path.join(bin_dir, 'sub', 'w')): 'ok', ('exec', sub_true): 'EACCES'}),
            # ExecPaths= naming a link under NoExecPaths=/ (as /lib in redis-server.service)
            'exec-link': ('NoExecPaths=/\nExecPaths=%s %s /usr/bin /usr/lib /lib' % (bin_link, PYTHON),
                          {('exec', true): 'ok', ('exec', '/bin/true'): 'ok'}),
        })
        self.assertTrue(os.path.exists(r('src/w')), "BindPaths=: the unit's write did not reach the source")
        self.assertFalse(os.path.exists(r('tfs/x')), "TemporaryFileSystem=: the unit's file is on the host")

    # ---- two keys on one path: merged as systemd 252 does ----

    def test_same_path_merged(self):
        """The entry kept for a path takes the others' read-only and noexec
        (QA's H1: each of these was writable, or executable, before)."""
        r = self.rpath
        for d in ('both', 'tfs'):
            os.mkdir(r(d))
        with open(r('tfs/m'), 'w') as fh:
            fh.write('m')
        bin_dir = self.host_dir('/usr/local', 'tend-ns-merge-%d' % os.getpid())
        shutil.copy('/bin/true', os.path.join(bin_dir, 'true'))
        true = os.path.join(bin_dir, 'true')
        os.mkdir(os.path.join(bin_dir, 'rw'))
        rw_true = os.path.join(bin_dir, 'rw', 'true')
        shutil.copy('/bin/true', rw_true)
        root_probe = '/root/tend-ns-merge-%d' % os.getpid()
        self.addCleanup(lambda: os.path.exists(root_probe) and os.unlink(root_probe))
        cg = self.writable_cgroup_file()
        self.check({
            'tmp-ro': ('PrivateTmp=yes\nReadOnlyPaths=/tmp', {('ls', '/tmp'): 'empty', ('write', '/tmp/x'): 'EROFS'}),
            'bind-ro': ('BindPaths=%s\nReadOnlyPaths=%s' % (r('both'), r('both')),
                        {('write', r('both/x')): 'EROFS'}),
            'bind-only': ('BindPaths=%s' % r('both'), {('write', r('both/y')): 'ok'}),
            'home-bind': ('ProtectHome=read-only\nBindPaths=/root', {('write', root_probe): 'EROFS'}),
            'cgroup-bind': ('ProtectControlGroups=yes\nBindPaths=/sys/fs/cgroup', {('openw', cg): 'EROFS'}),
            'cgroup-bind-no': ('BindPaths=/sys/fs/cgroup', {('openw', cg): 'ok'}),
            'tfs-rw': ('TemporaryFileSystem=%s:ro\nReadWritePaths=%s' % (r('tfs'), r('tfs')),
                       {('ls', r('tfs')): 'm', ('write', r('tfs/x')): 'EROFS'}),
            'noexec-exec': ('NoExecPaths=%s\nExecPaths=%s' % (bin_dir, bin_dir), {('exec', true): 'EACCES'}),
            'exec-only': ('ExecPaths=%s' % bin_dir, {('exec', true): 'ok'}),
            # a ReadWritePaths= under NoExecPaths= keeps its own mount's exec, as under systemd 252
            'noexec-rw': ('NoExecPaths=%s\nReadWritePaths=%s' % (bin_dir, os.path.dirname(rw_true)),
                          {('exec', true): 'EACCES', ('exec', rw_true): 'ok'}),
        })
        self.assertFalse(os.path.exists(r('both/x')), 'BindPaths= + ReadOnlyPaths=: the write reached the host')
        self.assertFalse(os.path.exists(root_probe), 'ProtectHome=read-only + BindPaths=/root: the write reached /root')

    # ---- /proc and /sys ----

    def writable_cgroup_file(self):
        for d, _, files in os.walk('/sys/fs/cgroup'):
            for f in ('cgroup.procs', 'tasks'):
                p = os.path.join(d, f)
                if f in files and os.access(p, os.W_OK):
                    return p
        self.skipTest('no writable cgroup file: the negative control could not succeed')

    def test_kernel_and_proc(self):
        cg = self.writable_cgroup_file()
        sysfs = [p for p in ('/sys/kernel/profiling', '/sys/kernel/rcu_expedited', '/sys/kernel/mm/ksm/run')
                 if os.access(p, os.W_OK)][:1] or self.skipTest('no writable file of /sys/kernel for the control')
        self.check({
            'tunables': ('ProtectKernelTunables=yes', {('openw', '/proc/sys/kernel/hostname'): 'EROFS',
                                                      ('openw', sysfs[0]): 'EROFS', ('read', '/proc/kallsyms'): 'empty'}),
            'tunables-no': ('', {('openw', '/proc/sys/kernel/hostname'): 'ok', ('openw', sysfs[0]): 'ok'}),
            'cgroups': ('ProtectControlGroups=yes', {('openw', cg): 'EROFS'}),
            'cgroups-no': ('', {('openw', cg): 'ok'}),
            'invisible': ('User=nobody\nProtectProc=invisible', {('exists', '/proc/1'): 'no',
                                                                 ('exists', '/proc/self/status'): 'yes'}),
            'invisible-no': ('User=nobody', {('exists', '/proc/1'): 'yes'}),
            'subset': ('ProcSubset=pid', {('exists', '/proc/meminfo'): 'no', ('exists', '/proc/1'): 'yes'}),
            'subset-no': ('', {('exists', '/proc/meminfo'): 'yes'}),
            # The mount parts of the seccomp keys (exec/sandbox.c plan_implied_mounts()): an
            # inaccessible node over the kernel log devices.
            'klogs': ('ProtectKernelLogs=yes', {('kind', '/dev/kmsg'): 'other', ('kind', '/proc/kmsg'): 'other'}),
            'klogs-no': ('', {('kind', '/dev/kmsg'): 'char'}),
        })

    # ---- '-' and a missing path ----

    def test_missing_paths(self):
        missing = '/nonexistent-tend-ns-%d' % os.getpid()
        self.unit('required', '[Service]\nType=oneshot\nExecStart=/bin/true\nReadOnlyPaths=%s\n' % missing)
        self.check({
            'optional': ('ReadOnlyPaths=-%s\nInaccessiblePaths=-%s/a\nBindPaths=-%s:%s' % (missing, missing, missing,
                                                                                        self.rpath('x')),
                         {('write', self.rpath('w')): 'ok', ('exists', self.rpath('x')): 'no'}),
        })
        r = self.wait_state('required', lambda r: r['state'] == 'failed', 10,
                            'a missing ReadOnlyPaths= path did not fail the start')
        self.assertNotEqual(r['result'], 'success', r)
        self.assertIn('required.service: ReadOnlyPaths=%s: No such file or directory' % missing, self.stderr(),
                      'the refusal does not name the key and the path')

    # ---- from the host: the unit has a mount namespace of its own ----

    def test_host_view(self):
        for name, keys in (('ns', 'PrivateTmp=yes'), ('mounts', 'PrivateMounts=yes'), ('plain', '')):
            self.unit(name, '[Service]\nExecStart=/bin/sleep 60\n%s\n' % keys)
        self.start_tend()
        own = os.readlink('/proc/%d/ns/mnt' % self.tend_pid)
        with open('/proc/%d/mountinfo' % self.tend_pid) as f:
            tend_mounts = f.read()
        for name, private in (('ns', True), ('mounts', True), ('plain', False)):
            pid = self.wait_running(name)['main_pid']
            self.assertEqual(os.readlink('/proc/%d/ns/mnt' % pid) != own, private,
                             '%s: its mount namespace is %s tend\'s' % (name, 'the same as' if private else 'not'))
            with open('/proc/%d/mountinfo' % pid) as f:
                mounts = f.read()
            self.assertEqual(mounts != tend_mounts, private, '%s: /proc/PID/mountinfo %s tend\'s'
                             % (name, 'equals' if private else 'differs from'))
            if name == 'ns':
                self.assertIn(' /tmp ', mounts)
                root = [ln for ln in mounts.splitlines() if ln.split()[4] == '/'][0]
                host_root = [ln for ln in tend_mounts.splitlines() if ln.split()[4] == '/'][0]
                self.assertNotIn('shared:', root.split(' - ')[0], "the unit's / shares its mounts with the host")
                if 'shared:' in host_root:
                    self.assertIn('master:', root, "the unit's / is not a slave of the host's")
        self.stop_tend()

    # ---- tend without CAP_SYS_ADMIN: a user namespace of its own ----

    def test_unprivileged_tend(self):
        if not shutil.which('setpriv'):
            self.skipTest('no setpriv(1)')
        os.chmod(self.tmp.name, 0o777)  # tend, as nobody, makes its socket and the outputs here
        pub = self.rpath('pub')
        os.mkdir(pub)
        os.chmod(pub, 0o777)
        marker = '/tmp/tend-ns-marker-%d' % os.getpid()
        open(marker, 'w').close()
        self.addCleanup(os.unlink, marker)
        self.oneshot('u-ptmp', 'PrivateTmp=yes', 'exists:' + marker, 'ls:/tmp', 'write:/tmp/x')
        self.oneshot('u-strict', 'ProtectSystem=strict', 'write:%s/a' % pub)
        self.oneshot('u-plain', '', 'write:%s/b' % pub, 'exists:' + marker)
        self.oneshot('u-proc', 'ProtectProc=invisible', 'exists:/proc/1')
        # QA's H3: a unit with capabilities in tend's user namespace (a python with the
        # file capability CAP_SYS_ADMIN, allowed there) tries to undo its mounts.
        secret = self.rpath('secret')
        os.mkdir(secret)
        capped = os.path.join(self.host_dir('/usr/local', 'tend-ns-cap-%d' % os.getpid()), 'python3')
        shutil.copy(os.path.realpath(PYTHON), capped)
        os.chmod(os.path.dirname(capped), 0o755)
        has_setcap = shutil.which('setcap') and subprocess.run(['setcap', 'cap_sys_admin+ep', capped]).returncode == 0
        self.unit('u-lock', '[Service]\nType=oneshot\nExecStart=%s %s umount:%s remount-rw:/ write:%s/c\n'
                  'StandardOutput=file:%s\nStandardError=file:%s\nInaccessiblePaths=%s\nProtectSystem=strict\n'
                  % (capped, self.probe, secret, pub, self.out('u-lock'), self.out('u-lock'), secret))
        # QA's M2: the second unit needing the inaccessible nodes found them made, mode 0000 (EACCES)
        self.oneshot('u-inacc2', 'InaccessiblePaths=%s' % secret, 'ls:' + secret)
        nobody = pwd.getpwnam('nobody').pw_uid
        xdg = self.rpath('xdg')
        os.mkdir(xdg, 0o700)
        os.chown(xdg, nobody, -1)
        os.environ['TEND_SERVER_UID'] = str(nobody)
        self.addCleanup(os.environ.pop, 'TEND_SERVER_UID', None)
        self.start_tend(wrap=['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups'], cgroup=False,
                        env=dict(os.environ, XDG_RUNTIME_DIR=xdg))
        if not userns_allowed():
            r = self.finished('u-ptmp')
            self.assertEqual(r['state'], 'failed', r)
            self.assertIn('u-ptmp.service: PrivateTmp= cannot be applied (needs a mount namespace: tend lacks '
                          'CAP_SYS_ADMIN)', self.stderr())
            return
        self.assertEqual(self.results('u-ptmp'), {('exists', marker): 'no', ('ls', '/tmp'): 'empty',
                                                  ('write', '/tmp/x'): 'ok'})
        self.assertEqual(self.results('u-strict'), {('write', pub + '/a'): 'EROFS'})
        self.assertEqual(self.results('u-plain'), {('write', pub + '/b'): 'ok', ('exists', marker): 'yes'})
        r = self.finished('u-proc')
        self.assertEqual(r['state'], 'failed', r)
        self.assertIn('u-proc.service: ProtectProc= cannot be applied (needs a new /proc: tend lacks CAP_SYS_ADMIN)',
                      self.stderr())
        self.assertEqual(self.results('u-inacc2'), {('ls', secret): 'EACCES'})
        if has_setcap:
            self.assertEqual(self.results('u-lock'), {('umount', secret): 'EINVAL', ('remount-rw', '/'): 'EPERM',
                                                      ('write', pub + '/c'): 'EROFS'},
                             'a unit with CAP_SYS_ADMIN in the user namespace undid its mounts')


    # ---- root without CAP_SYS_ADMIN: refused, never a user namespace where the unit is root ----

    def test_root_without_sys_admin(self):
        """QA's H3: root tend without CAP_SYS_ADMIN made the unit root with every
        capability in a user namespace owning its mount namespace: it unmounted
        InaccessiblePaths= and remounted / read-write. Now refused, naming the key."""
        if not shutil.which('capsh'):
            self.skipTest('no capsh(8)')
        os.mkdir(self.rpath('secret'))
        with open(self.rpath('secret/f'), 'w') as fh:
            fh.write('secret')
        self.oneshot('r-inacc', 'InaccessiblePaths=%s' % self.rpath('secret'),
                     'umount:' + self.rpath('secret'), 'ls:' + self.rpath('secret'))
        self.oneshot('r-strict', 'ProtectSystem=strict', 'remount-rw:/', 'write:/usr/tend-ns-qa')
        self.oneshot('r-users', 'PrivateUsers=yes\nInaccessiblePaths=%s' % self.rpath('secret'),
                     'umount:' + self.rpath('secret'))
        self.oneshot('r-plain', '', 'ls:' + self.rpath('secret'))
        self.addCleanup(lambda: os.path.exists('/usr/tend-ns-qa') and os.unlink('/usr/tend-ns-qa'))
        self.start_tend(wrap=['capsh', '--drop=cap_sys_admin', '--', '-c', 'exec "$0" "$@"'])
        with open('/proc/%d/status' % self.tend_pid) as f:
            cap_eff = [int(ln.split()[1], 16) for ln in f if ln.startswith('CapEff:')][0]
        self.assertEqual((cap_eff >> 21) & 1, 0, 'capsh did not drop CAP_SYS_ADMIN from tend: %x' % cap_eff)
        self.assertEqual(self.results('r-plain'), {('ls', self.rpath('secret')): 'f'})
        for name, key in (('r-inacc', 'InaccessiblePaths='), ('r-strict', 'ProtectSystem='),
                          ('r-users', 'InaccessiblePaths=')):
            r = self.finished(name)
            with open(self.out(name)) if os.path.exists(self.out(name)) else open(os.devnull) as f:
                text = f.read()
            self.assertEqual(r['state'], 'failed', '%s started without CAP_SYS_ADMIN: %r; its probe said %r'
                             % (name, r, text))
            self.assertIn('%s.service: %s cannot be applied (needs a mount namespace: tend lacks CAP_SYS_ADMIN)'
                          % (name, key), self.stderr())
        self.assertFalse(os.path.exists('/usr/tend-ns-qa'), 'a unit wrote in the host /usr')


def userns_allowed():
    for knob in ('/proc/sys/kernel/unprivileged_userns_clone', '/proc/sys/user/max_user_namespaces'):
        try:
            with open(knob) as f:
                if int(f.read()) == 0:
                    return False
        except FileNotFoundError:
            pass
    return True


if __name__ == '__main__':
    if os.geteuid() != 0:
        print('skip: needs root (mount namespaces)')
        sys.exit(77)
    unittest.main(verbosity=2)
