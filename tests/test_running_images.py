"""Which images ran: read from the controllers' Pods as their kubelets report them."""

from __future__ import annotations

from types import SimpleNamespace as NS

from trainjob_conformance.cluster.introspect import running_images

JOBSET = "registry.k8s.io/jobset/jobset:v0.12.0"
JOBSET_RAN = "registry.k8s.io/jobset/jobset@sha256:" + "a" * 64
KUEUE = "registry.k8s.io/kueue/kueue:v0.19.2"
KUEUE_RAN = "registry.k8s.io/kueue/kueue@sha256:" + "b" * 64


def _pod(*statuses: tuple[str, str]) -> NS:
    containers = [NS(image=image, image_id=image_id) for image, image_id in statuses]
    return NS(status=NS(container_statuses=containers or None))


class _Core:
    def __init__(self, pods: dict[tuple[str, str], list[NS]]) -> None:
        self.pods = pods
        self.asked: list[tuple[str, str]] = []

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> NS:
        self.asked.append((namespace, label_selector))
        return NS(items=self.pods.get((namespace, label_selector), []))


def test_each_started_controller_container_is_recorded_with_its_image_id() -> None:
    core = _Core(
        {
            ("jobset-system", "control-plane=controller-manager"): [_pod((JOBSET, JOBSET_RAN))],
            ("kueue-system", "control-plane=controller-manager"): [
                _pod((KUEUE, KUEUE_RAN)),
                # A replica still pulling: no image ID yet, nothing recorded for it.
                _pod((KUEUE, "")),
                _pod(),
            ],
        }
    )
    pods = {
        "jobset": ("jobset-system", "control-plane=controller-manager"),
        "kueue": ("kueue-system", "control-plane=controller-manager"),
    }

    ran = running_images(NS(core=core), pods)  # type: ignore[arg-type]

    assert ran == {JOBSET: JOBSET_RAN, KUEUE: KUEUE_RAN}
    assert sorted(core.asked) == sorted(pods.values())


def test_no_controller_pods_record_nothing() -> None:
    assert running_images(NS(core=_Core({})), {"trainer": ("kubeflow-system", "a=b")}) == {}  # type: ignore[arg-type]
