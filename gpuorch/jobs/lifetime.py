"""How long a job may live: the spec's ``kind``, ``max_duration`` and ``idle_stop`` (docs/dev-boxes.md).

``JobSpec`` inherits these fields from ``Lifetime``, so every job, sweep trial and dev box has
them and ``parse_spec`` reports a bad one as one line naming the field and the fix:

- ``kind``: ``job`` (runs its command to the end) or ``dev`` (an interactive box: ``gpuorch dev``;
  its command keeps the box up until it is stopped; ``status`` shows the kind);
- ``max_duration``: the most running time the job may have, all attempts together; the daemon
  then ends it with a final checkpoint (``reconciler/decide/limits.py``);
- ``idle_stop``: a dev box only: stop it once no SSH session was open and GPU utilisation stayed
  below ``idle_gpu_util`` percent for that long; its volume is kept.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from gpuorch.bounds import Number
from gpuorch.jobs import validate as v_
from gpuorch.jobs.gpu_request import Strict
from gpuorch.units import parse_duration_s

Seconds = Annotated[float, BeforeValidator(parse_duration_s)]
DEFAULT_IDLE_GPU_UTIL = 5.0  # percent: below it the GPU counts as idle (a notebook kernel at rest)


class Lifetime(Strict):
    """The lifetime fields of ``JobSpec`` (see the module docstring)."""

    kind: Literal["job", "dev"] = "job"
    max_duration: Seconds | None = Field(default=None, gt=0, le=v_.MAX_SECONDS)  # running time, all attempts
    idle_stop: Seconds | None = Field(default=None, gt=0, le=v_.MAX_SECONDS)  # dev boxes: stop when idle this long
    idle_gpu_util: Number = Field(default=DEFAULT_IDLE_GPU_UTIL, ge=0, le=100)  # percent: below it, the GPU is idle

    @property
    def reads_clock(self) -> bool:
        """Whether deciding on the running job reads the clock (its limits grow with time)."""
        return self.max_duration is not None or self.idle_stop is not None

    @model_validator(mode="after")
    def _idle_stop_on_dev_only(self) -> Lifetime:
        if self.idle_stop is not None and self.kind != "dev":
            raise ValueError("idle_stop: only a dev box (kind: dev, gpuorch dev) stops when idle; remove idle_stop "
                             "or use max_duration to bound a job")
        return self


def duration_text(seconds: float) -> str:
    """``5400`` -> ``1h30m``, ``90`` -> ``1m30s``, ``45`` -> ``45s``: a limit as users write it."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{sec}s" if sec or not (h or m) else ""]
    return "".join(parts)

