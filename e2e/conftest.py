"""Fixtures the policies share: cluster-scoped objects owned by one test."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import yaml

from trainjob_conformance.cluster.capabilities import Topology, largest_fitting_request
from trainjob_conformance.cluster.hold import HOLD_IMAGE
from trainjob_conformance.kube.kinds import CLUSTER_TRAINING_RUNTIME, LOCAL_QUEUE, NAMESPACE
from trainjob_conformance.kube.waits import NotYet, wait_for
from trainjob_conformance.policies.admission import accepted_within
from trainjob_conformance.policies.nodes import OwnNodes, add_own_nodes
from trainjob_conformance.policies.runtimes import images_of, stand_in_copy
from trainjob_conformance.policies.view import TrainJobView
from trainjob_conformance.stack.gobuild import module_source

# Where a Trainer release keeps the runtimes it ships (its runtimes overlay's).
SHIPPED_RUNTIMES = "manifests/base/runtimes"


@pytest.fixture
def schedulable_nodes(trainjob_cluster) -> Callable[[int], set[str]]:
    """Names of the cluster's schedulable nodes; skips when there are fewer than asked."""

    def need(count: int) -> set[str]:
        names = {node.name for node in trainjob_cluster.schedulable_nodes()}
        if len(names) < count:
            pytest.skip(f"needs {count} schedulable nodes; the cluster has {len(names)}")
        return names

    return need


# Below this a CPU request says little; a cluster with less room skips.
MIN_POD_CPU = 10  # millicores
# A Pod's default termination grace (30 s) and then some.
TERMINATING_BOUND = 45.0
# How long a new runtime may take to reach the Trainer's cache (seconds).
RUNTIME_SEEN_SECONDS = 30.0


