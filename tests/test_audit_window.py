"""The upgrade's window read from an audit log as the API server writes one."""

import json
from pathlib import Path

from trainjob_conformance.upgrade.audit_window import AUDITED, audited_events, merged
from trainjob_conformance.upgrade.judging import workload_changes
from trainjob_conformance.upgrade.record import UpgradeRecord

NS = "upgrade-kueue-1a2b3c"
SINCE = 1_795_867_600.0  # 2026-11-28T12:06:40Z


def workload(name: str, rv: str, owner: str = "admitted", admitted: str = "True") -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "ownerReferences": [{"kind": "TrainJob", "name": owner}],
        },
        "status": {"conditions": [{"type": "Admitted", "status": admitted}]},
    }


def audit_line(
    verb: str, seconds: float, answered: dict | None, code: int = 200, uri: str = "", **ref
) -> str:
    stamp = f"2026-11-28T12:{int(seconds // 60):02d}:{seconds % 60:09.6f}Z"
    event = {
        "kind": "Event",
        "requestURI": f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads{uri}",
        "stage": "ResponseComplete",
        "verb": verb,
        "stageTimestamp": stamp,
        "objectRef": {
            "apiGroup": "kueue.x-k8s.io",
            "resource": "workloads",
            "namespace": NS,
            **ref,
        },
        "responseStatus": {"code": code},
    }
    if answered is not None:
        event["responseObject"] = answered
    return json.dumps(event)


def test_the_log_gives_each_stored_version_and_each_delete_after_the_window_began(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.log"
    gone = {"kind": "Status", "status": "Success"}
    log.write_text(
        "\n".join(
            [
                audit_line("update", 6 * 60 + 30, workload("w", "10")),  # before the window
                audit_line("patch", 7 * 60 + 1.5, workload("w", "11"), subresource="status"),
                audit_line("update", 7 * 60 + 2, workload("w", "12"), code=409),  # refused
                audit_line("delete", 7 * 60 + 3, gone, name="w", uid="uid-w"),
                audit_line("delete", 7 * 60 + 4, gone, namespace="elsewhere", name="x"),
                audit_line("create", 7 * 60 + 5, workload("dry", ""), uri="?dryRun=All"),
            ]
        )
        + "\n{half a line"
    )

    events = audited_events(log, "kueue.x-k8s.io", "workloads", NS, SINCE)

    assert [e["type"] for e in events] == [AUDITED, "DELETED"]
    assert events[0]["object"]["metadata"]["resourceVersion"] == "11"
    assert events[0]["t"] == SINCE + 21.5
    assert events[1]["object"]["metadata"] == {"name": "w", "namespace": NS, "uid": "uid-w"}


def test_a_version_the_watch_missed_is_added_and_one_it_saw_is_kept_once() -> None:
    watched = [
        {"t": SINCE + 1, "type": "ADDED", "object": workload("w", "11")},
        {"t": SINCE + 9, "type": "LISTED", "object": workload("w", "14")},
    ]
    watched.append({"t": SINCE + 12, "type": "DELETED", "object": workload("w", "16")})
    audited = [
        {"t": SINCE + 1.01, "type": AUDITED, "object": workload("w", "11")},
        {"t": SINCE + 5, "type": AUDITED, "object": workload("w", "12", admitted="False")},
        # The delete request, answered with the object its finalizer still holds.
        {"t": SINCE + 10, "type": "DELETED", "object": workload("w", "15")},
    ]

    events = merged(watched, audited)

    assert [e["object"]["metadata"]["resourceVersion"] for e in events] == ["11", "12", "14", "16"]
    # What the gap hid is judged: the version stored with Admitted=False.
    found = workload_changes(events, "admitted", "queued", SINCE)
    assert any("stored with Admitted=False" in line for line in found), found


def test_a_record_reads_the_log_only_for_the_watches_it_covers(tmp_path: Path) -> None:
    watch = tmp_path / "workloads.jsonl"
    watch.write_text(json.dumps({"t": SINCE + 1, "type": "ADDED", "object": workload("w", "11")}))
    log = tmp_path / "audit.log"
    log.write_text(audit_line("delete", 7 * 60 + 3, workload("w", "13")) + "\n")
    record = UpgradeRecord(
        column="trainer-2.2 -> latest",
        source="trainer-2.2",
        target="latest",
        source_versions={},
        phase="before",
        steps_done=[],
        override_field="runtimePatches",
        gate="g",
        hold_gate="h",
        objects={},
        cluster_queue="q",
        window={"workloads": str(watch), "kueue-pods": str(tmp_path / "none.jsonl")},
        window_started=SINCE,
        audit_log=str(log),
        audited={"workloads": ["kueue.x-k8s.io", "workloads", NS]},
    )

    assert [e["type"] for e in record.window_events("workloads")] == ["ADDED", "DELETED"]
    assert record.window_events("kueue-pods") == []
    # A record written before the log existed reads as before.
    plain = UpgradeRecord(**{**record.__dict__, "audit_log": "", "audited": {}})
    assert [e["type"] for e in plain.window_events("workloads")] == ["ADDED"]
