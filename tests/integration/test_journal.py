# SPDX-License-Identifier: MIT
"""tend and the journal (issue 18), with a real systemd-journald the test
starts in a mount namespace of its own (tmpfs on /run/systemd, /run/log and
/var/log/journal: the machine's journal is not touched) and stops by pid.

tend runs as systemd runs a service: its stderr is a stream to journald's
stdout socket and $JOURNAL_STREAM names it. Then:
  - an error of tend's arrives as a native entry with PRIORITY=3, ERRNO= and
    CODE_FILE=, not as a line of its stderr stream (PRIORITY=6);
  - a unit's "<4>" line arrives at PRIORITY=4 without the prefix, a plain one
    at SyslogLevel= (6), with SYSLOG_FACILITY=3 (daemon);
  - the documented command, `journalctl TEND_UNIT=web.service`, returns the
    unit's output and tend's start, failure and stop messages about it, and
    nothing of another unit; `journalctl -u web.service` (root) does too.
Root only (mounts); skips (77) otherwise, or without systemd-journald.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tendtest  # noqa: E402
from tendtest import TendTestCase, wait_until  # noqa: E402

JOURNALD = '/lib/systemd/systemd-journald'
TENDCTL = os.environ.get('TENDCTL', os.path.join(os.path.dirname(tendtest.TEND), 'tendctl'))
NS_MARK = 'TEND_TEST_JOURNAL_NS'


def enter_namespace():
    """Re-runs this file in a private mount namespace (once)."""
    if os.environ.get(NS_MARK):
        return
    if os.geteuid() != 0:
        print('skip: needs root (mounts in a private mount namespace)')
        sys.exit(77)
    if not os.access(JOURNALD, os.X_OK):
        print('skip: %s is not installed' % JOURNALD)
        sys.exit(77)
    env = dict(os.environ, **{NS_MARK: '1'})
    r = subprocess.run(['unshare', '--mount', '--propagation', 'private', sys.executable] + sys.argv, env=env)
    sys.exit(r.returncode)


def journal_json(*match):
    out = subprocess.run(['journalctl', '--no-pager', '-o', 'json'] + list(match),
                         capture_output=True, check=False, timeout=30).stdout
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def message(e):
    m = e.get('MESSAGE')
    return bytes(m).decode(errors='replace') if isinstance(m, list) else m


class JournalTest(TendTestCase):
    def setUp(self):
        super().setUp()
        for d in ('/run/systemd', '/run/log', '/var/log/journal'):
            os.makedirs(d, exist_ok=True)
            subprocess.run(['mount', '-t', 'tmpfs', 'tmpfs', d], check=True)
        os.makedirs('/run/systemd/journal', exist_ok=True)
        self.journald = self.start([JOURNALD], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        wait_until(lambda: all(os.path.exists('/run/systemd/journal/' + s) for s in ('socket', 'stdout')), 10,
                   lambda: 'journald made no sockets; its stderr: %r' % self.journald.stderr_text())

    def tearDown(self):
        os.kill(self.journald.pid, signal.SIGTERM)
        self.journald.wait(10, 'systemd-journald did not stop on SIGTERM')

    def stream_to_journald(self, identifier):
        """A stdout stream to journald, as systemd gives a service (its header:
        identifier, unit, priority, level prefix, forward to syslog, kmsg, console)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect('/run/systemd/journal/stdout')
        s.shutdown(socket.SHUT_RD)
        s.sendall(('%s\n\n6\n0\n0\n0\n0\n' % identifier).encode())
        return s

    def write_unit(self, d, name, text):
        with open(os.path.join(d, name), 'w') as f:
            f.write(text)

    def tendctl(self, sock, *args):
        return subprocess.run([TENDCTL, '--control-socket', sock] + list(args), capture_output=True, timeout=30)

    def wait_entry(self, what, cond, *match):
        return wait_until(lambda: [e for e in journal_json(*match) if cond(e)], 15,
                          lambda: 'no journal entry %s; the journal of %s: %r' % (
                              what, ' '.join(match) or 'all', [message(e) for e in journal_json(*match)][-30:]))

    def test_levels_and_the_command_that_selects_a_unit(self):
        d, sock = self.path('units'), self.path('control')
        os.makedirs(d)
        pidfile = self.path('web.pid')
        self.write_unit(d, 'web.service', '[Service]\nExecStart=/bin/sh -c \'echo $$$$ > %s; echo "<4>careful web"; '
                        'echo "plain web"; exec sleep 1000\'\n' % pidfile)
        self.write_unit(d, 'other.service', '[Service]\nExecStart=/bin/sh -c \'echo "<3>other line"; '
                        'exec sleep 1000\'\n')
        self.write_unit(d, 'bad.service', '[Service]\nExecStart=/nonexistent/bad-binary\n')
        stream = self.stream_to_journald('tend')
        st = os.fstat(stream.fileno())
        env = dict(os.environ, JOURNAL_STREAM='%d:%d' % (st.st_dev, st.st_ino))
        env.pop(NS_MARK, None)
        tend = self.start([tendtest.TEND, '--config-dir', d, '--control-socket', sock, '--log-level', 'info'],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stream.fileno(), env=env)
        stream.close()

        # tend's own error: a native entry at PRIORITY=3 with its fields.
        err = self.wait_entry('for bad.service\'s exec error', lambda e: 'bad-binary' in (message(e) or '')
                              and e.get('PRIORITY') == '3', 'TEND_UNIT=bad.service')[0]
        self.assertEqual(err.get('ERRNO'), '2', err)
        self.assertEqual(err.get('SYSLOG_IDENTIFIER'), 'tend', err)
        self.assertTrue(err.get('CODE_FILE', '').startswith('supervisor/'), err)
        self.assertTrue(err.get('CODE_LINE') and err.get('CODE_FUNC'), err)
        self.assertEqual(err.get('OBJECT_SYSTEMD_UNIT'), 'bad.service', err)

        # web's lines: the level from "<4>", the prefix gone; plain lines at info.
        web = 'TEND_UNIT=web.service'
        careful = self.wait_entry('"careful web"', lambda e: message(e) == 'careful web', web)[0]
        self.assertEqual(careful['PRIORITY'], '4', careful)
        self.assertEqual(careful.get('SYSLOG_FACILITY'), '3', careful)
        self.assertEqual(careful.get('SYSLOG_IDENTIFIER'), 'web.service', careful)
        plain = self.wait_entry('"plain web"', lambda e: message(e) == 'plain web', web)[0]
        self.assertEqual(plain['PRIORITY'], '6', plain)
        self.wait_entry('"other line"', lambda e: message(e) == 'other line' and e['PRIORITY'] == '3',
                        'TEND_UNIT=other.service')

        # failure, then a start and a stop: tend's messages about web.
        pid = int(wait_until(lambda: open(pidfile).read().strip() if os.path.exists(pidfile) else None, 10,
                             'web never wrote its pid'))
        os.kill(pid, signal.SIGKILL)
        self.wait_entry('for web\'s failure', lambda e: 'web.service: failed' in (message(e) or ''), web)
        r = self.tendctl(sock, 'start', 'web')
        self.assertEqual(r.returncode, 0, r)
        r = self.tendctl(sock, 'stop', 'web')
        self.assertEqual(r.returncode, 0, r)
        self.wait_entry('for web\'s stop', lambda e: message(e) == 'web.service: inactive', web)

        entries = journal_json(web)
        texts = [message(e) for e in entries]
        for want in ('careful web', 'plain web', 'web.service: running', 'web.service: inactive'):
            self.assertIn(want, texts)
        self.assertTrue(any('web.service: failed' in t for t in texts), texts)
        self.assertEqual(texts.count('careful web'), 2, texts)  # both starts' output
        for e in entries:
            self.assertNotIn('other', message(e), e)
            self.assertNotIn('bad', message(e), e)
            self.assertEqual(e.get('TEND_UNIT'), 'web.service', e)
        # tend's stderr stream carried none of this: only native entries.
        stream_lines = [message(e) for e in journal_json('_TRANSPORT=stdout')]
        self.assertFalse([t for t in stream_lines if 'web' in t], stream_lines)

        # journalctl -u: OBJECT_SYSTEMD_UNIT= from a root sender (_UID=0).
        by_u = [message(e) for e in journal_json('-u', 'web.service')]
        self.assertIn('careful web', by_u)
        self.assertIn('web.service: running', by_u)
        self.assertFalse([t for t in by_u if 'other' in t], by_u)

        os.kill(tend.pid, signal.SIGTERM)
        self.assertEqual(tend.wait(30, 'tend did not stop on SIGTERM'), 0)


if __name__ == '__main__':
    enter_namespace()
    unittest.main()
