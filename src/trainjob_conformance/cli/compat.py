"""`compat`: which Trainer, Kueue and JobSet releases work together, from a run of each
combination (report/compat.py decides each cell's word from what its run saw)."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from trainjob_conformance.cli.matrix import job_count, matrix_child
from trainjob_conformance.cli.run import add_cluster_options, check_run_args, record_command
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.lifecycle.processes import how_it_ended
from trainjob_conformance.progress import say
from trainjob_conformance.report.compat import STACK_CHECKS

AXES = ("trainer", "kueue", "jobset")
# The cells' stack checks and the Kueue paths a skew breaks first: a table in
# minutes where the whole catalog takes an hour.
SMOKE = ("TJ-STACK-001", "KQ-ADMIT-001", "KQ-ADMIT-002", "KQ-QUOTA-001", "KQ-PODSET-001")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compat = sub.add_parser(
        "compat",
        help="the Trainer x Kueue x JobSet compatibility table, from a run per combination",
        description="Exit codes: 0 every cell compatible; 1 a cell incompatible, with "
        "policies broken, or not run (with --require-agreement: 0 when every cell's run "
        "agrees with its schema check, 1 otherwise); 2 bad input. The table is written "
        "in every case.",
    )
    for axis in AXES:
        compat.add_argument(
            f"--{axis}",
            metavar="RELEASES",
            help=f"comma-separated {axis} releases (default: every profile's, and the newest "
            "patch of each of their minors on the module proxy)",
        )
    choose = compat.add_mutually_exclusive_group()
    choose.add_argument(
        "--policies", metavar="IDS", help="comma-separated policy IDs to judge each cell by"
    )
    choose.add_argument(
        "--smoke", action="store_true", help=f"judge each cell by {', '.join(SMOKE)}"
    )
    compat.add_argument(
        "-j", "--jobs", default="1", help="cells run at once (default: %(default)s)"
    )
    compat.add_argument(
        "--every-policy",
        action="store_true",
        help="judge every policy of an incompatible cell too (by default a cell's stack "
        f"checks, {', '.join(STACK_CHECKS)}, run first, and after one fails the cell's other "
        "policies are skipped with that failure as their reason)",
    )
    compat.add_argument(
        "--require-agreement",
        action="store_true",
        help="exit 0 only when every cell's run agrees with its schema check (incompatible "
        "where the check named a missing field, compatible where it named none), 1 otherwise, "
        "whatever the cells' words: for a table whose incompatible cells are expected",
    )
    add_cluster_options(compat)
    compat.set_defaults(func=run_compat, report="reports/compat")


def _listed(text: str, axis: str) -> list[str]:
    releases = [r.strip() for r in text.split(",")]
    if not all(releases):
        raise ConformanceError(f"--{axis} {text!r}: give comma-separated releases, e.g. v0.16.6")
    return list(dict.fromkeys(releases))


def _default_releases(axis: str, notes: list[str]) -> list[str]:
    """Every profile's release of the component, and the newest patch of each of
    their minors where the proxy answers (else a note, and the pins only)."""
    from trainjob_conformance.stack import goproxy
    from trainjob_conformance.stack.components import COMPONENTS
    from trainjob_conformance.stack.profiles import load_profile, profile_names

    pinned = {load_profile(name).version(axis) for name in profile_names()}
    listed = goproxy.releases(COMPONENTS[axis].module)
    if not isinstance(listed, list):
        notes.append(f"{axis}: the newest patches not added: {listed.detail()}")
        return sorted(pinned, key=goproxy.release_key)
    minors = {goproxy.release_key(v)[:2] for v in pinned}
    newest = {
        max((v for v in listed if goproxy.release_key(v)[:2] == minor), key=goproxy.release_key)
        for minor in minors
        if any(goproxy.release_key(v)[:2] == minor for v in listed)
    }
    return sorted(pinned | newest, key=goproxy.release_key)


def _usable(axis: str, releases: list[str], notes: list[str]) -> list[str]:
    """The releases that exist; each other one is a note in one line, and left out."""
    from trainjob_conformance.stack import goproxy
    from trainjob_conformance.stack.components import COMPONENTS
    from trainjob_conformance.stack.compose import parse_override
    from trainjob_conformance.stack.gobuild import binary_path

    usable = []
    for version in releases:
        try:
            parse_override(f"{axis}={version}")
            component = COMPONENTS[axis]
            if not all(binary_path(axis, version, b).is_file() for b in component.binaries):
                goproxy.require_release(component.module, version)
        except ConformanceError as error:
            notes.append(f"{axis} {version} left out: {error}")
            continue
        usable.append(version)
    return usable


def cell_profile(trainer: str, kueue: str, jobset: str) -> str:
    """The composed profile a cell runs as: the profile that pins this Trainer
    (else latest), with Kueue and JobSet set to the cell's."""
    from trainjob_conformance.stack.compose import composed_name
    from trainjob_conformance.stack.profiles import DEFAULT_PROFILE, load_profile, profile_names

    bases = [name for name in profile_names() if load_profile(name).version("trainer") == trainer]
    base = load_profile(bases[0] if bases else DEFAULT_PROFILE)
    wanted = {"trainer": trainer, "kueue": kueue, "jobset": jobset}
    overrides = {k: v for k, v in wanted.items() if base.version(k) != v}
    return composed_name(base.name, overrides)


