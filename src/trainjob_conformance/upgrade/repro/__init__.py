"""Bundles for the known gaps an upgrade shows: install the old releases, put objects in flight, upgrade to the new releases, observe."""
