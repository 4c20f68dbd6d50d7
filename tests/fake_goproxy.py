"""A stand-in Go module proxy on 127.0.0.1: fixed answers per path, requests recorded.

Only the harness's own questions to a proxy are faked here; builds and
clusters never see it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class FakeProxy:
    url: str = ""
    answers: dict[str, tuple[int, str]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def lists(self, module: str, *versions: str) -> None:
        self.answers[f"/{module}/@v/list"] = (200, "".join(f"{v}\n" for v in versions))

    def has(self, module: str, version: str) -> None:
        self.answers[f"/{module}/@v/{version}.info"] = (200, f'{{"Version":"{version}"}}')


@pytest.fixture(name="fake_goproxy")
def fake_goproxy_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProxy]:
    """GOPROXY points here; anything not in `answers` gets the proxy's 404."""
    proxy = FakeProxy()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            proxy.requests.append(self.path)
            status, body = proxy.answers.get(self.path, (404, "not found: unknown revision"))
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("GOPROXY", f"{proxy.url},direct")
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
