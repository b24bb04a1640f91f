#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The unit files Debian's daemon packages ship, run UNCHANGED by tend
(issue 16 "What it must show"): nginx, postgresql@15-main, ssh, apache2,
redis-server and haproxy. Suite `privileged`: root and a writable cgroup2
mount (each unit in its own cgroup, so "the unit left no process" is read
from its cgroup); without root it prints "skip: reason" and exits 77.

How each package's file gets into the test's DIR: a symlink
DIR/NAME.service -> /lib/systemd/system/FILE (a linked unit, as `systemctl
link` makes one), never a copy, never an edit. What the test needs to
change goes in a drop-in DIR/NAME.service.d/test.conf, each line named and
justified by the comment above it; the drop-ins only point the daemon at the
test's own configuration (its own 127.0.0.1 port, pid file, logs), the
way an operator overrides a packaged unit. Nothing under /etc is written:
 - nginx: no environment variable names its configuration, so the drop-in
   resets ExecStartPre=/ExecStart=/ExecReload=/ExecStop= to the package's
   command lines plus `-c CONF -e LOG` (and PIDFile= to the test's);
 - postgresql-common reads its clusters from $PG_CLUSTER_CONF_ROOT when set:
   the test creates its own cluster "15/main" there (pg_createcluster, own
   data dir, port, socket dir), so the instance is `15-main` as the issue
   asks while the machine's own 15/main (in /etc/postgresql) is untouched;
 - apachectl reads $APACHE_CONFDIR (then passes -d DIR to apache2): a copy
   of /etc/apache2 with its own ports.conf, envvars and one site, under
   /var/lib (not /tmp: the unit has PrivateTmp=true);
 - sshd: /etc/default/ssh's $SSHD_OPTS is the package's hook; a later
   EnvironmentFile= sets it to `-f CONF` (own port, own host key), and the
   `sshd -t` checks are repeated with $SSHD_OPTS;
 - redis-server: ExecStart= with the test's config in place of
   /etc/redis/redis.conf (same options);
 - haproxy: the unit runs $CONFIG/$PIDFILE/$EXTRAOPTS; an EnvironmentFile=
   of the drop-in sets them (it overrides Environment= and the earlier
   /etc/default/haproxy whatever they say).
tend runs in a network namespace of its own (only `lo`): the daemons' ports
can never meet the machine's, even if a drop-in were not applied; and in a
mount namespace whose /run is its own tmpfs: the machine's /run/sshd (or
/run/nginx.pid…) is never touched.
Each test prints the versions of the packages it ran (dpkg-query). The
daemon tests run one after another (meson: is_parallel false)."""
import ctypes
import os
import pwd
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import children_of, wait_until  # noqa: E402
from svctest import (ServiceTestCase, cgroup_populated, cgroup_procs, free_port, kill_pid,  # noqa: E402
                     pid_alive)

UNITS = '/lib/systemd/system'
# runuser, ip: /usr/sbin, which a non-login root shell may not have in PATH.
os.environ['PATH'] = os.environ.get('PATH', '/usr/bin:/bin') + ':/usr/sbin:/sbin'


def installed_version(pkg):
    """The installed version of Debian package pkg, or None."""
    p = subprocess.run(['dpkg-query', '-W', '-f', '${Status}\t${Version}', pkg],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None
    status, _, version = p.stdout.partition('\t')
    return version if status.endswith(' installed') else None


def owner_package(path):
    """The package that installed path (dpkg -S), or None."""
    p = subprocess.run(['dpkg', '-S', path], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return p.stdout.split(':', 1)[0].split(',')[0].strip()


CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def connect_in(netns_fd, port, timeout):
    """A TCP connection to 127.0.0.1:PORT made in the network namespace
    netns_fd (by a thread of its own that joins it: a socket stays in the
    namespace it was made in), or None."""
    out = {}

    def run():
        if _libc.setns(netns_fd, CLONE_NEWNET) != 0:
            out['error'] = OSError(ctypes.get_errno(), 'setns')
            return
        try:
            out['sock'] = socket.create_connection(('127.0.0.1', port), timeout=timeout)
        except OSError as e:
            out['error'] = e
    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out.get('sock')


def talk(netns_fd, port, send=b'', until=b'\n', timeout=2):
    """Sends send to 127.0.0.1:PORT (in netns_fd) and reads until the bytes
    until have arrived (b'': the first bytes; None: until EOF); what was
    read, or None if the connection failed or nothing came."""
    s = connect_in(netns_fd, port, timeout)
    if s is None:
        return None
    data = b''
    try:
        with s:
            if send:
                s.sendall(send)
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
                if until is not None and until in data:
                    break
    except OSError:
        pass
    return data or None


def http_body(netns_fd, port, timeout=2):
    """The body of GET http://127.0.0.1:PORT/ when it answers 200, else None."""
    data = talk(netns_fd, port, b'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n', until=None, timeout=timeout)
    if not data or b'\r\n\r\n' not in data:
        return None
    head, body = data.split(b'\r\n\r\n', 1)
    parts = head.split(b'\r\n')[0].split()
    return body if len(parts) > 1 and parts[1] == b'200' else None


