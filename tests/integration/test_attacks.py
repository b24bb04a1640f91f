#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Attacks on tend that got through once (issue 19, docs/threat-model.md),
each replayed: the control socket's symlink race, a socket directory another
user can write. Root only (another uid through util-linux's setpriv): skips
with 77 otherwise. The attacker runs as nobody (65534)."""
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import TEND, TendTestCase, wait_until  # noqa: E402
from svctest import TENDCTL, ServiceTestCase, cgroup_procs, kill_pid  # noqa: E402
from tendtest import PROBE, exited, wait_pidfd  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'examples')

NOBODY = 65534
TRIALS = 100
PAUSE_MS = 60  # the window tend's seam opens between bind() and the socket's ownership

# The attacker: for each "SOCK TARGET" line, waits (bounded) for SOCK to
# appear (or SOCK.gone: tend exited without binding), then swaps it for a symlink to TARGET (rename over it, the race a
# chown()/chmod() by path would lose), and says what happened.
ATTACKER = r'''
import os, sys, time
for line in sys.stdin:
    sock, target = line.split()
    deadline = time.monotonic() + 30  # tend's bind under load (ASan, a busy machine) is not bounded by 5 s
    while time.monotonic() < deadline and not os.path.lexists(sock + '.gone'):
        try:
            os.lstat(sock)
            break
        except FileNotFoundError:
            time.sleep(0.0005)
    else:
        print('timeout', flush=True)
        continue
    tmp = sock + '.evil'
    try:
        os.symlink(target, tmp)
        os.rename(tmp, sock)
        print('swapped', flush=True)
    except OSError as e:
        print('refused %s' % e.strerror, flush=True)
        try:
            os.unlink(tmp)
        except OSError:
            pass
'''


def why_not():
    if os.geteuid() != 0:
        return 'not root'
    if not shutil.which('setpriv'):
        return 'setpriv is not installed'
    return None


def as_nobody(argv):
    return ['setpriv', '--reuid=%d' % NOBODY, '--regid=%d' % NOBODY, '--clear-groups'] + argv


def changed(path, before):
    """Has the owner, group or mode of path changed since before (a stat)?"""
    after = os.stat(path)
    return (after.st_uid, after.st_gid, after.st_mode) != (before.st_uid, before.st_gid, before.st_mode)


class ControlSocket(TendTestCase):
    def setUp(self):
        super().setUp()
        os.chmod(self.tmp.name, 0o711)  # nobody may traverse to its directories
        self.units = self.path('units')
        os.mkdir(self.units)

    def stop_tend(self, p):
        if p.running():
            signal.pidfd_send_signal(p.pidfd, signal.SIGTERM)
        return p.wait(10, 'tend did not exit on SIGTERM')

    def test_symlink_race_100_trials_no_win(self):
        """Half the trials in a directory the attacker owns (tend must refuse
        it), half in a sticky directory all may write (as /tmp: the attacker
        cannot rename over tend's socket). The seam holds tend 60 ms between
        bind() and the socket's ownership; the attacker swaps the socket for a
        symlink to a root-only file as soon as it appears. A win: the file's
        owner, group or mode changed."""
        attacker = self.start(as_nobody([sys.executable, '-c', ATTACKER]))
        sticky = self.path('shared')
        os.mkdir(sticky)
        os.chmod(sticky, 0o1777)
        env = dict(os.environ, TEND_TEST_BIND_PAUSE_MS=str(PAUSE_MS))
        wins, refused, swaps_refused, odd = [], 0, 0, []
        for i in range(TRIALS):
            target = self.path('secret%d' % i)
            with open(target, 'w') as f:
                f.write('root only\n')
            os.chmod(target, 0o604)
            before = os.stat(target)
            if i % 2 == 0:  # the attacker made the directory first
                d = self.path('att%d' % i)
                os.mkdir(d)
                os.chown(d, NOBODY, NOBODY)
                sock = os.path.join(d, 'control')
            else:
                sock = os.path.join(sticky, 'control%d' % i)
            attacker.write(('%s %s\n' % (sock, target)).encode())
            p = self.start([TEND, '--config-dir', self.units, '--control-socket', sock],
                           stdin=subprocess.DEVNULL, env=env)
            wait_until(lambda: not p.running() or self.listening(sock) or changed(target, before), 30,
                       lambda: 'tend neither listened on %s nor exited: %r' % (sock, p.stderr_text()))
            status = self.stop_tend(p)
            if not os.path.lexists(sock):
                open(sock + '.gone', 'w').close()  # the attacker stops waiting
            said = attacker.readline(40, 'the attacker said nothing')
            if i % 2 == 0:
                ok = status == 1 and ('belongs to uid %d' % NOBODY) in p.stderr_text()
                refused += ok
            else:
                ok = said.startswith('refused') and status == 0
                swaps_refused += ok
            if not ok:
                odd.append((i, status, said.strip(), p.stderr_text()[-300:]))
            if changed(target, before):
                after = os.stat(target)
                wins.append((i, oct(after.st_mode), after.st_uid, after.st_gid))
        self.assertEqual(wins, [], 'the attacker changed a root-only file through tend (trial, mode, uid, gid)')
        self.assertEqual((refused, swaps_refused), (TRIALS // 2, TRIALS // 2),
                         'every attacker-owned directory refused, every swap in the sticky one refused; '
                         'the other trials (trial, tend status, attacker, tend stderr): %r' % odd)

    def listening(self, sock):
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            try:
                s.connect(sock)
                return True
            except OSError:
                return False

    def test_directory_others_can_write_refused(self):
        d = self.path('open')
        os.mkdir(d)
        os.chmod(d, 0o777)  # root's, but anyone may replace what is in it
        p = self.start([TEND, '--config-dir', self.units, '--control-socket', os.path.join(d, 'control')],
                       stdin=subprocess.DEVNULL)
        self.assertEqual(p.wait(10, 'tend did not refuse a world-writable socket directory'), 1)
        self.assertRegex(p.stderr_text(), r'refused: its directory .*/open \(mode 0777\) is writable by others')
        # QA L4: the refusal is the one line (no second "control socket PATH: Operation not permitted").
        self.assertEqual(len(p.stderr_text().strip().splitlines()), 1, 'more than one line: %r' % p.stderr_text())
        self.assertEqual(os.listdir(d), [], 'nothing was bound there')
        os.chmod(d, 0o770)
        p = self.start([TEND, '--config-dir', self.units, '--control-socket', os.path.join(d, 'control')],
                       stdin=subprocess.DEVNULL)
        self.assertEqual(p.wait(10, 'tend did not refuse a group-writable socket directory'), 1)
        self.assertIn('is writable by its group', p.stderr_text())
        link = self.path('link')
        os.chmod(d, 0o700)
        os.symlink(d, link)
        p = self.start([TEND, '--config-dir', self.units, '--control-socket', os.path.join(link, 'control')],
                       stdin=subprocess.DEVNULL)
        self.assertEqual(p.wait(10, 'tend did not refuse a symlinked socket directory'), 1)
        self.assertIn('is a symlink', p.stderr_text())


class Examples(ServiceTestCase):
    """The README's examples run as root (README command 1): none may write
    under a path another user could create first."""

    def test_no_example_writes_under_a_directory_others_can_write(self):
        found = []
        for name in sorted(os.listdir(EXAMPLES)):
            if not name.endswith('.service'):
                continue
            with open(os.path.join(EXAMPLES, name)) as f:
                for lineno, line in enumerate(f, 1):
                    if line.startswith('#'):
                        continue
                    for path in re.findall(r'(?<![\w$}])(/[\w.@%-]+(?:/[\w.@%-]+)*)', line):
                        if others_can_write_an_ancestor(path):
                            found.append('%s:%d: %s' % (name, lineno, path))
        self.assertEqual(found, [], 'example paths under a directory another user can write')


class LargeAnswers(ServiceTestCase):
    """A request naming thousands of units: its answer is over the 128 KiB a
    message may hold; it comes in result-part messages, never dropped."""

    N = 3000

    def setUp(self):
        super().setUp()
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        self.wait_running('web')
        self.names = ['web'] + ['nosuch%04d' % i for i in range(self.N)]

    def test_tendctl_gets_every_units_answer(self):
        for verb in ('start', 'stop', 'status'):
            try:
                status, out, err = self.ctl(verb, *self.names, '--json', check=False, timeout=20)
            except subprocess.TimeoutExpired:
                self.fail('tendctl %s of %d names hung: the answer was dropped; tend stderr %r'
                          % (verb, len(self.names), self.stderr()[-2000:]))
            # systemctl's codes for an unknown unit (tendctl(1)): start/stop 5, status 4
            self.assertEqual(status, {'status': 4}.get(verb, 5),
                             '%s: the first failure is a unit not found: %r' % (verb, err[-500:]))
            self.assertEqual(err.count('not found'), self.N, '%s: every missing unit is named once' % verb)
            if verb != 'status':
                units = json.loads(out)['units']
                self.assertEqual([u['name'] for u in units][1:], ['nosuch%04d' % i for i in range(self.N)],
                                 '%s: every unit answered, in the order asked' % verb)
                self.assertEqual(units[0]['name'], 'web.service')

    def test_messages_stay_under_the_limit(self):
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            s.settimeout(10)
            s.connect(self.sock)
            s.send(json.dumps({'version': 1, 'command': 'status', 'units': self.names}).encode())
            parts, sizes = [], []
            while True:
                m = s.recv(1 << 20, socket.MSG_TRUNC)
                self.assertTrue(m, 'tend closed the connection before the result')
                sizes.append(len(m))
                msg = json.loads(m)
                if msg['type'] == 'result':
                    break
                if msg['type'] == 'result-part':
                    parts += msg['units']
            self.assertLessEqual(max(sizes), 128 * 1024, 'a message over the documented 128 KiB')
            self.assertEqual(len(parts) + len(msg['units']), self.N, 'the not-found list, whole')
            self.assertEqual(msg['error'], 'not-found')

    def test_request_over_the_limit_is_answered(self):
        names = ['nosuch%06d' % i for i in range(7000)]  # > 64 KiB of JSON
        try:
            status, out, err = self.ctl('status', *names, check=False, timeout=10)
        except subprocess.TimeoutExpired:
            self.fail('tendctl hung on a request over 64 KiB')
        self.assertEqual((status, out), (2, ''), err)  # too-large: a usage error's status
        self.assertIn('the request exceeds 65536 bytes', err)
        self.ctl('status', 'web')  # tend serves on


class DropInLinks(ServiceTestCase):
    """QA19 L2: a drop-in that is a link is followed only to a regular file
    named *.conf (or /dev/null), as a unit file's link is only to a unit
    file: a.service.d/x.conf -> a secret file is refused in one line that
    names the link only (one parse error per line told its line count)."""

    def test_drop_in_link_to_a_secret_refused_in_one_line(self):
        secret = self.path('secret')
        with open(secret, 'w') as f:
            f.write(''.join('line%d-SECRET:$6$xyz:19000::\n' % i for i in range(7)))
        os.makedirs(self.path('elsewhere'))
        good = self.path('elsewhere/real.conf')
        with open(good, 'w') as f:
            f.write('[Service]\nExecStart=\nExecStart=/bin/sleep 1077\n')
        self.unit('a', '[Service]\nExecStart=/bin/sleep 1000')
        self.unit('b', '[Service]\nExecStart=/bin/sleep 1000')
        for name, target in (('a', secret), ('b', good)):
            os.makedirs(os.path.join(self.dir, name + '.service.d'))
            os.symlink(target, os.path.join(self.dir, name + '.service.d', 'x.conf'))
        self.start_tend()
        pid = self.wait_running('b')['main_pid']
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            self.assertEqual(f.read().split(b'\0')[:2], [b'/bin/sleep', b'1077'], 'the link to a *.conf was not read')
        st, out, err = self.ctl('daemon-reload', check=False)
        log = self.stderr()
        link = os.path.join(self.dir, 'a.service.d', 'x.conf')
        said = '%s: a link to something that is not a regular *.conf file: not read' % link
        self.assertIn(said, log)
        self.assertIn(said, out + err, 'the daemon-reload answer does not say why')
        # QA19 L3: a.service was never loaded: "not loaded", not "not reloaded, left as it is"
        self.assertIn('a.service: not loaded: ' + said, out + err)
        for text in (log, out + err):
            lines = [ln for ln in text.splitlines() if 'x.conf' in ln and 'a.service.d' in ln]
            self.assertEqual(len(set(ln.split(' tend: ')[-1] for ln in lines)), 1,
                             'more than the one refusal about the link: %r' % lines)
            for secret_text in ('SECRET', '$6$', 'line1', secret):
                self.assertNotIn(secret_text, text, 'a message told something of the link\'s target')
        self.assertNotIn('a.service', self.statuses(), 'a unit with a refused drop-in was loaded (read in part)')


class RequestNames(ServiceTestCase):
    """QA19 L6: a name of more than 255 characters (with the ".service" a
    bare name gets) is an invalid unit name, as systemd says; a name with the
    suffix of a unit type tend does not run ("t@1.timer") is refused, not
    taken for t@1.timer.service (which tend would load from t@.service)."""

    def test_long_and_other_type_names_refused(self):
        self.unit('t@', '[Service]\nExecStart=/bin/sleep 1000')
        self.start_tend()
        for name, said in (('a' * 248, 'invalid unit name "%s...": longer than 255 characters' % ('a' * 64)),
                           ('t@1.timer', '"t@1.timer" is a timer unit: tend runs services only'),
                           ('x.socket', '"x.socket" is a socket unit: tend runs services only')):
            st, out, err = self.ctl('start', name, check=False)
            self.assertNotEqual(st, 0, 'tendctl start %s succeeded' % name)
            self.assertIn(said, err)
            self.assertEqual(out, '')
        self.assertEqual(sorted(self.statuses()), [], 'a refused name loaded a unit')
        self.assertEqual(self.ctl('start', 'a' * 247, check=False)[2].count('longer than'), 0,
                         '247 characters and ".service" are 255: a valid length')
        self.ctl('start', 't@1')
        self.assertEqual(sorted(self.statuses()), ['t@1.service'])

    def test_name_of_255_characters_loads(self):
        """NAME.service.d/ of a 255-character name is past NAME_MAX: it
        cannot exist, so the unit has no drop-ins (it was "not loaded: File
        name too long")."""
        name = 'l' * 247
        self.unit(name, '[Service]\nExecStart=/bin/sleep 1076')
        self.start_tend()
        self.wait_running(name)
        st, out, err = self.ctl('restart', name, check=False)
        self.assertEqual(st, 0, 'tendctl restart of the 255-character name: %s' % err)
        self.assertNotIn('too long', self.stderr())


class BadFileNames(ServiceTestCase):
    """QA L3: file names in DIR that are not UTF-8 or hold control
    characters reach neither daemon-reload's answer nor tend's log raw: they
    are escaped by docs/control-protocol.md's rule ("escaped": true)."""

    def test_bad_file_names_escaped(self):
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend()
        self.wait_running('web')
        d = self.dir.encode()
        for name in (b'bad\xe9name.service', b'ctl\x1b[31mname.service', b'latin\xe9.socket'):
            with open(os.path.join(d, name), 'w') as f:
                f.write('[Service]\nExecStart=/bin/true\n')
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            s.settimeout(10)
            s.connect(self.sock)
            s.send(json.dumps({'version': 1, 'command': 'daemon-reload'}).encode())
            raw = s.recv(1 << 20)
        try:
            text = raw.decode('utf-8')
        except UnicodeDecodeError as e:
            self.fail('daemon-reload\'s answer is not UTF-8 (%s): %r' % (e, raw[:500]))
        answer = json.loads(text)
        self.assertFalse(answer['ok'])
        failed = {u['name']: u for u in answer['units']}
        self.assertEqual(sorted(failed), ['bad\\xe9name.service', 'ctl\\x1b[31mname.service'],
                         'the names not escaped by the protocol\'s rule: %r' % answer)
        for u in failed.values():
            self.assertIs(u.get('escaped'), True, u)
            self.assertNotRegex(u['message'], '[\x00-\x1f\x7f\ufffd]', u)
        self.assertNotRegex(text, '\x1b|\\u001b', 'a control character in the answer')
        p = subprocess.run([TENDCTL, '--control-socket', self.sock, 'daemon-reload'], capture_output=True, timeout=15)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertNotRegex(p.stdout + p.stderr, b'[\x80-\xff\x1b]', 'tendctl printed the raw bytes: %r' % p.stderr)
        self.assertIn(b'bad\\xe9name.service', p.stderr)
        err = self.stderr()
        self.assertNotIn('\ufffd', err, 'raw bytes that are not UTF-8 in tend\'s log')
        self.assertNotIn('\x1b', err, 'a raw control character in tend\'s log')
        self.assertIn('latin\\xe9.socket', err, 'the other unit types\' names: %r' % err[-2000:])
        self.ctl('status', 'web')  # tend serves on


# As nobody: connects N times to SOCK (argv 1, 2), reading each refusal.
REFUSED_CLIENT = r'''
import socket, sys
for _ in range(int(sys.argv[2])):
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as c:
        c.settimeout(5)
        c.connect(sys.argv[1])
        c.recv(65536)
print('done', flush=True)
'''


class ControlHygiene(ServiceTestCase):
    def setUp(self):
        super().setUp()
        self.unit('web', '[Service]\nExecStart=%s pause' % PROBE)

    def test_idle_connections_time_out(self):
        self.start_tend(env=dict(os.environ, TEND_CONTROL_IDLE_TIMEOUT_MS='500'))
        w = self.watch_records('web')  # a stream is never idle
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as silent, \
                socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as done:
            for c in (silent, done):
                c.settimeout(3)
                c.connect(self.sock)
            done.send(json.dumps({'version': 1, 'command': 'list'}).encode())
            while json.loads(done.recv(1 << 17))['type'] != 'result':
                pass
            t0 = time.monotonic()
            for c, what in ((silent, 'a client that sends nothing'), (done, 'a client answered, then idle')):
                try:
                    self.assertEqual(c.recv(1 << 17), b'', '%s got a message instead of the close' % what)
                except socket.timeout:
                    self.fail('%s was not closed after the 0.5 s idle timeout' % what)
            self.assertLess(time.monotonic() - t0, 2.5)
        self.ctl('restart', 'web')
        rec = self.next_record(w, 5, 'the watch was closed as idle')
        self.assertEqual(rec['name'], 'web.service')

    def test_refusals_are_rate_limited_with_a_count(self):
        if os.geteuid() != 0 or not shutil.which('setpriv'):
            self.skipTest('needs root and setpriv')
        self.start_tend(log_level='warning')
        os.chmod(self.tmp.name, 0o711)
        os.chmod(os.path.dirname(self.sock), 0o711)
        os.chmod(self.sock, 0o666)
        p = self.start(as_nobody([sys.executable, '-c', REFUSED_CLIENT, self.sock, '30']), stdin=subprocess.DEVNULL)
        self.assertEqual(p.readline(20, 'the refused client did not finish'), 'done')
        wait_until(lambda: 'more refusals in the last 5 s' in self.stderr(), 10,
                   lambda: 'no count of the refusals not logged: %r' % self.stderr()[-1500:])
        self.assertEqual(self.stderr().count('control: refused client'), 10, 'the first 10 are logged one by one')
        self.assertIn('control: 20 more refusals in the last 5 s, not logged one by one', self.stderr())


class FdExhaustionAtLoad(ServiceTestCase):
    """Units added while tend has no fds left are loaded (a load makes no
    fd: issue 19's budget), fail their start ("out of file descriptors") and are retried per
    Restart=; none vanishes. tend runs with 160 fds (soft and hard); the test
    takes all but 3 of them with idle control connections (one fd each on
    tend's side), adds 10 units and sends SIGHUP: DIR is read, most new
    units get no pipes. Once the connections close, the retries run them."""

    def hold_connections(self):
        """Connects until tend refuses for want of fds: the open sockets."""
        held = []
        self.addCleanup(lambda: [c.close() for c in held])
        for _ in range(200):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            c.settimeout(5)
            c.connect(self.sock)
            try:
                c.send(json.dumps({'version': 1, 'command': 'status', 'units': ['a00']}).encode())
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused and closed at once: its answer is still there to read
            while True:
                msg = json.loads(c.recv(1 << 17))
                if msg['type'] == 'result':
                    break
            if not msg['ok']:
                c.close()
                self.assertIn('out of file descriptors', msg.get('message', ''), msg)
                return held
            held.append(c)
        self.fail('tend never ran out of fds with 200 connections')

    def test_units_without_fds_fail_and_are_retried(self):
        if not shutil.which('prlimit'):
            self.skipTest('prlimit is not installed')
        for i in range(10):
            self.unit('a%02d' % i, '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend(wrap=['prlimit', '--nofile=160'], log_level='info')
        for i in range(10):
            self.wait_running('a%02d' % i)
        held = self.hold_connections()
        for c in held[:3]:  # DIR's reading needs 2; the new units' pipes get what is left
            c.close()
        news = ['b%02d.service' % i for i in range(10)]
        for n in news:
            self.unit(n[:-8], '[Unit]\nStartLimitIntervalSec=0\n[Service]\nExecStart=%s pause\n'
                      'Restart=on-failure\nRestartSec=1s' % PROBE)
        os.kill(self.tend_pid, signal.SIGHUP)
        wait_until(lambda: all('%s: starting' % n in self.stderr() for n in news), 10,
                   lambda: 'new units never started (vanished at load?): %r; stderr %r' % (
                       [n for n in news if '%s: starting' % n not in self.stderr()], self.stderr()[-1500:]))
        # (issue 19's fd budget: nothing is made at load any more; each start makes its pipe)
        self.assertIn('out of file descriptors: the start fails (result resources), retried per Restart=',
                      self.stderr())
        for c in held[3:]:
            c.close()
        recs = wait_until(lambda: (lambda r: r if all(r.get(n, {}).get('state') == 'running' for n in news)
                                   else None)(self.statuses_or_none()), 20,
                          lambda: 'the new units did not run on a retry: %r; stderr %r' % (
                              self.statuses_or_none(), self.stderr()[-1500:]))
        self.assertTrue(any(recs[n]['restarts'] > 0 for n in news), 'no unit needed a retry: %r' % recs)

    def statuses_or_none(self):
        status, out, _ = self.ctl('status', '--json', check=False, timeout=5)
        return {r['name']: r for r in json.loads(out)} if status == 0 and out else {}


class FdShortStartsAreRetried(ServiceTestCase):
    """QA M4 (issue 19): at the fd limit a start that gets no fds never ran, so
    it does not count toward the start limit: 60 units under 100 fds with
    Restart=on-failure, RestartSec=1 and the default start limit (5 in 10 s);
    those that do not fit keep being retried past 5 starts (none is
    `start-limit`), after 5 running ones are stopped 5 waiting ones run, and
    the error is said once per unit plus a counted summary."""

    def statuses(self):
        status, out, _ = self.ctl('status', '--json', check=False, timeout=5)
        return {r['name']: r for r in json.loads(out)} if status == 0 and out else {}

    def test_fd_short_starts_do_not_burn_the_start_limit(self):
        if not shutil.which('prlimit'):
            self.skipTest('prlimit is not installed')
        names = ['u%02d.service' % i for i in range(60)]
        for n in names:
            self.unit(n[:-8], '[Service]\nExecStart=%s pause\nRestart=on-failure\nRestartSec=1s\n' % PROBE)
        self.start_tend(wrap=['prlimit', '--nofile=100'], log_level='info', wait_ready=False)

        def retried_past_limit():
            recs = self.statuses()
            if any(r['result'] == 'start-limit' for r in recs.values()):
                self.fail('a unit short of fds burnt its start limit: %r' % sorted(
                    n for n, r in recs.items() if r['result'] == 'start-limit'))
            return recs if any(r['restarts'] >= 8 for r in recs.values()) else None
        recs = wait_until(retried_past_limit, 30, lambda: 'no unit was retried past its start limit: %r; stderr %r' % (
            {n: (r['state'], r['result'], r['restarts']) for n, r in self.statuses().items()},
            self.stderr()[-1500:]), interval=0.2)
        running = sorted(n for n, r in recs.items() if r['state'] == 'running')
        self.assertTrue(0 < len(running) < 55, 'the fd limit did not bite: %d running' % len(running))
        self.ctl('stop', *running[:5])

        def five_more():
            recs = self.statuses()
            now = [n for n, r in recs.items() if r['state'] == 'running']
            fresh = [n for n in now if n not in running]
            return fresh if len(fresh) >= 5 else None
        wait_until(five_more, 15, lambda: 'no waiting unit started after 5 were stopped: %r; stderr %r' % (
            {n: (r['state'], r['result'], r['restarts']) for n, r in self.statuses().items()},
            self.stderr()[-1500:]), interval=0.2)
        err = self.stderr()
        said = err.count('out of file descriptors: the start fails')
        self.assertLessEqual(said, 60 + 5, 'the error is not said once per unit: %d lines' % said)
        wait_until(lambda: 'more starts failed in the last' in self.stderr(), 10,
                   lambda: 'no counted summary of the repeated failures: %r' % self.stderr()[-1500:])


# A child that ignores SIGTERM (records its pid in $1), then the probe waits.
WITH_STUBBORN_CHILD = '''
sh -c 'trap "" TERM; exec sleep 1000' &
echo $! > "$1"
exec "$2" pause
'''
# A main process that ignores SIGTERM (records its pid in $1).
STUBBORN_MAIN = '''
trap "" TERM
echo $$ > "$1"
exec sleep 1000
'''


class ShutdownLeftovers(ServiceTestCase):
    """QA M3 (issue 19): a shutdown never ends with a unit's process still
    running while tend exits 0. What a KillMode=process or SendSIGKILL=no stop
    leaves gets SIGTERM once every unit is stopped (as systemd-shutdown does),
    tend says what it waits for, and the deadline's final kill reaches it."""

    def stubborn(self, name, script, keys):
        self.make_cgroup(required=True)
        run, pid_file = self.script(name + '.sh', script), self.path(name + '.pid')
        self.unit(name, '[Service]\nExecStart=/bin/sh %s %s %s\n%s\n' % (run, pid_file, PROBE, keys))
        self.start_tend('--shutdown-timeout', '3s', log_level='info')
        self.wait_running(name)
        pid = int(wait_until(lambda: self.lines(pid_file), 5, 'the unit never recorded its process')[0])
        self.addCleanup(kill_pid, pid)
        fd = os.pidfd_open(pid)
        self.addCleanup(os.close, fd)
        return fd

    def test_killmode_process_survivor_reached_at_shutdown(self):
        fd = self.stubborn('keep', WITH_STUBBORN_CHILD, 'KillMode=process')
        t0 = time.monotonic()
        status = self.stop_tend(timeout=10)
        err = self.stderr()
        self.assertTrue(exited(fd), 'tend exited %d after %.2f s with the KillMode=process survivor running: %r' % (
            status, time.monotonic() - t0, err[-1500:]))
        self.assertEqual(status, 0, err[-1500:])
        self.assertIn('keep.service: 1 process left by its stop (KillMode=process): SIGTERM at shutdown', err)
        self.assertIn('shutdown: waiting for the processes 1 unit left (keep.service), at most', err)
        self.assertIn('shutdown deadline reached: sending the final kill signal', err)

    def test_sendsigkill_no_survivor_is_said_and_reached(self):
        fd = self.stubborn('nokill', STUBBORN_MAIN, 'SendSIGKILL=no\nTimeoutStopSec=1')
        status = self.stop_tend(timeout=10)
        err = self.stderr()
        self.assertTrue(exited(fd), 'tend exited %d with the SendSIGKILL=no survivor running: %r' % (status, err[-1500:]))
        self.assertEqual(status, 0, err[-1500:])
        self.assertIn('nokill.service: processes survive the stop (SendSIGKILL=no)', err)
        self.assertNotIn('nokill.service: still running TimeoutStopSec= after the stop signal: sending the final kill',
                         err, 'contradictory: a final kill signal said for a SendSIGKILL=no unit')
        waiting = err.find('shutdown: waiting for the processes 1 unit left (nokill.service)')
        self.assertGreaterEqual(waiting, 0, 'shutdown waited without saying for what: %r' % err[-1500:])
        self.assertLess(waiting, err.find('shutdown deadline reached'), err[-1500:])


    def fallback_wrap(self):
        """The argv prefix that makes tend use process groups: cgroup2
        read-only in a private mount namespace (skips when it cannot)."""
        if not shutil.which('unshare'):
            self.skipTest('no unshare(1)')
        with open('/proc/self/mountinfo') as f:
            mount_point = next((ln.split()[4] for ln in f if ' - cgroup2 ' in ln), None)
        if not mount_point:
            self.skipTest('no cgroup2 mount: nothing to make read-only')
        probe = subprocess.run(['unshare', '-m', 'mount', '-o', 'remount,bind,ro', mount_point],
                               capture_output=True, text=True, timeout=10)
        if probe.returncode != 0:
            self.skipTest('cannot remount %s read-only in a mount namespace: %s' % (mount_point, probe.stderr))
        return ['unshare', '-m', 'sh', '-c', 'mount -o remount,bind,ro "$0" && exec "$@"', mount_point]

    def fallback_survivors(self, reexec):
        """QA19 M1: in the process-group fallback, the KillMode=process
        survivors of earlier runs of a unit (each in the process group of
        its run's leader) are reached by tend's shutdown, as the unit's
        cgroup would be: run 1 leaves one, run 2 leaves one, run 3 runs; with
        reexec, tend re-executes between runs 2 and 3 (the groups carried)."""
        run = self.script('surv.sh', 'sleep 1000 &\necho $! >> "$1"\nexec "$2" pause\n')
        survivors = self.path('survivors')
        self.unit('keep', '[Service]\nExecStart=/bin/sh %s %s %s\nKillMode=process' % (run, survivors, PROBE))
        self.start_tend('--shutdown-timeout', '3s', cgroup=False, wrap=self.fallback_wrap(), log_level='info')
        self.assertIn('using process groups', self.stderr())
        fds = []
        for n in (1, 2, 3):
            if n == 3 and reexec:
                self.ctl('daemon-reexec')
                wait_until(lambda: 're-executed: ' in self.stderr(), 10, lambda: 'no re-exec: %r' % self.stderr())
            self.ctl('start', 'keep')
            self.wait_running('keep')
            pid = int(wait_until(lambda: len(self.lines(survivors)) == n and self.lines(survivors), 5,
                                 'run %d never started its child' % n)[-1])
            self.addCleanup(kill_pid, pid)
            fds.append(os.pidfd_open(pid))
            self.addCleanup(os.close, fds[-1])
            if n < 3:
                self.ctl('stop', 'keep')
        self.assertFalse(any(exited(fd) for fd in fds), 'a survivor died before the shutdown: %r' % self.stderr())
        status = self.stop_tend(timeout=15)
        err = self.stderr()
        for n, fd in enumerate(fds, 1):
            wait_until(lambda: exited(fd), 2, lambda: 'run %d\'s survivor still runs after tend exited %d: %r'
                       % (n, status, err[-2000:]))
        self.assertEqual(status, 0, err[-2000:])
        self.assertIn('keep.service: processes left by its stop (KillMode=process): SIGTERM at shutdown', err)

    def test_fallback_survivors_of_earlier_runs_reached_at_shutdown(self):
        self.fallback_survivors(reexec=False)

    def test_fallback_survivors_carried_across_a_reexec(self):
        self.fallback_survivors(reexec=True)

FREEZER_V1 = '/sys/fs/cgroup/freezer'

# The main process starts a child that stays behind (records its pid), then waits.
WITH_SURVIVOR = '''
sleep 1000 &
echo $! > "$1"
exec "$2" pause
'''


class Leftovers(ServiceTestCase):
    def test_killmode_process_survivors_are_left_alone_with_a_warning(self):
        """systemd leaves a KillMode=process stop's survivors at the next
        start and warns; only a previous tend's leftovers are killed."""
        self.make_cgroup(required=True)
        run, gc_file = self.script('surv.sh', WITH_SURVIVOR), self.path('survivor')
        self.unit('keep', '''
            [Service]
            ExecStart=/bin/sh %s %s %s
            KillMode=process
        ''' % (run, gc_file, PROBE))
        self.start_tend(log_level='warning')
        self.wait_running('keep')
        survivor = int(wait_until(lambda: self.lines(gc_file), 5, 'the unit never started its child')[0])
        self.addCleanup(kill_pid, survivor)
        fd = os.pidfd_open(survivor)
        self.addCleanup(os.close, fd)
        self.ctl('stop', 'keep')
        self.ctl('start', 'keep')
        self.wait_running('keep')
        self.assertFalse(exited(fd), 'the KillMode=process survivor was killed at the next start: %r' % self.stderr())
        self.assertIn('keep.service: Found left-over process %d (sleep) in control group while starting unit. '
                      'Ignoring.' % survivor, self.stderr())
        self.assertNotIn('leftover process of a previous tend', self.stderr())

    def frozen_leftover(self, unit):
        """A process of a previous tend in UNIT's cgroup that cannot die
        before the test lets it: frozen by the cgroup v1 freezer (a SIGKILL
        waits for the thaw, the process in D state). Returns (Proc, thaw)."""
        if not os.path.isdir(FREEZER_V1):
            self.skipTest('no cgroup v1 freezer at %s: no way to hold a killed process' % FREEZER_V1)
        cg = self.make_cgroup(required=True)
        unit_cg = os.path.join(cg, unit + '.service')
        os.mkdir(unit_cg)
        fz = os.path.join(FREEZER_V1, 'tend-it.%d' % os.getpid())
        os.makedirs(fz, exist_ok=True)
        planted = self.start(['sleep', '1000'], stdout=subprocess.DEVNULL)

        def thaw():
            with open(os.path.join(fz, 'freezer.state'), 'w') as f:
                f.write('THAWED')

        def remove():
            thaw()
            kill_pid(planted.pid)
            wait_pidfd(planted.pidfd, 10, 'the planted leftover survived its thaw')
            wait_until(lambda: not os.path.exists(os.path.join(fz, 'tasks')) or
                       not open(os.path.join(fz, 'tasks')).read(), 5, 'freezer cgroup still holds a task')
            os.rmdir(fz)
        self.addCleanup(remove)
        for d in (unit_cg, fz):
            with open(os.path.join(d, 'cgroup.procs'), 'w') as f:
                f.write(str(planted.pid))
        with open(os.path.join(fz, 'freezer.state'), 'w') as f:
            f.write('FROZEN')
        wait_until(lambda: open(os.path.join(fz, 'freezer.state')).read().strip() == 'FROZEN', 5,
                   'the planted leftover never froze')
        self.unit(unit, '[Service]\nExecStart=%s pause' % PROBE)
        return cg, planted, thaw

    def test_shutdown_with_a_survivor_exits_non_zero_naming_it(self):
        """Issue 19: a shutdown never ends with a unit's process running while
        tend exits 0. A unit's main process frozen by the cgroup v1 freezer
        survives the final SIGKILL (it waits for the thaw): tend names the
        unit and exits 1 (it said nothing and exited 0)."""
        if not os.path.isdir(FREEZER_V1):
            self.skipTest('no cgroup v1 freezer at %s: no way to hold a killed process' % FREEZER_V1)
        self.unit('held', '[Service]\nExecStart=%s pause' % PROBE)
        self.start_tend('--shutdown-timeout', '1s', log_level='warning')
        main = self.wait_running('held')['main_pid']
        fd = os.pidfd_open(main)
        self.addCleanup(os.close, fd)
        fz = os.path.join(FREEZER_V1, 'tend-it.%d.held' % os.getpid())
        os.makedirs(fz, exist_ok=True)

        def thaw_and_remove():
            with open(os.path.join(fz, 'freezer.state'), 'w') as f:
                f.write('THAWED')
            kill_pid(main)
            wait_until(lambda: exited(fd), 10, 'the frozen unit process survived its thaw and SIGKILL')
            wait_until(lambda: not open(os.path.join(fz, 'tasks')).read(), 5, 'freezer cgroup still holds a task')
            os.rmdir(fz)
        self.addCleanup(thaw_and_remove)
        with open(os.path.join(fz, 'cgroup.procs'), 'w') as f:
            f.write(str(main))
        with open(os.path.join(fz, 'freezer.state'), 'w') as f:
            f.write('FROZEN')
        wait_until(lambda: open(os.path.join(fz, 'freezer.state')).read().strip() == 'FROZEN', 5,
                   'the unit\'s process never froze')
        os.kill(self.tend_pid, signal.SIGTERM)
        status = self.tend_proc.wait(15, 'tend did not exit after its shutdown deadline')
        self.assertFalse(exited(fd), 'the frozen process died: the test proves nothing')
        self.assertEqual(status, 1, 'tend exited %d with a unit\'s process still running; stderr %r'
                         % (status, self.stderr()[-2000:]))
        self.assertIn('shutdown: 1 unit still has processes after the final kill signal: held.service',
                      self.stderr())

    def timed_ctl(self, *args):
        """tendctl ARGS must answer within 1 s: (status, stdout, seconds)."""
        t0 = time.monotonic()
        try:
            status, out, err = self.ctl(*args, check=False, timeout=1)
        except subprocess.TimeoutExpired:
            self.fail('tendctl %s did not answer within 1 s: tend\'s loop is blocked; stderr %r'
                      % (' '.join(args), self.stderr()))
        return status, out, time.monotonic() - t0

    def test_tendctl_answers_while_a_killed_leftover_is_dying(self):
        cg, planted, thaw = self.frozen_leftover('stuck')
        self.start_tend(cgroup=cg, wait_ready=False, log_level='warning')  # the kill is a warning
        wait_until(lambda: self.timed_ctl('status', 'stuck', '--json')[0] == 0, 5,
                   lambda: 'tend never answered; stderr %r' % self.stderr())
        self.assertIn('stuck.service: killed 1 leftover process of a previous tend', self.stderr())
        for _ in range(5):  # the leftover is still there: the start waits, tend answers
            status, out, took = self.timed_ctl('status', 'stuck', '--json')
            self.assertEqual((status, json.loads(out)[0]['state']), (0, 'starting'), out)
        self.assertFalse(planted.running() is False, 'the frozen leftover died before its thaw')
        thaw()
        wait_pidfd(planted.pidfd, 5, 'the killed leftover did not die once thawed')
        self.assertEqual(planted.wait(1, 'leftover'), -9)
        main = self.wait_running('stuck', timeout=5)['main_pid']
        self.assertEqual(cgroup_procs(os.path.join(cg, 'stuck.service')), [main])

    def test_a_leftover_that_never_dies_fails_the_start_in_bounded_time(self):
        cg, planted, _ = self.frozen_leftover('stuck')
        self.start_tend(cgroup=cg, wait_ready=False)
        t0 = time.monotonic()
        wait_until(lambda: self.timed_ctl('status', 'stuck', '--json')[0] == 0, 5,
                   lambda: 'tend never answered; stderr %r' % self.stderr())
        # Failed (result resources), then stopping while the stuck process
        # stays in the cgroup (the stop's own TimeoutStopSec= applies).
        rec = self.wait_state('stuck', lambda r: r['result'] == 'resources', 6,
                              'the start did not fail while its leftover stayed')
        self.assertIn(rec['state'], ('stopping', 'failed'))
        self.assertLess(time.monotonic() - t0, 5, 'the start waited past its 2 s bound')
        self.assertEqual(rec['result'], 'resources')
        self.assertIn('stuck.service: leftover processes of a previous tend are still in its cgroup 2000 ms after '
                      'cgroup.kill', self.stderr())
        self.assertEqual(self.timed_ctl('list')[0], 0)


def others_can_write_an_ancestor(path):
    """Is path, or the nearest existing directory on its way, writable by
    others (the sticky bit does not help a path that does not exist yet)?"""
    p = path
    while p != '/' and not os.path.exists(p):
        p = os.path.dirname(p)
    while True:
        st = os.stat(p)
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH:
            return True
        if p == '/':
            return False
        p = os.path.dirname(p)


if __name__ == '__main__':
    reason = why_not()
    if reason:
        print('skip: %s' % reason)
        sys.exit(77)
    unittest.main(verbosity=2)
