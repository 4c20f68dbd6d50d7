"""Report files written whole or not at all.

Profiles run at once (`matrix --jobs N`) share one report directory: each
run re-renders the matrix from every `<profile>.json` there when it ends, so
another run must never read a result file half written, nor two renders
interleave in one page.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_whole(path: Path, text: str) -> None:
    # The temporary name does not end in .json, so readers globbing for
    # result files never see it.
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        partial.write_text(text)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
