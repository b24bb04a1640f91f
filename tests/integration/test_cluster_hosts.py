#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Host ids (issue 20, QA20 M5 and L2; docs/cluster.md "One host id, one
tend", tend(8) CLUSTER).

1. --host-id outside 1-64 characters of [A-Za-z0-9._:@-] (a space, '/', a
   newline, a control character, a non-ASCII letter, 65 characters, empty)
   is refused at start: exit 2, one line naming --host-id, before anything
   runs. (The tends below use ids with '.', ':', '@', '_', '-': accepted.)
2. Two tends with one host id on one prefix (clustertest's rig: one etcd
   member, each tend in its own cgroup, the singleton probe): the first (A)
   registers and holds the singleton; the second (B):
   - logs exactly one error naming A (its hostname, pid, lease, time left);
   - does not take hosts/ID over: its pid and lease stay A's for 2 × TTL,
     A's published record of the singleton is not rewritten, B never runs the
     singleton, while B's ordinary unit runs;
   - `tendctl --cluster hosts --json` on B shows A's record (not "self") and
     B itself "waiting: host id in use"; `--cluster status` too; on A, A is
     "self".
3. SIGKILL of A (and its unit) → B registers once A's lease ends (within
   TTL + 2 s) and runs the singleton; no two runs overlap.
4. A third tend C with the same id waits on B; a clean stop of B (its lease
   revoked) → C registers within 2 s: the wait is a watch, not a poll.

Root and cgroup2, and etcd: 77 otherwise. Env: TEND, TENDCTL, ETCD.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clustertest import (PREFIX, TTL, UNIT, ClusterRig, check, check_no_overlap, holder, one_runner,  # noqa: E402
                         plain_pid, read_ticks, tendctl)
from test_cluster_etcd import etcd_get  # noqa: E402
from tendtest import TEND, wait_until  # noqa: E402

HID = "rack_2:web-1@dc.example"  # '.', ':', '@', '_', '-' are accepted
HOST_KEY = f"{PREFIX}/e/hosts/{HID}"
UNIT_KEY = f"{PREFIX}/d/units/{HID}/{UNIT}"
WAITING = "waiting: host id in use"


def refused_host_ids():
    bad = ["h 1", "h/1", "h\n1", "h1\x01", "h\"q", "\u00fcmlaut", "a" * 65, ""]
    with tempfile.TemporaryDirectory(prefix="tend-hostid-") as d:
        for hid in bad:
            try:  # refused while parsing the options: at once
                r = subprocess.run([TEND, "--config-dir", d, "--store", "etcd://127.0.0.1:1/x", "--host-id", hid],
                                   capture_output=True, timeout=5)
            except subprocess.TimeoutExpired:  # run() killed it
                raise AssertionError(f"--host-id {hid!r} accepted: tend still ran 5 s later") from None
            err = r.stderr.decode(errors="replace")
            check(r.returncode == 2, f"--host-id {hid!r}: exit {r.returncode}, want 2 (a usage error): {err}")
            check(err.count("\n") == 1 and "--host-id" in err,
                  f"--host-id {hid!r}: want one line naming --host-id, got {err!r}")
    print(f"ok: {len(bad)} host ids outside [A-Za-z0-9._:@-]{{1,64}} refused at start (exit 2, one line)")


def host_record(url):
    kv = etcd_get(url, HOST_KEY).get(HOST_KEY)
    check(kv is not None, f"{HOST_KEY} is gone from etcd")
    return json.loads(kv["value"])["pid"], int(kv["lease"])


def host_pid(url):
    """The pid in hosts/ID, or None while nobody holds it."""
    kv = etcd_get(url, HOST_KEY).get(HOST_KEY)
    return json.loads(kv["value"])["pid"] if kv else None


def in_use_errors(t):
    return [ln for ln in t.text().splitlines() if f"host id {HID} is in use by another tend" in ln]


