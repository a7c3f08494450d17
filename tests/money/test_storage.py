"""A job volume's storage as money (gpuorch.money.storage): billed per GiB-month at the rate
recorded when the volume was made, from its ``volume`` event to its deletion (or now), counted by
``gpuorch cost`` and by the caps' ledger like an attempt of its job."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.jobs import events
from gpuorch.money.caps import Ledger, Policy, day_start
from gpuorch.money.storage import HOURS_PER_MONTH, ledger_rows, made_data, periods, rate_of
from gpuorch.ops.config_sources import load_config
from gpuorch.store import Store
from gpuorch.store.models import Job, JobStatus

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = 100 * 0.07 / HOURS_PER_MONTH  # 100 GiB on RunPod, an hour


def test_each_market_declares_its_rate() -> None:
    assert (rate_of("lambda"), rate_of("runpod"), rate_of("vast")) == (0.20, 0.07, 0.15)
    assert rate_of("no-such-provider") is None
    assert made_data("runpod", 100) == {"provider": "runpod", "size_gib": 100, "disk_type": None,
                                        "usd_per_gib_month": 0.07}


def test_a_disk_type_has_its_own_rate_and_an_unlisted_or_default_one_the_catalogs() -> None:
    assert rate_of("gcp", "pd-ssd") > rate_of("gcp", "pd-balanced") > rate_of("gcp", "pd-standard") > 0
    assert rate_of("gcp", None) == rate_of("gcp", "pd-balanced") == rate_of("gcp", "hyperdisk-balanced")
    assert made_data("gcp", 10, "pd-ssd")["usd_per_gib_month"] == rate_of("gcp", "pd-ssd")


def test_every_provider_that_makes_volumes_bills_their_storage() -> None:
    """A volume that costs nothing here lets a cap be crossed by its storage: every adapter that
    declares volumes (attached or given at launch) declares a rate, owned capacity (a cluster's
    own claims, priced by its owner) aside. Azure's managed disks are priced by size tier, not per
    GiB, and have none yet (docs/money.md, "Storage")."""
    from gpuorch.registry import available, provider_class, with_volumes

    making = {name for name in with_volumes(available()) if not provider_class(name).capabilities.owned_capacity}
    assert {"aws", "gcp", "lambda", "runpod", "vast", "sim"} <= making
    assert {name for name in making if rate_of(name) is None} <= {"azure"}


@pytest.fixture
def store():
    s = Store(load_config().url)
    yield s
    s.close()


def volume_job(store: Store, name: str, made: datetime, deleted: datetime | None) -> int:
    with store.write() as s:
        job = Job(name=name, spec="{}", status=JobStatus.RUNNING if deleted is None else JobStatus.SUCCEEDED,
                  created_at=made, volume_provider="runpod", volume_zone="secure", volume_id="nv1",
                  finished_at=deleted)
        s.add(job)
        s.flush()
        events.record(s, made, "volume", "volume nv1 (100 GiB) in EU-RO-1 created", job_id=job.id,
                      **made_data("runpod", 100))
        events.record(s, made + timedelta(minutes=5), "volume", "found again by its tags", job_id=job.id,
                      **made_data("runpod", 100))  # a repeat after a crash: the first one counts
        if deleted is not None:
            events.record(s, deleted, "volume_deleted", "volume nv1 deleted", job_id=job.id)
        return job.id or 0


def test_a_volume_is_billed_from_its_making_to_its_deletion(store: Store) -> None:
    done = volume_job(store, "done", T0, T0 + timedelta(hours=10))
    live = volume_job(store, "live", T0, None)
    with store.read() as s:
        got = {p.job_id: p for p in periods(s)}
    assert got[done].end == T0 + timedelta(hours=10) and got[live].end is None
    assert got[done].price_per_hour == pytest.approx(HOUR)

    now = T0 + timedelta(hours=11)
    with store.read() as s:  # the caps' ledger: spent, and the live volume still counted as running
        ledger = Ledger.build(list(ledger_rows(s, day_start(now), [])), now, Policy())
    assert ledger.jobs[live].spent == pytest.approx(11 * HOUR) and live in ledger.jobs[live].running
    assert ledger.jobs[done].spent == pytest.approx(10 * HOUR) and not ledger.jobs[done].running
    assert ledger.day.spent == pytest.approx(21 * HOUR)
    later = T0 + timedelta(days=1, hours=1)  # the next UTC day: the finished job's volume is no longer counted
    with store.read() as s:
        assert [a.job_id for a, _ in ledger_rows(s, day_start(later), [])] == [live]


def test_gpuorch_cost_counts_storage(store: Store) -> None:
    volume_job(store, "done", T0, T0 + timedelta(hours=10))
    report = json.loads(CliRunner().invoke(app, ["cost", "--by", "provider", "--json"]).output)
    [row] = report["rows"]
    assert (row["key"], row["cost"], row["attempts"]) == ("runpod", pytest.approx(10 * HOUR, abs=1e-6), 0)


def test_gpuorch_volume_list_shows_each_volume_and_its_storage_cost(store: Store) -> None:
    done = volume_job(store, "done", T0, T0 + timedelta(hours=10))
    live = volume_job(store, "live", T0, None)
    cli = CliRunner()
    rows = json.loads(cli.invoke(app, ["volume", "list", "--json"]).output)["volumes"]
    assert [(r["job"], r["provider"], r["zone"], r["volume_id"], r["size_gib"], r["deleted_at"]) for r in rows] == [
        (live, "runpod", "secure", "nv1", 100, None)]
    assert rows[0]["storage_cost"] > 0 and rows[0]["usd_per_gib_month"] == 0.07
    every = json.loads(cli.invoke(app, ["volume", "list", "--deleted", "--json"]).output)["volumes"]
    assert [r["job"] for r in every] == [done, live]
    assert every[0]["storage_cost"] == pytest.approx(10 * HOUR, abs=1e-6)
    table = cli.invoke(app, ["volume", "list"])
    assert table.exit_code == 0 and "nv1" in table.output and "1 volume, storage $" in table.output


def test_a_volume_kept_after_its_job_counts_in_every_later_days_cap_until_deleted(store: Store) -> None:
    """A kept volume (``volume.keep``) bills every day after its job ended: the daily cap's
    ledger counts it (its rows: unfinished jobs, today's, and kept volumes not deleted)."""
    ended = T0 + timedelta(hours=2)
    kept = volume_job(store, "kept", T0, None)
    gone = volume_job(store, "gone", T0, None)
    with store.write() as s:
        for job_id in (kept, gone):
            job = s.get(Job, job_id)
            assert job is not None
            job.status, job.finished_at = JobStatus.SUCCEEDED, ended
            events.record(s, ended, "volume_kept", "volume nv1 kept after the job", job_id=job_id)
        events.record(s, T0 + timedelta(days=1), "volume_deleted", "volume nv1 deleted as asked", job_id=gone)
    today = day_start(T0 + timedelta(days=3))
    with store.read() as s:
        counted = {a.job_id for a, _ in ledger_rows(s, today, [])}
    assert kept in counted and gone not in counted
