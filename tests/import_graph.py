"""The module import graph of a package, read from its source with ast."""

from __future__ import annotations

import ast
from pathlib import Path


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """module -> the package's own modules it imports (anywhere in its body).

    `from pkg import name` counts as an import of `pkg.name` when that is a
    module, else of `pkg`: a submodule import does not tie a module to its
    package's __init__ beyond what Python itself runs.
    """
    files = {_module_name(root, path): path for path in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = module.split(".")
                    if not is_package:
                        anchor = anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
            else:
                continue
            for name in names:
                # `import pkg.a.b` imports pkg.a.b; keep the longest known module.
                while name and name not in files:
                    name = name.rpartition(".")[0]
                if name and name != module and name.split(".")[0] == package:
                    targets.add(name)
        graph[module] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first repeated last), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def layer_violations(
    graph: dict[str, set[str]], package: str, layers: list[tuple[str, ...]]
) -> list[str]:
    """Imports from a top-level package to one in a higher layer."""
    rank = {name: index for index, names in enumerate(layers) for name in names}

    def layer(module: str) -> int | None:
        parts = module.split(".")
        return rank.get(parts[1]) if len(parts) > 1 else None

    wrong = []
    for module, targets in sorted(graph.items()):
        own = layer(module)
        for target in sorted(targets):
            theirs = layer(target)
            if own is not None and theirs is not None and theirs > own:
                wrong.append(f"{module} -> {target}")
    return wrong
