"""CRDs and webhook configurations, read from the upstream modules at run time.

Nothing here is a copy of an upstream manifest: the files come from the Go
module cache of the pinned version. What the harness adds is what kustomize
would add in the upstream install (config names, the selectors of their
patches, the conversion stanza) and the one change every out-of-cluster setup
makes, as envtest does: each `clientConfig.service` becomes a loopback URL
with the harness CA as `caBundle`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.cluster.kueue import (
    KUEUE_MANAGED_NAMESPACES,
    is_job_integration,
    webhook_groups,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.ports import LOOPBACK

Manifest = dict[str, Any]
# libyaml's safe loader where PyYAML has it: the CRDs are megabytes of YAML,
# which the pure-Python loader takes seconds to read (ten times longer).
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Kueue's webhooks are registered for the frameworks the harness enables
# (KUEUE_FRAMEWORKS, cluster/kueue.py), others not.
_KUEUE_API_GROUPS = {"kueue.x-k8s.io", "batch", "jobset.x-k8s.io", "trainer.kubeflow.org"}


def _keep_all(webhook: Manifest) -> bool:
    return True


def _kueue_enabled(webhook: Manifest) -> bool:
    groups = webhook_groups(webhook)
    return bool(groups) and groups <= _KUEUE_API_GROUPS


def _pytorchjob_only(webhook: Manifest) -> bool:
    resources = {r for rule in webhook.get("rules", []) for r in rule.get("resources", [])}
    return "pytorchjobs" in resources


def _jobset_selectors(webhook: Manifest) -> dict[str, Any]:
    # config/components/webhook/patches: JobSet's Pod webhooks see only JobSet Pods.
    if webhook["name"] in ("mpod.kb.io", "vpod.kb.io"):
        return {
            "objectSelector": {
                "matchExpressions": [
                    {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}
                ]
            }
        }
    return {}


def _kueue_selectors(webhook: Manifest) -> dict[str, Any]:
    # Upstream's kustomization gives job integrations a namespaceSelector that
    # skips kube-system and Kueue's namespace; its Helm chart derives it from
    # managedJobsNamespaceSelector, as the harness does.
    if is_job_integration(webhook):
        return {"namespaceSelector": KUEUE_MANAGED_NAMESPACES}
    return {}


def _trainer_selectors(webhook: Manifest) -> dict[str, Any]:
    # Only releases whose webhook kustomization carries this patch (v2.2+) get
    # it; see ProductManifests.selector_patch.
    # manifests/base/webhook/patch_validating.yaml: runtimes labelled
    # webhook-validation=disabled (the upstream runtime overlay) skip validation.
    if webhook["name"] in (
        "validator.clustertrainingruntime.trainer.kubeflow.org",
        "validator.trainingruntime.trainer.kubeflow.org",
    ):
        return {
            "objectSelector": {
                "matchExpressions": [
                    {
                        "key": "trainer.kubeflow.org/webhook-validation",
                        "operator": "NotIn",
                        "values": ["disabled"],
                    }
                ]
            }
        }
    return {}


@dataclass(frozen=True)
class ProductManifests:
    """Where one product keeps its manifests, and what its kustomize layer adds."""

    component: str
    crd_dir: str
    crd_kustomization: str | None
    webhook_file: str
    config_names: dict[str, str]
    keep_webhook: Callable[[Manifest], bool] = _keep_all
    selectors: Callable[[Manifest], dict[str, Any]] = field(default=lambda webhook: {})
    # The upstream patch file the selectors reproduce, and the text that shows
    # it carries them: a release without it gets none (the Trainer's
    # runtime-validation opt-out arrived in v2.3.0).
    selector_patch: tuple[str, str] | None = None
    # CRD files to install, when not all under crd_dir are wanted.
    crd_files: tuple[str, ...] | None = None


PRODUCTS: dict[str, ProductManifests] = {
    "jobset": ProductManifests(
        component="jobset",
        crd_dir="config/components/crd/bases",
        crd_kustomization="config/components/crd/kustomization.yaml",
        webhook_file="config/components/webhook/manifests.yaml",
        config_names={
            "MutatingWebhookConfiguration": "jobset-mutating-webhook-configuration",
            "ValidatingWebhookConfiguration": "jobset-validating-webhook-configuration",
        },
        selectors=_jobset_selectors,
    ),
    "kueue": ProductManifests(
        component="kueue",
        crd_dir="config/components/crd/bases",
        crd_kustomization="config/components/crd/kustomization.yaml",
        webhook_file="config/components/webhook/manifests.yaml",
        config_names={
            "MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
            "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration",
        },
        keep_webhook=_kueue_enabled,
        selectors=_kueue_selectors,
    ),
    "trainer": ProductManifests(
        component="trainer",
        crd_dir="manifests/base/crds",
        crd_kustomization=None,
        webhook_file="manifests/base/webhook/manifests.yaml",
        config_names={
            "MutatingWebhookConfiguration": "defaulter.trainer.kubeflow.org",
            "ValidatingWebhookConfiguration": "validator.trainer.kubeflow.org",
        },
        selectors=_trainer_selectors,
        selector_patch=("manifests/base/webhook/patch_validating.yaml", "objectSelector"),
    ),
    # The previous generation: its validator's name is the one its rotator
    # writes the CA into (cmd/training-operator.v1/main.go webhookConfigurationName).
    # Only PyTorchJob (the TO-* policies' kind; the manager runs with
    # --enable-scheme=pytorchjob): each of its CRDs is ~0.6 MB, and all six
    # would add seconds to every start.
    "training-operator": ProductManifests(
        component="training-operator",
        crd_dir="manifests/base/crds",
        crd_kustomization=None,
        webhook_file="manifests/base/webhook/manifests.yaml",
        config_names={
            "ValidatingWebhookConfiguration": "validator.training-operator.kubeflow.org",
        },
        keep_webhook=_pytorchjob_only,
        crd_files=("kubeflow.org_pytorchjobs.yaml",),
    ),
}


def load_documents(path: Path) -> list[Manifest]:
    if not path.is_file():
        raise ConformanceError(
            f"{path} is missing: this upstream version keeps its manifests elsewhere "
            "and is not supported by this harness version"
        )
    return [doc for doc in yaml.load_all(path.read_text(), Loader=SAFE_LOADER) if doc]


def loopback_client_config(port: int, path: str, ca_pem: bytes) -> dict[str, Any]:
    return {
        "url": f"https://{LOOPBACK}:{port}{path}",
        "caBundle": base64.b64encode(ca_pem).decode(),
    }


def _conversion_patches(source: Path, product: ProductManifests) -> dict[str, Manifest]:
    """CRD name -> the `spec.conversion` that the product's kustomization enables."""
    if product.crd_kustomization is None:
        return {}
    kustomization = load_documents(source / product.crd_kustomization)[0]
    base = (source / product.crd_kustomization).parent
    patches = {}
    for entry in kustomization.get("patches") or []:
        path = entry.get("path") if isinstance(entry, dict) else None
        if not path:
            continue
        for patch in load_documents(base / path):
            conversion = (patch.get("spec") or {}).get("conversion")
            if patch.get("kind") == "CustomResourceDefinition" and conversion:
                patches[patch["metadata"]["name"]] = conversion
    return patches


