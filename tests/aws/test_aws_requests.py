"""Request-body builders and response parsers: plain functions, no moto."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml

from gpuorch.provider.port import InstanceState, LaunchRequest, Offer
from gpuorch_aws.parse import (
    instance_state,
    reclaim_deadline,
    scheduled_stop,
    spot_notice_deadline,
    to_instance,
    to_volume,
)
from gpuorch_aws.requests import (
    attempt_filters,
    create_volume_kwargs,
    free_device,
    login_config,
    run_instances_kwargs,
    tag_specifications,
    user_data,
)

pytestmark = pytest.mark.aws

OFFER = Offer(provider="aws", region="us-east-1", zone="us-east-1b", instance_type="g5.xlarge", gpu="A10G",
              gpu_count=1, price_per_hour=1.006, spot_price_per_hour=0.4)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake gpuorch-job-7"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def request(**kw: object) -> LaunchRequest:
    return LaunchRequest(**{"job_id": 7, "attempt": 2, "offer": OFFER, "spot": False, **kw})  # type: ignore[arg-type]


def body(req: LaunchRequest, **kw: object) -> dict:
    return run_instances_kwargs(req, **{"image_id": "ami-0d1a0000000000001", "zone": "us-east-1b",  # type: ignore[arg-type]
                                        "root_device": "/dev/sda1", **kw})


def test_on_demand_body_is_one_tagged_idempotent_instance_that_terminates_on_shutdown() -> None:
    b = body(request(owner="inst-1", disk_gib=99.5))
    got = (b["MinCount"], b["MaxCount"], b["InstanceType"], b["ImageId"])
    assert got == (1, 1, "g5.xlarge", "ami-0d1a0000000000001")
    assert b["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert b["Placement"] == {"AvailabilityZone": "us-east-1b"}
    assert b["ClientToken"] == request(owner="inst-1").client_token and b["ClientToken"].endswith("-7-2")
    assert "InstanceMarketOptions" not in b and "UserData" not in b and "SubnetId" not in b
    assert b["BlockDeviceMappings"] == [{"DeviceName": "/dev/sda1", "Ebs": {
        "VolumeSize": 100, "VolumeType": "gp3", "DeleteOnTermination": True}}]
    specs = {s["ResourceType"]: {t["Key"]: t["Value"] for t in s["Tags"]} for s in b["TagSpecifications"]}
    expected = {"gpuorch:managed": "true", "gpuorch:job": "7", "gpuorch:attempt": "2", "gpuorch:owner": "inst-1"}
    assert specs == {"instance": expected, "volume": {**expected, "gpuorch:role": "root"}}


def test_spot_body_is_one_time_and_terminates_on_interruption() -> None:
    b = body(request(spot=True))
    assert b["InstanceMarketOptions"] == {"MarketType": "spot", "SpotOptions": {
        "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}}


def test_optional_network_key_and_role_settings() -> None:
    b = body(request(), subnet_id="subnet-0abc0abc", security_group_ids=["sg-0abc0abc"], key_name="k",
             instance_profile="arn:aws:iam::1:instance-profile/gpuorch")
    assert (b["SubnetId"], b["SecurityGroupIds"], b["KeyName"]) == ("subnet-0abc0abc", ["sg-0abc0abc"], "k")
    assert b["IamInstanceProfile"] == {"Arn": "arn:aws:iam::1:instance-profile/gpuorch"}
    assert body(request(), instance_profile="gpuorch")["IamInstanceProfile"] == {"Name": "gpuorch"}


def test_client_token_is_the_ports_token_which_names_the_owner() -> None:
    assert body(request(owner="0123456789ab"))["ClientToken"] == "gpuorch-0123456789ab-7-2"
    assert body(request(owner="x" * 500))["ClientToken"] == request(owner="x" * 500).client_token


def test_user_data_is_cloud_config_with_the_keys_and_a_lifetime_backstop() -> None:
    assert user_data({}, None) is None
    data = user_data(login_config(KEY + "\n"), 3601)
    assert data is not None and data.startswith("#cloud-config\n")
    assert yaml.safe_load(data) == {"ssh_authorized_keys": [KEY], "runcmd": [["shutdown", "-h", "+61"]]}
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n"
    doc = yaml.safe_load(user_data({"ssh_keys": {"ed25519_private": pem}}) or "")
    assert doc["ssh_keys"]["ed25519_private"] == pem  # multi-line values survive
    assert "UserData" in body(request(ssh_public_key=KEY))
    with pytest.raises(ValueError, match="one OpenSSH public key line"):
        user_data({"ssh_authorized_keys": [KEY + "\nssh-ed25519 AAAAother attacker"]})


def test_tag_specifications_and_filters() -> None:
    assert tag_specifications({"b": "2", "a": "1"}, ("volume",)) == [
        {"ResourceType": "volume", "Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]}]
    names = {f["Name"]: f["Values"] for f in attempt_filters(7, 2, "inst-1")}
    assert names == {"tag:gpuorch:managed": ["true"], "tag:gpuorch:job": ["7"], "tag:gpuorch:attempt": ["2"],
                     "tag:gpuorch:owner": ["inst-1"]}
    assert "tag:gpuorch:owner" not in {f["Name"] for f in attempt_filters(7, 2)}


def test_volume_body_is_gp3_tagged_managed() -> None:
    b = create_volume_kwargs("us-east-1b", 99.2, {"gpuorch:job": "7"})
    assert (b["AvailabilityZone"], b["Size"], b["VolumeType"]) == ("us-east-1b", 100, "gp3")
    assert {t["Key"] for t in b["TagSpecifications"][0]["Tags"]} == {"gpuorch:job", "gpuorch:managed"}


def test_free_device_skips_used_names() -> None:
    inst = {"InstanceId": "i-1", "BlockDeviceMappings": [{"DeviceName": "/dev/sda1"}, {"DeviceName": "/dev/xvdf"}]}
    assert free_device(inst) == "/dev/sdg"
    full = {"InstanceId": "i-1", "BlockDeviceMappings": [{"DeviceName": f"/dev/sd{c}"} for c in "fghijklmnop"]}
    with pytest.raises(ValueError, match="no free device"):
        free_device(full)


@pytest.mark.parametrize(("state", "reason", "expected"), [
    ("pending", None, InstanceState.PENDING),
    ("running", None, InstanceState.RUNNING),
    ("shutting-down", "Client.UserInitiatedShutdown", InstanceState.STOPPING),
    ("shutting-down", "Server.SpotInstanceTermination", InstanceState.PREEMPTED),
    ("stopping", None, InstanceState.STOPPING),
    ("terminated", "Client.UserInitiatedShutdown", InstanceState.TERMINATED),
    ("terminated", "Client.InstanceInitiatedShutdown", InstanceState.TERMINATED),
    ("terminated", "Server.SpotInstanceTermination", InstanceState.PREEMPTED),
    ("stopped", "Server.ScheduledStop", InstanceState.PREEMPTED),
    ("stopped", "Client.UserInitiatedShutdown", InstanceState.TERMINATED),
])  # fmt: skip
def test_instance_state_mapping(state: str, reason: str | None, expected: InstanceState) -> None:
    assert instance_state(state, reason) == expected


def test_unknown_state_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown EC2 instance state"):
        instance_state("hibernating", None)


# A DescribeInstanceStatus response as EC2 sends it (query protocol, XML; element names from the
# EC2 API reference: InstanceStatus, InstanceStatusEvent), parsed below by botocore's own parser
# with its EC2 model, so the test sees exactly the dicts boto3 hands the adapter.
STATUS_XML = """<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstanceStatusResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>3be1508e-c444-4fef-89cc-0b1223c4f02f</requestId>
  <instanceStatusSet>
    <item>
      <instanceId>i-0123456789abcdef0</instanceId>
      <availabilityZone>us-east-1b</availabilityZone>
      <eventsSet>
        <item>
          <instanceEventId>instance-event-0d59937288b749b32</instanceEventId>
          <code>system-reboot</code>
          <description>scheduled reboot</description>
          <notBefore>2026-12-01T10:00:00.000Z</notBefore>
          <notAfter>2026-12-01T12:00:00.000Z</notAfter>
        </item>
        <item>
          <instanceEventId>instance-event-0a1b2c3d4e5f60718</instanceEventId>
          <code>instance-stop</code>
          <description>[Completed] The instance is scheduled for stop</description>
          <notBefore>2026-11-30T09:00:00.000Z</notBefore>
        </item>
        <item>
          <instanceEventId>instance-event-01234567890abcdef</instanceEventId>
          <code>instance-retirement</code>
          <description>The instance is running on degraded hardware</description>
          <notBefore>2026-12-04T00:00:00.000Z</notBefore>
          <notAfter>2026-12-06T00:00:00.000Z</notAfter>
          <notBeforeDeadline>2026-12-10T00:00:00.000Z</notBeforeDeadline>
        </item>
      </eventsSet>
      <instanceState><code>16</code><name>running</name></instanceState>
      <systemStatus><status>ok</status><details><item><name>reachability</name><status>passed</status></item></details></systemStatus>
      <instanceStatus><status>ok</status><details><item><name>reachability</name><status>passed</status></item></details></instanceStatus>
    </item>
    <item>
      <instanceId>i-0fedcba9876543210</instanceId>
      <availabilityZone>us-east-1c</availabilityZone>
      <instanceState><code>16</code><name>running</name></instanceState>
      <systemStatus><status>ok</status></systemStatus>
      <instanceStatus><status>ok</status></instanceStatus>
    </item>
  </instanceStatusSet>
