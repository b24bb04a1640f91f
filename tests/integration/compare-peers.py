#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs the entrypoint scenarios of test_entrypoint.py against tend, tini and
dumb-init and prints a Markdown table of what each does, marking the rows
where tend differs from a peer. Not run in CI; docs/entrypoint-peers.md
records its output and what it means.

    TEND=build/supervisor/tend TEND_CHILD_PROBE=build/tests/helpers/child-probe \\
        tests/integration/compare-peers.py [--pid1]

Every wait is bounded; a peer that does not do something shows "-" or
"no (…)" after a short deadline. Run as root for the PID-1 rows (--pid1)."""
import os
import pty
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import (PROBE, TEND, PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, Proc,  # noqa: E402
                      children_of, exited, fd_links, foreground_is, kill_descendants_left, prctl, proc_stat,
                      zombies_of)

NEG = 1.0  # seconds to wait for something a peer may never do

PEERS = {
    # name: (plain prefix, prefix forwarding to the group, prefix with a remap TERM→QUIT)
    'tend': ([TEND, '--'], [TEND, '-g', '--'], [TEND, '--remap', 'TERM:QUIT', '--']),
    'tini': (['tini', '-s', '--'], ['tini', '-s', '-g', '--'], None),
    'dumb-init': (['dumb-init', '-c'], ['dumb-init'], ['dumb-init', '-c', '-r', '15:3']),
}


class Run:
    """One scenario's processes; everything is killed and reaped at the end."""

    def __init__(self):
        self.procs = []
        self.tmp = tempfile.mkdtemp(prefix='tend-peers-')

    def start(self, argv, **kw):
        p = Proc(argv, **kw)
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            p.cleanup()
        kill_descendants_left()
        shutil.rmtree(self.tmp, ignore_errors=True)


def try_line(p, timeout=NEG):
    try:
        return p.readline(timeout, '')
    except AssertionError:
        return None


def status_of(p, timeout=5):
    try:
        return p.wait(timeout, '')
    except AssertionError:
        return 'hangs'


def s_exit(pre, _g, _r, run):
    return ' / '.join(str(status_of(run.start(pre + [PROBE, 'exit', str(c)]))) for c in (0, 3, 255))


def s_killed(pre, _g, _r, run):
    out = []
    for s in (signal.SIGTERM, signal.SIGKILL):
        p = run.start(pre + [PROBE, 'pause'])
        child = int(p.readline(5, 'no ready').split()[1])
        os.kill(child, s)
        out.append(str(status_of(p)))
    return ' / '.join(out)


def s_forward(pre, _g, _r, run):
    p = run.start(pre + [PROBE, 'record', '-', 'TERM', '7', '0'])
    p.readline(5, 'no ready')
    got = []
    for name in ('HUP', 'INT', 'USR1', 'USR2', 'WINCH', 'QUIT', 'RTMIN', 'TERM'):
        os.kill(p.pid, getattr(signal, 'SIG' + name))
        line = try_line(p)
        want = 'RTMIN+0' if name == 'RTMIN' else name
        got.append(name if line and line.endswith(' ' + want) else '!' + name)
    return '%s → %s' % (' '.join(got), status_of(p))


def s_tstp(pre, _g, _r, run):
    p = run.start(pre + [PROBE, 'record', '-', 'TERM', '7', '0'])
    p.readline(5, 'no ready')
    os.kill(p.pid, signal.SIGTSTP)
    line = try_line(p)
    time.sleep(0.1)  # a comparison, not a test: let a supervisor that stops itself do so
    state = proc_stat(p.pid)[0]
    os.kill(p.pid, signal.SIGCONT)
    return 'child %s; supervisor %s' % ('gets TSTP' if line and line.endswith(' TSTP') else 'nothing',
                                        'stopped itself' if state == 'T' else 'keeps running')


def s_remap(_p, _g, remap, run):
    if not remap:
        return 'n/a (no option)'
    p = run.start(remap + [PROBE, 'record', '-', 'QUIT', '3', '0'])
    p.readline(5, 'no ready')
    os.kill(p.pid, signal.SIGTERM)
    line = try_line(p)
    return '%s → %s' % (line.split()[2] if line else 'nothing', status_of(p))


