"""Talking to a cluster: client, bounded waits, and what to print when they fail."""
