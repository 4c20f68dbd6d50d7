"""The pytest plugin: options, the cluster fixture, namespaces, policy markers and verdicts.

pytest stays at this edge: the plugin package imports pytest, the core
packages (cluster, kube, policies, render, report, stack) do not. Under
pytest-xdist the controller process owns the one cluster of a run and hands
its coordinates to the workers; run serially, the session fixture owns it.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.health.stack_watch import StackBroken
from trainjob_conformance.cluster.introspect import trainjob_spec_properties
from trainjob_conformance.cluster.labels import KUEUE_MANAGED_LABEL
from trainjob_conformance.cluster.registry import StartingCluster, peer_cluster, peer_unavailable
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.kinds import RESOURCE_FLAVOR
from trainjob_conformance.kube.namespaces import temporary_namespace
from trainjob_conformance.kube.record import Recorder
from trainjob_conformance.kube.waits import WaitTimeout
from trainjob_conformance.lifecycle.interrupts import (
    die_with_parent,
    ignore_interrupts,
    leave_if_orphaned,
    raise_interrupt_on_termination,
    restore_handlers,
)
from trainjob_conformance.plugin import peer, results, timeline
from trainjob_conformance.plugin.fixtures import training_runtime  # noqa: F401  (a fixture)
from trainjob_conformance.plugin.options import (
    Settings,
    add_options,
    is_xdist_worker,
    read_settings,
)
from trainjob_conformance.plugin.results import PolicyResults
from trainjob_conformance.plugin.session import ClusterSession, run_includes_e2e
from trainjob_conformance.plugin.verdicts import PolicyContext, judge
from trainjob_conformance.policies.catalog import Outcome, Policy, load_catalog
from trainjob_conformance.policies.packs import Pack, load_packs, merged_catalog, pack_of
from trainjob_conformance.policies.view import TrainJobView
from trainjob_conformance.render.overrides import detect_shape
from trainjob_conformance.render.templates import TemplateSet
from trainjob_conformance.report.model import ERROR

_SESSION_KEY = pytest.StashKey[ClusterSession]()
_SETTINGS_KEY = pytest.StashKey[Settings]()
_CATALOG_KEY = pytest.StashKey[dict[str, Policy]]()
_CONTEXT_KEY = pytest.StashKey[PolicyContext]()
_PACKS_KEY = pytest.StashKey[list[Pack]]()
_RECORDER_KEY = pytest.StashKey[Recorder]()
_PEER_KEY = pytest.StashKey[peer.PeerStart]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: needs a real cluster with JobSet, Kueue and Trainer")
    config.addinivalue_line("markers", "policy(id): the catalog policy this test proves")
    config.addinivalue_line("markers", "kueue: the test's namespace is managed by Kueue")
    config.addinivalue_line(
        "markers", "harness: a test of the harness itself (./scripts/test), not a policy"
    )
    try:
        settings = read_settings(config)
        packs = load_packs(list(settings.packs))
    except ConformanceError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[_SETTINGS_KEY] = settings
    config.stash[_PACKS_KEY] = packs
    # A pack's tests live outside this repository: collect them with the rest.
    given = {Path(arg.split("::")[0]).resolve() for arg in config.args}
    config.args.extend(str(pack.root) for pack in packs if pack.root not in given)
    worker_input = getattr(config, "workerinput", None) if is_xdist_worker(config) else None
    session = ClusterSession(settings, worker_input)
    config.stash[_SESSION_KEY] = session
    if not is_xdist_worker(config):
        # SIGTERM (CI cancelling a job) takes the same path as Ctrl-C: the
        # cluster is stopped and the report says the run was interrupted.
        raise_interrupt_on_termination()
    else:
        # A worker whose controller was killed (SIGKILL) goes with it: idle while
        # the controller starts the cluster, it would otherwise print xdist's
        # "cannot send (already closed?)" traceback, and a busy one would run on
        # against a cluster nobody will report on.
        die_with_parent()
    config.pluginmanager.register(
        PolicyResults(config, settings, lambda: _catalog(config), session),
        "trainjob-policy-results",
    )
    if settings.timeline is not None and not is_xdist_worker(config):
        config.pluginmanager.register(
            timeline.TimelineRecorder(settings.timeline), "trainjob-timeline"
        )


def _controller_starts_cluster(config: pytest.Config) -> bool:
    """Whether this process is an xdist controller that owns the run's cluster."""
    owner = config.stash[_SESSION_KEY]
    distributed = getattr(config.option, "numprocesses", None) and not owner.is_worker
    return bool(distributed) and (
        run_includes_e2e(list(config.args)) or bool(config.stash[_PACKS_KEY])
    )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    if _controller_starts_cluster(session.config):
        session.config.stash[_SESSION_KEY].forget_handover()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    owner = node.config.stash[_SESSION_KEY]
    node.workerinput.update(owner.worker_input())
    if _controller_starts_cluster(node.config):
        # Where the controller hands over the MultiKueue worker cluster (plugin/peer.py).
        if _PEER_KEY not in node.config.stash:
            node.config.stash[_PEER_KEY] = peer.PeerStart.fresh(owner.run_dir / "peer")
        node.workerinput[peer.PEER_DIR_KEY] = str(node.config.stash[_PEER_KEY].directory)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """An xdist worker says whether a selected test needs the MultiKueue worker cluster,
    before it tells the controller its collection is done."""
    worker_input = getattr(session.config, "workerinput", None)
    if not worker_input or peer.PEER_DIR_KEY not in worker_input:
        return
    wanting = [item.nodeid for item in session.items if peer.PEER_FIXTURE in item.fixturenames]  # type: ignore[attr-defined]
    if wanting:
        peer.mark_wanted(Path(worker_input[peer.PEER_DIR_KEY]), wanting)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    config = node.config
    starter = config.stash.get(_PEER_KEY, None)
    owner = config.stash[_SESSION_KEY]
    first = owner.handle is None and owner.start_error is None
    if first and ids and _controller_starts_cluster(config):
        # The first worker has collected, so the controller knows whether a selected
        # test wants the MultiKueue worker cluster: that start can go beside the end
        # of this one. xdist sends no test before this hook returns, and a failure
        # reaches the workers as every test's ERROR (plugin/session.py).
        beside = StartingCluster.of(owner.settings.request)
        early = (lambda: starter.start(beside)) if starter is not None else None
        with contextlib.suppress(ConformanceError):
            owner.ensure(on_created=early)
        owner.hand_over()
    if starter is not None and owner.handle is not None:
        starter.start(owner.handle)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Iterator[None]:
    # A wrapper, so the cluster stops even when another plugin's
    # sessionfinish raises (xdist does, when Ctrl-C has already killed its
    # workers), which would skip pytest_unconfigure.
    owner = session.config.stash[_SESSION_KEY]
    if owner.controller is not None:
        # A worker whose controller was killed ends its session when the closed
        # pipe reaches it; should that come before the kernel's SIGTERM
        # (die_with_parent), xdist's report to nobody would print "cannot send
        # (already closed?)" under the harness's one line.
        leave_if_orphaned(owner.controller)
    previous = {}
    if not is_xdist_worker(session.config):
        # The tests are over: a Ctrl-C now would only cut the report and
        # the cluster's shutdown short, so both run to the end.
        previous = ignore_interrupts()
    try:
        return (yield)
    finally:
        try:
            _finish(session.config, interrupted=session.shouldstop is not False)
        finally:
            restore_handlers(previous)


