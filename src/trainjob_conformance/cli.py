"""The `trainjob-conformance` command line."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.lifecycle.interrupts import (
    Terminated,
    die_with_parent,
    raise_interrupt_on_termination,
    stop_orphaned_group,
)
from trainjob_conformance.paths import CACHE_ENV, cache_root
from trainjob_conformance.stack.profiles import (
    DEFAULT_PROFILE,
    PROFILE_ENV,
    Profile,
    compose_profile,
    load_profile,
    profile_names,
)


def _cmd_build(args: argparse.Namespace) -> int:
    from trainjob_conformance.stack.gobuild import build_profile

    args.profile = _profile_arg(args)
    _check_writable(cache_root(), f"the build cache (${CACHE_ENV})")
    started = time.monotonic()
    binaries = build_profile(load_profile(args.profile))
    for name, path in sorted(binaries.items()):
        print(f"{name:28} {path}")
    print(
        f"profile {args.profile}: {len(binaries)} binaries ready in {time.monotonic() - started:.1f}s"
    )
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    from trainjob_conformance.cluster.embedded.provider import EmbeddedStackCluster

    run_dir = Path(args.run_dir).resolve() if args.run_dir else _new_run_dir("up")
    if run_dir not in _RUN_DIRS:
        _RUN_DIRS.append(run_dir)
    args.profile = _profile_arg(args)
    _check_writable(cache_root(), f"the build cache (${CACHE_ENV})")
    cluster = EmbeddedStackCluster(load_profile(args.profile), run_dir)
    try:
        handle = cluster.up()
    except BaseException:
        cluster.down()
        raise
    cluster.detach()
    print(f"export KUBECONFIG={handle.kubeconfig}")
    print(f"# stop with: trainjob-conformance down --run-dir {run_dir}")
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
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


def _cmd_render(args: argparse.Namespace) -> int:
    from trainjob_conformance.render.overrides import OverrideShape
    from trainjob_conformance.render.templates import TemplateSet

    try:
        values = json.loads(args.values) if args.values else {}
    except ValueError as error:
        raise ConformanceError(
            f'--values is not JSON ({error}); e.g. \'{{"name": "a"}}\''
        ) from None
    if not isinstance(values, dict):
        raise ConformanceError("--values must be a JSON object")
    templates = TemplateSet(Path(args.templates), OverrideShape(args.shape))
    sys.stdout.write(templates.render_text(args.template, values))
    return 0


# Run directories of the clusters this command started, to check on interruption.
_RUN_DIRS: list[Path] = []
# Process groups of pytest workers that outlived their controller and could not be stopped.
_GROUPS_LEFT: list[int] = []


def _new_run_dir(label: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = (Path(".runs") / f"{stamp}-{label}-{os.getpid()}").resolve()
    _RUN_DIRS.append(run_dir)
    return run_dir


def _run_child(command: list[str], own_group: bool = False) -> int:
    """Run pytest and wait for it; on Ctrl-C or SIGTERM, let it stop its cluster first.

    With `own_group`, pytest runs in a process group of its own, which its
    xdist workers share: Ctrl-C or SIGTERM here reaches the whole group as
    SIGINT, pytest's own Ctrl-C path (every worker stops its test, the
    controller stops the cluster), and workers that outlive a pytest killed
    by SIGKILL are stopped through the group. Without (no workers), pytest
    stays in the terminal's group, so that --pdb can read the terminal.
    """
    child = subprocess.Popen(
        command, preexec_fn=die_with_parent, process_group=0 if own_group else None
    )
    try:
        code = child.wait()
    except KeyboardInterrupt as interruption:
        if own_group:
            os.killpg(child.pid, signal.SIGINT)  # not yet reaped: the group is still pytest's
        elif isinstance(interruption, Terminated):
            # Ctrl-C in a terminal reaches the whole process group, pytest
            # included; a SIGTERM (CI cancelling the job) reached only this
            # process, so pass it on.
            child.send_signal(signal.SIGTERM)
        _wait_for_child(child, own_group)
        raise
    if code < 0 and own_group and not stop_orphaned_group(child.pid):
        _GROUPS_LEFT.append(child.pid)
    return code


def _wait_for_child(child: subprocess.Popen[bytes], own_group: bool) -> None:
    """Give the child the time its cleanup needs; a second Ctrl-C is passed on, not obeyed."""
    while True:
        try:
            child.wait()
            return
        except KeyboardInterrupt:
            if own_group:
                os.killpg(child.pid, signal.SIGINT)
            else:
                child.send_signal(signal.SIGINT)


# pytest's exit codes as this command's: interrupted is 130 (as for Ctrl-C
# here), a usage error is 2 (as for any bad input here).
_PYTEST_EXIT = {2: 130, 4: 2}


def _pytest_command(args: argparse.Namespace, profile: str) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "e2e",
        f"--trainjob-run-dir={_new_run_dir(profile)}",
        f"--trainjob-profile={profile}",
        f"--trainjob-cluster={args.cluster}",
        "-n",
        str(args.workers),
        # A worker that runs out of tests takes queued ones from the other
        # (xdist's default hands each worker its share up front): the last
        # tests no longer wait behind a long one. Measured: README, "Faster to
        # a verdict". Ignored with -n 0; a later --dist given after -- wins.
        "--dist",
        "worksteal",
        "-p",
        "no:cacheprovider",
        # The harness's own tests belong to ./scripts/test, not to a conformance run.
        "-m",
        "not harness",
    ]
    if args.kubeconfig:
        command.append(f"--trainjob-kubeconfig={Path(args.kubeconfig).resolve()}")
    command += [f"--trainjob-pack={Path(pack).resolve()}" for pack in args.pack]
    if args.report:
        report = Path(args.report).resolve()
        command += [f"--trainjob-report={report}", f"--junitxml={report / f'{profile}-junit.xml'}"]
    return [*command, *args.pytest_args]


def _check_suite_present() -> None:
    if not Path("e2e").is_dir() or not Path("fixtures", "policies.yaml").is_file():
        raise ConformanceError(
            f"no conformance suite in {Path.cwd()} (e2e/ and fixtures/policies.yaml): "
            "run this from the trainjob-conformance checkout"
        )


def _check_cluster_args(args: argparse.Namespace) -> None:
    if args.cluster == "existing" and not args.kubeconfig:
        raise ConformanceError(
            "--cluster existing needs --kubeconfig PATH (the current kubectl context is never used)"
        )
    if args.kubeconfig and not Path(args.kubeconfig).is_file():
        raise ConformanceError(f"kubeconfig {args.kubeconfig} does not exist")
    if args.kubeconfig:
        from trainjob_conformance.kube.kubeconfig import check_kubeconfig

        check_kubeconfig(Path(args.kubeconfig))


def _check_run_args(args: argparse.Namespace) -> None:
    from trainjob_conformance.policies.packs import load_packs

    _check_suite_present()
    _check_cluster_args(args)
    load_packs([Path(pack) for pack in args.pack])
    if args.report:
        _check_writable(Path(args.report), "the report directory")
    if args.cluster == "embedded":
        _check_writable(cache_root(), f"the build cache (${CACHE_ENV})")


def _cmd_run(args: argparse.Namespace) -> int:
    args.profile = _profile_arg(args)
    _check_run_args(args)
    code = _run_child(_pytest_command(args, args.profile), own_group=args.workers > 0)
    if code < 0:
        return _after_killed_child(signal.Signals(-code))
    return _PYTEST_EXIT.get(code, code)


def _after_killed_child(signum: signal.Signals) -> int:
    """pytest died by a signal it could not answer (SIGKILL, say): its session
    never stopped its cluster. Its watchdog will, within seconds; this does it
    now, as the next run would (each process checked to be the one recorded,
    a kept cluster left alone), and says what is left."""
    from trainjob_conformance.lifecycle.processes import reap_abandoned

    print(
        f"trainjob-conformance: pytest was killed by {signum.name}; "
        "no verdicts for what it had not reported",
        file=sys.stderr,
    )
    for runs_root in {run_dir.parent for run_dir in _RUN_DIRS}:
        reap_abandoned(runs_root)
    print(_interrupted_message(), file=sys.stderr)
    return 128 + signum


def _cmd_matrix(args: argparse.Namespace) -> int:
    from trainjob_conformance.fanout import FanOut, Task, worst
    from trainjob_conformance.report.model import read_reports
    from trainjob_conformance.report.render import write_reports

    args.jobs = _job_count(args.jobs)
    profiles = _profile_list(args.profiles, args)
    _check_run_args(args)
    if args.jobs > 1 and args.cluster == "embedded":
        _build_before_fanning_out(profiles)
    tasks = [Task(name, _matrix_child(args, name)) for name in profiles]
    outcomes = FanOut(tasks, args.jobs, exit_code=lambda c: _PYTEST_EXIT.get(c, c)).run()
    md, page = write_reports(read_reports(Path(args.report)), Path(args.report))
    print(f"matrix report: {md} and {page}")
    return worst(outcomes)


def _build_before_fanning_out(profiles: list[str]) -> None:
    """Profiles share components (Kubernetes, etcd, KWOK): children started together
    would build the same one in the same work directory at once. Built here, one
    after another; with a warm cache this only finds the files."""
    from trainjob_conformance.stack.gobuild import build_profile

    for name in profiles:
        build_profile(load_profile(name))


def _matrix_child(args: argparse.Namespace, profile: str) -> Callable[[], subprocess.Popen[bytes]]:
    """How one profile's pytest starts: its own run directory (so its own cluster,
    ports and ledger); with --jobs > 1 its output goes to <report>/logs/<profile>.log
    so that concurrent runs stay readable."""

    def start() -> subprocess.Popen[bytes]:
        command = _pytest_command(args, profile)
        if args.jobs == 1:
            return subprocess.Popen(command, preexec_fn=die_with_parent)
        log = Path(args.report).resolve() / "logs" / f"{profile}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"[trainjob-conformance] profile {profile}: log {log}", file=sys.stderr, flush=True)
        with log.open("wb") as sink:
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )

    return start


def _cmd_report(args: argparse.Namespace) -> int:
    from trainjob_conformance.report.model import read_reports
    from trainjob_conformance.report.render import write_reports

    md, page = write_reports(read_reports(Path(args.results)), Path(args.output or args.results))
    print(f"{md}\n{page}")
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    from trainjob_conformance.report.diff import diff_reports
    from trainjob_conformance.report.model import read_reports

    diff = diff_reports(read_reports(Path(args.old)), read_reports(Path(args.new)))
    print("\n".join(diff.lines()))
    return diff.exit_code


def _cmd_history(args: argparse.Namespace) -> int:
    from trainjob_conformance.report.history import write_history

    page, history = write_history([Path(d) for d in args.directories], Path(args.output))
    print(f"{page}: {len(history.rows)} policies x {len(history.runs)} runs")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from trainjob_conformance.bench.command import run_bench

    args.profile = _profile_arg(args)
    _check_suite_present()
    _check_writable(cache_root(), f"the build cache (${CACHE_ENV})")
    _check_writable(Path(args.output), "the bench output directory")
    run_dir = _new_run_dir("bench")
    return run_bench(
        load_profile(args.profile),
        run_dir,
        args.runs,
        args.workers,
        Path(args.output).resolve(),
        args.pytest_args,
        on_run_dir=_RUN_DIRS.append,
    )


def _run_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of runs") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"{count} runs: give 1 or more")
    return count


def _worker_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"{count} workers: give 0 (serial) or more")
    return count


def _job_count(text: str) -> int:
    """--jobs, checked here rather than by argparse, whose refusal adds a usage block."""
    try:
        count = int(text)
    except ValueError:
        raise ConformanceError(
            f"--jobs {text!r} is not a number; give how many profiles run at once (1 or more)"
        ) from None
    if count < 1:
        raise ConformanceError(
            f"--jobs {count}: give 1 (one profile at a time, the default) or more"
        )
    return count


def _profile_arg(args: argparse.Namespace) -> str:
    """--profile, else $TRAINJOB_PROFILE, else the default; checked, in one line."""
    name = args.profile or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
    source = "--profile" if args.profile else PROFILE_ENV
    try:
        profile = load_profile(name)
    except ConformanceError as error:
        raise ConformanceError(f"{source}: {error}") from None
    return _composed(args, profile, source)


# --- composed profiles (--with component=version) ---
def _composed(args: argparse.Namespace, profile: Profile, source: str) -> str:
    """The profile with --with applied; every release it asks for checked on the proxy."""
    from trainjob_conformance.stack.goproxy import require_overrides

    overrides = getattr(args, "with_", None) or []
    if overrides and getattr(args, "cluster", "embedded") == "existing":
        raise ConformanceError(
            "--with composes a profile to build; an existing cluster runs what is installed "
            "on it: drop --with"
        )
    try:
        profile = compose_profile(profile, overrides)
    except ConformanceError as error:
        raise ConformanceError(f"{'--with' if overrides else source}: {error}") from None
    require_overrides(profile)
    return profile.name


def _with_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--with",
        dest="with_",
        action="append",
        default=[],
        metavar="COMPONENT=VERSION",
        help=f"run {what} with this component at another release, e.g. kueue=v0.16.6 "
        "(repeatable; the profile is then named e.g. latest+kueue=v0.16.6)",
    )


def _cmd_outdated(args: argparse.Namespace) -> int:
    from trainjob_conformance.stack import outdated
    from trainjob_conformance.stack.goproxy import proxy_url

    rows = outdated.drift(load_profile(name) for name in _profile_list(args.profiles))
    print("\n".join(outdated.table(rows)))
    print(outdated.summary(rows, proxy_url()))
    return 1 if args.exit_code and any(row.outdated for row in rows) else 0


# --- end of composed profiles ---


def _profile_list(text: str | None, args: argparse.Namespace | None = None) -> list[str]:
    names = profile_names() if text is None else [name.strip() for name in text.split(",")]
    if not any(names) or not all(names):
        raise ConformanceError(
            f"--profiles {text!r} names no profile; give a comma-separated list of: "
            f"{', '.join(profile_names())}"
        )
    profiles = [load_profile(name) for name in names]
    if args is not None:
        names = [_composed(args, profile, "--profiles") for profile in profiles]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConformanceError(f"--profiles names {', '.join(duplicates)} more than once")
    return names


def _check_writable(directory: Path, what: str) -> None:
    """Refuse before building or starting anything, not after."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-check-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise ConformanceError(
            f"{what} {directory} cannot be written ({error.strerror or error}); "
            "choose another directory"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainjob-conformance",
        description="Prove how Kubeflow Trainer's TrainJob behaves on a real cluster.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def with_profile(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--profile",
            default=None,
            help=f"pinned version set: {', '.join(profile_names())} "
            f"(default: ${PROFILE_ENV} or {DEFAULT_PROFILE})",
        )

    build = sub.add_parser("build", help="build (or reuse) the binaries of a profile")
    with_profile(build)
    _with_option(build, "the build")
    build.set_defaults(func=_cmd_build)

    up = sub.add_parser("up", help="bring an embedded cluster up and leave it running")
    with_profile(up)
    _with_option(up, "the cluster")
    up.add_argument("--run-dir", help="where state and logs go (default: .runs/up-<time>)")
    up.set_defaults(func=_cmd_up)

    down = sub.add_parser("down", help="stop a cluster started by `up`")
    down.add_argument("--run-dir", required=True, help="the run directory `up` printed")
    down.set_defaults(func=_cmd_down)

    render = sub.add_parser("render", help="render a template to stdout")
    render.add_argument("template", help="template name, e.g. trainjob")
    render.add_argument("--values", help='parameters as JSON, e.g. \'{"name": "a"}\'')
    render.add_argument(
        "--shape",
        default="runtimePatches",
        choices=["podSpecOverrides", "podTemplateOverrides", "runtimePatches"],
        help="override field of the target Trainer release (default: %(default)s)",
    )
    render.add_argument("--templates", default="templates", help="template directory")
    render.set_defaults(func=_cmd_render)

    def with_cluster(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--cluster",
            choices=["embedded", "existing", "kind"],
            default="embedded",
            help="where to run (default: %(default)s)",
        )
        p.add_argument("--kubeconfig", help="kubeconfig of the cluster for --cluster existing")
        p.add_argument(
            "-n",
            "--workers",
            type=_worker_count,
            default=2,
            help="parallel pytest-xdist workers; 0 runs serially (default: %(default)s)",
        )
        p.add_argument(
            "--report",
            default="reports",
            help="directory for results, JUnit XML, diagnostics and the report (default: %(default)s)",
        )
        p.add_argument(
            "--pack",
            action="append",
            default=[],
            metavar="DIR",
            help="a policy pack (policies.yaml, templates/, tests) to run with the "
            "project's policies; repeatable",
        )
        p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")

    run = sub.add_parser("run", help="run the conformance suite on one profile")
    with_profile(run)
    _with_option(run, "the suite")
    with_cluster(run)
    run.set_defaults(func=_cmd_run)

    matrix = sub.add_parser(
        "matrix", help="run the suite on several profiles and report the matrix"
    )
    matrix.add_argument(
        "--profiles", help=f"comma-separated (default: all of {', '.join(profile_names())})"
    )
    _with_option(matrix, "every profile")
    matrix.add_argument(
        "-j",
        "--jobs",
        default="1",
        help="profiles run at once, each on its own cluster, its output in "
        "<report>/logs/<profile>.log when more than 1 (default: %(default)s)",
    )
    with_cluster(matrix)
    matrix.set_defaults(func=_cmd_matrix)

    outdated = sub.add_parser(
        "outdated",
        help="newer releases of every pinned component, from the Go module proxy",
        description="Asks the Go module proxy (GOPROXY) for the releases of each pinned "
        "component and prints, per profile, the newest patch of the pinned minor and the "
        "newest release (pre-releases left out). Exit codes: 0; with --exit-code, 1 when a "
        "pin has a newer release; 2 when the proxy cannot be reached or the input is bad.",
    )
    outdated.add_argument(
        "--profiles", help=f"comma-separated (default: all of {', '.join(profile_names())})"
    )
    outdated.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when a pin has a newer release (for a job that should turn red)",
    )
    outdated.set_defaults(func=_cmd_outdated)

    report = sub.add_parser("report", help="render Markdown and HTML from result files")
    report.add_argument("results", help="a result JSON or a report directory")
    report.add_argument("--output", help="where to write (default: beside the results)")
    report.set_defaults(func=_cmd_report)

    diff = sub.add_parser(
        "diff",
        help="compare two reports; exit 1 on a regression, 3 if the new run broke",
        description="Exit codes: 0 no regression; 1 a conformance regression (newly FAIL or "
        "GAP-CLOSED, a new known gap, a policy no longer run or no longer applicable); 2 bad "
        "input; 3 no regression, but the new run cannot be judged (ERROR results: the stack "
        "broke, or the run was interrupted).",
    )
    diff.add_argument("old", help="earlier result JSON or report directory")
    diff.add_argument("new", help="later result JSON or report directory")
    diff.set_defaults(func=_cmd_diff)

    history = sub.add_parser(
        "history", help="one HTML page of many runs: policies x runs in time order, with trends"
    )
    history.add_argument(
        "directories", nargs="+", metavar="DIR", help="report directories (`run`/`matrix --report`)"
    )
    history.add_argument(
        "--output", default="history.html", help="the page to write (default: %(default)s)"
    )
    history.set_defaults(func=_cmd_history)
    bench = sub.add_parser(
        "bench",
        help="time the start phases, the suite on a warm cluster, and the harness's overhead",
        description="Each run starts a bare control plane, then the embedded stack (timing its "
        "phases), then runs the suite on it (as `run --cluster existing`), reading each policy "
        "test's cluster timeline from the objects' own timestamps. Writes bench.json and "
        "bench.md; exit 1 if a suite did not pass.",
    )
    with_profile(bench)
    bench.add_argument(
        "--runs", type=_run_count, default=1, help="how many runs (default: %(default)s)"
    )
    bench.add_argument(
        "-n",
        "--workers",
        type=_worker_count,
        default=2,
        help="pytest-xdist workers of the suite (default: %(default)s)",
    )
    bench.add_argument(
        "--output", default="reports/bench", help="where to write (default: %(default)s)"
    )
    bench.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    bench.set_defaults(func=_cmd_bench)
    return parser


