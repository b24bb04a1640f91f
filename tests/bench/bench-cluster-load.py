#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The load a cluster of tends puts on etcd (issue 20; docs/benchmarks.md
"issue 20: etcd load of a cluster").

For each host count (10, 50, 100; --quick: 10), one etcd member on loopback
ports (a temp --data-dir, stopped by pid) and that many tends on the same
prefix, each in a cgroup of its own with its own DIR and control socket,
each with 10 units (unit names unique across hosts). One unit per host (10 %)
is the "crasher": it runs `sleep` until the crash phase, then exits 1 at each
start (Restart=always, RestartSec=300ms, no start limit: ~3 crashes a second).

Measured from etcd's own /metrics (grpc_server_started_total and
grpc_server_msg_received_total by gRPC method), before and after a window:
- idle: every unit running. Target: keep-alives only — no Range, Put, Txn or
  DeleteRange — and at most one LeaseKeepAlive per host per TTL/3 (the
  window's count ≤ hosts × (window / (TTL/3) + 1));
- crash loop: the crashers restart every ~0.3 s. Target: ≤ 1 write (Put,
  Txn, DeleteRange) per crashing unit per second (+ one per unit for the
  window's edges), and still no reads.
Linear in hosts: idle requests per host per second are printed per row.

Root and cgroup2 and etcd: without them it says why and exits 77.
Env: TEND. --quick: 10 hosts, short windows (CI, under a minute).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import test_store_etcd  # noqa: E402  (Etcd: free ports, readiness, stop by pid)
from svctest import cgroup_remove, cgroup_usable  # noqa: E402
from tendtest import wait_until  # noqa: E402

TEND = os.environ.get("TEND") or os.path.join(HERE, "..", "..", "build", "supervisor", "tend")
TENDCTL = os.environ.get("TENDCTL") or os.path.join(os.path.dirname(TEND), "tendctl")
TTL = 6  # s: keep-alives every TTL/3 = 2 s
UNITS = 10
RESTART_MS = 300  # the crashers' RestartSec=: ~3 crashes a second each, coalesced to ≤ 1 write
PREFIX = "load"
WRITES = ("Put", "Txn", "DeleteRange")
READS = ("Range",)


def metrics(url):
    """{(metric, method): value} of etcd's gRPC counters."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out = {}
    for m in re.finditer(r'^(grpc_server_(?:started|msg_received)_total)\{([^}]*)\} (\S+)$', text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        out[(m.group(1), labels.get("grpc_method"))] = float(m.group(3))
    return out


def delta(before, after, metric, methods=None):
    """{method: count} of one metric over a window (methods: only these)."""
    d = {}
    for (name, method), v in after.items():
        if name == metric and (methods is None or method in methods):
            n = v - before.get((name, method), 0)
            if n:
                d[method] = d.get(method, 0) + int(n)
    return d


def requests(before, after):
    """Every request etcd received in the window, by method: a unary call is one
    RPC started; on a stream (the gateway's keep-alives, watches) each message."""
    started = delta(before, after, "grpc_server_started_total")
    msgs = delta(before, after, "grpc_server_msg_received_total")
    return {m: max(started.get(m, 0), msgs.get(m, 0)) for m in set(started) | set(msgs)}


def hosts_registered(url, n):
    """How many hosts/ keys etcd holds under the prefix (a count-only range)."""
    import base64
    key = f"{PREFIX}/e/hosts/".encode()
    end = key[:-1] + bytes([key[-1] + 1])
    body = json.dumps({"key": base64.b64encode(key).decode(), "range_end": base64.b64encode(end).decode(),
                       "count_only": True}).encode()
    r = urllib.request.urlopen(urllib.request.Request(url + "/v3/kv/range", body), timeout=10)
    return int(json.loads(r.read()).get("count", 0))


class Host:
    def __init__(self, tmp, cgroot, i, url):
        self.name = f"h{i:03d}"
        self.dir = os.path.join(tmp, self.name)
        os.makedirs(self.dir)
        self.flag = os.path.join(tmp, "crash")
        for u in range(UNITS):
            unit = f"{self.name}-u{u}.service"
            if u == 0:  # the crasher: runs until the crash phase, then exits 1 at each start
                cmd = (f"/bin/sh -c '[ -e {self.flag} ] && exit 1; echo $$$$ > {self.dir}/crasher.pid; "
                       "exec sleep 100000'")
                head, extra = "[Unit]\nStartLimitIntervalSec=0\n", f"Restart=always\nRestartSec={RESTART_MS}ms\n"
            else:
                head, cmd, extra = "", "/bin/sleep 100000", "Restart=always\n"
            with open(os.path.join(self.dir, unit), "w") as f:
                f.write(f"{head}[Service]\nExecStart={cmd}\n{extra}")
        self.cgroup = os.path.join(cgroot, self.name)
        os.mkdir(self.cgroup)
        procs = os.path.join(self.cgroup, "cgroup.procs")

        def enter():
            with open(procs, "w") as f:
                f.write("0")
        self.log = open(os.path.join(tmp, self.name + ".log"), "w")
        self.sock = os.path.join(tmp, self.name + ".sock")
        self.proc = subprocess.Popen(
            [TEND, "--config-dir", self.dir, "--control-socket", self.sock,
             "--store", f"etcd://{url.split('//', 1)[1]}/{PREFIX}", "--host-id", self.name,
             "--cluster-ttl", f"{TTL}s"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=enter)

    def crasher_restarts(self):
        """The crasher's restart count, from its record (tendctl status --json)."""
        r = subprocess.run([TENDCTL, "--control-socket", self.sock, "status", "--json", f"{self.name}-u0.service"],
                           capture_output=True, timeout=30)
        recs = json.loads(r.stdout or b"[]")
        recs = recs if isinstance(recs, list) else [recs]
        return sum(int(x.get("restarts", 0)) for x in recs)

    def crasher_pid(self):
        try:
            with open(os.path.join(self.dir, "crasher.pid")) as f:
                return int(f.read())
        except (OSError, ValueError):
            return 0

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()

    def reap(self):
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def settle(url, timeout=60):
    """Until 2 s pass without a write: the first records' published copies are out."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        before = metrics(url)
        time.sleep(2)
        if not any(requests(before, metrics(url)).get(m) for m in WRITES):
            return
    raise SystemExit(f"bench-cluster-load: etcd still received writes after {timeout} s of start "
                     "(records published again and again? see the tends' logs)")


def window(url, seconds):
    before = metrics(url)
    time.sleep(seconds)
    return requests(before, metrics(url))


def run(n, idle_s, crash_s, parent):
    tmp = tempfile.mkdtemp(prefix=f"tend-load-{n}-")
    cgroot = os.path.join(parent, f"tend-bench.{os.getpid()}.load{n}")
    os.mkdir(cgroot)
    member, hosts = None, []
    try:
        member = test_store_etcd.Etcd(tmp, "load")
        t0 = time.monotonic()
        hosts = [Host(tmp, cgroot, i, member.url) for i in range(n)]
        wait_until(lambda: hosts_registered(member.url, n) == n, 30 + n // 2,
                   f"not every one of {n} tends registered in etcd (see {tmp}/h*.log)")
        wait_until(lambda: all(h.crasher_pid() for h in hosts), 30, "not every crasher unit started")
        started = time.monotonic() - t0
        settle(member.url)
        rss = sum(h.rss_kib() for h in hosts) / n
        idle = window(member.url, idle_s)

        open(hosts[0].flag, "w").close()
        for h in hosts:
            os.kill(h.crasher_pid(), signal.SIGKILL)  # the test's own unit, by its pid
        time.sleep(2)  # into the loop
        r0 = sum(h.crasher_restarts() for h in hosts)
        crash = window(member.url, crash_s)
        restarts = sum(h.crasher_restarts() for h in hosts) - r0
        for h in hosts:
            h.stop()
        for h in hosts:
            h.reap()
        return started, rss, idle, crash, restarts
    finally:
        for h in hosts:
            if h.proc.poll() is None:
                h.proc.kill()
                h.proc.wait()
        if member:
            member.stop()
        cgroup_remove(cgroot)
        shutil.rmtree(tmp, ignore_errors=True)


def judge(n, idle_s, crash_s, idle, crash):
    """The targets; a list of failures."""
    bad = []
    keep = idle.get("LeaseKeepAlive", 0)
    allowed = n * (idle_s / (TTL / 3) + 1)
    other = {m: c for m, c in idle.items() if m != "LeaseKeepAlive"}
    if keep > allowed:
        bad.append(f"{n} hosts idle: {keep} keep-alives in {idle_s} s, over {allowed:.0f} (1 per host per TTL/3)")
    if other:
        bad.append(f"{n} hosts idle: requests other than keep-alives: {other}")
    writes = sum(crash.get(m, 0) for m in WRITES)
    allowed_w = n * (crash_s + 1)  # one crashing unit per host
    if writes > allowed_w:
        bad.append(f"{n} hosts, crash loop: {writes} writes in {crash_s} s for {n} crashing units, over {allowed_w}")
    reads = sum(crash.get(m, 0) for m in READS)
    if reads:
        bad.append(f"{n} hosts, crash loop: {reads} reads (no periodic read expected)")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="CI: 10 hosts, short windows")
    ap.add_argument("--hosts", default=None, help="comma-separated host counts (default 10,50,100)")
    a = ap.parse_args()
    if not os.access(test_store_etcd.ETCD, os.X_OK):
        print("bench-cluster-load: SKIP: no etcd binary", file=sys.stderr)
        return 77
    parent, why = cgroup_usable()
    if not parent:
        print(f"bench-cluster-load: SKIP: {why}: each tend needs a cgroup of its own", file=sys.stderr)
        return 77
    counts = [int(x) for x in (a.hosts or ("10" if a.quick else "10,50,100")).split(",")]
    idle_s, crash_s = (TTL, TTL) if a.quick else (6 * TTL, 5 * TTL)
    print(f"etcd requests with N tends x {UNITS} units, TTL {TTL} s (keep-alive every {TTL // 3} s); "
          f"idle window {idle_s} s, crash window {crash_s} s (1 unit per host restarting every ~{RESTART_MS} ms)")
    print(f"{'hosts':>5} {'start s':>7} {'RSS KiB':>8} | {'idle req/s':>10} {'keepalive/s':>11} "
          f"{'per host/s':>10} {'other':>5} | {'restarts/s':>10} {'crash req/s':>11} {'writes/s':>8} {'w/unit/s':>8} "
          f"{'reads':>5}")
    failures = []
    for n in counts:
        started, rss, idle, crash, restarts = run(n, idle_s, crash_s, parent)
        keep = idle.get("LeaseKeepAlive", 0)
        writes = sum(crash.get(m, 0) for m in WRITES)
        print(f"{n:>5} {started:>7.1f} {rss:>8.0f} | {sum(idle.values()) / idle_s:>10.2f} {keep / idle_s:>11.2f} "
              f"{sum(idle.values()) / idle_s / n:>10.3f} {sum(idle.values()) - keep:>5} | "
              f"{restarts / crash_s:>10.1f} {sum(crash.values()) / crash_s:>11.2f} {writes / crash_s:>8.2f} "
              f"{writes / crash_s / n:>8.3f} "
              f"{sum(crash.get(m, 0) for m in READS):>5}", flush=True)
        print(f"      idle by method: {dict(sorted(idle.items()))}; crash loop: {dict(sorted(crash.items()))}",
              flush=True)
        failures += judge(n, idle_s, crash_s, idle, crash)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
