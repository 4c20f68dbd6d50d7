"""The word a test's failure gets (FAIL only when the policy's assertion fails), and
the one table of words every output shows them from."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from tests.history_pages import Page
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.plugin.results import PolicyResults
from trainjob_conformance.plugin.verdicts import judge
from trainjob_conformance.report.history import write_history
from trainjob_conformance.report.history_grid import TIMED
from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    RESULTS,
    SEVERITY,
    PolicyResult,
    RunReport,
)
from trainjob_conformance.report.render import html_page, markdown
from trainjob_conformance.report.words import ABSENT, ABSENT_WORD, WORDS, every_word, lookup


def raised(error: BaseException) -> pytest.ExceptionInfo[BaseException]:
    with pytest.raises(type(error)) as info:
        raise error
    return info


def failed_report(when: str) -> SimpleNamespace:
    return SimpleNamespace(passed=False, skipped=False, failed=True, when=when, longrepr="")


@pytest.mark.parametrize("when", ["setup", "call"])
def test_a_harness_error_is_an_error_not_a_failed_policy(when):
    error = raised(ConformanceError("unknown profile ''; choose one of: latest"))
    word, reason, _ = judge(failed_report(when), error, None, None)
    assert (word, reason) == (ERROR, "unknown profile ''; choose one of: latest")


def test_the_policys_assertion_is_a_failure():
    error = raised(AssertionError("TrainJob second was unsuspended"))
    word, reason, _ = judge(failed_report("call"), error, None, None)
    assert (word, reason) == (FAIL, "TrainJob second was unsuspended")


# The one table of result words (report/words.py) and the outputs that read it.


def test_every_result_word_has_one_entry_in_the_table():
    assert tuple(WORDS) == RESULTS  # every word, nothing else, in model.RESULTS order
    assert all(WORDS[word].word == word for word in RESULTS)
    assert ABSENT not in RESULTS and lookup(ABSENT) is ABSENT_WORD
    entries = every_word()
    assert len({entry.css for entry in entries}) == len(entries)
    assert all(entry.legend for entry in entries)
    # The severity order is model.SEVERITY's, read from it rather than copied.
    assert sorted(RESULTS, key=lambda word: WORDS[word].severity) == list(SEVERITY)
    assert ABSENT_WORD.severity is None
    # Each word's colours differ from every other word's on the history page.
    assert len({entry.history for entry in entries}) == len(entries)
    # A timed result is drawn as a dot on the trend, so it needs the dot's colour.
    assert all(WORDS[word].dot for word in TIMED)


def test_terminal_markup_is_what_the_terminal_writer_knows():
    from _pytest._io.terminalwriter import TerminalWriter

    writer = TerminalWriter(io.StringIO())
    writer.hasmarkup = True
    for entry in every_word():
        writer.markup(entry.word, **entry.markup)  # raises on an unknown flag
    assert WORDS[FAIL].markup == {"red": True, "bold": True}


class FakeTerminal:
    """What pytest_terminal_summary writes, as lines of (text, markup) pieces."""

    def __init__(self) -> None:
        self.lines: list[list[tuple[str, dict[str, bool]]]] = [[]]

    def section(self, title: str, **markup: bool) -> None:
        self.write_line(f"== {title} ==")

    def ensure_newline(self) -> None:
        if self.lines[-1]:
            self.lines.append([])

    def write(self, text: str, **markup: bool) -> None:
        self.lines[-1].append((text, markup))

    def line(self, text: str, **markup: bool) -> None:
        self.write(text, **markup)
        self.lines.append([])

    def write_line(self, text: str, **markup: bool) -> None:
        self.ensure_newline()
        self.line(text, **markup)

    def text(self) -> list[str]:
        return ["".join(piece for piece, _ in line) for line in self.lines if line]


def _sample(word: str) -> PolicyResult:
    return PolicyResult(
        policy="TJ-A", title="title", result=word, seconds=1.0, test="t.py::a", reason="why"
    )


def _terminal_summary(rows: list[PolicyResult]) -> FakeTerminal:
    session = SimpleNamespace(start_error=None, handle=None, startup_seconds=None)
    settings = SimpleNamespace(report_dir=None, profile="latest")
    results = PolicyResults(None, settings, dict, session)  # type: ignore[arg-type]
    results.rows = rows
    terminal = FakeTerminal()
    results.pytest_terminal_summary(terminal)
    return terminal


@pytest.mark.parametrize("word", RESULTS)
def test_every_output_shows_the_tables_word(word, tmp_path):
    entry = WORDS[word]
    report = RunReport("latest", "embedded", {}, "2026-11-20T02:00:00Z", 1.0, 1.0, [_sample(word)])

    assert f"| TJ-A | title | {entry.word} |" in markdown([report])
    assert f"<td class='{entry.css}'>{entry.word}</td>" in html_page([report])

    report.write(tmp_path / "night")
    page = Page(write_history([tmp_path / "night"], tmp_path / "h.html")[0].read_text())
    assert (page.cell(0, 0)["text"], page.css(0, 0)) == (entry.word, entry.css)

    terminal = _terminal_summary([_sample(word)])
    (row,) = [line for line in terminal.lines if line and line[0][0].startswith("TJ-A")]
    assert row[1] == (entry.word, entry.markup)
    assert terminal.text()[1] == f"TJ-A{' ' * 11}{entry.word:15}     1.0s  t.py::a"
