#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs bench-store-latency against the in-memory store and a real etcd that
this script starts on loopback (a temp --data-dir; stopped by pid). Without
the etcd binary, the in-memory rows only (issue 20; docs/benchmarks.md).
Env: BENCH_LATENCY (the binary). Arguments are passed on (--quick)."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import test_store_etcd  # noqa: E402  (the Etcd helper: free ports, readiness, stop by pid)


def main():
    binary = os.environ["BENCH_LATENCY"]
    env = dict(os.environ)
    if not os.access(test_store_etcd.ETCD, os.X_OK):
        print("bench-store-etcd: no etcd binary: in-memory rows only", file=sys.stderr)
        return subprocess.run([binary, *sys.argv[1:]], env=env).returncode
    tmp = tempfile.mkdtemp(prefix="tend-etcd-bench-")
    member = test_store_etcd.Etcd(tmp, "bench")
    try:
        env["BENCH_ETCD_ENDPOINTS"] = member.url
        return subprocess.run([binary, *sys.argv[1:]], env=env, timeout=1100).returncode
    finally:
        member.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
