"""The policy catalog: stable IDs, what each proves, and per-version expectations."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.versions import in_range


class Outcome(enum.Enum):
    HOLDS = "holds"
    KNOWN_GAP = "known-gap"
    NOT_APPLICABLE = "not-applicable"


@dataclass(frozen=True)
class Expectation:
    trainer: str
    values: dict[str, Any]


@dataclass(frozen=True)
class Policy:
    id: str
    title: str
    statement: str
    source: str
    trainer: str
    expectations: tuple[Expectation, ...] = field(default_factory=tuple)

    @property
    def has_known_gap(self) -> bool:
        """Some release range of this policy is a known upstream gap."""
        return any(e.values.get("outcome") == Outcome.KNOWN_GAP.value for e in self.expectations)

    def _matching(self, trainer_version: str) -> dict[str, Any]:
        for expectation in self.expectations:
            if in_range(trainer_version, expectation.trainer):
                return expectation.values
        return {}

    def outcome(self, trainer_version: str) -> Outcome:
        if not in_range(trainer_version, self.trainer):
            return Outcome.NOT_APPLICABLE
        return Outcome(self._matching(trainer_version).get("outcome", Outcome.HOLDS.value))

    def gap_reference(self, trainer_version: str) -> str:
        return str(self._matching(trainer_version).get("reference", "")).strip()

    def expected(self, key: str, trainer_version: str) -> Any:
        values = self._matching(trainer_version)
        if key not in values:
            raise ConformanceError(
                f"policy {self.id} states no expectation {key!r} for Trainer {trainer_version}"
            )
        return values[key]


_REQUIRED = ("title", "statement", "source", "trainer")


def load_catalog(path: Path) -> dict[str, Policy]:
    if not path.is_file():
        raise ConformanceError(f"policy catalog {path} not found")
    raw = yaml.safe_load(path.read_text()) or {}
    catalog = {}
    for policy_id, entry in raw.items():
        missing = [key for key in _REQUIRED if key not in entry]
        if missing:
            raise ConformanceError(f"{path}: policy {policy_id} lacks {', '.join(missing)}")
        expectations = []
        for item in entry.get("expectations") or []:
            values = {k: v for k, v in item.items() if k != "trainer"}
            expectations.append(Expectation(trainer=str(item["trainer"]), values=values))
        catalog[policy_id] = Policy(
            id=policy_id,
            title=str(entry["title"]),
            statement=" ".join(str(entry["statement"]).split()),
            source=str(entry["source"]),
            trainer=str(entry["trainer"]),
            expectations=tuple(expectations),
        )
    return catalog
