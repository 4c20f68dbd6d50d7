"""What a live cluster says about the stack installed on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import NotFound
from trainjob_conformance.kube.kinds import CRD, MUTATING_WEBHOOKS, NAMESPACE, VALIDATING_WEBHOOKS

TRAINJOB_CRD = "trainjobs.trainer.kubeflow.org"
# The Trainer's TrainJob validator: this name in the webhook manifests and the
# Helm chart of every v2 release (v2.0.1 to v2.3.0).
TRAINER_VALIDATOR = "validator.trainjob.trainer.kubeflow.org"


def trainjob_spec_properties(kube: Kube) -> dict[str, Any]:
    """The `spec` properties of the served TrainJob version's schema."""
    try:
        crd = kube.get(*CRD, TRAINJOB_CRD)
    except NotFound:
        raise ConformanceError(
            f"the cluster has no {TRAINJOB_CRD} CRD: install Kubeflow Trainer v2 first"
        ) from None
    for version in crd["spec"]["versions"]:
        if version.get("served") and version.get("storage"):
            schema = version["schema"]["openAPIV3Schema"]
            return dict(schema["properties"]["spec"]["properties"])
    raise ConformanceError(f"{TRAINJOB_CRD} serves no storage version")


# CRD that proves each component is installed.
REQUIRED_CRDS = {
    "trainer": TRAINJOB_CRD,
    "jobset": "jobsets.jobset.x-k8s.io",
    "kueue": "workloads.kueue.x-k8s.io",
}
# Image path fragments of the upstream controller images, for version detection.
CONTROLLER_IMAGES = {
    "trainer": "kubeflow/trainer/trainer-controller-manager",
    "jobset": "jobset/jobset",
    "kueue": "kueue/kueue",
}


# Controllers the catalog uses where present (the training-operator's policies are
# skipped without it), never required.
OPTIONAL_CONTROLLER_IMAGES = {"training-operator": "kubeflow/training-operator"}


@dataclass(frozen=True)
class DetectedStack:
    versions: dict[str, str]
    sources: dict[str, str]  # component -> how its version was found
    controller_pods: dict[str, tuple[str, str]]  # component -> (namespace, label selector)
    # component -> (namespace, name) of the Deployment its version was read from
    deployments: dict[str, tuple[str, str]] = field(default_factory=dict)


def missing_components(kube: Kube) -> list[str]:
    missing = []
    for component, crd in REQUIRED_CRDS.items():
        try:
            kube.get(*CRD, crd)
        except NotFound:
            missing.append(f"{component} (no CRD {crd})")
    return missing


def image_tag(image: str) -> str | None:
    """The tag an image is named with; None for none, or one pinned by digest."""
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail or ":" not in tail:
        return None
    return tail.rsplit(":", 1)[1]


def detect_stack(kube: Kube) -> DetectedStack:
    """Versions from the API server and from the ready controller Deployments' images.

    Each of JobSet, Kueue and Trainer must run as a Deployment with at least
    one ready replica and an image tagged with its release; otherwise the
    cluster is refused, naming what is missing or not ready. Nothing is
    assumed from a profile: a version the harness reports is one the cluster
    stated.
    """
    versions: dict[str, str] = {}
    sources: dict[str, str] = {}
    pods: dict[str, tuple[str, str]] = {}
    deployments: dict[str, tuple[str, str]] = {}
    not_ready: list[str] = []
    info = kube.version.get_code()
    versions["kubernetes"] = info.git_version.split("+")[0]
    sources["kubernetes"] = "API server /version"
    for deployment in kube.apps.list_deployment_for_all_namespaces().items:
        where = f"Deployment {deployment.metadata.namespace}/{deployment.metadata.name}"
        for container in deployment.spec.template.spec.containers:
            image = container.image or ""
            for component, fragment in {**CONTROLLER_IMAGES, **OPTIONAL_CONTROLLER_IMAGES}.items():
                tag = image_tag(image)
                if fragment not in image or not tag or component in versions:
                    continue
                if not (deployment.status.ready_replicas or 0):
                    not_ready.append(f"{component} ({where} has no ready replica)")
                    continue
                versions[component] = tag if tag.startswith("v") else f"v{tag}"
                sources[component] = f"image of {where}"
                deployments[component] = (deployment.metadata.namespace, deployment.metadata.name)
                labels = deployment.spec.selector.match_labels or {}
                pods[component] = (
                    deployment.metadata.namespace,
                    ",".join(f"{k}={v}" for k, v in labels.items()),
                )
    problems = [p for p in not_ready if p.split(" ", 1)[0] not in versions]
    problems += [
        f"{component} (no Deployment runs an image of {fragment} with a release tag)"
        for component, fragment in CONTROLLER_IMAGES.items()
        if component not in versions and not any(p.startswith(component) for p in not_ready)
    ]
    if problems:
        raise ConformanceError(
            f"cannot tell the stack's versions: {'; '.join(problems)}; the harness reads them "
            "from the ready controller Deployments' image tags"
        )
    return DetectedStack(versions, sources, pods, deployments)


