#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 20's trials, 20 of each (docs/benchmarks.md "issue 20: the
3-member trials"): test_cluster_trials.py's cluster (3 etcd members, 3 tends
each behind its own proxy, in cgroups of their own), every trial 20 times in
rounds (partition: 10 frozen + 10 dropping), every check of the CI version
made on each; then p50/p99 of each measure:

  kill       failover_s: the holder's SIGKILL → the first tick on another host
  partition-freeze / partition-drop
             takeover_s: black-holed → the first tick on another host;
             stopped_before_expiry_s: how long before its lease's earliest
             end on etcd (last forwarded keep-alive + TTL) the holder's unit
             ticked last
  pause      takeover_s: SIGSTOP → the first tick on another host
  leader     election_s: the leader's SIGKILL → a write succeeds again
  quorum-short outage_s: 2 members SIGKILLed → a write succeeds again
  quorum-long  rerun_s: quorum back (a write succeeds) → the later
             singleton's first tick

With 20 samples p99 is the largest. --quick: one round of kill and pause.
Root, cgroup2, etcd: 77 otherwise. Env: TEND, ETCD, TRIALS_TTL (default 6).
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import test_cluster_trials as trials  # noqa: E402
from svctest import cgroup_usable  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    quick = "--quick" in sys.argv
    if not os.path.exists(trials.ETCD):
        print(f"SKIP: no etcd binary ({trials.ETCD})", file=sys.stderr)
        return 77
    parent, why = cgroup_usable()
    if not parent:
        print(f"SKIP: {why}", file=sys.stderr)
        return 77
    t0 = time.monotonic()
    kinds = ("kill", "pause") if quick else ("kill", "partition-freeze", "partition-drop", "pause", "leader",
                                             "quorum-short", "quorum-long")  # blip: a regression check, CI's
    res = trials.run(parent, 1 if quick else 20, report=lambda s: print(s, flush=True), kinds=kinds)
    print(f"\n{len(sum(res.values(), []))} trials in {time.monotonic() - t0:.0f} s, TTL {trials.TTL} s\n")
    print("| trial | measure | n | p50 (s) | p99 (s) | min (s) |")
    print("|---|---|---|---|---|---|")
    for kind, ms in res.items():
        for key in (ms[0] if ms else {}):
            xs = [m[key] for m in ms]
            print(f"| {kind} | {key} | {len(xs)} | {pct(xs, 50):.2f} | {pct(xs, 99):.2f} | {min(xs):.2f} |")
        if ms and not ms[0]:
            print(f"| {kind} | (nothing stopped or restarted) | {len(ms)} | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
