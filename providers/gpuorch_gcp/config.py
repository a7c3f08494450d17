"""The GCP provider's options (``providers.gcp`` in the daemon config), validated statically.

Everything checkable without a call is checked here, so a typo fails at start with one line
naming the field and the fix. Credentials never appear here: google-auth's standard chain finds
them (GOOGLE_APPLICATION_CREDENTIALS, application-default login, the VM's service account).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuorch.provider.options import validate_options

PROJECT = re.compile(r"[a-z][-a-z0-9]{4,28}[a-z0-9]|[a-z][-a-z0-9.:]{4,80}")  # plain ids; domain-scoped too
REGION = re.compile(r"[a-z]+-[a-z]+\d{1,2}")
ZONE = re.compile(r"[a-z]+-[a-z]+\d{1,2}-[a-z]")
_SA = re.compile(r"default|[a-z][-a-z0-9]{4,28}[a-z0-9]@[-a-z0-9.]+\.iam\.gserviceaccount\.com|[^@\s]+@[^@\s]+")
# Deep Learning VM (Ubuntu 22.04, CUDA, NVIDIA driver, cloud-init), no framework baked in: the job
# brings its own. Ubuntu because the SSH host key is handed over through cloud-init (docs/gcp.md).
DEFAULT_IMAGE = "projects/deeplearning-platform-release/global/images/family/common-cu124-ubuntu-2204-py310"
DEFAULT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)


class GcpOptions(BaseModel):
    """``providers.gcp`` options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    project: str
    regions: list[str] = Field(default_factory=list)  # every catalog zone of these regions
    zones: list[str] = Field(default_factory=list)  # or exactly these zones
    image: str = DEFAULT_IMAGE  # an image or image family URL (partial URLs are fine)
    network: str | None = None  # default: the project's "default" network
    subnetwork: str | None = None
    external_ip: bool = True  # the daemon reaches the VM over SSH at its external IP
    service_account: str | None = "default"  # the VM's identity (GCS access for the agent); None: no identity
    disk_type: str = "pd-balanced"
    # The disk type of job volumes (``volume:``): pd-balanced, pd-ssd or hyperdisk-balanced (disks.py).
    volume_type: str = "pd-balanced"
    ssh_user: str = "gpuorch"
    endpoint: str | None = None  # tests: a local fake GCE (anonymous credentials then)
    billing_endpoint: str | None = None  # tests: a local fake Cloud Billing Catalog (anonymous credentials then)
    catalog: Path | None = None  # offers CSV; default: the shipped snapshot
    max_attempts: int = Field(default=5, ge=1, le=20)  # per API call, throttling and 5xx included
    retry_max_s: float = Field(default=60.0, gt=0)
    operation_timeout_s: float = Field(default=120.0, gt=0)  # launch waits this long for its insert
    # How long after a VM's creation the runner waits for the guest agent to publish its SSH
    # host keys (guest attributes) before trusting only the key gpuorch supplied (docs/gcp.md).
    host_keys_wait_s: float = Field(default=300.0, ge=0)

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        if not PROJECT.fullmatch(v):
            raise ValueError(f"{v!r} is not a GCP project id (like my-project-123)")
        return v

    @field_validator("regions", "zones", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("regions")
    @classmethod
    def _regions(cls, v: list[str]) -> list[str]:
        for r in v:
            if not REGION.fullmatch(r):
                raise ValueError(f"{r!r} is not a GCP region name (like us-central1)")
        if len(set(v)) != len(v):
            raise ValueError("lists a region twice")
        return v

    @field_validator("zones")
    @classmethod
    def _zones(cls, v: list[str]) -> list[str]:
        for z in v:
            if not ZONE.fullmatch(z):
                raise ValueError(f"{z!r} is not a GCP zone name (like us-central1-a)")
        if len(set(v)) != len(v):
            raise ValueError("lists a zone twice")
        return v

    @field_validator("service_account")
    @classmethod
    def _sa(cls, v: str | None) -> str | None:
        if v is not None and not _SA.fullmatch(v):
            raise ValueError(f"{v!r} is not a service account email (or 'default')")
        return v

    @field_validator("volume_type")
    @classmethod
    def _volume_type(cls, v: str) -> str:
        from .disks import SIZE_GB

        if v not in SIZE_GB:
            raise ValueError(f"{v!r} is not a GCP volume disk type gpuorch knows; use one of {', '.join(SIZE_GB)}")
        return v

    @field_validator("ssh_user")
    @classmethod
    def _user(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", v):
            raise ValueError(f"{v!r} is not a Linux user name (lowercase, like gpuorch)")
        return v

    @model_validator(mode="after")
    def _somewhere(self) -> GcpOptions:
        if not self.regions and not self.zones:
            raise ValueError("regions: give regions (like [us-central1]) or zones (like [us-central1-a])")
        return self

    def allows(self, zone: str) -> bool:
        """Whether ``zone`` is one the configuration launches into."""
        return zone in self.zones or zone.rsplit("-", 1)[0] in self.regions


def parse_options(options: dict[str, Any] | None) -> GcpOptions:
    """Validate ``providers.gcp``; raise UserInputError naming the option and the fix."""
    return validate_options(GcpOptions, options, "gcp",
                            required="name the GCP project to launch in, like my-project-123")
