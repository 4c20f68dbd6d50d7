"""An upgrade's results: a column of the matrix (`A -> B`, the same result words as
a profile's), and the upgrade's own page (steps, availability, each policy per
phase) as Markdown and JSON under <report>/upgrade/."""

from __future__ import annotations

import json
from dataclasses import asdict
from functools import partial
from pathlib import Path

from trainjob_conformance.policies.catalog import Policy
from trainjob_conformance.policies.layers import layer_of
from trainjob_conformance.prove.table import DETECTED, MISSED, NOT_RUN, ProveReport, Row
from trainjob_conformance.report.files import write_whole
from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    NOT_APPLICABLE,
    PASS,
    SKIPPED,
    PolicyResult,
    RunReport,
    worst_result,
)
from trainjob_conformance.upgrade.record import BEFORE, FINAL, SETTLED
from trainjob_conformance.upgrade.session import FINAL_POLICIES, UpgradeRun


def _phase_words(phase: str) -> str:
    words = {
        BEFORE: "before the upgrade",
        SETTLED: "the whole window, after the last step's judge",
        FINAL: "after the last step",
    }
    return words.get(phase, f"after {phase}")


def _versions(run: UpgradeRun) -> dict[str, str]:
    source, target = run.plan.source.versions, run.plan.target.versions
    moved = {step.step.component for step in run.steps if step.done is not None}
    versions = {}
    for key, version in source.items():
        versions[key] = f"{version} -> {target[key]}" if key in moved else version
    return versions


def column_report(run: UpgradeRun, catalog: dict[str, Policy]) -> RunReport:
    """The upgrade path as one column: each UP policy's worst result over the phases
    (its reason names the phase), then the catalog's results on the upgraded stack."""
    results: list[PolicyResult] = []
    judged: dict[str, list[tuple[str, PolicyResult]]] = {}
    for phase, report in run.phases.items():
        for result in report.results:
            judged.setdefault(result.policy, []).append((phase, result))
    broken = next((s for s in run.steps if s.done is None), None)
    for policy_id in sorted(p for p, policy in catalog.items() if policy.upgrade_only):
        phases = judged.get(policy_id, [])
        if not phases:
            reason = (
                f"not judged: the upgrade of {broken.step.label} failed: {broken.error}"
                if broken
                else "not judged: no phase of the upgrade ran its test"
            )
            results.append(
                PolicyResult(
                    policy_id,
                    catalog[policy_id].title,
                    ERROR,
                    0.0,
                    "",
                    reason,
                    layer=layer_of(ERROR, reason, catalog[policy_id].layer),
                )
            )
            continue
        word = worst_result([r.result for _, r in phases])
        phase, worst = next((p, r) for p, r in phases if r.result == word)
        if word == PASS:
            reason = "held " + ", ".join(_phase_words(p) for p, _ in phases)
        else:
            words = _phase_words(phase)
            # The UP tests name the phase themselves; a catalog test's reason does not.
            reason = worst.reason if worst.reason.startswith(words) else f"{words}: {worst.reason}"
        if broken and word != ERROR and word != FAIL:
            word, reason = (
                ERROR,
                f"judged up to the failed step; the upgrade of {broken.step.label} failed: {broken.error}",
            )
        results.append(
            PolicyResult(
                policy_id,
                worst.title,
                word,
                round(sum(r.seconds for _, r in phases), 1),
                worst.test,
                reason,
                worst.diagnostics,
                # The judge's own layer where it named one (the webhook that refused, say).
                layer=""
                if word == PASS
                else worst.layer or layer_of(word, reason, catalog[policy_id].layer),
            )
        )
    if run.catalog is not None:
        results += run.catalog.results
    return RunReport(
        profile=run.plan.column,
        provider=run.provider,
        versions=_versions(run),
        started=run.started,
        wall_seconds=run.seconds,
        cluster_start_seconds=None,
        results=results,
        stack_errors=[f"the upgrade of {broken.step.label} failed: {broken.error}"]
        if broken
        else [],
    )


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines


