"""Applying one break to a live cluster, waiting until it is in effect, and undoing it.

Every break gets a probe namespace of its own, labelled like the namespaces of
the tests run under it: admission policies and narrowed webhooks act only
there, so breaks that touch different namespaces can be in place at once.
`revert` puts back exactly what `apply` changed and then checks that the
cluster answers as it did before.
"""

from __future__ import annotations

import contextlib
import copy
import json
import uuid
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.labels import KUEUE_MANAGED_LABEL
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import Conflict, NotFound, Rejected
from trainjob_conformance.kube.kinds import NAMESPACE
from trainjob_conformance.kube.waits import NotYet, WaitTimeout, wait_for
from trainjob_conformance.lifecycle.ledger import ProcessIdentity
from trainjob_conformance.policies.breaks import (
    ADMISSION,
    BREAK_LABEL,
    CRD,
    MANAGER,
    WEBHOOK,
    Break,
)
from trainjob_conformance.prove import managers
from trainjob_conformance.prove.sentinel import settle

# What prove writes carries this label: a later run finds what an interrupted one left.
PROVE_LABEL = "trainjob-conformance.kubeflow.org/prove"
_WEBHOOK_CONFIGURATIONS = (
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
)
_CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
PROBE_SECONDS = 30
# On a CRD whose rules a break dropped: what was dropped, so that a later run
# can put it back if this one is killed before its revert.
DROPPED_RULES_ANNOTATION = "trainjob-conformance.kubeflow.org/prove-dropped-rules"


def field_schema(version: dict[str, Any], field: str) -> dict[str, Any]:
    """The schema node of a dotted field in one version of a CRD ({} if absent);
    "." is the schema's root, where rules on metadata live."""
    node = (version.get("schema") or {}).get("openAPIV3Schema") or {}
    if field == ".":
        return node
    for part in field.split("."):
        node = (node.get("properties") or {}).get(part) or {}
    return node


def value_at(document: Any, path: str) -> Any:
    """The value at a dotted path (list items by index), None where absent."""
    for part in path.split("."):
        if isinstance(document, list):
            document = document[int(part)] if part.isdigit() and int(part) < len(document) else None
        elif isinstance(document, dict):
            document = document.get(part)
        else:
            return None
    return document


def probe_namespace(item: Break) -> str:
    """A namespace of this application of the break: one of an earlier run may still
    be terminating under the same break's name."""
    return f"tjc-prove-{item.label_value.replace('.', '-')[:44]}-{uuid.uuid4().hex[:6]}"


def cannot_host(item: Break, kubeconfig: Path) -> str | None:
    """Why this cluster cannot take the break, so its pairs are not run (a capability
    the cluster lacks, not a test that could not fail), or None."""
    if item.kind == MANAGER:
        return managers.not_here(kubeconfig, item.component)
    return None