def group_case(prefix, run):
    p = run.start(prefix + ['sh', '-c', '"$0" record - TERM 0 0 & exec "$0" record - TERM 7 0', PROBE])
    for _ in range(2):
        p.readline(5, 'no ready')
    os.kill(p.pid, signal.SIGUSR1)
    lines = [ln for ln in (try_line(p), try_line(p, 0.5)) if ln]
    return '%d of 2' % len(lines)


def s_group_default(pre, _g, _r, run):
    return group_case(pre, run)


def s_group_option(_p, g, _r, run):
    return group_case(g, run)


def s_stdin(pre, _g, _r, run):
    p = run.start(pre + ['cat'])
    p.write(b'hi\n')
    p.popen.stdin.close()
    p.popen.stdin = None
    return repr(p.read_until_eof(5, 'no output')) + ' → %s' % status_of(p)


def s_closed_stdin(pre, _g, _r, run):
    p = run.start(pre + ['sh', '-c', 'readlink /proc/$$/fd/0 || echo closed'], stdin=subprocess.DEVNULL,
                  preexec=lambda: os.close(0))
    out = p.read_until_eof(5, 'no output').strip()
    return '%s → %s' % (out or 'nothing', status_of(p))


def s_missing(pre, _g, _r, run):
    p = run.start(pre + ['/nonexistent/cmd'])
    st = status_of(p)
    return '%s%s' % (st, ', message' if 'nonexistent' in p.stderr_text() else ', no message')


def s_noexec(pre, _g, _r, run):
    f = os.path.join(run.tmp, 'f')
    with open(f, 'w') as fh:
        fh.write('exit 0\n')
    os.chmod(f, 0o644)
    return str(status_of(run.start(pre + [f])))


def s_enoexec(pre, _g, _r, run):
    f = os.path.join(run.tmp, 'script')
    with open(f, 'w') as fh:
        fh.write('exit 4\n')
    os.chmod(f, 0o755)
    return str(status_of(run.start(pre + [f])))


def s_badopt(pre, _g, _r, run):
    marker = os.path.join(run.tmp, 'ran')
    p = run.start([pre[0], '--bogus-option', '--', 'touch', marker] if pre[0] != 'dumb-init'
                  else ['dumb-init', '--bogus-option', 'touch', marker])
    st = status_of(p)
    return '%s, %d lines, child %s' % (st, len(p.stderr_text().splitlines()),
                                       'ran' if os.path.exists(marker) else 'not run')


def s_background(pre, _g, _r, run):
    def bg():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    p = run.start(pre + [PROBE, 'sigs'], preexec=bg)
    out = p.read_until_eof(5, 'no output').split()
    status_of(p)
    blk, ign = int(out[1], 16), int(out[3], 16)
    return 'SigBlk %x SigIgn %x' % (blk, ign)


