"""The manifests the kind provider would install, judged by a real API server.

No kind cluster runs here (no Docker engine), so each profile's install
manifests are applied with a server-side dry run to the embedded cluster,
which runs the same Kubernetes version: validation, defaulting, CRD schemas
and admission all answer, nothing is stored. Any document refused is a bug
of the kind provider (or a finding about the release's manifests).
"""

from __future__ import annotations

from collections import Counter

import pytest

from trainjob_conformance.cluster.releases.manifests import release_install_steps
from trainjob_conformance.kube.errors import ApiError, NotFound
from trainjob_conformance.stack.gobuild import binary_path
from trainjob_conformance.stack.profiles import load_profile, profile_names

pytestmark = pytest.mark.harness

# Kinds the stack's own CRDs serve: their objects are judged by the CRDs the
# cluster runs, so only the running profile's can be judged here.
STACK_GROUPS = ("trainer.kubeflow.org", "jobset.x-k8s.io", "kueue.x-k8s.io")


def as_on_a_fresh_cluster(kube, document):
    """Dry-run what a fresh kind cluster would do with the document: create it. Where the
    embedded cluster already has an object of that name (a CRD, a webhook wired to
    loopback), a dry-run replace judges the upstream object whole instead."""
    metadata = document["metadata"]
    try:
        current = kube.get(
            document["apiVersion"], document["kind"], metadata["name"], metadata.get("namespace")
        )
    except NotFound:
        return kube.create(document, dry_run=True)
    replacement = {
        **document,
        "metadata": {**metadata, "resourceVersion": current["metadata"]["resourceVersion"]},
    }
    return kube.replace(replacement, dry_run=True)


def drops_a_stored_version(kube, document):
    """A CRD of an older release that lacks a version the running cluster already stores
    (Kueue v0.14 serves only v1beta1; the cluster's Kueue stores v1beta2). The API server
    refuses that replacement, as it should; a fresh cluster would simply create it."""
    if document["kind"] != "CustomResourceDefinition":
        return False
    try:
        current = kube.get(document["apiVersion"], document["kind"], document["metadata"]["name"])
    except NotFound:
        return False
    stored = set((current.get("status") or {}).get("storedVersions") or [])
    return not stored <= {v["name"] for v in document["spec"]["versions"]}


@pytest.mark.parametrize("profile_name", profile_names())
def test_kind_install_manifests_pass_a_server_side_dry_run(trainjob_cluster, profile_name):
    profile = load_profile(profile_name)
    served = trainjob_cluster.versions["kubernetes"]
    if profile.version("kubernetes") != served:
        pytest.skip(
            f"{profile_name} pins Kubernetes {profile.version('kubernetes')}; "
            f"this cluster serves {served}"
        )
    same_stack = all(
        profile.version(c) == trainjob_cluster.versions[c] for c in ("jobset", "kueue", "trainer")
    )
    kubectl = binary_path("kubernetes", served, "kubectl")
    kube = trainjob_cluster.kube

    refused, judged, left_out = [], Counter(), Counter()
    for step in release_install_steps(profile, kubectl):
        for document in step.documents():
            group = document["apiVersion"].split("/")[0]
            if group in STACK_GROUPS and not same_stack:
                left_out[document["kind"]] += 1
                continue
            if drops_a_stored_version(kube, document):
                left_out["CustomResourceDefinition (older than the cluster's)"] += 1
                continue
            judged[document["kind"]] += 1
            try:
                as_on_a_fresh_cluster(kube, document)
            except ApiError as error:
                name = f"{document['kind']} {document['metadata']['name']}"
                refused.append(f"{step.name}: {name}: {error.message}")

    print(
        f"{profile_name}: {sum(judged.values())} documents dry-run {dict(judged)}; "
        f"left out (custom resources of other CRD versions, CRDs that would drop a version "
        f"the cluster stores): {dict(left_out)}"
    )
    assert not refused, "\n".join(refused)
