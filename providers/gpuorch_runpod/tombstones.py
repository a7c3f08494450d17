"""Pods this installation terminated, kept after RunPod forgot them (it lists no terminated pod):
a launch repeated for a finished attempt, after a crash or a restart, gets its ended pod back
instead of a second one, and ``get`` still answers for it. A JSON file replaced whole (temp file
+ rename); entries older than ``KEEP_S`` are dropped, so it stays small. No file (no home): in memory.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from gpuorch.provider import Instance, InstanceState

KEEP_S = 30 * 86400.0  # longer than any attempt is left unclosed


class Tombstones:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._mem: dict[str, dict[str, object]] = {}

    def _load(self) -> dict[str, dict[str, object]]:
        if self.path is None:
            return self._mem
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self, data: dict[str, dict[str, object]]) -> None:
        if self.path is None:
            self._mem = data
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tombstones.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def put(self, token: str, inst: Instance) -> None:
        """Record ``inst`` as ended (kept PREEMPTED if the market reclaimed it, else TERMINATED)."""
        state = inst.state if inst.state is InstanceState.PREEMPTED else InstanceState.TERMINATED
        ended = inst.ended_at or datetime.now(UTC)
        record = inst.model_copy(update={"state": state, "ended_at": ended, "host": None, "port": None,
                                         "state_reason": inst.state_reason or "terminated-by-request"})
        now = time.time()
        with self._lock:
            data = {k: v for k, v in self._load().items() if now - float(v.get("at", 0)) < KEEP_S}  # type: ignore[arg-type]
            data[token] = {"at": now, "instance": record.model_dump(mode="json")}
            self._save(data)

    def get(self, token: str) -> Instance | None:
        with self._lock:
            entry = self._load().get(token)
        return Instance.model_validate(entry["instance"]) if entry else None

    def by_id(self, instance_id: str) -> Instance | None:
        with self._lock:
            entries = list(self._load().values())
        for e in entries:
            inst = e.get("instance")
            if isinstance(inst, dict) and inst.get("id") == instance_id:
                return Instance.model_validate(inst)
        return None
