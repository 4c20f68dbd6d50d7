"""The scheduling of `matrix --jobs N`, with fake children the test finishes by hand."""

from __future__ import annotations

import _thread
import io
import signal
import threading

import pytest

from tests.interrupts import python_ctrl_c
from trainjob_conformance.fanout import FanOut, Outcome, Task, worst
from trainjob_conformance.lifecycle.interrupts import Terminated

BOUND = 10  # seconds: every wait here is bounded


class FakeChild:
    """A child that runs until the test (or a signal it was sent) ends it."""

    def __init__(self, name: str, board: Board) -> None:
        self.name = name
        self.board = board
        self.signals: list[int] = []
        self._code: int | None = None
        self._done = threading.Event()

    def end(self, code: int) -> None:
        self._code = code
        self._done.set()

    def wait(self) -> int:
        assert self._done.wait(BOUND), f"{self.name} was never ended"
        with self.board.lock:
            self.board.running.discard(self.name)
        assert self._code is not None
        return self._code

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)
        if self.board.obey_signals:
            self.end(128 + sig)


class Board:
    """What the fake children saw: who started, the most that ran at once."""

    def __init__(self, obey_signals: bool = True) -> None:
        self.lock = threading.Lock()
        self.obey_signals = obey_signals
        self.children: dict[str, FakeChild] = {}
        self.started: list[str] = []
        self.running: set[str] = set()
        self.most_at_once = 0
        self.on_start: dict[str, object] = {}
        self.start_event = threading.Condition(self.lock)

    def task(self, name: str) -> Task:
        def start() -> FakeChild:
            child = FakeChild(name, self)
            with self.lock:
                self.children[name] = child
                self.started.append(name)
                self.running.add(name)
                self.most_at_once = max(self.most_at_once, len(self.running))
                self.start_event.notify_all()
            return child

        return Task(name, start)

    def wait_started(self, name: str) -> FakeChild:
        with self.lock:
            assert self.start_event.wait_for(lambda: name in self.children, BOUND), (
                f"{name} never started; started: {self.started}"
            )
            return self.children[name]


