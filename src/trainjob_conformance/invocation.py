"""One pytest command line of the suite, typed: what `run`, `matrix`, `prove` and the
bench start as a child process.

The plugin reads these options (plugin/options.py); the names are spelled here
once, so the two sides cannot drift. A provider's own options (its ProviderOption
names) become `--trainjob-NAME=VALUE` like the rest.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trainjob_conformance.paths import suite

# Every option carries this prefix: pytest-kind-ng already owns --kubeconfig,
# --cluster-name and --keep-cluster, and a clash stops pytest.
PREFIX = "--trainjob-"
CLUSTER = "cluster"
PROFILE = "profile"
RUN_DIR = "run-dir"
REPORT = "report"
PACK = "pack"
POLICY = "policy"
NAMESPACE_LABEL = "namespace-label"
RECORD = "record"
TIMELINE = "timeline"
KEEP_CLUSTER = "keep-cluster"
CATALOG = "catalog"
TEMPLATES = "templates"
UPGRADE_RECORD = "upgrade-record"
WORKER_BREAK = "worker-break"
STOP_AFTER_FAILURE_OF = "stop-after-failure-of"


def flag(name: str) -> str:
    """The pytest option of a name: `profile` -> `--trainjob-profile`."""
    return f"{PREFIX}{name}"


def _valued(name: str, value: object) -> str:
    return f"{flag(name)}={value}"


@dataclass(frozen=True)
class PytestInvocation:
    """The suite's tests on one profile and one cluster, with what the run writes."""

    profile: str
    cluster: str
    run_dir: Path
    # The chosen provider's options by name (cluster/provider.py ProviderOption).
    provider_options: Mapping[str, str] = field(default_factory=dict)
    workers: int = 0
    # With workers: a worker that runs out of tests takes queued ones from the
    # other (xdist's default hands each worker its share up front), so the last
    # tests no longer wait behind a long one. None: xdist's default.
    dist: str | None = "worksteal"
    report: Path | None = None
    junit: bool = False  # <report>/<profile>-junit.xml beside the results
    packs: tuple[Path, ...] = ()
    policies: tuple[str, ...] = ()
    namespace_labels: tuple[str, ...] = ()  # KEY=VALUE each
    record: bool = False
    timeline: Path | None = None
    quiet: bool = False
    # `upgrade`'s record of the objects in flight: the UP policies judge them.
    upgrade_record: Path | None = None
    # `prove`'s break for the MultiKueue worker cluster: admission policies (YAML) that
    # the child applies to the worker it starts.
    worker_break: Path | None = None
    # `compat`'s stack checks: they run first, and once one fails the rest is skipped.
    stop_after_failure_of: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()  # the user's own pytest arguments, last, so they win

    def argv(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "pytest",
            str(suite().tests),
            _valued(RUN_DIR, self.run_dir),
            _valued(PROFILE, self.profile),
            _valued(CLUSTER, self.cluster),
            "-n",
            str(self.workers),
        ]
        if self.dist is not None:
            command += ["--dist", self.dist]  # ignored with -n 0
        command += [
            "-p",
            "no:cacheprovider",
            # The harness's own tests belong to ./scripts/test, not to a conformance run.
            "-m",
            "not harness",
        ]
        if self.quiet:
            command.append("-q")
        command += [_valued(name, value) for name, value in self.provider_options.items()]
        command += [_valued(PACK, pack) for pack in self.packs]
        command += [_valued(POLICY, policy) for policy in self.policies]
        command += [_valued(NAMESPACE_LABEL, label) for label in self.namespace_labels]
        if self.record:
            command.append(flag(RECORD))
        if self.timeline is not None:
            command.append(_valued(TIMELINE, self.timeline))
        if self.upgrade_record is not None:
            command.append(_valued(UPGRADE_RECORD, self.upgrade_record))
        if self.worker_break is not None:
            command.append(_valued(WORKER_BREAK, self.worker_break))
        command += [_valued(STOP_AFTER_FAILURE_OF, p) for p in self.stop_after_failure_of]
        if self.report is not None:
            command.append(_valued(REPORT, self.report))
            if self.junit:
                command.append(f"--junitxml={self.report / f'{self.profile}-junit.xml'}")
        return [*command, *self.extra]
