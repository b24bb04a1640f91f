#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small Type=forking daemon for tests/integration/test_forking.py.

The start process double-forks: the daemon (a session leader, re-parented to
tend, tend's subreaper) writes its PID file, serves 127.0.0.1:PORT (each
connection gets "PID\\n"), may fork workers, and exits 0 on SIGTERM; SIGHUP
appends a line to --hup-log. The start process exits once the daemon is
ready (or as the options say). Every wait is bounded."""
import argparse
import os
import signal
import socket
import sys
import time


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.005)
    sys.stderr.write('forkd: timed out waiting for %s\n' % what)
    os._exit(99)


def write_atomic(path, text, owner=None):
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
    if owner is not None:
        os.chown(tmp, owner, -1)
    os.rename(tmp, path)


def gone(pid):
    """The process is reaped (a zombie still has its /proc entry)."""
    return not os.path.exists('/proc/%d' % pid)


def notify(msg):
    addr = os.environ.get('NOTIFY_SOCKET')
    if not addr:
        sys.stderr.write('forkd: no NOTIFY_SOCKET\n')
        os._exit(98)
    if addr.startswith('@'):
        addr = '\0' + addr[1:]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(msg.encode(), addr)
    s.close()


def worker():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        signal.pause()


def daemon(a, ready):
    """Runs in the daemon: never returns."""
    mypid = os.getpid()
    if a.pidfile and not a.late_pidfile:
        write_atomic(a.pidfile, a.pid_text + '\n' if a.pid_text is not None else '%d\n' % (a.write_pid or mypid), a.owner)
    if a.daemon_exit is not None:
        if a.exit_before_read:
            os.write(ready, b'x')  # the parent waits for this process to be reaped
        os._exit(a.daemon_exit)
    for _ in range(a.workers):
        if os.fork() == 0:
            worker()
    if a.notify_mainpid:
        # The daemon hands over to its child C and exits: C, once it is
        # tend's child, names itself with MAINPID= (tend follows only
        # processes it can wait for), then says so in the file.
        if os.fork() == 0:
            wait_for(lambda: os.getppid() != mypid, 10, 'the daemon to exit')
            notify('MAINPID=%d' % os.getpid())
            write_atomic(a.notify_mainpid, '%d\n' % os.getpid())
            worker()
        os.write(ready, b'r')
        os._exit(0)
    srv = None
    if a.port:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(('127.0.0.1', a.port))
        srv.listen(16)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGHUP, lambda *_: open(a.hup_log, 'a').write('hup %d\n' % mypid) if a.hup_log else None)
    if not a.no_wait:  # else nobody reads it: the start process is gone
        os.write(ready, b'r')
    os.close(ready)
    if a.late_pidfile:
        time.sleep(a.late_pidfile)
        write_atomic(a.pidfile, '%d\n' % mypid, a.owner)
    while True:
        if srv:
            try:
                c, _ = srv.accept()
            except InterruptedError:
                continue
            c.sendall(b'%d\n' % mypid)
            c.close()
        else:
            signal.pause()


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--pidfile')
    p.add_argument('--owner', type=int, help='chown the PID file to this uid')
    p.add_argument('--write-pid', type=int, help='write this pid instead of the daemon\'s')
    p.add_argument('--pid-text', help='write this text (and a newline) into the PID file')
    p.add_argument('--late-pidfile', type=float, default=0, help='write the file this many s after the start exits')
    p.add_argument('--parent-exit', type=int, default=0)
    p.add_argument('--parent-hang', action='store_true')
    p.add_argument('--daemon-exit', type=int, help='the daemon exits at once with this status')
    p.add_argument('--exit-before-read', action='store_true',
                   help='the start process exits only once the daemon was reaped')
    p.add_argument('--workers', type=int, default=0)
    p.add_argument('--port', type=int)
    p.add_argument('--hup-log')
    p.add_argument('--no-wait', action='store_true',
                   help='a classic daemon: the start process exits right after its first fork, the daemon '
                        '(forked after setsid) writes its PID file later')
    p.add_argument('--notify-mainpid', help='hand over to a child that sends MAINPID= for itself and writes its pid here')
    a = p.parse_args()

    if a.parent_hang:
        while True:
            signal.pause()
    r, w = os.pipe()
    mid = os.fork()
    if mid == 0:
        os.close(r)
        os.setsid()
        d = os.fork()
        if d == 0:
            if a.no_wait:
                time.sleep(0.2)  # its file comes well after the start process exited
            daemon(a, w)
        os._exit(0)  # the daemon is re-parented to tend
    os.close(w)
    if a.no_wait:
        os._exit(a.parent_exit)  # the middle process and the daemon are re-parented to tend
    os.waitpid(mid, 0)
    got = os.read(r, 1)
    if a.exit_before_read:
        pid = int(open(a.pidfile).read())
        wait_for(lambda: gone(pid), 10, 'the daemon %d to be reaped' % pid)
    elif a.daemon_exit is None and got != b'r':
        sys.stderr.write('forkd: the daemon died before it was ready\n')
        os._exit(97)
    elif a.pidfile and not a.late_pidfile:
        wait_for(lambda: os.path.exists(a.pidfile), 10, 'the PID file')
    if a.notify_mainpid:
        wait_for(lambda: os.path.exists(a.notify_mainpid), 10, 'MAINPID= to be sent')
    sys.exit(a.parent_exit)


if __name__ == '__main__':
    main()
