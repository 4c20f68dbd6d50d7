"""Kubeconfigs: checked before use, and made self-contained for consumers that refuse file references."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from trainjob_conformance.errors import ConformanceError

_FILE_TO_DATA = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}


def check_kubeconfig(path: Path, context: str | None = None) -> None:
    """Refuse, in one line, a kubeconfig the client would choke on deep inside."""
    where = f"kubeconfig {path}"
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConformanceError(f"{where} cannot be read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConformanceError(f"{where} is not a text file; name a kubeconfig (YAML)") from None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConformanceError(f"{where} is not YAML{at}") from None
    if not isinstance(config, dict) or not config.get("clusters"):
        raise ConformanceError(f"{where} has no clusters: it is not a kubeconfig")
    wanted = context or config.get("current-context")
    if not wanted:
        raise ConformanceError(
            f"{where} has no current-context; set one (kubectl config use-context NAME "
            f"--kubeconfig {path})"
        )
    names = [c.get("name") for c in config.get("contexts") or [] if isinstance(c, dict)]
    if wanted not in names:
        raise ConformanceError(
            f"{where} has no context {wanted!r} (it has: {', '.join(map(str, names)) or 'none'})"
        )


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
