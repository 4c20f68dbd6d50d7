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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.cluster.certs import CertificateAuthority, ServingCert
from trainjob_conformance.cluster.manifests import (
    KUEUE_FRAMEWORKS,
    KUEUE_MANAGED_NAMESPACES,
    KUEUE_NAMESPACE,
)
from trainjob_conformance.cluster.ports import LOOPBACK, free_port
from trainjob_conformance.cluster.processes import HostProcess, RunOwnership
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import wait_for

_READY_TIMEOUT = 120.0
_READY_POLL = 0.05

# Kueue reads its metrics certificate from this fixed path when its own cert
# management is off (cmd/kueue/main.go). The harness shows it to the Kueue
# process alone, through a private mount namespace with /etc overlaid on a
# tmpfs, so the host's /etc is never written.
_KUEUE_METRICS_CERTS = "/etc/kueue/metrics/certs"
_KUEUE_LAUNCHER = r"""
set -e
mount -t tmpfs tmpfs "$TJC_OVERLAY"
mkdir "$TJC_OVERLAY/upper" "$TJC_OVERLAY/work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$TJC_OVERLAY/upper,workdir=$TJC_OVERLAY/work" /etc
mkdir -p "$TJC_METRICS_CERTS"
cp "$TJC_CERT_DIR/tls.crt" "$TJC_CERT_DIR/tls.key" "$TJC_METRICS_CERTS/"
exec "$@"
"""


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
    """One running manager: where it listens and where it logs."""

    component: str
    ports: Ports
    process: HostProcess

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

    def unpack(self) -> tuple[Path, Path, CertificateAuthority, Path, Ports]:
        return self.binary, self.kubeconfig, self.ca, self.directory, self.ports


def _write_config(directory: Path, config: dict[str, Any]) -> Path:
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def start_jobset(launch: Launch) -> HostController:
    binary, kubeconfig, ca, directory, ports = launch.unpack()
    cert = ca.issue_serving_cert(directory / "certs", "jobset-webhook")
    config = _write_config(
        directory,
        {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "webhook": {"host": LOOPBACK, "port": ports.webhook, "certDir": str(cert.directory)},
            "metrics": {
                "bindAddress": f"{LOOPBACK}:{ports.metrics}",
                "certDir": str(cert.directory),
            },
            "health": {"healthProbeBindAddress": f"{LOOPBACK}:{ports.health}"},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        },
    )
    args = [str(binary), f"--config={config}", f"--kubeconfig={kubeconfig}"]
    process = HostProcess("jobset", args, directory / "jobset.log", owner=launch.owner).start()
    return HostController("jobset", ports, process)


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
    return HostController("trainer", ports, process)


def _kueue_launch_prefix(cert: ServingCert, directory: Path) -> tuple[list[str], dict[str, str]]:
    if Path(_KUEUE_METRICS_CERTS, "tls.crt").is_file():
        return [], {}  # the host already provides them
    if os.geteuid() != 0:
        raise ConformanceError(
            f"Kueue needs a certificate at {_KUEUE_METRICS_CERTS} (hard-coded upstream); run as "
            "root so the harness can provide it in a private mount namespace, or place any "
            f"tls.crt/tls.key pair there yourself"
        )
    overlay = directory / "etc-overlay"
    overlay.mkdir(parents=True, exist_ok=True)
    env = {
        "TJC_OVERLAY": str(overlay),
        "TJC_METRICS_CERTS": _KUEUE_METRICS_CERTS,
        "TJC_CERT_DIR": str(cert.directory),
    }
    prefix = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        _KUEUE_LAUNCHER,
        "kueue",
    ]
    return prefix, env


def start_kueue(launch: Launch) -> HostController:
    binary, kubeconfig, ca, directory, ports = launch.unpack()
    cert = ca.issue_serving_cert(directory / "certs", "kueue-webhook")
    config = _write_config(
        directory,
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
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
    return HostController("kueue", ports, process)


STARTERS = {"jobset": start_jobset, "trainer": start_trainer, "kueue": start_kueue}
