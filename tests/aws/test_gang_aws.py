"""Gangs (spec ``nodes:``) on ``AwsProvider`` against in-process moto: the gang contract, plus
what only EC2 shows (the cluster placement group and EFA in the RunInstances bodies, a crash
between the group and the nodes, a group EC2 refuses to delete while nodes still shut down).

moto has no placement groups: ``moto_placement.PlacementGroups`` answers those calls (see its
docstring for what it keeps and refuses, as EC2 would)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from moto_helpers import Refusals, announce_reclaim, interrupt_spot
from moto_placement import PlacementGroups

from gpuorch.clock import utcnow
from gpuorch.errors import NoCapacityError
from gpuorch.provider.gang import node_requests
from gpuorch.provider.port import TAG_NODE, Instance, LaunchRequest, Offer, Provider
from gpuorch.testing.gang_contract import GangContract
from gpuorch_aws import AwsProvider

pytestmark = pytest.mark.aws


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class TestAwsGangContract(GangContract):
    end_timeout_s = 5.0

    @pytest.fixture
    def provider(self, make_provider: Any, tmp_path: Path) -> AwsProvider:
        provider = make_provider(home=tmp_path)
        self.clock = Clock()
        provider._monotonic = self.clock
        return provider

    @pytest.fixture
    def offer(self, provider: AwsProvider, moto_offers: list[Offer]) -> Offer:
        return next(o for o in moto_offers if o.instance_type == "p4d.24xlarge" and o.region == "us-east-1")

    def advance(self, provider: Provider, seconds: float) -> None:
        self.clock.t += seconds

    def groups(self, provider: Provider) -> list[dict[str, str]]:
        assert isinstance(provider, AwsProvider)
        return [{t["Key"]: t["Value"] for t in g.get("Tags", [])}
                for r in provider.options.regions
                for g in provider.client(r).describe_placement_groups()["PlacementGroups"]]

    def nodes(self, provider: Provider, gang: Instance) -> list[Instance]:
        assert isinstance(provider, AwsProvider)
        filters = [{"Name": "tag:gpuorch:job", "Values": [str(gang.job_id)]},
                   {"Name": "tag:gpuorch:attempt", "Values": [str(gang.attempt)]}]
        res = provider.client(gang.region).describe_instances(Filters=filters)["Reservations"]
        from gpuorch_aws.parse import to_instance

        found = [to_instance(i, gang.region) for r in res for i in r["Instances"]]
        return sorted((n for n in found if TAG_NODE in n.tags), key=lambda n: n.tags[TAG_NODE])

    def refuse_node(self, provider: Provider, offer: Offer, rank: int) -> None:
        assert isinstance(provider, AwsProvider)
        Refusals(provider.client(offer.region), "RunInstances", "InsufficientInstanceCapacity",
                 when=lambda body: str(body.get("ClientToken", "")).endswith(f"-n{rank}"))

    def end_node(self, provider: Provider, node: Instance) -> None:
        interrupt_spot(node.region, node.id)

    def notice_node(self, provider: Provider, node: Instance, notice_s: float) -> None:
        from datetime import timedelta

        announce_reclaim(node.region, node.id, utcnow() + timedelta(seconds=notice_s))

    def private_address(self, provider: Provider, node: Instance) -> str:
        assert isinstance(provider, AwsProvider)
        d = provider.client(node.region).describe_instances(InstanceIds=[node.id])["Reservations"][0]["Instances"][0]
        return str(d["PrivateIpAddress"])


@pytest.fixture
def p4d(moto_offers: list[Offer]) -> Offer:
    return next(o for o in moto_offers if o.instance_type == "p4d.24xlarge" and o.region == "us-east-1")


def gang_request(offer: Offer, nodes: int = 3, job_id: int = 7) -> LaunchRequest:
    return LaunchRequest(job_id=job_id, attempt=1, offer=offer, spot=False, owner="abc", nodes=nodes)


def bodies(provider: AwsProvider, region: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    provider.client(region).meta.events.register(
        "before-call.ec2.RunInstances", lambda params, **_: seen.append(dict(params["body"])), unique_id="seen-run")
    return seen


def test_every_node_is_launched_into_the_attempts_cluster_group_with_efa(
    make_provider: Any, p4d: Offer, placement_groups: PlacementGroups
) -> None:
    provider = make_provider(subnet_id={"us-east-1": []})
    client = provider.client("us-east-1")
    subnet = next(s for s in client.describe_subnets()["Subnets"] if s["AvailabilityZone"] == p4d.zone)
    provider = make_provider(subnet_id={"us-east-1": [subnet["SubnetId"]]})
    seen = bodies(provider, "us-east-1")
    try:
        gang = provider.launch(gang_request(p4d))
    finally:
        client.meta.events.unregister("before-call.ec2.RunInstances", unique_id="seen-run")
    assert placement_groups.created == ["gpuorch-abc-7-1"]
    [group] = client.describe_placement_groups(GroupNames=["gpuorch-abc-7-1"])["PlacementGroups"]
    assert group["Strategy"] == "cluster"
    assert {t["Key"]: t["Value"] for t in group["Tags"]} == {
        "gpuorch:managed": "true", "gpuorch:job": "7", "gpuorch:attempt": "1", "gpuorch:owner": "abc"}
    assert [b["ClientToken"] for b in seen] == ["gpuorch-abc-7-1", "gpuorch-abc-7-1-n1", "gpuorch-abc-7-1-n2"]
    assert {b["Placement.GroupName"] for b in seen} == {"gpuorch-abc-7-1"}
    assert {b["Placement.AvailabilityZone"] for b in seen} == {p4d.zone}
    for b in seen:  # p4d.24xlarge: 4 EFA interfaces, one per network card; the subnet moved into them
        assert [b[f"NetworkInterface.{k}.InterfaceType"] for k in range(1, 5)] == ["efa"] * 4
        assert "SubnetId" not in b
    assert len(placement_groups.members[("us-east-1", "gpuorch-abc-7-1")]) == 3
    assert gang.tags[TAG_NODE] == "0-of-3"


def test_a_crash_after_the_group_makes_no_second_group_and_the_repeat_launches_the_nodes(
    make_provider: Any, p4d: Offer, placement_groups: PlacementGroups
) -> None:
    provider = make_provider()
    Refusals(provider.client("us-east-1"), "RunInstances", raise_=lambda: KeyboardInterrupt(), times=1)
    with pytest.raises(KeyboardInterrupt):  # the daemon dies between the group and node 0
        provider.launch(gang_request(p4d, nodes=2))
    assert placement_groups.names() == ["gpuorch-abc-7-1"]
    restarted = make_provider()
    gang = restarted.launch(gang_request(p4d, nodes=2))
    assert placement_groups.created == ["gpuorch-abc-7-1"]  # looked before creating
    assert len(placement_groups.members[("us-east-1", "gpuorch-abc-7-1")]) == 2
    assert [i.id for i in restarted.list_managed() if i.job_id == 7] == [gang.id]


def test_a_crash_mid_gang_resumes_with_the_same_nodes(make_provider: Any, p4d: Offer) -> None:
    provider = make_provider()
    Refusals(provider.client("us-east-1"), "RunInstances", raise_=lambda: KeyboardInterrupt(),
             when=lambda b: str(b.get("ClientToken", "")).endswith("-n2"), times=1)
    with pytest.raises(KeyboardInterrupt):
        provider.launch(gang_request(p4d))
    gang = make_provider().launch(gang_request(p4d))
    ec2 = provider.client("us-east-1")
    tokens = sorted(i["ClientToken"] for r in ec2.describe_instances(Filters=[
        {"Name": "tag:gpuorch:job", "Values": ["7"]}])["Reservations"] for i in r["Instances"])
    assert tokens == ["gpuorch-abc-7-1", "gpuorch-abc-7-1-n1", "gpuorch-abc-7-1-n2"]  # none twice
    assert gang.tags[TAG_NODE] == "0-of-3"


def test_a_group_left_by_a_crash_before_node_0_is_swept_after_the_grace(
    make_provider: Any, p4d: Offer, placement_groups: PlacementGroups
) -> None:
    provider = make_provider()
    clock = Clock()
    provider._monotonic = clock
    request = node_requests(gang_request(p4d, nodes=2), 2)[0]
    provider._group_create(request)  # the crash: the attempt then ends without a node
    provider.list_managed()
    clock.t += provider.gang_grace_s - 1
    provider.list_managed()
    assert placement_groups.names() == ["gpuorch-abc-7-1"], "a young empty group may be a launch under way"
    clock.t += 1
    provider.list_managed()
    assert placement_groups.names() == [] and placement_groups.deleted == ["gpuorch-abc-7-1"]


def test_a_group_ec2_will_not_delete_yet_is_deleted_by_a_later_sweep(
    make_provider: Any, p4d: Offer, placement_groups: PlacementGroups
) -> None:
    provider = make_provider()
    gang = provider.launch(gang_request(p4d, nodes=2))
    busy = Refusals(provider.client("us-east-1"), "DeletePlacementGroup", "InvalidPlacementGroup.InUse", times=1)
    provider.terminate(gang.id)
    assert busy.failed == 1 and placement_groups.names() == ["gpuorch-abc-7-1"]
    provider.list_managed()
    assert placement_groups.names() == []


def test_a_refused_gang_releases_its_nodes_and_its_group(
    make_provider: Any, p4d: Offer, placement_groups: PlacementGroups
) -> None:
    provider = make_provider()
    Refusals(provider.client("us-east-1"), "RunInstances", "InsufficientInstanceCapacity",
             when=lambda b: str(b.get("ClientToken", "")).endswith("-n2"))
    with pytest.raises(NoCapacityError):
        provider.launch(gang_request(p4d))
    ec2 = provider.client("us-east-1")
    states = [i["State"]["Name"] for r in ec2.describe_instances(Filters=[
        {"Name": "tag:gpuorch:job", "Values": ["7"]}])["Reservations"] for i in r["Instances"]]
    assert sorted(states) == ["terminated", "terminated"]  # nodes 0 and 1 launched, then released
    assert placement_groups.names() == [] and placement_groups.deleted == ["gpuorch-abc-7-1"]


def test_the_orphan_sweep_takes_a_gang_as_one_instance(make_provider: Any, p4d: Offer) -> None:
    provider = make_provider()
    gang = provider.launch(gang_request(p4d))
    [listed] = [i for i in provider.list_managed() if i.job_id == 7]
    provider.terminate(listed.id)  # what the daemon's orphan sweep does with it
    ec2 = provider.client("us-east-1")
    states = [i["State"]["Name"] for r in ec2.describe_instances(Filters=[
        {"Name": "tag:gpuorch:job", "Values": ["7"]}])["Reservations"] for i in r["Instances"]]
    assert states == ["terminated"] * 3 and listed.id == gang.id


def test_a_crash_between_ending_the_nodes_and_deleting_the_group_is_cleaned_by_the_next_daemon(
    make_provider: Any, p4d: Offer, placement_groups: PlacementGroups
) -> None:
    provider = make_provider()
    gang = provider.launch(gang_request(p4d, nodes=2))
    provider._nodes_terminate([n.id for n in provider._nodes_of(gang)])  # then the daemon dies
    assert placement_groups.names() == ["gpuorch-abc-7-1"]
    make_provider().list_managed()  # the restarted daemon's first pass: the gang's nodes all ended
    assert placement_groups.names() == []
