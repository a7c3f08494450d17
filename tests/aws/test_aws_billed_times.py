"""EC2's record of an instance's billed interval (issue 12, item 6), against moto: the launch
time is ``LaunchTime``; the end is the time in ``StateTransitionReason`` ("User initiated
(YYYY-MM-DD HH:MM:SS GMT)"), and nothing when EC2 gives no time (the daemon's look stands)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from moto_helpers import interrupt_spot, mark_spot_request

from gpuorch.provider.port import InstanceState, LaunchRequest, Offer
from gpuorch_aws import AwsProvider
from gpuorch_aws.parse import spot_end, to_instance, transition_time

pytestmark = pytest.mark.aws


@pytest.fixture
def offer(moto_offers: list[Offer]) -> Offer:
    return next(o for o in moto_offers if o.zone == "us-east-1b" and o.instance_type == "g5.xlarge")


def within(t: datetime | None, before: datetime, after: datetime) -> bool:
    """``t`` lies in [before, after], at EC2's one-second resolution."""
    return t is not None and before - timedelta(seconds=1) <= t <= after + timedelta(seconds=1)


def test_transition_times_are_read_from_the_reason_text() -> None:
    assert transition_time("User initiated (2026-11-28 08:48:26 GMT)") == datetime(2026, 11, 28, 8, 48, 26, tzinfo=UTC)
    assert transition_time("User initiated (2026-11-28 08:48:26 UTC)") == datetime(2026, 11, 28, 8, 48, 26, tzinfo=UTC)
    assert transition_time("Server.SpotInstanceTermination: Spot instance termination") is None
    assert transition_time("User initiated (2026-13-45 08:48:26 GMT)") is None  # not a date: no time
    assert transition_time("") is None and transition_time(None) is None


def test_a_running_instance_reports_no_end_even_with_a_dated_reason() -> None:
    d = {"InstanceId": "i-1", "InstanceType": "g5.xlarge", "State": {"Name": "running"},
         "StateTransitionReason": "User initiated (2026-11-28 08:48:26 GMT)",
         "LaunchTime": datetime(2026, 11, 28, 8, 50, tzinfo=UTC)}
    inst = to_instance(d, "us-east-1")
    assert inst.ended_at is None and inst.created_at == datetime(2026, 11, 28, 8, 50, tzinfo=UTC)


def test_launch_and_termination_times_come_from_ec2(provider: AwsProvider, offer: Offer, ec2: Any) -> None:
    before = datetime.now(UTC)
    inst = provider.launch(LaunchRequest(job_id=7, attempt=1, offer=offer, spot=False))
    after = datetime.now(UTC)
    described = ec2.describe_instances(InstanceIds=[inst.id])["Reservations"][0]["Instances"][0]
    assert inst.created_at == described["LaunchTime"].astimezone(UTC)
    assert within(inst.created_at, before, after) and inst.ended_at is None
    stop_before = datetime.now(UTC)
    provider.terminate(inst.id)
    stop_after = datetime.now(UTC)
    gone = provider.get(inst.id)
    assert gone.state == InstanceState.TERMINATED
    assert within(gone.ended_at, stop_before, stop_after)
    listed = next(i for i in provider.list_managed() if i.id == inst.id)
    assert listed.ended_at == gone.ended_at


def test_a_spot_reclaim_without_a_dated_reason_leaves_the_end_to_the_daemon(provider: AwsProvider,
                                                                             offer: Offer) -> None:
    inst = provider.launch(LaunchRequest(job_id=7, attempt=1, offer=offer, spot=True))
    interrupt_spot("us-east-1", inst.id)
    gone = provider.get(inst.id)
    assert gone.state == InstanceState.PREEMPTED and gone.ended_at is None


def test_a_spot_reclaim_is_dated_by_its_spot_requests_status(provider: AwsProvider, offer: Offer, ec2: Any) -> None:
    """The reclaim's reason carries no time; the instance's spot request, once it reads
    ``instance-terminated-*``, dates the end (moto's UpdateTime is fixed: 2015-01-01)."""
    inst = provider.launch(LaunchRequest(job_id=7, attempt=1, offer=offer, spot=True))
    interrupt_spot("us-east-1", inst.id)
    mark_spot_request(ec2, "us-east-1", inst.id, code="instance-terminated-no-capacity")
    gone = provider.get(inst.id)
    assert gone.state == InstanceState.PREEMPTED and gone.ended_at == datetime(2015, 1, 1, tzinfo=UTC)
    assert next(i for i in provider.list_managed() if i.id == inst.id).ended_at == gone.ended_at


def test_a_spot_request_still_fulfilled_dates_nothing() -> None:
    assert spot_end({"Code": "fulfilled", "UpdateTime": datetime(2026, 1, 1, tzinfo=UTC)}) is None
    assert spot_end({"Code": "instance-stopped-no-capacity", "UpdateTime": datetime(2026, 1, 1, tzinfo=UTC)}) \
        == datetime(2026, 1, 1, tzinfo=UTC)
    assert spot_end(None) is None
