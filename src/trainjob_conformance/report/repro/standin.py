"""The stand-in fix of a known gap: an admission policy that enforces what the
policy expects, so that repro.sh can be seen to print NOT REPRODUCED.

Each lives in the suite as `templates/stand-in-fixes/<ID>.yaml.j2`, rendered
for the bundle's namespace and what the record says the test used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from trainjob_conformance.kube.record import OBSERVATION, REQUEST
from trainjob_conformance.report.repro.records import Record

STAND_IN_DIR = "stand-in-fixes"
# Gaps of one cause share its stand-in fix.
_SAME_CAUSE = {"KQ-MK-001": "TJ-MB-001"}
# Spec fields a test sends that are not the override field.
_NOT_OVERRIDES = {"suspend", "managedBy", "runtimeRef", "trainer"}


def _override_field(entries: list[dict[str, Any]]) -> str:
    """The TrainJob override field the run's release served, as its patches show it."""
    for entry in entries:
        if entry.get("step") == REQUEST and entry.get("kind") == "TrainJob":
            spec = (entry.get("body") or {}).get("spec") or {}
            for key in spec:
                if key not in _NOT_OVERRIDES:
                    return str(key)
    return "runtimePatches"


def _removed_gates(entries: list[dict[str, Any]]) -> list[str]:
    """Gates the run saw on the Pods that the policy expected to be gone."""
    gates: set[str] = set()
    for entry in entries:
        if entry.get("step") == OBSERVATION:
            expected = set(str(entry.get("expected") or "").split())
            gates |= set(str(entry.get("observed") or "").split()) - expected
    return sorted(gates)


def _external_trainjobs(entries: list[dict[str, Any]]) -> list[str]:
    """TrainJobs stored for another controller to manage: spec.managedBy set by the
    test or by a webhook (Kueue's, for a MultiKueue queue)."""
    return sorted(
        str(entry["name"])
        for entry in entries
        if entry.get("step") == REQUEST
        and entry.get("verb") == "create"
        and entry.get("kind") == "TrainJob"
        and not entry.get("dryRun")
        and (((entry.get("answer") or {}).get("object") or {}).get("spec") or {}).get("managedBy")
        not in (None, "trainer.kubeflow.org/trainjob-controller")
    )


def stand_in_fix(templates: Path, record: Record, namespace: str) -> str | None:
    """The rendered stand-in fix of the record's policy, or None if it has none."""
    policy = str(record["policy"])
    path = templates / STAND_IN_DIR / f"{_SAME_CAUSE.get(policy, policy)}.yaml.j2"
    if not path.is_file():
        return None
    entries = list(record.get("entries") or [])
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return environment.from_string(path.read_text()).render(
        namespace=namespace,
        override_field=_override_field(entries),
        gates=_removed_gates(entries),
        external_trainjobs=_external_trainjobs(entries),
    )
