"""Each policy's state over the runs of a history, per profile and provider, as a
nightly board shows it: PASSING, FAILING or FLAKY.

An outcome is good (pass, known-gap, not-applicable) or bad (FAIL, ERROR,
GAP-CLOSED); skipped and absent results say nothing either way. A flip is a
change of outcome between two runs of the same releases with the same catalog
(a change where the versions or the catalog changed is that change's, not a
flake). FLAKY: a bad outcome turned good again by itself, or more than one
flip. Otherwise the newest outcome decides: FAILING or PASSING (one flip from
good to bad, the newest, is a failure until it recovers).
"""

from __future__ import annotations

import html
import itertools
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.history_grid import Run
from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    NOT_APPLICABLE,
    PASS,
    worst_result,
)

PASSING = "PASSING"
FAILING = "FAILING"
FLAKY = "FLAKY"
STATES = (PASSING, FAILING, FLAKY)
_GOOD = (PASS, KNOWN_GAP, NOT_APPLICABLE)
_BAD = (FAIL, ERROR, GAP_CLOSED)


@dataclass
class PolicyState:
    policy: str
    profile: str
    provider: str
    state: str
    runs: int  # the runs in the window that judged it (a good or bad outcome)
    flips: list[str] = field(default_factory=list)  # each change within one stack, in words
    last: str = ""  # its newest result word

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.policy, self.profile, self.provider)


def _stack(run: Run) -> tuple[tuple[tuple[str, str], ...], str]:
    """What a change of outcome can be blamed on: the releases and the catalog."""
    return tuple(sorted(run.report.versions.items())), run.report.catalog_digest


def policy_states(runs: Iterable[Run]) -> list[PolicyState]:
    """Every (policy, profile, provider) of the runs (oldest first), with its state."""
    seen: dict[tuple[str, str, str], list[tuple[Run, str, str]]] = {}
    for run in runs:
        by_policy: dict[str, list[str]] = {}
        reasons: dict[str, str] = {}
        for result in run.report.results:
            by_policy.setdefault(result.policy, []).append(result.result)
            reasons.setdefault(result.policy, result.reason)
        for policy, words in by_policy.items():
            word = worst_result(words)
            key = (policy, run.report.profile, run.report.provider)
            seen.setdefault(key, []).append((run, word, reasons[policy]))
    states = []
    for key, history in sorted(seen.items()):
        judged = [(run, word, reason) for run, word, reason in history if word in _GOOD + _BAD]
        flips = []
        recovered = False
        for (before, was, _), (after, now, reason) in itertools.pairwise(judged):
            if (was in _BAD) == (now in _BAD) or _stack(before) != _stack(after):
                continue
            recovered = recovered or was in _BAD
            when = after.report.started or after.label
            flips.append(f"{when}: {was} -> {now}" + (f" ({reason[:120]})" if reason else ""))
        last = history[-1][1]
        if recovered or len(flips) > 1:
            state = FLAKY
        elif judged and judged[-1][1] in _BAD:
            state = FAILING
        else:
            state = PASSING
        states.append(PolicyState(*key, state=state, runs=len(judged), flips=flips, last=last))
    return states


def summary(states: list[PolicyState], window: int) -> dict[str, object]:
    """The JSON a board or a script reads: counts per profile and provider, and each cell."""
    counts: dict[str, dict[str, int]] = {}
    for state in states:
        column = counts.setdefault(f"{state.profile} ({state.provider})", dict.fromkeys(STATES, 0))
        column[state.state] += 1
    return {"window_runs": window, "counts": counts, "policies": [asdict(s) for s in states]}


def read_states(path: Path) -> dict[tuple[str, str, str], PolicyState]:
    """The states a `history` wrote (summary()), keyed (policy, profile, provider);
    a file that is not one is one line."""

    def refuse(why: str) -> ConformanceError:
        return ConformanceError(
            f"--states {path} is not a states file `history` wrote ({why}); give the "
            "<page>-states.json beside a history page"
        )

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise refuse(getattr(error, "strerror", None) or str(error)) from None
    if not isinstance(data, dict) or not isinstance(data.get("policies"), list):
        raise refuse("no list of policies")
    states = {}
    for entry in data["policies"]:
        try:
            state = PolicyState(**entry)
        except TypeError as error:
            raise refuse(f"an unexpected entry: {error}") from None
        if state.state not in STATES:
            raise refuse(f"unknown state {state.state!r}")
        states[state.key] = state
    return states


_COLOURS = {PASSING: "#2e7d32", FAILING: "#c62828", FLAKY: "#ef6c00"}


def badge(profile: str, states: list[PolicyState]) -> str:
    """A README badge for one profile: `conformance <profile> | N passing`, or how many
    fail or flake (the worse of the two decides the colour)."""
    mine = [s for s in states if s.profile == profile]
    failing = sum(s.state == FAILING for s in mine)
    flaky = sum(s.state == FLAKY for s in mine)
    if failing:
        text, colour = (
            f"{failing} failing" + (f", {flaky} flaky" if flaky else ""),
            _COLOURS[FAILING],
        )
    elif flaky:
        text, colour = f"{flaky} flaky", _COLOURS[FLAKY]
    else:
        text, colour = f"{len(mine)} passing", _COLOURS[PASSING]
    label = f"conformance {profile}"
    # Text widths by a flat 6.5 px per character (Verdana 11 at shields.io's size).
    left, right = int(len(label) * 6.5) + 10, int(len(text) * 6.5) + 10
    width = left + right
    label, text = html.escape(label), html.escape(text)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" '
        f'aria-label="{label}: {text}"><title>{label}: {text}</title>'
        f'<rect width="{left}" height="20" fill="#555"/>'
        f'<rect x="{left}" width="{right}" height="20" fill="{colour}"/>'
        '<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" '
        'font-size="11">'
        f'<text x="{left / 2}" y="14">{label}</text>'
        f'<text x="{left + right / 2}" y="14">{text}</text></g></svg>\n'
    )
