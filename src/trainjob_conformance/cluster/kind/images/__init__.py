"""The images a kind cluster runs, built locally from pinned sources and cached by version."""
