"""Tables of the state store. Each launch is a new Attempt row with a typed termination reason."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Index, Text, TypeDecorator, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from gpuorch.store.states import AttemptStatus, JobStatus, SweepStatus, TerminationReason  # re-exported


class UTCDateTime(TypeDecorator[datetime]):
    """Stores naive UTC, returns aware UTC: SQLite forgets time zones, PostgreSQL keeps them."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


def _ts(*, index: bool = False) -> Any:
    """A UTC timestamp column, NULL until set. Typed ``Any`` like ``Field`` itself, so each column keeps its
    declared type (``datetime`` or ``datetime | None``)."""
    return Field(default=None, sa_type=UTCDateTime, index=index)


class Job(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True)
    spec: str = Field(sa_type=Text)  # the validated JobSpec as JSON
    status: JobStatus = Field(default=JobStatus.QUEUED, index=True)
    message: str | None = None  # why it is in this status, for people
    cancel_requested: bool = False
    preemptions: int = 0
    failures: int = 0
    exit_code: int | None = None
    result: str | None = Field(default=None, sa_type=Text)  # JSON the job reported
    created_at: datetime = _ts()
    updated_at: datetime | None = _ts()
    finished_at: datetime | None = _ts()
    not_before: datetime | None = _ts()  # back-off before the next launch attempt
    lease_owner: str | None = None
    lease_expires: datetime | None = _ts()
    # Sweeps (schema 2): a trial is an ordinary job linked to its sweep.
    sweep_id: int | None = Field(default=None, foreign_key="sweep.id", index=True)
    params: str | None = Field(default=None, sa_type=Text)  # the trial's parameters as JSON
    metrics: str | None = Field(default=None, sa_type=Text)  # latest value of each metric, JSON
    metrics_at: datetime | None = _ts()
    # Schema 3: the job's volume (spec ``volume:``). Provider, region and zone are the intent,
    # recorded before the create call; volume_id once created (or found again by its tags).
    volume_provider: str | None = None
    volume_region: str | None = None
    volume_zone: str | None = None
    volume_id: str | None = None
    # Schema 7: the sweep objective's values by step, JSON [[step, value], ...] (pruning reads it).
    objective_history: str | None = Field(default=None, sa_type=Text)
    # Schema 9: the old un-namespaced checkpoint prefix (``<name>-<id>``) of a job stored before
    # checkpoints were namespaced by installation; its recorded checkpoints there stay
    # restorable. None: the job's checkpoints live only under ``<installation>/<name>-<id>``.
    checkpoint_prefix: str | None = None


