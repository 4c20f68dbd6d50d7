"""The kind provider's install plan; the provider itself runs against real kind clusters
(docs/kind.md), and its pure parts are tested in test_kind_images.py and test_kind_config.py.
"""

import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import yaml

from trainjob_conformance.cluster.kind import mirror as kind_mirror
from trainjob_conformance.cluster.kind import provider as kind
from trainjob_conformance.cluster.kueue import KUEUE_FRAMEWORKS, KUEUE_MANAGED_NAMESPACES
from trainjob_conformance.cluster.releases import install_plan as plans
from trainjob_conformance.cluster.releases import manifests
from trainjob_conformance.cluster.releases.manifests import InstallStep, StackApplies, stack_applies
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.profiles import load_profile


def fake_steps(profile, kubectl):
    """Install steps as the manifest builder names them (built for real in e2e)."""
    names = [("jobset", "jobset"), ("trainer-manager", "trainer"), ("trainer-runtimes", "trainer")]
    return [
        InstallStep(name, component, Path(f"/m/{profile.name}/{name}.yaml"))
        for name, component in [*names, ("kueue", "kueue")]
    ]


def _regrouped(controllers):
    stem = "+".join(s.name for s in controllers)
    crds = tuple(Path(f"/m/{stem}.crds-{s.name}.yaml") for s in controllers)
    return StackApplies(crds, Path(f"/m/{stem}.rest.yaml"), Path(f"/m/{stem}.hooks.yaml"))


def _words(phase: plans.Phase) -> list[str] | str:
    """A phase as its kubectl command lines, or the CRD wait's label."""
    return phase.label if phase.crds_established else [" ".join(c.args) for c in phase.commands]


def test_install_plan_puts_every_crd_first_and_kueues_webhooks_after_the_other_pods():
    operator = InstallStep("training-operator", "training-operator", Path("/m/to.yaml"))
    steps = [*fake_steps(load_profile("latest"), None), operator]
    plan = [_words(phase) for phase in plans.install_plan(steps, _regrouped)]
    stem = "/m/jobset+trainer-manager+kueue+training-operator"

    def on(namespace: str, deployment: str, action: str) -> str:
        return f"-n {namespace} {action} deployment/{deployment} --timeout=300s"

    created = "wait --for=jsonpath={.status.replicas}=1"
    assert plan == [
        [
            f"apply --server-side -f {stem}.crds-{name}.yaml"
            for name in ("jobset", "trainer-manager", "kueue", "training-operator")
        ],
        "CRDs established",
        [f"apply --server-side -f {stem}.rest.yaml"],
        [
            on("jobset-system", "jobset-controller-manager", created),
            on("kubeflow-system", "kubeflow-trainer-controller-manager", created),
            on("kubeflow", "training-operator", created),
        ],
        [f"apply --server-side -f {stem}.hooks.yaml"],
        [
            on("jobset-system", "jobset-controller-manager", "rollout status"),
            on("kubeflow-system", "kubeflow-trainer-controller-manager", "rollout status"),
            on("kueue-system", "kueue-controller-manager", "rollout status"),
            on("kubeflow", "training-operator", "rollout status"),
        ],
        ["apply --server-side -f /m/latest/trainer-runtimes.yaml"],
    ]
    alone = plans.install_plan([operator], _regrouped)
    assert [_words(phase) for phase in alone] == [
        ["apply --server-side -f /m/training-operator.crds-training-operator.yaml"],
        "CRDs established",
        ["apply --server-side -f /m/training-operator.rest.yaml"],
        [on("kubeflow", "training-operator", "rollout status")],
    ]


def test_the_crds_and_the_controllers_are_applied_while_kind_joins_the_workers():
    plan = plans.install_plan(fake_steps(load_profile("latest"), None), _regrouped)

    early, late = plans.split_plan(plan)

    # What needs only the control plane; the controllers' Pods start there.
    assert [phase.label for phase in early] == [
        "apply crds-jobset, apply crds-trainer-manager, apply crds-kueue",
        "CRDs established",
        "apply rest",
    ]
    assert early + late == plan
    # The rollouts' words are the timings' names the bench and the docs read.
    assert [phase.label for phase in late] == [
        "Pod created jobset-controller-manager, Pod created kubeflow-trainer-controller-manager",
        "apply hooks",
        "rollout jobset-controller-manager, rollout kubeflow-trainer-controller-manager, "
        "rollout kueue-controller-manager",
        "apply trainer-runtimes",
    ]
    only_applies = [plans.Phase((plans.Command(("apply", "-f", "x.yaml"), "apply x"),))]
    assert plans.split_plan(only_applies) == ([], only_applies)


