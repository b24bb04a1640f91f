#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The store contract against a real etcd (issue 20, docs/store.md §4).

Starts Debian's etcd on 127.0.0.1 with free client/peer ports and a temp
--data-dir, runs test-store-contract (the same assertions as the in-memory
run) against it, then twice more with the smoke case only: over TLS with a
client certificate (a CA, server and client certificate made with openssl
here; etcd --client-cert-auth), and with etcd user/password authentication.
Each etcd is stopped by its pid. Skips (77) only when the etcd binary is
absent.

Env: STORE_CONTRACT (the test binary), ETCD (default: etcd on PATH).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

CONTRACT = os.environ.get("STORE_CONTRACT", "")
ETCD = os.environ.get("ETCD") or shutil.which("etcd") or "/usr/bin/etcd"
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """One etcd member on loopback, owned by this test (stopped by pid)."""

    def __init__(self, tmp, name, tls=None):
        self.tmp, self.name, self.tls = tmp, name, tls
        self.client, self.peer = free_port(), free_port()
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.client}"
        peer = f"http://127.0.0.1:{self.peer}"
        args = [ETCD, "--name", name, "--data-dir", os.path.join(tmp, name + ".data"),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"{name}={peer}", "--log-level", "warn"]
        if tls:
            args += ["--cert-file", tls["server_cert"], "--key-file", tls["server_key"],
                     "--trusted-ca-file", tls["ca"], "--client-cert-auth"]
        self.log = open(os.path.join(tmp, name + ".log"), "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.wait_ready()

    def wait_ready(self):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"etcd {self.name} exited ({self.proc.returncode}); see {self.log.name}")
            try:
                with socket.create_connection(("127.0.0.1", self.client), timeout=0.2):
                    pass
                if self.tls or self.healthy():
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        sys.exit(f"etcd {self.name} not ready on {self.url} within 20 s (busy machine? "
                 f"see {self.log.name})")

    def healthy(self):
        with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
            return b'"true"' in r.read()

    def ctl(self, *args):
        env = dict(os.environ, ETCDCTL_API="3")
        subprocess.run([ETCDCTL, "--endpoints", self.url, *args], check=True, env=env,
                       stdout=subprocess.DEVNULL, timeout=30)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# Each store call answers within its bound (5 s per member and request, + 2 s):
# a run this long means a call that never answers, not a slow etcd.
CONTRACT_BOUND = 200


def run_contract(env_extra, what):
    env = dict(os.environ, TEST_STORE_BACKEND="etcd", **env_extra)
    try:
        r = subprocess.run([CONTRACT], env=env, timeout=CONTRACT_BOUND)
    except subprocess.TimeoutExpired:
        sys.exit(f"store contract on etcd ({what}) still running after {CONTRACT_BOUND} s: a store "
                 "call that never answers (a hang in store-etcd*.c?); the last [ RUN ] line "
                 "above names the case")
    if r.returncode != 0:
        sys.exit(f"store contract on etcd ({what}) failed: exit {r.returncode}")
    print(f"ok: store contract on etcd ({what})")


class BlackHole:
    """A member that accepts TCP connections and never answers (owned by this test)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def run_unanswered():
    """Every call to a silent member ends with a bounded error that names it."""
    hole = BlackHole()
    try:
        env = dict(os.environ, TEST_STORE_BACKEND="etcd", TEST_ETCD_BLACKHOLE=hole.url)
        try:
            r = subprocess.run([CONTRACT], env=env, timeout=60, stderr=subprocess.PIPE, text=True)
        except subprocess.TimeoutExpired:
            sys.exit(f"store calls to a member that never answers ({hole.url}) still waiting "
                     "after 60 s: an unbounded wait in store-etcd*.c")
        sys.stderr.write(r.stderr)
        if r.returncode != 0:
            sys.exit(f"store calls to a silent member: exit {r.returncode}")
        if f"{hole.url}/v3/" not in r.stderr or "Timeout" not in r.stderr:
            sys.exit(f"no log line naming the silent member {hole.url} and the timeout")
        if not hole.conns:
            sys.exit("the silent member was never connected to: the case tested nothing")
    finally:
        hole.close()
    print("ok: a silent member gives bounded -ETIMEDOUT errors naming it")


def grpc_counts(url):
    """etcd's gRPC calls handled so far: (all methods, LeaseKeepAlive)."""
    total = keepalive = 0
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("grpc_server_handled_total{"):
                n = int(float(line.rsplit(" ", 1)[1]))
                total += n
                if 'grpc_method="LeaseKeepAlive"' in line:
                    keepalive += n
    return total, keepalive


def read_until(proc, word, what):
    """The contract binary's stdout up to the line `word` (bounded by the run's timeout)."""
    while True:
        line = proc.stdout.readline()
        if not line:
            proc.wait(10)
            sys.exit(f"idle-lease cost: the case ended (exit {proc.returncode}) before {what}")
        sys.stdout.write(line)
        if line.strip() == word:
            return