def run_compat(args: argparse.Namespace) -> int:
    from trainjob_conformance.fanout import FanOut, Task
    from trainjob_conformance.report.compat import (
        COMPATIBLE,
        Cell,
        CompatTable,
        disagreements,
        judge,
        write_table,
    )
    from trainjob_conformance.report.model import RunReport, read_reports
    from trainjob_conformance.report.render import write_reports
    from trainjob_conformance.stack.gobuild import build_profile
    from trainjob_conformance.stack.profiles import load_profile
    from trainjob_conformance.stack.skew import skews

    args.jobs = job_count(args.jobs)
    args.policy = (
        list(SMOKE) if args.smoke else _listed(args.policies, "policies") if args.policies else []
    )
    # Each cell's pytest stops at its first failed stack check (plugin/stop_after.py).
    args.stop_after_failure_of = () if args.every_policy else STACK_CHECKS
    if args.cluster == "existing":
        return _installed_cell(args)
    check_run_args(args)
    notes: list[str] = []
    axes = {
        axis: _usable(
            axis,
            _listed(getattr(args, axis), axis)
            if getattr(args, axis)
            else _default_releases(axis, notes),
            notes,
        )
        for axis in AXES
    }
    for note in notes:
        say(note)
    empty = [axis for axis in AXES if not axes[axis]]
    if empty:
        raise ConformanceError(
            f"no {' and no '.join(empty)} release left to run; see the lines above"
        )
    record_command()
    report_dir = Path(args.report)
    cells = [
        Cell(trainer, kueue, jobset, cell_profile(trainer, kueue, jobset))
        for jobset in axes["jobset"]
        for trainer in axes["trainer"]
        for kueue in axes["kueue"]
    ]
    say(f"compat: {len(cells)} cells ({' x '.join(f'{len(axes[a])} {a}' for a in AXES)})")
    runnable = []
    for cell in cells:
        profile = load_profile(cell.profile)
        began = time.monotonic()
        try:
            cell.skews = [skew.line() for skew in skews(profile.versions)]
        except ConformanceError as error:
            cell.skews = [f"not checked: {error}"]
        cell.skew_seconds = round(time.monotonic() - began, 2)
        for line in cell.skews:
            say(f"schema skew in {cell.profile}: {line}")
        try:
            build_profile(profile)
        except ConformanceError as error:
            cell.reason = f"the build refused it: {error}"
            say(f"{cell.profile}: not run: {cell.reason}")
            continue
        runnable.append(cell)
    # Each cell's pytest output goes to its log, even one cell at a time: an
    # incompatible cell's failed tests are the table's finding, not the command's,
    # and printed they read as failures of whatever ran compat (a CI log).
    tasks = [Task(cell.profile, matrix_child(args, cell.profile, to_log=True)) for cell in runnable]
    outcomes = FanOut(tasks, args.jobs, exit_code=lambda code: code).run() if tasks else []
    ran = {cell.profile for cell in runnable}
    # A run that left no result: its reason is how its pytest ended.
    ended = {outcome.name: how_it_ended(outcome.exit_code) for outcome in outcomes}
    for cell in cells:
        path = report_dir / f"{cell.profile}.json"
        report = RunReport.read(path) if cell.profile in ran and path.is_file() else None
        if report is None and cell.profile in ended:
            cell.reason = f"the run left no result file: its pytest {ended[cell.profile]}"
        judge(cell, report)
    label = f"the policies {', '.join(args.policy)}" if args.policy else "the catalog"
    table = CompatTable(cells, axes["trainer"], axes["kueue"], axes["jobset"], label, notes)
    if ran:
        write_reports(read_reports(report_dir), report_dir)
    paths = write_table(table, report_dir)
    counts = ", ".join(f"{n} {word}" for word, n in table.counts().items() if n)
    print(f"compat: {counts}; table: {', '.join(str(p) for p in paths)}")
    if ran:
        print(f"compat: each cell's pytest output: {report_dir.resolve() / 'logs'}")
    for cell in cells:
        print(f"  {cell.profile}: {cell.word}: {cell.reason}")
    wrong = disagreements(cells)
    print(
        f"compat: the run and the schema check agree on {len(cells) - len(wrong)} of "
        f"{len(cells)} cells"
    )
    for line in wrong:
        print(f"  disagree: {line}")
    if args.require_agreement:
        return 1 if wrong else 0
    return 0 if all(cell.word == COMPATIBLE for cell in cells) else 1


