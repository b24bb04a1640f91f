#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A singleton's life on etcd as a user changes it (issue 20, QA20 M1–M4;
docs/cluster.md §5 "Starting, stopping, reloading").

One etcd member on loopback (stopped by pid), tends each with its own DIR,
control socket and cgroup; each scenario has an etcd prefix and tends of its
own. The singleton runs test_cluster_singleton's probe (HOST TOKEN PID TIME
appended under flock every 50 ms); a run is one (host, token, pid).

M1 `tendctl start` while etcd is unreachable is queued (exit 0, `tendctl
   status` says the host waits for the key), no start limit burnt; etcd
   back → the unit runs, driven by the store (no restart counted);
M3 `tendctl stop` on the holder gives the key up once the unit is down: the
   other host takes over, the stopped host does not contend again (a stop
   there too leaves nobody running it, the key gone; a daemon-reexec keeps
   that) until started;
M2 Singleton=yes added by daemon-reload to a unit running on three hosts →
   one run remains, the key its host's, the others logged stopping their
   copy; a crash then restarts it on the holder; Singleton= removed → the key
   goes, the run goes on;
M4 Hosts= narrowed by daemon-reload on the holder → its run stops, the other
   host runs it, never two at once; `tendctl restart` there is refused
   naming Hosts=; the unit's file removed from the holder's DIR → stopped
   there, its key gone.

Root and cgroup2 and etcd: 77 otherwise. Env: TEND, TENDCTL, ETCD.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import cgroup_remove, cgroup_usable  # noqa: E402
from test_cluster_etcd import ETCDS, EtcdAt, etcd_get  # noqa: E402
from test_cluster_singleton import PROBE, check, check_no_overlap, read_ticks, running  # noqa: E402
from test_store_etcd import ETCD, ETCDCTL, free_port  # noqa: E402
from tendtest import TEND, wait_until  # noqa: E402

TENDCTL = os.environ.get("TENDCTL", os.path.join(os.path.dirname(TEND), "tendctl"))
TTL = 6  # s; the fencing margin (TimeoutStopSec=1s + 0.2 s + TTL/100) must stay under TTL/3
UNIT = "solo.service"
TENDS = []


class Env:
    """The test's temporary directory, cgroup root and probe."""

    def __init__(self, tmp, cgroot):
        self.tmp, self.cgroot = tmp, cgroot
        self.probe = os.path.join(tmp, "probe.py")
        with open(self.probe, "w") as f:
            f.write(PROBE)


def unit_text(env, ticks, host, xtend="Singleton=yes\n"):
    return ("[Service]\n"
            f"ExecStart=/usr/bin/python3 {env.probe} {ticks} {host}\n"
            "TimeoutStopSec=1s\nRestart=always\nRestartSec=100ms\n"
            f"[X-Tend]\n{xtend}")


