"""The plugin's command-line options, and the one place that reads them."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainjob_conformance.cluster.provider import CHOICE, TEXT, ClusterRequest
from trainjob_conformance.cluster.registry import (
    PROVIDERS,
    make_provider,
    provider_kind,
    provider_kinds,
    provider_options,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.invocation import (
    CATALOG,
    CLUSTER,
    KEEP_CLUSTER,
    NAMESPACE_LABEL,
    PACK,
    POLICY,
    PROFILE,
    RECORD,
    REPORT,
    RUN_DIR,
    STOP_AFTER_FAILURE_OF,
    TEMPLATES,
    TIMELINE,
    UPGRADE_RECORD,
    WORKER_BREAK,
    flag,
)
from trainjob_conformance.paths import suite
from trainjob_conformance.stack.profiles import DEFAULT_PROFILE, PROFILE_ENV, load_profile


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("trainjob", "TrainJob conformance")
    # Every option carries the --trainjob- prefix (invocation.py says why).
    group.addoption(
        flag(CLUSTER),
        choices=PROVIDERS,
        default="embedded",
        help="where e2e tests run: "
        + "; ".join(f"{kind.name}: {kind.summary}" for kind in provider_kinds()),
    )
    group.addoption(
        flag(PROFILE),
        default=None,
        help="pinned upstream version set, or one composed from it with other releases, "
        f"e.g. latest+kueue=v0.16.6 (default: ${PROFILE_ENV} or {DEFAULT_PROFILE})",
    )
    # Each provider's own options, as the provider declares them.
    for option in provider_options():
        if not option.on_command_line:
            continue
        if option.kind == CHOICE:
            group.addoption(
                flag(option.name), choices=option.choices, default=option.default, help=option.help
            )
        elif option.kind == TEXT:
            group.addoption(flag(option.name), default=None, help=option.help)
        else:
            group.addoption(flag(option.name), type=Path, default=None, help=option.help)
    group.addoption(
        flag(STOP_AFTER_FAILURE_OF),
        action="append",
        default=[],
        metavar="ID",
        help="run this policy's tests first and, once one fails, skip the tests not yet "
        "started (compat's stack checks; repeatable)",
    )
    group.addoption(
        flag(KEEP_CLUSTER),
        action="store_true",
        help="leave the cluster running after the run and print how to use it",
    )
    group.addoption(
        flag(CATALOG),
        type=Path,
        default=None,
        help="policy catalog YAML (default: the suite's policies.yaml, in the package or checkout)",
    )
    group.addoption(
        flag(TEMPLATES),
        type=Path,
        default=None,
        help="template directory (default: the suite's templates/, in the package or checkout)",
    )
    group.addoption(
        flag(PACK),
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a policy pack to run with the project's policies: a directory with "
        "policies.yaml, templates/ and test files (repeatable)",
    )
    group.addoption(
        flag(REPORT),
        type=Path,
        default=None,
        help="write <DIR>/<profile>.json, failure diagnostics, and the policy x profile "
        "matrix as conformance.md and conformance.html",
    )
    group.addoption(
        flag(TIMELINE),
        type=Path,
        default=None,
        help="write each policy test's wall time and the cluster's own timestamps of what it "
        "did to this JSON file (what `trainjob-conformance bench` reads)",
    )
    group.addoption(
        flag(POLICY),
        action="append",
        default=[],
        metavar="ID",
        help="run only the tests of this policy (repeatable; a pack's as PACK/ID)",
    )
    group.addoption(
        flag(NAMESPACE_LABEL),
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label every test namespace carries (repeatable); `prove` scopes a break "
        "to the namespaces of the tests it targets with it",
    )
    group.addoption(
        flag(RECORD),
        action="store_true",
        help="keep every test's record (the requests it sent, with the cluster's answers) in "
        "the diagnostics; FAIL and known-gap results always keep theirs",
    )
    group.addoption(
        flag(UPGRADE_RECORD),
        type=Path,
        default=None,
        help="the record `trainjob-conformance upgrade` writes of the objects in flight: "
        "the upgrade's policies (UP-*) judge them; without it they are not collected",
    )
    group.addoption(
        flag(WORKER_BREAK),
        type=Path,
        default=None,
        help="admission policies (YAML) to apply to the MultiKueue worker cluster once it "
        "is up: how `prove` breaks a policy on the worker",
    )
    group.addoption(
        flag(RUN_DIR),
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
    upgrade_record: Path | None = None  # where an upgrade's objects in flight are recorded
    worker_break: Path | None = None  # prove's admission policies for the worker cluster
    stop_after_failure_of: tuple[str, ...] = ()  # compat's stack checks (plugin/stop_after.py)

    @property
    def profile(self) -> str:
        return self.request.profile.name


def _profile_name(config: pytest.Config) -> str:
    explicit = config.getoption(flag(PROFILE))
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
        source = flag(PROFILE) if config.getoption(flag(PROFILE)) else PROFILE_ENV
        raise ConformanceError(f"{source}: {error}") from None
    run_dir = config.getoption(flag(RUN_DIR))
    report = config.getoption(flag(REPORT))
    timeline = _resolved(config.getoption(flag(TIMELINE)))
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
    request = ClusterRequest(
        provider=config.getoption(flag(CLUSTER)),
        profile=profile,
        run_dir=Path(run_dir).resolve() if run_dir else _default_run_dir(config.rootpath),
        options=_provider_options(config),
    )
    # The provider reads its options now (a bad mirror URL, a CA file that is none):
    # one usage line before anything starts, not an error per test later.
    make_provider(request)
    return Settings(
        request=request,
        keep_cluster=bool(config.getoption(flag(KEEP_CLUSTER))),
        catalog=Path(config.getoption(flag(CATALOG)) or suite().catalog),
        templates=Path(config.getoption(flag(TEMPLATES)) or suite().templates),
        report_dir=Path(report).resolve() if report else None,
        packs=tuple(Path(p) for p in config.getoption(flag(PACK)) or ()),
        timeline=timeline,
        namespace_labels=_labels(config.getoption(flag(NAMESPACE_LABEL)) or ()),
        policies=tuple(config.getoption(flag(POLICY)) or ()),
        record=bool(config.getoption(flag(RECORD))),
        upgrade_record=_resolved(config.getoption(flag(UPGRADE_RECORD))),
        worker_break=_resolved(config.getoption(flag(WORKER_BREAK))),
        stop_after_failure_of=tuple(config.getoption(flag(STOP_AFTER_FAILURE_OF)) or ()),
    )


def _provider_options(config: pytest.Config) -> dict[str, str]:
    """The chosen provider's options that were given (or have a default)."""
    found = {}
    for option in provider_kind(config.getoption(flag(CLUSTER))).options:
        if not option.on_command_line:
            continue
        value = config.getoption(flag(option.name))
        if value is not None:
            found[option.name] = str(value)
    return found


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
