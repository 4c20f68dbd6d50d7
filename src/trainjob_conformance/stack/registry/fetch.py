"""Fetch a profile's binaries from a registry into the build cache, trusting nothing unchecked.

The chain of checks, each failure one line naming the artifact, the digest
expected and the one got:

1. the index is fetched by the digest the push recorded on this machine
   (records.py), or, on a machine that never pushed, by the digest its tag
   named at this machine's first fetch (recorded then), and its manifest's
   bytes must hash to it;
2. index.json must hash to the digest its manifest names, and must pin the
   versions the profile pins;
3. each component's manifest is fetched by the digest the index records, and
   must hash to it, and name each binary by the sha256 the index records;
4. each binary's bytes must hash to that sha256 as they arrive.

A binary lands where `build` looks for it (`bin/<component>/<version>/<name>`
in the build cache) with the mode the push recorded, renamed into place only
once checked, so an interrupted or refused fetch leaves no file under the
final name; `build` then finds the profile built and compiles nothing.
Components whose binaries are all in the cache already are left as they are.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.progress import say
from trainjob_conformance.stack.profiles import Profile
from trainjob_conformance.stack.registry.address import parse_registry_url, tag_for
from trainjob_conformance.stack.registry.artifacts import (
    INDEX_MEDIA_TYPE,
    INDEX_REPOSITORY,
    INDEX_SCHEMA,
    LocalBinary,
    profile_binaries,
)
from trainjob_conformance.stack.registry.client import RegistryClient, sha256_digest
from trainjob_conformance.stack.registry.errors import (
    RegistryError,
    mismatch,
    push_hint,
    translated,
)
from trainjob_conformance.stack.registry.records import (
    PushRecord,
    read_record,
    record_path,
    write_record,
)

_TITLE = "org.opencontainers.image.title"


@dataclass
class FetchResult:
    seconds: float = 0.0
    bytes_fetched: int = 0
    files: int = 0
    fetched: list[str] = field(default_factory=list)  # components fetched
    present: list[str] = field(default_factory=list)  # components already in the cache


def _recorded(client: RegistryClient, profile: Profile, records: Path | None) -> PushRecord:
    """The index digest to hold the registry to: the one this machine's push (or its
    first fetch) recorded. A runner that never pushed (a CI runner fed by a seeding
    job) trusts the index the tag names on its first fetch, says which, and records
    it, so that a registry answering with another index later is refused."""
    address = client.address
    path = record_path(address, profile.name, records)
    record = read_record(path)
    if record is not None:
        return record
    tag = tag_for(profile.name)
    artifact = address.reference(INDEX_REPOSITORY, tag)
    with translated(address, profile.name, artifact):
        manifest = client.manifest(client.container(INDEX_REPOSITORY, tag))
    record = PushRecord(
        registry=address.url,
        profile=profile.name,
        index=artifact,
        index_digest=sha256_digest(manifest),
        components={},
        pushed_at=f"first fetched {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
        seconds=0.0,
        bytes_total=0,
        bytes_uploaded=0,
    )
    write_record(record, path)
    say(
        f"no push of {profile.name} to {address.url} is recorded on this machine: trusting "
        f"{artifact} at {record.index_digest} and recording it in {path}"
    )
    return record


def _layers(manifest: bytes, artifact: str) -> list[dict[str, Any]]:
    try:
        layers = json.loads(manifest).get("layers")
    except (ValueError, AttributeError):
        layers = None
    if not isinstance(layers, list):
        raise RegistryError(f"artifact {artifact}: its manifest is not an OCI image manifest")
    return [layer for layer in layers if isinstance(layer, dict)]


def _index(client: RegistryClient, profile: Profile, record: PushRecord) -> dict[str, Any]:
    """The index the push made, checked against its record, then against itself."""
    address = client.address
    artifact = address.reference(INDEX_REPOSITORY, record.index_digest)
    container = client.container(INDEX_REPOSITORY, record.index_digest)
    recorded_by = f"recorded by the push of {record.pushed_at}"
    with translated(address, profile.name, artifact):
        manifest = client.manifest(container)
        got = sha256_digest(manifest)
        if got != record.index_digest:
            raise mismatch(artifact, record.index_digest, got, recorded_by)
        layer = next(
            (x for x in _layers(manifest, artifact) if x.get("mediaType") == INDEX_MEDIA_TYPE), None
        )
        if layer is None:
            raise RegistryError(f"artifact {artifact} holds no {INDEX_MEDIA_TYPE} layer")
        content = b"".join(client.blob_chunks(container, str(layer["digest"])))
    got = sha256_digest(content)
    if got != layer["digest"]:
        raise mismatch(
            f"{artifact} (index.json)", str(layer["digest"]), got, "named by its manifest"
        )
    try:
        index = json.loads(content)
    except ValueError:
        index = None
    if (
        not isinstance(index, dict)
        or index.get("schemaVersion") != INDEX_SCHEMA
        or not isinstance(index.get("components"), dict)
    ):
        raise RegistryError(
            f"artifact {artifact} is not an index of schema {INDEX_SCHEMA}: push the profile again"
        )
    return index


def _entry(index: dict[str, Any], key: str, version: str, where: str, hint: str) -> dict[str, Any]:
    entry = index["components"].get(key)
    if not isinstance(entry, dict) or entry.get("version") != version:
        held = f"{key} {entry.get('version')}" if isinstance(entry, dict) else f"no {key}"
        raise RegistryError(
            f"the index {where} holds {held}, the profile pins {key} {version}: {hint}"
        )
    return entry


def _download(
    client: RegistryClient,
    container: Any,
    binary: LocalBinary,
    sha256: str,
    mode: int,
    artifact: str,
) -> int:
    """One binary into its place in the cache, only once its bytes hash to `sha256`."""
    binary.path.parent.mkdir(parents=True, exist_ok=True)
    # gobuild's name for a partial file, which it removes if this process dies.
    partial = binary.path.with_name(f".{binary.name}.partial-{os.getpid()}")
    hasher = hashlib.sha256()
    size = 0
    try:
        with partial.open("wb") as sink:
            for chunk in client.blob_chunks(container, f"sha256:{sha256}"):
                hasher.update(chunk)
                size += len(chunk)
                sink.write(chunk)
        got = f"sha256:{hasher.hexdigest()}"
        if got != f"sha256:{sha256}":
            raise mismatch(
                f"{artifact} ({binary.name})", f"sha256:{sha256}", got, "recorded in the index"
            )
        partial.chmod(mode)
        os.replace(partial, binary.path)
    finally:
        partial.unlink(missing_ok=True)
    return size


def _fetch_component(
    client: RegistryClient, profile: Profile, entry: dict[str, Any], found: list[LocalBinary]
) -> tuple[int, int]:
    """Fetch the binaries of one component the cache lacks; their bytes and number."""
    address = client.address
    key = found[0].component
    repository = str(entry.get("repository") or "")
    digest = str(entry.get("manifest") or "")
    artifact = address.reference(repository, digest)
    container = client.container(repository, digest)
    fetched = files = 0
    with translated(address, profile.name, artifact):
        manifest = client.manifest(container)
        got = sha256_digest(manifest)
        if got != digest:
            raise mismatch(artifact, digest, got, f"recorded in the index of {profile.name}")
        layers = {
            str((layer.get("annotations") or {}).get(_TITLE)): layer
            for layer in _layers(manifest, artifact)
        }
        for binary in found:
            if binary.path.is_file():
                continue
            recorded = (entry.get("binaries") or {}).get(binary.name)
            layer = layers.get(binary.name)
            if not isinstance(recorded, dict) or layer is None:
                raise RegistryError(
                    f"artifact {artifact} holds no {binary.name}: push {profile.name} again"
                )
            sha256 = str(recorded["sha256"])
            if layer.get("digest") != f"sha256:{sha256}":
                raise mismatch(
                    f"{artifact} ({binary.name})", f"sha256:{sha256}", str(layer.get("digest")),
                    "recorded in the index",
                )  # fmt: skip
            # Never set-uid or the like, whatever the index says.
            mode = int(str(recorded.get("mode", "0755")), 8) & 0o777
            fetched += _download(client, container, binary, sha256, mode, artifact)
            files += 1
    say(f"fetched {key} {found[0].version} ({fetched / 1e6:.1f} MB) from {address.url}")
    return fetched, files


def fetch_profile(
    profile: Profile,
    registry_url: str,
    records: Path | None = None,
    extra: Mapping[str, str] | None = None,
    ca_file: Path | None = None,
) -> FetchResult:
    """Fetch into the build cache every binary of `profile` (and of the `extra`
    components) it lacks, each one checked."""
    address = parse_registry_url(registry_url)
    binaries = profile_binaries(profile, extra)
    result = FetchResult()
    started = time.monotonic()
    if all(binary.path.is_file() for found in binaries.values() for binary in found):
        result.present = list(binaries)
        return result
    client = RegistryClient(address, ca_file)
    with translated(address, profile.name):
        client.ping()
    record = _recorded(client, profile, records)
    index = _index(client, profile, record)
    where = address.reference(INDEX_REPOSITORY, record.index_digest)
    hint = push_hint(address, profile.name)
    for key, found in binaries.items():
        if all(binary.path.is_file() for binary in found):
            result.present.append(key)
            continue
        entry = _entry(index, key, found[0].version, where, hint)
        fetched, files = _fetch_component(client, profile, entry, found)
        result.bytes_fetched += fetched
        result.files += files
        result.fetched.append(key)
    result.seconds = round(time.monotonic() - started, 2)
    if not result.fetched and not result.present:
        raise ConformanceError(f"profile {profile.name} has no binaries to fetch")
    return result
