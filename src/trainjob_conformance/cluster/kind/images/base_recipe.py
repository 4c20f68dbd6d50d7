"""kind's base-image recipe, read from the kind module at build time and turned into a
Dockerfile the local daemon can build from a debootstrapped Debian.

kind publishes its node base as a multi-stage Dockerfile (`images/base/Dockerfile`):
a `base` stage that installs Debian packages and kind's files onto
`debian:<suite>-slim`, stages that clone and build the runtime, a `build` stage
that copies those binaries in, and a final stage with the entrypoint. This
module keeps the `base` stage's own instructions, replaces its FROM by the
locally bootstrapped Debian, and takes the runtime binaries from the harness's
builds instead of the clone stages. The fuse-overlayfs snapshotter is left out:
kind uses it for rootless nodes only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CHMOD = re.compile(r"--chmod=(\d+)\s+")
_COPY_FROM = re.compile(r"^COPY\s+--from=(\S+)\s+(\S+)\s+(\S+)\s*$")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    text: str  # the whole instruction, continuation lines joined


def instructions(dockerfile: str) -> list[Instruction]:
    """Instructions in order, comments and blank lines dropped, continuations kept."""
    out: list[Instruction] = []
    pending: list[str] = []
    for raw in dockerfile.splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        pending.append(raw)
        if raw.rstrip().endswith("\\"):
            continue
        text = "\n".join(pending)
        pending = []
        out.append(Instruction(text.split(None, 1)[0].upper(), text))
    return out


def stages(dockerfile: str) -> dict[str, list[Instruction]]:
    """Stage name (or `final`) -> its instructions after the FROM line."""
    result: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    for instruction in instructions(dockerfile):
        if instruction.keyword == "FROM":
            words = instruction.text.split()
            name = words[-1] if len(words) >= 4 and words[-2].upper() == "AS" else "final"
            current = result.setdefault(name, [])
            continue
        if current is not None:
            current.append(instruction)
    return result


def copy_modes(stage: list[Instruction]) -> list[tuple[str, int]]:
    """(source, mode) of each `COPY --chmod` (Docker 20.10 lacks --chmod: modes go in the context)."""
    modes = []
    for instruction in stage:
        if instruction.keyword == "COPY":
            match = _CHMOD.search(instruction.text)
            if match:
                source = _CHMOD.sub("", instruction.text).split()[1]
                modes.append((source, int(match.group(1), 8)))
    return modes


def local_dockerfile(recipe: str, from_image: str, binaries: dict[str, str]) -> str:
    """The node base as one stage: kind's `base`, the runtime from `binaries` (the basename
    in a COPY --from of the `build` stage -> a path in the build context), and the final
    stage's metadata."""
    parsed = stages(recipe)
    if "base" not in parsed or "build" not in parsed or "final" not in parsed:
        raise ValueError("kind's base Dockerfile no longer has base, build and final stages")
    lines = [f"FROM {from_image}"]
    for instruction in parsed["base"]:
        if instruction.keyword == "ARG":
            continue
        text = _CHMOD.sub("", instruction.text)
        if instruction.keyword == "COPY" and "LICENSES" in text:
            continue
        lines.append(text)
    for instruction in parsed["build"]:
        if instruction.keyword == "COPY":
            match = _COPY_FROM.match(instruction.text.strip())
            if match is None:
                continue
            source, destination = match.group(2), match.group(3)
            name = source.rstrip("/").rsplit("/", 1)[-1]
            if name in binaries:
                lines.append(f"COPY {binaries[name]} {destination}")
            continue
        lines.append(instruction.text)
    for instruction in parsed["final"]:
        if instruction.keyword in ("ENV", "STOPSIGNAL", "ENTRYPOINT", "CMD", "LABEL"):
            lines.append(instruction.text)
    return "\n".join(lines) + "\n"


def packages(recipe: str) -> list[str]:
    """The Debian packages the `base` stage installs with kind's clean-install."""
    for instruction in stages(recipe).get("base", []):
        if "clean-install" in instruction.text:
            after = instruction.text.split("clean-install", 1)[1]
            words = after.replace("\\", " ").split("&&")[0].split()
            return [w for w in words if re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", w)]
    return []
