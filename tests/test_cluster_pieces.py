import os
import time
from pathlib import Path

import pytest
import yaml

from trainjob_conformance.cli import main
from trainjob_conformance.cluster.embedded.kwok_stages import HOLD_ANNOTATION, harness_stages
from trainjob_conformance.cluster.embedded.nodes import BLOCK_LABEL, RACK_LABEL, node_manifests
from trainjob_conformance.cluster.handle import (
    IMAGES_MIRRORED,
    IMAGES_PULLED,
    IMAGES_SIMULATED,
    ClusterHandle,
)
from trainjob_conformance.cluster.serving.certs import CertificateAuthority
from trainjob_conformance.cluster.simulated_nodes import KWOK_NODE_ANNOTATION, simulated_node
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.namespaces import namespace_name
from trainjob_conformance.kube.waits import Stretch, WaitTimeout, wait_for


def test_serving_certificate_is_for_loopback_and_signed_by_the_ca(tmp_path):
    from cryptography import x509

    ca = CertificateAuthority(tmp_path / "ca")
    cert = ca.issue_serving_cert(tmp_path / "svc", "svc")
    loaded = x509.load_pem_x509_certificate(cert.cert_file.read_bytes())
    sans = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert loaded.issuer.rfc4514_string() == "CN=trainjob-conformance CA"
    assert oct(cert.key_file.stat().st_mode & 0o777) == "0o600"


def test_pod_complete_stage_waits_for_the_hold_annotation_to_go(tmp_path):
    names = {
        "kustomize/stage/node/fast/node-initialize.yaml": "node-initialize",
        "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml": "hb",
        "kustomize/stage/pod/fast/pod-ready.yaml": "pod-ready",
        "kustomize/stage/pod/fast/pod-complete.yaml": "pod-complete",
        "kustomize/stage/pod/fast/pod-delete.yaml": "pod-delete",
    }
    for relative, name in names.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        stage = {
            "kind": "Stage",
            "metadata": {"name": name},
            "spec": {"selector": {"matchExpressions": []}},
        }
        path.write_text(yaml.safe_dump(stage))
    stages = {s["metadata"]["name"]: s for s in harness_stages(tmp_path)}
    (hold,) = stages["pod-complete"]["spec"]["selector"]["matchExpressions"]
    assert hold == {
        "key": f'.metadata.annotations["{HOLD_ANNOTATION}"]',
        "operator": "DoesNotExist",
    }
    assert stages["pod-ready"]["spec"]["selector"]["matchExpressions"] == []


def test_missing_stage_file_is_reported(tmp_path):
    with pytest.raises(ConformanceError, match="lays out its stages differently"):
        harness_stages(tmp_path)


