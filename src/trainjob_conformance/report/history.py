"""Many nights on one page: `trainjob-conformance history DIR... --output history.html`.

The grid (policies x runs in time order) is built in history_grid.py, the
page's text and numbers in history_page.py, its markup in
templates/history.html.j2; this module reads the directories and writes the page.
"""

from __future__ import annotations

import json
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.flaky import PolicyState, badge, policy_states, summary
from trainjob_conformance.report.history_grid import History, build_history, load_runs
from trainjob_conformance.report.history_page import html_page
from trainjob_conformance.report.words import ABSENT

# What callers of the history command's module use; ABSENT is defined in words.py.
__all__ = ["ABSENT", "History", "build_history", "load_runs", "write_history"]


def _check_output(output: Path) -> None:
    """Refuse an output that cannot be a file before reading anything."""
    if output.is_dir():
        raise ConformanceError(f"--output {output} is a directory; give a file, e.g. history.html")
    blocker = next((p for p in output.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ConformanceError(f"--output {output} cannot be written: {blocker} is a file")


def badge_path(page: Path, profile: str) -> Path:
    """Where a profile's badge goes: beside the page, named after the profile."""
    return page.with_name(f"badge-{profile.replace(' -> ', '-to-')}.svg")


def write_history(directories: list[Path], output: Path) -> tuple[Path, History, list[PolicyState]]:
    """The page, and beside it `<page>-states.json` (each policy's PASSING, FAILING or
    FLAKY per profile and provider) and a badge per profile."""

    def refuse(error: OSError) -> ConformanceError:
        return ConformanceError(
            f"--output {output} cannot be written ({error.strerror or error}); choose another path"
        )

    try:
        _check_output(output)
    except OSError as error:  # e.g. a name too long even to look up
        raise refuse(error) from None
    history = build_history(load_runs(directories))
    states = policy_states(history.runs)
    page = html_page(history, output.parent, states)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(page)
        # Beside the page: the states as JSON, and a badge per profile for a README.
        stem = output.with_suffix("")
        states_file = stem.with_name(f"{stem.name}-states.json")
        states_file.write_text(json.dumps(summary(states, len(history.runs)), indent=2) + "\n")
        for profile in sorted({s.profile for s in states}):
            badge_path(output, profile).write_text(badge(profile, states))
    except OSError as error:
        raise refuse(error) from None
    return output, history, states
