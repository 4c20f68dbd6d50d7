"""Writing a bundle: everything a maintainer needs to see a gap on their own cluster."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.catalog import Policy
from trainjob_conformance.report.repro.issue import issue_text, versions_line
from trainjob_conformance.report.repro.records import Record
from trainjob_conformance.report.repro.script import repro_script
from trainjob_conformance.report.repro.standin import apply_script, stand_in_fix
from trainjob_conformance.report.repro.steps import replay_of

STAND_IN_FILE = "stand-in-fix.yaml"
APPLY_FILE = "apply-stand-in-fix.sh"


_WEBHOOK_CONFIGURATIONS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def _points_at_a_webhook_server(record: Record) -> str | None:
    """The webhook configuration the test wrote with a clientConfig, if any: its
    address and CA are this cluster's, so kubectl alone cannot take it to another."""
    for entry in record.get("entries") or []:
        if entry.get("step") != "request" or entry.get("kind") not in _WEBHOOK_CONFIGURATIONS:
            continue
        webhooks = (entry.get("body") or {}).get("webhooks") or []
        if any(isinstance(w, dict) and w.get("clientConfig") for w in webhooks):
            return f"{entry['kind']} {entry.get('name')}"
    return None


def bundle_files(record: Record, policy: Policy, templates: Path) -> dict[str, str]:
    """Each file of the bundle by its relative path."""
    bound = _points_at_a_webhook_server(record)
    if bound is not None:
        raise ConformanceError(
            f"the test of {policy.id} points {bound} at this cluster's own webhook server "
            "(its address and CA): a bundle of kubectl steps cannot take that to another "
            "cluster, so none is written; docs/reproductions.md"
        )
    replay = replay_of(record)
    if not any(step.observation for step in replay.steps):
        raise ConformanceError(
            f"the record of {policy.id} ({record.get('test')}) holds no observation: its test "
            "never reached its `holds()` block or states no observation in kubectl's terms; "
            "see docs/reproductions.md"
        )
    versions = versions_line(dict(record.get("versions") or {}))
    header = [
        f"Reproduces {policy.id}: {policy.title}",
        f"with kubectl alone. Written by {record.get('user_agent', 'trainjob-conformance')} from",
        f"a run of {record.get('recorded', '?')} ({versions}).",
        "Usage: ./repro.sh [KUBECONFIG]",
        "Exit: 0 REPRODUCED, 1 NOT REPRODUCED, 2 the cluster did not get to the observation.",
        "Env: KUBECTL, REPRO_TIMEOUT (seconds per wait, default 120), REPRO_KEEP=1 keeps objects.",
    ]
    files: dict[str, str] = {}
    for step in replay.steps:
        files.update(step.files)
    files["repro.sh"] = repro_script(replay, header, versions)
    fix = stand_in_fix(templates, record, replay.namespace)
    if fix is not None:
        files[STAND_IN_FILE] = fix
        files[APPLY_FILE] = apply_script(replay.namespace)
    public = {key: value for key, value in record.items() if not key.startswith("_")}
    files["record.json"] = json.dumps(public, indent=2) + "\n"
    names = sorted([*files, "README.md"])
    files["README.md"] = issue_text(record, policy, replay, names, fix is not None)
    return files


def write_bundle(record: Record, policy: Policy, templates: Path, out: Path) -> list[Path]:
    """Write the bundle into `out` (replacing a bundle written there before)."""
    return write_files(bundle_files(record, policy, templates), out)


def write_files(files: dict[str, str], out: Path) -> list[Path]:
    """Write a bundle's files into `out` (replacing a bundle written there before)."""
    if out.exists() and not (out / "repro.sh").is_file() and any(out.iterdir()):
        raise ConformanceError(
            f"{out} exists and holds no bundle; pass --out with a new or empty directory"
        )
    shutil.rmtree(out, ignore_errors=True)
    written = []
    for name, text in sorted(files.items()):
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    for script in ("repro.sh", APPLY_FILE):
        if (out / script).is_file():
            (out / script).chmod(0o755)
    return written
