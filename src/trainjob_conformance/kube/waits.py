"""Bounded polling that, on timeout, says what it waited for and what it saw."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity

from trainjob_conformance.progress import say

T = TypeVar("T")

POLL_INTERVAL = 0.25
# The first looks come this soon, then each gap grows by half up to the
# wait's interval: most waits end within a few hundred milliseconds, and a
# fixed 0.25 s would add 0.125 s to each on average; a long wait still costs
# only one request per interval.
FIRST_INTERVAL = 0.02
BACKOFF = 1.5


class WaitTimeout(AssertionError):
    """A wait ran out; the message carries the last observation and diagnostics,
    `stretched` why its bound was stretched ('' if it was not)."""

    def __init__(self, message: str, stretched: str = "") -> None:
        super().__init__(message)
        self.stretched = stretched


class NotYet:
    """A probe's "no", with why: falsy, so the wait goes on; its reason is what a
    timeout reports ("1 of 2 Pods Running; x is Pending")."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"not yet: {self.why}"


@dataclass(frozen=True)
class Stretch:
    """A bound that may grow while something outside the wait explains the delay.

    Once the wait's own bound has run out, it goes on for at most `extra` more
    seconds, for as long as `reason` names a cause (a saturated machine: a
    starved API server is slow, not broken). An empty reason ends it at once.
    """

    extra: float
    reason: Callable[[], str]


def wait_for(
    description: str,
    probe: Callable[[], T | NotYet | None],
    timeout: float,
    diagnostics: Callable[[], str] | None = None,
    interval: float = POLL_INTERVAL,
    retry_on: tuple[type[BaseException], ...] = (),
    abort: Callable[[], None] | None = None,
    stretch: Stretch | None = None,
) -> T:
    """Poll `probe` until it returns something truthy, for at most `timeout` seconds.

    Looks come FIRST_INTERVAL apart at first, slowing to `interval`.
    `retry_on` lists exceptions that mean "not yet" (a 404 before an object
    appears); anything else propagates at once. `abort` runs before each try
    and may raise to end the wait early (the stack under test broke: waiting
    out the bound would only delay the verdict). `stretch` lets the bound grow
    while its reason holds.
    """
    __tracebackhide__ = True
    seen: dict[str, Any] = {"value": None, "error": None}

    def attempt() -> T | NotYet | None:
        if abort is not None:
            abort()
        try:
            value = probe()
        except retry_on as error:
            seen["error"] = error
            return None
        seen["value"] = value
        seen["error"] = None
        return value

    started = time.monotonic()
    stretched: dict[str, str] = {}

    def out_of_time(state: tenacity.RetryCallState) -> bool:
        elapsed = time.monotonic() - started
        if elapsed < timeout:
            return False
        if stretch is None or elapsed >= timeout + stretch.extra:
            return True
        why = stretch.reason()
        if why and not stretched:
            say(
                f"still waiting for {description} after {timeout:.0f}s, {why}:"
                f" waiting up to {stretch.extra:.0f}s more while that lasts"
            )
        if why:
            stretched["why"] = why
        return not why

    retrying = tenacity.Retrying(
        stop=out_of_time,
        wait=tenacity.wait_exponential(
            multiplier=min(FIRST_INTERVAL, interval),
            exp_base=BACKOFF,
            min=min(FIRST_INTERVAL, interval),
            max=interval,
        ),
        retry=tenacity.retry_if_result(lambda value: not value),
        retry_error_callback=lambda state: None,
        reraise=False,
    )
    result = retrying(attempt)
    if result:
        return result  # type: ignore[return-value]
    first = f"timed out after {timeout:.0f}s waiting for {description}"
    if stretched:
        first = (
            f"timed out after {time.monotonic() - started:.0f}s waiting for {description}"
            f" (its bound of {timeout:.0f}s was stretched while {stretched['why']})"
        )
    lines = [first]
    if seen["error"] is not None:
        lines.append(f"last error: {seen['error']}")
    elif seen["value"] is not None:
        lines.append(f"last observed: {seen['value']!r}")
    if diagnostics is not None:
        try:
            lines.append(diagnostics())
        except Exception as error:  # diagnostics must not mask the timeout
            lines.append(f"(collecting diagnostics failed: {error})")
    raise WaitTimeout("\n".join(lines), stretched=stretched.get("why", ""))
