"""Managers that take only a webhook port and always run a certificate rotator.

Trainer v2.0.x (`cmd/trainer-controller-manager/main.go`) has no config file:
`--webhook-server-port` is all its webhook server gets, so it listens on every
interface, and `pkg/util/cert.ManageCerts` always starts cert-controller's
rotator. The harness starts it

- in a private network namespace bridged to the host (`cluster/netns.py`):
  out to the API server, in to its webhook and health ports, nothing else;
- with the rotator's Secret and certificate directory pre-seeded
  (`cluster/rotator_seed.py`), the directory shown to this process only through
  a private mount namespace (the path is hard-coded under /tmp);
- with its health probe on the namespace's 127.0.0.1 and metrics off.

The names the rotator uses are read from the release's own source.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

import yaml

from trainjob_conformance.cluster.host_controllers import (
    HostController,
    Launch,
    Starter,
    private_certs_prefix,
)
from trainjob_conformance.cluster.netns import NetnsBridge, require_namespaces
from trainjob_conformance.cluster.ports import LOOPBACK
from trainjob_conformance.cluster.processes import HostProcess
from trainjob_conformance.cluster.rotator_seed import RotatorSpec, seed
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube, api_client_for

_TRAINER_MAIN = "cmd/trainer-controller-manager/main.go"
_TRAINER_CERT = "pkg/util/cert/cert.go"
# In a Pod, the rotator takes its namespace from here (getOperatorNamespace).
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _read(source: Path, relative: str) -> str:
    path = source / relative
    if not path.is_file():
        raise ConformanceError(f"{path} is missing: this release is not supported by the harness")
    return path.read_text()


def takes_only_a_port(source: Path) -> bool:
    """The Trainer release gives its webhook server a port and no host (v2.0.x)."""
    path = source / _TRAINER_MAIN
    return path.is_file() and '"webhook-server-port"' in path.read_text()


def _go_string(text: str, pattern: str, where: str) -> str:
    match = re.search(pattern, text)
    if match is None:
        raise ConformanceError(f"cannot find {pattern!r} in {where}: unsupported release")
    return match.group(1)


def _flag_default(main: str, flag: str) -> str:
    return _go_string(main, rf'"{re.escape(flag)}",\s*"([^"]+)"', f"{_TRAINER_MAIN} ({flag})")


def trainer_rotator_spec(source: Path) -> RotatorSpec:
    """What Trainer v2.0's rotator is configured with: constants of pkg/util/cert and
    the defaults of the manager's --webhook-service-name/--webhook-secret-name flags."""
    cert = _read(source, _TRAINER_CERT)
    main = _read(source, _TRAINER_MAIN)

    def const(name: str) -> str:
        return _go_string(cert, rf'\b{name}\s*=\s*"([^"]+)"', _TRAINER_CERT)

    namespace = const("defaultNamespace")
    if _SERVICE_ACCOUNT_NAMESPACE.is_file():
        namespace = _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or namespace
    service = _flag_default(main, "webhook-service-name")
    return RotatorSpec(
        ca_name=const("caName"),
        ca_organization=const("caOrganization"),
        service_dns=f"{service}.{namespace}.svc",
        secret_namespace=namespace,
        secret_name=_flag_default(main, "webhook-secret-name"),
        cert_dir=const("certDir"),
    )


def api_server_port(kubeconfig: Path) -> int:
    config = yaml.safe_load(kubeconfig.read_text())
    server = urlparse(config["clusters"][0]["cluster"]["server"])
    if server.hostname != LOOPBACK or server.port is None:
        raise ConformanceError(
            f"{kubeconfig}: the API server is at {server.netloc}, not on {LOOPBACK}:PORT; "
            "an isolated manager can only be bridged to a loopback API server"
        )
    return server.port


def start_trainer_isolated(launch: Launch) -> HostController:
    binary, kubeconfig, _, directory, ports = launch.unpack()
    require_namespaces("this Trainer release binds its webhook server on every interface")
    spec = trainer_rotator_spec(launch.source)
    seeded = seed(spec, directory / "certs")
    kube = Kube(api_client_for(kubeconfig))
    kube.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.secret_namespace}}
    )
    kube.apply(seeded.secret())

    bridge = NetnsBridge(
        "trainer",
        directory,
        launch.owner,
        outbound=(api_server_port(kubeconfig),),
        inbound=(ports.webhook, ports.health),
    )
    helpers = bridge.start().processes
    try:
        # The webhook server reads $TMPDIR/k8s-webhook-server/serving-certs; the
        # rotator checks its hard-coded certDir. Both must be the same place.
        tmpdir = str(Path(spec.cert_dir).parent.parent)
        top = "/" + Path(spec.cert_dir).parts[1]
        prefix, extra_env = private_certs_prefix(
            "trainer", top, spec.cert_dir, seeded.cert.directory, directory
        )
        args = [
            *bridge.enter(),
            *prefix,
            str(binary),
            f"--kubeconfig={kubeconfig}",
            f"--webhook-server-port={ports.webhook}",
            f"--health-probe-bind-address={LOOPBACK}:{ports.health}",
            "--metrics-bind-address=0",
            "--leader-elect=false",
        ]
        env = {**os.environ, **extra_env, "TMPDIR": tmpdir}
        process = HostProcess(
            "trainer", args, directory / "trainer.log", env=env, owner=launch.owner
        ).start()
    except BaseException:
        bridge.stop()
        raise
    return HostController("trainer", ports, process, seeded.ca_pem, helpers=helpers)


def starter_for(component: str, source: Path, default: Starter) -> Starter:
    if component == "trainer" and takes_only_a_port(source):
        return start_trainer_isolated
    return default
