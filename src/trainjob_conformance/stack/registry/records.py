"""What a push recorded on this machine: the index digest a later fetch must find.

The registry alone cannot vouch for its content: whatever answers at the URL
could serve another index, consistent with itself. The push therefore writes
the digest of the index it made (with its time and size) outside the build
cache, which a fetch for `build --registry` starts empty, and the fetch refuses
an index with any other digest.

Kept under `$XDG_STATE_HOME/trainjob-conformance/registry-pushes/` (default
`~/.local/state/...`), one file per registry and profile.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.registry.address import RegistryAddress, tag_for


def records_root() -> Path:
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state).expanduser() if state else Path.home() / ".local" / "state"
    return base / "trainjob-conformance" / "registry-pushes"


@dataclass(frozen=True)
class PushRecord:
    """One push of a profile's binaries: what was made, how big, how long it took."""

    registry: str  # the URL pushed to
    profile: str
    index: str  # the index artifact's reference, by tag
    index_digest: str  # its manifest's digest
    components: dict[str, str]  # component -> its manifest's digest
    pushed_at: str  # UTC, ISO 8601
    seconds: float
    bytes_total: int  # the binaries' size
    bytes_uploaded: int  # what the registry did not already hold
    files: int = 0


def record_path(address: RegistryAddress, profile: str, root: Path | None = None) -> Path:
    where = re.sub(r"[^A-Za-z0-9._-]", "_", address.host + "/" + address.prefix).strip("_")
    return (root or records_root()) / where / f"{tag_for(profile)}.json"


def write_record(record: PushRecord, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    partial.write_text(json.dumps(asdict(record), indent=2, sort_keys=True) + "\n")
    os.replace(partial, path)


def read_record(path: Path) -> PushRecord | None:
    if not path.is_file():
        return None
    try:
        return PushRecord(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as error:
        raise ConformanceError(
            f"the push record {path} cannot be read ({error.__class__.__name__}): "
            "remove it and push again"
        ) from None


def image_record_path(address: RegistryAddress, profile: str, root: Path | None = None) -> Path:
    """Where the digests of the images pushed for `profile` (`images push --cluster`) are."""
    return record_path(address, profile, root).with_suffix(".images.json")


def write_image_record(path: Path, digests: dict[str, str]) -> None:
    """Upstream image name -> the digest the registry took it under, as pushed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")


def read_image_record(path: Path) -> dict[str, str]:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
