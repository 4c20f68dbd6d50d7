"""The steps of a start that run side by side: a failure stops the rest, promptly."""

from __future__ import annotations

import threading
import time

import pytest

from trainjob_conformance.cluster.embedded.tasks import Aborted, TaskGroup


def test_a_failing_step_stops_the_others_and_its_error_is_the_one_raised() -> None:
    group = TaskGroup()
    never = threading.Event()
    gave_up = threading.Event()

    def waits_forever() -> None:
        try:
            group.wait_event(never)
        except Aborted:
            gave_up.set()
            raise

    def fails() -> None:
        time.sleep(0.05)
        raise RuntimeError("the trainer manager exited with code 1")

    group.start("waiter", waits_forever)
    group.start("failer", fails)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="exited with code 1"):
        group.join()
    assert time.monotonic() - started < 2
    assert gave_up.wait(2), "the waiting step did not give up"


def test_steps_that_succeed_are_all_waited_for() -> None:
    group = TaskGroup()
    done = []
    signal = threading.Event()
    group.start("second", lambda: (group.wait_event(signal), done.append("second")))
    group.start("first", lambda: (done.append("first"), signal.set()))
    group.join()
    assert done == ["first", "second"]


def test_a_stopped_group_makes_its_waits_give_up() -> None:
    group = TaskGroup()
    group.start("waiter", lambda: group.wait_event(threading.Event()))
    group.stop()
    with pytest.raises(Aborted):
        group.join()
    with pytest.raises(Aborted):
        group.check()
