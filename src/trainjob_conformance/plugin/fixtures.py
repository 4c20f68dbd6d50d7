"""The fixtures a policy test uses, the project's and a policy pack's alike: the
cluster (and a MultiKueue worker beside it), a namespace per test, the policy's
catalog entry, the templates, the test's view of its namespace, a runtime."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.health.stack_watch import StackBroken
from trainjob_conformance.cluster.introspect import trainjob_spec_properties
from trainjob_conformance.cluster.labels import KUEUE_MANAGED_LABEL
from trainjob_conformance.cluster.registry import peer_cluster, peer_unavailable
from trainjob_conformance.errors import ConformanceError, cluster_not_started
from trainjob_conformance.kube.errors import Rejected
from trainjob_conformance.kube.kinds import RESOURCE_FLAVOR
from trainjob_conformance.kube.namespaces import temporary_namespace
from trainjob_conformance.kube.record import Recorder
from trainjob_conformance.kube.waits import WaitTimeout
from trainjob_conformance.plugin import peer, stash, timeline
from trainjob_conformance.plugin.verdicts import PolicyContext
from trainjob_conformance.policies.catalog import Outcome
from trainjob_conformance.policies.view import TrainJobView
from trainjob_conformance.prove.worker_break import apply_worker_break
from trainjob_conformance.render.overrides import detect_shape
from trainjob_conformance.render.templates import TemplateSet
from trainjob_conformance.upgrade.record import UpgradeRecord


@pytest.fixture(scope="session")
def trainjob_cluster(request: pytest.FixtureRequest) -> ClusterHandle:
    """A ready cluster with JobSet, Kueue and Trainer, its webhooks answering."""
    owner = request.config.stash[stash.SESSION]
    try:
        return owner.ensure()
    except ConformanceError as error:
        reason = str(error)
    # Every test that needs the cluster is an ERROR, with this one line; failed outside
    # the except block, so pytest does not print the replaced error above it.
    pytest.fail(cluster_not_started(reason), pytrace=False)


@pytest.fixture(scope="session")
def trainjob_worker_cluster(
    trainjob_cluster: ClusterHandle, request: pytest.FixtureRequest
) -> ClusterHandle:
    """A second cluster with the same stack, for MultiKueue worker policies
    (cluster/registry.py says which).

    Under pytest-xdist the controller starts it while the suite runs and this
    waits for it (plugin/peer.py); run serially, it is started on first use and
    stopped at the end of the session.
    """
    why = peer_unavailable(trainjob_cluster)
    if why is not None:
        pytest.skip(why)
    worker_input = getattr(request.config, "workerinput", None) or {}
    directory = worker_input.get(peer.PEER_DIR_KEY)
    if directory:
        # The controller started it beside the suite (plugin/peer.py) and stops it.
        try:
            worker = peer.wait_for_peer(Path(directory))
        except (peer.PeerNotStarted, WaitTimeout) as error:
            raise StackBroken.starting("MultiKueue worker cluster", str(error)) from None
    else:
        provider = peer_cluster(trainjob_cluster)
        request.addfinalizer(provider.down)
        try:
            worker = provider.up()
        except ConformanceError as error:
            raise StackBroken.starting("MultiKueue worker cluster", str(error)) from None
    worker_break = request.config.stash[stash.SETTINGS].worker_break
    if worker_break is not None:
        # prove's break for the worker (prove/worker_break.py); under xdist each
        # worker process applies the same policies, which changes nothing the second time.
        try:
            apply_worker_break(worker.kube, worker_break)
        except ConformanceError as error:
            raise StackBroken.starting("MultiKueue worker cluster", str(error)) from None
    return worker


@pytest.fixture
def _trainjob_recorder(
    trainjob_cluster: ClusterHandle, request: pytest.FixtureRequest
) -> Iterator[Recorder]:
    """Records every write of the test from before its namespace exists (its labels
    matter to a reproduction); a test runs alone in its process, so the session's
    client carries it while the test runs."""
    recorder = Recorder()
    request.node.stash[stash.RECORDER] = recorder
    context = request.node.stash.get(stash.CONTEXT, None)
    if context is not None:  # what its holds() block sends is the observation
        context.recorder = recorder
    trainjob_cluster.kube.recorder = recorder
    yield recorder
    trainjob_cluster.kube.recorder = None


@pytest.fixture
def trainjob_namespace(
    trainjob_cluster: ClusterHandle,
    _trainjob_recorder: Recorder,
    request: pytest.FixtureRequest,
) -> Iterator[str]:
    """A fresh namespace for one test, deleted after it.

    Kueue manages it only if the test is marked `kueue`: a Trainer policy must
    see the Trainer's own answers, not those of Kueue's TrainJob webhook.
    """
    managed = request.node.get_closest_marker("kueue") is not None
    labels = dict(request.config.stash[stash.SETTINGS].namespace_labels)
    if not managed:
        labels[KUEUE_MANAGED_LABEL] = "false"
    with temporary_namespace(trainjob_cluster.kube, request.node.name, labels) as name:
        yield name


@pytest.fixture
def trainjob_policy(request: pytest.FixtureRequest) -> PolicyContext:
    """The catalog entry of the test's policy marker, for version-specific expectations."""
    policy_id = stash.policy_id(request.node)
    if policy_id is None:
        raise pytest.UsageError(
            f"{request.node.nodeid} uses trainjob_policy without a policy marker"
        )
    cluster: ClusterHandle = request.getfixturevalue("trainjob_cluster")
    policy = stash.catalog(request.config)[policy_id]
    if policy.component not in cluster.versions:
        pytest.skip(
            f"{policy_id} is about {policy.component_name}, which this cluster does not run"
        )
    upgrade = request.config.stash[stash.SETTINGS].upgrade_record
    before = UpgradeRecord.read(upgrade).source_versions if upgrade else {}
    context = PolicyContext(policy, cluster.versions[policy.component], before, cluster.versions)
    request.node.stash[stash.CONTEXT] = context
    return context


