# SPDX-License-Identifier: MIT
"""The shared setup of the cluster tests that run tends around one etcd member
(test_cluster_singleton.py, test_cluster_reexec.py, test_cluster_hosts.py;
issue 20, docs/cluster.md).

ClusterRig (a context manager): the skips (exit 77 without etcd, root or
cgroup2), a temp dir, a cgroup for the tends (each tend a cgroup of its own
below it: two tends in one cgroup would take each other's units for
leftovers), the singleton probe, one etcd member on free loopback ports
(test_store_etcd.py's way). On leaving: every tend and etcd member stopped by
pid, the cgroup removed, the temp dir removed when nothing failed; on a
failure each tend's last log lines are printed first.

Tend: a tend with the singleton unit UNIT (`[X-Tend] Singleton=yes`) running
the probe — it appends "HOST TOKEN PID TIME" to one shared file under flock(2)
every 50 ms; a run is one (host, token, pid) — and an ordinary unit
plain.service beside it (its pid in DIR/plain.pid).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from svctest import cgroup_remove, cgroup_usable  # noqa: E402
from test_cluster_etcd import ETCDS, EtcdAt, etcd_get  # noqa: E402
from test_store_etcd import ETCD, free_port  # noqa: E402
from tendtest import TEND, wait_until  # noqa: E402

TENDCTL = os.environ.get("TENDCTL", os.path.join(os.path.dirname(TEND), "tendctl"))

TTL = 6  # s; the fencing margin (TimeoutStopSec=1s + 0.2 s + TTL/100) must stay under TTL/3
PREFIX = "cs"
UNIT = "solo.service"
KEY = f"{PREFIX}/e/singletons/{UNIT}"

PROBE = r'''
import fcntl, os, sys, time
path, host = sys.argv[1], sys.argv[2]
token = os.environ.get("TEND_FENCING_TOKEN", "none")
while True:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(f"{host} {token} {os.getpid()} {time.time():.3f}\n")
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)
    time.sleep(0.05)
'''


def check(cond, message):
    if not cond:
        raise AssertionError(message)


class Tend:
    """A tend named name (its DIR, socket, log, cgroup), --host-id host_id (default
    name), run from binary (default TEND)."""

    def __init__(self, tmp, cgroot, name, url, probe, ticks, host_id=None, binary=None):
        self.name = name
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        with open(os.path.join(self.dir, UNIT), "w") as f:
            f.write("[Unit]\nDescription=one of three\n[Service]\n"
                    f"ExecStart=/usr/bin/python3 {probe} {ticks} {name}\n"
                    "TimeoutStopSec=1s\nRestart=always\nRestartSec=100ms\n"
                    "[X-Tend]\nSingleton=yes\n")
        with open(os.path.join(self.dir, "plain.service"), "w") as f:  # an ordinary unit beside it
            f.write(f"[Service]\nExecStart=/bin/sh -c 'echo $$$$ > {self.dir}/plain.pid; exec sleep 1000'\n")
        self.cgroup = os.path.join(cgroot, name)
        os.mkdir(self.cgroup)
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "w")
        procs = os.path.join(self.cgroup, "cgroup.procs")

        def enter():
            with open(procs, "w") as f:
                f.write("0")
        self.sock = os.path.join(tmp, name + ".sock")
        self.proc = subprocess.Popen(
            [binary or TEND, "--config-dir", self.dir, "--control-socket", self.sock,
             "--store", f"etcd://{url.split('//', 1)[1]}/{PREFIX}", "--host-id", host_id or name,
             "--cluster-ttl", f"{TTL}s", "-v"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=enter)

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class ClusterRig:
    """with ClusterRig("what") as rig: rig.tmp, rig.cgroot, rig.probe, rig.ticks,
    rig.etcd (EtcdAt), rig.tends {name: Tend}; rig.tend(name, …) starts one."""

    def __init__(self, what, log_lines=15):
        self.what, self.log_lines = what, log_lines
        self.tends = {}
        self.tmp = self.cgroot = self.etcd = None

    def __enter__(self):
        if not os.path.exists(ETCD):
            print(f"SKIP: no etcd binary ({ETCD})", file=sys.stderr)
            sys.exit(77)
        parent, why = cgroup_usable()
        if not parent:
            print(f"SKIP: {why}: each tend needs a cgroup of its own", file=sys.stderr)
            sys.exit(77)
        self.tmp = tempfile.mkdtemp(prefix=f"tend-{self.what}-")
        self.cgroot = os.path.join(parent, f"tend-it.{os.getpid()}.{self.what}")
        os.mkdir(self.cgroot)
        self.probe, self.ticks = os.path.join(self.tmp, "probe.py"), os.path.join(self.tmp, "ticks")
        with open(self.probe, "w") as f:
            f.write(PROBE)
        try:
            self.etcd = EtcdAt(self.tmp, "m1", free_port(), free_port())
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def tend(self, name, host_id=None, binary=None):
        t = Tend(self.tmp, self.cgroot, name, self.etcd.url, self.probe, self.ticks, host_id, binary)
        self.tends[name] = t
        return t

    def __exit__(self, typ, value, tb):
        if typ is not None:
            for t in self.tends.values():
                print(f"--- {t.name}'s log (last lines) ---\n" +
                      "".join(t.text().splitlines(True)[-self.log_lines:]), file=sys.stderr)
        for t in self.tends.values():
            t.stop()
        for member in ETCDS:
            member.stop()
        cgroup_remove(self.cgroot)
        if typ is None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False


def running(pid):
    """pid exists and is not a zombie (the stopped tend cannot reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone between the open and the read
        return False


def read_ticks(path):
    """[(host, token, pid, t)] in file order."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for ln in f:
            p = ln.split()
            if len(p) == 4:
                out.append((p[0], p[1], int(p[2]), float(p[3])))
    return out


def runs(path):
    """{(host, token, pid): (first, last)} of the ticks, ordered by first."""
    r = {}
    for host, token, pid, t in read_ticks(path):
        a, _ = r.get((host, token, pid), (t, t))
        r[(host, token, pid)] = (a, t)
    return dict(sorted(r.items(), key=lambda kv: kv[1][0]))


def check_no_overlap(path):
    rs = list(runs(path).items())
    for (k1, (a1, b1)), (k2, (a2, b2)) in zip(rs, rs[1:]):
        check(b1 < a2, f"runs overlap: {k1} {a1:.3f}..{b1:.3f} and {k2} {a2:.3f}..{b2:.3f}")
    return rs


def holder(url):
    """(the singleton key's host, its create revision), or (None, 0)."""
    kv = etcd_get(url, KEY).get(KEY)
    return (json.loads(kv["value"])["host"], int(kv["create_revision"])) if kv else (None, 0)


def current_run(path, since):
    """The runs ticking after `since` (wall time)."""
    return {k for h, tok, pid, t in read_ticks(path) if t > since for k in [(h, tok, pid)]}


def one_runner(path, what):
    wait_until(lambda: len(current_run(path, time.time() - 0.5)) == 1, 20,
               f"{what}: no single run of {UNIT} ticking (none, or two at once)")
    t0 = time.time()
    time.sleep(2)
    now = current_run(path, t0)
    check(len(now) == 1, f"{what}: {len(now)} runs ticked in 2 s: {sorted(now)}")
    return next(iter(now))


def tendctl(t, *args):
    r = subprocess.run([TENDCTL, "--control-socket", t.sock, *args], capture_output=True, timeout=20)
    check(r.returncode == 0, f"tendctl {' '.join(args)} exited {r.returncode}: {r.stderr.decode()}")
    return r.stdout.decode()


def plain_pid(t):
    path = os.path.join(t.dir, "plain.pid")
    wait_until(lambda: os.path.exists(path) and open(path).read().strip(), 10, f"{t.name}: plain.service never ran")
    return int(open(path).read())
