# Sourced by the entry scripts: a project venv with the harness installed.
# Idempotent; a second run only checks.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
python="${PYTHON:-python3}"

if ! command -v go >/dev/null 2>&1; then
  echo "trainjob-conformance: error: no Go toolchain on PATH; install Go >= 1.26 (https://go.dev/doc/install)" >&2
  exit 2
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "[trainjob-conformance] creating $venv" >&2
  "$python" -m venv "$venv"
fi
stamp="$venv/.installed-$(cat "$repo/pyproject.toml" | cksum | cut -d' ' -f1)"
if [ ! -f "$stamp" ]; then
  echo "[trainjob-conformance] installing the harness and its dependencies" >&2
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -e "$repo[dev]"
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
cd "$repo"
