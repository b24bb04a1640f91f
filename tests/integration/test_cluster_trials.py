#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 20's trials: a 3-member etcd cluster and 3 tends on loopback
(docs/cluster.md §8).

Each tend runs in a cgroup of its own and reaches etcd only through a TCP
proxy this test owns (etcdtest.Proxy: one per tend, a port per member, able
to black-hole). Each tend has the same DIR: two singleton units
(`[X-Tend] Singleton=yes`) whose probe appends "UNIT HOST TOKEN PID TIME
EVENT" to one shared file under flock(2) — `start`, a `tick` every 50 ms,
`stop` at SIGTERM — and two ordinary units whose pids must never change
(except on a host the test kills). The trials:

- kill:      SIGKILL of the holder tend and of everything in its cgroup (host
             death) → another host runs its singleton within TTL + 1 s;
- partition: the holder's proxy black-holed (frozen or dropping) → the
             holder's unit is stopped before its lease can end on etcd (last
             keep-alive the proxy forwarded + TTL), another host takes over,
             runs never overlap; restored → it does not run it again;
- pause:     SIGSTOP of the holder tend for 2 × TTL → its fence kills the unit,
             runs never overlap, a write guarded by the stale
             $TEND_FENCING_TOKEN is rejected by etcd (the new one passes);
- leader:    the etcd leader SIGKILLed → no unit of any host stops or restarts;
- hung:      the leader, second in the holder's list of members, SIGSTOPped
             (it accepts and never answers) for TTL − 1 s, then SIGKILLed and
             restarted → nothing stops or restarts (the holder's keep-alive is
             raced on another member);
- quorum-short: 2 of 3 members stopped, restarted at once (quorum back well
             within the lease) → nothing stops or restarts;
- quorum-long:  2 of 3 members stopped for TTL + 3 s → every singleton stops,
             ordinary units keep running; quorum back → each singleton runs
             again exactly once.

After each trial every host is registered again and each singleton runs on
exactly one host. Used by tests/bench/bench-cluster-trials.py (20 of each).
Usage: test_cluster_trials.py [ROUNDS]  (default 1; partition alternates its
mode). Root, cgroup2 and etcd: 77 otherwise. Env: TEND, ETCD.
"""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcdtest import ETCD, EtcdCluster, Proxy  # noqa: E402
from svctest import cgroup_procs, cgroup_remove, cgroup_usable  # noqa: E402
from tendtest import TEND  # noqa: E402

TTL = int(os.environ.get("TRIALS_TTL", "6"))  # s; the fencing margin (1 s + 0.2 s + TTL/100) < TTL/3
PREFIX = "trials"
FREE = ("solo-a.service", "solo-b.service")  # singletons every host may run
PINNED, PINNED_HOST = "solo-c.service", "h3"  # a singleton only h3 may run (Hosts=h3)
SINGLES = FREE + (PINNED,)
PLAINS = ("plain.service", "worker.service")
TICK = 0.05  # s between the probe's ticks: a run may outlive its last tick by this much
HOSTS = ("h1", "h2", "h3")
BUDGET = 2 * TTL / 3 - (1 + 0.2 + TTL / 100)  # s: the outage nothing stops within (docs/cluster.md §6)
SHORT_DOWN = float(os.environ.get("TRIALS_SHORT_DOWN", "2"))  # s: how long quorum-short keeps 2 of 3 members stopped

PROBE = r'''
import fcntl, os, signal, sys, time
path, unit, host = sys.argv[1:4]
token = os.environ.get("TEND_FENCING_TOKEN", "none")
def note(event):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(f"{unit} {host} {token} {os.getpid()} {time.time():.3f} {event}\n")
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)
stop_at = None
def on_term(*_):  # a stop that takes 0.4 s (TimeoutStopSec=1s): it ticks on meanwhile
    global stop_at
    stop_at = stop_at or time.monotonic() + 0.4
signal.signal(signal.SIGTERM, on_term)
note("start")
while True:
    note("tick")
    if stop_at and time.monotonic() >= stop_at:
        note("stop")
        os._exit(0)
    time.sleep(0.05)
'''


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def wait_for(cond, timeout, message, interval=0.05):
    """cond()'s first true value within timeout s, or AssertionError(message)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message() if callable(message) else message} (waited {timeout:.1f} s)")
        time.sleep(interval)


