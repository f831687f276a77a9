"""The explorer's layering, checked from its source with ``ast`` (nothing is imported):

- no import circle among the modules of ``explorer/`` (``bgplvm.explorer``), counting
  imports at module level and inside functions, relative and absolute;
- no file of ``explorer/`` passes 600 lines (small modules a newcomer can read);
- the model (``model/``, the top-level modules of ``bgplvm``) never imports the explorer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPLORER = ROOT / "explorer"
PACKAGE = "bgplvm.explorer"
MAX_LINES = 600


def module_name(path: Path) -> str:
    """``explorer/plots.py`` -> ``bgplvm.explorer.plots`` (``__init__`` -> the package)."""
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def imported_names(tree: ast.AST, importer: str, is_package: bool) -> set[str]:
    """Absolute dotted names of everything ``importer`` imports, anywhere in its source
    (module level, functions, methods, conditional blocks): for ``from X import a`` both
    X and X.a (a may be a submodule)."""
    here = importer if is_package else importer.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def explorer_graph() -> dict[str, set[str]]:
    """{module: explorer modules it imports} over every module of explorer/."""
    files = sorted(EXPLORER.glob("*.py"))
    modules = {module_name(p) for p in files}
    graph = {}
    for p in files:
        name = module_name(p)
        names = imported_names(ast.parse(p.read_text(), str(p)), name, p.stem == "__init__")
        graph[name] = {n for n in names if n in modules and n != name and n != PACKAGE}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(n):
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        path.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_imports_are_resolved_relative_and_absolute():
    src = ("from . import plots\nfrom .state import X\nimport bgplvm.explorer.masks\n"
           "def f():\n    from bgplvm.explorer.views import V\n")
    names = imported_names(ast.parse(src), "bgplvm.explorer.export", False)
    assert {"bgplvm.explorer.plots", "bgplvm.explorer.state", "bgplvm.explorer.masks",
            "bgplvm.explorer.views"} <= names


def test_the_graph_sees_every_module():
    graph = explorer_graph()
    assert f"{PACKAGE}.app" in graph and f"{PACKAGE}.state" in graph
    assert graph[f"{PACKAGE}.app"], "the page imports its views"


def test_explorer_modules_import_no_circle():
    cycle = find_cycle(explorer_graph())
    assert cycle is None, "import circle in explorer/: " + " -> ".join(c.rpartition(".")[2] for c in cycle)


@pytest.mark.parametrize("path", sorted(EXPLORER.glob("*.py")), ids=lambda p: p.name)
def test_explorer_files_are_small(path):
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{path.name} has {n} lines (at most {MAX_LINES})"


def test_the_model_never_imports_the_explorer():
    for p in sorted((ROOT / "model").rglob("*.py")):
        rel = p.relative_to(ROOT / "model").with_suffix("")
        parts = ["bgplvm", *rel.parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        names = imported_names(ast.parse(p.read_text(), str(p)), ".".join(parts), is_package)
        bad = sorted(n for n in names if n == PACKAGE or n.startswith(PACKAGE + "."))
        assert not bad, f"model/{p.relative_to(ROOT / 'model')} imports {bad}"
