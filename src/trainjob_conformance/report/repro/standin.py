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
    name = f"{_SAME_CAUSE.get(policy, policy)}.yaml.j2"
    if not (templates / STAND_IN_DIR / name).is_file():
        return None
    entries = list(record.get("entries") or [])
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates / STAND_IN_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return environment.get_template(name).render(
        namespace=namespace,
        override_field=_override_field(entries),
        gates=_removed_gates(entries),
        external_trainjobs=_external_trainjobs(entries),
    )


APPLY_SCRIPT = r"""#!/usr/bin/env bash
# Applies stand-in-fix.yaml and waits (bounded) until its canary, applied last by
# the same admission plugin, answers: then the fix is in effect and repro.sh can
# run. Remove it afterwards with: kubectl delete -f stand-in-fix.yaml
set -euo pipefail
cd "$(dirname "$0")"
if [ $# -gt 0 ]; then export KUBECONFIG="$1"; fi
KUBECTL="${KUBECTL:-kubectl}"
TIMEOUT="${REPRO_TIMEOUT:-120}"
"$KUBECTL" apply -f stand-in-fix.yaml
deadline=$((SECONDS + TIMEOUT))
while :; do
  # A validating canary refuses the dry run; a mutating one labels it.
  out="$("$KUBECTL" create configmap CANARY -n default --dry-run=server \
    -o jsonpath='{.metadata.labels.stand-in-fix}' 2>&1)" || true
  case "$out" in
    in-effect | *"stand-in fix in effect"*) echo "stand-in fix in effect"; exit 0 ;;
  esac
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "the stand-in fix was not in effect after ${TIMEOUT}s; its canary answered: $out" >&2
    exit 2
  fi
  sleep 0.5
done
"""


def apply_script(namespace: str) -> str:
    """apply-stand-in-fix.sh: apply the fix, then wait until its canary answers."""
    return APPLY_SCRIPT.replace("CANARY", f"{namespace}-stand-in-canary")
