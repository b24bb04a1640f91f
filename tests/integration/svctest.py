# SPDX-License-Identifier: MIT
"""Helpers for the service-mode integration tests (test_service.py,
test_service_cgroup.py, test_daemons.py), on top of tendtest.py.

ServiceTestCase writes unit files into a temporary DIR, starts
`tend --config-dir DIR` with a control socket of its own (so tests can run in
parallel), drives it through the built tendctl, and reads unit states from
`tendctl status --json`. Every wait is bounded (wait_until) and names the
likely cause.

When the test runs as root on a writable cgroup2 mount, tend is started in a
fresh cgroup of its own (SPEC §4: two tends must not share one cgroup; a
unit's cgroup is `<tend's cgroup>/NAME.service`), which the test removes at
the end after killing whatever is left in it.

Environment: TEND, TENDCTL, TEND_CHILD_PROBE (as meson passes them).
"""
import json
import os
import signal
import socket
import subprocess
import time
import unittest

from tendtest import TEND, TendTestCase, wait_until

_HERE = os.path.dirname(os.path.abspath(__file__))
TENDCTL = os.environ.get('TENDCTL', os.path.join(_HERE, '../../build-it/supervisor/tendctl'))

# SPEC §5: the fields of a unit record, named exactly so (plus "version").
RECORD_FIELDS = {'version', 'name', 'state', 'main_pid', 'since', 'since_monotonic', 'restarts',
                 'last_exit', 'status', 'result', 'waiters', 'file_changed', 'file_error'}
STATES = {'inactive', 'starting', 'running', 'stopping', 'failed', 'backoff'}
RESULTS = {'success', 'exit-code', 'signal', 'timeout', 'watchdog', 'start-limit', 'exec-failed',
           'dependency', 'resources'}


# ---- cgroup v2 (SPEC §4 "cgroups") ----

def _unescape_mountinfo(s):
    out, i = '', 0
    while i < len(s):
        if s[i] == '\\' and i + 3 < len(s) and s[i + 1:i + 4].isdigit():
            out += chr(int(s[i + 1:i + 4], 8))
            i += 4
        else:
            out += s[i]
            i += 1
    return out


def own_cgroup_dir():
    """This process's cgroup2 directory as SPEC §4 finds tend's: the `0::P`
    line of /proc/self/cgroup and the last `cgroup2` mount of
    /proc/self/mountinfo whose root contains P. (None, reason) if there is
    none, else (dir, None)."""
    try:
        with open('/proc/self/cgroup') as f:
            lines = [ln[3:] for ln in f.read().splitlines() if ln.startswith('0::')]
        with open('/proc/self/mountinfo') as f:
            mounts = f.read().splitlines()
    except OSError as e:
        return None, 'cannot read /proc/self: %s' % e
    if not lines:
        return None, 'no cgroup v2 hierarchy in /proc/self/cgroup'
    path = lines[0]
    found = None
    for ln in mounts:
        left, _, right = ln.partition(' - ')
        if not right.split() or right.split()[0] != 'cgroup2':
            continue
        f = left.split()
        root, mnt = _unescape_mountinfo(f[3]), _unescape_mountinfo(f[4])
        if root == '/':
            rel = path
        elif path == root or path.startswith(root.rstrip('/') + '/'):
            rel = path[len(root):]
        else:
            continue
        found = os.path.join(mnt, rel.lstrip('/')).rstrip('/') or '/'
    if not found:
        return None, 'no cgroup2 mount containing %s in /proc/self/mountinfo' % path
    return found, None


def cgroup_usable():
    """(dir, None) when this process can create cgroups under its own (root,
    cgroup2 mounted read-write, cgroup.kill present), else (None, reason)."""
    if os.geteuid() != 0:
        return None, 'not root'
    d, why = own_cgroup_dir()
    if not d:
        return None, why
    probe = os.path.join(d, 'tend-it-probe.%d' % os.getpid())
    try:
        os.mkdir(probe)
    except OSError as e:
        return None, 'cannot create a cgroup under %s: %s' % (d, e)
    try:
        if not os.path.exists(os.path.join(probe, 'cgroup.kill')):
            return None, 'no cgroup.kill (Linux < 5.14)'
    finally:
        os.rmdir(probe)
    return d, None


def cgroup_procs(d):
    """Pids listed in d/cgroup.procs and the cgroups below it."""
    out = []
    for dirpath, _, files in os.walk(d):
        if 'cgroup.procs' in files:
            try:
                with open(os.path.join(dirpath, 'cgroup.procs')) as f:
                    out += [int(x) for x in f.read().split()]
            except (FileNotFoundError, ProcessLookupError):
                pass
    return out


def cgroup_populated(d):
    try:
        with open(os.path.join(d, 'cgroup.events')) as f:
            for ln in f:
                k, v = ln.split()
                if k == 'populated':
                    return v == '1'
    except FileNotFoundError:
        return False
    return False


