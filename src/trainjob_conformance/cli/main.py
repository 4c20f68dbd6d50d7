"""The parser of every command, and how a command's failure reaches the terminal."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from pathlib import Path

from trainjob_conformance import __version__
from trainjob_conformance.cli import (
    bench,
    build,
    children,
    cluster,
    compat,
    images,
    matrix,
    outdated,
    prove,
    render,
    reports,
    repro,
    run,
    soak,
    upgrade,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.lifecycle.interrupts import raise_interrupt_on_termination

# In the order `--help` lists them.
COMMANDS = (
    build,
    images,
    cluster,
    render,
    run,
    matrix,
    compat,
    prove,
    upgrade,
    outdated,
    reports,
    repro,
    bench,
    soak,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainjob-conformance",
        description="Prove how Kubeflow Trainer's TrainJob behaves on a real cluster.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    raise_interrupt_on_termination()
    try:
        return int(args.func(args))
    except ConformanceError as error:
        print(f"trainjob-conformance: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(children.interrupted_message(), file=sys.stderr)
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
