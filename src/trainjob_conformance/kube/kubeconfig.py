"""Self-contained kubeconfigs, for consumers that refuse file references."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

_FILE_TO_DATA = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}


def flattened(kubeconfig: Path) -> str:
    """The kubeconfig with every referenced file inlined, as `kubectl config view --flatten`.

    Kueue's MultiKueue, for one, rejects certificate file paths in a worker's kubeconfig.
    """
    config = yaml.safe_load(kubeconfig.read_text())
    base = kubeconfig.parent
    for section, key in (("clusters", "cluster"), ("users", "user")):
        for entry in config.get(section) or []:
            body = entry.get(key) or {}
            for file_field, data_field in _FILE_TO_DATA.items():
                if file_field in body:
                    path = Path(body.pop(file_field))
                    content = (path if path.is_absolute() else base / path).read_bytes()
                    body[data_field] = base64.b64encode(content).decode()
    return str(yaml.safe_dump(config))
