"""The pieces that isolate a manager binding every interface, tested on their own.

The forwarder runs for real (two processes, a Unix socket between them, on
127.0.0.1 only); /proc tables and Go sources are given as files.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from trainjob_conformance.cluster.embedded import isolated_managers
from trainjob_conformance.cluster.embedded.host_controllers import (
    _kueue_config_version,
    _struct_has_field,
)
from trainjob_conformance.cluster.isolation import netns
from trainjob_conformance.cluster.isolation.forward import Route, RouteError
from trainjob_conformance.cluster.isolation.listeners import (
    Listener,
    ListenerAudit,
    audit,
    descendants,
    parse_interfaces,
    parse_listening,
)
from trainjob_conformance.cluster.isolation.rotator_seed import RotatorSpec, seed
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import wait_for
from trainjob_conformance.render.overrides import OverrideShape
from trainjob_conformance.render.templates import TemplateSet

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
FORWARD = [sys.executable, "-m", "trainjob_conformance.cluster.isolation.forward"]


# --- forwarder -------------------------------------------------------------


@pytest.mark.parametrize(
    "route",
    ["tcp:0.0.0.0:80=unix:a", "tcp:localhost:80=unix:a", "tcp:127.0.0.1:x=unix:a", "unix:a", "x=y"],
)
def test_routes_outside_loopback_or_malformed_are_refused(route):
    with pytest.raises(RouteError):
        Route.parse(route)


def test_a_bad_route_stops_the_forwarder_in_one_line():
    done = subprocess.run([*FORWARD, "tcp:0.0.0.0:80=unix:a"], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "forward: tcp:0.0.0.0:80: TCP endpoints must be on 127.0.0.1"
    ]


def _echo_upper_after_eof(server: socket.socket) -> None:
    """Read until the client half-closes, then answer and close: needs the EOF passed on."""
    connection, _ = server.accept()
    with connection:
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
        connection.sendall(data.upper())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_two_forwarders_bridge_tcp_through_a_unix_socket_and_pass_on_half_close(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    upstream = server.getsockname()[1]
    threading.Thread(target=_echo_upper_after_eof, args=(server,), daemon=True).start()
    front = _free_port()
    processes = [
        subprocess.Popen([*FORWARD, "--ready", name, route], cwd=tmp_path, stderr=subprocess.PIPE)
        for name, route in (
            ("back.ready", f"unix:bridge.sock=tcp:127.0.0.1:{upstream}"),
            ("front.ready", f"tcp:127.0.0.1:{front}=unix:bridge.sock"),
        )
    ]
    try:
        wait_for(
            "both forwarders",
            lambda: all((tmp_path / n).exists() for n in ("back.ready", "front.ready")),
            timeout=10,
        )
        payload = b"x" * 300_000
        with socket.create_connection(("127.0.0.1", front), timeout=10) as client:
            client.sendall(payload)
            client.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
        assert answer == payload.upper()
        assert oct((tmp_path / "bridge.sock").stat().st_mode & 0o777) == "0o600"
    finally:
        for process in processes:
            process.terminate()
            assert process.wait(timeout=10) == 0
        server.close()
    assert not (tmp_path / "bridge.sock").exists(), "the forwarder left its socket behind"


# --- listeners -------------------------------------------------------------

TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1
   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1
   2: 0100007F:1F90 0100007F:C000 01 00000000:00000000 00:00000000 00000000     0        0 333 1
"""
TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1
   1: 00000000000000000000000001000000:1F92 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1
