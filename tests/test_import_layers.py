"""Imports inside the package run one way: no cycle between modules, and each
top-level package imports only the packages below it in LAYERS.

The graph is read from the source with `ast` (every import statement, also the
ones inside functions, which run later but still tie the modules together), so
a cycle fails here before it fails at an import in a user's run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.import_graph import find_cycle, import_graph, layer_violations

SOURCE = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "trainjob_conformance"

# Lowest first. A package may import itself and anything to its left.
LAYERS = [
    ("errors", "paths", "progress"),
    ("kube",),
    ("lifecycle",),
    ("stack",),
    ("cluster",),
    ("render",),
    ("policies",),
    ("report",),
    ("bench", "fanout", "prove"),
    ("plugin",),
    ("cli",),
]


def test_the_package_has_no_import_cycle():
    graph = import_graph(SOURCE, PACKAGE)
    assert len(graph) > 50, "the import graph was not read"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_packages_import_only_the_layers_below_them():
    graph = import_graph(SOURCE, PACKAGE)
    assert layer_violations(graph, PACKAGE, LAYERS) == []


def test_cluster_sub_architectures_import_only_the_shared_room_and_below():
    """A provider folder never imports another provider; the shared cluster
    modules (handle, provider interface, health, serving, isolation) never
    import a provider."""
    graph = import_graph(SOURCE, PACKAGE)
    providers = {"embedded", "kind", "existing"}
    wrong = []
    for module, imported in graph.items():
        parts = module.split(".")
        if parts[1:2] != ["cluster"] or module.endswith("cluster.registry"):
            continue
        room = parts[2] if len(parts) > 3 else None
        for target in imported:
            target_parts = target.split(".")
            if target_parts[1:2] != ["cluster"] or len(target_parts) < 4:
                continue
            target_room = target_parts[2]
            if target_room in providers and target_room != room:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_the_cycle_finder_finds_a_cycle(tmp_path):
    """The check above can fail: a cycle made on purpose is reported."""
    package = tmp_path / "pkg"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.inner import b\n")
    (package / "inner" / "b.py").write_text("def f():\n    from pkg import a\n")
    (package / "c.py").write_text("import pkg.a\n")
    graph = import_graph(tmp_path, "pkg")
    cycle = find_cycle(graph)
    assert cycle is not None
    assert set(cycle) == {"pkg.a", "pkg.inner.b"}


def test_a_layer_violation_is_named(tmp_path):
    package = tmp_path / "pkg"
    for name in ("low", "high"):
        (package / name).mkdir(parents=True)
        (package / name / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "high" / "x.py").write_text("from pkg.low import y\n")
    (package / "low" / "y.py").write_text("import ast\nfrom pkg.high.x import thing\n")
    graph = import_graph(tmp_path, "pkg")
    assert layer_violations(graph, "pkg", [("low",), ("high",)]) == ["pkg.low.y -> pkg.high.x"]


@pytest.mark.parametrize("source", ["from . import sibling\n", "from .sibling import name\n"])
def test_relative_imports_are_resolved(tmp_path, source):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sibling.py").write_text("name = 1\n")
    (package / "user.py").write_text(source)
    assert import_graph(tmp_path, "pkg")["pkg.user"] == {"pkg.sibling"}
    ast.parse(source)
