"""The start waits out the API server's 2 s hold on creates of a just-Established kind."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from trainjob_conformance.cluster.health.readiness import (
    CREATE_HOLD,
    AdmissionProbe,
    wait_past_create_hold,
)
from trainjob_conformance.kube.errors import NotFound


class _Discovery:
    """Only what the hold reads: kinds' resources and CRDs' Established times."""

    def __init__(self, established: dict[str, float]) -> None:
        self.established = established

    def resource(self, api_version: str, kind: str) -> Any:
        group = api_version.rpartition("/")[0]
        return SimpleNamespace(name=f"{kind.lower()}s", group=group)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        if name not in self.established:
            raise NotFound(404, "NotFound", f"{name} not found")
        moment = datetime.fromtimestamp(self.established[name], UTC)
        condition = {
            "type": "Established",
            "status": "True",
            "lastTransitionTime": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        return {"status": {"conditions": [condition]}}


def _probe(api_version: str, kind: str) -> AdmissionProbe:
    return AdmissionProbe(kind, {"apiVersion": api_version, "kind": kind, "metadata": {}})


def test_the_start_waits_until_the_youngest_probed_crd_is_two_seconds_established() -> None:
    now = time.time()
    # Whole seconds, as the API server writes them: the hold ends 2 s after the stamp.
    stamp = float(int(now))
    kube = _Discovery({"flavors.example.io": stamp, "olders.example.io": stamp - 30})
    probes = [_probe("example.io/v1", "Flavor"), _probe("example.io/v1", "Older")]

    wait_past_create_hold(kube, probes, interval=0.01)  # type: ignore[arg-type]

    assert time.time() >= stamp + CREATE_HOLD
    assert time.time() - now < CREATE_HOLD + 0.5


@pytest.mark.parametrize("kinds", [[("batch/v1", "Job")], [("example.io/v1", "Older")]])
def test_built_in_kinds_and_old_crds_cost_nothing(kinds: list[tuple[str, str]]) -> None:
    kube = _Discovery({"olders.example.io": time.time() - 30})
    started = time.monotonic()

    wait_past_create_hold(kube, [_probe(*kind) for kind in kinds], interval=0.01)  # type: ignore[arg-type]

    assert time.monotonic() - started < 0.2
