"""deploy/ without kubectl or a container engine.

- Kubernetes: every YAML document under deploy/ parses and is a well-formed object; every container has an image
  and resource limits; the gateway's probes hit /healthz and /readyz on the admin port of the gateway.yml it
  mounts, which `attest-gateway check-config` accepts; Services never expose the admin port, except a metrics
  Service (labelled app.kubernetes.io/component: metrics) for Prometheus, which is headless and carries the admin
  port alone; replicas that need state share it through Redis. deploy/prometheus/ holds Prometheus rule files, not
  Kubernetes objects (test_monitoring_deploy.py checks them).
- systemd: the unit carries the hardening chosen for it (and `systemd-analyze verify` has nothing to say, where
  it is installed).
- Containerfile: the build stage runs the Makefile's `make build` steps (the target the README names), the runtime
  stage installs the Debian package of every C library the binary links, never gets the development tools
  (attest-gateway-dev), and it agrees with the manifests on the user, the ports and the configuration path.

Needs PyYAML (`scripts/install-deps.sh test` installs it). Nothing is built or started except
`attest-gateway check-config` and `systemd-analyze verify`.
"""

from __future__ import annotations

import base64
import os
import json
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest
import yaml

from harness import REPO, run_cli

DEPLOY = REPO / "deploy"
CONTAINERFILE = DEPLOY / "Containerfile"
UNIT = DEPLOY / "systemd" / "attest-gateway.service"
MANIFESTS = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml") and DEPLOY / "prometheus" not in p.parents)
POD_OWNERS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


# ----------------------------------------------------------------------------------------------------------------
# Kubernetes


def _documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _pod_specs(docs: list[dict]):
    """(owner, pod template metadata, pod spec) for every workload in docs."""
    for d in docs:
        if d["kind"] == "Pod":
            yield d, d.get("metadata", {}), d["spec"]
        elif d["kind"] in POD_OWNERS:
            template = d["spec"]["template"]
            yield d, template.get("metadata", {}), template["spec"]


def _is_gateway(container: dict) -> bool:
    return "attest-gateway" in container.get("image", "")


def _arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def _seconds(duration: str) -> float:
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", duration)
    assert m, f"not a duration: {duration!r}"
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _cpus(quantity) -> float:
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _config_sources(docs: list[dict]) -> dict[tuple[str, str], dict[str, str]]:
    """(kind, name) -> {key: text} for every ConfigMap and Secret in docs."""
    out = {}
    for d in docs:
        if d["kind"] == "ConfigMap":
            out[("ConfigMap", d["metadata"]["name"])] = dict(d.get("data") or {})
        elif d["kind"] == "Secret":
            data = {k: base64.b64decode(v).decode() for k, v in (d.get("data") or {}).items()}
            out[("Secret", d["metadata"]["name"])] = data | dict(d.get("stringData") or {})
    return out