def test_nodes_form_a_block_and_rack_topology():
    nodes = node_manifests()
    blocks = {n["metadata"]["labels"][BLOCK_LABEL] for n in nodes}
    racks = {n["metadata"]["labels"][RACK_LABEL] for n in nodes}
    assert len(blocks) == 2 and len(racks) == 4 and len(nodes) == 8
    assert all(n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake" for n in nodes)


def test_a_node_of_a_tests_own_is_played_by_kwok_with_the_capacity_it_names():
    taint = {"key": "example.com/own", "value": "ns", "effect": "NoSchedule"}
    node = simulated_node("own-0", {"example.com/own": "ns"}, {"cpu": "4", "pods": "2"}, [taint])
    assert node["metadata"]["annotations"] == {KWOK_NODE_ANNOTATION: "fake"}
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "own-0"
    assert node["spec"] == {"taints": [taint]}
    assert node["status"]["allocatable"] == node["status"]["capacity"] == {"cpu": "4", "pods": "2"}
    # The embedded cluster's own nodes are made the same way, without taints.
    assert all(
        n["spec"] == {} and KWOK_NODE_ANNOTATION in n["metadata"]["annotations"]
        for n in node_manifests()
    )


@pytest.mark.parametrize(
    ("supply", "adds"), [(IMAGES_SIMULATED, True), (IMAGES_PULLED, False), (IMAGES_MIRRORED, False)]
)
def test_only_a_cluster_of_kwok_nodes_lets_a_test_add_nodes(supply, adds):
    handle = ClusterHandle("any", Path("kubeconfig"), {}, image_supply=supply)
    assert handle.adds_nodes is adds


def test_namespace_names_are_dns_labels_and_unique():
    name = namespace_name("test_Something[param-1]" * 5)
    assert len(name) <= 63 and name == name.lower() and not name.startswith("-")
    assert namespace_name("t") != namespace_name("t")


def test_wait_timeout_reports_last_value_and_diagnostics():
    with pytest.raises(WaitTimeout) as failure:
        wait_for("the answer", lambda: 0, timeout=0.3, interval=0.05, diagnostics=lambda: "DIAG")
    text = str(failure.value)
    assert "waiting for the answer" in text and "last observed: 0" in text and "DIAG" in text


def test_a_stretched_bound_goes_on_while_its_reason_holds_and_says_so(capsys):
    # The probe holds at about 0.4 s, past the 0.2 s bound: only the stretch reaches it.
    started = time.monotonic()
    answer = wait_for(
        "the answer",
        lambda: time.monotonic() - started > 0.4 and "yes",
        timeout=0.2,
        interval=0.02,
        stretch=Stretch(extra=5, reason=lambda: "the machine is saturated (load 9)"),
    )
    assert answer == "yes"
    assert (
        "still waiting for the answer after 0s, the machine is saturated (load 9):"
        " waiting up to 5s more while that lasts"
    ) in capsys.readouterr().err


def test_a_stretched_bound_ends_at_its_extra_time_or_when_its_reason_ends():
    with pytest.raises(WaitTimeout) as failure:
        wait_for(
            "the answer",
            lambda: 0,
            timeout=0.1,
            interval=0.02,
            stretch=Stretch(extra=0.2, reason=lambda: "the machine is saturated (load 9)"),
        )
    first = str(failure.value).splitlines()[0]
    assert first.endswith(
        "waiting for the answer (its bound of 0s was stretched while the machine is saturated"
        " (load 9))"
    )
    assert failure.value.stretched == "the machine is saturated (load 9)"
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as failure:
        wait_for("x", lambda: 0, timeout=0.1, interval=0.02, stretch=Stretch(60, lambda: ""))
    assert time.monotonic() - started < 5 and failure.value.stretched == ""
    assert str(failure.value).startswith("timed out after 0s waiting for x\n")


def test_a_start_stretches_its_bound_only_on_a_saturated_machine(monkeypatch):
    from trainjob_conformance.cluster.health import host_load

    monkeypatch.setattr(host_load.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(host_load.os, "getpriority", lambda which, who: 10)
    monkeypatch.setattr(host_load.os, "getloadavg", lambda: (6.5, 5.0, 3.0))
    stretch = host_load.while_saturated(180)
    assert stretch.extra == 360
    assert stretch.reason() == (
        "the machine is saturated (load average 6.5 (5.0 over 5 minutes) over 2 CPUs; "
        "this process runs at nice 10)"
    )
    # A dip of the last minute's load does not end it while the last five minutes' holds.
    monkeypatch.setattr(host_load.os, "getloadavg", lambda: (1.5, 5.0, 3.0))
    assert stretch.reason().startswith("the machine is saturated (load average 1.5 (5.0 ")
    monkeypatch.setattr(host_load.os, "getloadavg", lambda: (1.5, 1.9, 3.0))
    assert stretch.reason() == ""


def test_wait_returns_as_soon_as_the_probe_holds():
    calls = iter([None, None, "yes"])
    assert wait_for("x", lambda: next(calls), timeout=5, interval=0.01) == "yes"


def test_cli_reports_an_unknown_profile_in_one_line(capsys):
    assert main(["build", "--profile", "nope"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "trainjob-conformance: error: --profile: unknown profile 'nope'; choose one of: "
    )
    assert "latest" in line.split("choose one of: ")[1].split(", ")


def test_cli_down_without_state_is_a_clear_error(tmp_path, capsys):
    assert main(["down", "--run-dir", str(tmp_path)]) == 2
    assert "holds no cluster of trainjob-conformance" in capsys.readouterr().err


def test_cli_render_rejects_wrong_types(capsys):
    assert (
        main(
            ["render", "trainjob", "--values", '{"name": "a", "namespace": "b", "num_nodes": "x"}']
        )
        == 2
    )
    assert "num_nodes must be integer" in capsys.readouterr().err


def test_flattened_kubeconfig_inlines_certificate_files(tmp_path):
    import base64

    from trainjob_conformance.kube.kubeconfig import flattened

    (tmp_path / "ca.crt").write_bytes(b"CA")
    (tmp_path / "admin.key").write_bytes(b"KEY")
    config = {
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": "https://127.0.0.1:1", "certificate-authority": "ca.crt"},
            }
        ],
        "users": [{"name": "u", "user": {"client-key": str(tmp_path / "admin.key")}}],
    }
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(config))
    flat = yaml.safe_load(flattened(path))
    cluster = flat["clusters"][0]["cluster"]
    assert "certificate-authority" not in cluster
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"CA"
    assert base64.b64decode(flat["users"][0]["user"]["client-key-data"]) == b"KEY"


