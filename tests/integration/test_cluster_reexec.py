#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""daemon-reexec with --store etcd (issue 20; docs/cluster.md "Re-executing").

One etcd member on loopback (stopped by pid), two tends sharing a prefix,
each in a cgroup of its own, each running clustertest.py's
singleton probe (it appends "HOST TOKEN PID TIME" to a shared file under
flock every 50 ms) and an ordinary unit. A (h1) runs from a copy of the
built binary and holds the singleton; B (h2) waits for it.

1. the copy is replaced on disk and A re-executes (`tendctl daemon-reexec`):
   A now runs the new file (its /proc/PID/exe inode), with the same pid;
2. for 2 × TTL after it (longer than the lease: a lease not renewed by the
   new tend would end and B would take the key): the host key is under the
   same etcd lease, the singleton key has the same revision (the token), the
   same run ticks (same pid, same $TEND_FENCING_TOKEN), the fence process is
   the same and alive, the ordinary unit keeps its pid, and the shared file
   shows no run of B's; B's log never says it held the key;
3. `tendctl --cluster hosts --json` on B: each host's lease id and a time
   left in (0, TTL], asked of etcd; `tendctl start` of the singleton on B
   exits 1 at once naming A, and B still does not run it;
4. B re-executes too (while waiting): same lease, still sees A holding it;
5. SIGKILL of A (and its unit) → B runs it within TTL + 1 s: A's lease was
   live and A's presence is its lease, nothing else; B's wait survived its
   own re-exec.

Root and cgroup2, and etcd: 77 otherwise. Env: TEND, TENDCTL, ETCD.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clustertest as ts  # noqa: E402
from test_cluster_etcd import etcd_get  # noqa: E402
from tendtest import TEND, wait_until  # noqa: E402

check = ts.check
TTL = ts.TTL
HOST_KEY = f"{ts.PREFIX}/e/hosts/h1"


