"""Managers that take only a webhook port and always run a certificate rotator.

Trainer v2.0.x (`cmd/trainer-controller-manager/main.go`) and training-operator
v1.9.x (`cmd/training-operator.v1/main.go`) have no config file:
`--webhook-server-port` is all their webhook server gets, so it listens on
every interface, and both always start cert-controller's rotator
(`pkg/util/cert.ManageCerts`, `pkg/cert.ManageCerts`). The harness starts them

- in a private network namespace bridged to the host (`cluster/isolation/netns.py`):
  out to the API server, in to the webhook and health ports, nothing else;
- with the rotator's Secret and certificate directory pre-seeded
  (`cluster/isolation/rotator_seed.py`), the directory shown to this process only through
  a private mount namespace (the path is hard-coded under /tmp);
- with the health probe on the namespace's 127.0.0.1 and metrics off.

The names the rotator uses are read from each release's own source.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import yaml

from trainjob_conformance.cluster.embedded.host_controllers import (
    HostController,
    Launch,
    Starter,
    private_certs_prefix,
)
from trainjob_conformance.cluster.isolation.netns import NetnsBridge, require_namespaces
from trainjob_conformance.cluster.isolation.rotator_seed import RotatorSpec, seed
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.lifecycle.processes import HostProcess
from trainjob_conformance.ports import LOOPBACK

# In a Pod, Trainer v2.0's rotator takes its namespace from here (getOperatorNamespace).
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class PortOnlyRelease:
    """Where one project keeps what its port-only manager and rotator are built from."""

    component: str
    main: str  # the manager's main.go
    cert: str  # the package that configures the rotator
    namespace_const: str  # the rotator's namespace outside a Pod
    # How a Pod overrides that namespace: an environment variable the harness
    # sets to the same value, or None for the service-account file.
    namespace_env: str | None
    extra_args: tuple[str, ...] = ()

    def takes_only_a_port(self, source: Path) -> bool:
        path = source / self.main
        return path.is_file() and '"webhook-server-port"' in path.read_text()


TRAINER_V2_0 = PortOnlyRelease(
    "trainer",
    main="cmd/trainer-controller-manager/main.go",
    cert="pkg/util/cert/cert.go",
    namespace_const="defaultNamespace",
    namespace_env=None,
)
TRAINING_OPERATOR_V1 = PortOnlyRelease(
    "training-operator",
    main="cmd/training-operator.v1/main.go",
    cert="pkg/cert/cert.go",
    namespace_const="defaultOperatorNamespace",
    namespace_env="MY_POD_NAMESPACE",
    # The kind the TO-* policies use; its CRD and webhook are the ones installed.
    extra_args=("--enable-scheme=pytorchjob",),
)
PORT_ONLY = {release.component: release for release in (TRAINER_V2_0, TRAINING_OPERATOR_V1)}


def _read(source: Path, relative: str) -> str:
    path = source / relative
    if not path.is_file():
        raise ConformanceError(f"{path} is missing: this release is not supported by the harness")
    return path.read_text()


def takes_only_a_port(source: Path) -> bool:
    """The Trainer release gives its webhook server a port and no host (v2.0.x)."""
    return TRAINER_V2_0.takes_only_a_port(source)


def _go_string(text: str, pattern: str, where: str) -> str:
    match = re.search(pattern, text)
    if match is None:
        raise ConformanceError(f"cannot find {pattern!r} in {where}: unsupported release")
    return match.group(1)


def rotator_spec(release: PortOnlyRelease, source: Path) -> RotatorSpec:
    """What the release's rotator is configured with: the constants of its cert
    package and the defaults of --webhook-service-name/--webhook-secret-name."""
    cert = _read(source, release.cert)
    main = _read(source, release.main)

    def const(name: str) -> str:
        return _go_string(cert, rf'\b{name}\s*=\s*"([^"]+)"', release.cert)

    def flag_default(flag: str) -> str:
        pattern = rf'"{re.escape(flag)}",\s*"([^"]+)"'
        return _go_string(main, pattern, f"{release.main} ({flag})")

    namespace = const(release.namespace_const)
    if release.namespace_env is None and _SERVICE_ACCOUNT_NAMESPACE.is_file():
        namespace = _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or namespace
    service = flag_default("webhook-service-name")
    return RotatorSpec(
        ca_name=const("caName"),
        ca_organization=const("caOrganization"),
        service_dns=f"{service}.{namespace}.svc",
        secret_namespace=namespace,
        secret_name=flag_default("webhook-secret-name"),
        cert_dir=const("certDir"),
    )


def trainer_rotator_spec(source: Path) -> RotatorSpec:
    return rotator_spec(TRAINER_V2_0, source)


def api_server_port(kubeconfig: Path) -> int:
    config = yaml.safe_load(kubeconfig.read_text())
    server = urlparse(config["clusters"][0]["cluster"]["server"])
    if server.hostname != LOOPBACK or server.port is None:
        raise ConformanceError(
            f"{kubeconfig}: the API server is at {server.netloc}, not on {LOOPBACK}:PORT; "
            "an isolated manager can only be bridged to a loopback API server"
        )
    return server.port


def start_isolated(release: PortOnlyRelease, launch: Launch) -> HostController:
    binary, kubeconfig, _, directory, ports = launch.unpack()
    name = release.component
    require_namespaces(f"this {name} release binds its webhook server on every interface")
    spec = rotator_spec(release, launch.source)
    seeded = seed(spec, directory / "certs")
    kube = Kube(api_client_for(kubeconfig))
    kube.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.secret_namespace}}
    )
    kube.apply(seeded.secret())

    bridge = NetnsBridge(
        name,
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
            name, top, spec.cert_dir, seeded.cert.directory, directory
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
            *release.extra_args,
        ]
        env = {**os.environ, **extra_env, "TMPDIR": tmpdir}
        if release.namespace_env is not None:
            env[release.namespace_env] = spec.secret_namespace
        process = HostProcess(
            name, args, directory / f"{name}.log", env=env, owner=launch.owner
        ).start()
    except BaseException:
        bridge.stop()
        raise
    return HostController(name, ports, process, seeded.ca_pem, helpers=helpers)


def starter_for(component: str, source: Path, default: Starter | None) -> Starter:
    release = PORT_ONLY.get(component)
    if release is not None and release.takes_only_a_port(source):
        return functools.partial(start_isolated, release)
    if default is None:
        raise ConformanceError(
            f"{component} at {source}: the harness knows how to start it only when its "
            "manager takes --webhook-server-port (v1.9.x); use such a release"
        )
    return default
