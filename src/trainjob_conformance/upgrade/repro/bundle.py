"""An upgrade's bundle: the old releases' manifests, the objects in flight, the new
releases' manifests of each step, repro.sh, and a README that is a draft upstream issue.

Nothing is recorded from a run here: the steps are the ones `upgrade` itself
takes, so the bundle is written from the catalog, the two profiles and the
releases' own manifests (built from their Go modules as kind installs them).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.cluster.introspect import TRAINJOB_CRD
from trainjob_conformance.cluster.labels import KUEUE_MANAGED_LABEL
from trainjob_conformance.cluster.releases.install_plan import CONTROLLERS, install_plan
from trainjob_conformance.cluster.releases.manifests import InstallStep, release_images
from trainjob_conformance.cluster.releases.upgrade import dropped_webhooks, upgrade_phases
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.catalog import Policy
from trainjob_conformance.render.overrides import detect_shape
from trainjob_conformance.render.templates import DEFAULT_KUEUE_API_VERSION, TemplateSet
from trainjob_conformance.report.repro.issue import REPOSITORIES, upstream_thread
from trainjob_conformance.stack.profiles import Profile, with_version
from trainjob_conformance.upgrade.repro.scenarios import (
    Delete,
    Observe,
    Read,
    Scenario,
    Wait,
    namespace_labels,
    scenario_for,
)
from trainjob_conformance.upgrade.repro.script import ReleaseStep, upgrade_script
from trainjob_conformance.upgrade.steps import UpgradePlan

# Component manifests of a profile's releases, as kind installs them (manifests.py).
StepsOf = Callable[[Profile, list[str] | None], list[InstallStep]]
_CLUSTER_QUEUE_CRD = "clusterqueues.kueue.x-k8s.io"


def _crd(steps: list[InstallStep], name: str) -> dict[str, Any] | None:
    for install in steps:
        for document in install.documents():
            if (
                document["kind"] == "CustomResourceDefinition"
                and document["metadata"]["name"] == name
            ):
                return document
    return None


def _storage_version(crd: dict[str, Any]) -> dict[str, Any]:
    for version in crd["spec"]["versions"]:
        if version.get("served") and version.get("storage"):
            return version
    raise ConformanceError(f"{crd['metadata']['name']} serves no storage version")


def templates_for(steps: list[InstallStep], directory: Path) -> TemplateSet:
    """The templates rendered for the old releases: the override field their TrainJob
    CRD has, and the Kueue API version their Kueue stores."""
    trainjob = _crd(steps, TRAINJOB_CRD)
    if trainjob is None:
        raise ConformanceError(f"the old releases' manifests have no {TRAINJOB_CRD}")
    schema = _storage_version(trainjob)["schema"]["openAPIV3Schema"]
    shape = detect_shape(schema["properties"]["spec"]["properties"])
    queue = _crd(steps, _CLUSTER_QUEUE_CRD)
    api = (
        f"kueue.x-k8s.io/{_storage_version(queue)['name']}"
        if queue is not None
        else DEFAULT_KUEUE_API_VERSION
    )
    return TemplateSet(directory, shape, api)


class _Copies:
    """The manifests the phases name, copied into the bundle under a folder per step."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self._relative: dict[str, str] = {}

    def add(self, step: ReleaseStep, folder: str) -> None:
        for phase in step.phases:
            for command in phase.commands:
                for word in command.args:
                    if word.endswith(".yaml") and word not in self._relative:
                        relative = f"releases/{folder}/{Path(word).name}"
                        self._relative[word] = relative
                        self.files[relative] = Path(word).read_text()

    def relative(self, path: str) -> str:
        """The bundle's path of a manifest the phases name by its path in the cache."""
        return self._relative[path]


