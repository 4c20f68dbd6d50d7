"""Objects a test made outside its namespace, deleted when the test ends.

A test's namespace takes its namespaced objects with it; cluster-scoped ones
(ClusterQueues, ResourceFlavors, runtimes, MultiKueue objects) and anything on
a second cluster need deleting one by one. Each is registered the moment it
is created, so no test writes its own try/finally.
"""

from __future__ import annotations

from typing import Any

from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError


class Cleanup:
    """Deletes what was registered, newest first; a failure does not stop the rest."""

    def __init__(self) -> None:
        self._objects: list[tuple[Kube, dict[str, Any]]] = []

    def register(self, kube: Kube, manifest: dict[str, Any]) -> None:
        self._objects.append((kube, manifest))

    def run(self) -> list[str]:
        """Delete everything; returns what could not be deleted, with the server's words."""
        failed = []
        while self._objects:
            kube, manifest = self._objects.pop()
            metadata = manifest["metadata"]
            try:
                kube.delete_if_present(
                    manifest["apiVersion"],
                    manifest["kind"],
                    metadata["name"],
                    metadata.get("namespace"),
                )
            except ApiError as error:
                failed.append(f"{manifest['kind']} {metadata['name']}: {error.message}")
        return failed
