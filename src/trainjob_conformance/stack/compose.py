"""Composed profiles: a pinned profile with some components at other releases.

`--profile latest --with kueue=v0.16.6` names the profile
`latest+kueue=v0.16.6`. The name is the whole record: any process that is
handed it (the pytest child, an xdist worker, a MultiKueue worker cluster, a
report reader) gets the same versions back from it, and it only holds
characters that are safe in file names, JUnit and Markdown links.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.components import COMPONENTS

# Between the base profile and each override in a composed name.
SEPARATOR = "+"
# Only releases: a pre-release or a commit is not what a platform team upgrades to.
_RELEASE = re.compile(r"^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
_MAJOR_SUFFIX = re.compile(r"/v([2-9]|[1-9][0-9]+)$")


def component_order() -> tuple[str, ...]:
    return tuple(COMPONENTS)


def _majors(module: str) -> tuple[str, ...]:
    """The major versions a module path may carry (Go's semantic import versioning)."""
    suffix = _MAJOR_SUFFIX.search(module)
    return (suffix.group(1),) if suffix else ("0", "1")


def parse_override(text: str, pins: Mapping[str, str] | None = None) -> tuple[str, str]:
    """`component=vX.Y.Z` as (component, version); anything else in one line."""
    component, sep, version = text.partition("=")
    component, version = component.strip(), version.strip()
    valid = ", ".join(component_order())
    if not sep:
        raise ConformanceError(f"{text!r} is not component=version; e.g. kueue=v0.16.6")
    if component not in COMPONENTS:
        raise ConformanceError(f"{text!r}: unknown component {component!r}; choose one of: {valid}")
    match = _RELEASE.match(version)
    if match is None:
        pinned = f" ({component} is pinned at {pins[component]})" if pins else ""
        raise ConformanceError(
            f"{text!r}: the version must be a release tag vX.Y.Z{pinned}; "
            "pre-releases and commits are not built"
        )
    module = COMPONENTS[component].module
    majors = _majors(module)
    if match.group(1) not in majors:
        raise ConformanceError(
            f"{text!r}: module {module} has only "
            f"{' or '.join(f'v{major}.x.y' for major in majors)} releases"
        )
    return component, version


def parse_overrides(
    texts: Iterable[str],
    already: Mapping[str, str] | None = None,
    pins: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Several overrides, each component once (counting those `already` composed)."""
    seen: dict[str, list[str]] = {k: [f"{k}={v}"] for k, v in (already or {}).items()}
    overrides = dict(already or {})
    for text in texts:
        component, version = parse_override(text, pins)
        seen.setdefault(component, []).append(text)
        overrides[component] = version
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    if twice:
        named = "; ".join(f"{k} ({', '.join(v)})" for k, v in twice.items())
        raise ConformanceError(f"the same component is given twice: {named}; give each once")
    return {k: overrides[k] for k in component_order() if k in overrides}


def composed_name(base: str, overrides: Mapping[str, str]) -> str:
    """The stable name: the base, then overrides in build order, whatever order they came in."""
    parts = [f"{k}={overrides[k]}" for k in component_order() if k in overrides]
    return SEPARATOR.join([base, *parts])


def split_name(name: str) -> tuple[str, list[str]]:
    """`latest+kueue=v0.16.6` as ("latest", ["kueue=v0.16.6"])."""
    base, *overrides = name.split(SEPARATOR)
    return base, overrides


def describe(name: str) -> str:
    """For report headers: "composed from latest: kueue v0.16.6", or "" for a pinned profile."""
    base, texts = split_name(name)
    if not texts:
        return ""
    versions = ", ".join(text.replace("=", " ", 1) for text in texts)
    return f"composed from {base}: {versions}"
