# SPDX-License-Identifier: MIT
"""A 3-member etcd cluster on loopback and a TCP proxy that can black-hole,
both owned by the test (issue 20's trials, docs/cluster.md §8).

EtcdCluster: three members of Debian's etcd-server on free loopback ports
(never 2379/2380), one temp data dir each; members are stopped, killed and
restarted in place by pid (a restarted member rejoins from its data dir).

Proxy: one per tend, a listening port per member, each forwarding to that
member's client port with two threads per connection. blackhole(mode):
  "freeze": stop forwarding — bytes read already are held, the rest stays in
            the sockets' buffers (a partition TCP outlives: on restore() every
            held byte is delivered, late);
  "drop":   read and discard — nothing reaches either side (a partition that
            breaks the connections: restore() closes every connection that lost
            bytes, as a peer would reset it).
Either way a new connection is accepted and then hears nothing until
restore(). The proxy notes when it last forwarded a lease keep-alive request
(`POST /v3/lease/keepalive`): etcd renews the lease after that, so the lease
cannot end on etcd before last_keepalive + TTL.
"""
import base64
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request

from test_store_etcd import ETCD, ETCDCTL, free_port  # noqa: F401  (ETCDCTL re-exported)

CTL_ENV = dict(os.environ, ETCDCTL_API="3")


class Member:
    def __init__(self, cluster, name):
        self.cluster, self.name = cluster, name
        self.client, self.peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.client}"
        self.peer_url = f"http://127.0.0.1:{self.peer}"
        self.proc = None
        self.log = open(os.path.join(cluster.tmp, name + ".log"), "a")

    def start(self):
        args = [ETCD, "--name", self.name, "--data-dir", os.path.join(self.cluster.tmp, self.name + ".data"),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
                "--initial-cluster", self.cluster.initial, "--initial-cluster-token", self.cluster.token,
                "--log-level", "warn"]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def send(self, sig):
        if self.running():
            self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM):
        """Ends the member (by pid) and reaps it; bounded."""
        if not self.running():
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(sig)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def healthy(self):
        """True when this member answers /health with a leader behind it."""
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                return b'"true"' in r.read()
        except OSError:
            return False


