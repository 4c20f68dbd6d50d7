"""Finding a policy's record (kube/record.py) in what a run wrote.

A run keeps each test's record beside its diagnostics,
`diagnostics/<profile>/<test>.record.json`, in the report directory and in
the results archive `<profile>-results.tar.gz`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.archive import RECORD_SUFFIX, archive_path, unpacked

Record = dict[str, Any]


def _records_under(results: Path, profile: str) -> list[Record]:
    found = []
    for path in sorted((results / "diagnostics" / profile).glob(f"*{RECORD_SUFFIX}")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ConformanceError(f"{path} is not a readable record ({error})") from None
        record["_path"] = str(path)
        found.append(record)
    return found


def records_of(source: Path, profile: str) -> list[Record]:
    """Every record a profile's run left in `source`: a report directory (its
    archive is read when present) or a results archive."""
    if source.is_file():
        return _records_under(unpacked(source), profile)
    archive = archive_path(source, profile)
    if archive.is_file():
        return _records_under(unpacked(archive), profile)
    return _records_under(source, profile)


def record_of(policy: str, source: Path, profile: str) -> Record | None:
    """The record of `policy` in `source` (the newest if several tests left one), or None."""
    matching = [r for r in records_of(source, profile) if r.get("policy") == policy]
    return max(matching, key=lambda r: str(r.get("recorded") or "")) if matching else None
