"""The policy catalog: stable IDs, what each proves, and per-version expectations.

A policy is about one component's releases, named by its range key: `trainer`
(Kubeflow Trainer, most policies), `training-operator` (the previous
generation, TO-*), `jobset` or `kueue` (a behaviour of that component alone,
whatever Trainer it runs with). Its expectations use the same key.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.layers import check_declared
from trainjob_conformance.policies.versions import in_range, parse_range


class Outcome(enum.Enum):
    HOLDS = "holds"
    KNOWN_GAP = "known-gap"
    NOT_APPLICABLE = "not-applicable"


# The components a policy can be about, by the key of its release range.
COMPONENTS = ("trainer", "training-operator", "jobset", "kueue")
COMPONENT_NAMES = {
    "trainer": "Trainer",
    "training-operator": "training-operator",
    "jobset": "JobSet",
    "kueue": "Kueue",
}


@dataclass(frozen=True)
class Expectation:
    trainer: str  # the range of the policy's component's releases
    values: dict[str, Any]


@dataclass(frozen=True)
class BreakRef:
    """A break (fixtures/breaks.yaml) a policy's test must detect, and the verdict it must give.

    `releases` limits it to a range of the policy's component's releases
    (None: all); the verdict is FAIL, or ERROR for a break that stops a
    component.
    """

    name: str
    releases: str | None = None
    verdict: str = "FAIL"

    def applies_to(self, version: str) -> bool:
        return self.releases is None or in_range(version, self.releases)


BREAK_VERDICTS = ("FAIL", "ERROR")


@dataclass(frozen=True)
class Policy:
    id: str
    title: str
    statement: str
    source: str
    trainer: str  # the range of the component's releases it applies to
    expectations: tuple[Expectation, ...] = field(default_factory=tuple)
    component: str = "trainer"
    breaks: tuple[BreakRef, ...] = ()
    # Who judges it: `run` (any run of the suite) or `upgrade` (only an upgrade's
    # judges, on the objects it keeps in flight; see JUDGED_BY).
    judged_by: str = "run"
    # The layer of the stack the statement is about (policies/layers.py): the one a
    # failure is routed to where the cluster's words name no other ("" undeclared).
    layer: str = ""

    @property
    def upgrade_only(self) -> bool:
        return self.judged_by == UPGRADE

    @property
    def component_name(self) -> str:
        return COMPONENT_NAMES[self.component]

    @property
    def has_known_gap(self) -> bool:
        """Some release range of this policy is a known upstream gap."""
        return any(e.values.get("outcome") == Outcome.KNOWN_GAP.value for e in self.expectations)

    def _matching(
        self,
        trainer_version: str,
        before: Mapping[str, str] | None = None,
        now: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The first expectation whose ranges hold. `before` is the release of each
        component the stack ran before an upgrade (empty or None: no upgrade), `now`
        the release of each component it runs. One with `upgraded_from` (the UP
        family) holds only on such a stack, and only where the policy's component
        was in that range before; one with `kueue_upgraded_from`, the same for Kueue
        (a gap that the old Kueue's writes cause, whatever the Trainer was); one with
        `kueue` (a policy of another component) only where the Kueue running now is
        in that range (a gap that comes with the Kueue step of an upgrade, not
        before it)."""
        before, now = before or {}, now or {}
        for expectation in self.expectations:
            for key, component, versions in (
                (UPGRADED_FROM, self.component, before),
                (KUEUE_UPGRADED_FROM, "kueue", before),
                (KUEUE_NOW, "kueue", now),
            ):
                spec = expectation.values.get(key)
                version = versions.get(component)
                if spec is not None and (version is None or not in_range(version, spec)):
                    break
            else:
                if in_range(trainer_version, expectation.trainer):
                    return expectation.values
        return {}

    def outcome(
        self,
        trainer_version: str,
        before: Mapping[str, str] | None = None,
        now: Mapping[str, str] | None = None,
    ) -> Outcome:
        if not in_range(trainer_version, self.trainer):
            return Outcome.NOT_APPLICABLE
        values = self._matching(trainer_version, before, now)
        return Outcome(values.get("outcome", Outcome.HOLDS.value))

    def gap_reference(
        self,
        trainer_version: str,
        before: Mapping[str, str] | None = None,
        now: Mapping[str, str] | None = None,
    ) -> str:
        values = self._matching(trainer_version, before, now)
        return str(values.get("reference", "")).strip()

    def expected(self, key: str, trainer_version: str) -> Any:
        values = self._matching(trainer_version)
        if key not in values:
            raise ConformanceError(
                f"policy {self.id} states no expectation {key!r} for Trainer {trainer_version}"
            )
        return values[key]


