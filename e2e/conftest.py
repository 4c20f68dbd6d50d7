"""Fixtures the policies share: a runtime owned by the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes.client.exceptions import ApiException

from trainjob_conformance.policies.view import TrainJobView

RUNTIME = ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")


@pytest.fixture
def training_runtime(
    trainjob_view: TrainJobView, trainjob_templates
) -> Iterator[Callable[..., str]]:
    """Create a ClusterTrainingRuntime for this test only (named after its namespace)."""
    kube = trainjob_view.kube
    created: list[str] = []

    def make(**params) -> str:
        name = (
            trainjob_view.namespace if not created else f"{trainjob_view.namespace}-{len(created)}"
        )
        kube.create(trainjob_templates.render_one("clustertrainingruntime", name=name, **params))
        created.append(name)
        probe = trainjob_templates.render_one(
            "trainjob", name="runtime-probe", namespace=trainjob_view.namespace, runtime=name
        )

        # The Trainer's webhook checks runtimes through its informer cache: wait
        # until it sees this one, so the test's first TrainJob is not refused.
        def accepted() -> bool:
            try:
                kube.create(probe, dry_run=True)
            except ApiException as error:
                if "must be created before" in str(error.body):
                    return False
                raise
            return True

        trainjob_view.wait(
            f"the Trainer to see ClusterTrainingRuntime {name}", accepted, timeout=30
        )
        return name

    yield make
    for name in created:
        try:
            kube.delete(*RUNTIME, name=name)
        except ApiException as error:
            if error.status != 404:
                raise
