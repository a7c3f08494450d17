"""The spec's ``volume:`` section (``VolumeRequest``; re-exported by ``gpuorch.jobs.spec``).

``volume: {size: 100GB, mount: /data, keep: true}``: a persistent disk that follows the job
across attempts within one zone (docs/providers.md, "Volumes"). Made on first placement; deleted
when the job ends unless ``keep`` is true, in which case it stays (and its storage is billed)
until ``gpuorch volume delete`` asks the daemon to delete it.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, Field, field_validator

from gpuorch.jobs import validate as v_
from gpuorch.jobs.gpu_request import Strict
from gpuorch.units import parse_size_gib

Gib = Annotated[float, BeforeValidator(parse_size_gib)]


class VolumeRequest(Strict):
    """``volume: {size: 100GB, mount: /data}``: a persistent disk that follows the job across
    attempts within one zone (docs/aws.md). Created on first placement, deleted when the job ends
    (``keep: false``, the default) or by ``gpuorch volume delete`` (``keep: true``)."""

    size: Gib = Field(gt=0, le=v_.MAX_GIB)
    mount: str  # absolute path on the instance; the agent gets it as GPUORCH_VOLUME_DIR
    # The cloud's disk type (gp3; pd-balanced, pd-ssd, hyperdisk-balanced; Premium_LRS,
    # StandardSSD_LRS); default: the provider's ``volume_type``. Placement keeps to providers
    # that make it and instance types that attach it (submit refuses a type no allowed provider has).
    type: str | None = None
    # True: the volume outlives its job (the daemon's sweep leaves it, storage keeps billing)
    # until ``gpuorch volume delete`` asks for its deletion.
    keep: bool = False

    @field_validator("type")
    @classmethod
    def _type(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,39}", v):
            raise ValueError(f"{v!r} is not a disk type name (letters, digits, - and _, like pd-ssd or gp3)")
        return v

    @field_validator("mount")
    @classmethod
    def _mount(cls, v: str) -> str:
        from gpuorch.runners.volume_mount import check_mount_path  # stdlib only

        return check_mount_path(v)
