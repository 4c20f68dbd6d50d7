"""The kind provider's commands, run against stand-in kind and kubectl executables.

No Docker engine runs here, so what is checked is what the provider asks kind
and kubectl to do (recorded by the stand-ins), not a kind cluster.
"""

import stat
import subprocess
from pathlib import Path

import pytest

from trainjob_conformance.cluster.kind import provider as kind
from trainjob_conformance.cluster.kind.manifests import InstallStep
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


def test_install_plan_applies_each_manifest_and_waits_for_each_controller():
    steps = fake_steps(load_profile("latest"), None)
    plan = [" ".join(args) for args in kind.install_plan(steps)]
    assert plan == [
        "apply --server-side -f /m/latest/jobset.yaml",
        "-n jobset-system rollout status deployment/jobset-controller-manager --timeout=300s",
        "apply --server-side -f /m/latest/trainer-manager.yaml",
        "-n kubeflow-system rollout status deployment/kubeflow-trainer-controller-manager --timeout=300s",
        "apply --server-side -f /m/latest/trainer-runtimes.yaml",
        "apply --server-side -f /m/latest/kueue.yaml",
        "-n kueue-system rollout status deployment/kueue-controller-manager --timeout=300s",
    ]


def test_cluster_is_created_with_the_profile_node_image_and_a_private_kubeconfig(
    stand_ins, tmp_path
):
    paths, record = stand_ins
    cluster = stand_in_cluster(tmp_path, paths["kind"], paths["kubectl"])
    cluster.create_and_install()
    cluster.down()

    lines = record.read_text().splitlines()
    kubeconfig = tmp_path / "run" / "kind-kubeconfig.yaml"
    assert (
        f"kind create cluster --name=tjc-latest --kubeconfig={kubeconfig} "
        f"--image=kindest/node:{load_profile('latest').version('kubernetes')}" in lines
    )
    kubectl_lines = [line for line in lines if line.startswith("kubectl ")]
    assert len(kubectl_lines) == 7
    assert all(f"KUBECONFIG={kubeconfig} " in line for line in kubectl_lines)
    assert lines[-1] == f"kind delete cluster --name=tjc-latest --kubeconfig={kubeconfig}"


def test_a_failing_install_step_is_one_clear_error(stand_ins, tmp_path):
    paths, _ = stand_ins
    failing = tmp_path / "failing-kubectl"
    failing.write_text("#!/usr/bin/env bash\necho 'error: no route to github.com'; exit 1\n")
    failing.chmod(0o755)
    cluster = stand_in_cluster(tmp_path, paths["kind"], str(failing))
    with pytest.raises(
        ConformanceError,
        match=r"kubectl apply --server-side -f .*jobset.* failed:\nerror: no route",
    ):
        cluster.create_and_install()
    cluster.down()


def test_missing_kind_binary_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("KIND", raising=False)
    with pytest.raises(ConformanceError, match="no kind executable found: install kind"):
        kind.KindStackCluster(load_profile("latest"), tmp_path)


def test_the_printed_down_hint_deletes_the_kept_cluster(stand_ins, tmp_path):
    paths, record = stand_ins
    cluster = stand_in_cluster(tmp_path, paths["kind"], paths["kubectl"])
    cluster.create_and_install()
    cluster.detach()
    clusters = tmp_path / "clusters"
    assert clusters.read_text().split() == ["tjc-latest"]

    subprocess.run(cluster.down_hint(), shell=True, check=True)

    assert clusters.read_text().split() == []
    assert record.read_text().splitlines()[-1] == (
        f"kind delete cluster --name tjc-latest --kubeconfig {cluster.kubeconfig}"
    )