def fence_pids(tend_pid):
    """The tend-fence children of tend_pid."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if comm == "tend-fence" and int(rest[1]) == tend_pid and rest[0] != "Z":
            out.append(int(p))
    return out


def lease_of(url):
    kv = etcd_get(url, HOST_KEY).get(HOST_KEY)
    check(kv is not None, "h1's host key is gone from etcd")
    return int(kv["lease"])


def reexec_keeps_leases(a, b, url, ticks, binary):
    runner = ts.one_runner(ticks, "before the re-exec")
    check(runner[0] == "h1", f"h1 started first but the runner is {runner}")
    key_host, rev = ts.holder(url)
    check(key_host == "h1" and str(rev) == runner[1], f"the key's holder {key_host}/{rev}, the run {runner}")
    lease = lease_of(url)
    fences = fence_pids(a.proc.pid)
    check(len(fences) == 1, f"h1 has {len(fences)} fence processes, want 1: {fences}")
    plain = ts.plain_pid(a)
    wait_until(lambda: "Singleton: held by h1" in subprocess.run(
        [ts.TENDCTL, "--control-socket", b.sock, "status", ts.UNIT], capture_output=True, timeout=20).stdout.decode(),
        20, "h2 never saw the singleton held by h1 (tendctl status)")

    with open(binary, "rb") as f:
        data = f.read()
    with open(binary + ".new", "wb") as f:
        f.write(data + b"\0tend-test-cluster-reexec\0")
    os.chmod(binary + ".new", 0o755)
    os.rename(binary + ".new", binary)
    new_ino = os.stat(binary).st_ino
    t_exec = time.time()
    r = subprocess.run([ts.TENDCTL, "--control-socket", a.sock, "daemon-reexec"], capture_output=True, timeout=30)
    check(r.returncode == 0, f"tendctl daemon-reexec exited {r.returncode}: {r.stderr.decode().strip()}")
    wait_until(lambda: os.stat(f"/proc/{a.proc.pid}/exe").st_ino == new_ino, 15,
               "h1 never ran the replaced binary (re-exec refused? see its log)")
    print(f"ok: h1 re-executed into the replaced binary (pid {a.proc.pid} kept)")

    time.sleep(2 * TTL)  # past a lease not renewed by the new tend
    check(a.proc.poll() is None, f"h1 exited after the re-exec ({a.proc.returncode})")
    check(lease_of(url) == lease, f"h1's host key is under lease {lease_of(url)}, was {lease}: registered anew")
    key_host, rev2 = ts.holder(url)
    check((key_host, rev2) == ("h1", rev), f"the singleton key is {key_host}/{rev2}, was h1/{rev}")
    now = ts.one_runner(ticks, "after the re-exec")
    check(now == runner, f"the run changed across the re-exec: {now} (was {runner})")
    check(fence_pids(a.proc.pid) == fences, f"h1's fences {fence_pids(a.proc.pid)}, were {fences}")
    check(ts.plain_pid(a) == plain and ts.running(plain), "h1's plain.service stopped or restarted")
    after = [k for k, (first, last) in ts.runs(ticks).items() if last > t_exec]
    check(after == [runner], f"runs after the re-exec: {after}, want only {runner}")
    check("singleton held by this host" not in b.text(), "h2 held the singleton during h1's re-exec")
    check("registered in etcd" not in a.text().split("re-executing", 1)[1],
          "the new h1 registered anew instead of keeping its lease")
    print(f"ok: {2 * TTL} s after the re-exec: lease {lease}, token {rev}, unit pid {runner[2]}, fence "
          f"{fences[0]} and plain.service all kept; h2 never ran it")
    return runner


def hosts_view_and_refused_start(b, url, ticks, runner):
    """h2 shows each host's lease time left (asked of etcd) and refuses a start of
    the singleton h1 holds, naming h1."""
    hosts = {h["host"]: h for h in json.loads(ts.tendctl(b, "--cluster", "hosts", "--json"))}
    check(sorted(hosts) == ["h1", "h2"], f"--cluster hosts: {sorted(hosts)}")
    check(hosts["h1"].get("lease") == str(lease_of(url)), f"h1's lease in the view {hosts['h1'].get('lease')}, "
          f"etcd's {lease_of(url)}")
    for name, h in hosts.items():
        left = h.get("lease_left_ms")
        check(isinstance(left, int) and 0 < left <= TTL * 1000,
              f"{name}'s lease time left {left!r}: not asked of etcd, or not within (0, TTL]")
    text = ts.tendctl(b, "--cluster", "hosts")
    rows = [ln.split() for ln in text.splitlines()]
    check(rows and rows[0][4] == "LEFT" and any(r[0] == "h1" and re.fullmatch(r"[1-9][0-9]*s", r[4]) for r in rows),
          f"--cluster hosts prints no time left for h1:\n{text}")
    print(f"ok: --cluster hosts on h2: lease time left h1 {hosts['h1']['lease_left_ms']} ms, "
          f"h2 {hosts['h2']['lease_left_ms']} ms (TTL {TTL} s)")
    t0 = time.time()
    r = subprocess.run([ts.TENDCTL, "--control-socket", b.sock, "start", ts.UNIT], capture_output=True, timeout=20)
    took = time.time() - t0
    err = r.stderr.decode()
    check(r.returncode == 1 and "held by host h1" in err,
          f"tendctl start {ts.UNIT} on h2 exited {r.returncode} ({err.strip()}): want 1 naming h1")
    check(took < 5, f"the refused start took {took:.1f} s: not refused up front")
    time.sleep(1)
    now = ts.one_runner(ticks, "after the refused start")
    check(now == runner, f"the run changed after h2's refused start: {now} (was {runner})")
    print(f"ok: tendctl start {ts.UNIT} on h2 refused in {took:.2f} s, exit 1: {err.strip()}")


def waiter_reexecs(b, url):
    """h2, waiting for the singleton, re-executes too: same lease, still waiting."""
    key = f"{ts.PREFIX}/e/hosts/h2"
    lease = int(etcd_get(url, key)[key]["lease"])
    r = subprocess.run([ts.TENDCTL, "--control-socket", b.sock, "daemon-reexec"], capture_output=True, timeout=30)
    check(r.returncode == 0, f"tendctl daemon-reexec on h2 exited {r.returncode}: {r.stderr.decode().strip()}")
    wait_until(lambda: "units resumed" in b.text(), 15, "h2 never resumed after its re-exec")
    wait_until(lambda: "Singleton: held by h1" in subprocess.run(
        [ts.TENDCTL, "--control-socket", b.sock, "status", ts.UNIT], capture_output=True, timeout=20).stdout.decode(),
        20, "the re-executed h2 does not see the singleton held by h1")
    check(int(etcd_get(url, key)[key]["lease"]) == lease, "h2 registered anew across its re-exec")
    print(f"ok: h2 (waiting) re-executed: lease {lease} kept, still sees h1 holding it")


def failover_after(a, b, url, ticks, runner):
    t_kill = time.time()
    a.proc.kill()
    a.proc.wait()
    os.kill(runner[2], signal.SIGKILL)
    wait_until(lambda: ts.holder(url)[0] == "h2", TTL + 5, f"h2 never held the key within TTL + 5 s of h1's SIGKILL")
    new = ts.one_runner(ticks, "after h1's SIGKILL")
    check(new[0] == "h2", f"the run after h1's SIGKILL is {new}")
    first = ts.runs(ticks)[new][0]
    check(first - t_kill <= TTL + 1, f"h2 ran it {first - t_kill:.2f} s after h1's SIGKILL: over TTL + 1 s")
    ts.check_no_overlap(ticks)
    print(f"ok: SIGKILL of the re-executed h1: h2 runs it {first - t_kill:.2f} s later (token {new[1]})")


def main():
    with ts.ClusterRig("cluster-reexec", log_lines=25) as rig:
        url = rig.etcd.url
        binary = os.path.join(rig.tmp, "tend")
        shutil.copy2(TEND, binary)
        h1 = rig.tend("h1", binary=binary)
        wait_until(lambda: ts.holder(url)[0] == "h1", 20, "h1 never held the singleton key")
        h2 = rig.tend("h2")
        runner = reexec_keeps_leases(h1, h2, url, rig.ticks, binary)
        hosts_view_and_refused_start(h2, url, rig.ticks, runner)
        waiter_reexecs(h2, url)
        failover_after(h1, h2, url, rig.ticks, runner)
    print("ok: daemon-reexec keeps the cluster's leases")


if __name__ == "__main__":
    main()
