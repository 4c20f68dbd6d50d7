"""Policy packs: a team's own policies, kept in their own repository.

A pack is a directory with `policies.yaml` (the catalog's schema), optional
`templates/` (taken before the project's for the pack's tests), an optional
`breaks.yaml` (what `prove` applies to show the pack's policies can fail) and
test files.
Its policy IDs are namespaced with the pack's name (`queue-required/ADM-001`),
so they can never collide with the project's or another pack's. The name is
`name:` in an optional `pack.yaml`, or else the directory's name.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.breaks import Break, load_breaks
from trainjob_conformance.policies.catalog import Policy, load_catalog

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
SEPARATOR = "/"


@dataclass(frozen=True)
class Pack:
    name: str
    root: Path
    catalog: dict[str, Policy]
    templates: Path | None
    breaks: dict[str, Break] = dataclasses.field(default_factory=dict)

    def full_id(self, policy_id: str) -> str:
        """The namespaced ID of a policy named in one of the pack's tests."""
        prefix = f"{self.name}{SEPARATOR}"
        return policy_id if policy_id.startswith(prefix) else f"{prefix}{policy_id}"

    def holds_test(self, path: Path) -> bool:
        return path.resolve().is_relative_to(self.root)


def _pack_name(root: Path) -> str:
    meta = root / "pack.yaml"
    name = root.name
    if meta.is_file():
        try:
            data = yaml.safe_load(meta.read_text()) or {}
        except yaml.YAMLError as error:
            raise ConformanceError(f"{meta} is not valid YAML: {error}") from None
        if not isinstance(data, dict):
            raise ConformanceError(f"{meta} must be a mapping with a name")
        name = str(data.get("name", name))
    if not _NAME.match(name):
        raise ConformanceError(
            f"policy pack {root}: name {name!r} must be lower-case letters, digits and dashes "
            "(set name: in its pack.yaml)"
        )
    return name


def load_pack(path: Path) -> Pack:
    root = path.expanduser().resolve()
    if not root.is_dir():
        raise ConformanceError(f"policy pack {path} is not a directory")
    catalog_file = root / "policies.yaml"
    if not catalog_file.is_file():
        raise ConformanceError(
            f"policy pack {path} has no policies.yaml: a pack is a directory with "
            "policies.yaml, templates/ and test files"
        )
    name = _pack_name(root)
    catalog = {}
    for policy_id, policy in load_catalog(catalog_file).items():
        if SEPARATOR in policy_id:
            raise ConformanceError(
                f"{catalog_file}: policy ID {policy_id!r} must not contain {SEPARATOR!r}: "
                f"the pack's name is added to it ({name}{SEPARATOR}{policy_id.split('/')[-1]})"
            )
        full = f"{name}{SEPARATOR}{policy_id}"
        # The pack's policies name its own breaks; they are namespaced like its IDs.
        refs = tuple(
            dataclasses.replace(ref, name=f"{name}{SEPARATOR}{ref.name}") for ref in policy.breaks
        )
        catalog[full] = dataclasses.replace(policy, id=full, breaks=refs)
    templates = root / "templates"
    breaks_file = root / "breaks.yaml"
    breaks = load_breaks(breaks_file, prefix=name) if breaks_file.is_file() else {}
    return Pack(name, root, catalog, templates if templates.is_dir() else None, breaks)


def load_packs(paths: list[Path]) -> list[Pack]:
    packs: list[Pack] = []
    for path in paths:
        pack = load_pack(path)
        for other in packs:
            if other.name == pack.name:
                raise ConformanceError(
                    f"two policy packs are named {pack.name!r} ({other.root} and {pack.root}); "
                    "rename one in its pack.yaml"
                )
        packs.append(pack)
    return packs


def merged_catalog(project: dict[str, Policy], packs: list[Pack]) -> dict[str, Policy]:
    merged = dict(project)
    for pack in packs:
        for policy_id, policy in pack.catalog.items():
            if policy_id in merged:
                raise ConformanceError(
                    f"policy pack {pack.name}: {policy_id} is already in the catalog"
                )
            merged[policy_id] = policy
    return merged


def pack_of(path: Path, packs: list[Pack]) -> Pack | None:
    """The pack a test file belongs to, if any."""
    return next((pack for pack in packs if pack.holds_test(path)), None)
