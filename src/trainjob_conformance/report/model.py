"""The result file a run writes, one per profile, and how to read them back."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.files import write_whole

PASS = "pass"
FAIL = "FAIL"
KNOWN_GAP = "known-gap"
GAP_CLOSED = "GAP-CLOSED"
NOT_APPLICABLE = "not-applicable"
SKIPPED = "skipped"  # not run, for a reason of the harness or cluster, not the catalog
ERROR = "ERROR"  # the stack broke (a component died, the cluster never started): no verdict
RESULTS = (PASS, FAIL, KNOWN_GAP, GAP_CLOSED, NOT_APPLICABLE, SKIPPED, ERROR)
# Worst first: a policy with several tests (parametrized) shows the worst of them.
SEVERITY = (ERROR, FAIL, GAP_CLOSED, SKIPPED, KNOWN_GAP, PASS, NOT_APPLICABLE)
# 2: ERROR results, `interrupted` and `stack_errors`; 3: each result's `layer`.
# Formats 1 and 2 still read.
FORMAT_VERSION = 3
_READABLE_FORMATS = (1, 2, 3)


@dataclass
class PolicyResult:
    policy: str
    title: str
    result: str
    seconds: float
    test: str
    reason: str = ""
    diagnostics: str = ""  # path, relative to the report directory
    # The layer that answered or did not act (policies/layers.py): FAIL, known gap, ERROR.
    layer: str = ""


@dataclass
class RunReport:
    profile: str
    provider: str
    versions: dict[str, str]
    started: str
    wall_seconds: float
    cluster_start_seconds: float | None
    results: list[PolicyResult] = field(default_factory=list)
    format: int = FORMAT_VERSION
    interrupted: bool = False  # stopped by Ctrl-C or SIGTERM: policies not run are absent
    stack_errors: list[str] = field(default_factory=list)
    # The catalogs that judged the run (project and packs), hashed: a result that
    # changed with the catalog is the catalog's change, not a flake ("" before it was kept).
    catalog_digest: str = ""

    def counts(self) -> dict[str, int]:
        """How many results of each word."""
        counts: dict[str, int] = {}
        for result in self.results:
            counts[result.result] = counts.get(result.result, 0) + 1
        return counts

    @property
    def suite_seconds(self) -> float:
        """The pytest session after its cluster was ready (no process start, no start
        of the cluster): what the bench compares between providers."""
        return self.wall_seconds - (self.cluster_start_seconds or 0.0)

    @property
    def file_stem(self) -> str:
        """The result file's name: the profile's, an upgrade path's `A -> B` as `A-to-B`."""
        return self.profile.replace(" -> ", "-to-")

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.file_stem}.json"
        write_whole(path, json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def read(cls, path: Path) -> RunReport:
        def refuse(why: str) -> ConformanceError:
            return ConformanceError(f"{path} is not a trainjob-conformance result file: {why}")

        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise refuse(str(error)) from None
        if not isinstance(data, dict):
            raise refuse(f"it holds a JSON {type(data).__name__}, not an object")
        version = data.get("format")
        if version not in _READABLE_FORMATS:
            raise refuse(
                f"format {version!r} (this version reads {', '.join(map(str, _READABLE_FORMATS))}); "
                "upgrade trainjob-conformance"
            )
        try:
            rows = data.pop("results")
            results = [PolicyResult(**row) for row in rows]
            report = cls(**data, results=results)
        except (TypeError, KeyError, AttributeError) as error:
            raise refuse(f"unexpected content ({error})") from None
        unknown = sorted({r.result for r in results} - set(RESULTS))
        if unknown:
            raise refuse(f"unknown result word(s) {', '.join(map(repr, unknown))}")
        return report


def worst_result(words: Iterable[str]) -> str:
    """The worst of several result words (see SEVERITY)."""
    return min(words, key=SEVERITY.index)


def read_reports(path: Path) -> list[RunReport]:
    """One result file, a results archive, or every result file in a report directory."""
    from trainjob_conformance.report.archive import is_archive, unpacked

    if is_archive(path):
        path = unpacked(path)
    if path.is_file():
        return [RunReport.read(path)]
    if path.is_dir():
        reports = [RunReport.read(p) for p in sorted(path.glob("*.json"))]
        if reports:
            return reports
    raise ConformanceError(
        f"no trainjob-conformance results at {path} "
        "(expected DIR/<profile>.json or a <profile>-results.tar.gz)"
    )
