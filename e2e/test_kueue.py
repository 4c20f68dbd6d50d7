"""Policy: Kueue queues, admits and places TrainJobs through the Trainer's contract."""

from __future__ import annotations

import base64

import pytest
import yaml
from kubernetes.utils import parse_quantity

from trainjob_conformance.kube.errors import Rejected, StackError
from trainjob_conformance.kube.kinds import (
    ADMISSION_CHECK,
    CLUSTER_QUEUE,
    JOBSET,
    MULTIKUEUE_CLUSTER,
    NODE,
    POD,
    TRAINJOB,
    VALIDATING_POLICY_BINDING,
    WORKLOAD,
)
from trainjob_conformance.kube.kubeconfig import flattened
from trainjob_conformance.kube.waits import NotYet, WaitTimeout
from trainjob_conformance.policies.admission import (
    kueues_log_names,
    refusal_in_kueues_log,
    wait_dry_run_answer,
)
from trainjob_conformance.policies.history import (
    named,
    replay,
    resource_version,
    stored_while,
    versions_where,
)
from trainjob_conformance.policies.jobs import job_pod_spec, replicated_job_of, wait_jobs
from trainjob_conformance.policies.jobsets import record_no_jobset, wait_jobset
from trainjob_conformance.policies.pods import (
    pods_of,
    release_held_pods,
    wait_pods,
    wait_running,
)
from trainjob_conformance.policies.trainjobs import (
    kueue_override_count,
    kueue_pod_template_patch,
    kueue_runtime_patches,
)
from trainjob_conformance.policies.view import (
    JOBSET_NAME_LABEL,
    condition,
    conditions_of,
)
from trainjob_conformance.policies.webhooks import call_again
from trainjob_conformance.policies.workloads import (
    check_states,
    condition_path,
    decided_admission_check,
    quota_words,
    set_check_state,
    wait_admitted,
    wait_finished,
    wait_pending_for_quota,
    wait_quota_reserved,
    wait_workload,
    workloads_of,
)
from trainjob_conformance.render.overrides import OverrideShape

pytestmark = pytest.mark.kueue

HOSTNAME = "kubernetes.io/hostname"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
# Most TrainJobs below run 2 Pods at once, sized by the two_pods fixture (e2e/conftest.py).
TWO_PODS = 2


# For a TrainJob whose Pods never run here (MultiKueue without a worker).
NEVER_RUN = {"requests": {"cpu": "500m", "memory": "256Mi"}}


def submit(view, runtime, queue, name, num_nodes, resources):
    return view.create_trainjob(
        name,
        runtime=runtime,
        queue_name=queue,
        num_nodes=num_nodes,
        resources_per_node=resources,
    )


def admitted(view, workload_name):
    return view.wait_for_condition(WORKLOAD, workload_name, "Admitted")


def resumed(view, name):
    return view.wait(f"TrainJob {name} to be resumed", lambda: started(view, name))


def why_not_resumed(view, name, within):
    """Why Kueue did not resume TrainJob `name` within `within` seconds (its logged
    refusal included); empty once it did. Noted as the observation a reproduction judges."""
    why = ""
    with view.unrecorded():
        try:
            view.wait(
                f"TrainJob {name} to be resumed",
                lambda: not view.get(TRAINJOB, name)["spec"].get("suspend"),
                timeout=within,
            )
        except WaitTimeout as timeout:
            why = f"{str(timeout).splitlines()[0]}; {refusal_in_kueues_log(view, name)}"
    view.record_observation(
        f"whether TrainJob {name} is resumed",
        TRAINJOB,
        name=name,
        jsonpath="{.spec.suspend}",
        expected="false",
        observed="true" if why else "false",
        within=within,
    )
    return why


@pytest.mark.policy("KQ-ADMIT-001")
def test_queued_trainjob_is_suspended_on_creation_and_gets_a_workload(
    trainjob_view, training_runtime, kueue_queue, two_pods
):
    view = trainjob_view
    queue = kueue_queue()

    created = submit(view, training_runtime(), queue, "queued", TWO_PODS, two_pods())

    assert created["spec"].get("suspend") is True, "Kueue's webhook did not suspend the TrainJob"
    workload = wait_workload(view, "queued")
    assert workload["spec"]["queueName"] == queue


@pytest.mark.policy("KQ-ADMIT-002")
def test_admitted_trainjob_is_resumed_with_kueues_pod_override(
    trainjob_view, training_runtime, kueue_queue, node_group, two_pods
):
    view = trainjob_view
    key, value = node_group
    queue = kueue_queue(node_labels={key: value})
    submit(view, training_runtime(), queue, "admit", TWO_PODS, two_pods())

    admitted(view, wait_workload(view, "admit")["metadata"]["name"])
    trainjob = resumed(view, "admit")

    injected = kueue_pod_template_patch(trainjob, "node")
    assert injected is not None, "no override from Kueue on the TrainJob"
    assert injected["spec"]["nodeSelector"] == {key: value}, injected


@pytest.mark.policy("KQ-ADMIT-003")
def test_pods_of_an_admitted_trainjob_carry_the_flavor_node_selector(
    trainjob_view, training_runtime, kueue_queue, node_group, two_pods
):
    view = trainjob_view
    key, value = node_group
    queue = kueue_queue(node_labels={key: value})
    submit(view, training_runtime(hold=True), queue, "placed", TWO_PODS, two_pods())

    pods = wait_running(view, "placed", 2)

    for pod in pods:
        name = pod["metadata"]["name"]
        selector = pod["spec"].get("nodeSelector") or {}
        assert selector.get(key) == value, f"{name} has nodeSelector {selector}"
        node = view.kube.get(*NODE, pod["spec"]["nodeName"])["metadata"]
        assert node["labels"].get(key) == value, f"{name} runs on {node['name']}"


# A toleration of the TrainJob's own override for the trainer job (every release's
# override field carries tolerations); it tolerates a taint no node has.
OWN_TOLERATION = {"key": "example.com/own-override", "operator": "Exists", "effect": "NoSchedule"}
# Kueue resumes an admitted TrainJob within seconds.
RESUMED_WITHIN = 30


@pytest.mark.policy("KQ-ADMIT-004")
def test_a_queued_trainjob_with_its_own_override_starts_with_its_and_kueues(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, node_group, two_pods
):
    view = trainjob_view
    key, value = node_group
    queue = kueue_queue(node_labels={key: value})
    view.create_trainjob(
        "own",
        runtime=training_runtime(hold=True),
        queue_name=queue,
        num_nodes=TWO_PODS,
        resources_per_node=two_pods(),
        pod_overrides=[{"target_job": "node", "tolerations": [OWN_TOLERATION]}],
    )
    wait_admitted(view, "own")
    trainjob_policy.gap_exercised(
        "Kueue admitted the Workload of TrainJob own, which has its own override for the "
        "trainer job"
    )

    with trainjob_policy.holds():
        why = why_not_resumed(view, "own", RESUMED_WITHIN)
        assert not why, (
            f"TrainJob own, admitted, was never resumed with Kueue's override beside its own: {why}"
        )
        pods = wait_pods(view, "own", TWO_PODS)
        for pod in pods:
            name, spec = pod["metadata"]["name"], pod["spec"]
            assert OWN_TOLERATION in (spec.get("tolerations") or []), (
                f"{name} lost the TrainJob's own override: tolerations {spec.get('tolerations')}"
            )
            selector = spec.get("nodeSelector") or {}
            assert selector.get(key) == value, f"{name} lacks Kueue's nodeSelector: {selector}"


