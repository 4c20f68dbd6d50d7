"""The harness's own providers against real clusters (not policies of the stack)."""

from __future__ import annotations

import pytest

from trainjob_conformance.cluster.embedded import EmbeddedControlPlane
from trainjob_conformance.cluster.existing import ExistingCluster
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.gobuild import build_profile
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
