"""Azure's Scheduled Events endpoint (instance metadata), faked on 127.0.0.1 for the notice tests.

Like the real one it answers 400 without ``Metadata: true``, and only on
``/metadata/scheduledevents`` with an ``api-version``; ``document`` is what it returns.
"""

from __future__ import annotations

import email.utils
import threading
import uuid
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.kit.http import JsonHandler


def rfc1123(epoch: float) -> str:
    return email.utils.formatdate(epoch, usegmt=True)  # "Mon, 19 Sep 2016 18:29:47 GMT"


def event(kind: str, not_before: float | None, status: str = "Scheduled", resources: list[str] | None = None) -> dict:
    """One event as the service lists it (``NotBefore`` is empty once an event has started)."""
    return {"EventId": str(uuid.uuid4()).upper(), "EventType": kind, "ResourceType": "VirtualMachine",
            "Resources": resources or ["gpuorch-c0ffee000001-7-1"], "EventStatus": status,
            "NotBefore": rfc1123(not_before) if not_before is not None else "", "Description": "",
            "EventSource": "Platform", "DurationInSeconds": -1}


class FakeScheduledEvents:
    def __init__(self) -> None:
        self.document: dict = {"DocumentIncarnation": 0, "Events": []}
        self.without_header = 0  # requests refused for a missing Metadata: true
        fake = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if self.headers.get("Metadata") != "true":
                    fake.without_header += 1
                    return self.reply(400, {"error": "Bad request. Required metadata header not specified"})
                if url.path != "/metadata/scheduledevents" or "api-version" not in parse_qs(url.query):
                    return self.reply(404, {"error": "Not found"})
                self.reply(200, fake.document)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def announce(self, *events: dict) -> None:
        self.document = {"DocumentIncarnation": self.document["DocumentIncarnation"] + 1, "Events": list(events)}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