# Kueue's TrainJob defaulting webhook, and how often the policy updates a TrainJob it
# defaulted (Kueue registers it for CREATE only: an update must add nothing).
KUEUE_DEFAULTER = "mtrainjob.kb.io"
UPDATES = 5


@pytest.mark.policy("KQ-ADMIT-005")
def test_kueues_trainjob_defaulting_adds_its_runtime_patch_once(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue
):
    view = trainjob_view
    if view.templates.shape is not OverrideShape.RUNTIME_PATCHES:
        pytest.skip("this Trainer's TrainJob has no spec.runtimePatches, where Kueue writes")
    queue = kueue_queue()
    runtime = training_runtime()
    since = resource_version(view, TRAINJOB)
    once = view.create_trainjob("once", runtime=runtime, queue_name=queue)
    for update in range(UPDATES):
        view.kube.patch(
            *TRAINJOB,
            name="once",
            namespace=view.namespace,
            body={"metadata": {"labels": {"example.com/update": str(update)}}},
        )
    wait_admitted(view, "once")
    # Every version stored from its creation to its admission, Kueue's own writes included.
    events = replay(view, TRAINJOB, since, field_selector=named("once"))
    counts = [len(kueue_runtime_patches(event["object"])) for event in events]
    assert counts and set(counts) == {1}, (
        f"TrainJob once, defaulted by Kueue once, was stored with {counts} runtime patches "
        f"of Kueue's over its creation, {UPDATES} updates and its admission (one each "
        f"expected); as created: {kueue_runtime_patches(once)}"
    )

    probe = view.trainjob_manifest("probe", runtime=runtime, queue_name=queue)
    again = call_again(view, KUEUE_DEFAULTER, probe)
    trainjob_policy.gap_exercised(
        f"Kueue's TrainJob defaulting is called twice on every create in {view.namespace}: "
        f"by {KUEUE_DEFAULTER} and by {again}, a copy with reinvocationPolicy IfNeeded"
    )

    with trainjob_policy.holds():
        try:
            twice = view.create_trainjob("twice", runtime=runtime, queue_name=queue)
        except Rejected as refused:
            raise AssertionError(
                f"TrainJob twice, defaulted twice by Kueue's webhook, was refused: "
                f"{refused.message}"
            ) from None
        found = kueue_runtime_patches(twice)
        view.record_observation(
            "how many runtime patches of Kueue's TrainJob twice was stored with",
            TRAINJOB,
            name="twice",
            jsonpath='{.spec.runtimePatches[?(@.manager=="kueue.x-k8s.io/manager")].manager}',
            expected="kueue.x-k8s.io/manager",
            observed=" ".join(p["manager"] for p in found),
        )
        assert len(found) == 1, (
            f"TrainJob twice, defaulted twice by Kueue's webhook, was stored with {len(found)} "
            f"runtime patches of manager kueue.x-k8s.io/manager: {found}"
        )


def refused_in_namespace(view, suffix, rules, expression, message):
    """A ValidatingAdmissionPolicy of the test, bound to its namespace, that refuses the
    requests of `rules` (resourceRules) for which `expression` (CEL) is false, with
    `message`; named `<namespace>-<suffix>`, deleted with the test."""
    name = f"{view.namespace}-{suffix}"
    view.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": rules},
                "validations": [{"expression": expression, "message": message}],
            },
        }
    )
    view.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": view.namespace}
                    }
                },
            },
        }
    )
    return name


def start_refused(view):
    """A policy of the test that refuses to resume a suspended TrainJob in its namespace;
    in effect once resume_refused has seen a probe's resume refused."""
    return refused_in_namespace(
        view,
        "no-resume",
        [
            {
                "apiGroups": ["trainer.kubeflow.org"],
                "apiVersions": ["*"],
                "operations": ["UPDATE"],
                "resources": ["trainjobs"],
            }
        ],
        "!(has(oldObject.spec.suspend) && oldObject.spec.suspend"
        " && !(has(object.spec.suspend) && object.spec.suspend))",
        "the test refuses to resume TrainJobs for now",
    )


def resume_refused(view, probe):
    def refused():
        try:
            view.kube.patch(
                *TRAINJOB,
                name=probe,
                namespace=view.namespace,
                body={"spec": {"suspend": False}},
                dry_run=True,
            )
        except Rejected:
            return True
        return NotYet("a resume of TrainJob probe is still accepted")

    with view.unrecorded():
        view.wait("the API server to refuse resuming TrainJobs", refused)


@pytest.mark.policy("KQ-ADMIT-006")
def test_a_trainjob_whose_start_was_refused_starts_with_kueues_override_once(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue
):
    view = trainjob_view
    queue = kueue_queue()
    runtime = training_runtime()
    view.create_trainjob("probe", runtime=runtime, suspend=True)
    policy = start_refused(view)
    resume_refused(view, "probe")

    since = resource_version(view, TRAINJOB)
    submit(view, runtime, queue, "retried", 1, {})
    wait_admitted(view, "retried")
    view.wait(
        "Kueue to log the refusal of its start of TrainJob retried",
        lambda: (
            kueues_log_names(view, policy, '"retried"')
            or NotYet(f"no line of Kueue's log names {policy} and TrainJob retried")
        ),
    )
    view.kube.delete(*VALIDATING_POLICY_BINDING, name=policy)
    trainjob_policy.gap_exercised(
        "Kueue's start of TrainJob retried, admitted, was refused; the refusal is lifted"
    )

    with trainjob_policy.holds():
        why = why_not_resumed(view, "retried", RESUMED_WITHIN * 2)
        assert not why, f"TrainJob retried was never started once its start was allowed: {why}"
        # Every version stored since before its creation: a second override that was
        # stored and replaced counts too.
        events = replay(view, TRAINJOB, since, field_selector=named("retried"))
        counts = [kueue_override_count(event["object"]) for event in events]
        assert max(counts) == 1, (
            f"TrainJob retried was stored with {counts} overrides of Kueue's, version by "
            "version: a retried start added its override again"
        )


# The quota policies' TrainJobs: 2 Pods each, of as much CPU as the nodes can run
# (2 CPU at most), leaving room for both policies at once on two pytest workers.
QUOTA_PODS = 2
QUOTA_POD_CPU = 2000  # millicores
QUOTA_TESTS = 2


def fill_the_quota(view, runtime, kueue_queue, cpu_room):
    """A queue whose CPU quota is exactly one TrainJob's: the first takes all of it and
    runs, the second does not fit. The Pods are sized to what the nodes have free, so
    node capacity holds back neither TrainJob: only the quota can hold the second."""
    per_pod = cpu_room(QUOTA_PODS, QUOTA_POD_CPU, share=QUOTA_TESTS)
    queue = kueue_queue(cpu=f"{QUOTA_PODS * per_pod}m")
    resources = {"requests": {"cpu": f"{per_pod}m", "memory": "1Gi"}}
    submit(view, runtime, queue, "first", QUOTA_PODS, resources)
    wait_running(view, "first", QUOTA_PODS)
    submit(view, runtime, queue, "second", QUOTA_PODS, resources)
    return wait_pending_for_quota(view, "second")