def test_the_stack_is_regrouped_crds_first_and_kueues_webhooks_apart(tmp_path):
    def step(name: str, component: str, *documents: dict) -> InstallStep:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump_all(list(documents)))
        return InstallStep(name, component, path)

    def doc(kind_: str, name: str) -> dict:
        return {"kind": kind_, "metadata": {"name": name}}

    jobset = step(
        "jobset", "jobset", doc("CustomResourceDefinition", "jobsets"), doc("Namespace", "js"),
        doc("Deployment", "js-manager"), doc("MutatingWebhookConfiguration", "js-hooks"),
    )  # fmt: skip
    kueue = step(
        "kueue", "kueue", doc("Namespace", "kq"), doc("CustomResourceDefinition", "workloads"),
        doc("Deployment", "kq-manager"), doc("ValidatingWebhookConfiguration", "kq-hooks"),
    )  # fmt: skip
    applies = stack_applies([jobset, kueue])

    def names(path: Path) -> list[str]:
        return [d["metadata"]["name"] for d in yaml.safe_load_all(path.read_text()) if d]

    assert [names(path) for path in applies.foundations] == [["js", "jobsets"], ["kq", "workloads"]]
    assert names(applies.controllers) == ["js-manager", "js-hooks", "kq-manager"]
    assert names(applies.late_webhooks) == ["kq-hooks"]
    # Reused once written.
    jobset.path.unlink()
    assert stack_applies([jobset, kueue]) == applies


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


def test_a_kind_run_records_what_its_nodes_can_get_for_whoever_judges_it_later(tmp_path):
    from trainjob_conformance.cluster.handle import IMAGES_MIRRORED
    from trainjob_conformance.cluster.run_state import read_image_supply, write_image_supply

    assert read_image_supply(tmp_path) is None  # a run that recorded nothing
    write_image_supply(tmp_path, IMAGES_MIRRORED, ["registry.k8s.io/kueue/kueue:v0.19.2"])
    assert read_image_supply(tmp_path) == (
        IMAGES_MIRRORED,
        ["registry.k8s.io/kueue/kueue:v0.19.2"],
    )
    (tmp_path / "image-supply.json").write_text("not json")
    assert read_image_supply(tmp_path) is None


def test_commands_run_at_once_are_taken_as_they_end():
    import subprocess
    import tempfile

    from trainjob_conformance.cluster.releases.applier import _as_they_end

    with tempfile.TemporaryFile() as out:
        running = [
            (plans.Command(("slow",), "slow"), subprocess.Popen(["sleep", "0.5"]), out),
            (plans.Command(("fast",), "fast"), subprocess.Popen(["true"]), out),
        ]
        assert [command.words for command, _, _ in _as_they_end(running)] == ["fast", "slow"]


def test_a_crd_without_conditions_yet_is_not_established():
    def crd(name: str, status: dict | None) -> dict:
        return {"metadata": {"name": name}, **({"status": status} if status is not None else {})}

    established = {"conditions": [{"type": "Established", "status": "True"}]}
    crds = [
        crd("ready", established),
        crd("fresh", None),  # just created: no status at all
        crd("empty", {"conditions": None}),
        crd("names-accepted", {"conditions": [{"type": "NamesAccepted", "status": "True"}]}),
    ]
    assert plans.not_established(crds) == ["fresh", "empty", "names-accepted"]


def test_deleting_a_cluster_removes_both_its_kubeconfigs(tmp_path, monkeypatch):
    from trainjob_conformance.cluster.kind import reclaim

    kubeconfig = tmp_path / "kind-kubeconfig.yaml"
    peers = tmp_path / reclaim.PEER_KUBECONFIG
    for path in (kubeconfig, peers):
        path.write_text("apiVersion: v1\nkind: Config\n")
    record = reclaim.new_record("tjc-x", kubeconfig, Path("/bin/kind"), created_network=False)
    # Docker lists no node left: the cluster is gone.
    monkeypatch.setattr(reclaim, "listed_nodes", lambda name, harness_only=True: [])

    reclaim.delete(record, tmp_path)

    assert record.state == "deleted"
    assert not kubeconfig.exists() and not peers.exists()


def test_a_multikueue_worker_runs_the_stack_without_the_training_operator(tmp_path):
    # Kueue mirrors only the kinds of the frameworks it enables; none is the
    # training-operator's, so no PyTorchJob ever reaches a worker.
    assert not [f for f in KUEUE_FRAMEWORKS if f.startswith("kubeflow.org/")]
    profile = load_profile("latest")
    assert "training-operator" in profile.versions
    manager = kind.KindStackCluster(profile, tmp_path / "run")
    worker = kind.multikueue_worker(profile, tmp_path / "run")
    assert manager.controllers == ["jobset", "trainer", "kueue", "training-operator"]
    assert worker.controllers == ["jobset", "trainer", "kueue"]


