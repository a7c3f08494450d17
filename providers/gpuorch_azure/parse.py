"""ARM VM JSON -> the port's models. Pure functions (no SDK, no I/O), unit-tested alone.

A VM's state is its ``provisioningState`` and the ``PowerState/*`` status of its instance view:

=====================================  ================================================
ARM                                    gpuorch
=====================================  ================================================
Creating/Updating, no power state yet  PENDING
PowerState/starting                    PENDING
PowerState/running                     RUNNING
provisioningState Deleting             STOPPING (we, or someone, deleted it)
PowerState/stopping, stopped           STOPPING: powered off from inside but still
                                       allocated, so still billed; the provider deletes it
PowerState/deallocating, deallocated   spot: PREEMPTED (evicted, eviction policy
                                       Deallocate: gpuorch itself never deallocates);
                                       on-demand: TERMINATED
provisioningState Failed               TERMINATED, reason the failure's code
                                       (``ProvisioningState/failed/AllocationFailed``)
=====================================  ================================================

Preemption, as ARM shows it: there is no control-plane notice (Azure announces an eviction
only inside the VM, through Scheduled Events, which the agent reads); with eviction policy
Delete the evicted VM simply disappears, which ``provider.py`` tells apart from a deletion it
asked for by remembering what it saw (see ``Tombstones``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gpuorch.provider.port import Instance, InstanceState

from .names import gpuorch_tags

PROVIDER = "azure"
EVICTED_DEALLOCATED = "evicted (spot eviction policy Deallocate)"
EVICTED_DELETED = "evicted (spot VM deleted by Azure, eviction policy Delete)"
POWERED_OFF = "powered off from inside: still allocated and billed until deleted"


def statuses(vm: Mapping[str, Any]) -> list[str]:
    view = (vm.get("properties") or {}).get("instanceView") or {}
    return [str(s.get("code") or "") for s in view.get("statuses") or ()]


def power_state(vm: Mapping[str, Any]) -> str | None:
    """``running``, ``deallocated``, ... from the instance view; None before Azure reports one."""
    for code in statuses(vm):
        if code.startswith("PowerState/"):
            return code.split("/", 1)[1].lower()
    return None


def failure_code(vm: Mapping[str, Any]) -> str | None:
    """The code of a failed provisioning (``AllocationFailed``), if the VM failed."""
    props = vm.get("properties") or {}
    for code in statuses(vm):
        parts = code.split("/")
        if len(parts) >= 3 and parts[0] == "ProvisioningState" and parts[1].lower() == "failed":
            return parts[2]
    if str(props.get("provisioningState") or "").lower() == "failed":
        return "ProvisioningFailed"
    return None


def stopped_at(vm: Mapping[str, Any]) -> datetime | None:
    """When a VM that is no longer running stopped, as its instance view dates it: the ``time``
    of its ``PowerState/*`` status where ARM gives one, else of its ``ProvisioningState/*``
    status (the last operation's end: the deallocation of an evicted VM, a failed allocation)."""
    view = (vm.get("properties") or {}).get("instanceView") or {}
    dated = {str(s.get("code") or "").split("/", 1)[0]: utc(s.get("time")) for s in view.get("statuses") or ()}
    return dated.get("PowerState") or dated.get("ProvisioningState")


def is_spot(vm: Mapping[str, Any]) -> bool:
    return str((vm.get("properties") or {}).get("priority") or "").lower() in ("spot", "low")


def vm_state(vm: Mapping[str, Any]) -> tuple[InstanceState, str | None]:
    """(state, reason) of a VM; see the module's table."""
    props = vm.get("properties") or {}
    provisioning = str(props.get("provisioningState") or "").lower()
    power = power_state(vm)
    failed = failure_code(vm)
    if provisioning == "deleting":
        return InstanceState.STOPPING, "deleting"
    if failed is not None:
        return InstanceState.TERMINATED, failed
    if power in ("deallocating", "deallocated"):
        if is_spot(vm):
            return InstanceState.PREEMPTED, EVICTED_DEALLOCATED
        return InstanceState.TERMINATED, f"deallocated ({power})"
    if power in ("stopping", "stopped"):
        return InstanceState.STOPPING, POWERED_OFF
    if power == "running":
        return InstanceState.RUNNING, None
    return InstanceState.PENDING, power or provisioning or None


def utc(text: Any) -> datetime | None:
    if isinstance(text, datetime):
        return text.astimezone(UTC) if text.tzinfo else text.replace(tzinfo=UTC)
    if not text:
        return None
    try:
        ts = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts.astimezone(UTC) if ts.tzinfo else ts.replace(tzinfo=UTC)


def nic_ids(vm: Mapping[str, Any]) -> list[str]:
    """The VM's NICs (ARM lists those it made from ``networkInterfaceConfigurations`` here)."""
    profile = (vm.get("properties") or {}).get("networkProfile") or {}
    return [str(n["id"]) for n in profile.get("networkInterfaces") or () if n.get("id")]


def nic_addresses(nic: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(private address, public IP resource id) of a NIC's primary IP configuration."""
    configs = (nic.get("properties") or {}).get("ipConfigurations") or ()
    primary = next((c for c in configs if (c.get("properties") or {}).get("primary")), configs[0] if configs else None)
    if primary is None:
        return None, None
    p = primary.get("properties") or {}
    return p.get("privateIPAddress"), (p.get("publicIPAddress") or {}).get("id")


def public_address(ip: Mapping[str, Any]) -> str | None:
    return (ip.get("properties") or {}).get("ipAddress")


def to_instance(vm: Mapping[str, Any], host: str | None = None,
                wanted_tags: Mapping[str, str] | None = None) -> Instance:
    """One VM as an Instance (its ``id`` is the VM name, unique in the resource group)."""
    props = vm.get("properties") or {}
    state, reason = vm_state(vm)
    region = str(vm.get("location") or "")
    zones = vm.get("zones") or ()
    return Instance(
        id=str(vm["name"]), provider=PROVIDER, region=region,
        zone=f"{region}-{zones[0]}" if zones else region,
        instance_type=str((props.get("hardwareProfile") or {}).get("vmSize") or ""), spot=is_spot(vm), state=state,
        tags=gpuorch_tags(vm.get("tags"), wanted_tags), created_at=utc(props.get("timeCreated")),
        host=host if state.alive else None, port=22 if host and state.alive else None, state_reason=reason,
        ended_at=None if state.alive or state == InstanceState.STOPPING else stopped_at(vm),
    )
