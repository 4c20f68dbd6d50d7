"""kwok Stage configs: upstream's fast lifecycle, plus a hold that tests control.

kwok's default stages complete a Job-owned Pod as soon as it runs, so a
TrainJob finishes before a test can act on it. The harness reads the upstream
stage files from the kwok module (never a copy in this repo) and adds one
condition to pod-complete: a Pod annotated with HOLD_ANNOTATION runs until a
test removes the annotation. Every other Pod takes the quick path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.cluster.hold import HOLD_ANNOTATION
from trainjob_conformance.errors import ConformanceError

# Relative to the kwok module root; the same set kwokctl uses by default.
_STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def _hold_released(stage: dict[str, Any]) -> dict[str, Any]:
    expressions = stage["spec"].setdefault("selector", {}).setdefault("matchExpressions", [])
    expressions.append(
        {"key": f'.metadata.annotations["{HOLD_ANNOTATION}"]', "operator": "DoesNotExist"}
    )
    return stage


def harness_stages(kwok_source: Path) -> list[dict[str, Any]]:
    stages = []
    for relative in _STAGE_FILES:
        path = kwok_source / relative
        if not path.is_file():
            raise ConformanceError(
                f"kwok stage file {relative} is missing from {kwok_source}: "
                "this kwok version lays out its stages differently; pin a supported version"
            )
        stage = yaml.safe_load(path.read_text())
        if stage["metadata"]["name"] == "pod-complete":
            stage = _hold_released(stage)
        stages.append(stage)
    return stages