def _running_with(*args: str) -> subprocess.Popen[bytes]:
    """A Python process that lives about a second with these words on its command line."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)", *args])


def test_the_processes_creating_a_cluster_are_told_by_its_name_and_label():
    from trainjob_conformance.cluster.kind import reclaim

    docker_run = _running_with("--label", f"{reclaim.CLUSTER_LABEL}=tjc-x", "--name", "tjc-x-w")
    kind_create = _running_with("create", "cluster", "--name", "tjc-x", "--retain")
    other = _running_with("--label", f"{reclaim.CLUSTER_LABEL}=tjc-xy")
    other_create = _running_with("create", "cluster", "--name", "tjc-xy")
    try:
        assert {docker_run.pid, kind_create.pid} <= set(reclaim.creators("tjc-x"))
        assert not {other.pid, other_create.pid} & set(reclaim.creators("tjc-x"))
        assert not reclaim.creators("tjc-none")
    finally:
        for process in (docker_run, kind_create, other, other_create):
            process.kill()
            process.wait()


def test_a_deletion_lists_the_nodes_only_once_their_creation_has_stopped(tmp_path, monkeypatch):
    # The harness killed by SIGKILL during `kind create`: kind dies with it, but a
    # `docker run` it had made for a node still ends in the daemon. Listed before,
    # that node was missed and the cluster left behind.
    from trainjob_conformance.cluster.kind import reclaim

    kubeconfig = tmp_path / "kind-kubeconfig.yaml"
    record = reclaim.new_record("tjc-x", kubeconfig, Path("/bin/kind"), created_network=False)
    still_running = []

    def creating() -> bool:
        # A process on its way out has no command line left (its memory is gone
        # before it is a zombie): it makes no more nodes, and delete rightly stops
        # waiting; poll() would still call it running (seen once in some 60 runs).
        try:
            return bool(psutil.Process(docker_run.pid).cmdline())
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return False

    def listed(name, harness_only=True):
        still_running.append(creating())
        return []

    monkeypatch.setattr(reclaim, "listed_nodes", listed)
    docker_run = _running_with("--label", f"{reclaim.CLUSTER_LABEL}=tjc-x")
    try:
        reclaim.delete(record, tmp_path)
    finally:
        docker_run.kill()
        docker_run.wait()
    assert still_running and not any(still_running), "the nodes were listed during the creation"
    assert record.state == "deleted"


@pytest.mark.parametrize(
    ("named", "run_source"),
    [
        # One kind run covers both supplies: its own cluster preloaded, its worker
        # through a mirror (./scripts/test does so).
        ("worker_mirror", "local"),
        # Without a supply of its own, the worker takes the run's.
        ("registry_mirror", "upstream"),
    ],
)
def test_a_multikueue_worker_pulls_through_the_mirror_named_for_it(tmp_path, named, run_source):
    profile = load_profile("latest")
    mirror = kind_mirror.parse_mirror("http://mirror.example:5000", None)
    manager = kind.KindStackCluster(profile, tmp_path / "run", **{named: mirror})
    manager._remember_image_source()

    worker = kind.multikueue_worker(profile, tmp_path / "run")

    assert manager.image_source == run_source
    assert worker.image_source == "upstream"
    assert worker.mirror is not None and worker.mirror.url == "http://mirror.example:5000"


def test_a_failed_create_is_told_in_kinds_and_the_kubelets_own_words():
    kind_log = (
        "Creating cluster ...\n"
        "ERROR: failed to create cluster: failed to init node with kubeadm: exit status 1\n"
        "error execution phase wait-control-plane: could not bootstrap the admin user\n"
        "main.main\n\truntime/asm_amd64.s:1771\n"
    )
    journal = (
        'Dec 07 15:56:52 tjc-control-plane kubelet[923]: E1207 run.go:72] "command failed" '
        "err=\"failed to validate kubelet flags: invalid node labels: 'a+b=c'\"\n"
    )
    said = kind.create_failure(kind_log, journal)
    assert said.startswith("kind create cluster failed: ERROR: failed to create cluster")
    assert "error execution phase wait-control-plane" in said
    assert "the kubelet: failed to validate kubelet flags: invalid node labels: 'a+b=c'" in said
    assert "asm_amd64" not in said
    assert kind.create_failure("boom\n", "") == "kind create cluster failed: boom"
