#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`tendctl --cluster hosts` answered without blocking tend's loop (issue 20's
store contract (a); docs/cluster.md §4b, docs/control-protocol.md "cluster").

One etcd member on loopback ports of this test (stopped by pid), one tend
(h1) with two sleeping units. With etcd frozen (SIGSTOP of its pid, after h1
registered), each host's lease time left cannot be asked of it:

1. `tendctl --cluster hosts` waits for its answer, and meanwhile `tendctl
   list` on the same tend answers within 100 ms, and a unit's main process
   killed (by pid) is reaped and shown failed — both before the hosts view
   answers (on a tend whose loop waits for etcd, both come after it);
2. the hosts view then answers, h1's time left unknown (null), within the
   ask's deadline + its guard;
3. a client that hangs up while its hosts view waits: tend drops the late
   answer and serves on (ASan build: no use after free);
4. etcd thawed (SIGCONT): the view shows h1's time left again, in (0, TTL].

Skips (77) only when the etcd binary is absent. Env: TEND, TENDCTL, ETCD.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster_etcd as tc  # noqa: E402
from test_store_etcd import ETCD, free_port  # noqa: E402
from tendtest import TEND, wait_until  # noqa: E402
from svctest import cgroup_remove, cgroup_usable  # noqa: E402

TENDCTL = os.environ.get("TENDCTL", os.path.join(os.path.dirname(TEND), "tendctl"))
SLEEPER = "[Service]\nExecStart=/bin/sh -c 'echo $$$$ > @DIR@/NAME.pid; exec sleep 1000'\n"
LIST_MAX = 0.1  # s: `tendctl list` while the hosts view waits (the brief's bound)
HOSTS_MAX = 3.0  # s: the ask's deadline (0.5 s) + its guard (0.5 s) + a loaded machine's slack
check = tc.check


def ctl(sock, *args, timeout=20, ok=(0,)):
    r = subprocess.run([TENDCTL, "--control-socket", sock, *args], capture_output=True, timeout=timeout)
    check(r.returncode in ok, f"tendctl {' '.join(args)} exited {r.returncode}: {r.stderr.decode()}")
    return r.stdout.decode()


def hosts(sock):
    return {h["host"]: h for h in json.loads(ctl(sock, "--cluster", "hosts", "--json"))}


