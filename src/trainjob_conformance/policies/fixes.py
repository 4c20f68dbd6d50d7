"""Upstream's fixes that touch TrainJob, and what became of each here.

The list (fixtures/upstream-fixes.yaml) is what the release notes of Kueue,
the Trainer and JobSet say was fixed or changed, each entry with the first
release of each line that carries it. From it: the coverage figure of the
report's summary ("N of M covered, K not testable"), the fixes a newer release
would bring to a pinned one (`outdated`), and the tables of
docs/upstream-fixes.md (`python -m trainjob_conformance.policies.fixes --markdown`).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import suite

COMPONENTS = ("kueue", "trainer", "jobset")
COMPONENT_TITLES = {"kueue": "Kueue", "trainer": "Trainer", "jobset": "JobSet"}
COVERED, CANDIDATE, NOT_TESTABLE = "covered", "candidate", "not-testable"
OUTCOMES = (COVERED, CANDIDATE, NOT_TESTABLE)
_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


@dataclass(frozen=True)
class Fix:
    component: str
    fix: str
    pr: str
    releases: tuple[str, ...]
    outcome: str
    here: str
    policies: tuple[str, ...] = ()

    def carried_by(self, version: str) -> bool:
        """Whether a release carries this fix: from the listed patch of its own line
        on, and in every line newer than the newest listed."""
        found = _parts(version)
        if found is None:
            return False
        listed = [_listed(release) for release in self.releases]
        lines = {parts[:2]: parts for parts in listed}
        first = lines.get(found[:2])
        if first is not None:
            return found >= first
        return found[:2] > max(lines)


def _parts(version: str) -> tuple[int, int, int] | None:
    match = _VERSION.match(version)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def _listed(release: str) -> tuple[int, int, int]:
    """A release of the list, which its load has already checked is vX.Y.Z."""
    parts = _parts(release)
    if parts is None:
        raise ConformanceError(f"upstream-fix release {release!r} is not vX.Y.Z")
    return parts


def fixes_path() -> Path:
    """Beside the catalog: fixtures/ in a checkout, the package's suite/ when installed."""
    return suite().catalog.with_name("upstream-fixes.yaml")


@cache
def load_fixes(path: Path | None = None) -> tuple[Fix, ...]:
    path = path or fixes_path()
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConformanceError(f"{path}: cannot read the upstream-fix list: {error}") from None
    entries = raw.get("fixes") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise ConformanceError(f"{path}: a mapping with a list under `fixes` is expected")
    return tuple(_fix(entry, f"{path}: entry {number}") for number, entry in enumerate(entries, 1))


def _fix(entry: object, where: str) -> Fix:
    if not isinstance(entry, dict):
        raise ConformanceError(f"{where}: a mapping is expected")
    missing = [
        key
        for key in ("component", "fix", "pr", "releases", "outcome", "here")
        if not entry.get(key)
    ]
    if missing:
        raise ConformanceError(f"{where}: lacks {', '.join(missing)}")
    if entry["component"] not in COMPONENTS:
        raise ConformanceError(
            f"{where}: component {entry['component']!r} (one of {', '.join(COMPONENTS)})"
        )
    if entry["outcome"] not in OUTCOMES:
        raise ConformanceError(
            f"{where}: outcome {entry['outcome']!r} (one of {', '.join(OUTCOMES)})"
        )
    releases = tuple(str(release) for release in entry["releases"])
    bad = [release for release in releases if _parts(release) is None]
    if bad:
        raise ConformanceError(f"{where}: releases {', '.join(bad)} are not vX.Y.Z")
    policies = tuple(entry.get("policies") or ())
    if (entry["outcome"] == COVERED) != bool(policies):
        raise ConformanceError(f"{where}: `policies` goes with outcome covered, and only with it")
    return Fix(
        entry["component"], entry["fix"], entry["pr"], releases, entry["outcome"],
        entry["here"], policies,
    )  # fmt: skip


def unknown_policies(fixes: Iterable[Fix], catalog_ids: Iterable[str]) -> list[str]:
    """Policies the list names that the catalog does not have."""
    known = set(catalog_ids)
    return sorted({p for fix in fixes for p in fix.policies if p not in known})


@dataclass(frozen=True)
class Coverage:
    entries: int
    covered: int
    candidates: int
    not_testable: int

    def line(self) -> str:
        return (
            f"{self.covered} of {self.entries} upstream fixes covered, "
            f"{self.candidates} candidate policies, {self.not_testable} not testable here"
        )


