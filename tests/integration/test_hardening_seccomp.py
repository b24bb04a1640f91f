#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 17, helper "seccomp": the seccomp keys and the non-mount namespaces
proven from inside the unit. Each unit runs a small python3 probe (PROBE) that
tries the forbidden thing and writes the outcome to its output file; each key
has its negative control, the same unit without the key, where the thing
works. From the host side: /proc/PID/status of a unit's main process shows
Seccomp: 2, and NoNewPrivs: 1 where the process has no CAP_SYS_ADMIN (systemd's
implied NoNewPrivileges=). Root only (otherwise it skips, 77)."""
import ctypes
import fcntl
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import ServiceTestCase, wait_exec  # noqa: E402

PYTHON = '/usr/bin/python3'

# probe.py CHECK [ARG]: prints the outcome of one attempt, "ok …" or "denied ERRNAME".
PROBE = r'''
import ctypes, errno, mmap, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
check, arg = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else '')

def c(ret):
    if ret == -1 or ret is None:
        e = ctypes.get_errno()
        return 'denied ' + errno.errorcode.get(e, str(e))
    return 'ok'

def attempt(f):
    try:
        r = f()
        return 'ok' if r is None else r
    except OSError as e:
        return 'denied ' + errno.errorcode.get(e.errno, str(e.errno))

def sock(family, kind):
    s = socket.socket(family, kind)
    s.close()

if check == 'af_packet':
    print(attempt(lambda: sock(socket.AF_PACKET, socket.SOCK_RAW)))
elif check == 'af_unix':
    print(attempt(lambda: sock(socket.AF_UNIX, socket.SOCK_STREAM)),
          attempt(lambda: sock(socket.AF_INET, socket.SOCK_STREAM)))
elif check == 'unshare':  # CLONE_NEWUSER, or CLONE_NEWNET then CLONE_NEWUTS
    if arg == 'user':
        print(c(libc.unshare(0x10000000)))
    else:
        print(c(libc.unshare(0x40000000)), c(libc.unshare(0x04000000)))
elif check == 'wx':
    print(attempt(lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC).close()))
elif check == 'personality':
    print(c(libc.personality(0x0008)))  # PER_LINUX32
elif check == 'realtime':
    print(attempt(lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))))
elif check == 'suid':
    open(arg, 'w').close()
    print(attempt(lambda: os.chmod(arg, 0o4755)))
elif check == 'clock':  # adjtimex with modes 0: a read, allowed to anyone but under ProtectClock=
    buf = ctypes.create_string_buffer(512)
    print(c(libc.adjtimex(buf)) if libc.adjtimex(buf) == -1 else 'ok')
elif check == 'net':
    names = sorted(n for _, n in socket.if_nameindex())
    s = socket.socket()
    s.settimeout(3)
    print(','.join(names), attempt(lambda: s.connect(('127.0.0.1', int(arg)))))
elif check == 'uts':
    print(os.readlink('/proc/self/ns/uts'), c(libc.sethostname(b'tend-hardening-test', 19)) if arg == 'set' else '')
elif check == 'ipc':
    r = libc.shmget(int(arg), 0, 0)
    print('ok' if r >= 0 else c(-1))
elif check == 'userns':
    print(' '.join(open('/proc/self/uid_map').read().split()))
'''

# i386.c: an i386 system call (getpid through int 0x80) from an x86-64 program.
I386 = r'''
#include <stdio.h>
#include <unistd.h>
int main(void) {
        long ret;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
        printf("%s\n", ret == getpid() ? "ok" : "bad");
        return 0;
}
'''


class HardeningSeccomp(ServiceTestCase):
    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest('needs root')
        self.public_probe(PROBE)

    def out(self, name):
        return os.path.join(self.pub, name + '.out')

    def read(self, name):
        try:
            with open(self.out(name)) as f:
                return f.read().strip()
        except FileNotFoundError:
            return ''

    def oneshot(self, name, keys, args, cmd=None):
        self.unit(name, '[Service]\nType=oneshot\nExecStart=%s\nStandardOutput=file:%s\nStandardError=file:%s\n%s\n'
                  % (cmd or '%s %s %s' % (PYTHON, self.probe, args), self.out(name), self.out(name), keys))

    def pair(self, name, keys, args):
        """NAME with keys, and NAME-ctl without them (the negative control)."""
        self.oneshot(name, keys, args)
        self.oneshot(name + '-ctl', '', args)

    def finished(self, name, timeout=15):
        return self.wait_state(name, lambda r: r['state'] == 'failed' or (r['state'] == 'inactive' and r['last_exit']),
                               timeout, 'the start never ended')

    def outcome(self, name):
        r = self.finished(name)
        self.assertEqual((r['state'], r['result']), ('inactive', 'success'),
                         '%s: %r; output %r; tend stderr %r' % (name, r, self.read(name), self.stderr()[-3000:]))
        return self.read(name)

    def test_each_key_from_inside_the_unit(self):
        listener = socket.socket()
        listener.bind(('127.0.0.1', 0))
        listener.listen(8)
        self.addCleanup(listener.close)
        port = listener.getsockname()[1]
        shm_key = 0x7e4d0000 + os.getpid() % 0xffff
        libc = ctypes.CDLL(None, use_errno=True)
        shm = libc.shmget(shm_key, 4096, 0o1600)  # IPC_CREAT | 0600
        self.assertGreaterEqual(shm, 0, 'shmget on the host: errno %d' % ctypes.get_errno())
        self.addCleanup(libc.shmctl, shm, 0, None)  # IPC_RMID
        suid = os.path.join(self.pub, 'suid-%s')
        cases = {
            # name: (keys, probe arguments, the outcome with the keys, without them)
            'af': ('RestrictAddressFamilies=AF_INET', 'af_packet', 'denied EAFNOSUPPORT', 'ok'),
            'af-unix': ('RestrictAddressFamilies=AF_UNIX', 'af_unix', 'ok denied EAFNOSUPPORT', 'ok ok'),
            'af-deny': ('RestrictAddressFamilies=~AF_PACKET', 'af_packet', 'denied EAFNOSUPPORT', 'ok'),
            'ns': ('RestrictNamespaces=yes', 'unshare user', 'denied EPERM', 'ok'),
            'ns-list': ('RestrictNamespaces=net', 'unshare list', 'ok denied EPERM', 'ok ok'),
            'wx': ('MemoryDenyWriteExecute=yes', 'wx', 'denied EPERM', 'ok'),
            'personality': ('LockPersonality=yes', 'personality', 'denied EPERM', 'ok'),
            'realtime': ('RestrictRealtime=yes', 'realtime', 'denied EPERM', 'ok'),
            'clock': ('ProtectClock=yes', 'clock', 'denied EPERM', 'ok'),
            'net': ('PrivateNetwork=yes', 'net %d' % port, 'lo denied ECONNREFUSED', None),
            'ipc': ('PrivateIPC=yes', 'ipc %d' % shm_key, 'denied ENOENT', 'ok'),
            'userns': ('PrivateUsers=yes', 'userns', '0 0 1', '0 0 4294967295'),
        }
        for name, (keys, args, _, _) in cases.items():
            self.pair('h-' + name, keys, args)
        self.pair('h-suid', 'RestrictSUIDSGID=yes', 'suid ' + suid % 'on')
        self.oneshot('h-suid-ctl', '', 'suid ' + suid % 'off')
        self.pair('h-uts', 'ProtectHostname=yes', 'uts set')
        self.oneshot('h-uts-ctl', '', 'uts')  # never sethostname on the host
        self.start_tend()
        for name, (keys, _, want, control) in cases.items():
            with self.subTest(key=keys):
                got = self.outcome('h-' + name)
                ctl = self.outcome('h-' + name + '-ctl')
                if name == 'realtime' and ctl != 'ok':
                    self.skipTest('SCHED_FIFO is refused here even without the key (%s): no control' % ctl)
                if name == 'net':  # the host's interfaces and listener, seen without the key
                    self.assertIn(',', ctl.split()[0], 'the control sees only one interface: %r' % ctl)
                    self.assertEqual(ctl.split()[1], 'ok', ctl)
                else:
                    self.assertEqual(ctl, control, '%s: the control (without the key)' % name)
                self.assertEqual(got, want, '%s: with the key' % keys)
        self.assertEqual(self.outcome('h-suid'), 'denied EPERM')
        self.assertEqual(self.outcome('h-suid-ctl'), 'ok')
        self.assertTrue(os.stat(suid % 'off').st_mode & 0o4000)
        self.assertFalse(os.stat(suid % 'on').st_mode & 0o4000)
        host_uts = os.readlink('/proc/self/ns/uts')
        self.assertEqual(self.outcome('h-uts-ctl').split(), [host_uts])
        self.assertEqual(self.outcome('h-uts').split()[1:], ['denied', 'EPERM'])
        self.assertNotEqual(self.outcome('h-uts').split()[0], host_uts, 'ProtectHostname=: no UTS namespace of its own')

    def test_foreign_architecture_is_killed(self):
        cc = shutil.which('cc') or shutil.which('gcc')
        if not cc or os.uname().machine != 'x86_64':
            self.skipTest('needs a C compiler on x86-64')
        exe = os.path.join(self.pub, 'i386')
        src = exe + '.c'
        with open(src, 'w') as f:
            f.write(I386)
        subprocess.run([cc, '-O1', '-o', exe, src], check=True)
        if subprocess.run([exe], capture_output=True, text=True).stdout.strip() != 'ok':
            self.skipTest('no IA32 emulation in this kernel: int 0x80 does not work even without the key')
        self.unit('h-arch', '[Service]\nType=oneshot\nExecStart=%s\nSystemCallArchitectures=native\nLimitCORE=0\n'
                  'StandardOutput=file:%s\n' % (exe, self.out('h-arch')))
        self.oneshot('h-arch-ctl', '', '', cmd=exe)
        self.start_tend()
        self.assertEqual(self.outcome('h-arch-ctl'), 'ok')
        r = self.finished('h-arch')
        self.assertEqual((r['state'], r['result'], (r['last_exit'] or {}).get('signal')), ('failed', 'signal', 31),
                         'an i386 call under SystemCallArchitectures=native: want SIGSYS; %r' % r)

    def test_private_users_with_the_mount_keys(self):
        """PrivateUsers= with ProtectProc=invisible and ProtectHostname= (as
        redis-server's unit): tend as root makes the user namespace after the
        others, as systemd 252, so the new /proc can be mounted (a procfs needs
        CAP_SYS_ADMIN in the user namespace owning the PID namespace: made
        first, the mount failed with EPERM); the maps are still written."""
        try:
            nobody = pwd.getpwnam('nobody').pw_uid
        except KeyError:
            self.skipTest('no user "nobody"')
        self.unit('h-users', '[Service]\nUser=nobody\nExecStart=/bin/sleep 60\nPrivateUsers=yes\n'
                  'ProtectProc=invisible\nProtectHostname=yes\nPrivateNetwork=yes\n')
        self.start_tend()
        r = self.wait_running('h-users', timeout=10)
        pid = r['main_pid']
        wait_exec(pid)
        with open('/proc/%d/uid_map' % pid) as f:
            self.assertEqual([ln.split() for ln in f], [['0', '0', '1'], [str(nobody), str(nobody), '1']])
        with open('/proc/%d/mountinfo' % pid) as f:
            procs = [ln.split() for ln in f if ln.split()[4] == '/proc']
        self.assertTrue(procs and 'hidepid=invisible' in procs[-1][-1].split(','),
                        'ProtectProc=invisible: no hidepid=invisible /proc: %r' % procs)
        for ns in ('user', 'uts', 'net', 'mnt'):
            self.assertNotEqual(os.readlink('/proc/%d/ns/%s' % (pid, ns)), os.readlink('/proc/self/ns/' + ns), ns)
        user = os.stat('/proc/%d/ns/user' % pid).st_ino
        fd = os.open('/proc/%d/ns/uts' % pid, os.O_RDONLY | os.O_CLOEXEC)
        try:
            owner = fcntl.ioctl(fd, 0xb701)  # NS_GET_USERNS: a new fd of the owning user namespace
        finally:
            os.close(fd)
        self.assertNotEqual(os.fstat(owner).st_ino, user, 'the UTS namespace belongs to the unit\'s user namespace')
        os.close(owner)

    def test_private_users_keeps_the_bounding_set(self):
        """PrivateUsers= with CapabilityBoundingSet= under a tend whose own
        bounding set lacks CAP_SYS_RESOURCE: a new user namespace starts with
        every capability in its bounding set, so the one tend lacks came back
        (redis-server's empty CapabilityBoundingSet= left CapBnd 0x1000000);
        the unit's process holds exactly what the key keeps."""
        self.unit('h-bnd', '[Service]\nUser=nobody\nExecStart=/bin/sleep 60\nPrivateUsers=yes\n'
                  'CapabilityBoundingSet=CAP_NET_BIND_SERVICE\n')
        self.unit('h-bnd-empty', '[Service]\nExecStart=/bin/sleep 60\nPrivateUsers=yes\nCapabilityBoundingSet=\n')
        # QA's M8: without CapabilityBoundingSet=, the namespace's bounding set is tend's own
        self.unit('h-bnd-none', '[Service]\nExecStart=/bin/sleep 60\nPrivateUsers=yes\n')
        self.start_tend(wrap=['setpriv', '--bounding-set=-sys_resource', '--'])
        with open('/proc/%d/status' % self.tend_pid) as f:
            tend_bnd = [int(ln.split()[1], 16) for ln in f if ln.startswith('CapBnd:')][0]
        self.assertEqual((tend_bnd >> 24) & 1, 0, 'setpriv left CAP_SYS_RESOURCE in tend: %x' % tend_bnd)
        for name, want in (('h-bnd', 1 << 10), ('h-bnd-empty', 0), ('h-bnd-none', tend_bnd)):
            self.assertEqual(int(self.status_of(name)['CapBnd'], 16), want, name)

    def status_of(self, name):
        r = self.wait_running(name)
        pid = r['main_pid']
        wait_exec(pid)
        with open('/proc/%d/status' % pid) as f:
            return {k: v.strip() for k, v in (line.split(':', 1) for line in f if ':' in line)}

    def test_host_side_status(self):
        try:
            pwd.getpwnam('nobody')
        except KeyError:
            self.skipTest('no user "nobody"')
        keys = 'RestrictAddressFamilies=AF_UNIX AF_INET\nLockPersonality=yes\nMemoryDenyWriteExecute=yes\n'
        self.unit('h-nobody', '[Service]\nUser=nobody\nExecStart=/bin/sleep 60\n' + keys)
        self.unit('h-root', '[Service]\nExecStart=/bin/sleep 60\n' + keys)
        self.unit('h-plain', '[Service]\nUser=nobody\nExecStart=/bin/sleep 60\n')
        self.start_tend()
        nobody, root, plain = self.status_of('h-nobody'), self.status_of('h-root'), self.status_of('h-plain')
        self.assertEqual((nobody['Seccomp'], nobody['NoNewPrivs']), ('2', '1'), 'User=nobody: NoNewPrivileges= implied')
        self.assertEqual((root['Seccomp'], root['NoNewPrivs']), ('2', '0'), 'root keeps CAP_SYS_ADMIN: no NNP')
        self.assertEqual((plain['Seccomp'], plain['NoNewPrivs']), ('0', '0'), 'the control, without the keys')


if __name__ == '__main__':
    unittest.main()
