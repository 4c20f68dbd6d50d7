"""Collection: every policy test names a catalog policy; `--trainjob-policy` selects.

A test of a policy with a known gap in the catalog gets the `known_gap` marker
here, from the catalog; whether it judged the gap (entered its
`with trainjob_policy.holds():` block) is checked when it has run
(plugin/verdict_report.py), on every release, not only where the gap applies.
"""

from __future__ import annotations

import pytest

from trainjob_conformance.plugin import stash
from trainjob_conformance.plugin.verdict_report import mark_policy


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _keep_upgrade_policies_for_upgrades(config, items)
    policy_items = [item for item in items if item.get_closest_marker("policy")]
    wanted = config.stash[stash.SETTINGS].policies
    if wanted:
        _select_policies(config, items, policy_items, wanted)
        policy_items = list(items)
    if not policy_items:
        return
    catalog = stash.catalog(config)
    for item in policy_items:
        policy_id = stash.policy_id(item)
        if policy_id not in catalog:
            raise pytest.UsageError(f"{item.nodeid}: policy {policy_id!r} is not in the catalog")
        item.add_marker(pytest.mark.e2e)
        if catalog[policy_id].has_known_gap:
            item.add_marker(pytest.mark.known_gap)
        mark_policy(item, policy_id)


def _select_policies(
    config: pytest.Config,
    items: list[pytest.Item],
    policy_items: list[pytest.Item],
    wanted: tuple[str, ...],
) -> None:
    """Keep only the tests of the policies --trainjob-policy names (each one the
    catalog's: checked at configure, plugin/__init__.py)."""
    keep = [item for item in policy_items if stash.policy_id(item) in wanted]
    dropped = [item for item in items if item not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def _keep_upgrade_policies_for_upgrades(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The UP family judges objects an upgrade keeps in flight: collected only with its
    record, and then alone (the rest of the catalog runs in a child of its own)."""
    settings = config.stash[stash.SETTINGS]
    catalog = stash.catalog(config)

    def upgrade_only(item: pytest.Item) -> bool:
        policy = catalog.get(stash.policy_id(item) or "")
        return policy is not None and policy.upgrade_only

    if settings.upgrade_record is None:
        named = [p for p in settings.policies if p in catalog and catalog[p].upgrade_only]
        if named:
            raise pytest.UsageError(
                f"--trainjob-policy {', '.join(named)}: judged only during an upgrade; run "
                "`trainjob-conformance upgrade --from PROFILE --to PROFILE`"
            )
        dropped = [item for item in items if upgrade_only(item)]
    else:
        dropped = [item for item in items if not upgrade_only(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]
