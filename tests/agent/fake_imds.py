"""A fake EC2 instance metadata service (IMDSv2 only) on 127.0.0.1 for the AWS notice tests."""

from __future__ import annotations

import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ACTION_PATH = "/latest/meta-data/spot/instance-action"


class FakeImds:
    def __init__(self) -> None:
        self.action: dict | None = None  # what instance-action returns; None -> 404
        self.tokens: set[str] = set()
        self.unauthorized = 0  # GETs rejected for a missing or unknown token
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(imds: FakeImds) -> type:
    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                return self._reply(400, b"")
            token = secrets.token_hex(8)
            imds.tokens.add(token)
            self._reply(200, token.encode())

        def do_GET(self) -> None:
            if self.headers.get("X-aws-ec2-metadata-token") not in imds.tokens:
                imds.unauthorized += 1
                return self._reply(401, b"")
            if self.path != ACTION_PATH or imds.action is None:
                return self._reply(404, b"Not Found")
            self._reply(200, json.dumps(imds.action).encode())

        def _reply(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # keep test output clean
            pass

    return Handler