def upgrade_markdown(run: UpgradeRun, column: RunReport) -> str:
    lines = [f"# Upgrade {run.plan.column} ({run.provider})", ""]
    lines.append(f"Started {run.started}; {run.seconds:.0f} s in all.")
    lines += [""] + [f"- {note}" for note in run.plan.notes]
    if run.skews:
        lines += ["", "## Schema skew between the steps", ""]
        lines += [f"- {line}" for line in run.skews]
    lines += ["", "## Steps", ""]
    rows = []
    for result in run.steps:
        done = result.done
        if done is None:
            rows.append([result.step.label, "FAILED", "", "", result.error])
            continue
        rows.append(
            [
                result.step.label,
                f"{done.crds_seconds:.1f}",
                f"{done.manager_seconds:.1f}",
                f"{done.webhooks_seconds:.1f}",
                "; ".join(done.notes),
            ]
        )
    lines += _table(["step", "CRDs (s)", "manager (s)", "webhooks (s)", "notes"], rows)
    lines += ["", "## Webhooks while each step ran", ""]
    lines.append(
        "The same server-side dry-run requests sent over and over during each step; a refusal "
        "is a finding about the upgrade, in the API server's words."
    )
    lines.append("")
    rows = []
    for result in run.steps:
        for figures in result.availability.values():
            rows.append(
                [
                    result.step.label,
                    figures.probe,
                    str(figures.requests),
                    str(figures.refused),
                    f"{figures.window_seconds:.2f}",
                    f"{figures.longest_outage:.2f}",
                    " / ".join(figures.words)[:300],
                ]
            )
    lines += _table(
        ["step", "request", "sent", "refused", "window (s)", "longest outage (s)", "words"], rows
    )
    lines += ["", "## The upgrade's policies, per phase", ""]
    phases = list(run.phases)
    rows = []
    for result in column.results:
        if not result.policy.startswith("UP-"):
            continue
        row = [result.policy]
        for phase in phases:
            found = [r for r in run.phases[phase].results if r.policy == result.policy]
            row.append(worst_result([r.result for r in found]) if found else "")
        row.append(result.result)
        rows.append(row)
    lines += _table(["policy", *[_phase_words(p) for p in phases], "column"], rows)
    reasons = [r for r in column.results if r.policy.startswith("UP-") and r.reason]
    if reasons:
        lines += [""] + [f"- {r.policy} {r.result}: {r.reason}" for r in reasons]
    if run.catalog is not None:
        counts = run.catalog.counts()
        summary = ", ".join(f"{n} {word}" for word, n in sorted(counts.items()))
        lines += ["", "## The catalog on the upgraded stack", "", summary]
    if run.window_problems:
        lines += ["", "## The window's watch", ""] + [f"- {p}" for p in run.window_problems]
    return "\n".join(lines) + "\n"


def write_upgrade(run: UpgradeRun, column: RunReport, directory: Path) -> list[Path]:
    """<dir>/<A-to-B>.json (the column, read by report, diff and history) and
    <dir>/upgrade/<A-to-B>.md and .json (the upgrade's own page and data)."""
    paths = [column.write(directory)]
    own = directory / "upgrade"
    own.mkdir(parents=True, exist_ok=True)
    markdown = own / f"{column.file_stem}.md"
    write_whole(markdown, upgrade_markdown(run, column))
    data = own / f"{column.file_stem}.json"
    write_whole(data, json.dumps(asdict(run), indent=2, default=str) + "\n")
    return [*paths, markdown, data]


def _results(run: UpgradeRun, phase: str, policy_id: str) -> list[PolicyResult]:
    found = run.phases.get(phase)
    return [r for r in found.results if r.policy == policy_id] if found else []


def prove_report(run: UpgradeRun, catalog: dict[str, Policy]) -> ProveReport:
    """`upgrade --prove`: each UP policy's verdict in the judge that ran under its break.

    Every break must turn its policy FAIL (its catalog entry says which verdict);
    one that leaves it passing is MISSED. The baseline is the judge before the
    upgrade and those after each step before the last: the policy held there.
    """
    report = ProveReport(
        profile=run.plan.column.replace(" -> ", "-to-"),
        provider=run.provider,
        versions=_versions(run),
        started=run.started,
        wall_seconds=run.seconds,
        restored=list(run.not_restored),
    )
    last = run.steps[-1].step.label if run.steps else ""
    for policy_id in sorted(p for p, policy in catalog.items() if policy.upgrade_only):
        for reference in catalog[policy_id].breaks:
            phase = FINAL if policy_id in FINAL_POLICIES else last
            judged = _results(run, phase, policy_id)
            baseline = [
                r.result
                for name, report_ in run.phases.items()
                # The judges after the last step's read the stack its breaks left.
                if name not in (phase, SETTLED, FINAL)
                for r in report_.results
                if r.policy == policy_id
            ]
            row = partial(
                Row, policy_id, catalog[policy_id].title, reference.name, reference.verdict
            )
            quiet = (SKIPPED, NOT_APPLICABLE)
            if judged and all(r.result in quiet for r in judged) and set(baseline) <= set(quiet):
                # Not on this path (no PyTorchJob in flight without the training-operator).
                report.rows.append(row(judged[0].result, NOT_RUN, judged[0].reason))
                continue
            if run.broke.get(policy_id) != reference.name or not judged:
                why = next((s.error for s in run.steps if s.done is None), "") or "not applied"
                report.rows.append(row("", ERROR, why))
                continue
            verdict = worst_result([r.result for r in judged])
            reason = next(r.reason for r in judged if r.result == verdict)
            if any(word != PASS for word in baseline):
                outcome, reason = ERROR, f"did not hold before its break: {baseline}"
            else:
                outcome = DETECTED if verdict == reference.verdict else MISSED
            report.rows.append(
                row(verdict, outcome, reason, round(sum(r.seconds for r in judged), 1))
            )
    return report
