"""The module layers: every `import` of a target is one of its declared dependencies (the compiler lets transitive
ones through), and docs/architecture.md shows the layers Package.swift has (scripts/layers.py)."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_imports_are_declared_and_the_layer_diagram_is_current():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "layers.py"), "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_the_check_fails_on_an_undeclared_import(tmp_path):
    # The check must be able to fail: in a copy of the package, an HTTP1 file importing JOSE (not a dependency).
    shutil.copy(os.path.join(ROOT, "Package.swift"), tmp_path)
    os.makedirs(tmp_path / "Sources" / "HTTP1")
    (tmp_path / "Sources" / "HTTP1" / "Probe.swift").write_text("import GatewayCore\n@testable import JOSE\n")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "layers.py"), "--check"], cwd=tmp_path,
                       env={**os.environ, "LAYERS_ROOT": str(tmp_path)}, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0, p.stderr
    assert "Sources/HTTP1/Probe.swift:2: imports JOSE, not a dependency of HTTP1" in p.stderr, p.stderr
    assert "imports GatewayCore" not in p.stderr, p.stderr
