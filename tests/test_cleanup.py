"""The test cleanup: everything registered is undone, newest first, failures named."""

from __future__ import annotations

from trainjob_conformance.kube.cleanup import Cleanup
from trainjob_conformance.kube.errors import Rejected


class RecordingKube:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    def delete_if_present(self, api_version, kind, name, namespace=None) -> bool:
        self.deleted.append(f"{kind}/{name}")
        return True


def test_deferred_steps_and_deletions_run_newest_first():
    kube, order = RecordingKube(), []
    cleanup = Cleanup()
    cleanup.register(kube, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    cleanup.defer("finalizer of Pod p", lambda: order.append("finalizer"))

    assert cleanup.run() == []

    assert order == ["finalizer"]
    assert kube.deleted == ["ConfigMap/a"]
    assert cleanup.run() == [], "a second run must not repeat anything"
    assert kube.deleted == ["ConfigMap/a"]


def test_a_refused_step_is_named_with_the_servers_words_and_the_rest_still_run():
    kube = RecordingKube()
    cleanup = Cleanup()
    cleanup.register(kube, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})

    def refuse() -> None:
        raise Rejected(422, "Invalid", "finalizers: Forbidden: no")

    cleanup.defer("finalizer of Pod p", refuse)

    assert cleanup.run() == ["finalizer of Pod p: finalizers: Forbidden: no"]
    assert kube.deleted == ["ConfigMap/a"]