def crds(source: Path, product_key: str, webhook_port: int, ca_pem: bytes) -> list[Manifest]:
    product = PRODUCTS[product_key]
    crd_dir = source / product.crd_dir
    files = sorted(
        p
        for p in crd_dir.glob("*.yaml")
        if product.crd_files is None or p.name in product.crd_files
    )
    if not files:
        raise ConformanceError(f"no CRDs under {crd_dir}")
    conversions = _conversion_patches(source, product)
    result = []
    for path in files:
        for crd in load_documents(path):
            if crd.get("kind") != "CustomResourceDefinition":
                continue
            conversion = conversions.get(crd["metadata"]["name"])
            if conversion and conversion.get("strategy") == "Webhook":
                service = conversion["webhook"]["clientConfig"]["service"]
                crd["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": loopback_client_config(
                            webhook_port, service.get("path", "/convert"), ca_pem
                        ),
                        "conversionReviewVersions": conversion["webhook"].get(
                            "conversionReviewVersions", ["v1"]
                        ),
                    },
                }
            result.append(crd)
    return result


# The labels by which Kueue's user-facing ClusterRoles aggregate the per-kind
# editor and viewer roles (config/components/rbac: batch-user-role, batch-admin-role).
_KUEUE_ROLE_LABELS = ("rbac.kueue.x-k8s.io/batch-user", "rbac.kueue.x-k8s.io/batch-admin")


def _kueue_name_prefix(source: Path) -> str:
    kustomization = yaml.load(
        (source / "config/default/kustomization.yaml").read_text(), Loader=SAFE_LOADER
    )
    return str(kustomization.get("namePrefix") or "")


def _user_facing(role: Manifest) -> bool:
    labels = role["metadata"].get("labels") or {}
    selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
    aggregated = {key for s in selectors for key in (s.get("matchLabels") or {})}
    return any(label in labels or label in aggregated for label in _KUEUE_ROLE_LABELS)


def kueue_user_roles(source: Path) -> list[Manifest]:
    """Kueue's ClusterRoles for the people who run jobs (batch-user, batch-admin and
    the per-kind editor and viewer roles they aggregate), named as the release names
    them: what a cluster installed from the release gives its users, and what the
    harness's own managers, which run with the cluster's admin credentials, never
    needed. Kueue's manager role and the rest of its RBAC are left out."""
    prefix = _kueue_name_prefix(source)
    roles = []
    for path in sorted((source / "config/components/rbac").glob("*.yaml")):
        for role in load_documents(path):
            if role.get("kind") == "ClusterRole" and _user_facing(role):
                role["metadata"]["name"] = prefix + role["metadata"]["name"]
                roles.append(role)
    return roles


def _file_mentions(source: Path, relative: str, text: str) -> bool:
    path = source / relative
    return path.is_file() and text in path.read_text()


def webhook_configurations(
    source: Path, product_key: str, port: int, ca_pem: bytes
) -> list[Manifest]:
    product = PRODUCTS[product_key]
    patched = product.selector_patch is None or _file_mentions(source, *product.selector_patch)
    result = []
    for doc in load_documents(source / product.webhook_file):
        kind = doc.get("kind")
        if kind not in product.config_names:
            continue
        webhooks = []
        for webhook in doc.get("webhooks") or []:
            if not product.keep_webhook(webhook):
                continue
            service = webhook["clientConfig"].get("service") or {}
            webhook["clientConfig"] = loopback_client_config(port, service.get("path", "/"), ca_pem)
            if patched:
                webhook.update(product.selectors(webhook))
            webhooks.append(webhook)
        doc["metadata"] = {"name": product.config_names[kind]}
        doc["webhooks"] = webhooks
        result.append(doc)
    if not result:
        raise ConformanceError(f"no webhook configurations in {source / product.webhook_file}")
    return result