def release_steps(
    plan: UpgradePlan, steps_of: StepsOf, copies: _Copies
) -> tuple[list[InstallStep], ReleaseStep, list[ReleaseStep]]:
    """The old releases' manifests, their install, and each upgrade step, every file the
    phases name copied into the bundle."""
    old = steps_of(plan.source, None)
    install = ReleaseStep(
        f"the releases of {plan.source.name}: "
        + ", ".join(f"{c} {plan.source.version(c)}" for c in CONTROLLERS if plan.source.has(c)),
        install_plan(old, force_conflicts=True),
        [],
    )
    copies.add(install, "from")
    upgrades = []
    current = plan.source
    for step in plan.steps:
        before = steps_of(current, [step.component])
        current = with_version(current, step.component, step.to_version)
        after = steps_of(current, [step.component])
        phases = upgrade_phases(after, old_steps=before)
        release = ReleaseStep(
            step.label,
            [*phases.crds, *phases.manager, *phases.after],
            dropped_webhooks(before, after),
            phases.recreated,
        )
        copies.add(release, f"to-{step.component}")
        upgrades.append(release)
    return old, install, upgrades


def _versions(plan: UpgradePlan) -> str:
    lines = []
    for component in CONTROLLERS:
        if not plan.source.has(component):
            continue
        old, new = plan.source.version(component), plan.target.version(component)
        lines.append(f"- {component} {old}" + (f" -> {new}" if new != old else " (not upgraded)"))
    lines.append(
        f"- Kubernetes {plan.source.version('kubernetes')} (the profiles' pin; the releases' own support ranges apply)"
    )
    return "\n".join(lines)


def _expected_words(item: Observe) -> str:
    if item.how == "stays":
        within = f" at every read for {item.seconds} s" if item.seconds else ""
        return f"the value remembered before the upgrade{within}"
    value = (
        f"the value remembered before the upgrade ({item.expected})"
        if item.expected.startswith("$")
        else f"`{item.expected}`"
    )
    return f"{value} within {item.seconds} s" if item.seconds else value


def _upgrade_words(step: ReleaseStep) -> str:
    dropped = ", ".join(name for _, name in step.dropped_webhooks)
    also = f"; delete {dropped}, which it no longer has" if dropped else ""
    # What an update cannot change is deleted first (cluster/releases/upgrade.py says why).
    first = f"; {', '.join(step.recreated)} deleted first, since an update cannot change it"
    return (
        f"Upgrade {step.title}: its CRDs, then its manager and the rollout, then what its "
        f"webhooks judge{first if step.recreated else ''}{also}."
    )


def _kubectl(read: Read) -> str:
    """The read as a command to paste (the namespace filled in afterwards)."""
    words = ["$NS" if word == "$NS" else shlex.quote(word) for word in read.args()]
    return f"`kubectl {' '.join(words)}`"


def _step_words(scenario: Scenario, upgrades: list[ReleaseStep]) -> str:
    """The script's steps as a numbered list, for a reader without bash."""
    words = ["Install the old releases (`releases/from/`), as their manifests install them."]
    words += [f"Create `objects/{name}`." for name, _ in scenario.objects]
    for item in scenario.before:
        verb = "Wait for" if isinstance(item, Wait) else "Remember"
        words.append(f"{verb} {item.title}: {_kubectl(item.read)}.")
    words += [_upgrade_words(step) for step in upgrades]
    for item in scenario.after:
        if isinstance(item, Delete):
            words.append(f"{item.title[0].upper()}{item.title[1:]}.")
        else:
            words.append(
                f"**Observe** {item.title}: {_kubectl(item.read)}; expected: "
                f"{_expected_words(item)}."
            )
    lines = [f"{number}. {text}" for number, text in enumerate(words, 1)]
    return "\n".join(lines).replace("$NS", scenario.namespace)


