import re
from pathlib import Path

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.catalog import Outcome, load_catalog
from trainjob_conformance.policies.versions import in_range

CATALOG = Path(__file__).resolve().parents[1] / "fixtures" / "policies.yaml"


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ("v2.3.0", ">=2.2.1", True),
        ("v2.2.0", ">=2.2.1", False),
        ("v2.2.1", ">=2.2.0,<2.2.1", False),
        ("v2.2.0", ">=2.2.0,<2.2.1", True),
        ("v2.0.1", "<2.1.0", True),
        ("2.10.0", ">2.9.9", True),
    ],
)
def test_version_ranges(version, spec, expected):
    assert in_range(version, spec) is expected


def test_bad_range_is_reported():
    with pytest.raises(ConformanceError, match="bad version range clause"):
        in_range("v2.3.0", "~2.3")


def test_catalog_ids_are_unique_and_complete():
    # Read as text, so a second copy of an ID cannot hide behind a dict key.
    text = CATALOG.read_text()
    ids = re.findall(r"^([A-Z][A-Z0-9-]+):", text, flags=re.MULTILINE)
    assert len(ids) == len(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)
    catalog = load_catalog(CATALOG)
    assert set(catalog) == set(ids)
    assert {"TJ-STACK-001", "TJ-GATE-001", "TJ-EDIT-001", "TJ-MB-001"} <= set(catalog)
    for policy in catalog.values():
        assert policy.title and policy.statement and policy.source


def test_the_uniqueness_check_catches_a_copied_entry(tmp_path):
    text = CATALOG.read_text()
    first = re.search(r"^TJ-STACK-001:\n(?:  .*\n|\n)*", text, flags=re.MULTILINE).group(0)
    copied = tmp_path / "policies.yaml"
    copied.write_text(text + "\n" + first)
    with pytest.raises(ConformanceError, match="'TJ-STACK-001' is given twice"):
        load_catalog(copied)


def test_managed_by_skip_is_a_known_gap_only_before_v2_3_0():
    policy = load_catalog(CATALOG)["TJ-MB-001"]
    assert policy.outcome("v2.3.0") is Outcome.HOLDS
    assert policy.outcome("v2.2.1") is Outcome.KNOWN_GAP
    assert "v2.3.0" in policy.gap_reference("v2.2.1")


def test_patch_and_resume_expectation_changes_at_v2_2_1():
    policy = load_catalog(CATALOG)["TJ-EDIT-006"]
    assert policy.expected("patch_and_resume", "v2.2.1") == "allowed"
    assert policy.expected("patch_and_resume", "v2.2.0") == "forbidden"
    with pytest.raises(ConformanceError, match="states no expectation"):
        policy.expected("nothing", "v2.3.0")


def test_forbidden_message_names_the_field_of_each_release():
    policy = load_catalog(CATALOG)["TJ-EDIT-003"]
    assert policy.expected("forbidden_message", "v2.0.1").startswith("PodSpecOverrides")
    assert policy.expected("forbidden_message", "v2.1.0").startswith("PodTemplateOverrides")
    assert policy.expected("forbidden_message", "v2.3.0").endswith("before or after the update")


def test_a_policy_names_its_component_by_its_range_key(tmp_path):
    path = tmp_path / "catalog.yaml"
    path.write_text(
        "TO-X:\n  title: t\n  statement: s\n  source: src\n  training-operator: '>=1.9.0'\n"
        "  expectations:\n    - training-operator: '<1.9.3'\n      outcome: known-gap\n"
        "      reference: r\n"
    )
    policy = load_catalog(path)["TO-X"]
    assert (policy.component, policy.component_name) == ("training-operator", "training-operator")
    assert policy.outcome("v1.9.2") is Outcome.KNOWN_GAP
    assert policy.outcome("v1.9.3") is Outcome.HOLDS
    assert policy.outcome("v1.8.1") is Outcome.NOT_APPLICABLE


@pytest.mark.parametrize(
    ("ranges", "message"),
    [
        ("", "lacks trainer"),
        ("  trainer: '>=2.0.0'\n  training-operator: '>=1.9.0'\n", "exactly one release range"),
        (
            "  training-operator: '>=1.9.0'\n  expectations:\n    - trainer: '>=2.0.0'\n",
            "each expectation needs a training-operator range",
        ),
    ],
)
def test_a_policy_without_one_release_range_is_refused_in_one_line(tmp_path, ranges, message):
    path = tmp_path / "catalog.yaml"
    path.write_text(f"X-1:\n  title: t\n  statement: s\n  source: src\n{ranges}")
    with pytest.raises(ConformanceError, match=message) as refused:
        load_catalog(path)
    assert "\n" not in str(refused.value)


def test_every_training_operator_policy_applies_to_the_pinned_release():
    from trainjob_conformance.stack.profiles import load_profile

    pinned = load_profile("latest").version("training-operator")
    to_policies = [p for p in load_catalog(CATALOG).values() if p.component == "training-operator"]
    assert to_policies
    assert all(p.outcome(pinned) is not Outcome.NOT_APPLICABLE for p in to_policies)
    assert load_catalog(CATALOG)["TO-MB-004"].outcome(pinned) is Outcome.KNOWN_GAP