class Ticks:
    """The shared file, read incrementally: runs[(unit, host, token, pid)] =
    [first, last, stopped] (stopped: the probe said `stop`, i.e. SIGTERM)."""

    def __init__(self, path):
        self.path, self.off, self.runs = path, 0, {}
        open(path, "a").close()

    def read(self):
        with open(self.path) as f:
            fcntl.flock(f, fcntl.LOCK_SH)
            f.seek(self.off)
            data = f.read()
            fcntl.flock(f, fcntl.LOCK_UN)
        end = data.rfind("\n") + 1
        self.off += len(data[:end].encode())
        for ln in data[:end].splitlines():
            p = ln.split()
            if len(p) != 6:
                continue
            k, t = (p[0], p[1], p[2], int(p[3])), float(p[4])
            r = self.runs.setdefault(k, [t, t, False])
            r[1] = max(r[1], t)
            r[2] = r[2] or p[5] == "stop"
        return self.runs

    def live(self, unit, within=0.5):
        """Runs of unit that ticked in the last `within` s."""
        now = time.time()
        return sorted(k for k, r in self.read().items() if k[0] == unit and r[1] > now - within)

    def started_after(self, unit, t):
        return sorted(k for k, r in self.read().items() if k[0] == unit and r[0] > t)

    def check_no_overlap(self):
        """No two runs of a unit overlap: each starts after the previous one's
        last tick + TICK (the most it can have lived past that tick)."""
        for unit in SINGLES:
            rs = sorted((r[0], r[1], k, r[2]) for k, r in self.read().items() if k[0] == unit)
            for (a1, b1, k1, stopped), (a2, b2, k2, _) in zip(rs, rs[1:]):
                # a `stop` is the run's last act (it exits then); else it may outlive its last tick
                check(b1 + (0 if stopped else TICK) < a2, f"{unit}: runs overlap: {k1[1:]} {a1:.3f}..{b1:.3f} "
                      f"and {k2[1:]} {a2:.3f}..{b2:.3f}")
        return sum(1 for k in self.runs if k[0] in SINGLES)


