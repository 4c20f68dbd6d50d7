"""The plugin's command-line options, and the one place that reads them."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainjob_conformance.cluster.embedded.nodes import NODE_LABEL_MODES
from trainjob_conformance.cluster.provider import ClusterRequest
from trainjob_conformance.cluster.registry import PROVIDERS
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import suite
from trainjob_conformance.stack.profiles import DEFAULT_PROFILE, PROFILE_ENV, load_profile


def add_options(parser: pytest.Parser) -> None:
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
        default=None,
        help="pinned upstream version set, or one composed from it with other releases, "
        f"e.g. latest+kueue=v0.16.6 (default: ${PROFILE_ENV} or {DEFAULT_PROFILE})",
    )
    group.addoption(
        "--trainjob-kubeconfig",
        type=Path,
        default=None,
        help="kubeconfig of the cluster for --trainjob-cluster=existing (never the default one)",
    )
    group.addoption(
        "--trainjob-node-labels",
        choices=NODE_LABEL_MODES,
        default="cloud",
        help="embedded cluster: the fake nodes carry only the labels a cloud node has "
        "(cloud, default) or also kwok's type=kwok (kwok)",
    )
    group.addoption(
        "--trainjob-image-source",
        choices=("local", "upstream"),
        default="local",
        help="kind: build every image from pinned sources here (local, default; no registry "
        "needed) or run the releases' images from their registries (upstream)",
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
        help="policy catalog YAML (default: the suite's policies.yaml, in the package or checkout)",
    )
    group.addoption(
        "--trainjob-templates",
        type=Path,
        default=None,
        help="template directory (default: the suite's templates/, in the package or checkout)",
    )
    group.addoption(
        "--trainjob-pack",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a policy pack to run with the project's policies: a directory with "
        "policies.yaml, templates/ and test files (repeatable)",
    )
    group.addoption(
        "--trainjob-report",
        type=Path,
        default=None,
        help="write <DIR>/<profile>.json, failure diagnostics, and the policy x profile "
        "matrix as conformance.md and conformance.html",
    )
    group.addoption(
        "--trainjob-timeline",
        type=Path,
        default=None,
        help="write each policy test's wall time and the cluster's own timestamps of what it "
        "did to this JSON file (what `trainjob-conformance bench` reads)",
    )
    group.addoption(
        "--trainjob-policy",
        action="append",
        default=[],
        metavar="ID",
        help="run only the tests of this policy (repeatable; a pack's as PACK/ID)",
    )
    group.addoption(
        "--trainjob-namespace-label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label every test namespace carries (repeatable); `prove` scopes a break "
        "to the namespaces of the tests it targets with it",
    )
    group.addoption(
        "--trainjob-record",
        action="store_true",
        help="keep every test's record (the requests it sent, with the cluster's answers) in "
        "the diagnostics; FAIL and known-gap results always keep theirs",
    )
    group.addoption(
        "--trainjob-run-dir",
        type=Path,
        default=None,
        help="where cluster state, controller logs and diagnostics go (default: .runs/<id>)",
    )


def is_xdist_worker(config: pytest.Config) -> bool:
    """The one test of whether this process is a pytest-xdist worker."""
    return hasattr(config, "workerinput")


@dataclass(frozen=True)
class Settings:
    """Everything the options say, read once and checked."""

    request: ClusterRequest
    keep_cluster: bool
    catalog: Path
    templates: Path
    report_dir: Path | None
    packs: tuple[Path, ...] = ()
    timeline: Path | None = None
    namespace_labels: tuple[tuple[str, str], ...] = ()
    policies: tuple[str, ...] = ()  # only these policies' tests run (empty: all)
    record: bool = False

    @property
    def profile(self) -> str:
        return self.request.profile.name


def _profile_name(config: pytest.Config) -> str:
    explicit = config.getoption("--trainjob-profile")
    if explicit:
        return str(explicit)
    return os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE


def _default_run_dir(rootpath: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return rootpath / ".runs" / f"{stamp}-{uuid.uuid4().hex[:6]}"


def read_settings(config: pytest.Config) -> Settings:
    """The options as one value; bad values raise ConformanceError in one line."""
    name = _profile_name(config)
    try:
        profile = load_profile(name)
    except ConformanceError as error:
        source = "--trainjob-profile" if config.getoption("--trainjob-profile") else PROFILE_ENV
        raise ConformanceError(f"{source}: {error}") from None
    run_dir = config.getoption("--trainjob-run-dir")
    report = config.getoption("--trainjob-report")
    timeline = _resolved(config.getoption("--trainjob-timeline"))
    if (
        timeline
        and report
        and timeline.suffix == ".json"
        and timeline.parent == Path(report).resolve()
    ):
        raise ConformanceError(
            f"--trainjob-timeline {timeline} is in the report directory, where every .json file "
            "is read as a result file; write it elsewhere"
        )
    return Settings(
        request=ClusterRequest(
            provider=config.getoption("--trainjob-cluster"),
            profile=profile,
            run_dir=Path(run_dir).resolve() if run_dir else _default_run_dir(config.rootpath),
            kubeconfig=config.getoption("--trainjob-kubeconfig"),
            node_labels=config.getoption("--trainjob-node-labels"),
            image_source=config.getoption("--trainjob-image-source"),
        ),
        keep_cluster=bool(config.getoption("--trainjob-keep-cluster")),
        catalog=Path(config.getoption("--trainjob-catalog") or suite().catalog),
        templates=Path(config.getoption("--trainjob-templates") or suite().templates),
        report_dir=Path(report).resolve() if report else None,
        packs=tuple(Path(p) for p in config.getoption("--trainjob-pack") or ()),
        timeline=timeline,
        namespace_labels=_labels(config.getoption("--trainjob-namespace-label") or ()),
        policies=tuple(config.getoption("--trainjob-policy") or ()),
        record=bool(config.getoption("--trainjob-record")),
    )


def _labels(given: list[str] | tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    labels = []
    for text in given:
        key, equals, value = text.partition("=")
        if not equals or not key:
            raise ConformanceError(
                f"--trainjob-namespace-label {text!r}: give KEY=VALUE, e.g. example.com/team=a"
            )
        labels.append((key, value))
    return tuple(labels)


def _resolved(path: Path | None) -> Path | None:
    return Path(path).resolve() if path else None
