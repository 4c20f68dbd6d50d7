"""Fixtures any policy test can use, the project's and a policy pack's alike."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from trainjob_conformance.kube.errors import Rejected
from trainjob_conformance.policies.view import TrainJobView
from trainjob_conformance.render.templates import TemplateSet


@pytest.fixture
def training_runtime(
    trainjob_view: TrainJobView, trainjob_templates: TemplateSet
) -> Callable[..., str]:
    """Create a ClusterTrainingRuntime for this test only (named after its namespace)."""
    kube = trainjob_view.kube
    count = [0]

    def make(**params: object) -> str:
        namespace = trainjob_view.namespace
        name = namespace if not count[0] else f"{namespace}-{count[0]}"
        count[0] += 1
        trainjob_view.create(
            trainjob_templates.render_one("clustertrainingruntime", name=name, **params)
        )
        # Queued, so that in a Kueue-managed namespace Kueue's webhook (which
        # looks the runtime up in its own cache) must see the runtime too.
        probe = trainjob_view.trainjob_manifest(
            "runtime-probe", runtime=name, queue_name="runtime-probe"
        )

        # The webhooks check runtimes through their informer caches: wait until
        # they see this one, so the test's first TrainJob is not refused.
        def accepted() -> bool:
            try:
                kube.create(probe, dry_run=True)
            except Rejected as refused:
                # The Trainer's and Kueue's words for a runtime they cannot see yet.
                unseen = ("must be created before", f"runtime '{name}' not found")
                if any(text in refused.message for text in unseen):
                    return False
                raise
            return True

        trainjob_view.wait(
            f"the Trainer to see ClusterTrainingRuntime {name}", accepted, timeout=30
        )
        return name

    return make
