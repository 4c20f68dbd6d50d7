"""Bundles of an upgrade's known gaps (upgrade/repro/).

The releases' manifests here are small stand-ins written by the test (a CRD, a
Deployment, a webhook configuration per component): what is checked is how the
bundle is put together from them. That repro.sh reproduces on a cluster is
checked on kind (docs/reproductions.md).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.test_repro_bundle import run_prelude
from trainjob_conformance.cli.main import main
from trainjob_conformance.cluster.releases.install_plan import CONTROLLERS
from trainjob_conformance.cluster.releases.manifests import InstallStep, write_documents
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import suite
from trainjob_conformance.policies.catalog import load_catalog
from trainjob_conformance.stack.profiles import Profile, load_profile
from trainjob_conformance.upgrade.repro.bundle import upgrade_bundle_files
from trainjob_conformance.upgrade.repro.script import UPGRADE_FUNCTIONS
from trainjob_conformance.upgrade.steps import plan_upgrade

_FIELDS = {"v2.1.0": "podTemplateOverrides", "v2.2.1": "runtimePatches"}


def _crd(name: str, spec_properties: dict) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "versions": [
                {
                    "name": "v1beta1" if "kueue" in name else "v1alpha1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"properties": {"spec": {"properties": spec_properties}}}
                    },
                }
            ]
        },
    }


def _controller(component: str, image: str, webhook: str) -> list[dict]:
    namespace, deployment, _ = CONTROLLERS[component]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": deployment, "namespace": namespace},
            "spec": {"template": {"spec": {"containers": [{"name": "m", "image": image}]}}},
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": webhook},
            "webhooks": [],
        },
    ]


class StandInReleases:
    """Writes each profile's stand-in manifests once, as manifests.py would build them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[tuple[dict[str, str], list[str] | None]] = []

    def __call__(self, profile: Profile, only: list[str] | None) -> list[InstallStep]:
        self.calls.append((dict(profile.versions), only))
        versions = profile.versions
        workdir = self.root / "-".join(versions[k] for k in ("jobset", "trainer", "kueue"))
        trainer = versions["trainer"]
        field_name = _FIELDS.get(trainer, "podSpecOverrides")
        documents = {
            ("jobset", "jobset"): [
                *_controller("jobset", f"jobset:{versions['jobset']}", "jobset-webhooks"),
                _crd("jobsets.jobset.x-k8s.io", {}),
            ],
            ("trainer-manager", "trainer"): [
                *_controller("trainer", f"trainer:{trainer}", f"trainer-webhooks-{trainer}"),
                _crd("trainjobs.trainer.kubeflow.org", {field_name: {}, "suspend": {}}),
            ],
            ("trainer-runtimes", "trainer"): [
                {"kind": "ClusterTrainingRuntime", "metadata": {"name": "torch-distributed"}}
            ],
            ("kueue", "kueue"): [
                *_controller("kueue", f"kueue:{versions['kueue']}", "kueue-webhooks"),
                _crd("clusterqueues.kueue.x-k8s.io", {}),
            ],
        }
        steps = []
        for (name, component), docs in documents.items():
            if only is not None and component not in only:
                continue
            path = workdir / f"{name}.yaml"
            if not path.is_file():
                write_documents(path, docs)
            steps.append(InstallStep(name, component, path))
        return steps


def _bundle(tmp_path: Path, policy: str, source: str, target: str) -> dict[str, str]:
    plan = plan_upgrade(load_profile(source), load_profile(target))
    catalog = load_catalog(suite().catalog)
    return upgrade_bundle_files(catalog[policy], plan, StandInReleases(tmp_path), suite().templates)


def test_the_trainjob_is_written_with_the_old_releases_override_field(tmp_path):
    files = _bundle(tmp_path, "UP-SUSP-001", "trainer-2.1", "trainer-2.2")

    trainjob = yaml.safe_load(files["objects/trainjob.yaml"])
    assert trainjob["spec"]["suspend"] is True
    assert "podTemplateOverrides" in trainjob["spec"], trainjob["spec"]
    script = files["repro.sh"]
    # What is remembered before the upgrade is what is compared after it.
    assert "jsonpath={.spec.podTemplateOverrides}" in script
    assert "observe_value" in script and '"$OVERRIDES"' in script
    # Kueue leaves its namespace alone, as the upgrade's own suspended namespace.
    assert "kueue.x-k8s.io/managed" in script or "managed=false" in script


