"""The Vast adapter's own rules, through the real vastai client against the fake Vast API: the
offer classes and their ranking by price and reliability, a launch that never promises a host,
errors translated at the boundary, outbids read as preemptions, and the bad-input and doctor paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_vast import KEY, FakeVast, ask

from gpuorch.catalog import load_rows
from gpuorch.catalog.audit import audit_rows, errors
from gpuorch.errors import AuthError, NoCapacityError, QuotaError, TransientError, UserInputError
from gpuorch.provider.port import InstanceState, LaunchRequest, Offer
from gpuorch_vast.catalog import CATALOG
from gpuorch_vast.config import parse_options
from gpuorch_vast.names import canonical
from gpuorch_vast.provider import VastProvider

pytestmark = pytest.mark.vast
OWNER = "c0ffee000001"


def offer_of(p: VastProvider, instance_type: str, region: str) -> Offer:
    return next(o for o in p.offers() if (o.instance_type, o.region) == (instance_type, region))


def req(offer: Offer, job: int = 7, attempt: int = 1, spot: bool = False) -> LaunchRequest:
    return LaunchRequest(job_id=job, attempt=attempt, offer=offer, spot=spot, owner=OWNER)


def test_offers_are_classes_ranked_by_expected_price_with_unreliable_hosts_left_out(vast: VastProvider) -> None:
    by_key = {(o.instance_type, o.region): o for o in vast.offers()}
    # One class per GPU model x count x country, never a host.
    assert set(by_key) == {("RTX4090x1", "US"), ("RTX4090x1", "CA"), ("RTX4090x2", "US"), ("A100-80GBx1", "SE"),
                           ("A100x1", "SE")}
    us = by_key[("RTX4090x1", "US")]
    # Ask 102 ($0.38, reliability 0.90) is below min_reliability 0.95: never offered. Of 101 ($0.40
    # at 0.99 -> 0.4040) and 104 ($0.41 at 0.999 -> 0.4104), the expected price ranks 101 first.
    assert us.price_per_hour == pytest.approx(0.40 / 0.99, abs=1e-4)
    assert us.spot_price_per_hour == pytest.approx(0.20 * 1.2 / 0.99, abs=1e-4)  # min bid x bid_factor
    assert (us.gpu, us.gpu_count, us.billing_granularity_s, us.min_billing_s) == ("RTX4090", 1, 1, 0)
    assert by_key[("A100-80GBx1", "SE")].gpu == "A100-80GB" and by_key[("A100x1", "SE")].gpu == "A100"


def test_a_higher_reliability_minimum_drops_hosts_and_the_ranking_weighs_reliability(fake: FakeVast) -> None:
    strict = VastProvider(parse_options({"server_url": fake.url, "min_reliability": 0.995}), KEY)
    assert {(o.instance_type, o.region) for o in strict.offers()} == {("RTX4090x1", "US")}
    # Only 104 is that reliable: the class's price is its expected price.
    assert offer_of(strict, "RTX4090x1", "US").price_per_hour == pytest.approx(0.41 / 0.999, abs=1e-4)


def test_offers_are_cached_briefly(fake: FakeVast) -> None:
    clock = [0.0]
    p = VastProvider(parse_options({"server_url": fake.url, "offers_ttl_s": 30}), KEY, monotonic=lambda: clock[0])
    first = p.offers()
    fake.take_all("A100 SXM4")
    assert p.offers() == first  # within the TTL: no new search
    clock[0] = 31
    assert {o.gpu for o in p.offers()} == {"RTX4090"}


def test_a_launch_takes_the_best_live_ask_of_the_class_not_the_one_searched(vast: VastProvider, fake: FakeVast) -> None:
    offer = offer_of(vast, "RTX4090x1", "US")
    fake.take_all()  # the market moved: every ask seen is gone, a new one of the class appeared
    fake.add(ask(105, "RTX 4090", dph=0.405, reliability=0.99, geolocation="Ohio, US"))
    inst = vast.launch(req(offer))
    assert fake.instances[int(inst.id)]["machine_id"] == 10_105
    assert inst.instance_type == "RTX4090x1" and inst.region == "US" and inst.owner == OWNER


def test_an_ask_gone_between_search_and_launch_is_no_capacity_and_rents_nothing(vast: VastProvider,
                                                                               fake: FakeVast) -> None:
    offer = offer_of(vast, "RTX4090x1", "US")
    fake.steal_on_rent = 1
    with pytest.raises(NoCapacityError) as e:
        vast.launch(req(offer))
    assert e.value.code == "no_such_ask" and fake.instances == {}
    again = vast.launch(req(offer))  # the daemon's retry: the next live ask
    assert [str(i) for i in fake.instances] == [again.id]


def test_no_ask_within_the_price_tolerance_is_no_capacity(vast: VastProvider, fake: FakeVast) -> None:
    offer = offer_of(vast, "RTX4090x1", "US")
    fake.take_all()
    fake.add(ask(106, "RTX 4090", dph=0.60, reliability=0.99))  # 49% above the offer
    with pytest.raises(NoCapacityError):
        vast.launch(req(offer))
    assert fake.instances == {}


def test_the_label_finds_the_instance_after_a_restart_and_nothing_is_rented_twice(fake: FakeVast,
                                                                                  tmp_path: Path) -> None:
    opts = parse_options({"server_url": fake.url})
    first = VastProvider(opts, KEY, home=tmp_path)
    inst = first.launch(req(offer_of(first, "RTX4090x1", "US")))
    assert fake.instances[int(inst.id)]["label"] == f"gpuorch-{OWNER}-7-1"
    restarted = VastProvider(opts, KEY, home=tmp_path)  # a new daemon life: nothing in memory
    assert restarted.launch(req(offer_of(restarted, "RTX4090x1", "US"))).id == inst.id
    assert len(fake.instances) == 1


def test_an_interruptible_launch_bids_and_an_outbid_reads_preempted(vast: VastProvider, fake: FakeVast) -> None:
    inst = vast.launch(req(offer_of(vast, "RTX4090x1", "US"), spot=True))
    row = fake.instances[int(inst.id)]
    assert row["is_bid"] and row["bid_price"] == pytest.approx(0.24)
    assert vast.get(inst.id).state == InstanceState.RUNNING
    fake.outbid(inst.id)
    got = vast.get(inst.id)
    assert got.state == InstanceState.PREEMPTED and "outbid" in (got.state_reason or "")
    assert got.host is None and got.ended_at is None  # Vast dates no outbid: the daemon's look stands
    assert fake.instances == {}  # destroyed once seen, not left paused: a stopped instance bills its storage
    vast.terminate(inst.id)  # the daemon's cleanup is quiet
    assert vast.get(inst.id).state == InstanceState.PREEMPTED


def test_an_instance_that_never_runs_stays_pending(vast: VastProvider, fake: FakeVast) -> None:
    fake.never_running = True
    inst = vast.launch(req(offer_of(vast, "RTX4090x1", "US")))
    for _ in range(3):
        assert vast.get(inst.id).state == InstanceState.PENDING  # the daemon's boot timeout ends it


def test_errors_are_translated_at_the_boundary(vast: VastProvider, fake: FakeVast) -> None:
    fake.fail_next(2, 429)
    assert vast.offers()  # two 429s retried by gpuorch's policy
    fake.fail_next(5, 503, body="Service Unavailable")
    with pytest.raises(TransientError):
        VastProvider(parse_options({"server_url": fake.url, "max_attempts": 2}), KEY, sleep=lambda s: None).offers()
    with pytest.raises(AuthError):
        VastProvider(parse_options({"server_url": fake.url}), "wrong-key").offers()
    fake.credit = 0
    offer = offer_of(vast, "RTX4090x1", "US")
    with pytest.raises(QuotaError):
        vast.launch(req(offer))


@pytest.mark.parametrize("options, field", [
    ({"min_reliability": 1.5}, "min_reliability"), ({"min_reliability": float("nan")}, "min_reliability"),
    ({"bid_factor": float("inf")}, "bid_factor"), ({"regions": ["usa"]}, "regions"),
    ({"server_url": "ftp://x"}, "server_url"), ({"api_key": "k"}, "api_key"), ({"verified_only": 1}, "verified_only"),
    ({"offers_ttl_s": True}, "offers_ttl_s"), ({"image": "a b"}, "image"), ({"colour": 1}, "colour"),
])
def test_bad_options_are_one_line_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(UserInputError) as e:
        parse_options(options)
    assert str(e.value).startswith(f"providers.vast.{field}") and "\n" not in str(e.value)


def test_missing_credentials_refuse_the_provider_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VAST_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    with pytest.raises(UserInputError, match="VAST_API_KEY"):
        VastProvider.from_config({}, tmp_path)
    (tmp_path / "xdg" / "vastai").mkdir(parents=True)
    (tmp_path / "xdg" / "vastai" / "vast_api_key").write_text(KEY + "\n")
    assert VastProvider.from_config({}, tmp_path).api is not None


def test_doctor_names_where_the_key_is_and_never_the_key(vast: VastProvider, fake: FakeVast) -> None:
    findings = vast.doctor()
    assert [f.status for f in findings] == ["ok", "ok"]
    assert "VAST_API_KEY" in findings[0].message and all(KEY not in f.message for f in findings)
    fake.credit = 0
    assert vast.doctor()[-1].status == "warn"


def test_vast_names_map_to_the_gpu_table_and_the_snapshot_passes_the_audit() -> None:
    assert canonical("RTX 4090", 24564) == "RTX4090" and canonical("RTX 6000Ada", 49140) == "RTX6000ADA"
    assert canonical("A100 PCIE", 81920) == "A100-PCIE-80GB" and canonical("H100 NVL", 95830) == "H100-NVL"
    assert canonical("GTX 1080", 8192) is None
    assert CATALOG.rows is not None
    rows = load_rows(CATALOG.rows)
    assert rows and {r.provider for r in rows} == {"vast"} and not errors(audit_rows(rows))
