"""What the verifying rows send: RS256 App Check tokens (mint_tokens.py), App Attest devices and their assertion
lists (the gateway's dev tools), and the TLS certificate of the h2 TLS rows (the e2e suite's test CA)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import apple_fakes
import upstreams as U
from settings import AA_BUNDLE, AA_REG, AA_TEAM, HERE, Settings, dev_command, die


@dataclass(frozen=True)
class Tokens:
    dir: Path                # jwks.json and public.pem beside the lists
    distinct: Path           # the measured runs' list, one token per line
    lu_warmup: Path | None   # the limited-use rows' warm-up list (never in a measured run)
    repeated: str            # one valid token without a jti
    bad: str                 # the repeated token with one signature character changed
    first_distinct: str
    lu_fresh: str | None     # the last warm-up token: for the limited-use sanity check


def mint_tokens(s: Settings, tmp: Path) -> Tokens:
    out = tmp / "tokens"
    out.mkdir()
    print(f"bench: minting an RSA-2048 key and {s.tokens + s.lu_warm} distinct RS256 tokens ({os.cpu_count()} "
          "processes)...", flush=True)
    minter = [sys.executable, str(HERE / "mint_tokens.py"), str(out), str(s.tokens), str(s.lu_warm)]
    if subprocess.run(minter).returncode:
        die("token minting failed")
    os.sync()   # written back now, not during the first measured runs
    distinct, warm = token_list(out / "distinct.jwt", s.tokens), s.lu and token_list(out / "lu-warmup.jwt", s.lu_warm)
    return Tokens(out, out / "distinct.jwt", out / "lu-warmup.jwt" if s.lu else None,
                  (out / "repeated.jwt").read_text().strip(), (out / "bad.jwt").read_text().strip(), distinct[0],
                  warm[1] if warm else None)


def token_list(path: Path, count: int) -> tuple[str, str]:
    """The first and the last token of a list that must hold `count`."""
    n, first, last = 0, "", ""
    with open(path) as f:
        for n, last in enumerate(f, 1):
            first = first or last.strip()
    if n != count:
        die(f"{path}: {n} tokens, not {count}")
    return first, last.strip()


def tls_pair(tmp: Path) -> tuple[Path, Path]:
    """A P-256 certificate for 127.0.0.1 and localhost and its key (certificate, key)."""
    try:
        tls = apple_fakes.make_tls(tmp / "tls")
    except subprocess.CalledProcessError as e:
        die(f"openssl could not make the bench certificate: {e.stderr.decode(errors='replace')}")
    return tls.cert, tls.key


def dev(*args: str, timeout: float = 120.0) -> str:
    p = subprocess.run(dev_command(*args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        die(f"dev {' '.join(args[:2])} exited {p.returncode}: {p.stderr[-500:]}")
    return p.stdout


@dataclass(frozen=True)
class AppAttest:
    dir: Path                # assert-<k>.jsonl for wrk thread k (appattest.lua), the devices, the CA
    ca: Path                 # the simulated CA's directory
    root: Path               # its root certificate, the verifier's root_ca
    devices: list[Path]      # dev-0 … : device k is wrk thread k; assert-<k>.jsonl beside it
    sanity: Path             # one more device, two assertions: for the sanity check
    timestamp: int           # of every assertion (the verifier's max_skew is 24h)

    def assertion_file(self, device: Path) -> Path:
        return self.dir / ("assert-" + device.name.removeprefix("dev-") + ".jsonl")


def attest(aa: AppAttest, device: Path, challenge: str) -> str:
    """The registration body for the device's key (created on first use) over this challenge."""
    return dev("appattest", "attest", "--dir", str(device), "--ca", str(aa.ca), "--team-id", AA_TEAM,
               "--bundle-id", AA_BUNDLE, "--challenge", challenge)


def generate_assertions(aa: AppAttest, device: Path, count: int) -> None:
    """Creates the device's key (each gateway registers it again) and `count` assertions, counters 1..count."""
    attest(aa, device, "bench-setup")
    out = aa.assertion_file(device)
    with open(out, "w") as f:
        for first in range(1, count + 1, 10000):   # `dev appattest assert` prints at most 10 000 per call
            f.write(dev("appattest", "assert", "--dir", str(device), "--method", "GET", "--target", "/bench",
                        "--timestamp", str(aa.timestamp), "--count", str(min(10000, count - first + 1)),
                        "--counter", str(first)))
    if sum(1 for _ in open(out)) != count:
        die(f"{out}: not {count} assertions")


def make_app_attest(s: Settings, tmp: Path) -> AppAttest:
    root = tmp / "aa"
    root.mkdir()
    ca_root = Path(dev("appattest", "ca", "--dir", str(root / "ca")).strip())
    if not ca_root.is_file():
        die("dev appattest ca printed no root certificate")
    aa = AppAttest(root, root / "ca", ca_root, [root / f"dev-{k}" for k in range(s.aa_devices)], root / "dev-sanity",
                   int(time.time()))
    per_device = s.aa_per_warm + s.aa_per_run
    print(f"bench: creating {s.aa_devices} simulated App Attest devices and {s.aa_devices * per_device} assertions...",
          flush=True)
    with ThreadPoolExecutor(max_workers=s.aa_devices + 1) as pool:
        jobs = [pool.submit(generate_assertions, aa, d, per_device) for d in aa.devices]
        jobs.append(pool.submit(generate_assertions, aa, aa.sanity, 2))
        for job in jobs:
            job.result()
    os.sync()
    return aa


def assertion_headers(line: str) -> list[tuple[str, str]]:
    """One line of `dev appattest assert` (a flat JSON object of header strings) as header fields."""
    return list(json.loads(line).items())


def post(port: int, target: str, body: bytes = b"", content_type: str | None = None) -> U.Resp | None:
    head = f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    if content_type:
        head += f"Content-Type: {content_type}\r\n"
    return U.one_shot(port, (head + "\r\n").encode() + body, timeout=10)


def register_device(aa: AppAttest, device: Path, port: int) -> None:
    """Registers the device's key with the gateway on port (new challenge, same key); dies unless 201."""
    r = post(port, AA_REG + "/challenge")
    if r is None or r.status != 200:
        die(f"gw-appattest-sqlite: POST {AA_REG}/challenge answered {r and r.status}: {r and r.body[:300]!r}")
    r = post(port, AA_REG + "/attest", attest(aa, device, r.json()["challenge"]).strip().encode(), "application/json")
    if r is None or r.status != 201:
        die(f"gw-appattest-sqlite: registering {device.name} answered {r and r.status}: {r and r.body[:300]!r}")
