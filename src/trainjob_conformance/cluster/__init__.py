"""Cluster providers (embedded, kind, existing) and what runs on them."""
