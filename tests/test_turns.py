import multiprocessing
from pathlib import Path

import pytest

from trainjob_conformance.kube.waits import WaitTimeout
from trainjob_conformance.lifecycle.turns import one_at_a_time


def _hold(lock_file: str, held: multiprocessing.Event, release: multiprocessing.Event) -> None:
    with one_at_a_time(Path(lock_file), "the other process", timeout=5):
        held.set()
        release.wait(10)


def test_a_turn_held_by_another_process_is_waited_for_and_bounded(tmp_path: Path) -> None:
    lock_file = tmp_path / "turns" / "tas.lock"
    held, release = multiprocessing.Event(), multiprocessing.Event()
    other = multiprocessing.Process(target=_hold, args=(str(lock_file), held, release))
    other.start()
    try:
        assert held.wait(10)
        with (
            pytest.raises(WaitTimeout, match="the turn of a TAS test"),
            one_at_a_time(lock_file, "a TAS test", timeout=0.5),
        ):
            pass
        release.set()
        other.join(10)
        with one_at_a_time(lock_file, "a TAS test", timeout=5):
            entered = True
        assert entered
    finally:
        release.set()
        other.join(10)