_REQUIRED = ("title", "statement", "source")
UPGRADE = "upgrade"
# An expectation's range of the release an upgraded stack ran before (UP family).
UPGRADED_FROM = "upgraded_from"
# The same for the Kueue release the upgraded stack ran before.
KUEUE_UPGRADED_FROM = "kueue_upgraded_from"
# An expectation's range of the Kueue release running now, in a policy whose own
# range is another component's (for Kueue's own policies it is their range).
KUEUE_NOW = "kueue"
JUDGED_BY = ("run", UPGRADE)


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice: in a catalog the last copy would win."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConformanceError(
                    f"{key!r} is given twice (lines {seen[key]} and {line}); keep one"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def parse_catalog_text(text: str, where: str) -> dict[str, Any]:
    """The catalog's YAML as a mapping of ID to entry; one-line errors naming `where`."""
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)
    except ConformanceError as error:
        raise ConformanceError(f"{where}: {error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConformanceError(f"{where} is not valid YAML{at}: {problem}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConformanceError(
            f"{where} must map policy IDs to policies, not be a {type(raw).__name__}"
        )
    return raw


def _component(policy_id: str, entry: dict[str, Any], where: str) -> str:
    named = [key for key in COMPONENTS if key in entry]
    if len(named) != 1:
        raise ConformanceError(
            f"{where}: policy {policy_id} needs exactly one release range, "
            f"{' or '.join(COMPONENTS)} (it has {', '.join(named) or 'none'})"
        )
    return named[0]


def _expectations(
    policy_id: str, entry: dict[str, Any], component: str, where: str
) -> list[Expectation]:
    items = entry.get("expectations") or []
    if not isinstance(items, list):
        raise ConformanceError(f"{where}: policy {policy_id}: expectations must be a list")
    expectations = []
    for item in items:
        if not isinstance(item, dict) or component not in item:
            raise ConformanceError(
                f"{where}: policy {policy_id}: each expectation needs a {component} range"
            )
        values = {k: v for k, v in item.items() if k != component}
        expectations.append(Expectation(trainer=str(item[component]), values=values))
    return expectations


def _check_ranges(
    policy_id: str, entry: dict[str, Any], expectations: list[Expectation], where: str
) -> None:
    component = _component(policy_id, entry, where)
    since = [
        str(e.values[key])
        for e in expectations
        for key in (UPGRADED_FROM, KUEUE_UPGRADED_FROM, KUEUE_NOW)
        if key in e.values
    ]
    for spec in [str(entry[component]), *(e.trainer for e in expectations), *since]:
        try:
            parse_range(spec)
        except ConformanceError as error:
            raise ConformanceError(f"{where}: policy {policy_id}: {error}") from None
    for expectation in expectations:
        outcome = expectation.values.get("outcome")
        if outcome is not None and outcome not in {o.value for o in Outcome}:
            raise ConformanceError(
                f"{where}: policy {policy_id}: unknown outcome {outcome!r} "
                f"(one of {', '.join(o.value for o in Outcome)})"
            )


def _breaks(policy_id: str, entry: dict[str, Any], component: str, where: str) -> list[BreakRef]:
    items = entry.get("breaks") or []
    if not isinstance(items, list):
        raise ConformanceError(f"{where}: policy {policy_id}: breaks must be a list of names")
    refs = []
    for item in items:
        if isinstance(item, str):
            refs.append(BreakRef(item))
            continue
        unknown = (
            sorted(set(item) - {"break", component, "verdict"}) if isinstance(item, dict) else []
        )
        if not isinstance(item, dict) or "break" not in item or unknown:
            raise ConformanceError(
                f"{where}: policy {policy_id}: each break is a name or "
                f"{{break: NAME, {component}: RANGE, verdict: FAIL|ERROR}}"
            )
        verdict = str(item.get("verdict", "FAIL"))
        if verdict not in BREAK_VERDICTS:
            raise ConformanceError(
                f"{where}: policy {policy_id}: break {item['break']}: verdict {verdict!r} "
                f"(one of {', '.join(BREAK_VERDICTS)})"
            )
        releases = str(item[component]) if component in item else None
        if releases is not None:
            try:
                parse_range(releases)
            except ConformanceError as error:
                raise ConformanceError(f"{where}: policy {policy_id}: {error}") from None
        refs.append(BreakRef(str(item["break"]), releases, verdict))
    return refs


def load_catalog(path: Path) -> dict[str, Policy]:
    if not path.is_file():
        raise ConformanceError(f"policy catalog {path} not found")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ConformanceError(f"policy catalog {path} cannot be read: {error}") from None
    raw = parse_catalog_text(text, str(path))
    catalog = {}
    for policy_id, entry in raw.items():
        if not isinstance(entry, dict):
            raise ConformanceError(
                f"{path}: policy {policy_id} has no body: give it {', '.join(_REQUIRED)}"
            )
        missing = [key for key in _REQUIRED if key not in entry]
        if not any(key in entry for key in COMPONENTS):
            missing.append("trainer")
        if missing:
            raise ConformanceError(f"{path}: policy {policy_id} lacks {', '.join(missing)}")
        component = _component(policy_id, entry, str(path))
        expectations = _expectations(policy_id, entry, component, str(path))
        _check_ranges(policy_id, entry, expectations, str(path))
        judged_by = str(entry.get("judged_by", "run"))
        if judged_by not in JUDGED_BY:
            raise ConformanceError(
                f"{path}: policy {policy_id} judged_by {judged_by!r}: give one of "
                f"{', '.join(JUDGED_BY)}"
            )
        layer = " ".join(str(entry.get("layer", "")).split())
        if layer and (why := check_declared(layer)):
            raise ConformanceError(f"{path}: policy {policy_id}: {why}")
        catalog[policy_id] = Policy(
            id=policy_id,
            title=str(entry["title"]),
            statement=" ".join(str(entry["statement"]).split()),
            source=str(entry["source"]),
            trainer=str(entry[component]),
            expectations=tuple(expectations),
            component=component,
            breaks=tuple(_breaks(policy_id, entry, component, str(path))),
            judged_by=judged_by,
            layer=layer,
        )
    return catalog
