"""Policy: Kueue's topology-aware scheduling (TAS) of TrainJobs: the topology gate, the
ungater's placement into one domain, slices, and what TAS honours of the Pods' own
constraints."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from trainjob_conformance.cluster.capabilities import Topology
from trainjob_conformance.kube.errors import Rejected
from trainjob_conformance.kube.kinds import NODE, POD, WORKLOAD
from trainjob_conformance.kube.waits import NotYet, WaitTimeout
from trainjob_conformance.lifecycle.turns import one_at_a_time
from trainjob_conformance.policies.history import resource_version, stored_while
from trainjob_conformance.policies.nodes import allocatable_pods, set_pod_capacity
from trainjob_conformance.policies.pods import (
    gate_names,
    pods_of,
    pods_resource_version,
    record_pod_label,
    wait_bound_to,
    watch_pods,
)
from trainjob_conformance.policies.view import DEFAULT_TIMEOUT, JOBSET_NAME_LABEL, condition
from trainjob_conformance.policies.workloads import (
    TOPOLOGY_GATE,
    condition_path,
    owned_by,
    topology_holders_elsewhere,
    wait_admitted,
    wait_finished,
    wait_quota_decided,
)

pytestmark = pytest.mark.kueue

HOSTNAME = "kubernetes.io/hostname"
# Two Pods that must share a domain, sized by the two_pods fixture (e2e/conftest.py).
TWO_PODS = 2


# Kueue's topology ungater lists the Pods of a PodSet by this label
# (pkg/controller/tas/topology_ungater.go); the job integration puts it on them.
PODSET_LABEL = "kueue.x-k8s.io/podset"
# Seconds a TAS Workload may wait for admission (see submit_tas).
TAS_ADMISSION_TIMEOUT = 150


# Each test's topology-aware flavor lies over the same nodes, and Kueue counts an
# admitted TAS Workload against the nodes of every such flavor. When that Workload goes,
# Kueue retries the Workloads it found no room for only in the same ClusterQueue or
# cohort (pkg/cache/queue/manager.go, QueueAssociatedInadmissibleWorkloadsAfter), and
# each test's ClusterQueue is its own: a TAS test that ran beside another stayed Pending
# on idle nodes (docs/measurements.md, 2026-11-28 afternoon). So TAS tests take turns,
# and each starts once no other test's TAS Workload is left admitted.
TAS_TURN_TIMEOUT = 300.0


@pytest.fixture(autouse=True)
def one_tas_test_at_a_time(request):
    """Autouse, so it is set up before the test's namespace and let go after it is
    deleted."""
    if "tas_topology" not in request.fixturenames:
        yield
        return
    cluster = request.getfixturevalue("trainjob_cluster")
    lock = (cluster.run_dir or Path(tempfile.gettempdir())) / "turns" / "kueue-tas.lock"
    with one_at_a_time(lock, "a Kueue TAS test", timeout=TAS_TURN_TIMEOUT):
        yield


def no_tas_workload_elsewhere(view):
    def probe():
        held = topology_holders_elsewhere(view)
        return not held or NotYet(f"still admitted with a topology assignment: {held}")

    view.wait("other tests' TAS Workloads to be gone", probe, timeout=90)


def tas_queue(view, kueue_queue, tas_topology):
    """A queue on a topology-aware flavor of the nodes' topology, the level two Pods must
    share, and the flavor's nodes (where the Pods' CPU must be found)."""
    topology, level = tas_topology
    no_tas_workload_elsewhere(view)
    labels = topology.flavor_labels()
    queue = kueue_queue(node_labels=labels, topology=topology)
    return queue, level, topology.nodes_with(labels)


def submit_tas(view, runtime, queue, resources):
    """Submit TrainJob `tas`; returns the resourceVersion to watch its Pods from, their
    versions once both exist, and its Workload as admitted."""
    since = pods_resource_version(view)
    view.create_trainjob(
        "tas", runtime=runtime, queue_name=queue, num_nodes=TWO_PODS, resources_per_node=resources
    )
    # cpu_room sized the Pods from the CPU the scheduler will have free on the flavor's
    # nodes and waited for it there; Kueue counts an earlier test's admitted Workload
    # against those nodes until it releases that Workload, which can come later (on kind
    # an earlier test's held Pods take their 30 s grace period). Admission waits for it,
    # and a timeout says why Kueue had not admitted.
    workload = wait_admitted(view, "tas", timeout=TAS_ADMISSION_TIMEOUT)
    created = watch_pods(view, "tas", since, lambda h: len(h) == 2, "the 2 Pods of TrainJob tas")
    return since, created, workload


def all_placed(history):
    latest = [versions[-1] for versions in history.values()]
    return len(latest) == 2 and all(
        TOPOLOGY_GATE not in gate_names(p["spec"]) and p["spec"].get("nodeName") for p in latest
    )


@pytest.mark.policy("KQ-TAS-001")
def test_tas_pods_are_created_behind_the_topology_gate(
    trainjob_view, training_runtime, kueue_queue, tas_topology, two_pods
):
    view = trainjob_view
    queue, level, nodes = tas_queue(view, kueue_queue, tas_topology)
    runtime = training_runtime(hold=True, required_topology=level)

    _, created, _ = submit_tas(view, runtime, queue, two_pods(nodes=nodes))

    for name, versions in created.items():
        assert TOPOLOGY_GATE in gate_names(versions[0]["spec"]), f"{name} was created ungated"
        assert not versions[0]["spec"].get("nodeName"), f"{name} was created bound"


@pytest.mark.policy("KQ-TAS-002")
def test_kueue_ungates_tas_pods_into_one_topology_domain(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, tas_topology, two_pods
):
    view = trainjob_view
    queue, level, nodes = tas_queue(view, kueue_queue, tas_topology)
    runtime = training_runtime(hold=True, required_topology=level)

    since, created, workload = submit_tas(view, runtime, queue, two_pods(nodes=nodes))
    assigned = [
        a["name"]
        for a in workload["status"]["admission"]["podSetAssignments"]
        if a.get("topologyAssignment")
    ]
    assert assigned, "Kueue admitted the Workload without a topology assignment"
    trainjob_policy.gap_exercised(
        f"Kueue admitted the Workload with a topology assignment for {assigned} "
        "while its Pods wait behind the topology gate"
    )
    record_pod_label(view, "tas", created, PODSET_LABEL, expected=" ".join(assigned * 2))

    with trainjob_policy.holds():
        for name, versions in created.items():
            labels = versions[-1]["metadata"].get("labels") or {}
            assert PODSET_LABEL in labels, (
                f"{name} lacks the {PODSET_LABEL} label by which Kueue finds the Pods to ungate"
            )
        history = watch_pods(view, "tas", since, all_placed, "2 Pods ungated by Kueue and bound")
        domains = set()
        for name, versions in history.items():
            gated = [TOPOLOGY_GATE in gate_names(v["spec"]) for v in versions]
            ungated_at = gated.index(False)
            assert ungated_at > 0 and all(gated[:ungated_at]), f"{name}: gate order {gated}"
            placement = versions[ungated_at]["spec"].get("nodeSelector") or {}
            assert HOSTNAME in placement, (
                f"{name} was ungated without a node placement: {placement}"
            )
            node = view.kube.get(*NODE, versions[-1]["spec"]["nodeName"])["metadata"]
            assert node["name"] == placement[HOSTNAME], name
            domains.add(node["labels"][level])
        assert len(domains) == 1, f"the Pods span {level} domains {sorted(domains)}"


@pytest.mark.policy("KQ-TAS-003")
def test_pods_whose_only_tas_annotation_is_a_slice_topology_are_ungated_and_placed(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, tas_topology, two_pods
):
    view = trainjob_view
    queue, level, nodes = tas_queue(view, kueue_queue, tas_topology)
    # Slices of one Pod, each in a domain of `level`, and no other TAS annotation.
    runtime = training_runtime(hold=True, slice_topology=level, slice_size=1)

    since, created, _ = submit_tas(view, runtime, queue, two_pods(nodes=nodes))
    for name, versions in created.items():
        assert TOPOLOGY_GATE in gate_names(versions[0]["spec"]), f"{name} was created ungated"
    trainjob_policy.gap_exercised(
        "Kueue admitted the Workload and gated its Pods, whose only TAS annotations are "
        "podset-slice-required-topology and podset-slice-size"
    )

    with trainjob_policy.holds():
        try:
            watch_pods(view, "tas", since, all_placed, "2 Pods ungated by Kueue and bound")
            placed = ""
        except WaitTimeout as timeout:
            placed = str(timeout).splitlines()[0]
        gates = sorted({g for pod in pods_of(view, "tas") for g in gate_names(pod["spec"])})
        view.record_observation(
            "the scheduling gates left on the Pods of TrainJob tas",
            POD,
            selector=f"{JOBSET_NAME_LABEL}=tas",
            jsonpath="{.items[*].spec.schedulingGates[*].name}",
            expected="",
            observed=" ".join(gates),
            within=60,
        )
        assert not placed, f"{placed}; gates left: {gates}"


# Three Pods in slices of two: the last slice is partial. Kueue's TAS places whole
# slices only, so its assignment covers the first two Pods (kubernetes-sigs/kueue#13223).
PARTIAL_SLICE_PODS = 3
WHOLE_SLICE_PODS = 2
LAST_POD_GRACE = 10


def placed(count):
    def enough(history):
        latest = [versions[-1] for versions in history.values()]
        done = [
            p
            for p in latest
            if TOPOLOGY_GATE not in gate_names(p["spec"]) and p["spec"].get("nodeName")
        ]
        return len(latest) == PARTIAL_SLICE_PODS and len(done) >= count

    return enough


def submit_partial_slices(view, policy, training_runtime, kueue_queue, tas_topology, two_pods):
    """Submit TrainJob `partial` (three Pods in slices of two sharing a domain) on a
    topology-aware queue; returns the resourceVersion its Pods are watched from, once
    Kueue has admitted it and all three exist, each created behind the topology gate."""
    queue, level, nodes = tas_queue(view, kueue_queue, tas_topology)
    runtime = training_runtime(hold=True, slice_topology=level, slice_size=WHOLE_SLICE_PODS)
    since = pods_resource_version(view)
    view.create_trainjob(
        "partial",
        runtime=runtime,
        queue_name=queue,
        num_nodes=PARTIAL_SLICE_PODS,
        resources_per_node=two_pods(nodes=nodes),
    )
    wait_admitted(view, "partial", timeout=TAS_ADMISSION_TIMEOUT)
    created = watch_pods(
        view, "partial", since, lambda h: len(h) == PARTIAL_SLICE_PODS, "the 3 Pods"
    )
    view.record_wait(
        "the 3 Pods of TrainJob partial",
        POD,
        selector=f"{JOBSET_NAME_LABEL}=partial",
        jsonpath="{.items[*].metadata.name}",
        count=PARTIAL_SLICE_PODS,
    )
    for name, versions in created.items():
        assert TOPOLOGY_GATE in gate_names(versions[0]["spec"]), f"{name} was created ungated"
    policy.gap_exercised(
        f"Kueue admitted TrainJob partial, {PARTIAL_SLICE_PODS} Pods in slices of "
        f"{WHOLE_SLICE_PODS} sharing a {level} domain, and gated its Pods"
    )
    return since


def still_gated(view, expected, within):
    """The Pods of TrainJob partial behind the topology gate; noted as an observation
    whose answer the policy expects to be `expected`."""
    gated = sorted(
        pod["metadata"]["name"]
        for pod in pods_of(view, "partial")
        if TOPOLOGY_GATE in gate_names(pod["spec"])
    )
    view.record_observation(
        "the topology gates left on the Pods of TrainJob partial",
        POD,
        selector=f"{JOBSET_NAME_LABEL}=partial",
        jsonpath="{.items[*].spec.schedulingGates[*].name}",
        expected=expected,
        observed=" ".join([TOPOLOGY_GATE] * len(gated)),
        within=within,
    )
    return gated


def watch_placed(view, since, count, timeout=DEFAULT_TIMEOUT):
    """Why `count` Pods of TrainJob partial were not all ungated and bound; empty once
    they are."""
    try:
        watch_pods(
            view, "partial", since, placed(count), f"{count} Pods ungated and bound", timeout
        )
    except WaitTimeout as timeout:
        return str(timeout).splitlines()[0]
    return ""


@pytest.mark.policy("KQ-TAS-004")
def test_the_pods_of_whole_slices_are_ungated_when_the_last_slice_is_partial(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, tas_topology, two_pods
):
    view = trainjob_view
    since = submit_partial_slices(
        view, trainjob_policy, training_runtime, kueue_queue, tas_topology, two_pods
    )

    with trainjob_policy.holds():
        why = watch_placed(view, since, WHOLE_SLICE_PODS)
        # One Pod is left gated on every release (KQ-TAS-005): the two, not the third.
        gated = still_gated(view, expected=TOPOLOGY_GATE, within=DEFAULT_TIMEOUT)
        assert not why, (
            f"the {WHOLE_SLICE_PODS} Pods of TrainJob partial's whole slice were not ungated "
            f"and bound: {why}; still gated: {gated}"
        )


@pytest.mark.policy("KQ-TAS-005")
def test_no_pod_of_an_admitted_tas_trainjob_is_left_gated(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, tas_topology, two_pods
):
    view = trainjob_view
    try:
        since = submit_partial_slices(
            view, trainjob_policy, training_runtime, kueue_queue, tas_topology, two_pods
        )
    except Rejected as refused:
        # A Kueue that refuses such slice sizes keeps the statement too
        # (kubernetes-sigs/kueue#15446 proposes it): nothing admitted, nothing gated.
        trainjob_policy.gap_exercised(f"TrainJob partial was refused: {refused.message}")
        with trainjob_policy.holds():
            return

    with trainjob_policy.holds():
        # Kueue ungates the Pods of one Workload in one pass: once the whole slice's are
        # placed, the last Pod has had its turn; a few seconds more cover a second pass.
        why = watch_placed(view, since, WHOLE_SLICE_PODS)
        if not why:
            view.record_wait(
                f"{WHOLE_SLICE_PODS} Pods of TrainJob partial bound to nodes",
                POD,
                selector=f"{JOBSET_NAME_LABEL}=partial",
                jsonpath="{.items[*].spec.nodeName}",
                count=WHOLE_SLICE_PODS,
            )
            why = watch_placed(view, since, PARTIAL_SLICE_PODS, timeout=LAST_POD_GRACE)
        gated = still_gated(view, expected="", within=LAST_POD_GRACE)
        assert not why, (
            f"Kueue admitted TrainJob partial but left Pods behind its topology gate: {why}; "
            f"still gated: {gated}"
        )


def record_scheduled(view, trainjob):
    """Whether TrainJob `trainjob`'s Pod is scheduled, noted as the observation a
    reproduction reads: a Pod left gated, or placed where its affinity forbids, is not."""
    pods = pods_of(view, trainjob)
    view.record_observation(
        f"whether the Pod of TrainJob {trainjob} is scheduled",
        POD,
        selector=f"{JOBSET_NAME_LABEL}={trainjob}",
        jsonpath='{.items[*].status.conditions[?(@.type=="PodScheduled")].status}',
        expected="True",
        observed=" ".join(str(condition(pod, "PodScheduled").get("status", "")) for pod in pods),
        within=DEFAULT_TIMEOUT,
    )


def ungated_on(view, trainjob, since):
    """The node (its hostname) Kueue's ungater placed TrainJob `trainjob`'s one Pod on:
    the nodeSelector the Pod carried in the version that lost the topology gate."""

    def ungated(history):
        return any(TOPOLOGY_GATE not in gate_names(v[-1]["spec"]) for v in history.values())

    try:
        history = watch_pods(
            view, trainjob, since, ungated, f"the Pod of TrainJob {trainjob} ungated"
        )
    except WaitTimeout:
        record_scheduled(view, trainjob)
        raise
    versions = next(iter(history.values()))
    placement = versions[-1]["spec"].get("nodeSelector") or {}
    assert HOSTNAME in placement, (
        f"the Pod of TrainJob {trainjob} was ungated without a node placement: {placement}"
    )
    return placement[HOSTNAME]


@pytest.mark.policy("KQ-TAS-006")
def test_tas_places_pods_only_on_nodes_their_required_node_affinity_allows(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, tas_topology, two_pods
):
    view = trainjob_view
    queue, _, nodes = tas_queue(view, kueue_queue, tas_topology)
    if len(nodes) < 2:
        pytest.skip(
            f"needs 2 nodes under the topology-aware flavor (one a node affinity excludes); "
            f"it has {len(nodes)}"
        )
    resources = two_pods(nodes=nodes)
    # One Pod per node (the lowest level): where Kueue puts a Pod nothing restricts is
    # the node the affinity below excludes, so a Kueue that ignored the affinity would
    # put the second TrainJob's Pod there again (its choice is a sort of the nodes).
    since = pods_resource_version(view)
    view.create_trainjob(
        "free",
        runtime=training_runtime(required_topology=HOSTNAME),
        queue_name=queue,
        num_nodes=1,
        resources_per_node=resources,
    )
    wait_admitted(view, "free", timeout=TAS_ADMISSION_TIMEOUT)
    trainjob_policy.gap_exercised(
        "Kueue admitted TrainJob free, one Pod behind the topology gate of a flavor of "
        f"{len(nodes)} nodes"
    )

    with trainjob_policy.holds():
        # On a Kueue whose ungater cannot find the Pods (KQ-TAS-002) this is where it stops.
        excluded = ungated_on(view, "free", since)
        wait_finished(view, "free", timeout=DEFAULT_TIMEOUT)  # its node is free again
        allowed = sorted(nodes - {excluded})
        since = pods_resource_version(view)
        runtime = training_runtime(required_topology=HOSTNAME, node_affinity=allowed)
        view.create_trainjob(
            "kept", runtime=runtime, queue_name=queue, num_nodes=1, resources_per_node=resources
        )
        wait_admitted(view, "kept", timeout=TAS_ADMISSION_TIMEOUT)
        placed = ungated_on(view, "kept", since)
        if placed in allowed:
            view.wait(
                "the Pod of TrainJob kept bound",
                lambda: all(pod["spec"].get("nodeName") for pod in pods_of(view, "kept")),
            )
        record_scheduled(view, "kept")
        assert placed in allowed, (
            f"Kueue placed TrainJob kept's Pod on {placed}, which its required node affinity "
            f"excludes (it allows {', '.join(allowed)})"
        )


# KQ-TAS-007's node has room for two Pods, one of them taken by an admitted TrainJob; a
# TrainJob of two PodSets of one Pod each does not fit in what is left until the node is
# given room for three.
NODE_ROOM = 2
RAISED_ROOM = 3
TWO_PODSETS = 2
DATASET_INITIALIZER = "dataset-initializer"
SMALL_POD = {"cpu": "100m", "memory": "64Mi"}


@pytest.mark.policy("KQ-TAS-007")
def test_tas_counts_the_pods_of_every_podset_against_a_nodes_pod_capacity(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, own_nodes
):
    view = trainjob_view
    nodes = own_nodes(count=1, pods=NODE_ROOM)
    (node,) = nodes.names
    # One level, the node: Kueue places every Pod on the flavor's one node or nowhere.
    queue = kueue_queue(
        node_labels=nodes.labels,
        topology=Topology(levels=(HOSTNAME,), nodes=()),
        tolerations=nodes.tolerations,
    )
    small = {"requests": SMALL_POD}

    # A held TrainJob of one Pod is admitted there and keeps its place: Kueue knows the
    # node, and one of its two places is taken.
    view.create_trainjob(
        "one",
        runtime=training_runtime(hold=True, required_topology=HOSTNAME),
        queue_name=queue,
        num_nodes=1,
        resources_per_node=small,
    )
    wait_admitted(view, "one")

    since = resource_version(view, WORKLOAD)
    runtime = training_runtime(
        required_topology=HOSTNAME, initializers={DATASET_INITIALIZER: SMALL_POD}
    )
    view.create_trainjob(
        "two", runtime=runtime, queue_name=queue, num_nodes=1, resources_per_node=small
    )
    workload = wait_quota_decided(view, "two")
    reserved = condition(workload, "QuotaReserved")
    podsets = ", ".join(p["name"] for p in workload["spec"]["podSets"])
    count = len(workload["spec"]["podSets"])
    trainjob_policy.gap_exercised(
        f"Kueue decided on TrainJob two, PodSets {podsets} of one Pod each, while node "
        f"{node} has room for {NODE_ROOM} Pods, one taken by TrainJob one: QuotaReserved "
        f"{reserved.get('status')} ({reserved.get('message', '')})"
    )
    view.record_observation(
        "whether Kueue reserved quota for TrainJob two",
        WORKLOAD,
        jsonpath=condition_path("two", "QuotaReserved"),
        expected="False",
        observed=str(reserved.get("status")),
    )

    with trainjob_policy.holds():
        assert count == TWO_PODSETS, f"the Workload of TrainJob two has PodSets {podsets}"
        held = stored_while(
            view,
            WORKLOAD,
            since,
            "QuotaReserved True",
            lambda w: owned_by(w, "two") and condition(w, "QuotaReserved").get("status") == "True",
        )
        assert not held, (
            f"Kueue reserved quota for TrainJob two, {count} Pods in PodSets {podsets}, on its "
            f"flavor's one node {node}, where TrainJob one holds one of the {NODE_ROOM} places "
            f"the test gave it (its status says allocatable pods: "
            f"{allocatable_pods(view, node)}): {held[0]} ({reserved.get('message', '')})"
        )
        # Room for both: Kueue places the same Workload, so its refusal was the count.
        set_pod_capacity(view, node, RAISED_ROOM)
        wait_admitted(view, "two")
        wait_bound_to(view, "two", count, node)
