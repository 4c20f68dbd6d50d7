"""repro.sh: a replay of the steps with kubectl alone, ending in REPRODUCED or NOT REPRODUCED.

Exit 0 REPRODUCED, 1 NOT REPRODUCED, 2 when the cluster did not get to the
observation as the recorded run did (unreachable, a kind not served, a step
answered otherwise, a wait timed out): then nothing was judged, and the
script says which step and what it saw. Every wait is bounded and polls at
short intervals; whatever the script created is deleted when it ends.

A statement in two halves has two observations of a value: each is noted,
met (as the policy expects) or shown (as the run saw), and the script goes
on; it ends REPRODUCED when any was shown, naming those. A request answered as
the policy expects ends it at once (the steps after it assumed the run's
answer); one answered as in the run counts as shown only where it is the last
observation, since a request sent inside a policy's assertions may set the
next one up.
"""

from __future__ import annotations

import shlex

from trainjob_conformance.kube.record import OBSERVATION, REQUEST
from trainjob_conformance.report.repro.steps import Replay, Step

# How long an observed request is sent again while the cluster answers otherwise
# than in the run: a webhook that judges from its manager's cache may not have
# seen the state the steps before it waited for (the test does the same).
OBSERVE_SECONDS = 5

PRELUDE = r"""set -euo pipefail
if [ $# -gt 0 ]; then export KUBECONFIG="$1"; fi
if [ -z "${KUBECONFIG:-}" ]; then
  echo "usage: $0 KUBECONFIG   (or set KUBECONFIG)" >&2
  exit 2
fi
# Named from where the script was started: it runs from its own directory.
case "$KUBECONFIG" in /* | *:*) ;; *) KUBECONFIG="$PWD/$KUBECONFIG" ;; esac
cd "$(dirname "$0")"
KUBECTL="${KUBECTL:-kubectl}"
TIMEOUT="${REPRO_TIMEOUT:-120}"
k() { "$KUBECTL" "$@"; }
# What kubectl prints of an object: its stdout alone, so that a warning (a deprecated
# API version, when the bundle was recorded on another release) is not read as the
# value; on failure, the error, for the message.
value() { k "$@" 2>/dev/null || { k "$@" 2>&1; return 1; }; }
say() { printf '%s\n' "$*"; }
setup_error() {
  say "SETUP ERROR: $*" >&2
  say "(exit 2: the cluster did not reach the observation as the recorded run did; nothing was judged)" >&2
  exit 2
}
matches() { # HOW WANTED SEEN
  case "$1" in
    equals) [ "$3" = "$2" ] ;;
    contains) [[ " $3 " == *" $2 "* ]] ;;
    count) [ "$(wc -w <<<"$3")" -eq "$2" ] ;;
    nonempty) [ -n "$3" ] ;;
  esac
}
poll() { # TITLE HOW WANTED -- KUBECTL-ARGS: bounded, every 0.5 s
  local title="$1" how="$2" want="$3" seen="" deadline=$((SECONDS + TIMEOUT))
  shift 4
  while :; do
    if seen="$(value "$@")" && matches "$how" "$want" "$seen"; then
      say "    ok: ${seen:-(nothing)}"
      return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      setup_error "timed out after ${TIMEOUT}s waiting for $title ($how '$want'); last seen: ${seen:-(nothing)}"
    fi
    sleep 0.5
  done
}
request() { # RUN-ANSWER RETRIED TITLE -- KUBECTL-ARGS: the answer must be the run's
  local want="$1" retried="$2" title="$3" out="" got deadline=$((SECONDS + TIMEOUT))
  shift 4
  while :; do
    if out="$(k "$@" 2>&1)"; then got=accepted; else got=refused; fi
    if [ "$got" = "$want" ]; then
      say "    $got: ${out}"
      return 0
    fi
    if [ "$retried" != yes ] || [ "$SECONDS" -ge "$deadline" ]; then
      setup_error "$title was $got here but $want in the recorded run: $out"
    fi
    sleep 0.5
  done
}
reproduced() { say ""; say "REPRODUCED: $*"; VERDICT=given; exit 0; }
not_reproduced() { say ""; say "NOT REPRODUCED: $*"; VERDICT=given; exit 1; }
joined() { local out="" item; for item in "$@"; do out="${out:+$out; }$item"; done; say "$out"; }
# The observations so far: as the run saw them (the gap), and as the policy expects.
SHOWN=()
MET=()
verdict() { # POLICY: REPRODUCED when any observation showed what the run saw
  if [ "${#SHOWN[@]}" -gt 0 ]; then reproduced "$1: $(joined "${SHOWN[@]}")"; fi
  not_reproduced "$(joined "${MET[@]}")"
}
observe_request() { # RUN-ANSWER LAST WHAT -- KUBECTL-ARGS
  local want="$1" last="$2" what="$3" out="" got tries=0 deadline=$((SECONDS + OBSERVE_SECONDS))
  shift 4
  while :; do
    if out="$(k "$@" 2>&1)"; then got=accepted; else got=refused; fi
    tries=$((tries + 1))
    if [ "$got" = "$want" ]; then
      say "    $got: $out"
      [ "$last" != last ] || SHOWN+=("$what: this cluster $got it: $out")
      return 0
    fi
    [ "$tries" -gt 1 ] || say "    $got: $out"
    # Only an acceptance is waited for: an accepted request changes what it sent.
    if [ "$want" != accepted ] || [ "$SECONDS" -ge "$deadline" ]; then
      MET+=("$what: this cluster $got it $tries times in ${OBSERVE_SECONDS}s, as the policy expects: $out")
      # The steps after it assumed the run's answer: none of them is replayed.
      verdict "$POLICY"
    fi
    sleep 0.5
  done
}
observe_value() { # WHAT HOW EXPECTED WITHIN -- KUBECTL-ARGS: read again for WITHIN seconds
  local what="$1" how="$2" expected="$3" seen deadline=$((SECONDS + $4)) wanted
  shift 5
  wanted="the policy expects '${expected}'"
  [ "$how" != substring ] || wanted="the policy expects it to contain '${expected}'"
  while :; do
    seen="$(value "$@")" || setup_error "could not read $what: $seen"
    if [ "$seen" = "$expected" ] || { [ "$how" = substring ] && [[ "$seen" == *"$expected"* ]]; }; then
      say "    seen: '${seen}'   (${wanted})"
      MET+=("$what: '${seen}', as the policy expects")
      return 0
    fi
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 0.5
  done
  say "    seen: '${seen}'   (${wanted})"
  SHOWN+=("$what: '${seen}' (${wanted})")
}
"""