class Waiting:
    """`tendctl --cluster hosts --json` in the background; .done the monotonic time it exited."""

    def __init__(self, sock):
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([TENDCTL, "--control-socket", sock, "--cluster", "hosts", "--json"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.done = None
        self.out = self.err = b""
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _wait(self):
        self.out, self.err = self.proc.communicate()
        self.done = time.monotonic()

    def join(self, timeout):
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.proc.kill()
            raise AssertionError(f"tendctl --cluster hosts not answered within {timeout} s with etcd frozen "
                                 "(the ask's deadline never answered the ticket?)")


def frozen_etcd_does_not_stall_tend(e, t, sock):
    pid_b = t.pid_of("ct-b.service")
    os.kill(e.proc.pid, signal.SIGSTOP)
    w = Waiting(sock)
    time.sleep(0.1)  # tendctl connected and asked: the view waits for etcd
    check(w.proc.poll() is None, f"--cluster hosts answered at once with etcd frozen: {w.out!r} {w.err!r}")
    t_list = time.monotonic()
    listed = ctl(sock, "list")
    listed_in = time.monotonic() - t_list
    check("ct-a" in listed, f"tendctl list does not show ct-a:\n{listed}")
    os.kill(pid_b, signal.SIGKILL)
    t_kill = time.monotonic()
    wait_until(lambda: "failed" in ctl(sock, "status", "ct-b", ok=(0, 3)), 2,
               f"ct-b (pid {pid_b}) killed but not shown failed within 2 s (tend's loop blocked?)")
    reaped = time.monotonic()
    w.join(HOSTS_MAX)
    check(listed_in < LIST_MAX, f"tendctl list took {listed_in * 1000:.0f} ms while --cluster hosts waited "
          f"(> {LIST_MAX * 1000:.0f} ms: tend's loop waits for etcd)")
    check(t_list + listed_in < w.done, "tendctl list answered only after the hosts view (the loop waited for etcd)")
    check(reaped < w.done, f"ct-b's exit shown {(reaped - w.done) * 1000:.0f} ms after the hosts view answered "
          "(its reaping waited for the hosts view: the loop waited for etcd)")
    check(w.proc.returncode == 0, f"--cluster hosts exited {w.proc.returncode}: {w.err.decode()}")
    view = {h["host"]: h for h in json.loads(w.out)}
    check(sorted(view) == ["h1"] and view["h1"].get("lease_left_ms") is None,
          f"--cluster hosts with etcd frozen: want h1 with lease_left_ms null, got {view}")
    print(f"ok: etcd frozen: list in {listed_in * 1000:.0f} ms, ct-b reaped "
          f"{(reaped - t_kill) * 1000:.0f} ms after its kill, while --cluster hosts waited; "
          f"hosts answered after {(w.done - w.t0) * 1000:.0f} ms, h1's time left unknown")
    return view


def client_hangs_up(e, t, sock):
    w = Waiting(sock)
    time.sleep(0.1)
    check(w.proc.poll() is None, "--cluster hosts answered at once with etcd frozen")
    w.proc.kill()  # by its pid: the client goes while its view waits
    w.thread.join(5)
    time.sleep(1.2)  # past the ask's deadline and guard: the late answer finds no client
    check(t.proc.poll() is None, f"tend exited ({t.proc.returncode}) after a waiting client hung up; "
          f"see {t.log_path}")
    check("ct-a" in ctl(sock, "list"), "tend does not serve list after a waiting hosts client hung up")
    print("ok: a client that hung up while its hosts view waited: the late answer dropped, tend serves on")


def thawed(e, sock):
    os.kill(e.proc.pid, signal.SIGCONT)
    ttl_ms = tc.TTL * 1000

    def answered():
        left = hosts(sock)["h1"].get("lease_left_ms")
        return left if left is not None and 0 < left <= ttl_ms else None
    left = wait_until(answered, tc.TTL + 5, "etcd thawed, but --cluster hosts never shows h1's lease time left")
    print(f"ok: etcd thawed: h1's lease time left {left} ms (TTL {tc.TTL} s)")


def main():
    if not os.path.exists(ETCD):
        print(f"SKIP: no etcd binary ({ETCD}); apt-get install etcd-server", file=sys.stderr)
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="tend-hosts-wait-")
    parent, _ = cgroup_usable()
    if parent:
        tc.CGROUP_ROOT = os.path.join(parent, f"tend-it.{os.getpid()}.hosts-wait")
        os.mkdir(tc.CGROUP_ROOT)
    e = None
    try:
        e = tc.EtcdAt(tmp, "hw", free_port(), free_port())
        units = {f"ct-{n}.service": SLEEPER.replace("NAME", f"ct-{n}.service") for n in "ab"}
        t = tc.Tend(tmp, "h1", e.url, units)
        sock = os.path.join(tmp, "h1.sock")
        t.pid_of("ct-a.service")
        wait_until(lambda: (hosts(sock).get("h1") or {}).get("lease_left_ms"), 20,
                   lambda: f"h1 never registered with its lease time left; see {t.log_path}")
        frozen_etcd_does_not_stall_tend(e, t, sock)
        client_hangs_up(e, t, sock)
        thawed(e, sock)
    finally:
        if e and e.proc.poll() is None:
            os.kill(e.proc.pid, signal.SIGCONT)  # a frozen etcd would not stop on SIGTERM
        for started in tc.STARTED:
            started.stop()
        for member in tc.ETCDS:
            member.stop()
        if tc.CGROUP_ROOT:
            cgroup_remove(tc.CGROUP_ROOT)
    shutil.rmtree(tmp, ignore_errors=True)
    print("ok: --cluster hosts does not block tend's loop")


if __name__ == "__main__":
    main()
