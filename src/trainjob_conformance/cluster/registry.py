"""The cluster providers by name, each imported only when it is asked for.

A provider module imports the interface in provider.py; only this module knows
the providers, so the interface and the providers never import each other.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from trainjob_conformance.cluster.provider import ClusterProvider, ClusterRequest
from trainjob_conformance.errors import ConformanceError

# name -> the module whose `from_request(request)` makes the provider.
_PROVIDER_MODULES = {
    "embedded": "trainjob_conformance.cluster.embedded.provider",
    "kind": "trainjob_conformance.cluster.kind.provider",
    "existing": "trainjob_conformance.cluster.existing.provider",
}
PROVIDERS = tuple(_PROVIDER_MODULES)


def make_provider(request: ClusterRequest) -> ClusterProvider:
    module_name = _PROVIDER_MODULES.get(request.provider)
    if module_name is None:
        raise ConformanceError(
            f"unknown cluster provider {request.provider!r}; choose one of: {', '.join(PROVIDERS)}"
        )
    factory: Callable[[ClusterRequest], ClusterProvider] = importlib.import_module(
        module_name
    ).from_request
    return factory(request)
