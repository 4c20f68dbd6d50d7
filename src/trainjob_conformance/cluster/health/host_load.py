"""Whether this machine is saturated, for the bounded waits of a start.

A start that times out on a busy machine is usually starved, not broken: the
harness run at nice 10 or 19 beside other work gets a small share of the CPU.
So a start's waits stretch their bound while the machine is saturated (up to
STARVED_STRETCH times more), and a timeout's line says so, so that a reader
looks at the machine first.
"""

from __future__ import annotations

import os

from trainjob_conformance.kube.waits import Stretch

# A start's bound may grow by this many times its length while the machine is
# saturated: on CI (2 CPUs, load 6.5) an API server at nice 10 beside `prove`
# was not ready after 180 s (docs/measurements.md, 2026-11-29 evening).
STARVED_STRETCH = 2.0


def _load_words() -> str:
    """'' on a machine with CPU to spare; else its load and this process's niceness.

    The last minute's load or the last five minutes': a start starved for minutes
    is still catching up when the load dips for a moment (CI, 2026-11-29: a stretch
    that ended at load 2.0 on 2 CPUs, 20 s into it, timed out an API server that
    the kind steps beside it had starved).
    """
    try:
        load, load5, _ = os.getloadavg()
    except OSError:  # no load average on this platform
        return ""
    cpus = os.cpu_count() or 1
    if max(load, load5) < cpus:
        return ""
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    nice = f"; this process runs at nice {niceness}" if niceness > 0 else ""
    return f"load average {load:.1f} ({load5:.1f} over 5 minutes) over {cpus} CPUs{nice}"


def saturation_note() -> str:
    """'' on a machine with CPU to spare; else what a timeout's line adds."""
    words = _load_words()
    return f"the machine was saturated: {words}" if words else ""


def while_saturated(timeout: float) -> Stretch:
    """A start's wait of `timeout` seconds, stretched while the machine is saturated."""

    def reason() -> str:
        words = _load_words()
        return f"the machine is saturated ({words})" if words else ""

    return Stretch(extra=timeout * STARVED_STRETCH, reason=reason)