@pytest.mark.policy("KQ-QUOTA-001")
def test_trainjob_beyond_quota_waits_suspended_without_pods(
    trainjob_view, training_runtime, kueue_queue, cpu_room
):
    view = trainjob_view
    # Judged over the whole window, not only at its end: Kueue suspending the
    # TrainJob again after it ran would leave the same end state.
    trainjobs_since = resource_version(view, TRAINJOB)
    pods_since = resource_version(view, POD)

    pending = fill_the_quota(view, training_runtime(hold=True), kueue_queue, cpu_room)

    stored = replay(view, TRAINJOB, trainjobs_since, field_selector="metadata.name=second")
    assert stored, "the API server replayed no version of TrainJob second"
    unsuspended = versions_where(
        stored, "spec.suspend is not true", lambda t: t["spec"].get("suspend") is not True
    )
    assert unsuspended == [], "TrainJob second was stored unsuspended while beyond the quota"
    pods = replay(view, POD, pods_since, label_selector=f"{JOBSET_NAME_LABEL}=second")
    created = versions_where(pods, "a Pod of TrainJob second", lambda pod: True)
    assert created == [], "Pods of TrainJob second existed while it waited for quota"
    # And where it ended.
    assert condition(pending, "Admitted").get("status") != "True"
    assert view.get(TRAINJOB, "second")["spec"]["suspend"] is True
    assert pods_of(view, "second") == []


@pytest.mark.policy("KQ-QUOTA-002")
def test_waiting_trainjob_runs_once_the_first_finishes(
    trainjob_view, training_runtime, kueue_queue, cpu_room
):
    view = trainjob_view
    fill_the_quota(view, training_runtime(hold=True), kueue_queue, cpu_room)

    release_held_pods(view, "first")
    view.wait_for_condition(TRAINJOB, "first", "Complete", timeout=90)

    admitted(view, wait_workload(view, "second")["metadata"]["name"])
    wait_running(view, "second", QUOTA_PODS)


@pytest.mark.policy("KQ-PODSET-001")
@pytest.mark.parametrize("num_nodes", [1, 3])
def test_workload_podset_matches_the_trainjob_and_its_jobset(
    trainjob_view, trainjob_templates, training_runtime, kueue_queue, num_nodes
):
    view = trainjob_view
    queue = kueue_queue()
    per_node = {"requests": {"cpu": "500m", "memory": "512Mi"}}
    submit(view, training_runtime(), queue, "sized", num_nodes, per_node)

    workload = wait_workload(view, "sized")
    jobset = view.wait("JobSet sized", lambda: view.find(JOBSET, "sized"))

    podsets = {p["name"]: p for p in workload["spec"]["podSets"]}
    assert podsets["node"]["count"] == num_nodes, (
        f"the Workload's podSet node counts {podsets['node']['count']} Pods, not {num_nodes}"
    )
    (container,) = [
        c for c in podsets["node"]["template"]["spec"]["containers"] if c["name"] == "node"
    ]
    assert container["resources"]["requests"] == per_node["requests"]
    (replicated,) = [j for j in jobset["spec"]["replicatedJobs"] if j["name"] == "node"]
    job = replicated["template"]["spec"]
    assert podsets["node"]["count"] == replicated.get("replicas", 1) * min(
        job["parallelism"], job["completions"]
    )


def flavor_usage(cluster_queue):
    """ClusterQueue status.flavorsUsage as {resource: quantity}, summed over flavors."""
    usage = {}
    for flavor in (cluster_queue.get("status") or {}).get("flavorsUsage") or []:
        for resource in flavor.get("resources") or []:
            usage[resource["name"]] = usage.get(resource["name"], 0) + parse_quantity(
                resource.get("total", "0")
            )
    return usage


@pytest.mark.policy("KQ-PODSET-002")
def test_workload_podset_totals_follow_num_nodes_and_resources_per_node(
    trainjob_view, training_runtime, kueue_queue
):
    view = trainjob_view
    queue = kueue_queue()
    per_node = {"cpu": "500m", "memory": "512Mi"}
    # The runtime says numNodes 1; the TrainJob overrides it with 3.
    submit(view, training_runtime(hold=True), queue, "sized", 3, {"requests": per_node})

    workload = wait_workload(view, "sized")
    podsets = {p["name"]: p for p in workload["spec"]["podSets"]}
    (container,) = [
        c for c in podsets["node"]["template"]["spec"]["containers"] if c["name"] == "node"
    ]
    admitted(view, workload["metadata"]["name"])
    expected = {name: 3 * parse_quantity(value) for name, value in per_node.items()}

    def accounted():
        cq = view.kube.get(*CLUSTER_QUEUE, name=view.namespace)
        usage = flavor_usage(cq)
        return cq if all(usage.get(k, 0) > 0 for k in expected) else NotYet(f"usage {usage}")

    cluster_queue = view.wait(f"ClusterQueue {view.namespace} to account for it", accounted)

    assert podsets["node"]["count"] == 3, (
        f"the Workload's podSet node counts {podsets['node']['count']} Pods, not 3"
    )
    assert container["resources"]["requests"] == per_node
    assert {k: v for k, v in flavor_usage(cluster_queue).items() if k in expected} == expected


# The runtime's own requests for its node container; the TrainJob names only cpu.
RUNTIME_NODE_REQUESTS = {"cpu": "50m", "memory": "64Mi"}
TRAINJOB_CPU = "100m"


def node_container_requests(pod_spec):
    (container,) = [c for c in pod_spec["containers"] if c["name"] == "node"]
    return (container.get("resources") or {}).get("requests") or {}


@pytest.mark.policy("KQ-PODSET-004")
def test_the_workloads_node_requests_equal_the_requests_of_its_pods(
    trainjob_view, training_runtime, kueue_queue, trainjob_policy
):
    view = trainjob_view
    queue = kueue_queue()
    runtime = training_runtime(hold=True, node_requests=RUNTIME_NODE_REQUESTS)
    submit(view, runtime, queue, "accounted", 1, {"requests": {"cpu": TRAINJOB_CPU}})
    workload = wait_admitted(view, "accounted")
    (pod,) = wait_pods(view, "accounted", 1)
    podsets = {p["name"]: p for p in workload["spec"]["podSets"]}
    reserved = node_container_requests(podsets["node"]["template"]["spec"])
    requested = node_container_requests(pod["spec"])
    # What every release agrees on: the cpu the TrainJob names.
    assert reserved.get("cpu") == requested.get("cpu") == TRAINJOB_CPU, (
        f"the Workload reserves {reserved}, the Pod requests {requested}"
    )
    trainjob_policy.gap_exercised(
        "resourcesPerNode names only cpu; the runtime's node container also requests memory"
    )

    # A reproduction compares the Workload with this Pod as the run saw it: on a
    # cluster whose Pod requests otherwise it stops before the observation.
    view.record_wait(
        "the Pod of TrainJob accounted to request the memory it requested in the run",
        POD,
        selector=f"{JOBSET_NAME_LABEL}=accounted",
        jsonpath='{.items[*].spec.containers[?(@.name=="node")].resources.requests.memory}',
        equals=str(requested.get("memory", "")),
    )
    with trainjob_policy.holds():
        view.record_observation(
            "the memory the Workload of TrainJob accounted reserves per Pod of job node",
            WORKLOAD,
            jsonpath=(
                '{.items[?(@.metadata.ownerReferences[0].name=="accounted")].spec.podSets'
                '[?(@.name=="node")].template.spec.containers[?(@.name=="node")]'
                ".resources.requests.memory}"
            ),
            expected=str(requested.get("memory", "")),
            observed=str(reserved.get("memory", "")),
        )
        assert reserved == requested, (
            f"the Workload reserves {reserved} per Pod of job node, its Pod requests {requested}"
        )