class Attempt(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("job_id", "number"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="job.id", index=True)
    number: int
    status: AttemptStatus = Field(default=AttemptStatus.REQUESTED, index=True)
    reason: TerminationReason | None = None
    message: str | None = None
    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str | None = None
    gpu_count: int = 0
    spot: bool = False
    price_per_hour: float = 0.0
    billing_granularity_s: int = 1
    min_billing_s: int = 0
    instance_id: str | None = Field(default=None, index=True)
    predecessor: int | None = None  # attempt number whose final checkpoint this one waits for
    requested_at: datetime | None = _ts()
    launched_at: datetime | None = _ts()
    started_at: datetime | None = _ts()
    notice_at: datetime | None = _ts()
    drain_until: datetime | None = _ts()
    ended_at: datetime | None = _ts()
    resumed_from: str | None = None
    last_checkpoint: str | None = None
    last_checkpoint_at: datetime | None = _ts()
    exit_code: int | None = None
    lost_work_s: float | None = None
    # Schema 2: spot price moves as JSON [[epoch, usd_per_hour], ...] (price_per_hour is the
    # launch price), and how far the daemon has read the attempt's metrics file.
    price_changes: str | None = Field(default=None, sa_type=Text)
    metrics_offset: int = 0
    # Schema 5: when the job's volume was first attached to this attempt's instance (the wait
    # for its device is counted from here; see reconciler/volumes.py).
    volume_attached_at: datetime | None = _ts()
    # Schema 6: the full offer the attempt was launched on (``Offer`` as JSON; a relaunch sends
    # the same request), and why its agent cannot start, recorded by apply for the next pass's
    # decide (the job's volume cannot be mounted: ``decide.volume_failed``). None on older rows.
    offer: str | None = Field(default=None, sa_type=Text)
    start_error: str | None = Field(default=None, sa_type=Text)
    # Schema 7: the end of the runway its admission reserved (gpuorch.money.caps.runway_s): the
    # cap covers it until then plus the horizon, so the running check cannot stop it sooner.
    runway_until: datetime | None = _ts()
    # Schema 9: the stored checkpoints and records its agent refused as not this job's, one per
    # line (also job events); None until the agent reported any.
    restore_refused: str | None = Field(default=None, sa_type=Text)
    # Schema 13: the attempt handed its instance to the warm pool (spec keep_warm): its billing ended
    # then, and the instance's later end (``money.record``) is the warm period's, not this attempt's.
    kept_warm: bool | None = None


class Instance(SQLModel, table=True):
    """What gpuorch last observed of each instance it launched."""

    __table_args__ = (UniqueConstraint("provider", "instance_id"),)

    id: int | None = Field(default=None, primary_key=True)
    provider: str
    instance_id: str
    job_id: int | None = Field(default=None, index=True)
    attempt: int | None = None
    region: str = ""
    zone: str = ""
    instance_type: str = ""
    spot: bool = False
    state: str = ""
    first_seen: datetime | None = _ts()
    last_seen: datetime | None = _ts()
    terminated_at: datetime | None = _ts()


class Checkpoint(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("job_id", "name"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="job.id", index=True)
    attempt: int
    name: str
    step: int | None = None
    completed_at: datetime | None = _ts()  # when the job finished writing it
    recorded_at: datetime | None = _ts()  # when the daemon saw it durable
    final: bool = False  # taken on a preemption notice


class Event(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    ts: datetime = _ts(index=True)
    job_id: int | None = Field(default=None, index=True)
    attempt: int | None = None
    kind: str
    message: str
    data: str | None = Field(default=None, sa_type=Text)


class Backoff(SQLModel, table=True):
    """An offer class (provider/region/instance type/market) not to try again before ``until``."""

    key: str = Field(primary_key=True)
    until: datetime = _ts()
    reason: str = ""


class Sweep(SQLModel, table=True):
    """A hyperparameter sweep: its trials are Job rows with ``sweep_id`` set."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True)
    spec: str = Field(sa_type=Text)  # the validated SweepSpec as JSON
    status: SweepStatus = Field(default=SweepStatus.ACTIVE, index=True)
    message: str | None = None
    max_cost: float | None = None  # USD for all trials together
    deadline: datetime | None = _ts()
    max_parallel: int = 1
    objective_metric: str | None = None
    objective_mode: str = "min"
    cancel_requested: bool = False
    created_at: datetime = _ts()
    finished_at: datetime | None = _ts()


class Meta(SQLModel, table=True):
    """Installation facts: schema version, installation id."""

    key: str = Field(primary_key=True)
    value: str


class Heartbeat(SQLModel, table=True):
    """One row per daemon process (schema 7): when it last finished a pass, so the CLI, the doctor
    and the dashboard can tell that nothing is running (``gpuorch.store.heartbeat``)."""

    owner: str = Field(primary_key=True)  # the daemon's id, host/pid/random, as Job.lease_owner
    host: str = ""
    pid: int = 0
    version: str = ""
    interval_s: float = 5.0  # the longest the daemon waits between passes (max_sleep_s)
    started_at: datetime = _ts()
    last_pass_at: datetime | None = _ts()
    last_outcome: str | None = None  # ok | failed | abandoned
    stopped_at: datetime | None = _ts()  # set on a clean stop


class Notification(SQLModel, table=True):
    """The notifications outbox (schema 10): one row per event worth telling a person, written
    in the transaction of the event (``jobs.events.record``), so a crash loses neither or both.
    ``uid`` is the event's one id (the ``webhook-id`` header); ``body`` is fixed once, when the
    sender first prepares the row, so every retry and every route sends the same bytes."""

    id: int | None = Field(default=None, primary_key=True)
    uid: str = Field(unique=True)
    ts: datetime = _ts()
    type: str  # the public event type (docs/notifications.md), e.g. job.failed
    job_id: int | None = None
    attempt: int | None = None
    message: str = ""
    data: str | None = Field(default=None, sa_type=Text)  # the event's own data, JSON
    prepared: bool = Field(default=False, index=True)  # routed: its body and deliveries written
    body: str | None = Field(default=None, sa_type=Text)  # the versioned JSON payload


class NotificationDelivery(SQLModel, table=True):
    """One notification to one route (schema 10), claimed with a lease by the sender that sends it.
    ``route`` is the route's name, never its URL (URLs and keys stay in the config and files)."""

    __table_args__ = (UniqueConstraint("notification_id", "route"),)

    id: int | None = Field(default=None, primary_key=True)
    notification_id: int = Field(foreign_key="notification.id", index=True)
    route: str
    status: str = Field(default="pending", index=True)  # pending | delivered | dead
    tries: int = 0
    next_at: datetime = _ts(index=True)  # not sent again before this
    lease_owner: str | None = None
    lease_expires: datetime | None = _ts()
    last_error: str | None = None  # the last failure, redacted
    delivered_at: datetime | None = _ts()


class SlotLease(SQLModel, table=True):
    """One GPU slot of an owned host held by one launch (``gpuorch.provider.slots``; SSH node
    pools). A launch's rows share its client token. The partial unique index is the rule "a host
    runs at most what it has": no two unreleased rows of one provider hold one slot of one host,
    whichever daemon wrote them. ``ended_at``: the instance is over, its slots still held until its
    host is seen free of its processes (``released_at``); released rows stay as tombstones so the
    token still names its instance, until pruned."""

    __table_args__ = (Index("ux_slotlease_held", "provider", "host", "slot", unique=True,
                            sqlite_where=text("released_at IS NULL"), postgresql_where=text("released_at IS NULL")),)

    id: int | None = Field(default=None, primary_key=True)
    provider: str = Field(index=True)
    token: str = Field(index=True)
    host: str
    slot: int
    zone: str = ""
    region: str = ""
    instance_type: str = ""
    tags: str = Field(default="{}", sa_type=Text)  # the instance's tags, JSON
    created_at: datetime = _ts()
    ended_at: datetime | None = _ts()
    end_reason: str | None = None
    released_at: datetime | None = _ts()


class WarmInstance(SQLModel, table=True):
    """One idle period of a warm instance (spec ``keep_warm``; ``gpuorch.reconciler.apply.warm``):
    an instance whose attempt finished, kept up for the next job that fits it. A row is opened
    when the attempt's end hands the instance over (status ``dirty`` until its run directory is
    recycled, then ``idle``) and closed (``ended_at``) when a job leases it (``leased``: the lessee's
    attempt row names the instance) or it is released (``releasing`` while its terminate is out,
    then ``released``). The partial unique index is the rule "one open period an instance": no two
    daemons pool or lease one instance twice. The idle time is billed to ``job_id`` (the job that
    left it warm), its sweep and the day (``gpuorch.warm.ledger``). ``origin_*``: the job and attempt
    that launched it (its tags), so the orphan sweep and the listing find it."""

    __table_args__ = (Index("ux_warminstance_open", "provider", "instance_id", unique=True,
                            sqlite_where=text("ended_at IS NULL"), postgresql_where=text("ended_at IS NULL")),)

    id: int | None = Field(default=None, primary_key=True)
    provider: str
    instance_id: str = Field(index=True)
    region: str = ""
    zone: str = ""
    instance_type: str = ""
    spot: bool = False
    image: str = ""  # the container image its last job ran ("" none): a job with another image starts fresh
    offer: str = Field(default="", sa_type=Text)  # the offer it was launched on, JSON (as Attempt.offer)
    price_per_hour: float = 0.0
    billing_granularity_s: int = 1
    origin_job_id: int = 0
    origin_attempt: int = 0
    job_id: int = Field(default=0, index=True)  # the job whose attempt left it warm: its caps count the idle time
    attempt: int = 0
    sweep_id: int | None = None
    status: str = Field(default="dirty", index=True)  # dirty, idle, leased, releasing, released
    idle_since: datetime = _ts()
    keep_until: datetime = _ts()
    ended_at: datetime | None = _ts(index=True)
    lessee_job_id: int | None = None
    lessee_attempt: int | None = None
    reason: str | None = None  # why it was released, for people