def _interrupted_message() -> str:
    """What the interruption left, checked, never assumed."""
    from trainjob_conformance.lifecycle.processes import still_running

    left = {run_dir: still_running(run_dir) for run_dir in _RUN_DIRS}
    left = {run_dir: names for run_dir, names in left.items() if names}
    if not left and not _GROUPS_LEFT:
        return "trainjob-conformance: interrupted; nothing it started is still running"
    lines = ["trainjob-conformance: interrupted; still running:"]
    for run_dir, names in left.items():
        lines.append(f"  {', '.join(names)}: trainjob-conformance down --run-dir {run_dir}")
    for pgid in _GROUPS_LEFT:
        lines.append(f"  pytest's workers, process group {pgid}: kill -KILL -- -{pgid}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    raise_interrupt_on_termination()
    try:
        return int(args.func(args))
    except ConformanceError as error:
        print(f"trainjob-conformance: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(_interrupted_message(), file=sys.stderr)
        return 130
    except Exception as error:  # a bug: one line here, the traceback in a file
        path = Path(tempfile.gettempdir()) / f"trainjob-conformance-error-{os.getpid()}.txt"
        path.write_text("".join(traceback.format_exception(error)))
        print(
            f"trainjob-conformance: internal error: {error or type(error).__name__} "
            f"(traceback in {path}; please report it)",
            file=sys.stderr,
        )
        return 70


if __name__ == "__main__":
    sys.exit(main())
