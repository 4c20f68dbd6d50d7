"""Jinja manifests, validated parameters, and version-specific override shapes."""
