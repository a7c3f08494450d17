"""Names and tags as Azure allows them. Pure functions, unit-tested alone.

- A VM's name is derived from the launch's client token, so a repeated launch (after a crash,
  or a retry) addresses the same VM: the name *is* the idempotency key. Linux VM names are at
  most 64 characters of letters, digits, hyphens (and periods/underscores, not used here), not
  ending in a hyphen; the port's token (``gpuorch-<owner>-<job>-<attempt>``, lower case, at most
  64) already is one, so it is used as it is whenever it qualifies and hashed otherwise.
- The VM's NIC, public IP and OS disk are named after it (``<vm>-nic``, ``<vm>-ip``,
  ``<vm>-osdisk``): found again from the VM, and deleted with it.
- Tag names may not contain ``< > % & \\ ? /`` (and are at most 512 characters); the core's
  ``gpuorch:*`` names are fine as they are (``:`` is allowed). Any other name is translated
  character by character (``_``); values are at most 256 characters.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

VM_NAME_MAX = 64  # Linux VMs (Windows: 15), Azure's rule
_VM_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
_BAD_TAG_CHARS = re.compile(r"[<>%&\\?/]")
TAG_NAME_MAX, TAG_VALUE_MAX = 512, 256


def vm_name(client_token: str) -> str:
    """The VM name for a launch's client token: the token itself when Azure accepts it
    (lower-cased: Azure names are case-insensitive), else ``gpuorch-`` and a hash of it."""
    token = client_token.lower()
    if _VM_NAME.fullmatch(token):
        return token
    return f"gpuorch-{hashlib.sha256(client_token.encode()).hexdigest()[:48]}"


def is_vm_name(name: str) -> bool:
    """Could ``name`` be a VM gpuorch created? (Anything else is not looked up: it cannot be ours,
    and a ``/`` would change the request's path.)"""
    return bool(_VM_NAME.fullmatch(name))


def nic_name(vm: str) -> str:
    return f"{vm}-nic"


def ip_name(vm: str) -> str:
    return f"{vm}-ip"


def os_disk_name(vm: str) -> str:
    return f"{vm}-osdisk"


def tag_name(name: str) -> str:
    """``name`` as an Azure tag name: forbidden characters become ``_``. Raises ValueError for an
    empty or over-long name."""
    out = _BAD_TAG_CHARS.sub("_", name)
    if not out or len(out) > TAG_NAME_MAX:
        raise ValueError(f"tag name {name!r} cannot be an Azure tag name (1-{TAG_NAME_MAX} characters)")
    return out


def azure_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """Tags as Azure takes them. Raises ValueError for a value over 256 characters or two names
    that translate to the same Azure name."""
    out: dict[str, str] = {}
    for k, v in tags.items():
        name = tag_name(k)
        if len(v) > TAG_VALUE_MAX:
            raise ValueError(f"tag {k!r}: value longer than {TAG_VALUE_MAX} characters")
        if name in out:
            raise ValueError(f"tags {k!r} and another both become Azure tag {name!r}")
        out[name] = v
    return out


def gpuorch_tags(azure: Mapping[str, str] | None, wanted: Mapping[str, str] | None = None) -> dict[str, str]:
    """Tags read back from Azure. Names gpuorch itself uses come back unchanged; a ``wanted``
    mapping (the names a request asked for) restores translated names."""
    got = dict(azure or {})
    if wanted:
        for k in wanted:
            name = tag_name(k)
            if name != k and name in got:
                got[k] = got.pop(name)
    return got


DISK_NAME = re.compile(r"[A-Za-z0-9][-\w.]{0,78}\w")


def disk_name(tags: Mapping[str, str]) -> str:
    """The managed disk of a job's volume: ``gpuorch-<owner>-<job>-vol``, derived from its tags
    (job and installation) so a create repeated after a crash addresses the same disk. ValueError
    without a job tag; a name Azure would refuse (1-80 of letters, digits, ``_-.``) is hashed."""
    job, owner = tags.get("gpuorch:job"), tags.get("gpuorch:owner", "")
    if not job:
        raise ValueError("a volume's tags need gpuorch:job (its disk is named after the job)")
    name = f"gpuorch-{owner}-{job}-vol" if owner else f"gpuorch-{job}-vol"
    return name if DISK_NAME.fullmatch(name) else f"gpuorch-{hashlib.sha256(name.encode()).hexdigest()[:48]}-vol"


def split_zone(zone: str, region: str) -> str | None:
    """The availability zone number of gpuorch's zone name (``eastus-1`` -> ``"1"``); None for a
    regional placement (zone = region). ValueError for anything else."""
    if zone == region:
        return None
    head, _, number = zone.rpartition("-")
    if head != region or number not in ("1", "2", "3"):
        raise ValueError(f"azure zone {zone!r} is neither region {region} nor {region}-1/-2/-3")
    return number