def run_idle_cost(e):
    """An idle store holding one kept-alive lease (TTL 2 s) costs etcd only its
    keep-alives: at most one per TTL/3, counted by etcd's own gRPC metrics."""
    env = dict(os.environ, TEST_STORE_BACKEND="etcd", TEST_ETCD_ENDPOINTS=e.url,
               TEST_STORE_ONLY="test_lease_idle_cost", TEST_STORE_HANDSHAKE="1")
    proc = subprocess.Popen([CONTRACT], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    timer = threading.Timer(60, proc.kill)  # bounds every read below
    timer.start()
    try:
        read_until(proc, "idle-start", "its idle window")
        before, t0 = grpc_counts(e.url), time.monotonic()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        read_until(proc, "idle-end", "the end of its idle window")
        after, t1 = grpc_counts(e.url), time.monotonic()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        for line in proc.stdout:
            sys.stdout.write(line)
        rc = proc.wait(30)
    finally:
        timer.cancel()
    if rc != 0:
        sys.exit(f"idle-lease cost case failed: exit {rc} (killed after 60 s if negative)")
    total, keepalive = after[0] - before[0], after[1] - before[1]
    window, period = t1 - t0, 2.0 / 3
    most = int(window / period) + 1
    print(f"idle lease: {total} etcd requests ({keepalive} keep-alives) in {window:.2f} s; "
          f"TTL/3 = {period:.2f} s allows {most}")
    if total != keepalive:
        sys.exit(f"an idle store made {total - keepalive} requests besides its keep-alives")
    if keepalive > most:
        sys.exit(f"{keepalive} keep-alives in {window:.2f} s: more than one per TTL/3 ({most})")
    if keepalive < int(window / 2.0):
        sys.exit(f"only {keepalive} keep-alives in {window:.2f} s: the lease is not renewed "
                 f"often enough (expected about {most - 1}, at least one per TTL)")
    print("ok: an idle lease costs one keep-alive per TTL/3 and nothing else")


def make_certs(tmp):
    """A CA, a server certificate for 127.0.0.1 and a client certificate."""
    def ssl(*args):
        subprocess.run(["openssl", *args], check=True, cwd=tmp,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    with open(os.path.join(tmp, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
    for name in ("server", "client"):
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr")
        ssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", f"{name}.pem")
    p = lambda n: os.path.join(tmp, n)
    return {"ca": p("ca.pem"), "server_cert": p("server.pem"), "server_key": p("server.key"),
            "client_cert": p("client.pem"), "client_key": p("client.key")}


def main():
    if not os.access(ETCD, os.X_OK):
        print(f"SKIP: no etcd binary ({ETCD}); apt-get install etcd-server", file=sys.stderr)
        return 77
    if not CONTRACT:
        sys.exit("STORE_CONTRACT is not set (run through meson test)")
    tmp = tempfile.mkdtemp(prefix="tend-etcd-")
    members = []
    try:
        # 0. A member that accepts and never answers: bounded errors, no hang.
        run_unanswered()

        # 1. The whole contract; the first listed member is dead: failover.
        e = Etcd(tmp, "plain")
        members.append(e)
        # Held bound, never listening: connections are refused, and no other
        # process can take the port meanwhile (a "dead" port that came alive
        # would turn failover into timeouts).
        dead_sock = socket.socket()
        dead_sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{dead_sock.getsockname()[1]}"
        run_contract({"TEST_ETCD_ENDPOINTS": f"{dead},{e.url}"}, "plain, with failover")
        dead_sock.close()
        run_idle_cost(e)

        # 2. TLS with a client certificate.
        tls = make_certs(tmp)
        t = Etcd(tmp, "tls", tls)
        members.append(t)
        # Without the client certificate, the member refuses us: the case must fail.
        r = subprocess.run([CONTRACT], env=dict(os.environ, TEST_STORE_BACKEND="etcd",
                           TEST_ETCD_ENDPOINTS=t.url, TEST_ETCD_CA=tls["ca"],
                           TEST_STORE_ONLY="smoke"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        if r.returncode == 0:
            sys.exit("the TLS member accepted a client without a certificate")
        run_contract({"TEST_ETCD_ENDPOINTS": t.url, "TEST_ETCD_CA": tls["ca"],
                      "TEST_ETCD_CERT": tls["client_cert"], "TEST_ETCD_KEY": tls["client_key"],
                      "TEST_STORE_ONLY": "smoke"}, "TLS client certificate")
        t.stop()

        # 3. User and password (etcd auth enabled with a root user).
        e.ctl("user", "add", "root:test-root-pw")
        e.ctl("user", "grant-role", "root", "root")
        e.ctl("user", "add", "tend:test-tend-pw")
        e.ctl("role", "add", "tendrole")
        e.ctl("role", "grant-permission", "tendrole", "--prefix=true", "readwrite", "contract-")
        e.ctl("user", "grant-role", "tend", "tendrole")
        e.ctl("auth", "enable")
        run_contract({"TEST_ETCD_ENDPOINTS": e.url, "TEST_ETCD_USER": "tend",
                      "TEST_ETCD_PASSWORD": "test-tend-pw", "TEST_STORE_ONLY": "smoke"},
                     "user/password")
    finally:
        for m in members:
            m.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    # meson's timeout sends SIGTERM: raise, so the finally blocks stop the
    # test's etcd members (by pid) instead of leaving them running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
