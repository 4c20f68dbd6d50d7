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
    ("errors", "paths", "progress", "invocation", "ports"),
    ("kube",),
    ("lifecycle",),
    ("stack",),
    ("cluster",),
    ("render",),
    ("policies",),
    ("report",),
    ("bench", "fanout", "prove"),
    ("upgrade",),
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


def _providers() -> set[str]:
    """The provider folders, as the registry lists them."""
    from trainjob_conformance.cluster import registry

    return {kind.module.split(".")[2] for kind in registry.provider_kinds()}


def provider_leaks(graph: dict[str, set[str]], package: str, providers: set[str]) -> list[str]:
    """Imports of a provider's folder from anywhere but that folder and the registry:
    from another provider, from the shared cluster modules, or from outside cluster/."""
    wrong = []
    for module, imported in graph.items():
        parts = module.split(".")
        if module == f"{package}.cluster.registry":
            continue
        room = parts[2] if parts[1:2] == ["cluster"] and len(parts) > 2 else None
        for target in imported:
            target_parts = target.split(".")
            if target_parts[1:2] != ["cluster"] or len(target_parts) < 3:
                continue
            if target_parts[2] in providers and target_parts[2] != room:
                wrong.append(f"{module} -> {target}")
    return sorted(wrong)


def test_only_the_registry_imports_a_provider():
    """A provider folder never imports another provider; the shared cluster modules
    (handle, provider interface, health, serving, isolation) and every package
    outside cluster/ reach a provider only through cluster/registry.py."""
    graph = import_graph(SOURCE, PACKAGE)
    assert provider_leaks(graph, PACKAGE, _providers()) == []


def test_the_registry_lists_every_provider_folder():
    folders = {path.parent.name for path in (SOURCE / PACKAGE / "cluster").glob("*/provider.py")}
    assert _providers() == folders


def test_a_provider_leak_is_named(tmp_path):
    """The check above can fail: a command importing a provider, a provider importing
    another, and the shared interface importing one are each named."""
    package = tmp_path / "pkg"
    for folder in ("cluster", "cluster/alpha", "cluster/beta", "cli"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "cluster" / "alpha" / "provider.py").write_text("from pkg.cluster.beta import x\n")
    (package / "cluster" / "beta" / "x.py").write_text("from pkg.cluster import provider\n")
    (package / "cluster" / "provider.py").write_text("import pkg.cluster.alpha.provider\n")
    (package / "cluster" / "registry.py").write_text("import pkg.cluster.alpha.provider\n")
    (package / "cli" / "run.py").write_text("from pkg.cluster.alpha.provider import y\n")
    graph = import_graph(tmp_path, "pkg")
    assert provider_leaks(graph, "pkg", {"alpha", "beta"}) == [
        "pkg.cli.run -> pkg.cluster.alpha.provider",
        "pkg.cluster.alpha.provider -> pkg.cluster.beta.x",
        "pkg.cluster.provider -> pkg.cluster.alpha.provider",
    ]


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