# A runtime of nine replicated jobs: one more than the 8 PodSets a Workload took
# before Kueue v0.18.
NINE_JOBS = [f"aux-{i}" for i in range(1, 9)]


@pytest.mark.policy("KQ-PODSET-005")
def test_a_trainjob_of_nine_replicated_jobs_gets_a_workload_and_is_admitted(
    trainjob_view, training_runtime, kueue_queue, trainjob_policy
):
    view = trainjob_view
    queue = kueue_queue()
    submit(view, training_runtime(extra_jobs=NINE_JOBS), queue, "wide", 1, {})
    # A witness queued after it: once it is admitted, Kueue has handled TrainJob wide.
    submit(view, training_runtime(), queue, "witness", 1, {})
    wait_admitted(view, "witness")
    trainjob_policy.gap_exercised("TrainJob wide's runtime has 9 replicated jobs")

    with trainjob_policy.holds():
        with view.unrecorded():
            try:
                # Kueue makes a Workload as it first sees a TrainJob: once the
                # witness is admitted, wide's is there or never will be.
                view.wait(
                    "a Workload of TrainJob wide", lambda: workloads_of(view, "wide"), timeout=15
                )
                workload = wait_admitted(view, "wide")
            except WaitTimeout as timeout:
                workload, why = None, str(timeout).splitlines()[0]
        view.record_observation(
            "whether the Workload of TrainJob wide is Admitted",
            WORKLOAD,
            jsonpath=(
                '{.items[?(@.metadata.ownerReferences[0].name=="wide")]'
                '.status.conditions[?(@.type=="Admitted")].status}'
            ),
            expected="True",
            observed="True" if workload else "",
        )
        assert workload is not None, f"TrainJob wide of 9 replicated jobs was not admitted: {why}"
        podsets = [p["name"] for p in workload["spec"]["podSets"]]
        assert len(podsets) == 9, f"the Workload has PodSets {podsets}, not 9"


# A label key with a space: no Pod can carry it, and the API server refuses a Job whose
# template has it, so a Workload that reserves quota for such Pods holds it for nothing.
INVALID_POD_LABEL = {"example.com/not a label key": "x"}
UNVALIDATED_RUNTIME = {"trainer.kubeflow.org/webhook-validation": "disabled"}


def reserved_quota(trainjob):
    def matches(workload):
        owners = [ref.get("name") for ref in workload["metadata"].get("ownerReferences") or []]
        return trainjob in owners and condition(workload, "QuotaReserved").get("status") == "True"

    return matches


@pytest.mark.policy("KQ-PODSET-006")
def test_a_trainjob_whose_pods_would_carry_an_invalid_label_reserves_no_quota(
    trainjob_view, training_runtime, kueue_queue, trainjob_policy
):
    view = trainjob_view
    queue = kueue_queue()
    since = resource_version(view, WORKLOAD)
    # The Trainer's runtime webhook (v2.3) would refuse the runtime itself; the label is
    # its own opt-out, so that Kueue is the one to judge the Pods' labels.
    runtime = training_runtime(pod_labels=INVALID_POD_LABEL, labels=UNVALIDATED_RUNTIME)
    submit(view, runtime, queue, "invalid", 1, {})
    # A witness queued after it: once it is admitted, Kueue has handled TrainJob invalid.
    submit(view, training_runtime(), queue, "witness", 1, {})
    wait_admitted(view, "witness")
    trainjob_policy.gap_exercised(
        f"TrainJob invalid is queued, its trainer Pods' template labelled {INVALID_POD_LABEL}"
    )

    with trainjob_policy.holds():
        # Every Workload version stored while both were handled, not only the last.
        reserved = stored_while(
            view, WORKLOAD, since, "quota reserved for TrainJob invalid", reserved_quota("invalid")
        )
        view.record_observation(
            "whether Kueue reserved quota for TrainJob invalid",
            WORKLOAD,
            jsonpath=(
                '{.items[?(@.metadata.ownerReferences[0].name=="invalid")]'
                '.status.conditions[?(@.type=="QuotaReserved")].status}'
            ),
            expected="",
            observed="True" if reserved else "",
        )
        assert not reserved, (
            "Kueue reserved quota for TrainJob invalid, whose Pods cannot be created with "
            f"label {INVALID_POD_LABEL}: {reserved[0]}"
        )


# Initializer Jobs of the runtime, each with its container's requests.
INITIALIZERS = {
    "dataset-initializer": {"cpu": "1", "memory": "256Mi"},
    "model-initializer": {"cpu": "1500m", "memory": "512Mi"},
}


def podset_requests(podset):
    (container,) = podset["template"]["spec"]["containers"]
    return container["resources"]["requests"]


@pytest.mark.policy("KQ-PODSET-003")
def test_each_initializer_job_has_a_podset_sized_like_its_job(
    trainjob_view, training_runtime, kueue_queue
):
    view = trainjob_view
    queue = kueue_queue()
    runtime = training_runtime(hold=True, initializers=INITIALIZERS)
    submit(view, runtime, queue, "init", 2, {"requests": {"cpu": "500m", "memory": "512Mi"}})

    workload = wait_workload(view, "init")
    admitted(view, workload["metadata"]["name"])
    jobs = wait_jobs(view, "init", 1 + len(INITIALIZERS))

    podsets = {p["name"]: p for p in workload["spec"]["podSets"]}
    assert sorted(podsets) == sorted(["node", *INITIALIZERS])
    for name, requests in INITIALIZERS.items():
        assert podsets[name]["count"] == 1, f"PodSet {name} counts {podsets[name]['count']} Pods"
        asked = podset_requests(podsets[name])
        assert asked == requests, f"PodSet {name} requests {asked}, its container {requests}"
    for job in jobs:
        replicated = replicated_job_of(job)
        pods = min(job["spec"]["parallelism"], job["spec"]["completions"])
        counted = podsets[replicated]["count"]
        assert counted == pods, f"PodSet {replicated} counts {counted} Pods, its Job runs {pods}"
        containers = {c["name"]: c for c in job_pod_spec(job)["containers"]}
        if replicated in INITIALIZERS:
            requests = containers[replicated]["resources"]["requests"]
            asked = podset_requests(podsets[replicated])
            assert asked == requests, f"PodSet {replicated} requests {asked}, its Job {requests}"


@pytest.mark.policy("KQ-PODSET-003")
def test_trainjob_that_fits_only_without_its_initializers_waits(
    trainjob_view, training_runtime, kueue_queue
):
    view = trainjob_view
    # Node Pods take 2 of the 3 CPUs; the initializers would add 2.5 more.
    queue = kueue_queue(cpu="3")
    per_node = {"requests": {"cpu": "1", "memory": "256Mi"}}
    submit(view, training_runtime(initializers=INITIALIZERS), queue, "with-init", 2, per_node)

    pending = wait_pending_for_quota(view, "with-init")
    submit(view, training_runtime(), queue, "without-init", 2, per_node)
    wait_admitted(view, "without-init")

    assert "cpu" in condition(pending, "QuotaReserved").get("message", ""), pending["status"]
    assert (
        condition(view.get(WORKLOAD, pending["metadata"]["name"]), "Admitted").get("status")
        != "True"
    )
    assert view.get(TRAINJOB, "with-init")["spec"]["suspend"] is True
    assert pods_of(view, "with-init") == []


