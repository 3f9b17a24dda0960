"""Redis Sentinel (`state.sentinel`): a real master, a replica and a sentinel (`redis-server --sentinel`) on
127.0.0.1. The gateway asks the sentinels for the master (the first listed is down: the next is asked), with the
sentinels' own password apart from the master's ACL user; the master is SIGKILLed under load, the sentinel promotes
the replica, and the gateway follows it without a restart: limited-use tokens are accepted again, each once, and the
consumed tokens are on the promoted server. The new master is logged once."""

from __future__ import annotations

import secrets
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import upstreams as U
from harness import REDIS_SERVER_BIN, RedisServer, free_port, log_records, _resp_read
from redis_gateway import check_state, start_state_gateway, status, wait_failure
USER, PASSWORD = "gw-sentinel", "master-pass-" + secrets.token_hex(4)
SENTINEL_PASSWORD = "sentinel-pass-" + secrets.token_hex(4)


def resp(port: int, *args, password: str | None = None, timeout: float = 2.0):
    out = b""
    for command in ([("AUTH", password)] if password else []) + [args]:
        out += b"*%d\r\n" % len(command)
        for a in command:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(out)
        reader = U.Reader(s)
        if password:
            assert _resp_read(reader) == "OK"
        return _resp_read(reader)


class Sentinel:
    """`redis-server sentinel.conf --sentinel` watching `master_port` as `mymaster` (quorum 1, fast failover)."""

    def __init__(self, workdir: Path, master_port: int):
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = workdir / "sentinel.conf"
        conf.write_text(f"port {self.port}\nbind 127.0.0.1\ndir {workdir}\nrequirepass {SENTINEL_PASSWORD}\n"
                        f"sentinel monitor mymaster 127.0.0.1 {master_port} 1\n"
                        "sentinel down-after-milliseconds mymaster 500\nsentinel failover-timeout mymaster 5000\n"
                        "sentinel parallel-syncs mymaster 1\n")
        self.log = open(workdir / "sentinel.log", "ab")
        self.proc = subprocess.Popen([REDIS_SERVER_BIN, str(conf), "--sentinel"], stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=str(workdir), start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if resp(self.port, "PING", password=SENTINEL_PASSWORD) == "PONG":
                    return
            except (OSError, ValueError, AssertionError):
                time.sleep(0.05)
        raise RuntimeError("redis-sentinel did not start")

    def master(self) -> list:
        return resp(self.port, "SENTINEL", "get-master-addr-by-name", "mymaster", password=SENTINEL_PASSWORD)

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=5)
        self.log.close()


@pytest.fixture
def env(factory, tmp_path):
    master = RedisServer(tmp_path / "master")
    replica = RedisServer(tmp_path / "replica", extra_args=("--replicaof", "127.0.0.1", str(master.port)))
    factory.items += [master, replica]
    for r in (master, replica):          # ACL users are per server, not replicated
        # Without @dangerous (ROLE among it), as hardened ACLs are: the master check must still work (HELLO).
        assert r.command("ACL", "SETUSER", USER, "on", ">" + PASSWORD, "~*", "+@all", "-@dangerous") == "OK"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "master_link_status:up" not in replica.command("INFO", "replication"):
        time.sleep(0.05)
    sentinel = Sentinel(tmp_path / "sentinel", master.port)
    factory.items.append(sentinel)
    deadline = time.monotonic() + 10     # the sentinel has found the replica (it can promote it)
    while time.monotonic() < deadline and not resp(sentinel.port, "SENTINEL", "replicas", "mymaster", password=SENTINEL_PASSWORD):
        time.sleep(0.1)
    (tmp_path / "master-pw").write_text(PASSWORD + "\n")
    (tmp_path / "sentinel-pw").write_text(SENTINEL_PASSWORD + "\n")
    return SimpleNamespace(iss=factory.dev_issuer(), master=master, replica=replica, sentinel=sentinel, tmp=tmp_path)


def start(start_gateway, start_upstream, env, sentinel: dict | None = None, wait: bool = True):
    return start_state_gateway(start_gateway, start_upstream, env.iss, {
        "backend": "redis", "key_prefix": "sg:", "timeout": "300ms", "username": USER,
        "password_file": str(env.tmp / "master-pw"),
        "sentinel": sentinel or {"master": "mymaster", "nodes": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{env.sentinel.port}"],
                                 "password_file": str(env.tmp / "sentinel-pw")}}, wait=wait)