def s_orphans(pre, _g, _r, run):
    p = run.start(pre + [PROBE, 'orphans', '50', '0'])
    p.readline(10, 'no spawned')
    deadline = time.monotonic() + 2
    while zombies_of(p.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    z = len(zombies_of(p.pid))
    p.write(b'\n')
    status_of(p)
    return '%d zombies' % z


def s_leftovers(pre, _g, _r, run):
    slow = os.path.join(run.tmp, 'slow')
    p = run.start(pre + ['sh', '-c', '"$0" record "$1" TERM 0 300 & read x; exit 5', PROBE, slow])
    d = int(p.readline(5, 'no ready').split()[1])
    fd = os.pidfd_open(d)
    t0 = time.monotonic()
    p.write(b'\n')
    st = status_of(p, 10)
    el = time.monotonic() - t0
    select.select([fd], [], [], NEG)
    gone = exited(fd)
    os.close(fd)
    terms = sum(1 for ln in open(slow) if ln.split()[2] == 'TERM') if os.path.exists(slow) else 0
    return '%s after %.1fs; leftover got %d TERM, %s' % (st, el, terms, 'finished' if gone else 'still running')


def s_stubborn(pre, _g, _r, run):
    p = run.start([pre[0]] + (['--stop-timeout', '1s'] if pre[0] == TEND else []) + pre[1:] +
                  ['sh', '-c', '"$0" record /dev/null 0 0 0 & read x; exit 5', PROBE])
    d = int(p.readline(5, 'no ready').split()[1])
    fd = os.pidfd_open(d)
    t0 = time.monotonic()
    p.write(b'\n')
    st = status_of(p, 10)
    el = time.monotonic() - t0
    select.select([fd], [], [], NEG)
    gone = exited(fd)
    os.close(fd)
    return '%s after %.1fs; leftover %s' % (st, el, 'killed' if gone else 'still running')


def s_activation(pre, _g, _r, run):
    ls = socket.socket()
    ls.bind(('127.0.0.1', 0))
    ls.listen(1)
    ino = os.fstat(ls.fileno()).st_ino

    def at3():
        if ls.fileno() != 3:
            os.dup2(ls.fileno(), 3)
        os.set_inheritable(3, True)
        for fd in map(int, os.listdir('/proc/self/fd')):
            if fd > 3:
                try:
                    os.set_inheritable(fd, False)
                except OSError:
                    pass
    p = run.start(['sh', '-c', 'LISTEN_PID=$$ exec "$@"', 'sh'] + pre + [PROBE, 'activation'],
                  env=dict(os.environ, LISTEN_FDS='1'), preexec=at3, close_fds=False)
    line = try_line(p, 5) or ''
    held = 'socket:[%d]' % ino in fd_links(p.pid).values()
    info = dict(kv.split('=', 1) for kv in line.split(' fds=')[0].split())
    fds = line.split(' fds=')[1] if ' fds=' in line else '?'
    ls.close()
    return 'LISTEN_PID %s; child fds %s; %s' % ('= child' if info.get('LISTEN_PID') == info.get('pid') else
                                                 'unchanged', fds, 'holds a copy' if held else 'no copy')


def s_watchdog(pre, _g, _r, run):
    p = run.start(['sh', '-c', 'WATCHDOG_PID=$$ exec "$@"', 'sh'] + pre +
                  ['sh', '-c', 'echo $$ $WATCHDOG_PID'])
    a, b = (try_line(p, 5) or '? ?').split()
    status_of(p)
    return 'rewritten' if a == b else 'unchanged'


def s_nofile(pre, _g, _r, run):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    def low():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    p = run.start(pre + ['sh', '-c', 'ulimit -n; read x'], preexec=low)
    child = try_line(p, 5)
    deadline = time.monotonic() + 1  # tend raises its own limit just after the child's exec
    while True:
        with open('/proc/%d/limits' % p.pid) as f:
            own = [ln for ln in f if ln.startswith('Max open files')][0].split()[3]
        if own != '256' or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    p.write(b'\n')
    status_of(p)
    return 'child %s, own soft %s' % (child, own)


def s_pty(pre, _g, _r, run):
    pid, master = pty.fork()
    if pid == 0:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.execvpe(pre[0], pre + ['sh', '-i'], {'PATH': os.environ['PATH'], 'PS1': 'P$ ', 'HOME': '/'})
    buf = bytearray()

    def expect(text, timeout=3):
        deadline = time.monotonic() + timeout
        while text.encode() not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([master], [], [], left)[0]:
                return False
            try:
                buf.extend(os.read(master, 4096))
            except OSError:
                return False
        del buf[:buf.index(text.encode()) + len(text)]
        return True
    try:
        ok = expect('P$ ')
        os.write(master, b'echo x$((1+1))\n')
        ran = ok and expect('x2') and expect('P$ ')
        os.write(master, b'sleep 100\n')
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not any(foreground_is(g, 'sleep') for c in children_of(pid)
                                                      for g in children_of(c)):
            time.sleep(0.02)  # a /proc scan: no event says "sleep is the foreground job"
        os.write(master, b'\x03')
        interrupted = expect('P$ ', 2)
        os.write(master, b'exit 7\n')
        deadline = time.monotonic() + 3
        st = None
        while time.monotonic() < deadline:
            wp, s = os.waitpid(pid, os.WNOHANG)
            if wp:
                st = os.waitstatus_to_exitcode(s)
                break
            time.sleep(0.02)
        return 'runs %s; ^C %s; exit → %s' % ('yes' if ran else 'no', 'interrupts sleep' if interrupted else 'no',
                                              st if st is not None else 'hangs')
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(master)


def s_pid1_leftovers(pre, _g, _r, run):
    slow = os.path.join(run.tmp, 'slow')
    p = run.start(['unshare', '-pf', '--mount-proc', '--kill-child'] + pre +
                  ['sh', '-c', '"$0" record "$1" TERM 0 300 & "$0" pause & read x; exit 5', PROBE, slow])
    p.readline(5, 'no ready')
    p.readline(5, 'no ready')
    p.write(b'\n')
    st = status_of(p, 10)
    recs = open(slow).read().split('\n') if os.path.exists(slow) else []
    terms = sum(1 for ln in recs if ln.endswith(' TERM'))
    fin = any(ln.startswith('exit') for ln in recs)
    return '%s; trapping leftover got %d TERM, %s' % (st, terms, 'finished' if fin else 'killed unfinished')


SCENARIOS = [
    ('exit 0 / 3 / 255', s_exit),
    ('child killed by TERM / KILL', s_killed),
    ('signals sent to it reach the child (! = not)', s_forward),
    ('TSTP sent to it', s_tstp),
    ('remap TERM→QUIT', s_remap),
    ('USR1 reaches a grandchild in the group (default)', s_group_default),
    ('USR1 reaches a grandchild in the group (-g; dumb-init default)', s_group_option),
    ('echo hi \\| X cat', s_stdin),
    ('started with stdin closed: the child\'s fd 0', s_closed_stdin),
    ('missing command', s_missing),
    ('non-executable file', s_noexec),
    ('executable script without #! (ENOEXEC)', s_enoexec),
    ('bad option', s_badopt),
    ('background job: INT/QUIT ignored, USR1 blocked on entry', s_background),
    ('50 double-forked orphans, not PID 1', s_orphans),
    ('leftover trapping TERM (0.3 s) after the child exits 5', s_leftovers),
    ('leftover ignoring TERM after the child exits 5', s_stubborn),
    ('LISTEN_FDS=1 fd 3, LISTEN_PID = its pid', s_activation),
    ('WATCHDOG_PID = its pid', s_watchdog),
    ('started with RLIMIT_NOFILE soft 256', s_nofile),
    ('sh -i under a pty', s_pty),
]
PID1 = [('PID 1: leftovers (TERM-trapping + default) after the child exits 5', s_pid1_leftovers)]


def main():
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    for exe in ('tini', 'dumb-init'):
        if not shutil.which(exe):
            sys.exit('compare-peers: %s is not installed' % exe)
    scen = SCENARIOS + (PID1 if '--pid1' in sys.argv else [])
    print('| scenario | tend | tini 0.19 (-s) | dumb-init 1.2 | tend differs |')
    print('|---|---|---|---|---|')
    for title, fn in scen:
        row = {}
        for name, (pre, g, remap) in PEERS.items():
            run = Run()
            try:
                row[name] = fn(pre, g, remap, run)
            except Exception as e:  # a peer's odd behaviour is a result, not a crash
                row[name] = 'error: %s' % str(e).splitlines()[0][:60]
            finally:
                run.close()
        diff = [n for n in ('tini', 'dumb-init') if row[n] != row['tend']]
        print('| %s | %s | %s | %s | %s |' % (title, row['tend'], row['tini'], row['dumb-init'],
                                              ', '.join(diff) if diff else '='))
        sys.stdout.flush()


if __name__ == '__main__':
    main()
