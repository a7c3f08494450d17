"""Placement-group request bodies for multi-node gangs on the three clouds (pure functions, plain
tests), and an EC2 cluster placement group through moto with a gang node launched into it."""

from __future__ import annotations

import pytest

from gpuorch.provider.gang import node_requests
from gpuorch.provider.port import TAG_NODE, LaunchRequest, Offer
from gpuorch_aws.requests import (
    efa_network_interfaces,
    gang_run_instances_kwargs,
    placement_group_kwargs,
    run_instances_kwargs,
)
from gpuorch_azure.requests import has_infiniband, proximity_placement_group_body, with_proximity_placement_group
from gpuorch_gcp.requests import placement_policy_body, placement_policy_url, with_placement_policy


def offer(provider: str, itype: str, zone: str, region: str) -> Offer:
    return Offer(provider=provider, region=region, zone=zone, instance_type=itype, gpu="H100", gpu_count=8,
                 price_per_hour=98.32, spot_price_per_hour=None)


def gang(o: Offer, nodes: int = 2) -> list[LaunchRequest]:
    return node_requests(LaunchRequest(job_id=3, attempt=1, offer=o, spot=False, owner="inst1"), nodes)


# -- AWS ------------------------------------------------------------------------------------------

def test_aws_cluster_placement_group_body():
    body = placement_group_kwargs("gpuorch-inst1-3-1", {"gpuorch:job": "3", "gpuorch:attempt": "1"})
    assert body["GroupName"] == "gpuorch-inst1-3-1" and body["Strategy"] == "cluster"
    [spec] = body["TagSpecifications"]
    assert spec["ResourceType"] == "placement-group"
    assert {"Key": "gpuorch:job", "Value": "3"} in spec["Tags"]


def test_aws_gang_node_goes_into_the_group_with_every_efa_interface():
    o = offer("aws", "p5.48xlarge", "us-east-1a", "us-east-1")
    node1 = gang(o)[1]
    base = run_instances_kwargs(node1, image_id="ami-1", zone="us-east-1a", root_device="/dev/sda1",
                                subnet_id="subnet-1", security_group_ids=["sg-1"])
    body = gang_run_instances_kwargs(base, node1)
    assert body["Placement"] == {"AvailabilityZone": "us-east-1a", "GroupName": "gpuorch-inst1-3-1"}
    assert body["ClientToken"] == "gpuorch-inst1-3-1-n1"
    assert {"Key": TAG_NODE, "Value": "1-of-2"} in body["TagSpecifications"][0]["Tags"]
    efa = body["NetworkInterfaces"]
    assert len(efa) == 32 and all(i["InterfaceType"] == "efa" and i["SubnetId"] == "subnet-1" for i in efa)
    assert (efa[0]["NetworkCardIndex"], efa[0]["DeviceIndex"]) == (0, 0) and efa[5]["DeviceIndex"] == 1
    assert "SubnetId" not in body and "SecurityGroupIds" not in body  # they moved into the interfaces


def test_aws_types_without_efa_keep_their_network():
    assert efa_network_interfaces("g6.xlarge", "subnet-1") is None
    o = offer("aws", "g6.12xlarge", "us-east-1a", "us-east-1")
    node0 = gang(o)[0]
    base = run_instances_kwargs(node0, image_id="ami-1", zone="us-east-1a", root_device="/dev/sda1", subnet_id="s")
    body = gang_run_instances_kwargs(base, node0)
    assert body["SubnetId"] == "s" and "NetworkInterfaces" not in body and body["Placement"]["GroupName"]


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("")
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(empty),
                       "AWS_SHARED_CREDENTIALS_FILE": str(empty), "AWS_EC2_METADATA_DISABLED": "true",
                       "MOTO_EC2_LOAD_DEFAULT_AMIS": "false"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def test_aws_gang_bodies_through_the_real_sdk_and_moto(aws_env):
    """botocore validates both bodies against EC2's own API model (moto 5.2 has no placement
    groups: CreatePlacementGroup is checked by the SDK's validator only); moto then launches
    both nodes of the gang from their RunInstances bodies: one zone, one token and tag each."""
    boto3 = pytest.importorskip("boto3")
    from botocore.validate import validate_parameters
    from moto import mock_aws

    o = offer("aws", "p4d.24xlarge", "us-east-1a", "us-east-1")
    nodes = gang(o)
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        model = ec2.meta.service_model
        validate_parameters(placement_group_kwargs(nodes[0].placement_group or "", nodes[0].tags),
                            model.operation_model("CreatePlacementGroup").input_shape)
        subnet = ec2.create_subnet(VpcId=ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"],
                                   CidrBlock="10.9.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
        ids = []
        for node in nodes:
            base = run_instances_kwargs(node, image_id="ami-0d1a0000000000001", zone="us-east-1a",
                                        root_device="/dev/sda1", subnet_id=subnet)
            body = gang_run_instances_kwargs(base, node)
            validate_parameters(body, model.operation_model("RunInstances").input_shape)
            assert len(body["NetworkInterfaces"]) == 4  # p4d: four EFA
            body["NetworkInterfaces"] = body["NetworkInterfaces"][:1]  # moto attaches one interface per call
            ids.append(ec2.run_instances(**body)["Instances"][0]["InstanceId"])
        again = gang_run_instances_kwargs(run_instances_kwargs(nodes[1], image_id="ami-0d1a0000000000001",
                                                               zone="us-east-1a", root_device="/dev/sda1"), nodes[1])
        found = [i for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]]
        assert {i["Placement"]["AvailabilityZone"] for i in found} == {"us-east-1a"}
        tags = [{t["Key"]: t["Value"] for t in i["Tags"]}[TAG_NODE] for i in found]
        assert sorted(tags) == ["0-of-2", "1-of-2"]
        assert again["ClientToken"] == "gpuorch-inst1-3-1-n1"  # a repeated call is the same launch


# -- GCP ------------------------------------------------------------------------------------------

def test_gcp_compact_placement_policy_body():
    assert placement_policy_body("gpuorch-inst1-3-1", "us-central1", 4) == {
        "name": "gpuorch-inst1-3-1", "region": "us-central1",
        "group_placement_policy": {"vm_count": 4, "collocation": "COLLOCATED"}}
    url = placement_policy_url("proj", "us-central1", "gpuorch-inst1-3-1")
    assert url == "projects/proj/regions/us-central1/resourcePolicies/gpuorch-inst1-3-1"
    body = with_placement_policy({"name": "vm", "scheduling": {"on_host_maintenance": "TERMINATE"}}, url)
    assert body["resource_policies"] == [url] and body["scheduling"]["on_host_maintenance"] == "TERMINATE"


# -- Azure ----------------------------------------------------------------------------------------

def test_azure_proximity_placement_group_body():
    body = proximity_placement_group_body("eastus", "1", "Standard_ND96isr_H100_v5", {"gpuorch:job": "3"})
    assert body["location"] == "eastus" and body["zones"] == ["1"]
    assert body["properties"] == {"proximityPlacementGroupType": "Standard",
                                  "intent": {"vmSizes": ["Standard_ND96isr_H100_v5"]}}
    assert body["tags"]  # tagged like the attempt, in Azure's tag names
    gid = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/proximityPlacementGroups/gpuorch-inst1-3-1"
    vm = with_proximity_placement_group({"location": "eastus", "properties": {"hardwareProfile": {}}}, gid)
    assert vm["properties"]["proximityPlacementGroup"] == {"id": gid} and "hardwareProfile" in vm["properties"]
    assert has_infiniband("Standard_ND96isr_H100_v5") and not has_infiniband("Standard_NC24ads_A100_v4")
