"""The harness's own providers against real clusters (not policies of the stack)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from trainjob_conformance.cluster.embedded.control_plane import EmbeddedControlPlane
from trainjob_conformance.cluster.existing.provider import ExistingCluster
from trainjob_conformance.cluster.introspect import detect_stack
from trainjob_conformance.cluster.labels import KUEUE_MANAGED_LABEL
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.stack.gobuild import binary_path, build_profile, module_source
from trainjob_conformance.stack.profiles import load_profile

pytestmark = pytest.mark.harness


def test_existing_provider_accepts_a_cluster_with_the_stack(trainjob_cluster):
    if trainjob_cluster.provider != "embedded":
        pytest.skip("needs the embedded cluster this run started")
    profile = load_profile(trainjob_cluster.profile)

    handle = ExistingCluster(trainjob_cluster.kubeconfig, profile).up()

    assert handle.provider == "existing"
    # What the API server itself reports, not what the harness wrote down.
    served = trainjob_cluster.kube.version.get_code().git_version
    assert handle.versions["kubernetes"] == served.split("+")[0] == profile.version("kubernetes")


def test_existing_provider_refuses_a_cluster_without_the_stack(trainjob_cluster, tmp_path):
    if trainjob_cluster.provider != "embedded":
        pytest.skip("needs the embedded provider's binaries")
    profile = load_profile(trainjob_cluster.profile)
    bare = EmbeddedControlPlane(profile, build_profile(profile), tmp_path / "bare")
    try:
        kubeconfig = bare.up()
        with pytest.raises(ConformanceError) as refused:
            ExistingCluster(kubeconfig, profile).up()
    finally:
        bare.down()

    message = str(refused.value)
    assert "lacks trainer (no CRD trainjobs.trainer.kubeflow.org)" in message
    assert "jobset (no CRD jobsets.jobset.x-k8s.io)" in message
    assert "kueue (no CRD workloads.kueue.x-k8s.io)" in message


def test_existing_provider_never_falls_back_to_the_current_context():
    with pytest.raises(ConformanceError, match="needs --trainjob-kubeconfig PATH"):
        ExistingCluster(None, load_profile("latest"))


# The kustomization each release builds its manager Deployment from (in the
# component's Go module), and the image the release publishes it as.
MANAGER_KUSTOMIZATIONS = {
    "jobset": "config/default",
    "kueue": "config/default",
    # (overlays/manager also pulls JobSet from GitHub; base/manager is the Trainer alone)
    "trainer": "manifests/base/manager",
}
RELEASE_IMAGES = {
    "jobset": "registry.k8s.io/jobset/jobset",
    "kueue": "registry.k8s.io/kueue/kueue",
    "trainer": "ghcr.io/kubeflow/trainer/trainer-controller-manager",
}


def upstream_manager(kubectl, component, version, namespace, tag):
    """The component's own manager Deployment, as its kustomization builds it, moved to
    `namespace` and running its release image at `tag`; with its ServiceAccount."""
    source = module_source(component, version) / MANAGER_KUSTOMIZATIONS[component]
    built = subprocess.run(
        [str(kubectl), "kustomize", str(source)], capture_output=True, text=True, check=True
    ).stdout
    (deployment,) = [d for d in yaml.safe_load_all(built) if d and d["kind"] == "Deployment"]
    deployment["metadata"]["namespace"] = namespace
    spec = deployment["spec"]["template"]["spec"]
    spec["containers"][0]["image"] = f"{RELEASE_IMAGES[component]}:{tag}"
    service_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": spec.get("serviceAccountName", "default"), "namespace": namespace},
    }
    return service_account, deployment


@pytest.fixture
def controller_deployments(trainjob_cluster, trainjob_view):
    """Deploy the upstream managers into namespaces of their own; the fake nodes run their Pods."""
    kube = trainjob_view.kube
    deployed = {}

    def deploy(component, tag):
        namespace = f"{component}-{trainjob_view.namespace[-6:]}"  # the test's unique suffix
        trainjob_view.create(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace, "labels": {KUEUE_MANAGED_LABEL: "false"}},
            }
        )
        version = trainjob_cluster.versions[component]
        kubectl = binary_path("kubernetes", trainjob_cluster.versions["kubernetes"], "kubectl")
        for manifest in upstream_manager(kubectl, component, version, namespace, tag):
            kube.create(manifest)
        deployed[component] = (namespace, manifest["metadata"]["name"])
        return deployed[component]

    return deploy


def wait_available(view, namespace, name, replicas):
    def probe():
        status = view.kube.apps.read_namespaced_deployment(name, namespace).status
        ready = status.ready_replicas or 0
        return True if ready == replicas else NotYet(f"{ready} of {replicas} replicas ready")

    view.wait(f"Deployment {namespace}/{name} to have {replicas} ready", probe)


def test_existing_provider_reads_versions_from_the_upstream_deployments(
    trainjob_cluster, trainjob_view, controller_deployments
):
    if trainjob_cluster.provider != "embedded":
        pytest.skip("deploys the managers as Deployments into the embedded cluster")
    # A tag the profile does not have: the version must come from the image.
    tags = {"jobset": trainjob_cluster.versions["jobset"], "kueue": "v0.99.1", "trainer": "v9.9.9"}
    where = {component: controller_deployments(component, tag) for component, tag in tags.items()}
    for namespace, name in where.values():
        wait_available(trainjob_view, namespace, name, 1)

    stack = detect_stack(trainjob_view.kube)

    assert {c: stack.versions[c] for c in tags} == tags
    for component, (namespace, name) in where.items():
        assert stack.sources[component] == f"image of Deployment {namespace}/{name}"
        assert stack.controller_pods[component][0] == namespace

    namespace, name = where["kueue"]
    trainjob_view.kube.apps.patch_namespaced_deployment_scale(
        name, namespace, {"spec": {"replicas": 0}}
    )
    wait_available(trainjob_view, namespace, name, 0)
    with pytest.raises(ConformanceError, match=rf"kueue \(Deployment {namespace}/{name} has no"):
        detect_stack(trainjob_view.kube)

    namespace, name = where["jobset"]
    trainjob_view.kube.apps.delete_namespaced_deployment(name, namespace)
    with pytest.raises(ConformanceError, match=r"jobset \(no Deployment runs an image of jobset"):
        detect_stack(trainjob_view.kube)