class EtcdCluster:
    """Three members m1..m3; stop() ends them all (by pid) whatever failed."""

    def __init__(self, tmp, n=3):
        self.tmp = tmp
        self.token = f"tend-trials-{os.getpid()}"
        self.members = [Member(self, f"m{i + 1}") for i in range(n)]
        self.initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for m in self.members:
            m.start()
        try:
            self.wait_healthy(self.members, 30, "the new 3-member cluster")
        except AssertionError:
            self.stop()
            raise

    @property
    def urls(self):
        return [m.url for m in self.members]

    def wait_healthy(self, members, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in members:
                if m.proc.poll() is not None:
                    raise AssertionError(f"etcd {m.name} exited ({m.proc.returncode}) during {what}; "
                                         f"see {m.log.name}")
            if all(m.healthy() for m in members):
                return time.monotonic()
            time.sleep(0.05)
        raise AssertionError(f"etcd: {what}: not every member of {[m.name for m in members]} healthy within "
                             f"{timeout} s (no quorum? busy machine? see {self.tmp}/m*.log)")

    def live_urls(self):
        return [m.url for m in self.members if m.running()]

    def leader(self):
        """The member that leads now (etcdctl endpoint status), or None."""
        r = subprocess.run([ETCDCTL, "--endpoints", ",".join(self.live_urls()), "endpoint", "status",
                            "-w", "json"], env=CTL_ENV, capture_output=True, timeout=20)
        ids = {}
        lead = None
        for st in json.loads(r.stdout or b"[]"):
            ids[st["Status"]["header"]["member_id"]] = st["Endpoint"]
            lead = st["Status"].get("leader") or lead  # absent: this member knows none
        return next((m for m in self.members if ids.get(lead) == m.url), None)

    def move_leader(self, member, timeout=20):
        """Makes member the leader (etcdctl move-leader, asked of the leader); bounded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lead = self.leader()
            if lead is member:
                return
            r = subprocess.run([ETCDCTL, "--endpoints", ",".join(self.live_urls()), "endpoint", "status",
                                "-w", "json"], env=CTL_ENV, capture_output=True, timeout=20)
            ids = {st["Endpoint"]: st["Status"]["header"]["member_id"] for st in json.loads(r.stdout or b"[]")}
            if lead and member.url in ids:
                subprocess.run([ETCDCTL, "--endpoints", lead.url, "move-leader", "%x" % ids[member.url]],
                               env=CTL_ENV, capture_output=True, timeout=20)
            time.sleep(0.2)
        raise AssertionError(f"etcd: {member.name} did not become the leader within {timeout} s")

    def restart(self, members, timeout=30):
        for m in members:
            m.start()
        return self.wait_healthy(self.members, timeout, "members restarted: " + " ".join(m.name for m in members))

    def writable(self, timeout, members=None):
        """Seconds until a linearisable write (quorum and a leader) succeeds; bounded.
        members: asked only of those (e.g. not a hung one); default every live member."""
        t0 = time.monotonic()
        urls = [m.url for m in members] if members else None
        while time.monotonic() < t0 + timeout:
            r = subprocess.run([ETCDCTL, "--endpoints", ",".join(urls or self.live_urls()), "--command-timeout", "1s",
                                "put", "trials-probe", "x"], env=CTL_ENV, capture_output=True, timeout=20)
            if r.returncode == 0:
                return time.monotonic() - t0
            time.sleep(0.02)
        raise AssertionError(f"etcd: no write succeeded within {timeout} s (no quorum? see {self.tmp}/m*.log)")

    def stop(self):
        for m in self.members:
            m.stop()
            m.log.close()

    def get(self, key, prefix=False):
        """{key: kv} of etcd's own answer (value decoded), from any live member."""
        args = [ETCDCTL, "--endpoints", ",".join(self.live_urls()), "get", "-w", "json", key]
        r = subprocess.run(args + (["--prefix"] if prefix else []), env=CTL_ENV, capture_output=True,
                           timeout=20, check=True)
        out = {}
        for kv in json.loads(r.stdout).get("kvs", []):
            kv["value"] = base64.b64decode(kv.get("value", "")).decode()
            out[base64.b64decode(kv["key"]).decode()] = kv
        return out

    def txn_guarded(self, key, token, put_key):
        """A write guarded by a fencing token (the key's create revision): SUCCESS or FAILURE."""
        script = f'create("{key}") = "{token}"\n\nput {put_key} {token}\n\n\n'
        r = subprocess.run([ETCDCTL, "--endpoints", ",".join(self.live_urls()), "txn"], input=script.encode(),
                           capture_output=True, env=CTL_ENV, timeout=20, check=True)
        return r.stdout.decode().split()[0]


# ---- the proxy ----

class _Conn:
    def __init__(self, proxy, client, upstream_port):
        self.proxy, self.client, self.port = proxy, client, upstream_port
        self.upstream = None
        self.dropped = False
        self.closed = False

    def close(self, reset=False):
        with self.proxy.lock:
            if self.closed:
                return
            self.closed = True
            self.proxy.conns.discard(self)
        for s in (self.client, self.upstream):
            if s is None:
                continue
            if reset:  # RST, as a peer that lost the connection
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            try:  # wakes the pump reading it; SHUT_RD sends nothing, so the close resets
                s.shutdown(socket.SHUT_RD if reset else socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def run(self):
        if not self.proxy.wait_open(self, self.client):
            return
        try:
            self.upstream = socket.create_connection(("127.0.0.1", self.port), timeout=2)
            self.upstream.settimeout(None)
        except OSError:  # the member is down: the client sees its connection reset
            self.close(reset=True)
            return
        threading.Thread(target=self.pump, args=(self.upstream, self.client, False), daemon=True).start()
        self.pump(self.client, self.upstream, True)

    def pump(self, src, dst, to_member):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    if not self.closed:  # a half-close goes on; ours (close()) does not
                        dst.shutdown(socket.SHUT_WR)
                    return
                if not self.proxy.pass_bytes(self, src):
                    continue  # dropped
                if to_member and b"/v3/lease/keepalive" in data:
                    self.proxy.last_keepalive = time.time()
                dst.sendall(data)
        except OSError:
            self.close()


class Proxy:
    """Forwards 127.0.0.1:ports[i] → 127.0.0.1:upstreams[i]; can black-hole."""

    def __init__(self, upstreams):
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.mode = None  # None: forwarding; "freeze", "drop" or "refuse"
        self.conns = set()
        self.last_keepalive = 0.0
        self.listeners = []
        for up in upstreams:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", 0))
            s.listen(64)
            self.listeners.append(s)
            threading.Thread(target=self.accept, args=(s, up), daemon=True).start()
        self.ports = [s.getsockname()[1] for s in self.listeners]

    def accept(self, lsock, port):
        while True:
            try:
                c, _ = lsock.accept()
            except OSError:
                return  # closed
            conn = _Conn(self, c, port)
            with self.lock:
                self.conns.add(conn)
            threading.Thread(target=conn.run, daemon=True).start()

    def wait_open(self, conn, src):
        """A new connection: held (freeze) or drained (drop) while black-holed;
        one that lost bytes is reset at restore. True: forward it."""
        src.settimeout(0.2)
        try:
            while True:
                with self.lock:
                    if conn.closed:
                        return False
                    if self.mode is None:
                        break
                    if self.mode == "refuse":  # as a host whose etcd port is closed: reset at once
                        conn.dropped = True
                        break
                    if self.mode == "freeze":
                        self.cond.wait()
                        continue
                conn.dropped = True
                try:
                    if not src.recv(65536):
                        conn.close()
                        return False
                except socket.timeout:
                    pass
            src.settimeout(None)
        except OSError:
            conn.close()
            return False
        if conn.dropped:
            conn.close(reset=True)
            return False
        return True

    def pass_bytes(self, conn, src):
        """Whether bytes just read go on: waits while frozen, False while dropping."""
        with self.lock:
            while self.mode == "freeze" and not conn.closed:
                self.cond.wait()
            if self.mode in ("drop", "refuse"):
                conn.dropped = True
                return False
            return not conn.closed

    def blackhole(self, mode="freeze"):
        """freeze: bytes held; drop: bytes lost (both: the client waits);
        refuse: every connection reset at once (the client fails fast)."""
        assert mode in ("freeze", "drop", "refuse")
        with self.lock:
            self.mode = mode
            live = [c for c in self.conns] if mode == "refuse" else []
        for c in live:
            c.close(reset=True)
        return time.time()

    def restore(self):
        with self.lock:
            self.mode = None
            self.cond.notify_all()
            lost = [c for c in self.conns if c.dropped]
        for c in lost:
            c.close(reset=True)
        return time.time()

    def close(self):
        for s in self.listeners:
            s.close()
        self.restore()
        for c in list(self.conns):
            c.close()
