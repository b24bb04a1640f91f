#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The README's first command, as a user runs it: tend --config-dir examples/
(SPEC §1 service mode). The oneshot writes the page before the web server,
ordered after it, starts; the server serves that page; redis answers; a
SIGTERM stops everything and tend exits 0. The examples use fixed ports
(8080, 6390): a test that finds one taken says so and fails rather than
testing something else."""
import os
import signal
import socket
import subprocess
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import wait_until  # noqa: E402
from svctest import ServiceTestCase, cgroup_populated, pid_alive  # noqa: E402

EXAMPLES = os.environ.get('EXAMPLES_DIR', '')


def port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(('127.0.0.1', port))
        except OSError:
            return False
    return True


class Examples(ServiceTestCase):
    def setUp(self):
        super().setUp()
        if not os.path.isdir(EXAMPLES):
            self.skipTest('EXAMPLES_DIR=%r is not a directory: run through meson test' % EXAMPLES)
        for port in (8080, 6390):
            self.assertTrue(port_free(port), '127.0.0.1:%d is taken: the examples cannot run here' % port)
        self.dir = EXAMPLES

    def test_examples_run_in_order_and_stop(self):
        self.start_tend()
        web = self.wait_running('web', timeout=15)
        setup = self.st('setup')
        self.assertEqual((setup['state'], setup['result']), ('running', 'success'), setup)
        self.assertGreaterEqual(web['since_monotonic'], setup['since_monotonic'],
                                'web started before setup had written its page')

        def page():
            try:
                with urllib.request.urlopen('http://127.0.0.1:8080/', timeout=2) as r:
                    return r.read().decode()
            except OSError:
                return None
        text = wait_until(page, 10, lambda: 'web never answered on 127.0.0.1:8080; %r' % self.st('web'))
        self.assertIn('served by tend', text)

        if subprocess.run(['sh', '-c', 'command -v redis-server && command -v redis-cli'],
                          capture_output=True).returncode == 0:
            self.wait_running('kv', timeout=15)
            wait_until(lambda: subprocess.run(['redis-cli', '-p', '6390', 'ping'], capture_output=True,
                                              text=True, timeout=5).stdout.strip() == 'PONG',
                       10, 'kv (redis on 6390) never answered PING')

        pids = [r['main_pid'] for r in self.statuses().values() if r['main_pid']]
        os.kill(self.tend_pid, signal.SIGTERM)
        self.assertEqual(self.tend_proc.wait(20, 'tend did not exit after SIGTERM'), 0, self.stderr())
        for pid in pids:
            self.assertFalse(pid_alive(pid), 'pid %d outlived tend' % pid)
        if self.cgroup:
            self.assertFalse(cgroup_populated(self.cgroup), 'processes left in tend\'s cgroup')


if __name__ == '__main__':
    unittest.main(verbosity=2)
