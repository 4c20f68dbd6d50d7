"""The manifests kind installs and in-place upgrades apply, built from the upstream release sources.

Each release publishes its install manifests from a kustomization in its own
repository: JobSet's and Kueue's `manifests.yaml` are `config/default` with
the controller image set to the release (their Makefiles' `artifacts`
target), and the Trainer's are `manifests/overlays/manager` and
`manifests/overlays/runtimes`. The harness builds the same kustomizations from
the release's Go module (the module proxy serves them; GitHub is not needed)
with `kubectl kustomize`, sets the released image, and applies the result.

One deliberate difference: the Trainer's manager overlay also pulls JobSet's
release manifests from GitHub (`third-party/jobset`; its own comment says to
drop it when JobSet is installed separately). JobSet is installed first from
its own sources here, so that line is left out.

And one setting: Kueue is scoped away from the harness's Trainer-only
namespaces as its Helm chart scopes it (cluster/kueue.py): the configuration's
`managedJobsNamespaceSelector`, and the same selector on the webhooks that
`config/default` already scopes by namespace. The embedded cluster configures
Kueue the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.cluster.kueue import (
    KUEUE_FRAMEWORKS,
    KUEUE_MANAGED_NAMESPACES,
    is_job_integration,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import cache_root
from trainjob_conformance.stack.gobuild import module_source
from trainjob_conformance.stack.profiles import Profile

RELEASE_IMAGES = {
    "jobset": "registry.k8s.io/jobset/jobset",
    "kueue": "registry.k8s.io/kueue/kueue",
    "trainer": "ghcr.io/kubeflow/trainer/trainer-controller-manager",
}
_TRAINER_MANAGER_OVERLAY = "manifests/overlays/manager"
# The previous generation's install without Kubeflow (its README's standalone).
_TRAINING_OPERATOR_OVERLAY = "manifests/overlays/standalone"
_THIRD_PARTY_JOBSET = "../../third-party/jobset"
_KUEUE_CONFIG = ("kueue-manager-config", "controller_manager_config.yaml")
# Part of the cache key: bump it when what is written for the same releases changes
# (r2: Kueue scoped away from Trainer-only namespaces; r3: Kueue's frameworks those of
# the stack).
_RECIPE = "r3"


@dataclass(frozen=True)
class InstallStep:
    """One `kubectl apply` of the kind install, and the component it belongs to."""

    name: str
    component: str
    path: Path

    def documents(self) -> list[dict[str, Any]]:
        return [doc for doc in yaml.load_all(self.path.read_text(), Loader=_LOADER) if doc]


# libyaml where PyYAML has it: the stack's manifests are several MB of CRDs.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_FOUNDATION_KINDS = ("Namespace", "CustomResourceDefinition")
_WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


@dataclass(frozen=True)
class StackApplies:
    """The controllers' manifests regrouped into three applies."""

    foundations: tuple[Path, ...]  # each controller's namespaces and CRDs, applied at once
    controllers: Path  # everything else, but Kueue's webhook configurations
    late_webhooks: Path  # Kueue's webhook configurations


def stack_applies(controllers: list[InstallStep]) -> StackApplies:
    """Regroup the controllers' manifests (written beside them, reused after).

    Applied one controller at a time, each manifest waited for the CRDs of the
    ones before it; with every CRD first (each controller's in its own file, the
    files applied side by side), one wait serves them all and every controller
    starts at once. Kueue's webhook configurations go apart: its
    job-integration webhooks judge Deployments and Pods in every namespace but
    its own and kube-system, so the other controllers' Pods must exist before
    they are in place, or the ReplicaSets' creations are refused until Kueue
    answers.
    """
    workdir = controllers[0].path.parent
    stem = "+".join(install.name for install in controllers)
    # Each controller's CRDs in a file of its own: applied side by side, about 6 MB
    # of CRDs took 10 s as one apply on a fresh API server.
    applies = StackApplies(
        tuple(workdir / f"{stem}.foundations-{install.name}.yaml" for install in controllers),
        workdir / f"{stem}.controllers.yaml",
        workdir / f"{stem}.webhooks.yaml",
    )
    paths = (*applies.foundations, applies.controllers, applies.late_webhooks)
    if all(path.is_file() for path in paths):
        return applies
    foundations: list[list[dict[str, Any]]] = []
    rest, late = [], []
    for install in controllers:
        own = []
        for document in install.documents():
            if document["kind"] in _FOUNDATION_KINDS:
                own.append(document)
            elif install.component == "kueue" and document["kind"] in _WEBHOOK_KINDS:
                late.append(document)
            else:
                rest.append(document)
        # Namespaces before the CRDs (a sort is stable).
        foundations.append(sorted(own, key=lambda document: document["kind"] != "Namespace"))
    for path, documents in zip(paths, (*foundations, rest, late), strict=True):
        write_documents(path, documents)
    return applies


