"""Docker images cached by name and tag: in the daemon, and as `docker save` tarballs
under the harness cache root so a fresh daemon gets them back without a rebuild."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import cache_root
from trainjob_conformance.progress import step


def tarball(image: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", image)
    return cache_root() / "images" / f"{slug}.tar"


def docker(*args: str, input_bytes: bytes | None = None, what: str = "") -> str:
    result = subprocess.run(
        ["docker", *args],
        input=input_bytes,
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        tail = "\n".join(result.stderr.decode(errors="replace").strip().splitlines()[-8:])
        raise ConformanceError(f"docker {what or args[0]} failed: {tail}")
    return result.stdout.decode(errors="replace")


def present(image: str) -> bool:
    return (
        subprocess.run(
            ["docker", "image", "inspect", image], capture_output=True, check=False
        ).returncode
        == 0
    )


def image_id(image: str) -> str:
    return docker("image", "inspect", "--format", "{{.Id}}", image, what="image inspect").strip()


def pulled(image: str, why: str) -> str:
    """The image in the daemon, pulled from its registry unless it is there already;
    its registry digest (the image id where it has none). `why` says, in the error,
    what asked for a pull."""
    if not present(image):
        with step(f"pulling {image}"):
            result = subprocess.run(["docker", "pull", image], capture_output=True, check=False)
            if result.returncode != 0:
                lines = result.stderr.decode(errors="replace").strip().splitlines()
                raise ConformanceError(
                    f"could not pull {image} ({why}): {lines[-1] if lines else 'no message'}"
                )
    digests = docker("image", "inspect", "--format", '{{join .RepoDigests " "}}', image).split()
    return digests[0] if digests else image_id(image)


def ensure(image: str, build: Callable[[], None], key: str | None = None, save: bool = True) -> str:
    """The image in the daemon: already there, loaded from the cache, or built and saved.

    `key` names the cache tarball when the tag alone does not pin the source.
    Without `save`, the image lives in the daemon only: for what is quicker to
    build again from cached parts than to save and load.
    """
    cached = tarball(key or image)
    if present(image) and (key is None or cached.is_file() or not save):
        return image_id(image)
    if save and cached.is_file():
        with step(f"loading {image} from {cached}"):
            docker("load", "-i", str(cached), what=f"load {cached}")
        if present(image):
            return image_id(image)
    with step(f"building image {image}"):
        build()
    if not present(image):
        raise ConformanceError(f"building {image} left no image of that name")
    if not save:
        return image_id(image)
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f".{cached.name}.{os.getpid()}")
    try:
        docker("save", "-o", str(partial), image, what=f"save {image}")
        os.replace(partial, cached)
    finally:
        partial.unlink(missing_ok=True)
    return image_id(image)


def build_from_context(image: str, context: Path, dockerfile: str, network: bool = False) -> None:
    """`docker build`; without network unless a step installs Debian packages."""
    (context / "Dockerfile").write_text(dockerfile)
    args = ["build", "-t", image, str(context)]
    if not network:
        args.insert(1, "--network=none")
    docker(*args, what=f"build {image}")


def fresh_context(name: str) -> Path:
    context = cache_root() / "work" / "images" / name
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    return context


def add_file(context: Path, source: Path, name: str, mode: int = 0o755) -> None:
    """Copy into the context with the mode set here (Docker 20.10's builder has no COPY --chmod)."""
    target = context / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    target.chmod(mode)
