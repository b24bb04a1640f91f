#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""parsefix (issue 17, QA finding M7): a unit with PrivateNetwork= is in a
network namespace of its own, where tend's usual notify socket (an abstract
address, which belongs to tend's network namespace) cannot be reached. Such a
unit gets a path socket under /run/tend-notify instead, as systemd's
/run/systemd/notify: a Type=notify unit with PrivateNetwork=yes, running as
User=nobody, becomes running and keeps its WatchdogSec= lease alive; the same
unit without the key keeps its abstract address (the negative control). Root
only (a network namespace; otherwise it skips, 77)."""
import os
import stat
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import ServiceTestCase, wait_exec  # noqa: E402
from tendtest import wait_until  # noqa: E402

# The main process: READY=1, then WATCHDOG=1 every 0.2 s (WatchdogSec=1s).
NOTIFIER = r'''
import os, socket, time
a = os.environ['NOTIFY_SOCKET']
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b'READY=1\nSTATUS=notified from ' + ' '.join(sorted(n for _, n in socket.if_nameindex())).encode(),
         '\0' + a[1:] if a[0] == '@' else a)
while True:
    time.sleep(0.2)
    s.sendto(b'WATCHDOG=1', '\0' + a[1:] if a[0] == '@' else a)
'''


def environ(pid):
    wait_exec(pid)
    with open('/proc/%d/environ' % pid, 'rb') as f:
        return dict(x.decode().split('=', 1) for x in f.read().split(b'\0') if b'=' in x)


class NotifyInPrivateNetwork(ServiceTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if os.geteuid() != 0:
            raise unittest.SkipTest('needs root (PrivateNetwork=: a network namespace)')

    def notify_unit(self, name, keys):
        self.unit(name, '''
            [Service]
            Type=notify
            WatchdogSec=1s
            User=nobody
            TimeoutStartSec=5s
            %s
            ExecStart=/usr/bin/python3 -c "exec(open('%s').read())"
        ''' % (keys, self.notifier))

    def test_type_notify_with_private_network_becomes_running(self):
        self.notifier = self.path('notifier.py')
        with open(self.notifier, 'w') as f:
            f.write(NOTIFIER)
        os.chmod(self.notifier, 0o644)
        os.chmod(os.path.dirname(self.notifier), 0o755)
        self.notify_unit('netns', 'PrivateNetwork=yes')
        self.notify_unit('host', '')
        self.start_tend()
        r = self.wait_running('netns', timeout=10)
        self.assertEqual(r['status'], 'notified from lo', 'not in a network namespace of its own: %r' % r)
        host = self.wait_running('host', timeout=10)
        self.assertNotEqual(host['status'], 'notified from lo', 'the control sees only lo: %r' % host)
        addr = environ(r['main_pid'])['NOTIFY_SOCKET']
        self.assertTrue(addr.startswith('/run/tend-notify/'), 'NOTIFY_SOCKET=%r is not a path socket' % addr)
        self.assertTrue(environ(host['main_pid'])['NOTIFY_SOCKET'].startswith('@'), 'the control: abstract')
        st = os.stat(addr)
        self.assertTrue(stat.S_ISSOCK(st.st_mode) and st.st_mode & 0o777 == 0o666, oct(st.st_mode))
        time.sleep(2.5)  # over two WatchdogSec= periods: the lease renewed through the path socket
        again = self.st('netns')
        self.assertEqual((again['state'], again['main_pid']), ('running', r['main_pid']),
                         'the watchdog expired: WATCHDOG=1 did not arrive; stderr %r' % self.stderr()[-2000:])
        # daemon-reexec carries the socket's fd; the new tend reads its path back and keeps it.
        self.ctl('daemon-reexec')
        wait_until(lambda: 'units resumed' in self.stderr(), 10,
                   lambda: 'never re-executed: %r' % self.stderr()[-2000:])
        self.assertNotIn('notify socket cannot be taken back', self.stderr())
        time.sleep(2.5)  # over two WatchdogSec= periods after it
        again = self.st('netns')
        self.assertEqual((again['state'], again['main_pid']), ('running', r['main_pid']),
                         'after daemon-reexec the watchdog expired; stderr %r' % self.stderr()[-2000:])
        self.assertTrue(os.path.exists(addr), 'daemon-reexec removed the socket file')
        self.ctl('stop', 'netns')
        self.ctl('start', 'netns')
        self.wait_running('netns', timeout=10, other_than=r['main_pid'])  # restarts use the same socket
        self.stop_tend()
        self.assertFalse(os.path.exists(addr), 'the socket file %s is left behind' % addr)


if __name__ == '__main__':
    unittest.main()
