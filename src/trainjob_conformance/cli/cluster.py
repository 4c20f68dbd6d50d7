"""`up` and `down`: an embedded cluster kept running between commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainjob_conformance.cli import children
from trainjob_conformance.cli.checks import check_build_cache
from trainjob_conformance.cli.profile_args import add_profile, add_with, profile_arg
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.profiles import load_profile


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = sub.add_parser("up", help="bring an embedded cluster up and leave it running")
    add_profile(up)
    add_with(up, "the cluster")
    up.add_argument("--run-dir", help="where state and logs go (default: .runs/up-<time>)")
    up.set_defaults(func=run_up)

    down = sub.add_parser("down", help="stop a cluster started by `up`")
    down.add_argument("--run-dir", required=True, help="the run directory `up` printed")
    down.set_defaults(func=run_down)


def run_up(args: argparse.Namespace) -> int:
    from trainjob_conformance.cluster.provider import ClusterRequest
    from trainjob_conformance.cluster.registry import make_provider

    run_dir = Path(args.run_dir).resolve() if args.run_dir else children.new_run_dir("up")
    if run_dir not in children.RUN_DIRS:
        children.RUN_DIRS.append(run_dir)
    args.profile = profile_arg(args)
    check_build_cache()
    cluster = make_provider(ClusterRequest("embedded", load_profile(args.profile), run_dir))
    try:
        handle = cluster.up()
    except BaseException:
        cluster.down()
        raise
    hint = cluster.detach()
    print(f"export KUBECONFIG={handle.kubeconfig}")
    print(f"# stop with: {hint}")
    return 0


def run_down(args: argparse.Namespace) -> int:
    from trainjob_conformance.cluster.run_state import STATE_FILE, read_state
    from trainjob_conformance.lifecycle.ledger import CLOSED, LEDGER_FILE, ProcessLedger

    run_dir = Path(args.run_dir).resolve()
    ledger = ProcessLedger(run_dir / LEDGER_FILE)
    if not ledger.path.is_file():
        raise ConformanceError(
            f"{run_dir} holds no cluster of trainjob-conformance (no {LEDGER_FILE}); "
            "pass the --run-dir that `up` printed"
        )
    # Only processes the ledger names, with the start time it recorded, are
    # signalled: a pid reused by an unrelated process is never touched.
    stopped = [f"{p.name} (pid {p.pid})" for p in ledger.reap()]
    ledger.mark(CLOSED)
    try:
        cluster = str(read_state(run_dir).get("cluster_name") or "")
    except ConformanceError:
        cluster = ""  # a damaged state file must not keep a cluster running
    (run_dir / STATE_FILE).unlink(missing_ok=True)
    name = f" of cluster {cluster}" if cluster else ""
    print(f"stopped {', '.join(stopped)}{name}" if stopped else f"nothing{name} was running")
    return 0
