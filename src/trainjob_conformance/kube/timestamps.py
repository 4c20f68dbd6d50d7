"""Kubernetes timestamps (RFC 3339, UTC), as the API server writes them."""

from __future__ import annotations

from datetime import datetime


def parse_time(text: str) -> tuple[float, bool] | None:
    """(epoch seconds, has sub-second digits) of an RFC 3339 timestamp, else None."""
    if len(text) < 20 or text[4] != "-" or text[10] != "T":
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp(), "." in text[19:]
