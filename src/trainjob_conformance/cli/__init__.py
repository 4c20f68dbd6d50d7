"""The `trainjob-conformance` command line: one module per command or family,
each with the argument checks that guard it (checks.py holds the shared ones)."""

from trainjob_conformance.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
