"""Whether this machine was saturated when a bounded wait ran out.

A start that times out on a busy machine is usually starved, not broken: the
harness run at nice 19 beside other work gets a small share of the CPU. The
timeout's line says so, so that a reader looks at the machine first.
"""

from __future__ import annotations

import os


def saturation_note() -> str:
    """'' on a machine with CPU to spare; else the load and this process's niceness."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform
        return ""
    cpus = os.cpu_count() or 1
    if load < cpus:
        return ""
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    nice = f"; this process runs at nice {niceness}" if niceness > 0 else ""
    return f"the machine was saturated: load average {load:.1f} over {cpus} CPUs{nice}"
