"""The embedded provider: a kwokctl control plane and the managers as host processes.

This module declares the provider for the registry and imports nothing heavy;
its code is in provider.py, imported only when a cluster is asked for.
"""

from trainjob_conformance.cluster.embedded.nodes import NODE_LABEL_MODES
from trainjob_conformance.cluster.provider import (
    AUDIT_LOG_OPTION,
    PATH,
    TEXT,
    WINDOW_AUDIT_OPTION,
    ProviderKind,
    ProviderOption,
)

NODE_LABELS = "node-labels"

PROVIDER = ProviderKind(
    name="embedded",
    summary="built from upstream here, managers as host processes (default)",
    module="trainjob_conformance.cluster.embedded.provider",
    options=(
        ProviderOption(
            NODE_LABELS,
            choices=NODE_LABEL_MODES,
            default="cloud",
            help="embedded cluster: the fake nodes carry only the labels a cloud node has "
            "(cloud, default) or also kwok's type=kwok (kwok)",
            on_run=False,
        ),
        ProviderOption(
            AUDIT_LOG_OPTION,
            kind=PATH,
            help="where the API server's audit log of writes is kept",
            on_command_line=False,
        ),
        ProviderOption(
            WINDOW_AUDIT_OPTION,
            kind=TEXT,
            help="the API server keeps an audit log of the custom resources' writes",
            on_command_line=False,
        ),
    ),
    peer="embedded",
    proves=True,
    needs_build_cache=True,
    upgrades=True,
)
