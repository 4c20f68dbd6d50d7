"""Drift: which pinned components have newer releases on the Go module proxy."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from trainjob_conformance.stack import goproxy
from trainjob_conformance.stack.components import COMPONENTS
from trainjob_conformance.stack.profiles import Profile

NOTHING_NEWER = "-"
UNKNOWN = "?"


@dataclass(frozen=True)
class Drift:
    profile: str
    component: str
    module: str
    pinned: str
    newest_patch: str | None = None  # newest patch of the pinned minor, if newer than the pin
    newest_release: str | None = None  # newest release of any minor, if newer than the pin
    # Why "nothing newer" cannot be said: the proxy would not list the
    # releases, or its list lacks the pin.
    unknown: str = ""

    @property
    def outdated(self) -> bool:
        return self.newest_release is not None


def _drift(profile: str, component: str, pinned: str, listed: list[str] | goproxy.Answer) -> Drift:
    module = COMPONENTS[component].module
    if isinstance(listed, goproxy.Answer):
        why = f"the proxy would not list its releases ({listed.detail()})"
        return Drift(profile, component, module, pinned, unknown=why)
    pin = goproxy.release_key(pinned)
    newer = [v for v in listed if goproxy.release_key(v) > pin]
    patches = [v for v in newer if goproxy.release_key(v)[:2] == pin[:2]]
    # A list without the pinned release is evidently incomplete: what it
    # lists newer is real, but its silence proves nothing.
    incomplete = pinned not in listed
    return Drift(
        profile,
        component,
        module,
        pinned,
        newest_patch=patches[-1] if patches else None,
        newest_release=newer[-1] if newer else None,
        unknown="the proxy's list of its releases lacks a pinned one, so it is incomplete"
        if incomplete
        else "",
    )


def drift(profiles: Iterable[Profile]) -> list[Drift]:
    """One row per profile and component; the proxy is asked once per module."""
    listed: dict[str, list[str] | goproxy.Answer] = {}
    rows = []
    for profile in profiles:
        for component, pinned in profile.versions.items():
            module = COMPONENTS[component].module
            if module not in listed:
                listed[module] = goproxy.releases(module)
            rows.append(_drift(profile.name, component, pinned, listed[module]))
    return rows


def table(rows: list[Drift]) -> list[str]:
    """The rows as aligned text, then what `-` and `?` mean where they appear."""
    header = ("profile", "component", "pinned", "newest patch", "newest release")

    def cell(row: Drift, value: str | None) -> str:
        return value or (UNKNOWN if row.unknown else NOTHING_NEWER)

    body = [
        (r.profile, r.component, r.pinned, cell(r, r.newest_patch), cell(r, r.newest_release))
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip()
        for line in (header, *body)
    ]
    cells = {value for line in body for value in line[3:]}
    if NOTHING_NEWER in cells:
        lines.append(f"{NOTHING_NEWER}: nothing newer than the pin")
    unknown = {r.module: r.unknown for r in rows if r.unknown and not r.newest_patch}
    for module, why in unknown.items():
        lines.append(f"{UNKNOWN}: not known for {module}: {why}")
    return lines


def summary(rows: list[Drift], proxy: str) -> str:
    outdated = sum(r.outdated for r in rows)
    unknown = sum(bool(r.unknown) and not r.newest_patch for r in rows)
    text = f"{outdated} of {len(rows)} pins have newer releases on {proxy}"
    return text + (f"; {unknown} could not be checked" if unknown else "")
