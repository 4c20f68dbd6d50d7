"""Which break runs which policies, and the verdict each must produce."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.breaks import Break
from trainjob_conformance.policies.catalog import Policy


@dataclass(frozen=True)
class Target:
    policy: str
    verdict: str  # what the policy's test must say under the break: FAIL or ERROR


@dataclass
class Step:
    """One break and the policies it must turn."""

    item: Break
    targets: list[Target] = field(default_factory=list)

    @property
    def policies(self) -> list[str]:
        return [target.policy for target in self.targets]


@dataclass
class Plan:
    steps: list[Step]
    unbroken: list[str]  # selected policies that name no break for this release


def make_plan(
    catalog: dict[str, Policy],
    breaks: dict[str, Break],
    selected: list[str],
    versions: dict[str, str],
) -> Plan:
    """The steps for the selected policies on a cluster running `versions`."""
    unknown = sorted(
        f"{policy_id} names break {ref.name}"
        for policy_id in selected
        for ref in catalog[policy_id].breaks
        if ref.name not in breaks
    )
    if unknown:
        raise ConformanceError(
            f"unknown break: {'; '.join(unknown)} (breaks are defined in breaks.yaml)"
        )
    steps: dict[str, Step] = {}
    unbroken = []
    for policy_id in selected:
        policy = catalog[policy_id]
        version = versions.get(policy.component)
        refs = [ref for ref in policy.breaks if version is None or ref.applies_to(version)]
        if not refs:
            unbroken.append(policy_id)
        for ref in refs:
            step = steps.setdefault(ref.name, Step(breaks[ref.name]))
            step.targets.append(Target(policy_id, ref.verdict))
    # Scoped breaks first (they run side by side), then the ones that run alone.
    ordered = sorted(steps.values(), key=lambda step: (not step.item.scoped, step.item.name))
    return Plan(ordered, unbroken)
