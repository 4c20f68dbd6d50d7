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
from trainjob_conformance.stack.profiles import load_profile

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
            releases_upgrade.with_version(profile, component, version), None, steps, steps,
        )  # fmt: skip

    def regrouped(controllers):
        return StackApplies((tmp_path / "crds-jobset.yaml",), tmp_path / "rest.yaml", None)

    phases = releases_upgrade.upgrade_phases
    monkeypatch.setattr(releases_upgrade, "prepare_pulled", prepare_pulled)
    monkeypatch.setattr(releases_upgrade, "upgrade_phases", lambda s: phases(s, regrouped))
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
        lambda kube, c, i: releases_upgrade.NewPod("node-2", "registry.k8s.io/jobset@sha256:cd"),
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
