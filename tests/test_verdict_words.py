"""The word a test's failure gets: FAIL only when the policy's assertion fails."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.plugin.verdicts import judge
from trainjob_conformance.report.model import ERROR, FAIL


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
