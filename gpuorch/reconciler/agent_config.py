"""The agent's configuration for one attempt, built from the job spec (pure)."""

from __future__ import annotations

from gpuorch.agent.container import ContainerConfig
from gpuorch.agent.protocol import AgentConfig
from gpuorch.jobs.spec import JobSpec
from gpuorch.store.models import Attempt, Job


def checkpoint_url(spec: JobSpec, job: Job) -> str | None:
    """Each job gets its own prefix under the store URL the user gave."""
    if spec.checkpoint is None:
        return None
    return f"{spec.checkpoint.store.rstrip('/')}/{job.name}-{job.id}"


def distributed_env(spec: JobSpec, offer_gpus: int) -> dict[str, str]:
    """How the job is to use its GPUs: GPUORCH_DISTRIBUTED (none, ddp, fsdp, zero2, zero3, tp) and
    GPUORCH_DISTRIBUTED_DEGREE (the GPUs it spans on this attempt's instance; none: 1)."""
    d = spec.strategy
    return {"GPUORCH_DISTRIBUTED": d.strategy, "GPUORCH_DISTRIBUTED_DEGREE": str(d.gpus_on(max(offer_gpus, 1)))}


def agent_config(job: Job, spec: JobSpec, attempt: Attempt, *, predecessor_deadline: float | None = None,
                 heartbeat_timeout_s: float | None = None, volume_id: str | None = None) -> AgentConfig:
    """``volume_id``: the job's volume, attached to this attempt's instance (the runner mounts it)."""
    ckpt = spec.checkpoint
    cfg = AgentConfig(
        job_id=job.id or 0,
        attempt=attempt.number,
        job_name=job.name,
        run=spec.run,
        setup=spec.setup,
        # The runner mounts the job's volume there before starting the agent; see docs/aws.md.
        env=dict(spec.env) | ({"GPUORCH_VOLUME_DIR": spec.volume.mount} if spec.volume else {})
        | distributed_env(spec, attempt.gpu_count),
        checkpoint_url=checkpoint_url(spec, job),
        predecessor_attempt=attempt.predecessor,
        predecessor_deadline=predecessor_deadline,
        heartbeat_timeout_s=heartbeat_timeout_s,
        volume_id=volume_id if spec.volume else None,
        volume_dir=spec.volume.mount if spec.volume else None,
        # The runtime and its host flags are the runner's to fill in (LocalRunner, SSH: detected).
        container=ContainerConfig(image=spec.image) if spec.image else None,
    )
    if ckpt is not None:
        cfg.checkpoint_dir = ckpt.dir
        cfg.sync_interval_s = ckpt.interval
        cfg.keep_checkpoints = ckpt.keep
        cfg.signal = ckpt.signal
    return cfg
