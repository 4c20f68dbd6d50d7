"""The pytest plugin, as its entry point loads it: options, markers, and the plugin
objects of a run.

pytest stays at this edge: the plugin package imports pytest, the core
packages (cluster, kube, policies, render, report, stack) do not. The work is
in one module per job, each registered here as a plugin:
  run_session.py    who starts and stops the run's cluster (xdist included)
  collection.py     policy markers checked against the catalog, selection
  fixtures.py       what a policy test uses
  verdict_report.py a test's verdict written on its report, and read back
  results.py        the verdicts collected, the summary, the report files
  timeline.py       per-test timings for the bench
  stop_after.py     compat's stop at a cell's first failed stack check
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.lifecycle.interrupts import (
    die_with_parent,
    raise_interrupt_on_termination,
)
from trainjob_conformance.plugin import (
    collection,
    fixtures,
    stash,
    stop_after,
    timeline,
    verdict_report,
)
from trainjob_conformance.plugin.options import add_options, is_xdist_worker, read_settings
from trainjob_conformance.plugin.results import PolicyResults
from trainjob_conformance.plugin.run_session import RunSessionHooks
from trainjob_conformance.plugin.session import ClusterSession
from trainjob_conformance.policies.packs import load_packs

MARKERS = (
    "e2e: needs a real cluster with JobSet, Kueue and Trainer",
    "policy(id): the catalog policy this test proves",
    "kueue: the test's namespace is managed by Kueue",
    "known_gap: the catalog names a known upstream gap of the test's policy (set at collection)",
    "harness: a test of the harness itself (./scripts/test), not a policy",
    "upgrade: judges what `trainjob-conformance upgrade` keeps in flight (the UP family)",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    try:
        settings = read_settings(config)
        packs = load_packs(list(settings.packs))
    except ConformanceError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[stash.SETTINGS] = settings
    config.stash[stash.PACKS] = packs
    # Here, before a cluster starts: at collection, an unknown ID would stop each
    # xdist worker after the controller had started the cluster, and the run would
    # end in xdist's "no active workers" traceback instead of this line.
    unknown = [p for p in settings.policies if p not in stash.catalog(config)]
    if unknown:
        raise pytest.UsageError(
            f"--trainjob-policy {', '.join(unknown)}: not in the catalog "
            "(see fixtures/policies.yaml, or the pack's policies.yaml as PACK/ID)"
        )
    # A pack's tests live outside this repository: collect them with the rest.
    given = {Path(arg.split("::")[0]).resolve() for arg in config.args}
    config.args.extend(str(pack.root) for pack in packs if pack.root not in given)
    worker = is_xdist_worker(config)
    session = ClusterSession(settings, getattr(config, "workerinput", None) if worker else None)
    config.stash[stash.SESSION] = session
    if not worker:
        # SIGTERM (CI cancelling a job) takes the same path as Ctrl-C: the
        # cluster is stopped and the report says the run was interrupted.
        raise_interrupt_on_termination()
    else:
        # A worker whose controller was killed (SIGKILL) goes with it: idle while
        # the controller starts the cluster, it would otherwise print xdist's
        # "cannot send (already closed?)" traceback, and a busy one would run on
        # against a cluster nobody will report on.
        die_with_parent()
    # Registered before the results collector, so that its unconfigure (the
    # results archive) runs before the cluster's last stop.
    manager = config.pluginmanager
    manager.register(RunSessionHooks(config), "trainjob-run-session")
    manager.register(collection, "trainjob-collection")
    manager.register(fixtures, "trainjob-fixtures")
    manager.register(verdict_report, "trainjob-verdict-report")
    manager.register(
        PolicyResults(config, settings, lambda: stash.catalog(config), session),
        "trainjob-policy-results",
    )
    if settings.stop_after_failure_of:
        manager.register(
            stop_after.StopAfterFailure(settings.stop_after_failure_of, settings.request.run_dir),
            "trainjob-stop-after",
        )
    if settings.timeline is not None and not worker:
        manager.register(timeline.TimelineRecorder(settings.timeline), "trainjob-timeline")
