"""Breaks: cluster changes that make policies false, for `prove` (fixtures/breaks.yaml).

A break is data: what it changes (admission policies, a webhook's
namespaceSelector, a CRD's validation rules), rendered for the installed
release. Applying and reverting it is `prove`'s job; here it is only read,
checked and rendered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml

from trainjob_conformance.errors import ConformanceError

ADMISSION = "admission"
WEBHOOK = "webhook"
CRD = "crd"
MANAGER = "manager"
# A write a faulty upgrade would make, made by the harness during `upgrade --prove`
# (the UP family's objects exist only there); `action` names it (upgrade/standins.py).
STAND_IN = "stand-in"
KINDS = (ADMISSION, WEBHOOK, CRD, MANAGER, STAND_IN)
# The label `prove` puts on the namespaces of the tests it runs for a break,
# and that the break's bindings and webhook selectors key on.
BREAK_LABEL = "trainjob-conformance.kubeflow.org/break"
_REQUIRED = {
    ADMISSION: ("description", "manifests"),
    WEBHOOK: ("description", "webhook", "probe"),
    CRD: ("description", "crd", "field", "probe"),
    MANAGER: ("description", "component"),
    STAND_IN: ("description", "action"),
}
# Keys a kind may have beside its required ones.
_OPTIONAL = {CRD: ("probe_update",), WEBHOOK: ("probe_defaults",), ADMISSION: ("cluster",)}
# admission: which cluster takes the policies. The worker is the MultiKueue worker each
# pytest child starts for itself, so its break goes with it (prove/worker_break.py).
MANAGER_CLUSTER = "manager"
WORKER_CLUSTER = "worker"
CLUSTERS = (MANAGER_CLUSTER, WORKER_CLUSTER)


@dataclass(frozen=True)
class Break:
    name: str
    kind: str
    description: str
    manifests: str = ""  # admission: Jinja YAML documents
    webhook: str = ""  # webhook: the webhook's name inside its configuration
    crd: str = ""  # crd: the CRD's name
    field: str = ""  # crd: dotted path of the field whose rules are dropped ("." the root)
    probe: str = ""  # webhook, crd: Jinja YAML of a dry-run request refused until applied
    # crd: a merge patch (Jinja YAML) of the probe's object, sent as a dry-run update,
    # the object created first: how a rule that only judges updates (self == oldSelf) shows.
    probe_update: str = ""
    # webhook, for a defaulting (mutating) webhook, which refuses nothing: a dotted path
    # (list items by index) that the probe's dry-run answer carries while the webhook
    # acts and lacks once the break is in effect.
    probe_defaults: str = ""
    component: str = ""  # manager: the component whose manager is stopped (jobset, kueue, ...)
    action: str = ""  # stand-in: what the harness does in the faulty upgrade's place
    cluster: str = MANAGER_CLUSTER  # admission: manager, or the MultiKueue worker

    @property
    def on_worker(self) -> bool:
        return self.cluster == WORKER_CLUSTER

    @property
    def scoped(self) -> bool:
        """Whether it touches only the namespaces labelled for it (else it runs alone)."""
        return self.kind in (ADMISSION, WEBHOOK)

    @property
    def label_value(self) -> str:
        """The break's name as a label value (a pack's `pack/name` becomes `pack.name`)."""
        return self.name.replace("/", ".")

    def selector(self) -> dict[str, Any]:
        return {"matchLabels": {BREAK_LABEL: self.label_value}}

    def render(self, text: str, **variables: Any) -> list[dict[str, Any]]:
        """The YAML documents of `text` (manifests or probe), rendered for this cluster."""
        env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
        try:
            rendered = env.from_string(text).render(
                name=self.label_value, selector=self.selector(), **variables
            )
            return [doc for doc in yaml.safe_load_all(rendered) if doc]
        except (jinja2.TemplateError, yaml.YAMLError) as error:
            first = str(error).splitlines()[0]
            raise ConformanceError(f"break {self.name} does not render: {first}") from None


def load_breaks(path: Path, prefix: str = "") -> dict[str, Break]:
    """The breaks of one file, by name (`prefix/name` for a pack's)."""
    if not path.is_file():
        raise ConformanceError(f"break catalog {path} not found")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        first = str(error).splitlines()[0]
        raise ConformanceError(f"break catalog {path} cannot be read: {first}") from None
    if not isinstance(raw, dict):
        raise ConformanceError(f"{path} must map break names to breaks")
    breaks = {}
    for name, entry in raw.items():
        kind = entry.get("kind") if isinstance(entry, dict) else None
        if kind not in KINDS:
            raise ConformanceError(
                f"{path}: break {name}: kind {kind!r} (one of {', '.join(KINDS)})"
            )
        missing = [key for key in _REQUIRED[kind] if not entry.get(key)]
        unknown = sorted(set(entry) - {"kind", *_REQUIRED[kind], *_OPTIONAL.get(kind, ())})
        if missing or unknown:
            what = f"lacks {', '.join(missing)}" if missing else f"has unknown {', '.join(unknown)}"
            raise ConformanceError(f"{path}: break {name} ({kind}) {what}")
        if entry.get("cluster", MANAGER_CLUSTER) not in CLUSTERS:
            raise ConformanceError(
                f"{path}: break {name}: cluster {entry['cluster']!r} (one of {', '.join(CLUSTERS)})"
            )
        full = f"{prefix}/{name}" if prefix else str(name)
        fields = {key: str(value) for key, value in entry.items() if key != "kind"}
        breaks[full] = Break(name=full, kind=kind, **fields)
    return breaks
