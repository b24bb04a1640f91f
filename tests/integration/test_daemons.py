#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Real daemons as tend units: redis-server and nginx in the foreground, each
on a free 127.0.0.1 port with every file in a temp dir. Each must answer,
come back answering after SIGKILL of its main process (the stop sequence
after a main death frees the port: SPEC §4 "Stop"), and leave nothing behind
when tend shuts down. A daemon that is not installed skips its test."""
import os
import shutil
import subprocess
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import children_of, wait_until  # noqa: E402
from svctest import ServiceTestCase, cgroup_procs, free_port, kill_pid, pid_alive  # noqa: E402

NGINX_CONF = '''
pid {d}/nginx.pid;
error_log {d}/error.log;
worker_processes 2;
events {{ worker_connections 64; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "tend-it nginx\\n"; }}
    }}
}}
'''


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        kids = children_of(todo.pop())
        out += kids
        todo += kids
    return out


class Daemons(ServiceTestCase):
    def family(self, name):
        """The unit's processes: its cgroup's, else the main pid and its
        descendants (the process-group fallback)."""
        r = self.st(name)
        if self.cgroup:
            return cgroup_procs(os.path.join(self.cgroup, name + '.service'))
        return [r['main_pid']] + descendants(r['main_pid']) if r['main_pid'] else []

    def crash_and_recover(self, name, answers, what):
        wait_until(answers, 10, lambda: '%s never answered; tend stderr %r; output %r'
                   % (what, self.stderr()[-2000:], self.output()[-2000:]))
        first = self.st(name)
        pids = self.family(name)
        self.assertIn(first['main_pid'], pids)
        for p in pids:
            self.addCleanup(kill_pid, p)
        kill_pid(first['main_pid'])
        r = self.wait_running(name, timeout=10, other_than=first['main_pid'])
        self.assertEqual(r['restarts'], 1)
        self.assertEqual(r['last_exit'], {'signal': 9, 'core_dumped': False})
        wait_until(answers, 10, lambda: '%s did not answer after its restart; tend stderr %r'
                   % (what, self.stderr()[-2000:]))
        for p in pids:
            self.assertFalse(pid_alive(p), 'pid %d of the killed instance survived its restart' % p)
        return pids + self.family(name)

    def shutdown_leaves_nothing(self, pids):
        for p in pids:
            self.addCleanup(kill_pid, p)
        self.assertEqual(self.stop_tend(timeout=20), 0)
        left = [p for p in pids if pid_alive(p)]
        self.assertEqual(left, [], 'daemon processes outlived tend')

    @unittest.skipUnless(shutil.which('redis-server') and shutil.which('redis-cli'), 'redis not installed')
    def test_redis(self):
        port = free_port()
        work = self.path('redis')
        os.mkdir(work)
        self.unit('redis', '''
            [Service]
            ExecStart=redis-server --port %d --bind 127.0.0.1 --save "" --appendonly no --dir %s
            Restart=always
            RestartSec=100ms
        ''' % (port, work))
        self.start_tend()

        def pong():
            p = subprocess.run(['redis-cli', '-p', str(port), 'ping'], capture_output=True, text=True, timeout=5)
            return p.returncode == 0 and p.stdout.strip() == 'PONG'
        pids = self.crash_and_recover('redis', pong, 'redis-cli ping')
        self.shutdown_leaves_nothing(pids)

    @unittest.skipUnless(shutil.which('nginx'), 'nginx not installed')
    def test_nginx(self):
        port = free_port()
        d = self.path('nginx')
        os.mkdir(d)
        os.chmod(self.tmp.name, 0o755)  # the workers (user nobody) may need to look around
        conf = os.path.join(d, 'nginx.conf')
        with open(conf, 'w') as f:
            f.write(NGINX_CONF.format(d=d, port=port))
        self.unit('nginx', '''
            [Service]
            ExecStart=nginx -p %s/ -c %s -e %s/error.log -g "daemon off;"
            Restart=always
            RestartSec=100ms
        ''' % (d, conf, d))
        self.start_tend()
        url = 'http://127.0.0.1:%d/' % port

        def get():
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    return r.status == 200 and r.read() == b'tend-it nginx\n'
            except OSError:
                return False
        # The master and its workers.
        wait_until(lambda: len(self.family('nginx')) >= 3, 10, 'nginx never started its workers')
        pids = self.crash_and_recover('nginx', get, 'nginx')
        self.shutdown_leaves_nothing(pids)


if __name__ == '__main__':
    unittest.main(verbosity=2)
