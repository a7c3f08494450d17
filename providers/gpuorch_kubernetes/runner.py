"""``PodRunner``: the Runner port through ``pods/exec`` (``kubectl exec``), for the agent in a pod.

The pod's command (``podscripts.BOOTSTRAP``) waits for the agent; ``start`` places it (the agent
bundle, agent.json and the workdir, one tar over exec's stdin, claimed once), and every later call
is one exec of ``podscripts.PODIO`` reading or writing one file of the run dir. Nothing of the
job's (its name, command, env) is ever in an argv: it travels inside agent.json. Every failure to
reach the pod (not running yet, gone, the API unreachable) is a ``RunnerUnavailable``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from gpuorch.agent import limits
from gpuorch.agent.protocol import (
    CONFIG_FILE,
    HEARTBEAT_FILE,
    JOB_LOG,
    STATUS_FILE,
    STOP_FILE,
    AgentConfig,
    AgentStatus,
    NoticeSource,
    status_from_bytes,
)
from gpuorch.runners.bundle import agent_bundle
from gpuorch.runners.port import Runner, RunnerUnavailable
from gpuorch.runners.workdir import check_workdir

from .podscripts import MISSING, PODIO, SHUTDOWN_COMMAND

CONTAINER = "gpuorch"
EXEC_TIMEOUT_S = 120.0


class PodRunner(Runner):
    """Drives the agent in pod ``name`` of ``namespace`` through ``client`` (a lightkube Client)."""

    def __init__(self, client: Any, namespace: str, name: str, python: str) -> None:
        self.client, self.namespace, self.name, self.python = client, namespace, name, python

    def __repr__(self) -> str:
        return f"PodRunner({self.namespace}/{self.name})"

    def _exec(self, what: str, args: list[str], stdin: bytes = b"") -> tuple[int, bytes, bytes]:
        import httpx2
        from lightkube import ApiError

        try:
            r = self.client.exec(self.name, namespace=self.namespace, container=CONTAINER,
                                 command=[self.python, "-c", PODIO, *args], stdin=stdin, stdout=True, stderr=True,
                                 decode=None, timeout=EXEC_TIMEOUT_S)
        except ApiError as e:
            raise RunnerUnavailable(f"{self!r}: {what}: {e.status.message or e}") from None
        except (httpx2.HTTPError, OSError) as e:
            raise RunnerUnavailable(f"{self!r}: {what}: {type(e).__name__}: {e}") from None
        return r.exit_code, r.stdout or b"", r.stderr or b""

    def _read(self, name: str, offset: int, limit: int) -> bytes | None:
        code, out, err = self._exec(f"read {name}", ["read", name, str(offset), str(limit)])
        if code == MISSING:
            return None
        if code != 0:
            raise RunnerUnavailable(f"{self!r}: read {name}: exit {code}: {err.decode(errors='replace')[-300:]}")
        return out

    def _write(self, name: str, data: bytes, *, if_absent: bool = False) -> None:
        code, _, err = self._exec(f"write {name}", ["write", name, *(["--if-absent"] if if_absent else [])], data)
        if code != 0:
            raise RunnerUnavailable(f"{self!r}: write {name}: exit {code}: {err.decode(errors='replace')[-300:]}")

    # -- the Runner port ---------------------------------------------------------------------
    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """Place the agent; the pod's bootstrap starts it. Idempotent (agent.json is claimed once)."""
        if self._exec("look for the agent", ["exists", CONFIG_FILE])[0] == 0:
            return
        config = dataclasses.replace(config, notice=NoticeSource(kind="file", path="notice.json"),
                                     shutdown_command=config.shutdown_command or SHUTDOWN_COMMAND)
        code, _, err = self._exec("start the agent", ["put"], _pack(config, workdir))
        if code != 0:
            raise RunnerUnavailable(f"{self!r}: placing the agent failed (exit {code}): "
                                    f"{err.decode(errors='replace').strip()[-500:]}")

    def status(self) -> AgentStatus | None:
        data = self._read(STATUS_FILE, 0, limits.STATUS_MAX_BYTES + 1)
        return None if data is None else status_from_bytes(data)

    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        data = self._read(JOB_LOG, offset, limit)
        return (b"", offset) if data is None else (data, offset + len(data))

    def read_metrics(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        data = self._read("metrics.jsonl", offset, limit)
        return (b"", offset) if data is None else (data, offset + len(data))

    def heartbeat(self) -> None:
        """The heartbeat's mtime is the pod's clock, which the agent's dead-man switch compares."""
        self._write(HEARTBEAT_FILE, f"{time.time():.3f}\n".encode())

    def request_stop(self, deadline: float) -> None:
        """``stop.json``, written once: an earlier call's deadline stands."""
        self._write(STOP_FILE, json.dumps({"deadline": float(deadline)}).encode(), if_absent=True)


def _pack(config: AgentConfig, workdir: Path | None) -> bytes:
    """agent.pyz, agent.json and ``work/<workdir's files>`` as one gzipped tar (owners dropped)."""
    if workdir is not None:
        check_workdir(Path(workdir))  # PermanentError: a FIFO, a device, an unreadable file
    _, bundle = agent_bundle()

    def anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tempfile.SpooledTemporaryFile(max_size=64 << 20) as buf:
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for name, data in (("agent.pyz", bundle), (CONFIG_FILE, config.to_json().encode())):
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
            if workdir is not None:
                for child in sorted(Path(workdir).iterdir()):
                    tar.add(child, arcname=f"work/{child.name}", filter=anonymous)
        buf.seek(0)
        return buf.read()
