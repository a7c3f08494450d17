"""The AWS provider's options (``providers.aws`` in the daemon config), validated statically.

Everything checkable without a network call is checked here, so a typo fails at start with a
message naming the field and the fix. What needs the API (does the AMI exist in that region? do
the subnets?) is checked by ``AwsProvider.check`` right after, still at start.
Credentials never appear here: boto3's standard chain finds them (env, profile, SSO, role).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuorch.provider.options import validate_options

REGION = re.compile(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}")
_AMI = re.compile(r"ami-[0-9a-f]{8,17}")
_SUBNET = re.compile(r"subnet-[0-9a-f]{8,17}")
_SG = re.compile(r"sg-[0-9a-f]{8,17}")
# Ubuntu DLAMI with the NVIDIA driver and Docker, no framework baked in: the job brings its own.
DEFAULT_AMI_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *"


def _listify(v: Any) -> Any:
    return [v] if isinstance(v, str) else v


class AwsOptions(BaseModel):
    """``providers.aws`` options. Per-region maps are keyed by region name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    regions: list[str] = Field(min_length=1)
    profile: str | None = None
    ami: dict[str, str] = Field(default_factory=dict)  # region -> AMI id; default: DLAMI search
    ami_name: str = DEFAULT_AMI_NAME  # name filter of the default search (owner amazon)
    subnet_id: dict[str, list[str]] = Field(default_factory=dict)  # region -> subnets (one per zone)
    security_group_ids: dict[str, list[str]] = Field(default_factory=dict)
    key_name: str | None = None
    instance_profile: str | None = None  # IAM instance profile (name or ARN): S3 access for the agent
    ssh_user: str = "ubuntu"
    endpoint_url: str | None = None  # tests: a local EC2 endpoint
    catalog: Path | None = None  # on-demand prices CSV; default: the shipped snapshot
    max_attempts: int = Field(default=5, ge=1, le=20)  # per API call, throttling and 5xx included
    retry_max_s: float = Field(default=60.0, gt=0)  # total time one call may spend retrying
    offers_ttl_s: float = Field(default=600.0, ge=0)
    # A scheduled instance-stop/-retirement becomes the instance's preemption deadline (its job
    # is checkpointed and moved) only this long before the event's NotBefore; until then it is a
    # warning event. Long enough for a final checkpoint and a relaunch, with capacity retries.
    retirement_drain_s: float = Field(default=3600.0, ge=0)

    @field_validator("regions")
    @classmethod
    def _regions(cls, v: list[str]) -> list[str]:
        for r in v:
            if not REGION.fullmatch(r):
                raise ValueError(f"{r!r} is not an AWS region name (like us-east-1)")
        if len(set(v)) != len(v):
            raise ValueError("lists a region twice")
        return v

    @field_validator("subnet_id", "security_group_ids", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return {k: _listify(x) for k, x in v.items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _per_region(self) -> AwsOptions:
        checks = (("ami", _AMI, "ami-0123456789abcdef0"), ("subnet_id", _SUBNET, "subnet-0123456789abcdef0"),
                  ("security_group_ids", _SG, "sg-0123456789abcdef0"))
        for field, pattern, example in checks:
            for region, values in getattr(self, field).items():
                if region not in self.regions:
                    raise ValueError(f"{field}.{region}: {region} is not in regions {self.regions}; "
                                     "add it there or drop this entry")
                for value in _listify(values):
                    if not pattern.fullmatch(value):
                        raise ValueError(f"{field}.{region}: {value!r} is not an id like {example}")
        return self


def parse_options(options: dict[str, Any] | None) -> AwsOptions:
    """Validate ``providers.aws``; raise UserInputError naming the option and the fix."""
    return validate_options(AwsOptions, options, "aws",
                            required="list the regions to use, like [us-east-1, us-west-2]")