</DescribeInstanceStatusResponse>"""


def parsed_statuses() -> list[dict]:
    import botocore.session
    from botocore.parsers import create_parser

    model = botocore.session.get_session().get_service_model("ec2")
    shape = model.operation_model("DescribeInstanceStatus").output_shape
    resp = create_parser(model.metadata["protocol"]).parse(
        {"body": STATUS_XML.encode(), "headers": {}, "status_code": 200}, shape)
    return resp["InstanceStatuses"]


def test_a_retirement_days_ahead_is_a_scheduled_stop_not_yet_a_deadline() -> None:
    retiring, healthy = parsed_statuses()
    assert len(retiring["Events"]) == 3  # the shape was read as boto3 reads it
    stop = scheduled_stop(retiring["Events"], drain_s=3600)
    assert stop is not None
    at = datetime(2026, 12, 4, tzinfo=UTC)
    assert (stop.at, stop.kind, stop.notice_at) == (at, "instance-retirement", at - timedelta(hours=1))
    assert stop.description == "The instance is running on degraded hardware"
    # Days ahead: no deadline (the job keeps running); from an hour before: the deadline.
    assert reclaim_deadline(stop, datetime(2026, 11, 30, 12, tzinfo=UTC)) is None
    assert reclaim_deadline(stop, at - timedelta(hours=1, seconds=1)) is None
    assert reclaim_deadline(stop, at - timedelta(hours=1)) == at
    assert reclaim_deadline(stop, at + timedelta(hours=5)) == at  # overdue: still the deadline
    assert scheduled_stop(healthy.get("Events") or (), drain_s=3600) is None
    assert reclaim_deadline(None, at) is None


def test_the_earliest_pending_stop_counts_and_a_zero_horizon_waits_for_not_before() -> None:
    events = [
        {"Code": "system-reboot", "NotBefore": T0},
        {"Code": "instance-retirement", "NotBefore": T0 + timedelta(hours=3)},
        {"Code": "instance-stop", "NotBefore": T0 + timedelta(hours=2)},
        {"Code": "instance-stop", "NotBefore": T0 + timedelta(hours=1), "Description": "[Completed] done"},
        {"Code": "instance-stop", "NotBefore": T0 + timedelta(minutes=30), "Description": "[Canceled] no"},
    ]
    stop = scheduled_stop(events, drain_s=0)
    assert stop is not None and (stop.at, stop.kind) == (T0 + timedelta(hours=2), "instance-stop")
    assert reclaim_deadline(stop, T0) is None and reclaim_deadline(stop, stop.at) == stop.at
    assert scheduled_stop([], drain_s=3600) is None


def test_spot_notice_deadline_is_two_minutes_after_the_mark() -> None:
    assert spot_notice_deadline({"Code": "marked-for-termination", "UpdateTime": T0}) == T0 + timedelta(seconds=120)
    assert spot_notice_deadline({"Code": "fulfilled", "UpdateTime": T0}) is None
    assert spot_notice_deadline(None) is None


def test_to_instance_reads_a_description() -> None:
    d = {"InstanceId": "i-1", "InstanceType": "g5.xlarge", "State": {"Name": "running"}, "InstanceLifecycle": "spot",
         "Placement": {"AvailabilityZone": "us-east-1b"}, "PublicIpAddress": "3.3.3.3", "LaunchTime": T0,
         "Tags": [{"Key": "gpuorch:job", "Value": "7"}]}
    inst = to_instance(d, "us-east-1", deadline=T0)
    assert (inst.id, inst.zone, inst.spot, inst.state, inst.host, inst.port) == (
        "i-1", "us-east-1b", True, InstanceState.RUNNING, "3.3.3.3", 22)
    assert inst.job_id == 7 and inst.preemption_deadline == T0
    gone = to_instance({**d, "State": {"Name": "terminated"}, "StateReason": {"Code": "Server.SpotInstanceTermination"},
                        "Tags": []}, "us-east-1", deadline=T0, tags={"gpuorch:job": "7"})
    assert gone.state == InstanceState.PREEMPTED and gone.preemption_deadline is None and gone.job_id == 7
    assert gone.state_reason == "Server.SpotInstanceTermination"


def test_to_volume_reads_the_attachment() -> None:
    v = to_volume({"VolumeId": "vol-1", "AvailabilityZone": "us-east-1b", "Size": 100,
                   "Attachments": [{"InstanceId": "i-1", "State": "attached"}]}, "us-east-1")
    assert (v.id, v.zone, v.size_gib, v.attached_to) == ("vol-1", "us-east-1b", 100.0, "i-1")
