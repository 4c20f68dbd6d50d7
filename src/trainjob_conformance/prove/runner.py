"""Running a baseline and each break's policies as pytest children on one cluster.

Each child runs against the cluster through its kubeconfig (as `existing`),
with its test namespaces labelled for the break, so several breaks' children
run side by side without seeing each other's breaks.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.provider import KUBECONFIG_OPTION
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.invocation import PytestInvocation
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.lifecycle.interrupts import interruptible_child
from trainjob_conformance.lifecycle.processes import how_it_ended
from trainjob_conformance.policies.breaks import BREAK_LABEL, Break
from trainjob_conformance.policies.catalog import Policy
from trainjob_conformance.prove.breaking import AppliedBreak, cannot_host
from trainjob_conformance.prove.plan import Plan, Step
from trainjob_conformance.prove.table import DETECTED, ERROR, MISSED, NOT_RUN, Row
from trainjob_conformance.prove.worker_break import write_worker_break
from trainjob_conformance.report.model import ERROR as ERROR_WORD
from trainjob_conformance.report.model import (
    FAIL,
    KNOWN_GAP,
    NOT_APPLICABLE,
    PASS,
    SKIPPED,
    RunReport,
    worst_result,
)

# Results a clean baseline may hold: the catalog's own verdicts.
CLEAN = (PASS, KNOWN_GAP, NOT_APPLICABLE, SKIPPED)


class NoResults(ConformanceError):
    """A pytest child ended without writing its results; `code` is how it ended."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code

    @property
    def killed_from_outside(self) -> bool:
        """Killed by a signal the harness never sends its children (SIGKILL, the
        kernel's OOM killer): not an interruption of the harness itself."""
        return self.code < 0 and -self.code not in (signal.SIGINT, signal.SIGTERM)


@dataclass
class ChildSettings:
    profile: str
    kubeconfig: Path
    out: Path  # children's reports and logs go under here
    packs: tuple[Path, ...] = ()
    extra: tuple[str, ...] = ()
    # `upgrade`'s judges: the record of the objects in flight (the UP policies).
    upgrade_record: Path | None = None
    # A break's admission policies for the MultiKueue worker each child starts.
    worker_break: Path | None = None


@dataclass
class Children:
    """The pytest children running now, so an interruption can stop them all."""

    running: set[subprocess.Popen[bytes]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: bool = False

    def run(self, command: list[str], log: Path) -> int:
        with log.open("wb") as sink:
            with self.lock:
                if self.stopping:
                    raise ConformanceError("prove was interrupted")
                child = subprocess.Popen(
                    command, stdout=sink, stderr=subprocess.STDOUT, preexec_fn=interruptible_child
                )
                self.running.add(child)
            try:
                return child.wait()
            except BaseException:
                # Interrupted while waiting (SIGTERM to this process alone, say): the
                # child is stopped and waited for here, while it is still among the
                # running; once the wait has unwound, nothing would signal it and it
                # would outlive this process's "nothing left running".
                self.stop()
                raise
            finally:
                with self.lock:
                    self.running.discard(child)

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            children = list(self.running)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGINT)
        for child in children:
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()


def pytest_command(
    settings: ChildSettings,
    policies: list[str],
    label: str,
    out: Path,
    workers: int,
    labelled: bool = True,
) -> list[str]:
    """A child against the cluster through its kubeconfig (as `existing`); a break's
    children's namespaces carry the break's label, which scopes the break to them
    (`labelled`: a label other than `baseline` is a break's)."""
    return PytestInvocation(
        profile=settings.profile,
        cluster="existing",
        run_dir=out / "run",
        provider_options={KUBECONFIG_OPTION: str(settings.kubeconfig)},
        workers=workers,
        dist=None,
        report=out,
        packs=settings.packs,
        policies=tuple(policies),
        namespace_labels=() if label == "baseline" or not labelled else (f"{BREAK_LABEL}={label}",),
        quiet=True,
        upgrade_record=settings.upgrade_record,
        worker_break=settings.worker_break,
        extra=settings.extra,
    ).argv()


def run_policies(
    children: Children,
    settings: ChildSettings,
    policies: list[str],
    label: str,
    workers: int,
    labelled: bool = True,
) -> RunReport:
    out = settings.out / label
    out.mkdir(parents=True, exist_ok=True)
    command = pytest_command(settings, policies, label, out, workers, labelled)
    code = children.run(command, out / "pytest.log")
    result = out / f"{settings.profile}.json"
    if not result.is_file():
        raise NoResults(
            f"the tests under {label} wrote no results (pytest {how_it_ended(code)}); "
            f"see {out / 'pytest.log'}",
            code,
        )
    return RunReport.read(result)


def verdicts(report: RunReport) -> dict[str, tuple[str, str]]:
    """policy -> (worst result of its tests, the reason of that result).

    A test skipped for a capability this cluster lacks (TJ-EDIT-008's variant that
    needs containers) does not count where another test of the policy ran: the
    policy is judged by the tests that ran.
    """
    found: dict[str, list[tuple[str, str]]] = {}
    for result in report.results:
        found.setdefault(result.policy, []).append((result.result, result.reason))
    worst = {}
    for policy, results in found.items():
        ran = [(w, r) for w, r in results if w != SKIPPED]
        results = ran or results
        word = worst_result([w for w, _ in results])
        reason = next(r for w, r in results if w == word)
        worst[policy] = (word, reason)
    return worst


