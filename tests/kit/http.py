"""What the test fakes of JSON HTTP APIs share: a quiet request handler that answers in JSON."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """A ``BaseHTTPRequestHandler`` whose ``reply`` sends ``payload`` as JSON with its length, and
    that logs nothing (the fakes' requests would drown pytest's output)."""

    def reply(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass
