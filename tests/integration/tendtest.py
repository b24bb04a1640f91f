# SPDX-License-Identifier: MIT
"""Shared helpers for tend's integration tests (STYLE.md "Tests").

Every wait is bounded and its failure names the likely cause; processes are
watched through pidfds (an event) and /proc is scanned in short bounded retry
loops only where no event exists. Every process a test starts gets a
parent-death signal, and the test process is a child subreaper so that
whatever tend leaves behind is re-parented to it and can be killed (by pid)
and reaped in tearDown.

The binaries come from the environment, as meson passes them:
  TEND              the tend binary
  TEND_CHILD_PROBE  tests/helpers/child-probe
"""
import ctypes
import os
import select
import signal
import subprocess
import tempfile
import time
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
TEND = os.environ.get('TEND', os.path.join(_HERE, '../../build-it/supervisor/tend'))
PROBE = os.environ.get('TEND_CHILD_PROBE', os.path.join(_HERE, '../../build-it/tests/helpers/child-probe'))

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option, arg):
    if _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def wait_until(cond, timeout, message, interval=0.01):
    """Retries cond() until it returns something true, for at most timeout
    seconds; returns that value or fails with message (which should name the
    likely cause; a callable is called then, to describe the state at the
    deadline). For /proc scans and files, where no event exists."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            if callable(message):
                message = message()
            raise AssertionError('%s (waited %.1fs)' % (message, timeout))
        time.sleep(interval)


def proc_stat(pid):
    """(state, ppid, pgrp) of pid, or None once it is gone."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    rest = data[data.rindex(')') + 2:].split()
    return rest[0], int(rest[1]), int(rest[2])