@pytest.fixture
def cpu_room(trainjob_cluster) -> Callable[..., int]:
    """A per-Pod CPU request (millicores, at most `at_most`) with which `pods` Pods run at
    once on the schedulable nodes' free CPU; skips when the cluster cannot fit them.

    `cluster` is another cluster's handle (a MultiKueue worker's) where the Pods
    run there; `nodes` names the only nodes they may run on (a flavor's). `share` leaves room for that many tests doing the same at once: each sizes
    its Pods from the same free CPU, read before any of them created Pods.
    Terminating Pods (an earlier test's) still hold their CPU for the
    scheduler: sized as if they were gone, then waited for while they hold
    what is needed.
    """

    def need(
        pods: int, at_most: int, share: int = 1, cluster=None, nodes: frozenset[str] | None = None
    ) -> int:
        cluster = cluster or trainjob_cluster

        def free_on_nodes(settled: bool = False) -> dict[str, int]:
            free = cluster.free_cpu(settled=settled)
            return free if nodes is None else {n: c for n, c in free.items() if n in nodes}

        settled = free_on_nodes(settled=True)
        request = largest_fitting_request([c // share for c in settled.values()], pods, at_most)
        if request < MIN_POD_CPU:
            pytest.skip(
                f"needs {pods} Pods of {MIN_POD_CPU}m CPU or more running at once "
                f"({share} such tests at a time); the schedulable nodes have {settled} "
                "millicores free"
            )

        def room() -> dict[str, int] | NotYet:
            free = free_on_nodes()
            fits = largest_fitting_request([c // share for c in free.values()], pods, request)
            return free if fits == request else NotYet(f"millicores free now: {free}")

        wait_for(
            f"CPU for {pods} Pods of {request}m (x{share}) once terminating Pods are gone",
            room,
            timeout=TERMINATING_BOUND,
        )
        return request

    return need


# Kueue's policies mostly run TrainJobs of 2 Pods at once, of up to 1 CPU each: sized
# from the CPU the nodes have free, so that two such tests fit side by side (pytest -n 2)
# on a kind cluster whose nodes have the host's CPUs. The policies are about Kueue's
# decisions, which do not depend on the size.
TWO_PODS_CPU = 1000  # millicores


@pytest.fixture
def two_pods(cpu_room) -> Callable[..., dict]:
    """Resources per node for a TrainJob of 2 Pods that must run at once, on the test's
    cluster or on `cluster` (a MultiKueue worker's handle)."""

    def size(cluster=None, nodes: frozenset[str] | None = None) -> dict:
        cpu = cpu_room(2, TWO_PODS_CPU, share=2, cluster=cluster, nodes=nodes)
        return {"requests": {"cpu": f"{cpu}m", "memory": "256Mi"}}

    return size


def _stand_in_seen(view: TrainJobView, cluster, runtime: dict, name: str) -> str:
    """Create `runtime` as ClusterTrainingRuntime `name`, each container the nodes cannot
    run given the harness's test image (policies/runtimes.py); `name` once the Trainer
    has seen it."""
    view.create(stand_in_copy(runtime, name, HOLD_IMAGE, cluster.can_run_image))
    # The Trainer's webhook finds a TrainJob's runtime in its manager's cache, which
    # sees a new runtime a moment after the API server stored it (seen on kind:
    # "specified clusterTrainingRuntime must be created before the TrainJob"): the
    # test starts once a dry run of a TrainJob naming it is accepted.
    probe = view.trainjob_manifest("runtime-probe", runtime=name, suspend=True)
    accepted_within(
        lambda: view.kube.create(probe, dry_run=True),
        RUNTIME_SEEN_SECONDS,
        f"the Trainer has seen ClusterTrainingRuntime {name}",
    )
    return name


def _need_runnable(cluster, runtime: dict, what: str) -> None:
    """Skip when the nodes can run neither the runtime's images nor the test image."""
    missing = [i for i in images_of(runtime) if not cluster.can_run_image(i)]
    if missing and not cluster.can_run_image(HOLD_IMAGE):
        pytest.skip(
            f"the nodes cannot get {missing} ({what}) nor the harness's test "
            f"image {HOLD_IMAGE} (images: {cluster.image_supply})"
        )


@pytest.fixture
def runnable_runtime(trainjob_cluster, trainjob_view: TrainJobView) -> Callable[[str], str]:
    """The name of the ClusterTrainingRuntime `name` where the nodes can run its images;
    else of a copy of it for this test whose containers run the harness's test image
    and exit 0 (policies/runtimes.py). Skips when the nodes cannot run that either."""

    def need(name: str) -> str:
        runtime = trainjob_cluster.kube.get(*CLUSTER_TRAINING_RUNTIME, name)
        _need_runnable(trainjob_cluster, runtime, f"runtime {name}")
        if all(trainjob_cluster.can_run_image(i) for i in images_of(runtime)):
            return name
        stand_in = f"{trainjob_view.namespace}-{name}"
        return _stand_in_seen(trainjob_view, trainjob_cluster, runtime, stand_in)

    return need


@pytest.fixture
def shipped_runtime(trainjob_cluster, trainjob_view: TrainJobView) -> Callable[[str], str]:
    """A copy for this test of a runtime the cluster's Trainer release ships (`file`
    under its manifests/base/runtimes, read from the Go module cache), as the nodes can
    run it; skips where that release ships no such file."""

    def need(file: str) -> str:
        version = trainjob_cluster.versions.get("trainer")
        if not version:
            pytest.skip("the cluster's Trainer release is not known: its shipped runtimes are not")
        path = module_source("trainer", version) / SHIPPED_RUNTIMES / file
        if not path.is_file():
            pytest.skip(f"Trainer {version} ships no {SHIPPED_RUNTIMES}/{file}")
        runtime = next(d for d in yaml.safe_load_all(path.read_text()) if d)
        _need_runnable(trainjob_cluster, runtime, f"{SHIPPED_RUNTIMES}/{file} of Trainer {version}")
        name = f"{trainjob_view.namespace}-{runtime['metadata']['name']}"
        return _stand_in_seen(trainjob_view, trainjob_cluster, runtime, name)

    return need


@pytest.fixture
def node_group(trainjob_cluster) -> tuple[str, str]:
    """A node label (key, value) that 2+ schedulable nodes carry and others do not."""
    found = trainjob_cluster.splitting_label(at_least=2)
    if found is None:
        pytest.skip(
            "needs a node label that 2 or more schedulable nodes carry and others do not "
            "(to show where a flavor's Pods land); the cluster's nodes have none"
        )
    return found


@pytest.fixture
def tas_topology(trainjob_cluster) -> tuple[Topology, str]:
    """The nodes' topology and the level two Pods must share, for Kueue TAS."""
    topology = trainjob_cluster.topology()
    if topology is None:
        pytest.skip(
            "needs node topology labels (a zone, block or rack label and "
            "kubernetes.io/hostname on every schedulable node) for topology-aware scheduling"
        )
    level = topology.level_for(pods=2)
    if level is None:
        pytest.skip(
            f"needs a topology level with several domains, one of 2+ nodes; "
            f"the levels {', '.join(topology.levels)} have none"
        )
    return topology, level


@pytest.fixture
def own_nodes(trainjob_cluster, trainjob_view: TrainJobView) -> Callable[..., OwnNodes]:
    """Nodes of the test's own, with room for the Pods it chooses (policies/nodes.py);
    skips where the cluster's nodes are kubelets, whose capacity is set when they start."""

    def make(count: int, pods: int) -> OwnNodes:
        if not trainjob_cluster.adds_nodes:
            pytest.skip(
                "needs nodes whose pod capacity the test chooses, which a cluster of kwok's "
                f"nodes gives; this cluster's nodes run a kubelet (images: "
                f"{trainjob_cluster.image_supply}), whose capacity is fixed when it starts"
            )
        return add_own_nodes(trainjob_view, count, pods)

    return make


@pytest.fixture
def kueue_queue(trainjob_view: TrainJobView, trainjob_templates) -> Callable[..., str]:
    """A LocalQueue in the test's namespace, backed by a ClusterQueue and flavor of its own.

    Returns the LocalQueue's name. With a `topology` the flavor is
    topology-aware (a Topology over the levels the nodes' labels show).
    """
    namespace = trainjob_view.namespace

    def make(
        node_labels: dict | None = None,
        topology: Topology | None = None,
        cpu: str = "8",
        memory: str = "32Gi",
        admission_checks: tuple[str, ...] = (),
        preemption: str = "",
        tolerations: list[dict] | None = None,
    ) -> str:
        render = trainjob_templates.render_one
        if topology is not None:
            trainjob_view.create(render("topology", name=namespace, levels=list(topology.levels)))
        trainjob_view.create(
            render(
                "resourceflavor",
                name=namespace,
                node_labels=dict(node_labels or {}),
                tolerations=list(tolerations or []),
                topology_name=namespace if topology is not None else "",
            )
        )
        trainjob_view.create(
            render(
                "clusterqueue",
                name=namespace,
                namespace=namespace,
                flavor=namespace,
                cpu=cpu,
                memory=memory,
                admission_checks=list(admission_checks),
                preemption=preemption,
            )
        )
        trainjob_view.create(
            render("localqueue", name="queue", namespace=namespace, cluster_queue=namespace)
        )
        if not admission_checks:
            trainjob_view.wait_for_condition(LOCAL_QUEUE, "queue", "Active")
        return "queue"

    return make


@pytest.fixture
def multikueue_worker(trainjob_worker_cluster, trainjob_view: TrainJobView) -> TrainJobView:
    """The test's namespace, same name, on the MultiKueue worker cluster.

    MultiKueue mirrors a job into the namespace of the same name on the worker,
    where Kueue must manage it; it does not create the namespace itself. What
    the test creates there is deleted with the test's own objects.
    """
    worker = trainjob_view.on(trainjob_worker_cluster, "MultiKueue worker cluster")
    # With the labels of the test's namespace: a break scoped to the test's namespaces
    # (prove) acts on the worker's namespace too.
    labels = trainjob_view.kube.get(*NAMESPACE, worker.namespace)["metadata"].get("labels") or {}
    labels = {k: v for k, v in labels.items() if k != "kubernetes.io/metadata.name"}
    worker.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": worker.namespace, "labels": labels},
        }
    )
    return worker
