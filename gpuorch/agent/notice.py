"""Preemption notice sources: each is a tiny class whose ``poll()`` returns a deadline or None.

``poll()`` never raises and never blocks for long: a source that cannot be read right now
(metadata service hiccup, half-written file) answers None and is asked again next time.

Pollers are found by ``NoticeSource.kind`` in the ``gpuorch.notices`` registry (entry points;
the bundled table on an instance): ``none`` and ``file`` live here with the shared
``MetadataNotice`` base; each cloud's poller lives in its adapter (``gpuorch_aws.notice``...).
Stdlib only (Python 3.8+): shipped to instances.
"""

from __future__ import annotations

import email.utils
import json
import logging
import time
import urllib.request
from pathlib import Path
from typing import Dict, Protocol, Type

from gpuorch.agent.protocol import NoticeSource
from gpuorch.checkpoint.registry import NOTICE_PLUGINS

log = logging.getLogger("gpuorch.agent")


class NoticePoller(Protocol):
    """What a ``gpuorch.notices`` entry point names: a class with ``from_source`` and ``poll``."""

    def poll(self) -> float | None:
        """The epoch deadline of an announced preemption, or None if none is announced."""


class NoNotice:
    """kind ``none``: never a notice."""

    @classmethod
    def from_source(cls, source: NoticeSource, rundir: Path) -> NoNotice:
        return cls()

    def poll(self) -> float | None:
        return None


class FileNotice:
    """A JSON file ``{"deadline": <epoch>}`` appears at ``path`` (local runs, simulations).

    A file without a usable ``deadline`` means "now"; a half-written one is read again later.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def from_source(cls, source: NoticeSource, rundir: Path) -> FileNotice:
        """``source.path``, relative to the run dir (default ``notice.json``)."""
        return cls(rundir / (source.path or "notice.json"))

    def poll(self) -> float | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):  # absent, or still being written
            return None
        deadline = data.get("deadline") if isinstance(data, dict) else None
        if isinstance(deadline, (int, float)) and not isinstance(deadline, bool):
            return float(deadline)
        return time.time()


class MetadataNotice:
    """A notice read from the cloud's instance metadata service: one GET per poll; the first
    deadline found is kept (the instance is going regardless). An unreachable service is warned
    about once and reads as "no notice".

    A cloud's poller subclasses it with its ``DEFAULT_URL``, ``PATH``, ``HEADERS`` and ``WHAT``
    and says how to read the answer (``_deadline_in``); ``source.url`` replaces the default.
    """

    DEFAULT_URL = ""
    PATH = ""
    HEADERS: Dict[str, str] = {}
    WHAT = ""  # for the warning

    def __init__(self, url: str | None = None, timeout_s: float = 1.0) -> None:
        self.base = (url or self.DEFAULT_URL).rstrip("/")
        self.timeout_s = timeout_s
        self._deadline: float | None = None
        self._warned = False

    @classmethod
    def from_source(cls, source: NoticeSource, rundir: Path) -> MetadataNotice:
        return cls(source.url)

    def _deadline_in(self, body: bytes) -> float | None:
        """The deadline an answer announces, or None; may raise ValueError for a garbled one."""
        raise NotImplementedError

    def poll(self) -> float | None:
        if self._deadline is not None:
            return self._deadline
        req = urllib.request.Request(self.base + self.PATH, headers=self.HEADERS)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                self._deadline = self._deadline_in(resp.read())
        except (OSError, ValueError, TypeError, AttributeError) as e:  # URLError/HTTPError are OSErrors
            if not self._warned:
                log.warning("cannot read %s from %s: %s", self.WHAT, self.base, e)
                self._warned = True
            return None
        return self._deadline


def preempt_deadline(doc: dict, now: float | None = None) -> float | None:
    """The earliest ``Preempt`` event's ``NotBefore`` in a Scheduled Events document (epoch
    seconds; ``now`` for an event without one), or None when no eviction is announced."""
    deadlines = []
    for event in doc.get("Events") or ():
        if str(event.get("EventType", "")).lower() != "preempt":
            continue
        not_before = str(event.get("NotBefore") or "").strip()
        if not_before:
            deadlines.append(email.utils.parsedate_to_datetime(not_before).timestamp())
        else:
            deadlines.append(time.time() if now is None else now)
    return min(deadlines, default=None)


def notice_kinds() -> list[str]:
    """The notice kinds this installation has a poller for."""
    return [k for k in NOTICE_PLUGINS.names() if NOTICE_PLUGINS.findable(k)]


def make_notice_source(source: NoticeSource, rundir: Path) -> NoticePoller:
    """The poller for ``source`` (its class from the ``gpuorch.notices`` registry); a relative
    file path is relative to the run dir. ValueError naming the known kinds for another."""
    if source.kind not in NOTICE_PLUGINS.table or not NOTICE_PLUGINS.findable(source.kind):
        raise ValueError(f"notice.kind {source.kind!r} is not supported; use one of {', '.join(notice_kinds())}")
    poller: Type[_FromSource] = NOTICE_PLUGINS.load(source.kind)
    return poller.from_source(source, rundir)


class _FromSource(Protocol):
    @classmethod
    def from_source(cls, source: NoticeSource, rundir: Path) -> NoticePoller: ...
