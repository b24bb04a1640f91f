#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tend's entrypoint mode (SPEC §1, §6), driven as a user would: the built
binary, real children (tests/helpers/child-probe, sh, cat), exact statuses.
Not PID 1 here: tend is a child subreaper (the PID-1 cases are in
test_entrypoint_pid1.py)."""
import fcntl
import os
import pty
import resource
import select
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import (PROBE, TEND, TendTestCase, alive, check_leftovers, children_of, exited,  # noqa: E402
                      fd_links, foreground_is, leftovers_by_role, prctl, PR_SET_PDEATHSIG, proc_stat, wait_pidfd,
                      wait_until, zombies_of, LEFTOVERS_SCRIPT)

FORWARDED = ['HUP', 'INT', 'USR1', 'USR2', 'WINCH', 'QUIT', 'TSTP', 'TERM']


def sig(name):
    return getattr(signal, 'SIG' + name)


def read_records(p, n, message, *skip):
    """The next n "sig PID NAME" lines of child-probe record output (as a set),
    skipping its "exit" lines and the records of signals named in skip."""
    got = set()
    while len(got) < n:
        line = p.readline(5, '%s; got %r' % (message, got))
        if line.startswith('sig ') and line.split()[2] not in skip:
            got.add(line)
    return got


def comm_of(pid):
    """/proc/PID/comm, or None once it is gone."""
    try:
        with open('/proc/%d/comm' % pid) as f:
            return f.read().strip()
    except (FileNotFoundError, ProcessLookupError):
        return None


class ExitStatus(TendTestCase):
    def test_exit_codes(self):
        for code in (0, 3, 255):
            with self.subTest(code=code):
                status, _, err = self.run_tend('--', PROBE, 'exit', str(code))
                self.assertEqual(status, code, err)

    def test_child_killed_by_sigterm_gives_143(self):
        p = self.tend('--', PROBE, 'pause')
        child = int(p.readline(5, 'child-probe pause never said ready').split()[1])
        os.kill(child, signal.SIGTERM)
        self.assertEqual(p.wait(5, 'tend did not exit after its child died of SIGTERM'), 143)

    def test_child_killed_by_sigkill_gives_137(self):
        p = self.tend('--', PROBE, 'pause')
        child = int(p.readline(5, 'child-probe pause never said ready').split()[1])
        os.kill(child, signal.SIGKILL)
        self.assertEqual(p.wait(5, 'tend did not exit after its child died of SIGKILL'), 137)

    def test_sigterm_to_tend_kills_a_default_child_143(self):
        p = self.tend('--', PROBE, 'pause')
        p.readline(5, 'child-probe pause never said ready')
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.wait(5, 'SIGTERM to tend did not reach the child (not forwarded?)'), 143)


class Exec(TendTestCase):
    def test_stdin_stdout_pass_through(self):
        status, out, err = self.run_tend('--', 'cat', input=b'hi\n')
        self.assertEqual((status, out), (0, 'hi\n'), err)

    def test_missing_command_127(self):
        for cmd in ('/nonexistent/tend-it-cmd', 'tend-it-no-such-command', ''):  # '' as execvp(''): 127
            with self.subTest(cmd=cmd):
                status, out, err = self.run_tend('--', cmd)
                self.assertEqual(status, 127, err)
                self.assertIn(cmd, err, 'no message on stderr naming the command')
                self.assertEqual(out, '')

    def test_not_a_directory_127(self):
        # ENOTDIR (a path through a file) is "not found", as for ENOENT: 127,
        # the same as combined mode (test_service.py Combined; one cmd-run.c).
        cmd = '/etc/passwd/tend-it-cmd'
        status, out, err = self.run_tend('--', cmd)
        self.assertEqual(status, 127, err)
        self.assertIn(cmd, err, 'no message on stderr naming the command')
        self.assertIn('Not a directory', err, 'the message does not say why')
        self.assertEqual(out, '')

    def test_not_executable_126(self):
        f = self.path('not-executable')
        with open(f, 'w') as fh:
            fh.write('#!/bin/sh\nexit 0\n')
        os.chmod(f, 0o644)
        for cmd in (f, self.tmp.name):
            with self.subTest(cmd=cmd):
                status, _, err = self.run_tend('--', cmd)
                self.assertEqual(status, 126, err)
                self.assertIn(cmd, err, 'no message on stderr naming the command')

    def test_closed_stdio_gets_none_of_tends_fds(self):
        """Started with stdin and stderr closed: tend's own first fds (signalfd,
        epoll) must not land on 0/2 and be handed to the child as its stdio."""
        def close_0_2():
            os.close(0)
            os.close(2)
        p = self.tend('--', 'sh', '-c', 'for f in 0 2; do echo "$f $(readlink /proc/$$/fd/$f || echo closed)"; done',
                      stdin=subprocess.DEVNULL, preexec=close_0_2)
        out = p.read_until_eof(5, 'sh printed nothing')
        self.assertEqual(p.wait(5, 'tend did not exit'), 0)
        self.assertNotIn('anon_inode', out, 'tend\'s own fd reached the child as its stdio')
        for line in out.splitlines():
            self.assertIn(line.split(' ', 1)[1], ('closed', '/dev/null'), out)

    def test_bad_options_exit_2_no_child(self):
        marker = self.path('child-ran')
        cmd = ['--', 'touch', marker]
        cases = [
            ['--bogus'] + cmd,
            ['-x'] + cmd,
            ['--remap', 'FOO:BAR'] + cmd,
            ['--remap', 'TERM'] + cmd,
            ['--remap', '99:TERM'] + cmd,
            ['--stop-timeout', 'soon'] + cmd,
            ['--log-level', 'loud'] + cmd,
            ['--'],
            [],
            ['--stop-timeout'],
        ]
        for args in cases:
            with self.subTest(args=args):
                status, out, err = self.run_tend(*args)
                self.assertEqual(status, 2, err)
                self.assertEqual(out, '')
                lines = err.splitlines()
                self.assertEqual(len(lines), 1, 'want a one-line message, got %r' % err)
                self.assertTrue(lines[0].startswith('tend: '), lines[0])
                self.assertFalse(os.path.exists(marker), 'the child ran despite bad options')

    def test_help_and_version_exit_0(self):
        for opt in ('--help', '--version'):
            with self.subTest(opt=opt):
                status, out, err = self.run_tend(opt)
                self.assertEqual(status, 0, err)
                self.assertIn('tend', out)


class Signals(TendTestCase):
    def record_child(self, *tend_args, exit_sig='TERM', code=7):
        p = self.tend(*tend_args, '--', PROBE, 'record', '-', exit_sig, str(code), '0')
        child = int(p.readline(5, 'child-probe record never said ready').split()[1])
        return p, child

    def test_forwarded_and_recorded(self):
        p, child = self.record_child()
        for name in FORWARDED:
            os.kill(p.pid, sig(name))
            self.assertEqual(p.readline(5, 'SIG%s sent to tend never reached the child' % name),
                             'sig %d %s' % (child, name))
        self.assertEqual(p.wait(5, 'child did not exit on the forwarded SIGTERM'), 7)

    def test_own_sigpipe_not_forwarded(self):
        """tend's stderr is a pipe nobody reads: its log lines raise SIGPIPE in
        tend itself, which is not CMD's to receive."""
        r, w = os.pipe()
        os.close(r)
        try:
            p = self.tend('--log-level', 'debug', '--', PROBE, 'record', '-', 'TERM', '7', '0', stderr=w)
        finally:
            os.close(w)
        child = int(p.readline(5, 'the child died before it was ready (killed by a SIGPIPE tend forwarded?)')
                    .split()[1])
        os.kill(p.pid, signal.SIGUSR1)
        self.assertEqual(p.readline(5, 'SIGUSR1 not forwarded'), 'sig %d USR1' % child)
        # A forwarded SIGPIPE (13) would be pending at tend before this
        # SIGTERM (15) and be recorded before it.
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.readline(5, 'SIGTERM not forwarded (starved by a SIGPIPE loop?)'),
                         'sig %d TERM' % child, 'tend forwarded the SIGPIPE it raised itself')
        self.assertEqual(p.wait(5, 'tend did not exit'), 7)

    def test_remap_term_to_quit(self):
        p, child = self.record_child('--remap', 'TERM:QUIT', '--remap', '10:SIGUSR2', exit_sig='QUIT', code=3)
        os.kill(p.pid, signal.SIGUSR1)
        self.assertEqual(p.readline(5, '--remap 10:SIGUSR2 did not deliver SIGUSR2'), 'sig %d USR2' % child)
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.readline(5, '--remap TERM:QUIT did not deliver SIGQUIT'), 'sig %d QUIT' % child)
        self.assertEqual(p.wait(5, 'child did not exit on SIGQUIT'), 3)

    def group_script(self):
        # The grandchild shares the child's process group (no job control in sh -c).
        return ['sh', '-c', '"$0" record - TERM 0 0 & exec "$0" record - TERM 7 0', PROBE]

    def ready_pair(self, p):
        ready = [int(p.readline(5, 'child-probe record never said ready').split()[1]) for _ in range(2)]
        child = wait_until(lambda: children_of(p.pid) and children_of(p.pid)[0], 5, 'tend has no child')
        grand = [x for x in ready if x != child]
        self.assertEqual(len(grand), 1, (ready, child))
        self.assertEqual(proc_stat(grand[0])[2], child, 'grandchild not in the child\'s group')
        return child, grand[0]

    def test_process_group_forwarding(self):
        p = self.tend('-g', '--', *self.group_script())
        child, grand = self.ready_pair(p)
        for name in FORWARDED:
            os.kill(p.pid, sig(name))
            got = read_records(p, 2, 'SIG%s with -g did not reach both child and grandchild' % name)
            self.assertEqual(got, {'sig %d %s' % (child, name), 'sig %d %s' % (grand, name)})
        self.assertEqual(p.wait(5, 'tend did not exit after SIGTERM to the group'), 7)

    def test_without_g_only_the_child(self):
        p = self.tend('--stop-timeout', '3s', '--', *self.group_script())
        child, grand = self.ready_pair(p)
        os.kill(p.pid, signal.SIGUSR1)
        self.assertEqual(p.readline(5, 'SIGUSR1 not forwarded'), 'sig %d USR1' % child)
        # Had the grandchild been sent SIGUSR1, it would be pending now and be
        # recorded before SIGUSR2 (sigwaitinfo takes the lowest first).
        os.kill(grand, signal.SIGUSR2)
        self.assertEqual(p.readline(5, 'grandchild did not record SIGUSR2'), 'sig %d USR2' % grand)
        os.kill(p.pid, signal.SIGTERM)
        got = read_records(p, 2, 'SIGTERM: to the child, then to the leftover grandchild', 'CONT')
        self.assertEqual(got, {'sig %d TERM' % child, 'sig %d TERM' % grand})
        self.assertEqual(p.wait(5, 'tend did not exit'), 7)

    def test_background_job_child_gets_default_dispositions(self):
        """Started as a shell's background job: SIGINT and SIGQUIT ignored,
        and some signals blocked on entry; the child must see none of it."""
        def background():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGQUIT, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGHUP, signal.SIGTERM})
        status, out, err = 0, None, None
        p = self.tend('--', PROBE, 'sigs', preexec=background)
        out = p.read_until_eof(5, 'child-probe sigs did not finish')
        status = p.wait(5, 'tend did not exit')
        self.assertEqual(status, 0, p.stderr_text())
        self.assertEqual(out.split(), ['SigBlk:', '0000000000000000', 'SigIgn:', '0000000000000000'])

        script = 'sleep 60 & s=$!; trap \'kill $s; echo trapped; exit 9\' INT; echo ready; wait $s; echo notrap'
        p = self.tend('--', 'sh', '-c', script, preexec=background)
        p.readline(5, 'sh never said ready')
        os.kill(p.pid, signal.SIGINT)
        self.assertEqual(p.readline(5, 'trap on SIGINT did not run: SIGINT still ignored in the child, '
                                       'or not forwarded by tend'), 'trapped')
        self.assertEqual(p.wait(5, 'sh did not exit from its trap'), 9)

    def test_second_sigterm_during_cleanup_kills_at_once(self):
        p = self.tend('--stop-timeout', '60s', '--', 'sh', '-c',
                      '"$0" record - 0 0 0 & read x; exit 6', PROBE)
        daemon = int(p.readline(5, 'leftover never said ready').split()[1])
        p.write(b'\n')
        self.assertEqual(p.readline(5, 'leftover did not get SIGTERM after the child exited'),
                         'sig %d TERM' % daemon)
        t0 = time.monotonic()
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.wait(5, 'a second SIGTERM did not SIGKILL the leftovers'), 6)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertFalse(alive(daemon))


