"""Release versions and the ranges the catalog states expectations for."""

from __future__ import annotations

import re

from trainjob_conformance.errors import ConformanceError

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$")
_COMPARISON = re.compile(r"^(>=|<=|==|>|<)\s*(v?\d+\.\d+\.\d+)$")

Version = tuple[int, int, int]


def parse_version(text: str) -> Version:
    match = _VERSION.match(text.strip())
    if not match:
        raise ConformanceError(f"not a release version: {text!r} (expected vMAJOR.MINOR.PATCH)")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def parse_range(spec: str) -> list[tuple[str, Version]]:
    """The comparisons of a range (">=2.2.1,<2.3.0"); ConformanceError if it is not one."""
    clauses = []
    for clause in str(spec).split(","):
        match = _COMPARISON.match(clause.strip())
        if not match:
            raise ConformanceError(
                f"bad version range clause {clause.strip()!r} in {spec!r} "
                "(expected comparisons like >=2.2.1,<2.3.0)"
            )
        operator, bound_text = match.groups()
        clauses.append((operator, parse_version(bound_text)))
    return clauses


def in_range(version: str, spec: str) -> bool:
    """True when `version` satisfies every comparison in `spec` (">=2.2.1,<2.3.0")."""
    current = parse_version(version)
    for operator, bound in parse_range(spec):
        holds = {
            ">=": current >= bound,
            "<=": current <= bound,
            "==": current == bound,
            ">": current > bound,
            "<": current < bound,
        }[operator]
        if not holds:
            return False
    return True
