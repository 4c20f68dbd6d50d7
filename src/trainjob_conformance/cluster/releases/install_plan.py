"""The order in which a kind cluster takes the stack: phases of kubectl commands run
side by side, and the one wait kubectl cannot do.

Every controller's namespaces and CRDs first, one wait for the CRDs, then the
controllers all at once; Kueue's webhook configurations once the other
controllers' Pods exist (manifests.py stack_applies says why); then
the rollouts together, since each mostly waits for its webhook certificate to
reach its Pod through a Secret volume; what their webhooks judge (the Trainer's
runtimes) goes last. The providers run the phases (applier.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.releases.manifests import InstallStep, StackApplies, stack_applies

# Namespace, Deployment and Pod label of each controller the release manifests install.
CONTROLLERS = {
    "jobset": ("jobset-system", "jobset-controller-manager", "control-plane=controller-manager"),
    "trainer": (
        "kubeflow-system",
        "kubeflow-trainer-controller-manager",
        "app.kubernetes.io/name=trainer",
    ),
    "kueue": ("kueue-system", "kueue-controller-manager", "control-plane=controller-manager"),
    # Only where the profile pins it (latest): its policies are skipped elsewhere.
    "training-operator": (
        "kubeflow",
        "training-operator",
        "control-plane=kubeflow-training-operator",
    ),
}
# Each kubectl wait and rollout bounds itself with this.
ROLLOUT_SECONDS = 300
# The install steps that carry a controller, and whose rollout each one's is.
_ROLLOUT_AFTER = {
    "jobset": "jobset",
    "trainer-manager": "trainer",
    "kueue": "kueue",
    "training-operator": "training-operator",
}
# Component -> the name of the install step that carries its controller.
ROLLOUT_STEPS = {component: name for name, component in _ROLLOUT_AFTER.items()}


@dataclass(frozen=True)
class Command:
    """One kubectl command of a phase, and what it does in a few words (the timings'
    names: a rollout's is `rollout <deployment>`)."""

    args: tuple[str, ...]
    words: str


@dataclass(frozen=True)
class Phase:
    """kubectl commands run at once; or, with none, the wait for every CRD to be
    Established. Every controller's manager needs some CRDs at its start (the
    Trainer JobSet's, Kueue's TrainJob integration the Trainer's). Not `kubectl wait
    --for=condition=Established`: it fails at once on a CRD whose status has no
    conditions yet (".status.conditions accessor error"), which a worker cluster
    installing beside a running suite met; the provider polls instead."""

    commands: tuple[Command, ...] = ()

    @property
    def crds_established(self) -> bool:
        return not self.commands

    @property
    def label(self) -> str:
        """The phase in a few words, for the timings."""
        if self.crds_established:
            return "CRDs established"
        return ", ".join(command.words for command in self.commands)


CRDS_ESTABLISHED = Phase()

# The API server's words when it could not reach a webhook's Pod, as opposed to a
# webhook that answered and refused (`denied the request`). The x509 case is a
# request to a Service address nothing routes yet, answered by whatever else
# listens on the machine's egress (a TLS-intercepting proxy, here).
_UNREACHABLE = ("connection refused", "no endpoints available", "i/o timeout", "x509:")


def webhook_unreachable(error: str) -> bool:
    """A kubectl failure that says a webhook could not be called, not that it refused."""
    return "failed calling webhook" in error and any(word in error for word in _UNREACHABLE)


def install_plan(
    steps: list[InstallStep],
    regroup: Callable[[list[InstallStep]], StackApplies] = stack_applies,
    force_conflicts: bool = False,
    managers: Mapping[str, tuple[str, str, str]] = CONTROLLERS,
) -> list[Phase]:
    """The phases that install the stack, in dependency order.

    `force_conflicts`: each apply takes over the fields another field manager set
    (an upgrade's, over objects the running release's controllers wrote to).
    `managers`: where each component's manager runs, where it is not where the
    releases' manifests run it (manifests of the user's own installer).
    """
    forced = ("--force-conflicts",) if force_conflicts else ()

    def on_deployment(component: str, words: str, *args: str) -> Command:
        namespace, deployment, _ = managers.get(component) or CONTROLLERS[component]
        return Command(
            ("-n", namespace, *args, f"deployment/{deployment}", f"--timeout={ROLLOUT_SECONDS}s"),
            f"{words} {deployment}",
        )

    def apply(path: Path) -> Command:
        return Command(
            ("apply", "--server-side", *forced, "-f", str(path)),
            f"apply {path.name.removesuffix('.yaml').split('.')[-1]}",
        )

    def together(commands: Iterable[Command]) -> Phase:
        return Phase(tuple(commands))

    controllers = [s for s in steps if s.name in _ROLLOUT_AFTER]
    phases: list[Phase] = []
    if controllers:
        components = [_ROLLOUT_AFTER[s.name] for s in controllers]
        applies = regroup(controllers)
        phases.append(together(apply(path) for path in applies.foundations))
        phases += [CRDS_ESTABLISHED, together([apply(applies.controllers)])]
        if "kueue" in components:
            others = [c for c in components if c != "kueue"]
            if others:
                # Each Deployment has one replica: status.replicas is 1 once its Pod exists.
                created = "--for=jsonpath={.status.replicas}=1"
                phases.append(
                    together(on_deployment(c, "Pod created", "wait", created) for c in others)
                )
            phases.append(together([apply(applies.late_webhooks)]))
        phases.append(
            together(on_deployment(c, "rollout", "rollout", "status") for c in components)
        )
    phases.extend(together([apply(s.path)]) for s in steps if s.name not in _ROLLOUT_AFTER)
    return phases


def split_plan(plan: list[Phase]) -> tuple[list[Phase], list[Phase]]:
    """The phases that need only the control plane (the CRDs, their wait, the
    controllers, which start on the control-plane node) and so run while kind joins
    the workers; and the rest."""
    if CRDS_ESTABLISHED not in plan:
        return [], plan
    cut = plan.index(CRDS_ESTABLISHED) + 2
    return plan[:cut], plan[cut:]


def not_established(crds: list[dict[str, Any]]) -> list[str]:
    """Names of the CRDs without an Established=True condition (none yet counts)."""
    return [
        crd["metadata"]["name"]
        for crd in crds
        if not any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (crd.get("status") or {}).get("conditions") or []
        )
    ]
