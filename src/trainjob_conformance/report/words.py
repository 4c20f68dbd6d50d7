"""The one table of result words and how each is shown: report, history page, terminal.

The words themselves, and their severity order, are defined in `model.py`;
this table says how each word looks wherever it is shown. Every page and the
terminal summary show the word itself, never an abbreviation: a word means one
thing everywhere, so a reader who learned it in one place can read it in any.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    NOT_APPLICABLE,
    PASS,
    SEVERITY,
    SKIPPED,
)

# Not a result word: a run that has no result for a policy (its cell is empty).
ABSENT = "absent"


@dataclass(frozen=True)
class Colours:
    """How one HTML page paints a word (written as CSS declarations, in this order)."""

    background: str = ""
    color: str = ""
    bold: bool = False

    def rule(self, selector: str) -> str:
        """One CSS rule: `selector{declarations}`."""
        parts = (
            f"background:{self.background}" if self.background else "",
            f"color:{self.color}" if self.color else "",
            "font-weight:700" if self.bold else "",
        )
        return selector + "{" + ";".join(part for part in parts if part) + "}"


@dataclass(frozen=True)
class Word:
    """One result word (or ABSENT) and its styles."""

    word: str
    css: str  # the CSS class of its cells, legend swatch and detail panel
    # conformance.html: pale backgrounds, so a matrix of mostly `pass` stays readable.
    report: Colours
    # The history page: strong colours, so a policy's pattern over nights shows at a glance.
    history: Colours
    # The history sparkline's dot; "" for words never timed (nothing ran: no dot).
    dot: str
    terminal: tuple[str, ...]  # the pytest terminal writer's markup flags, e.g. ("red", "bold")
    legend: str  # what the word means, in one line

    @property
    def severity(self) -> int | None:
        """Its place in model.SEVERITY (0 is the worst); None for ABSENT, which is no result."""
        return SEVERITY.index(self.word) if self.word in SEVERITY else None

    @property
    def markup(self) -> dict[str, bool]:
        """Keyword arguments for TerminalReporter.write and TerminalWriter.markup."""
        return dict.fromkeys(self.terminal, True)

    @property
    def text(self) -> str:
        """What its cell shows: the word, except an absent cell, which is empty."""
        return "" if self.word == ABSENT else self.word


_TABLE = (
    Word(
        PASS,
        "pass",
        report=Colours(background="#dff5df"),
        history=Colours(background="#66bb6a", color="#fff"),
        dot="#43a047",
        terminal=("green",),
        legend="the policy held",
    ),
    Word(
        FAIL,
        "fail",
        report=Colours(background="#f8d0d0", bold=True),
        history=Colours(background="#e53935", color="#fff", bold=True),
        dot="#e53935",
        terminal=("red", "bold"),
        legend="the policy's assertion failed",
    ),
    Word(
        KNOWN_GAP,
        "known-gap",
        report=Colours(background="#fff2c2"),
        history=Colours(background="#ffca28", color="#000"),
        dot="#f9a825",
        terminal=("yellow",),
        legend="failed as the catalog expects: a known upstream gap on this release",
    ),
    Word(
        GAP_CLOSED,
        "gap-closed",
        report=Colours(background="#f8d0d0", bold=True),
        history=Colours(background="#8e24aa", color="#fff", bold=True),
        dot="#8e24aa",
        terminal=("purple", "bold"),
        legend="a known gap that now holds: the catalog is out of date",
    ),
    Word(
        NOT_APPLICABLE,
        "not-applicable",
        report=Colours(color="#888"),
        history=Colours(background="#e0e0e0", color="#666"),
        dot="",
        terminal=("light",),
        legend="the catalog's version ranges leave this release out",
    ),
    Word(
        SKIPPED,
        "skipped",
        report=Colours(background="#fff2c2"),
        history=Colours(background="#b0bec5", color="#263238"),
        dot="",
        terminal=("cyan",),
        legend="not run, for a reason of the harness or cluster, not the catalog",
    ),
    Word(
        ERROR,
        "error",
        report=Colours(background="#f8d0d0", bold=True),
        history=Colours(background="#212121", color="#ffab40", bold=True),
        dot="#212121",
        terminal=("red", "bold", "invert"),
        legend="no verdict: the stack broke, or the harness could not do its part",
    ),
)
# Result word -> its entry, in model.RESULTS order (the order of legends and totals).
WORDS: dict[str, Word] = {entry.word: entry for entry in _TABLE}
ABSENT_WORD = Word(
    ABSENT,
    "absent",
    # conformance.html's empty cell: grey, like not-applicable, with nothing in it.
    report=Colours(color="#888"),
    history=Colours(
        background="repeating-linear-gradient(45deg,#fff 0 4px,#eee 4px 8px)", color="#999"
    ),
    dot="",
    terminal=(),
    legend="this run has no result for the policy",
)


def lookup(word: str) -> Word:
    """The entry of a result word or ABSENT; KeyError for anything else."""
    return ABSENT_WORD if word == ABSENT else WORDS[word]


def every_word() -> tuple[Word, ...]:
    """The result words, then ABSENT: what a page's legend and styles cover."""
    return (*WORDS.values(), ABSENT_WORD)
