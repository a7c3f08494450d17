"""Vast storage at each host's rate (issue 33): every ask of Vast's search carries its host's
``storage_cost`` ($/GB-month), and a class offer carries its best ask's (the host a launch most
likely takes) as ``Offer.storage_usd_per_gib_month``. Placement counts a volume job's storage at
that rate instead of the catalog's single one, which stays the rate of offers that give none
(the shipped snapshot's rows). The volume made is billed at its volume offer's ``storage_cost``
(``Volume.usd_per_gib_month``, recorded with its ``volume`` event): the caps' ledger and
``gpuorch cost`` count it at the host's rate; a rate that is no price bills the catalog's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_vast import FakeVast, ask
from typer.testing import CliRunner

from gpuorch.cli.app import app
from gpuorch.jobs.spec import parse_spec
from gpuorch.money.cost import attempt_cost
from gpuorch.money.report import cost_report
from gpuorch.money.storage import made_data, periods, rate_table, storage_attempt
from gpuorch.placement import PlacementOptions, candidates
from gpuorch.placement.cost import HOURS_PER_MONTH, with_job
from gpuorch.store.models import JobStatus
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch_vast.provider import VastProvider
from tests.kit.agents import Agent

pytestmark = [pytest.mark.vast, pytest.mark.timeout(300)]
START_S = 480  # placement's default boot + setup
HOST_RATE = 0.40  # a host's storage_cost, $/GB-month; the catalog's single rate is $0.15


def spec(volume: bool = True):
    extra = {"volume": {"size": "2000GB", "mount": "/data"}} if volume else {}
    return parse_spec({"name": "job", "run": "python train.py", "resources": {"gpu": "RTX4090:1"},
                       "spot_policy": "on-demand", **extra})


def test_a_class_offer_carries_its_best_asks_storage_price(fake: FakeVast, vast: VastProvider) -> None:
    fake.asks.clear()
    fake.add(ask(1, dph=0.40, geolocation="Texas, US", storage_cost=0.05),
             ask(2, dph=0.45, geolocation="Texas, US", storage_cost=0.01),  # dearer GPU: not the class's host
             ask(3, dph=0.38, geolocation="Quebec, CA", storage_cost=0.90))
    by_region = {o.region: o for o in vast.offers()}
    assert by_region["US"].storage_usd_per_gib_month == 0.05 and by_region["US"].price_per_hour == pytest.approx(
        0.40 / 0.99, abs=1e-4)
    assert by_region["CA"].storage_usd_per_gib_month == 0.90


def test_a_volume_job_ranks_vast_classes_by_their_own_storage_rates(fake: FakeVast, vast: VastProvider) -> None:
    fake.asks.clear()
    fake.add(ask(1, dph=0.40, geolocation="Texas, US", storage_cost=0.05),
             ask(3, dph=0.38, geolocation="Quebec, CA", storage_cost=0.90))
    offers = vast.offers()
    rates = rate_table(["vast"])  # the catalog's single rate: the fallback
    assert rates == (("vast", "", 0.15),)
    job = spec()
    ranked = candidates(job, offers, options=with_job(job, PlacementOptions(default_hours=10), storage_rates=rates))
    assert [c.offer.region for c in ranked] == ["US", "CA"]  # CA's GPU is cheaper, its disk far dearer
    hours = (10 * 3600 + START_S) / 3600
    for c, rate in zip(ranked, (0.05, 0.90), strict=True):
        assert c.est_storage_usd == pytest.approx(2000 * rate / HOURS_PER_MONTH * hours)
    # Without a volume the GPU price alone decides.
    bare = candidates(spec(False), offers, options=PlacementOptions(default_hours=10, storage_rates=rates))
    assert [c.offer.region for c in bare] == ["CA", "US"]


def test_an_offer_without_its_own_rate_pays_the_catalogs(fake: FakeVast, vast: VastProvider) -> None:
    fake.asks.clear()
    no_rate = ask(1, dph=0.40, geolocation="Texas, US")
    del no_rate["storage_cost"]
    fake.add(no_rate)
    [offer] = vast.offers()
    assert offer.storage_usd_per_gib_month is None
    job = spec()
    [c] = candidates(job, [offer], options=with_job(job, PlacementOptions(default_hours=10),
                                                    storage_rates=rate_table(["vast"])))
    assert c.est_storage_usd == pytest.approx(2000 * 0.15 / HOURS_PER_MONTH * (10 * 3600 + START_S) / 3600)


def test_the_ledger_and_gpuorch_cost_bill_a_volume_at_its_hosts_rate(
        tmp_path: Path, fake: FakeVast, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the assembled daemon: a volume job on a host whose disk costs $0.40/GB-month (the
    catalog says $0.15). The volume offer's ``storage_cost`` is recorded with the volume; the caps'
    ledger counts the volume at that rate while it exists, and ``gpuorch cost`` bills it after."""
    fake.asks.clear()
    fake.add(ask(1, dph=0.40, geolocation="Texas, US", storage_cost=HOST_RATE))
    monkeypatch.setenv("GPUORCH_HOME", str(tmp_path / "home"))  # the CLI's store is the daemon's
    with AssembledDaemon.start(tmp_path / "home", {"providers": {"vast": {"server_url": fake.url}}}) as d:
        agents: dict[str, Agent] = {}
        monkeypatch.setattr(d.adapter("vast"), "runner", lambda inst: agents.setdefault(inst.id, Agent()))
        job = d.submit({"name": "lora", "run": "python train.py", "resources": {"gpu": "RTX4090:1"},
                        "providers": ["vast"], "spot_policy": "on-demand", "budget": {"max_cost": 50},
                        "volume": {"size": "1000GB", "mount": "/data"}})
        agent = d.until(lambda: next((a for a in agents.values() if a.started), None), timeout_s=60,
                        what="the job's agent to start")
        hourly = 1000 * HOST_RATE / HOURS_PER_MONTH
        with d.store.read() as s:
            [period] = periods(s, [job])
            assert (period.provider, period.size_gib, period.rate) == ("vast", 1000, HOST_RATE)
            now = d.rec.clock.now()
            ledger, _ = d.rec.money._load(s, now)  # what the caps (job, sweep, UTC day) see
        [volume] = [a for a, _ in ledger.jobs[job].live if a.instance_type == "volume"]
        assert volume.price_per_hour == pytest.approx(hourly)
        assert ledger.jobs[job].spent >= attempt_cost(volume, now) > 0
        agent.done = True
        assert d.until_terminal(job, timeout_s=60).status == JobStatus.SUCCEEDED
        d.until(lambda: not fake.volumes, timeout_s=60, what="the job's volume to be deleted")
        with d.store.read() as s:
            [period] = periods(s, [job])
            assert period.end is not None
            now = d.rec.clock.now()
            report = cost_report(s, None, now, "job")
        stored = storage_attempt(period)  # billed by the second at the host's rate, from making to deletion
        assert stored.price_per_hour == pytest.approx(hourly) and stored.ended_at == period.end
        gpu = sum(attempt_cost(a, now) for a in d.attempts(job))
        [row] = report["rows"]
        assert row["cost"] == pytest.approx(gpu + attempt_cost(stored, now), abs=1e-6)
        r = CliRunner().invoke(app, ["cost", "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["total"] == pytest.approx(row["cost"], abs=1e-5)


def test_a_storage_cost_that_is_no_price_bills_the_catalogs_rate(
        fake: FakeVast, vast: VastProvider, caplog: pytest.LogCaptureFixture) -> None:
    fake.asks.clear()
    fake.add(ask(1, dph=0.40, geolocation="Texas, US", storage_cost=-0.2))
    [offer] = vast.offers()
    tags = {"gpuorch:managed": "true", "gpuorch:job": "4", "gpuorch:owner": "abc"}
    vol = vast.create_launch_volume(offer=offer, size_gib=20, tags=tags)
    assert vol.usd_per_gib_month is None  # the ledger records the catalog's rate (made_data)
    assert [r.message for r in caplog.records if "storage_cost" in r.message] == [
        "vast: volume offer 510001 has storage_cost -0.2, not a price; billing the catalog's rate"]
    assert made_data("vast", 20, None, vol.usd_per_gib_month)["usd_per_gib_month"] == 0.15
    assert made_data("vast", 20, None, float("nan"))["usd_per_gib_month"] == 0.15
    fake.asks.clear()
    fake.add(ask(2, dph=0.40, geolocation="Texas, US", storage_cost=HOST_RATE))
    [offer] = vast.offers()
    tags["gpuorch:job"] = "5"
    assert vast.create_launch_volume(offer=offer, size_gib=20, tags=tags).usd_per_gib_month == HOST_RATE
