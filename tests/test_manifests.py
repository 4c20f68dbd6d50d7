import base64

import pytest
import yaml

from trainjob_conformance.cluster.embedded import manifests
from trainjob_conformance.cluster.labels import KUEUE_MANAGED_LABEL
from trainjob_conformance.errors import ConformanceError

CA = b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"


def write(path, *docs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs))


def webhook(name, path, groups, resources):
    return {
        "name": name,
        "clientConfig": {
            "service": {"name": "webhook-service", "namespace": "system", "path": path}
        },
        "rules": [{"apiGroups": groups, "resources": resources, "operations": ["CREATE"]}],
        "failurePolicy": "Fail",
    }


@pytest.fixture
def kueue_module(tmp_path):
    write(
        tmp_path / "config/components/webhook/manifests.yaml",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [
                webhook("vworkload.kb.io", "/validate-workload", ["kueue.x-k8s.io"], ["workloads"]),
                webhook(
                    "vtrainjob.kb.io", "/validate-trainjob", ["trainer.kubeflow.org"], ["trainjobs"]
                ),
                webhook("vrayjob.kb.io", "/validate-rayjob", ["ray.io"], ["rayjobs"]),
            ],
        },
    )
    write(
        tmp_path / "config/components/crd/bases/kueue.x-k8s.io_workloads.yaml",
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "workloads.kueue.x-k8s.io"},
            "spec": {"group": "kueue.x-k8s.io"},
        },
    )
    write(
        tmp_path / "config/components/crd/bases/kueue.x-k8s.io_topologies.yaml",
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "topologies.kueue.x-k8s.io"},
            "spec": {"group": "kueue.x-k8s.io"},
        },
    )
    (tmp_path / "config/components/crd/kustomization.yaml").write_text(
        "resources: []\npatches:\n- path: patches/webhook_in_workloads.yaml\n"
        "#- path: patches/webhook_in_topologies.yaml\n"
    )
    write(
        tmp_path / "config/components/crd/patches/webhook_in_workloads.yaml",
        {
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "workloads.kueue.x-k8s.io"},
            "spec": {
                "conversion": {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {
                            "service": {"name": "webhook-service", "path": "/convert"}
                        },
                        "conversionReviewVersions": ["v1"],
                    },
                }
            },
        },
    )
    return tmp_path


def test_webhooks_point_at_loopback_with_the_harness_ca(kueue_module):
    (config,) = manifests.webhook_configurations(kueue_module, "kueue", 9555, CA)
    assert config["metadata"] == {"name": "kueue-validating-webhook-configuration"}
    for entry in config["webhooks"]:
        assert "service" not in entry["clientConfig"]
        assert entry["clientConfig"]["url"].startswith("https://127.0.0.1:9555/validate-")
        assert base64.b64decode(entry["clientConfig"]["caBundle"]) == CA


def test_only_enabled_kueue_integrations_are_registered(kueue_module):
    (config,) = manifests.webhook_configurations(kueue_module, "kueue", 9555, CA)
    assert [w["name"] for w in config["webhooks"]] == ["vworkload.kb.io", "vtrainjob.kb.io"]


def test_kueue_job_integrations_skip_system_namespaces_but_core_webhooks_do_not(kueue_module):
    (config,) = manifests.webhook_configurations(kueue_module, "kueue", 9555, CA)
    workload, trainjob = config["webhooks"]
    assert "namespaceSelector" not in workload
    by_name, opt_out = trainjob["namespaceSelector"]["matchExpressions"]
    assert by_name["operator"] == "NotIn"
    assert by_name["values"] == ["kube-system", "kueue-system"]
    assert opt_out == {
        "key": KUEUE_MANAGED_LABEL,
        "operator": "NotIn",
        "values": ["false"],
    }


def test_conversion_webhook_is_added_only_where_kustomize_enables_it(kueue_module):
    crds = {c["metadata"]["name"]: c for c in manifests.crds(kueue_module, "kueue", 9555, CA)}
    conversion = crds["workloads.kueue.x-k8s.io"]["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook"
    assert conversion["webhook"]["clientConfig"]["url"] == "https://127.0.0.1:9555/convert"
    assert "conversion" not in crds["topologies.kueue.x-k8s.io"]["spec"]


def test_jobset_pod_webhooks_keep_their_jobset_only_selector(tmp_path):
    write(
        tmp_path / "config/components/webhook/manifests.yaml",
        {
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                webhook("mjobset.kb.io", "/mutate-jobset", ["jobset.x-k8s.io"], ["jobsets"]),
                webhook("mpod.kb.io", "/mutate--v1-pod", [""], ["pods"]),
            ],
        },
    )
    (config,) = manifests.webhook_configurations(tmp_path, "jobset", 9444, CA)
    assert config["metadata"]["name"] == "jobset-mutating-webhook-configuration"
    jobset_hook, pod_hook = config["webhooks"]
    assert "objectSelector" not in jobset_hook
    assert (
        pod_hook["objectSelector"]["matchExpressions"][0]["key"] == "jobset.sigs.k8s.io/jobset-name"
    )


def test_missing_manifest_file_says_the_version_is_unsupported(tmp_path):
    with pytest.raises(ConformanceError, match="not supported by this harness version"):
        manifests.webhook_configurations(tmp_path, "trainer", 9443, CA)


def trainer_module(tmp_path, patch_text):
    write(
        tmp_path / "manifests/base/webhook/manifests.yaml",
        {
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [
                webhook(
                    "validator.clustertrainingruntime.trainer.kubeflow.org",
                    "/validate-ctr",
                    ["trainer.kubeflow.org"],
                    ["clustertrainingruntimes"],
                )
            ],
        },
    )
    if patch_text is not None:
        (tmp_path / "manifests/base/webhook/patch_validating.yaml").write_text(patch_text)
    return tmp_path


@pytest.mark.parametrize(
    ("patch_text", "selected"),
    [
        ("- op: add\n  path: /webhooks/0/objectSelector\n", True),  # v2.3.0
        ("- op: replace\n  path: /metadata/name\n", False),  # v2.2.1
        (None, False),  # v2.1.0
    ],
)
def test_trainer_runtime_opt_out_only_where_the_release_has_it(tmp_path, patch_text, selected):
    (config,) = manifests.webhook_configurations(
        trainer_module(tmp_path, patch_text), "trainer", 1, CA
    )
    assert config["metadata"]["name"] == "validator.trainer.kubeflow.org"
    assert ("objectSelector" in config["webhooks"][0]) is selected


def test_kueues_user_roles_are_the_batch_roles_and_what_they_aggregate_named_as_released(
    tmp_path,
):
    def role(name, labels=None, aggregates=None):
        doc = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}
        doc["metadata"] = {"name": name, **({"labels": labels} if labels else {})}
        if aggregates:
            doc["aggregationRule"] = {
                "clusterRoleSelectors": [{"matchLabels": {aggregates: "true"}}]
            }
        return doc

    write(tmp_path / "config/default/kustomization.yaml", {"namePrefix": "kueue-"})
    rbac = tmp_path / "config/components/rbac"
    write(
        rbac / "batch_user_role.yaml",
        role("batch-user-role", aggregates="rbac.kueue.x-k8s.io/batch-user"),
    )
    write(
        rbac / "trainjob_editor_role.yaml",
        role("trainjob-editor-role", labels={"rbac.kueue.x-k8s.io/batch-user": "true"}),
    )
    write(rbac / "role.yaml", role("manager-role"))

    names = [r["metadata"]["name"] for r in manifests.kueue_user_roles(tmp_path)]

    assert names == ["kueue-batch-user-role", "kueue-trainjob-editor-role"]
