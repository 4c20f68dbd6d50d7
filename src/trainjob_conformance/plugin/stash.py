"""What the plugin keeps on pytest's config and items, and the lookups built on it.

Every key is here, so a module of the plugin reads what another stored without
importing it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.record import Recorder
from trainjob_conformance.plugin import peer
from trainjob_conformance.plugin.options import Settings
from trainjob_conformance.plugin.session import ClusterSession
from trainjob_conformance.plugin.verdicts import PolicyContext
from trainjob_conformance.policies.catalog import Policy, load_catalog
from trainjob_conformance.policies.packs import Pack, merged_catalog, pack_of

# On the config: one each per run.
SETTINGS = pytest.StashKey[Settings]()
SESSION = pytest.StashKey[ClusterSession]()
PACKS = pytest.StashKey[list[Pack]]()
CATALOG = pytest.StashKey[dict[str, Policy]]()
PEER = pytest.StashKey[peer.PeerStart]()  # the controller's MultiKueue worker start
# On an item: one each per test.
CONTEXT = pytest.StashKey[PolicyContext]()
RECORDER = pytest.StashKey[Recorder]()
CALL_REPORT = pytest.StashKey[pytest.TestReport]()  # the report of the test's body


def catalog(config: pytest.Config) -> dict[str, Policy]:
    """The project's catalog merged with the packs', read once; bad input is a
    UsageError, one line."""
    if CATALOG not in config.stash:
        try:
            project = load_catalog(config.stash[SETTINGS].catalog)
            config.stash[CATALOG] = merged_catalog(project, config.stash[PACKS])
        except ConformanceError as error:
            raise pytest.UsageError(str(error)) from None
    return config.stash[CATALOG]


def pack_of_item(item: pytest.Item) -> Pack | None:
    return pack_of(Path(item.path), item.config.stash[PACKS])


def policy_id(item: pytest.Item) -> str | None:
    """The catalog ID the test's `policy` marker names (a pack's as PACK/ID), or None."""
    marker = item.get_closest_marker("policy")
    if marker is None:
        return None
    if len(marker.args) != 1 or not isinstance(marker.args[0], str):
        raise pytest.UsageError(f'{item.nodeid}: use @pytest.mark.policy("ID") with one ID')
    pack = pack_of_item(item)
    # A pack's tests name their policies as the pack's catalog does.
    return pack.full_id(marker.args[0]) if pack else str(marker.args[0])
