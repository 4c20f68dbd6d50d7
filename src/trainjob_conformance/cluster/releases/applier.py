"""Running install phases (install_plan.py) with kubectl against one cluster.

A phase's commands run side by side; a phase applied while a webhook it needs
is not routed yet is retried until the webhook answers; the CRD wait is a poll
of the API (kubectl's own wait needs the CRD to exist before it can wait).
Failures are one line with the cluster's own words, and for a command in a
namespace, the newest warning there (its Pods and events go to a file).
Shared by the kind provider's install and upgrades and by an upgrade of an
existing cluster.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from trainjob_conformance.cluster.releases.install_plan import (
    ROLLOUT_SECONDS,
    Command,
    Phase,
    not_established,
    webhook_unreachable,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.kinds import CRD
from trainjob_conformance.kube.waits import NotYet, WaitTimeout, wait_for

# The wait for the CRDs (install_plan.Phase says why it polls).
ESTABLISHED_TIMEOUT = 60.0
# How long an apply refused by a webhook nothing routes to yet is retried (run_phase).
WEBHOOK_ROUTE_TIMEOUT = 60.0

_Running = tuple[Command, "subprocess.Popen[bytes]", IO[bytes]]


def _as_they_end(running: list[_Running]) -> Iterator[_Running]:
    """Each (command, process, output) once its process has exited, in the order they end.

    Each kubectl bounds itself with its own --timeout; the bound here only
    guards against one that never returns.
    """
    pending = list(running)
    bound = ROLLOUT_SECONDS + 60.0

    def ended() -> list[_Running] | NotYet:
        done = [entry for entry in pending if entry[1].poll() is not None]
        return done or NotYet(f"still running: {[' '.join(e[0].args) for e in pending]}")

    while pending:
        for entry in wait_for("kubectl commands run at once to end", ended, bound, interval=0.2):
            pending.remove(entry)
            yield entry


class ManifestApplier:
    """kubectl against the cluster of `kubeconfig`; what a failed wait saw goes to
    `diagnostics` (a file); each rollout's seconds go into `timings`."""

    def __init__(
        self,
        kubectl: Path,
        kubeconfig: Path,
        kube: Callable[[], Kube],
        diagnostics: Path,
        timings: dict[str, float] | None = None,
    ) -> None:
        self.kubectl = kubectl
        self.kubeconfig = kubeconfig
        self.kube = kube
        self.diagnostics = diagnostics
        self.timings = timings if timings is not None else {}

    def _base(self) -> list[str]:
        return [str(self.kubectl), "--kubeconfig", str(self.kubeconfig)]

    def run(self, *args: str) -> None:
        result = subprocess.run([*self._base(), *args], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            seen = self._what_was_seen(args)
            raise ConformanceError(
                f"kubectl {' '.join(args)} failed: {(result.stderr or result.stdout).strip()}{seen}"
            )

    def at_once(self, commands: tuple[Command, ...]) -> None:
        """Run these kubectl commands side by side; the first failure's error, as `run`
        words it, once all have ended. Each rollout's time goes into the timings
        (`rollout <deployment>`); whatever still runs when this is interrupted is
        killed, not left to its own timeout."""
        if len(commands) == 1:
            self.run(*commands[0].args)
            return
        started = time.monotonic()
        running: list[_Running] = []
        failed = []
        with contextlib.ExitStack() as files:
            try:
                for command in commands:
                    output = files.enter_context(tempfile.TemporaryFile())
                    process = subprocess.Popen(
                        [*self._base(), *command.args], stdout=output, stderr=subprocess.STDOUT
                    )
                    running.append((command, process, output))
                for command, process, output in _as_they_end(running):
                    if command.words.startswith("rollout "):
                        self.timings[command.words] = round(time.monotonic() - started, 1)
                    if process.returncode != 0:
                        output.seek(0)
                        failed.append(
                            (command.args, output.read().decode(errors="replace").strip())
                        )
            finally:
                for _, process, _ in running:
                    if process.poll() is None:
                        process.kill()
                        process.wait()
        if failed:
            args, text = failed[0]
            seen = self._what_was_seen(args)
            raise ConformanceError(f"kubectl {' '.join(args)} failed: {text}{seen}")

    def run_phase(self, phase: Phase) -> None:
        if phase.crds_established:
            self.wait_established()
            return
        # A rollout ends when the new Pod is Ready, a moment before the Service
        # routes to it: an object applied then, which a webhook of that Pod judges,
        # is refused with `failed calling webhook` (seen on kind at the install of
        # the Trainer's runtimes and at an upgrade). Such a refusal is retried until
        # the webhook answers; any other failure stops the install at once.
        last = {"error": ""}

        def applied() -> bool | NotYet:
            try:
                self.at_once(phase.commands)
            except ConformanceError as error:
                if not webhook_unreachable(str(error)):
                    raise
                last["error"] = str(error)
                return NotYet(str(error).splitlines()[0][-300:])
            return True

        try:
            wait_for(f"{phase.label} (its webhook to answer)", applied, WEBHOOK_ROUTE_TIMEOUT, 0.5)
        except WaitTimeout:
            raise ConformanceError(
                f"{phase.label}: the webhook did not answer within {WEBHOOK_ROUTE_TIMEOUT:.0f}s; "
                f"last error: {last['error']}"
            ) from None

    def run_each(self, phases: list[Phase]) -> None:
        for phase in phases:
            self.run_phase(phase)

    def wait_established(self) -> None:
        kube = self.kube()

        def look() -> bool | NotYet:
            waiting = not_established(kube.list(*CRD))
            return True if not waiting else NotYet(f"not Established yet: {', '.join(waiting)}")

        try:
            wait_for("every CRD Established", look, ESTABLISHED_TIMEOUT, interval=0.2)
        except WaitTimeout as error:
            raise ConformanceError(str(error)) from None

    def _what_was_seen(self, args: tuple[str, ...]) -> str:
        """For a failed wait in a namespace: its Pods and events go to a file, and the
        newest warning (the cluster's own words) into the one-line error."""
        if "-n" not in args:
            return ""
        namespace = args[args.index("-n") + 1]
        base = [*self._base(), "-n", namespace]
        outputs = [
            subprocess.run(
                [*base, *query], capture_output=True, text=True, check=False, timeout=30
            ).stdout
            for query in (
                ["get", "pods", "-o", "wide"],
                ["get", "events", "--sort-by=.lastTimestamp"],
                ["get", "events", "--field-selector=type=Warning", "--sort-by=.lastTimestamp",
                 "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"],
            )
        ]  # fmt: skip
        self.diagnostics.parent.mkdir(parents=True, exist_ok=True)
        self.diagnostics.write_text(f"Pods in {namespace}:\n{outputs[0]}\nEvents:\n{outputs[1]}")
        warnings = [line for line in outputs[2].splitlines() if line.strip()]
        last = f"; last warning in {namespace}: {warnings[-1]}" if warnings else ""
        return f"{last} (Pods and events: {self.diagnostics})"
