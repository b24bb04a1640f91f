#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 17 "What it must show": redis-server, memcached and apache2 run with
their package's unit file unchanged (a symlink to /lib/systemd/system, as in
test_debian_units.py, whose helpers and namespaces this uses: tend in a
network namespace of its own, /run its own tmpfs) and EVERY hardening key of
that file applied, serving on the test's loopback port.

The keys are read from the package's file here, not listed by hand: every
key of its [Service] section must have a check in CHECKS or be named in
NOT_HARDENING, so a key a future package version adds fails the test until
someone writes its check. The drop-ins may not set any key of CHECKS.

Each check proves its key on the running daemon's main process, from outside:
 - the mounts: /proc/PID/mountinfo, and access(W_OK) and execs through
   /proc/PID/root, which cross the daemon's own mounts (EROFS, EACCES);
 - /proc/PID/status (NoNewPrivs, CapBnd, Umask, Uid), uid_map, ns inodes;
 - the seccomp keys: the daemon's seccomp programs, read with ptrace
   (PTRACE_SECCOMP_GET_FILTER) and run on the system call each key forbids
   (seccomp_bpf.py): what the kernel would answer the daemon's own
   socket(AF_PACKET), mmap(PROT_WRITE|PROT_EXEC), personality(), …, with a
   call the key allows beside it.
