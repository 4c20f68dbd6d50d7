"""repro.sh of an upgrade's bundle: the old releases installed, the objects put in
flight, each component moved to its new release as `upgrade` moves it, then the
observations; REPRODUCED or NOT REPRODUCED as in a run's bundle (script.py there).

The installs and the upgrade steps are the phases the harness itself runs on a
cluster its release manifests installed (cluster/releases/install_plan.py and
upgrade.py), written as kubectl commands on the bundle's copies of the manifests.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from trainjob_conformance.cluster.releases.install_plan import CONTROLLERS, Phase
from trainjob_conformance.report.repro.script import CLEANUP_END, PRELUDE, delete_line
from trainjob_conformance.upgrade.repro.scenarios import (
    Delete,
    Observe,
    Remember,
    Scenario,
    Wait,
)

# Bash beside the run bundles' prelude: applying a release, the CRD wait, the
# controllers' releases before the install, and a value that must stay as it was.
UPGRADE_FUNCTIONS = r"""
apply_release() { # TITLE -- KUBECTL-ARGS: retried while a webhook that just started is not routed
  local title="$1" out="" deadline=$((SECONDS + TIMEOUT))
  shift 2
  while ! out="$(k "$@" 2>&1)"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      setup_error "$title failed for ${TIMEOUT}s: $(tail -n 3 <<<"$out")"
    fi
    sleep 1
  done
  say "    ok: $(grep -c . <<<"$out") objects"
}
crds_established() { # every CRD Established, polled every 0.5 s
  local deadline=$((SECONDS + TIMEOUT)) listed="" pending="(no answer)"
  # A go-template, not a jsonpath filter (which fails on a CRD just created, whose
  # status has no conditions yet), nor kubectl wait (which fails on it too).
  while :; do
    if listed="$(k get crd -o go-template='{{range .items}}{{.metadata.name}}{{range .status.conditions}}{{if eq .type "Established"}} {{.status}}{{end}}{{end}}{{"\n"}}{{end}}' 2>&1)"; then
      pending="$(awk '$2 != "True" {print $1}' <<<"$listed")"
      if [ -z "$pending" ]; then
        say "    ok: every CRD Established"
        return 0
      fi
    else
      pending="$listed"
    fi
    [ "$SECONDS" -lt "$deadline" ] || setup_error "CRDs not Established after ${TIMEOUT}s: $pending"
    sleep 0.5
  done
}
controller() { # TITLE -- KUBECTL-ARGS: a rollout or a wait of a controller's Deployment
  local title="$1" out
  shift 2
  out="$(k "$@" 2>&1)" || setup_error "$title: $out"
  say "    ok: $(tail -n 1 <<<"$out")"
}
release_of() { # NAMESPACE DEPLOYMENT: the image its first container runs, or nothing
  k get deployment "$2" -n "$1" -o jsonpath='{.spec.template.spec.containers[0].image}' 2>/dev/null || true
}
starts_from() { # NAMESPACE DEPLOYMENT IMAGE: absent, or at the release the bundle starts from
  local running
  running="$(release_of "$1" "$2")"
  if [ -n "$running" ] && [ "$running" != "$3" ]; then
    setup_error "deployment $2 in $1 runs $running; the bundle starts from $3: run it on a new cluster (kind create cluster)"
  fi
}
observe_stays() { # WHAT EXPECTED SECONDS -- KUBECTL-ARGS: the value at every read, every 0.5 s
  local what="$1" expected="$2" seconds="$3" seen deadline=$((SECONDS + $3)) reads=0
  shift 4
  while :; do
    seen="$(value "$@")" || setup_error "could not read $what: $seen"
    reads=$((reads + 1))
    if [ "$seen" != "$expected" ]; then
      say "    seen: '${seen}' at read $reads   (the policy expects '${expected}' throughout)"
      SHOWN+=("$what: '${seen}', not '${expected}' as before the upgrade")
      return 0
    fi
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 0.5
  done
  say "    seen: '${seen}' at each of $reads reads over $seconds s   (the policy expects '${expected}' throughout)"
  MET+=("$what: '${seen}' throughout, as the policy expects")
}
"""


@dataclass(frozen=True)
class ReleaseStep:
    """A component's install or upgrade: its title, its phases, and the webhook
    configurations of the old release that the new one no longer has."""

    title: str
    phases: list[Phase]
    dropped_webhooks: list[tuple[str, str]]
    recreated: tuple[str, ...] = ()  # deleted before its apply (UpgradePhases.recreated)


def _q(words: list[str] | tuple[str, ...]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _shell_word(word: str) -> str:
    """A word quoted for bash, `$NS` and `$NAME` of a remembered value left to expand."""
    if word == "$NS":
        return '"$NS"'
    if word.startswith("$") and word[1:].isupper():
        return f'"{word}"'
    return shlex.quote(word)


def _args(words: list[str]) -> str:
    return " ".join(_shell_word(w) for w in words)


def phase_lines(phases: list[Phase], path_of: Callable[[str], str]) -> list[str]:
    """bash for install phases, each manifest path in them replaced by `path_of(path)`."""
    lines = []
    for phase in phases:
        if phase.crds_established:
            lines += ["say '  the CRDs to be Established'", "crds_established"]
            continue
        for command in phase.commands:
            args = [path_of(a) if a.endswith(".yaml") else a for a in command.args]
            title = shlex.quote(command.words)
            lines.append(f"say {shlex.quote('  ' + command.words)}")
            runner = "apply_release" if args[0] == "apply" else "controller"
            lines.append(f"{runner} {title} -- {_q(args)}")
    return lines


def _before_lines(scenario: Scenario) -> list[str]:
    lines = []
    for item in scenario.before:
        lines.append(f"say {shlex.quote('[before] ' + item.title)}")
        if isinstance(item, Wait):
            lines.append(
                f"poll {shlex.quote(item.title)} {item.how} {shlex.quote(item.want)} -- "
                f"{_args(item.read.args())}"
            )
        else:
            assert isinstance(item, Remember)
            lines += [
                f'{item.variable}="$(value {_args(item.read.args())})" '
                f"|| setup_error {shlex.quote('could not read ' + item.title)}",
                f"say \"    remembered: '${item.variable}'\"",
            ]
    return lines


def _after_lines(scenario: Scenario) -> list[str]:
    lines = []
    for item in scenario.after:
        if isinstance(item, Delete):
            lines += [
                f"say {shlex.quote('[after] ' + item.title)}",
                f"request accepted no {shlex.quote(item.title)} -- delete "
                f'{shlex.quote(item.resource)} {shlex.quote(item.name)} -n "$NS" --wait=false',
            ]
            continue
        assert isinstance(item, Observe)
        lines.append(f"say {shlex.quote('OBSERVE: ' + item.title)}")
        expected = _shell_word(item.expected)
        if item.how == "stays":
            lines.append(
                f"observe_stays {shlex.quote(item.title)} {expected} {item.seconds} -- "
                f"{_args(item.read.args())}"
            )
        else:
            lines.append(
                f"observe_value {shlex.quote(item.title)} equals {expected} {item.seconds} -- "
                f"{_args(item.read.args())}"
            )
    return lines


def _cleanup(scenario: Scenario) -> list[str]:
    lines = [
        "cleanup() {",
        "  local code=$?",
        '  if [ "$CREATED" = yes ] && [ "${REPRO_KEEP:-}" != 1 ]; then',
        '    say "(deleting the objects the script created; the releases stay as the upgrade '
        'left them; REPRO_KEEP=1 keeps the objects)" >&2',
        '    k delete namespace "$NS" --ignore-not-found --timeout="${TIMEOUT}s" >/dev/null 2>&1 \\',
        '      || say "could not delete namespace $NS within ${TIMEOUT}s: delete it by hand" >&2',
    ]
    lines += [delete_line(resource, name) for resource, name in scenario.outside]
    return [*lines, *CLEANUP_END]


def _preflight(scenario: Scenario, starts: dict[str, str]) -> list[str]:
    lines = [
        "k version --request-timeout=10s >/dev/null 2>&1 \\",
        '  || setup_error "cannot reach the cluster of $KUBECONFIG with $KUBECTL"',
        'if k get namespace "$NS" >/dev/null 2>&1; then',
        '  setup_error "namespace $NS exists (a previous run?): kubectl delete namespace $NS"',
        "fi",
    ]
    for component, image in starts.items():
        namespace, deployment, _ = CONTROLLERS[component]
        lines.append(f"starts_from {_q([namespace, deployment, image])}")
    for resource, name in scenario.outside:
        lines += [
            f"if k get {shlex.quote(resource)} {shlex.quote(name)} >/dev/null 2>&1; then",
            f'  setup_error "{resource} {name} exists (a previous run?): '
            f'kubectl delete {resource} {name}"',
            "fi",
        ]
    return lines


def _objects_lines(scenario: Scenario, labels: dict[str, str]) -> list[str]:
    label_words = [f"{key}={value}" for key, value in labels.items()]
    lines = [
        'say "[objects] namespace $NS"',
        'request accepted no "namespace $NS" -- create namespace "$NS"',
        "CREATED=yes",
    ]
    if label_words:
        lines.append(
            f'request accepted no "labels of namespace $NS" -- label namespace "$NS" '
            f"{_q(label_words)}"
        )
    for name, manifest in scenario.objects:
        title = f"{manifest['kind']} {manifest['metadata']['name']}"
        lines += [
            f"say {shlex.quote('[objects] ' + title)}",
            # Retried: a webhook of the release just installed may not be routed yet.
            f"request accepted yes {shlex.quote(title)} -- create -f objects/{name}",
        ]
    return lines


def upgrade_script(
    header: list[str],
    scenario: Scenario,
    install: ReleaseStep,
    steps: list[ReleaseStep],
    starts: dict[str, str],
    path_of: Callable[[str], str],
    labels: dict[str, str],
) -> str:
    """The whole repro.sh; `starts` is each component's image before the upgrade,
    `path_of` maps a manifest path of the phases to the bundle's copy."""
    lines = ["#!/usr/bin/env bash", *(f"# {line}".rstrip() for line in header), PRELUDE]
    lines += [
        UPGRADE_FUNCTIONS,
        f"NS={shlex.quote(scenario.namespace)}",
        f"POLICY={shlex.quote(scenario.policy)}",
        "OBSERVE_SECONDS=5",
        "CREATED=no",
        *_cleanup(scenario),
        *_preflight(scenario, starts),
        "",
        f"say {shlex.quote('[install] ' + install.title)}",
        *phase_lines(install.phases, path_of),
        *_objects_lines(scenario, labels),
        *_before_lines(scenario),
    ]
    for step in steps:
        lines.append(f"say {shlex.quote('[upgrade] ' + step.title)}")
        lines += phase_lines(step.phases, path_of)
        for kind, name in step.dropped_webhooks:
            lines += [
                f"say {shlex.quote(f'  delete {kind} {name}, which the new release no longer has')}",
                f"k delete {shlex.quote(kind.lower())} {shlex.quote(name)} --ignore-not-found "
                ">/dev/null",
            ]
    lines += _after_lines(scenario)
    lines.append('verdict "$POLICY"')
    return "\n".join(lines) + "\n"
