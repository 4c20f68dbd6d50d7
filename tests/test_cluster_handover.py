"""The run's cluster, from the xdist controller that starts it to the workers that run the
tests (plugin/session.py): the harness's own logic, with a stand-in provider."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.provider import ClusterRequest
from trainjob_conformance.cluster.registry import StartingCluster, peer_unavailable
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.plugin import session as session_module
from trainjob_conformance.plugin.options import Settings
from trainjob_conformance.plugin.session import ClusterSession
from trainjob_conformance.stack.profiles import load_profile


class StandIn:
    """Calls `on_created` as the kind provider does, then is ready or fails."""

    def __init__(self, request: ClusterRequest, error: str | None, log: list[str]) -> None:
        self.request, self.error, self.log = request, error, log

    def up(self, on_created: Callable[[], None] | None = None) -> ClusterHandle:
        if on_created is not None:
            on_created()
        if self.error:
            raise ConformanceError(self.error)
        self.log.append("ready")
        return ClusterHandle("kind", Path("/w/kubeconfig"), {"kueue": "v0.19.2"}, profile="latest")

    def down(self) -> None:
        self.log.append("down")

    def detach(self) -> str | None:
        self.log.append("detached")
        return self.hint

    hint: str | None = None


def settings(run_dir: Path) -> Settings:
    request = ClusterRequest("kind", load_profile("latest"), run_dir)
    return Settings(request, False, Path("c.yaml"), Path("t"), None)


def controller(tmp_path, monkeypatch, error: str | None = None) -> tuple[ClusterSession, list]:
    log: list[str] = []
    monkeypatch.setattr(
        session_module, "make_provider", lambda request: StandIn(request, error, log)
    )
    owner = ClusterSession(settings(tmp_path), None)
    owner.forget_handover()
    return owner, log


def test_workers_get_the_handle_the_controller_started_with_on_created_before_ready(
    tmp_path, monkeypatch
) -> None:
    owner, log = controller(tmp_path, monkeypatch)
    worker = ClusterSession(settings(tmp_path), owner.worker_input())
    owner.ensure(on_created=lambda: log.append("created"))
    owner.hand_over()
    assert log == ["created", "ready"]
    handle = worker.ensure()
    assert (handle.kubeconfig, handle.versions) == (Path("/w/kubeconfig"), {"kueue": "v0.19.2"})


def test_a_failed_start_reaches_every_worker_as_its_one_line(tmp_path, monkeypatch) -> None:
    owner, log = controller(tmp_path, monkeypatch, error="kind create cluster failed: no space")
    with pytest.raises(ConformanceError):
        owner.ensure()
    owner.hand_over()
    assert log == ["down"]
    worker = ClusterSession(settings(tmp_path), owner.worker_input())
    with pytest.raises(ConformanceError, match=r"^kind create cluster failed: no space$"):
        worker.ensure()
    assert worker.start_error == "kind create cluster failed: no space"


def test_an_earlier_sessions_handover_is_not_taken_for_this_ones(tmp_path, monkeypatch) -> None:
    earlier, _ = controller(tmp_path, monkeypatch)
    earlier.ensure()
    earlier.hand_over()
    owner, _ = controller(tmp_path, monkeypatch)  # the next session, before its start
    worker = ClusterSession(settings(tmp_path), owner.worker_input())
    with pytest.raises(ConformanceError, match="got no cluster from the controller"):
        worker.ensure()


def test_a_worker_cluster_can_start_beside_a_cluster_still_starting(tmp_path) -> None:
    request = ClusterRequest("kind", load_profile("latest"), tmp_path)
    assert peer_unavailable(StartingCluster.of(request)) is None


@pytest.mark.parametrize(
    ("hint", "said"),
    [
        (
            "trainjob-conformance down --run-dir /w",
            "  stop it with: trainjob-conformance down --run-dir /w",
        ),
        (None, "trainjob-conformance: the kind cluster is not the harness's to keep or stop"),
    ],
)
def test_a_kept_cluster_is_detached_and_the_provider_says_how_to_stop_it(
    tmp_path, monkeypatch, capsys, hint, said
) -> None:
    """--trainjob-keep-cluster: the provider's detach() is called, and its hint printed;
    a provider that keeps nothing (existing) says the cluster is not the harness's."""
    monkeypatch.setattr(StandIn, "hint", hint)
    owner, log = controller(tmp_path, monkeypatch)
    owner.settings = replace(owner.settings, keep_cluster=True)
    owner.ensure()
    assert owner.finish() == []
    assert log == ["ready", "detached"]
    assert said in capsys.readouterr().err.splitlines()