def _kustomize(kubectl: Path, directory: Path) -> str:
    result = subprocess.run(
        [str(kubectl), "kustomize", "--load-restrictor=LoadRestrictionsNone", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConformanceError(f"kubectl kustomize {directory} failed: {last}")
    return result.stdout


def _with_release_image(
    text: str, component: str, tag: str, local: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The documents, with the manager Deployment running the released image, as
    `kustomize edit set image` does in the release process; or, given `local`
    (component -> image), the image built here, which is never pulled."""
    documents = [doc for doc in yaml.safe_load_all(text) if doc]
    managers = [d for d in documents if d["kind"] == "Deployment"]
    if len(managers) != 1:
        raise ConformanceError(
            f"expected one manager Deployment in {component}'s manifests, found {len(managers)}"
        )
    containers = managers[0]["spec"]["template"]["spec"]["containers"]
    if local is not None:
        containers[0]["image"] = local[component]
        containers[0]["imagePullPolicy"] = "IfNotPresent"
    elif component in RELEASE_IMAGES:
        containers[0]["image"] = f"{RELEASE_IMAGES[component]}:{tag}"
    # else: the overlay's own image (the training-operator's names a commit, not the tag)
    return documents


def _kueue_scoped(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kueue's documents with the managed namespaces of cluster/kueue.py, set as its Helm
    chart sets them: in the configuration and on the job integrations' webhooks."""
    name, key = _KUEUE_CONFIG
    configs = [d for d in documents if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name]
    if len(configs) != 1 or key not in configs[0].get("data", {}):
        raise ConformanceError(f"Kueue's manifests have no ConfigMap {name} with {key}")
    config = yaml.safe_load(configs[0]["data"][key])
    config["managedJobsNamespaceSelector"] = KUEUE_MANAGED_NAMESPACES
    config.setdefault("integrations", {})["frameworks"] = list(KUEUE_FRAMEWORKS)
    configs[0]["data"][key] = yaml.safe_dump(config, sort_keys=False)
    for document in documents:
        if document["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            for webhook in document.get("webhooks") or []:
                # Those config/default scopes by namespace, as the chart does;
                # Kueue's own kinds have no selector there and get none.
                if is_job_integration(webhook) and "namespaceSelector" in webhook:
                    webhook["namespaceSelector"] = KUEUE_MANAGED_NAMESPACES
    return documents


def _trainer_manager_overlay(source: Path, workdir: Path) -> Path:
    """The Trainer's manager overlay, rooted in the cache, JobSet's line left out."""
    overlay = source / _TRAINER_MANAGER_OVERLAY
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    resources = kustomization.get("resources") or []
    if _THIRD_PARTY_JOBSET not in resources:
        raise ConformanceError(
            f"{overlay} no longer lists {_THIRD_PARTY_JOBSET}: check what it installs now"
        )
    wrapper = workdir / "trainer-manager"
    wrapper.mkdir(parents=True, exist_ok=True)
    # kustomize takes no absolute paths: point back at the module relatively.
    kustomization["resources"] = [
        os.path.relpath((overlay / entry).resolve(), wrapper)
        for entry in resources
        if entry != _THIRD_PARTY_JOBSET
    ]
    (wrapper / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return wrapper


def write_documents(path: Path, documents: list[dict[str, Any]]) -> Path:
    """Write `documents` as one YAML stream at `path`, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(yaml.dump_all(documents, Dumper=_DUMPER, sort_keys=False))
    partial.replace(path)
    return path


def release_images(steps: list[InstallStep]) -> dict[str, str]:
    """Component -> the image its manager Deployment runs, as the manifests name it."""
    found: dict[str, str] = {}
    for install in steps:
        for document in install.documents():
            if document.get("kind") == "Deployment":
                containers = document["spec"]["template"]["spec"]["containers"]
                found.setdefault(install.component, containers[0]["image"])
    return found


def release_install_steps(
    profile: Profile,
    kubectl: Path,
    local: dict[str, str] | None = None,
    components: Collection[str] | None = None,
) -> list[InstallStep]:
    """Build (or reuse) each manifest file of the kind install, in install order.

    `local` (component -> image) points the controllers at images built here;
    `components` keeps only those components' steps (all of the profile's by default).
    """
    versions = profile.versions
    workdir = (
        cache_root()
        / "release-manifests"
        / "-".join([*(f"{key}{versions[key]}" for key in ("jobset", "kueue", "trainer")), _RECIPE])
    )
    if local is not None:
        # Keyed by the image names too: manifests built for other local names
        # (an older harness's) would point the controllers at images never loaded.
        names = json.dumps(sorted(local.items())).encode()
        workdir = workdir.with_name(
            f"{workdir.name}-local-{hashlib.sha256(names).hexdigest()[:12]}"
        )
    jobset, kueue, trainer = (module_source(k, versions[k]) for k in ("jobset", "kueue", "trainer"))
    plan = [
        (
            "jobset",
            "jobset",
            lambda: _with_release_image(
                _kustomize(kubectl, jobset / "config/default"), "jobset", versions["jobset"], local
            ),
        ),
        (
            "trainer-manager",
            "trainer",
            lambda: _with_release_image(
                _kustomize(kubectl, _trainer_manager_overlay(trainer, workdir)),
                "trainer",
                versions["trainer"],
                local,
            ),
        ),
        (
            "trainer-runtimes",
            "trainer",
            lambda: [
                doc
                for doc in yaml.safe_load_all(
                    _kustomize(kubectl, trainer / "manifests/overlays/runtimes")
                )
                if doc
            ],
        ),
        (
            "kueue",
            "kueue",
            lambda: _kueue_scoped(
                _with_release_image(
                    _kustomize(kubectl, kueue / "config/default"),
                    "kueue",
                    versions["kueue"],
                    local,
                )
            ),
        ),
    ]
    if "training-operator" in versions:
        operator = module_source("training-operator", versions["training-operator"])
        plan.append(
            (
                "training-operator",
                "training-operator",
                lambda: _with_release_image(
                    _kustomize(kubectl, operator / _TRAINING_OPERATOR_OVERLAY),
                    "training-operator",
                    versions["training-operator"],
                    local,
                ),
            )
        )
    steps = []
    for name, component, build in plan:
        if components is not None and component not in components:
            continue
        path = workdir / f"{name}.yaml"
        if not path.is_file():
            write_documents(path, build())
        steps.append(InstallStep(name, component, path))
    return steps
