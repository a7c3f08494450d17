"""Versioned schema. A new database gets the current schema and is stamped with the latest
version; an existing one runs, in order, the migrations above its stamp, each in its own
transaction. To evolve the schema: change models.py, append a migration that brings an
existing database to the same shape (ALTER TABLE ...), and never edit a released one.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    inspect,
    text,
)
from sqlmodel import SQLModel

from gpuorch.errors import GpuorchError
from gpuorch.store import models  # noqa: F401  (registers the tables on SQLModel.metadata)

Migration = tuple[int, str, Callable[[Connection], None]]


def _v2_money_and_sweeps(conn: Connection) -> None:
    """Sweeps, trial parameters and metrics on jobs, spot price changes on attempts, and the
    ``budget_exhausted`` status and reason. The sweep table is a frozen copy of models.Sweep."""
    sweep = Table(
        "sweep", MetaData(),
        Column("id", Integer, primary_key=True),
        Column("name", String, nullable=False, index=True),
        Column("spec", Text, nullable=False),
        Column("status", Enum("ACTIVE", "DONE", "CANCELLED", name="sweepstatus"), nullable=False, index=True),
        Column("message", String),
        Column("max_cost", Float),
        Column("deadline", DateTime),
        Column("max_parallel", Integer, nullable=False),
        Column("objective_metric", String),
        Column("objective_mode", String, nullable=False),
        Column("cancel_requested", Boolean, nullable=False),
        Column("created_at", DateTime, nullable=False),
        Column("finished_at", DateTime),
    )
    sweep.create(conn)
    ts = DateTime().compile(dialect=conn.dialect)
    for ddl in (
        "ALTER TABLE job ADD COLUMN sweep_id INTEGER REFERENCES sweep (id)",
        "ALTER TABLE job ADD COLUMN params TEXT",
        "ALTER TABLE job ADD COLUMN metrics TEXT",
        f"ALTER TABLE job ADD COLUMN metrics_at {ts}",
        "CREATE INDEX ix_job_sweep_id ON job (sweep_id)",
        "ALTER TABLE attempt ADD COLUMN price_changes TEXT",
        "ALTER TABLE attempt ADD COLUMN metrics_offset INTEGER NOT NULL DEFAULT 0",
    ):
        conn.execute(text(ddl))
    if conn.dialect.name == "postgresql":  # native enums there; SQLite stores names as VARCHAR
        for enum in ("jobstatus", "terminationreason"):
            conn.execute(text(f"ALTER TYPE {enum} ADD VALUE IF NOT EXISTS 'BUDGET_EXHAUSTED'"))


def _v3_job_volumes(conn: Connection) -> None:
    """Where each job's volume lives (spec ``volume:``): provider, region, zone and id on the job."""
    for col in ("volume_provider", "volume_region", "volume_zone", "volume_id"):
        conn.execute(text(f"ALTER TABLE job ADD COLUMN {col} VARCHAR"))


