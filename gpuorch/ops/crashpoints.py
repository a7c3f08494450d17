"""Named crash points: the daemon SIGKILLs itself at chosen lines, for crash-recovery tests.

``crashpoint("launch.called")`` does nothing unless ``$GPUORCH_CRASHPOINTS`` asks for it, e.g.::

    GPUORCH_CRASHPOINTS="seed=7,p=0.01,launch.called=0.3"

``seed`` seeds the draws (default: from the pid), ``p`` is the probability for every point, and
``NAME=P`` (shell-style patterns allowed, ``launch.*=0.2``) sets one point's probability. When a
draw hits, the point's name is appended to ``$GPUORCH_CRASHPOINTS_LOG`` (if set) and the process
sends itself SIGKILL: no cleanup, no lease release, no flushed buffers, as a power cut would.

The points the reconciler passes (``gpuorch.reconciler``: reconciler.py, launching.py,
recording.py, orphans.py), in order of a pass:
``pass.observed``, ``orphan.terminated``, ``launch.intent`` (attempt row committed, provider not yet called),
``launch.called`` (the provider created the instance, nothing recorded yet), ``launch.recorded``,
``agent.started``, ``progress.recorded``, ``drain.recorded``, ``terminate.called`` (the instance
is going, its attempt not yet ended), ``end.recorded``, ``pass.done``; and the warm pool's
(``reconciler/apply/warm.py``, spec ``keep_warm``): ``warm.kept`` (an ended attempt's instance
handed over, not yet recycled), ``warm.leased`` (a job's attempt recorded on a warm instance, its
agent not started), ``warm.terminated`` (a release's terminate called, its period not yet closed);
and a volume given at launch's (``reconciler/apply/volumes.py``, before ``launch.called``):
``volume.intent`` (its place recorded, nothing made), ``volume.created`` (made, not yet recorded).
"""

from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

ENV = "GPUORCH_CRASHPOINTS"
LOG_ENV = "GPUORCH_CRASHPOINTS_LOG"


@dataclass
class CrashPlan:
    default: float = 0.0
    points: dict[str, float] = field(default_factory=dict)  # name or pattern -> probability
    seed: int | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed if self.seed is not None else os.getpid() ^ time.time_ns())

    @classmethod
    def parse(cls, text: str) -> CrashPlan:
        """``seed=N,p=P,NAME=P,...``; ValueError naming the bad item."""
        plan = cls()
        for item in filter(None, (x.strip() for x in text.split(","))):
            key, sep, value = item.partition("=")
            try:
                number = float(value)
            except ValueError:
                number = float("nan")
            if not sep or number != number:
                raise ValueError(f"{ENV}: cannot read {item!r}; write seed=N, p=P or NAME=P")
            if key == "seed":
                plan.seed = int(number)
            elif key == "p":
                plan.default = number
            else:
                plan.points[key] = number
        plan.__post_init__()
        return plan

    def probability(self, name: str) -> float:
        if name in self.points:
            return self.points[name]
        return next((p for pat, p in self.points.items() if fnmatchcase(name, pat)), self.default)


_UNSET = object()
_plan: object = _UNSET


def active() -> CrashPlan | None:
    """The plan from the environment, read once per process."""
    global _plan
    if _plan is _UNSET:
        text = os.environ.get(ENV, "")
        _plan = CrashPlan.parse(text) if text else None
    return _plan  # type: ignore[return-value]


def reset() -> None:
    """Read the environment again on the next call (tests)."""
    global _plan
    _plan = _UNSET


def crashpoint(name: str) -> None:
    """SIGKILL this process here if the plan's draw for ``name`` says so; otherwise nothing."""
    plan = active()
    if plan is None:
        return
    p = plan.probability(name)
    if p <= 0 or plan.rng.random() >= p:
        return
    log = os.environ.get(LOG_ENV)
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{time.time():.3f} {os.getpid()} {name}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
