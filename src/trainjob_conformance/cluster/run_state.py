"""The state file a cluster start leaves in its run directory once the cluster is ready.

The embedded provider writes it; `down`, and the existing provider pointed at
an embedded run's kubeconfig, read it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainjob_conformance.errors import ConformanceError

STATE_FILE = "state.json"
# What the kind provider records beside its kubeconfig (cluster/kind/reclaim.py).
KIND_RECORD_FILE = "kind-cluster.json"


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
