"""GCE responses (their ``to_dict`` form: snake_case) -> the port's models. Pure functions.

Preemption, as GCE shows it (spot VMs run with ``instanceTerminationAction: DELETE``):

1. GCE sends the guest an ACPI shutdown and sets ``instance/preempted`` in its metadata server
   to TRUE (the agent's notice, docs/gcp.md); a zone operation ``compute.instances.preempted``
   targeting the VM appears (``insert_time``: the reclaim's start) and the VM reads STOPPING.
   The guest has about 30 s: the instance is reported RUNNING with ``preemption_deadline`` =
   the operation's ``insert_time`` + 30 s while the operation runs and the VM is not stopped.
2. Then the VM is TERMINATED and, with DELETE, deleted. An instance that is TERMINATED (or gone)
   with a preempted operation reads PREEMPTED; a gone one is rebuilt from what was last seen of
   it, or from its name (``names.tags_from_name``) — its labels are gone with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from gpuorch.provider.port import Instance, InstanceState

from .catalog import n1_instance_type
from .names import last_segment, region_of, tags_from_labels, tags_from_name
from .requests import BUNDLED

PROVIDER = "gcp"
PREEMPTED_OP = "compute.instances.preempted"
NOTICE_S = 30.0  # GCE's preemption notice
_STATES = {
    "PROVISIONING": InstanceState.PENDING,
    "STAGING": InstanceState.PENDING,
    "RUNNING": InstanceState.RUNNING,
    "REPAIRING": InstanceState.RUNNING,  # GCE is fixing the host; the VM comes back or is stopped
    "STOPPING": InstanceState.STOPPING,
    "SUSPENDING": InstanceState.STOPPING,
    "SUSPENDED": InstanceState.TERMINATED,  # our VMs never suspend on purpose: done
    "STOPPED": InstanceState.TERMINATED,
    "TERMINATED": InstanceState.TERMINATED,
}


HOSTKEYS = "hostkeys"  # the guest attribute namespace where the guest publishes its SSH host keys


def host_keys(attributes: Mapping[str, Any]) -> list[str]:
    """The OpenSSH public key lines in a ``getGuestAttributes(queryPath="hostkeys/")`` answer.

    Each item is one host key: ``key`` its type (``ssh-ed25519``, ``ecdsa-sha2-nistp256``,
    ``ssh-rsa``), ``value`` its base64 blob (what the guest agent and cloud-init write; a value
    that repeats the type is accepted too). Items of other namespaces, unknown types and values
    that are not a key of the named type are skipped.
    """
    from gpuorch.provider import parse_public_key

    out: dict[str, str] = {}
    for item in (attributes.get("query_value") or {}).get("items") or []:
        key_type, value = str(item.get("key") or ""), str(item.get("value") or "").split()
        if item.get("namespace") != HOSTKEYS or not value:
            continue
        line = " ".join(value[:2]) if value[0] == key_type else f"{key_type} {value[0]}"
        try:
            parsed = parse_public_key(line)
        except ValueError:
            continue
        out[parsed[0]] = " ".join(parsed)
    return list(out.values())


def timestamp(text: str | None) -> datetime | None:
    """GCE's RFC 3339 timestamps (``2024-05-01T10:00:00.123-07:00``) -> aware UTC."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def is_spot(d: Mapping[str, Any]) -> bool:
    s = d.get("scheduling") or {}
    return s.get("provisioning_model") == "SPOT" or bool(s.get("preemptible"))


