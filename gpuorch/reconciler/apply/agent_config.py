"""The agent's configuration for one attempt, built from the job spec (pure), and the
checkpoints the daemon recorded for a job stored before namespacing (``recorded_checkpoints``)."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from gpuorch.agent.container import ContainerConfig, parse_image
from gpuorch.agent.protocol import AgentConfig
from gpuorch.checkpoint.namespace import job_prefix
from gpuorch.jobs.spec import JobSpec
from gpuorch.provider.port import Provider
from gpuorch.store.models import Attempt, Checkpoint, Job


def checkpoint_url(spec: JobSpec, job: Job, installation: str) -> str | None:
    """Each job gets its own prefix under the store URL the user gave, inside its installation's:
    ``<store>/<installation>/<name>-<id>`` (docs/checkpoints.md), so installations sharing a
    store never meet. ValueError for an installation id that cannot name a prefix."""
    if spec.checkpoint is None:
        return None
    return f"{spec.checkpoint.store.rstrip('/')}/{job_prefix(installation, job.name, job.id or 0)}"


def legacy_checkpoint_url(spec: JobSpec, job: Job) -> str | None:
    """The old un-namespaced prefix of a job stored before namespacing (schema 9 kept it), or None."""
    if spec.checkpoint is None or not job.checkpoint_prefix:
        return None
    return f"{spec.checkpoint.store.rstrip('/')}/{job.checkpoint_prefix}"


def recorded_checkpoints(s: Session, job_id: int) -> list[dict[str, Any]]:
    """The checkpoints the daemon recorded durable for the job (``RecordedCheckpoint`` as dicts):
    under its old prefix, the agent resumes only these."""
    rows = s.exec(select(Checkpoint).where(Checkpoint.job_id == job_id).order_by(col(Checkpoint.id)))
    return [{"name": c.name, "attempt": c.attempt, "step": c.step,
             "completed_at": c.completed_at.timestamp() if c.completed_at else None} for c in rows]


def distributed_env(spec: JobSpec, offer_gpus: int) -> dict[str, str]:
    """How the job is to use its GPUs: GPUORCH_DISTRIBUTED (none, ddp, fsdp, zero2, zero3, tp) and
    GPUORCH_DISTRIBUTED_DEGREE (the GPUs it spans on this attempt's instance; none: 1)."""
    d = spec.strategy
    return {"GPUORCH_DISTRIBUTED": d.strategy, "GPUORCH_DISTRIBUTED_DEGREE": str(d.gpus_on(max(offer_gpus, 1)))}


def agent_config(job: Job, spec: JobSpec, attempt: Attempt, *, predecessor_deadline: float | None = None,
                 heartbeat_timeout_s: float | None = None, volume_id: str | None = None,
                 installation: str | None = None, legacy_checkpoints: list[dict[str, Any]] | None = None,
                 ) -> AgentConfig:
    """``volume_id``: the job's volume, attached to this attempt's instance (the runner mounts it).
    ``installation``: the store's installation id, required with a checkpoint (the daemon's
    checkpoints are never un-namespaced); ``legacy_checkpoints``: ``recorded_checkpoints`` of a
    job with an old prefix."""
    if spec.checkpoint is not None and not installation:
        raise ValueError(f"job {job.id}: a checkpointed job's agent needs the installation id")
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
        checkpoint_url=checkpoint_url(spec, job, installation) if installation else None,
        installation=installation,
        legacy_checkpoint_url=legacy_checkpoint_url(spec, job),
        legacy_checkpoints=list(legacy_checkpoints or []) if job.checkpoint_prefix else [],
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


def with_registry_login(cfg: AgentConfig, provider: Provider) -> AgentConfig:
    """``cfg`` with how its instance logs in to the image's registry, where ``provider`` declares
    the capability ``registry_login`` and the registry is its own (ECR, Artifact Registry, ACR:
    each provider package knows its own); the agent runs the command it is given, knowing no
    cloud. Unchanged without an image, the capability, or a registry in the reference."""
    c = cfg.container
    if c is None or not provider.capabilities.registry_login:
        return cfg
    try:
        registry = parse_image(c.image).registry
    except ValueError:  # refused at submit; the agent's own parse says so again if it ever gets here
        return cfg
    if registry is not None:
        c.login = provider.registry_login(registry)
    return cfg