def _v4_moved_reason(conn: Connection) -> None:
    """The termination reason ``moved`` (the deadline policy moved the attempt to on-demand).

    The reason column is SQLAlchemy's Enum, which stores the member *names*: on PostgreSQL a
    native enum type that needs the new label; on SQLite a plain VARCHAR without a CHECK
    constraint (``create_constraint`` is off), so nothing changes there. PostgreSQL 12+ allows
    ``ADD VALUE`` inside a transaction; the label is only usable after it commits, which the
    migration transaction does before any row is written with it.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("ALTER TYPE terminationreason ADD VALUE IF NOT EXISTS 'MOVED'"))


def _v5_volume_attached_at(conn: Connection) -> None:
    """When the job's volume was first attached to an attempt's instance (``Attempt.volume_attached_at``).
    Looks first (SQLite has no ``ADD COLUMN IF NOT EXISTS``)."""
    if "volume_attached_at" in {c["name"] for c in inspect(conn).get_columns("attempt")}:
        return
    ts = DateTime().compile(dialect=conn.dialect)
    conn.execute(text(f"ALTER TABLE attempt ADD COLUMN volume_attached_at {ts}"))


def _v6_attempt_offer(conn: Connection) -> None:
    """The attempt's full offer as JSON (``Attempt.offer``) and why its agent cannot start
    (``Attempt.start_error``). Old rows keep None: a relaunch rebuilds their offer from the columns."""
    have = {c["name"] for c in inspect(conn).get_columns("attempt")}
    for col in ("offer", "start_error"):
        if col not in have:
            conn.execute(text(f"ALTER TABLE attempt ADD COLUMN {col} TEXT"))


def _v7_heartbeat(conn: Connection) -> None:
    """The daemons' heartbeats (``models.Heartbeat``): a frozen copy of the table as schema 7 made it."""
    if inspect(conn).has_table("heartbeat"):
        return
    Table(
        "heartbeat", MetaData(),
        Column("owner", String, primary_key=True),
        Column("host", String, nullable=False),
        Column("pid", Integer, nullable=False),
        Column("version", String, nullable=False),
        Column("interval_s", Float, nullable=False),
        Column("started_at", DateTime),
        Column("last_pass_at", DateTime),
        Column("last_outcome", String),
        Column("stopped_at", DateTime),
    ).create(conn)


def _v8_sweep_hold_prune(conn: Connection) -> None:
    """Sweeps that hold instead of kill and prune: job statuses ``held`` and ``pruned``, reasons
    ``held`` and ``pruned`` (native enum labels on PostgreSQL; SQLite stores names as VARCHAR),
    ``job.objective_history`` and ``attempt.runway_until``. Looks first, like v5 and v6."""
    if "objective_history" not in {c["name"] for c in inspect(conn).get_columns("job")}:
        conn.execute(text("ALTER TABLE job ADD COLUMN objective_history TEXT"))
    if "runway_until" not in {c["name"] for c in inspect(conn).get_columns("attempt")}:
        conn.execute(text(f"ALTER TABLE attempt ADD COLUMN runway_until {DateTime().compile(dialect=conn.dialect)}"))
    if conn.dialect.name == "postgresql":
        for enum in ("jobstatus", "terminationreason"):
            for label in ("HELD", "PRUNED"):
                conn.execute(text(f"ALTER TYPE {enum} ADD VALUE IF NOT EXISTS '{label}'"))


def _v9_checkpoint_namespace(conn: Connection) -> None:
    """Checkpoints namespaced by installation (``<store>/<installation>/<name>-<id>/``): every job
    stored before keeps its old prefix ``<name>-<id>`` in ``job.checkpoint_prefix``, so it still
    resumes from the checkpoints recorded for it there; ``attempt.restore_refused`` keeps what an
    agent refused as not its job's. Looks first, like v5."""
    if "checkpoint_prefix" not in {c["name"] for c in inspect(conn).get_columns("job")}:
        conn.execute(text("ALTER TABLE job ADD COLUMN checkpoint_prefix VARCHAR"))
    conn.execute(text("UPDATE job SET checkpoint_prefix = name || '-' || CAST(id AS VARCHAR) "
                      "WHERE checkpoint_prefix IS NULL"))
    if "restore_refused" not in {c["name"] for c in inspect(conn).get_columns("attempt")}:
        conn.execute(text("ALTER TABLE attempt ADD COLUMN restore_refused TEXT"))


