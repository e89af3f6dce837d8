"""The package's shape (issue 43): a reader holds each module on a screen or two.

No line of attnlib's Python or JavaScript runs past 100 characters, no Python module past 300 lines,
and no JavaScript file of the page's explorers past 600 lines; no module imports another that
imports it back, counting imports inside functions.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "attnlib"
PY = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", PY, ids=lambda p: str(p.relative_to(PKG)))
def test_module_lines_and_length(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    long = [i + 1 for i, line in enumerate(lines) if len(line) > 100]
    assert not long, f"{path.name}: lines over 100 characters: {long}"
    assert len(lines) <= 300, f"{path.name} has {len(lines)} lines; split it by idea (<= 300)"


JS = sorted(PKG.rglob("*.js"))


def test_javascript_files_stay_short() -> None:
    assert JS, "no JavaScript found under attnlib"
    big = {p.name: n for p in JS if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert not big, f"JavaScript files over 600 lines: {big}"


@pytest.mark.parametrize("path", JS, ids=lambda p: str(p.relative_to(PKG)))
def test_javascript_lines(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    long = [i + 1 for i, line in enumerate(lines) if len(line) > 100]
    assert not long, f"{path.name}: lines over 100 characters: {long}"


def _module(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """attnlib modules that ``path`` imports anywhere (functions included), resolved."""
    me = _module(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("attnlib")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if base.startswith("attnlib"):
                out.add(base)
                out |= {f"{base}.{a.name}" for a in node.names}
    return out


def test_no_import_circles_between_modules() -> None:
    """A cycle of two or more modules (a package's __init__ handing names on is not one)."""
    mods = {_module(p): p for p in PY}
    inits = {m for m, p in mods.items() if p.name == "__init__.py"}
    graph = {m: {t for t in _imports(p) if t in mods and t != m and t not in inits}
             for m, p in mods.items() if m not in inits}
    seen, stack, cycles = set(), [], []

    def visit(m: str) -> None:
        if m in stack:
            cycles.append(stack[stack.index(m):] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            visit(t)
        stack.pop()

    for m in sorted(graph):
        visit(m)
    assert not cycles, f"import circles: {cycles[:3]}"
