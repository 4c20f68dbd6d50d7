"""Schema skew between releases, read from their sources: the fields one manager
reads of another product's objects, and whether the other product's CRD, at the
release it runs, has them.

Kueue's TrainJob and JobSet integrations and the Trainer's JobSet plugin are
each built against one release of the product they read (their go.mod says
which). The fields of that product's spec they use are read off their own
source (`.Spec.<Field>` in the integration's package, mapped to JSON names by
the struct of that release); a field the installed release's CRD lacks is a
skew, named in one line before any cluster starts, instead of a TrainJob that
is never admitted and a wait that times out minutes later. Only the spec's top
level is compared: it is where the override field changed its name
(podSpecOverrides, podTemplateOverrides, runtimePatches).

A manager that copies a template of another product's kind into that kind's
objects writes every field its own CRD defaults in the template: the Trainer's
runtimes hold a JobSet spec, built on the JobSet release of its go.mod, and
each JobSet it applies carries what that schema defaults. A defaulted field
the installed JobSet CRD does not declare is refused by the API server (on
2026-11-29 Trainer v2.1.0 under JobSet v0.8.2: `spec.replicatedJobs[].groupName`,
"field not declared in schema", and no JobSet is ever made). These are found
at any depth of the template's schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.components import component
from trainjob_conformance.stack.gobuild import module_source


@dataclass(frozen=True)
class Reader:
    """One manager's integration with another product's kind."""

    component: str  # the manager that reads (kueue, trainer)
    packages: tuple[str, ...]  # its packages that read, under its module
    target: str  # the product it reads (trainer, jobset)
    kind: str
    types_file: str  # under the target's module: where the kind's spec struct is
    spec_type: str
    crd_file: str  # under the target's module: the kind's CRD


_TRAINJOB = {
    "target": "trainer",
    "kind": "TrainJob",
    "types_file": "pkg/apis/trainer/v1alpha1/trainjob_types.go",
    "spec_type": "TrainJobSpec",
    "crd_file": "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
}
_JOBSET = {
    "target": "jobset",
    "kind": "JobSet",
    "types_file": "api/jobset/v1alpha2/jobset_types.go",
    "spec_type": "JobSetSpec",
    "crd_file": "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
}
READERS = (
    Reader("kueue", ("pkg/controller/jobs/trainjob",), **_TRAINJOB),
    Reader("kueue", ("pkg/controller/jobs/jobset",), **_JOBSET),
    Reader("trainer", ("pkg/runtime/framework/plugins/jobset",), **_JOBSET),
)


@dataclass(frozen=True)
class Template:
    """A manager's CRD that holds a template of another product's kind, which the
    manager copies into that kind's objects."""

    component: str  # the manager that writes (trainer)
    crd_file: str  # under its module: the CRD with the template
    template: tuple[str, ...]  # properties from that CRD's spec down to the template's spec
    # Dotted paths in the template's spec that every template has, though not required.
    present: frozenset[str]
    target: str  # the product whose objects it writes (jobset)
    kind: str
    target_crd_file: str  # under the target's module: the kind's CRD


TEMPLATES = (
    Template(
        "trainer",
        "manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
        ("template", "spec"),
        # A runtime without replicated jobs makes no Pods.
        frozenset({"replicatedJobs"}),
        _JOBSET["target"],
        _JOBSET["kind"],
        _JOBSET["crd_file"],
    ),
)


@dataclass(frozen=True)
class Skew:
    reader: str
    reader_version: str
    built_against: str  # the target's release the reader's go.mod requires
    target: str
    target_version: str
    kind: str
    field: str  # the spec field's JSON name (a path, `[]` for list items, for a default)
    # How the reader comes to use it: it reads it, or its template's schema defaults it.
    use: str = "reads"

    def line(self) -> str:
        how = (
            f"writes {self.kind} spec.{self.field}, which its CRD's template defaults"
            if self.use == "defaults"
            else f"reads {self.kind} spec.{self.field}"
        )
        return (
            f"{self.reader} {self.reader_version} {how} (it is built against {self.target} "
            f"{self.built_against}); {self.target} {self.target_version}'s {self.kind} CRD "
            "has no such field"
        )


# libyaml where PyYAML has it: a JobSet CRD is most of a megabyte.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FIELD = re.compile(r"^\s+([A-Z]\w*)\s+[^`\n]*`json:\"(\w+)")
_SPEC_USE = re.compile(r"\.Spec\.([A-Z]\w*)")


def required_version(gomod: str, module: str) -> str | None:
    """The version a go.mod requires of `module` (None where it does not)."""
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", gomod, re.MULTILINE)
    return found.group(1) if found else None


def struct_fields(source: str, struct: str) -> dict[str, str]:
    """Go field name -> JSON name of one struct in a Go file."""
    start = re.search(rf"^type {struct} struct {{$", source, re.MULTILINE)
    if start is None:
        return {}
    fields = {}
    for line in source[start.end() :].splitlines():
        if line.startswith("}"):
            break
        found = _FIELD.match(line)
        if found:
            fields[found.group(1)] = found.group(2)
    return fields


