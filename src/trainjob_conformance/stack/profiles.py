"""Load the pinned version sets ("profiles") the harness can build and run."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources

from trainjob_conformance.errors import ConformanceError

# The environment variable that names the profile when no option does.
PROFILE_ENV = "TRAINJOB_PROFILE"
COMPONENT_KEYS = ("kubernetes", "etcd", "kwok", "jobset", "kueue", "trainer")
# Components a profile may add to the stack.
OPTIONAL_KEYS = ("training-operator",)
DEFAULT_PROFILE = "latest"


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    versions: dict[str, str]

    def version(self, component: str) -> str:
        return self.versions[component]

    def has(self, component: str) -> bool:
        return component in self.versions


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
    profiles = _load_all()
    if name not in profiles:
        raise ConformanceError(
            f"unknown profile {name!r}; choose one of: {', '.join(sorted(profiles))}"
        )
    return profiles[name]
