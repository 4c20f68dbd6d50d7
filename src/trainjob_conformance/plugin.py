"""The pytest plugin: options, the cluster fixture, namespaces and policy markers.

Under pytest-xdist the controller process owns the one cluster of a run and
hands its coordinates to the workers; run serially, the session fixture owns it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.introspect import trainjob_spec_properties
from trainjob_conformance.cluster.manifests import KUEUE_MANAGED_LABEL
from trainjob_conformance.cluster.provider import PROVIDERS, ClusterRequest, make_provider
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.namespaces import temporary_namespace
from trainjob_conformance.policies.catalog import Outcome, Policy, load_catalog
from trainjob_conformance.policies.view import TrainJobView
from trainjob_conformance.render.overrides import detect_shape
from trainjob_conformance.render.templates import TemplateSet
from trainjob_conformance.report.model import PolicyResult, RunReport, read_reports
from trainjob_conformance.report.render import write_reports
from trainjob_conformance.stack.profiles import DEFAULT_PROFILE, load_profile

_WORKER_KEY = "trainjob_cluster"
_OWNER_KEY = pytest.StashKey["_ClusterOwner"]()
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
    config.stash[_OWNER_KEY] = _ClusterOwner(config)
    config.pluginmanager.register(_PolicyResults(config), "trainjob-policy-results")


class _ClusterOwner:
    """Starts the cluster at most once per run and stops it at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.handle: ClusterHandle | None = None
        self.provider: Any = None
        self.startup_seconds: float | None = None
        worker_input = getattr(config, "workerinput", None)
        if worker_input and _WORKER_KEY in worker_input:
            self.handle = ClusterHandle.from_json(json.loads(worker_input[_WORKER_KEY]))

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def run_dir(self) -> Path:
        explicit = self.config.getoption("--trainjob-run-dir")
        if explicit:
            return Path(explicit).resolve()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return Path(self.config.rootpath, ".runs", f"{stamp}-{uuid.uuid4().hex[:6]}")

    def ensure(self) -> ClusterHandle:
        if self.handle is not None:
            return self.handle
        if self.is_worker:
            raise ConformanceError(
                "this xdist worker got no cluster from the controller; "
                "run the e2e directory (or a path inside it) so the controller starts one"
            )
        profile = load_profile(self.config.getoption("--trainjob-profile"))
        request = ClusterRequest(
            provider=self.config.getoption("--trainjob-cluster"),
            profile=profile,
            run_dir=self.run_dir(),
            kubeconfig=self.config.getoption("--trainjob-kubeconfig"),
        )
        started = time.monotonic()
        self.provider = make_provider(request)
        self.handle = self.provider.up()
        self.startup_seconds = time.monotonic() - started
        return self.handle

    def finish(self) -> None:
        if self.provider is None:
            return
        if self.config.getoption("--trainjob-keep-cluster") and self.handle is not None:
            detach = getattr(self.provider, "detach", None)
            if detach is None:
                print(
                    f"trainjob-conformance: the {self.handle.provider} cluster is not the harness's to keep or stop",
                    file=sys.stderr,
                )
                return
            detach()
            _print_kept(self.handle, self.provider)
            return
        self.provider.down()
        self.provider = None


def _print_kept(handle: ClusterHandle, provider: Any) -> None:
    run_dir = getattr(provider, "run_dir", None)
    lines = [
        "",
        "trainjob-conformance: the cluster is still running.",
        f"  export KUBECONFIG={handle.kubeconfig}",
        "  kubectl get trainjobs,jobsets,pods -A",
    ]
    if run_dir is not None:
        lines.append(f"  stop it with: trainjob-conformance down --run-dir {run_dir}")
    print("\n".join(lines), file=sys.stderr)


def _run_includes_e2e(config: pytest.Config) -> bool:
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if "e2e" in path.parts or (path.is_dir() and (path / "e2e").is_dir()):
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    owner: _ClusterOwner = config.stash[_OWNER_KEY]
    distributed = getattr(config.option, "numprocesses", None) and not owner.is_worker
    if distributed and _run_includes_e2e(config):
        try:
            owner.ensure()
        except ConformanceError as error:
            raise pytest.UsageError(str(error)) from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    owner: _ClusterOwner = node.config.stash[_OWNER_KEY]
    if owner.handle is not None:
        node.workerinput[_WORKER_KEY] = json.dumps(owner.handle.to_json())


def pytest_unconfigure(config: pytest.Config) -> None:
    owner = config.stash.get(_OWNER_KEY, None)
    if owner is not None:
        owner.finish()


@pytest.fixture(scope="session")
def trainjob_cluster(request: pytest.FixtureRequest) -> ClusterHandle:
    """A ready cluster with JobSet, Kueue and Trainer, its webhooks answering."""
    owner: _ClusterOwner = request.config.stash[_OWNER_KEY]
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


GAP_CLOSED = "GAP CLOSED"


