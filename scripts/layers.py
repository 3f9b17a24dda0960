#!/usr/bin/env python3
"""The module layers, derived from Package.swift, and the import rules checked against the sources.

  scripts/layers.py            prints the layer diagram docs/architecture.md shows (between its layer markers)
  scripts/layers.py --check    exits non-zero when an `import` names a module its target does not declare
                               (the compiler lets transitive ones through), or docs/architecture.md's diagram is stale

A target's layer is one more than the highest layer of what it depends on (C libraries are layer 0), so "nothing
imports upward" holds by construction once every import is declared.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.environ.get("LAYERS_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "architecture.md")
BEGIN, END = "<!-- layers: begin (scripts/layers.py) -->", "<!-- layers: end -->"
# Modules of the toolchain and the C library, importable without a declared dependency.
TOOLCHAIN = {"Glibc", "Musl", "Darwin", "Foundation", "FoundationEssentials", "Dispatch", "Synchronization", "Testing", "XCTest", "_Concurrency"}
IMPORT = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+"
                    r"(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)


MULTILINE_STRING = re.compile(r'#*"""(?:.|\n)*?"""#*')


def package():
    out = subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    targets = {}
    for t in json.loads(out)["targets"]:
        deps = [d["byName"][0] for d in t["dependencies"] if "byName" in d]
        deps += [d["target"][0] for d in t["dependencies"] if "target" in d]
        targets[t["name"]] = {"type": t["type"], "deps": deps}
    return targets


def layers(targets):
    memo = {}

    def layer(name):
        if name not in memo:
            deps = targets[name]["deps"]
            memo[name] = 0 if targets[name]["type"] == "system" and not deps else 1 + max((layer(d) for d in deps), default=-1)
        return memo[name]

    return {n: layer(n) for n in targets if targets[n]["type"] != "test"}


def diagram(targets):
    by_layer = {}
    for name, n in layers(targets).items():
        by_layer.setdefault(n, []).append(name)
    lines = ["```"]
    for n in sorted(by_layer, reverse=True):
        lines.append(f"{n:>2}  " + "  ".join(sorted(by_layer[n])))
    lines.append("```")
    return "\n".join(lines)


def undeclared_imports(targets):
    problems = []
    for name, t in targets.items():
        folder = os.path.join(ROOT, "Tests" if t["type"] == "test" else "Sources", name)
        allowed = set(t["deps"]) | TOOLCHAIN | {name}
        for base, _, files in os.walk(folder):
            for f in files:
                if not f.endswith(".swift"):
                    continue
                path = os.path.join(base, f)
                with open(path, encoding="utf-8") as fh:
                    # Multi-line string literals (an embedded script) are blanked, keeping the line numbers.
                    text = MULTILINE_STRING.sub(lambda m: "\n" * m.group(0).count("\n"), fh.read())
                for m in IMPORT.finditer(text):
                    if m.group(1) not in allowed:
                        line = text.count("\n", 0, m.start()) + 1
                        problems.append(f"{os.path.relpath(path, ROOT)}:{line}: imports {m.group(1)}, not a dependency of {name}")
    return problems


def documented():
    if not os.path.exists(DOC):
        return None
    with open(DOC, encoding="utf-8") as fh:
        text = fh.read()
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def main():
    targets = package()
    if "--check" not in sys.argv:
        print(diagram(targets))
        return 0
    problems = undeclared_imports(targets)
    if documented() != diagram(targets):
        problems.append(f"{os.path.relpath(DOC, ROOT)}: the layer diagram differs from Package.swift; run scripts/layers.py")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
