#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A hung etcd member under a waiting host's watch must not block failover
(issue 20, QA20b High 2; docs/store.md §4.5, docs/cluster.md §4).

A 3-member etcd (etcdtest.EtcdCluster, loopback ports owned by the test).
h1 lists the leader first and holds the singleton solo.service; h2 lists a
follower F first, so its watch streams are on F. F is SIGSTOPped (it accepts
and never answers; quorum stays). h1's tend and unit are killed (its cgroup's
cgroup.kill: only processes this test started). h1's lease ends within the
TTL and its key goes; h2 must see that DELETE and run the unit within
TTL + 4 s. Before the fix h2's idle stream on F waited for ever: it took over
only once F was resumed. Also: h2 says which member it judged slow, the runs
never overlap, and h2's cluster view (`--cluster hosts`) drops h1.

Root and cgroup2; 77 without etcd. Env: TEND, ETCD.
"""
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clustertest import TTL, Tend, check, check_no_overlap, holder, PROBE, read_ticks, tendctl  # noqa: E402
from etcdtest import ETCD, EtcdCluster  # noqa: E402
from svctest import cgroup_remove, cgroup_usable  # noqa: E402
from tendtest import wait_until  # noqa: E402

TAKEOVER_S = TTL + 4  # the lease's end (TTL + the lessor's 0.5 s tick) and a busy machine's slack


def hostports(members):
    return "http://" + ",".join(m.url.split("//", 1)[1] for m in members)


def run(tmp, cgroot, cl, tends):
    probe, ticks = os.path.join(tmp, "probe.py"), os.path.join(tmp, "ticks")
    with open(probe, "w") as f:
        f.write(PROBE)
    wait_until(lambda: cl.leader() is not None, 20, "etcd: no leader elected")
    lead = cl.leader()
    follower, other = [m for m in cl.members if m is not lead]
    h1 = Tend(tmp, cgroot, "h1", hostports([lead, follower, other]), probe, ticks)
    tends.append(h1)
    wait_until(lambda: holder(lead.url)[0] == "h1", 20, "h1 never held solo.service (etcd slow? see h1's log)")
    h2 = Tend(tmp, cgroot, "h2", hostports([follower, lead, other]), probe, ticks)
    tends.append(h2)
    wait_until(lambda: "registered" in h2.text(), 20, "h2 never registered")
    time.sleep(1)  # h2's watches are made on its first member
    follower.send(signal.SIGSTOP)
    frozen_at = time.monotonic()
    time.sleep(1)
    with open(os.path.join(h1.cgroup, "cgroup.kill"), "w") as f:
        f.write("1")  # h1's tend and its unit: the holder dies
    h1.proc.wait(10)
    killed = time.monotonic()
    wait_until(lambda: holder(lead.url)[0] == "h2" and any(t[0] == "h2" for t in read_ticks(ticks)),
               TAKEOVER_S, f"h2 did not take solo.service over within {TAKEOVER_S} s of the holder's death "
               f"while etcd member {follower.name} (h2's first) is frozen: its watch stayed on the hung member?")
    took = time.monotonic() - killed
    said = [ln for ln in h2.text().splitlines() if "judged slow" in ln]
    check(said and follower.url in said[0], f"h2 did not say it moved its watches off {follower.url}: {said[:1]}")
    check_no_overlap(ticks)
    # The cluster view is fed by watches too: h1's record goes with its lease.
    wait_until(lambda: "h1 " not in tendctl(h2, "--cluster", "hosts"), 5,
               "h2's cluster view still lists the dead h1: its hosts watch stayed on the hung member?")
    print(f"ok: h2 took over {took:.1f} s after h1 died ({time.monotonic() - frozen_at:.1f} s after "
          f"{follower.name} froze); said: {said[0].split('store-etcd: ', 1)[-1]}")


def main():
    if not os.path.exists(ETCD):
        print(f"SKIP: no etcd binary ({ETCD})", file=sys.stderr)
        sys.exit(77)
    parent, why = cgroup_usable()
    if not parent:
        print(f"SKIP: {why}: each tend needs a cgroup of its own", file=sys.stderr)
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="tend-hung-watch-")
    cgroot = os.path.join(parent, f"tend-it.{os.getpid()}.hung-watch")
    os.mkdir(cgroot)
    tends, cl, ok = [], None, False
    try:
        cl = EtcdCluster(tmp)
        run(tmp, cgroot, cl, tends)
        ok = True
    finally:
        if not ok:
            for t in tends:
                print(f"--- {t.name}'s log (last lines) ---\n" + "".join(t.text().splitlines(True)[-15:]),
                      file=sys.stderr)
        if cl:
            for m in cl.members:
                m.send(signal.SIGCONT)
        for t in tends:
            t.stop()
        if cl:
            cl.stop()
        cgroup_remove(cgroot)
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