def pytest_unconfigure(config: pytest.Config) -> None:
    _finish(config, interrupted=False)


def _finish(config: pytest.Config, interrupted: bool) -> None:
    starter = config.stash.get(_PEER_KEY, None)
    if starter is not None:
        del config.stash[_PEER_KEY]
        starter.stop()
    owner = config.stash.get(_SESSION_KEY, None)
    if owner is None or owner.provider is None:
        return
    left = owner.finish()
    if left:
        print(
            f"trainjob-conformance: still running after the run: {', '.join(left)}; "
            f"stop them with: trainjob-conformance down --run-dir {owner.run_dir}",
            file=sys.stderr,
        )


@pytest.fixture(scope="session")
def trainjob_cluster(request: pytest.FixtureRequest) -> ClusterHandle:
    """A ready cluster with JobSet, Kueue and Trainer, its webhooks answering."""
    owner = request.config.stash[_SESSION_KEY]
    try:
        return owner.ensure()
    except ConformanceError as error:
        reason = str(error)
    # Every test that needs the cluster is an ERROR, with this one line; failed outside
    # the except block, so pytest does not print the replaced error above it.
    pytest.fail(f"the cluster did not start: {reason}", pytrace=False)


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
            return peer.wait_for_peer(Path(directory))
        except (peer.PeerNotStarted, WaitTimeout) as error:
            raise StackBroken.starting("MultiKueue worker cluster", str(error)) from None
    worker = peer_cluster(trainjob_cluster)
    request.addfinalizer(worker.down)
    try:
        return worker.up()
    except ConformanceError as error:
        raise StackBroken.starting("MultiKueue worker cluster", str(error)) from None