def running_images(kube: Kube, pods: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Image -> image ID of each started container of the controllers' Pods, as their
    kubelets report them: which images ran (for pulled images, the registry digest),
    whatever the provider built, loaded or let the nodes pull."""
    ran: dict[str, str] = {}
    for namespace, selector in sorted(pods.values()):
        for pod in kube.core.list_namespaced_pod(namespace, label_selector=selector).items:
            for status in pod.status.container_statuses or []:
                if status.image_id:
                    ran[status.image] = status.image_id
    return ran


def pod_log_tailer(kube: Kube, pods: dict[str, tuple[str, str]]) -> Callable[[str, int], str]:
    """Log tails of in-cluster controllers, found by namespace and label selector."""

    def tail(component: str, lines: int) -> str:
        if component not in pods:
            return f"(no controller Deployment found for {component})"
        namespace, selector = pods[component]
        found = kube.core.list_namespaced_pod(namespace, label_selector=selector).items
        if not found:
            return f"(no {component} Pod in {namespace} matching {selector})"
        return str(
            kube.core.read_namespaced_pod_log(found[0].metadata.name, namespace, tail_lines=lines)
        )

    return tail


def _selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A label selector (matchLabels, matchExpressions) against labels; none selects all."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _rule_covers(rule: dict[str, Any], group: str, resource: str, operation: str) -> bool:
    def has(field: str, value: str) -> bool:
        return bool({value, "*"} & set(rule.get(field) or []))

    return has("apiGroups", group) and has("resources", resource) and has("operations", operation)


def validators_naming(
    kube: Kube, group: str, resource: str, operation: str, namespace: str
) -> list[str]:
    """The validating webhooks whose rules name this resource (not only "*") and that
    judge `operation` on an unlabelled object of it in `namespace`, by the namespace's
    labels: those whose denial the API server may report for it.

    Read from the cluster, so that a policy about one webhook's answer can tell
    when another would answer the same request (the API server calls them in
    parallel and reports whichever denial comes first).
    """
    labels = dict(kube.get(*NAMESPACE, namespace)["metadata"].get("labels") or {})
    names = []
    for configuration in kube.list(*VALIDATING_WEBHOOKS):
        for webhook in configuration.get("webhooks") or []:
            rules = webhook.get("rules") or []
            if not any(resource in (r.get("resources") or []) for r in rules):
                continue
            if not any(_rule_covers(r, group, resource, operation) for r in rules):
                continue
            if _selects(webhook.get("namespaceSelector"), labels) and _selects(
                webhook.get("objectSelector"), {}
            ):
                names.append(webhook["name"])
    return sorted(names)


def mutating_webhook(kube: Kube, name: str) -> tuple[str, dict[str, Any]] | None:
    """The mutating webhook registered under `name` (e.g. mjobset.kb.io), with the name
    of the configuration that holds it, whatever the installer called that."""
    for configuration in kube.list(*MUTATING_WEBHOOKS):
        for webhook in configuration.get("webhooks") or []:
            if webhook.get("name") == name:
                return str(configuration["metadata"]["name"]), webhook
    return None
