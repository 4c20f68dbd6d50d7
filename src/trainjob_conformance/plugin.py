"""The pytest plugin: options, the cluster fixture, namespaces and policy markers.

Under pytest-xdist the controller process owns the one cluster of a run and
hands its coordinates to the workers; run serially, the session fixture owns it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.introspect import trainjob_spec_properties
from trainjob_conformance.cluster.manifests import KUEUE_MANAGED_LABEL
from trainjob_conformance.cluster.provider import PROVIDERS
from trainjob_conformance.cluster.session import WORKER_INPUT_KEY, ClusterSession, run_includes_e2e
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.namespaces import temporary_namespace
from trainjob_conformance.policies.catalog import Outcome, Policy, load_catalog
from trainjob_conformance.policies.verdicts import PolicyContext, policy_result
from trainjob_conformance.policies.view import TrainJobView
from trainjob_conformance.render.overrides import detect_shape
from trainjob_conformance.render.templates import TemplateSet
from trainjob_conformance.report.collector import PolicyResults
from trainjob_conformance.stack.profiles import DEFAULT_PROFILE, load_profile

_OWNER_KEY = pytest.StashKey[ClusterSession]()
_CATALOG_KEY = pytest.StashKey[dict[str, Policy]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trainjob", "TrainJob conformance")
    # Every option carries the --trainjob- prefix: pytest-kind-ng already owns
    # --kubeconfig, --cluster-name and --keep-cluster, and a clash stops pytest.
    group.addoption(
        "--trainjob-cluster",
        choices=PROVIDERS,
        default="embedded",
        help="where e2e tests run: embedded (built from upstream, default), kind, existing",
    )
    group.addoption(
        "--trainjob-profile",
        default=os.environ.get("TRAINJOB_PROFILE", DEFAULT_PROFILE),
        help="pinned upstream version set (default: %(default)s)",
    )
    group.addoption(
        "--trainjob-kubeconfig",
        type=Path,
        default=None,
        help="kubeconfig of the cluster for --trainjob-cluster=existing (never the default one)",
    )
    group.addoption(
        "--trainjob-keep-cluster",
        action="store_true",
        help="leave the cluster running after the run and print how to use it",
    )
    group.addoption(
        "--trainjob-catalog",
        type=Path,
        default=None,
        help="policy catalog YAML (default: <rootdir>/fixtures/policies.yaml)",
    )
    group.addoption(
        "--trainjob-templates",
        type=Path,
        default=None,
        help="template directory (default: <rootdir>/templates)",
    )
    group.addoption(
        "--trainjob-report",
        type=Path,
        default=None,
        help="write <DIR>/<profile>.json, failure diagnostics, and the policy x profile "
        "matrix as conformance.md and conformance.html",
    )
    group.addoption(
        "--trainjob-run-dir",
        type=Path,
        default=None,
        help="where cluster state, controller logs and diagnostics go (default: .runs/<id>)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: needs a real cluster with JobSet, Kueue and Trainer")
    config.addinivalue_line("markers", "policy(id): the catalog policy this test proves")
    config.addinivalue_line("markers", "kueue: the test's namespace is managed by Kueue")
    config.stash[_OWNER_KEY] = ClusterSession(config)
    config.pluginmanager.register(
        PolicyResults(config, lambda: _catalog(config), config.stash[_OWNER_KEY]),
        "trainjob-policy-results",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    owner: ClusterSession = config.stash[_OWNER_KEY]
    distributed = getattr(config.option, "numprocesses", None) and not owner.is_worker
    if distributed and run_includes_e2e(config):
        try:
            owner.ensure()
        except ConformanceError as error:
            raise pytest.UsageError(str(error)) from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    owner: ClusterSession = node.config.stash[_OWNER_KEY]
    if owner.handle is not None:
        node.workerinput[WORKER_INPUT_KEY] = json.dumps(owner.handle.to_json())


def pytest_unconfigure(config: pytest.Config) -> None:
    owner = config.stash.get(_OWNER_KEY, None)
    if owner is not None:
        owner.finish()


@pytest.fixture(scope="session")
def trainjob_cluster(request: pytest.FixtureRequest) -> ClusterHandle:
    """A ready cluster with JobSet, Kueue and Trainer, its webhooks answering."""
    owner: ClusterSession = request.config.stash[_OWNER_KEY]
    try:
        return owner.ensure()
    except ConformanceError as error:
        pytest.exit(f"trainjob-conformance: {error}", returncode=3)


@pytest.fixture(scope="session")
def trainjob_worker_cluster(
    trainjob_cluster: ClusterHandle, request: pytest.FixtureRequest
) -> ClusterHandle:
    """A second embedded cluster with the same stack, for MultiKueue worker policies.

    Started on first use by the process that needs it and stopped at the end of
    that process's session.
    """
    from trainjob_conformance.cluster.embedded_stack import EmbeddedStackCluster

    if trainjob_cluster.provider != "embedded" or trainjob_cluster.run_dir is None:
        pytest.skip(
            "a MultiKueue worker needs a second cluster, which only the embedded provider "
            f"can start (this run uses {trainjob_cluster.provider!r})"
        )
    worker = EmbeddedStackCluster(
        load_profile(trainjob_cluster.profile), trainjob_cluster.run_dir / f"worker-{os.getpid()}"
    )
    request.addfinalizer(worker.down)
    try:
        return worker.up()
    except ConformanceError as error:
        pytest.fail(f"could not start the MultiKueue worker cluster: {error}", pytrace=False)


@pytest.fixture
def trainjob_namespace(
    trainjob_cluster: ClusterHandle, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh namespace for one test, deleted after it.

    Kueue manages it only if the test is marked `kueue`: a Trainer policy must
    see the Trainer's own answers, not those of Kueue's TrainJob webhook.
    """
    managed = request.node.get_closest_marker("kueue") is not None
    labels = {} if managed else {KUEUE_MANAGED_LABEL: "false"}
    with temporary_namespace(trainjob_cluster.kube, request.node.name, labels) as name:
        yield name