def second_waits(rig, a, b):
    url = rig.etcd.url
    wait_until(lambda: in_use_errors(b), 15, "B never said its host id is in use (registration stuck?)")
    rec = host_record(url)
    check(rec[0] == a.proc.pid, f"{HOST_KEY} is pid {rec[0]}'s, not A's ({a.proc.pid})")
    err = in_use_errors(b)[0]
    for what in (f"pid {a.proc.pid}", f"lease {rec[1]}", "hostname ", " s left"):
        check(what in err, f"B's error does not name A's {what.strip()}: {err}")
    time.sleep(1.5)  # A's own last write of its record (coalesced over 1 s) is in
    record = etcd_get(url, UNIT_KEY)[UNIT_KEY]
    version = int(record["version"])
    check(json.loads(record["value"])["state"] == "running", f"A's published {UNIT}: {record['value']}")
    b_plain = plain_pid(b)
    time.sleep(2 * TTL)
    check(host_record(url) == rec, f"{HOST_KEY} changed while B waited: {host_record(url)} (was {rec})")
    now = int(etcd_get(url, UNIT_KEY)[UNIT_KEY]["version"])
    check(now == version, f"A's published {UNIT} was rewritten while B waited (version {version} -> {now})")
    check(len(in_use_errors(b)) == 1, f"B said it {len(in_use_errors(b))} times: {in_use_errors(b)}")
    check(not any(h == "B" for h, _, _, _ in read_ticks(rig.ticks)), "B ran the singleton while waiting")
    check(plain_pid(b) == b_plain, "B's ordinary unit restarted")
    print(f"ok: B (same host id) waits: one error naming A's pid and lease; {HOST_KEY} stays A's "
          f"for {2 * TTL} s, A's record unwritten, B runs only its ordinary unit")
    return rec


def views_while_waiting(a, b):
    hosts = json.loads(tendctl(b, "--cluster", "hosts", "--json"))
    mine = [h for h in hosts if h["host"] == HID]
    check(len(mine) == 2, f"--cluster hosts on B: want A's record and B waiting, got {hosts}")
    other = next((h for h in mine if h["pid"] == a.proc.pid), None)
    me = next((h for h in mine if h["pid"] == b.proc.pid), None)
    check(other and not other["self"] and other.get("waiting") is None, f"A's item on B: {other}")
    check(me and me["self"] and me.get("waiting") == WAITING and me["lease"] is None, f"B's item on B: {me}")
    text = tendctl(b, "--cluster", "hosts")
    check(f"(this host, {WAITING})" in text, f"--cluster hosts on B prints: {text}")
    st = json.loads(tendctl(b, "--cluster", "status", UNIT, "--json"))
    check(len(st) == 1 and st[0].get("this_host") == WAITING, f"--cluster status {UNIT} on B: {st}")
    check(WAITING in tendctl(b, "--cluster", "status", UNIT), "--cluster status on B does not say it waits")
    on_a = [h for h in json.loads(tendctl(a, "--cluster", "hosts", "--json")) if h["host"] == HID]
    check(len(on_a) == 1 and on_a[0]["self"] and on_a[0]["pid"] == a.proc.pid, f"--cluster hosts on A: {on_a}")
    print(f"ok: --cluster hosts/status on B show A's record and B \"{WAITING}\"; A is \"self\" on A")


def takes_over_after_crash(rig, a, b, rec):
    h, tok, pid = one_runner(rig.ticks, "before A's SIGKILL")
    check(h == "A", f"the singleton runs on {h}, not A")
    t_kill = time.time()
    a.proc.kill()
    a.proc.wait()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: host_pid(rig.etcd.url) == b.proc.pid, TTL + 5,
               f"B never registered within TTL + 5 s of A's SIGKILL")
    took = time.time() - t_kill
    check(took <= TTL + 2, f"B registered {took:.1f} s after A's SIGKILL (TTL {TTL} s): not when the lease ended")
    new = one_runner(rig.ticks, "after A's SIGKILL")
    check(new[0] == "B" and holder(rig.etcd.url)[0] == HID, f"after A's SIGKILL the runner is {new}")
    check_no_overlap(rig.ticks)
    print(f"ok: SIGKILL of A: B registered {took:.1f} s later (A's lease ended; TTL {TTL} s) and runs {UNIT}")


def clean_stop_frees_at_once(rig, b):
    c = rig.tend("C", host_id=HID)
    wait_until(lambda: in_use_errors(c), 15, "C never said its host id is in use")
    t0 = time.time()
    b.stop()
    wait_until(lambda: host_pid(rig.etcd.url) == c.proc.pid, 5, "C did not register after B's clean stop")
    took = time.time() - t0
    check(took < 2, f"C registered {took:.1f} s after B revoked its lease: polling, not the watch?")
    print(f"ok: C waited on B; B stopped cleanly → C registered {took:.2f} s later (the hosts/ watch)")


def main():
    refused_host_ids()
    with ClusterRig("cluster-hosts", log_lines=25) as rig:
        a = rig.tend("A", host_id=HID)
        wait_until(lambda: holder(rig.etcd.url)[0] == HID and UNIT_KEY in etcd_get(rig.etcd.url, UNIT_KEY), 20,
                   "A never held the singleton and published it")
        b = rig.tend("B", host_id=HID)
        rec = second_waits(rig, a, b)
        views_while_waiting(a, b)
        takes_over_after_crash(rig, a, b, rec)
        clean_stop_frees_at_once(rig, b)
    print("ok: one host id, one tend")


if __name__ == "__main__":
    main()
