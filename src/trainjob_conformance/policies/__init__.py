"""The policy catalog and the observations policies are proven with."""
