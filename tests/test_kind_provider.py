"""The kind provider's install plan; the provider itself runs against real kind clusters
(docs/kind.md), and its pure parts are tested in test_kind_images.py and test_kind_config.py.
"""

import stat
from pathlib import Path

import pytest
import yaml

from trainjob_conformance.cluster.kind import manifests
from trainjob_conformance.cluster.kind import provider as kind
from trainjob_conformance.cluster.kind.manifests import InstallStep
from trainjob_conformance.cluster.kueue import KUEUE_MANAGED_NAMESPACES
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.profiles import load_profile

STAND_IN_KIND = r"""#!/usr/bin/env bash
echo "kind $*" >> "$RECORD"
state="$(dirname "$RECORD")/clusters"
touch "$state"
case "$1 $2" in
  "get clusters") cat "$state" ;;
  "create cluster")
    for arg in "$@"; do
      case "$arg" in
        --name=*) echo "${arg#--name=}" >> "$state" ;;
        --kubeconfig=*) kc="${arg#--kubeconfig=}" ;;
      esac
    done
    cat > "$kc" <<'KC'
apiVersion: v1
kind: Config
clusters: [{name: k, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: k, user: {token: t}}]
contexts: [{name: k, context: {cluster: k, user: k}}]
current-context: k
KC
    ;;
  "delete cluster") : > "$state" ;;
esac
"""

STAND_IN_KUBECTL = """#!/usr/bin/env bash
echo "kubectl KUBECONFIG=$KUBECONFIG $*" >> "$RECORD"
"""


def stand_in_cluster(tmp_path, kind_bin, kubectl_bin):
    return kind.KindStackCluster(
        load_profile("latest"),
        tmp_path / "run",
        kind_bin=kind_bin,
        kubectl_bin=kubectl_bin,
        install_steps=fake_steps,
    )


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    record = tmp_path / "record.log"
    monkeypatch.setenv("RECORD", str(record))
    monkeypatch.chdir(tmp_path)  # pytest-kind-ng keeps state in ./.pytest-kind
    paths = {}
    for name, body in (("kind", STAND_IN_KIND), ("kubectl", STAND_IN_KUBECTL)):
        path = tmp_path / name
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
        paths[name] = str(path)
    return paths, record


def fake_steps(profile, kubectl):
    """Install steps as the manifest builder names them (built for real in e2e)."""
    names = [("jobset", "jobset"), ("trainer-manager", "trainer"), ("trainer-runtimes", "trainer")]
    return [
        InstallStep(name, component, Path(f"/m/{profile.name}/{name}.yaml"))
        for name, component in [*names, ("kueue", "kueue")]
    ]


def test_install_plan_applies_in_order_and_waits_for_the_controllers_together():
    operator = InstallStep("training-operator", "training-operator", Path("/m/to.yaml"))
    steps = [*fake_steps(load_profile("latest"), None), operator]
    plan = [[" ".join(args) for args in phase] for phase in kind.install_plan(steps)]
    established = "wait --for=condition=Established crd --all --timeout=60s"
    assert plan == [
        ["apply --server-side -f /m/latest/jobset.yaml"],
        [established],
        ["apply --server-side -f /m/latest/trainer-manager.yaml"],
        [established],
        ["apply --server-side -f /m/to.yaml"],
        [established],
        ["apply --server-side -f /m/latest/kueue.yaml"],
        [
            "-n jobset-system rollout status deployment/jobset-controller-manager --timeout=300s",
            "-n kubeflow-system rollout status deployment/kubeflow-trainer-controller-manager "
            "--timeout=300s",
            "-n kubeflow rollout status deployment/training-operator --timeout=300s",
            "-n kueue-system rollout status deployment/kueue-controller-manager --timeout=300s",
        ],
        ["apply --server-side -f /m/latest/trainer-runtimes.yaml"],
    ]
    assert [[" ".join(a) for a in phase] for phase in kind.install_plan([operator])] == [
        ["apply --server-side -f /m/to.yaml"],
        ["-n kubeflow rollout status deployment/training-operator --timeout=300s"],
    ]


def test_kueue_is_scoped_away_from_trainer_only_namespaces_as_its_helm_chart_does():
    def webhook(name, group, scoped=True):
        found = {"name": name, "rules": [{"apiGroups": [group], "resources": ["x"]}]}
        if scoped:
            found["namespaceSelector"] = {"matchExpressions": []}
        return found

    config = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nnamespace: q\n"
    documents = [
        {
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config"},
            "data": {"controller_manager_config.yaml": config},
        },
        {
            "kind": "ValidatingWebhookConfiguration",
            "webhooks": [
                webhook("vtrainjob.kb.io", "trainer.kubeflow.org"),
                webhook("vpod.kb.io", ""),
                webhook("vworkload.kb.io", "kueue.x-k8s.io", scoped=False),
            ],
        },
    ]

    scoped = manifests._kueue_scoped(documents)

    written = yaml.safe_load(scoped[0]["data"]["controller_manager_config.yaml"])
    assert written["namespace"] == "q"
    assert written["managedJobsNamespaceSelector"] == KUEUE_MANAGED_NAMESPACES
    trainjob, pod, workload = scoped[1]["webhooks"]
    assert trainjob["namespaceSelector"] == KUEUE_MANAGED_NAMESPACES
    assert pod["namespaceSelector"] == KUEUE_MANAGED_NAMESPACES
    assert "namespaceSelector" not in workload
    with pytest.raises(ConformanceError, match="kueue-manager-config"):
        manifests._kueue_scoped(documents[1:])


def test_a_build_container_is_removed_only_once_its_owner_is_gone():
    import os

    from trainjob_conformance.cluster.kind.reclaim import abandoned_builds
    from trainjob_conformance.lifecycle.identity import start_time

    mine = f"{os.getpid()}-{start_time(os.getpid())}"
    build = "tjc-node-build-1"
    listing = "\n".join(
        [
            f"aaa\t{build}\t{mine}\t",  # its builder runs
            f"bbb\t{build}\t{os.getpid()}-1.0\t",  # a reused pid: gone
            f"ccc\t{build}\t999999999-5.0\t",  # a dead builder: gone
            "ddd\ttjc-latest-1-worker\t999999999-5.0\ttjc-latest-1",  # a kind node
            "eee\tmy-container\t999999999-5.0\t",  # not named as a build
            f"fff\t{build}\t\t",  # no owner: not ours to judge
        ]
    )
    assert abandoned_builds(listing) == ["bbb", "ccc"]


def test_a_kubeconfig_beside_a_kind_record_names_its_run(tmp_path):
    from trainjob_conformance.cluster.run_state import kind_run_dir

    kubeconfig = tmp_path / "kind-kubeconfig.yaml"
    kubeconfig.write_text("apiVersion: v1\n")
    assert kind_run_dir(kubeconfig) is None  # a user's kubeconfig: nothing to start beside
    (tmp_path / "kind-cluster.json").write_text("{}")
    assert kind_run_dir(kubeconfig) == tmp_path


def test_commands_run_at_once_are_taken_as_they_end():
    import subprocess
    import tempfile

    from trainjob_conformance.cluster.kind.provider import _as_they_end

    with tempfile.TemporaryFile() as out:
        running = [
            (["slow"], subprocess.Popen(["sleep", "0.5"]), out),
            (["fast"], subprocess.Popen(["true"]), out),
        ]
        assert [args[0] for args, _, _ in _as_they_end(running)] == ["fast", "slow"]
