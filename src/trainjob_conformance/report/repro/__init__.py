"""Reproduction bundles: a test's record as manifests, repro.sh and a draft upstream issue."""
