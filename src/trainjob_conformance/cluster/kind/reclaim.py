"""kind clusters a run created: recorded in its run directory, removed by the next run if
the owner died (SIGKILL), and identified by Docker labels, never by a name alone.

A record names the cluster, its kubeconfig, the owner process (pid and start
time) and whether this run created kind's "kind" Docker network (which a
user's own clusters may share: it is removed only when this harness created it
and no container uses it any more).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from trainjob_conformance.cluster.kind.images.node import (
    BUILD_CONTAINER_PREFIX,
    BUILD_OWNER_LABEL,
    NODE_IMAGE_LABEL,
)
from trainjob_conformance.cluster.run_state import KIND_RECORD_FILE
from trainjob_conformance.kube.waits import NotYet, WaitTimeout, wait_for
from trainjob_conformance.lifecycle.ledger import ProcessIdentity, start_time
from trainjob_conformance.progress import say

RECORD_FILE = KIND_RECORD_FILE
CLUSTER_LABEL = "io.x-k8s.kind.cluster"
# The kubeconfig naming the API server on the kind network (provider.py).
PEER_KUBECONFIG = "kind-kubeconfig-peers.yaml"
# Every node container made from the harness's node image carries NODE_IMAGE_LABEL.
KIND_NETWORK = "kind"


@dataclass
class ClusterRecord:
    name: str
    kubeconfig: str
    kind_bin: str
    owner_pid: int
    owner_start: float
    created_network: bool = False
    state: str = "running"  # running | deleted | detached

    def write(self, run_dir: Path) -> None:
        path = run_dir / RECORD_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(asdict(self)))
        os.replace(partial, path)

    @classmethod
    def read(cls, path: Path) -> ClusterRecord | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def owner_alive(self) -> bool:
        identity = ProcessIdentity(self.owner_pid, self.owner_start, "owner")
        return identity.is_alive()


def new_record(name: str, kubeconfig: Path, kind_bin: Path, created_network: bool) -> ClusterRecord:
    pid = os.getpid()
    return ClusterRecord(
        name, str(kubeconfig), str(kind_bin), pid, start_time(pid) or 0.0, created_network
    )


def listed_nodes(name: str, harness_only: bool = True) -> list[str] | str:
    """IDs of the cluster's node containers (with the harness's image label, by default),
    or Docker's own message when it could not list them."""
    args = ["docker", "ps", "-aq", "--filter", f"label={CLUSTER_LABEL}={name}"]
    if harness_only:
        args += ["--filter", f"label={NODE_IMAGE_LABEL}"]
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return (
            result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "docker ps failed"
        )
    return result.stdout.split()


def node_containers(name: str, harness_only: bool = True) -> list[str]:
    """listed_nodes, with a failed listing read as none (for reports of what is left)."""
    listed = listed_nodes(name, harness_only)
    return listed if isinstance(listed, list) else []


def network_exists() -> bool:
    return (
        subprocess.run(
            ["docker", "network", "inspect", KIND_NETWORK], capture_output=True, check=False
        ).returncode
        == 0
    )