def multikueue_check(view, worker_name, kubeconfig_path=None):
    """The MultiKueue AdmissionCheck, config and cluster, named after the test's namespace;
    with a kubeconfig, the worker is reachable through a Secret Kueue reads."""
    secret = None
    if kubeconfig_path is not None:
        secret = worker_name
        view.create(kubeconfig_secret(secret, view.cluster.kueue_namespace, kubeconfig_path))
    for manifest in view.templates.render(
        "multikueue", name=view.namespace, clusters=[worker_name], kubeconfig_secret=secret or ""
    ):
        view.create(manifest)
    return view.namespace


# A worker's kubeconfig that skips TLS verification, for a server nothing serves.
INSECURE_KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [
        {
            "name": "w",
            "cluster": {"server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True},
        }
    ],
    "users": [{"name": "w", "user": {"token": "not-a-token"}}],
    "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
    "current-context": "w",
}


@pytest.mark.policy("KQ-MK-003")
def test_a_worker_kubeconfig_that_skips_tls_verification_is_refused(trainjob_view, trainjob_policy):
    view = trainjob_view
    worker = f"{view.namespace}-insecure"
    text = yaml.safe_dump(INSECURE_KUBECONFIG)
    view.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": worker, "namespace": view.cluster.kueue_namespace},
            "data": {"kubeconfig": base64.b64encode(text.encode()).decode()},
        }
    )
    for manifest in view.templates.render(
        "multikueue", name=view.namespace, clusters=[worker], kubeconfig_secret=worker
    ):
        view.create(manifest)
    trainjob_policy.gap_exercised(f"MultiKueueCluster {worker}'s kubeconfig skips TLS verification")

    def inactive():
        found = condition(view.get(MULTIKUEUE_CLUSTER, worker), "Active")
        return found if found.get("status") == "False" else NotYet(f"Active: {found or 'absent'}")

    with trainjob_policy.holds():
        found = view.wait(f"MultiKueueCluster {worker} to say it is not Active", inactive)
        view.record_observation(
            f"why MultiKueueCluster {worker} is not Active",
            MULTIKUEUE_CLUSTER,
            name=worker,
            jsonpath='{.status.conditions[?(@.type=="Active")].reason}',
            expected="InsecureKubeConfig",
            observed=str(found.get("reason", "")),
            within=30,
        )
        assert found.get("reason") == "InsecureKubeConfig", (
            f"MultiKueueCluster {worker} is not Active for another reason: "
            f"{found.get('reason')}: {found.get('message')}"
        )


def kubeconfig_secret(name, namespace, kubeconfig_path):
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"kubeconfig": base64.b64encode(flattened(kubeconfig_path).encode()).decode()},
    }


def worker_connected(view, name):
    """Kueue's connection to the worker cluster is the harness's set-up, not the policy:
    a worker Kueue cannot use is a broken stack (ERROR), in Kueue's words."""
    try:
        view.wait_for_condition(MULTIKUEUE_CLUSTER, name, "Active")
    except WaitTimeout:
        found = condition(view.get(MULTIKUEUE_CLUSTER, name), "Active")
        raise StackError(
            0,
            found.get("reason", "Inactive"),
            f"Kueue cannot use the MultiKueue worker cluster {name}: {found.get('message')}",
        ) from None


def worker_queue(worker, runtime, queue_params=None, **runtime_params):
    """On the worker: the same runtime (made with `runtime_params`) and a LocalQueue named
    `queue` with a quota of its own (its ClusterQueue made with `queue_params`)."""
    namespace = worker.namespace
    worker.create(worker.render("clustertrainingruntime", name=runtime, **runtime_params))
    worker.create(worker.render("resourceflavor", name=namespace))
    worker.create(
        worker.render(
            "clusterqueue",
            name=namespace,
            namespace=namespace,
            flavor=namespace,
            **(queue_params or {}),
        )
    )
    worker.create(
        worker.render("localqueue", name="queue", namespace=namespace, cluster_queue=namespace)
    )


def multikueue_to(view, worker, runtime, queue_params=None, **runtime_params):
    """The worker ready to run `runtime`'s TrainJobs (see worker_queue), and the MultiKueue
    check that sends them there, once Kueue is connected to it and the check is Active."""
    worker_queue(worker, runtime, queue_params, **runtime_params)
    check = multikueue_check(view, f"{view.namespace}-worker", worker.cluster.kubeconfig)
    worker_connected(view, f"{view.namespace}-worker")
    view.wait_for_condition(ADMISSION_CHECK, check, "Active")
    return check


def multikueue_queue(view, kueue_queue, runtime, checks, **queue_params):
    """A LocalQueue behind `checks` (a MultiKueue check among them), once Kueue's webhook
    gives its TrainJobs spec.managedBy MultiKueue. The webhook reads Kueue's cache, which
    links the new queue to its checks a little later: a TrainJob created before stays
    the manager's own, and MultiKueue rejects its Workload ("The owner is not managed by
    Kueue"), as KQ-MK-007 and -008 met on an upgraded kind cluster (2026-11-29)."""
    queue = kueue_queue(admission_checks=checks, **queue_params)
    probe = view.trainjob_manifest("probe", runtime=runtime, queue_name=queue)
    wait_dry_run_answer(
        view, probe, "managedBy", MULTIKUEUE, "Kueue knows the MultiKueue check of the queue"
    )
    return queue


@pytest.mark.policy("KQ-MK-001")
def test_multikueue_queue_hands_the_trainjob_to_multikueue(
    trainjob_view, training_runtime, kueue_queue, trainjob_policy
):
    view = trainjob_view
    check = multikueue_check(view, f"{view.namespace}-worker")
    runtime = training_runtime()
    queue = multikueue_queue(view, kueue_queue, runtime, (check,))

    since = resource_version(view, JOBSET)
    created = submit(view, runtime, queue, "remote", TWO_PODS, NEVER_RUN)
    view.create_trainjob("local", runtime=runtime)

    assert created["spec"]["managedBy"] == MULTIKUEUE
    wait_jobset(view, "local")
    record_no_jobset(view, "remote", view.find(JOBSET, "remote"))
    with trainjob_policy.holds():
        # Over the whole window: a JobSet built and deleted again counts too.
        built = stored_while(
            view, JOBSET, since, "a JobSet", lambda _: True, field_selector=named("remote")
        )
        assert built == [], f"the local Trainer built a JobSet for a MultiKueue job: {built}"


