"""JobSet, Kueue and Trainer managers as host processes against a loopback cluster.

Each gets its own ports on 127.0.0.1, its own config file, certificate
management off, a serving certificate from the cluster's CA, and leader
election off. The config fields are those of the pinned releases; each
decoder is strict, so a field a release does not know stops it at once.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.cluster.health.host_load import while_saturated
from trainjob_conformance.cluster.kueue import (
    KUEUE_FRAMEWORKS,
    KUEUE_MANAGED_NAMESPACES,
    KUEUE_NAMESPACE,
)
from trainjob_conformance.cluster.serving.certs import CertificateAuthority, ServingCert
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import wait_for
from trainjob_conformance.lifecycle.processes import HostProcess, RunOwnership
from trainjob_conformance.ports import LOOPBACK, free_port

_READY_TIMEOUT = 120.0
_READY_POLL = 0.05

# Kueue reads its metrics certificate from this fixed path when its own cert
# management is off (cmd/kueue/main.go). The harness shows it to the Kueue
# process alone, through a private mount namespace with /etc overlaid on a
# tmpfs, so the host's /etc is never written.
_KUEUE_METRICS_CERTS = "/etc/kueue/metrics/certs"
# Overlays TJC_TARGET (a host directory) with a tmpfs-backed upper layer in the
# caller's private mount namespace, puts the certificate pair at
# TJC_CERTS_DEST inside it, and runs the manager. Reads of everything else
# under TJC_TARGET still see the host's files.
_OVERLAY_LAUNCHER = r"""
set -e
mount -t tmpfs tmpfs "$TJC_OVERLAY"
mkdir "$TJC_OVERLAY/upper" "$TJC_OVERLAY/work"
mount -t overlay overlay -o "lowerdir=$TJC_TARGET,upperdir=$TJC_OVERLAY/upper,workdir=$TJC_OVERLAY/work" "$TJC_TARGET"
mkdir -p "$TJC_CERTS_DEST"
cp "$TJC_CERT_DIR/tls.crt" "$TJC_CERT_DIR/tls.key" "$TJC_CERTS_DEST/"
exec "$@"
"""


def private_certs_prefix(
    name: str, target: str, certs_dest: str, cert_dir: Path, directory: Path
) -> tuple[list[str], dict[str, str]]:
    """Command prefix and environment that show `cert_dir`'s tls.crt/tls.key at
    `certs_dest` (under the host directory `target`) to one process only."""
    overlay = directory / f"{Path(target).name}-overlay"
    overlay.mkdir(parents=True, exist_ok=True)
    env = {
        "TJC_OVERLAY": str(overlay),
        "TJC_TARGET": target,
        "TJC_CERTS_DEST": certs_dest,
        "TJC_CERT_DIR": str(cert_dir),
    }
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _OVERLAY_LAUNCHER]
    return [*prefix, name], env


@dataclass
class Ports:
    webhook: int
    metrics: int
    health: int

    @classmethod
    def pick(cls) -> Ports:
        return cls(webhook=free_port(), metrics=free_port(), health=free_port())


@dataclass
class HostController:
    """One running manager: where it listens, where it logs, the processes that
    serve it (forwarders of its network namespace) and the CA its webhooks use."""

    component: str
    ports: Ports
    process: HostProcess
    ca_pem: bytes
    helpers: list[HostProcess] = field(default_factory=list)

    def stop(self) -> None:
        """The manager first, then what serves it."""
        self.process.stop()
        for helper in reversed(self.helpers):
            helper.stop()

    @property
    def log_file(self) -> Path:
        return self.process.log_file

    def wait_ready(self, abort: Callable[[], None] | None = None) -> None:
        url = f"http://{LOOPBACK}:{self.ports.health}/readyz"

        def ready() -> bool:
            self.process.ensure_running()
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    return bool(response.status == 200)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return False

        wait_for(
            f"{self.component} manager to report ready on {url}",
            ready,
            timeout=_READY_TIMEOUT,
            diagnostics=lambda: f"{self.component} log tail:\n{self.process.log_tail()}",
            # A loopback HTTP request costs about a millisecond: look often.
            interval=_READY_POLL,
            abort=abort,
            stretch=while_saturated(_READY_TIMEOUT),
        )


@dataclass(frozen=True)
class Launch:
    """What every manager is started with: its binary, the cluster, its CA-issued
    certificates, its own directory and ports, and the run that owns it."""

    binary: Path
    kubeconfig: Path
    ca: CertificateAuthority
    directory: Path
    ports: Ports
    owner: RunOwnership
    source: Path  # the release's Go module: its flags and config types decide how to start it

    def unpack(self) -> tuple[Path, Path, CertificateAuthority, Path, Ports]:
        return self.binary, self.kubeconfig, self.ca, self.directory, self.ports


def _write_config(directory: Path, config: dict[str, Any]) -> Path:
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _struct_has_field(source: Path, types_file: str, struct: str, json_name: str) -> bool:
    """Whether the release's config type `struct` has the JSON field `json_name`
    (the decoders are strict: a field the release lacks stops the manager)."""
    path = source / types_file
    text = path.read_text() if path.is_file() else ""
    start = text.find(f"type {struct} struct {{")
    body = text[start : text.find("\n}", start)] if start >= 0 else ""
    return f'json:"{json_name}' in body


def start_jobset(launch: Launch) -> HostController:
    binary, kubeconfig, ca, directory, ports = launch.unpack()
    cert = ca.issue_serving_cert(directory / "certs", "jobset-webhook")
    metrics: dict[str, Any] = {"bindAddress": f"{LOOPBACK}:{ports.metrics}"}
    # From v0.9 the metrics server takes a certDir; v0.8 serves a self-signed one.
    types = "api/config/v1alpha1/configuration_types.go"
    if _struct_has_field(launch.source, types, "ControllerMetrics", "certDir"):
        metrics["certDir"] = str(cert.directory)
    config = _write_config(
        directory,
        {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "webhook": {"host": LOOPBACK, "port": ports.webhook, "certDir": str(cert.directory)},
            "metrics": metrics,
            "health": {"healthProbeBindAddress": f"{LOOPBACK}:{ports.health}"},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        },
    )
    args = [str(binary), f"--config={config}", f"--kubeconfig={kubeconfig}"]
    process = HostProcess("jobset", args, directory / "jobset.log", owner=launch.owner).start()
    return HostController("jobset", ports, process, ca.ca_pem)


def start_trainer(launch: Launch) -> HostController:
    binary, kubeconfig, ca, directory, ports = launch.unpack()
    # The Trainer config has no certDir: controller-runtime reads
    # $TMPDIR/k8s-webhook-server/serving-certs, so TMPDIR is per process.
    tmpdir = directory / "tmp"
    ca.issue_serving_cert(tmpdir / "k8s-webhook-server" / "serving-certs", "trainer-webhook")
    config = _write_config(
        directory,
        {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "kind": "Configuration",
            "webhook": {"host": LOOPBACK, "port": ports.webhook},
            "metrics": {"bindAddress": f"{LOOPBACK}:{ports.metrics}", "secureServing": False},
            "health": {"healthProbeBindAddress": f"{LOOPBACK}:{ports.health}"},
            "leaderElection": {"leaderElect": False},
            "certManagement": {"enable": False},
        },
    )
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    args = [str(binary), f"--config={config}", f"--kubeconfig={kubeconfig}"]
    process = HostProcess(
        "trainer", args, directory / "trainer.log", env=env, owner=launch.owner
    ).start()
    return HostController("trainer", ports, process, ca.ca_pem)


def _kueue_launch_prefix(cert: ServingCert, directory: Path) -> tuple[list[str], dict[str, str]]:
    if Path(_KUEUE_METRICS_CERTS, "tls.crt").is_file():
        return [], {}  # the host already provides them
    if os.geteuid() != 0:
        raise ConformanceError(
            f"Kueue needs a certificate at {_KUEUE_METRICS_CERTS} (hard-coded upstream); run as "
            "root so the harness can provide it in a private mount namespace, or place any "
            f"tls.crt/tls.key pair there yourself"
        )
    return private_certs_prefix("kueue", "/etc", _KUEUE_METRICS_CERTS, cert.directory, directory)


def _kueue_config_version(source: Path) -> str:
    """The newest config API the release reads (v1beta2 from Kueue v0.15, v1beta1 before)."""
    versions = sorted(p.name for p in (source / "apis" / "config").glob("v1beta*") if p.is_dir())
    if not versions:
        raise ConformanceError(f"{source} has no apis/config/v1beta*: not a Kueue release")
    return versions[-1]


def start_kueue(launch: Launch) -> HostController:
    binary, kubeconfig, ca, directory, ports = launch.unpack()
    cert = ca.issue_serving_cert(directory / "certs", "kueue-webhook")
    config = _write_config(
        directory,
        {
            "apiVersion": f"config.kueue.x-k8s.io/{_kueue_config_version(launch.source)}",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": LOOPBACK, "port": ports.webhook, "certDir": str(cert.directory)},
            "metrics": {"bindAddress": f"{LOOPBACK}:{ports.metrics}"},
            "health": {"healthProbeBindAddress": f"{LOOPBACK}:{ports.health}"},
            "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
            "managedJobsNamespaceSelector": KUEUE_MANAGED_NAMESPACES,
            # The visibility API server would listen on all interfaces and
            # needs certificates at /visibility.
            "featureGates": {"VisibilityOnDemand": False},
        },
    )
    prefix, extra_env = _kueue_launch_prefix(cert, directory)
    args = [*prefix, str(binary), f"--config={config}", f"--kubeconfig={kubeconfig}"]
    env = {**os.environ, **extra_env}
    process = HostProcess(
        "kueue", args, directory / "kueue.log", env=env, owner=launch.owner
    ).start()
    return HostController("kueue", ports, process, ca.ca_pem)


Starter = Callable[[Launch], HostController]
STARTERS: dict[str, Starter] = {
    "jobset": start_jobset,
    "trainer": start_trainer,
    "kueue": start_kueue,
}
