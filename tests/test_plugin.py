"""The plugin's verdicts, on a stand-in cluster handle (no cluster is involved)."""

import pytest

CATALOG = """
TJ-X-001:
  title: t
  statement: s
  source: src
  trainer: ">=2.0.0"
  expectations:
    - trainer: "<2.3.0"
      outcome: known-gap
      reference: upstream issue 123
TJ-X-002:
  title: t
  statement: s
  source: src
  trainer: ">=2.4.0"
"""

CONFTEST = """
import pytest
from pathlib import Path
from trainjob_conformance.cluster.handle import ClusterHandle

@pytest.fixture(scope="session")
def trainjob_cluster():
    return ClusterHandle(provider="stand-in", kubeconfig=Path("/nonexistent"),
                         versions={"trainer": "{version}"})
"""


@pytest.fixture
def run(pytester):
    def go(test_source, version="v2.2.1"):
        pytester.makefile(".yaml", policies=CATALOG)
        pytester.makeconftest(CONFTEST.replace("{version}", version))
        pytester.makepyfile(test_source)
        return pytester.runpytest(
            "--trainjob-catalog=policies.yaml", "-p", "no:cacheprovider", "-ra"
        )

    return go


def test_known_gap_failing_inside_holds_is_reported_as_the_gap(run):
    result = run(
        """
import pytest
@pytest.mark.policy("TJ-X-001")
def test_it(trainjob_policy):
    with trainjob_policy.holds():
        assert False, "still broken"
"""
    )
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*TJ-X-001*known-gap*"])
    assert (
        "KNOWN UPSTREAM GAP TJ-X-001 on Trainer v2.2.1: upstream issue 123" in result.stdout.str()
    )


def test_known_gap_that_now_holds_fails_the_run_by_name(run):
    result = run(
        """
import pytest
@pytest.mark.policy("TJ-X-001")
def test_it(trainjob_policy):
    with trainjob_policy.holds():
        assert True
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*GAP CLOSED: TJ-X-001 now holds on Trainer v2.2.1*", "*GAP-CLOSED*"]
    )


def test_failure_outside_holds_is_not_excused_as_the_gap(run):
    result = run(
        """
import pytest
@pytest.mark.policy("TJ-X-001")
def test_it(trainjob_policy):
    assert False, "setup broke"
    with trainjob_policy.holds():
        pass
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TJ-X-001*FAIL*"])


def test_same_test_passes_where_the_policy_holds(run):
    result = run(
        """
import pytest
@pytest.mark.policy("TJ-X-001")
def test_it(trainjob_policy):
    with trainjob_policy.holds():
        assert True
""",
        version="v2.3.0",
    )
    result.assert_outcomes(passed=1)


def test_policy_for_later_releases_is_not_applicable(run):
    result = run(
        """
import pytest
@pytest.mark.policy("TJ-X-002")
def test_it():
    raise AssertionError("must not run")
"""
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*TJ-X-002*not-applicable*"])


def test_a_skip_outside_the_catalog_is_reported_as_not_run(run):
    result = run(
        """
import pytest
@pytest.mark.policy("TJ-X-001")
def test_it():
    pytest.skip("no second cluster here")
""",
        version="v2.4.0",
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*TJ-X-001*skipped*"])


def test_unknown_policy_id_stops_collection(run):
    result = run(
        """
import pytest
@pytest.mark.policy("TJ-NOPE-001")
def test_it():
    pass
"""
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*policy 'TJ-NOPE-001' is not in the catalog*"])
