#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What a process gets (issue 16, helper "exec"): the command prefixes
+ ! !! :, the directories (RuntimeDirectory= … ConfigurationDirectory=, their
modes, RuntimeDirectoryPreserve=, the variables), Nice=, OOMScoreAdjust=,
IOScheduling*=, CPUScheduling*=, CPUAffinity=, StandardOutput=tty with
TTYPath=, and Limit*= clamped to the closest value. Each is observed from a
real process under the built tend (/proc, ionice, chrt), as root and as an
unprivileged tend (setpriv). Root only: otherwise it skips (77)."""
import os
import pty
import pwd
import select
import shutil
import stat
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import ServiceTestCase, wait_exec  # noqa: E402
from tendtest import wait_until  # noqa: E402

UNPRIVILEGED = ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups']


class ExecKeys(ServiceTestCase):
    def setUp(self):
        super().setUp()
        try:
            self.nobody = pwd.getpwnam('nobody')
        except KeyError:
            self.skipTest('no user "nobody"')
        os.chmod(self.tmp.name, 0o755)
        self.pub = self.path('pub')
        os.mkdir(self.pub)
        os.chmod(self.pub, 0o777)
        # Names under the system's roots (/run, /var/lib …): unique, removed after.
        self.tag = 'tend-it-%d-%s' % (os.getpid(), self.id().rsplit('.', 1)[-1][5:20])

    def out(self, name):
        return os.path.join(self.pub, name + '.out')

    def read(self, name):
        try:
            with open(self.out(name)) as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def cleanup_path(self, p):
        self.addCleanup(lambda: shutil.rmtree(p, ignore_errors=True))
        return p

    def finished(self, name, timeout=10):
        return self.wait_state(name, lambda r: r['state'] == 'failed' or (r['state'] == 'inactive' and r['last_exit']),
                               timeout, 'the start never ended')

    def succeeded(self, name):
        r = self.finished(name)
        self.assertEqual((r['state'], r['result']), ('inactive', 'success'),
                         '%s: %r; output %r; tend stderr %r' % (name, r, self.read(name), self.stderr()[-3000:]))
        return self.read(name)

    def main_pid(self, name):
        r = self.wait_running(name)
        self.assertTrue(r['main_pid'], r)
        wait_exec(r['main_pid'])  # running at the fork: the hook's work is done at the exec
        return r['main_pid']

    # ---- command prefixes ----

    def test_prefixes(self):
        """User=nobody with NoNewPrivileges=yes: '+' runs as root without
        any of it, '!' as root with NoNewPrivileges= kept, '!!' (a kernel
        with ambient capabilities) as nobody, no prefix as nobody; ':' keeps
        $FOO and ${FOO} as written."""
        # Each command writes its label and view itself (the unit's stdout is a pipe through tend: no order).
        view = "{ echo %s; grep -E '^(Uid|NoNewPrivs):' /proc/self/status | tr -s '\\t ' ' '; } >> " + self.out('pfx')
        self.unit('pfx', '''[Service]
            Type=oneshot
            User=nobody
            NoNewPrivileges=yes
            Environment=FOO=bar
            ExecStartPre=+/bin/sh -c "%s"
            ExecStartPre=!/bin/sh -c "%s"
            ExecStartPre=-!!/bin/sh -c "%s"
            ExecStartPre=/bin/sh -c "%s"
            ExecStart=:/bin/sh -c 'echo "$1 $2" >> %s' sh $FOO ${FOO}
            ExecStart=/bin/sh -c 'echo "$$1 $$2" >> %s' sh $FOO ${FOO}
            ''' % (view % 'plus', view % 'bang', view % 'bangbang', view % 'none', self.out('pfx'), self.out('pfx')))
        with open(self.out('pfx'), 'w'):
            pass
        os.chmod(self.out('pfx'), 0o666)  # nobody appends to it too
        self.start_tend()
        self.succeeded('pfx')
        text = self.read('pfx')
        u = self.nobody.pw_uid
        blocks = {}
        cur = None
        for line in text.splitlines():
            if line in ('plus', 'bang', 'bangbang', 'none'):
                cur = line
                blocks[cur] = []
            elif cur and line.startswith(('Uid:', 'NoNewPrivs:')):
                blocks[cur].append(line)
        want = {
            'plus': ['Uid: 0 0 0 0', 'NoNewPrivs: 0'],
            'bang': ['Uid: 0 0 0 0', 'NoNewPrivs: 1'],
            'bangbang': ['Uid: %d %d %d %d' % ((u,) * 4), 'NoNewPrivs: 1'],
            'none': ['Uid: %d %d %d %d' % ((u,) * 4), 'NoNewPrivs: 1'],
        }
        self.assertEqual(blocks, want, text)
        self.assertTrue(text.endswith('\n$FOO ${FOO}\nbar bar\n'), text)

    # ---- directories ----

    def test_directories_created_owned_and_named(self):
        """Each type under its root with its mode and User='s ownership (but
        ConfigurationDirectory=, root's), the
        parents of a/b made 0755, the variables set for every command; the
        runtime ones removed at stop, the others kept."""
        t = self.tag
        roots = {'RUNTIME': '/run', 'STATE': '/var/lib', 'CACHE': '/var/cache', 'LOGS': '/var/log',
                 'CONFIGURATION': '/etc'}
        for r in roots.values():
            self.cleanup_path(os.path.join(r, t))
        self.unit('dirs', '''[Service]
            User=nobody
            RuntimeDirectory=%(t)s/run %(t)s/second
            RuntimeDirectoryMode=0710
            StateDirectory=%(t)s
            StateDirectoryMode=0700
            CacheDirectory=%(t)s
            LogsDirectory=%(t)s
            ConfigurationDirectory=%(t)s
            ExecStartPre=/bin/sh -c 'echo "pre $RUNTIME_DIRECTORY" > %(out)s'
            ExecStart=/bin/sh -c 'env | grep _DIRECTORY= | sort >> %(out)s; exec sleep 1000'
            ''' % {'t': t, 'out': self.out('dirs')})
        self.start_tend()
        self.main_pid('dirs')
        wait_until(lambda: 'STATE_DIRECTORY' in self.read('dirs'), 5, lambda: 'no variables: %r' % self.read('dirs'))
        run1, run2 = '/run/%s/run' % t, '/run/%s/second' % t
        self.assertEqual(self.read('dirs').splitlines(), [
            'pre %s:%s' % (run1, run2),
            'CACHE_DIRECTORY=/var/cache/%s' % t,
            'CONFIGURATION_DIRECTORY=/etc/%s' % t,
            'LOGS_DIRECTORY=/var/log/%s' % t,
            'RUNTIME_DIRECTORY=%s:%s' % (run1, run2),
            'STATE_DIRECTORY=/var/lib/%s' % t])
        n = self.nobody
        modes = {run1: 0o710, run2: 0o710, '/var/lib/' + t: 0o700, '/var/cache/' + t: 0o755,
                 '/var/log/' + t: 0o755, '/etc/' + t: 0o755}
        for p, mode in modes.items():
            st = os.lstat(p)
            self.assertTrue(stat.S_ISDIR(st.st_mode), p)
            # systemd.exec(5): every leaf is User='s except ConfigurationDirectory='s (root's).
            owner = (0, 0) if p.startswith('/etc/') else (n.pw_uid, n.pw_gid)
            self.assertEqual((oct(st.st_mode & 0o7777), st.st_uid, st.st_gid), (oct(mode),) + owner, p)
        st = os.stat('/run/' + t)  # the parent of a/b: root's, 0755
        self.assertEqual((oct(st.st_mode & 0o7777), st.st_uid), (oct(0o755), 0))
        self.ctl('stop', 'dirs')
        self.wait_state('dirs', lambda r: r['state'] == 'inactive', 10, 'never stopped')
        wait_until(lambda: not os.path.exists(run1), 5, 'RuntimeDirectory= left after the stop')
        self.assertFalse(os.path.exists(run2))
        for p in ('/var/lib/', '/var/cache/', '/var/log/', '/etc/'):
            self.assertTrue(os.path.isdir(p + t), p + t + ' removed at stop')

    def test_existing_directory_is_chowned_not_followed(self):
        """An existing StateDirectory= of another owner is chowned whole
        (systemd 252: when the top's owner differs), its symlinks not
        followed; an unsafe name is refused with file:line."""
        t = self.tag
        top = self.cleanup_path('/var/lib/' + t)
        os.makedirs(top + '/sub')
        with open(top + '/sub/file', 'w') as f:
            f.write('x')
        victim = self.path('victim')
        with open(victim, 'w') as f:
            f.write('root-owned')
        os.symlink(victim, top + '/link')
        self.unit('chown', '[Service]\nType=oneshot\nUser=nobody\nStateDirectory=%s\nExecStart=/bin/true\n' % t)
        self.unit('unsafe', '[Service]\nType=oneshot\nRuntimeDirectory=../etc\nExecStart=/bin/true\n')
        self.start_tend()
        self.succeeded('chown')
        n = self.nobody.pw_uid
        for p in (top, top + '/sub', top + '/sub/file'):
            self.assertEqual(os.lstat(p).st_uid, n, p)
        self.assertEqual(os.lstat(top + '/link').st_uid, n)
        self.assertEqual(os.stat(victim).st_uid, 0, 'the chown followed a symlink')
        self.assertIn('unsafe.service:3: RuntimeDirectory=: not a relative path without ".."', self.stderr())

    def test_runtime_directory_preserve(self):
        """RuntimeDirectoryPreserve=: no removes it before an automatic
        restart, restart keeps it then and removes it at the stop, yes keeps
        it after the stop."""
        t = self.tag
        self.cleanup_path('/run/' + t)
        for mode in ('no', 'restart', 'yes'):
            self.unit('keep-' + mode, '''[Service]
                RuntimeDirectory=%s/%s
                RuntimeDirectoryPreserve=%s
                Restart=always
                RestartSec=200ms
                ExecStart=/bin/sh -c 'ls "$RUNTIME_DIRECTORY" > %s.new; echo $$$$ >> %s.new; mv %s.new %s; touch "$RUNTIME_DIRECTORY/mark"; exec sleep 1000'
                ''' % ((t, mode, mode) + (self.out('keep-' + mode),) * 4))
        self.start_tend()
        for mode in ('no', 'restart', 'yes'):
            name = 'keep-' + mode
            pid = self.main_pid(name)
            d = '/run/%s/%s' % (t, mode)
            wait_until(lambda: os.path.exists(d + '/mark'), 5, 'no mark in ' + d)
            os.kill(pid, 9)
            new = self.wait_running(name, timeout=10, other_than=pid)['main_pid']
            wait_until(lambda: self.read(name).split()[-1:] == [str(new)], 5,
                       lambda: 'the new instance never wrote: %r' % self.read(name))
            # What the new instance found: the previous one's mark, or nothing.
            self.assertEqual(self.read(name).split()[:-1], [] if mode == 'no' else ['mark'], name)
            self.ctl('stop', name)
            self.wait_state(name, lambda r: r['state'] == 'inactive', 10, 'never stopped')
            self.assertEqual(os.path.exists(d), mode == 'yes', d)

    def test_unprivileged_tend_uses_xdg(self):
        """tend as nobody: the directories under $XDG_RUNTIME_DIR,
        $XDG_STATE_HOME (logs in its log/), $XDG_CACHE_HOME,
        $XDG_CONFIG_HOME; an OOMScoreAdjust= it may not set skipped with one
        notice; LimitNOFILE= above its hard limit clamped with a notice."""
        if not shutil.which('setpriv') or not shutil.which('prlimit'):
            self.skipTest('no setpriv(1) or prlimit(1)')
        os.chmod(self.tmp.name, 0o777)
        xdg = self.path('xdg')
        os.mkdir(xdg)
        os.chown(xdg, self.nobody.pw_uid, self.nobody.pw_gid)
        env = dict(os.environ, XDG_RUNTIME_DIR=xdg + '/run', XDG_STATE_HOME=xdg + '/state',
                   XDG_CACHE_HOME=xdg + '/cache', XDG_CONFIG_HOME=xdg + '/config', HOME=xdg)
        self.unit('xdg', '''[Service]
            Type=oneshot
            RuntimeDirectory=r
            StateDirectory=s
            CacheDirectory=c
            LogsDirectory=l
            ConfigurationDirectory=f
            OOMScoreAdjust=-100
            LimitNOFILE=65535
            ExecStart=/bin/sh -c 'env | grep _DIRECTORY= | sort; cat /proc/self/oom_score_adj; grep "Max open files" /proc/self/limits; stat -c %%%%U:%%%%a "$RUNTIME_DIRECTORY"'
            StandardOutput=file:%s
            ''' % self.out('xdg'))
        # root's tendctl trusts this nobody's tend explicitly (docs/threat-model.md)
        os.environ['TEND_SERVER_UID'] = '65534'
        self.addCleanup(os.environ.pop, 'TEND_SERVER_UID', None)
        self.start_tend(wrap=UNPRIVILEGED + ['prlimit', '--nofile=1024:4096', '--'], cgroup=False, env=env)
        out = self.succeeded('xdg').splitlines()
        self.assertEqual(out[:5], ['CACHE_DIRECTORY=%s/cache/c' % xdg, 'CONFIGURATION_DIRECTORY=%s/config/f' % xdg,
                                   'LOGS_DIRECTORY=%s/state/log/l' % xdg, 'RUNTIME_DIRECTORY=%s/run/r' % xdg,
                                   'STATE_DIRECTORY=%s/state/s' % xdg])
        self.assertEqual(out[7], 'nobody:755', 'RuntimeDirectory= as the unit saw it')
        for p in ('state/s', 'cache/c', 'state/log/l', 'config/f'):
            st = os.stat(os.path.join(xdg, p))
            self.assertEqual(st.st_uid, self.nobody.pw_uid, p)
        with open('/proc/self/oom_score_adj') as f:
            own = f.read().strip()
        self.assertEqual(out[5], own, 'OOMScoreAdjust=-100 applied by an unprivileged tend?')
        self.assertEqual(out[6].split()[3:5], ['4096', '4096'], out[6])
        err = self.stderr()
        self.assertEqual(err.count('OOMScoreAdjust=-100: tend may not lower'), 1, err)
        self.assertIn('xdg.service: LimitNOFILE=65535 is above the hard limit tend may set: the closest value, 4096, '
                      'is used', err)
        self.ctl('stop', 'xdg')  # a oneshot: already inactive; the runtime directory went at its end
        wait_until(lambda: not os.path.exists(xdg + '/run/r'), 5, 'RuntimeDirectory= left after the unit ended')

    # ---- process keys ----

    def test_process_keys_observed(self):
        """Nice=, OOMScoreAdjust=, IOScheduling*=, CPUSchedulingPolicy=,
        CPUAffinity= as /proc, ionice and chrt see the main process."""
        self.unit('proc', '''[Service]
            Nice=7
            OOMScoreAdjust=123
            IOSchedulingClass=best-effort
            IOSchedulingPriority=2
            CPUSchedulingPolicy=batch
            CPUAffinity=0
            ExecStart=/bin/sleep 1000
            ''')
        self.unit('rt', '''[Service]
            CPUSchedulingPolicy=rr
            CPUSchedulingPriority=10
            CPUSchedulingResetOnFork=yes
            IOSchedulingClass=idle
            ExecStart=/bin/sleep 1000
            ''')
        self.start_tend()
        pid = self.main_pid('proc')
        with open('/proc/%d/stat' % pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        self.assertEqual(int(fields[16]), 7, 'nice')  # field 19 of stat
        with open('/proc/%d/oom_score_adj' % pid) as f:
            self.assertEqual(f.read().strip(), '123')
        with open('/proc/%d/status' % pid) as f:
            self.assertIn('Cpus_allowed_list:\t0\n', f.read())
        self.assertEqual(subprocess.check_output(['ionice', '-p', str(pid)], text=True).strip(), 'best-effort: prio 2')
        self.assertIn('SCHED_BATCH', subprocess.check_output(['chrt', '-p', str(pid)], text=True))
        pid = self.main_pid('rt')
        out = subprocess.check_output(['chrt', '-p', str(pid)], text=True)
        self.assertIn('SCHED_RR|SCHED_RESET_ON_FORK', out)
        self.assertIn('priority: 10', out)
        self.assertEqual(subprocess.check_output(['ionice', '-p', str(pid)], text=True).strip(), 'idle')

    def test_limit_above_nr_open_clamped_as_root(self):
        """As root: LimitNOFILE= above the kernel's nr_open (which even root
        may not exceed) is set to the closest value, tend's hard limit (lowered
        to 4096 by prlimit), with a notice; a step that fails (CPUAffinity= of a CPU that does not exist)
        fails the start naming the key."""
        with open('/proc/sys/fs/nr_open') as f:
            nr_open = int(f.read())
        self.unit('big', '[Service]\nType=oneshot\nLimitNOFILE=%d\nExecStart=/bin/sh -c \'grep "Max open files" '
                  '/proc/self/limits\'\nStandardOutput=file:%s\n' % (nr_open + 1, self.out('big')))
        self.unit('nocpu', '[Service]\nType=oneshot\nCPUAffinity=1023\nExecStart=/bin/true\n')
        self.start_tend(wrap=['prlimit', '--nofile=1024:4096', '--'])
        self.assertEqual(self.succeeded('big').split()[3:5], ['4096', '4096'])
        self.assertIn('big.service: LimitNOFILE=%d is above the hard limit tend may set: the closest value, 4096, is used'
                      % (nr_open + 1), self.stderr())
        r = self.finished('nocpu')
        self.assertEqual((r['state'], r['result']), ('failed', 'exec-failed'), r)
        self.assertIn('nocpu.service: CPUAffinity= sched_setaffinity failed: Invalid argument (EINVAL)', self.stderr())

    def test_failed_runtime_directory_removal_said_once(self):
        """An unprivileged tend cannot remove a RuntimeDirectory= holding a
        root-owned directory with a file: said once at the stop, not at each
        change of the dead unit's record."""
        if not shutil.which('setpriv'):
            self.skipTest('no setpriv(1)')
        os.chmod(self.tmp.name, 0o777)
        xdg = self.path('xdg')
        os.mkdir(xdg)
        os.chown(xdg, self.nobody.pw_uid, self.nobody.pw_gid)
        env = dict(os.environ, XDG_RUNTIME_DIR=xdg + '/run', HOME=xdg)
        # The unit makes a directory it may not write in, then fails.
        self.unit('rt', '''[Service]
            RuntimeDirectory=r
            ExecStart=/bin/sh -c 'mkdir "$RUNTIME_DIRECTORY/ro" && touch "$RUNTIME_DIRECTORY/ro/f" && chmod 555 "$RUNTIME_DIRECTORY/ro"; exit 3'
            ''')
        # root's tendctl trusts this nobody's tend explicitly (docs/threat-model.md)
        os.environ['TEND_SERVER_UID'] = '65534'
        self.addCleanup(os.environ.pop, 'TEND_SERVER_UID', None)
        self.start_tend(wrap=UNPRIVILEGED, cgroup=False, env=env)
        self.addCleanup(lambda: os.path.isdir(xdg + '/run/r/ro') and os.chmod(xdg + '/run/r/ro', 0o755))
        self.wait_state('rt', lambda r: r['state'] == 'failed', 5, 'never failed')
        self.ctl('reset-failed', 'rt')
        self.ctl('status', 'rt', check=False)  # inactive: 3, as systemctl
        said = 'rt.service: RuntimeDirectory=: cannot remove %s/run/r' % xdg
        wait_until(lambda: said in self.stderr(), 5, 'the failed removal was not said')
        self.assertEqual(self.stderr().count(said), 1, 'not once: %r' % self.stderr())

    def test_no_runtime_root_said_once(self):
        """An unprivileged tend with $HOME but no $XDG_RUNTIME_DIR: the
        start of a RuntimeDirectory= unit fails, said once with the one true
        reason ($HOME is no root for runtime directories)."""
        if not shutil.which('setpriv'):
            self.skipTest('no setpriv(1)')
        os.chmod(self.tmp.name, 0o777)
        env = {k: v for k, v in os.environ.items() if not k.startswith('XDG_')}
        env['HOME'] = self.tmp.name
        self.unit('nr', '[Service]\nRuntimeDirectory=r\nExecStart=/bin/sleep 1000\n')
        # root's tendctl trusts this nobody's tend explicitly (docs/threat-model.md)
        os.environ['TEND_SERVER_UID'] = '65534'
        self.addCleanup(os.environ.pop, 'TEND_SERVER_UID', None)
        self.start_tend(wrap=UNPRIVILEGED, cgroup=False, env=env)
        r = self.wait_state('nr', lambda r: r['state'] == 'failed', 5, 'never failed')
        self.assertEqual(r['result'], 'resources')
        err = self.stderr()
        self.assertEqual(err.count('nr.service: RuntimeDirectory=: no root for it: $XDG_RUNTIME_DIR is not set'), 1, err)
        self.assertNotIn('cannot prepare its start', err)

    def test_limit_infinity_clamped_is_said_infinity(self):
        """LimitNPROC=infinity above a hard limit tend may not raise (no
        CAP_SYS_RESOURCE): the notice says "infinity", as written, not
        RLIM_INFINITY's number."""
        self.unit('np', '[Service]\nType=oneshot\nLimitNPROC=infinity\nExecStart=/bin/sh -c \'grep "Max processes" '
                  '/proc/self/limits\'\nStandardOutput=file:%s\n' % self.out('np'))
        self.start_tend(wrap=['setpriv', '--bounding-set=-sys_resource', 'prlimit', '--nproc=1024:4096', '--'])
        self.assertEqual(self.succeeded('np').split()[2:4], ['4096', '4096'])
        self.assertIn('np.service: LimitNPROC=infinity is above the hard limit tend may set: the closest value, 4096, '
                      'is used', self.stderr())
        self.assertNotIn('18446744073709551615', self.stderr())

    def test_standard_output_tty(self):
        """StandardOutput=tty with TTYPath= a pty the test opened: the unit's
        output arrives on its master side; StandardInput=tty makes it the
        unit's controlling terminal."""
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)
        self.addCleanup(os.close, slave)
        name = os.ttyname(slave)
        self.unit('tty', '''[Service]
            Type=oneshot
            StandardInput=tty
            StandardOutput=tty
            TTYPath=%s
            TTYReset=yes
            ExecStart=/bin/sh -c 'echo hello-tty; tty; ps -o tty= -p $$$$'
            ''' % name)
        self.start_tend()
        self.succeeded('tty')
        got = b''
        deadline = time.monotonic() + 5
        while b'hello-tty' not in got or got.count(b'\n') < 3:
            left = deadline - time.monotonic()
            self.assertGreater(left, 0, 'the pty got %r' % got)
            if select.select([master], [], [], left)[0]:
                got += os.read(master, 4096)
        lines = got.decode().replace('\r', '').replace('\033c', '').split('\n')  # TTYReset='s ESC c first
        self.assertIn('hello-tty', lines)
        self.assertIn(name, lines)  # tty(1): stdin is the terminal
        self.assertIn(name[len('/dev/'):], [ln.strip() for ln in lines])  # ps: its controlling terminal


if __name__ == '__main__':
    if os.geteuid() != 0:
        print('skip: needs root (User=, /run, chown)')
        sys.exit(77)
    unittest.main(verbosity=2)