def _v10_notifications(conn: Connection) -> None:
    """The notifications outbox and its deliveries (``models.Notification``,
    ``models.NotificationDelivery``): frozen copies of the tables as schema 10 made them. Looks first."""
    meta = MetaData()
    if not inspect(conn).has_table("notification"):
        Table(
            "notification", meta,
            Column("id", Integer, primary_key=True),
            Column("uid", String, nullable=False, unique=True),
            Column("ts", DateTime),
            Column("type", String, nullable=False),
            Column("job_id", Integer),
            Column("attempt", Integer),
            Column("message", String, nullable=False),
            Column("data", Text),
            Column("prepared", Boolean, nullable=False, index=True),
            Column("body", Text),
        ).create(conn)
    if not inspect(conn).has_table("notificationdelivery"):
        Table(
            "notificationdelivery", meta,
            Column("id", Integer, primary_key=True),
            Column("notification_id", Integer, ForeignKey("notification.id"), nullable=False, index=True),
            Column("route", String, nullable=False),
            Column("status", String, nullable=False, index=True),
            Column("tries", Integer, nullable=False),
            Column("next_at", DateTime, index=True),
            Column("lease_owner", String),
            Column("lease_expires", DateTime),
            Column("last_error", String),
            Column("delivered_at", DateTime),
            UniqueConstraint("notification_id", "route"),
        ).create(conn)


def _v11_slot_leases(conn: Connection) -> None:
    """GPU slots leased on owned hosts (``models.SlotLease``, SSH node pools): a frozen copy of
    the table as schema 11 made it, with its partial unique index. Looks first."""
    if inspect(conn).has_table("slotlease"):
        return
    held = text("released_at IS NULL")
    table = Table(
        "slotlease", MetaData(),
        Column("id", Integer, primary_key=True),
        Column("provider", String, nullable=False, index=True),
        Column("token", String, nullable=False, index=True),
        Column("host", String, nullable=False),
        Column("slot", Integer, nullable=False),
        Column("zone", String, nullable=False),
        Column("region", String, nullable=False),
        Column("instance_type", String, nullable=False),
        Column("tags", Text, nullable=False),
        Column("created_at", DateTime),
        Column("ended_at", DateTime),
        Column("end_reason", String),
        Column("released_at", DateTime),
    )
    Index("ux_slotlease_held", table.c.provider, table.c.host, table.c.slot, unique=True,
          sqlite_where=held, postgresql_where=held)
    table.create(conn)


def _v12_warm_instances(conn: Connection) -> None:
    """Warm instances' idle periods (``models.WarmInstance``, spec ``keep_warm``): a frozen copy of
    the table as schema 12 made it, with its partial unique index. Looks first."""
    if inspect(conn).has_table("warminstance"):
        return
    open_ = text("ended_at IS NULL")
    table = Table(
        "warminstance", MetaData(),
        Column("id", Integer, primary_key=True),
        Column("provider", String, nullable=False),
        Column("instance_id", String, nullable=False, index=True),
        Column("region", String, nullable=False),
        Column("zone", String, nullable=False),
        Column("instance_type", String, nullable=False),
        Column("spot", Boolean, nullable=False),
        Column("image", String, nullable=False),
        Column("offer", Text, nullable=False),
        Column("price_per_hour", Float, nullable=False),
        Column("billing_granularity_s", Integer, nullable=False),
        Column("origin_job_id", Integer, nullable=False),
        Column("origin_attempt", Integer, nullable=False),
        Column("job_id", Integer, nullable=False, index=True),
        Column("attempt", Integer, nullable=False),
        Column("sweep_id", Integer),
        Column("status", String, nullable=False, index=True),
        Column("idle_since", DateTime),
        Column("keep_until", DateTime),
        Column("ended_at", DateTime, index=True),
        Column("lessee_job_id", Integer),
        Column("lessee_attempt", Integer),
        Column("reason", String),
    )
    Index("ux_warminstance_open", table.c.provider, table.c.instance_id, unique=True,
          sqlite_where=open_, postgresql_where=open_)
    table.create(conn)


def _v13_attempt_kept_warm(conn: Connection) -> None:
    """``attempt.kept_warm``: the attempt handed its instance to the warm pool (NULL: it did not)."""
    if "kept_warm" not in {c["name"] for c in inspect(conn).get_columns("attempt")}:
        conn.execute(text("ALTER TABLE attempt ADD COLUMN kept_warm BOOLEAN"))


