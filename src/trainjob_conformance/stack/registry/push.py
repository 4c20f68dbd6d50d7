"""Push a profile's built binaries to a registry: one artifact per component, one index.

The layout is in artifacts.py. The push checks first that every binary is in
the build cache and that the registry answers (and lets the Docker config's
credentials in), so a bad URL or a login missing costs no hashing of 300 MB.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.progress import say
from trainjob_conformance.stack.components import component
from trainjob_conformance.stack.profiles import Profile
from trainjob_conformance.stack.registry.address import RegistryAddress, parse_registry_url, tag_for
from trainjob_conformance.stack.registry.artifacts import (
    BINARY_MEDIA_TYPE,
    COMPONENT_CONFIG_MEDIA_TYPE,
    INDEX_CONFIG_MEDIA_TYPE,
    INDEX_FILE,
    INDEX_MEDIA_TYPE,
    INDEX_REPOSITORY,
    LocalBinary,
    canonical_json,
    component_repository,
    index_document,
    profile_binaries,
)
from trainjob_conformance.stack.registry.client import CHUNK, RegistryClient, sha256_digest
from trainjob_conformance.stack.registry.errors import translated
from trainjob_conformance.stack.registry.records import PushRecord, record_path, write_record


def _require_built(
    profile: Profile, extra: Mapping[str, str] | None
) -> dict[str, list[LocalBinary]]:
    binaries = profile_binaries(profile, extra)
    for found in binaries.values():
        for binary in found:
            if not binary.path.is_file():
                raise ConformanceError(
                    f"{binary.name} {binary.version} ({binary.component}) is not in the build "
                    f"cache ({binary.path}): run `trainjob-conformance build --profile "
                    f"{profile.name}` before pushing it"
                )
    return binaries


def _push_artifact(
    client: RegistryClient,
    repository: str,
    tag: str,
    files: list[str],
    config: tuple[bytes, str],
    profile: Profile,
) -> str:
    """Push one artifact (files given as `path:media-type`); its manifest's digest."""
    address = client.address
    reference = address.reference(repository, tag)
    container = client.container(repository, tag)
    with tempfile.TemporaryDirectory(prefix="trainjob-conformance-push-") as scratch:
        config_file = Path(scratch) / "config.json"
        config_file.write_bytes(config[0])
        with translated(address, profile.name, reference):
            response = client.push(
                container,  # type: ignore[arg-type]  # oras takes a parsed name as well
                files=files,
                manifest_config=f"{config_file}:{config[1]}",
                disable_path_validation=True,
                # Streamed in chunks: a binary is up to ~100 MB, never whole in memory.
                do_chunked=True,
                chunk_size=CHUNK,
                quiet=True,
            )
            digest = response.headers.get("Docker-Content-Digest", "")
            if not digest.startswith("sha256:"):
                # Not every registry says; the manifest as stored does.
                digest = sha256_digest(client.manifest(container))
    return digest


def check_reachable(registry_url: str, profile: Profile) -> RegistryAddress:
    """The registry answers and lets the Docker config's credentials in (one line if not)."""
    address = parse_registry_url(registry_url)
    with translated(address, profile.name):
        RegistryClient(address).ping()
    return address


def push_profile(
    profile: Profile,
    registry_url: str,
    records: Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> PushRecord:
    """Push every binary of `profile` (and of the `extra` components) and its index;
    record the index digest, time and bytes."""
    address: RegistryAddress = parse_registry_url(registry_url)
    binaries = _require_built(profile, extra)
    client = RegistryClient(address)
    with translated(address, profile.name):
        client.ping()
    started = time.monotonic()
    entries: dict[str, dict[str, Any]] = {}
    total = 0
    for key, found in binaries.items():
        began = time.monotonic()
        version = found[0].version
        described = {binary.name: binary.describe() for binary in found}
        config = {
            "component": key,
            "module": component(key).module,
            "version": version,
            "binaries": described,
        }
        digest = _push_artifact(
            client,
            component_repository(key),
            version,
            [f"{binary.path}:{BINARY_MEDIA_TYPE}" for binary in found],
            (canonical_json(config), COMPONENT_CONFIG_MEDIA_TYPE),
            profile,
        )
        size = sum(int(entry["size"]) for entry in described.values())
        total += size
        entries[key] = {**config, "repository": component_repository(key), "manifest": digest}
        entries[key].pop("component")
        say(
            f"pushed {address.reference(component_repository(key), version)} "
            f"({size / 1e6:.1f} MB) in {time.monotonic() - began:.1f}s"
        )
    index = canonical_json(index_document(profile, entries))
    with tempfile.TemporaryDirectory(prefix="trainjob-conformance-index-") as scratch:
        index_file = Path(scratch) / INDEX_FILE
        index_file.write_bytes(index)
        index_digest = _push_artifact(
            client,
            INDEX_REPOSITORY,
            tag_for(profile.name),
            [f"{index_file}:{INDEX_MEDIA_TYPE}"],
            (b"{}", INDEX_CONFIG_MEDIA_TYPE),
            profile,
        )
    record = PushRecord(
        registry=address.url,
        profile=profile.name,
        index=address.reference(INDEX_REPOSITORY, tag_for(profile.name)),
        index_digest=index_digest,
        components={key: entry["manifest"] for key, entry in entries.items()},
        pushed_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        seconds=round(time.monotonic() - started, 2),
        bytes_total=total,
        bytes_uploaded=client.bytes_uploaded,
        files=sum(len(found) for found in binaries.values()),
    )
    write_record(record, record_path(address, profile.name, records))
    return record