def coverage(fixes: Iterable[Fix]) -> dict[str, Coverage]:
    """Per component, and `total`."""
    listed = list(fixes)
    result = {}
    for name in (*COMPONENTS, "total"):
        mine = [f for f in listed if name in (f.component, "total")]
        result[name] = Coverage(
            len(mine),
            sum(f.outcome == COVERED for f in mine),
            sum(f.outcome == CANDIDATE for f in mine),
            sum(f.outcome == NOT_TESTABLE for f in mine),
        )
    return result


def summary_line(fixes: Iterable[Fix]) -> str:
    """The report's coverage figure, per component."""
    counts = coverage(fixes)
    total = counts["total"]
    each = ", ".join(
        f"{COMPONENT_TITLES[c]} {counts[c].covered} of {counts[c].entries}" for c in COMPONENTS
    )
    return (
        f"Upstream fixes: {total.covered} of {total.entries} covered by policies ({each}), "
        f"{total.candidates} candidates, {total.not_testable} not testable here"
    )


def lacking_line(fixes: Iterable[Fix], versions: dict[str, str]) -> str:
    """How many listed fixes the releases of a run do not carry ("" when none)."""
    lacking = {
        c: sum(f.component == c and not f.carried_by(versions[c]) for f in fixes)
        for c in COMPONENTS
        if c in versions
    }
    total = sum(lacking.values())
    if not total:
        return ""
    each = ", ".join(f"{COMPONENT_TITLES[c]} {n}" for c, n in lacking.items() if n)
    return f"its releases lack {total} listed upstream fixes ({each})"


def brought_by(fixes: Iterable[Fix], component: str, pinned: str, newer: str) -> list[Fix]:
    """The fixes of `component` that release `newer` carries and `pinned` does not."""
    return [
        fix
        for fix in fixes
        if fix.component == component and fix.carried_by(newer) and not fix.carried_by(pinned)
    ]


# -- docs/upstream-fixes.md's tables ---------------------------------------------

_HEADER = "| fix | PR | in releases | what became of it here |\n|---|---|---|---|\n"


def component_table(fixes: Iterable[Fix], component: str) -> str:
    rows = [
        f"| {f.fix} | {f.pr} | {', '.join(f.releases)} | {f.here} |\n"
        for f in fixes
        if f.component == component
    ]
    return _HEADER + "".join(rows)


def summary_table(fixes: Iterable[Fix]) -> str:
    lines = [
        "| component | entries | covered by existing policies | candidate policies | "
        "not testable here |\n|---|---|---|---|---|\n"
    ]
    for name, counts in coverage(fixes).items():
        title = COMPONENT_TITLES.get(name, name)
        lines.append(
            f"| {title} | {counts.entries} | {counts.covered} | {counts.candidates} | "
            f"{counts.not_testable} |\n"
        )
    return "".join(lines)


def write_markdown(page: str, fixes: Iterable[Fix]) -> str:
    """The page with each `## Kueue`/`## Trainer`/`## JobSet` table and the
    `## Summary` table written from the list; its prose kept."""
    listed = list(fixes)
    tables = {COMPONENT_TITLES[c]: component_table(listed, c) for c in COMPONENTS}
    tables["Summary"] = summary_table(listed)
    for title, table in tables.items():
        section = re.compile(rf"(^## {re.escape(title)}\n(?:(?!\|).*\n)*?)(\|.*\n)+", re.M)
        page, count = section.subn(lambda match, t=table: match[1] + t, page, count=1)
        if count != 1:
            raise ConformanceError(f"the page has no table under '## {title}'")
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", type=Path, metavar="PAGE", help="rewrite the tables of PAGE")
    args = parser.parse_args(argv)
    try:
        fixes = load_fixes()
        if args.markdown:
            try:
                page = args.markdown.read_text()
            except OSError as error:
                raise ConformanceError(
                    f"cannot read {args.markdown} ({error.strerror}); give the page whose "
                    "tables to rewrite, docs/upstream-fixes.md"
                ) from None
            args.markdown.write_text(write_markdown(page, fixes))
    except ConformanceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for name, counts in coverage(fixes).items():
        print(f"{COMPONENT_TITLES.get(name, name)}: {counts.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
