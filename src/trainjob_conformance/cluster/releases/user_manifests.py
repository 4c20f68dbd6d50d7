"""An upgrade's new releases as the user's own installer renders them
(`upgrade --cluster existing --manifests DIR`).

A cluster installed from a Helm chart, or from manifests of its own, runs its
controllers under names the releases' manifests do not give them: applying the
releases' own would add a second Deployment beside each. With `--manifests`,
the user hands the harness what their installer renders for the new release
(`helm template`, a kustomize overlay), one folder per component moved:

    DIR/jobset/*.yaml   DIR/trainer/*.yaml   DIR/kueue/*.yaml   DIR/training-operator/*.yaml

The harness applies them with the same phases as the releases' own (CRDs, then
the rest and the rollout of the one Deployment they hold, then what the new
webhooks judge: the Trainer's runtimes), and follows the Deployment they name.
Everything is checked before a cluster is touched, one line per problem.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.cluster.introspect import image_tag
from trainjob_conformance.cluster.releases.install_plan import CONTROLLERS, ROLLOUT_STEPS
from trainjob_conformance.cluster.releases.manifests import InstallStep, write_documents
from trainjob_conformance.errors import ConformanceError

MANIFEST_SUFFIXES = (".yaml", ".yml")
# Objects the new webhooks judge: applied once they answer, as the Trainer's
# runtimes are at an install.
_JUDGED_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# Where a manager runs, as CONTROLLERS gives it for the releases' own manifests:
# (namespace, Deployment, its Pods' label selector).
Controller = tuple[str, str, str]


@dataclass(frozen=True)
class ComponentManifests:
    """One component's folder: its documents and the Deployment they roll out."""

    component: str
    folder: Path
    documents: tuple[dict[str, Any], ...]
    controller: Controller
    image: str

    def steps(self, workdir: Path) -> list[InstallStep]:
        """The documents as install steps: the manager's (rolled out), then what its
        webhooks judge (applied once they answer)."""
        judged = [d for d in self.documents if d.get("kind") in _JUDGED_KINDS]
        rest = [d for d in self.documents if d.get("kind") not in _JUDGED_KINDS]
        steps = [
            InstallStep(
                ROLLOUT_STEPS[self.component],
                self.component,
                write_documents(workdir / f"user-{self.component}.yaml", rest),
            )
        ]
        if judged:
            path = write_documents(workdir / f"user-{self.component}-judged.yaml", judged)
            steps.append(InstallStep(f"{self.component}-judged", self.component, path))
        return steps

    def release_of_image(self, version: str) -> str | None:
        """Why the image is not the release `version`, in one line; None where it is."""
        tag = image_tag(self.image)
        if tag is None:
            return (
                f"{self.folder} runs image {self.image}, which names no tag (or a digest): the "
                f"harness cannot tell it is {self.component} {version}; render it with the "
                "release's tag"
            )
        if tag.removeprefix("v") != version.removeprefix("v"):
            return (
                f"{self.folder} runs image {self.image}, not {self.component} {version} that "
                "the upgrade moves to: render the manifests for that release"
            )
        return None


def _documents(folder: Path) -> list[dict[str, Any]]:
    documents = []
    for path in sorted(p for p in folder.iterdir() if p.suffix in MANIFEST_SUFFIXES):
        try:
            loaded = list(yaml.load_all(path.read_text(), Loader=_LOADER))
        except (OSError, yaml.YAMLError) as error:
            first = (str(error).splitlines() or ["no detail given"])[0]
            raise ConformanceError(f"{path} is not readable YAML: {first}") from None
        for document in loaded:
            if not document:
                continue
            if not isinstance(document, dict) or "kind" not in document:
                raise ConformanceError(f"{path} holds a document that is not a Kubernetes object")
            documents.append(document)
    return documents


def _deployment_controller(folder: Path, documents: list[dict[str, Any]]) -> tuple[Controller, str]:
    deployments = [d for d in documents if d.get("kind") == "Deployment"]
    if len(deployments) != 1:
        names = ", ".join(d.get("metadata", {}).get("name", "?") for d in deployments) or "none"
        raise ConformanceError(
            f"{folder} holds {len(deployments)} Deployments ({names}): the harness rolls out "
            "one manager per component; keep that component's manager alone in its folder"
        )
    deployment = deployments[0]
    metadata = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    labels = (spec.get("selector") or {}).get("matchLabels") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    if not metadata.get("namespace") or not labels or not containers:
        raise ConformanceError(
            f"{folder}: Deployment {metadata.get('name', '?')} needs a namespace, "
            "spec.selector.matchLabels and a container (render it with the namespace set, "
            "e.g. helm template --namespace)"
        )
    selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
    return (metadata["namespace"], metadata["name"], selector), containers[0]["image"]


def read_user_manifests(directory: Path) -> dict[str, ComponentManifests]:
    """Component -> its manifests, from DIR's folders; one line for anything wrong."""
    if not directory.is_dir():
        raise ConformanceError(f"--manifests {directory} is not a directory")
    found: dict[str, ComponentManifests] = {}
    for folder in sorted(p for p in directory.iterdir() if p.is_dir()):
        if folder.name not in CONTROLLERS:
            raise ConformanceError(
                f"--manifests: {folder} is not a component's folder; name folders after "
                f"the components moved ({', '.join(CONTROLLERS)})"
            )
        documents = _documents(folder)
        if not documents:
            raise ConformanceError(f"--manifests: {folder} holds no .yaml or .yml manifest")
        controller, image = _deployment_controller(folder, documents)
        found[folder.name] = ComponentManifests(
            folder.name, folder, tuple(documents), controller, image
        )
    if not found:
        raise ConformanceError(
            f"--manifests {directory} holds no component folder: put each component's "
            f"rendered manifests in DIR/<component>/ ({', '.join(CONTROLLERS)})"
        )
    return found


def plan_refusals(
    manifests: dict[str, ComponentManifests], moves: Iterable[tuple[str, str]]
) -> list[str]:
    """Why DIR does not fit the upgrade's steps ((component, new release) each), one
    line each: a folder for a component the upgrade does not move, an image of
    another release."""
    moved = dict(moves)
    found = []
    for component, given in manifests.items():
        version = moved.get(component)
        if version is None:
            found.append(
                f"{given.folder}: the upgrade does not move {component} (it keeps its release "
                f"or is not in both profiles); moved: {', '.join(moved) or 'nothing'}"
            )
            continue
        wrong_release = given.release_of_image(version)
        if wrong_release:
            found.append(wrong_release)
    return found


def running_mismatch(given: ComponentManifests, running: tuple[str, str] | None) -> str | None:
    """One line where the manifests would not roll the Deployment that runs the
    component now (its namespace and name, as read from the cluster)."""
    if running is None:
        return None
    namespace, name = running
    if (namespace, name) == given.controller[:2]:
        return None
    return (
        f"{given.folder} installs Deployment {'/'.join(given.controller[:2])}, but "
        f"{given.component} "
        f"runs as {namespace}/{name} here: the apply would add a second manager; render the "
        "manifests with the names the cluster's installer gave it"
    )