class Environment(TendTestCase):
    def test_socket_activation(self):
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(lsock.close)
        lsock.bind(('127.0.0.1', 0))
        lsock.listen(4)
        inode = os.fstat(lsock.fileno()).st_ino

        def put_at_3():
            if lsock.fileno() != 3:
                os.dup2(lsock.fileno(), 3)
            os.set_inheritable(3, True)  # dup2(3, 3) would keep close-on-exec
            for fd in map(int, os.listdir('/proc/self/fd')):
                if fd > 3:
                    try:
                        os.set_inheritable(fd, False)
                    except OSError:
                        pass
        env = dict(os.environ, LISTEN_FDS='1', LISTEN_FDNAMES='http')
        p = self.start(['sh', '-c', 'LISTEN_PID=$$ exec "$0" -- "$1" activation', TEND, PROBE],
                       env=env, preexec=put_at_3, close_fds=False)
        line = p.readline(5, 'child-probe activation said nothing')
        head, fds = line.split(' fds=')
        info = dict(kv.split('=', 1) for kv in head.split())
        child = int(info['pid'])
        self.assertEqual(children_of(p.pid), [child])
        self.assertEqual(info['LISTEN_PID'], str(child), 'LISTEN_PID not rewritten to the child')
        self.assertEqual(info['LISTEN_FDS'], '1')
        self.assertEqual(fds, '0 1 2 3', 'the child got other fds than 0-3')
        # tend closes its copy once the child has exec'd, which may be just
        # after the child printed: a bounded wait, while the child runs.
        wait_until(lambda: not [v for v in fd_links(p.pid).values() if v.startswith('socket:')], 5,
                   'tend keeps a copy of the inherited socket: %r' % fd_links(p.pid))
        self.assertTrue(p.running())
        # The child serves on the socket it was handed.
        with socket.create_connection(lsock.getsockname(), timeout=5) as c:
            c.settimeout(5)
            self.assertEqual(c.recv(64), b'hello %d\n' % child)
        self.assertEqual(p.wait(5, 'activation child did not exit'), 0)

    def test_inherited_fds_pass_unchanged(self):
        """Every fd tend inherited beyond 0-2 reaches the child at its number,
        gaps kept; a close-on-exec one (not inherited by exec) does not."""
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        self.addCleanup(os.close, w)

        def fds():
            hr, hw = fcntl.fcntl(r, fcntl.F_DUPFD, 200), fcntl.fcntl(w, fcntl.F_DUPFD, 200)
            os.dup2(hr, 5)
            os.dup2(hw, 9)
            os.dup2(hr, 12, inheritable=False)
            os.close(hr)
            os.close(hw)
            for fd in map(int, os.listdir('/proc/self/fd')):
                if fd > 2 and fd not in (5, 9, 12):
                    try:
                        os.set_inheritable(fd, False)
                    except OSError:
                        pass
        p = self.tend('--', PROBE, 'fds', preexec=fds, close_fds=False)
        self.assertEqual(p.readline(5, 'child-probe fds said nothing'), '0 1 2 5 9')
        self.assertEqual(p.wait(5, 'tend did not exit'), 0)

    def test_listen_pid_of_another_process_unchanged(self):
        p = self.start([TEND, '--', PROBE, 'env', 'LISTEN_PID'], env=dict(os.environ, LISTEN_PID='1'))
        self.assertEqual(p.readline(5, 'no output'), '1')
        self.assertEqual(p.wait(5, 'tend did not exit'), 0)

    def test_watchdog_pid_rewritten_notify_socket_unchanged(self):
        env = dict(os.environ, NOTIFY_SOCKET='/run/tend-it/notify', WATCHDOG_USEC='30000000')
        p = self.start(['sh', '-c', 'WATCHDOG_PID=$$ exec "$0" -- sh -c \'echo $$ $WATCHDOG_PID $WATCHDOG_USEC '
                        '$NOTIFY_SOCKET\'', TEND], env=env)
        child, wd, usec, notify = p.readline(5, 'child said nothing').split()
        self.assertEqual(wd, child, 'WATCHDOG_PID naming tend not rewritten to the child')
        self.assertEqual((usec, notify), ('30000000', '/run/tend-it/notify'))
        self.assertEqual(p.wait(5, 'tend did not exit'), 0)

    def test_nofile_soft_limit_restored_for_child(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard <= 300:
            self.skipTest('hard RLIMIT_NOFILE %d too low' % hard)

        def lower():
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        p = self.tend('--', 'sh', '-c', 'ulimit -n; read x', preexec=lower)
        self.assertEqual(p.readline(5, 'ulimit -n printed nothing'), '256')
        def raised():
            with open('/proc/%d/limits' % p.pid) as f:
                line = [ln for ln in f if ln.startswith('Max open files')][0].split()
            return line[3] == line[4]
        # tend raises its own limit just after the child's exec: a bounded wait.
        wait_until(raised, 5, 'tend did not raise its own soft RLIMIT_NOFILE to the hard one')
        p.write(b'\n')
        self.assertEqual(p.wait(5, 'tend did not exit'), 0)


class Subreaper(TendTestCase):
    def test_orphans_reaped(self):
        p = self.tend('--log-level', 'debug', '--', PROBE, 'orphans', '100', '4')
        self.assertEqual(p.readline(10, 'child-probe orphans did not finish forking'), 'spawned 100')
        wait_until(lambda: p.stderr_text().count('reaped orphan') >= 100, 10,
                   lambda: 'tend did not reap 100 orphans (not a subreaper?): %d reaped, zombies under tend %r'
                   % (p.stderr_text().count('reaped orphan'), zombies_of(p.pid)))
        wait_until(lambda: not zombies_of(p.pid), 5, lambda: 'zombies left under tend: %r' % zombies_of(p.pid))
        self.assertTrue(p.running())
        p.write(b'\n')
        self.assertEqual(p.wait(5, 'tend did not exit'), 4)
        self.assertEqual(p.stderr_text().count('reaped orphan'), 100)

    def test_leftovers_term_then_kill(self):
        slow, stubborn, bystander_out = self.path('slow'), self.path('stubborn'), self.path('bystander')
        bystander = self.start([PROBE, 'record', bystander_out, '0', '0', '0'])
        bystander.readline(5, 'bystander never said ready')
        p = self.tend('--stop-timeout', '2500ms', '--log-level', 'info', '--', 'sh', '-c', LEFTOVERS_SCRIPT,
                      PROBE, slow, stubborn)
        left = leftovers_by_role(p, slow, stubborn)
        t0 = time.monotonic()
        p.write(b'\n')
        self.assertEqual(p.wait(10, 'tend did not exit after its child'), 5)
        elapsed = time.monotonic() - t0
        check_leftovers(self, left, slow, stubborn, elapsed, p.stderr_text())
        # The bystander, same user, outside the child's tree: untouched.
        self.assertTrue(bystander.running())
        self.assertEqual(self.records(bystander_out), [], 'tend signalled a process outside its tree')

    def test_more_leftovers_than_fds(self):
        # tend remembers signalled processes without an fd each: 400 leftovers
        # that ignore SIGTERM, with tend itself under a 200-fd limit, are all
        # SIGKILLed at --stop-timeout.
        pids_file = self.path('pids')
        script = 'trap "" TERM; for i in $(seq 400); do sleep 60 & echo $! >> "$0"; done; exit 0'
        p = self.start(['prlimit', '--nofile=200:200', TEND, '--stop-timeout', '500ms', '--log-level', 'info',
                        '--', 'sh', '-c', script, pids_file])
        self.assertEqual(p.wait(20, 'tend did not exit after its leftovers'), 0)
        with open(pids_file) as f:
            started = [int(x) for x in f.read().split()]
        self.assertEqual(len(started), 400)
        self.assertIn('sent SIGKILL to 400 leftover processes', p.stderr_text())
        # tend waits at most 1 s (FINAL_REAP_GRACE) for the killed to be
        # reaped, then exits: under load 400 processes may take longer to
        # die, and one with a SIGKILL pending is not dead yet. A SIGKILLed
        # process dies unless it is stuck in the kernel: wait for that, not
        # for tend's exit. A pid reused since is no longer `sleep`.
        left = []

        def none_left():
            left[:] = [pid for pid in started if alive(pid) and comm_of(pid) == 'sleep']
            return not left
        wait_until(none_left, 10, lambda: 'leftovers survived the SIGKILL: fds ran out in tend? %d still alive '
                   '10 s after tend exited: %r; tend stderr %r' % (len(left), left[:20], p.stderr_text()[-2000:]))

    def test_leftover_reparented_later_gets_term(self):
        """A leftover's own child, in another session (not the child's
        group) and still parented to the leftover when the child exits, gets
        SIGTERM once the leftover exits and it is re-parented to tend."""
        inner, outer = self.path('inner'), self.path('outer')
        script = '("$0" record "$1" TERM 0 0 & setsid "$0" record "$2" 0 0 0 & wait) & read x; exit 3'
        p = self.tend('--stop-timeout', '2s', '--', 'sh', '-c', script, PROBE, outer, inner)
        ready = {int(p.readline(5, 'a leftover never said ready').split()[1]) for _ in range(2)}
        t0 = time.monotonic()
        p.write(b'\n')
        self.assertEqual(p.wait(10, 'tend did not exit'), 3)
        self.assertIn(self.records(inner, 'CONT'), [['sig %d TERM' % x] for x in ready],
                      'the leftover re-parented to tend later did not get exactly one SIGTERM')
        self.assertGreaterEqual(time.monotonic() - t0, 1.9, 'it ignores SIGTERM: SIGKILL only at --stop-timeout')

    def test_leftover_finishes_early_no_wait_for_timeout(self):
        p = self.tend('--stop-timeout', '30s', '--', 'sh', '-c', '"$0" record - TERM 0 200 & read x; exit 0', PROBE)
        p.readline(5, 'leftover never said ready')
        t0 = time.monotonic()
        p.write(b'\n')
        self.assertEqual(p.wait(10, 'tend waited for --stop-timeout though the leftover exited'), 0)
        self.assertLess(time.monotonic() - t0, 5)


class Terminal(TendTestCase):
    def test_interactive_shell(self):
        pid, master = pty.fork()
        if pid == 0:
            try:
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'PS1': 'tend-it$ ', 'TERM': 'dumb',
                       'HOME': '/'}
                os.execve(TEND, [TEND, '--', 'sh', '-i'], env)
            finally:
                os._exit(127)
        pidfd = os.pidfd_open(pid)
        self.addCleanup(os.close, master)
        self.addCleanup(os.close, pidfd)

        def cleanup():
            if not exited(pidfd):
                os.kill(pid, signal.SIGKILL)
            wait_pidfd(pidfd, 10, 'tend under the pty survived SIGKILL')
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self.addCleanup(cleanup)
        buf = bytearray()

        def expect(text, timeout, message):
            deadline = time.monotonic() + timeout
            while text.encode() not in buf:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([master], [], [], left)[0]:
                    raise AssertionError('%s (waited %.1fs; terminal so far %r)' % (message, timeout, bytes(buf)))
                try:
                    buf.extend(os.read(master, 4096))
                except OSError:  # EIO: the slave side is closed
                    raise AssertionError('%s (terminal closed; so far %r)' % (message, bytes(buf)))
            i = buf.index(text.encode()) + len(text)
            del buf[:i]

        expect('tend-it$ ', 5, 'no prompt from sh -i under tend')
        os.write(master, b'echo hello-$((6*7))\n')
        expect('hello-42', 5, 'sh -i did not run a command')
        expect('tend-it$ ', 5, 'no prompt after the command')
        os.write(master, b'sleep 100\n')
        shell = wait_until(lambda: children_of(pid), 5, 'tend has no child')[0]
        sleeper = wait_until(lambda: children_of(shell), 5, 'sleep 100 did not start')[0]
        # Ctrl-C goes to the terminal's foreground group: wait until the shell
        # has made sleep's group the foreground one and sleep has exec'd.
        wait_until(lambda: foreground_is(sleeper, 'sleep'), 5,
                   'sleep 100 never became the foreground job (job control off in sh -i?)')
        t0 = time.monotonic()
        os.write(master, b'\x03')
        expect('tend-it$ ', 5, 'Ctrl-C did not interrupt sleep (foreground group not the child\'s?)')
        self.assertLess(time.monotonic() - t0, 5)
        self.assertTrue(alive(shell), 'Ctrl-C killed the shell')
        self.assertFalse(alive(sleeper), 'Ctrl-C did not reach sleep')
        os.write(master, b'echo alive-$((1+1))\n')
        expect('alive-2', 5, 'the shell did not survive Ctrl-C')
        os.write(master, b'exit 7\n')
        wait_pidfd(pidfd, 5, 'tend did not exit after "exit 7"')
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 7)


if __name__ == '__main__':
    unittest.main(verbosity=2)
