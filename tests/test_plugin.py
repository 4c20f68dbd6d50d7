"""The plugin's verdicts, on a stand-in cluster handle (no cluster is involved)."""

import signal

import pytest

from trainjob_conformance.kube.waits import wait_for
from trainjob_conformance.lifecycle.interrupts import process_exiting

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
  layer: "controller reconcile: JobSet"
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
def run(pytester, monkeypatch):
    # A wide terminal, as on CI: pytest truncates summary lines to the width,
    # which would hide what the assertions below look for.
    monkeypatch.setenv("COLUMNS", "400")

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
    # The gap's layer is the catalog's (the reason names no responder), and counted.
    result.stdout.fnmatch_lines(
        ["*layer: controller reconcile: JobSet", "by layer: controller reconcile 1, harness 1"]
    )


def test_known_gap_that_now_holds_fails_the_run_by_name(run):
    result = run(
        """
import pytest
@pytest.mark.policy("TJ-X-001")
def test_it(trainjob_policy):
    trainjob_policy.gap_exercised("the Pods carried the gate before the edit")
    with trainjob_policy.holds():
        assert True
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*GAP CLOSED: TJ-X-001 now holds on Trainer v2.2.1*", "*GAP-CLOSED*"]
    )


def test_known_gap_is_not_closed_unless_its_mechanism_was_exercised(run):
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
    result.stdout.fnmatch_lines(["*TJ-X-001*FAIL*"])
    assert "never showed the gap's mechanism at work" in result.stdout.str()
    assert "GAP-CLOSED" not in result.stdout.str()


def test_known_gap_policy_without_holds_is_an_error_not_a_pass(run):
    """The catalog marks the test (no reading of its source); having passed without
    entering holds(), it is an ERROR on every release, the gap's and the others."""
    source = """
import pytest
@pytest.mark.policy("TJ-X-001")
def test_it(trainjob_policy, request):
    assert request.node.get_closest_marker("known_gap") is not None
"""
    for version in ("v2.2.1", "v2.4.0"):
        result = run(source, version=version)
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(
            ["*TJ-X-001*ERROR*", "*TJ-X-001 names a known gap*never entered*holds()*"]
        )


def test_a_broken_stack_is_an_error_not_a_failure(run):
    result = run(
        """
import pytest
from trainjob_conformance.cluster.health.stack_watch import Breakage, StackBroken
@pytest.mark.policy("TJ-X-002")
def test_it():
    raise StackBroken([Breakage("trainer manager", "killed by SIGKILL", "last log line")])
""",
        version="v2.4.0",
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*TJ-X-002*ERROR*", "*the stack broke: trainer manager killed by SIGKILL*"]
    )
    assert " FAIL " not in result.stdout.str()


def test_a_failure_while_the_health_file_reports_a_breakage_is_an_error(run, tmp_path):
    health = tmp_path / "stack-health.json"
    health.write_text(
        '[{"component": "jobset manager", "state": "exited with code 1", "log_tail": "x"}]'
    )
    result = run(
        f"""
import pytest
@pytest.mark.policy("TJ-X-002")
def test_it(trainjob_cluster):
    trainjob_cluster.health_file = __import__("pathlib").Path({str(health)!r})
    assert False, "timed out waiting for the JobSet"
""",
        version="v2.4.0",
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*the stack broke: jobset manager exited with code 1*"])


def test_a_refusal_is_reported_in_the_clusters_words(run):
    result = run(
        """
import pytest
from trainjob_conformance.kube.errors import Rejected
@pytest.mark.policy("TJ-X-002")
def test_it():
    raise Rejected(403, "Forbidden", 'admission webhook "v" denied the request: no')
""",
        version="v2.4.0",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TJ-X-002*FAIL*"])
    summary = result.stdout.str().split("TrainJob conformance")[-1]
    assert "kube.errors" not in summary
    assert (
        'FAILED test_a_refusal_is_reported_in_the_clusters_words.py::test_it - admission webhook "v" denied the request: no'
        in summary
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
@pytest.mark.policy("TJ-X-002")
def test_it():
    pytest.skip("no second cluster here")
""",
        version="v2.4.0",
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*TJ-X-002*skipped*"])


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


def test_an_unknown_policy_selected_is_one_line_before_any_worker_starts(pytester):
    pytester.makefile(".yaml", policies=CATALOG)
    pytester.makeconftest(CONFTEST.replace("{version}", "v2.2.1"))
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest(
        "--trainjob-catalog=policies.yaml", "--trainjob-policy=KQ-MK-004", "-n", "2"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--trainjob-policy KQ-MK-004: not in the catalog*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def refusing_kubeconfig(tmp_path):
    kubeconfig = tmp_path / "refusing.yaml"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: x}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    return kubeconfig


def test_a_cluster_that_does_not_start_is_one_line_per_error(pytester, tmp_path):
    # The plugin's own cluster fixture, on a kubeconfig whose API server refuses.
    kubeconfig = refusing_kubeconfig(tmp_path)
    pytester.makefile(".yaml", policies=CATALOG)
    pytester.makepyfile(
        """
import pytest
@pytest.mark.policy("TJ-X-002")
def test_it(trainjob_cluster):
    pass
"""
    )
    result = pytester.runpytest(
        "--trainjob-catalog=policies.yaml", "--trainjob-cluster=existing",
        f"--trainjob-kubeconfig={kubeconfig}", "-p", "no:cacheprovider",
    )  # fmt: skip
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["the cluster did not start: cannot reach the API server of *"])
    assert "During handling" not in result.stdout.str()


def test_under_xdist_the_controllers_start_failure_reaches_every_test(pytester, tmp_path):
    # The controller starts the cluster once a worker has collected and hands the
    # outcome over in a file (plugin/session.py); here, why it could not start.
    kubeconfig = refusing_kubeconfig(tmp_path)
    pytester.makefile(".yaml", policies=CATALOG)
    pytester.mkdir("e2e")
    pytester.path.joinpath("e2e", "test_two.py").write_text(
        """
import pytest
@pytest.mark.policy("TJ-X-002")
def test_one(trainjob_cluster):
    pass
@pytest.mark.policy("TJ-X-002")
def test_two(trainjob_cluster):
    pass
"""
    )
    result = pytester.runpytest_subprocess(
        "e2e", "-n", "2", "--trainjob-catalog=policies.yaml", "--trainjob-cluster=existing",
        f"--trainjob-kubeconfig={kubeconfig}", f"--trainjob-run-dir={tmp_path / 'run'}",
        "-p", "no:cacheprovider",
    )  # fmt: skip
    result.assert_outcomes(errors=2)
    lines = [line for line in result.outlines if "the cluster did not start: cannot reach" in line]
    assert len(lines) >= 2, result.stdout.str()


def test_under_xdist_an_empty_selection_starts_no_cluster(pytester, tmp_path):
    kubeconfig = refusing_kubeconfig(tmp_path)
    pytester.makefile(".yaml", policies=CATALOG)
    pytester.mkdir("e2e")
    pytester.path.joinpath("e2e", "test_one.py").write_text(
        "def test_one(trainjob_cluster):\n    pass\n"
    )
    result = pytester.runpytest_subprocess(
        "e2e", "-n", "2", "-k", "nothing_matches", "--trainjob-catalog=policies.yaml",
        "--trainjob-cluster=existing", f"--trainjob-kubeconfig={kubeconfig}",
        f"--trainjob-run-dir={tmp_path / 'run'}", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout.str()
    # The controller writes the hand-over whenever it tried to start the cluster.
    assert not (tmp_path / "run" / "cluster-handover.json").exists()


def test_a_worker_outliving_its_killed_controller_leaves_without_a_traceback(pytester, tmp_path):
    # The controller killed by SIGKILL: its workers see its pipes close a moment
    # before the kernel's SIGTERM reaches them. A worker that gets there first
    # (here: one that ignores SIGTERM) used to end its session by reporting to
    # the dead controller, printing xdist's "cannot send (already closed?)".
    kubeconfig = refusing_kubeconfig(tmp_path)
    pid_file = tmp_path / "worker.pid"
    pytester.makefile(".yaml", policies=CATALOG)
    pytester.makeconftest(
        f"""
import os, signal
def pytest_collection_finish(session):
    if getattr(session.config, "workerinput", {{}}).get("workerid") == "gw0":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        os.kill(os.getppid(), signal.SIGKILL)
"""
    )
    pytester.mkdir("e2e")
    pytester.path.joinpath("e2e", "test_one.py").write_text(
        "def test_one():\n    pass\ndef test_two():\n    pass\n"
    )
    result = pytester.runpytest_subprocess(
        "e2e", "-n", "2", "--trainjob-catalog=policies.yaml", "--trainjob-cluster=existing",
        f"--trainjob-kubeconfig={kubeconfig}", f"--trainjob-run-dir={tmp_path / 'run'}",
        "-p", "no:cacheprovider",
    )  # fmt: skip
    assert result.ret == -signal.SIGKILL
    worker = int(pid_file.read_text())
    wait_for("the worker to exit", lambda: process_exiting(worker), timeout=30)
    # Read again: the worker wrote to the same file after the controller died.
    printed = (pytester.path / "stdout").read_text() + (pytester.path / "stderr").read_text()
    assert "cannot send" not in printed, printed


ONE_POLICY_TESTED = """
import pytest
@pytest.mark.policy("TJ-X-001")
def test_it(trainjob_policy):
    with trainjob_policy.holds():
        assert True
"""


@pytest.fixture
def guarded(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    pytester.makefile(".yaml", policies=CATALOG)
    pytester.makeconftest(CONFTEST.replace("{version}", "v2.3.0"))
    pytester.makepyfile(ONE_POLICY_TESTED)

    def go(*args):
        return pytester.runpytest(
            "--trainjob-catalog=policies.yaml", "-p", "no:cacheprovider", *args
        )

    return go


def test_a_run_that_lost_a_policy_is_an_error_naming_it(guarded):
    result = guarded()

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*TJ-X-002*ERROR*",
            "*expected-run guard: 1 of the catalog's policies ran no test: TJ-X-002 (ERROR)",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_run_asked_for_one_policy_expects_only_that_one(guarded):
    result = guarded("--trainjob-policy=TJ-X-001")

    assert result.ret == pytest.ExitCode.OK
    assert "expected-run guard" not in result.stdout.str()


def test_a_selection_by_name_turns_the_guard_off_and_says_so(guarded):
    result = guarded("-k", "test_it")

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*expected-run guard off: -k 'test_it' selects tests*"])


def test_a_run_of_a_packs_directory_alone_expects_only_the_packs_policies(tmp_path):
    from trainjob_conformance.plugin.expected_run import project_tests_given

    tests = tmp_path / "suite" / "e2e"
    tests.mkdir(parents=True)
    pack = tmp_path / "my-pack"
    pack.mkdir()

    assert project_tests_given([], tests)
    assert project_tests_given([str(tests)], tests)
    assert project_tests_given([str(tmp_path / "suite"), "-k", "x"], tests)
    assert project_tests_given([f"{tests}/test_a.py::test_b"], tests) is False
    assert not project_tests_given([str(pack)], tests)


def test_after_a_stack_check_fails_the_tests_not_yet_started_are_skipped_with_its_words(
    pytester, monkeypatch, tmp_path
):
    monkeypatch.setenv("COLUMNS", "400")
    catalog = (
        CATALOG + 'TJ-X-003:\n  title: t\n  statement: s\n  source: src\n  trainer: ">=2.0.0"\n'
    )
    pytester.makefile(".yaml", policies=catalog)
    pytester.makeconftest(CONFTEST.replace("{version}", "v2.4.0"))
    pytester.makepyfile(
        """
import pytest
@pytest.mark.policy("TJ-X-003")
def test_another_policy(trainjob_policy):
    with trainjob_policy.holds():
        pass
@pytest.mark.policy("TJ-X-002")
def test_the_stack_check(trainjob_policy):
    with trainjob_policy.holds():
        assert False, "the TrainJob was never admitted"
"""
    )
    result = pytester.runpytest(
        "--trainjob-catalog=policies.yaml",
        f"--trainjob-run-dir={tmp_path / 'run'}",
        "--trainjob-stop-after-failure-of=TJ-X-002",
        "-p",
        "no:cacheprovider",
        "-ra",
        "-v",
    )
    result.assert_outcomes(failed=1, skipped=1)
    # The stack check ran first, though collected second.
    result.stdout.fnmatch_lines(["*test_the_stack_check FAILED*", "*test_another_policy SKIPPED*"])
    result.stdout.fnmatch_lines(
        ["*not run: the stack check TJ-X-002 FAIL: *the TrainJob was never admitted*"]
    )