@pytest.mark.policy("KQ-MK-002")
def test_multikueue_runs_the_trainjob_on_the_worker_and_copies_status_back(
    trainjob_view, training_runtime, kueue_queue, multikueue_worker, trainjob_policy, two_pods
):
    view, worker = trainjob_view, multikueue_worker
    runtime = training_runtime()
    check = multikueue_to(view, worker, runtime)
    queue = multikueue_queue(view, kueue_queue, runtime, (check,))

    since = resource_version(view, JOBSET)
    created = submit(view, runtime, queue, "remote", TWO_PODS, two_pods(worker.cluster))

    assert created["spec"]["managedBy"] == MULTIKUEUE
    # Observed while it runs: MultiKueue removes the worker's copy once the
    # manager's Workload has finished.
    worker.wait("the TrainJob's JobSet on the worker", lambda: worker.find(JOBSET, "remote"))
    # The run's end on the manager: Kueue finishes the manager's Workload once the
    # worker's has, right after copying the worker's TrainJob status.
    trainjob, finished = wait_finished(view, "remote", timeout=120)
    with trainjob_policy.holds():
        built = stored_while(
            view, JOBSET, since, "a JobSet", lambda _: True, field_selector=named("remote")
        )
        broken = [f"the manager's Trainer built a JobSet too: {built}"] if built else []
        if condition(trainjob, "Complete").get("status") != "True":
            broken.append(
                "Kueue finished the manager's Workload "
                f"({finished.get('reason')}: {finished.get('message')}) but the manager's "
                "TrainJob never got the Complete condition: the worker's status was not "
                f"copied back (its conditions: {conditions_of(trainjob)})"
            )
        assert not broken, "; ".join(broken)


# How long the manager's Workload is held, quota reserved, behind a check the test has
# not decided: MultiKueue hands a job to a worker within a second or two of its turn.
HELD_BEHIND_CHECK = 10


@pytest.mark.policy("KQ-MK-005")
def test_multikueue_waits_for_the_other_admission_checks_before_dispatching(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, multikueue_worker, two_pods
):
    view, worker = trainjob_view, multikueue_worker
    runtime = training_runtime()
    check = multikueue_to(view, worker, runtime)
    other = decided_admission_check(view, f"{view.namespace}-held")
    queue = multikueue_queue(view, kueue_queue, runtime, (check, other))

    since = resource_version(worker, TRAINJOB)
    created = submit(view, runtime, queue, "remote", TWO_PODS, two_pods(worker.cluster))
    assert created["spec"]["managedBy"] == MULTIKUEUE
    reserved = wait_quota_reserved(view, "remote", checks=(check, other))
    # The test never sets its check: whatever else does is the watch's to find.
    trainjob_policy.gap_exercised(
        f"Kueue reserved quota for TrainJob remote, its admission checks {check_states(reserved)}"
    )

    with trainjob_policy.holds():
        # Watched on the worker for the whole hold: a copy made and deleted counts too.
        early = versions_where(
            replay(
                worker, TRAINJOB, since, field_selector=named("remote"), seconds=HELD_BEHIND_CHECK
            ),
            f"on the worker while check {other} was Pending",
            lambda _: True,
        )
        view.record_observation(
            f"a TrainJob remote on the worker while check {other} is Pending",
            TRAINJOB,
            name="remote",
            jsonpath="{.metadata.name}",
            expected="",
            observed="remote" if early else "",
            within=HELD_BEHIND_CHECK,
        )
        assert not early, (
            f"MultiKueue dispatched TrainJob remote to the worker before check {other} was "
            f"Ready: {early[0]}"
        )
    set_check_state(view, "remote", other, "Ready")
    worker.wait(
        f"TrainJob remote on the worker once check {other} is Ready",
        lambda: worker.find(TRAINJOB, "remote"),
    )


# The label MultiKueue puts on the copies it creates on a worker (Kueue's
# MultiKueueOriginLabel), and the origin Kueue's configuration gives it by default.
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"


def what_became_of(event, uid):
    """'deleted', 'being deleted', 'replaced (...)' for a stored version of the worker's
    own TrainJob that shows it so, else ''."""
    metadata = event["object"]["metadata"]
    if event["type"] == "DELETED":
        return "deleted"
    if metadata.get("deletionTimestamp"):
        return "being deleted"
    if metadata.get("uid") != uid:
        return f"replaced by another TrainJob of the name (uid {metadata.get('uid')})"
    return ""


def gone_or_replaced(events, uid):
    """One line per stored version of the worker's own TrainJob that shows it deleted,
    being deleted, or replaced by another object of the same name."""
    found = []
    for event in events:
        what = what_became_of(event, uid)
        if what:
            metadata = event["object"]["metadata"]
            origin = (metadata.get("labels") or {}).get(MULTIKUEUE_ORIGIN_LABEL)
            found.append(
                f"{event['type']} at resourceVersion {metadata['resourceVersion']}: {what}"
                + (f", labelled {MULTIKUEUE_ORIGIN_LABEL}={origin}" if origin else "")
            )
    return found


def remote_workload_gone(worker, name):
    return worker.wait(
        f"MultiKueue's copy of Workload {name} to be gone from the worker",
        lambda: worker.find(WORKLOAD, name) is None or NotYet("still on the worker"),
        timeout=60,
    )


@pytest.mark.policy("KQ-MK-006")
def test_multikueue_leaves_a_workers_own_trainjob_of_the_same_name_alone(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, multikueue_worker
):
    view, worker = trainjob_view, multikueue_worker
    runtime = training_runtime()
    check = multikueue_to(view, worker, runtime)
    queue = multikueue_queue(view, kueue_queue, runtime, (check,))
    # The worker's team's own TrainJob, not queued: MultiKueue did not create it.
    own = worker.create_trainjob("shared", runtime=runtime, suspend=True, num_nodes=1)
    uid = own["metadata"]["uid"]
    since = resource_version(worker, TRAINJOB)

    created = submit(view, runtime, queue, "shared", 1, NEVER_RUN)
    assert created["spec"]["managedBy"] == MULTIKUEUE
    workload = wait_workload(view, "shared")["metadata"]["name"]
    # MultiKueue syncs the job once the worker has reserved quota for its copy of the
    # Workload: from here it reads, and before the fix deletes, the worker's TrainJob.
    worker.wait_for_condition(WORKLOAD, workload, "QuotaReserved")
    trainjob_policy.gap_exercised(
        f"the worker reserved quota for MultiKueue's copy of Workload {workload}, beside "
        "the worker's own TrainJob shared"
    )
    view.kube.delete(*TRAINJOB, name="shared", namespace=view.namespace)
    # MultiKueue removes the remote job before the remote Workload: once that is gone,
    # every deletion it was going to make is made.
    remote_workload_gone(worker, workload)

    with trainjob_policy.holds():
        # Every version the worker stored: one deleted and created again counts too.
        events = replay(worker, TRAINJOB, since, field_selector=named("shared"))
        touched = gone_or_replaced(events, uid)
        now = worker.find(TRAINJOB, "shared")
        assert not touched and now is not None, (
            "MultiKueue acted on the worker's own TrainJob shared, which it did not create: "
            + ("; ".join(touched) or "it is gone")
        )


PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
# One TrainJob of one Pod this size fits the manager's quota of 1 CPU; two do not.
ONE_OF_ONE_CPU = {"requests": {"cpu": "600m", "memory": "256Mi"}}
# How long MultiKueue has to carry out a preemption decided on the manager.
PREEMPTION_SECONDS = 60


def low_and_high_priority(*views):
    """Two WorkloadPriorityClasses, low (100) and high (1000), on each cluster of `views`:
    cluster-wide and named in a label value, so named by the namespace's own suffix."""
    suffix = views[0].namespace.rsplit("-", 1)[-1]
    names = (f"tjc-{suffix}-low", f"tjc-{suffix}-high")
    for view in views:
        for name, value in zip(names, (100, 1000), strict=True):
            view.create(view.render("workloadpriorityclass", name=name, value=value))
    return names