@pytest.fixture(autouse=True)
def _trainjob_policy_outcome(request: pytest.FixtureRequest) -> None:
    """A policy the catalog says does not apply to this release is not run."""
    policy_id = stash.policy_id(request.node)
    if policy_id is None:
        return
    context: PolicyContext = request.getfixturevalue("trainjob_policy")
    if context.outcome is Outcome.NOT_APPLICABLE:
        pytest.skip(
            f"{policy_id} does not apply to {context.policy.component_name} "
            f"{context.trainer_version}"
        )


@pytest.fixture(scope="session")
def _trainjob_project_templates(
    trainjob_cluster: ClusterHandle, pytestconfig: pytest.Config
) -> TemplateSet:
    kube = trainjob_cluster.kube
    shape = detect_shape(trainjob_spec_properties(kube))
    kueue = kube.concrete(RESOURCE_FLAVOR.api_version)
    return TemplateSet(pytestconfig.stash[stash.SETTINGS].templates, shape, kueue)


@pytest.fixture
def trainjob_templates(
    request: pytest.FixtureRequest, _trainjob_project_templates: TemplateSet
) -> TemplateSet:
    """The Jinja templates, rendering pod overrides in the installed Trainer's field.

    A policy pack's test gets its pack's templates first, then the project's.
    """
    pack = stash.pack_of_item(request.node)
    if pack is None or pack.templates is None:
        return _trainjob_project_templates
    return _trainjob_project_templates.with_first(pack.templates)


@pytest.fixture
def trainjob_view(
    trainjob_cluster: ClusterHandle,
    trainjob_namespace: str,
    trainjob_templates: TemplateSet,
    request: pytest.FixtureRequest,
) -> Iterator[TrainJobView]:
    """The test's namespace, with waits that print objects, events and logs on timeout.

    Objects it creates outside the namespace (cluster-scoped, or on another
    cluster through `view.on(...)`) are deleted when the test ends.
    """
    began = time.time()
    view = TrainJobView(trainjob_cluster, trainjob_namespace, trainjob_templates)
    yield view
    if request.config.stash[stash.SETTINGS].timeline is not None:
        timeline.record(request.node, view, began, time.time())
    failed = view.cleanup.run()
    if failed:
        pytest.fail(f"could not delete what the test created: {'; '.join(failed)}", pytrace=False)


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
        # looks the runtime up in its own cache) must see the runtime too. Of as many
        # nodes as one slice, where the runtime asks for slices: Kueue refuses a
        # slice larger than the TrainJob's Pods.
        sized = {"num_nodes": params["slice_size"]} if "slice_size" in params else {}
        probe = trainjob_view.trainjob_manifest(
            "runtime-probe", runtime=name, queue_name="runtime-probe", **sized
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


@pytest.fixture
def upgrade_record(request: pytest.FixtureRequest) -> UpgradeRecord:
    """What `upgrade` keeps in flight, and the step the stack is at (the UP family).

    Collection keeps the UP tests only where the record is given, so a test that
    asks for it always gets one.
    """
    path = request.config.stash[stash.SETTINGS].upgrade_record
    if path is None:
        raise pytest.UsageError(f"{request.node.nodeid} needs --trainjob-upgrade-record")
    return UpgradeRecord.read(path)


@pytest.fixture
def upgrade_view(
    trainjob_cluster: ClusterHandle, trainjob_templates: TemplateSet
) -> Callable[[str], TrainJobView]:
    """A view of one of the upgrade's namespaces, which the upgrade, not the test, owns."""

    def view(namespace: str) -> TrainJobView:
        return TrainJobView(trainjob_cluster, namespace, trainjob_templates)

    return view
