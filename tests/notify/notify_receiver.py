"""A webhook receiver on 127.0.0.1, as a user's endpoint would be: an ``http.server`` thread that
verifies each request with the ``standardwebhooks`` reference code (the Standard Webhooks
specification, https://www.standardwebhooks.com/, and its Python library's ``Webhook.verify``)
before it answers. It can be told to answer a status a number of times, or to hang (a timeout),
and records every request it was sent, verified or not."""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError


def new_secret(n: int = 32) -> str:
    return "whsec_" + base64.b64encode(os.urandom(n)).decode()


@dataclass
class Received:
    id: str | None
    headers: dict[str, str]
    body: bytes
    verified: Any  # the parsed JSON when the signature verified, else None
    error: str | None
    answered: int
    path: str = ""  # the request's path and query (routes told apart by a query)


@dataclass
class Receiver:
    secret: str | None = None  # None: no verification (apprise's json:// posts are not signed)
    script: list[int] = field(default_factory=list)  # statuses to answer first, in order; then 200
    hang_s: float = 0.0  # while > 0, each request waits this long before answering (a timeout)
    got: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                verified, error = None, None
                if receiver.secret is not None:
                    try:
                        verified = Webhook(receiver.secret).verify(body, headers)
                    except WebhookVerificationError as e:
                        error = str(e)
                else:
                    verified = json.loads(body)
                with receiver.lock:
                    status = receiver.script.pop(0) if receiver.script else 200
                    hang = receiver.hang_s
                if hang:
                    time.sleep(hang)  # the client's timeout ends the request first
                if error is not None:
                    status = 401
                with receiver.lock:
                    receiver.got.append(Received(headers.get("webhook-id"), headers, body, verified, error, status,
                                                 self.path))
                try:
                    self.send_response(status)
                    self.send_header("content-length", "0")
                    self.end_headers()
                except OSError:  # the client gave up (timeout)
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/gpuorch"

    def ok(self) -> list[Received]:
        """Requests that verified and were answered 2xx: what the user's endpoint accepted."""
        with self.lock:
            return [r for r in self.got if r.verified is not None and 200 <= r.answered < 300]

    def all(self) -> list[Received]:
        with self.lock:
            return list(self.got)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