def _q(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _each(step: Step, body: str) -> list[str]:
    """Lines running `body` (a command using "$obj") for each object of the step's selector."""
    assert step.each_of is not None
    resource, selector = step.each_of
    return [
        f'objs="$(k get {shlex.quote(resource)} -n "$NS" -l {shlex.quote(selector)} -o name)"',
        f'[ -n "$objs" ] || setup_error {shlex.quote(f"no {resource} with {selector}")}',
        "for obj in $objs; do",
        f"  {body}",
        "done",
    ]


def _request_lines(step: Step, last: bool) -> list[str]:
    answer = "accepted" if step.accepted else "refused"
    args = step.kubectl
    if step.each_of is not None:
        # `patch RESOURCE {}` becomes `patch "$obj"` (kubectl's resource/name).
        args = [w for w in args if w not in (step.each_of[0], "{}")]
        verb, rest = args[0], args[1:]
        command = f'{shlex.quote(verb)} "$obj" {_q(rest)}'
    else:
        command = _q(args)
    if step.observation:
        what = shlex.quote(step.title)
        return [f"observe_request {answer} {'last' if last else 'before'} {what} -- {command}"]
    retried = "yes" if step.retried else "no"
    line = f"request {answer} {retried} {shlex.quote(step.title)} -- {command}"
    return _each(step, line) if step.each_of is not None else [line]


def _target(step: Step) -> list[str]:
    if step.name:
        return [step.resource, step.name, "-n", "$NS"]
    return [step.resource, "-n", "$NS", "-l", step.selector or ""]


def _quoted_target(step: Step) -> str:
    return " ".join('"$NS"' if w == "$NS" else shlex.quote(w) for w in _target(step))


def _wait_lines(step: Step) -> list[str]:
    show = 'sed "s/^/    ok: /"'
    lines = []
    if step.name and not step.files:
        lines.append(
            f'k wait --for=create {shlex.quote(f"{step.resource}/{step.name}")} -n "$NS" '
            f'--timeout="${{TIMEOUT}}s" | {"cat >/dev/null" if step.condition else show} '
            f"|| setup_error {shlex.quote(f'timed out waiting for {step.title}')}"
        )
    if step.condition:
        lines.append(
            f"k wait --for=condition={shlex.quote(step.condition)} "
            f'{shlex.quote(f"{step.resource}/{step.name}")} -n "$NS" --timeout="${{TIMEOUT}}s" '
            f"| {show} "
            f"|| setup_error {shlex.quote(f'timed out waiting for {step.title}')}"
        )
    if step.jsonpath:
        ((how, want),) = step.match.items() or (("nonempty", True),)
        wanted = "" if how == "nonempty" else str(want)
        probe = next(iter(step.files), None)
        source = (
            f"create --dry-run=server -f {shlex.quote(probe)}"
            if probe
            else f"get {_quoted_target(step)}"
        )
        lines.append(
            f"poll {shlex.quote(step.title)} {how} {shlex.quote(wanted)} -- {source} "
            f"-o jsonpath={shlex.quote(step.jsonpath)}"
        )
    if not lines:
        lines.append(f"say {shlex.quote('    (nothing to wait for)')}")
    return lines


def _observe_lines(step: Step) -> list[str]:
    # A named object may be absent, which is an answer too: kubectl then prints nothing.
    absent = " --ignore-not-found" if step.name else ""
    how = "substring" if step.substring else "equals"
    return [
        f"observe_value {shlex.quote(step.title)} {how} {shlex.quote(step.expected)} "
        f"{int(step.within)} -- get "
        f"{_quoted_target(step)}{absent} -o jsonpath={shlex.quote(step.jsonpath or '')}"
    ]


def _cleanup(replay: Replay) -> list[str]:
    lines = [
        "cleanup() {",
        "  local code=$?",
        '  if [ "$CREATED" = yes ] && [ "${REPRO_KEEP:-}" != 1 ]; then',
        '    say "(deleting what the script created; REPRO_KEEP=1 keeps it)" >&2',
    ]
    for resource, selector, finalizer in replay.finalizers:
        patch = '{"metadata":{"$deleteFromPrimitiveList/finalizers":[%s]}}' % (
            '"' + finalizer + '"'
        )
        lines += [
            f'    for obj in $(k get {shlex.quote(resource)} -n "$NS" -l {shlex.quote(selector)} '
            "-o name 2>/dev/null); do",
            f'      k patch "$obj" -n "$NS" --type=strategic -p {shlex.quote(patch)} >/dev/null 2>&1 || true',
            "    done",
        ]
    # The namespace first: a runtime stays while TrainJobs use it (the Trainer's finalizer).
    lines += [
        '    k delete namespace "$NS" --ignore-not-found --timeout="${TIMEOUT}s" >/dev/null 2>&1 \\',
        '      || say "could not delete namespace $NS within ${TIMEOUT}s: delete it by hand" >&2',
    ]
    for resource, name, namespace in reversed(replay.outside):
        lines.append(delete_line(resource, name, namespace))
    return [*lines, *CLEANUP_END]


def delete_line(resource: str, name: str, namespace: str | None = None) -> str:
    """cleanup()'s deletion of an object created outside the namespace."""
    where = f" -n {shlex.quote(namespace)}" if namespace else ""
    return (
        f"    k delete {shlex.quote(resource)} {shlex.quote(name)}{where} --ignore-not-found "
        '--timeout="${TIMEOUT}s" >/dev/null 2>&1 || true'
    )


# The end of cleanup() and its traps: a signal ends the script through exit, so that
# the EXIT trap cleans up. A command that failed where none was expected stops the
# script (set -e) with its own status, 1 for kubectl: that is no verdict, so it
# leaves as a setup error, never as NOT REPRODUCED.
CLEANUP_END = [
    "  fi",
    '  case "$code" in',
    "    0 | 2 | 130 | 143) ;;",
    '    *) if [ "${VERDICT:-}" != given ]; then',
    '         say "SETUP ERROR: a command failed (exit $code) before any verdict: its output is '
    'above; nothing was judged" >&2',
    "         code=2",
    "       fi ;;",
    "  esac",
    '  exit "$code"',
    "}",
    "trap cleanup EXIT",
    "trap 'exit 130' INT",
    "trap 'exit 143' TERM",
]


def _preflight(replay: Replay, versions: str) -> list[str]:
    resources = sorted({s.resource for s in replay.steps if s.resource})
    lines = [
        "k version --request-timeout=10s >/dev/null 2>&1 \\",
        '  || setup_error "cannot reach the cluster of $KUBECONFIG with $KUBECTL"',
        f"for resource in {_q(resources)}; do",
        '  k get "$resource" -n kube-system --request-timeout=10s >/dev/null 2>&1 \\',
        f'    || setup_error "the cluster serves no $resource: install the stack ({versions})"',
        "done",
        'if k get namespace "$NS" >/dev/null 2>&1; then',
        '  setup_error "namespace $NS exists (a previous run?): kubectl delete namespace $NS"',
        "fi",
    ]
    for resource, name in replay.needs:
        lines += [
            f"k get {shlex.quote(resource)} {shlex.quote(name)} >/dev/null 2>&1 \\",
            f"  || setup_error \"the steps use {resource} {name}, which the stack's release "
            'manifests install; this cluster has none"',
        ]
    for resource, name, namespace in replay.outside:
        where = f" -n {shlex.quote(namespace)}" if namespace else ""
        target = f"{shlex.quote(resource)} {shlex.quote(name)}{where}"
        lines += [
            f"if k get {target} >/dev/null 2>&1; then",
            f'  setup_error "{resource} {name} exists (a previous run?): kubectl delete {target}"',
            "fi",
        ]
    return lines


def repro_script(replay: Replay, header: list[str], versions: str) -> str:
    total = len(replay.steps)
    lines = ["#!/usr/bin/env bash", *(f"# {line}".rstrip() for line in header), PRELUDE]
    lines += [
        f"NS={shlex.quote(replay.namespace)}",
        f"POLICY={shlex.quote(replay.policy)}",
        f"OBSERVE_SECONDS={OBSERVE_SECONDS}",
        "CREATED=no",
        *_cleanup(replay),
        *_preflight(replay, versions),
        "CREATED=yes",
        "",
    ]
    last = max((n for n, s in enumerate(replay.steps, 1) if s.observation), default=0)
    for number, step in enumerate(replay.steps, 1):
        label = "OBSERVE" if step.observation else step.kind
        lines.append(f"say {shlex.quote(f'[{number}/{total}] {label}: {step.title}')}")
        if step.kind == REQUEST:
            lines += _request_lines(step, number == last)
        elif step.kind == OBSERVATION:
            lines += _observe_lines(step)
        else:
            lines += _wait_lines(step)
    lines.append('verdict "$POLICY"')
    return "\n".join(lines) + "\n"
