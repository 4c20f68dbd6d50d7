"""Which components an upgrade moves, in which order, and what it leaves as it is."""

from __future__ import annotations

from dataclasses import dataclass

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.versions import parse_version
from trainjob_conformance.stack.profiles import Profile

# The order of the steps. JobSet first: the Trainer builds JobSets, and each
# Trainer release requires a JobSet release in its go.mod, so the JobSet it
# pairs with is in place before it. Kueue last: its TrainJob and JobSet
# integrations read both products' objects, so the release built against the
# new Trainer starts once that Trainer serves. The training-operator is
# independent of the three and goes after them.
UPGRADE_ORDER = ("jobset", "trainer", "kueue", "training-operator")
# What the cluster itself is: an upgrade keeps it, and refuses profiles that differ here.
KEPT = ("kubernetes", "etcd", "kwok")


@dataclass(frozen=True)
class Step:
    component: str
    from_version: str
    to_version: str

    @property
    def label(self) -> str:
        return f"{self.component} {self.from_version} -> {self.to_version}"

    @property
    def downgrade(self) -> bool:
        return parse_version(self.to_version) < parse_version(self.from_version)


@dataclass(frozen=True)
class UpgradePlan:
    source: Profile
    target: Profile
    steps: tuple[Step, ...]
    notes: tuple[str, ...]  # components left as they are, and why

    def states(self) -> list[tuple[str, dict[str, str]]]:
        """The stack between the steps and after the last: (what it is after, versions)."""
        versions = dict(self.source.versions)
        states = []
        for step in self.steps:
            versions[step.component] = step.to_version
            states.append((f"after {step.label}", dict(versions)))
        return states

    @property
    def column(self) -> str:
        """The report column of this path: `trainer-2.2 -> latest`."""
        return f"{self.source.name} -> {self.target.name}"


def plan_upgrade(source: Profile, target: Profile) -> UpgradePlan:
    """The steps from `source`'s releases to `target`'s; one line for a path that
    cannot be an in-place upgrade."""
    kept = [
        f"{key} {source.version(key)} -> {target.version(key)}"
        for key in KEPT
        if source.has(key) and target.has(key) and source.version(key) != target.version(key)
    ]
    if kept:
        raise ConformanceError(
            f"--from {source.name} and --to {target.name} differ in the cluster itself "
            f"({', '.join(kept)}): `upgrade` moves JobSet, Trainer, Kueue and the "
            "training-operator on a running cluster and keeps Kubernetes; pick profiles "
            "with the same Kubernetes, etcd and kwok"
        )
    steps: list[Step] = []
    notes: list[str] = []
    for key in UPGRADE_ORDER:
        if not source.has(key) and not target.has(key):
            continue
        if not source.has(key):
            notes.append(
                f"{key} {target.version(key)}: not in {source.name}, so not running before "
                "the upgrade; an upgrade does not install it (its policies skip afterwards)"
            )
        elif not target.has(key):
            notes.append(
                f"{key} {source.version(key)}: not in {target.name}; left running as it is"
            )
        elif source.version(key) == target.version(key):
            notes.append(f"{key} {source.version(key)}: the same release in both, not restarted")
        else:
            steps.append(Step(key, source.version(key), target.version(key)))
    if not steps:
        raise ConformanceError(
            f"--from {source.name} and --to {target.name} pin the same releases of JobSet, "
            "Trainer and Kueue: there is nothing to upgrade; name profiles that differ "
            "(e.g. --from trainer-2.2 --to latest)"
        )
    return UpgradePlan(source, target, tuple(steps), tuple(notes))
