#!/usr/bin/env python3
"""User-space instructions per proxied request, counted by callgrind: a deterministic figure for the request path
(CPU µs in scripts/bench.sh is the kernel-inclusive, noisy one). Builds nothing; docs/performance.md "Instructions".

    swift build -c release -Xswiftc -gnone -Xswiftc -warnings-as-errors --product attest-gateway
    GATEWAY_BIN=$PWD/.build/release/attest-gateway scripts/instructions.py

One gateway (`serve --workers 1`) runs under `valgrind --tool=callgrind --instr-atstart=no` in front of nginx
`return 200` (48-byte body; its own process, not measured). Per row: a warm-up with instrumentation off (fills the
upstream pool), then `callgrind_control --instr=on`, N requests by h2load on one keep-alive connection, one at a
time, `--instr=off`, a dump; Ir of that dump / N. Rows: h1 (plain HTTP/1.1), h1-tls (TLS listener), h1-tls-up
(an https upstream), h2c (HTTP/2 prior knowledge, one stream at a time), h2-tls (HTTP/2 over TLS, ALPN), rs256 and rs256-cached (an App Check
route: N distinct RS256 tokens, or one token N times; sent by a small keep-alive client here, since h2load sends
one header set). Environment: GATEWAY_BIN, N (2000), ROWS (the first four, comma-separated), NGINX_BIN, KEEP (a
directory: the dumps are copied there as <row>.callgrind, for callgrind_annotate). Also per request: calls into the C
allocator (malloc, calloc, realloc, posix_memalign), counted from the same dump's call edges.
"""
import os, re, shutil, socket, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests" / "e2e"))
sys.path.insert(1, str(Path(__file__).resolve().parent / "bench"))
from harness import free_port, wait_listening, yaml_dump  # noqa: E402

BIN = os.environ.get("GATEWAY_BIN", ".build/release/attest-gateway")
N = int(os.environ.get("N", "2000"))
ROWS = os.environ.get("ROWS", "h1,h1-tls,h1-tls-up,h2c").split(",")
NGINX = os.environ.get("NGINX_BIN") or shutil.which("nginx") or "/usr/sbin/nginx"
tmp = Path(tempfile.mkdtemp(prefix="instructions."))
procs = []


def start(args, **kw):
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True, **kw)
    procs.append(p)
    return p


ALLOCATORS = re.compile(r"^(?:__libc_)?(?:malloc|calloc|realloc|posix_memalign|aligned_alloc|memalign)$")


def allocations(dump: str) -> int:
    """Calls into the C allocator recorded in a callgrind dump (every Swift and OpenSSL allocation ends there): the
    `calls=` counts of call edges whose callee (`cfn=`, names compressed as `(id) name` on first use) is one."""
    names, callee, total = {}, None, 0
    for line in dump.splitlines():
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line)
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3).split("'")[0]
            callee = names.get(m.group(2)) if m.group(1) == "cfn" else None
        elif line.startswith("calls=") and callee is not None:
            if ALLOCATORS.match(callee):
                total += int(line[6:].split()[0])
            callee = None
    return total


def h2load(url, n, h1):
    args = ["h2load", "-n", str(n), "-c", "1", "-m", "1"] + (["--h1"] if h1 else []) + [url]
    out = subprocess.run(args, capture_output=True, text=True, timeout=600).stdout
    ok = re.search(r"(\d+) succeeded", out)
    status = re.search(r"status codes: (\d+) 2xx", out)
    if not ok or int(ok.group(1)) != n or not status or int(status.group(1)) != n:
        sys.exit(f"h2load did not get {n} 2xx answers from {url}:\n{out}")


def appcheck_requests(port, tokens):
    """One request per token on one keep-alive connection, each answered 200 before the next goes."""
    with socket.create_connection(("127.0.0.1", port)) as conn:
        reader = conn.makefile("rb")
        for token in tokens:
            conn.sendall(f"GET /fb/bench HTTP/1.1\r\nHost: x\r\nX-Firebase-AppCheck: {token}\r\n\r\n".encode())
            status, length = reader.readline(), 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)
            if b" 200 " not in status:
                sys.exit(f"the App Check route answered {status!r}")


try:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-days", "1",
                    "-keyout", tmp / "key.pem", "-out", tmp / "cert.pem"], check=True, capture_output=True)
    up, up_tls, h1, h1_tls, h2c, h2_tls = (free_port() for _ in range(6))
    (tmp / "nginx.conf").write_text(f"""daemon off; master_process off; worker_processes 1; pid {tmp}/nginx.pid;
error_log {tmp}/nginx.err; events {{}}
http {{ access_log off; keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{up}; listen 127.0.0.1:{up_tls} ssl; ssl_certificate {tmp}/cert.pem;
    ssl_certificate_key {tmp}/key.pem; location / {{ return 200 "0123456789abcdef0123456789abcdef0123456789abcde\\n"; }} }} }}
""")
    nginx = start([NGINX, "-c", tmp / "nginx.conf", "-p", tmp], stderr=subprocess.DEVNULL)
    wait_listening(up, nginx, 10, "nginx")
    tls = {"certificate": str(tmp / "cert.pem"), "private_key": str(tmp / "key.pem")}
    route = {"match": {"path_prefix": "/"}, "verify": []}
    appcheck = any(r.startswith("rs256") for r in ROWS)
    if appcheck:
        from mint_tokens import mint  # noqa: E402 (needs the bench's Python packages)
        minted = mint(tmp / "tokens", N + 200, 0)
        distinct = (tmp / "tokens" / "distinct.jwt").read_text().split()
    cfg = {
        "version": 1,
        "listeners": [{"name": "h1", "address": f"127.0.0.1:{h1}"}, {"name": "tls", "address": f"127.0.0.1:{h1_tls}", "tls": tls},
                      {"name": "h2c", "address": f"127.0.0.1:{h2c}", "http2": True},
                      {"name": "h2-tls", "address": f"127.0.0.1:{h2_tls}", "tls": tls, "http2": True}],
        "state": {"backend": "memory"},
        "upstreams": {"api": {"url": f"http://127.0.0.1:{up}", "max_idle_connections": 16},
                      "secure": {"url": f"https://localhost:{up_tls}", "ca_file": str(tmp / "cert.pem")}},
        "verifiers": {"fb": {"type": "app_check", "project_number": "123456789012", "project_id": "demo-project",
                             "jwks_file": str(tmp / "tokens" / "jwks.json")}} if appcheck else None,
        "routes": [dict(route, name="secure", match={"path_prefix": "/secure"}, upstream="secure"),
                   *([dict(route, name="fb", match={"path_prefix": "/fb"}, upstream="api", verify=["fb"])] if appcheck else []),
                   dict(route, name="api", upstream="api")],
    }
    (tmp / "gateway.yml").write_text(yaml_dump({k: v for k, v in cfg.items() if v is not None}) + "\n")
    gw = start(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={tmp}/cg.out",
                BIN, "serve", "--config", tmp / "gateway.yml", "--workers", "1"],
               stdout=subprocess.DEVNULL, stderr=open(tmp / "gateway.err", "wb"), cwd=tmp)
    try:
        wait_listening(h1, gw, 120, "attest-gateway under callgrind")
    except RuntimeError:
        sys.exit((tmp / "gateway.err").read_text()[-2000:])
    urls = {"h1": (f"http://127.0.0.1:{h1}/bench", True), "h1-tls": (f"https://127.0.0.1:{h1_tls}/bench", True),
            "h1-tls-up": (f"http://127.0.0.1:{h1}/secure/bench", True), "h2c": (f"http://127.0.0.1:{h2c}/bench", False),
            "h2-tls": (f"https://127.0.0.1:{h2_tls}/bench", False)}
    control = ["callgrind_control", str(gw.pid)]
    print(f"{'row':10} {'Ir/request':>12} {'allocs/request':>14}   (N={N}, {BIN})")
    for dump, row in enumerate(ROWS, start=1):
        if row.startswith("rs256"):
            warm, measured = (distinct[N:], distinct[:N]) if row == "rs256" else ([minted.repeated] * 200, [minted.repeated] * N)
            drive = lambda tokens: appcheck_requests(h1, tokens)  # noqa: E731
        else:
            url, is_h1 = urls[row]
            warm, measured, drive = 200, N, lambda n: h2load(url, n, is_h1)  # noqa: E731
        drive(warm)
        subprocess.run(control + ["--instr=on"], check=True, capture_output=True)
        drive(measured)
        subprocess.run(control + ["--instr=off"], check=True, capture_output=True)
        subprocess.run(control + [f"--dump={row}"], check=True, capture_output=True)
        path = tmp / f"cg.out.{dump}"
        for _ in range(100):
            if path.exists() and "totals:" in path.read_text(errors="replace"):
                break
            time.sleep(0.1)
        dump_text = path.read_text(errors="replace")
        ir = int(re.search(r"^totals: (\d+)", dump_text, re.M).group(1))
        print(f"{row:10} {ir / N:12.0f} {allocations(dump_text) / N:14.2f}", flush=True)
        if os.environ.get("KEEP"):
            Path(os.environ["KEEP"]).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(os.environ["KEEP"]) / f"{row}.callgrind")
finally:
    for p in reversed(procs):
        try:
            os.killpg(p.pid, 9)   # the group this script started, by its id
        except ProcessLookupError:
            pass
        p.wait()
    shutil.rmtree(tmp, ignore_errors=True)
