"""A local GCS for tests: gcp-storage-emulator in a subprocess on 127.0.0.1 (a free port), in memory.

Shared by tests/gcs and tests/ssh (whose agents reach it from another process through
``STORAGE_EMULATOR_HOST``, with which the SDK uses no credentials). Each test makes its own bucket.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from gpuorch_gcp.store import GCSStore

_buckets = itertools.count(1)
START_TIMEOUT_S = 30.0


class EmulatorUnavailable(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GcsEmulator:
    def __init__(self, log_dir: Path) -> None:
        exe = Path(sys.executable).parent / "gcp-storage-emulator"
        self.port = _free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self.log = log_dir / "gcs-emulator.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [str(exe), "start", "--host", "127.0.0.1", "--port", str(self.port), "--in-memory"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        self._wait_until_listening()
        self.client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                     client_options={"api_endpoint": self.endpoint_url})

    def _wait_until_listening(self) -> None:
        """Poll the port until the emulator accepts connections (or exits, or takes too long)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EmulatorUnavailable(f"gcp-storage-emulator exited: {self.log.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise EmulatorUnavailable(f"gcp-storage-emulator did not listen on {self.port}: {self.log.read_text()[-2000:]}")

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to use this GCS: the SDK's emulator variable (no credentials then)."""
        return {"STORAGE_EMULATOR_HOST": self.endpoint_url}

    def new_bucket(self) -> str:
        name = f"gpuorch-test-{next(_buckets)}"
        self.client.create_bucket(name)
        return name

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_NAME = re.compile(rb'"name":\s*"((?:[^"\\]|\\.)*)"')


class Requests:
    """The HTTP requests a store's client sends for objects, as ``(method, path, query, name)``.

    The object name is read from the URL (reads, deletes) or, for uploads, from the JSON
    metadata at the start of the request body (multipart uploads and resumable-session starts).
    """

    def __init__(self, store: GCSStore) -> None:
        self.calls: list[tuple[str, str, str, str]] = []
        self._lock = threading.Lock()
        session = store.client._http
        send = session.request

        def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            self._record(method, url, kwargs.get("data"))
            return send(method, url, *args, **kwargs)

        session.request = request

    def _record(self, method: str, url: str, body: Any) -> None:
        path, _, query = url.partition("?")
        if re.search(r"/storage/v1/b/[^/]+$", path) and method == "GET":
            return  # bucket metadata: newer SDKs fetch it once per client in a background thread
        name = ""
        if isinstance(body, (bytes, str)) and "uploadType=" in query:
            head = body[:4096].encode() if isinstance(body, str) else body[:4096]
            match = _NAME.search(head)
            name = json.loads(b'"' + match.group(1) + b'"') if match else ""
        elif "/o/" in path:
            name = unquote(path.split("/o/", 1)[1])
        with self._lock:
            self.calls.append((method, path, query, name))

    def uploads(self) -> list[str]:
        """Names of the objects whose upload was started (one per written object), in order."""
        return [name for method, _, query, name in self.calls
                if method == "POST" and re.search(r"uploadType=(multipart|resumable)", query)]

    def count(self, method: str, where: str = "", query: str = "") -> int:
        return sum(1 for m, p, q, _ in self.calls if m == method and where in p and query in q)

    def clear(self) -> None:
        with self._lock:
            self.calls.clear()