def test_cluster_handle_survives_the_trip_to_an_xdist_worker(tmp_path):
    from trainjob_conformance.cluster.handle import ClusterHandle

    handle = ClusterHandle(
        provider="kind",
        kubeconfig=tmp_path / "kc",
        versions={"trainer": "v2.3.0"},
        profile="latest",
        run_dir=tmp_path,
        controller_pods={"trainer": ("kubeflow-system", "app.kubernetes.io/name=trainer")},
    )
    import json

    assert ClusterHandle.from_json(json.loads(json.dumps(handle.to_json()))) == handle


def test_picked_ports_are_free_and_outside_the_ephemeral_range():
    from trainjob_conformance import ports

    low = int(ports._EPHEMERAL.read_text().split()[0])
    picked = {ports.free_port() for _ in range(50)}

    assert all(ports._LOWEST <= port < min(low, ports._HIGHEST + 1) for port in picked), picked
    assert all(ports._bindable(port) for port in picked)


def test_a_port_is_never_handed_out_twice(monkeypatch, tmp_path):
    # Two picks before either is bound both pass the bind check; the second
    # must still differ (a worker cluster's JobSet health port once equalled
    # its Kueue webhook port, and Kueue exited on "address already in use").
    from trainjob_conformance import ports

    draws = iter([25000, 25000, 25000, 25001])
    monkeypatch.setattr(ports.random, "randint", lambda low, high: next(draws))
    monkeypatch.setattr(ports, "_HANDED_OUT", set())
    monkeypatch.setattr(ports, "_bindable", lambda port: True)
    monkeypatch.setattr(ports, "_CLAIMS", tmp_path)

    assert [ports.free_port(), ports.free_port()] == [25000, 25001]


def test_a_port_another_living_harness_process_picked_is_not_handed_out(monkeypatch, tmp_path):
    # Another process's pick passes the bind check here until it binds it (a worker's
    # Trainer exited on "address already in use" for its webhook port, 2026-11-29).
    import subprocess
    import sys

    from trainjob_conformance import ports

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    try:
        (tmp_path / "25000").write_text(str(other.pid))
        (tmp_path / "25001").write_text(str(gone.pid))  # its process ended: taken over
        draws = iter([25000, 25001])
        monkeypatch.setattr(ports.random, "randint", lambda low, high: next(draws))
        monkeypatch.setattr(ports, "_HANDED_OUT", set())
        monkeypatch.setattr(ports, "_bindable", lambda port: True)
        monkeypatch.setattr(ports, "_CLAIMS", tmp_path)

        (tmp_path / "26000").write_text(str(gone.pid))  # never picked again: swept
        monkeypatch.setattr(ports, "_SWEPT", set())

        assert ports.free_port() == 25001
        assert (tmp_path / "25001").read_text() == str(os.getpid())
        assert (tmp_path / "25000").read_text() == str(other.pid)
        assert not (tmp_path / "26000").exists()
    finally:
        other.kill()
        other.wait()