class Tend:
    def __init__(self, env, scenario, name, url, xtend="Singleton=yes\n", files=None, prefix=None):
        self.name, self.scenario = name, scenario
        self.ticks = os.path.join(env.tmp, scenario + ".ticks")
        self.dir = os.path.join(env.tmp, scenario, name)
        os.makedirs(self.dir)
        self.env = env
        self.write(xtend)
        for fname, text in (files or {}).items():  # other units, or solo.service's own text
            with open(os.path.join(self.dir, fname), "w") as f:
                f.write(text.replace("@PROBE@", f"{env.probe} {self.ticks} {name}"))
        self.cgroup = os.path.join(env.cgroot, f"{scenario}.{name}")
        os.mkdir(self.cgroup)
        self.log_path = os.path.join(env.tmp, f"{scenario}.{name}.log")
        self.log = open(self.log_path, "w")
        procs = os.path.join(self.cgroup, "cgroup.procs")

        def enter():
            with open(procs, "w") as f:
                f.write("0")
        self.sock = os.path.join(env.tmp, f"{scenario}.{name}.sock")
        self.proc = subprocess.Popen(
            [TEND, "--config-dir", self.dir, "--control-socket", self.sock,
             "--store", f"etcd://{url.split('//', 1)[1]}/{prefix or scenario}", "--host-id", name,
             "--cluster-ttl", f"{TTL}s", "-v"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=enter)
        TENDS.append(self)

    def write(self, xtend):
        with open(os.path.join(self.dir, UNIT), "w") as f:
            f.write(unit_text(self.env, self.ticks, self.name, xtend))

    def ctl(self, *args):
        r = subprocess.run([TENDCTL, "--control-socket", self.sock, *args], capture_output=True,
                           text=True, timeout=30)
        return r.returncode, r.stdout + r.stderr

    def reload(self, xtend):
        self.write(xtend)
        rc, out = self.ctl("daemon-reload")
        check(rc == 0, f"{self.name}: daemon-reload failed: {out}")

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def ticking(ticks, window=0.5):
    """The runs (host, token, pid) that ticked in the last `window` s."""
    since = time.time() - window
    return {(h, tok, pid) for h, tok, pid, t in read_ticks(ticks) if t > since}


def one_runner(ticks, what, timeout=20):
    """Waits until exactly one run ticks, and stays the only one for 1 s."""
    wait_until(lambda: len(ticking(ticks)) == 1, timeout,
               f"{what}: no single run of {UNIT} ticking (none: nobody took the key; two: not fenced)")
    t0 = time.time()
    time.sleep(1)
    now = {(h, tok, pid) for h, tok, pid, t in read_ticks(ticks) if t > t0}
    check(len(now) == 1, f"{what}: {len(now)} runs ticked in 1 s: {sorted(now)}")
    return next(iter(now))


def key_of(url, scenario):
    key = f"{scenario}/e/singletons/{UNIT}"
    kv = etcd_get(url, key).get(key)
    return json.loads(kv["value"])["host"] if kv else None


def status_of(t):
    rc, out = t.ctl("status", UNIT)
    return out


def start_while_down(env):
    """M1: the start is queued while etcd is away, the unit runs once it is back."""
    port, peer = free_port(), free_port()
    t = Tend(env, "m1", "h1", f"http://127.0.0.1:{port}")
    wait_until(lambda: os.path.exists(t.sock) and t.ctl("list")[0] == 0, 20, "tend h1 did not answer")
    rc, out = t.ctl("start", UNIT)
    check(rc == 0, f"M1: `tendctl start` of a singleton while etcd is away: exit {rc} ({out.strip()}); "
          "expected the start queued until the key is held")
    st = status_of(t)
    check("waits for its key" in st, f"M1: `tendctl status` does not say the host waits for the key:\n{st}")
    check(not read_ticks(t.ticks), "M1: the singleton ran without its key")
    e = EtcdAt(env.tmp, "m1", port, peer)
    t_up = time.time()
    wait_until(lambda: ticking(t.ticks), 40, "M1: the queued singleton never ran once etcd came "
               "(start limit burnt, or the acquire not driven by the store)")
    log = t.text()
    check("start limit hit" not in log, "M1: the start limit was hit while waiting for etcd")
    check("could not start" not in status_of(t) and "resources" not in status_of(t),
          f"M1: a failed spawn recorded:\n{status_of(t)}")
    print(f"ok M1: queued start ran {time.time() - t_up:.1f} s after etcd came")
    t.stop()
    return e


def stop_on_holder(env, url):
    """M3: a stop on the holder gives the key up; the stopped host does not contend again."""
    ts = {h: Tend(env, "m3", h, url) for h in ("h1", "h2")}
    ticks = ts["h1"].ticks
    h, tok, pid = one_runner(ticks, "M3 start")
    other = "h2" if h == "h1" else "h1"
    t0 = time.time()
    rc, out = ts[h].ctl("stop", UNIT)
    check(rc == 0, f"M3: stop on the holder {h}: exit {rc}: {out}")
    wait_until(lambda: any(r[0] == other for r in ticking(ticks)), TTL,
               f"M3: {other} did not take over within the TTL after the stop on the holder {h} "
               "(the key kept by the stopped host?)")
    took = time.time() - t0
    check(key_of(url, "m3") == other, f"M3: the key is {key_of(url, 'm3')}'s, {other} runs it")
    one_runner(ticks, "M3 after the stop")
    check_no_overlap(ticks)
    # the stopped host does not contend: stopped on the other host too, nobody runs it
    rc, out = ts[other].ctl("stop", UNIT)
    check(rc == 0, f"M3: stop on {other}: exit {rc}: {out}")
    wait_until(lambda: key_of(url, "m3") is None, TTL, f"M3: the key stays after the stop on {other}")
    wait_until(lambda: not ticking(ticks), 5, "M3: the unit still ticks after both stops")
    rc, out = ts[h].ctl("daemon-reexec")  # what a stop did is carried across a re-exec
    check(rc == 0, f"M3: daemon-reexec of {h}: exit {rc}: {out}")
    t1 = time.time()
    time.sleep(1.5)  # a host contending again would hold the key and tick within this
    check(key_of(url, "m3") is None and not [r for r in read_ticks(ticks) if r[3] > t1],
          f"M3: {h}, stopped (and re-executed), took the key again (held by {key_of(url, 'm3')})")
    rc, out = ts[h].ctl("start", UNIT)
    check(rc == 0, f"M3: start on {h} after both stops: exit {rc}: {out}")
    wait_until(lambda: any(r[0] == h for r in ticking(ticks)), 10, f"M3: {h}'s start never ran it")
    check_no_overlap(ticks)
    print(f"ok M3: {other} took over {took:.1f} s after the stop on {h}; a stopped host does not contend")
    for t in ts.values():
        t.stop()


def reload_adds_singleton(env, url):
    """M2: Singleton=yes added to a running unit: one run remains; removed: the key goes."""
    ts = [Tend(env, "m2", h, url, xtend="") for h in ("h1", "h2", "h3")]
    ticks = ts[0].ticks
    wait_until(lambda: len(ticking(ticks)) == 3, 20, "M2: the ordinary unit does not run on 3 hosts")
    for t in ts:
        t.reload("Singleton=yes\n")
    h, tok, pid = one_runner(ticks, "M2 after Singleton=yes was added", timeout=15)
    check(key_of(url, "m2") == h, f"M2: {h} runs it, the key is {key_of(url, 'm2')}'s")
    for t in ts:
        if t.name != h:
            check("stopping this host's copy" in t.text(), f"M2: {t.name} did not log stopping its copy")
    os.kill(pid, signal.SIGKILL)  # a crash: Restart=always runs it again on the holder
    wait_until(lambda: any(r[0] == h and r[2] != pid for r in ticking(ticks)), 10,
               f"M2: after a crash {h}, the holder, never ran it again (restart refused)")
    h2, tok2, pid2 = one_runner(ticks, "M2 after the crash")
    check(h2 == h and tok2 != "none", f"M2: after the crash: run {h2} token {tok2}, expected {h} with a token")
    for t in ts:
        t.reload("")
    wait_until(lambda: key_of(url, "m2") is None, 10, "M2: Singleton= removed, the key stays in etcd")
    time.sleep(0.5)
    check(running(pid2) and (h, tok2, pid2) in ticking(ticks),
          f"M2: Singleton= removed: the run on {h} did not go on")
    print(f"ok M2: one run left ({h}), restarted after a crash, the key gone with Singleton=")
    for t in ts:
        t.stop()


def hosts_narrowed(env, url):
    """M4: Hosts= no longer naming the holder: it stops, the other host runs it."""
    ts = {h: Tend(env, "m4", h, url) for h in ("h1", "h2")}
    ticks = ts["h1"].ticks
    h, tok, pid = one_runner(ticks, "M4 start")
    other = "h2" if h == "h1" else "h1"
    ts[h].reload(f"Singleton=yes\nHosts={other}\n")
    wait_until(lambda: not running(pid), 10, f"M4: Hosts={other}: the run on {h} goes on")
    wait_until(lambda: any(r[0] == other for r in ticking(ticks)), TTL,
               f"M4: {other} did not take over after Hosts= excluded {h}")
    rc, out = ts[h].ctl("restart", UNIT)
    check(rc != 0 and "Hosts=" in out, f"M4: restart on the excluded host {h}: exit {rc}: {out}")
    h2, _, _ = one_runner(ticks, "M4 after the restart on the excluded host")
    check(h2 == other and key_of(url, "m4") == other, f"M4: run on {h2}, key {key_of(url, 'm4')}'s")
    check_no_overlap(ticks)
    os.unlink(os.path.join(ts[other].dir, UNIT))  # removed from the holder's DIR: stopped, its key goes
    rc, out = ts[other].ctl("daemon-reload")
    check(rc == 0, f"M4: daemon-reload on {other}: exit {rc}: {out}")
    wait_until(lambda: key_of(url, "m4") is None, 10, f"M4: the unit's file removed on the holder {other}: "
               "its key stays in etcd")
    wait_until(lambda: not ticking(ticks), 5, f"M4: the unit removed on {other} still runs")
    print(f"ok M4: Hosts= narrowed on {h}: {other} runs it; restart on {h} refused; removed: its key gone")
    for t in ts.values():
        t.stop()


def lease_of(url, scenario):
    key = f"{scenario}/e/singletons/{UNIT}"
    kv = etcd_get(url, key).get(key)
    return int(json.loads(kv["value"])["lease"]) if kv else None


def lease_revoked(env, url):
    """QA20b H1: the only host's lease revoked on etcd: it registers again and runs the unit again."""
    t = Tend(env, "rv", "h1", url)
    h, tok, pid = one_runner(t.ticks, "revoke start")
    lid = lease_of(url, "rv")
    check(lid, "revoke: the key names no lease")
    r = subprocess.run([ETCDCTL, "--endpoints", url, "lease", "revoke", "%x" % lid],
                       env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True, timeout=20)
    check(r.returncode == 0, f"revoke: etcdctl lease revoke failed: {r.stderr}")
    t0 = time.time()
    wait_until(lambda: any(r[1] != tok for r in ticking(t.ticks)), 3 * TTL,
               "revoke: the only host never ran the singleton again after its lease was revoked "
               "(the acquire under the ended lease not retried at the new registration)")
    check(lease_of(url, "rv") not in (None, lid), f"revoke: the key's lease is {lease_of(url, 'rv')}")
    one_runner(t.ticks, "revoke after")
    print(f"ok revoke: ran again {time.time() - t0:.1f} s after its lease was revoked")
    t.stop()


BASE = "[Service]\nExecStart=/bin/sleep 1000\n"
DEP_SOLO = ("[Unit]\nPartOf=base.service\nAfter=base.service\n[Service]\nExecStart=/usr/bin/python3 @PROBE@\n"
            "TimeoutStopSec=1s\nRestart=always\nRestartSec=100ms\n[X-Tend]\nSingleton=yes\n")


def dep_stop(env, url):
    """QA20b M: a singleton stopped by its PartOf= unit on the holder: its key goes, the other host runs it."""
    ts = {h: Tend(env, "dp", h, url, files={"base.service": BASE, UNIT: DEP_SOLO}) for h in ("h1", "h2")}
    ticks = ts["h1"].ticks
    h, tok, pid = one_runner(ticks, "dep start")
    other = "h2" if h == "h1" else "h1"
    rc, out = ts[h].ctl("stop", "base.service")
    check(rc == 0, f"dep: stop base.service on {h}: exit {rc}: {out}")
    wait_until(lambda: not running(pid), 10, f"dep: base.service stopped, {UNIT} (PartOf=) runs on {h}")
    wait_until(lambda: any(r[0] == other for r in ticking(ticks)), 2 * TTL,
               f"dep: {other} never ran {UNIT} after it was stopped on {h} with its PartOf= unit "
               "(the key kept by a host not running it)")
    check(key_of(url, "dp") == other, f"dep: the key is {key_of(url, 'dp')}'s, {other} runs it")
    check_no_overlap(ticks)
    print(f"ok dep: stopped with its PartOf= unit on {h}: {other} took over")
    for t in ts.values():
        t.stop()


FAILING = ("[Unit]\nStartLimitIntervalSec=30s\nStartLimitBurst=3\n[Service]\nExecStart=/bin/false\n"
           "TimeoutStopSec=1s\nRestart=always\nRestartSec=100ms\n[X-Tend]\nSingleton=yes\n")


def failed_holder(env, url):
    """QA20b M: a singleton failed (start limit hit) on its holder: its key goes, the other host runs it."""
    t1 = Tend(env, "fl", "h1", url, files={UNIT: FAILING})
    wait_until(lambda: "start limit" in t1.text() or "failed" in status_of(t1), 20,
               "failed: the unit that always fails never hit its start limit on h1")
    t2 = Tend(env, "fl", "h2", url)
    wait_until(lambda: any(r[0] == "h2" for r in ticking(t2.ticks)), 2 * TTL,
               "failed: h2 never ran the singleton that failed on h1 (the key kept by the failed holder)")
    check(key_of(url, "fl") == "h2", f"failed: the key is {key_of(url, 'fl')}'s, h2 runs it")
    print("ok failed: the key of a singleton failed on h1 went, h2 runs it")
    t1.stop()
    t2.stop()


def hosts_widened(env, url):
    """QA20b M: Hosts= narrowed then widened back: the host stands by again and takes over."""
    ts = {h: Tend(env, "hw", h, url) for h in ("h1", "h2")}
    ticks = ts["h1"].ticks
    h, tok, pid = one_runner(ticks, "widen start")
    other = "h2" if h == "h1" else "h1"
    ts[other].reload(f"Singleton=yes\nHosts={h}\n")
    ts[other].reload("Singleton=yes\n")
    wait_until(lambda: "again: it waits for its singleton key" in ts[other].text(), 10,
               f"widen: Hosts= naming {other} again did not put it back on standby")
    rc, out = ts[h].ctl("stop", UNIT)
    check(rc == 0, f"widen: stop on the holder {h}: exit {rc}: {out}")
    wait_until(lambda: any(r[0] == other for r in ticking(ticks)), 2 * TTL,
               f"widen: {other}, named by Hosts= again, did not take over when {h} let go")
    check_no_overlap(ticks)
    print(f"ok widen: {other} stood by again after Hosts= was widened and took over")
    for t in ts.values():
        t.stop()


def dup_host_start(env, url):
    """QA20b Low: `tendctl start` on a tend waiting for its host id names the id in use, not "queued"."""
    t1 = Tend(env, "du", "h1", url)
    one_runner(t1.ticks, "dup start")
    t2 = Tend(env, "du2", "h1", url, prefix="du")  # the same id and prefix, a DIR of its own
    wait_until(lambda: "in use by another tend" in t2.text(), 20, "dup: the second tend with id h1 did not wait")
    rc, out = t2.ctl("start", UNIT)
    check(rc != 0 and "in use by another tend" in out,
          f"dup: start on the tend waiting for its host id: exit {rc}: {out.strip()} (expected refused, naming it)")
    print("ok dup: a start on the tend waiting for its host id is refused, naming it")
    t1.stop()
    t2.stop()


def main():
    if not os.path.exists(ETCD):
        print(f"SKIP: no etcd binary ({ETCD})", file=sys.stderr)
        sys.exit(77)
    parent, why = cgroup_usable()
    if not parent:
        print(f"SKIP: {why}: each tend needs a cgroup of its own", file=sys.stderr)
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="tend-changes-")
    cgroot = os.path.join(parent, f"tend-it.{os.getpid()}.changes")
    os.mkdir(cgroot)
    env = Env(tmp, cgroot)
    only = sys.argv[1:]
    try:
        e = start_while_down(env) if not only or "m1" in only else EtcdAt(tmp, "m1", free_port(), free_port())
        for name, f in (("m3", stop_on_holder), ("m2", reload_adds_singleton), ("m4", hosts_narrowed),
                        ("revoke", lease_revoked), ("dep", dep_stop), ("failed", failed_holder),
                        ("widen", hosts_widened), ("dup", dup_host_start)):
            if not only or name in only:
                f(env, e.url)
    except AssertionError:
        for t in TENDS:
            print(f"--- {t.scenario} {t.name}'s log (last lines) ---\n" +
                  "".join(t.text().splitlines(True)[-15:]), file=sys.stderr)
        raise
    finally:
        for t in TENDS:
            t.stop()
        for member in ETCDS:
            member.stop()
        cgroup_remove(cgroot)
    shutil.rmtree(tmp, ignore_errors=True)
    print("ok: singleton changes on etcd")


if __name__ == "__main__":
    main()