def submit_with_priority(view, runtime, queue, name, priority):
    return view.create_trainjob(
        name,
        runtime=runtime,
        queue_name=queue,
        num_nodes=1,
        resources_per_node=ONE_OF_ONE_CPU,
        labels={PRIORITY_CLASS_LABEL: priority},
    )


def happens_within(view, description, probe, seconds, after):
    """Wait for `probe`; on timeout, fail with what it still misses first (the reason a
    report shows), then the wait's own text with the diagnostics."""
    try:
        view.wait(description, probe, timeout=seconds)
    except WaitTimeout as timeout:
        left = probe()
        why = left.why if isinstance(left, NotYet) else "it did only just after"
        raise AssertionError(f"{seconds} s after {after}: {why}\n{timeout}") from None


def preemption_carried_out(view, worker, preempted, preemptor):
    """What is still missing of a preemption on the manager: the preempted TrainJob's copy
    gone from the worker, its Workload without quota, the preemptor's copy on the worker."""

    def probe():
        missing = []
        if worker.find(TRAINJOB, preempted) is not None:
            missing.append(f"TrainJob {preempted} is still on the worker")
        (workload,) = workloads_of(view, preempted)
        reserved = condition(workload, "QuotaReserved")
        if reserved.get("status") == "True":
            missing.append(f"the manager's Workload of {preempted} still holds quota")
        if worker.find(TRAINJOB, preemptor) is None:
            missing.append(f"TrainJob {preemptor} is not on the worker")
        return not missing or NotYet("; ".join(missing))

    return probe


def evicted(find, where, view, preemptor):
    """A probe for the Evicted condition of the Workload `find()` returns (None: none yet),
    giving (workload, condition) once it is True. Until then it says what Kueue says of
    the Workload of TrainJob `preemptor` in `view`, the one that should preempt it."""

    def probe():
        found = find()
        condition_found = condition(found, "Evicted") if found else {}
        if condition_found.get("status") == "True":
            return found, condition_found
        seen = f"Evicted: {condition_found or 'absent'}" if found else f"no Workload {where}"
        if found:
            seen += f" (priority {found['spec'].get('priority')})"
        return NotYet(f"{seen}; {why_not_preempting(view, preemptor)}")

    return probe


def why_not_preempting(view, preemptor):
    """What Kueue says of the Workload of TrainJob `preemptor` while it has not preempted:
    no Workload yet, or its QuotaReserved message ("Pending the preemption of 1
    workload(s)", or why there is nothing it may preempt) and its priority."""
    found = workloads_of(view, preemptor)
    if len(found) != 1:
        return f"{len(found)} Workloads of TrainJob {preemptor}"
    return (
        f"the Workload of TrainJob {preemptor} (priority {found[0]['spec'].get('priority')}): "
        f"{quota_words(found[0])}"
    )


def started(view, trainjob):
    """TrainJob `trainjob` once it exists and Kueue has resumed it, else why not."""
    found = view.find(TRAINJOB, trainjob)
    if found is None:
        return NotYet(f"no TrainJob {trainjob}")
    return found if not found["spec"].get("suspend") else NotYet(f"TrainJob {trainjob} suspended")


def only_workload_of(view, trainjob):
    found = workloads_of(view, trainjob)
    return found[0] if len(found) == 1 else None


# A status write that marks a Workload Evicted when it was not: how Kueue preempts.
MARKS_EVICTED = (
    "has(object.status) && has(object.status.conditions) && "
    "object.status.conditions.exists(c, c.type == 'Evicted' && c.status == 'True') && "
    "!(has(oldObject.status) && has(oldObject.status.conditions) && "
    "oldObject.status.conditions.exists(c, c.type == 'Evicted' && c.status == 'True'))"
)
# The policy's canary: a ConfigMap of this name it refuses too, so that a dry-run
# create shows when the policy is in effect (a policy takes effect a little after it
# is created), in kubectl's terms for a reproduction.
EVICTION_CANARY = "eviction-refused-canary"


def evictions_refused(view):
    """A policy of the test that refuses, in its namespace, any write that marks a
    Workload Evicted (and its canary); once this returns, it is in effect."""
    policy = refused_in_namespace(
        view,
        "no-eviction",
        [
            {
                "apiGroups": ["kueue.x-k8s.io"],
                "apiVersions": ["*"],
                "operations": ["UPDATE"],
                "resources": ["workloads/status"],
            },
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["configmaps"],
            },
        ],
        f"request.resource.resource == 'configmaps' ? object.metadata.name != "
        f"'{EVICTION_CANARY}' : !({MARKS_EVICTED})",
        "the test refuses to evict Workloads for now",
    )
    canary = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": EVICTION_CANARY, "namespace": view.namespace},
    }

    def refused():
        try:
            view.kube.create(canary, dry_run=True)
        except Rejected:
            return True
        return NotYet(f"ConfigMap {EVICTION_CANARY} is still accepted")

    view.wait(f"{policy} to be in effect (its canary refused)", refused)
    return policy


# Seconds Kueue has to say, on the preempting Workload, that it will try a refused
# preemption again: it says so in the scheduling cycle that met the refusal.
RETRY_SAID_SECONDS = 30
# Kueue's words for it (pkg/scheduler/scheduler.go, v0.14.5, v0.15.0 and later).
RETRY_WORDS = "failed, will retry"


def retry_said(view, preemptor):
    """A probe: the Workload of TrainJob `preemptor` says Kueue will retry its preemption
    (its QuotaReserved message), else what it says."""

    def probe():
        found = workloads_of(view, preemptor)
        said = condition(found[0], "QuotaReserved").get("message", "") if found else ""
        return RETRY_WORDS in said or NotYet(
            f"the Workload of TrainJob {preemptor} says: {said or 'nothing yet'}"
        )

    return probe


def preempted_for(view, workload, preemptor):
    """What is still missing of a preemption: Workload `workload` Evicted, and the
    Workload of TrainJob `preemptor` Admitted (else what Kueue says of it)."""

    def probe():
        missing = []
        evicted_now = condition(view.get(WORKLOAD, workload), "Evicted")
        if evicted_now.get("status") != "True":
            missing.append(f"Workload {workload} is not Evicted ({evicted_now or 'no condition'})")
        found = workloads_of(view, preemptor)
        if len(found) != 1 or condition(found[0], "Admitted").get("status") != "True":
            missing.append(why_not_preempting(view, preemptor))
        return not missing or NotYet("; ".join(missing))

    return probe