class Host:
    """One tend in a cgroup of its own, behind a proxy of its own."""

    def __init__(self, t, name, index):
        self.t, self.name, self.index = t, name, index
        self.dir = os.path.join(t.tmp, name)
        os.makedirs(self.dir)
        for u in SINGLES:
            with open(os.path.join(self.dir, u), "w") as f:
                f.write(f"[Unit]\nDescription=one of three\n[Service]\n"
                        f"ExecStart=/usr/bin/python3 {t.probe} {t.ticks.path} {u} {name}\n"
                        "TimeoutStopSec=1s\nRestart=always\nRestartSec=100ms\n[X-Tend]\nSingleton=yes\n" +
                        (f"Hosts={PINNED_HOST}\n" if u == PINNED else ""))
        for u in PLAINS:
            with open(os.path.join(self.dir, u), "w") as f:
                f.write(f"[Service]\nExecStart=/bin/sh -c 'echo $$$$ > {self.dir}/{u}.pid; exec sleep 100000'\n"
                        "Restart=always\n")
        self.proxy = Proxy([m.client for m in t.etcd.members])
        self.proc, self.gen, self.log = None, 0, None
        self.plains = {}

    def start(self):
        self.gen += 1
        for u in PLAINS:
            if os.path.exists(os.path.join(self.dir, u + ".pid")):
                os.unlink(os.path.join(self.dir, u + ".pid"))
        self.cgroup = os.path.join(self.t.cgroot, f"{self.name}.{self.gen}")
        os.mkdir(self.cgroup)
        procs = os.path.join(self.cgroup, "cgroup.procs")

        def enter():
            with open(procs, "w") as f:
                f.write("0")
        ports = self.proxy.ports[self.index:] + self.proxy.ports[:self.index]  # each starts at another member
        self.log_path = os.path.join(self.t.tmp, f"{self.name}.{self.gen}.log")
        self.log = open(self.log_path, "w")
        self.sock = os.path.join(self.t.tmp, self.name + ".sock")
        self.proc = subprocess.Popen(
            [TEND, "--config-dir", self.dir, "--control-socket", self.sock,
             "--store", "etcd://" + ",".join(f"127.0.0.1:{p}" for p in ports) + f"/{PREFIX}",
             "--host-id", self.name, "--cluster-ttl", f"{TTL}s", "-v"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=enter)
        self.plains = {u: self.plain_pid(u) for u in PLAINS}

    def plain_pid(self, unit):
        path = os.path.join(self.dir, unit + ".pid")
        wait_for(lambda: os.path.exists(path) and open(path).read().strip(), 15,
                 f"{self.name}: {unit} never wrote its pid (tend did not start it?)")
        return int(open(path).read())

    def check_plains(self, what):
        for u, pid in self.plains.items():
            check(self.plain_pid(u) == pid and running(pid),
                  f"{what}: {self.name}'s ordinary {u} (pid {pid}) stopped or restarted")

    def kill(self):
        """Host death: SIGKILL of tend, its fences and its units (by pid), reaped."""
        self.proc.kill()
        self.proc.wait()
        def killed():
            for pid in cgroup_procs(self.cgroup):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return not cgroup_procs(self.cgroup)
        wait_for(killed, 10, f"{self.name}: its cgroup never emptied after SIGKILLs")
        self.log.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log:
            self.log.close()
        self.proxy.close()

    def text(self):
        with open(self.log_path) as f:
            return f.read()


def running(pid):
    """pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class Trials:
    def __init__(self, tmp, cgroot):
        self.tmp, self.cgroot = tmp, cgroot
        self.probe = os.path.join(tmp, "probe.py")
        with open(self.probe, "w") as f:
            f.write(PROBE)
        self.ticks = Ticks(os.path.join(tmp, "ticks"))
        self.etcd, self.hosts = None, {}

    def start(self):
        self.etcd = EtcdCluster(self.tmp)
        for i, n in enumerate(HOSTS):
            self.hosts[n] = Host(self, n, i)
            self.hosts[n].start()
        self.settle("at start")

    def close(self):
        for h in self.hosts.values():
            h.stop()
        if self.etcd:
            self.etcd.stop()

    # ---- what every trial checks ----

    def registered(self):
        keys = self.etcd.get(f"{PREFIX}/e/hosts/", prefix=True)
        return sorted(k.rsplit("/", 1)[1] for k in keys)

    def runner(self, unit):
        live = self.ticks.live(unit)
        return live[0] if len(live) == 1 else None

    def settle(self, what, timeout=None):
        """Every host registered, each singleton ticking on exactly one host
        (for 1 s), its holder in etcd that run's host and token."""
        timeout = timeout or 3 * TTL + 10
        wait_for(lambda: self.registered() == sorted(HOSTS), timeout,
                 lambda: f"{what}: hosts registered in etcd: {self.registered()}, not {list(HOSTS)}")
        deadline = time.monotonic() + timeout
        while True:
            out = {}
            for u in SINGLES:
                out[u] = wait_for(lambda: self.runner(u), max(0.1, deadline - time.monotonic()),
                                  lambda: f"{what}: {u} does not run on exactly one host: {self.ticks.live(u)}")
            t0 = time.time()
            time.sleep(1)
            now = {u: set(self.ticks.live(u, within=time.time() - t0)) for u in SINGLES}
            if all(now[u] == {out[u]} for u in SINGLES):
                break
            check(time.monotonic() < deadline, f"{what}: the singletons' runs changed in the last second: {now}")
        for u in SINGLES:
            kv = self.etcd.get(self.key(u)).get(self.key(u))
            check(kv and json.loads(kv["value"])["host"] == out[u][1] and str(kv["create_revision"]) == out[u][2],
                  f"{what}: {u} runs as {out[u][1:]} but its key in etcd is {kv and (kv['value'], kv['create_revision'])}")
        self.ticks.check_no_overlap()
        for h in self.hosts.values():
            h.check_plains(what)
        return out

    @staticmethod
    def key(unit):
        return f"{PREFIX}/e/singletons/{unit}"

    def holder(self, unit=SINGLES[0]):
        r = self.settle("before the trial")
        return self.hosts[r[unit][1]], r

    def new_run(self, unit, old_host, since, timeout, what):
        """The first run of unit on another host than old_host started after `since`."""
        def found():
            rs = [k for k in self.ticks.started_after(unit, since) if k[1] != old_host]
            return rs[0] if rs else None
        k = wait_for(found, timeout, f"{what}: no other host ran {unit} within {timeout:.0f} s "
                     "(the lease never ended on etcd? the watch never fired?)")
        return k, self.ticks.runs[k][0]

    # ---- the trials: each returns its measures ----

    def trial_kill(self):
        h, before = self.holder()
        held = [u for u in FREE if before[u][1] == h.name]
        t_kill = time.time()
        h.kill()
        took = {}
        for u in held:
            k, first = self.new_run(u, h.name, t_kill, TTL + 5, f"SIGKILL of {h.name}")
            took[u] = first - t_kill
            check(took[u] <= TTL + 1, f"{u}: {k[1]} ran it {took[u]:.2f} s after {h.name}'s SIGKILL: "
                  f"more than TTL + 1 s ({TTL + 1} s)")
        for o in self.hosts.values():
            if o is not h:
                o.check_plains(f"SIGKILL of {h.name}")
        h.start()
        self.settle(f"after {h.name} came back")
        return {"failover_s": took[SINGLES[0]]}

    def trial_partition(self, mode):
        h, before = self.holder()
        held = [u for u in FREE if before[u][1] == h.name]
        t_bh = h.proxy.blackhole(mode)
        try:
            news = {u: self.new_run(u, h.name, t_bh, 2 * TTL + 5, f"{h.name}'s proxy black-holed ({mode})")
                    for u in held}
            ka = h.proxy.last_keepalive
            time.sleep(1)
        finally:
            t_up = h.proxy.restore()
        measures = {}
        for u in held:
            old = self.ticks.runs[before[u]]
            check(old[2], f"{u}: {h.name} did not stop its unit the ordinary way (no `stop` from SIGTERM) "
                  f"while partitioned ({mode}): fenced by SIGKILL only, or not at all")
            lead = ka + TTL - old[1]
            check(old[1] + TICK < ka + TTL, f"{u}: {h.name}'s run ticked at {old[1] - t_bh:.2f} s into the "
                  f"partition, past its lease's earliest end on etcd ({ka + TTL - t_bh:.2f} s: the last "
                  "keep-alive the proxy forwarded + TTL)")
            measures[u] = (news[u][1] - t_bh, lead)
        text = h.text()
        check("stopping it before its lease can end on etcd" in text and "127.0.0.1:" in text,
              f"{h.name}: no log line says the singleton stops for want of a renewal, naming the endpoints")
        self.ticks.check_no_overlap()
        after = self.settle(f"after {h.name}'s proxy was restored ({mode})")
        for u in held:
            check(not [k for k in self.ticks.started_after(u, t_up) if k[1] == h.name],
                  f"{u}: {h.name} ran it again after the partition healed")
            check(after[u] == news[u][0], f"{u}: the runner changed after the partition healed: "
                  f"{after[u][1:]} (was {news[u][0][1:]})")
        return {"takeover_s": measures[SINGLES[0]][0], "stopped_before_expiry_s": measures[SINGLES[0]][1]}

    def trial_blip(self):
        """h3's proxy frozen until h3 gives up PINNED (at its stop deadline Dg),
        then restored: h3 holds it again (no other host may) and the new run
        outlives the lost hold's fence deadline (Dk = Dg + 1 s). Then the same
        for solo-a's holder: no other host may start it before its run ended."""
        h, before = self.hosts[PINNED_HOST], self.settle("before the trial")
        said = f"{PINNED}: singleton: its lease was not renewed in time"
        n0 = h.text().count(said)
        t_bh = h.proxy.blackhole("freeze")
        try:
            wait_for(lambda: h.text().count(said) > n0, TTL + 2,
                     f"{h.name} did not give {PINNED} up within TTL + 2 s of its proxy's freeze")
        finally:
            t_up = h.proxy.restore()
        wait_for(lambda: self.ticks.read()[before[PINNED]][2], 3,
                 f"{PINNED}: {h.name}'s run did not stop (SIGTERM) when it gave the key up")
        new = wait_for(lambda: self.ticks.started_after(PINNED, t_up), TTL,
                       f"{h.name} did not run {PINNED} again after its proxy came back")[0]
        time.sleep(3)  # past the lost hold's Dk
        check(self.ticks.started_after(PINNED, t_up) == [new] and self.ticks.live(PINNED) == [new],
              f"{PINNED}: after {h.name} held it again, its run {new[1:]} was killed or replaced: "
              f"{self.ticks.started_after(PINNED, t_up)} (the lost hold's fence fired on the next run?)")
        self.settle("after a short freeze of h3's proxy")
        took, frozen = self.ticks.runs[new][0] - t_up, t_up - t_bh
        # the same for the holder of a unit any host may run: the others see its key
        # go only once its run has ended (a stop takes the probe 0.4 s)
        h, before = self.holder()
        said = f"{FREE[0]}: singleton: its lease was not renewed in time"
        n0 = h.text().count(said)
        h.proxy.blackhole("freeze")
        try:
            wait_for(lambda: h.text().count(said) > n0, TTL + 2,
                     f"{h.name} did not give {FREE[0]} up within TTL + 2 s of its proxy's freeze")
        finally:
            t_up = h.proxy.restore()
        wait_for(lambda: self.ticks.started_after(FREE[0], t_up - 1), TTL + 5,
                 f"nobody ran {FREE[0]} again after {h.name}'s proxy came back")
        self.ticks.check_no_overlap()
        self.settle(f"after a short freeze of {h.name}'s proxy")
        return {"rerun_s": took, "frozen_s": frozen}

    def trial_pause(self):
        h, before = self.holder()
        held = [u for u in FREE if before[u][1] == h.name]
        t_stop = time.time()
        os.kill(h.proc.pid, signal.SIGSTOP)
        try:
            news = {u: self.new_run(u, h.name, t_stop, 2 * TTL, f"SIGSTOP of {h.name}") for u in held}
            left = 2 * TTL - (time.time() - t_stop)
            time.sleep(max(0, left))
        finally:
            os.kill(h.proc.pid, signal.SIGCONT)
        for u in held:
            check(not running(before[u][3]), f"{u}: {h.name}'s unit (pid {before[u][3]}) outlived its "
                  "stopped tend's fence")
            stale, fresh = before[u][2], news[u][0][2]
            check(self.etcd.txn_guarded(self.key(u), stale, f"{PREFIX}/guarded") == "FAILURE",
                  f"{u}: etcd accepted a write guarded by the stale fencing token {stale}")
            check(self.etcd.txn_guarded(self.key(u), fresh, f"{PREFIX}/guarded") == "SUCCESS",
                  f"{u}: etcd refused a write guarded by the holder's token {fresh}")
        self.ticks.check_no_overlap()
        after = self.settle(f"after {h.name} resumed")
        for u in held:
            check(after[u] == news[u][0], f"{u}: the runner changed after {h.name} resumed: {after[u][1:]}")
        return {"takeover_s": news[SINGLES[0]][1] - t_stop}

    def unchanged(self, before, since, what):
        """No singleton run changed or started since `since`; ordinary pids kept."""
        for u in SINGLES:
            check(self.ticks.live(u) == [before[u]], f"{what}: {u} runs {self.ticks.live(u)}, was {before[u][1:]}")
            check(self.ticks.started_after(u, since) == [], f"{what}: {u} started again: "
                  f"{self.ticks.started_after(u, since)}")
            check(not self.ticks.runs[before[u]][2], f"{what}: {u} was stopped")
        for h in self.hosts.values():
            h.check_plains(what)

    def trial_refused(self):
        """The holder's proxy resets every connection (etcd's ports closed, as
        while members restart) from just before its keep-alive is due until
        0.3 s before its stop deadline Dg: each try fails at once, and the
        renewal must be tried again often enough to get through in the last
        0.3 s (a failed renewal was tried again only every TTL/6: at TTL 6 s,
        1, 2, 3 s after it was due — past Dg, 2.74 s — and the singleton was
        stopped; now at most every TTL/24, docs/store.md §4.3). Nothing stops."""
        h, before = self.holder()
        self.before_keepalive(h)
        t0 = h.proxy.blackhole("refuse")
        time.sleep(max(0, t0 + 0.2 + BUDGET - 0.3 - time.time()))
        t_up = h.proxy.restore()
        time.sleep(TTL + 2)
        self.unchanged(before, t0, f"{h.name}'s etcd connections refused for {t_up - t0:.2f} s "
                       f"from 0.2 s before its keep-alive was due")
        self.settle("after refused connections")
        return {"refused_s": t_up - t0}

    def trial_leader(self):
        """The leader SIGKILLed just before the holder's keep-alive is due. An
        election slower than 2/3 TTL − margin proves nothing (the holder must
        then fence): tried again, 5 times in all."""
        for attempt in range(5):
            h, before = self.holder()
            lead = wait_for(self.etcd.leader, 10, "no etcd member says who leads")
            self.before_keepalive(h)
            t0 = time.time()
            lead.stop(signal.SIGKILL)
            took = time.time() - t0 + self.etcd.writable(TTL)
            if took < BUDGET:
                break
            print(f"note: leader: a write succeeded {took:.2f} s after the kill, not within {BUDGET:.2f} s: again",
                  flush=True)
            self.etcd.restart([lead])
            self.settle("after a slow election")
        else:
            raise AssertionError(f"leader: the election took {took:.1f} s, 5 times: more than {BUDGET:.2f} s "
                                 f"(busy machine? see {self.tmp}/m*.log)")
        time.sleep(TTL + 2)
        self.unchanged(before, t0, f"etcd leader {lead.name} SIGKILLed (writes again after {took:.1f} s)")
        self.etcd.restart([lead])
        self.unchanged(before, t0, f"etcd leader {lead.name} back")
        self.settle("after the leader's restart")
        return {"election_s": took}

    def trial_hung(self):
        """A member that accepts but never answers (SIGSTOP, as a hung disk),
        made the leader and second in the holder's list of members, so that
        the first member's requests hang behind it too: quorum is kept, so
        nothing stops (QA20 H1: each try took a keep-alive's whole TTL/3, and
        two in a row passed the holder's stop deadline; now a keep-alive is
        raced on the next member after 1/8 of its deadline, docs/store.md
        §4.6). Frozen for TTL − 1 s (past that deadline), then SIGKILLed
        while still stopped and restarted: never resumed, because etcd 3.4's
        old leader back from a pause revokes the leases it thinks expired —
        every lease whose last renewal it saw is older than TTL, which a
        TTL − 1 s pause reaches (docs/cluster.md §4; seen here once under
        ASan: the holder's lease revoked, its run overlapped the next one's
        stop by 0.3 s). The others must elect a leader (a write through them succeeds)
        within 2/3 TTL − margin, as in the leader trial: a slower election
        proves nothing (the holder must then fence) and the trial is made
        again, 5 times in all."""
        took = float("nan")
        for attempt in range(5):
            h, before = self.holder()
            second = self.etcd.members[(h.index + 1) % len(self.etcd.members)]
            self.etcd.move_leader(second)
            h, before = self.holder()
            if self.etcd.members[(h.index + 1) % len(self.etcd.members)] is not second:
                continue  # the holder changed meanwhile: the leader is no longer second in its list
            self.before_keepalive(h)
            t0 = time.time()
            second.send(signal.SIGSTOP)
            try:
                took = time.time() - t0 + self.etcd.writable(TTL - 1, [m for m in self.etcd.members
                                                                        if m is not second])
                time.sleep(max(0, t0 + TTL - 1 - time.time()))
            finally:
                second.proc.send_signal(signal.SIGKILL)  # stopped: it never runs again as the old leader
                second.proc.wait(10)
            self.etcd.restart([second])
            if took < BUDGET:
                break
            print(f"note: hung: a write succeeded {took:.2f} s after the freeze, not within {BUDGET:.2f} s: "
                  "again", flush=True)
            self.settle("after a slow election")
        else:
            raise AssertionError(f"hung: the election took {took:.1f} s, 5 times: more than {BUDGET:.2f} s "
                                 f"(busy machine? see {self.tmp}/m*.log)")
        self.unchanged(before, t0, f"etcd leader {second.name} (second in {h.name}'s list) hung for {TTL - 1} s, "
                       f"then restarted (writes again after {took:.1f} s)")
        self.settle("after the hung leader")
        return {"election_s": took}

    @staticmethod
    def before_keepalive(h):
        """Returns 0.2 s before h's next keep-alive is due (its proxy saw the last)."""
        seen = h.proxy.last_keepalive
        ka = wait_for(lambda: h.proxy.last_keepalive > seen and h.proxy.last_keepalive, TTL,
                      f"{h.name} sent no keep-alive within TTL")
        time.sleep(max(0, ka + TTL / 3 - 0.2 - time.time()))

    def quorum_down(self, h=None):
        """Stops the leader and one other member (SIGKILL, reaped). With h: just
        before h's next keep-alive is due — the worst moment for h, whose
        lease's local expiry is then only 2/3 TTL ahead."""
        lead = wait_for(self.etcd.leader, 10, "no etcd member says who leads")
        down = [lead] + [m for m in self.etcd.members if m is not lead][:1]
        if h:
            self.before_keepalive(h)
        t0 = time.time()
        for m in down:
            m.stop(signal.SIGKILL)  # no leadership transfer: the survivor is left without a leader
        return down, t0

    def trial_quorum_short(self):
        """Nothing stops while quorum returns before the holder's stop deadline:
        within T − margin of its last renewal, i.e. (at the worst moment, just
        before a renewal) 2/3 TTL − margin after the outage began. An outage
        that took longer (a busy machine, a contested election) proves nothing:
        tried again, 5 times in all."""
        budget = BUDGET
        for attempt in range(5):
            h, before = self.holder()
            down, t0 = self.quorum_down(h)
            time.sleep(SHORT_DOWN)
            self.etcd.restart(down)
            outage = time.time() - t0 + self.etcd.writable(TTL)
            if outage < budget:
                break
            print(f"note: quorum-short: quorum back after {outage:.2f} s, not within {budget:.2f} s "
                  "(2/3 TTL − the fencing margin): again")
            self.settle("after a quorum loss longer than planned")
        else:
            raise AssertionError(f"quorum-short: etcd took {outage:.1f} s to take writes again, 5 times: more than "
                                 f"{budget:.2f} s (busy machine? see {self.tmp}/m*.log)")
        time.sleep(TTL + 2)
        self.unchanged(before, t0, f"2 of 3 members ({' '.join(m.name for m in down)}) stopped {SHORT_DOWN} s, "
                       f"no quorum for {outage:.1f} s from just before {h.name}'s keep-alive was due")
        self.settle("after a short quorum loss")
        return {"outage_s": outage}

    def trial_quorum_long(self):
        _, before = self.holder()
        down, t0 = self.quorum_down()
        time.sleep(TTL + 3)
        for u in SINGLES:
            k = before[u]
            ka = self.hosts[k[1]].proxy.last_keepalive
            check(not self.ticks.live(u, within=1), f"{u}: still runs {TTL + 3} s into a quorum loss: "
                  f"{self.ticks.live(u, within=1)} (not fenced)")
            check(self.ticks.runs[k][1] + TICK < ka + TTL, f"{u}: {k[1]}'s run ticked "
                  f"{self.ticks.runs[k][1] - ka:.2f} s after its last keep-alive: past its lease (TTL {TTL} s)")
            check(self.ticks.runs[k][2], f"{u}: {k[1]} did not stop it the ordinary way (SIGTERM) in a quorum loss")
        for h in self.hosts.values():
            h.check_plains("2 of 3 members stopped for longer than the TTL")
        t_restart = time.time()
        self.etcd.restart(down)
        t_back = time.time() + self.etcd.writable(TTL)
        after = self.settle("after quorum returned")
        back = {}
        for u in SINGLES:
            rs = self.ticks.started_after(u, t_restart)
            check(rs == [after[u]], f"{u}: after quorum returned, not exactly one run: {rs}")
            back[u] = self.ticks.runs[after[u]][0] - t_back
        return {"rerun_s": max(back.values())}


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    if not os.path.exists(ETCD):
        print(f"SKIP: no etcd binary ({ETCD})", file=sys.stderr)
        sys.exit(77)
    parent, why = cgroup_usable()
    if not parent:
        print(f"SKIP: {why}: each tend needs a cgroup of its own", file=sys.stderr)
        sys.exit(77)
    kinds = os.environ.get("TRIALS_KINDS")  # e.g. "kill,pause": only those (development)
    results = run(parent, rounds, kinds=kinds.split(",") if kinds else None)
    print(json.dumps(results))


def run(parent, rounds, report=lambda line: print(line, flush=True), kinds=None):
    """rounds × every trial (or those named in kinds); {trial: [measures]}."""
    tmp = tempfile.mkdtemp(prefix="tend-trials-")
    cgroot = os.path.join(parent, f"tend-it.{os.getpid()}.trials")
    os.mkdir(cgroot)
    t, results = None, {}
    try:
        t = Trials(tmp, cgroot)
        t.start()
        report(f"ok: 3 etcd members, 3 tends behind their proxies; TTL {TTL} s")
        for i in range(rounds):
            # one round: a partition of each mode; more: one a round, alternating
            modes = ("freeze", "drop") if rounds == 1 else ("freeze",) if i % 2 == 0 else ("drop",)
            for name, fn in (("kill", t.trial_kill),
                             *((f"partition-{m}", lambda m=m: t.trial_partition(m)) for m in modes),
                             ("blip", t.trial_blip), ("pause", t.trial_pause), ("leader", t.trial_leader),
                             ("hung", t.trial_hung), ("refused", t.trial_refused),
                             ("quorum-short", t.trial_quorum_short), ("quorum-long", t.trial_quorum_long)):
                if kinds and name not in kinds:
                    continue
                m = fn()
                results.setdefault(name, []).append(m)
                report(f"ok: round {i + 1}: {name}: {' '.join(f'{k} {v:.2f}' for k, v in m.items())}")
        report(f"ok: {t.ticks.check_no_overlap()} singleton runs in all, none overlapping")
    except AssertionError:
        if t:
            for h in t.hosts.values():
                print(f"--- {h.name}'s log (last lines) ---\n" + "".join(h.text().splitlines(True)[-20:]),
                      file=sys.stderr)
        print(f"(kept {tmp} for a look)", file=sys.stderr)
        raise
    finally:
        if t:
            t.close()
        cgroup_remove(cgroot)
    sanitizer_check(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    return results


def sanitizer_check(tmp):
    """A sanitizer build's reports (tend keeps running after UBSan's): none."""
    for name in sorted(os.listdir(tmp)):
        if name.endswith(".log") and name[0] == "h":
            with open(os.path.join(tmp, name), errors="replace") as f:
                text = f.read()
            for word in ("runtime error:", "AddressSanitizer", "LeakSanitizer"):
                check(word not in text, f"{name}: a sanitizer report ({word}): see {tmp}")


if __name__ == "__main__":
    main()
