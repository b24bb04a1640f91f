#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tend --store etcd://… against a real etcd (issue 20, docs/cluster.md).

One etcd member on loopback ports owned by this test (started from Debian's
etcd-server as test_store_etcd.py does, stopped by pid), one tend at a time:

1. etcd not there yet: tend says which endpoint fails and why, retries with
   back-off, and its ordinary unit runs meanwhile; etcd started → the host
   registers within the back-off.
2. presence: hosts/HOST under a lease (etcd's own lease id), with metadata.
3. published records: units/HOST/NAME, a crash-looping unit costs at most
   one write per second (etcd's own `version` of the key counts the writes).
4. etcd stopped for less than the lease: the unit keeps its pid, the host
   keeps its lease (no re-registration).
5. SIGTERM → the host's key goes at once (lease revoked); SIGKILL of another
   tend (and of its unit, by pid) → its key expires within TTL + 1 s.
6. a TLS failure (no CA file; TLS to a plain-HTTP etcd; no client
   certificate for a TLS etcd with --client-cert-auth; http:// to it) is said
   with curl's text and its error buffer's detail, as a protocol error, not as
   "Connection refused".

Skips (77) only when the etcd binary is absent. Env: TEND, ETCD.
"""
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_store_etcd import ETCD, ETCDCTL, Etcd, free_port, make_certs  # noqa: E402
from tendtest import TEND, wait_until  # noqa: E402
from svctest import cgroup_remove, cgroup_usable  # noqa: E402

ETCDS = []
TTL = 5  # s: the host lease (--cluster-ttl); a restarted etcd needs ~2 s to elect itself
PREFIX = "ct"


class EtcdAt(Etcd):
    """An etcd member on given ports and data dir (restartable in place)."""

    def __init__(self, tmp, name, client, peer):  # pylint: disable=super-init-not-called
        self.tmp, self.name, self.tls = tmp, name, None
        self.client, self.peer = client, peer
        self.url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        args = [ETCD, "--name", name, "--data-dir", os.path.join(tmp, name + ".data"),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"{name}={peer_url}", "--log-level", "warn"]
        self.log = open(os.path.join(tmp, name + ".log"), "a")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        ETCDS.append(self)  # stopped at the end (by pid) whatever failed
        self.wait_ready()


def etcd_get(url, key, prefix=False):
    """{key: kv} of etcd's own answer (value decoded, lease, version...)."""
    args = [ETCDCTL, "--endpoints", url, "get", "-w", "json", key] + (["--prefix"] if prefix else [])
    r = subprocess.run(args, env=dict(os.environ, ETCDCTL_API="3"), capture_output=True,
                       timeout=20, check=True)
    out = {}
    for kv in json.loads(r.stdout).get("kvs", []):
        kv["value"] = base64.b64decode(kv.get("value", "")).decode()
        out[base64.b64decode(kv["key"]).decode()] = kv
    return out


def host_key(url, host):
    return etcd_get(url, f"{PREFIX}/e/hosts/{host}").get(f"{PREFIX}/e/hosts/{host}")


def unit_key(url, host, name):
    return etcd_get(url, f"{PREFIX}/d/units/{host}/{name}").get(f"{PREFIX}/d/units/{host}/{name}")


# Each tend in a cgroup of its own when one can be made (root, cgroup2): a tend
# started from a shared cgroup takes another's units of the same name for its
# leftovers and kills them (tend(8) LEFTOVERS). Set by main().
CGROUP_ROOT = None
STARTED = []  # every Tend, stopped at the end whatever failed


def enter_cgroup(name):
    """preexec_fn: into CGROUP_ROOT/name (made here), or nothing."""
    if not CGROUP_ROOT:
        return None
    d = os.path.join(CGROUP_ROOT, name)
    os.makedirs(d, exist_ok=True)

    def enter():
        with open(os.path.join(d, "cgroup.procs"), "w") as f:
            f.write("0")
    return enter


class Tend:
    def __init__(self, tmp, name, url, units, extra=()):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        for unit, text in units.items():
            with open(os.path.join(self.dir, unit), "w") as f:
                f.write(text.replace("@DIR@", self.dir))
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "w")
        endpoint = url.split("//", 1)[1]
        STARTED.append(self)
        self.proc = subprocess.Popen(
            [TEND, "--config-dir", self.dir, "--control-socket", os.path.join(tmp, name + ".sock"),
             "--store", f"etcd://{endpoint}/{PREFIX}", "--host-id", name,
             "--host-metadata", "zone=z1,rack=7", "--cluster-ttl", f"{TTL}s", "-v", *extra],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=enter_cgroup(name))

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def pid_of(self, unit):
        path = os.path.join(self.dir, unit + ".pid")
        wait_until(lambda: os.path.exists(path) and open(path).read().strip(), 10,
                   f"{unit} never wrote its pid (tend did not start it? see {self.log_path})")
        return int(open(path).read())

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"tend did not stop within 15 s on {sig}; see {self.log_path}")
        if not self.log.closed:
            self.log.close()


SLEEPER = "[Service]\nExecStart=/bin/sh -c 'echo $$$$ > @DIR@/ct-a.service.pid; exec sleep 1000'\n"
# Hosts=/HostMetadata=: h1 has zone=z1,rack=7
ZONED = ("[Service]\nExecStart=/bin/sh -c 'echo $$$$ > @DIR@/ct-zoned.service.pid; exec sleep 1000'\n"
         "[X-Tend]\nHostMetadata=zone=z1 rack=7\nHosts=h0\nHosts=h1\n")
ELSEWHERE = ("[Service]\nExecStart=/bin/sh -c 'echo $$$$ > @DIR@/ct-elsewhere.service.pid; exec sleep 1000'\n"
             "[X-Tend]\nHostMetadata=zone=z2\n")
CRASHER = ("[Unit]\nStartLimitIntervalSec=0\n[Service]\nExecStart=/bin/false\n"
           "Restart=always\nRestartSec=100ms\n")


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def unreachable_then_registered(tmp, client, peer):
    url = f"http://127.0.0.1:{client}"
    t = Tend(tmp, "h1", url, {"ct-a.service": SLEEPER, "ct-crash.service": CRASHER,
                              "ct-zoned.service": ZONED, "ct-elsewhere.service": ELSEWHERE})
    pid = t.pid_of("ct-a.service")  # an ordinary unit starts without etcd
    wait_until(lambda: f"etcd 127.0.0.1:{client}: cannot register host h1" in t.text(), 15,
               "no log line naming the unreachable etcd endpoint")
    check("retrying in" in t.text(), "the failed registration does not say it retries")
    print("ok: etcd unreachable at start: said with its endpoint; a.service runs meanwhile")
    e = EtcdAt(tmp, "m1", client, peer)
    wait_until(lambda: host_key(url, "h1") is not None, 15,
               "host h1 not registered within 15 s of etcd starting (the back-off is 1, 2, 4 s)")
    kv = host_key(url, "h1")
    value = json.loads(kv["value"])
    check(int(kv.get("lease", 0)) != 0, f"hosts/h1 is not under a lease: {kv}")
    check(value["metadata"] == {"zone": "z1", "rack": "7"}, f"metadata: {value}")
    print(f"ok: host h1 registered under lease {kv['lease']} once etcd came: {value}")
    t.pid_of("ct-zoned.service")
    wait_until(lambda: "ct-elsewhere.service: not started: this host (h1) is not one its Hosts=/HostMetadata= "
               "name" in t.text(), 10, "ct-elsewhere.service (HostMetadata=zone=z2) not refused on h1")
    check(not os.path.exists(os.path.join(t.dir, "ct-elsewhere.service.pid")), "ct-elsewhere.service ran on h1")
    print("ok: Hosts=/HostMetadata=: the unit for h1's zone runs, the one for another zone does not")
    return e, t, pid


def published(url, t, pid):
    wait_until(lambda: unit_key(url, "h1", "ct-a.service") is not None, 10,
               "units/h1/ct-a.service never published")
    rec = json.loads(unit_key(url, "h1", "ct-a.service")["value"])
    check(rec["state"] == "running" and rec["main_pid"] == pid, f"published record: {rec}")
    wait_until(lambda: unit_key(url, "h1", "ct-crash.service") is not None, 10,
               "units/h1/ct-crash.service never published")
    first = unit_key(url, "h1", "ct-crash.service")
    t0 = time.monotonic()
    time.sleep(4)
    last = unit_key(url, "h1", "ct-crash.service")
    elapsed = time.monotonic() - t0
    writes = int(last["version"]) - int(first["version"])
    restarts = json.loads(last["value"])["restarts"] - json.loads(first["value"])["restarts"]
    check(restarts >= 2 * elapsed, f"the crash loop is too slow to show coalescing: {restarts} restarts")
    check(writes <= elapsed + 1, f"{writes} writes of units/h1/ct-crash.service in {elapsed:.1f} s "
          f"({restarts} restarts): not coalesced to one per second")
    print(f"ok: crash loop: {restarts} restarts, {writes} etcd writes in {elapsed:.1f} s")


def short_outage(tmp, e, t, pid, url):
    lease = host_key(url, "h1")["lease"]
    t0 = time.monotonic()
    e.stop()
    time.sleep(0.5)
    e2 = EtcdAt(tmp, "m1", e.client, e.peer)  # back when it has a leader again
    outage = time.monotonic() - t0
    check(outage < TTL - 1, f"etcd took {outage:.1f} s to come back: not a short outage (busy machine?)")
    time.sleep(TTL)  # past the lease the old outage would have ended
    check(os.path.exists(f"/proc/{pid}") and t.pid_of("ct-a.service") == pid,
          "a.service restarted or stopped across a short etcd outage")
    kv = host_key(url, "h1")
    check(kv is not None and kv["lease"] == lease,
          f"host h1 lost or re-registered its lease across an outage shorter than it: {kv}")
    check("registering again" not in t.text(), "tend re-registered after a short outage")
    print(f"ok: etcd away for {outage:.1f} s (TTL {TTL} s): a.service kept its pid, h1 its lease")
    return e2


def leaving(tmp, t, pid, url):
    t.stop(signal.SIGTERM)
    check(host_key(url, "h1") is None, "hosts/h1 still there after tend's clean stop (lease not revoked)")
    print("ok: SIGTERM: hosts/h1 gone at once")
    t2 = Tend(tmp, "h2", url, {"ct-a.service": SLEEPER})
    wait_until(lambda: host_key(url, "h2") is not None, 10, "host h2 never registered")
    unit_pid = t2.pid_of("ct-a.service")
    t2.proc.kill()
    t2.proc.wait()
    os.kill(unit_pid, signal.SIGKILL)  # its unit: started by this test's tend
    t0 = time.monotonic()
    wait_until(lambda: host_key(url, "h2") is None, TTL + 1.5,
               f"hosts/h2 outlived its tend by more than TTL + 1 s (lease kept alive by whom?)")
    print(f"ok: SIGKILL: hosts/h2 expired {time.monotonic() - t0:.1f} s after (TTL {TTL} s)")


def with_password(tmp, e, url):
    """--store-user/--store-password-file against etcd with authentication on: the
    right password registers; a wrong one is said (endpoint, error) and retried."""
    e.ctl("user", "add", "root:ct-root-pw")
    e.ctl("user", "grant-role", "root", "root")
    e.ctl("auth", "enable")
    good, bad = os.path.join(tmp, "pw"), os.path.join(tmp, "pw-bad")
    for path, pw in ((good, "ct-root-pw\n"), (bad, "wrong\n")):
        with open(path, "w") as f:
            f.write(pw)
    t3 = Tend(tmp, "h3", url, {}, ["--store-user", "root", "--store-password-file", good])
    t4 = Tend(tmp, "h4", url, {}, ["--store-user", "root", "--store-password-file", bad])

    def registered():
        args = [ETCDCTL, "--endpoints", url, "--user", "root:ct-root-pw", "get", f"{PREFIX}/e/hosts/h3"]
        r = subprocess.run(args, env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, timeout=20)
        return b"hosts/h3" in r.stdout
    wait_until(registered, 10, "h3 never registered with --store-user/--store-password-file")
    wait_until(lambda: f"etcd 127.0.0.1:{e.client}: cannot register host h4" in t4.text()
               and "Permission denied" in t4.text(), 10,
               "a wrong etcd password is not said with the endpoint and the error")
    print("ok: --store-user/--store-password-file: registered; a wrong password said and retried")


def maps_libcurl(pid):
    with open(f"/proc/{pid}/maps") as f:
        return "libcurl" in f.read()


def libcurl_only_with_store(tmp, t):
    """tend loads libcurl (and what it pulls in) only for a store on etcd:
    dlopen at the first etcd client, never at start (≈ 4 ms a start)."""
    check(maps_libcurl(t.proc.pid), "tend --store etcd://… runs without libcurl mapped: how does it talk to etcd?")
    d = os.path.join(tmp, "plain")
    os.makedirs(d)
    with open(os.path.join(d, "p.service"), "w") as f:
        f.write(SLEEPER.replace("@DIR@", d).replace("ct-a", "p"))
    sock = os.path.join(tmp, "plain.sock")
    p = subprocess.Popen([TEND, "--config-dir", d, "--control-socket", sock], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=enter_cgroup("plain"))
    try:
        path = os.path.join(d, "p.service.pid")
        wait_until(lambda: os.path.exists(path) and open(path).read().strip(), 10,
                   "the plain tend never started its unit")
        check(not maps_libcurl(p.pid), "a tend without --store has libcurl mapped: linked again instead of "
              "opened at the first etcd client (coord/curl-api.h)")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(15)
    print("ok: libcurl mapped by tend --store etcd://…, not by a tend without it")


def tls_errors_said(tmp, url):
    """A TLS failure is said as curl says it — its text and the detail of its
    error buffer (the file, the handshake's reason) — and never as "Connection
    refused" (QA20 L1): a missing CA file, and TLS spoken to a plain-HTTP etcd."""
    cases = {"tls-ca": (["--store-ca", "/nonexistent/ca.pem"], "/nonexistent/ca.pem"),
             "tls-plain": (["--store-ca", "/etc/ssl/certs/ca-certificates.crt"], "SSL connect error: ")}
    for name, (extra, detail) in cases.items():
        t = Tend(tmp, name, url, {}, extra)
        said = f"cannot register host {name}"
        try:
            wait_until(lambda: said in t.text(), 10, f"{name}: no log line says why it cannot register")
            lines = t.text().splitlines()
            store = [ln for ln in lines if "store-etcd: https://" in ln]
            cluster = [ln for ln in lines if said in ln]
            check(store and detail in store[0] and "SSL" in store[0],
                  f"{name}: curl's error (its text and {detail!r}) is not said: {store[:1]}")
            check("Connection refused" not in cluster[0],
                  f"{name}: a TLS failure said as a refused connection: {cluster[0]}")
        finally:
            t.stop()
    tls_refused_said(tmp)
    print("ok: TLS failures said with curl's text and detail, not as a refused connection")


def tls_refused_said(tmp):
    """Against a TLS etcd with --client-cert-auth (QA20b s26): no client
    certificate (the server's alert comes after the handshake: curl says
    "getpeername() failed" or "bad certificate"), and http:// spoken to it
    (curl: "Empty reply from server") are protocol errors, not refusals."""
    certs_dir = os.path.join(tmp, "tls-certs")
    os.mkdir(certs_dir)
    certs = make_certs(certs_dir)
    e = Etcd(tmp, "tls", tls=certs)
    ETCDS.append(e)
    cases = {"tls-nocert": (["--store-ca", certs["ca"]], "store-etcd: https://"),
             "tls-http": ([], "store-etcd: http://")}
    for name, (extra, store_said) in cases.items():
        t = Tend(tmp, name, e.url, {}, extra)
        said = f"cannot register host {name}"
        try:
            wait_until(lambda: said in t.text(), 10, f"{name}: no log line says why it cannot register")
            lines = t.text().splitlines()
            store = [ln for ln in lines if store_said in ln]
            cluster = [ln for ln in lines if said in ln]
            check(store, f"{name}: curl's error on {e.url} is not said")
            check("Connection refused" not in cluster[0] and "Protocol error" in cluster[0],
                  f"{name}: a TLS failure not said as a protocol error: {cluster[0]}")
        finally:
            t.stop()


def main():
    if not os.path.exists(ETCD):
        print(f"SKIP: no etcd binary ({ETCD}); apt-get install etcd-server", file=sys.stderr)
        sys.exit(77)
    global CGROUP_ROOT
    tmp = tempfile.mkdtemp(prefix="tend-cluster-")
    parent, _ = cgroup_usable()
    if parent:
        CGROUP_ROOT = os.path.join(parent, f"tend-it.{os.getpid()}.cluster")
        os.mkdir(CGROUP_ROOT)
    client, peer = free_port(), free_port()
    try:
        e, t, pid = unreachable_then_registered(tmp, client, peer)
        url = e.url
        published(url, t, pid)
        libcurl_only_with_store(tmp, t)
        tls_errors_said(tmp, url)
        e = short_outage(tmp, e, t, pid, url)
        leaving(tmp, t, pid, url)
        with_password(tmp, e, url)
    finally:
        for started in STARTED:
            started.stop()
        for member in ETCDS:
            member.stop()
        if CGROUP_ROOT:
            cgroup_remove(CGROUP_ROOT)
    shutil.rmtree(tmp, ignore_errors=True)
    print("ok: cluster on etcd")


if __name__ == "__main__":
    main()