def used_fields(package_dirs: list[Path], fields: Mapping[str, str]) -> set[str]:
    """JSON names of the spec fields the packages' code reads (`.Spec.<Field>`)."""
    used = set()
    for directory in package_dirs:
        for path in sorted(directory.glob("*.go")):
            if path.name.endswith("_test.go"):
                continue
            used |= {fields[m] for m in _SPEC_USE.findall(path.read_text()) if m in fields}
    return used


def crd_spec_fields(crd_text: str) -> set[str]:
    """The top-level spec properties of every served version of a CRD."""
    found: set[str] = set()
    for document in yaml.load_all(crd_text, Loader=_LOADER):
        if not document or document.get("kind") != "CustomResourceDefinition":
            continue
        for version in document["spec"]["versions"]:
            if not version.get("served"):
                continue
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
            spec = (schema.get("properties") or {}).get("spec") or {}
            found |= set(spec.get("properties") or {})
    return found


def served_spec_schemas(crd_text: str) -> list[dict]:
    """The spec schema of every served version of a CRD."""
    found = []
    for document in yaml.load_all(crd_text, Loader=_LOADER):
        if not document or document.get("kind") != "CustomResourceDefinition":
            continue
        for version in document["spec"]["versions"]:
            if version.get("served"):
                schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
                found.append((schema.get("properties") or {}).get("spec") or {})
    return found


def _below(node: dict, part: str) -> dict | None:
    """The schema of a property (`[]`: a list's items) under `node`, None where it has none."""
    if part == "[]":
        return node.get("items")
    return (node.get("properties") or {}).get(part)


def defaulted_paths(
    schema: dict, present: frozenset[str] = frozenset(), prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every property path under a schema whose node has a default that every object
    gets: the API server defaults a field only where its parent object exists, so the
    walk goes down only through properties that are always there (required by their
    parent, defaulted, or named in `present`) and the items of lists."""
    found = []
    required = set(schema.get("required") or ())
    for part, child in sorted((schema.get("properties") or {}).items()):
        path = (*prefix, part)
        if "default" in child:
            found.append(path)
        if part in required or "default" in child or ".".join(path) in present:
            found += defaulted_paths(child, present, path)
            if "items" in child:
                found += defaulted_paths(child["items"], present, (*path, "[]"))
    return found


def declares(schema: dict, path: tuple[str, ...]) -> bool:
    """Whether a schema declares a property path (or keeps unknown fields on its way)."""
    node: dict | None = schema
    for part in path:
        if node is None:
            return False
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return True
        node = _below(node, part)
    return node is not None


def template_defaults_missing(
    template_crd: str, template: tuple[str, ...], present: frozenset[str], target_crd: str
) -> set[str]:
    """Paths the template's schema defaults that a served version of the target CRD lacks."""
    missing: set[str] = set()
    targets = served_spec_schemas(target_crd)
    for spec in served_spec_schemas(template_crd):
        node: dict | None = spec
        for part in template:
            node = _below(node, part) if node is not None else None
        for path in defaulted_paths(node or {}, present):
            if any(not declares(target, path) for target in targets):
                missing.add(".".join(path).replace(".[]", "[]"))
    return missing


@cache
def _source(key: str, version: str) -> Path:
    return module_source(key, version)


def _named(
    side: Reader | Template,
    version: str,
    built_against: str,
    target_version: str,
    fields: set[str],
    use: str = "reads",
) -> list[Skew]:
    """One Skew per field, sorted, of a reader or a template at these releases."""
    return [
        Skew(side.component, version, built_against, side.target, target_version, side.kind, f, use)
        for f in sorted(fields)
    ]


def _built_against(name: str, version: str, target: str) -> tuple[Path, str]:
    """A release's source, and the release of `target` its go.mod requires."""
    source = _source(name, version)
    target_module = component(target).module
    built_against = required_version((source / "go.mod").read_text(), target_module)
    if built_against is None:
        raise ConformanceError(f"{name} {version}'s go.mod requires no {target_module}")
    return source, built_against


def skews(versions: Mapping[str, str]) -> list[Skew]:
    """Every field a manager of `versions` reads that its peer's CRD lacks."""
    found = []
    for reader in READERS:
        if reader.component not in versions or reader.target not in versions:
            continue
        reader_version, target_version = versions[reader.component], versions[reader.target]
        reader_source, built_against = _built_against(
            reader.component, reader_version, reader.target
        )
        fields = struct_fields(
            (_source(reader.target, built_against) / reader.types_file).read_text(),
            reader.spec_type,
        )
        used = used_fields([reader_source / p for p in reader.packages], fields)
        installed = crd_spec_fields(
            (_source(reader.target, target_version) / reader.crd_file).read_text()
        )
        found += _named(reader, reader_version, built_against, target_version, used - installed)
    return found + _template_skews(versions)


def _template_skews(versions: Mapping[str, str]) -> list[Skew]:
    found = []
    for template in TEMPLATES:
        if template.component not in versions or template.target not in versions:
            continue
        writer_version, target_version = versions[template.component], versions[template.target]
        writer_source, built_against = _built_against(
            template.component, writer_version, template.target
        )
        missing = template_defaults_missing(
            (writer_source / template.crd_file).read_text(),
            template.template,
            template.present,
            (_source(template.target, target_version) / template.target_crd_file).read_text(),
        )
        found += _named(
            template, writer_version, built_against, target_version, missing, use="defaults"
        )
    return found
