"""Synthetic report directories and a reader of the history page, for its tests.

The result files are written by the project's own model (RunReport.write), so
the page is built from exactly what `run --report DIR` writes.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from trainjob_conformance.report.model import PolicyResult, RunReport

# A reason that would run script if it ever reached the page unescaped.
HOSTILE = "<img src=x onerror=\"document.title='pwned'\"> '\"></td><script>alert(1)</script>"


def result(
    policy: str,
    word: str,
    seconds: float = 1.0,
    reason: str = "",
    diagnostics: str = "",
    test: str = "",
) -> PolicyResult:
    return PolicyResult(
        policy=policy,
        title=f"title of {policy}",
        result=word,
        seconds=seconds,
        test=test or f"e2e/test_x.py::test_{policy.lower()}",
        reason=reason,
        diagnostics=diagnostics,
    )


def write_run(
    directory: Path, profile: str, started: str, *results: PolicyResult, **extra: object
) -> Path:
    report = RunReport(
        profile=profile,
        provider="embedded",
        versions={"kubernetes": "v1.36.2", "trainer": "v2.3.0"},
        started=started,
        wall_seconds=50.0,
        cluster_start_seconds=12.0,
        results=list(results),
        **extra,  # type: ignore[arg-type]
    )
    return report.write(directory)


class Page(HTMLParser):
    """The cells, run headers and group headers of a history page (or of a DOM dump)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.cells: list[dict[str, str]] = []
        self.runs: list[dict[str, str]] = []
        self.groups: list[dict[str, str]] = []
        self.tags: list[str] = []
        self._open: dict[str, str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        values = {k: v or "" for k, v in attrs}
        classes = values.get("class", "").split()
        if tag == "td" and "cell" in classes:
            self._open = values | {"text": ""}
            self.cells.append(self._open)
        elif tag == "th" and "run" in classes:
            self._open = values | {"text": ""}
            self.runs.append(self._open)
        elif tag == "th" and "group" in classes:
            self._open = values | {"text": ""}
            self.groups.append(self._open)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._open = None

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open["text"] += data

    def cell(self, row: int, column: int) -> dict[str, str]:
        (found,) = [c for c in self.cells if c["id"] == f"c{row}-{column}"]
        return found

    def detail(self, row: int, column: int) -> dict:
        return json.loads(self.cell(row, column)["data-detail"])

    def css(self, row: int, column: int) -> str:
        """The cell's result class (the one that is neither `cell` nor `first`)."""
        (css,) = set(self.cell(row, column)["class"].split()) - {"cell", "first", "selected"}
        return css