def readme(
    policy: Policy,
    plan: UpgradePlan,
    scenario: Scenario,
    upgrades: list[ReleaseStep],
    files: list[str],
) -> str:
    trainer = plan.target.version("trainer")
    reference = policy.gap_reference(trainer, plan.source.versions, plan.target.versions)
    thread = upstream_thread(reference)
    where = (
        thread
        or f"https://github.com/{REPOSITORIES.get(policy.component, policy.component)}/issues"
    )
    listing = "\n".join(f"- `{name}`" for name in files if not name.startswith("releases/"))
    folders = sorted({name.split("/")[1] for name in files if name.startswith("releases/")})
    notes = "".join(f"\n{note}\n" for note in scenario.notes)
    moved = ", ".join(step.label for step in plan.steps)
    return f"""# Upgrading {moved}: "{policy.title}" does not hold

<!-- A draft upstream issue, written by trainjob-conformance from its catalog and the
releases' own manifests. Review it before filing: {where}. -->

## What happens

A cluster that runs the old releases, with TrainJobs in flight, is upgraded one
component at a time to the new releases, as their manifests install them. Then:
{policy.id} does not hold ({policy.statement})

The catalog's cause: {reference or "(none named)"}

## Expected

{scenario.expected}.
{notes}
## Versions

{_versions(plan)}

## Reproduce

On a new cluster whose nodes pull the releases' images (registry.k8s.io, ghcr.io),
with kubectl >= 1.31 and nothing else. A rolling update runs the old and the new
manager side by side, so the nodes need room for both: a kind cluster with a worker
node has it (on one node of 2 CPUs the new Kueue Pod stays Pending, "Insufficient
cpu").

```bash
./repro.sh ~/.kube/config     # or: KUBECONFIG=... ./repro.sh
```

The script installs the old releases (a controller already at the old release is
re-applied; one at another release stops it with exit 2), creates the objects in
namespace `{scenario.namespace}`, upgrades each component, and prints `REPRODUCED`
with what it saw (exit 0) or `NOT REPRODUCED` (exit 1); exit 2 means the cluster
did not get to the observation (it says which step and what it saw). It deletes
its objects at the end (`REPRO_KEEP=1` keeps them); the releases stay upgraded.
`REPRO_TIMEOUT` bounds each wait (seconds, default 120), `KUBECTL` names another
kubectl.

Kueue is installed with two settings of the harness's own: it leaves alone the
namespaces labelled `{KUEUE_MANAGED_LABEL}=false` (the namespace selector of its
configuration and of its job webhooks), and its integrations are the stack's
frameworks.

The steps:

{_step_words(scenario, upgrades)}

## Where it comes from

- Source: {policy.source}
- Policy {policy.id} of trainjob-conformance, judged by `trainjob-conformance upgrade --from {plan.source.name} --to {plan.target.name}`.

## Files

{listing}
- `releases/`: the manifests each step applies ({", ".join(folders)})
"""


def upgrade_bundle_files(
    policy: Policy, plan: UpgradePlan, steps_of: StepsOf, templates: Path
) -> dict[str, str]:
    """Each file of the bundle by its relative path."""
    copies = _Copies()
    old, install, upgrades = release_steps(plan, steps_of, copies)
    scenario = scenario_for(policy.id, templates_for(old, templates))
    labels = namespace_labels(scenario)
    starts = {c: image for c, image in release_images(old).items() if c in CONTROLLERS}
    header = [
        f"Reproduces {policy.id}: {policy.title}",
        f"on an upgrade from {plan.source.name} to {plan.target.name}, with kubectl alone.",
        "Usage: ./repro.sh [KUBECONFIG]   (a new cluster: it installs the old releases)",
        "Exit: 0 REPRODUCED, 1 NOT REPRODUCED, 2 the cluster did not get to the observation.",
        "Env: KUBECTL, REPRO_TIMEOUT (seconds per wait, default 120), REPRO_KEEP=1 keeps objects.",
    ]
    files = dict(copies.files)
    for name, manifest in scenario.objects:
        files[f"objects/{name}"] = yaml.safe_dump(manifest, sort_keys=False)
    files["repro.sh"] = upgrade_script(
        header, scenario, install, upgrades, starts, copies.relative, labels
    )
    names = sorted([*files, "README.md"])
    files["README.md"] = readme(policy, plan, scenario, upgrades, names)
    return files