def check_baseline(report: RunReport) -> dict[str, tuple[str, str]]:
    found = verdicts(report)
    unclean = {p: v for p, v in found.items() if v[0] not in CLEAN}
    if unclean:
        first = ", ".join(f"{p} {w}: {r}" for p, (w, r) in sorted(unclean.items())[:3])
        raise ConformanceError(
            f"the baseline run is not clean ({len(unclean)} policies): {first}; "
            "prove judges tests only on a cluster where they pass"
        )
    return found


def judge(expected: str, baseline: str, verdict: str, reason: str, component: str) -> str:
    if verdict == expected and (expected != ERROR_WORD or component.lower() in reason.lower()):
        return DETECTED
    if verdict in (PASS, baseline):
        return MISSED
    return ERROR


@dataclass
class StepContext:
    kube: Kube
    children: Children
    settings: ChildSettings
    catalog: dict[str, Policy]
    baseline: dict[str, tuple[str, str]]
    variables: dict[str, Any]
    restored: list[str]
    progress: Callable[[str], None]


def run_step(context: StepContext, step: Step) -> list[Row]:
    """Apply the break, run its policies, revert it; one row per policy."""
    item: Break = step.item
    runnable = [
        t
        for t in step.targets
        if context.baseline.get(t.policy, (NOT_RUN, ""))[0] in (PASS, KNOWN_GAP)
    ]
    rows = [
        _row(context, item, t.policy, t.verdict, "", NOT_RUN, _not_run(context, t.policy), 0.0)
        for t in step.targets
        if t not in runnable
    ]
    if not runnable:
        return rows
    unhosted = cannot_host(item, context.settings.kubeconfig)
    if unhosted is not None:
        context.progress(f"break {item.name}: not on this cluster ({unhosted})")
        return rows + [
            _row(context, item, t.policy, t.verdict, "", NOT_RUN, unhosted, 0.0) for t in runnable
        ]
    began = time.monotonic()
    applied = AppliedBreak(context.kube, item, context.variables, context.settings.kubeconfig)
    try:
        applied.apply()
        settings = context.settings
        if applied.worker_documents:
            where = context.settings.out / item.label_value / "worker-break.yaml"
            settings = replace(
                settings, worker_break=write_worker_break(where, applied.worker_documents)
            )
        context.progress(f"break {item.name}: in effect; running {len(runnable)} policies")
        report = run_policies(
            context.children,
            settings,
            [t.policy for t in runnable],
            item.label_value,
            # Most of a broken run is spent in waits running out: side by side.
            min(3, len(runnable)) if len(runnable) > 1 else 0,
        )
    except (ConformanceError, ApiError) as error:
        seconds = time.monotonic() - began
        rows += [
            _row(context, item, t.policy, t.verdict, "", ERROR, str(error), seconds)
            for t in runnable
        ]
        return rows
    finally:
        try:
            left = applied.revert()
        except (ConformanceError, ApiError) as error:
            left = [str(error)]
        context.restored += [f"after {item.name}: {line}" for line in left]
    if report.interrupted or context.children.stopping:
        # A test cut short fails, which would read as detected: nothing was judged.
        seconds = time.monotonic() - began
        why = "prove was interrupted before this break's run ended"
        context.progress(f"break {item.name}: not judged ({why})")
        return rows + [
            _row(context, item, t.policy, t.verdict, "", NOT_RUN, why, seconds) for t in runnable
        ]
    found = verdicts(report)
    by_policy = {r.policy: r.seconds for r in report.results}
    for target in runnable:
        word, reason = found.get(target.policy, ("", "the policy's tests did not run"))
        baseline = context.baseline[target.policy][0]
        named = item.component or item.name
        outcome = judge(target.verdict, baseline, word, reason, named) if word else ERROR
        if outcome == MISSED and not reason:
            reason = f"the test gave {word} with the break in place"
        rows.append(
            _row(
                context,
                item,
                target.policy,
                target.verdict,
                word,
                outcome,
                reason,
                by_policy.get(target.policy, 0.0),
            )
        )
    context.progress(
        f"break {item.name}: "
        + ", ".join(f"{r.policy} {r.outcome}" for r in rows)
        + f" ({time.monotonic() - began:.0f} s)"
    )
    return rows


def _not_run(context: StepContext, policy: str) -> str:
    word, reason = context.baseline.get(policy, (NOT_RUN, "not in the baseline"))
    return f"baseline {word}: {reason}"


def _row(
    context: StepContext,
    item: Break,
    policy: str,
    expected: str,
    verdict: str,
    outcome: str,
    reason: str,
    seconds: float,
) -> Row:
    title = context.catalog[policy].title if policy in context.catalog else ""
    return Row(policy, title, item.name, expected, verdict, outcome, reason, seconds)


def run_plan(context: StepContext, plan: Plan, parallel: int) -> list[Row]:
    """Scoped breaks `parallel` at a time, then the others one by one."""
    scoped = [step for step in plan.steps if step.item.scoped]
    alone = [step for step in plan.steps if not step.item.scoped]
    rows: list[Row] = []
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = [pool.submit(run_step, context, step) for step in scoped]
        try:
            for future in futures:
                rows += future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            context.children.stop()
            raise
    for step in alone:
        try:
            rows += run_step(context, step)
        except BaseException:
            context.children.stop()
            raise
    for policy in plan.unbroken:
        rows.append(
            Row(
                policy,
                context.catalog[policy].title,
                "-",
                FAIL,
                "",
                MISSED,
                "the policy names no break for this release, so nothing shows it can fail",
            )
        )
    return rows
