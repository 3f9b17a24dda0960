#!/usr/bin/env python3
"""The WebSocket rows' two ends, PyPI `websockets` (asyncio, no compression, no pings): `serve PORT` echoes every
message back on its connection; `client URL --connections C --messages N --seconds S --bytes B` opens C connections
at once and sends N binary messages in all (N/C on each), each awaiting its echo before the next, until all are
echoed or S seconds have passed, then prints one line `bench-ws: {json}`: the messages echoed, the seconds they took
(the handshakes included), round-trip latency (mean, p50, p99, max µs) and errors (a wrong or missing echo, a failed
handshake, a closed connection: any makes the run INVALID)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time

try:   # websockets ≥ 13: the asyncio implementation; older: the legacy one, the same calls
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import serve
except ImportError:   # pragma: no cover
    from websockets import connect, serve
from websockets.exceptions import ConnectionClosed

OPTIONS = {"compression": None, "ping_interval": None, "max_size": 1 << 20}


async def echo(ws) -> None:
    try:
        async for message in ws:
            await ws.send(message)
    except ConnectionClosed:
        pass


async def server(port: int) -> None:
    async with serve(echo, "127.0.0.1", port, **OPTIONS) as running:
        await running.serve_forever()


async def one(url: str, k: int, count: int, size: int, deadline: float, rtts: list[float], errors: list[str]) -> None:
    try:
        async with connect(url, open_timeout=5, close_timeout=2, **OPTIONS) as ws:
            for i in range(count):
                if time.monotonic() > deadline:
                    return
                message = f"{k}:{i}:".encode().ljust(size, b"x")
                start = time.perf_counter()
                await ws.send(message)
                reply = await asyncio.wait_for(ws.recv(), timeout=5)
                rtts.append(time.perf_counter() - start)
                if reply != message:
                    errors.append(f"connection {k}, message {i}: the echo differs ({bytes(reply)[:40]!r})")
                    return
    except (OSError, asyncio.TimeoutError, ConnectionClosed, Exception) as e:   # any failure is reported, not raised
        errors.append(f"connection {k}: {type(e).__name__}: {e}"[:300])


async def client(a: argparse.Namespace) -> dict:
    rtts: list[float] = []
    errors: list[str] = []
    shares = [a.messages // a.connections + (k < a.messages % a.connections) for k in range(a.connections)]
    start = time.perf_counter()
    deadline = time.monotonic() + a.seconds
    await asyncio.gather(*(one(a.url, k, n, a.bytes, deadline, rtts, errors) for k, n in enumerate(shares)))
    took, rtts = time.perf_counter() - start, sorted(rtts)

    def pct(p: float) -> float | None:
        return rtts[min(len(rtts) - 1, int(len(rtts) * p))] * 1e6 if rtts else None
    return {"messages": len(rtts), "asked": a.messages, "seconds": took, "connections": a.connections,
            "mean_us": sum(rtts) / len(rtts) * 1e6 if rtts else None, "p50_us": pct(0.50), "p99_us": pct(0.99),
            "max_us": rtts[-1] * 1e6 if rtts else None, "errors": errors[:5], "error_count": len(errors)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("serve").add_argument("port", type=int)
    c = sub.add_parser("client")
    c.add_argument("url")
    c.add_argument("--connections", type=int, default=4)
    c.add_argument("--messages", type=int, default=20000)
    c.add_argument("--seconds", type=float, default=10.0)
    c.add_argument("--bytes", type=int, default=32)
    a = parser.parse_args()
    if a.mode == "serve":
        asyncio.run(server(a.port))
    else:
        print("bench-ws: " + json.dumps(asyncio.run(client(a))), flush=True)


if __name__ == "__main__":
    main()
