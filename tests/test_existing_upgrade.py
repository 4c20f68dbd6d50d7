"""What an upgrade of a user's cluster refuses before it creates anything: a controller
installed under other names, a cluster at other releases than --from pins, nodes
that cannot pull. The upgrade itself runs against a real cluster (docs/upgrades.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainjob_conformance.cluster.existing.upgrade import refusals
from trainjob_conformance.cluster.handle import IMAGES_PRELOADED, IMAGES_PULLED
from trainjob_conformance.cluster.introspect import DetectedStack
from trainjob_conformance.cluster.registry import provider_kind
from trainjob_conformance.stack.profiles import load_profile, with_version

pytestmark = pytest.mark.harness

AS_RELEASED = {
    "jobset": ("jobset-system", "jobset-controller-manager"),
    "trainer": ("kubeflow-system", "kubeflow-trainer-controller-manager"),
    "kueue": ("kueue-system", "kueue-controller-manager"),
}


def stack_of(profile: str, **changes: str) -> DetectedStack:
    pinned = load_profile(profile)
    versions = {c: pinned.version(c) for c in AS_RELEASED} | changes
    sources = {c: f"image of Deployment {'/'.join(AS_RELEASED[c])}" for c in AS_RELEASED}
    return DetectedStack(versions, sources, {}, dict(AS_RELEASED))


def test_a_cluster_installed_as_the_releases_install_it_at_the_pinned_releases_is_taken():
    profile = load_profile("trainer-2.2")
    assert refusals(stack_of("trainer-2.2"), profile, AS_RELEASED, IMAGES_PULLED) == []


def test_a_cluster_at_other_releases_than_from_pins_is_named():
    profile = load_profile("trainer-2.2")
    found = refusals(stack_of("trainer-2.2", kueue="v0.16.6"), profile, AS_RELEASED, IMAGES_PULLED)
    assert found == [
        "kueue runs v0.16.6 here (image of Deployment kueue-system/kueue-controller-manager), "
        f"not {profile.version('kueue')} as trainer-2.2 pins it: name the profile the cluster "
        "runs with --from (compose one with +component=version)"
    ]


def test_a_controller_under_other_names_is_not_given_a_second_deployment():
    stack = stack_of("trainer-2.2")
    stack.deployments["kueue"] = ("kueue", "kueue-manager")
    found = refusals(stack, load_profile("trainer-2.2"), AS_RELEASED, IMAGES_PULLED)
    assert len(found) == 1
    assert found[0].startswith("kueue runs as Deployment kueue/kueue-manager, not ")


def test_nodes_that_hold_their_images_only_cannot_take_an_upgrade():
    found = refusals(stack_of("trainer-2.2"), load_profile("trainer-2.2"), [], IMAGES_PRELOADED)
    assert found and "could not be pulled" in found[0]


def test_a_component_that_does_not_run_is_named():
    stack = stack_of("trainer-2.2")
    del stack.versions["jobset"]
    found = refusals(stack, load_profile("trainer-2.2"), ["jobset"], IMAGES_PULLED)
    assert found == ["jobset does not run on this cluster"]


def test_existing_offers_upgrades():
    assert provider_kind("existing").upgrades


def test_a_step_on_an_existing_cluster_runs_the_phases_and_names_the_new_release(
    tmp_path, monkeypatch
):
    from trainjob_conformance.cluster.existing import provider as existing
    from trainjob_conformance.cluster.handle import ClusterHandle
    from trainjob_conformance.cluster.releases import in_place
    from trainjob_conformance.cluster.releases import upgrade as releases_upgrade
    from trainjob_conformance.cluster.releases.applier import ManifestApplier
    from trainjob_conformance.cluster.releases.manifests import InstallStep, StackApplies

    profile = load_profile("trainer-2.2")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("")
    cluster = existing.ExistingCluster(kubeconfig, profile, tmp_path / "run")
    cluster.handle = ClusterHandle(
        provider="existing",
        kubeconfig=kubeconfig,
        versions=dict(profile.versions),
        controller_pods={"jobset": ("jobset-system", "control-plane=controller-manager")},
    )
    cluster._kube = object()  # type: ignore[assignment]
    image = "registry.k8s.io/jobset/jobset:v0.12.0"
    new = tmp_path / "jobset.yaml"
    new.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: jobset-controller-manager}\n"
    )
    steps = [InstallStep("jobset", "jobset", new)]
    log: list[str] = []

    def prepare_pulled(profile, component, version, build_steps, served):
        log.append(f"prepared: {served(image)}")
        return releases_upgrade.PreparedUpgrade(
            component, profile.version(component), version, image, served(image),
            with_version(profile, component, version), None, steps, steps,
        )  # fmt: skip

    def regrouped(controllers):
        return StackApplies((tmp_path / "crds-jobset.yaml",), tmp_path / "rest.yaml", None)

    phases = releases_upgrade.upgrade_phases
    monkeypatch.setattr(releases_upgrade, "prepare_pulled", prepare_pulled)
    monkeypatch.setattr(
        releases_upgrade,
        "upgrade_phases",
        lambda s, managers, old_steps=None: phases(s, regrouped, managers, old_steps),
    )
    monkeypatch.setattr(existing, "build_component", lambda c, v: {"kubectl": Path("/k")})
    monkeypatch.setattr(
        ManifestApplier, "run_phase", lambda self, phase: log.append(f"phase {phase.label}")
    )
    monkeypatch.setattr(
        in_place, "wait_admission", lambda kube, probes, pods, c, run_dir: log.append("admission")
    )
    monkeypatch.setattr(
        in_place,
        "new_controller_pod",
        lambda kube, prepared: releases_upgrade.NewPod(
            "node-2", "registry.k8s.io/jobset@sha256:cd"
        ),
    )
    monkeypatch.setattr(cluster, "down", lambda: log.append("watch stopped"))
    monkeypatch.setattr(
        cluster, "_start_watch", lambda kube, handle, state: log.append("watch started")
    )

    done = cluster.upgrade_component("jobset", "v0.12.0")

    assert log == [
        "prepared: pulled by the nodes from registry.k8s.io (or wherever their runtime sends it)",
        "phase apply crds-jobset",
        "phase CRDs established",
        "watch stopped",
        "phase apply rest",
        "phase rollout jobset-controller-manager",
        "admission",
        "admission",
        "watch started",
    ]
    assert (done.from_version, done.to_version) == (profile.version("jobset"), "v0.12.0")
    assert done.notes[0].endswith("its new Pod on node-2")
    # What the node pulled, not how: that is the notes'.
    assert cluster.handle.images[image] == "registry.k8s.io/jobset@sha256:cd"
    assert cluster.handle.versions["jobset"] == "v0.12.0"
    assert cluster.profile.version("jobset") == "v0.12.0"


# What `helm template kueue ... --namespace kueue` might render: the manager under
# the chart's names, with a CRD and a webhook configuration beside it.
HELM_KUEUE = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterqueues.kueue.x-k8s.io}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kueue-helm-manager, namespace: kueue}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: kueue, app.kubernetes.io/instance: prod}}
  template:
    spec:
      containers: [{name: manager, image: "registry.k8s.io/kueue/kueue:VERSION"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: kueue-helm-validating}
"""
RUNTIME = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
"""


def helm_folder(root: Path, component: str, text: str) -> Path:
    folder = root / component
    folder.mkdir(parents=True)
    (folder / "rendered.yaml").write_text(text)
    return root


def test_a_helm_install_given_its_new_manifests_is_upgraded_with_them(tmp_path):
    from trainjob_conformance.cluster.releases import upgrade as releases_upgrade
    from trainjob_conformance.cluster.releases.user_manifests import (
        plan_refusals,
        read_user_manifests,
    )

    latest = load_profile("latest").version("kueue")
    root = helm_folder(tmp_path / "dir", "kueue", HELM_KUEUE.replace("VERSION", latest))
    given = read_user_manifests(root)
    assert plan_refusals(given, [("kueue", latest)]) == []

    stack = stack_of("trainer-2.2")
    stack.deployments["kueue"] = ("kueue", "kueue-helm-manager")
    assert refusals(stack, load_profile("trainer-2.2"), AS_RELEASED, IMAGES_PULLED, given) == []

    prepared = releases_upgrade.prepare_user(
        load_profile("trainer-2.2"), given["kueue"], latest, tmp_path / "work", lambda i: "pulled"
    )
    rollouts = [c.args for phase in prepared.phases.manager for c in phase.commands]
    assert rollouts[-1][:5] == ("-n", "kueue", "rollout", "status", "deployment/kueue-helm-manager")
    assert prepared.controller[2] == "app.kubernetes.io/instance=prod,app.kubernetes.io/name=kueue"
    assert prepared.dropped_webhooks == []  # the old installer's objects are its own
    assert prepared.notes(None)[-1].startswith(f"the user's manifests from {root / 'kueue'}")


def test_the_trainers_runtimes_in_the_users_manifests_are_applied_once_its_webhooks_answer(
    tmp_path,
):
    from trainjob_conformance.cluster.releases.user_manifests import read_user_manifests

    trainer = HELM_KUEUE.replace("registry.k8s.io/kueue/kueue", "ghcr.io/kubeflow/trainer/x")
    root = helm_folder(tmp_path, "trainer", trainer + "---\n" + RUNTIME)
    steps = read_user_manifests(root)["trainer"].steps(tmp_path / "work")
    assert [(s.name, [d["kind"] for d in s.documents()]) for s in steps] == [
        (
            "trainer-manager",
            ["CustomResourceDefinition", "Deployment", "ValidatingWebhookConfiguration"],
        ),
        ("trainer-judged", ["ClusterTrainingRuntime"]),
    ]


@pytest.mark.parametrize(
    ("folder", "text", "moves", "words"),
    [
        ("kueue", HELM_KUEUE.replace("VERSION", "v0.16.6"), [("kueue", "v0.19.2")],
         "runs image registry.k8s.io/kueue/kueue:v0.16.6, not kueue v0.19.2 that the upgrade"),
        ("kueue", HELM_KUEUE.replace(":VERSION", "@sha256:ab"), [("kueue", "v0.19.2")],
         "names no tag (or a digest)"),
        ("jobset", HELM_KUEUE.replace("VERSION", "v0.19.2"), [("kueue", "v0.19.2")],
         "the upgrade does not move jobset"),
    ],
)  # fmt: skip
def test_manifests_that_do_not_fit_the_upgrade_are_named(tmp_path, folder, text, moves, words):
    from trainjob_conformance.cluster.releases.user_manifests import (
        plan_refusals,
        read_user_manifests,
    )

    found = plan_refusals(read_user_manifests(helm_folder(tmp_path, folder, text)), moves)
    assert len(found) == 1 and words in found[0]


@pytest.mark.parametrize(
    ("folder", "text", "words"),
    [
        ("kueue", HELM_KUEUE + "---\n" + HELM_KUEUE.split("---\n")[1], "holds 2 Deployments"),
        ("kueue", HELM_KUEUE.replace(", namespace: kueue", ""), "needs a namespace"),
        ("kueue", "kind: [not, an, object\n", "is not readable YAML"),
        ("helm", HELM_KUEUE, "is not a component's folder"),
        ("kueue", "", "holds no .yaml or .yml manifest"),
    ],
)
def test_a_folder_the_harness_cannot_use_is_one_line(tmp_path, folder, text, words):
    from trainjob_conformance.cluster.releases.user_manifests import read_user_manifests
    from trainjob_conformance.errors import ConformanceError

    root = helm_folder(tmp_path, folder, text)
    if not text:
        (root / folder / "rendered.yaml").unlink()
    with pytest.raises(ConformanceError, match=words) as raised:
        read_user_manifests(root)
    assert "\n" not in str(raised.value)


def test_manifests_naming_another_deployment_than_the_one_running_are_refused(tmp_path):
    from trainjob_conformance.cluster.releases.user_manifests import read_user_manifests

    latest = load_profile("latest").version("kueue")
    given = read_user_manifests(
        helm_folder(tmp_path, "kueue", HELM_KUEUE.replace("VERSION", latest))
    )
    found = refusals(
        stack_of("trainer-2.2"), load_profile("trainer-2.2"), AS_RELEASED, IMAGES_PULLED, given
    )
    assert found == [
        f"{tmp_path / 'kueue'} installs Deployment kueue/kueue-helm-manager, but kueue runs as "
        "kueue-system/kueue-controller-manager here: the apply would add a second manager; "
        "render the manifests with the names the cluster's installer gave it"
    ]
