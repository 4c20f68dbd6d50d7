"""`report`, `diff` and `history`: reading the results runs wrote."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = sub.add_parser("report", help="render Markdown and HTML from result files")
    report.add_argument("results", help="a result JSON, a report directory or a results archive")
    report.add_argument("--output", help="where to write (default: beside the results)")
    report.set_defaults(func=run_report)

    diff = sub.add_parser(
        "diff",
        help="compare two reports; exit 1 on a regression, 3 if the new run broke",
        description="Exit codes: 0 no regression; 1 a conformance regression (newly FAIL or "
        "GAP-CLOSED, a new known gap, a policy no longer run or no longer applicable); 2 bad "
        "input; 3 no regression, but the new run cannot be judged (ERROR results: the stack "
        "broke, or the run was interrupted).",
    )
    diff.add_argument("old", help="earlier result JSON, report directory or results archive")
    diff.add_argument("new", help="later result JSON, report directory or results archive")
    diff.add_argument(
        "--states",
        metavar="FILE",
        help="the <page>-states.json `history` wrote: a regression in a cell it calls FLAKY "
        "is marked so, with its flips (the exit code is unchanged)",
    )
    diff.set_defaults(func=run_diff)

    history = sub.add_parser(
        "history", help="one HTML page of many runs: policies x runs in time order, with trends"
    )
    history.add_argument(
        "directories",
        nargs="+",
        metavar="DIR",
        help="report directories (`run`/`matrix --report`) or results archives",
    )
    history.add_argument(
        "--output", default="history.html", help="the page to write (default: %(default)s)"
    )
    history.set_defaults(func=run_history)


def run_report(args: argparse.Namespace) -> int:
    from trainjob_conformance.report.model import read_reports
    from trainjob_conformance.report.render import write_reports

    results = Path(args.results)
    output = Path(args.output) if args.output else _beside(results)
    md, page = write_reports(read_reports(results), output)
    print(f"{md}\n{page}")
    return 0


def _beside(results: Path) -> Path:
    """Where `report` writes by default: the report directory itself, or for an
    archive a directory of the archive's name without .tar.gz."""
    from trainjob_conformance.report.archive import is_archive

    if is_archive(results):
        return results.with_name(
            results.name.removesuffix(".gz").removesuffix(".tar").removesuffix(".tgz")
        )
    return results


def run_diff(args: argparse.Namespace) -> int:
    from trainjob_conformance.report.diff import diff_reports
    from trainjob_conformance.report.flaky import read_states
    from trainjob_conformance.report.model import read_reports

    states = read_states(Path(args.states)) if args.states else None
    diff = diff_reports(read_reports(Path(args.old)), read_reports(Path(args.new)), states)
    print("\n".join(diff.lines()))
    return diff.exit_code


def run_history(args: argparse.Namespace) -> int:
    from trainjob_conformance.report.flaky import FLAKY
    from trainjob_conformance.report.history import write_history

    page, history, states = write_history([Path(d) for d in args.directories], Path(args.output))
    flaky = sorted({f"{s.policy} on {s.profile}" for s in states if s.state == FLAKY})
    print(
        f"states: {page.with_suffix('')}-states.json; badges: badge-<profile>.svg beside the page"
    )
    if flaky:
        print(f"FLAKY: {', '.join(flaky)}")
    print(f"{page}: {len(history.rows)} policies x {len(history.runs)} runs")
    return 0
