"""Load the pinned version sets ("profiles") the harness can build and run."""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack import compose

# The environment variable that names the profile when no option does.
PROFILE_ENV = "TRAINJOB_PROFILE"
COMPONENT_KEYS = ("kubernetes", "etcd", "kwok", "jobset", "kueue", "trainer")
# Components a profile may add to the stack.
OPTIONAL_KEYS = ("training-operator",)
# The cluster's own: an upgrade in place moves the controllers, never these.
CLUSTER_KEYS = ("kubernetes", "etcd", "kwok")
DEFAULT_PROFILE = "latest"


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    versions: dict[str, str]
    # A composed profile (`latest+kueue=v0.16.6`): the profile it is derived
    # from and the components it sets to other releases.
    base: str = ""
    overrides: dict[str, str] = field(default_factory=dict)

    def version(self, component: str) -> str:
        return self.versions[component]

    def has(self, component: str) -> bool:
        return component in self.versions


def with_version(profile: Profile, component: str, version: str) -> Profile:
    """The profile with `component` at `version`, under the same name: what a cluster of
    `profile` runs once that component is upgraded in place."""
    overrides = {**profile.overrides, component: version} if profile.base else {}
    return dataclasses.replace(
        profile,
        description=f"{profile.description} ({component} upgraded in place to {version})",
        versions={**profile.versions, component: version},
        overrides=overrides,
    )


def as_running(profile: Profile, versions: Mapping[str, str]) -> Profile:
    """The profile a cluster started on runs now: its controllers at the releases
    `versions` names (a cluster upgraded in place), the cluster's own components as
    pinned."""
    for component, version in versions.items():
        if component in CLUSTER_KEYS or not profile.has(component):
            continue
        if profile.version(component) != version:
            profile = with_version(profile, component, version)
    return profile


def _load_all() -> dict[str, Profile]:
    text = resources.files(__package__).joinpath("profiles.toml").read_text()
    raw = tomllib.loads(text)
    profiles: dict[str, Profile] = {}
    for name, entry in raw.items():
        missing = [key for key in COMPONENT_KEYS if key not in entry]
        if missing:
            raise ConformanceError(f"profile {name!r} in profiles.toml lacks {', '.join(missing)}")
        versions = {key: str(entry[key]) for key in COMPONENT_KEYS + OPTIONAL_KEYS if key in entry}
        profiles[name] = Profile(name, str(entry.get("description", "")), versions)
    return profiles


def profile_names() -> list[str]:
    return sorted(_load_all())


def load_profile(name: str) -> Profile:
    """A pinned profile, or a composed one from its name (`latest+kueue=v0.16.6`)."""
    profiles = _load_all()
    base, overrides = compose.split_name(name)
    if base not in profiles:
        raise ConformanceError(
            f"unknown profile {base!r}; choose one of: {', '.join(sorted(profiles))}"
        )
    return compose_profile(profiles[base], overrides)


def compose_profile(profile: Profile, overrides: Sequence[str]) -> Profile:
    """`profile` with each `component=vX.Y.Z` of `overrides`; bad ones refused in one line."""
    if not overrides:
        return profile
    base = _load_all()[profile.base or profile.name]
    changed = compose.parse_overrides(overrides, already=profile.overrides, pins=base.versions)
    summary = ", ".join(f"{k} {v}" for k, v in changed.items())
    return Profile(
        name=compose.composed_name(base.name, changed),
        description=f"{base.name} with {summary}",
        versions={**base.versions, **changed},
        base=base.name,
        overrides=changed,
    )
