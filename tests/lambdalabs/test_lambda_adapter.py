"""The Lambda adapter against the fake API: launch by name token, errors at the boundary, 429s,
the launch-intent guard, on-demand only, options and credentials, doctor."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fake_lambda import KEY, FakeLambda

from gpuorch.errors import (
    AuthError,
    NoCapacityError,
    NotFoundError,
    PermanentError,
    QuotaError,
    TransientError,
    UserInputError,
)
from gpuorch.provider.port import InstanceState, LaunchRequest, Offer, client_token
from gpuorch_lambda.config import api_key, parse_options
from gpuorch_lambda.parse import tags_of

pytestmark = pytest.mark.lambdalabs
OWNER = "c0ffee000001"


def a10(provider) -> Offer:
    return next(o for o in provider.offers() if o.instance_type == "gpu_1x_a10" and o.region == "us-east-1")


def req(offer: Offer, job: int = 7, attempt: int = 1, **kw) -> LaunchRequest:
    return LaunchRequest(job_id=job, attempt=attempt, offer=offer, spot=False, owner=OWNER, **kw)


def test_offers_are_on_demand_per_region_with_capacity_and_skip_unknown_gpus(make_provider, fake: FakeLambda):
    fake.refuse("gpu_1x_a10", "us-west-1")
    offers = make_provider().offers()
    keys = {(o.instance_type, o.region) for o in offers}
    assert ("gpu_1x_a10", "us-east-1") in keys and ("gpu_1x_a10", "us-west-1") not in keys
    rtx6000 = next(o for o in offers if o.instance_type == "gpu_1x_rtx6000")  # the Quadro RTX 6000
    assert (rtx6000.gpu, rtx6000.gpu_count, rtx6000.price_per_hour) == ("QUADRO-RTX6000", 1, 0.5)
    h100 = next(o for o in offers if o.instance_type == "gpu_8x_h100_sxm5")
    assert (h100.gpu, h100.gpu_count, h100.price_per_hour, h100.interconnect) == ("H100", 8, 23.92, "nvlink")
    assert all(o.spot_price_per_hour is None and (o.billing_granularity_s, o.min_billing_s) == (60, 60)
               for o in offers)
    regional = make_provider(regions=["us-south-1"]).offers()
    assert {o.region for o in regional} == {"us-south-1"}


def test_launch_names_the_instance_by_its_token_registers_the_key_and_hands_keys_to_cloud_init(
        make_provider, fake: FakeLambda, tmp_path: Path):
    p = make_provider()
    inst = p.launch(req(a10(p), max_lifetime_s=3600))
    token = client_token(7, 1, OWNER)
    body = fake.launches[-1]
    assert body["name"] == token and tags_of(token) == inst.tags and inst.owner == OWNER
    assert body["quantity"] == 1 and len(body["ssh_key_names"]) == 1
    job_pub = (tmp_path / "keys" / "job-7" / "id_ed25519.pub").read_text().split()[:2]
    assert [k["public_key"].split()[:2] for k in fake.ssh_keys.values()] == [job_pub]
    doc = yaml.safe_load(body["user_data"].removeprefix("#cloud-config\n"))
    assert doc["ssh_keys"]["ed25519_public"] and doc["ssh_authorized_keys"][0].split()[:2] == job_pub
    assert ["shutdown", "-h", "+60"] in doc["runcmd"]
    assert KEY not in body["user_data"]
    # The same attempt again: the instance found by name, no second launch, no second key.
    assert p.launch(req(a10(p))).id == inst.id and len(fake.launches) == 1 and len(fake.ssh_keys) == 1


def test_a_lost_launch_answer_is_not_launched_again_within_the_grace(make_provider, fake: FakeLambda):
    p = make_provider(launch_grace_s=120)
    offer = a10(p)
    fake.failing.append((502, "provider/internal-unavailable", "/instance-operations/launch"))
    with pytest.raises(TransientError):
        p.launch(req(offer))  # nothing launched, but the answer cannot say so
    with pytest.raises(TransientError, match="not listed yet"):
        p.launch(req(offer))  # the intent stands: no blind second POST
    assert len(fake.launches) == 0
    fake.advance(121)  # the grace is over and nothing appeared: launching again is safe
    inst = p.launch(req(offer))
    assert inst.tags and len(fake.live()) == 1
    # A 5xx after the instance was made: the next call finds it by name, launches nothing more.
    fake.lost_launch = True
    fake.failing.append((502, "provider/internal-unavailable", "/instance-operations/launch"))
    with pytest.raises(TransientError):
        p.launch(req(offer, attempt=2))
    again = p.launch(req(offer, attempt=2))
    assert again.attempt == 2 and len(fake.live()) == 2 and len(fake.launches) == 2


def test_errors_are_translated_at_the_boundary(make_provider, fake: FakeLambda):
    p = make_provider()
    offer = a10(p)
    fake.refuse("gpu_1x_a10", "us-east-1")
    with pytest.raises(NoCapacityError, match="insufficient-capacity"):
        p.launch(req(offer))
    fake.no_capacity.clear()
    fake.quota = 0
    with pytest.raises(QuotaError):
        p.launch(req(offer, job=8))
    fake.quota = None
    with pytest.raises(NotFoundError):
        p.get("0123456789abcdef")
    p.terminate("0123456789abcdef")  # quiet
    fake.failing.append((400, "global/invalid-parameters", None))
    with pytest.raises(PermanentError, match="invalid-parameters"):
        p.list_managed()
    fake.key = "another-key-entirely-0000"
    with pytest.raises(AuthError, match="LAMBDA_API_KEY"):
        p.list_managed()
    assert fake.live() == []


def test_429_is_retried_after_retry_after_then_handed_back_as_not_yet(make_provider, fake: FakeLambda):
    waits: list[float] = []
    p = make_provider()
    p._api._sleep = waits.append  # the policy's sleeps, recorded instead of slept
    fake.throttle(2, retry_after=3)
    assert p.list_managed() == [] and len(waits) == 2
    fake.throttle(50, retry_after=7)
    with pytest.raises(TransientError) as e:
        p.list_managed()
    assert e.value.retry_after == 7


def test_spot_and_foreign_regions_are_refused_and_never_placed(make_provider, fake: FakeLambda):
    p = make_provider(regions=["us-east-1"])
    offer = a10(p)
    with pytest.raises(PermanentError, match="no spot"):
        p.launch(LaunchRequest(job_id=9, attempt=1, offer=offer, spot=True, owner=OWNER))
    west = offer.model_copy(update={"region": "us-west-1", "zone": "us-west-1"})
    with pytest.raises(PermanentError, match="regions"):
        p.launch(req(west, job=10))
    assert fake.launches == []


def test_an_instance_that_never_boots_stays_pending(make_provider, fake: FakeLambda):
    fake.never_boot = True
    p = make_provider()
    inst = p.launch(req(a10(p)))
    fake.advance(3600)
    seen = p.get(inst.id)
    assert seen.state == InstanceState.PENDING and seen.host is None


def test_two_installations_never_see_each_others_instances_as_their_own(make_provider, fake: FakeLambda):
    p = make_provider()
    mine = p.launch(req(a10(p)))
    theirs = p.launch(LaunchRequest(job_id=7, attempt=1, offer=a10(p), spot=False, owner="c0ffee000002"))
    assert mine.id != theirs.id
    owners = {i.id: i.owner for i in p.list_managed()}
    assert owners == {mine.id: OWNER, theirs.id: "c0ffee000002"}


@pytest.mark.parametrize("options, field", [
    ({"regions": ["US East"]}, "regions"), ({"endpoint": "http://example.com/api/v1"}, "endpoint"),
    ({"offers_ttl_s": float("nan")}, "offers_ttl_s"), ({"launch_grace_s": -1}, "launch_grace_s"),
    ({"ssh_user": "root; rm -rf /"}, "ssh_user"), ({"colour": "blue"}, "colour"),
])
def test_bad_options_are_one_line_naming_the_field(options, field):
    with pytest.raises(UserInputError) as e:
        parse_options(options)
    assert str(e.value).startswith(f"providers.lambda.{field}") and "\n" not in str(e.value)


def test_the_key_comes_from_the_environment_or_the_key_file_never_the_options(tmp_path: Path):
    opts = parse_options({"api_key_file": str(tmp_path / "keys")})
    assert api_key(opts, {"LAMBDA_API_KEY": KEY}) == KEY
    with pytest.raises(UserInputError, match="no Lambda Cloud API key; set LAMBDA_API_KEY") as e:
        api_key(opts, {})
    assert "\n" not in str(e.value)
    (tmp_path / "keys").write_text(f"# mine\napi_key = {KEY}\n")
    assert api_key(opts, {}) == KEY
    (tmp_path / "keys").write_text("not a key at all!\n")
    with pytest.raises(UserInputError, match="does not hold") as e:
        api_key(opts, {})
    assert "not a key" not in str(e.value)
    with pytest.raises(UserInputError, match="api_key"):
        parse_options({"api_key": KEY})


def test_doctor_says_where_the_key_came_from_and_never_shows_it(make_provider, fake: FakeLambda):
    p = make_provider()
    found = p.doctor()
    assert [f.status for f in found] == ["ok", "ok"] and "$LAMBDA_API_KEY" in found[0].message
    fake.key = "another-key-entirely-0000"
    bad = p.doctor()
    assert bad[0].status == "fail" and "LAMBDA_API_KEY" in bad[0].fix
    assert not any(KEY in f.message or KEY in (f.fix or "") for f in found + bad)