Then `tendctl security` on the running unit beside `systemd-analyze security
--offline=true` on the package's file: the same checks, no difference (tend
as root gives KeyringMode='s default, private, as systemd; test_keyring.py
proves it), the exposure within 0.1 of systemd's.
Root only (77 otherwise): suite `privileged`, not parallel (daemons)."""
import ctypes
import errno
import grp
import json
import os
import pwd
import stat
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seccomp_bpf as bpf  # noqa: E402
from svctest import _unescape_mountinfo, free_port, wait_exec  # noqa: E402
from test_debian_units import UNITS, DebianUnitsBase, read_pidfile, talk  # noqa: E402
from test_security import exposure, systemd_analyze  # noqa: E402

# Keys of the three files that are not hardening (what runs, how it is
# supervised): test_debian_units.py checks them.
NOT_HARDENING = {'Type', 'ExecStart', 'ExecStop', 'ExecReload', 'ExecStartPre', 'PIDFile', 'TimeoutStopSec',
                 'Restart', 'RuntimeDirectory', 'RuntimeDirectoryMode', 'LimitNOFILE', 'Environment', 'KillMode',
                 'OOMPolicy'}

# x86-64 system call numbers
NR = {'read': 0, 'mmap': 9, 'mprotect': 10, 'socket': 41, 'clone': 56, 'chmod': 90, 'syslog': 103,
      'sched_setscheduler': 144, 'personality': 135, 'adjtimex': 159, 'setrlimit': 160, 'chroot': 161,
      'settimeofday': 164, 'sethostname': 170, 'init_module': 175, 'delete_module': 176, 'clock_settime': 227,
      'clock_gettime': 228, 'kexec_load': 246, 'fchmodat': 268, 'unshare': 272, 'setns': 308,
      'finit_module': 313}
CAPS = {'CAP_SETGID': 6, 'CAP_SETUID': 7, 'CAP_SYS_MODULE': 16, 'CAP_SYS_RAWIO': 17, 'CAP_SYS_RESOURCE': 24,
        'CAP_SYS_TIME': 25, 'CAP_MKNOD': 27, 'CAP_SYSLOG': 34, 'CAP_WAKE_ALARM': 35}
AF = {'AF_UNIX': 1, 'AF_INET': 2, 'AF_INET6': 10, 'AF_NETLINK': 16, 'AF_PACKET': 17, 'AF_BLUETOOTH': 31}
CLONE_NS = {'mnt': 0x20000, 'cgroup': 0x2000000, 'uts': 0x4000000, 'ipc': 0x8000000, 'user': 0x10000000,
            'pid': 0x20000000, 'net': 0x40000000}
EPERM, EAFNOSUPPORT = errno.EPERM, errno.EAFNOSUPPORT
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_PRIVATE_ANON = 0x22
TRUE = ('yes', 'true', '1', 'on')
_libc = ctypes.CDLL(None, use_errno=True)


def service_keys(path):
    """{key: [values]} of the [Service] section of path (an empty
    assignment resets the key's list, as systemd.unit(5))."""
    keys, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in '#;':
                continue
            if line.startswith('['):
                section = line
                continue
            if section != '[Service]' or '=' not in line:
                continue
            k, v = (s.strip() for s in line.split('=', 1))
            keys[k] = [] if v == '' else keys.get(k, []) + [v]
    return keys


def words(values):
    return [w for v in values for w in v.split()]


def paths(values):
    """The paths of ReadWritePaths=-style values: '-' and '+' prefixes off,
    with whether the path may be missing."""
    out = []
    for w in words(values):
        optional = w.startswith('-')
        out.append((w.lstrip('-+'), optional))
    return out


def mounts(pid):
    """/proc/PID/mountinfo: [{'point', 'opts' (set), 'fstype', 'super' (set)}]."""
    out = []
    with open('/proc/%d/mountinfo' % pid) as f:
        for line in f:
            pre, post = line.split(' - ', 1)
            pre, post = pre.split(), post.split()
            out.append({'point': _unescape_mountinfo(pre[4]), 'opts': set(pre[5].split(',')), 'fstype': post[0],
                        'super': set(post[2].split(',')) if len(post) > 2 else set()})
    return out


def covering(ms, path):
    """The mount path is on (the longest mount point, the last mounted)."""
    best = None
    for m in ms:
        p = m['point']
        if path == p or p == '/' or path.startswith(p + '/'):
            if best is None or len(p) >= len(best['point']):
                best = m
    return best


def status(pid):
    with open('/proc/%d/status' % pid) as f:
        return {k: v.strip() for k, v in (ln.split(':', 1) for ln in f if ':' in ln)}


def ns_ino(pid, kind):
    return os.stat('/proc/%d/ns/%s' % (pid, kind)).st_ino


def attempt(f):
    """'ok', or the errno name f raised."""
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


class Daemon:
    """What the checks read of a running daemon's main process."""

    def __init__(self, test, name, pid, keys):
        self.test, self.name, self.pid, self.keys = test, name, pid, keys
        self.root = '/proc/%d/root' % pid
        self.mounts = mounts(pid)
        self.status = status(pid)
        self.progs = bpf.programs(pid) if self.status['Seccomp'] != '0' else []

    def mount_of(self, path):
        return covering(self.mounts, os.path.realpath(path))

    def writable(self, path):
        """access(W_OK) of path through the daemon's mounts (/proc/PID/root):
        'ok', or the errno name (EROFS on a read-only mount). Nothing is
        written: the paths are the host's own /etc, /usr, /var/lib…"""
        if _libc.access((self.root + os.path.realpath(path)).encode(), os.W_OK) == 0:
            return 'ok'
        e = ctypes.get_errno()
        return errno.errorcode.get(e, str(e))

    def call(self, name, *args, arch=bpf.AUDIT_ARCH_X86_64):
        return bpf.verdict(self.progs, NR[name] if isinstance(name, str) else name, args, arch)

    def cap_bnd(self):
        return int(self.status['CapBnd'], 16)


# ---- the checks: each (test, daemon, values) proves its key or fails ----

def c_private_tmp(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    for p in ('/tmp', '/var/tmp'):
        m = covering(d.mounts, p)
        t.assertEqual((m['point'], m['fstype']), (p, 'tmpfs'), '%s: %s is not a tmpfs of its own' % (d.name, p))
        t.assertNotEqual(os.stat(d.root + p).st_dev, os.stat(p).st_dev, '%s: %s is the host\'s' % (d.name, p))
    t.assertNotIn(os.path.basename(t.host_tmp_marker), os.listdir(d.root + '/tmp'),
                  '%s: the host\'s /tmp file is seen in the unit\'s /tmp' % d.name)


def c_protect_system(t, d, v):
    kind = v[-1].lower()
    ro = {'strict': ['/', '/usr', '/etc', '/var', '/boot'], 'full': ['/usr', '/etc', '/boot']}[kind]
    rw = {'strict': [], 'full': ['/var/lib', '/var/tmp']}[kind]
    rw_keys = [p for p, _ in paths(d.keys.get('ReadWritePaths', []) + d.keys.get('ReadWriteDirectories', []))]
    for p in ro:
        if os.path.isdir(p) and not any(os.path.realpath(p) == os.path.realpath(q) for q in rw_keys):
            t.assertEqual(d.writable(p), 'EROFS', '%s: ProtectSystem=%s: %s is writable' % (d.name, kind, p))
    for p in rw:
        t.assertEqual(d.writable(p), 'ok', '%s: ProtectSystem=%s: %s should stay writable' % (d.name, kind, p))


def c_protect_home(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    seen = 0
    for p in ('/home', '/root', '/run/user'):
        if not os.path.isdir(t.ns_path(p) if p.startswith('/run/') else p):  # tend's /run is its own
            continue
        st = os.stat(d.root + p)
        t.assertEqual((stat.S_IMODE(st.st_mode), os.listdir(d.root + p)), (0, []),
                      '%s: ProtectHome=yes: %s is not an empty mode-0000 directory' % (d.name, p))
        seen += 1
    t.assertGreater(seen, 0, 'no /home, /root, /run/user on the host: nothing proves ProtectHome=')
    t.assertTrue(os.listdir('/root') or os.listdir('/home'), 'the host\'s /root and /home are empty: no proof')


def c_private_devices(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    dev = d.root + '/dev'
    blocks = [n for n in os.listdir(dev) if stat.S_ISBLK(os.lstat(os.path.join(dev, n)).st_mode)]
    t.assertEqual(blocks, [], '%s: block devices in the unit\'s /dev' % d.name)
    t.assertTrue(any(stat.S_ISBLK(os.lstat('/dev/' + n).st_mode) for n in os.listdir('/dev')),
                 'the host has no block device: no proof')
    names = set(os.listdir(dev))
    t.assertTrue({'null', 'zero', 'urandom'} <= names, '%s: /dev lacks the API devices: %r' % (d.name, names))
    t.assertFalse({'mem', 'kmsg'} & names, '%s: /dev holds %r' % (d.name, {'mem', 'kmsg'} & names))
    t.assertEqual(covering(d.mounts, '/dev')['fstype'], 'tmpfs')
    t.assertFalse(d.cap_bnd() & (1 << CAPS['CAP_MKNOD'] | 1 << CAPS['CAP_SYS_RAWIO']), 'CAP_MKNOD/SYS_RAWIO kept')


def c_read_write_paths(t, d, v):
    """Each path writable, where its parent (ProtectSystem=strict) is not."""
    checked = 0
    for p, optional in paths(v):
        if not os.path.exists(d.root + p):
            t.assertTrue(optional, '%s: %s is missing and not optional (-)' % (d.name, p))
            continue
        t.assertEqual(d.writable(p), 'ok', '%s: %s is not writable' % (d.name, p))
        parent = os.path.dirname(os.path.realpath(p))
        t.assertEqual(d.writable(parent), 'EROFS', '%s: %s\'s parent is writable: nothing proves it' % (d.name, p))
        checked += 1
    t.assertGreater(checked, 0, '%s: none of %r exists: nothing proves the key' % (d.name, v))


def c_no_exec_paths(t, d, v):
    execs = [os.path.realpath(p) for p, _ in paths(d.keys.get('ExecPaths', []))]
    for p, _ in paths(v):
        # an executable under p, not under an ExecPaths= entry (/bin/sh under NoExecPaths=/)
        exe = os.path.realpath('/bin/sh') if p == '/' else p
        t.assertFalse(any(exe == e or exe.startswith(e + '/') for e in execs))
        t.assertIn('noexec', d.mount_of(exe)['opts'], '%s: %s is executable' % (d.name, exe))
        t.assertEqual(attempt(lambda: subprocess.run([d.root + exe, '-c', 'exit 0'], check=True)), 'EACCES',
                      '%s: exec of %s through its mounts did not fail with EACCES' % (d.name, exe))


def c_exec_paths(t, d, v):
    for p, _ in paths(v):  # each a mount of its own, not noexec, in a noexec tree (NoExecPaths=)
        if os.path.exists(p):
            m = d.mount_of(p)
            t.assertEqual(m['point'], os.path.realpath(p), '%s: ExecPaths=%s is not a mount of its own' % (d.name, p))
            t.assertNotIn('noexec', m['opts'], '%s: ExecPaths=%s is noexec' % (d.name, p))
    exe = os.readlink('/proc/%d/exe' % d.pid)
    t.assertNotIn('noexec', d.mount_of(exe)['opts'])
    ver = subprocess.run([d.root + exe, '--version'], capture_output=True, text=True, timeout=10)
    t.assertEqual(ver.returncode, 0, '%s: %s --version through its mounts: %r' % (d.name, exe, ver.stderr))


def c_protect_kernel_tunables(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    for p in ('/proc/sys', '/sys'):
        t.assertIn('ro', covering(d.mounts, p)['opts'], '%s: %s is not read-only' % (d.name, p))
    t.assertEqual(d.writable('/proc/sys/kernel/hostname'), 'EROFS', '%s: /proc/sys is writable' % d.name)


def c_protect_control_groups(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    t.assertEqual(d.writable('/sys/fs/cgroup'), 'EROFS', '%s: /sys/fs/cgroup is writable' % d.name)


def inaccessible(t, d, p):
    st = os.stat(d.root + p)
    t.assertEqual(stat.S_IMODE(st.st_mode), 0, '%s: %s is not inaccessible (mode %o)' % (d.name, p, st.st_mode))


def denied(t, d, call, *args, want=EPERM):
    """call(args) is denied, and one of the programs on its own answers it
    with errno want: the key's (the strictest action wins, so under redis's
    SystemCallFilter=, whose action is SIGSYS, the call is killed)."""
    t.assertIn(d.call(call, *args)[0], ('errno', 'kill'), '%s: %s%r is allowed' % (d.name, call, args))
    each = [bpf.verdict([p], NR[call], args) for p in d.progs]
    t.assertIn(('errno', want), each, '%s: no program answers %s%r with %s: %r'
               % (d.name, call, args, errno.errorcode[want], each))


def killed(t, d, call, *args):
    t.assertEqual(d.call(call, *args)[0], 'kill', '%s: %s%r is not killed' % (d.name, call, args))


def allowed(t, d, call, *args):
    t.assertEqual(d.call(call, *args), ('allow', 0), '%s: %s%r is denied' % (d.name, call, args))


def c_protect_kernel_modules(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    if os.path.isdir('/usr/lib/modules'):
        inaccessible(t, d, '/usr/lib/modules')
    for call in ('init_module', 'finit_module', 'delete_module'):
        denied(t, d, call)
    t.assertFalse(d.cap_bnd() & 1 << CAPS['CAP_SYS_MODULE'])


def c_protect_kernel_logs(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    inaccessible(t, d, '/proc/kmsg')
    if os.path.exists(d.root + '/dev/kmsg'):
        inaccessible(t, d, '/dev/kmsg')
    denied(t, d, 'syslog', 3)
    t.assertFalse(d.cap_bnd() & 1 << CAPS['CAP_SYSLOG'])


def c_protect_clock(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    for call in ('clock_settime', 'settimeofday', 'adjtimex'):
        denied(t, d, call)
    allowed(t, d, 'clock_gettime')
    t.assertFalse(d.cap_bnd() & (1 << CAPS['CAP_SYS_TIME'] | 1 << CAPS['CAP_WAKE_ALARM']))


def c_protect_hostname(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    t.assertNotEqual(ns_ino(d.pid, 'uts'), ns_ino(t.tend_pid, 'uts'), '%s: no UTS namespace of its own' % d.name)
    denied(t, d, 'sethostname')


def c_protect_proc(t, d, v):
    m = covering(d.mounts, '/proc')
    t.assertEqual((m['point'], m['fstype']), ('/proc', 'proc'))
    t.assertIn('hidepid=' + v[-1], m['super'], '%s: /proc is not hidepid=%s' % (d.name, v[-1]))


def c_private_users(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    uid = int(d.status['Uid'].split()[0])
    with open('/proc/%d/uid_map' % d.pid) as f:
        t.assertEqual([ln.split() for ln in f], [['0', '0', '1'], [str(uid), str(uid), '1']])
    t.assertNotEqual(ns_ino(d.pid, 'user'), ns_ino(t.tend_pid, 'user'), '%s: no user namespace' % d.name)


def c_remove_ipc(t, d, v):
    # redis runs as a system user (uid <= 999), whose IPC objects systemd
    # never removes either: the key asks for nothing at the stop; it is
    # accepted (the unit loaded) and tendctl security counts it applied.
    t.assertIn(v[-1].lower(), TRUE)
    t.assertLessEqual(int(d.status['Uid'].split()[0]), 999, 'RemoveIPC= of a regular user: check the removal')
    c = t.security_check(d.name, 'RemoveIPC=')
    t.assertEqual((c['badness'], c['applied']), (0, True), 'tendctl security: %r' % c)


def c_restrict_address_families(t, d, v):
    allow = words(v)
    t.assertFalse(any(w.startswith('~') for w in allow), 'a deny list: write its check')
    for fam in allow:
        allowed(t, d, 'socket', AF[fam], 1)
    for fam in set(AF) - set(allow):
        denied(t, d, 'socket', AF[fam], 3, want=EAFNOSUPPORT)


def c_restrict_namespaces(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    for kind, flag in CLONE_NS.items():
        denied(t, d, 'unshare', flag)
        denied(t, d, 'clone', flag | 17)
    denied(t, d, 'setns', 3, 0)


def c_restrict_realtime(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    denied(t, d, 'sched_setscheduler', 0, 1)  # SCHED_FIFO
    denied(t, d, 'sched_setscheduler', 0, 2)  # SCHED_RR
    if 'SystemCallFilter' not in d.keys:  # else @resources denies every policy
        allowed(t, d, 'sched_setscheduler', 0, 0)


def c_restrict_suid_sgid(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    denied(t, d, 'chmod', 0, 0o4755)
    denied(t, d, 'fchmodat', -100, 0, 0o2755)
    allowed(t, d, 'chmod', 0, 0o755)


def c_lock_personality(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    denied(t, d, 'personality', 0x0400000)  # READ_IMPLIES_EXEC
    allowed(t, d, 'personality', 0)  # PER_LINUX


def c_memory_deny_write_execute(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    denied(t, d, 'mmap', 0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE_ANON, -1, 0)
    denied(t, d, 'mprotect', 0, 4096, PROT_READ | PROT_EXEC)
    allowed(t, d, 'mmap', 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE_ANON, -1, 0)


def c_system_call_architectures(t, d, v):
    t.assertEqual(v[-1], 'native')
    t.assertEqual(d.call('read', arch=bpf.AUDIT_ARCH_I386)[0], 'kill', 'an i386 call is not killed')
    t.assertEqual(d.call(bpf.X32_SYSCALL_BIT | NR['read'])[0], 'kill', 'an x32 call is not killed')
    allowed(t, d, 'read')


# one call per group of systemd 252's, that the group holds and @system-service does not
GROUP_PROBE = {'@privileged': 'chroot', '@resources': 'setrlimit'}


def c_system_call_filter(t, d, v):
    allow = [w for w in v if not w.startswith('~')]
    t.assertEqual(allow, ['@system-service'], 'an allow list other than @system-service: write its check')
    # without SystemCallErrorNumber=, SIGSYS (as systemd)
    t.assertNotIn('SystemCallErrorNumber', d.keys)
    killed(t, d, 'kexec_load')  # not in @system-service
    allowed(t, d, 'read')
    allowed(t, d, 'socket', AF['AF_INET'], 1)
    for group in words(w.lstrip('~') for w in v if w.startswith('~')):
        t.assertIn(group, GROUP_PROBE, 'no probe for %s' % group)
        killed(t, d, GROUP_PROBE[group])


def c_no_new_privileges(t, d, v):
    t.assertIn(v[-1].lower(), TRUE)
    t.assertEqual(d.status['NoNewPrivs'], '1')


def c_capability_bounding_set(t, d, v):
    want = 0
    for c in words(v):
        want |= 1 << CAPS[c]
    # within tend's own bounding set (a container's may lack CAP_SYS_RESOURCE: nobody can
    # add it back); the other keys' drops (PrivateDevices=, ProtectClock=, …) are theirs
    want &= int(status(t.tend_pid)['CapBnd'], 16)
    t.assertEqual(d.cap_bnd(), want, '%s: CapBnd %s, want %#x' % (d.name, d.status['CapBnd'], want))


def c_user(t, d, v):
    t.assertEqual(int(d.status['Uid'].split()[0]), pwd.getpwnam(v[-1]).pw_uid)


def c_group(t, d, v):
    t.assertEqual(int(d.status['Gid'].split()[0]), grp.getgrnam(v[-1]).gr_gid)


def c_umask(t, d, v):
    t.assertEqual(int(d.status['Umask'], 8), int(v[-1], 8))


CHECKS = {
    'PrivateTmp': c_private_tmp, 'ProtectSystem': c_protect_system, 'ProtectHome': c_protect_home,
    'PrivateDevices': c_private_devices, 'ReadWritePaths': c_read_write_paths,
    'ReadWriteDirectories': c_read_write_paths, 'NoExecPaths': c_no_exec_paths, 'ExecPaths': c_exec_paths,
    'ProtectKernelTunables': c_protect_kernel_tunables, 'ProtectControlGroups': c_protect_control_groups,
    'ProtectKernelModules': c_protect_kernel_modules, 'ProtectKernelLogs': c_protect_kernel_logs,
    'ProtectClock': c_protect_clock, 'ProtectHostname': c_protect_hostname, 'ProtectProc': c_protect_proc,
    'PrivateUsers': c_private_users, 'RemoveIPC': c_remove_ipc,
    'RestrictAddressFamilies': c_restrict_address_families, 'RestrictNamespaces': c_restrict_namespaces,
    'RestrictRealtime': c_restrict_realtime, 'RestrictSUIDSGID': c_restrict_suid_sgid,
    'LockPersonality': c_lock_personality, 'MemoryDenyWriteExecute': c_memory_deny_write_execute,
    'SystemCallArchitectures': c_system_call_architectures, 'SystemCallFilter': c_system_call_filter,
    'NoNewPrivileges': c_no_new_privileges, 'CapabilityBoundingSet': c_capability_bounding_set,
    'User': c_user, 'Group': c_group, 'UMask': c_umask,
}


class HardenedDaemons(DebianUnitsBase):
    def setUp(self):
        super().setUp()
        # a file in the host's /tmp, which no PrivateTmp= unit may see
        fd, self.host_tmp_marker = tempfile.mkstemp(prefix='tend-it-host-tmp.', dir='/tmp')
        os.close(fd)
        self.addCleanup(os.unlink, self.host_tmp_marker)

    def hardening_keys(self, name, unit_file):
        """The package's [Service] keys; fails on a key with no check that is
        not named as NOT_HARDENING, and on a drop-in setting a hardening key."""
        keys = service_keys(os.path.join(UNITS, unit_file))
        unknown = sorted(set(keys) - set(CHECKS) - NOT_HARDENING)
        self.assertEqual(unknown, [], '%s: keys of %s with no check here: write one in CHECKS (or name the key '
                         'in NOT_HARDENING if it hardens nothing)' % (name, unit_file))
        d = os.path.join(self.dir, name + '.service.d')
        for f in os.listdir(d):
            overridden = set(service_keys(os.path.join(d, f))) & set(CHECKS)
            self.assertEqual(overridden, set(), '%s: drop-in %s changes hardening keys' % (name, f))
        # an empty value is a value: CapabilityBoundingSet= is the empty set
        return {k: v for k, v in keys.items() if k in CHECKS}

    def check_every_key(self, name, unit_file, pid):
        keys = self.hardening_keys(name, unit_file)
        d = Daemon(self, name, pid, service_keys(os.path.join(UNITS, unit_file)))
        if any(k in keys for k in ('NoNewPrivileges', 'SystemCallFilter', 'RestrictAddressFamilies')):
            self.assertEqual(d.status['Seccomp'], '2')
            self.assertEqual(int(d.status['Seccomp_filters']), len(d.progs), 'ptrace read another count')
        for k in sorted(keys):
            with self.subTest(unit=name, key=k):
                CHECKS[k](self, d, keys[k])
        print('%s: %d hardening keys checked on pid %d: %s' % (name, len(keys), pid, ' '.join(sorted(keys))),
              file=sys.stderr)
        return keys

    def security_check(self, name, check):
        _, out, _ = self.ctl('security', name, '-o', 'json')
        return [c for c in json.loads(out)[0]['checks'] if c['name'] == check][0]

    def beside_systemd_analyze(self, name, unit_file):
        """tendctl security on the running unit against systemd-analyze on
        the package's file: no check differs, and the exposure is within 0.1
        of systemd's."""
        want, overall = systemd_analyze(os.path.join(UNITS, unit_file))
        _, out, _ = self.ctl('security', name, '-o', 'json')
        got = json.loads(out)[0]
        checks = {c['name']: c for c in got['checks']}
        self.assertEqual(set(checks), set(want))
        differ, expected = set(), dict(want)
        for n, (w, b, r) in want.items():
            if checks[n]['badness'] != b:
                self.assertFalse(checks[n]['applied'], '%s: %s differs from systemd\'s yet is applied' % (name, n))
                differ.add(checks[n]['key'])
                expected[n] = (w, checks[n]['badness'], r)
        self.assertEqual(differ, set(), '%s: keys tend does not apply' % name)
        self.assertLessEqual(abs(got['exposure'] - overall), 1,
                             '%s: exposure %d, systemd-analyze %d' % (name, got['exposure'], overall))
        print('%s: exposure: systemd-analyze %.1f, tendctl security %.1f'
              % (name, overall / 10, got['exposure'] / 10), file=sys.stderr)

    # ---- the daemons ----

    def test_redis_server(self):
        port = self.redis_setup()
        self.start_units()
        r = self.running('redis-server', 30)
        pong = lambda: talk(self.net, port, b'PING\r\n') == b'+PONG\r\n'  # noqa: E731
        self.wait_serving(pong, 'redis PING on port %d' % port)
        self.assertEqual(os.readlink('/proc/%d/exe' % r['main_pid']), '/usr/bin/redis-check-rdb')
        keys = self.check_every_key('redis-server', 'redis-server.service', r['main_pid'])
        # the 27 hardening keys, and User=, Group=, UMask=
        self.assertGreaterEqual(len(keys), 30)
        self.assertEqual(keys['CapabilityBoundingSet'], [])
        self.beside_systemd_analyze('redis-server', 'redis-server.service')
        self.wait_serving(pong, 'redis PING after the checks')
        self.stop_leaves_nothing('redis-server')

    def test_memcached(self):
        self.need('memcached.service', '/usr/bin/memcached', '/usr/share/memcached/scripts/systemd-memcached-wrapper')
        port = free_port()
        base = self.own_dir('memcached')
        conf = os.path.join(base, 'memcached.conf')
        with open(conf, 'w') as f:
            f.write('# the test\'s: its own port; the pid file the unit\'s PIDFile= names\n'
                    '-m 16\n-p %d\n-u memcache\n-l 127.0.0.1\n-P /run/memcached/memcached.pid\n' % port)
        os.chmod(conf, 0o644)
        self.link('memcached', 'memcached.service')
        self.dropin('memcached', '''
            [Service]
            # Reset, then the package's wrapper with the test's configuration file (its own
            # port, user memcache, the pid file of the unit's PIDFile=) in place of
            # /etc/memcached.conf (port 11211).
            ExecStart=
            ExecStart=/usr/share/memcached/scripts/systemd-memcached-wrapper {conf}
        '''.format(conf=conf))
        # /run/memcached: the package's tmpfiles.d line, made in tend's own /run as
        # systemd-tmpfiles makes it at boot.
        tmpfiles = ['sh', '-c', 'systemd-tmpfiles --create /usr/lib/tmpfiles.d/memcached.conf && exec "$@"', 'sh']
        self.start_units(wrap=tmpfiles)
        r = self.running('memcached', 30)
        version = lambda: (talk(self.net, port, b'version\r\n') or b'').startswith(b'VERSION ')  # noqa: E731
        self.wait_serving(version, 'memcached on port %d' % port)
        main = r['main_pid']
        self.assertEqual(os.readlink('/proc/%d/exe' % main), '/usr/bin/memcached')
        self.assertEqual(read_pidfile(self.ns_path('/run/memcached/memcached.pid')), main)
        keys = self.check_every_key('memcached', 'memcached.service', main)
        self.assertGreaterEqual(len(keys), 12)
        self.beside_systemd_analyze('memcached', 'memcached.service')
        self.wait_serving(version, 'memcached after the checks')
        self.stop_leaves_nothing('memcached')

    def test_apache2(self):
        port, pidfile, serves = self.apache2_setup()
        self.start_units()
        self.wait_serving(serves, 'apache2 on port %d' % port)
        r = self.running('apache2', 30)
        keys = self.check_every_key('apache2', 'apache2.service', r['main_pid'])
        self.assertEqual(set(keys), {'PrivateTmp'})
        # its workers share the parent's /tmp (one namespace for the daemon)
        tmp = os.stat('/proc/%d/root/tmp' % r['main_pid']).st_dev
        for p in self.unit_procs('apache2'):
            self.assertEqual(os.stat('/proc/%d/root/tmp' % p).st_dev, tmp)
        self.beside_systemd_analyze('apache2', 'apache2.service')
        self.stop_leaves_nothing('apache2')

    def test_checks_fail_without_the_keys(self):
        """The negative control: each check of the three files, run on a
        unit of none of their keys (sleep, as root), fails."""
        self.unit('plain', '[Service]\nExecStart=/bin/sleep 600\n')
        self.start_units()
        pid = self.running('plain', 10)['main_pid']
        wait_exec(pid)
        passed = []
        for unit_file in ('redis-server.service', 'memcached.service', 'apache2.service'):
            keys = service_keys(os.path.join(UNITS, unit_file))
            d = Daemon(self, 'plain', pid, keys)
            for k in sorted(set(keys) & set(CHECKS)):
                try:
                    CHECKS[k](self, d, keys[k])
                    passed.append('%s %s' % (unit_file, k))
                except AssertionError:
                    pass
        self.assertEqual(passed, [], 'checks that pass on a process without their keys: %s' % ', '.join(passed))


if __name__ == '__main__':
    if os.geteuid() != 0:
        print('skip: needs root (the daemons\' users, /run, cgroups, ptrace)')
        sys.exit(77)
    unittest.main(verbosity=2)
