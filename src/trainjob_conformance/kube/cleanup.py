"""What a test changed outside its namespace's own lifetime, undone when it ends.

A test's namespace takes its namespaced objects with it; cluster-scoped ones
(ClusterQueues, ResourceFlavors, runtimes, MultiKueue objects) and anything on
a second cluster need deleting one by one. Some changes block the namespace's
own deletion (a finalizer a test put on a Pod) and must be undone first. Each
is registered the moment it is made, so no test writes its own try/finally.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError


class Cleanup:
    """Undoes what was registered, newest first; a failure does not stop the rest."""

    def __init__(self) -> None:
        self._steps: list[tuple[str, Callable[[], object]]] = []
        # The objects registered for deletion, on whichever cluster: a bench's
        # timeline reads their timestamps before they go.
        self.objects: list[tuple[Kube, dict[str, Any]]] = []

    def register(self, kube: Kube, manifest: dict[str, Any]) -> None:
        """Delete this object when the test ends (unless it is already gone)."""
        metadata = manifest["metadata"]
        self.objects.append((kube, manifest))
        self._steps.append(
            (
                f"{manifest['kind']} {metadata['name']}",
                lambda: kube.delete_if_present(
                    manifest["apiVersion"],
                    manifest["kind"],
                    metadata["name"],
                    metadata.get("namespace"),
                ),
            )
        )

    def defer(self, what: str, undo: Callable[[], object]) -> None:
        """Run `undo` when the test ends; `what` names it if the server refuses."""
        self._steps.append((what, undo))

    def run(self) -> list[str]:
        """Undo everything; returns what could not be undone, with the server's words."""
        failed = []
        while self._steps:
            what, undo = self._steps.pop()
            try:
                undo()
            except ApiError as error:
                failed.append(f"{what}: {error.message}")
        return failed
