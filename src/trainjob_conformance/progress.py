"""Progress lines for long steps (builds, cluster start) on stderr."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

PREFIX = "[trainjob-conformance]"


def say(message: str) -> None:
    print(f"{PREFIX} {message}", file=sys.stderr, flush=True)


def format_seconds(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


@contextmanager
def step(what: str, heartbeat: float = 30.0) -> Iterator[None]:
    """Announce a step, repeat a heartbeat while it runs, and report its time."""
    started = time.monotonic()
    done = threading.Event()
    say(f"{what} ...")

    def beat() -> None:
        while not done.wait(heartbeat):
            say(f"{what} still running ({format_seconds(time.monotonic() - started)})")

    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    try:
        yield
    except BaseException:
        say(f"{what} FAILED after {format_seconds(time.monotonic() - started)}")
        raise
    finally:
        done.set()
        ticker.join()
    say(f"{what} done in {format_seconds(time.monotonic() - started)}")
