"""Nothing a run starts listens beyond 127.0.0.1 on the host, read from /proc while it runs.

On the session's cluster, and on a cluster of profile trainer-2.0 started here,
whose Trainer (v2.0.1) binds its webhook server on every interface: the
harness runs it in a private network namespace, bridged by forwarders, with
its certificate rotator pre-seeded. The test shows all of it from outside:
the listening sockets of every process of the run, the interfaces of every
private namespace, and the rotator's own account of the certificates.
"""

from __future__ import annotations

import base64

import pytest

from trainjob_conformance.cluster.embedded.provider import EmbeddedStackCluster
from trainjob_conformance.cluster.isolation.listeners import ListenerAudit, audit
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.lifecycle.ledger import LEDGER_FILE, ProcessLedger
from trainjob_conformance.stack.profiles import load_profile

pytestmark = pytest.mark.harness

MANAGERS = ("jobset", "kueue", "trainer")
# The validating webhook configuration Trainer v2.0's rotator writes its CA into.
TRAINER_VALIDATOR = "validator.trainer.kubeflow.org"


def audit_run(run_dir) -> tuple[ListenerAudit, list[str]]:
    """The listeners of every process the run's ledger lists (and their children)."""
    living = ProcessLedger(run_dir / LEDGER_FILE).living()
    return audit({p.pid: p.name for p in living}), [p.name for p in living]


def assert_loopback_only(found: ListenerAudit) -> None:
    assert not found.violations, "\n".join(found.violations)
    names = {listener.name for listener in found.listeners}
    # Not vacuous: the audit saw the API server and every manager listening.
    for expected in ("kube-apiserver", "etcd", *MANAGERS):
        assert any(expected in name for name in names), (
            f"no listener of {expected} found; saw {sorted(names)}"
        )


def test_nothing_the_session_run_started_listens_beyond_loopback(trainjob_cluster):
    if trainjob_cluster.provider != "embedded" or trainjob_cluster.run_dir is None:
        pytest.skip("only a cluster this run started has processes to inspect")
    found, _ = audit_run(trainjob_cluster.run_dir)
    assert_loopback_only(found)
    # A profile with the training-operator (v1.9.x binds every interface) runs it isolated.
    if "training-operator" in trainjob_cluster.versions:
        isolated = {x.name for x in found.isolated()}
        assert "training-operator" in isolated, f"not isolated; isolated: {sorted(isolated)}"


@pytest.fixture
def trainer_2_0_cluster(tmp_path):
    cluster = EmbeddedStackCluster(load_profile("trainer-2.0"), tmp_path / "run")
    try:
        yield cluster, cluster.up()
    finally:
        cluster.down()


def test_a_manager_that_binds_every_interface_is_isolated_and_its_rotator_satisfied(
    trainer_2_0_cluster,
):
    cluster, handle = trainer_2_0_cluster
    found, names = audit_run(cluster.run_dir)
    assert_loopback_only(found)

    # The forwarders are the run's own processes, in its ledger like the managers.
    assert {"trainer-netns-forwarder", "trainer-host-forwarder"} <= set(names), names
    trainer = cluster.controllers["trainer"]
    isolated = [x for x in found.isolated() if x.pid == trainer.process.pid]
    webhook = [x for x in isolated if x.port == trainer.ports.webhook]
    assert webhook and not webhook[0].loopback, (
        f"expected Trainer v2.0 to listen on every interface of its namespace: {isolated}"
    )
    assert found.private == {webhook[0].netns: ["lo"]}, found.private

    # The real rotator ran, found the seeded certificates valid and kept them.
    log = trainer.log_file.read_text()
    assert "no cert refresh needed" in log and "CA certs are injected to webhooks" in log
    assert "refreshing CA and server certs" not in log and "refreshing server certs" not in log
    kube = Kube(api_client_for(handle.kubeconfig))
    seeded = (cluster.run_dir / "trainer" / "certs" / "ca.crt").read_bytes()
    secret = kube.core.read_namespaced_secret("kubeflow-trainer-webhook-cert", "kubeflow-system")
    assert base64.b64decode(secret.data["ca.crt"]) == seeded
    validator = kube.get(
        "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", TRAINER_VALIDATOR
    )
    for webhook_entry in validator["webhooks"]:
        assert base64.b64decode(webhook_entry["clientConfig"]["caBundle"]) == seeded
