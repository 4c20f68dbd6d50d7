"""The helpers that judge a request the policy says must be refused."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.errors import Rejected
from trainjob_conformance.policies.admission import (
    accepted_within,
    lasting_rejection,
    rejection_of,
)


def _answers(*answers: Rejected | None):
    """A request answered in turn: a Rejected is raised, None is an acceptance."""
    queue = list(answers)
    sent: list[int] = []

    def request() -> None:
        sent.append(1)
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if answer is not None:
            raise answer

    return request, sent


def test_rejection_of_fails_when_the_request_is_accepted():
    request, _ = _answers(None)
    with pytest.raises(AssertionError, match="the request was accepted"):
        rejection_of(request)


def test_a_lasting_rejection_is_refused_every_time_for_the_whole_bound():
    refusal = Rejected(403, "Forbidden", "still active")
    request, sent = _answers(refusal)

    assert lasting_rejection(request, seconds=0.3, why="a cache lags") is refusal
    assert len(sent) > 1, "the request was sent only once"


def test_an_acceptance_after_refusals_fails_and_names_the_refusals():
    # A lagging cache refuses first; the policy does not hold once it catches up.
    lag = Rejected(403, "Forbidden", "the JobSet has active Jobs")
    request, _ = _answers(lag, lag, None)

    with pytest.raises(AssertionError) as failed:
        lasting_rejection(request, seconds=5, why="the cache may lag")

    message = str(failed.value)
    assert message.startswith("the request was accepted, but the policy says it must be rejected")
    assert "after 2 refusals while the cache may lag: the JobSet has active Jobs" in message


def test_an_acceptance_at_once_fails_like_rejection_of():
    request, _ = _answers(None)
    with pytest.raises(AssertionError, match=r"^the request was accepted, but .* rejected$"):
        lasting_rejection(request, seconds=5, why="the cache may lag")


def test_a_request_refused_while_a_cache_lags_is_accepted_once_it_catches_up():
    lag = Rejected(403, "Forbidden", "the JobSet is still active")
    request, sent = _answers(lag, lag, None)

    assert accepted_within(request, seconds=5, why="the cache has caught up") is None
    assert len(sent) == 3


def test_a_request_refused_for_the_whole_bound_fails_with_the_refusal():
    refusal = Rejected(403, "Forbidden", "the JobSet is still active")
    request, _ = _answers(refusal)

    with pytest.raises(AssertionError) as failed:
        accepted_within(request, seconds=0.3, why="the cache has caught up")

    message = str(failed.value)
    assert message.startswith("the request was refused for 0.3 s (")
    assert message.endswith(
        "but the policy says it must be accepted once the cache has caught up: "
        "the JobSet is still active"
    )
