"""Root conftest: the harness plugin is loaded through its pytest11 entry point.

Keeping this file makes the rootdir (and so fixtures/ and templates/) explicit
for every run started from the repository.
"""