def foreground_is(pid, comm):
    """Whether pid runs comm (has exec'd) and its group is the foreground
    group of its controlling terminal (stat's tpgid)."""
    try:
        with open('/proc/%d/comm' % pid) as f:
            if f.read().strip() != comm:
                return False
        with open('/proc/%d/stat' % pid) as f:
            rest = f.read().rsplit(')', 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return int(rest[2]) == int(rest[5])  # pgrp == tpgid


def pids():
    for name in os.listdir('/proc'):
        if name.isdigit():
            yield int(name)


def children_of(pid):
    """Pids whose parent is pid (a /proc scan)."""
    out = []
    for p in pids():
        st = proc_stat(p)
        if st and st[1] == pid:
            out.append(p)
    return out


def zombies_of(pid):
    out = []
    for p in pids():
        st = proc_stat(p)
        if st and st[1] == pid and st[0] == 'Z':
            out.append(p)
    return out


def fd_links(pid):
    """{fd: link target} of pid's open fds."""
    d = '/proc/%d/fd' % pid
    out = {}
    for name in os.listdir(d):
        try:
            out[int(name)] = os.readlink(os.path.join(d, name))
        except FileNotFoundError:
            pass
    return out


def exited(pidfd):
    """Whether the process behind pidfd has exited (its pidfd is readable)."""
    return bool(select.select([pidfd], [], [], 0)[0])


def wait_pidfd(pidfd, timeout, message):
    """Waits, on the pidfd (an event), for its process to exit."""
    if not select.select([pidfd], [], [], timeout)[0]:
        raise AssertionError('%s (waited %.1fs)' % (message, timeout))


def alive(pid):
    st = proc_stat(pid)
    return st is not None and st[0] != 'Z'


def _preexec(extra):
    def run():
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if extra:
            extra()
    return run


class Proc:
    """A process started by a test: stdin/stdout are pipes (unless given),
    stderr goes to a file, read back with stderr_text(). Lines of stdout are
    read with a deadline; the exit is waited for through a pidfd."""

    def __init__(self, argv, *, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=None,
                 preexec=None, close_fds=True, cwd=None):
        self.argv = argv
        # O_APPEND, read with pread: tend shares this open file description,
        # so a seek here would move where its next log line lands.
        self._err = tempfile.TemporaryFile(mode='a+b')
        self.popen = subprocess.Popen(argv, stdin=stdin, stdout=stdout,
                                      stderr=self._err if stderr is None else stderr, env=env,
                                      preexec_fn=_preexec(preexec), close_fds=close_fds, cwd=cwd)
        self.pid = self.popen.pid
        self.pidfd = os.pidfd_open(self.pid)
        self._buf = b''
        if self.popen.stdout:
            os.set_blocking(self.popen.stdout.fileno(), False)

    def readline(self, timeout, message):
        """The next line of stdout (str, without the newline), within timeout."""
        deadline = time.monotonic() + timeout
        fd = self.popen.stdout.fileno()
        while b'\n' not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError('%s (waited %.1fs; stdout so far %r; stderr %r)'
                                     % (message, timeout, self._buf, self.stderr_text()))
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError('%s (stdout closed; so far %r; stderr %r)'
                                     % (message, self._buf, self.stderr_text()))
            self._buf += chunk
        line, self._buf = self._buf.split(b'\n', 1)
        return line.decode()

    def read_until_eof(self, timeout, message):
        deadline = time.monotonic() + timeout
        fd = self.popen.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError('%s (waited %.1fs; stdout so far %r)' % (message, timeout, self._buf))
            chunk = os.read(fd, 4096)
            if not chunk:
                out, self._buf = self._buf, b''
                return out.decode()
            self._buf += chunk

    def write(self, data):
        self.popen.stdin.write(data)
        self.popen.stdin.flush()

    def wait(self, timeout, message):
        """Exit status (Popen convention: -N if killed by signal N)."""
        wait_pidfd(self.pidfd, timeout, '%s; stderr %r' % (message, self.stderr_text()))
        return self.popen.wait(timeout=1)

    def stderr_text(self):
        fd, data = self._err.fileno(), b''
        while True:
            chunk = os.pread(fd, 65536, len(data))
            if not chunk:
                return data.decode(errors='replace')
            data += chunk

    def running(self):
        return not exited(self.pidfd)

    def cleanup(self):
        if self.popen.returncode is None:
            if not exited(self.pidfd):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            wait_pidfd(self.pidfd, 10, 'pid %d survived SIGKILL' % self.pid)
            self.popen.wait(timeout=1)
        for f in (self.popen.stdin, self.popen.stdout):
            if f:
                try:
                    f.close()
                except OSError:
                    pass
        os.close(self.pidfd)
        self._err.close()


def kill_descendants_left():
    """Kills (by pid, through a pidfd) and reaps whatever was re-parented to
    this process, the test's subreaper. Returns their pids."""
    me = os.getpid()
    left = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kids = [p for p in children_of(me)]
        if not kids:
            return left
        for p in kids:
            left.append(p)
            try:
                fd = os.pidfd_open(p)
            except ProcessLookupError:
                continue
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            finally:
                os.close(fd)
        # Reap only our own children (all of them are ours: we are the subreaper).
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        time.sleep(0.01)
    raise AssertionError('could not reap leftovers %r' % left)


class TendTestCase(unittest.TestCase):
    """Starts processes through self.start(); tearDown kills and reaps every
    one still running, and anything re-parented to the test process."""

    @classmethod
    def setUpClass(cls):
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        for path, var in ((TEND, 'TEND'), (PROBE, 'TEND_CHILD_PROBE')):
            if not os.access(path, os.X_OK):
                raise unittest.SkipTest('%s=%s is not executable: run through meson test' % (var, path))

    def setUp(self):
        self.procs = []
        self.tmp = tempfile.TemporaryDirectory(prefix='tend-it-')
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        for p in reversed(self.procs):
            p.cleanup()
        left = kill_descendants_left()
        self.tmp.cleanup()
        # Unreaped leftovers would be a bug in tend's cleanup rules, but they
        # surface in the test that caused them; here we only make sure nothing
        # outlives the test.
        self.leftover_pids = left

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def start(self, argv, **kw):
        p = Proc(argv, **kw)
        self.procs.append(p)
        return p

    def tend(self, *args, **kw):
        """Starts `tend ARGS…` (ARGS include "--" and the command)."""
        return self.start([TEND] + list(args), **kw)

    def run_tend(self, *args, input=b'', timeout=10):
        """Runs tend to completion: (status, stdout, stderr)."""
        p = self.tend(*args)
        p.popen.stdin.write(input)
        p.popen.stdin.close()
        p.popen.stdin = None
        out = p.read_until_eof(timeout, 'tend %s did not finish its output' % ' '.join(args))
        status = p.wait(timeout, 'tend %s did not exit' % ' '.join(args))
        return status, out, p.stderr_text()

    def records(self, path, *skip):
        """Lines of a child-probe `record` file (missing file: none), without
        the records of the signals named in skip."""
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        return [ln for ln in lines if not (ln.startswith('sig ') and ln.split()[2] in skip)]


# The leftovers scenario (SPEC §6 "When the child exits"): the child starts a
# leftover that traps SIGTERM and needs 1 s to finish, one that ignores
# SIGTERM (it records it and goes on), and one with default dispositions;
# then waits for a line on stdin and exits 5. Arguments: PROBE SLOWFILE STUBBORNFILE.
LEFTOVERS_SCRIPT = '"$0" record "$1" TERM 0 1000 & "$0" record "$2" 0 0 0 & "$0" pause & read x; exit 5'


def leftovers_by_role(p, slow, stubborn, translate=None):
    """Reads the three "ready" lines of the leftovers script and opens a pidfd
    on each: {'slow'|'stubborn'|'pause': (pid as printed, pidfd)}. translate
    maps a printed pid (in a child PID namespace) to ours."""
    roles = {}
    for _ in range(3):
        pid = int(p.readline(5, 'a leftover never said ready').split()[1])
        ours = translate[pid] if translate else pid
        with open('/proc/%d/cmdline' % ours, 'rb') as f:
            argv = f.read().split(b'\0')
        role = 'slow' if slow.encode() in argv else 'stubborn' if stubborn.encode() in argv else 'pause'
        roles[role] = (pid, os.pidfd_open(ours))
    return roles


def check_leftovers(t, left, slow, stubborn, elapsed, stderr):
    """After tend exited: the TERM-trapping leftover got one SIGTERM and
    finished its 1 s of work, the TERM-ignoring one got one SIGTERM and then
    SIGKILL at --stop-timeout (2.5 s), the default one died of SIGTERM."""
    try:
        for role, (pid, fd) in left.items():
            t.assertTrue(exited(fd), '%s leftover %d survived tend' % (role, pid))
        spid, tpid = left['slow'][0], left['stubborn'][0]
        # tend follows each SIGTERM with SIGCONT (a stopped process must see it).
        t.assertEqual(t.records(slow, 'CONT'), ['sig %d TERM' % spid, 'exit %d 0' % spid],
                      'slow leftover: want exactly one SIGTERM, then its exit after 1s of work')
        t.assertEqual(t.records(stubborn, 'CONT'), ['sig %d TERM' % tpid],
                      'TERM-ignoring leftover: want exactly one SIGTERM before the SIGKILL')
        t.assertGreaterEqual(elapsed, 2.4, 'SIGKILL came before --stop-timeout')
        t.assertLess(elapsed, 8, 'SIGKILL came long after --stop-timeout')
        t.assertIn('--stop-timeout reached', stderr)
    finally:
        for _, fd in left.values():
            os.close(fd)
