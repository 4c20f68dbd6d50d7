"""What a verdict is built from: typed API errors, the stack watch's file, start-up errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from trainjob_conformance.cluster.health.stack_watch import (
    Breakage,
    StackBroken,
    StackHealth,
    StackWatch,
)
from trainjob_conformance.cluster.provider import startup_errors
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.errors import (
    Conflict,
    NotFound,
    Rejected,
    ServerError,
    WebhookUnreachable,
    translate,
)
from trainjob_conformance.kube.waits import WaitTimeout, wait_for


def api_exception(status: int, message: str, reason: str = "") -> ApiException:
    error = ApiException(status=status, reason=reason or "Reason")
    body = {"kind": "Status", "status": "Failure", "message": message, "reason": reason}
    error.body = json.dumps(body).encode()
    return error


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (404, 'trainjobs.trainer.kubeflow.org "x" not found', NotFound),
        (409, "the object has been modified", Conflict),
        (403, 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied', Rejected),
        (422, "Pod is invalid: spec.schedulingGates: Forbidden", Rejected),
        (
            500,
            'Internal error occurred: failed calling webhook "defaulter.trainjob.trainer.'
            'kubeflow.org": connect: connection refused',
            WebhookUnreachable,
        ),
        (503, "etcdserver: request timed out", ServerError),
    ],
)
def test_api_errors_are_typed_and_keep_the_servers_message(
    status: int, message: str, kind: type
) -> None:
    error = translate(api_exception(status, message))

    assert type(error) is kind
    assert str(error) == message
    assert error.status == status


def test_a_body_that_is_not_a_status_is_kept_as_text() -> None:
    error = ApiException(status=502, reason="Bad Gateway")
    error.body = b"<html>proxy error</html>"

    translated = translate(error)

    assert isinstance(translated, ServerError)
    assert translated.message == "<html>proxy error</html>"


def test_the_watch_records_each_breakage_once_and_readers_see_it(tmp_path: Path) -> None:
    alive = {"trainer": True}

    def trainer() -> Breakage | None:
        return None if alive["trainer"] else Breakage("trainer manager", "exited with code 2")

    watch = StackWatch(tmp_path / "health.json", [trainer], interval=60)
    health = StackHealth(watch.path)
    assert watch.check_once() == [] and health.breakages() == []

    alive["trainer"] = False
    assert [b.component for b in watch.check_once()] == ["trainer manager"]
    assert watch.check_once() == []  # already recorded

    with pytest.raises(StackBroken, match="trainer manager exited with code 2"):
        health.raise_if_broken()


def test_a_wait_ends_early_when_the_stack_breaks() -> None:
    def broken() -> None:
        raise StackBroken([Breakage("jobset manager", "killed by SIGKILL")])

    with pytest.raises(StackBroken):
        wait_for("a JobSet", lambda: None, timeout=60, abort=broken)


def test_a_start_up_timeout_is_one_line_with_the_details_in_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConformanceError) as raised, startup_errors(tmp_path):
        raise WaitTimeout("timed out after 60s waiting for 8 kwok nodes\n# Node a: ...\nlogs")

    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("the cluster did not become ready: timed out after 60s")
    assert "logs" in (tmp_path / "startup-error.txt").read_text()
