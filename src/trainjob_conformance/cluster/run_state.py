"""The state file a cluster start leaves in its run directory once the cluster is ready.

The embedded provider writes it; `down`, and the existing provider pointed at
an embedded run's kubeconfig, read it. A kind run writes what its nodes can get
(IMAGE_SUPPLY_FILE), which the existing provider pointed at its kubeconfig reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainjob_conformance.errors import ConformanceError

STATE_FILE = "state.json"
# What the kind provider records beside its kubeconfig (cluster/kind/reclaim.py).
KIND_RECORD_FILE = "kind-cluster.json"
# How a cluster's nodes get images, and which a mirror serves them (ClusterHandle's
# image_supply and mirrored_images), for another process judging the cluster.
IMAGE_SUPPLY_FILE = "image-supply.json"


def read_state(run_dir: Path) -> dict[str, Any]:
    """The state an embedded run wrote once its cluster was ready; {} if there is none."""
    path = run_dir / STATE_FILE
    if not path.is_file():
        return {}
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ConformanceError(f"{path} is not a readable cluster state ({error})") from None
    handle = state.get("handle") if isinstance(state, dict) else None
    if not isinstance(handle, dict) or "kubeconfig" not in handle:
        raise ConformanceError(
            f"{path} is not a cluster state of trainjob-conformance (no handle); "
            "stop the cluster with `trainjob-conformance down --run-dir` and start a new one"
        )
    return state


def embedded_run_dir(kubeconfig: Path) -> Path | None:
    """The run directory of the embedded run whose cluster this kubeconfig reaches, if any."""
    # <run_dir>/kwok/clusters/<name>/kubeconfig.yaml
    if len(kubeconfig.parents) < 4:
        return None
    run_dir = kubeconfig.parents[3]
    return run_dir if read_state(run_dir) else None


def kind_run_dir(kubeconfig: Path) -> Path | None:
    """The run directory of the kind run whose cluster this kubeconfig reaches, if any:
    the kind provider writes its kubeconfig beside the cluster's record."""
    run_dir = kubeconfig.parent
    return run_dir if (run_dir / KIND_RECORD_FILE).is_file() else None


def write_image_supply(run_dir: Path, supply: str, mirrored: list[str]) -> None:
    path = run_dir / IMAGE_SUPPLY_FILE
    path.write_text(json.dumps({"image_supply": supply, "mirrored_images": sorted(mirrored)}))


def read_image_supply(run_dir: Path) -> tuple[str, list[str]] | None:
    """(image_supply, mirrored_images) a run recorded; None where it recorded none."""
    try:
        found = json.loads((run_dir / IMAGE_SUPPLY_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("image_supply"), str):
        return None
    return found["image_supply"], [str(i) for i in found.get("mirrored_images") or []]
