"""A break on the MultiKueue worker cluster: written by `prove`, applied by the child.

The worker is started by each pytest child for itself (plugin/peer.py), after
`prove` has applied its break to the manager: a break that acts on the worker
cannot be applied from outside. `prove` writes the break's admission policies
to a file and names it to the child (--trainjob-worker-break); the child
applies them once its worker is up, and they go when the worker is deleted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.waits import WaitTimeout
from trainjob_conformance.prove.sentinel import settle

# Where the sentinel's dry-run request goes on the worker: any namespace it has.
_SENTINEL_NAMESPACE = "default"


def write_worker_break(path: Path, documents: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def apply_worker_break(kube: Kube, path: Path) -> list[str]:
    """Apply the policies in `path` to the worker and return once the API server judges
    requests with them; their kinds and names. A failure is one line."""
    try:
        documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    except (OSError, yaml.YAMLError) as error:
        raise ConformanceError(f"the worker's break {path} cannot be read: {error}") from None
    try:
        for document in documents:
            kube.apply(document)
        for mutating in sorted({doc["kind"].startswith("Mutating") for doc in documents}):
            settle(kube, _SENTINEL_NAMESPACE, "tjc-worker-break", mutating)
    except (ApiError, WaitTimeout) as error:
        first = str(error).splitlines()[0]
        raise ConformanceError(f"the worker's break {path} was not applied: {first}") from None
    return [f"{doc['kind']} {doc['metadata']['name']}" for doc in documents]
