"""AWS's ``doctor()`` self-check: the credentials boto3's standard chain finds, and each EC2
permission the adapter needs (docs/aws.md, "IAM policy"), per configured region.

Listing permissions are probed with a small listing; launch, tag and terminate with EC2's
``DryRun``, which answers ``DryRunOperation`` when the call would have been allowed and
``UnauthorizedOperation`` when not, creating nothing. Only the credentials' kind is printed
(``env``, ``shared-credentials-file``, ``iam-role``, ...), never a key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuorch.errors import PermanentError
from gpuorch.provider import Finding
from gpuorch.provider.selfcheck import Probe, permission_findings

if TYPE_CHECKING:
    from .provider import AwsProvider

FIX = "grant the IAM policy of docs/aws.md to the identity boto3 finds (env, profile, SSO, instance role)"
PROBE_ID = "i-0123456789abcdef0"  # a syntactically valid id that a dry run never touches
PROBE_TYPE = "g5.xlarge"


def dry_run(call: Callable[[], Any]) -> Callable[[], None]:
    """A probe from an EC2 call made with ``DryRun=True``: ``DryRunOperation`` means allowed."""

    def probe() -> None:
        try:
            call()
        except PermanentError as e:
            if e.code != "DryRunOperation":
                raise

    return probe


def probes(p: AwsProvider, region: str) -> list[Probe]:
    ec2 = p._ec2
    where = f" in {region}"

    def run() -> None:
        image = p._image(region)
        ec2.call(region, "run_instances", ImageId=image.id, InstanceType=PROBE_TYPE, MinCount=1, MaxCount=1,
                 DryRun=True)

    # One instance type's rows: an empty answer still proves the permission, and an emulator that
    # ignores MaxResults (moto) would otherwise serialise every type and price it knows.
    one_type = [{"Name": "instance-type", "Values": [PROBE_TYPE]}]
    return [
        ("ec2:DescribeInstances" + where, lambda: ec2.call(region, "describe_instances", MaxResults=5)),
        ("ec2:DescribeInstanceTypes" + where,
         lambda: ec2.call(region, "describe_instance_types", MaxResults=5, Filters=one_type)),
        ("ec2:DescribeSpotPriceHistory" + where,
         lambda: ec2.call(region, "describe_spot_price_history", MaxResults=5, InstanceTypes=[PROBE_TYPE])),
        ("ec2:DescribeSubnets" + where, lambda: ec2.call(region, "describe_subnets", MaxResults=5)),
        # Every listing sweeps the placement groups of ended gangs (gang.py): without this, gangs leak theirs.
        ("ec2:DescribePlacementGroups" + where, lambda: ec2.call(region, "describe_placement_groups")),
        ("ec2:RunInstances" + where, dry_run(run)),
        ("ec2:CreateTags" + where, dry_run(lambda: ec2.call(
            region, "create_tags", Resources=[PROBE_ID], Tags=[{"Key": "gpuorch:doctor", "Value": "1"}], DryRun=True))),
        ("ec2:TerminateInstances" + where,
         dry_run(lambda: ec2.call(region, "terminate_instances", InstanceIds=[PROBE_ID], DryRun=True))),
    ]


def doctor(p: AwsProvider) -> list[Finding]:
    check = f"provider {p.name}"
    creds = p._ec2.session.get_credentials()
    if creds is None:
        return [Finding.fail(check, "boto3's credential chain found no credentials",
                             "set AWS_PROFILE (or providers.aws.profile), run `aws sso login`, or give the "
                             "daemon's host an instance role")]
    source = str(getattr(creds, "method", None) or "boto3's chain")
    return permission_findings(check, source, [pr for r in p.options.regions for pr in probes(p, r)], FIX)
