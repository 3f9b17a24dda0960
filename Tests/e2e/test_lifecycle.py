"""Graceful shutdown (SIGTERM/SIGINT, drain_timeout) and the JSON access log."""

import json
import signal
import socket
import threading
import time

import upstreams as U
from harness import free_port, gateway_config

LOG_KEYS = {"time", "route", "method", "path", "status", "upstream_status", "bytes_in", "bytes_out",
            "duration_ms", "verdict"}


def _new_connection_refused(port: int) -> tuple[bool, str]:
    """True when a new connection is refused outright or closed without any response."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
    except ConnectionRefusedError:
        return True, "refused"
    except OSError as e:
        return True, f"connect error {e}"
    with s:
        s.settimeout(2)
        try:
            s.sendall(b"GET /late HTTP/1.1\r\nHost: h\r\n\r\n")
            data = s.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True, "reset"
        except socket.timeout:
            return False, "accepted and hung (no close, no response)"
        if data == b"":
            return True, "closed"
        return False, f"served: {data[:60]!r}"


def test_sigterm_drains_inflight_request(start_gateway, start_upstream):
    up = start_upstream(("slow", 1.5))
    gw = start_gateway(gateway_config(free_port(), {"api": up.url}, limits={"drain_timeout": "8s"}))
    result = {}

    def client():
        try:
            with U.Conn(gw.port, timeout=10) as c:
                r = c.request(b"GET /inflight HTTP/1.1\r\nHost: h\r\n\r\n")
                result["status"] = r.status if r else None
                result["body"] = r.body if r else None
        except Exception as e:
            result["error"] = f"{type(e).__name__}: {e}"

    t = threading.Thread(target=client, daemon=True)
    t.start()
    assert up.wait_requests(1, 5), "the in-flight request never reached the upstream"
    t_sig = time.monotonic()
    gw.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    refused, how = _new_connection_refused(gw.port)
    t.join(timeout=10)
    assert not t.is_alive()
    assert result.get("status") == 200, f"in-flight request during drain: {result}"
    assert refused, f"new connection after SIGTERM was {how}"
    try:
        rc = gw.proc.wait(timeout=8)
    except Exception:
        rc = None
    took = time.monotonic() - t_sig
    assert rc == 0, f"exit code {rc} (stderr: {gw.stderr()[-500:]})"
    assert took < 6, f"exited {took:.1f}s after SIGTERM though the only request finished after ~1.2s"


def test_sigint_exits_0(start_gateway, start_upstream):
    up = start_upstream("echo")
    gw = start_gateway(gateway_config(free_port(), {"api": up.url}))
    assert U.one_shot(gw.port, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").status == 200
    t0 = time.monotonic()
    assert gw.stop(signal.SIGINT, timeout=8) == 0
    assert time.monotonic() - t0 < 5


def test_sigterm_with_idle_keepalive_connection_exits_promptly(start_gateway, start_upstream):
    up = start_upstream("echo")
    gw = start_gateway(gateway_config(free_port(), {"api": up.url}, limits={"drain_timeout": "20s"}))
    with U.Conn(gw.port) as c:
        assert c.request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").status == 200
        t0 = time.monotonic()
        rc = gw.stop(signal.SIGTERM, timeout=15)
        took = time.monotonic() - t0
        closed, _ = c.closed_within(1)
    assert rc == 0
    assert took < 5, f"an idle keep-alive connection held shutdown for {took:.1f}s"
    assert closed


def test_drain_timeout_bounds_shutdown(start_gateway, start_upstream):
    up = start_upstream(("slow", 20))
    gw = start_gateway(gateway_config(free_port(), {"api": up.url}, limits={"drain_timeout": "1s"}))

    def client():
        try:
            with U.Conn(gw.port, timeout=15) as c:
                c.request(b"GET /forever HTTP/1.1\r\nHost: h\r\n\r\n")
        except Exception:
            pass

    t = threading.Thread(target=client, daemon=True)
    t.start()
    assert up.wait_requests(1, 5)
    t0 = time.monotonic()
    gw.send_signal(signal.SIGTERM)
    try:
        gw.proc.wait(timeout=6)
    except Exception:
        pass
    took = time.monotonic() - t0
    assert gw.proc.poll() is not None, "still running 6 s after SIGTERM with drain_timeout 1s"
    assert took < 4, f"exited {took:.1f}s after SIGTERM (drain_timeout 1s)"


def _wait_log(gw, pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hits = [l for l in gw.log_lines() if pred(l)]
        if hits:
            return hits
        time.sleep(0.05)
    return []


def test_access_log_line_per_request(start_gateway, start_upstream):
    up = start_upstream("echo")
    gw = start_gateway(gateway_config(free_port(), {"api": up.url}, routes=[
        {"name": "logged", "match": {"path_prefix": "/logme"}, "upstream": "api", "verify": []}]))
    secrets = {
        "X-Firebase-AppCheck": "eyJfirebaseSECRETtoken.part.two",
        "X-App-Attest-Key-Id": "keyidSECRETvalue==",
        "X-App-Attest-Assertion": "assertionSECRETvalue",
        "X-App-Attest-Timestamp": "1700000000",
        "X-Apple-DeviceCheck": "devicecheckSECRETvalue",
    }
    hdrs = "".join(f"{k}: {v}\r\n" for k, v in secrets.items())
    body = b"0123456789"
    raw = (f"POST /logme/path?token=querySECRET123&x=1 HTTP/1.1\r\nHost: h\r\n{hdrs}Content-Length: 10\r\n\r\n"
           .encode() + body)
    r = U.one_shot(gw.port, raw)
    assert r.status == 200
    r404 = U.one_shot(gw.port, b"GET /unrouted?q=querySECRET404 HTTP/1.1\r\nHost: h\r\n\r\n")
    assert r404.status == 404
    hits = _wait_log(gw, lambda l: l.get("path") == "/logme/path")
    assert len(hits) == 1, f"expected one access-log line for /logme/path within 5 s; stdout:\n{gw.stdout()[-2000:]}"
    line = hits[0]
    missing = LOG_KEYS - set(line)
    assert not missing, f"access-log line lacks {missing}: {line}"
    assert line["method"] == "POST" and line["status"] == 200 and line["upstream_status"] == 200
    assert line["route"] == "logged"
    assert line.get("protocol") == "HTTP/1.1", line
    assert isinstance(line["bytes_in"], int) and line["bytes_in"] >= 10
    assert isinstance(line["bytes_out"], int) and line["bytes_out"] >= len(r.body)
    assert isinstance(line["duration_ms"], (int, float)) and line["duration_ms"] >= 0
    hits404 = _wait_log(gw, lambda l: l.get("status") == 404)
    assert len(hits404) == 1 and hits404[0].get("path") == "/unrouted", hits404
    text = gw.stdout() + gw.stderr()
    assert "querySECRET" not in text, "query string logged"
    for name, value in secrets.items():
        if "SECRET" in value:
            assert value not in text and "SECRET" not in text, f"{name} value logged"
    # The operational log (standard error) writes counts as JSON numbers, not strings.
    ops = [json.loads(l) for l in gw.stderr().splitlines() if l.startswith("{")]
    listening = [l for l in ops if l.get("msg") == "listening"]
    assert listening and all(isinstance(l["workers"], int) and l["workers"] >= 1 for l in listening), listening
