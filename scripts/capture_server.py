"""A loopback HTTP server that records what the real SDKs send, for the scripts that run them offline.

Used by render_fixtures.py and check_guard_examples.py. Stdlib only: both run in
`.venv-fixtures`, which does not install citegate.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class CaptureServer:
    """Records every request body byte for byte and answers with `respond(path, request)`: a subclass says what."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep the script's output clean
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.bodies.append((self.path, raw))
                body = outer.respond(self.path, json.loads(raw))
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_port}"

    def respond(self, path: str, request: dict) -> dict | None:
        """The response body for a request to `path`, or None for a 404."""
        raise NotImplementedError

    def shutdown(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
