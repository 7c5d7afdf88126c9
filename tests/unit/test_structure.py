"""The package's shape: no import circle (imports inside functions included), nothing below a face imports a face,
no module over 600 lines, and the rules that must live once live once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ldp_dask"
#: flows/ installs as ldp_dask.flows ([tool.setuptools.package-dir])
FLOWS = ROOT / "flows"
#: The faces: what users run. The library below them never imports them.
FACES = ("ldp_dask.cli", "ldp_dask.cli_parser", "ldp_dask.demo", "ldp_dask.flows")
MAX_LINES = 600


def _sources() -> list[Path]:
    return [*PACKAGE.rglob("*.py"), *FLOWS.rglob("*.py")]


def _modules() -> dict[str, Path]:
    out = {}
    for path in _sources():
        parts = (["ldp_dask", "flows", *path.relative_to(FLOWS).with_suffix("").parts] if path.is_relative_to(FLOWS)
                 else list(path.relative_to(ROOT).with_suffix("").parts))
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def import_graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports, at the top or inside a function (TYPE_CHECKING blocks aside)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_lines(tree)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                targets = [f"{name}.{a.name}" if f"{name}.{a.name}" in mods else name for a in node.names]
            else:
                targets = [a.name for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod and not mod.startswith(t + "."):
                    graph[mod].add(t)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_the_import_graph_has_no_circle():
    assert _cycle(import_graph()) is None, " -> ".join(_cycle(import_graph()) or [])


def test_the_cycle_finder_finds_a_circle():  # the check above can fail
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_library_module_imports_a_face():
    graph = import_graph()
    bad = sorted((m, t) for m, ts in graph.items() for t in ts
                 if not m.startswith(FACES) and t.startswith(FACES))
    assert bad == []


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_every_package_is_installed():
    """pyproject.toml names every package (flows/ as ldp_dask.flows): a subpackage left out would be missing from
    the wheel."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = sorted({m for m, p in _modules().items() if p.name == "__init__.py"})
    assert sorted(declared) == found


def _lines_matching(pattern: str) -> dict[str, int]:
    rx = re.compile(pattern)
    return {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := sum(1 for line in p.read_text().splitlines() if rx.search(line)))}


def test_each_rule_lives_once():
    # where work runs (in this process or on Dask): decided by the engine alone
    assert _lines_matching(r"\.runs_in_process\(") == {"ldp_dask/engine.py": 2}
    assert _lines_matching(r"\bconnect\(options\.client") == {"ldp_dask/engine.py": 2}
    # the tree-combine loop
    assert _lines_matching(r"while len\(level\) > 1") == {"ldp_dask/engine.py": 1}
    # ε per unit: k · max(ε, ε spent), in privacy.py alone
    assert _lines_matching(r"max\([^)]*epsilon_spent\(\)") == {"ldp_dask/privacy.py": 1}
    # the ε refusal
    assert _lines_matching(r"> MAX_EPSILON") == {"ldp_dask/policy.py": 1}


def test_tests_live_by_layer():
    """Every test module sits in tests/unit (pure functions), tests/statistical (laws, audits, coverage) or
    tests/integration (clusters, Prefect, S3, PostgreSQL, the stack, the docs)."""
    tests = ROOT / "tests"
    stray = sorted(p.name for p in tests.glob("test_*.py"))
    layers = {p.parent.name for p in tests.rglob("test_*.py")}
    assert stray == [] and layers == {"unit", "statistical", "integration"}