def _catalog(config: pytest.Config) -> dict[str, Policy]:
    if _CATALOG_KEY not in config.stash:
        path = (
            config.getoption("--trainjob-catalog") or config.rootpath / "fixtures" / "policies.yaml"
        )
        config.stash[_CATALOG_KEY] = load_catalog(Path(path))
    return config.stash[_CATALOG_KEY]


def _policy_id(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("policy")
    if marker is None:
        return None
    if len(marker.args) != 1 or not isinstance(marker.args[0], str):
        raise pytest.UsageError(f'{item.nodeid}: use @pytest.mark.policy("ID") with one ID')
    return str(marker.args[0])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    policy_items = [item for item in items if item.get_closest_marker("policy")]
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
        item.add_marker(pytest.mark.e2e)
        item.user_properties.append(("policy", policy_id))


@pytest.fixture
def trainjob_policy(request: pytest.FixtureRequest) -> PolicyContext:
    """The catalog entry of the test's policy marker, for version-specific expectations."""
    policy_id = _policy_id(request.node)
    if policy_id is None:
        raise pytest.UsageError(
            f"{request.node.nodeid} uses trainjob_policy without a policy marker"
        )
    cluster: ClusterHandle = request.getfixturevalue("trainjob_cluster")
    return PolicyContext(_catalog(request.config)[policy_id], cluster.versions["trainer"])


@pytest.fixture(autouse=True)
def _trainjob_policy_outcome(request: pytest.FixtureRequest) -> Iterator[None]:
    policy_id = _policy_id(request.node)
    if policy_id is None:
        yield
        return
    context: PolicyContext = request.getfixturevalue("trainjob_policy")
    request.node.user_properties.append(("expected_outcome", context.outcome.value))
    if context.outcome is Outcome.NOT_APPLICABLE:
        pytest.skip(f"{policy_id} does not apply to Trainer {context.trainer_version}")
    yield
    if context.outcome is Outcome.KNOWN_GAP and not context.judged:
        report = getattr(request.node, "_trainjob_call_report", None)
        if report is not None and report.passed:
            raise pytest.UsageError(
                f"{request.node.nodeid}: {policy_id} is a known gap on Trainer "
                f"{context.trainer_version}, but the test states no `with trainjob_policy.holds():` "
                "block, so the gap cannot be judged"
            )


@pytest.fixture(scope="session")
def trainjob_templates(trainjob_cluster: ClusterHandle, pytestconfig: pytest.Config) -> TemplateSet:
    """The Jinja templates, rendering pod overrides in the installed Trainer's field."""
    shape = detect_shape(trainjob_spec_properties(trainjob_cluster.kube))
    directory = (
        pytestconfig.getoption("--trainjob-templates") or pytestconfig.rootpath / "templates"
    )
    return TemplateSet(Path(directory), shape)


@pytest.fixture
def trainjob_view(
    trainjob_cluster: ClusterHandle, trainjob_namespace: str, trainjob_templates: TemplateSet
) -> TrainJobView:
    """The test's namespace, with waits that print objects, events and logs on timeout."""
    return TrainJobView(trainjob_cluster, trainjob_namespace, trainjob_templates)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.when == "call":
        item._trainjob_call_report = report  # type: ignore[attr-defined]
    policy_id = _policy_id(item)
    if policy_id is None:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        report.user_properties.append(("policy_result", policy_result(report)))
