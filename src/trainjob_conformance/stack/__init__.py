"""Pinned upstream versions and the Go builds that turn them into binaries."""