def cgroup_remove(d):
    """Kills everything in d (cgroup.kill), waits until it is empty, then
    removes d and every cgroup below it, deepest first."""
    if not os.path.isdir(d):
        return
    if cgroup_populated(d):
        with open(os.path.join(d, 'cgroup.kill'), 'w') as f:
            f.write('1')
        wait_until(lambda: not cgroup_populated(d), 10, 'cgroup %s still populated after cgroup.kill' % d)
    for dirpath, dirs, _ in sorted(os.walk(d), key=lambda t: -t[0].count('/')):
        os.rmdir(dirpath)


# ---- the test case ----

class ServiceTestCase(TendTestCase):
    """A temp DIR for unit files (self.dir), a control socket (self.sock),
    tend's stdout in a file (self.out_path). self.cgroup is tend's own cgroup
    when one could be made (see the module's comment), else None."""

    use_cgroup = True  # False: tend runs where the test runs

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not os.access(TENDCTL, os.X_OK):
            raise unittest.SkipTest('TENDCTL=%s is not executable: run through meson test' % TENDCTL)

    def setUp(self):
        super().setUp()
        self.dir = self.path('units')
        os.mkdir(self.dir)
        self.sock = self.path('ctl/control')
        self.out_path = self.path('tend.out')
        self.cgroup = None
        self.tend_proc = None

    def make_cgroup(self, required=False):
        parent, why = cgroup_usable()
        if not parent:
            if required:
                raise AssertionError('no cgroup: %s' % why)
            return None
        d = os.path.join(parent, 'tend-it.%d.%s' % (os.getpid(), self.id().rsplit('.', 1)[-1]))
        cgroup_remove(d)  # of an earlier, killed run
        os.mkdir(d)
        self.addCleanup(cgroup_remove, d)
        return d

    def unit(self, name, text):
        """Writes DIR/NAME.service; text is its body (dedented lines)."""
        body = '\n'.join(ln.strip() for ln in text.strip().splitlines()) + '\n'
        with open(os.path.join(self.dir, name + '.service'), 'w') as f:
            f.write(body)
        return os.path.join(self.dir, name + '.service')

    def public_probe(self, text):
        """A directory of the test that units run as other users can use (self.pub, mode
        0777, its parents 0755) holding text as the script self.probe (0644)."""
        os.chmod(self.tmp.name, 0o755)
        self.pub = self.path('pub')
        os.mkdir(self.pub)
        os.chmod(self.pub, 0o777)
        self.probe = os.path.join(self.pub, 'probe.py')
        with open(self.probe, 'w') as f:
            f.write(text.lstrip())
        os.chmod(self.probe, 0o644)

    def script(self, name, text, mode=0o755):
        """Writes an executable shell script into the temp dir; its path."""
        p = self.path(name)
        with open(p, 'w') as f:
            f.write('#!/bin/sh\n' + text.strip() + '\n')
        os.chmod(p, mode)
        return p

    def gate_unit(self, name):
        """A Type=oneshot unit NAME that ends once the test opens its gate
        (open_gate): a unit ordered After= it is held at boot until then, so
        the test can watch it from its first start. The gate is a FIFO the
        unit's shell reads."""
        gate = self.path(name + '.gate')
        os.mkfifo(gate)
        self.unit(name, """
            [Service]
            Type=oneshot
            ExecStart=/bin/sh -c 'read x < %s'
        """ % gate)
        return gate

    def open_gate(self, name, timeout=5):
        """Lets gate_unit NAME end: a FIFO opens for writing without blocking
        only once its reader is there."""
        gate = self.path(name + '.gate')

        def try_open():
            try:
                fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                return None  # ENXIO: the unit's shell is not reading yet
            os.write(fd, b'go\n')
            os.close(fd)
            return True
        wait_until(try_open, timeout, lambda: 'the gate unit %s never read its FIFO; statuses %r; tend stderr %r'
                   % (name, self.statuses(), self.stderr()[-2000:]))

    def watch_records(self, name):
        """`tendctl watch service/NAME.service --json` as a process, once its
        snapshot (NAME's record now) was read: every change after that comes
        as one line (read with next_record)."""
        full = name if name.endswith('.service') else name + '.service'
        w = self.start([TENDCTL, '--control-socket', self.sock, 'watch', 'service/' + full, '--json'],
                       stdin=subprocess.DEVNULL)
        json.loads(w.readline(10, 'tendctl watch gave no snapshot of %s' % full))
        return w

    def next_record(self, w, timeout, message):
        """The next record of watch_records' w; message (a callable is
        called then) says why none came within timeout."""
        try:
            line = w.readline(timeout, 'no record from tendctl watch')
        except AssertionError as e:
            raise AssertionError('%s (%s)' % (message() if callable(message) else message, e)) from None
        return json.loads(line)

    def start_tend(self, *extra, cmd=None, cgroup=True, wrap=None, wait_ready=True, log_level='info', env=None,
                   binary=None):
        """Starts tend in service mode (combined mode with cmd), in a fresh
        cgroup of its own when possible (cgroup=True) or in the given cgroup
        directory; wrap is a prefix argv (e.g. unshare …) run before tend;
        binary: another tend binary than TEND (reexec: a copy it replaces)."""
        argv = [binary or TEND, '--config-dir', self.dir, '--control-socket', self.sock] + list(extra)
        if log_level:  # None: tend's own default
            argv[1:1] = ['--log-level', log_level]
        if cmd:
            argv += ['--'] + list(cmd)
        if cgroup is True and self.use_cgroup:
            cgroup = self.make_cgroup()
        if cgroup:
            self.cgroup = cgroup
            argv = ['sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup] + argv
        if wrap:
            argv = list(wrap) + argv
        out = open(self.out_path, 'ab')
        self.addCleanup(out.close)
        self.tend_proc = self.start(argv, stdout=out, stdin=subprocess.DEVNULL, env=env)
        if wait_ready:
            wait_until(lambda: self.tend_proc.running() is False or self.ctl('list', check=False)[0] == 0, 10,
                       lambda: 'tend never answered on %s; stderr %r' % (self.sock, self.stderr()))
            self.assertTrue(self.tend_proc.running(), 'tend exited at start: %r' % self.stderr())
        return self.tend_proc

    @property
    def tend_pid(self):
        """The wrappers (sh, unshare without --fork) exec tend: same pid."""
        return self.tend_proc.pid

    def stderr(self):
        return self.tend_proc.stderr_text() if self.tend_proc else ''

    def output(self):
        """What tend wrote on stdout so far (the units' prefixed lines)."""
        try:
            with open(self.out_path, 'rb') as f:
                return f.read().decode(errors='replace')
        except FileNotFoundError:
            return ''

    def ctl(self, *args, check=True, timeout=15):
        """Runs tendctl with this test's socket: (status, stdout, stderr)."""
        p = subprocess.run([TENDCTL, '--control-socket', self.sock] + list(args), stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=timeout, text=True)
        if check and p.returncode != 0:
            raise AssertionError('tendctl %s: status %d, stderr %r; tend stderr %r'
                                 % (' '.join(args), p.returncode, p.stderr, self.stderr()))
        return p.returncode, p.stdout, p.stderr

    def statuses(self, *names):
        """{name: record} from `tendctl status [NAME…] --json`."""
        _, out, _ = self.ctl('status', *names, '--json')
        arr = json.loads(out)
        assert isinstance(arr, list), 'status --json is not an array: %r' % out
        return {r['name']: r for r in arr}

    def st(self, name):
        full = name if name.endswith('.service') else name + '.service'
        return self.statuses(name)[full]

    def wait_state(self, name, pred, timeout, message):
        """Polls NAME's record until pred(record) holds; the record."""
        last = {}

        def check():
            last['r'] = self.st(name)
            return last['r'] if pred(last['r']) else None
        return wait_until(check, timeout, lambda: '%s: %s; last record %r; tend stderr %r'
                          % (name, message, last.get('r'), self.stderr()[-3000:]), interval=0.02)

    def wait_running(self, name, timeout=5, other_than=None):
        return self.wait_state(name, lambda r: r['state'] == 'running' and r['main_pid']
                               and r['main_pid'] != other_than, timeout,
                               'never running (with a new main pid)' if other_than else 'never running')

    def wait_output(self, text, timeout=5, message=None):
        return wait_until(lambda: text in self.output(), timeout,
                          lambda: '%s: %r not in tend\'s output %r; stderr %r'
                          % (message or 'missing output', text, self.output()[-2000:], self.stderr()[-2000:]))

    def lines(self, path):
        try:
            with open(path) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def stop_tend(self, timeout=15, sig=signal.SIGTERM):
        """SIGTERM to tend; its exit status."""
        os.kill(self.tend_proc.pid, sig)
        return self.tend_proc.wait(timeout, 'tend did not exit after %s' % signal.Signals(sig).name)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def pid_alive(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError):
        return False


def kill_pid(pid, sig=signal.SIGKILL):
    """Kills one process by pid, through a pidfd (never by name)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        signal.pidfd_send_signal(fd, sig)
    except ProcessLookupError:
        pass
    finally:
        os.close(fd)


def monotonic_us():
    return int(time.monotonic() * 1e6)


def wait_exec(pid, timeout=5):
    """Waits until PID (a unit's process) has exec'd its command: until then
    it is tend's fork, with tend's environ, cmdline and fds. A Type=simple
    unit is `running` at the fork and any unit has its main_pid from the
    fork on, so /proc/PID/environ, cmdline or fd read right after the state
    changed may show tend's (seen under load). And inside execve the new exe
    shows before the new stack's arguments and environment are in place
    (/proc/PID/cmdline and environ read empty in between: seen under load), so
    the exec is done once the exe is not tend's and the cmdline is not
    empty. Returns PID's exe."""
    tend = os.path.realpath(TEND)

    def exe():
        try:
            path = os.readlink('/proc/%d/exe' % pid)
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                args = f.read()
        except (FileNotFoundError, ProcessLookupError):
            raise AssertionError('pid %d is gone before its exec was seen' % pid)
        return path if path != tend and args else None
    return wait_until(exe, timeout, 'pid %d is still tend\'s fork: it never exec\'d its command '
                      '(its spawn is stuck?)' % pid)
