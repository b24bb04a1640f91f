#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sandboxing units (issue 9; SPEC §1 "Unprivileged", §3): User=, Group=,
SupplementaryGroups=, UMask=, WorkingDirectory=~, Limit*=, NoNewPrivileges=,
CapabilityBoundingSet=, AmbientCapabilities=, SystemCallFilter=,
SystemCallErrorNumber=, driven as a user would: unit files, the built tend
and tendctl, and each unit reading its own view (/proc/self/status,
/proc/self/limits, umask, pwd). Root only (users, capabilities, useradd):
otherwise it skips (77) with the reason. The cgroup items of issue 9 are in
test_service_cgroup.py."""
import os
import pwd
import grp
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import ServiceTestCase  # noqa: E402

PYTHON = '/usr/bin/python3'  # the system's: readable by nobody, unlike a user's pyenv

# The unit's main process (this sh) prints its own view: /proc/self is the
# shell itself in a redirection it opens.
PROBE = r'''
while IFS= read -r line; do
  case "$line" in
    Uid:*|Gid:*|Groups:*|CapBnd:*|CapAmb:*|CapEff:*|NoNewPrivs:*|Seccomp:*) echo "$line";;
  esac
done < /proc/self/status
while IFS= read -r line; do
  case "$line" in
    "Max open files"*|"Max core file size"*) echo "$line";;
  esac
done < /proc/self/limits
echo "ulimit-n: $(ulimit -n) $(ulimit -Hn)"
echo "umask: $(umask)"
echo "pwd: $(pwd)"
echo "env: ${USER-unset} ${LOGNAME-unset} ${HOME-unset} ${SHELL-unset}"
'''

# Binds port 80 on loopback: prints "bind ok" or "bind ERRNAME", then CapAmb.
BIND80 = '''
import errno, socket
s = socket.socket()
try:
    s.bind(('127.0.0.1', 80))
    print('bind ok')
except OSError as e:
    print('bind', errno.errorcode[e.errno])
print([l for l in open('/proc/self/status') if l.startswith('CapAmb:')][0].split()[1])
'''

# Calls the system call named by argv[1]; exits 0 iff it failed with the errno named by argv[2].
CALL_DENIED = '''
import errno, os, sys
call, want = sys.argv[1], getattr(errno, sys.argv[2])
try:
    if call == 'chroot':
        os.chroot('/')
    else:
        os.mkdir(sys.argv[3])
except OSError as e:
    print(call, errno.errorcode[e.errno])
    sys.exit(0 if e.errno == want else 2)
print(call, 'succeeded')
sys.exit(1)
'''

# Runs in a fresh network namespace as root: brings lo up, lets only root
# bind below 1024, then execs its arguments (tend). No ip(8)/sysctl(8) needed.
NETNS_UP = '''
import fcntl, os, socket, struct, sys
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack('16sH', fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack('16sH', b'lo', 0)))[1]
fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack('16sH', b'lo', flags | IFF_UP))
s.close()
with open('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'w') as f:
    f.write('1024')
os.execvp(sys.argv[1], sys.argv[1:])
'''

UNPRIVILEGED = ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups']


def parse_view(text):
    """{field: value} of PROBE's output, values with runs of blanks as one space."""
    view = {}
    for line in text.splitlines():
        if line.startswith('Max '):
            f = line.split()
            view[' '.join(f[:-3])] = '%s %s' % (f[-3], f[-2])  # soft hard (units dropped)
        elif ':' in line:
            k, v = line.split(':', 1)
            view[k] = ' '.join(v.split())
    return view


def cap_hex(*caps):
    return '%016x' % sum(1 << c for c in caps)


CAP_CHOWN, CAP_NET_BIND_SERVICE = 0, 10


