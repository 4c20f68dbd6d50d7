"""How a profile's binaries are laid out in a registry: names, media types, the index.

One artifact per component, tagged with the component's version, so that the
profiles sharing a release (every profile has kubernetes v1.36.3) share it:

    <registry>[/<path>]/trainjob-conformance/bin/<component>:<version>

    config  application/vnd.trainjob-conformance.component.v1+json
            {"component", "module", "version", "binaries": {name: {sha256, size, mode}}}
    layers  application/vnd.trainjob-conformance.binary.v1, one per binary,
            titled with its name (org.opencontainers.image.title), stored as is

And one index per profile (its name made a tag: `latest+kueue=v0.16.6` ->
`latest_kueue_v0.16.6`):

    <registry>[/<path>]/trainjob-conformance/bin-index:<profile>

    layer   index.json, application/vnd.trainjob-conformance.bin-index.v1+json
            {"schemaVersion": 1, "profile", "components": {component: {"version",
             "module", "repository", "manifest": <its manifest's digest>,
             "binaries": {name: {sha256, size, mode}}}}}

Everything in both is derived from the binaries alone (no time, no host), so
pushing the same binaries again makes the same digests. Push time and bytes
go to the push record on this machine (records.py).

Pushing is `push.py`, fetching `fetch.py`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainjob_conformance.stack.components import BUILD_ORDER, component
from trainjob_conformance.stack.gobuild import binary_path
from trainjob_conformance.stack.profiles import Profile

NAMESPACE = "trainjob-conformance"
INDEX_REPOSITORY = f"{NAMESPACE}/bin-index"
BINARY_MEDIA_TYPE = "application/vnd.trainjob-conformance.binary.v1"
COMPONENT_CONFIG_MEDIA_TYPE = "application/vnd.trainjob-conformance.component.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.trainjob-conformance.bin-index.v1+json"
INDEX_CONFIG_MEDIA_TYPE = "application/vnd.trainjob-conformance.bin-index.config.v1+json"
INDEX_FILE = "index.json"
INDEX_SCHEMA = 1
_READ = 1024 * 1024


def component_repository(key: str) -> str:
    return f"{NAMESPACE}/bin/{key}"


def canonical_json(value: Any) -> bytes:
    """The one byte form of a document, so that its digest depends on its content only."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class LocalBinary:
    """One binary of a component, where the build cache keeps it."""

    component: str
    version: str
    name: str
    path: Path

    def describe(self) -> dict[str, Any]:
        """Its sha256, size and mode, as the index records them."""
        hasher = hashlib.sha256()
        with self.path.open("rb") as source:
            while chunk := source.read(_READ):
                hasher.update(chunk)
        stat = self.path.stat()
        return {
            "sha256": hasher.hexdigest(),
            "size": stat.st_size,
            "mode": f"{stat.st_mode & 0o777:04o}",
        }


def profile_binaries(
    profile: Profile, extra: Mapping[str, str] | None = None
) -> dict[str, list[LocalBinary]]:
    """Component -> its binaries, in build order: what `build` makes for the embedded
    cluster, and the `extra` components (key -> version) a provider runs on the host
    beside them (kind's own binary)."""
    versions = {key: profile.version(key) for key in BUILD_ORDER if profile.has(key)}
    versions.update(extra or {})
    return {
        key: [
            LocalBinary(key, version, name, binary_path(key, version, name))
            for name in component(key).binaries
        ]
        for key, version in versions.items()
    }


def index_document(profile: Profile, components: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"schemaVersion": INDEX_SCHEMA, "profile": profile.name, "components": components}