@pytest.fixture
def _trainjob_recorder(
    trainjob_cluster: ClusterHandle, request: pytest.FixtureRequest
) -> Iterator[Recorder]:
    """Records every write of the test from before its namespace exists (its labels
    matter to a reproduction); a test runs alone in its process, so the session's
    client carries it while the test runs."""
    recorder = Recorder()
    request.node.stash[_RECORDER_KEY] = recorder
    context = request.node.stash.get(_CONTEXT_KEY, None)
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
    labels = dict(request.config.stash[_SETTINGS_KEY].namespace_labels)
    if not managed:
        labels[KUEUE_MANAGED_LABEL] = "false"
    with temporary_namespace(trainjob_cluster.kube, request.node.name, labels) as name:
        yield name


def _catalog(config: pytest.Config) -> dict[str, Policy]:
    if _CATALOG_KEY not in config.stash:
        project = load_catalog(config.stash[_SETTINGS_KEY].catalog)
        config.stash[_CATALOG_KEY] = merged_catalog(project, config.stash[_PACKS_KEY])
    return config.stash[_CATALOG_KEY]


def _pack(item: pytest.Item) -> Pack | None:
    return pack_of(Path(item.path), item.config.stash[_PACKS_KEY])


def _policy_id(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("policy")
    if marker is None:
        return None
    if len(marker.args) != 1 or not isinstance(marker.args[0], str):
        raise pytest.UsageError(f'{item.nodeid}: use @pytest.mark.policy("ID") with one ID')
    pack = _pack(item)
    # A pack's tests name their policies as the pack's catalog does.
    return pack.full_id(marker.args[0]) if pack else str(marker.args[0])


def _states_holds(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    try:
        return function is not None and ".holds()" in inspect.getsource(function)
    except (OSError, TypeError):
        return True  # no source to read: judged at run time instead


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    policy_items = [item for item in items if item.get_closest_marker("policy")]
    wanted = config.stash[_SETTINGS_KEY].policies
    if wanted:
        _select_policies(config, items, policy_items, wanted)
        policy_items = list(items)
    if not policy_items:
        return
    try:
        catalog = _catalog(config)
    except ConformanceError as error:
        raise pytest.UsageError(str(error)) from None
    for item in policy_items:
        policy_id = _policy_id(item)
        if policy_id not in catalog:
            raise pytest.UsageError(f"{item.nodeid}: policy {policy_id!r} is not in the catalog")
        if catalog[policy_id].has_known_gap and not _states_holds(item):
            raise pytest.UsageError(
                f"{item.nodeid}: {policy_id} names a known gap in the catalog, but the test "
                "states no `with trainjob_policy.holds():` block, so the gap cannot be judged"
            )
        item.add_marker(pytest.mark.e2e)
        item.user_properties.append((results.POLICY, policy_id))


def _select_policies(
    config: pytest.Config,
    items: list[pytest.Item],
    policy_items: list[pytest.Item],
    wanted: tuple[str, ...],
) -> None:
    """Keep only the tests of the policies --trainjob-policy names."""
    try:
        catalog = _catalog(config)
    except ConformanceError as error:
        raise pytest.UsageError(str(error)) from None
    unknown = [policy_id for policy_id in wanted if policy_id not in catalog]
    if unknown:
        raise pytest.UsageError(
            f"--trainjob-policy {', '.join(unknown)}: not in the catalog (see fixtures/policies.yaml)"
        )
    keep = [item for item in policy_items if _policy_id(item) in wanted]
    dropped = [item for item in items if item not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


@pytest.fixture
def trainjob_policy(request: pytest.FixtureRequest) -> PolicyContext:
    """The catalog entry of the test's policy marker, for version-specific expectations."""
    policy_id = _policy_id(request.node)
    if policy_id is None:
        raise pytest.UsageError(
            f"{request.node.nodeid} uses trainjob_policy without a policy marker"
        )
    cluster: ClusterHandle = request.getfixturevalue("trainjob_cluster")
    policy = _catalog(request.config)[policy_id]
    if policy.component not in cluster.versions:
        pytest.skip(
            f"{policy_id} is about {policy.component_name}, which this cluster does not run"
        )
    context = PolicyContext(policy, cluster.versions[policy.component])
    request.node.stash[_CONTEXT_KEY] = context
    return context


@pytest.fixture(autouse=True)
def _trainjob_policy_outcome(request: pytest.FixtureRequest) -> Iterator[None]:
    policy_id = _policy_id(request.node)
    if policy_id is None:
        yield
        return
    context: PolicyContext = request.getfixturevalue("trainjob_policy")
    if context.outcome is Outcome.NOT_APPLICABLE:
        pytest.skip(
            f"{policy_id} does not apply to {context.policy.component_name} "
            f"{context.trainer_version}"
        )
    yield
    if context.outcome is Outcome.KNOWN_GAP and not context.judged:
        report = getattr(request.node, "_trainjob_call_report", None)
        if report is not None and report.passed:
            raise pytest.UsageError(
                f"{request.node.nodeid}: {policy_id} is a known gap on "
                f"{context.policy.component_name} {context.trainer_version}, but the test never entered its "
                "`with trainjob_policy.holds():` block, so the gap cannot be judged"
            )


@pytest.fixture(scope="session")
def _trainjob_project_templates(
    trainjob_cluster: ClusterHandle, pytestconfig: pytest.Config
) -> TemplateSet:
    kube = trainjob_cluster.kube
    shape = detect_shape(trainjob_spec_properties(kube))
    kueue = kube.concrete(RESOURCE_FLAVOR.api_version)
    return TemplateSet(pytestconfig.stash[_SETTINGS_KEY].templates, shape, kueue)


@pytest.fixture
def trainjob_templates(
    request: pytest.FixtureRequest, _trainjob_project_templates: TemplateSet
) -> TemplateSet:
    """The Jinja templates, rendering pod overrides in the installed Trainer's field.

    A policy pack's test gets its pack's templates first, then the project's.
    """
    pack = _pack(request.node)
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
    if request.config.stash[_SETTINGS_KEY].timeline is not None:
        timeline.record(request.node, view, began, time.time())
    failed = view.cleanup.run()
    if failed:
        pytest.fail(f"could not delete what the test created: {'; '.join(failed)}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.when == "call":
        item._trainjob_call_report = report  # type: ignore[attr-defined]
    policy_id = _policy_id(item)
    if policy_id is None:
        return report
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        context = item.stash.get(_CONTEXT_KEY, None)
        owner = item.config.stash[_SESSION_KEY]
        # The cluster the test actually used (a fixture may stand in for the session's).
        cluster = getattr(item, "funcargs", {}).get("trainjob_cluster") or owner.handle
        health = cluster.health if isinstance(cluster, ClusterHandle) else None
        word, reason, details = judge(
            report, call.excinfo, health, context.outcome if context else None
        )
        if owner.start_error is not None and report.failed:
            word, reason = ERROR, f"the cluster did not start: {owner.start_error}"
        report.user_properties += [
            (results.RESULT, word),
            (results.REASON, reason),
            (results.DETAILS, details),
        ]
        recorder = item.stash.get(_RECORDER_KEY, None)
        if recorder is not None:
            # JSON text: user_properties travel from an xdist worker to the controller.
            namespace = getattr(item, "funcargs", {}).get("trainjob_namespace")
            record = {"namespace": namespace, "entries": recorder.entries}
            report.user_properties.append((results.RECORD, json.dumps(record)))
        crash = getattr(report.longrepr, "reprcrash", None)
        if report.failed and crash is not None and reason:
            # pytest's short summary and JUnit's message attribute read the
            # crash line, which starts with the exception's dotted class name;
            # they should say what the results say.
            crash.message = reason
        if word == ERROR:
            if details:
                report.sections.append(("stack watch", details))
            # pytest, its terminal summary and JUnit call a failure outside
            # the test body an error: the policy was not judged.
            report.when = "setup"
    return report
