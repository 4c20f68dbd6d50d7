"""The history page as a real browser builds it: headless Chromium's DOM after the script ran.

Without a Chromium the test is skipped, except where
TRAINJOB_CONFORMANCE_REQUIRE_BROWSER=1 (CI sets it, after installing one):
there a missing browser fails the test rather than hiding it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.history_pages import HOSTILE, Page, result, write_run
from trainjob_conformance.report.history import write_history

REQUIRE = "TRAINJOB_CONFORMANCE_REQUIRE_BROWSER"
# Debian's package, Ubuntu's and Google's names; CHROMIUM overrides.
_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str:
    found = os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, _NAMES)), None)
    if found:
        return found
    why = f"no headless Chromium ({', '.join(_NAMES)} or $CHROMIUM); on Debian: apt-get install chromium"
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{REQUIRE}=1 but {why}")
    pytest.skip(why)


def dump_dom(page: Path, fragment: str, profile: Path) -> str:
    command = [
        _browser(),
        "--headless",
        "--disable-gpu",
        f"--user-data-dir={profile}",
        "--dump-dom",
        f"{page.resolve().as_uri()}#{fragment}",
    ]
    if os.geteuid() == 0:
        command.insert(1, "--no-sandbox")  # Chromium refuses root without it
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "</html>" in done.stdout, (
        f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}"
    )
    return done.stdout


def test_chromium_builds_the_grid_and_opens_the_linked_cell_safely(tmp_path: Path) -> None:
    night_1, night_2 = tmp_path / "night-1", tmp_path / "night-2"
    write_run(night_1, "latest", "2026-11-20T02:00:00Z", result("TJ-A", "pass", 2.0))
    write_run(
        night_1,
        "trainer-2.2",
        "2026-11-20T02:01:00Z",
        result("TJ-A", "known-gap", 2.0, reason="gap"),
        result("TJ-B", "skipped", 0.0, reason="no worker"),
    )
    write_run(
        night_2,
        "latest",
        "2026-11-21T02:00:00Z",
        result("TJ-A", "FAIL", 1.0, reason=HOSTILE, diagnostics="diagnostics/latest/a.txt"),
        result("TJ-B", "ERROR", 1.0, reason="kueue died"),
    )
    page = tmp_path / "site" / "history.html"
    write_history([night_2, night_1], page)

    dom = dump_dom(page, "c0-2", tmp_path / "chromium")
    seen = Page(dom)
    # The grid as the browser parsed it: 2 policies x 3 runs, in time order.
    assert [(c["id"], c["class"]) for c in seen.cells] == [
        ("c0-0", "cell pass first"),
        ("c0-1", "cell known-gap"),
        ("c0-2", "cell fail first selected"),  # the script selected the linked cell
        ("c1-0", "cell absent first"),
        ("c1-1", "cell skipped"),
        ("c1-2", "cell error first"),
    ]
    # Each cell says its result word itself, as the report and the terminal do.
    assert [c["text"] for c in seen.cells] == ["pass", "known-gap", "FAIL", "", "skipped", "ERROR"]
    assert [g["colspan"] for g in seen.groups] == ["2", "1"]
    # The script filled the detail panel from the cell's data, as text only.
    panel = dom.split('<div id="detail"', 1)[1].split("</div><script>", 1)[0]
    assert not panel.startswith(" hidden")
    assert "TJ-A — title of TJ-A" in panel and "latest, 2026-11-21T02:00:00Z (night-2)" in panel
    assert 'href="../night-2/diagnostics/latest/a.txt"' in panel
    assert "&lt;img src=x onerror=" in panel  # the hostile reason, shown as text
    assert "img" not in seen.tags and seen.tags.count("script") == 1
    assert "<title>TrainJob conformance history</title>" in dom  # its onerror never ran