def _mounted_file(path: str, container: dict, pod: dict, sources: dict) -> str:
    """The text of the file at `path` in `container`, from the ConfigMap or Secret volume mounted there."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        if mount.get("subPath"):
            key_path = mount["subPath"] if path == mount["mountPath"] else None
        else:
            rel = PurePosixPath(path).relative_to(mount["mountPath"]) if path.startswith(mount["mountPath"] + "/") else None
            key_path = str(rel) if rel else None
        if key_path is None:
            continue
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            ref, kind, name = volume["configMap"], "ConfigMap", volume["configMap"]["name"]
        elif "secret" in volume:
            ref, kind, name = volume["secret"], "Secret", volume["secret"]["secretName"]
        else:
            continue
        keys = {item["path"]: item["key"] for item in ref.get("items", [])} or None
        key = keys[key_path] if keys else key_path
        assert (kind, name) in sources, f"{kind} {name} is not defined next to the workload that mounts it"
        return sources[(kind, name)][key]
    raise AssertionError(f"nothing mounted at {path} in container {container['name']}")


def _container_environment(container: dict, sources: dict) -> dict[str, str]:
    """The variables Kubernetes sets in `container` from its `env` (a `value`, or a `secretKeyRef` /
    `configMapKeyRef` to a Secret or ConfigMap defined in the same file)."""
    out = {}
    for e in container.get("env", []):
        if "value" in e:
            out[e["name"]] = str(e["value"])
            continue
        ref = e.get("valueFrom", {})
        for key, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
            if key in ref:
                source = sources.get((kind, ref[key]["name"]))
                assert source is not None and ref[key]["key"] in source, f"{container['name']}: {e['name']} names no {kind} key"
                out[e["name"]] = source[ref[key]["key"]]
    return out


def _gateways(path: Path):
    """(owner, pod metadata, pod spec, gateway container, parsed gateway.yml, its text) for each gateway in path."""
    docs = _documents(path)
    sources = _config_sources(docs)
    for owner, meta, pod in _pod_specs(docs):
        for c in pod["containers"]:
            if _is_gateway(c):
                args = c.get("args", [])
                assert args[:1] == ["serve"], f"{c['name']}: args should start with serve: {args}"
                text = _mounted_file(_arg(args, "--config"), c, pod, sources)
                c["_environment"] = _container_environment(c, sources)
                yield owner, meta, pod, c, yaml.safe_load(text), text


def _services_for(path: Path) -> list[dict]:
    """The Services that apply to the workloads of `path`: its own, and those of the Kubernetes files without a
    workload of their own (add-ons applied next to any example, such as servicemonitor.yaml)."""
    files = [path] + [p for p in MANIFESTS if p != path and p.parent == path.parent and not any(_pod_specs(_documents(p)))]
    return [d for f in files for d in _documents(f) if d["kind"] == "Service"]


def test_deploy_has_manifests():
    names = {p.name for p in MANIFESTS}
    assert {"sidecar.yaml", "redis-replicas.yaml"} <= names, names


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_documents_are_well_formed_objects(path):
    docs = _documents(path)
    assert docs, f"{path} holds no YAML document"
    names = set()
    for d in docs:
        assert isinstance(d, dict), f"{path}: a document is not a mapping"
        assert isinstance(d.get("apiVersion"), str) and d["apiVersion"], f"{path}: apiVersion missing in {d}"
        assert isinstance(d.get("kind"), str) and d["kind"], f"{path}: kind missing"
        name = d.get("metadata", {}).get("name")
        assert isinstance(name, str) and DNS_NAME.match(name), f"{path}: {d['kind']} metadata.name {name!r}"
        assert (d["kind"], name) not in names, f"{path}: {d['kind']} {name} defined twice"
        names.add((d["kind"], name))
        if d["kind"] in POD_OWNERS:
            selector = d["spec"]["selector"]["matchLabels"]
            labels = d["spec"]["template"]["metadata"]["labels"]
            assert selector.items() <= labels.items(), f"{path}: {name}'s selector does not match its pods"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_containers_have_images_limits_and_declared_volumes(path):
    docs = _documents(path)
    for owner, _, pod in _pod_specs(docs):
        volumes = {v["name"] for v in pod.get("volumes", [])}
        volumes |= {t["metadata"]["name"] for t in owner.get("spec", {}).get("volumeClaimTemplates", [])}
        for c in pod["containers"]:
            where = f"{path.name}: {owner['metadata']['name']}/{c['name']}"
            assert c.get("image"), f"{where}: no image"
            limits = c.get("resources", {}).get("limits", {})
            assert "cpu" in limits and "memory" in limits, f"{where}: resources.limits needs cpu and memory"
            for mount in c.get("volumeMounts", []):
                assert mount["name"] in volumes, f"{where}: mounts undeclared volume {mount['name']}"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_gateway_config_passes_check_config(path, gateway_bin, tmp_path):
    found = 0
    for owner, _, _, c, _, text in _gateways(path):
        found += 1
        conf = tmp_path / f"{owner['metadata']['name']}-{c['name']}" / "gateway.yml"
        conf.parent.mkdir()
        conf.write_text(text)   # check-config resolves the paths the file names but opens none of them
        # With the container's environment as Kubernetes sets it (state.url may name ${REDIS_PASSWORD} from a Secret).
        environment = {k: v for k, v in os.environ.items() if k not in c["_environment"]} | c["_environment"]
        p = subprocess.run([gateway_bin, "check-config", "--config", str(conf)], capture_output=True, timeout=20,
                           stdin=subprocess.DEVNULL, env=environment)
        out = (p.stdout + p.stderr).decode("utf-8", "replace")
        assert p.returncode == 0 and p.stdout.decode().strip() == "ok", f"{path.name}: {out}"
    if path.parent.name == "kubernetes" and any(_pod_specs(_documents(path))):
        assert found, f"{path.name}: no attest-gateway container"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_gateway_probes_ports_and_shutdown(path):
    for owner, meta, pod, c, cfg, _ in _gateways(path):
        where = f"{path.name}: {owner['metadata']['name']}/{c['name']}"
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", []) if "name" in p}
        admin = cfg["admin"]["address"]
        assert admin.rsplit(":", 1)[0] in ("0.0.0.0", "[::]"), f"{where}: the kubelet cannot reach admin {admin}"
        for probe, path_ in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
            get = c.get(probe, {}).get("httpGet", {})
            port = ports.get(get.get("port"), get.get("port"))
            assert get.get("path") == path_ and port == _port(admin), f"{where}: {probe} should GET {path_} on :{_port(admin)}"
        listener_ports = {_port(l["address"]) for l in cfg["listeners"]}
        assert listener_ports <= set(ports.values()), f"{where}: listener ports {listener_ports} not declared"

        for svc in _services_for(path):
            if svc["spec"].get("selector", {}).items() <= meta.get("labels", {}).items():
                targets = {ports.get(sp.get("targetPort"), sp.get("targetPort", sp["port"])) for sp in svc["spec"]["ports"]}
                name = svc["metadata"]["name"]
                if svc["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "metrics":
                    # For Prometheus only: discovery without a virtual IP, the admin port and nothing else.
                    assert targets == {_port(admin)}, f"{where}: metrics Service {name} targets {targets}, not the admin port alone"
                    assert svc["spec"].get("type", "ClusterIP") == "ClusterIP" and svc["spec"].get("clusterIP") == "None", \
                        f"{where}: metrics Service {name} must be headless (type ClusterIP, clusterIP: None)"
                else:
                    assert targets <= listener_ports, f"{where}: Service {name} targets {targets - listener_ports}, not a listener"

        workers = _arg(c["args"], "--workers")
        if workers is not None:
            assert int(workers) == _cpus(c["resources"]["limits"]["cpu"]), f"{where}: --workers differs from the CPU limit"

        pre_stop = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        sleep = float(pre_stop[1]) if pre_stop[:1] == ["sleep"] else 0
        drain = _seconds(cfg.get("limits", {}).get("drain_timeout", "30s"))
        grace = pod.get("terminationGracePeriodSeconds", 30)
        assert grace > sleep + drain, f"{where}: grace {grace}s is not above preStop {sleep}s + drain {drain}s"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_gateway_state_is_writable_and_shared_between_replicas(path):
    for owner, _, _, c, cfg, _ in _gateways(path):
        where = f"{path.name}: {owner['metadata']['name']}/{c['name']}"
        state = cfg.get("state", {})
        if state.get("backend", "sqlite") == "sqlite":
            directory = str(PurePosixPath(state.get("path", "data/state.db")).parent)
            writable = {m["mountPath"] for m in c.get("volumeMounts", []) if not m.get("readOnly")}
            assert directory in writable, f"{where}: state.path's folder {directory} is not a writable volume"
        # A password belongs in a Secret: never written into a gateway.yml that a ConfigMap carries.
        url = state.get("url", "")
        if "@" in url and ":" in url.split("//", 1)[-1].split("@", 1)[0]:
            password = url.split("//", 1)[-1].split("@", 1)[0].split(":", 1)[1]
            assert password.startswith("${") and password.endswith("}"), f"{where}: the Redis password is written in gateway.yml"
        needs_state = any(r.get("limited_use") for r in cfg.get("routes", [])) or any(
            v.get("type") == "app_attest" for v in (cfg.get("verifiers") or {}).values())
        if needs_state and owner.get("spec", {}).get("replicas", 1) > 1:
            assert state.get("backend") == "redis", f"{where}: several replicas need one shared (redis) state store"


# ----------------------------------------------------------------------------------------------------------------
# systemd

HARDENING = {
    "DynamicUser": "yes", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
    "PrivateTmp": "yes", "PrivateDevices": "yes", "CapabilityBoundingSet": "", "AmbientCapabilities": "",
    "RestrictSUIDSGID": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes", "ProtectControlGroups": "yes", "ProtectClock": "yes", "ProtectHostname": "yes",
    "ProtectProc": "invisible", "RestrictNamespaces": "yes", "RestrictRealtime": "yes", "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes", "SystemCallArchitectures": "native", "UMask": "0077",
}


def _unit(text: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_systemd_unit_is_hardened():
    service = _unit(UNIT.read_text())["Service"]
    for key, value in HARDENING.items():
        assert service.get(key, [None])[-1] == value, f"{key}={service.get(key)} (want {value!r})"
    filters = service.get("SystemCallFilter", [])
    assert "@system-service" in filters and "~@privileged" in filters, filters
    families = set(service["RestrictAddressFamilies"][-1].split())
    assert {"AF_INET", "AF_INET6"} <= families <= {"AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"}, families


def test_systemd_unit_runs_check_config_then_serve_and_drains():
    service = _unit(UNIT.read_text())["Service"]
    serve = service["ExecStart"][-1].split()
    check = service["ExecStartPre"][-1].split()
    assert serve[1:3] == ["serve", "--config"] and check[1:3] == ["check-config", "--config"], (serve, check)
    assert serve[0] == check[0] and serve[3] == check[3], "ExecStartPre must check the binary and file ExecStart serves"
    state_dir = "/var/lib/" + service["StateDirectory"][-1]
    assert service["WorkingDirectory"][-1] == state_dir
    assert _seconds(service["TimeoutStopSec"][-1] + "s") > 30, "TimeoutStopSec must exceed the default drain_timeout"
    assert int(service["LimitNOFILE"][-1]) >= 2 * 10000, "LimitNOFILE below 2 x the default max_connections"


def test_systemd_analyze_verify_is_silent(gateway_bin, tmp_path):
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("systemd-analyze is not installed")
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/attest-gateway", gateway_bin))
    p = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    complaints = [l for l in (p.stdout + p.stderr).splitlines() if UNIT.name in l]
    assert p.returncode == 0 and not complaints, p.stdout + p.stderr


# ----------------------------------------------------------------------------------------------------------------
# Containerfile and Makefile


def _stages(text: str) -> list[dict]:
    """[{"from": ..., "instructions": [(INSTRUCTION, argument)]}], continuation lines joined, comments dropped."""
    logical, buf = [], ""
    for raw in text.splitlines():
        if raw.strip().startswith("#"):
            continue
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1] + " "
            continue
        buf += raw
        if buf.strip():
            logical.append(" ".join(buf.split()))
        buf = ""
    stages = []
    for line in logical:
        instruction, _, argument = line.partition(" ")
        if instruction.upper() == "FROM":
            stages.append({"from": argument, "instructions": []})
        elif stages:
            stages[-1]["instructions"].append((instruction.upper(), argument))
    return stages


def _runs(stage: dict) -> list[str]:
    return [a for i, a in stage["instructions"] if i == "RUN"]


def _make_commands(target: str) -> list[str]:
    """The shell commands `make target` runs (prerequisites first), variables expanded, echo markers dropped."""
    variables, rules, current = {}, {}, None
    for line in (REPO / "Makefile").read_text().splitlines():
        if line.startswith("\t"):
            if current:
                rules[current]["recipe"].append(line[1:])
            continue
        current = None
        line = line.split("#", 1)[0].rstrip()
        if m := re.match(r"^(?:export\s+)?([A-Za-z_]\w*)\s*(\?=|:=|=)\s*(.*)$", line):
            variables[m.group(1)] = m.group(3)
        elif m := re.match(r"^([\w.-]+)\s*:(?!=)\s*(.*)$", line):
            current = m.group(1)
            rules[current] = {"prereqs": m.group(2).split(), "recipe": []}

    def expand(text: str, depth: int = 0) -> str:
        assert depth < 10, f"recursive Makefile variable in {text!r}"
        return re.sub(r"\$\((\w+)\)", lambda m: expand(variables.get(m.group(1), ""), depth + 1), text)

    commands = []
    for prereq in rules[target]["prereqs"]:
        if prereq in rules:
            commands += _make_commands(prereq)
    for line in rules[target]["recipe"]:
        commands.append(" ".join(expand(line.lstrip("@-")).split()))
    return commands


def test_readme_names_make_targets_that_exist():
    makefile = (REPO / "Makefile").read_text()
    named = set(re.findall(r"`make (\w[\w-]*)", (REPO / "README.md").read_text()))
    assert "build" in named, "README should say how to build the release binary (make build)"
    for target in named:
        assert re.search(rf"^{re.escape(target)}\s*:", makefile, re.M), f"README names `make {target}`, which the Makefile lacks"


def test_containerfile_build_stage_runs_make_build():
    stages = _stages(CONTAINERFILE.read_text())
    build = next(s for s in stages if re.search(r"\bAS\s+build$", s["from"], re.I))
    assert re.search(r"(swift|bookworm|debian)", build["from"], re.I), build["from"]
    expected = _make_commands("build")
    assert any(e.startswith("swift build -c release") for e in expected), f"`make build` runs {expected}"
    runs = _runs(build)
    positions = [runs.index(cmd) if cmd in runs else -1 for cmd in expected]
    assert -1 not in positions and positions == sorted(positions), f"build stage RUNs {runs}, make build runs {expected}"
    copied = {a.split()[0] for i, a in build["instructions"] if i == "COPY" and not a.startswith("--from")}
    assert {"Package.swift", "Sources", "Tests"} <= copied, copied
    assert 'path:' not in (REPO / "Package.swift").read_text(), "a target outside Sources/ or Tests/: COPY it too"
    assert any("ldd" in r and "swift" in r for r in runs), "the Swift runtime libraries are not collected"


def test_containerfile_never_ships_the_development_tools():
    """attest-gateway-dev (a simulated App Attest CA, an App Check issuer) is built because `make build` builds it,
    and nothing else names it: it never reaches /out nor the runtime image."""
    stages = _stages(CONTAINERFILE.read_text())
    dev_builds = [c for c in _make_commands("build") if c.startswith("swift build") and "attest-gateway-dev" in c]
    assert dev_builds, "`make build` does not build attest-gateway-dev"
    for stage in stages:
        for instruction, argument in stage["instructions"]:
            if "attest-gateway-dev" in argument or "GatewayTestSupport" in argument:
                assert instruction == "RUN" and argument in dev_builds, f"{instruction} {argument}"
    runtime = stages[-1]
    copied = [a for i, a in runtime["instructions"] if i == "COPY"]
    assert all(a.startswith("--from=build /out/") for a in copied), copied


def test_containerfile_runtime_matches_the_manifests():
    runtime = _stages(CONTAINERFILE.read_text())[-1]
    args = dict(runtime["instructions"])
    entrypoint, cmd = json.loads(args["ENTRYPOINT"]), json.loads(args["CMD"])
    assert (entrypoint + cmd)[-3:] == ["serve", "--config", "/etc/attest-gateway/gateway.yml"], (entrypoint, cmd)
    uid = int(args["USER"].split(":")[0])
    assert uid != 0
    exposed = {int(p) for p in args["EXPOSE"].split()}
    for path in MANIFESTS:
        for owner, _, _, c, _, _ in _gateways(path):
            assert c["securityContext"]["runAsUser"] == uid, f"{path.name}: runAsUser differs from the image's USER"
            assert {p["containerPort"] for p in c["ports"]} <= exposed, f"{path.name}: ports not EXPOSEd"
            assert _arg(c["args"], "--config") == cmd[-1]


def test_containerfile_installs_every_linked_c_library(gateway_bin):
    if not all(shutil.which(t) for t in ("readelf", "ldd", "dpkg-query")):
        pytest.skip("needs readelf, ldd and dpkg (binutils, libc-bin, dpkg)")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                        subprocess.run(["readelf", "-d", gateway_bin], capture_output=True, text=True).stdout)
    resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", subprocess.run(["ldd", gateway_bin], capture_output=True,
                                                                      text=True).stdout, re.M))
    runtime = _stages(CONTAINERFILE.read_text())[-1]
    install = next(r for r in _runs(runtime) if "apt-get install" in r)
    packages = {w for w in install.split("apt-get install", 1)[1].split("&&")[0].split() if not w.startswith("-")}
    for lib in needed:
        path = resolved.get(lib)
        if path is None or "/lib/swift/" in path:
            continue   # the dynamic loader itself, or a Swift runtime library (copied from the build stage)
        owner = subprocess.run(["dpkg-query", "-S", str(Path(path).resolve())], capture_output=True, text=True).stdout
        if not owner:
            owner = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True).stdout
        package = owner.split(":", 1)[0]
        assert package, f"no Debian package owns {path}"
        if package.startswith("libc6"):
            continue   # in every Debian image
        assert package in packages, f"{lib} comes from {package}, which the runtime stage does not install"
