"""Policy packs: namespaced IDs, the pack's templates first, the example pack well formed."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.catalog import load_catalog
from trainjob_conformance.policies.packs import load_pack, merged_catalog, pack_of
from trainjob_conformance.render.templates import TemplateSet

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "queue-required"


def test_the_example_packs_ids_carry_its_name():
    pack = load_pack(EXAMPLE)

    assert pack.name == "queue-required"
    assert sorted(pack.catalog) == ["queue-required/ADM-001", "queue-required/ADM-002"]
    assert pack.catalog["queue-required/ADM-001"].id == "queue-required/ADM-001"
    assert pack.full_id("ADM-001") == pack.full_id("queue-required/ADM-001")


def test_a_packs_policies_join_the_projects_without_replacing_any():
    project = load_catalog(REPO / "fixtures" / "policies.yaml")
    pack = load_pack(EXAMPLE)

    merged = merged_catalog(project, [pack])

    assert len(merged) == len(project) + len(pack.catalog)
    assert merged["TJ-GATE-001"] is project["TJ-GATE-001"]
    with pytest.raises(ConformanceError, match="already in the catalog"):
        merged_catalog(merged, [pack])


def test_a_test_file_belongs_to_the_pack_that_holds_it():
    pack = load_pack(EXAMPLE)

    assert pack_of(EXAMPLE / "test_queue_required.py", [pack]) is pack
    assert pack_of(REPO / "e2e" / "test_stack.py", [pack]) is None


def test_a_packs_templates_come_first_and_the_projects_stay_reachable(tmp_path):
    (tmp_path / "trainjob.yaml.j2").write_text("kind: Mine\nname: {{ name | json }}\n")
    (tmp_path / "trainjob.params.yaml").write_text("name: {type: string}\n")
    project = TemplateSet(REPO / "templates")

    both = project.with_first(tmp_path)

    assert both.render_one("trainjob", name="a") == {"kind": "Mine", "name": "a"}
    assert both.render_one("localqueue", name="q", namespace="n", cluster_queue="c")["kind"] == (
        "LocalQueue"
    )
    assert project.render_one("trainjob", name="a", namespace="n")["kind"] == "TrainJob"
