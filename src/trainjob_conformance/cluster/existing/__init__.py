"""The existing provider: a user's cluster, named by its kubeconfig.

This module declares the provider for the registry and imports nothing heavy;
its code is in provider.py, imported only when a cluster is asked for.
"""

from trainjob_conformance.cluster.provider import (
    KUBECONFIG,
    KUBECONFIG_OPTION,
    MANIFESTS_OPTION,
    TEXT,
    ProviderKind,
    ProviderOption,
)

PROVIDER = ProviderKind(
    name="existing",
    summary="your cluster, through --kubeconfig (never the current context)",
    module="trainjob_conformance.cluster.existing.provider",
    options=(
        ProviderOption(
            KUBECONFIG_OPTION,
            kind=KUBECONFIG,
            help="kubeconfig of the cluster for --cluster existing",
            required="--cluster existing needs --kubeconfig PATH "
            "(the current kubectl context is never used)",
        ),
        # `upgrade --manifests DIR` sets it; the provider reads and checks the
        # directory itself (cluster/releases/user_manifests.py).
        ProviderOption(
            MANIFESTS_OPTION,
            kind=TEXT,
            help="the new releases' manifests as the cluster's installer renders them",
            on_command_line=False,
        ),
    ),
    # A cluster with a run directory is one an embedded `up`, `prove` or a kept
    # run started on this host (its handle's built_by says which): a worker
    # beside it is as reachable as beside the run's own.
    peer="embedded",
    proves=True,
    # Where its controllers run as the releases' manifests install them
    # (cluster/existing/upgrade.py says what it refuses).
    upgrades=True,
)