def preempted_ops(ops: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """(zone/name) -> its latest ``compute.instances.preempted`` operation."""
    out: dict[str, Mapping[str, Any]] = {}
    for op in ops:
        if op.get("operation_type") != PREEMPTED_OP or not op.get("target_link"):
            continue
        key = target_key(op["target_link"])
        if key not in out or (op.get("insert_time") or "") > (out[key].get("insert_time") or ""):
            out[key] = op
    return out


def target_key(link: str) -> str:
    """``.../zones/us-central1-a/instances/vm-1`` -> ``us-central1-a/vm-1`` (the instance id)."""
    parts = link.rstrip("/").split("/")
    return f"{parts[-3]}/{parts[-1]}"


def _op_done(op: Mapping[str, Any]) -> bool:
    status = op.get("status")
    return status in ("DONE", 2104194) or bool(op.get("end_time"))


def state_of(status: str, preempted: Mapping[str, Any] | None, now: datetime) -> tuple[InstanceState, datetime | None]:
    """(state, preemption deadline) of a VM in GCE ``status``, given its preempted operation."""
    state = _STATES.get(status)
    if state is None:
        raise ValueError(f"unknown GCE instance status {status!r}")
    if preempted is None:
        return state, None
    start = timestamp(preempted.get("insert_time")) or now
    deadline = start + timedelta(seconds=NOTICE_S)
    if state in (InstanceState.PENDING, InstanceState.RUNNING, InstanceState.STOPPING) and not _op_done(preempted) \
            and now < deadline:
        return InstanceState.RUNNING, deadline  # the guest is shutting down within its notice
    if state.alive:  # a reclaim long over on a VM running again (STOP action, restarted): not ours to judge
        return state, None
    return InstanceState.PREEMPTED, None


def instance_type_of(d: Mapping[str, Any]) -> str:
    """The catalog's instance type of an instance: its machine type, with the attached GPUs for
    a machine type that does not bundle them (``n1-standard-8+nvidia-tesla-t4x1``, as offered)."""
    machine = last_segment(d.get("machine_type") or "")
    accels = [a for a in d.get("guest_accelerators") or () if int(a.get("accelerator_count") or 0) > 0]
    if not accels or BUNDLED.match(machine):
        return machine
    return n1_instance_type(machine, last_segment(str(accels[0].get("accelerator_type") or "")),
                            int(accels[0]["accelerator_count"]))


def to_instance(d: Mapping[str, Any], preempted: Mapping[str, Any] | None, now: datetime) -> Instance:
    """One instance (``compute_v1.Instance.to_dict``)."""
    zone = last_segment(d.get("zone") or "")
    state, deadline = state_of(str(d.get("status") or "PROVISIONING"), preempted, now)
    host = None
    for nic in d.get("network_interfaces") or ():
        for ac in nic.get("access_configs") or ():
            host = host or ac.get("nat_i_p") or None
    host = host or next((n.get("network_i_p") for n in d.get("network_interfaces") or () if n.get("network_i_p")), None)
    reason = "preempted" if state == InstanceState.PREEMPTED else (d.get("status_message") or None)
    return Instance(
        id=f"{zone}/{d['name']}", provider=PROVIDER, region=region_of(zone), zone=zone,
        instance_type=instance_type_of(d), spot=is_spot(d), state=state,
        tags=tags_from_labels(d.get("labels") or {}), created_at=timestamp(d.get("creation_timestamp")),
        host=host if state.alive else None, port=22 if host and state.alive else None, state_reason=reason,
        preemption_deadline=deadline,
        ended_at=timestamp(d.get("last_stop_timestamp")) if not state.alive else None,
    )


def gone_preempted(instance_id: str, op: Mapping[str, Any], last_seen: Instance | None) -> Instance:
    """A spot VM GCE deleted after reclaiming it, as PREEMPTED: from what was last seen of it,
    else from its name (tags) and the operation (zone, time)."""
    zone, name = instance_id.split("/", 1)
    ended = timestamp(op.get("end_time")) or timestamp(op.get("insert_time"))
    if last_seen is not None:
        return last_seen.model_copy(update={"state": InstanceState.PREEMPTED, "host": None, "port": None,
                                            "preemption_deadline": None, "state_reason": "preempted",
                                            "ended_at": ended})
    return Instance(id=instance_id, provider=PROVIDER, region=region_of(zone), zone=zone, instance_type="",
                    spot=True, state=InstanceState.PREEMPTED, tags=tags_from_name(name), state_reason="preempted",
                    ended_at=ended)
