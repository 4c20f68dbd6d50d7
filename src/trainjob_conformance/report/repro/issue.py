"""README.md of a bundle: a draft upstream issue a maintainer can act on without the harness."""

from __future__ import annotations

import re
import shlex

from trainjob_conformance.kube.record import OBSERVATION, REQUEST, WAIT
from trainjob_conformance.policies.catalog import Policy
from trainjob_conformance.report.repro.records import Record
from trainjob_conformance.report.repro.steps import Replay, Step

# Where a gap of each component is filed when the catalog names no thread.
REPOSITORIES = {
    "trainer": "kubeflow/trainer",
    "training-operator": "kubeflow/training-operator",
    "jobset": "kubernetes-sigs/jobset",
    "kueue": "kubernetes-sigs/kueue",
}
_THREAD = re.compile(r"\b([\w.-]+/[\w.-]+)#(\d+)")


def upstream_thread(reference: str) -> str | None:
    """The first `owner/repo#N` the catalog's reference names, as a link."""
    found = _THREAD.search(reference)
    return f"https://github.com/{found[1]}/issues/{found[2]}" if found else None


def versions_line(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())


# What a version of the recorded run says to a maintainer who runs the script elsewhere.
_VERSION_NOTES = {
    "kwok": "the recorded run's simulated nodes; the script does not need them",
    "etcd": "the recorded run's",
}


def versions_list(versions: dict[str, str]) -> str:
    return "\n".join(
        f"- {name} {version}" + (f" ({_VERSION_NOTES[name]})" if name in _VERSION_NOTES else "")
        for name, version in versions.items()
    )


def _command(step: Step, namespace: str) -> str:
    if step.kind == REQUEST:
        words = list(step.kubectl)
        if step.each_of is not None:
            selector = step.each_of[1]
            words = [w if w != "{}" else f"<each of -l {selector}>" for w in words]
        line = "kubectl " + " ".join(shlex.quote(w) for w in words)
        return line.replace("'<each", "<each").replace(">'", ">")
    # Neither a name nor a selector: every object of the kind, which the jsonpath filters.
    target = (step.name or (f"-l {step.selector}" if step.selector else "")) + f" -n {namespace}"
    target = target.lstrip()
    if step.kind == WAIT and step.files:
        probe = next(iter(step.files))
        return f"kubectl create --dry-run=server -f {probe} -o jsonpath='{step.jsonpath}'"
    if step.kind == WAIT and step.condition:
        return (
            f"kubectl wait --for=condition={step.condition} {step.resource}/{step.name} "
            f"-n {namespace}"
        )
    if step.kind == WAIT and not step.jsonpath:
        return f"kubectl wait --for=create {step.resource}/{step.name} -n {namespace}"
    return f"kubectl get {step.resource} {target} -o jsonpath='{step.jsonpath}'"


def _step_line(number: int, step: Step, namespace: str) -> str:
    command = f"`{_command(step, namespace)}`"
    if step.kind == REQUEST:
        answer = "accepted" if step.accepted else f"refused: {step.message}"
        retried = " (sent again until so: a webhook's cache catches up)" if step.retried else ""
        mark = " **(the observation)**" if step.observation else ""
        return f"{number}. {step.title}{mark}: {command}; in the run, {answer}{retried}"
    if step.kind == OBSERVATION:
        patience = f" (read again for up to {step.within:g} s)" if step.within else ""
        expects = "a value containing " if step.substring else ""
        return (
            f"{number}. {step.title} **(the observation)**: {command}{patience}; "
            f"the policy expects {expects}`{step.expected}`, the run saw `{step.observed}`"
        )
    ((how, want),) = step.match.items() or (("", ""),)
    until = f" until it prints {how} `{want}`" if step.jsonpath else ""
    return f"{number}. wait for {step.title}: {command}{until}"


def observed_text(replay: Replay) -> str:
    """What the run saw at the observation, in the cluster's own words."""
    lines = []
    for step in replay.steps:
        if step.kind == REQUEST and step.observation:
            answer = "accepted" if step.accepted else f"refused: {step.message}"
            lines.append(f"{step.title}: {answer}")
            if step.stored:
                lines.append(f"the cluster stored: {step.stored}")
        elif step.kind == OBSERVATION:
            lines.append(f"{step.title}: '{step.observed}' (expected '{step.expected}')")
    return "\n".join(lines)


def issue_text(
    record: Record, policy: Policy, replay: Replay, files: list[str], has_fix: bool
) -> str:
    versions = dict(record.get("versions") or {})
    component = policy.component_name
    version = versions.get(policy.component, "?")
    reference = policy.gap_reference(version) if version != "?" else ""
    thread = upstream_thread(reference)
    where = (
        f"the thread {thread} (add this reproduction there)"
        if thread
        else f"https://github.com/{REPOSITORIES.get(policy.component, policy.component)}/issues"
    )
    steps = "\n".join(
        _step_line(n, step, replay.namespace) for n, step in enumerate(replay.steps, 1)
    )
    listing = "\n".join(f"- `{name}`" for name in files)
    fix = (
        '\n## What "fixed" looks like\n\n'
        "`stand-in-fix.yaml` is an admission policy that enforces the expected behaviour in the\n"
        f"namespace `{replay.namespace}` only (read its comment for what it approximates). It is\n"
        "not a proposed fix; it shows what the script prints once the behaviour is right:\n\n"
        "```bash\n"
        './apply-stand-in-fix.sh "$KUBECONFIG"   # kubectl apply; waits until in effect\n'
        './repro.sh "$KUBECONFIG"                # NOT REPRODUCED, exit 1\n'
        "kubectl delete -f stand-in-fix.yaml\n"
        "```\n"
        if has_fix
        else ""
    )
    return f"""# {component} {version}: "{policy.title}" does not hold

<!-- A draft upstream issue, written by {record.get("user_agent", "trainjob-conformance")}
from the record of a real run ({record.get("recorded", "?")}, profile {record.get("profile", "?")}).
Review it before filing: {where}. -->

## What happens

On {component} {version}, at the last step of the reproduction below:

```text
{observed_text(replay)}
```

## Expected

{policy.statement}

## Versions

{versions_list(versions)}

## Reproduce

On any cluster with these components installed (kind works), with kubectl >= 1.31
(`kubectl wait --for=create`) and nothing else:

```bash
./repro.sh ~/.kube/config     # or: KUBECONFIG=... ./repro.sh
```

It prints each step, then `REPRODUCED` with what it saw (exit 0) or
`NOT REPRODUCED` (exit 1); exit 2 means the cluster did not get to the observation
as the run did (it says which step and what it saw). Everything happens in
namespace `{replay.namespace}` (and the cluster-scoped objects it names), deleted
at the end; `REPRO_KEEP=1` keeps them, `REPRO_TIMEOUT` bounds each wait (seconds,
default 120), `KUBECTL` names another kubectl.

The steps, with what the recorded run was answered:

{steps}
{fix}
## Where it comes from

- Source: {policy.source}
- Cause: {reference or "(the catalog names none)"}
- Policy {policy.id} of trainjob-conformance; the requests above are those its test sent.

## Files

{listing}
"""