class Progress(io.StringIO):
    """The progress stream, which a test can wait on for a line to be said."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def write(self, text: str) -> int:
        with self.changed:
            written = super().write(text)
            self.changed.notify_all()
        return written

    def wait_for(self, expected: str) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: expected in self.getvalue(), BOUND), (
                f"never said {expected!r}; said:\n{self.getvalue()}"
            )


def run_in_thread(fanout: FanOut) -> tuple[threading.Thread, dict[str, object]]:
    result: dict[str, object] = {}

    def target() -> None:
        try:
            result["outcomes"] = fanout.run()
        except BaseException as error:
            result["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, result


@pytest.mark.parametrize(("jobs", "most"), [(1, 1), (2, 2), (3, 3), (5, 3)])
def test_at_most_jobs_children_run_at_once(jobs: int, most: int) -> None:
    board = Board()
    names = ["latest", "trainer-2.2", "trainer-2.1"]
    fanout = FanOut([board.task(n) for n in names], jobs, progress=io.StringIO())
    thread, result = run_in_thread(fanout)

    for ended in range(len(names)):
        # The fan-out fills every free slot before it waits for a child.
        expected = min(jobs, len(names) - ended)
        with board.lock:
            assert board.start_event.wait_for(
                lambda e=ended, x=expected: len(board.started) - e == x, BOUND
            ), f"expected {expected} running, started {board.started} with {ended} ended"
        board.children[board.started[ended]].end(0)
    thread.join(BOUND)

    assert not thread.is_alive()
    assert board.started == names  # in the order given
    assert board.most_at_once == most
    assert sorted(o.name for o in result["outcomes"]) == sorted(names)


def test_a_slot_is_refilled_as_soon_as_a_child_ends() -> None:
    board = Board()
    progress = Progress()
    fanout = FanOut([board.task(n) for n in "abc"], 2, progress=progress)
    thread, result = run_in_thread(fanout)

    board.wait_started("a")
    board.wait_started("b")
    assert "c" not in board.started
    board.children["b"].end(1)
    board.wait_started("c")  # b's slot, while a still runs
    assert "a" in board.running
    board.children["c"].end(0)
    progress.wait_for("profile c: finished")
    board.children["a"].end(0)
    thread.join(BOUND)

    assert [o.name for o in result["outcomes"]] == ["b", "c", "a"]


def test_the_exit_code_is_the_worst_childs_after_mapping() -> None:
    board = Board()
    progress = io.StringIO()
    fanout = FanOut(
        [board.task(n) for n in ("ok", "failed", "interrupted")],
        3,
        progress=progress,
        exit_code=lambda code: {2: 130}.get(code, code),
    )
    thread, result = run_in_thread(fanout)
    for name, code in (("ok", 0), ("failed", 1), ("interrupted", 2)):
        board.wait_started(name).end(code)
    thread.join(BOUND)

    assert worst(result["outcomes"]) == 130
    assert worst([Outcome("a", 0, 1.0), Outcome("b", 1, 1.0)]) == 1
    assert worst([]) == 0
    lines = progress.getvalue().splitlines()
    assert "[trainjob-conformance] profile failed: started" in lines
    assert any(
        line.startswith("[trainjob-conformance] profile failed: finished, exit 1 in ")
        for line in lines
    )
    assert any("profile interrupted: finished, exit 130" in line for line in lines)


def interrupt_once_started(board: Board, fanout: FanOut, signum: int) -> dict[str, object]:
    """Run the fan-out on this (main) thread and deliver `signum` to it as a signal would."""
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(Terminated(s)))

    def deliver() -> None:
        board.wait_started("a")
        board.wait_started("b")
        _thread.interrupt_main(signum)

    result: dict[str, object] = {}
    # Without Python's own SIGINT handler, interrupt_main() would deliver nothing.
    with python_ctrl_c():
        threading.Thread(target=deliver, daemon=True).start()
        try:
            result["outcomes"] = fanout.run()
        except KeyboardInterrupt as error:
            result["error"] = error
        finally:
            signal.signal(signal.SIGTERM, previous)
    return result


def test_sigterm_stops_every_running_child_and_starts_no_more() -> None:
    board = Board()
    progress = io.StringIO()
    fanout = FanOut([board.task(n) for n in "abc"], 2, progress=progress)

    result = interrupt_once_started(board, fanout, signal.SIGTERM)

    assert isinstance(result["error"], Terminated)
    assert board.started == ["a", "b"]  # c never started
    assert board.children["a"].signals == [signal.SIGTERM]
    assert board.children["b"].signals == [signal.SIGTERM]
    assert not board.running  # every child was waited for before the interruption was raised
    assert "interrupted: not starting c" in progress.getvalue()


def test_ctrl_c_waits_for_the_children_it_reached_without_signalling_them_again() -> None:
    # A terminal's Ctrl-C reaches the whole process group: the children got it
    # themselves, and a second SIGINT from here would cut their cleanup short.
    board = Board(obey_signals=False)
    progress = Progress()
    fanout = FanOut([board.task(n) for n in "abc"], 2, progress=progress)

    def children_stop_on_their_own() -> None:
        # Only once the fan-out says it is waiting for them, so it is seen to wait.
        progress.wait_for("waiting for a, b to stop their clusters")
        board.children["a"].end(2)
        board.children["b"].end(2)

    helper = threading.Thread(target=children_stop_on_their_own, daemon=True)
    helper.start()
    result = interrupt_once_started(board, fanout, signal.SIGINT)
    helper.join(BOUND)

    assert type(result["error"]) is KeyboardInterrupt
    assert board.started == ["a", "b"]
    assert board.children["a"].signals == []
    assert board.children["b"].signals == []
    assert not board.running


def test_zero_jobs_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FanOut([], 0)
