"""The package's import graph in numbers: cycles, lazy imports, and each module's size.

    .venv/bin/python scripts/import_graph.py [PACKAGE_DIR]

Counts, for ``rnnviz`` (or the package at PACKAGE_DIR, e.g. an old checkout):

* **cycles** — the strongly connected components of the module import graph with more
  than one module: once with the imports at module level only (what Python executes on
  import), once with the imports inside functions too;
* **lazy imports** — ``import``/``from … import`` of an ``rnnviz`` module inside a function
  body, listed with file and line (``TYPE_CHECKING`` blocks are not lazy: they never run);
* the longest modules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(root: Path, path: Path, known: set[str]) -> tuple[set[str], set[str], list[int]]:
    """The rnnviz modules ``path`` imports (all; at module level only), and the lines of
    those inside functions."""
    module = _module_name(root, path)
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    eager: set[str] = set()
    lazy: list[int] = []

    def target(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, path.name == "__init__.py", child)
                names = [f"{base}.{a.name}" for a in child.names] + [base]
            hits = {t for t in map(target, names) if t and t != module}
            if hits:
                found.update(hits)
                if in_function:
                    lazy.append(child.lineno)
                else:
                    eager.update(hits)
            visit(child, inside)

    visit(tree, False)
    return found, eager, lazy


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else Path(__file__).resolve().parents[1] / "rnnviz").resolve()
    files = sorted(root.rglob("*.py"))
    known = {_module_name(root, f) for f in files}
    graph: dict[str, set[str]] = {}
    at_import: dict[str, set[str]] = {}
    lazy: list[str] = []
    for f in files:
        name = _module_name(root, f)
        # a package's own submodules are not a dependency of it: a parent imports its children
        deps, eager, lines = _imports(root, f, known)
        graph[name] = {d for d in deps if not (f.name == "__init__.py" and d.startswith(name + "."))}
        at_import[name] = {d for d in eager if not (f.name == "__init__.py" and d.startswith(name + "."))}
        lazy += [f"{f.relative_to(root.parent)}:{n}" for n in lines]
    print(f"modules: {len(files)}, import edges: {sum(map(len, graph.values()))}")
    for what, g in (("at import (module-level imports)", at_import), ("counting lazy imports too", graph)):
        cycles = _cycles(g)
        print(
            f"cycles {what}: {len(cycles)}" + "".join(f"\n  {len(c)} modules: {' '.join(c)}" for c in cycles)
        )
    print(f"lazy rnnviz imports inside functions: {len(lazy)}")
    for line in lazy:
        print("  " + line)
    sizes = sorted(
        ((len(f.read_text().splitlines()), f.relative_to(root.parent)) for f in files), reverse=True
    )
    print("longest modules: " + ", ".join(f"{p} {n}" for n, p in sizes[:6]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