# PostgreSQL's fill factor of the job table, in percent: a page keeps room for new versions of
# its rows. A job row is wide (~1.2 KB: its spec), so at the default 100 a page is full when the
# rows are submitted and every later UPDATE (a lease claim, a renewal, ``updated_at``) writes the
# new version to another page and a new entry into each of the table's indexes. With room left,
# an UPDATE that changes no indexed column (the lease's and ``updated_at``'s) is a heap-only
# tuple on the same page: 10,000 rows' leases written 3 times, 4.2-5.2 s at 100 against
# 3.0-3.4 s at 60 (80 % of them heap-only), and the table 30 MB instead of 48 (load 10,
# calibration 0.95 s). A status change (an indexed column) is never heap-only.
JOB_FILLFACTOR = 60


def _pg_job_fillfactor(conn: Connection) -> None:
    """The job table's fill factor (``JOB_FILLFACTOR``) on PostgreSQL; nothing elsewhere. Pages
    written from now on keep the room; existing ones get it as they are rewritten."""
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"ALTER TABLE job SET (fillfactor = {JOB_FILLFACTOR})"))


def _v14_job_fillfactor(conn: Connection) -> None:
    """PostgreSQL: the job table's fill factor (``JOB_FILLFACTOR``)."""
    _pg_job_fillfactor(conn)


MIGRATIONS: list[Migration] = [
    # (1, "initial schema", ...) is the create_all of a fresh database; later ones go here.
    (2, "sweeps, trial metrics, spot price changes, budget_exhausted", _v2_money_and_sweeps),
    (3, "job volumes", _v3_job_volumes),
    (4, "termination reason moved", _v4_moved_reason),
    (5, "attempt volume_attached_at", _v5_volume_attached_at),
    (6, "attempt offer and start_error", _v6_attempt_offer),
    (7, "daemon heartbeats", _v7_heartbeat),
    (8, "sweep trials held and pruned, objective history, attempt runway", _v8_sweep_hold_prune),
    (9, "checkpoints namespaced: stored jobs' old prefixes, refused restores", _v9_checkpoint_namespace),
    (10, "notifications outbox and deliveries", _v10_notifications),
    (11, "GPU slot leases of owned hosts (SSH node pools)", _v11_slot_leases),
    (12, "warm instances' idle periods (keep_warm)", _v12_warm_instances),
    (13, "attempt kept_warm", _v13_attempt_kept_warm),
    (14, "job table fill factor (PostgreSQL)", _v14_job_fillfactor),
]
SCHEMA_VERSION = 1 + len(MIGRATIONS)


class SchemaTooNew(GpuorchError):
    pass


def _version(conn: Connection) -> int | None:
    if not inspect(conn).has_table("meta"):
        return None
    row = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).first()
    return int(row[0]) if row else None


def _stamp(conn: Connection, version: int) -> None:
    params = {"v": str(version)}
    updated = conn.execute(text("UPDATE meta SET value = :v WHERE key = 'schema_version'"), params)
    if updated.rowcount == 0:
        conn.execute(text("INSERT INTO meta (key, value) VALUES ('schema_version', :v)"), params)


def migrate(conn: Connection, migrations: list[Migration] | None = None) -> int:
    """Bring the schema to the latest version inside the caller's (exclusive) transaction."""
    migrations = MIGRATIONS if migrations is None else migrations
    latest = 1 + len(migrations)
    current = _version(conn)
    if current is None:
        SQLModel.metadata.create_all(conn)
        _pg_job_fillfactor(conn)
        _stamp(conn, latest)
        return latest
    if current > latest:
        raise SchemaTooNew(
            f"the state store has schema version {current} but this gpuorch knows only {latest}; upgrade gpuorch"
        )
    for version, _desc, step in migrations:
        if version > current:
            step(conn)
            _stamp(conn, version)
    return latest
