"""The MultiKueue worker cluster's hand-over from the xdist controller to the test that
needs it (plugin/peer.py): the harness's own logic, with a stand-in for the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import WaitTimeout
from trainjob_conformance.plugin import peer


class StandIn:
    def __init__(self, error: str | None = None) -> None:
        self.error = error
        self.downs = 0

    def up(self) -> ClusterHandle:
        if self.error:
            raise ConformanceError(f"{self.error}\nnode journal: ...")
        return ClusterHandle("kind", Path("/w/kubeconfig"), {"kueue": "v0.19.2"}, profile="latest")

    def down(self) -> None:
        self.downs += 1


def beside(tmp_path: Path) -> ClusterHandle:
    return ClusterHandle("kind", tmp_path / "k", {}, profile="latest", run_dir=tmp_path)


def started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cluster: StandIn) -> peer.PeerStart:
    monkeypatch.setattr(peer, "peer_cluster", lambda handle: cluster)
    starter = peer.PeerStart.fresh(tmp_path / "peer")
    peer.mark_wanted(starter.directory, ["e2e/test_kueue.py::test_mk"])
    starter.start(beside(tmp_path))
    assert starter.thread is not None
    starter.thread.join(10)
    return starter


def test_the_test_gets_the_handle_the_controller_wrote(tmp_path, monkeypatch) -> None:
    cluster = StandIn()
    starter = started(tmp_path, monkeypatch, cluster)
    handle = peer.wait_for_peer(starter.directory, bound=5)
    assert (handle.kubeconfig, handle.versions) == (Path("/w/kubeconfig"), {"kueue": "v0.19.2"})
    starter.stop()
    assert cluster.downs == 1


def test_a_failed_start_reaches_the_test_as_its_first_line(tmp_path, monkeypatch) -> None:
    starter = started(tmp_path, monkeypatch, StandIn("kind create cluster failed: no space"))
    with pytest.raises(peer.PeerNotStarted, match=r"^kind create cluster failed: no space$"):
        peer.wait_for_peer(starter.directory, bound=5)


def test_nothing_starts_unless_a_selected_test_wants_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(peer, "peer_cluster", lambda handle: pytest.fail("started"))
    starter = peer.PeerStart.fresh(tmp_path / "peer")
    starter.start(beside(tmp_path))
    assert starter.thread is None
    starter.stop()


def test_a_provider_without_peers_leaves_the_skip_to_the_test(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(peer, "peer_cluster", lambda handle: pytest.fail("started"))
    starter = peer.PeerStart.fresh(tmp_path / "peer")
    peer.mark_wanted(starter.directory, ["t"])
    starter.start(ClusterHandle("existing", tmp_path / "k", {}))
    assert starter.thread is None


def test_an_earlier_session_of_the_run_directory_leaves_nothing_behind(tmp_path) -> None:
    directory = tmp_path / "peer"
    directory.mkdir()
    (directory / peer.HANDLE_FILE).write_text("{}")
    (directory / peer.WANTED_FILE).write_text("t\n")
    starter = peer.PeerStart.fresh(directory)
    assert not starter.wanted
    with pytest.raises(WaitTimeout, match="holds \\[\\]"):
        peer.wait_for_peer(directory, bound=0.3)