class FakeSentinel:
    """A sentinel that names `address` as the master (a stale one, or one watching another Redis), or — `frozen` —
    one that takes connections and never answers (a stopped process, a host gone)."""

    def __init__(self, address: tuple[str, int] | None = None, frozen: bool = False):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port, self.address, self.asked = self.sock.getsockname()[1], address, 0
        if not frozen:
            threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            reader = U.Reader(conn)
            while True:
                try:
                    command = _resp_read(reader)
                except (OSError, ValueError):
                    return
                if not command:
                    return
                name = command[0].upper()
                if name == "AUTH":
                    conn.sendall(b"+OK\r\n")
                elif name == "SENTINEL":
                    self.asked += 1
                    host, port = (str(x).encode() for x in self.address)
                    conn.sendall(b"*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(host), host, len(port), port))
                else:
                    conn.sendall(b"-ERR unknown\r\n")

    def close(self):
        self.sock.close()


def masters(gw) -> list[str]:
    return [l["address"] for l in log_records(gw.stderr_path, "state store master")]


def test_the_gateway_follows_a_promotion_when_the_master_is_killed_under_load(env, start_gateway, start_upstream):
    gw = start(start_gateway, start_upstream, env)
    t = env.iss.token(limited_use=True)
    assert status(gw, "/lu/first", t) == (200, None) and status(gw, "/lu/first", t) == (401, "token_replayed")
    assert masters(gw) == [f"127.0.0.1:{env.master.port}"]

    results: list[tuple[float, str, tuple]] = []
    stop = threading.Event()

    def load():
        i = 0
        while not stop.is_set() and i < 4000:                 # bounded in count and (below) in time
            tok = env.iss.token(limited_use=True)
            results.append((time.monotonic(), tok, status(gw, f"/lu/{i}", tok)))
            i += 1
            time.sleep(0.01)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    time.sleep(0.5)
    killed_at = time.monotonic()
    env.master.stop()                                          # SIGKILL
    deadline = killed_at + 30
    while time.monotonic() < deadline:
        after = [r for r in results if r[0] > killed_at]
        if len([r for r in after if r[2] == (200, None)]) >= 20 and env.sentinel.master()[1] == str(env.replica.port):
            break
        time.sleep(0.2)
    stop.set()
    worker.join(timeout=15)
    after = [r for r in results if r[0] > killed_at]
    statuses = {r[2] for r in after}
    assert statuses <= {(200, None), (503, "state_unavailable")}, statuses
    assert env.sentinel.master() == ["127.0.0.1", str(env.replica.port)], "the sentinel did not promote the replica"
    served_again = [r for r in after if r[2] == (200, None)]
    assert len(served_again) >= 20, f"not served after the failover: {len(after)} requests, {statuses}"
    # Followed, not restarted: the new master logged once, and every token accepted on it is refused again.
    assert masters(gw) == [f"127.0.0.1:{env.master.port}", f"127.0.0.1:{env.replica.port}"]
    for _, tok, _ in served_again[-10:]:
        assert status(gw, "/lu/again", tok) == (401, "token_replayed")
    keys = env.replica.command("KEYS", "sg:jti:*")
    assert len(keys) >= len(served_again), (len(keys), len(served_again))
    assert env.replica.command("ROLE")[0] == "master"
    text = gw.stderr_path.read_text()
    assert PASSWORD not in text and SENTINEL_PASSWORD not in text


def test_an_announced_switch_moves_the_gateway_before_a_call_fails(env, start_gateway, start_upstream):
    """SENTINEL FAILOVER with both servers up: the sentinel promotes the replica, turns the old master into its
    replica and kills the old master's clients. The gateway heard +switch-master and dropped its connection, so its
    first call after the failover goes to the new master (200) rather than failing on the killed connection."""
    gw = start(start_gateway, start_upstream, env)
    t = env.iss.token(limited_use=True)
    assert status(gw, "/lu/first", t) == (200, None)
    time.sleep(1.5)                      # the watcher subscribes (the first sentinel listed is down: then the next)
    assert resp(env.sentinel.port, "SENTINEL", "FAILOVER", "mymaster", password=SENTINEL_PASSWORD) == "OK"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (env.sentinel.master()[1] == str(env.replica.port)
                                               and env.master.command("ROLE")[0] == "slave"
                                               and log_records(gw.stderr_path, "state store master switch announced")):
        time.sleep(0.1)
    announced = log_records(gw.stderr_path, "state store master switch announced")
    assert [r["address"] for r in announced] == [f"127.0.0.1:{env.replica.port}"], gw.stderr_path.read_text()[-2000:]
    assert env.master.command("ROLE")[0] == "slave"
    assert status(gw, "/lu/after", env.iss.token(limited_use=True)) == (200, None)
    assert status(gw, "/lu/first", t) == (401, "token_replayed")
    assert masters(gw) == [f"127.0.0.1:{env.master.port}", f"127.0.0.1:{env.replica.port}"]
    assert not log_records(gw.stderr_path, "state store unavailable"), gw.stderr_path.read_text()[-2000:]


@pytest.mark.parametrize("kind", ["frozen", "stale"])
def test_a_frozen_or_stale_first_sentinel_does_not_keep_the_gateway_from_the_master(env, start_gateway, start_upstream, factory, kind):
    """Listed first: a sentinel that never answers costs only its share of state.timeout; one that names the replica
    (a stale sentinel, or one watching another Redis of the same name) is passed over once the named server says it
    is no master — by HELLO, which the gateway's ACL user (without @dangerous, so without ROLE) may still run."""
    fake = FakeSentinel(frozen=True) if kind == "frozen" else FakeSentinel(("127.0.0.1", env.replica.port))
    factory.items.append(fake)
    gw = start(start_gateway, start_upstream, env, sentinel={
        "master": "mymaster", "nodes": [f"127.0.0.1:{fake.port}", f"127.0.0.1:{env.sentinel.port}"],
        "password_file": str(env.tmp / "sentinel-pw")})
    for i in range(5):
        t = env.iss.token(limited_use=True)
        assert status(gw, f"/lu/{kind}{i}", t) == (200, None) and status(gw, f"/lu/{kind}{i}", t) == (401, "token_replayed")
    assert masters(gw) == [f"127.0.0.1:{env.master.port}"]
    assert env.replica.command("ROLE")[0] == "slave"               # nothing was written to the replica
    assert kind == "frozen" or fake.asked >= 1


def test_a_wrong_sentinel_password_is_logged_with_its_cause(env, start_gateway, start_upstream):
    wrong = env.tmp / "wrong-pw"
    wrong.write_text("not-the-password\n")
    gw = start(start_gateway, start_upstream, env, sentinel={"master": "mymaster", "nodes": [f"127.0.0.1:{env.sentinel.port}"],
                                                             "password_file": str(wrong)}, wait=False)
    line = wait_failure(gw, env.iss)
    assert line["cause"] == "wrongpass" and "sentinel" in line["error"], line


def test_an_unknown_master_name_is_logged_with_its_cause(env, start_gateway, start_upstream):
    gw = start(start_gateway, start_upstream, env, sentinel={"master": "nosuchmaster", "nodes": [f"127.0.0.1:{env.sentinel.port}"],
                                                             "password_file": str(env.tmp / "sentinel-pw")}, wait=False)
    assert wait_failure(gw, env.iss)["cause"] == "unknown_master"


def test_check_config_on_sentinel_settings(gateway_bin, tmp_path):
    def check(state: dict) -> tuple[int, str]:
        return check_state(gateway_bin, tmp_path, state)

    good = {"sentinel": {"master": "mymaster", "nodes": ["127.0.0.1:26379", "[::1]:26380"]}, "database": 2}
    assert check(good) == (0, "ok\n")
    code, out = check({**good, "url": "redis://127.0.0.1:6379/0"})
    assert code != 0 and "url and sentinel name the server twice" in out, out
    code, out = check({"sentinel": {"master": "m", "nodes": ["127.0.0.1"]}})
    assert code != 0 and "state.sentinel.nodes[0]" in out and "host:port" in out, out
    code, out = check({"sentinel": {"nodes": ["127.0.0.1:26379"]}})
    assert code != 0 and "master" in out, out
    code, out = check({"url": "redis://127.0.0.1:6379/0", "database": 1})
    assert code != 0 and "database applies with sentinel" in out, out
    code, out = check({**good, "ca_file": str(tmp_path / "x.pem")})
    assert code != 0 and "tls: true" in out, out
    code, out = check({**good, "sentinel": {**good["sentinel"], "password_file": str(tmp_path / "missing")}})
    assert code != 0 and "state.sentinel.password_file" in out, out
    code, out = check({**good, "sentinel": {**good["sentinel"], "username": "sentinel-user"}})
    assert code != 0 and "username needs password_file" in out, out
    code, out = check({"sentinel": {"master": "m", "nodes": ["127.0.0.1:26379", "127.0.0.1:26379"]}})
    assert code != 0 and "listed twice" in out, out
