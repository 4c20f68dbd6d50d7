"""The cluster's time per test, read from an API server audit log."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from trainjob_conformance.bench.audit import Write, reaction, writes_by_namespace, writes_of

T0 = 1_800_000_000.0
HARNESS = "trainjob-conformance/0.1.0"


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _event(
    received: float,
    answered: float,
    agent: str,
    namespace: str = "",
    name: str = "x",
    resource: str = "pods",
    stage: str = "ResponseComplete",
) -> str:
    return json.dumps({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": stage,
        "verb": "create", "userAgent": agent, "responseStatus": {"code": 201},
        "objectRef": {"resource": resource, "namespace": namespace, "name": name},
        "requestReceivedTimestamp": _stamp(received), "stageTimestamp": _stamp(answered),
    })  # fmt: skip


def test_writes_are_filed_by_namespace_and_cluster_scoped_ones_by_name() -> None:
    lines = [
        _event(T0, T0 + 0.01, HARNESS, namespace="ns-1", resource="trainjobs"),
        _event(T0 + 0.2, T0 + 0.25, "kueue/v0.16", namespace="ns-1"),
        _event(T0, T0 + 0.1, HARNESS, name="ns-1", resource="clusterqueues"),
        _event(T0, T0 + 0.1, HARNESS, name="ns-10", resource="clusterqueues"),
        _event(T0, T0 + 0.1, HARNESS, name="ns-1-runtime", resource="clustertrainingruntimes"),
        _event(T0, T0, HARNESS, namespace="ns-1", stage="Panic"),
        '{"cut short',
        "",
    ]
    found = writes_by_namespace(lines, HARNESS)

    assert [w.by_harness for w in found["ns-1"]] == [True, False]
    assert found["ns-1"][0].what == "create trainjobs/x 201"
    assert found["ns-1"][1].received == pytest.approx(T0 + 0.2, abs=1e-6)  # microseconds kept
    assert {w.what for w in writes_of(found, "ns-1")} == {
        "create trainjobs/x 201", "create pods/x 201",
        "create clusterqueues/ns-1 201", "create clustertrainingruntimes/ns-1-runtime 201",
    }  # ns-10 is another test's  # fmt: skip


def _w(received: float, answered: float, harness: bool) -> Write:
    return Write(T0 + received, T0 + answered, harness, "w")


def test_the_reaction_runs_from_each_harness_write_to_the_last_answer_before_the_next() -> None:
    writes = [
        _w(0.0, 0.1, True),  # the TrainJob: the cluster reacts until 1.5
        _w(0.5, 0.6, False),
        _w(1.4, 1.5, False),
        _w(3.0, 3.2, True),  # a patch, no reaction: its own answer, 0.2
        _w(4.0, 4.5, True),  # a write still being answered when the next is sent...
        _w(4.2, 5.5, False),  # ...is counted up to that next write
        _w(5.0, 5.1, True),
    ]
    measured = reaction(writes, began=T0 - 1, ended=T0 + 10)

    assert measured.requests == 4
    assert measured.seconds == pytest.approx(1.5 + 0.2 + 1.0 + 0.5, abs=1e-6)


def test_writes_outside_the_test_and_before_its_first_request_do_not_count() -> None:
    writes = [
        _w(-1.0, -0.9, True),  # the fixture's namespace, before the test's view
        _w(0.2, 0.3, False),  # a manager's write before the test asked for anything
        _w(1.0, 1.1, True),
        _w(1.5, 9.0, False),  # answered after the test ended: cut at its end
        _w(12.0, 12.1, True),  # cleanup, after the end
    ]
    measured = reaction(writes, began=T0, ended=T0 + 2.0)

    assert measured.requests == 1
    assert measured.seconds == pytest.approx(1.0, abs=1e-6)


def test_a_test_without_writes_has_no_reaction() -> None:
    assert reaction([], began=T0, ended=T0 + 5) == reaction([_w(1, 2, False)], T0, T0 + 5)
    assert reaction([], began=T0, ended=T0 + 5).seconds == 0.0