def test_every_manifest_the_script_applies_is_in_the_bundle_and_it_is_valid_bash(tmp_path):
    files = _bundle(tmp_path, "UP-KQ-001", "trainer-2.1", "trainer-2.2")
    (tmp_path / "b").mkdir()
    script = tmp_path / "b" / "repro.sh"
    script.write_text(files["repro.sh"])

    subprocess.run(["bash", "-n", str(script)], check=True)
    applied = [
        word
        for line in files["repro.sh"].splitlines()
        if line.startswith("apply_release")
        for word in line.split()
        if word.endswith(".yaml")
    ]
    assert applied and all(path in files for path in applied), applied
    assert {path.split("/")[1] for path in applied} >= {"from", "to-trainer"}


def test_the_steps_go_in_upgrades_order_and_drop_the_old_webhooks(tmp_path):
    script = _bundle(tmp_path, "UP-KQ-001", "trainer-2.1", "trainer-2.2")["repro.sh"]

    order = [line for line in script.splitlines() if line.startswith("say '[")]
    labels = [line.split("]")[0].removeprefix("say '[") for line in order]
    # Install, the objects, what is waited for, each upgrade, in that order.
    assert labels.index("install") < labels.index("objects") < labels.index("before")
    upgrades = [line for line in order if line.startswith("say '[upgrade]")]
    assert [u.split()[2] for u in upgrades] == ["jobset", "trainer", "kueue"][: len(upgrades)]
    assert "trainer-webhooks-v2.1.0, which the new release no longer has" in script
    # The never-statement is read over a window, not once.
    assert "observe_stays" in script and '"$WORKLOAD"' in script and '"$POD"' in script


def test_a_controller_at_another_release_stops_the_script_before_anything_is_applied(tmp_path):
    files = _bundle(tmp_path, "UP-SUSP-001", "trainer-2.1", "trainer-2.2")
    script = files["repro.sh"]
    first_apply = script.index("\napply_release ")
    assert script.index("starts_from kubeflow-system kubeflow-trainer-controller-manager") < (
        first_apply
    )


def _prelude_run(tmp_path: Path, kubectl_body: str, steps: str):
    return run_prelude(tmp_path, kubectl_body, steps, UPGRADE_FUNCTIONS)


def test_a_value_that_must_stay_is_read_for_its_whole_window(tmp_path):
    # The uid changes at the third read: shown, however long the window.
    counting = (
        f"n=$(( $(cat {tmp_path}/n 2>/dev/null || echo 0) + 1 )); echo $n > {tmp_path}/n\n"
        '[ "$n" -lt 3 ] && echo uid-1 || echo uid-2\n'
    )
    done = _prelude_run(tmp_path, counting, "observe_stays 'the Workload' uid-1 5 -- get wl\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "REPRODUCED: P-1: the Workload: 'uid-2', not 'uid-1'" in done.stdout
    # The same value over the window: not reproduced, after more than one read.
    (tmp_path / "same").mkdir()
    done = _prelude_run(
        tmp_path / "same", "echo uid-1\n", "observe_stays 'the Workload' uid-1 1 -- get wl\n"
    )
    assert done.returncode == 1, done.stdout
    assert "throughout, as the policy expects" in done.stdout


def test_a_controller_at_another_release_is_a_setup_error(tmp_path):
    done = _prelude_run(
        tmp_path, "echo trainer:v2.2.1\n", "starts_from kubeflow-system m trainer:v2.1.0\n"
    )
    assert done.returncode == 2
    assert "runs trainer:v2.2.1; the bundle starts from trainer:v2.1.0" in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["repro", "UP-SUSP-001"],
            "its known gap: --from trainer-2.0 --to trainer-2.1; --from trainer-2.1 --to trainer-2.2",
        ),
        (
            ["repro", "UP-GATE-001", "--from", "trainer-2.2", "--to", "latest"],
            "has no upgrade bundle",
        ),
        (["repro", "UP-SUSP-001", "--from", "trainer-2.1", "--to", "nightly"], "--to"),
        (["repro", "UP-SUSP-001", "--from", "latest", "--to", "latest"], "nothing to upgrade"),
    ],
)
def test_bad_input_for_an_upgrade_bundle_is_one_line_and_exit_2(tmp_path, capsys, args, says):
    code = main([*args, "--out", str(tmp_path / "b")])

    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and says in err, err


def test_a_policy_without_a_scenario_is_refused_in_one_line():
    from trainjob_conformance.upgrade.repro.scenarios import check_scenario

    with pytest.raises(ConformanceError, match="UP-EDIT-001 has no upgrade bundle"):
        check_scenario("UP-EDIT-001")