"""


def test_proc_tables_are_read_as_listening_addresses():
    assert parse_listening(TCP) == {111: ("127.0.0.1", 8080), 222: ("0.0.0.0", 80)}
    assert parse_listening(TCP6) == {444: ("::", 8081), 555: ("::1", 8082)}
    dev = "Inter-|   Receive\n face |bytes\n    lo: 1 2\n  eth0: 3 4\n"
    assert parse_interfaces(dev) == ["lo", "eth0"]


def test_the_audit_flags_wide_listeners_on_the_host_and_namespaces_with_other_interfaces():
    host, private = "net:[1]", "net:[2]"
    found = ListenerAudit(
        host_netns=host,
        listeners=[
            Listener(1, "apiserver", "127.0.0.1", 6443, host),
            Listener(2, "forwarder", "::ffff:127.0.0.1", 9443, host),
            Listener(3, "trainer", "::", 9443, private),
        ],
        private={private: ["lo"]},
    )
    assert found.violations == []
    assert [x.name for x in found.isolated()] == ["trainer"]
    found.listeners.append(Listener(4, "rogue", "0.0.0.0", 80, host))
    found.private[private].append("eth0")
    assert found.violations == [
        "rogue (pid 4) on 0.0.0.0:80 listens beyond loopback in the host's network namespace",
        f"network namespace {private} has interfaces eth0 besides lo (trainer (pid 3) on [::]:9443)",
    ]


def test_the_audit_finds_a_real_loopback_listener_of_a_child_process():
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket,sys,time; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); "
            "print(s.getsockname()[1], flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(child.stdout.readline())
        # Through a parent: the audit walks down from the pids it is given.
        (listener,) = audit({child.pid: "child"}).listeners
        assert (listener.address, listener.port, listener.loopback) == ("127.0.0.1", port, True)
    finally:
        child.kill()
        child.wait()


def test_descendants_reach_a_grandchild_and_keep_a_vanished_pid():
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess,sys,time; "
            "c=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']); "
            "print(c.pid, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    grandchild = int(parent.stdout.readline())
    try:
        assert descendants([parent.pid, gone.pid]) == {parent.pid, grandchild, gone.pid}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(grandchild, signal.SIGKILL)
        parent.kill()
        parent.wait()


# --- the rotator's certificates --------------------------------------------

SPEC = RotatorSpec(
    ca_name="kubeflow-trainer-ca",
    ca_organization="kubeflow-trainer",
    service_dns="kubeflow-trainer-controller-manager.kubeflow-system.svc",
    secret_namespace="kubeflow-system",
    secret_name="kubeflow-trainer-webhook-cert",
    cert_dir="/tmp/k8s-webhook-server/serving-certs",
)


def test_seeded_certificates_pass_the_rotators_checks_90_days_ahead(tmp_path):
    seeded = seed(SPEC, tmp_path)
    ca = x509.load_pem_x509_certificate(seeded.ca_pem)
    cert = x509.load_pem_x509_certificate(seeded.cert.cert_file.read_bytes())
    # cert-controller looks 90 days ahead and parses the CA key as PKCS#1 only.
    at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=91)
    subjects = (x509.DNSName(SPEC.service_dns), x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    for subject in subjects:
        verifier = PolicyBuilder().store(Store([ca])).time(at).build_server_verifier(subject)
        verifier.verify(cert, [])
    sans = ca.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [SPEC.ca_name]
    assert seeded.ca_key_pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    secret = seeded.secret()
    assert secret["metadata"] == {"name": SPEC.secret_name, "namespace": SPEC.secret_namespace}
    assert base64.b64decode(secret["data"]["tls.crt"]) == seeded.cert.cert_file.read_bytes()
    assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]


def _trainer_source(root: Path, flags: str) -> Path:
    (root / "pkg/util/cert").mkdir(parents=True)
    (root / "cmd/trainer-controller-manager").mkdir(parents=True)
    (root / "pkg/util/cert/cert.go").write_text(
        'const (\n\tcertDir          = "/tmp/k8s-webhook-server/serving-certs"\n'
        '\tcaName           = "kubeflow-trainer-ca"\n\tcaOrganization   = "kubeflow-trainer"\n'
        '\tdefaultNamespace = "kubeflow-system"\n)\n'
    )
    (root / "cmd/trainer-controller-manager/main.go").write_text(flags)
    return root


V20_FLAGS = (
    'flag.IntVar(&webhookServerPort, "webhook-server-port", 9443, "Endpoint port.")\n'
    'flag.StringVar(&webhookServiceName, "webhook-service-name", '
    '"kubeflow-trainer-controller-manager", "Name")\n'
    'flag.StringVar(&webhookSecretName, "webhook-secret-name", '
    '"kubeflow-trainer-webhook-cert", "Name")\n'
)


def test_the_rotators_names_are_read_from_the_release_source(tmp_path):
    source = _trainer_source(tmp_path, V20_FLAGS)
    assert isolated_managers.takes_only_a_port(source)
    assert isolated_managers.trainer_rotator_spec(source) == SPEC


def test_a_release_with_a_config_file_is_started_as_before(tmp_path):
    source = _trainer_source(tmp_path, 'flag.StringVar(&configFile, "config", "", "file")\n')
    assert not isolated_managers.takes_only_a_port(source)
    default = object()
    assert isolated_managers.starter_for("trainer", source, default) is default


def test_a_source_without_the_rotators_constants_is_refused_in_one_line(tmp_path):
    source = _trainer_source(tmp_path, "")
    with pytest.raises(ConformanceError, match=r"webhook-service-name.*unsupported release"):
        isolated_managers.trainer_rotator_spec(source)


def test_without_root_isolation_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    with pytest.raises(ConformanceError) as refused:
        netns.require_namespaces("this Trainer release binds its webhook server on every interface")
    assert "\n" not in str(refused.value)
    assert "private network namespace, which needs root" in str(refused.value)


# --- release-dependent configuration ---------------------------------------


def test_config_fields_and_versions_follow_the_release_source(tmp_path):
    types = tmp_path / "api/config/v1alpha1/configuration_types.go"
    types.parent.mkdir(parents=True)
    types.write_text(
        'type ControllerMetrics struct {\n\tBindAddress string `json:"bindAddress,omitempty"`\n}\n'
        'type ControllerWebhook struct {\n\tCertDir string `json:"certDir,omitempty"`\n}\n'
    )
    relative = "api/config/v1alpha1/configuration_types.go"
    assert not _struct_has_field(tmp_path, relative, "ControllerMetrics", "certDir")
    assert _struct_has_field(tmp_path, relative, "ControllerWebhook", "certDir")
    for version in ("v1beta1", "v1beta2"):
        (tmp_path / "apis/config" / version).mkdir(parents=True)
        assert _kueue_config_version(tmp_path) == version


@pytest.mark.parametrize(
    ("version", "path"),
    [
        ("kueue.x-k8s.io/v1beta1", ["kubeConfig"]),
        ("kueue.x-k8s.io/v1beta2", ["clusterSource", "kubeConfig"]),
    ],
)
def test_kueue_manifests_are_rendered_in_the_served_version(version, path):
    templates = TemplateSet(TEMPLATES, OverrideShape.RUNTIME_PATCHES, version)
    documents = templates.render(
        "multikueue", name="mk", clusters=["worker"], kubeconfig_secret="worker-secret"
    )
    assert {d["apiVersion"] for d in documents} == {version}
    (cluster,) = [d for d in documents if d["kind"] == "MultiKueueCluster"]
    spec = cluster["spec"]
    for key in path:
        spec = spec[key]
    assert spec == {"locationType": "Secret", "location": "worker-secret"}
    flavor = templates.render_one("resourceflavor", name="f")
    assert flavor["apiVersion"] == version


def test_without_root_an_optional_manager_is_left_out_saying_why(monkeypatch, capsys):
    from trainjob_conformance.cluster.embedded import provider as embedded_stack

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert embedded_stack._can_isolate("training-operator") is False
    captured = capsys.readouterr()
    said = captured.err + captured.out
    assert "training-operator left out" in said and "needs root" in said
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    assert embedded_stack._can_isolate("training-operator") is True
