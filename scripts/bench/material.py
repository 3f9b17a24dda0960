"""What the App Attest row sends (simulated devices and their assertion lists) and what the Play Integrity row sends
(a classic token and test keys in Play Console's format): both made with the gateway's dev tools."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import upstreams as U
from settings import AA_BUNDLE, AA_REG, AA_TEAM, PLAY_PACKAGE, Settings


def dev(tools: list[str], *args: str) -> str:
    p = subprocess.run([*tools, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(tools)} {' '.join(args[:2])} exited {p.returncode}: {p.stderr[-500:]}")
    return p.stdout


def post(port: int, target: str, body: bytes = b"", content_type: str = "") -> U.Resp | None:
    head = f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    head += f"Content-Type: {content_type}\r\n" if content_type else ""
    return U.one_shot(port, (head + "\r\n").encode() + body, timeout=10)


class AppAttest:
    """Simulated devices under a test CA: device k (dev-<k>) is wrk thread k, its assertions (GET /bench, one
    timestamp, counters from 1) in assert-<k>.jsonl for appattest.lua; dev-sanity has two, for the sanity check."""

    def __init__(self, s: Settings, tmp: Path):
        self.dir, self.timestamp = tmp / "aa", int(time.time())   # the verifier's max_skew is 24h
        self.ca, self.sanity = self.dir / "ca", self.dir / "dev-sanity"
        self.devices = [self.dir / f"dev-{k}" for k in range(s.aa_devices)]
        self.dir.mkdir()
        self.root = Path(dev(s.dev, "appattest", "ca", "--dir", str(self.ca)).strip())   # the verifier's root_ca
        if not self.root.is_file():
            raise RuntimeError("dev appattest ca printed no root certificate")
        per_device = s.aa_per_warm + s.aa_per_run
        print(f"bench: creating {s.aa_devices} simulated App Attest devices and {s.aa_devices * per_device} "
              "assertions...", flush=True)
        with ThreadPoolExecutor(max_workers=s.aa_devices + 1) as pool:
            jobs = [pool.submit(self.generate, s.dev, d, per_device) for d in self.devices]
            for job in [*jobs, pool.submit(self.generate, s.dev, self.sanity, 2)]:
                job.result()
        os.sync()

    def assertion_file(self, device: Path) -> Path:
        return self.dir / ("assert-" + device.name.removeprefix("dev-") + ".jsonl")

    def attest(self, tools: list[str], device: Path, challenge: str) -> str:
        """The registration body for the device's key (created on first use) over this challenge."""
        return dev(tools, "appattest", "attest", "--dir", str(device), "--ca", str(self.ca), "--team-id", AA_TEAM,
                   "--bundle-id", AA_BUNDLE, "--challenge", challenge)

    def generate(self, tools: list[str], device: Path, count: int) -> None:
        self.attest(tools, device, "bench-setup")
        with open(self.assertion_file(device), "w") as f:
            for first in range(1, count + 1, 10000):   # `appattest assert` prints at most 10 000 per call
                f.write(dev(tools, "appattest", "assert", "--dir", str(device), "--method", "GET", "--target", "/bench",
                            "--timestamp", str(self.timestamp), "--count", str(min(10000, count - first + 1)),
                            "--counter", str(first)))
        if sum(1 for _ in open(self.assertion_file(device))) != count:
            raise RuntimeError(f"{self.assertion_file(device)}: not {count} assertions")

    def headers(self, device: Path) -> list[list[tuple[str, str]]]:
        """The device's assertions as header fields (each line a flat JSON object of header strings)."""
        return [list(json.loads(line).items()) for line in self.assertion_file(device).read_text().splitlines()]

    def register(self, tools: list[str], device: Path, port: int) -> None:
        r = post(port, AA_REG + "/challenge")
        if r is None or r.status != 200:
            raise RuntimeError(f"POST {AA_REG}/challenge answered {r and r.status}: {r and r.body[:300]!r}")
        r = post(port, AA_REG + "/attest", self.attest(tools, device, r.json()["challenge"]).strip().encode(),
                 "application/json")
        if r is None or r.status != 201:
            raise RuntimeError(f"registering {device.name} answered {r and r.status}: {r and r.body[:300]!r}")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class PlayIntegrity:
    """Keys as Play Console gives developer-managed ones (`playintegrity keys`) and one classic token for GET /bench
    (binding: request, its nonce the request hash of GET /bench with one timestamp and an empty body), decoded in
    full on every request (classic tokens are not cached); plus the tokens the sanity check must see refused."""

    def __init__(self, s: Settings, tmp: Path):
        self.dir, self.timestamp = tmp / "play", str(int(time.time()))   # the verifier's max_skew is 24h
        dev(s.dev, "playintegrity", "keys", "--out", str(self.dir))
        self.token = self.mint(s, self.request_hash("/bench"))
        self.other_request = self.mint(s, self.request_hash("/elsewhere"))
        parts = self.token.split(".")
        self.ciphertext_bytes = len(base64.urlsafe_b64decode(parts[3] + "=" * (-len(parts[3]) % 4)))
        flipped = parts[3][:-2] + ("A" if parts[3][-2] != "A" else "B") + parts[3][-1]
        self.tampered = ".".join(parts[:3] + [flipped] + parts[4:])
        self.verifier = {"play": {
            "type": "play_integrity", "package_name": PLAY_PACKAGE, "max_skew": "24h",
            "certificate_sha256": [b64url(hashlib.sha256(b"attest-gateway test certificate").digest())],
            "decryption_key_file": str(self.dir / "decryption.key"),
            "verification_key_file": str(self.dir / "verification.key")}}

    def request_hash(self, target: str) -> str:
        client_data = f"GET\n{target}\n{self.timestamp}\n{hashlib.sha256(b'').hexdigest()}".encode()
        return b64url(hashlib.sha256(client_data).digest())

    def mint(self, s: Settings, nonce: str) -> str:
        return dev(s.dev, "playintegrity", "token", "--keys", str(self.dir), "--package", PLAY_PACKAGE,
                   "--nonce", nonce).strip()

    def headers(self, token: str) -> list[tuple[str, str]]:
        return [("X-Play-Integrity", token), ("X-Play-Integrity-Timestamp", self.timestamp)]
