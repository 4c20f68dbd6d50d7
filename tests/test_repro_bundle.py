"""Reproduction bundles written from records of real runs (tests/records/, profile latest).

The records are files a run wrote; nothing here talks to a cluster or fakes one.
That repro.sh reproduces on a cluster is e2e/test_repro.py's job.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest

from trainjob_conformance.cli.main import main
from trainjob_conformance.cli.repro import policy_test_name
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.errors import Rejected
from trainjob_conformance.kube.record import Recorder
from trainjob_conformance.paths import suite
from trainjob_conformance.policies.catalog import load_catalog
from trainjob_conformance.report.archive import write_archive
from trainjob_conformance.report.repro.bundle import bundle_files, write_bundle
from trainjob_conformance.report.repro.script import CLEANUP_END, PRELUDE
from trainjob_conformance.report.repro.steps import replay_of, repro_namespace

RECORDS = Path(__file__).resolve().parent / "records"


def record(policy: str) -> dict:
    return json.loads((RECORDS / f"{policy}.record.json").read_text())


def bundle(policy: str, changed: dict | None = None) -> dict[str, str]:
    catalog = load_catalog(suite().catalog)
    return bundle_files(changed or record(policy), catalog[policy], suite().templates)


def test_a_bundle_holds_manifests_a_script_a_draft_issue_and_the_stand_in_fix():
    files = bundle("TO-MB-004")

    assert sorted(files) == [
        "README.md",
        "apply-stand-in-fix.sh",
        "manifests/01-create-namespace-repro-to-mb-004.yaml",
        "manifests/02-create-pytorchjob-fixed.yaml",
        "manifests/03-patch-pytorchjob-fixed.json",
        "manifests/04-patch-pytorchjob-fixed.json",
        "record.json",
        "repro.sh",
        "stand-in-fix.yaml",
    ]
    readme = files["README.md"]
    assert readme.startswith('# training-operator v1.9.3: "runPolicy.managedBy is immutable')
    assert "training-operator v1.9.3" in readme and "kubernetes v1.36.3" in readme
    # Expected is the catalog's statement; observed is the cluster's own answer in the run.
    assert "is denied by the training-operator's validating webhook" in readme
    happened = readme.split("## What happens")[1].split("## Expected")[0]
    assert "accepted" in happened
    assert "the cluster stored: spec.runPolicy.managedBy=kueue.x-k8s.io/multikueue" in happened
    assert "pkg/webhooks/pytorch/pytorchjob_webhook.go" in readme
    assert "https://github.com/kubeflow/training-operator/issues" in readme
    assert "kubernetes.io/metadata.name: repro-to-mb-004" in files["stand-in-fix.yaml"]
    # The canary comes last, so that once it answers the fix before it is in effect too.
    assert files["stand-in-fix.yaml"].rstrip().endswith("kubernetes.io/metadata.name: default")
    assert "repro-to-mb-004-stand-in-canary" in files["apply-stand-in-fix.sh"]


def test_the_random_namespace_becomes_a_fixed_one_everywhere_but_the_record():
    original = record("TO-MB-004")["namespace"]
    files = bundle("TO-MB-004")

    assert [name for name, text in files.items() if original in text] == ["record.json"]
    assert "NS=repro-to-mb-004" in files["repro.sh"]


def test_repro_sh_is_valid_bash_with_bounded_waits_and_its_exit_codes(tmp_path):
    files = bundle("TJ-EDIT-008")
    script = tmp_path / "repro.sh"
    script.write_text(files["repro.sh"])

    subprocess.run(["bash", "-n", str(script)], check=True)
    apply = tmp_path / "apply-stand-in-fix.sh"
    apply.write_text(files["apply-stand-in-fix.sh"])
    subprocess.run(["bash", "-n", str(apply)], check=True)
    text = files["repro.sh"]
    assert text.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in text
    assert "trap cleanup EXIT" in text
    for word in ("reproduced()", "not_reproduced()", "setup_error()"):
        assert word in text
    # Every wait is bounded: kubectl wait with --timeout, or a poll with a deadline.
    assert "--timeout=" in text and "deadline=$((SECONDS + TIMEOUT))" in text
    assert "sleep 30" not in text and "sleep 5" not in text


def test_pods_are_found_by_their_owner_label_never_by_a_recorded_name():
    rec = record("TJ-EDIT-008")
    pod_names = [e["name"] for e in rec["entries"] if e["step"] == "request" and e["kind"] == "Pod"]
    files = bundle("TJ-EDIT-008")

    assert len(pod_names) == 2
    for name, text in files.items():
        if name != "record.json":
            assert not any(pod in text for pod in pod_names), name
    script = files["repro.sh"]
    assert "-l jobset.sigs.k8s.io/jobset-name=draining -o name" in script
    # The finalizer the test added is removed again when the script ends.
    assert "$deleteFromPrimitiveList/finalizers" in script


def test_a_request_sent_until_accepted_is_one_retried_step():
    rec = record("TJ-EDIT-008")
    entries = rec["entries"]
    probe = next(i for i, e in enumerate(entries) if e.get("dryRun"))
    refused = copy.deepcopy(entries[probe])
    refused["answer"] = {"ok": False, "status": 422, "message": "must be created before"}
    rec["entries"] = [*entries[:probe], refused, refused, *entries[probe:]]

    steps = [s for s in replay_of(rec).steps if "runtime-probe" in s.title]

    assert len(steps) == 1 and steps[0].retried and steps[0].accepted


def test_the_bundle_ends_at_the_last_observation():
    rec = record("TO-MB-004")
    after = copy.deepcopy(rec["entries"][-1])
    del after["observation"]
    after["body"] = {"spec": {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}}}
    rec["entries"].append(after)

    replay = replay_of(rec)

    assert len(replay.steps) == 4 and replay.steps[-1].observation


def test_a_record_without_an_observation_is_refused_in_one_line():
    rec = record("TO-MB-004")
    for entry in rec["entries"]:
        entry.pop("observation", None)

    with pytest.raises(ConformanceError, match="holds no observation"):
        bundle("TO-MB-004", rec)


def test_the_recorder_keeps_answers_and_marks_the_observation():
    recorder = Recorder()
    where = {"apiVersion": "v1", "kind": "Pod", "namespace": "n", "name": "p"}
    recorder.request("create", where, {"a": 1}, lambda: {"metadata": {"name": "p"}})

    def refused():
        raise Rejected(403, "Forbidden", "denied")

    with recorder.observing(), pytest.raises(Rejected):
        recorder.request("patch", where, {"b": 2}, refused)

    first, second = recorder.entries
    assert first["answer"] == {"ok": True, "object": {"metadata": {"name": "p"}}}
    assert "observation" not in first
    assert second["answer"]["message"] == "denied" and second["observation"] is True


def _archive_with(directory: Path, *records: str) -> Path:
    diagnostics = directory / "diagnostics" / "latest"
    diagnostics.mkdir(parents=True)
    for name in records:
        (diagnostics / f"e2e_t.py_{name}.record.json").write_text(
            (RECORDS / f"{name}.record.json").read_text()
        )
    (directory / "latest.json").write_text("{}")
    return write_archive(directory, "latest", {}, "trainjob-conformance run", {})


def test_repro_writes_the_bundle_from_a_results_archive(tmp_path, capsys):
    archive = _archive_with(tmp_path / "reports", "TO-MB-004")
    out = tmp_path / "bundle"

    code = main(["repro", "TO-MB-004", "--results", str(archive), "--out", str(out)])

    assert code == 0
    assert (out / "repro.sh").stat().st_mode & 0o111
    assert "repro.sh" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["repro", "TJ-NOPE-001"], "TJ-NOPE-001 is not a policy of the catalog; the known gaps"),
        (["repro", "TJ-EDIT-007"], "holds no record of TJ-EDIT-007 for profile latest"),
        (["repro", "TO-MB-004", "--profile", "nightly"], "--profile"),
        (["repro", "UP-KQ-001"], "UP-KQ-001 is judged during an upgrade: name the upgrade"),
        (["repro", "TO-MB-004", "--from", "trainer-2.2"], "--from and --to name an upgrade"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, says):
    archive = _archive_with(tmp_path / "reports", "TO-MB-004")

    code = main([*args, "--results", str(archive), "--out", str(tmp_path / "b")])

    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and says in err, err
    assert "Traceback" not in err


def test_a_directory_that_holds_no_bundle_is_not_overwritten(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep")
    catalog = load_catalog(suite().catalog)

    with pytest.raises(ConformanceError, match="holds no bundle"):
        write_bundle(record("TO-MB-004"), catalog["TO-MB-004"], suite().templates, out)
    assert (out / "notes.txt").read_text() == "keep"


def test_the_test_of_a_policy_is_found_in_the_suite():
    assert policy_test_name("TO-MB-004", suite().tests) == (
        "test_managed_by_is_immutable_in_the_webhooks_words"
    )
    with pytest.raises(ConformanceError, match="no test in"):
        policy_test_name("TJ-NOPE-001", suite().tests)


@pytest.mark.parametrize(
    ("where", "says"),
    [("results", "no such results archive"), ("out", "is a file")],
)
def test_bad_paths_are_refused_before_any_cluster_starts(tmp_path, capsys, where, says):
    a_file = tmp_path / "afile"
    a_file.write_text("")
    results = tmp_path / "missing-results.tar.gz" if where == "results" else tmp_path
    out = a_file if where == "out" else tmp_path / "b"

    code = main(["repro", "TO-MB-004", "--results", str(results), "--out", str(out)])

    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and says in err, err


def run_prelude(
    tmp_path, kubectl_body: str, steps: str, functions: str = ""
) -> subprocess.CompletedProcess[str]:
    """`steps` after repro.sh's prelude (and `functions`), against a stand-in kubectl
    running `kubectl_body`."""
    kubectl = tmp_path / "kubectl"
    kubectl.write_text("#!/bin/bash\n" + kubectl_body)
    kubectl.chmod(0o755)
    script = tmp_path / "observe.sh"
    script.write_text(
        PRELUDE + functions + "POLICY=P-1\nOBSERVE_SECONDS=1\n" + steps + 'verdict "$POLICY"\n'
    )
    return subprocess.run(
        ["bash", str(script), "kubeconfig"],
        env={"KUBECTL": str(kubectl), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )


def _observe(tmp_path, within: int, flips_after: int) -> subprocess.CompletedProcess[str]:
    """observe_value against a stand-in kubectl that prints 'gated' until its
    `flips_after`-th call, then '' (the expected value)."""
    tmp_path.mkdir()
    counting = (
        f"n=$(( $(cat {tmp_path}/n 2>/dev/null || echo 0) + 1 )); echo $n > {tmp_path}/n\n"
        f'[ "$n" -gt {flips_after} ] || echo gated\n'
    )
    return run_prelude(
        tmp_path, counting, f"observe_value 'the gates' equals '' {within} -- get pods\n"
    )


def test_a_patient_observation_reads_again_until_the_expected_value_or_its_bound(tmp_path):
    # The cluster comes round within the bound: not reproduced.
    assert _observe(tmp_path / "a", within=10, flips_after=3).returncode == 1
    # Read once (within 0), the value seen first decides: reproduced.
    done = _observe(tmp_path / "b", within=0, flips_after=3)
    assert done.returncode == 0 and "REPRODUCED: P-1: the gates: 'gated'" in done.stdout


def test_a_kubectl_warning_is_not_read_as_the_observed_value(tmp_path):
    done = run_prelude(
        tmp_path,
        "echo 'Warning: This version is deprecated.' >&2\necho True\n",
        "observe_value 'admitted' equals True 0 -- get workloads\n",
    )
    assert done.returncode == 1 and "NOT REPRODUCED: admitted: 'True'" in done.stdout


def _two_halves(tmp_path, message: str, admitted: str) -> subprocess.CompletedProcess[str]:
    """A statement in two halves, against a stand-in kubectl that prints `message` for
    the first read and `admitted` for the second."""
    return run_prelude(
        tmp_path,
        f'case "$*" in *message*) echo "{message}" ;; *) echo "{admitted}" ;; esac\n',
        "observe_value 'the retry said' substring 'will retry' 0 -- get message\n"
        "observe_value 'admitted' equals True 0 -- get status\n",
    )


@pytest.mark.parametrize(
    ("message", "admitted", "code", "says"),
    [
        # Both halves as the policy expects: the words found inside the message.
        ("Preempting 1 workload(s) failed, will retry", "True", 1, "NOT REPRODUCED: the retry"),
        # The first half shown, the second met: reproduced, naming the first only.
        ("couldn't assign flavors", "True", 0, "REPRODUCED: P-1: the retry said: 'couldn't"),
        # Both shown: reproduced, naming both.
        ("", "", 0, "(the policy expects it to contain 'will retry'); admitted: ''"),
    ],
)
def test_each_half_of_a_statement_is_observed_and_any_half_shown_reproduces(
    tmp_path, message, admitted, code, says
):
    done = _two_halves(tmp_path, message, admitted)

    assert done.returncode == code and says in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("steps", "code", "says"),
    [
        # A request before the last observation, answered as in the run: set-up, not shown.
        (
            "observe_request accepted before 'lift' -- delete x\n"
            "observe_value 'admitted' equals True 0 -- get status\n",
            1,
            "NOT REPRODUCED: admitted: 'True', as the policy expects",
        ),
        # The last observation a request answered as in the run: shown.
        ("observe_request accepted last 'edit' -- patch x\n", 0, "REPRODUCED: P-1: edit"),
        # A request answered as the policy expects ends the script, with what was shown.
        (
            "observe_value 'said' substring 'will retry' 0 -- get message\n"
            "observe_request refused last 'edit' -- patch x\n",
            0,
            "REPRODUCED: P-1: said: 'nothing'",
        ),
    ],
)
def test_a_request_observation_counts_as_shown_only_where_it_is_the_last(
    tmp_path, steps, code, says
):
    done = run_prelude(
        tmp_path, 'case "$*" in *message*) echo nothing ;; *) echo True ;; esac\n', steps
    )

    assert done.returncode == code and says in done.stdout, done.stdout + done.stderr


def test_a_kubeconfig_named_from_where_the_script_was_started_is_found(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    script = bundle / "check.sh"
    script.write_text(PRELUDE + 'cat "$KUBECONFIG"\n')
    (tmp_path / "kubeconfig").write_text("the cluster\n")

    done = subprocess.run(
        ["bash", "bundle/check.sh", "kubeconfig"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert done.returncode == 0 and done.stdout == "the cluster\n", done.stderr


def test_a_set_up_request_inside_holds_is_recorded_but_not_observed():
    recorder = Recorder()
    with recorder.observing():
        recorder.request("delete", {"kind": "X", "name": "judged"}, None, dict)
        with recorder.observing(False):
            recorder.request("delete", {"kind": "X", "name": "lifted"}, None, dict)

    assert [e.get("observation", False) for e in recorder.entries] == [True, False]


def test_a_request_sent_as_another_user_is_replayed_as_that_user_in_the_bundles_namespace():
    rec = record("TO-MB-004")
    acted = rec["entries"][-1]
    acted["asUser"] = f"system:serviceaccount:{rec['namespace']}:user"

    step = replay_of(rec).steps[-1]

    namespace = repro_namespace("TO-MB-004")
    assert step.kubectl[-1] == f"--as=system:serviceaccount:{namespace}:user"


def test_no_bundle_for_a_test_that_points_a_webhook_at_its_own_cluster():
    # KQ-ADMIT-005 registers a copy of Kueue's webhook with the run's own address
    # and CA: replayed elsewhere it would answer for a reason of its own.
    with pytest.raises(ConformanceError, match="cannot take that to another cluster"):
        bundle("KQ-ADMIT-005")


# cleanup() as a bundle ends it, with nothing to delete.
_CLEANUP = (
    "\n".join(["CREATED=no", "cleanup() {", "  local code=$?", "  if false; then :", *CLEANUP_END])
    + "\n"
)


def test_a_command_that_fails_before_any_verdict_is_a_setup_error_not_a_verdict(tmp_path):
    # set -e stops the script with kubectl's own exit 1, which is NOT REPRODUCED's.
    failed = run_prelude(tmp_path, 'echo "the server is gone" >&2; exit 1', "k get crd\n", _CLEANUP)
    assert failed.returncode == 2
    assert "SETUP ERROR: a command failed (exit 1) before any verdict" in failed.stderr
    assert "NOT REPRODUCED" not in failed.stdout
    judged = run_prelude(tmp_path, "echo fine", "k get crd >/dev/null\n", _CLEANUP)
    assert judged.returncode == 1 and "NOT REPRODUCED" in judged.stdout
    assert "SETUP ERROR" not in judged.stderr
