"""A registry on this machine, and the embedded cluster's binaries as OCI artifacts in one.

- `server.py`: `LocalRegistry`, Debian's `docker-registry` (distribution 2.8)
  on 127.0.0.1, started and stopped like every process of the harness;
  `binary.py` finds the program, or installs the package as root.
- `push.py`, `fetch.py`: a profile's binaries pushed as one artifact per
  component with one index per profile (the layout: `artifacts.py`), and
  fetched back into an empty build cache, every file checked against the
  index and the index against the digest the push recorded (`records.py`).
- `address.py`, `credentials.py`, `client.py`, `errors.py`: what those share
  (the URL, the Docker config, the oras client, one-line errors).

The names in a registry (below the URL's host and optional path):

    trainjob-conformance/bin/<component>:<version>   one layer per binary
    trainjob-conformance/bin-index:<profile>         index.json: each component's
                                                     manifest digest and file sha256
"""