@pytest.mark.policy("KQ-QUOTA-003")
def test_a_preemption_whose_eviction_was_refused_is_tried_again(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue
):
    view = trainjob_view
    # Held: TrainJob low runs until it is preempted.
    runtime = training_runtime(hold=True)
    low, high = low_and_high_priority(view)
    # The quota fits one TrainJob, and a higher priority preempts a lower one.
    queue = kueue_queue(cpu="1", preemption="LowerPriority")
    submit_with_priority(view, runtime, queue, "low", low)
    workload = wait_admitted(view, "low")["metadata"]["name"]
    view.record_wait(
        "TrainJob low to run", TRAINJOB, name="low", jsonpath="{.spec.suspend}", equals="false"
    )
    with view.unrecorded():
        resumed(view, "low")
    policy = evictions_refused(view)

    submit_with_priority(view, runtime, queue, "high", high)
    # Kueue writes that it has no quota for TrainJob high once it has tried to make room
    # (there is a lower priority to preempt), in the same scheduling cycle.
    view.record_wait(
        "Kueue to say it has no quota for TrainJob high",
        WORKLOAD,
        jsonpath=condition_path("high", "QuotaReserved"),
        equals="False",
    )
    with view.unrecorded():
        pending = wait_pending_for_quota(view, "high")
    evicted_now = condition(view.get(WORKLOAD, workload), "Evicted")
    assert evicted_now.get("status") != "True", (
        f"Workload {workload} was evicted while the test refused it: {evicted_now}"
    )
    trainjob_policy.gap_exercised(
        f"Kueue's eviction of Workload {workload} for TrainJob high was refused "
        f"({condition(pending, 'QuotaReserved').get('message')})"
    )

    with trainjob_policy.holds():
        # What the fix says on the Workload, in its own words, while the refusal
        # holds: a retry by anything else (another queue's change) does not say it.
        unsaid = failure_of(
            lambda: happens_within(
                view,
                "Kueue to say it will try the preemption again",
                retry_said(view, "high"),
                RETRY_SAID_SECONDS,
                after="its eviction of TrainJob low was refused",
            )
        )
        found = workloads_of(view, "high")
        view.record_observation(
            "whether the Workload of TrainJob high says Kueue will retry the preemption",
            WORKLOAD,
            jsonpath=condition_path("high", "QuotaReserved", "message"),
            expected=RETRY_WORDS,
            observed=condition(found[0], "QuotaReserved").get("message", "") if found else "",
            within=RETRY_SAID_SECONDS,
            substring=True,
        )
        # Set-up for the second half, not judged: the refusal is lifted.
        with view.unobserved():
            view.kube.delete(*VALIDATING_POLICY_BINDING, name=policy)
        # Judged either way: what follows the lifted refusal is what a reproduction
        # replays (on a quiet cluster Kueue v0.14.0 never admits TrainJob high).
        not_preempted = failure_of(
            lambda: happens_within(
                view,
                "Kueue to evict TrainJob low and admit TrainJob high",
                preempted_for(view, workload, "high"),
                PREEMPTION_SECONDS,
                after="the refusal of the eviction was lifted",
            )
        )
        found = workloads_of(view, "high")
        view.record_observation(
            "whether the Workload of TrainJob high is Admitted",
            WORKLOAD,
            jsonpath=condition_path("high", "Admitted"),
            expected="True",
            observed=condition(found[0], "Admitted").get("status", "") if found else "",
            within=PREEMPTION_SECONDS,
        )
        assert not unsaid, unsaid
        assert not not_preempted, not_preempted


def failure_of(check):
    """'' when `check()` holds, else its assertion's text: for a test that judges one
    statement after another, whatever the first said."""
    try:
        check()
    except AssertionError as failure:
        return str(failure)
    return ""


@pytest.mark.policy("KQ-MK-007")
def test_a_preemption_on_the_manager_takes_the_trainjob_off_the_worker(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, multikueue_worker
):
    view, worker = trainjob_view, multikueue_worker
    # Held: the preempted TrainJob must still be running on the worker when it is preempted.
    runtime = training_runtime(hold=True)
    check = multikueue_to(view, worker, runtime, hold=True)
    low, high = low_and_high_priority(view)
    queue = multikueue_queue(
        view, kueue_queue, runtime, (check,), cpu="1", preemption="LowerPriority"
    )

    submit_with_priority(view, runtime, queue, "low", low)
    worker.wait("TrainJob low on the worker", lambda: worker.find(TRAINJOB, "low"))
    submit_with_priority(view, runtime, queue, "high", high)
    _, evicted_now = view.wait(
        "the manager's Workload of TrainJob low to be evicted for TrainJob high",
        evicted(lambda: only_workload_of(view, "low"), "of TrainJob low", view, "high"),
    )
    trainjob_policy.gap_exercised(
        "Kueue evicted the Workload of TrainJob low on the manager "
        f"({evicted_now.get('reason')}: {evicted_now.get('message')})"
    )

    with trainjob_policy.holds():
        happens_within(
            view,
            "the preemption to be carried out on the worker",
            preemption_carried_out(view, worker, "low", "high"),
            PREEMPTION_SECONDS,
            after="Kueue evicted TrainJob low on the manager",
        )


def evicted_and_sent_again(view, worker, trainjob, check, workload):
    """What is still missing of the manager's answer to an eviction on the worker: its
    Workload no longer Admitted, its MultiKueue check taken back from Ready, and a copy
    of it waiting on the worker again (the evicted one requeued, or a new one)."""

    def probe():
        missing = []
        (local,) = workloads_of(view, trainjob)
        if condition(local, "Admitted").get("status") == "True":
            missing.append(f"the manager's Workload {workload} is still Admitted")
        if check_states(local).get(check) == "Ready":
            missing.append(f"its MultiKueue check {check} is still Ready")
        copy = worker.find(WORKLOAD, workload)
        if copy is None:
            missing.append(f"no copy of Workload {workload} on the worker")
        elif condition(copy, "Admitted").get("status") == "True":
            missing.append(f"the worker's copy of Workload {workload} is Admitted again")
        return not missing or NotYet("; ".join(missing))

    return probe


@pytest.mark.policy("KQ-MK-008")
def test_an_eviction_on_the_worker_sends_the_trainjob_out_again(
    trainjob_view, trainjob_policy, training_runtime, kueue_queue, multikueue_worker
):
    view, worker = trainjob_view, multikueue_worker
    # Held: the TrainJob must still be running on the worker when the worker preempts it.
    runtime = training_runtime(hold=True)
    # The worker's quota fits one TrainJob, and a higher priority preempts a lower one there.
    check = multikueue_to(
        view, worker, runtime, {"cpu": "1", "preemption": "LowerPriority"}, hold=True
    )
    low, high = low_and_high_priority(view, worker)
    queue = multikueue_queue(view, kueue_queue, runtime, (check,))

    submit_with_priority(view, runtime, queue, "low", low)
    workload = wait_workload(view, "low")["metadata"]["name"]
    worker.wait_for_condition(WORKLOAD, workload, "Admitted")
    # Running on the worker before the worker's own TrainJob is queued: when TrainJob low
    # appears there, the worker's Kueue writes its ownership onto the copy of the
    # Workload, and a preemption computed just before that write is refused (Conflict),
    # which Kueue v0.14.0 never retries (KQ-QUOTA-003): CI met it once (2026-11-29).
    resumed(worker, "low")
    # The worker's own TrainJob, queued there at a higher priority: the worker preempts.
    submit_with_priority(worker, runtime, "queue", "high", high)
    _, evicted_now = worker.wait(
        f"the worker to evict its copy of Workload {workload}",
        evicted(lambda: worker.find(WORKLOAD, workload), "copied to the worker", worker, "high"),
    )
    trainjob_policy.gap_exercised(
        f"the worker evicted its copy of Workload {workload} "
        f"({evicted_now.get('reason')}: {evicted_now.get('message')})"
    )

    with trainjob_policy.holds():
        happens_within(
            view,
            "the manager to evict TrainJob low and send it out again",
            evicted_and_sent_again(view, worker, "low", check, workload),
            PREEMPTION_SECONDS,
            after="the worker evicted TrainJob low",
        )