class PolicyContext:
    """The policy a test proves, and what the catalog expects of this Trainer."""

    def __init__(self, policy: Policy, trainer_version: str) -> None:
        self.policy = policy
        self.trainer_version = trainer_version
        self.outcome = policy.outcome(trainer_version)
        self.judged = False

    @property
    def id(self) -> str:
        return self.policy.id

    def expected(self, key: str) -> Any:
        return self.policy.expected(key, self.trainer_version)

    @contextmanager
    def holds(self) -> Iterator[None]:
        """Wrap the assertions that state the policy.

        For a known upstream gap only these assertions decide: failing here is
        the known gap (xfail, named); passing means the gap has closed and the
        run fails so the catalog gets updated. A failure elsewhere in the test
        is an ordinary failure, never excused as the gap.
        """
        __tracebackhide__ = True
        self.judged = True
        if self.outcome is not Outcome.KNOWN_GAP:
            yield
            return
        reference = self.policy.gap_reference(self.trainer_version)
        try:
            yield
        except AssertionError as error:
            first_line = str(error).splitlines()[0] if str(error) else "assertion failed"
            pytest.xfail(
                f"KNOWN UPSTREAM GAP {self.id} on Trainer {self.trainer_version}: {reference} "
                f"(observed: {first_line})"
            )
        pytest.fail(
            f"{GAP_CLOSED}: {self.id} now holds on Trainer {self.trainer_version}; the catalog "
            f"lists it as a known gap ({reference}). Update fixtures/policies.yaml.",
            pytrace=False,
        )


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
        report.user_properties.append(("policy_result", _policy_result(report)))


def _reason(report: pytest.TestReport) -> str:
    """One line saying why a test did not simply pass."""
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, "Skipped: why")
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return str(crash.message).strip().splitlines()[0]
    text = str(longrepr or "").strip()
    return text.splitlines()[-1] if text else ""


def _policy_result(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return "known-gap"
    if report.failed and GAP_CLOSED in str(report.longrepr):
        return "GAP-CLOSED"
    if report.skipped:
        return "not-applicable"
    return "pass" if report.passed else "FAIL"


class _PolicyResults:
    """Per-run collector of policy verdicts, registered as a plugin object.

    Under xdist it runs in the controller, which sees every worker's reports.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rows: list[PolicyResult] = []
        self.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.started_monotonic = time.monotonic()

    @property
    def report_dir(self) -> Path | None:
        option = self.config.getoption("--trainjob-report")
        return Path(option).resolve() if option else None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "policy_result" not in props:
            return
        policy_id = str(props.get("policy"))
        result = str(props["policy_result"])
        row = PolicyResult(
            policy=policy_id,
            title=_catalog(self.config)[policy_id].title,
            result=result,
            seconds=round(report.duration, 1),
            test=report.nodeid,
            reason=_reason(report) if result != "pass" else "",
        )
        if result in ("FAIL", "GAP-CLOSED", "known-gap") and self.report_dir is not None:
            row.diagnostics = self._write_diagnostics(report)
        self.rows.append(row)

    def _write_diagnostics(self, report: pytest.TestReport) -> str:
        assert self.report_dir is not None
        owner: _ClusterOwner = self.config.stash[_OWNER_KEY]
        profile = self.config.getoption("--trainjob-profile")
        if owner.handle is not None and owner.handle.profile:
            profile = owner.handle.profile
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", report.nodeid).strip("_") + ".txt"
        relative = Path("diagnostics") / profile / name
        path = self.report_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report.longreprtext or _reason(report))
        return str(relative)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.report_dir is None or not self.rows or hasattr(self.config, "workerinput"):
            return
        owner: _ClusterOwner = self.config.stash[_OWNER_KEY]
        handle = owner.handle
        run = RunReport(
            profile=(handle.profile if handle and handle.profile else "")
            or self.config.getoption("--trainjob-profile"),
            provider=handle.provider if handle else "unknown",
            versions=dict(handle.versions) if handle else {},
            started=self.started,
            wall_seconds=round(time.monotonic() - self.started_monotonic, 1),
            cluster_start_seconds=owner.startup_seconds,
            results=sorted(self.rows, key=lambda r: (r.policy, r.test)),
        )
        run.write(self.report_dir)
        write_reports(read_reports(self.report_dir), self.report_dir)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.rows:
            return
        owner: _ClusterOwner = self.config.stash[_OWNER_KEY]
        terminalreporter.section("TrainJob conformance")
        if owner.handle is not None:
            versions = ", ".join(f"{k} {v}" for k, v in owner.handle.versions.items())
            terminalreporter.write_line(f"cluster: {owner.handle.provider}; {versions}")
        if owner.startup_seconds is not None:
            terminalreporter.write_line(f"cluster start: {owner.startup_seconds:.1f}s")
        for row in sorted(self.rows, key=lambda r: (r.policy, r.test)):
            terminalreporter.write_line(
                f"{row.policy:14} {row.result:15} {row.seconds:7.1f}s  {row.test}"
            )
        if self.report_dir is not None:
            terminalreporter.write_line(f"report: {self.report_dir / 'conformance.html'}")
