"""Render Jinja manifests from validated parameters.

Each template `NAME.yaml.j2` has a sidecar `NAME.params.yaml` that lists its
parameters with a type, and a default where one is optional. Parameters are
checked before Jinja runs (unknown name, wrong type, missing value), and Jinja
runs with StrictUndefined, so nothing half-rendered reaches a cluster.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml

from trainjob_conformance.cluster.hold import (
    ANNOTATIONS_DIR,
    HOLD_ANNOTATION,
    HOLD_COMMAND,
    HOLD_IMAGE,
    stopping_hold_command,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.render.overrides import OverrideShape, PodOverride, to_trainjob_fields

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "mapping": (dict,),
    "list": (list, tuple),
    "pod_overrides": (list, tuple),
}


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    required: bool
    default: Any


def _type_ok(value: Any, type_name: str) -> bool:
    if type_name == "integer" and isinstance(value, bool):
        return False  # bool is an int in Python, never in a manifest
    return isinstance(value, _TYPES[type_name])


# Kueue's kinds are written in the version the cluster serves; without a
# cluster (the `render` command) in the newest the harness knows.
DEFAULT_KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"


class TemplateSet:
    """The templates of one or more directories, rendered for one override shape and
    Kueue API version.

    With several directories, a template is taken from the first that has it:
    a policy pack's own templates come before the project's.
    """

    def __init__(
        self,
        directory: Path | tuple[Path, ...],
        shape: OverrideShape | None = None,
        kueue_api_version: str = DEFAULT_KUEUE_API_VERSION,
    ) -> None:
        self.directories = directory if isinstance(directory, tuple) else (directory,)
        for path in self.directories:
            if not path.is_dir():
                raise ConformanceError(f"template directory {path} does not exist")
        self.directory = self.directories[0]
        self.shape = shape
        self.kueue_api_version = kueue_api_version
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader([str(path) for path in self.directories]),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,  # YAML, not HTML
        )
        # JSON is valid YAML and quotes everything that needs it.
        self._env.filters["json"] = json.dumps
        # The hold mechanism is the harness's, not a template parameter.
        self._env.globals.update(
            hold_annotation=HOLD_ANNOTATION,
            hold_image=HOLD_IMAGE,
            hold_command=HOLD_COMMAND,
            stopping_hold_command=stopping_hold_command,
            annotations_dir=ANNOTATIONS_DIR,
            kueue_api_version=kueue_api_version,
        )

    def with_first(self, directory: Path) -> TemplateSet:
        """These templates, with `directory`'s taken first."""
        return TemplateSet((directory, *self.directories), self.shape, self.kueue_api_version)

    def names(self) -> list[str]:
        return sorted(
            {p.name.removesuffix(".yaml.j2") for d in self.directories for p in d.glob("*.yaml.j2")}
        )

    def _where(self) -> str:
        return ", ".join(str(path) for path in self.directories)

    def parameters(self, name: str) -> dict[str, Parameter]:
        found = [d for d in self.directories if (d / f"{name}.yaml.j2").is_file()]
        if not found:
            raise ConformanceError(
                f"no template {name!r} in {self._where()}; there are: {', '.join(self.names())}"
            )
        sidecar = found[0] / f"{name}.params.yaml"
        if not sidecar.is_file():
            raise ConformanceError(f"template {name!r} has no parameter file {sidecar.name}")
        raw = yaml.safe_load(sidecar.read_text()) or {}
        params = {}
        for key, spec in raw.items():
            type_name = spec["type"]
            if type_name not in _TYPES:
                raise ConformanceError(f"{sidecar}: parameter {key} has unknown type {type_name!r}")
            params[key] = Parameter(key, type_name, "default" not in spec, spec.get("default"))
        return params

    def _validated(self, name: str, values: dict[str, Any]) -> dict[str, Any]:
        params = self.parameters(name)
        unknown = sorted(set(values) - set(params))
        if unknown:
            raise ConformanceError(
                f"template {name!r}: unknown parameter(s) {', '.join(unknown)}; "
                f"it takes {', '.join(sorted(params))}"
            )
        context: dict[str, Any] = {}
        for key, param in params.items():
            if key not in values:
                if param.required:
                    raise ConformanceError(f"template {name!r}: parameter {key} is required")
                context[key] = param.default
                continue
            value = values[key]
            if not _type_ok(value, param.type):
                raise ConformanceError(
                    f"template {name!r}: parameter {key} must be {param.type}, "
                    f"got {type(value).__name__} {value!r}"
                )
            context[key] = value
        for key, param in params.items():
            if param.type == "pod_overrides":
                context[key] = self.override_fields(context[key] or [], name)
        return context

    def override_fields(self, overrides: list[Any], template: str = "trainjob") -> dict[str, Any]:
        """The TrainJob.spec fields that carry `overrides` on the installed Trainer."""
        parsed = [
            o if isinstance(o, PodOverride) else PodOverride.from_params(o) for o in overrides
        ]
        if parsed and self.shape is None:
            raise ConformanceError(
                f"template {template!r} sets pod overrides but no override shape is known: "
                "detect it from the cluster's TrainJob CRD first"
            )
        return to_trainjob_fields(parsed, self.shape) if self.shape else {}

    def render_text(self, name: str, values: dict[str, Any]) -> str:
        context = self._validated(name, values)
        try:
            return self._env.get_template(f"{name}.yaml.j2").render(**context)
        except jinja2.TemplateNotFound as error:
            raise ConformanceError(
                f"no template {name!r} in {self._where()}; there are: {', '.join(self.names())}"
            ) from error
        except jinja2.UndefinedError as error:
            raise ConformanceError(f"template {name!r}: {error.message}") from error

    def render(self, template: str, /, **values: Any) -> list[dict[str, Any]]:
        """Rendered objects, parsed, ready to create."""
        name = template
        text = self.render_text(name, values)
        try:
            return [doc for doc in yaml.safe_load_all(text) if doc]
        except yaml.YAMLError as error:
            raise ConformanceError(f"template {name!r} rendered invalid YAML: {error}") from error

    def render_one(self, template: str, /, **values: Any) -> dict[str, Any]:
        name = template
        docs = self.render(name, **values)
        if len(docs) != 1:
            raise ConformanceError(f"template {name!r} rendered {len(docs)} objects, expected 1")
        return docs[0]