def test_an_audited_control_plane_hands_kwokctl_a_policy_of_writes_only(tmp_path):
    from trainjob_conformance.cluster.embedded.control_plane import (
        AUDIT_POLICY,
        EmbeddedControlPlane,
    )
    from trainjob_conformance.stack.profiles import load_profile

    profile = load_profile("latest")
    assert EmbeddedControlPlane(profile, {}, tmp_path)._audit_args() == []

    audited = EmbeddedControlPlane(profile, {}, tmp_path, audit_policy=AUDIT_POLICY)
    flag, path = audited._audit_args()
    policy = yaml.safe_load(Path(path).read_text())
    assert flag == "--kube-audit-policy"
    assert policy["kind"] == "Policy" and policy["omitStages"] == ["RequestReceived"]
    # Reads and Leases are left out; everything else at Metadata, no bodies.
    assert {"level": "None", "verbs": ["get", "list", "watch"]} in policy["rules"]
    assert policy["rules"][-1] == {"level": "Metadata"}
    assert audited.audit_log == audited.logs_dir / "audit.log"


def test_an_upgrades_audit_policy_keeps_the_custom_resources_writes_with_their_objects():
    from trainjob_conformance.cluster.audit_policies import WINDOW_AUDIT_POLICY

    rules = WINDOW_AUDIT_POLICY["rules"]
    # Reads first (a status write is no read), then the watched kinds with bodies, then nothing.
    assert rules[0] == {"level": "None", "verbs": ["get", "list", "watch"]}
    assert rules[1]["level"] == "RequestResponse"
    kept = {(r["group"], name) for r in rules[1]["resources"] for name in r["resources"]}
    assert ("kueue.x-k8s.io", "workloads/status") in kept
    assert ("trainer.kubeflow.org", "trainjobs") in kept
    assert rules[-1] == {"level": "None"}


def test_a_create_waiting_for_its_turn_names_the_holder_and_starts_its_bound_after_it(
    tmp_path, monkeypatch, capsys
):
    import threading

    from trainjob_conformance.cluster.embedded import control_plane
    from trainjob_conformance.stack.profiles import load_profile

    monkeypatch.setattr(control_plane, "KWOKCTL_CREATE_LOCK", tmp_path / "create.lock")
    holding, release = threading.Event(), threading.Event()

    def other_create() -> None:
        with control_plane._one_kwokctl_create_at_a_time("cluster other of pid 1", holding):
            release.wait(10)

    other = threading.Thread(target=other_create)
    other.start()
    assert holding.wait(5)
    ours = control_plane.EmbeddedControlPlane(load_profile("latest"), {}, tmp_path / "run")

    def our_create() -> None:
        with control_plane._one_kwokctl_create_at_a_time("ours", ours._create_turn):
            pass

    ours._creating = threading.Thread(target=our_create)
    ours._creating.start()
    threading.Timer(1.0, release.set).start()
    ours._wait_create_turn()
    other.join(5)
    ours._creating.join(5)

    assert release.is_set() and ours._create_turn.is_set()
    assert "waiting for another kwokctl create to end first: cluster other of pid 1" in (
        capsys.readouterr().err
    )


def test_kwokctl_creates_share_one_lock_whatever_build_cache_each_process_uses(
    tmp_path, monkeypatch
):
    """./scripts/test runs prove from a build cache of its own beside the lanes: a lock
    kept in the cache let their kwokctl creates pick the same port."""
    from trainjob_conformance.cluster.embedded import control_plane

    locks = set()
    for cache in ("lanes", "prove"):
        monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(tmp_path / cache))
        locks.add(control_plane._create_lock_path())
    assert len(locks) == 1
    assert not any(str(tmp_path) in str(lock) for lock in locks)


def test_a_saturated_machine_is_named_with_its_load_and_this_processs_niceness(monkeypatch):
    from trainjob_conformance.cluster.health import host_load

    monkeypatch.setattr(host_load.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(host_load.os, "getpriority", lambda which, who: 19)
    monkeypatch.setattr(host_load.os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    assert host_load.saturation_note() == ""
    monkeypatch.setattr(host_load.os, "getloadavg", lambda: (7.94, 5.0, 3.0))
    assert host_load.saturation_note() == (
        "the machine was saturated: load average 7.9 (5.0 over 5 minutes) over 2 CPUs; "
        "this process runs at nice 19"
    )
