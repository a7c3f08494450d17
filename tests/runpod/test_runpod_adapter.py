"""The RunPod adapter against the fake API: offers, launch bodies, errors at the boundary (429
with Retry-After, 5xx, stock-outs, a refused key), options and credentials, doctor."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fake_runpod import KEY, FakeRunpod

from gpuorch.errors import AuthError, NoCapacityError, PermanentError, QuotaError, TransientError, UserInputError
from gpuorch.provider import InstanceState, LaunchRequest
from gpuorch_runpod.config import api_key, parse_options
from gpuorch_runpod.errors import from_graphql
from gpuorch_runpod.provider import RunpodProvider

pytestmark = pytest.mark.runpod


def _offer(rp: RunpodProvider, gpu: str = "RTX4090", cloud: str = "community", n: int = 1):
    return next(o for o in rp.offers() if o.gpu == gpu and o.region == cloud and o.gpu_count == n)


def test_offers_price_each_cloud_per_gpu_and_leave_out_unknown_types(rp: RunpodProvider) -> None:
    offers = rp.offers()
    assert {o.gpu for o in offers} == {"RTX4090", "H100"}  # the RTX 2080 is no GPU gpuorch sizes for
    four = _offer(rp, n=4)
    assert (four.price_per_hour, four.spot_price_per_hour, four.vcpus, four.memory_gib) == (1.36, 0.8, 24, 164)
    assert _offer(rp, "H100", "secure", 8).interconnect == "nvlink" and _offer(rp, n=2).interconnect == "pcie"
    assert not [o for o in offers if o.gpu == "H100" and o.region == "community"]  # not sold there
    assert {(o.billing_granularity_s, o.min_billing_s) for o in offers} == {(1, 0)}  # per second


def test_offers_are_cached_for_their_ttl(rp: RunpodProvider, fake: FakeRunpod) -> None:
    rp.offers()
    rp.offers()
    assert fake.calls.count("gpuTypes") == 1


def test_an_interruptible_launch_bids_the_spot_price_and_carries_token_tags_and_keys(
        rp: RunpodProvider, fake: FakeRunpod) -> None:
    inst = rp.launch(LaunchRequest(job_id=7, attempt=2, offer=_offer(rp, n=2), spot=True, owner="abc123"))
    body = fake.pods[inst.id].body
    assert body["name"] == "gpuorch-abc123-7-2" and body["bidPerGpu"] == 0.2 and body["gpuCount"] == 2
    assert body["cloudType"] == "COMMUNITY" and body["ports"] == "22/tcp"
    env = {e["key"]: e["value"] for e in body["env"]}
    assert env["GPUORCH_SSH_HOST_KEY"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert env["PUBLIC_KEY"].startswith("ssh-ed25519 ")
    assert inst.spot and inst.tags == {"gpuorch:managed": "true", "gpuorch:job": "7", "gpuorch:attempt": "2",
                                       "gpuorch:owner": "abc123"}
    assert "GPUORCH_SSH_HOST_KEY" not in json.dumps(inst.model_dump(mode="json"))


def test_a_quote_or_newline_in_a_value_travels_as_data_not_as_graphql(rp: RunpodProvider, fake: FakeRunpod) -> None:
    rp.options = parse_options({"api_url": fake.url, "image": "registry.example.com/team/img:v1"})
    inst = rp.launch(LaunchRequest(job_id=8, attempt=1, offer=_offer(rp), spot=False,
                                   ssh_public_key='ssh-ed25519 AAAA x"}) { evil }'))
    env = {e["key"]: e["value"] for e in fake.pods[inst.id].body["env"]}
    assert env["PUBLIC_KEY"].endswith('x"}) { evil }')  # one value, whole; no mutation was rewritten


def test_429_is_retried_after_the_wait_runpod_asks_for(fake: FakeRunpod, tmp_path: Path) -> None:
    waits: list[float] = []
    rp = RunpodProvider(parse_options({"api_url": fake.url}), KEY, home=tmp_path, sleep=waits.append)
    fake.throttle(2, retry_after="3")
    assert rp.offers()
    assert waits == [3.0, 3.0]


def test_throttling_past_the_retry_budget_is_a_transient_error_carrying_retry_after(
        fake: FakeRunpod, tmp_path: Path) -> None:
    rp = RunpodProvider(parse_options({"api_url": fake.url, "max_attempts": 2}), KEY, home=tmp_path,
                        sleep=lambda s: None)
    fake.throttle(5, retry_after="7")
    with pytest.raises(TransientError) as e:
        rp.list_managed()
    assert e.value.retry_after == 7.0 and e.value.code == "RateLimited"
    fake.http_error(5, 503)
    with pytest.raises(TransientError):
        rp.list_managed()


def test_a_stock_out_is_no_capacity_and_creates_nothing(rp: RunpodProvider, fake: FakeRunpod) -> None:
    fake.out_of_stock("NVIDIA GeForce RTX 4090", "community", interruptible=False)
    with pytest.raises(NoCapacityError, match="no longer any instances available"):
        rp.launch(LaunchRequest(job_id=9, attempt=1, offer=_offer(rp), spot=False))
    assert fake.pods == {}


def test_a_bid_below_the_market_is_no_capacity(rp: RunpodProvider, fake: FakeRunpod) -> None:
    offer = _offer(rp)
    fake.gpu_types[0]["communitySpotPrice"] = 0.3  # the market moved above the catalog's price
    with pytest.raises(NoCapacityError):
        rp.launch(LaunchRequest(job_id=10, attempt=1, offer=offer, spot=True))


@pytest.mark.parametrize(("message", "kind"), [
    ("There are no longer any instances available with enough disk space.", NoCapacityError),
    ("Your account balance is too low to deploy this pod", QuotaError),
    ("Unauthorized request, please check your API key.", AuthError),
    ("Something unexpected happened", PermanentError),
])
def test_graphql_error_messages_map_to_the_domain(message: str, kind: type) -> None:
    assert type(from_graphql(message, "x")) is kind


def test_a_refused_key_is_an_auth_error_that_never_prints_the_key(fake: FakeRunpod, tmp_path: Path) -> None:
    rp = RunpodProvider(parse_options({"api_url": fake.url}), "rpa_WRONG", home=tmp_path, sleep=lambda s: None)
    with pytest.raises(AuthError) as e:
        rp.offers()
    assert "RUNPOD_API_KEY" in str(e.value) and "rpa_WRONG" not in str(e.value)


def test_a_pod_that_never_runs_stays_pending(rp: RunpodProvider, fake: FakeRunpod) -> None:
    fake.never_run = True
    inst = rp.launch(LaunchRequest(job_id=11, attempt=1, offer=_offer(rp), spot=False))
    assert inst.state == InstanceState.PENDING and rp.get(inst.id).host is None


@pytest.mark.parametrize(("options", "field"), [
    ({"clouds": ["hyperscale"]}, "clouds"), ({"clouds": []}, "clouds"), ({"data_center": "mars"}, "data_center"),
    ({"image": "Bad Image"}, "image"), ({"api_url": "http://example.com"}, "api_url"),
    ({"api_url": "ftp://127.0.0.1"}, "api_url"), ({"max_attempts": 0}, "max_attempts"),
    ({"retry_max_s": float("nan")}, "retry_max_s"), ({"offers_ttl_s": 1e20}, "offers_ttl_s"),
    ({"ssh_user": "root; rm"}, "ssh_user"), ({"zone": "x"}, "zone"), ({"api_key": "k"}, "api_key"),
])
def test_bad_options_are_one_line_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(UserInputError) as e:
        parse_options(options)
    assert re.match(rf"providers\.runpod\.{field}(\.\d+)?: ", str(e.value)) and "\n" not in str(e.value)


def test_the_key_comes_from_the_env_or_runpods_config_file(tmp_path: Path) -> None:
    assert api_key(env={"RUNPOD_API_KEY": "k1"}, home=tmp_path) == ("k1", "$RUNPOD_API_KEY")
    with pytest.raises(UserInputError, match="RUNPOD_API_KEY is not set"):
        api_key(env={}, home=tmp_path)
    (tmp_path / ".runpod").mkdir()
    (tmp_path / ".runpod" / "config.toml").write_text('[default]\napi_key = "k2"\n[team]\napi_key = "k3"\n')
    assert api_key(env={}, home=tmp_path)[0] == "k2" and api_key("team", env={}, home=tmp_path)[0] == "k3"
    with pytest.raises(UserInputError, match=r"no api_key in \[other\]"):
        api_key("other", env={}, home=tmp_path)


def test_doctor_names_where_the_key_came_from_and_never_the_key(rp: RunpodProvider, fake: FakeRunpod,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    [ok] = rp.doctor()
    assert ok.status == "ok" and "$RUNPOD_API_KEY" in ok.message and KEY not in ok.message
    monkeypatch.delenv("RUNPOD_API_KEY")
    [missing] = rp.doctor()
    assert missing.status == "fail" and "RUNPOD_API_KEY" in (missing.fix or "")


def test_from_config_refuses_a_missing_or_refused_key_in_one_line(fake: FakeRunpod, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_WRONG")
    with pytest.raises(UserInputError, match="providers.runpod: .*refused"):
        RunpodProvider.from_config({"api_url": fake.url, "max_attempts": 1}, tmp_path)
    monkeypatch.delenv("RUNPOD_API_KEY")
    with pytest.raises(UserInputError, match="no API key"):
        RunpodProvider.from_config({"api_url": fake.url}, tmp_path)
