"""kind clusters (through pytest-kind-ng) with the stack from upstream release manifests.

The install follows the upstream e2e setups: JobSet's and Kueue's release
manifests, the Trainer's manager and runtimes overlays, each controller waited
for before the next. The manifests are built from the release sources
(cluster/kind/manifests.py), the same files the e2e suite dry-runs against a
real API server. Needs Docker, kind, kubectl and the image registries.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.health.controller_watch import controller_pod_probe
from trainjob_conformance.cluster.health.readiness import standard_probes, wait_for_admission
from trainjob_conformance.cluster.health.stack_watch import HEALTH_FILE, StackWatch
from trainjob_conformance.cluster.kind.manifests import InstallStep, kind_install_steps
from trainjob_conformance.cluster.provider import ClusterRequest, startup_errors
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.lifecycle.processes import register_cleanup, unregister_cleanup
from trainjob_conformance.progress import step
from trainjob_conformance.stack.profiles import COMPONENT_KEYS, Profile

NODE_IMAGE = "kindest/node:{kubernetes}"
CONTROLLERS = {
    "jobset": ("jobset-system", "jobset-controller-manager", "control-plane=controller-manager"),
    "trainer": (
        "kubeflow-system",
        "kubeflow-trainer-controller-manager",
        "app.kubernetes.io/name=trainer",
    ),
    "kueue": ("kueue-system", "kueue-controller-manager", "control-plane=controller-manager"),
}
_ROLLOUT_TIMEOUT = "300s"


# The install step after which each controller's rollout is awaited: the
# Trainer needs the JobSet CRD; Kueue's TrainJob integration needs both.
_ROLLOUT_AFTER = {"jobset": "jobset", "trainer-manager": "trainer", "kueue": "kueue"}


def install_plan(steps: list[InstallStep]) -> list[list[str]]:
    """kubectl argument lists that install the stack, in dependency order."""

    def rollout(component: str) -> list[str]:
        namespace, deployment, _ = CONTROLLERS[component]
        return [
            "-n",
            namespace,
            "rollout",
            "status",
            f"deployment/{deployment}",
            f"--timeout={_ROLLOUT_TIMEOUT}",
        ]

    plan = []
    for install in steps:
        plan.append(["apply", "--server-side", "-f", str(install.path)])
        if install.name in _ROLLOUT_AFTER:
            plan.append(rollout(_ROLLOUT_AFTER[install.name]))
    return plan


def _executable(explicit: str | None, name: str, hint: str) -> Path:
    found = explicit or shutil.which(name)
    if not found or not os.access(found, os.X_OK):
        raise ConformanceError(f"no {name} executable found: {hint}")
    return Path(found)


class KindStackCluster:
    """A kind cluster this run creates, installs the stack on, and deletes."""

    def __init__(
        self,
        profile: Profile,
        run_dir: Path,
        kind_bin: str | None = None,
        kubectl_bin: str | None = None,
        install_steps: Callable[[Profile, Path], list[InstallStep]] = kind_install_steps,
    ) -> None:
        self.install_steps = install_steps
        self.profile = profile
        self.run_dir = run_dir
        # kind takes lower-case letters, digits and dashes: a composed profile
        # (latest+kueue=v0.16.6) becomes tjc-latest-kueue-v0-16-6.
        self.name = "tjc-" + re.sub(r"[^a-z0-9]+", "-", profile.name.lower()).strip("-")
        self.kind_bin = _executable(
            kind_bin or os.environ.get("KIND"),
            "kind",
            "install kind (https://kind.sigs.k8s.io) or set KIND=/path/to/kind",
        )
        self.kubectl_bin = _executable(
            kubectl_bin or os.environ.get("KUBECTL"),
            "kubectl",
            "install kubectl or set KUBECTL=/path/to/kubectl",
        )
        self._cluster = None
        self.watch: StackWatch | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.run_dir / "kind-kubeconfig.yaml"

    def create_and_install(self) -> None:
        try:
            from pytest_kind import KindCluster
        except ImportError:
            raise ConformanceError(
                "the kind provider needs pytest-kind-ng: pip install 'trainjob-conformance[kind]'"
            ) from None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._cluster = KindCluster(
            self.name,
            kubeconfig=self.kubeconfig,
            image=NODE_IMAGE.format(**self.profile.versions),
            kind_path=self.kind_bin,
            kubectl_path=self.kubectl_bin,
        )
        register_cleanup(self.down)
        with step(f"creating kind cluster {self.name}"):
            self._cluster.create()
        with step("building the release manifests of JobSet, Trainer and Kueue"):
            steps = self.install_steps(self.profile, self.kubectl_bin)
        with step("installing JobSet, Trainer and Kueue from their release manifests"):
            for args in install_plan(steps):
                try:
                    self._cluster.kubectl(*args, stderr=subprocess.STDOUT)
                except subprocess.CalledProcessError as error:
                    raise ConformanceError(
                        f"kubectl {' '.join(args)} failed:\n{error.output}"
                    ) from None

    def up(self) -> ClusterHandle:
        with startup_errors(self.run_dir):
            return self._up()

    def _up(self) -> ClusterHandle:
        self.create_and_install()
        kube = Kube(api_client_for(self.kubeconfig))
        wait_for_admission(kube, standard_probes(), timeout=120, log_tails=lambda: "")
        handle = ClusterHandle(
            provider="kind",
            kubeconfig=self.kubeconfig,
            # Only what it installs: the training-operator a profile may add
            # runs on the embedded cluster alone, so its policies are skipped here.
            versions={k: v for k, v in self.profile.versions.items() if k in COMPONENT_KEYS},
            profile=self.profile.name,
            run_dir=self.run_dir,
        )
        handle.controller_pods = {n: (ns, sel) for n, (ns, _, sel) in CONTROLLERS.items()}
        probes = [
            controller_pod_probe(kube, component, namespace, selector)
            for component, (namespace, selector) in handle.controller_pods.items()
        ]
        self.watch = StackWatch(self.run_dir / HEALTH_FILE, probes, interval=2.0).start()
        handle.health_file = self.watch.path
        return handle

    def down_hint(self) -> str:
        # The kubeconfig too: without it kind would edit the user's ~/.kube/config.
        command = ["delete", "cluster", "--name", self.name, "--kubeconfig", str(self.kubeconfig)]
        return shlex.join([str(self.kind_bin), *command])

    def detach(self) -> None:
        """Leave the kind cluster running past this process (`kind delete cluster` removes it)."""
        unregister_cleanup(self.down)
        if self.watch is not None:
            self.watch.stop()
            self.watch = None

    def down(self) -> None:
        unregister_cleanup(self.down)
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        if self._cluster is not None:
            self._cluster.delete()
            self._cluster = None
        self.watch: StackWatch | None = None


def from_request(request: ClusterRequest) -> KindStackCluster:
    """The registry's way in (cluster/registry.py)."""
    return KindStackCluster(request.profile, request.run_dir)
