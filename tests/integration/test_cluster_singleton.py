#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Singleton units among three tends sharing an etcd prefix (issue 20,
docs/cluster.md §5, §6).

One etcd member on loopback (test_store_etcd.py's way, stopped by pid); three
tends, each with its own DIR, control socket and cgroup (two tends in one
cgroup would take each other's units for leftovers). The unit
`[X-Tend] Singleton=yes` runs a probe that appends "HOST TOKEN PID TIME" to one
shared file under flock(2) every 50 ms; a run is one (host, token, pid).

1. exactly one host runs it;
2. SIGKILL of the holder tend (and of its unit, by the pid the probe wrote)
   → another host holds the key within TTL + 1 s and runs the unit;
3. SIGSTOP of the holder tend for 2 × TTL → its fence kills the unit before
   the lease can end on etcd: no two runs' intervals overlap, and a write
   guarded by the stale $TEND_FENCING_TOKEN (an etcd txn comparing the key's
   create revision) is rejected by etcd while the holder's token passes;
4. `tendctl --cluster hosts|status|list --json`, asked of a tend that does
   not hold the unit, shows the live hosts, the holder and its token, and
   the unit running there with its pid;
5. etcd stopped for less than the TTL → the holder's run goes on (same pid,
   same token), nobody else starts it;
6. etcd stopped for TTL + 3 s → the holder's unit stops before its lease
   could end, the ordinary units keep their pids; etcd back → the singleton
   runs again on exactly one host, once.

Root and cgroup2 (each tend in a cgroup of its own) and etcd: 77 otherwise.
Env: TEND, TENDCTL, ETCD.
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# PROBE, check, check_no_overlap, read_ticks and running are also test_cluster_changes.py's
from clustertest import (KEY, PREFIX, PROBE, TENDCTL, TTL, UNIT, ClusterRig, check,  # noqa: E402,F401
                         check_no_overlap, current_run, holder, one_runner, plain_pid, read_ticks, running, runs,
                         tendctl)
from test_cluster_etcd import EtcdAt  # noqa: E402
from test_store_etcd import ETCDCTL  # noqa: E402
from tendtest import wait_until  # noqa: E402


def txn_guarded(url, token):
    """A write guarded by the fencing token: SUCCESS or FAILURE, as etcd says."""
    script = f'create("{KEY}") = "{token}"\n\nput {PREFIX}/guarded {token}\n\n\n'
    r = subprocess.run([ETCDCTL, "--endpoints", url, "txn"], input=script.encode(), capture_output=True,
                       env=dict(os.environ, ETCDCTL_API="3"), timeout=20, check=True)
    return r.stdout.decode().split()[0]


def sigkill_holder(tends, url, ticks):
    h, tok, pid = one_runner(ticks, "at start")
    key_host, rev = holder(url)
    check(key_host == h and str(rev) == tok,
          f"the runner {h} (token {tok}) is not the key's holder {key_host} (revision {rev})")
    print(f"ok: exactly one host runs {UNIT}: {h}, fencing token {tok}")
    t_kill = time.time()
    tends[h].proc.kill()
    tends[h].proc.wait()
    os.kill(pid, signal.SIGKILL)  # its unit, started by this test's tend
    # polled through etcdctl (slow on a busy machine): the bound is checked on the ticks below
    wait_until(lambda: holder(url)[0] not in (None, h), TTL + 5,
               f"no other host held {UNIT} within TTL + 5 s of its holder's SIGKILL")
    new = one_runner(ticks, "after SIGKILL")
    check(new[0] != h, f"the killed host {h} still runs it")
    first = min(t for host, tok_, pid_, t in read_ticks(ticks) if (host, tok_, pid_) == new)
    took = first - t_kill
    check(took <= TTL + 1, f"{new[0]} ran {UNIT} {took:.2f} s after {h}'s SIGKILL: more than TTL + 1 s")
    print(f"ok: SIGKILL of {h}: {new[0]} runs it {took:.2f} s later (TTL {TTL} s; bound TTL + 1 s)")
    return new, tok


def sigstop_holder(tends, url, ticks, runner):
    h, tok, pid = runner
    t = tends[h]
    os.kill(t.proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: holder(url)[0] not in (None, h), 2 * TTL + 1,
                   f"no other host took {UNIT} while {h} was stopped for 2 × TTL")
        new = one_runner(ticks, "while the holder is stopped")
        time.sleep(max(0, 2 * TTL - 4))
    finally:
        os.kill(t.proc.pid, signal.SIGCONT)
    check(not running(pid), f"{h}'s unit (pid {pid}) outlived its stopped tend's fence")
    time.sleep(2)  # the resumed tend must not start it again
    after = one_runner(ticks, "after the holder resumed")
    check(after == new, f"after {h} resumed, the runner changed: {after} (was {new})")
    rs = check_no_overlap(ticks)
    print(f"ok: SIGSTOP of {h} for {2 * TTL} s: fenced, {new[0]} took over; {len(rs)} runs, none overlapping")
    check(txn_guarded(url, tok) == "FAILURE", f"etcd accepted a write guarded by the stale token {tok}")
    check(txn_guarded(url, new[1]) == "SUCCESS", f"etcd refused a write guarded by the holder's token {new[1]}")
    print(f"ok: a write guarded by the stale token {tok} is rejected by etcd; {new[1]}'s passes")
    return new


def cluster_view(tends, killed, runner):
    """tendctl --cluster, asked of a tend that does not hold the singleton."""
    live = sorted(n for n in tends if n != killed)
    other = next(tends[n] for n in live if n != runner[0])
    wait_until(lambda: sorted(h["host"] for h in json.loads(tendctl(other, "--cluster", "hosts", "--json")))
               == live, 10, f"--cluster hosts never showed exactly the live hosts {live}")
    st = json.loads(tendctl(other, "--cluster", "status", UNIT, "--json"))
    check(len(st) == 1 and st[0]["holder"] == runner[0] and str(st[0]["fencing_token"]) == runner[1],
          f"--cluster status {UNIT}: {st}, the runner is {runner}")
    wait_until(lambda: any(u["host"] == runner[0] and u["unit"] == UNIT and u["state"] == "running"
                           and u["main_pid"] == runner[2]
                           for u in json.loads(tendctl(other, "--cluster", "list", "--json"))), 10,
               f"--cluster list never showed {UNIT} running on {runner[0]} with pid {runner[2]}")
    text = tendctl(other, "--cluster", "status", UNIT)
    check(f"held by {runner[0]}" in text, f"--cluster status prints: {text}")
    r = subprocess.run([TENDCTL, "--control-socket", other.sock, "status", UNIT], capture_output=True, timeout=20)
    check(f"Singleton: held by {runner[0]}" in r.stdout.decode(),
          f"tendctl status {UNIT} on {other.name} does not show the holder: {r.stdout.decode()}")
    print(f"ok: tendctl --cluster (asked of {other.name}): hosts {live}, {UNIT} held by {runner[0]}, "
          "running there with its pid")


def short_outage(tmp, e, ticks, runner):
    e.stop()
    t0 = time.monotonic()
    time.sleep(0.5)
    e2 = EtcdAt(tmp, "m1", e.client, e.peer)
    outage = time.monotonic() - t0
    check(outage < TTL - 2, f"etcd took {outage:.1f} s to come back (busy machine?)")
    time.sleep(TTL)
    now = one_runner(ticks, "after a short etcd outage")
    check(now == runner, f"the run changed across an etcd outage of {outage:.1f} s: {now} (was {runner})")
    check_no_overlap(ticks)
    print(f"ok: etcd away {outage:.1f} s (< TTL {TTL} s): {runner[0]} runs on, same pid and token")
    return e2


def long_outage(tmp, e, tends, ticks, runner):
    """etcd away for TTL + 3 s: the holder's singleton stops before its lease could end,
    ordinary units run on; etcd back → the singleton runs again, exactly once."""
    live = [t for t in tends.values() if t.proc.poll() is None]
    plains = {t.name: plain_pid(t) for t in live}
    e.stop()
    t_down = time.time()
    time.sleep(TTL + 3)
    last = max(t for h, tok, pid, t in read_ticks(ticks) if (h, tok, pid) == runner)
    check(last < t_down + TTL, f"{runner[0]}'s singleton ticked {last - t_down:.1f} s into an etcd outage: "
          f"past its lease (TTL {TTL} s), not fenced")
    check(not running(runner[2]), f"{runner[0]}'s singleton (pid {runner[2]}) still runs {TTL + 3} s into the outage")
    e2 = EtcdAt(tmp, "m1", e.client, e.peer)
    t_up = time.time()
    new = one_runner(ticks, "after etcd came back")
    check(new != runner, f"the fenced run {runner} ticks again")
    after = {k for k in runs(ticks) if runs(ticks)[k][0] > t_down}
    check(after == {new}, f"after the outage, not exactly one run: {sorted(after)}")
    for t in live:
        check(plain_pid(t) == plains[t.name] and running(plains[t.name]),
              f"{t.name}: plain.service stopped or restarted across the etcd outage")
    check_no_overlap(ticks)
    first = runs(ticks)[new][0]
    print(f"ok: etcd away {TTL + 3} s (TTL {TTL} s): {runner[0]}'s singleton stopped {last - t_down:.1f} s in, "
          f"plain units ran on; {new[0]} runs it again {first - t_up:.1f} s after etcd returned, once")
    return e2, new


def main():
    with ClusterRig("singleton") as rig:
        for name in ("h1", "h2", "h3"):
            rig.tend(name)
        tends, ticks = rig.tends, rig.ticks
        runner, _ = sigkill_holder(tends, rig.etcd.url, ticks)
        killed = next(n for n, t in tends.items() if t.proc.poll() is not None)
        runner = sigstop_holder(tends, rig.etcd.url, ticks, runner)
        cluster_view(tends, killed, runner)
        e = short_outage(rig.tmp, rig.etcd, ticks, runner)
        e, runner = long_outage(rig.tmp, e, tends, ticks, runner)
    print("ok: singleton units on etcd")


if __name__ == "__main__":
    main()
