"""The sqlite3 read path of `gpuorch status` (gpuorch.store.lite) answers what the ORM answers."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuorch.errors import UnknownJob
from gpuorch.jobs.service import JobService
from gpuorch.store import Store, lite
from gpuorch.store.migrations import SCHEMA_VERSION
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, TerminationReason

NOW = datetime(2026, 3, 2, 12, 0, 0, 500_000, tzinfo=UTC)
V1 = Path(__file__).with_name("v1.sql")


def _populate(url: str) -> None:
    store = Store(url)
    t = NOW - timedelta(hours=5)
    with store.write() as s:
        queued = Job(name="queued", spec="{}", created_at=t)
        done = Job(name="train", spec="{}", status=JobStatus.SUCCEEDED, created_at=t,
                   finished_at=NOW - timedelta(hours=1), exit_code=0, result=json.dumps({"loss": 0.25}),
                   preemptions=1, lease_owner="host/1/ab", cancel_requested=True)
        running = Job(name="train", spec="{}", status=JobStatus.RUNNING, created_at=t + timedelta(seconds=1.25))
        s.add_all([queued, done, running])
        s.flush()
        s.add_all([
            Attempt(job_id=done.id, number=1, status=AttemptStatus.ENDED, reason=TerminationReason.PREEMPTED,
                    provider="aws", region="us-east-1", zone="us-east-1a", instance_type="p3.2xlarge", gpu="V100",
                    gpu_count=1, spot=True, price_per_hour=0.9731, billing_granularity_s=1, min_billing_s=60,
                    launched_at=t, ended_at=t + timedelta(hours=1), last_checkpoint="s3://b/ck1", lost_work_s=12.5,
                    price_changes=json.dumps([[(t + timedelta(minutes=30)).timestamp(), 1.5]])),
            Attempt(job_id=done.id, number=2, status=AttemptStatus.ENDED, reason=TerminationReason.SUCCEEDED,
                    provider="gcp", region="us-central1", zone="us-central1-a", instance_type="a2", gpu="A100",
                    gpu_count=1, price_per_hour=3.06, billing_granularity_s=3600, min_billing_s=3600,
                    launched_at=t + timedelta(hours=1), ended_at=NOW - timedelta(hours=1), resumed_from="s3://b/ck1",
                    exit_code=0),
            Attempt(job_id=running.id, number=1, status=AttemptStatus.RUNNING, provider="local", region="r",
                    zone="z", instance_type="i", price_per_hour=0.5,
                    launched_at=t + timedelta(minutes=7, microseconds=3), instance_id="i-1"),
        ])
    store.close()


@pytest.fixture
def url(tmp_path) -> str:
    u = f"sqlite:///{tmp_path / 'state.db'}"
    _populate(u)
    return u


def _lazy(url: str, home: Path) -> JobService:
    return JobService(None, home, lambda: NOW, url=url)


def test_the_schema_version_is_the_migrations_one():
    assert lite.SCHEMA_VERSION == SCHEMA_VERSION


def test_rows_have_the_attributes_and_types_of_the_models(url):
    conn = lite.open_lite(url)
    assert conn is not None
    reader = lite.LiteReader(conn)
    store = Store(url)
    with store.read() as s:
        for model, rows in ((Job, reader.jobs()), (Attempt, [a for v in reader.attempts().values() for a in v])):
            assert rows
            for row in rows:
                orm = s.get(model, row.id)
                assert vars(row) == {f: getattr(orm, f) for f in model.model_fields}
    conn.close()
    store.close()


def test_status_is_the_same_through_sqlite3_and_the_orm(url, tmp_path):
    fast, full = _lazy(url, tmp_path), JobService(Store(url), tmp_path, lambda: NOW)
    assert fast.jobs() == full.jobs()
    assert [j["name"] for j in fast.jobs()] == ["queued", "train", "train"]
    for ref in ("1", "2", "3", "train", "queued"):
        assert fast.job(ref) == full.job(ref)
    assert fast.job("train")["id"] == 3  # the newest of that name
    assert fast._store is None  # none of it opened the ORM store
    for svc in (fast, full):
        with pytest.raises(UnknownJob, match="no job 'nope'; see `gpuorch status`"):
            svc.job("nope")
        with pytest.raises(UnknownJob):
            svc.job("99")


def test_a_missing_or_old_store_is_opened_by_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'new' / 'state.db'}"
    assert lite.open_lite(url) is None
    svc = _lazy(url, tmp_path)
    assert svc.jobs() == []  # created and migrated as before
    assert svc._store is not None
    assert lite.open_lite(url) is not None
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:
        db.executescript(V1.read_text())
    assert lite.open_lite(f"sqlite:///{old}") is None
    assert lite.open_lite("postgresql://u@h/db") is None
    assert lite.open_lite("sqlite:///:memory:") is None
    assert lite.open_lite(f"{url}?timeout=5") is None


def test_status_json_does_not_import_the_orm(url, tmp_path):
    home = Path(url.split("///")[1]).parent
    code = ("import sys; sys.argv = ['gpuorch', 'status', '--json']\n"
            "from gpuorch.console import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print([m for m in ('sqlalchemy', 'sqlmodel', 'gpuorch.jobs.spec', 'rich') if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"GPUORCH_HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "x"),
                            "CONFIGURATION_DIRECTORY": str(tmp_path / "e"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "[]"
    out = json.loads("\n".join(lines[:-1]))
    assert [j["name"] for j in out["jobs"]] == ["queued", "train", "train"]
    assert out["daemon"]["alive"] is False and out["daemon"]["daemons"] == []  # the heartbeats, read light too