def read_text(path):
    with open(path, errors='replace') as f:
        return f.read()


def read_pidfile(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def proc_limit(pid, name):
    """(soft, hard) of the /proc/PID/limits row named name."""
    with open('/proc/%d/limits' % pid) as f:
        for ln in f:
            if ln.startswith(name):
                soft, hard = ln[len(name):].split()[:2]
                return soft, hard
    raise AssertionError('no %r in /proc/%d/limits' % (name, pid))


def proc_uid(pid):
    with open('/proc/%d/status' % pid) as f:
        for ln in f:
            if ln.startswith('Uid:'):
                return int(ln.split()[1])
    raise AssertionError('no Uid in /proc/%d/status' % pid)


class DebianUnitsBase(ServiceTestCase):
    """The helpers (test_hardened_daemons.py uses them too)."""

    def need(self, unit_file, *binaries):
        """Fails (scripts/bootstrap installs them) unless unit_file and the
        binaries are installed; prints the packages' versions."""
        path = os.path.join(UNITS, unit_file)
        self.assertTrue(os.path.isfile(path), '%s is missing: scripts/bootstrap installs the package' % path)
        seen = []
        for p in (path,) + binaries:
            self.assertTrue(os.path.exists(p), '%s is missing: scripts/bootstrap installs it' % p)
            pkg = owner_package(os.path.realpath(p)) or owner_package(p)
            self.assertTrue(pkg, 'dpkg -S %s names no package' % p)
            if pkg not in seen:
                seen.append(pkg)
        versions = ['%s %s' % (pkg, installed_version(pkg)) for pkg in seen]
        print('%s: ran %s' % (self.id().rsplit('.', 1)[-1], ', '.join(versions)), flush=True)
        return versions

    def link(self, name, unit_file):
        """DIR/NAME.service -> /lib/systemd/system/UNIT_FILE: the package's
        file, unchanged (a linked unit)."""
        os.symlink(os.path.join(UNITS, unit_file), os.path.join(self.dir, name + '.service'))

    def dropin(self, name, text, conf='test.conf'):
        """DIR/NAME.service.d/CONF with text (dedented lines; comments kept)."""
        d = os.path.join(self.dir, name + '.service.d')
        os.makedirs(d, exist_ok=True)
        body = '\n'.join(ln.strip() for ln in text.strip().splitlines()) + '\n'
        with open(os.path.join(d, conf), 'w') as f:
            f.write(body)

    def own_dir(self, what):
        """A directory of the test's own under /var/lib, for units whose
        PrivateTmp= would hide /tmp (tend's /run is its own tmpfs); removed
        at the end."""
        d = tempfile.mkdtemp(prefix='tend-it-%s.' % what, dir='/var/lib')
        self.addCleanup(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        return d

    def start_units(self, wrap=()):
        """tend over DIR, in a cgroup of its own (required: the test reads
        each unit's processes from its cgroup) and in a network namespace of
        its own with only `lo` up: the daemons' ports can never meet the
        machine's (even if a drop-in were not applied and a package's
        default port, 80 or 22, were used). self.net is that namespace (an
        fd), for talk(). And in a mount namespace whose /run is a fresh
        tmpfs: a RuntimeDirectory= (/run/sshd, /run/redis) is tend's own,
        never the machine's (a real sshd may use /run/sshd, and the unit's
        stop removes it), and no package default (/run/nginx.pid, …) can
        touch the machine's; self.ns_path(PATH) reads such a path from
        outside. wrap is run inside the namespaces, before tend."""
        setup = 'ip link set lo up && mount -t tmpfs -o mode=0755 tend-it-run /run && exec "$@"'
        ns = ['unshare', '--net', '--mount', '--propagation', 'private', '--', 'sh', '-c', setup, 'sh']
        self.start_tend(cgroup=self.make_cgroup(required=True), wrap=ns + list(wrap))
        self.net = os.open('/proc/%d/ns/net' % self.tend_pid, os.O_RDONLY | os.O_CLOEXEC)
        self.addCleanup(os.close, self.net)

    def ns_path(self, path):
        """PATH (under /run) as tend sees it (through /proc/PID/root)."""
        return '/proc/%d/root%s' % (self.tend_pid, path)

    def unit_cgroup(self, name):
        return os.path.join(self.cgroup, name + '.service')

    def unit_procs(self, name):
        return cgroup_procs(self.unit_cgroup(name))

    def running(self, name, timeout):
        """Waits until NAME is running with a main pid in its own cgroup."""
        r = self.wait_state(name, lambda r: r['state'] == 'running' and r['main_pid'], timeout,
                            'never running (look for the unit\'s messages in tend\'s stderr)')
        self.assertIn(r['main_pid'], self.unit_procs(name),
                      '%s: main pid %d is not in the unit\'s cgroup %s' % (name, r['main_pid'], self.unit_cgroup(name)))
        return r

    def wait_serving(self, check, what, timeout=15):
        return wait_until(check, timeout, lambda: '%s never answered; tend stderr %r; output %r'
                          % (what, self.stderr()[-3000:], self.output()[-2000:]))

    def reload_renews_children(self, name, main, serves, what):
        """`tendctl reload NAME` (the unit's ExecReload=): the main pid stays,
        its children are all new (the old ones gone), it still serves."""
        old = set(children_of(main))
        self.assertTrue(old, '%s: main pid %d has no children before the reload' % (name, main))
        self.ctl('reload', name, timeout=60)
        wait_until(lambda: (lambda kids: kids and not kids & old)(set(children_of(main))), 15,
                   lambda: '%s: after the reload the children of %d are %r (before: %r): the daemon did not '
                   'renew its workers; tend stderr %r' % (name, main, children_of(main), sorted(old),
                                                          self.stderr()[-2000:]))
        r = self.st(name)
        self.assertEqual((r['state'], r['main_pid']), ('running', main), '%s: the reload changed the main pid' % name)
        for p in old:
            self.assertFalse(pid_alive(p), '%s: old child %d outlived the reload' % (name, p))
        self.wait_serving(serves, '%s after the reload' % what)

    def wait_cgroup_empty(self, name, pids, why):
        cg = self.unit_cgroup(name)
        wait_until(lambda: not cgroup_populated(cg), 15, lambda: '%s: %s: the unit\'s cgroup still holds %r'
                   % (name, why, cgroup_procs(cg)))
        left = [p for p in pids if pid_alive(p)]
        self.assertEqual(left, [], '%s: %s: processes of the unit outlived it' % (name, why))

    def stop_leaves_nothing(self, name, result='success'):
        """`tendctl stop NAME`: inactive with result, its cgroup empty."""
        pids = self.unit_procs(name)
        self.assertTrue(pids, '%s has no process before the stop' % name)
        self.ctl('stop', name, timeout=120)
        r = self.wait_state(name, lambda r: r['state'] in ('inactive', 'failed'), 15, 'never stopped')
        self.assertEqual((r['state'], r['result']), ('inactive', result), '%s: stop ended %r' % (name, r))
        self.wait_cgroup_empty(name, pids, 'after tendctl stop')

    def apache2_setup(self):
        """apache2.service linked, with a drop-in pointing apachectl at the
        test's copy of /etc/apache2 (its own port); (port, pid file, check
        that it serves)."""
        self.need('apache2.service', '/usr/sbin/apachectl', '/usr/sbin/apache2')
        port = free_port()
        base = self.own_dir('apache2')
        conf = os.path.join(base, 'apache2')
        shutil.copytree('/etc/apache2', conf, symlinks=True)
        for f in os.listdir(os.path.join(conf, 'sites-enabled')):
            os.unlink(os.path.join(conf, 'sites-enabled', f))
        www = os.path.join(base, 'www')
        for d in ('run', 'lock', 'log', 'www'):
            os.mkdir(os.path.join(base, d), 0o755)
        with open(os.path.join(www, 'index.html'), 'w') as f:
            f.write('tend-it apache2\n')
        os.chmod(os.path.join(www, 'index.html'), 0o644)
        pidfile = os.path.join(base, 'run', 'apache2.pid')
        with open(os.path.join(conf, 'envvars'), 'w') as f:
            f.write('unset HOME\nexport APACHE_RUN_USER=www-data\nexport APACHE_RUN_GROUP=www-data\n'
                    'export APACHE_PID_FILE=%s\nexport APACHE_RUN_DIR=%s/run\nexport APACHE_LOCK_DIR=%s/lock\n'
                    'export APACHE_LOG_DIR=%s/log\nexport LANG=C\n' % (pidfile, base, base, base))
        with open(os.path.join(conf, 'ports.conf'), 'w') as f:
            f.write('Listen 127.0.0.1:%d\n' % port)
        with open(os.path.join(conf, 'sites-enabled', 'tend-test.conf'), 'w') as f:
            f.write('ServerName 127.0.0.1\n<VirtualHost 127.0.0.1:%d>\nDocumentRoot %s\n'
                    '<Directory %s>\nRequire all granted\n</Directory>\n</VirtualHost>\n' % (port, www, www))
        self.link('apache2', 'apache2.service')
        self.dropin('apache2', '''
            [Service]
            # apachectl reads /etc/apache2 (port 80) unless APACHE_CONFDIR names another
            # directory (then it runs apache2 -d DIR and reads DIR/envvars): the test's copy
            # of /etc/apache2, with its own port, pid file, logs and locks. It is under /var/lib,
            # not /tmp, because the unit has PrivateTmp=true.
            Environment=APACHE_CONFDIR={conf}
        '''.format(conf=conf))
        serves = lambda: http_body(self.net, port) == b'tend-it apache2\n'  # noqa: E731
        return port, pidfile, serves

    def redis_setup(self):
        """redis-server.service linked, with a drop-in running the test's
        redis.conf (its own port, nothing saved); the port."""
        self.need('redis-server.service', '/usr/bin/redis-server')
        port = free_port()
        base = self.own_dir('redis')
        conf = os.path.join(base, 'redis.conf')
        with open(conf, 'w') as f:
            f.write('port %d\nbind 127.0.0.1\nsave ""\nappendonly no\ndir %s\nlogfile ""\n' % (port, base))
        os.chmod(conf, 0o644)
        self.link('redis-server', 'redis-server.service')
        self.dropin('redis-server', '''
            [Service]
            # Reset, then the package's command line with the test's redis.conf (its own port,
            # nothing saved) in place of /etc/redis/redis.conf (port 6379, /var/lib/redis).
            ExecStart=
            ExecStart=/usr/bin/redis-server {conf} --supervised systemd --daemonize no
        '''.format(conf=conf))
        return port


class DebianUnits(DebianUnitsBase):
    # ---- nginx: Type=forking + PIDFile= ----

    def nginx_setup(self):
        self.need('nginx.service', '/usr/sbin/nginx')
        port = free_port()
        d = self.path('nginx')
        os.mkdir(d)
        os.chmod(self.tmp.name, 0o755)
        conf, log, pidfile = os.path.join(d, 'nginx.conf'), os.path.join(d, 'error.log'), os.path.join(d, 'nginx.pid')
        with open(conf, 'w') as f:
            f.write('''pid {pid};
error_log {log};
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
'''.format(pid=pidfile, log=log, d=d, port=port))
        self.link('nginx', 'nginx.service')
        g = "-g 'daemon on; master_process on;'"
        self.dropin('nginx', '''
            # The package runs /etc/nginx/nginx.conf (port 80, pid file /run/nginx.pid) and nginx
            # has no environment variable for another one: every command line of the package is
            # repeated with -c (the test's nginx.conf: its own port and pid file) and -e (its own
            # error log: nginx opens /var/log/nginx/error.log before it reads -c).
            [Service]
            # The pid file the test's nginx.conf names.
            PIDFile={pid}
            # Reset, then the package's `nginx -t -q -g …` on the test's configuration.
            ExecStartPre=
            ExecStartPre=/usr/sbin/nginx -c {conf} -e {log} -t -q {g}
            # Reset, then the package's start command on the test's configuration.
            ExecStart=
            ExecStart=/usr/sbin/nginx -c {conf} -e {log} {g}
            # Reset, then the package's `-s reload` (it reads the pid file of -c's configuration).
            ExecReload=
            ExecReload=/usr/sbin/nginx -c {conf} -e {log} {g} -s reload
            # Reset, then the package's graceful stop on the test's pid file.
            ExecStop=
            ExecStop=-/sbin/start-stop-daemon --quiet --stop --retry QUIT/5 --pidfile {pid}
        '''.format(pid=pidfile, conf=conf, log=log, g=g))
        return port, pidfile

    def nginx_serving(self, port, pidfile):
        serves = lambda: http_body(self.net, port) == b'tend-it nginx\n'  # noqa: E731
        self.wait_serving(serves, 'nginx on port %d' % port)
        r = self.running('nginx', 30)
        master = r['main_pid']
        self.assertEqual(read_pidfile(pidfile), master, 'the main pid is not the one of PIDFile=')
        self.assertEqual(os.readlink('/proc/%d/exe' % master), '/usr/sbin/nginx')
        wait_until(lambda: len(children_of(master)) == 2, 10,
                   lambda: 'nginx master %d has workers %r, want 2' % (master, children_of(master)))
        return r, serves

    def test_nginx_forking_reload_and_sigkill(self):
        """Serves, with the main pid from PIDFile=; `reload` gets new workers
        under the same master; SIGKILL of the master: `failed`/`signal`, its
        workers gone (the unit's cgroup is killed, as systemd does)."""
        port, pidfile = self.nginx_setup()
        self.start_units()
        r, serves = self.nginx_serving(port, pidfile)
        master = r['main_pid']
        self.reload_renews_children('nginx', master, serves, 'nginx')
        pids = self.unit_procs('nginx')
        kill_pid(master)
        r = self.wait_state('nginx', lambda r: r['state'] == 'failed', 15,
                            'not failed after SIGKILL of its master (nginx.service has no Restart=)')
        self.assertEqual((r['result'], r['last_exit'], r['restarts']),
                         ('signal', {'signal': 9, 'core_dumped': False}, 0), 'after SIGKILL: %r' % r)
        self.wait_cgroup_empty('nginx', pids, 'after SIGKILL of the master (KillMode=mixed: the rest gets SIGKILL)')
        self.assertIsNone(http_body(self.net, port, timeout=1), 'something still answers on nginx\'s port')

    def test_nginx_restart_on_failure(self):
        """With a drop-in Restart=on-failure, SIGKILL of the master restarts
        the unit with a new master (from the new pid file) that serves; the
        old workers are gone; `tendctl stop` runs ExecStop= and leaves nothing."""
        port, pidfile = self.nginx_setup()
        self.dropin('nginx', '''
            [Service]
            # What this test checks: a master killed by a signal is restarted.
            Restart=on-failure
        ''', conf='restart.conf')
        self.start_units()
        r, serves = self.nginx_serving(port, pidfile)
        master = r['main_pid']
        pids = self.unit_procs('nginx')
        kill_pid(master)
        r = self.wait_running('nginx', timeout=20, other_than=master)
        # last_exit is now the new start process's (nginx's parent, exit 0), as systemd's
        # ExecMainStatus after a forking unit's restart: the count says it was restarted once.
        self.assertEqual(r['restarts'], 1, 'want one restart after SIGKILL of the master: %r' % r)
        for p in pids:
            self.assertFalse(pid_alive(p), 'pid %d of the killed nginx survived its restart' % p)
        self.wait_serving(serves, 'nginx after its restart')
        self.assertEqual(read_pidfile(pidfile), r['main_pid'], 'the new main pid is not the new PIDFile='"'"'s')
        self.stop_leaves_nothing('nginx')
        self.assertFalse(os.path.exists(pidfile), 'nginx did not remove its pid file: was it stopped gracefully?')

    # ---- postgresql@15-main: Type=forking, pg_ctlcluster ----

    def test_postgresql_instance_15_main(self):
        """postgresql@.service as postgresql@15-main: accepts connections
        (a query over its socket, the startup exchange over TCP), reloads
        (SIGHUP, same postmaster), stops with `-m fast` (its ExecStop=),
        leaving no process."""
        self.need('postgresql@.service', '/usr/bin/pg_ctlcluster', '/usr/lib/postgresql/15/bin/postgres',
                  '/usr/bin/psql')
        pg = pwd.getpwnam('postgres')
        port = free_port()
        os.chmod(self.tmp.name, 0o755)
        base = self.path('pg')
        root, sock, run = os.path.join(base, 'etc'), os.path.join(base, 'sock'), os.path.join(base, 'run')
        for d in (base, root, sock, run):
            os.mkdir(d, 0o755)
        for d in (sock, run):
            os.chown(d, pg.pw_uid, pg.pw_gid)
        log, pidfile = os.path.join(base, 'postgresql.log'), os.path.join(run, '15-main.pid')
        env = dict(os.environ, PG_CLUSTER_CONF_ROOT=root)
        p = subprocess.run(['pg_createcluster', '15', 'main', '-d', os.path.join(base, 'data'), '-p', str(port),
                            '-s', sock, '-l', log], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, 'pg_createcluster failed: %s %s' % (p.stdout, p.stderr))
        conf = os.path.join(root, '15', 'main')
        with open(os.path.join(conf, 'conf.d', 'tend-test.conf'), 'w') as f:
            f.write("listen_addresses = '127.0.0.1'\nexternal_pid_file = '%s'\n" % pidfile)
        self.link('postgresql@15-main', 'postgresql@.service')
        self.dropin('postgresql@15-main', '''
            [Unit]
            # The package asserts /etc/postgresql/15/main/postgresql.conf; the test's cluster
            # is under PG_CLUSTER_CONF_ROOT: the empty value resets the list (systemd.unit(5)),
            # then the same assertion on the test's file.
            AssertPathExists=
            AssertPathExists={conf}/postgresql.conf
            [Service]
            # postgresql-common's tools (pg_ctlcluster in ExecStart=/ExecStop=/ExecReload=) read
            # clusters from here instead of /etc/postgresql: the test's own cluster 15/main, on
            # its own port, data directory and socket directory.
            Environment=PG_CLUSTER_CONF_ROOT={root}
            # The external_pid_file of the test's cluster, not /run/postgresql/15-main.pid (the
            # machine's own cluster of that name).
            PIDFile={pid}
        '''.format(conf=conf, root=root, pid=pidfile))
        self.start_units()
        name = 'postgresql@15-main'
        r = self.running(name, 90)
        postmaster = r['main_pid']
        self.assertEqual(read_pidfile(pidfile), postmaster, 'the main pid is not the one of PIDFile=')
        self.assertEqual(os.readlink('/proc/%d/exe' % postmaster), '/usr/lib/postgresql/15/bin/postgres')

        def query():
            q = subprocess.run(['runuser', '-u', 'postgres', '--', 'psql', '-h', sock, '-p', str(port),
                                '-d', 'postgres', '-Atc', 'select 6*7'], capture_output=True, text=True,
                               timeout=20, cwd='/')
            return q.returncode == 0 and q.stdout.strip() == '42'

        def tcp_startup():
            # An SSLRequest (length 8, code 80877103): the server answers 'S' or 'N'.
            return talk(self.net, port, struct.pack('!II', 8, 80877103), until=b'') in (b'S', b'N')
        self.wait_serving(query, 'psql over the socket of postgresql@15-main', timeout=30)
        self.wait_serving(tcp_startup, 'postgresql@15-main on 127.0.0.1:%d' % port)
        self.ctl('reload', name, timeout=60)
        wait_until(lambda: 'received SIGHUP' in read_text(log), 15, 'ExecReload= did not reach the postmaster')
        self.assertEqual(self.st(name)['main_pid'], postmaster, 'the reload changed the main pid')
        self.wait_serving(query, 'psql after the reload')
        self.stop_leaves_nothing(name)
        self.assertIn('received fast shutdown request', read_text(log),
                      'ExecStop= did not stop the cluster with -m fast')
        self.assertFalse(pid_alive(postmaster))
        ls = subprocess.run(['pg_lsclusters', '-h'], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual([ln.split()[:4] for ln in ls.stdout.splitlines()], [['15', 'main', str(port), 'down']],
                         'pg_lsclusters does not say the test\'s cluster is down: %r' % ls.stdout)

    # ---- ssh: Type=notify, RuntimeDirectory=sshd, ExecStartPre= ----

    def test_ssh(self):
        """ssh.service: tend creates /run/sshd (RuntimeDirectory=, mode 0755)
        before ExecStartPre=`sshd -t` (which needs it); sshd serves its
        banner; `reload` (sshd -t, then SIGHUP to $MAINPID) keeps the pid and
        the banner; the alias sshd.service names it; stop removes /run/sshd."""
        self.need('ssh.service', '/usr/sbin/sshd')
        port = free_port()
        os.chmod(self.tmp.name, 0o755)
        key = self.path('ssh_host_ed25519_key')
        p = subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', key], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, 'ssh-keygen: %s' % p.stderr)
        conf = self.path('sshd_config')
        with open(conf, 'w') as f:
            f.write('Port %d\nListenAddress 127.0.0.1\nHostKey %s\nPidFile %s\n'
                    % (port, key, self.path('sshd.pid')))
        env_file = self.path('ssh.env')
        with open(env_file, 'w') as f:
            f.write('SSHD_OPTS=-f %s\n' % conf)
        self.link('ssh', 'ssh.service')
        self.dropin('ssh', '''
            [Service]
            # The package's ExecStart= is `sshd -D $SSHD_OPTS`, $SSHD_OPTS from
            # /etc/default/ssh; a later EnvironmentFile= wins: `-f` and the test's
            # sshd_config (its own port, host key and pid file) instead of /etc/ssh's.
            EnvironmentFile={env}
            # Reset, then the package's `sshd -t` check on the same configuration as ExecStart=.
            ExecStartPre=
            ExecStartPre=/usr/sbin/sshd -t $SSHD_OPTS
            # Reset, then the package's two reload commands, the check on the same configuration.
            ExecReload=
            ExecReload=/usr/sbin/sshd -t $SSHD_OPTS
            ExecReload=/bin/kill -HUP $MAINPID
        '''.format(env=env_file))
        self.start_units()
        r = self.running('ssh', 30)
        main = r['main_pid']
        st = os.stat(self.ns_path('/run/sshd'))
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o755, 0), 'RuntimeDirectoryMode=0755, owner root')
        banner = lambda: (talk(self.net, port) or b'').startswith(b'SSH-2.0-OpenSSH')  # noqa: E731
        self.wait_serving(banner, 'sshd on port %d' % port)
        self.assertEqual(os.readlink('/proc/%d/exe' % main), '/usr/sbin/sshd')
        _, out, _ = self.ctl('status', 'sshd', '--json')
        self.assertIn('"main_pid":%d' % main, out.replace(' ', ''), 'the alias sshd.service does not name ssh.service')
        self.ctl('reload', 'ssh', timeout=60)
        self.wait_serving(banner, 'sshd after the reload')
        r = self.st('ssh')
        self.assertEqual((r['state'], r['main_pid']), ('running', main), 'the reload changed the main pid')
        self.stop_leaves_nothing('ssh')
        self.assertFalse(os.path.exists(self.ns_path('/run/sshd')), 'RuntimeDirectory=sshd was not removed at the stop')

    # ---- apache2: Type=forking without PIDFile= (GuessMainPID=) ----

    def test_apache2(self):
        """apache2.service (apachectl start): the main pid is guessed (the
        one process left in the cgroup: apache's own pid file agrees);
        serves; `reload` (apachectl graceful) renews the children under the
        same parent; stop (apachectl graceful-stop) leaves nothing."""
        port, pidfile, serves = self.apache2_setup()
        self.start_units()
        self.wait_serving(serves, 'apache2 on port %d' % port)
        r = self.running('apache2', 30)
        main = r['main_pid']
        self.assertEqual(os.readlink('/proc/%d/exe' % main), '/usr/sbin/apache2')
        self.assertEqual(read_pidfile(pidfile), main, 'the guessed main pid is not apache\'s parent process')
        self.reload_renews_children('apache2', main, serves, 'apache2')
        self.stop_leaves_nothing('apache2')

    # ---- redis-server: Type=notify, User=, LimitNOFILE= above the hard limit ----

    def test_redis_server_limit_clamped(self):
        """redis-server.service's LimitNOFILE=65535 under a tend whose hard
        limit is 4096 and which cannot raise it (no CAP_SYS_RESOURCE): the
        closest value, 4096:4096, with a notice naming the key, as systemd;
        redis runs as User=redis in /run/redis (RuntimeDirectoryMode=2755) and
        answers; stop leaves nothing and removes /run/redis."""
        port = self.redis_setup()
        # tend's hard limit 4096, and no CAP_SYS_RESOURCE to raise it.
        self.start_units(wrap=['setpriv', '--bounding-set=-sys_resource', 'prlimit', '--nofile=1024:4096', '--'])
        r = self.running('redis-server', 30)
        main = r['main_pid']

        pong = lambda: talk(self.net, port, b'PING\r\n') == b'+PONG\r\n'  # noqa: E731
        self.wait_serving(pong, 'redis PING on port %d' % port)
        self.assertEqual(proc_limit(main, 'Max open files'), ('4096', '4096'),
                         'LimitNOFILE=65535 not clamped to the closest value the hard limit allows')
        notices = [ln for ln in self.stderr().splitlines()
                   if 'redis-server' in ln and 'LimitNOFILE' in ln and '4096' in ln]
        self.assertTrue(notices, 'no notice naming the unit, LimitNOFILE= and the value used (4096): %r'
                        % self.stderr()[-2000:])
        self.assertEqual(proc_uid(main), pwd.getpwnam('redis').pw_uid, 'User=redis not applied')
        st = os.stat(self.ns_path('/run/redis'))
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o2755, pwd.getpwnam('redis').pw_uid),
                         'RuntimeDirectory=redis with RuntimeDirectoryMode=2755, owned by User=')
        self.stop_leaves_nothing('redis-server')
        self.assertFalse(os.path.exists(self.ns_path('/run/redis')),
                         'RuntimeDirectory=redis was not removed at the stop')

    # ---- haproxy: Type=notify master-worker, ExecReload= with USR2 ----

    def test_haproxy(self):
        """haproxy.service with the test's $CONFIG: serves; `reload` (check,
        then SIGUSR2 to $MAINPID) replaces the worker under the same master;
        stop: inactive (exit 0 or SuccessExitStatus=143), nothing left."""
        self.need('haproxy.service', '/usr/sbin/haproxy')
        port = free_port()
        cfg, env_file = self.path('haproxy.cfg'), self.path('haproxy.env')
        with open(cfg, 'w') as f:
            f.write('global\n    maxconn 64\ndefaults\n    mode http\n    timeout connect 5s\n'
                    '    timeout client 10s\n    timeout server 10s\nfrontend tendtest\n'
                    '    bind 127.0.0.1:%d\n'
                    '    http-request return status 200 content-type text/plain string "tend-it haproxy"\n' % port)
        with open(env_file, 'w') as f:
            f.write('CONFIG=%s\nPIDFILE=%s\nEXTRAOPTS=-S %s\n'
                    % (cfg, self.path('haproxy.pid'), self.path('haproxy-master.sock')))
        self.link('haproxy', 'haproxy.service')
        self.dropin('haproxy', '''
            [Service]
            # The unit runs `haproxy -Ws -f $CONFIG -p $PIDFILE $EXTRAOPTS`; an EnvironmentFile=
            # overrides Environment= and comes after the package's /etc/default/haproxy: the
            # test's configuration (its own port), pid file and master socket.
            EnvironmentFile={env}
            {devlog}
        '''.format(env=env_file, devlog='' if os.path.exists('/dev/log') else
                   # ns: no syslog on this machine, so no /dev/log for the package's
                   # BindReadOnlyPaths=/dev/log:… (systemd too refuses a missing source): made optional
                   'BindReadOnlyPaths=\nBindReadOnlyPaths=-/dev/log:/var/lib/haproxy/dev/log'))
        self.start_units()
        r = self.running('haproxy', 30)
        master = r['main_pid']
        serves = lambda: http_body(self.net, port) == b'tend-it haproxy'  # noqa: E731
        self.wait_serving(serves, 'haproxy on port %d' % port)
        self.assertEqual(os.readlink('/proc/%d/exe' % master), '/usr/sbin/haproxy')
        self.reload_renews_children('haproxy', master, serves, 'haproxy')
        self.stop_leaves_nothing('haproxy')


if __name__ == '__main__':
    if os.geteuid() != 0:
        print('skip: needs root (the daemons\' users, /run, cgroups)')
        sys.exit(77)
    unittest.main(verbosity=2)
