"""``gpuorch dev NAME``: the dev box's spec, and starting a box or starting a held one again.

A dev box is an ordinary job (placed, capped, billed, preempted and recovered like any other)
with ``kind: dev`` and ``keepalive_command`` as its command. It runs on demand unless asked for
spot. ``start`` queues a new box; for a box that idle stop holds (``reconciler/decide/limits.py``:
job ``held``, its volume kept) it queues that same job again, so the next box gets its volume.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gpuorch.devbox.keepalive import keepalive_command
from gpuorch.errors import UserInputError
from gpuorch.jobs.lifetime import DEFAULT_IDLE_GPU_UTIL

if TYPE_CHECKING:
    from gpuorch.jobs.service import JobService
    from gpuorch.jobs.spec import JobSpec

SPOT_WARNING = ("a spot dev box can be reclaimed at any time with a short notice; keep your work on its volume "
                "(--volume) or in git")
_PARAMS = re.compile(r"^\d+(\.\d+)?\s*[kKmMbBtT]?$|^\d+(\.\d+)?e\d+$")  # 7B, 350M, 70e9: a size, not a preset
DEFAULT_MOUNT = "/data"
LIVE = ("queued", "starting", "running", "recovering")


@dataclass(frozen=True)
class BoxRequest:
    """What ``gpuorch dev`` was asked for; ``spec`` turns it into a job spec (a mapping)."""

    name: str
    gpu: str | None = None
    model: str | None = None  # a size (8B) or an architecture preset (llama-3-8b)
    method: str = "qlora"  # what the model is sized for (the GPU must hold it)
    image: str | None = None
    volume: str | None = None  # SIZE or SIZE:MOUNT (100GB:/data)
    spot: bool = False
    idle_stop: str | None = None
    idle_gpu_util: float = DEFAULT_IDLE_GPU_UTIL  # percent: a GPU below it counts as idle
    max_duration: str | None = None
    providers: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    def spec(self) -> dict[str, Any]:
        if self.gpu and self.model:
            raise UserInputError("gpuorch dev: give --gpu or --model, not both (--model sizes the GPU for you)")
        data: dict[str, Any] = {"name": self.name, "kind": "dev", "run": keepalive_command(self.idle_gpu_util),
                                "idle_gpu_util": self.idle_gpu_util,
                                "spot_policy": "spot" if self.spot else "on-demand", "env": dict(self.env)}
        if self.gpu:
            data["resources"] = {"gpu": self.gpu}
        if self.model:
            key = "params" if _PARAMS.match(self.model.strip()) else "preset"
            data["model"] = {key: self.model.strip(), "method": self.method}
        if self.image:
            data["image"] = self.image
        if self.volume:
            size, _, mount = self.volume.partition(":")
            data["volume"] = {"size": size, "mount": mount or DEFAULT_MOUNT}
        for key in ("idle_stop", "max_duration"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.providers:
            data["providers"] = list(self.providers)
        return data


def parse(request: BoxRequest) -> JobSpec:
    """The request as a validated spec; UserInputError (one line naming the option) if it is not."""
    from gpuorch.jobs.spec import parse_spec

    try:
        return parse_spec(request.spec(), "gpuorch dev")
    except UserInputError as e:  # name the options, not the spec keys they fill
        text = str(e)
        for key, option in (("idle_stop", "--idle-stop"), ("max_duration", "--max-duration"),
                            ("resources.gpu", "--gpu"), ("volume", "--volume"), ("image", "--image")):
            text = text.replace(f"gpuorch dev: {key}", f"gpuorch dev: {option} ({key})", 1)
        raise UserInputError(text) from None


def start(service: JobService, request: BoxRequest, now: datetime) -> dict[str, Any]:
    """Queue the box ``request`` names, or the held box of that name again; the answer says which
    (``started``: ``new``, ``again`` or ``running``). Raises UserInputError, storing nothing, for
    a bad request or a name that a job (not a box) still uses."""
    spec = parse(request)
    current = _newest(service, request.name)
    if current is not None and current["status"] in LIVE + ("held",):
        if current.get("kind") != "dev":
            raise UserInputError(f"gpuorch dev: {request.name!r} is a {current['status']} job, not a dev box; choose "
                                 "another name, or cancel that job first")
        if current["status"] == "held":
            again = restart(service, int(current["id"]), now)
            return {**again, "started": "again"}
        return {"id": current["id"], "name": current["name"], "status": current["status"], "started": "running"}
    answer = service.submit(spec, "gpuorch dev")
    return {**answer, "started": "new"}


def restart(service: JobService, job_id: int, now: datetime) -> dict[str, Any]:
    """Queue a held dev box again (its volume is still the job's): status ``queued``, its lease
    released. Nothing of the box runs while it is held, so no daemon is acting on it."""
    from gpuorch.jobs import events
    from gpuorch.store.models import Job, JobStatus
    from gpuorch.store.wake import notify

    with service.store.write() as s:
        job = s.get(Job, job_id)
        if job is None or job.status != JobStatus.HELD:
            raise UserInputError(f"gpuorch dev: box {job_id} is no longer held; see gpuorch status {job_id}")
        job.status, job.message, job.not_before, job.updated_at = JobStatus.QUEUED, "started again by gpuorch dev", \
            None, now
        # Back to the queue: the daemon holding the box's lease keeps its row while only the
        # holder writes it (observe/leases.py); released, the job is claimed and read afresh.
        job.lease_owner, job.lease_expires = None, None
        events.record(s, now, "devbox_restart", "dev box started again (gpuorch dev)", job_id=job.id)
        answer = {"id": job.id, "name": job.name, "status": job.status.value, "warning": None}
    notify(service.store)
    return answer


def _newest(service: JobService, name: str) -> dict[str, Any] | None:
    from gpuorch.errors import UnknownJob

    try:
        return service.job(name)
    except UnknownJob:
        return None