def _network_in_use() -> bool:
    result = subprocess.run(
        ["docker", "network", "inspect", "--format", "{{len .Containers}}", KIND_NETWORK],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode != 0 or result.stdout.strip() not in ("", "0")


# How long a deletion waits for the cluster's creation to stop (see `delete`).
_CREATORS_SECONDS = 60.0


def creators(name: str) -> list[int]:
    """Processes still making cluster `name`: `kind create` and the `docker run` calls it
    makes for the nodes (their command lines carry the cluster's label)."""
    label = f"{CLUSTER_LABEL}={name}"
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        command = process.info["cmdline"] or []
        if process.info["status"] == psutil.STATUS_ZOMBIE or process.pid == os.getpid():
            continue
        creating = {"create", "cluster"} <= set(command) and _flag(command, "--name") == name
        if creating or label in command:
            found.append(process.pid)
    return found


def _flag(command: list[str], flag: str) -> str | None:
    return command[command.index(flag) + 1] if flag in command[:-1] else None


def _creation_stopped(name: str) -> None:
    """Wait, bounded, until nothing makes this cluster's nodes any more. A `kind create`
    whose harness was killed dies with it, but the `docker run` calls it had made
    finish in the daemon: nodes listed before they end would be missed. Nothing is
    signalled (the processes are only named by the cluster's label)."""

    def stopped() -> bool | NotYet:
        left = creators(name)
        return True if not left else NotYet(f"still creating nodes: pids {left}")

    with contextlib.suppress(WaitTimeout):  # what is left is reported by `delete`
        wait_for(f"kind cluster {name}'s creation to stop", stopped, _CREATORS_SECONDS)


def delete(record: ClusterRecord, run_dir: Path) -> None:
    """Delete the recorded cluster (kubeconfig named: kind never edits ~/.kube/config).

    A cluster whose nodes Docker cannot list stays `running` in its record: a
    listing that failed is not an empty one (a stopped daemon once made a cluster
    look deleted while its nodes were still in the daemon's store).
    """
    _creation_stopped(record.name)
    listed = listed_nodes(record.name, harness_only=False)
    if isinstance(listed, str):
        say(f"kind cluster {record.name} is not deleted: Docker could not list its nodes "
            f"({listed}); the next run deletes it")  # fmt: skip
        return
    if listed:
        # In a session of its own: a second Ctrl-C in the terminal must not cut the
        # deletion short (it once left three node containers running).
        subprocess.run(
            [record.kind_bin, "delete", "cluster", "--name", record.name,
             "--kubeconfig", record.kubeconfig],
            capture_output=True, check=False, start_new_session=True,
        )  # fmt: skip
    left = listed_nodes(record.name, harness_only=False)
    if isinstance(left, str) or left:
        # Still `running` in the record: the next run reclaims it once this one is gone.
        remain = left if isinstance(left, str) else f"{', '.join(left)} remain"
        say(f"kind cluster {record.name} is not deleted yet: {remain}")
        return
    if record.created_network and network_exists() and not _network_in_use():
        subprocess.run(["docker", "network", "rm", KIND_NETWORK], capture_output=True, check=False)
    with contextlib.suppress(OSError):
        Path(record.kubeconfig).unlink(missing_ok=True)
        # The copy for another cluster's Pods (a MultiKueue worker's), beside it.
        Path(record.kubeconfig).with_name(PEER_KUBECONFIG).unlink(missing_ok=True)
    record.state = "deleted"
    record.write(run_dir)


def abandoned_builds(listing: str) -> list[str]:
    """Build containers whose owner is gone, from `docker ps` lines (id, name, owner
    label, kind cluster label).

    A node container carries the labels of the build container its image was
    committed from (images built before 2026-11-25 keep an owner there), so only
    a container named as a build container, with an owner and no kind cluster,
    is one.
    """
    gone = []
    for line in listing.splitlines():
        container, name, owner, cluster = [*line.split("\t"), "", "", ""][:4]
        if not name.startswith(BUILD_CONTAINER_PREFIX) or not owner or cluster:
            continue
        pid, _, start = owner.partition("-")
        with contextlib.suppress(ValueError):
            if ProcessIdentity(int(pid), float(start), "owner").is_alive():
                continue
        gone.append(container)
    return gone


def reclaim_builds() -> None:
    """Remove node-image build containers whose process died (SIGKILL) mid-build."""
    listed = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label={BUILD_OWNER_LABEL}",
         "--filter", f"name={BUILD_CONTAINER_PREFIX}",
         "--format", f'{{{{.ID}}}}\t{{{{.Names}}}}\t{{{{.Label "{BUILD_OWNER_LABEL}"}}}}'
                     f'\t{{{{.Label "{CLUSTER_LABEL}"}}}}'],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    for container in abandoned_builds(listed.stdout):
        say(f"removing image build container {container}, left by a dead run")
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)


def reclaim_abandoned(runs_root: Path) -> None:
    """Delete the clusters of runs whose owner died without deleting or keeping them.

    Only clusters whose node containers carry both kind's cluster label with
    the recorded name and the harness's node-image label are touched.
    """
    if not runs_root.is_dir():
        return
    # A run's MultiKueue worker cluster is recorded one level down (<run>/worker-<pid>/).
    records = [*runs_root.glob(f"*/{RECORD_FILE}"), *runs_root.glob(f"*/*/{RECORD_FILE}")]
    for path in sorted(records):
        record = ClusterRecord.read(path)
        if record is None or record.state != "running" or record.owner_alive():
            continue
        if node_containers(record.name) or not node_containers(record.name, harness_only=False):
            say(f"removing kind cluster {record.name}, left by a dead run in {path.parent}")
            delete(record, path.parent)


def delete_if_running(run_dir: Path) -> None:
    """Delete the cluster recorded in `run_dir` unless it was deleted or kept; what a
    run's watchdog runs when the run dies (lifecycle/ledger.py record_command)."""
    record = ClusterRecord.read(run_dir / RECORD_FILE)
    if record is not None and record.state == "running":
        say(f"deleting kind cluster {record.name}: the run that created it is gone")
        delete(record, run_dir)


if __name__ == "__main__":
    # Run by a run's watchdog: `--builds` where the run builds node images, its
    # directory once it has a kind cluster.
    if sys.argv[1:] == ["--builds"]:
        reclaim_builds()
    else:
        delete_if_running(Path(sys.argv[1]))
