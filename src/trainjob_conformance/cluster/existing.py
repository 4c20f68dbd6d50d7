"""Any cluster with the stack installed, named explicitly by its kubeconfig."""

from __future__ import annotations

import json
from pathlib import Path

import urllib3
from kubernetes.client.exceptions import ApiException

from trainjob_conformance.cluster.embedded_stack import STATE_FILE
from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.introspect import (
    detect_stack,
    missing_components,
)
from trainjob_conformance.cluster.readiness import (
    TORCH_RUNTIME,
    standard_probes,
    wait_for_admission,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.progress import say
from trainjob_conformance.stack.profiles import Profile


def _embedded_state(kubeconfig: Path) -> dict[str, object] | None:
    """The state an embedded `up` wrote, if this kubeconfig is one of its clusters."""
    # <run_dir>/kwok/clusters/<name>/kubeconfig.yaml
    if len(kubeconfig.parents) < 4:
        return None
    state = kubeconfig.parents[3] / STATE_FILE
    if not state.is_file():
        return None
    return dict(json.loads(state.read_text()))


class ExistingCluster:
    """Uses a cluster the harness did not start; `down` leaves it as it was."""

    def __init__(self, kubeconfig: Path | None, profile: Profile) -> None:
        if kubeconfig is None:
            raise ConformanceError(
                "--trainjob-cluster=existing needs --trainjob-kubeconfig PATH: the harness never "
                "uses the current kubectl context by accident"
            )
        self.kubeconfig = kubeconfig.expanduser().resolve()
        self.profile = profile

    def up(self) -> ClusterHandle:
        if not self.kubeconfig.is_file():
            raise ConformanceError(f"kubeconfig {self.kubeconfig} does not exist")
        try:
            kube = Kube(api_client_for(self.kubeconfig))
            missing = missing_components(kube)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
            raise ConformanceError(
                f"cannot reach the API server of {self.kubeconfig}: {error}"
            ) from None
        if missing:
            raise ConformanceError(
                f"the cluster of {self.kubeconfig} lacks {', '.join(missing)}: install JobSet, "
                "Kueue and Kubeflow Trainer first, or use --trainjob-cluster=embedded"
            )
        state = _embedded_state(self.kubeconfig)
        if state is not None:
            handle = ClusterHandle.from_json(state["handle"])  # type: ignore[arg-type]
            handle.provider = "existing"
            detected_from = "state of the embedded run that started it"
        else:
            stack = detect_stack(
                kube, self.profile.versions, f"assumed from profile {self.profile.name}"
            )
            handle = ClusterHandle(
                provider="existing", kubeconfig=self.kubeconfig, versions=stack.versions
            )
            handle.controller_pods = dict(stack.controller_pods)
            detected_from = "; ".join(
                f"{k} {v} ({stack.sources[k]})" for k, v in stack.versions.items()
            )
        say(f"existing cluster {self.kubeconfig}: {detected_from}")
        try:
            kube.get("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", TORCH_RUNTIME)
        except ApiException as error:
            if error.status != 404:
                raise
            raise ConformanceError(
                f"the cluster has no ClusterTrainingRuntime {TORCH_RUNTIME}: install Trainer's "
                "upstream runtimes (manifests/overlays/runtimes)"
            ) from None
        wait_for_admission(kube, standard_probes(), timeout=30, log_tails=lambda: "")
        return handle

    def down(self) -> None:
        """Nothing to stop: the harness did not start this cluster."""
