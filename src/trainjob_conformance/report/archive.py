"""One results archive per run: everything needed to read, compare or file it later.

`<report>/<profile>-results.tar.gz` holds, under `trainjob-conformance-results/`:
the result JSON, the JUnit XML, the Markdown and HTML reports, the failure
diagnostics, `meta/versions.json` (what the cluster ran, and the harness's own
version), `meta/command.txt` (the exact command line) and `catalog/` (the catalog and
every pack's catalog that judged the run). `report`, `diff` and `history` read
an archive wherever they read a report directory.
"""

from __future__ import annotations

import atexit
import io
import json
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

from trainjob_conformance import __version__
from trainjob_conformance.errors import ConformanceError

TOP = "trainjob-conformance-results"
SUFFIX = "-results.tar.gz"
# A test's record (kube/record.py) beside its diagnostics: what `repro` reads.
RECORD_SUFFIX = ".record.json"
# Set by `trainjob-conformance run` for its pytest child: the command the user typed.
COMMAND_ENV = "TRAINJOB_CONFORMANCE_COMMAND"


def archive_path(report_dir: Path, profile: str) -> Path:
    return report_dir / f"{profile}{SUFFIX}"


def is_archive(path: Path) -> bool:
    return path.is_file() and path.name.endswith((".tar.gz", ".tgz"))


def write_archive(
    report_dir: Path,
    profile: str,
    versions: dict[str, str],
    command: str,
    catalogs: dict[str, Path],
    images: dict[str, str] | None = None,
) -> Path:
    """Pack what this profile's run wrote in `report_dir` (written whole, then renamed).

    `images`: where the cluster's images came from (`source`) and, where the
    provider knows them, each image's ID (a content digest), in versions.json.
    """
    members: list[tuple[Path, str]] = []
    for name in (f"{profile}.json", f"{profile}-junit.xml", "conformance.md", "conformance.html"):
        if (report_dir / name).is_file():
            members.append((report_dir / name, name))
    diagnostics = report_dir / "diagnostics" / profile
    if diagnostics.is_dir():
        members += [
            (path, str(path.relative_to(report_dir)))
            for path in sorted(diagnostics.rglob("*"))
            if path.is_file()
        ]
    members += [(path, f"catalog/{label}") for label, path in catalogs.items() if path.is_file()]
    generated = {
        "meta/versions.json": json.dumps(
            {
                "harness": __version__,
                "profile": profile,
                "cluster": versions,
                **({"images": images} if images else {}),
            },
            indent=2,
        ),
        "meta/command.txt": command + "\n",
    }
    target = archive_path(report_dir, profile)
    partial = target.with_name(f".{target.name}.partial")
    with tarfile.open(partial, "w:gz") as archive:
        for path, name in members:
            archive.add(path, f"{TOP}/{name}", recursive=False)
        for name, text in generated.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{TOP}/{name}")
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            archive.addfile(info, io.BytesIO(data))
    partial.replace(target)
    return target


def _removed_at_exit(directory: str) -> str:
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def unpacked(path: Path) -> Path:
    """The archive's results directory, unpacked into a temporary directory
    that lives until this process exits."""
    target = Path(_removed_at_exit(tempfile.mkdtemp(prefix="trainjob-conformance-archive-")))
    try:
        with tarfile.open(path, "r:*") as archive:
            # The "data" filter refuses absolute paths, links out of the target
            # and device files: an archive from elsewhere cannot write outside.
            archive.extractall(target, filter="data")
    except (OSError, tarfile.TarError) as error:
        raise ConformanceError(
            f"{path} is not a readable results archive ({error}); "
            f"pass a *{SUFFIX} written by `trainjob-conformance run`"
        ) from None
    results = target / TOP
    if not results.is_dir():
        raise ConformanceError(
            f"{path} is not a trainjob-conformance results archive (no {TOP}/ inside)"
        )
    return results