class Sandbox(ServiceTestCase):
    def setUp(self):
        super().setUp()
        try:
            self.nobody = pwd.getpwnam('nobody')
        except KeyError:
            self.skipTest('no user "nobody"')
        # Units run as nobody read the scripts and write their output here.
        os.chmod(self.tmp.name, 0o755)
        self.pub = self.path('pub')
        os.mkdir(self.pub)
        os.chmod(self.pub, 0o777)
        self.probe = self.write('probe.sh', PROBE)
        self.bind80 = self.write('bind80.py', BIND80)
        self.call_denied = self.write('call_denied.py', CALL_DENIED)

    def write(self, name, text):
        p = os.path.join(self.pub, name)
        with open(p, 'w') as f:
            f.write(text.lstrip())
        os.chmod(p, 0o644)
        return p

    def out(self, name):
        return os.path.join(self.pub, name + '.out')

    def oneshot(self, name, keys, cmd=None):
        """A Type=oneshot unit running cmd (default: the probe) with keys
        (lines), its output in pub/NAME.out."""
        self.unit(name, '[Service]\nType=oneshot\nExecStart=%s\nStandardOutput=file:%s\nStandardError=file:%s\n%s'
                  % (cmd or '/bin/sh ' + self.probe, self.out(name), self.out(name), keys))

    def finished(self, name, timeout=10):
        """Waits until NAME's start ended (a last exit, or a failure); its record."""
        return self.wait_state(name, lambda r: r['state'] == 'failed' or (r['state'] == 'inactive' and r['last_exit']),
                               timeout, 'the start never ended')

    def succeeded(self, name):
        r = self.finished(name)
        self.assertEqual((r['state'], r['result'], r['last_exit']), ('inactive', 'success', {'code': 0}),
                         '%s: %r; its output %r; tend stderr %r' % (name, r, self.read(name), self.stderr()[-3000:]))
        return self.read(name)

    def read(self, name):
        try:
            with open(self.out(name)) as f:
                return f.read()
        except FileNotFoundError:
            return ''

    # ---- each key changes exactly what it should ----

    def test_each_key_changes_exactly_its_part_of_the_view(self):
        n = self.nobody
        n_groups = ' '.join(str(g) for g in sorted(os.getgrouplist('nobody', n.pw_gid)))
        as_nobody = {'Uid': '%d %d %d %d' % ((n.pw_uid,) * 4), 'Gid': '%d %d %d %d' % ((n.pw_gid,) * 4),
                     'Groups': n_groups, 'CapEff': cap_hex(),
                     'env': 'nobody nobody %s %s' % (n.pw_dir, n.pw_shell)}
        root_home = pwd.getpwuid(0).pw_dir
        nogroup = grp.getgrgid(n.pw_gid)
        cases = {
            'base': ('', {}),
            'user': ('User=nobody', as_nobody),
            'user-numeric': ('User=%d' % n.pw_uid, as_nobody),
            'group': ('Group=%s' % nogroup.gr_name, {'Gid': '%d %d %d %d' % ((n.pw_gid,) * 4)}),
            'supplementary': ('SupplementaryGroups=4242 %s' % nogroup.gr_name,
                              {'Groups': ' '.join(str(g) for g in sorted({4242, n.pw_gid}))}),
            'umask': ('UMask=0077', {'umask': '0077'}),
            'home': ('WorkingDirectory=~', {'pwd': root_home}),
            'nofile': ('LimitNOFILE=100:200', {'Max open files': '100 200', 'ulimit-n': '100 200'}),
            'core': ('LimitCORE=1M:2M', {'Max core file size': '1048576 2097152'}),
            'nnp': ('NoNewPrivileges=yes', {'NoNewPrivs': '1'}),
            'bounding': ('CapabilityBoundingSet=CAP_CHOWN CAP_NET_BIND_SERVICE',
                         {'CapBnd': cap_hex(CAP_CHOWN, CAP_NET_BIND_SERVICE),
                          'CapEff': cap_hex(CAP_CHOWN, CAP_NET_BIND_SERVICE)}),
            'ambient': ('AmbientCapabilities=CAP_NET_BIND_SERVICE', {'CapAmb': cap_hex(CAP_NET_BIND_SERVICE)}),
            'filter': ('SystemCallFilter=~@mount', {'Seccomp': '2'}),  # root keeps CAP_SYS_ADMIN: no NNP
            'errno-alone': ('SystemCallErrorNumber=EPERM', {}),
            'user-filter': ('User=nobody\nSystemCallFilter=~@mount',
                            dict(as_nobody, Seccomp='2', NoNewPrivs='1')),  # NoNewPrivileges= implied
            'user-ambient': ('User=nobody\nAmbientCapabilities=CAP_NET_BIND_SERVICE',
                             dict(as_nobody, CapAmb=cap_hex(CAP_NET_BIND_SERVICE),
                                  CapEff=cap_hex(CAP_NET_BIND_SERVICE))),
            'allow-list': ('SystemCallFilter=@system-service', {'Seccomp': '2'}),
        }
        for name, (keys, _) in cases.items():
            self.oneshot('sbx-' + name, keys)
        self.start_tend()
        views = {name: parse_view(self.succeeded('sbx-' + name)) for name in cases}
        base = views['base']
        for field in ('Uid', 'Gid', 'Groups', 'CapBnd', 'CapAmb', 'CapEff', 'NoNewPrivs', 'Seccomp',
                      'Max open files', 'Max core file size', 'ulimit-n', 'umask', 'pwd'):
            self.assertIn(field, base, 'the probe did not print %s: %r' % (field, base))
        self.assertEqual((base['umask'], base['pwd'], base['Seccomp'], base['NoNewPrivs']), ('0022', '/', '0', '0'))
        for name, (_, want) in cases.items():
            with self.subTest(unit=name):
                got = {k: v for k, v in views[name].items() if base.get(k) != v}
                self.assertEqual(got, want, '%s: what changed against a unit without the key' % cases[name][0])

    # ---- capabilities, proven: binding port 80 in a fresh network namespace ----

    def test_ambient_capability_binds_port_80(self):
        probe = subprocess.run(['unshare', '-n', 'true'], capture_output=True)
        if probe.returncode != 0:
            self.skipTest('no network namespace: %s' % probe.stderr.decode().strip())
        cmd = '%s %s' % (PYTHON, self.bind80)
        self.oneshot('sbx-nocap', 'User=nobody', cmd)
        self.oneshot('sbx-cap', 'User=nobody\nAmbientCapabilities=CAP_NET_BIND_SERVICE', cmd)
        self.start_tend(wrap=['unshare', '-n', sys.executable, self.write('netns_up.py', NETNS_UP)])
        self.assertEqual(self.succeeded('sbx-nocap').split(), ['bind', 'EACCES', '0000000000000000'])
        self.assertEqual(self.succeeded('sbx-cap').split(), ['bind', 'ok', '0000000000000400'])

    # ---- seccomp, both outcomes ----

    def test_seccomp_kill_and_errno(self):
        self.unit('sbx-killed', '''
            [Service]
            SystemCallFilter=~@privileged
            LimitCORE=0
            ExecStart=/usr/sbin/chroot / /bin/true
        ''')
        self.oneshot('sbx-eperm', 'SystemCallFilter=~@privileged\nSystemCallErrorNumber=EPERM',
                     '%s %s chroot EPERM' % (PYTHON, self.call_denied))
        self.oneshot('sbx-allowed', 'SystemCallFilter=@system-service',
                     '/bin/sh -c "ls / >/dev/null && %s -c \'print(42)\'"' % PYTHON)
        self.start_tend()
        r = self.finished('sbx-killed')
        self.assertEqual((r['state'], r['result'], r['last_exit'] and r['last_exit'].get('signal')),
                         ('failed', 'signal', 31), 'chroot under ~@privileged: want SIGSYS (31); %r' % r)
        self.assertEqual(self.succeeded('sbx-eperm').split(), ['chroot', 'EPERM'])
        self.assertEqual(self.succeeded('sbx-allowed').split(), ['42'])

    # ---- bad values ----

    def test_unknown_capability_or_syscall_is_not_loaded(self):
        self.unit('sbx-badcap', '[Service]\nExecStart=/bin/true\nCapabilityBoundingSet=CAP_CHOWN CAP_BANANA\n')
        self.unit('sbx-badcall', '[Service]\nExecStart=/bin/true\nSystemCallFilter=~@mount nosuchcall\n')
        self.oneshot('sbx-good', 'SystemCallFilter=~@mount')
        self.start_tend()
        self.succeeded('sbx-good')
        err = self.stderr()
        self.assertIn('%s/sbx-badcap.service:3: CapabilityBoundingSet=: unknown capability "CAP_BANANA"' % self.dir, err)
        self.assertIn('%s/sbx-badcall.service:3: SystemCallFilter=: unknown system call "nosuchcall"' % self.dir, err)
        for name in ('sbx-badcap', 'sbx-badcall'):
            status, _, _ = self.ctl('status', name, check=False)
            self.assertEqual(status, 4, '%s was loaded (systemctl status: 4, no such unit)' % name)

    def test_unknown_user_fails_each_start_until_it_exists(self):
        if not shutil.which('useradd'):
            self.skipTest('no useradd')
        user = 'sbxit%d' % os.getpid()
        self.oneshot('sbx-user', 'User=%s' % user)
        self.oneshot('sbx-group', 'Group=%s' % user)
        self.oneshot('sbx-other', '')
        self.start_tend()
        for name, key in (('sbx-user', 'User'), ('sbx-group', 'Group')):
            r = self.finished(name)
            self.assertEqual((r['state'], r['result']), ('failed', 'resources'), r)
            what = 'user' if key == 'User' else 'group'
            self.assertIn('%s.service: %s=%s: no such %s' % (name, key, user, what), self.stderr())
        self.succeeded('sbx-other')
        status, _, err = self.ctl('start', 'sbx-user', check=False)
        self.assertEqual(status, 1, 'a start with an unknown User= succeeded: %r' % err)
        self.assertEqual(self.st('sbx-user')['result'], 'resources')
        self.assertEqual(self.stderr().count('sbx-user.service: User=%s: no such user' % user), 2,
                         'each start resolves User= again')
        # The reason, once: no generic "cannot start" line after it.
        self.assertNotIn('sbx-user.service: cannot start', self.stderr())

        subprocess.run(['useradd', '--system', '--no-create-home', '--user-group', '--shell', '/usr/sbin/nologin',
                        user], check=True, capture_output=True)
        self.addCleanup(subprocess.run, ['userdel', user], capture_output=True)
        created = pwd.getpwnam(user)
        for name in ('sbx-user', 'sbx-group'):
            status, _, err = self.ctl('start', name, check=False)
            self.assertEqual(status, 0, '%s after %s exists: %r; tend stderr %r' % (name, user, err, self.stderr()))
            view = parse_view(self.read(name))
            field, want = ('Uid', created.pw_uid) if name == 'sbx-user' else ('Gid', created.pw_gid)
            self.assertEqual(view[field], '%d %d %d %d' % ((want,) * 4))

    def test_a_failed_step_names_the_key(self):
        """A step of the child that fails (CPUAffinity= of a CPU that does
        not exist: sched_setaffinity EINVAL) fails the start before the exec,
        and the message names the key and the errno. (A Limit*= tend cannot
        set is no longer one: the closest value is set, test_exec_keys.py.)"""
        self.oneshot('sbx-nocpu', 'CPUAffinity=1023')
        self.oneshot('sbx-other', '')
        self.start_tend()
        r = self.finished('sbx-nocpu')
        self.assertEqual((r['state'], r['result']), ('failed', 'exec-failed'), r)
        self.assertIn('sbx-nocpu.service: CPUAffinity= sched_setaffinity failed: Invalid argument (EINVAL)',
                      self.stderr())
        self.assertEqual(self.read('sbx-nocpu'), '', 'the unit ran')
        self.succeeded('sbx-other')

    # ---- unprivileged tend (SPEC §1) ----

    def test_unprivileged_tend(self):
        if not shutil.which('setpriv'):
            self.skipTest('no setpriv(1)')
        os.chmod(self.tmp.name, 0o777)  # tend, as nobody, creates its control socket's directory here
        self.oneshot('sbx-other-user', 'User=root')
        self.oneshot('sbx-own-user', 'User=nobody')
        self.oneshot('sbx-filter', 'SystemCallFilter=~mkdir mkdirat\nSystemCallErrorNumber=EUCLEAN',
                     '%s %s mkdir EUCLEAN %s/made' % (PYTHON, self.call_denied, self.pub))
        self.oneshot('sbx-filter-view', 'SystemCallFilter=~@privileged')
        self.unit('sbx-filter-kill', '[Service]\nSystemCallFilter=~@privileged\nLimitCORE=0\n'
                  'ExecStart=/usr/sbin/chroot / /bin/true\n')
        # root's tendctl trusts this nobody's tend explicitly (docs/threat-model.md)
        os.environ['TEND_SERVER_UID'] = '65534'
        self.addCleanup(os.environ.pop, 'TEND_SERVER_UID', None)
        self.start_tend(wrap=UNPRIVILEGED, cgroup=False)
        r = self.finished('sbx-other-user')
        self.assertEqual((r['state'], r['result']), ('failed', 'resources'), r)
        self.assertIn('sbx-other-user.service: User= needs privileges tend lacks (EPERM)', self.stderr())
        view = parse_view(self.succeeded('sbx-own-user'))
        self.assertEqual(view['Uid'], '%d %d %d %d' % ((self.nobody.pw_uid,) * 4))
        self.assertEqual(self.succeeded('sbx-filter').split(), ['mkdir', 'EUCLEAN'])
        self.assertFalse(os.path.exists(os.path.join(self.pub, 'made')))
        view = parse_view(self.succeeded('sbx-filter-view'))
        self.assertEqual((view['Seccomp'], view['NoNewPrivs']), ('2', '1'))  # NoNewPrivileges= implied
        r = self.finished('sbx-filter-kill')
        self.assertEqual((r['result'], r['last_exit'] and r['last_exit'].get('signal')), ('signal', 31), r)


if __name__ == '__main__':
    if os.geteuid() != 0:
        print('skip: needs root (User=, capabilities, useradd)')
        sys.exit(77)
    unittest.main(verbosity=2)
