"""The run's session hooks: who starts the cluster, when, and who stops it.

Under pytest-xdist the controller process owns the one cluster of a run: it
starts it once the first worker has collected (so it knows whether a selected
test wants the MultiKueue worker cluster, whose start can then go beside the
cluster's own) and hands its coordinates to the workers (plugin/session.py,
plugin/peer.py). Run serially, the session fixture starts it on first use.
Either way it stops at the session's end, whatever else fails.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainjob_conformance.cluster.registry import StartingCluster
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.lifecycle.interrupts import (
    ignore_interrupts,
    leave_if_orphaned,
    restore_handlers,
)
from trainjob_conformance.plugin import peer, stash
from trainjob_conformance.plugin.options import is_xdist_worker
from trainjob_conformance.plugin.session import ClusterSession, run_includes_e2e


class RunSessionHooks:
    """Registered once per process (controller, each worker, or a serial run)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @property
    def owner(self) -> ClusterSession:
        return self.config.stash[stash.SESSION]

    def _controller_starts_cluster(self) -> bool:
        """Whether this process is an xdist controller that owns the run's cluster."""
        distributed = getattr(self.config.option, "numprocesses", None) and not self.owner.is_worker
        return bool(distributed) and (
            run_includes_e2e(list(self.config.args)) or bool(self.config.stash[stash.PACKS])
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self._controller_starts_cluster():
            self.owner.forget_handover()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput.update(self.owner.worker_input())
        if self._controller_starts_cluster():
            # Where the controller hands over the MultiKueue worker cluster (plugin/peer.py).
            if stash.PEER not in self.config.stash:
                self.config.stash[stash.PEER] = peer.PeerStart.fresh(self.owner.run_dir / "peer")
            node.workerinput[peer.PEER_DIR_KEY] = str(self.config.stash[stash.PEER].directory)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """An xdist worker says whether a selected test needs the MultiKueue worker
        cluster, before it tells the controller its collection is done."""
        worker_input = getattr(session.config, "workerinput", None)
        if not worker_input or peer.PEER_DIR_KEY not in worker_input:
            return
        wanting = [
            item.nodeid
            for item in session.items
            if peer.PEER_FIXTURE in item.fixturenames  # type: ignore[attr-defined]
        ]
        if wanting:
            peer.mark_wanted(Path(worker_input[peer.PEER_DIR_KEY]), wanting)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        starter = self.config.stash.get(stash.PEER, None)
        owner = self.owner
        first = owner.handle is None and owner.start_error is None
        if first and ids and self._controller_starts_cluster():
            # The first worker has collected, so the controller knows whether a selected
            # test wants the MultiKueue worker cluster: that start can go beside the end
            # of this one. xdist sends no test before this hook returns, and a failure
            # reaches the workers as every test's ERROR (plugin/session.py).
            beside = StartingCluster.of(owner.settings.request)
            early = (lambda: starter.start(beside)) if starter is not None else None
            with contextlib.suppress(ConformanceError):
                owner.ensure(on_created=early)
            owner.hand_over()
        if starter is not None and owner.handle is not None:
            starter.start(owner.handle)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        # A wrapper, so the cluster stops even when another plugin's
        # sessionfinish raises (xdist does, when Ctrl-C has already killed its
        # workers), which would skip pytest_unconfigure.
        if self.owner.controller is not None:
            # A worker whose controller was killed ends its session when the closed
            # pipe reaches it; should that come before the kernel's SIGTERM
            # (die_with_parent), xdist's report to nobody would print "cannot send
            # (already closed?)" under the harness's one line.
            leave_if_orphaned(self.owner.controller)
        previous = {}
        if not is_xdist_worker(self.config):
            # The tests are over: a Ctrl-C now would only cut the report and
            # the cluster's shutdown short, so both run to the end.
            previous = ignore_interrupts()
        try:
            return (yield)
        finally:
            try:
                self.finish()
            finally:
                restore_handlers(previous)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.finish()

    def finish(self) -> None:
        """Stop the MultiKueue worker and the cluster (or keep it, as asked); once."""
        starter = self.config.stash.get(stash.PEER, None)
        if starter is not None:
            del self.config.stash[stash.PEER]
            starter.stop()
        owner = self.config.stash.get(stash.SESSION, None)
        if owner is None or owner.provider is None:
            return
        left = owner.finish()
        if left:
            print(
                f"trainjob-conformance: still running after the run: {', '.join(left)}; "
                f"stop them with: trainjob-conformance down --run-dir {owner.run_dir}",
                file=sys.stderr,
            )
