"""Conformance reports: per-run results, the policy x profile matrix, and diffs."""
