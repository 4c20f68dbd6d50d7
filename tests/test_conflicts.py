import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.conflicts import until_no_conflict
from trainjob_conformance.kube.errors import Conflict, Rejected

STALE = "the object has been modified; please apply your changes to the latest version"


def writes(outcomes: list[Exception | None]):
    """A write that meets each outcome in turn: an error raised, or None for stored."""
    calls = []

    def write() -> int:
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if outcome is not None:
            raise outcome
        return len(calls)

    return write, calls


def test_a_write_is_sent_again_after_a_conflict_until_it_is_stored() -> None:
    write, calls = writes([Conflict(409, "Conflict", STALE), None])

    assert until_no_conflict(write, "TrainJob own") == 2
    assert len(calls) == 2


def test_conflicts_each_time_are_the_harness_error_naming_the_object() -> None:
    write, calls = writes([Conflict(409, "Conflict", STALE)] * 5)

    with pytest.raises(
        ConformanceError, match=f"TrainJob own changed under each of 5 writes: {STALE}"
    ):
        until_no_conflict(write, "TrainJob own")
    assert len(calls) == 5


def test_a_refusal_is_not_retried() -> None:
    write, calls = writes([Rejected(403, "Forbidden", "denied"), None])

    with pytest.raises(Rejected):
        until_no_conflict(write, "TrainJob own")
    assert len(calls) == 1
