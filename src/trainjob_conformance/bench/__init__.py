"""`trainjob-conformance bench`: start phases, suite wall time, and the harness's own overhead."""
