"""The layout's rules, checked: the trust boundary is a folder, imports run one way.

- A real sandbox child, with a trivial submission imported, holds only `tinytorch` modules from
  sandbox/child/ and core/ (and the packages on the way): never the references, the reference
  solution, the hidden-case generator, the class grader's uid pool or the parent's kill code.
- No import cycle between modules (every import, deferred ones inside functions too, and the
  package __init__ files an import runs on its way).
- No module imports a private name (`_x`) from another, or reaches one through a module alias.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tinytorch.milestone07.boundary import open_sandbox

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"tinytorch": ROOT / "tinytorch", "tinytorch.extensions": ROOT / "extensions"}

# What may be loaded in the student's process: the boundary folder, core/ (the Tensor the student's
# code builds on), and the packages one passes through to reach them.
CHILD_ALLOWED_PREFIXES = ("tinytorch.sandbox.child.", "tinytorch.core.")
CHILD_ALLOWED = {"tinytorch", "tinytorch.sandbox", "tinytorch.sandbox.child", "tinytorch.core"}
CHILD_FORBIDDEN = (
    "tinytorch.milestone07",  # the grader: references, cases (the hidden-case generator), checks
    "tinytorch.perf",  # the reference solution
    "tinytorch.classroom",  # the class grader
    "tinytorch.sandbox.uids",  # the uid pool
    "tinytorch.sandbox.procs",  # the parent's tree kill
    "tinytorch.sandbox.parent",
    "tinytorch.sandbox.spawn",
)

TRIVIAL = textwrap.dedent(
    """
    import sys

    def fused_gelu(x):
        names = sorted(m for m in sys.modules if m == "tinytorch" or m.startswith("tinytorch."))
        raise RuntimeError("MODULES:" + ",".join(names))
    """
)


@pytest.mark.parametrize("grading", [False, True], ids=["practice", "grading"])
def test_the_child_loads_only_the_boundary_folder_and_core(tmp_path, grading) -> None:
    path = tmp_path / "trivial.py"
    path.write_text(TRIVIAL)
    with open_sandbox(str(path), grading=grading) as box:
        assert box.start()["status"] == "ok"
        reply = box.request(
            {"fn": "fused_gelu", "args": [np.ones(3, np.float32)], "kwargs": {}}, 30.0
        )
    assert reply["status"] == "raised", reply
    names = reply["error"].split("MODULES:", 1)[1].split(" (at")[0].split(",")
    assert "tinytorch.sandbox.child.main" in names and "tinytorch.core.tensor" in names
    outside = [
        n for n in names if n not in CHILD_ALLOWED and not n.startswith(CHILD_ALLOWED_PREFIXES)
    ]
    assert outside == [], f"loaded into the student's process: {outside}"
    assert not [n for n in names if n.startswith(CHILD_FORBIDDEN)]


def test_part_bs_student_child_loads_no_grader_code(tmp_path) -> None:
    """Part B's child runs the student's kernels beside our timing tasks (bench/tasks.py): those
    bring the profiling and comparison code, never the grader, the references or the reference."""
    path = tmp_path / "trivial.py"
    path.write_text(TRIVIAL)
    with open_sandbox(str(path), tasks=True) as box:
        assert box.start()["status"] == "ok"
        reply = box.request(
            {"fn": "fused_gelu", "args": [np.ones(3, np.float32)], "kwargs": {}}, 30.0
        )
    names = reply["error"].split("MODULES:", 1)[1].split(" (at")[0].split(",")
    assert "tinytorch.bench.tasks" in names
    assert [n for n in names if n.startswith(CHILD_FORBIDDEN)] == []


# ---- the import graph -------------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([pkg, *parts])] = path
    return out


MODULES = _modules()


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    is_pkg = MODULES[module].name == "__init__.py"
    base = module.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, nodes: list[ast.stmt]) -> list[tuple[str, str | None]]:
    """(imported module, name taken from it or None) for each import among `nodes`."""
    out: list[tuple[str, str | None]] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((sub, None) if sub in MODULES else (target, alias.name))
    return [(m, n) for m, n in out if m in MODULES]


def _all_but_type_checking(tree: ast.Module) -> list[ast.stmt]:
    """Every statement, inside functions too (a deferred import is still a dependency), but for
    `if TYPE_CHECKING:` blocks (never run)."""
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for n in ast.walk(stmt)
    }
    return [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and id(n) not in skip]


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = {m for m, _ in _imports(module, _all_but_type_checking(tree))}
        # Importing a.b.c runs a/__init__ and a/b/__init__ first: those packages are imported too
        # (unless the importer is inside them, where they are already running).
        for target in list(targets):
            parts = target.split(".")
            for i in range(1, len(parts)):
                pkg = ".".join(parts[:i])
                if pkg in MODULES and not module.startswith(pkg + ".") and module != pkg:
                    targets.add(pkg)
        graph[module] = targets - {module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root, children0 in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(children0)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_nothing_imports_a_private_name_from_another_module() -> None:
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = list(ast.walk(tree))
        stmts = [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
        aliases = {}
        for node in stmts:
            for target, name in _imports(module, [node]):
                if name and name.startswith("_") and not name.startswith("__"):
                    found.append(f"{module}: from {target} import {name}")
            if isinstance(node, ast.ImportFrom):
                base = _resolve(module, node)
                for alias in node.names:
                    if f"{base}.{alias.name}" in MODULES:
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
            else:
                for alias in node.names:
                    if alias.name in MODULES and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in nodes:
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and aliases[node.value.id] != module
            ):
                found.append(f"{module}: {aliases[node.value.id]}.{node.attr}")
    assert sorted(set(found)) == []
