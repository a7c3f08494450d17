"""Vast storage at each host's rate (issue 33): every ask of Vast's search carries its host's
``storage_cost`` ($/GB-month), and a class offer carries its best ask's (the host a launch most
likely takes) as ``Offer.storage_usd_per_gib_month``. Placement counts a volume job's storage at
that rate instead of the catalog's single one, which stays the rate of offers that give none
(the shipped snapshot's rows)."""

from __future__ import annotations

import pytest
from fake_vast import FakeVast, ask

from gpuorch.jobs.spec import parse_spec
from gpuorch.money.storage import rate_table
from gpuorch.placement import PlacementOptions, candidates
from gpuorch.placement.cost import HOURS_PER_MONTH, with_job
from gpuorch_vast.provider import VastProvider

pytestmark = [pytest.mark.vast]
START_S = 480  # placement's default boot + setup


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