class AppliedBreak:
    """One break on one cluster: apply(), then revert() (also after a failure)."""

    def __init__(
        self, kube: Kube, item: Break, variables: dict[str, Any], kubeconfig: Path
    ) -> None:
        self.kube = kube
        self.kubeconfig = kubeconfig
        self._stopped: ProcessIdentity | None = None
        self.item = item
        self.variables = variables
        self.namespace = probe_namespace(item)
        self._written: list[dict[str, Any]] = []
        self._original: dict[str, Any] | None = None
        # A break on the MultiKueue worker: its policies, for the children to apply.
        self.worker_documents: list[dict[str, Any]] = []

    # -- apply ------------------------------------------------------------

    def apply(self) -> None:
        self._make_probe_namespace()
        if self.item.kind == ADMISSION and self.item.on_worker:
            self.worker_documents = self._labelled_documents()
        elif self.item.kind == ADMISSION:
            self._apply_admission()
        elif self.item.kind == WEBHOOK:
            self._expect_probe("refused", before=True)
            self._narrow_webhook()
            self._expect_probe("accepted")
        elif self.item.kind == CRD:
            self._expect_probe("refused", before=True)
            self._drop_rules()
            self._expect_probe("accepted")
        elif self.item.kind == MANAGER:
            process = managers.manager_process(self.kubeconfig, self.item.component)
            self._stopped = process
            managers.stop(process)

    def revert(self) -> list[str]:
        """Undo the break; what could not be restored, one line each (empty: all restored)."""
        problems: list[str] = []
        try:
            # A worker's break goes with the worker, which each child deletes.
            if self.item.kind == ADMISSION and not self.item.on_worker:
                problems += self._revert_admission()
            elif self.item.kind == WEBHOOK and self._original is not None:
                problems += self._restore_webhook()
            elif self.item.kind == CRD and self._original is not None:
                problems += self._restore_crd()
            elif self.item.kind == MANAGER and self._stopped is not None:
                problems += managers.resume(self.kube, self._stopped)
        finally:
            with contextlib.suppress(NotFound):
                self.kube.delete(*NAMESPACE, self.namespace, propagation_policy="Background")
        return problems

    def _make_probe_namespace(self) -> None:
        self.kube.apply(
            {
                "apiVersion": NAMESPACE.api_version,
                "kind": NAMESPACE.kind,
                "metadata": {
                    "name": self.namespace,
                    "labels": {
                        BREAK_LABEL: self.item.label_value,
                        PROVE_LABEL: "probe",
                        # The probes are about the Trainer's and training-operator's answers.
                        KUEUE_MANAGED_LABEL: "false",
                    },
                },
            }
        )

    # -- admission policies -----------------------------------------------

    def _labelled_documents(self) -> list[dict[str, Any]]:
        documents = self.item.render(self.item.manifests, **self.variables)
        for document in documents:
            labels = document.setdefault("metadata", {}).setdefault("labels", {})
            labels[PROVE_LABEL] = "break"
        return documents

    def _apply_admission(self) -> None:
        for document in self._labelled_documents():
            self.kube.apply(document)
            self._written.append(document)
        for mutating in self._kinds_written():
            settle(self.kube, self.namespace, self._object_prefix(), mutating)

    def _kinds_written(self) -> list[bool]:
        kinds = {doc["kind"].startswith("Mutating") for doc in self._written}
        return sorted(kinds)

    def _object_prefix(self) -> str:
        return self.item.label_value

    def _revert_admission(self) -> list[str]:
        kinds = self._kinds_written()
        for document in reversed(self._written):
            with contextlib.suppress(NotFound):
                self.kube.delete(
                    document["apiVersion"], document["kind"], document["metadata"]["name"]
                )
        for mutating in kinds:
            settle(self.kube, self.namespace, self._object_prefix(), mutating)
        left = []
        for document in self._written:
            with contextlib.suppress(NotFound):
                self.kube.get(
                    document["apiVersion"], document["kind"], document["metadata"]["name"]
                )
                left.append(f"{document['kind']} {document['metadata']['name']} is still there")
        return left

    # -- webhooks ---------------------------------------------------------

    def _find_webhook(self) -> tuple[tuple[str, str], dict[str, Any], int]:
        for kind in _WEBHOOK_CONFIGURATIONS:
            for configuration in self.kube.list(*kind):
                for index, webhook in enumerate(configuration.get("webhooks") or []):
                    if webhook.get("name") == self.item.webhook:
                        return kind, configuration, index
        raise ConformanceError(
            f"break {self.item.name}: the cluster has no admission webhook named {self.item.webhook}"
        )

    def _narrow_webhook(self) -> None:
        kind, configuration, index = self._find_webhook()
        webhook = configuration["webhooks"][index]
        self._original = {
            "kind": kind,
            "name": configuration["metadata"]["name"],
            "index": index,
            "selector": copy.deepcopy(webhook.get("namespaceSelector") or {}),
        }
        narrowed = copy.deepcopy(self._original["selector"])
        narrowed.setdefault("matchExpressions", []).append(
            {"key": BREAK_LABEL, "operator": "NotIn", "values": [self.item.label_value]}
        )
        self._set_selector(narrowed)

    def _set_selector(self, selector: dict[str, Any]) -> None:
        assert self._original is not None
        # "add" sets a member whether or not the stored webhook has it.
        patch = [
            {
                "op": "add",
                "path": f"/webhooks/{self._original['index']}/namespaceSelector",
                "value": selector,
            }
        ]
        self.kube.patch(
            *self._original["kind"],
            self._original["name"],
            patch,
            content_type="application/json-patch+json",
        )

    def _restore_webhook(self) -> list[str]:
        assert self._original is not None
        self._set_selector(self._original["selector"])
        self._expect_probe("refused")
        _, configuration, index = self._find_webhook()
        now = configuration["webhooks"][index].get("namespaceSelector") or {}
        if now != self._original["selector"]:
            return [f"webhook {self.item.webhook} has namespaceSelector {json.dumps(now)}"]
        return []

    # -- CRDs -------------------------------------------------------------

    def _drop_rules(self) -> None:
        crd = self.kube.get(*_CRD, self.item.crd)
        self._original = copy.deepcopy(crd["spec"])
        dropped = {}
        for version in crd["spec"]["versions"]:
            rules = field_schema(version, self.item.field).pop("x-kubernetes-validations", None)
            if rules is not None:
                dropped[version["name"]] = rules
        annotations = crd["metadata"].setdefault("annotations", {})
        annotations[DROPPED_RULES_ANNOTATION] = json.dumps(
            {"field": self.item.field, "rules": dropped}
        )
        if not dropped:
            raise ConformanceError(
                f"break {self.item.name}: {self.item.crd} has no validation rules on "
                f"{self.item.field} to drop"
            )
        self.kube.replace(crd)

    def _restore_crd(self) -> list[str]:
        assert self._original is not None
        crd = self.kube.get(*_CRD, self.item.crd)
        crd["spec"] = copy.deepcopy(self._original)
        (crd["metadata"].get("annotations") or {}).pop(DROPPED_RULES_ANNOTATION, None)
        self.kube.replace(crd)
        self._expect_probe("refused")
        now = self.kube.get(*_CRD, self.item.crd)["spec"]
        if now != self._original:
            return [f"CRD {self.item.crd} differs from before the break"]
        return []

    # -- probes -----------------------------------------------------------

    def _probe_answer(self) -> str:
        """'accepted' or 'refused: <the cluster's words>' for the break's dry-run probe.

        A defaulting webhook refuses nothing: for its break (`probe_defaults`) the
        probe counts as refused while the answer carries what the webhook sets,
        and as accepted once it does not."""
        (document,) = self.item.render(self.item.probe, **self.variables)
        document.setdefault("metadata", {})["namespace"] = self.namespace
        try:
            if self.item.probe_update:
                self._update_probe(document)
                return "accepted"
            answer = self.kube.create(document, dry_run=True)
        except Rejected as refused:
            return f"refused: {refused.message}"
        path = self.item.probe_defaults
        if path and value_at(answer, path) is not None:
            return f"refused: webhook {self.item.webhook} set {path}"
        return "accepted"

    def _update_probe(self, document: dict[str, Any]) -> None:
        """The probe's object, created once in the break's namespace (deleted with it),
        then the break's patch of it as a dry-run update."""
        (patch,) = self.item.render(self.item.probe_update, **self.variables)
        with contextlib.suppress(Conflict):
            self.kube.create(document)
        self.kube.patch(
            document["apiVersion"],
            document["kind"],
            document["metadata"]["name"],
            patch,
            namespace=self.namespace,
            dry_run=True,
        )

    def _expect_probe(self, wanted: str, before: bool = False) -> None:
        if before:
            answer = self._probe_answer()
            if not answer.startswith(wanted):
                raise ConformanceError(
                    f"break {self.item.name}: its probe must be refused before the break, "
                    f"but was {answer}: the probe shows nothing on this cluster"
                )
            return
        seen = {"answer": ""}

        def answered() -> bool | NotYet:
            seen["answer"] = self._probe_answer()
            return seen["answer"].startswith(wanted) or NotYet(seen["answer"])

        try:
            wait_for(f"break {self.item.name}'s probe to be {wanted}", answered, PROBE_SECONDS)
        except WaitTimeout:
            raise ConformanceError(
                f"break {self.item.name}: its probe was not {wanted} within {PROBE_SECONDS} s "
                f"(last answer: {seen['answer']})"
            ) from None