def _installed_cell(args: argparse.Namespace) -> int:
    """On an existing cluster, the one combination installed there: its cell, and
    which row, column and table of the full table that is."""
    from trainjob_conformance.cli import children
    from trainjob_conformance.cli.run import pytest_command
    from trainjob_conformance.report.compat import (
        COMPATIBLE,
        Cell,
        CompatTable,
        judge,
        write_table,
    )
    from trainjob_conformance.report.model import RunReport
    from trainjob_conformance.stack.profiles import DEFAULT_PROFILE

    given = [f"--{axis}" for axis in AXES if getattr(args, axis)]
    if given:
        raise ConformanceError(
            f"--cluster existing checks the releases installed there: drop {', '.join(given)}"
        )
    check_run_args(args)
    record_command()
    # The run names its result file after the profile it found installed (its
    # releases): a directory of its own holds that one file, whatever its name.
    table_dir = Path(args.report)
    args.report = str(table_dir / "installed")
    shutil.rmtree(args.report, ignore_errors=True)
    children.run_child(pytest_command(args, DEFAULT_PROFILE), own_group=args.workers > 0)
    written = sorted(Path(args.report).glob("*.json"))
    report = RunReport.read(written[0]) if len(written) == 1 else None
    versions = report.versions if report is not None else {}
    found = {axis: versions.get(axis, "not installed") for axis in AXES}
    cell = Cell(found["trainer"], found["kueue"], found["jobset"], "installed")
    judge(cell, report)
    if cell.report:  # the table's links are relative to the table's directory
        cell.report = f"installed/{cell.report}"
    label = f"the policies {', '.join(args.policy)}" if args.policy else "the catalog"
    table = CompatTable([cell], [cell.trainer], [cell.kueue], [cell.jobset], label)
    paths = write_table(table, table_dir)
    print(
        f"this cluster is the row Trainer {cell.trainer}, the column Kueue {cell.kueue}, in the "
        f"table of JobSet {cell.jobset}: {cell.word}: {cell.reason}; {', '.join(map(str, paths))}"
    )
    return 0 if cell.word == COMPATIBLE else 1
