"""Launch, look-up, listing, termination and preemption of EC2 instances, against moto."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from moto_helpers import announce_reclaim, interrupt_spot, mark_spot_request

from gpuorch.errors import NotFoundError, PermanentError
from gpuorch.provider.port import InstanceState, LaunchRequest, Offer
from gpuorch_aws import AwsProvider

pytestmark = pytest.mark.aws

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake gpuorch-job-7"


@pytest.fixture
def offer(moto_offers: list[Offer]) -> Offer:
    return next(o for o in moto_offers if o.zone == "us-east-1b" and o.instance_type == "g5.xlarge")


def req(offer: Offer, job: int = 7, attempt: int = 1, **kw: Any) -> LaunchRequest:
    return LaunchRequest(job_id=job, attempt=attempt, offer=offer, **{"spot": False, **kw})


def describe(ec2: Any, instance_id: str) -> dict[str, Any]:
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def test_moto_ignores_client_tokens_so_launch_looks_before_creating(
    provider: AwsProvider, offer: Offer, ec2: Any
) -> None:
    # The premise: moto creates a second instance for a repeated ClientToken (EC2 would not).
    request = dict(ImageId="ami-0d1a0000000000001", InstanceType="g5.xlarge", MinCount=1, MaxCount=1, ClientToken="t")
    a = ec2.run_instances(**request)
    b = ec2.run_instances(**request)
    assert a["Instances"][0]["InstanceId"] != b["Instances"][0]["InstanceId"]
    # The adapter: the same attempt twice is one instance, found by its tags.
    first = provider.launch(req(offer))
    second = provider.launch(req(offer))
    assert second.id == first.id
    assert [i.id for i in provider.list_managed() if i.job_id == 7] == [first.id]
    assert describe(ec2, first.id)["ClientToken"] == "gpuorch-7-1"


def test_each_installation_gets_its_own_instance_for_the_same_attempt(provider: AwsProvider, offer: Offer) -> None:
    mine = provider.launch(req(offer, owner="inst-a"))
    theirs = provider.launch(req(offer, owner="inst-b"))
    unowned = provider.launch(req(offer))
    assert len({mine.id, theirs.id, unowned.id}) == 3
    assert provider.launch(req(offer, owner="inst-a")).id == mine.id
    assert (mine.owner, theirs.owner, unowned.owner) == ("inst-a", "inst-b", "")


def test_on_demand_launch(provider: AwsProvider, offer: Offer, ec2: Any) -> None:
    inst = provider.launch(req(offer, ssh_public_key=KEY, disk_gib=120, max_lifetime_s=3600))
    assert (inst.state, inst.spot, inst.zone, inst.region) == (InstanceState.PENDING, False, "us-east-1b", "us-east-1")
    d = describe(ec2, inst.id)
    assert d.get("InstanceLifecycle") is None and d["ImageId"] == "ami-0d1a0000000000001"
    shutdown = ec2.describe_instance_attribute(InstanceId=inst.id, Attribute="instanceInitiatedShutdownBehavior")
    assert shutdown["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"
    data = ec2.describe_instance_attribute(InstanceId=inst.id, Attribute="userData")["UserData"]["Value"]
    text = base64.b64decode(data).decode()
    assert KEY in text and "+60" in text


def test_spot_launch_reports_spot(provider: AwsProvider, offer: Offer, ec2: Any) -> None:
    inst = provider.launch(req(offer, spot=True))
    assert inst.spot and describe(ec2, inst.id)["InstanceLifecycle"] == "spot"
    assert provider.get(inst.id).spot


def test_instance_and_its_root_volume_carry_the_attempt_tags(provider: AwsProvider, offer: Offer, ec2: Any) -> None:
    inst = provider.launch(req(offer, job=9, attempt=4, owner="inst-a", disk_gib=80))
    expected = {"gpuorch:managed": "true", "gpuorch:job": "9", "gpuorch:attempt": "4", "gpuorch:owner": "inst-a"}
    assert provider.get(inst.id).tags == expected
    vols = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [inst.id]}])["Volumes"]
    assert len(vols) == 1
    assert {t["Key"]: t["Value"] for t in vols[0]["Tags"]} == {**expected, "gpuorch:role": "root"}
    assert (vols[0]["Size"], vols[0]["VolumeType"]) == (80, "gp3")
    assert vols[0]["VolumeId"] not in {v.id for v in provider.list_volumes()}  # it goes with the instance


def test_zone_ids_from_the_catalog_are_accepted(provider: AwsProvider, offer: Offer, ec2: Any) -> None:
    zones = ec2.describe_availability_zones()["AvailabilityZones"]
    zone_id = next(z["ZoneId"] for z in zones if z["ZoneName"] == "us-east-1b")
    inst = provider.launch(req(offer.model_copy(update={"zone": zone_id})))
    assert inst.zone == "us-east-1b"


def test_offers_of_other_regions_or_providers_are_refused(provider: AwsProvider, offer: Offer) -> None:
    with pytest.raises(PermanentError, match=r"not in providers.aws.regions"):
        provider.launch(req(offer.model_copy(update={"region": "eu-west-1", "zone": "eu-west-1a"})))
    with pytest.raises(PermanentError, match="not in us-east-1"):
        provider.launch(req(offer.model_copy(update={"zone": "us-west-2a"})))
    with pytest.raises(PermanentError, match="provider 'gcp'"):
        provider.launch(req(offer.model_copy(update={"provider": "gcp"})))


def test_list_managed_covers_every_region_and_terminate_is_quiet(provider: AwsProvider, offer: Offer,
                                                                 moto_offers: list[Offer], make_provider: Any) -> None:
    west = next(o for o in moto_offers if o.region == "us-west-2")
    a, b = provider.launch(req(offer)), provider.launch(req(west, job=8))
    listed = {i.id: i for i in provider.list_managed()}
    assert {a.id, b.id} <= set(listed) and listed[b.id].region == "us-west-2"
    fresh = make_provider()  # has seen no instance yet: looks in every region
    fresh.terminate(b.id)
    assert provider.get(b.id).state == InstanceState.TERMINATED
    fresh.terminate(b.id)
    fresh.terminate("i-0123456789abcdef0")
    with pytest.raises(NotFoundError):
        fresh.get("i-0123456789abcdef0")


def test_a_spot_interruption_reads_preempted(provider: AwsProvider, offer: Offer) -> None:
    inst = provider.launch(req(offer, spot=True))
    interrupt_spot("us-east-1", inst.id)
    got = provider.get(inst.id)
    assert got.state == InstanceState.PREEMPTED and got.state_reason == "Server.SpotInstanceTermination"
    assert [i.state for i in provider.list_managed() if i.id == inst.id] == [InstanceState.PREEMPTED]
    provider.terminate(inst.id)


def test_our_own_termination_reads_terminated(provider: AwsProvider, offer: Offer) -> None:
    inst = provider.launch(req(offer, spot=True))
    provider.terminate(inst.id)
    got = provider.get(inst.id)
    assert got.state == InstanceState.TERMINATED and got.state_reason == "Client.UserInitiatedShutdown"


def test_a_retirement_days_ahead_is_a_scheduled_stop_and_a_deadline_only_within_the_drain_horizon(
        make_provider: Any, offer: Offer) -> None:
    now = [datetime(2030, 5, 1, 12, tzinfo=UTC)]
    provider = make_provider(now=lambda: now[0], retirement_drain_s=7200)
    inst = provider.launch(req(offer))
    when = now[0] + timedelta(days=3)
    announce_reclaim("us-east-1", inst.id, when, code="instance-retirement",
                     description="The instance is running on degraded hardware")

    far = provider.get(inst.id)
    assert far.state.alive and far.preemption_deadline is None  # nothing drains days ahead
    assert far.scheduled_stop is not None
    assert (far.scheduled_stop.at, far.scheduled_stop.kind, far.scheduled_stop.notice_at) == (
        when, "instance-retirement", when - timedelta(hours=2))
    assert far.scheduled_stop.description == "The instance is running on degraded hardware"

    now[0] = when - timedelta(hours=2, seconds=1)
    assert provider.get(inst.id).preemption_deadline is None
    now[0] = when - timedelta(hours=2)  # the horizon reached: now it is the deadline
    assert provider.get(inst.id).preemption_deadline == when
    assert next(i for i in provider.list_managed() if i.id == inst.id).preemption_deadline == when
    now[0] = when + timedelta(minutes=5)  # overdue (EC2 stops it between NotBefore and NotAfter)
    assert provider.get(inst.id).preemption_deadline == when


def test_the_drain_horizon_defaults_to_an_hour(make_provider: Any, offer: Offer) -> None:
    now = datetime(2030, 5, 1, 12, tzinfo=UTC)
    provider = make_provider(now=lambda: now)
    soon, later = provider.launch(req(offer)), provider.launch(req(offer, job=8))
    announce_reclaim("us-east-1", soon.id, now + timedelta(minutes=59))
    announce_reclaim("us-east-1", later.id, now + timedelta(minutes=61))
    assert provider.get(soon.id).preemption_deadline == now + timedelta(minutes=59)
    assert provider.get(later.id).preemption_deadline is None


def test_a_spot_request_marked_for_termination_sets_the_deadline(provider: AwsProvider, offer: Offer, ec2: Any) -> None:
    inst = provider.launch(req(offer, spot=True))
    assert provider.get(inst.id).preemption_deadline is None
    mark_spot_request(ec2, "us-east-1", inst.id)
    marked = datetime(2015, 1, 1, tzinfo=UTC)  # moto's fixed UpdateTime
    assert provider.get(inst.id).preemption_deadline == marked + timedelta(seconds=120)
