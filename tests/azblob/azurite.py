"""A local Azure Blob Storage for tests: Azurite (npm) on 127.0.0.1, an ephemeral port, in memory.

Shared by tests/azblob and tests/ssh (whose agents reach it from another process through
``GPUORCH_AZURE_STORAGE_CONNECTION_STRING``). ``scripts/test-services.sh`` installs it into
``.azurite/`` (needs node and npm); without it the tests that need it skip with that reason.
Each test makes its own container.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from azure.storage.blob import BlobServiceClient

REPO = Path(__file__).resolve().parents[2]
# Azurite's well-known development account: public, documented, useless anywhere else.
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
START_TIMEOUT_S = 60.0  # a bound on waiting for the port, not a sleep: it answers in ~1 s
_containers = itertools.count(1)


class AzuriteUnavailable(RuntimeError):
    """Azurite is not installed or did not start (the message says which and what to do)."""


def azurite_blob_command() -> str:
    local = REPO / ".azurite" / "node_modules" / ".bin" / "azurite-blob"
    if local.exists():
        return str(local)
    found = shutil.which("azurite-blob")
    if found:
        return found
    raise AzuriteUnavailable("Azurite is not installed: run ./scripts/test-services.sh (it needs node and npm)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Azurite:
    def __init__(self, workdir: Path) -> None:
        command = azurite_blob_command()
        self.port = _free_port()
        self.log = workdir / "azurite.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [command, "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--silent",
                 "--disableTelemetry", "--skipApiVersionCheck", "--inMemoryPersistence"],
                cwd=workdir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        try:
            self._wait_for_port()
        except BaseException:
            self.stop()
            raise
        self.endpoint = f"http://127.0.0.1:{self.port}/{ACCOUNT}"
        self.connection_string = (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
                                  f"BlobEndpoint={self.endpoint};")

    def _wait_for_port(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise AzuriteUnavailable(f"Azurite exited with {self.proc.returncode}: "
                                         f"{self.log.read_text(errors='replace').strip()[-500:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise AzuriteUnavailable(f"Azurite did not listen on 127.0.0.1:{self.port} "
                                             f"within {START_TIMEOUT_S:.0f} s") from None
                try:  # the poll interval: returns early if Azurite exits
                    self.proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    pass

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to use this Azurite through ``open_store``."""
        return {"GPUORCH_AZURE_STORAGE_CONNECTION_STRING": self.connection_string}

    @functools.cached_property
    def service(self) -> BlobServiceClient:
        """A plain SDK client for setting up and inspecting the emulator."""
        return BlobServiceClient.from_connection_string(self.connection_string)

    def new_container(self) -> str:
        name = f"gpuorch-test-{os.getpid()}-{next(_containers)}"
        self.service.create_container(name)
        return name

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Requests:
    """The Blob service operations a store sends, as (operation, key) pairs, recorded by the
    SDK's ``raw_request_hook``: pass ``client_options={"raw_request_hook": requests.hook}``.

    ``gate(operation, after=n)`` makes the two requests of that operation after the first ``n``
    wait for each other (a barrier): a store that sent them one after the other fails (the
    barrier breaks after 30 s) instead of passing.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self._gates: dict[str, tuple[threading.Barrier, list[int], int]] = {}
        self._lock = threading.Lock()

    def options(self) -> dict[str, Any]:
        return {"raw_request_hook": self.hook}

    def hook(self, request: Any) -> None:
        http = request.http_request
        url = urlsplit(http.url)
        query = parse_qs(url.query)
        comp, restype = query.get("comp", [""])[0], query.get("restype", [""])[0]
        key = unquote(url.path).split("/", 3)[3] if url.path.count("/") >= 3 else ""
        if http.method == "PUT":
            op = {"block": "PutBlock", "blocklist": "PutBlockList"}.get(comp, "PutBlob")
        elif http.method == "GET":
            op = "ListBlobs" if (restype, comp) == ("container", "list") else "GetBlob"
        else:
            op = {"HEAD": "GetBlobProperties", "DELETE": "DeleteBlob"}.get(http.method, http.method)
        if restype == "container" and op != "ListBlobs":
            op += "Container"
        barrier = None
        with self._lock:
            self.calls.append((op, key))
            if op in self._gates:
                gate, seen, after = self._gates[op]
                seen[0] += 1
                if after < seen[0] <= after + 2:
                    barrier = gate
        if barrier is not None:
            barrier.wait()  # BrokenBarrierError after its timeout: the two were not in flight together

    def gate(self, operation: str, after: int = 0) -> None:
        self._gates[operation] = (threading.Barrier(2, timeout=30), [0], after)

    def count(self, operation: str) -> int:
        return sum(1 for op, _ in self.calls if op == operation)

    def keys(self, *operations: str) -> list[str]:
        return [key for op, key in self.calls if op in operations]

    def clear(self) -> None:
        self.calls.clear()
