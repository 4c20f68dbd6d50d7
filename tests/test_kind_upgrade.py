"""The kind provider's in-place upgrade of one component, without a cluster: which
phases and kubectl commands each component's step runs, the swapped profile, what
the old release leaves behind, and how a step refuses what it cannot do. The step
itself runs against a real kind cluster (`upgrade --cluster kind`, docs/upgrades.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.kind import upgrade as kind_upgrade
from trainjob_conformance.cluster.kind.provider import KindStackCluster
from trainjob_conformance.cluster.registry import provider_kind
from trainjob_conformance.cluster.releases import in_place, upgrade
from trainjob_conformance.cluster.releases import install_plan as plans
from trainjob_conformance.cluster.releases.applier import ManifestApplier
from trainjob_conformance.cluster.releases.manifests import InstallStep, StackApplies
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.profiles import load_profile, with_version

pytestmark = pytest.mark.harness

# A component's install steps, as the manifest builder names them.
STEPS = {
    "jobset": [("jobset", "jobset")],
    "trainer": [("trainer-manager", "trainer"), ("trainer-runtimes", "trainer")],
    "kueue": [("kueue", "kueue")],
    "training-operator": [("training-operator", "training-operator")],
}


def steps_of(component: str) -> list[InstallStep]:
    return [InstallStep(name, c, Path(f"/m/{name}.yaml")) for name, c in STEPS[component]]


def _regrouped(controllers: list[InstallStep]) -> StackApplies:
    stem = "+".join(s.name for s in controllers)
    crds = tuple(Path(f"/m/{stem}.crds-{s.name}.yaml") for s in controllers)
    return StackApplies(crds, Path(f"/m/{stem}.rest.yaml"), Path(f"/m/{stem}.hooks.yaml"))


def _words(phases: list[plans.Phase]) -> list[list[str] | str]:
    return [
        phase.label if phase.crds_established else [" ".join(c.args) for c in phase.commands]
        for phase in phases
    ]


APPLY = "apply --server-side --force-conflicts -f"


def _rollout(namespace: str, deployment: str) -> list[str]:
    return [f"-n {namespace} rollout status deployment/{deployment} --timeout=300s"]


@pytest.mark.parametrize(
    ("component", "stem", "manager", "after"),
    [
        (
            "jobset",
            "jobset",
            [
                [f"{APPLY} /m/jobset.rest.yaml"],
                _rollout("jobset-system", "jobset-controller-manager"),
            ],
            [],
        ),
        (
            "trainer",
            "trainer-manager",
            [
                [f"{APPLY} /m/trainer-manager.rest.yaml"],
                _rollout("kubeflow-system", "kubeflow-trainer-controller-manager"),
            ],
            # What the Trainer's webhook judges goes in once the new one serves.
            [[f"{APPLY} /m/trainer-runtimes.yaml"]],
        ),
        (
            "kueue",
            "kueue",
            # Kueue's webhook configurations with its manager, as at the install.
            [
                [f"{APPLY} /m/kueue.rest.yaml"],
                [f"{APPLY} /m/kueue.hooks.yaml"],
                _rollout("kueue-system", "kueue-controller-manager"),
            ],
            [],
        ),
        (
            "training-operator",
            "training-operator",
            [
                [f"{APPLY} /m/training-operator.rest.yaml"],
                _rollout("kubeflow", "training-operator"),
            ],
            [],
        ),
    ],
)
def test_a_step_applies_the_crds_then_rolls_the_deployment_then_what_its_webhooks_judge(
    component, stem, manager, after
):
    phases = upgrade.upgrade_phases(steps_of(component), _regrouped)
    crds = STEPS[component][0][0]
    assert _words(phases.crds) == [[f"{APPLY} /m/{stem}.crds-{crds}.yaml"], "CRDs established"]
    assert _words(phases.manager) == manager
    assert _words(phases.after) == after


def test_only_the_upgrade_takes_over_fields_of_other_managers():
    install = plans.install_plan(steps_of("jobset"), _regrouped)
    assert all("--force-conflicts" not in c.args for p in install for c in p.commands)


def test_manifests_without_a_controller_are_no_upgrade():
    runtimes = [InstallStep("trainer-runtimes", "trainer", Path("/m/trainer-runtimes.yaml"))]
    with pytest.raises(ConformanceError, match="no controller to upgrade"):
        upgrade.upgrade_phases(runtimes, _regrouped)


def test_the_swapped_profile_moves_one_component_and_keeps_the_clusters_name():
    profile = load_profile("trainer-2.2")
    swapped = with_version(profile, "jobset", "v0.12.0")
    assert swapped.name == profile.name
    assert swapped.versions == {**profile.versions, "jobset": "v0.12.0"}
    assert profile.versions["jobset"] == "v0.11.1"  # the cluster's own is left as it was
    composed = load_profile("latest+kueue=v0.16.6")
    moved = with_version(composed, "kueue", "v0.19.2")
    assert moved.overrides == {"kueue": "v0.19.2"} and moved.base == "latest"


@pytest.mark.parametrize(
    ("component", "version", "words"),
    [
        ("etcd", "v3.6.0", "upgrades one of jobset, trainer, kueue, training-operator"),
        ("jobset", "0.12.0", "name a release tag"),
        ("jobset", "v0.12.0-rc.1", "name a release tag"),
        ("training-operator", "v1.9.3", "does not run on this cluster"),
    ],
)
def test_an_upgrade_the_cluster_cannot_make_is_one_line(component, version, words):
    with pytest.raises(ConformanceError, match=words) as refused:
        upgrade.check_request(component, version, ["jobset", "trainer", "kueue"])
    assert "\n" not in str(refused.value)


def _manifest(path: Path, documents: list[dict]) -> InstallStep:
    path.write_text(yaml.safe_dump_all(documents))
    return InstallStep(path.stem, "jobset", path)


def _object(kind: str, name: str) -> dict:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}


def test_webhook_configurations_the_new_release_dropped_are_found(tmp_path):
    old = _manifest(
        tmp_path / "old.yaml",
        [
            _object("ValidatingWebhookConfiguration", "jobset-validating"),
            _object("MutatingWebhookConfiguration", "jobset-mutating"),
            _object("Service", "jobset-webhook-service"),
        ],
    )
    new = _manifest(
        tmp_path / "new.yaml",
        [
            _object("ValidatingWebhookConfiguration", "jobset-validating"),
            _object("ValidatingWebhookConfiguration", "jobset-validating-v2"),
        ],
    )
    assert upgrade.dropped_webhooks([old], [new]) == [
        ("MutatingWebhookConfiguration", "jobset-mutating")
    ]
    assert upgrade.dropped_webhooks([old], [old]) == []


def _controller(path: Path, selector: dict[str, str]) -> InstallStep:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "jobset-controller-manager", "namespace": "jobset-system"},
        "spec": {"selector": {"matchLabels": selector}},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    return _manifest(path, [deployment])


def test_a_controller_whose_pod_selector_changed_is_deleted_before_the_new_release(tmp_path):
    # JobSet v0.10.1 -> v0.11.1: the new kustomization's commonLabels reach the
    # selector, which the API server will not update ("field is immutable").
    old = [_controller(tmp_path / "old" / "jobset.yaml", {"control-plane": "controller-manager"})]
    new = [
        _controller(
            tmp_path / "new" / "jobset.yaml",
            {"control-plane": "controller-manager", "app.kubernetes.io/name": "jobset"},
        )
    ]
    assert upgrade.recreated_deployments(old, new) == [
        ("jobset-system", "jobset-controller-manager")
    ]
    phases = upgrade.upgrade_phases(new, _regrouped, old_steps=old)
    delete = "-n jobset-system delete deployment/jobset-controller-manager --timeout=300s"
    assert _words(phases.manager)[0] == [delete]
    assert _words(phases.manager)[1:] == _words(upgrade.upgrade_phases(new, _regrouped).manager)
    # The same selector: a rolling update, nothing deleted.
    assert upgrade.recreated_deployments(old, old) == []
    assert _words(upgrade.upgrade_phases(old, _regrouped, old_steps=old).manager)[0] != [delete]
    notes = _prepared(tmp_path, old_steps=old, new_steps=new).notes(None)
    assert notes[0].startswith("deployment/jobset-controller-manager deleted and created anew")


def _runtime(path: Path, depends_on: list[dict[str, str]]) -> InstallStep:
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torchtune-llama3.2-1b"},
        "spec": {
            "template": {"spec": {"replicatedJobs": [{"name": "node", "dependsOn": depends_on}]}}
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(runtime))
    return InstallStep("trainer-runtimes", "trainer", path)


def test_a_runtime_whose_jobs_dependson_changed_is_deleted_before_the_new_release(tmp_path):
    # Trainer v2.0.1 -> v2.1.0: the torchtune runtimes wait for both initializers, and
    # the runtime CRD keeps dependsOn immutable ("Value is immutable").
    model = {"name": "model-initializer", "status": "Complete"}
    dataset = {"name": "dataset-initializer", "status": "Complete"}
    old = [_runtime(tmp_path / "old" / "runtimes.yaml", [model])]
    manager = _manifest(
        tmp_path / "trainer-manager.yaml", [_object("Namespace", "kubeflow-system")]
    )
    new = [manager, _runtime(tmp_path / "new" / "runtimes.yaml", [dataset, model])]
    assert upgrade.recreated_runtimes(old, new) == ["torchtune-llama3.2-1b"]
    assert upgrade.recreated_runtimes(old, old) == []
    # A dependsOn where there was none is no change to the rule (Trainer v2.3.0's launchers).
    assert upgrade.recreated_runtimes([_runtime(tmp_path / "none.yaml", [])], new) == []
    phases = upgrade.upgrade_phases(new, _regrouped, old_steps=old)
    delete = "delete clustertrainingruntime/torchtune-llama3.2-1b --timeout=300s"
    assert _words(phases.after) == [[delete], [f"{APPLY} {new[1].path}"]]
    notes = _prepared(tmp_path, component="trainer", old_steps=old, new_steps=new).notes(None)
    assert "ClusterTrainingRuntimes torchtune-llama3.2-1b deleted and created anew" in notes[-1]


def test_an_image_goes_into_each_nodes_containerd_through_stdin_and_pinned():
    command = kind_upgrade.import_command("tjc-x-worker")
    assert command[:4] == ["docker", "exec", "-i", "tjc-x-worker"]
    assert "--namespace=k8s.io" in command and command[-1] == "-"
    assert "--label=io.cri-containerd.pinned=pinned" in command


def _pod(node: str, image: str, terminating: bool = False) -> dict:
    metadata: dict = {"name": f"pod-{node}"}
    if terminating:
        metadata["deletionTimestamp"] = "2026-11-27T20:00:00Z"
    container = {"name": "manager", "image": image}
    return {"metadata": metadata, "spec": {"nodeName": node, "containers": [container]}}


def test_the_new_pod_is_the_one_running_the_new_image():
    new = "tjc.local/jobset/jobset:v0.12.0"
    pods = [
        _pod("control-plane", "tjc.local/jobset/jobset:v0.11.1", terminating=True),
        _pod("worker3", new, terminating=True),
        _pod("worker2", new),
    ]
    pods[2]["status"] = {
        "containerStatuses": [{"name": "manager", "imageID": "registry.test/jobset@sha256:ab"}]
    }
    assert upgrade.new_pod(pods, new) == upgrade.NewPod("worker2", "registry.test/jobset@sha256:ab")
    assert upgrade.new_pod(pods[:1], new) == upgrade.NewPod(None, None)


def _prepared(tmp_path: Path, **changes) -> upgrade.PreparedUpgrade:
    profile = load_profile("trainer-2.2")
    fields = {
        "component": "jobset",
        "from_version": "v0.11.1",
        "to_version": "v0.12.0",
        "image": "tjc.local/jobset/jobset:v0.12.0",
        "supply": "loaded into 4 nodes (2.0s)",
        "target": with_version(profile, "jobset", "v0.12.0"),
        "local": {},
        "old_steps": [],
        "new_steps": [],
    }
    return upgrade.PreparedUpgrade(**{**fields, **changes})


def test_the_notes_say_what_the_step_did(tmp_path):
    prepared = _prepared(tmp_path)
    assert prepared.label == "jobset v0.11.1 -> v0.12.0"
    assert prepared.notes("tjc-x-worker2") == (
        "rolling update of deployment/jobset-controller-manager, its new Pod on tjc-x-worker2",
        "image tjc.local/jobset/jobset:v0.12.0 loaded into 4 nodes (2.0s)",
    )
    assert prepared.notes(None)[0] == "rolling update of deployment/jobset-controller-manager"


def test_preparing_loads_the_new_image_before_building_both_releases_manifests(monkeypatch):
    profile = load_profile("trainer-2.2")
    done: list[str] = []
    image = "tjc.local/jobset/jobset:v0.12.0"
    monkeypatch.setattr(kind_upgrade.local_build, "build_controller_image", lambda c, v: image)

    def load(name: str) -> tuple[int, float]:
        done.append(f"load {name}")
        return 4, 1.5

    def build_steps(p, local, only):
        done.append(f"manifests {p.versions['jobset']} {local['jobset']} {only}")
        return [InstallStep("jobset", "jobset", Path(f"/m/{p.versions['jobset']}.yaml"))]

    old_local = {"jobset": "tjc.local/jobset/jobset:v0.11.1", "kueue": "k"}
    prepared = kind_upgrade.prepare(profile, old_local, "jobset", "v0.12.0", build_steps, load)
    assert done == [
        f"load {image}",
        "manifests v0.11.1 tjc.local/jobset/jobset:v0.11.1 ['jobset']",
        f"manifests v0.12.0 {image} ['jobset']",
    ]
    assert prepared.local == {"jobset": image, "kueue": "k"}
    assert old_local["jobset"].endswith("v0.11.1")
    assert (prepared.from_version, prepared.supply) == ("v0.11.1", "loaded into 4 nodes (1.5s)")


def _deployment_step(path: Path, image: str) -> InstallStep:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "jobset-controller-manager"},
        "spec": {"template": {"spec": {"containers": [{"name": "manager", "image": image}]}}},
    }
    return _manifest(path, [deployment])


def test_nodes_that_pull_get_the_releases_own_manifests_and_nothing_is_built(tmp_path, monkeypatch):
    profile = load_profile("trainer-2.2")
    monkeypatch.setattr(kind_upgrade.local_build, "build_controller_image", pytest.fail)
    done: list[str] = []

    def build_steps(p, local, only):
        version = p.versions["jobset"]
        done.append(f"manifests {version} {local} {only}")
        (tmp_path / version).mkdir(exist_ok=True)
        image = f"registry.k8s.io/jobset/jobset:{version}"
        return [_deployment_step(tmp_path / version / "jobset.yaml", image)]

    def served(image: str) -> str:
        done.append(f"served {image}")
        return "pulled by the nodes through the mirror http://m:5000 (sha256:ab)"

    prepared = upgrade.prepare_pulled(profile, "jobset", "v0.12.0", build_steps, served)
    assert done == [
        "manifests v0.12.0 None ['jobset']",
        "served registry.k8s.io/jobset/jobset:v0.12.0",
        "manifests v0.11.1 None ['jobset']",
    ]
    assert prepared.local is None and prepared.image == "registry.k8s.io/jobset/jobset:v0.12.0"
    assert prepared.notes(None)[1] == (
        "image registry.k8s.io/jobset/jobset:v0.12.0 pulled by the nodes through the mirror "
        "http://m:5000 (sha256:ab)"
    )


def test_a_mirror_that_cannot_serve_the_new_image_is_one_line(tmp_path, monkeypatch):
    from trainjob_conformance.cluster.kind import mirror

    cluster = _up_cluster(tmp_path, registry_mirror=mirror.parse_mirror("http://m:5000", None))
    cluster.served = {"registry.k8s.io/jobset/jobset:v0.11.1"}  # what it started with
    monkeypatch.setattr(mirror, "served_digest", lambda *args: None)
    with pytest.raises(ConformanceError) as lacking:
        cluster._pulled_from("registry.k8s.io/jobset/jobset:v0.12.0")
    assert "has no registry.k8s.io/jobset/jobset:v0.12.0, which the upgrade pulls" in str(
        lacking.value
    )
    with pytest.raises(ConformanceError) as unrouted:
        cluster._pulled_from("ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0")
    assert "send no pull of ghcr.io to the mirror http://m:5000 (only those of registry.k8s.io" in (
        str(unrouted.value)
    )
    monkeypatch.setattr(mirror, "served_digest", lambda *args: "sha256:ab")
    assert cluster._pulled_from("registry.k8s.io/jobset/jobset:v0.12.0").endswith("(sha256:ab)")


def _up_cluster(tmp_path: Path, **options) -> KindStackCluster:
    cluster = KindStackCluster(load_profile("trainer-2.2"), tmp_path, **options)
    cluster.kubectl = Path("/bin/kubectl")
    cluster.handle = ClusterHandle(
        provider="kind",
        kubeconfig=tmp_path / "kind-kubeconfig.yaml",
        versions=dict(cluster.profile.versions),
    )
    return cluster


def test_an_upgrade_is_refused_in_one_line_where_kind_cannot_make_it(tmp_path):
    with pytest.raises(ConformanceError, match="not up"):
        KindStackCluster(load_profile("trainer-2.2"), tmp_path).upgrade_component(
            "jobset", "v0.12.0"
        )
    # Either image supply upgrades: loaded into the nodes, or pulled by them.
    for source in ("local", "upstream"):
        unstarted = KindStackCluster(load_profile("trainer-2.2"), tmp_path, image_source=source)
        assert unstarted.upgrade_refused() is None
    # trainer-2.2 runs no training-operator; an upgrade does not install one.
    with pytest.raises(ConformanceError, match="training-operator does not run"):
        _up_cluster(tmp_path).upgrade_component("training-operator", "v1.9.3")


class _Watch:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.path = Path("health.json")

    def stop(self) -> None:
        self.log.append("watch stopped")


def test_a_step_stops_the_watch_for_the_rollout_and_reports_the_new_release(tmp_path, monkeypatch):
    cluster = _up_cluster(tmp_path)
    log: list[str] = []
    cluster.watch = _Watch(log)  # type: ignore[assignment]
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    validating = _object("ValidatingWebhookConfiguration", "jobset-validating")
    dropped = _object("MutatingWebhookConfiguration", "jobset-old-mutating")
    prepared = _prepared(
        tmp_path,
        local={"jobset": "tjc.local/jobset/jobset:v0.12.0"},
        old_steps=[_manifest(tmp_path / "old" / "jobset.yaml", [validating, dropped])],
        new_steps=[_manifest(tmp_path / "new" / "jobset.yaml", [validating])],
    )
    monkeypatch.setattr(kind_upgrade, "prepare", lambda *args: prepared)
    phases = upgrade.upgrade_phases
    monkeypatch.setattr(
        upgrade,
        "upgrade_phases",
        lambda steps, managers, old_steps=None: phases(steps, _regrouped, managers, old_steps),
    )
    monkeypatch.setattr(
        ManifestApplier, "run_phase", lambda self, phase: log.append(f"phase {phase.label}")
    )
    monkeypatch.setattr(ManifestApplier, "run", lambda self, *args: log.append(" ".join(args)))
    monkeypatch.setattr(
        in_place,
        "wait_admission",
        lambda kube, probes, pods, c, run_dir: log.append(f"admission {c}"),
    )
    monkeypatch.setattr(
        in_place, "new_controller_pod", lambda kube, prepared: upgrade.NewPod("tjc-x-worker2", None)
    )
    monkeypatch.setattr(cluster, "_kube", lambda: None)
    monkeypatch.setattr(cluster, "_start_watch", lambda handle: log.append("watch started"))
    monkeypatch.setattr("trainjob_conformance.cluster.kind.images.store.image_id", lambda i: "sha")

    done = cluster.upgrade_component("jobset", "v0.12.0")

    assert log == [
        "phase apply crds-jobset",
        "phase CRDs established",
        "watch stopped",
        "phase apply rest",
        "phase rollout jobset-controller-manager",
        # Answered before anything the new webhooks judge is applied, and after.
        "admission jobset",
        "delete --ignore-not-found mutatingwebhookconfiguration/jobset-old-mutating",
        "admission jobset",
        "watch started",
    ]
    assert (done.component, done.from_version, done.to_version) == ("jobset", "v0.11.1", "v0.12.0")
    assert done.notes == prepared.notes("tjc-x-worker2")
    assert cluster.handle is not None and cluster.handle.versions["jobset"] == "v0.12.0"
    assert cluster.profile.versions["jobset"] == "v0.12.0"
    assert cluster.local["jobset"] == "tjc.local/jobset/jobset:v0.12.0"


def test_kind_offers_upgrades():
    assert provider_kind("kind").upgrades


def test_an_apply_no_webhook_could_answer_is_told_from_a_refusal():
    from trainjob_conformance.cluster.releases.install_plan import webhook_unreachable

    refused = (
        "Error from server (InternalError): Internal error occurred: failed calling webhook "
        '"validator.clustertrainingruntime.trainer.kubeflow.org": failed to call webhook: Post '
        '"https://kubeflow-trainer-controller-manager.kubeflow-system.svc:443/validate": '
        "dial tcp 10.96.150.120:443: connect: connection refused"
    )
    intercepted = refused.replace(
        "dial tcp 10.96.150.120:443: connect: connection refused",
        "tls: failed to verify certificate: x509: certificate is valid for deb.debian.org, "
        "not kubeflow-trainer-controller-manager.kubeflow-system.svc",
    )
    denied = (
        'admission webhook "validator.clustertrainingruntime.trainer.kubeflow.org" denied '
        "the request: spec.template: Invalid value"
    )
    assert webhook_unreachable(refused)
    assert webhook_unreachable(intercepted)
    assert not webhook_unreachable(denied)
    assert not webhook_unreachable("error: the server doesn't have a resource type")


def test_a_phase_refused_by_an_unrouted_webhook_is_applied_again_until_it_answers(
    tmp_path, monkeypatch
):
    from trainjob_conformance.cluster.releases.install_plan import Command, Phase

    applier = ManifestApplier(
        Path("kubectl"), tmp_path / "kubeconfig", lambda: None, tmp_path / "seen"
    )
    unreachable = 'failed calling webhook "v.trainer": dial tcp 10.96.0.9:443: connection refused'
    answers = [ConformanceError(unreachable), ConformanceError(unreachable), None]
    calls: list[int] = []

    def apply(commands):
        calls.append(len(commands))
        error = answers.pop(0)
        if error is not None:
            raise error

    monkeypatch.setattr(applier, "at_once", apply)
    phase = Phase((Command(("apply", "-f", "runtimes.yaml"), "apply trainer-runtimes"),))
    applier.run_phase(phase)
    assert calls == [1, 1, 1]

    # Anything else stops the install at once, in its own words.
    monkeypatch.setattr(
        applier, "at_once",
        lambda commands: (_ for _ in ()).throw(ConformanceError("kubectl apply: bad yaml")),
    )  # fmt: skip
    with pytest.raises(ConformanceError, match="bad yaml"):
        applier.run_phase(phase)
