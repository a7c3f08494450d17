"""Configuration: every mistake fails at start with one line naming the option and the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from moto_helpers import DLAMI_ID, Refusals

from gpuorch.errors import UserInputError
from gpuorch.registry import load_provider
from gpuorch_aws import AwsProvider
from gpuorch_aws.config import parse_options

pytestmark = pytest.mark.aws


@pytest.mark.parametrize(("options", "message"), [
    ({}, "providers.aws.regions: is required; list the regions"),
    ({"regions": []}, "providers.aws.regions: List should have at least 1 item"),
    ({"regions": ["us-east1"]}, "providers.aws.regions: 'us-east1' is not an AWS region name (like us-east-1)"),
    ({"regions": ["us-east-1", "us-east-1"]}, "lists a region twice"),
    ({"regions": ["us-east-1"], "zone": "a"}, "providers.aws.zone: unknown option; known: regions, profile, ami"),
    ({"regions": ["us-east-1"], "ami": {"eu-west-1": "ami-0123456789abcdef0"}},
     "ami.eu-west-1: eu-west-1 is not in regions ['us-east-1']; add it there or drop this entry"),
    ({"regions": ["us-east-1"], "ami": {"us-east-1": "ubuntu"}}, "ami.us-east-1: 'ubuntu' is not an id like ami-"),
    ({"regions": ["us-east-1"], "subnet_id": {"us-east-1": "sub-1"}},
     "subnet_id.us-east-1: 'sub-1' is not an id like subnet-"),
    ({"regions": ["us-east-1"], "security_group_ids": {"us-east-1": ["default"]}}, "is not an id like sg-"),
    ({"regions": ["us-east-1"], "max_attempts": 0},
     "providers.aws.max_attempts: must be at least 1; raise it"),
])  # fmt: skip
def test_static_mistakes(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UserInputError, match=None) as e:
        parse_options(options)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_single_subnet_and_group_may_be_given_as_strings() -> None:
    opts = parse_options({"regions": ["us-east-1"], "subnet_id": {"us-east-1": "subnet-0abc0abc"},
                          "security_group_ids": {"us-east-1": "sg-0abc0abc"}})
    assert opts.subnet_id == {"us-east-1": ["subnet-0abc0abc"]}
    assert opts.security_group_ids == {"us-east-1": ["sg-0abc0abc"]}


def test_from_config_through_the_registry_finds_the_deep_learning_ami(moto: None, tmp_path: Path) -> None:
    provider = load_provider("aws", {"regions": ["us-east-1", "us-west-2"]}, tmp_path)
    assert isinstance(provider, AwsProvider)
    assert provider._image("us-west-2").id == DLAMI_ID and provider._image("us-west-2").root_device == "/dev/sda1"


def test_a_missing_ami_fails_at_start(moto: None, tmp_path: Path) -> None:
    missing = r"providers.aws.ami.us-west-2: ami-0123456789abcdef0 does not exist in us-west-2"
    with pytest.raises(UserInputError, match=missing):
        AwsProvider.from_config({"regions": ["us-west-2"], "ami": {"us-west-2": "ami-0123456789abcdef0"}}, tmp_path)


def test_no_deep_learning_ami_found_fails_at_start(moto: None, tmp_path: Path) -> None:
    none_found = r"no Amazon AMI named like 'Nothing\*' in us-east-1; set providers.aws.ami.us-east-1"
    with pytest.raises(UserInputError, match=none_found):
        AwsProvider.from_config({"regions": ["us-east-1"], "ami_name": "Nothing*"}, tmp_path)


def test_missing_subnets_and_groups_fail_at_start(moto: None, tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match=r"InvalidSubnetID.NotFound"):
        AwsProvider.from_config({"regions": ["us-east-1"], "subnet_id": {"us-east-1": "subnet-0abc0abc"}}, tmp_path)
    with pytest.raises(UserInputError, match=r"InvalidGroup.NotFound"):
        AwsProvider.from_config({"regions": ["us-east-1"], "security_group_ids": {"us-east-1": "sg-0abc0abc"}},
                                tmp_path)


def test_an_unknown_profile_fails_at_start(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match=r"providers.aws.profile: The config profile \(nope\) could not be found"):
        AwsProvider.from_config({"regions": ["us-east-1"], "profile": "nope"}, tmp_path)


def test_refused_credentials_fail_at_start(make_provider: Any) -> None:
    provider = make_provider()
    Refusals(provider.client("us-east-1"), "DescribeImages", "AuthFailure", 401)
    with pytest.raises(UserInputError, match=r"providers.aws: ec2 DescribeImages in us-east-1: AuthFailure"):
        provider.check()


def test_configured_subnets_pick_the_offers_zone(make_provider: Any, moto_offers: list, ec2: Any) -> None:
    from gpuorch.provider.port import LaunchRequest

    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24", AvailabilityZone="us-east-1b")["Subnet"]["SubnetId"]
    provider = make_provider(regions=["us-east-1"], subnet_id={"us-east-1": subnet})
    provider.check()
    assert {o.zone for o in provider.offers()} == {"us-east-1b"}
    offer = next(o for o in moto_offers if o.zone == "us-east-1b")
    inst = provider.launch(LaunchRequest(job_id=1, attempt=1, offer=offer, spot=False))
    desc = ec2.describe_instances(InstanceIds=[inst.id])["Reservations"][0]["Instances"][0]
    assert desc["SubnetId"] == subnet


def test_the_core_does_not_import_boto3() -> None:
    code = ("import gpuorch.cli, gpuorch.reconciler, gpuorch.registry, gpuorch_aws, sys; "
            "assert 'boto3' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
