"""Vast's instance rows -> ``Instance``, and gpuorch's tags <-> the instance label.

Vast instances carry no tags, only a free-text ``label`` set at creation (create instance's
``label``, docs.vast.ai/api-reference/instances/create-instance). The label is the attempt's client
token, ``gpuorch-<owner>-<job>-<attempt>[-n<node>]`` (``gpuorch.provider.port.client_token``),
from which the tags are read back: managed, job, attempt and owner (the installation id).

States (docs.vast.ai/sdk/python/reference/show-instances): ``actual_status`` is the container's
(null or ``created``/``loading`` while provisioning, ``running``, ``stopped``, ``exited``, ...) and
``intended_status`` what the renter asked for. gpuorch never stops an instance (it destroys
them), so a stopped instance it asked to run was stopped by the market: an interruptible one
outbid (a higher bid took the machine: "Lower priority instances are paused until they become
the highest priority", vast.ai/docs/renting/instance-details), an on-demand one at its host's
contract end. Both are a reclaim: PREEMPTED. Vast gives no notice ahead of it.

An image the host cannot start is said in ``status_msg`` while ``actual_status`` stays ``created``
or ``loading`` (Vast retries): docker's refusal ("Error response from daemon: pull access denied
for ..., repository does not exist or may require 'docker login'", "manifest unknown", "no basic
auth credentials"), or "OCI runtime create failed" (dstack's Vast backend reads exactly that,
dstackai/dstack src/dstack/_internal/core/backends/vastai/compute.py ``update_provisioning_data``).
Such an instance is reported with ``Instance.failure`` (the daemon ends the attempt and destroys
it); a refusal that may pass (docker's rate limit, "toomanyrequests") is not one.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from gpuorch.provider import TAG_ATTEMPT, TAG_JOB, TAG_MANAGED, TAG_OWNER, Instance, InstanceState
from gpuorch.provider.port import TAG_NODE

from .names import canonical, instance_type

PROVIDER = "vast"
_TOKEN = re.compile(r"gpuorch-(?:(?P<owner>[a-z0-9]{1,16})-)?(?P<job>\d{1,18})-(?P<attempt>\d{1,9})"
                    r"(?:-n(?P<node>\d+))?")
_COUNTRY = re.compile(r"\b([A-Z]{2})\s*$")
_BOOTING = (None, "", "created", "loading", "scheduling")
_ALIVE = ("running", "rebooting", "unknown", "offline", "frozen")  # no heartbeat is the runner's to judge


def tags_of(label: str | None) -> dict[str, str] | None:
    """The gpuorch tags a label carries; None for an instance gpuorch did not create."""
    m = _TOKEN.fullmatch((label or "").strip())
    if m is None:
        return None
    tags = {TAG_MANAGED: "true", TAG_JOB: str(int(m["job"])), TAG_ATTEMPT: str(int(m["attempt"]))}
    if m["owner"]:
        tags[TAG_OWNER] = m["owner"]
    if m["node"]:
        tags[TAG_NODE] = m["node"]
    return tags


def country(geolocation: Any) -> str | None:
    """``"Texas, US"`` -> ``US``; Vast's geolocation ends with the ISO country code."""
    m = _COUNTRY.search(str(geolocation or ""))
    return m.group(1) if m else None


def state_of(row: dict[str, Any]) -> tuple[InstanceState, str | None]:
    actual = row.get("actual_status")
    intended = row.get("intended_status") or "running"
    if actual in _BOOTING:
        return InstanceState.PENDING, row.get("status_msg") or None
    if actual in _ALIVE:
        return InstanceState.RUNNING, None if actual == "running" else f"vast: {actual}"
    if actual == "stopped" and intended == "running":
        why = "outbid: a higher bid took the machine" if row.get("is_bid") else "stopped by its host (contract end)"
        return InstanceState.PREEMPTED, why
    return InstanceState.TERMINATED, f"vast: {actual} ({row.get('status_msg') or 'no message'})"


_NEVER_STARTS = re.compile(r"pull access denied|manifest unknown|manifest for \S+ not found|repository does not "
                           r"exist|no basic auth credentials|unauthorized: |denied: requested access|"
                           r"invalid reference format|OCI runtime create failed", re.I)
_SECRET = re.compile(r"(-p|--password|password)([\s=:]+)\S+", re.I)


def failure_of(row: dict[str, Any]) -> str | None:
    """Why the instance can never start its image, from ``status_msg`` (None: it may yet). The
    market's words, on one line, with anything that looks like a password masked."""
    msg = str(row.get("status_msg") or "")
    if row.get("actual_status") == "running" or not _NEVER_STARTS.search(msg):
        return None
    said = _SECRET.sub(r"\1\2***", " ".join(msg.split()))[:400]
    return f"vast: the host cannot start the image: {said}"


def when(epoch: Any) -> datetime | None:
    try:
        value = float(epoch)
    except (TypeError, ValueError):
        return None
    return datetime.fromtimestamp(value, tz=UTC) if 0 < value < 1e11 else None


def to_instance(row: dict[str, Any], region: str | None = None) -> Instance | None:
    """The Instance of a Vast row, or None for an instance gpuorch did not create. ``region``: the
    offer's region where known (a ``global`` offer's instance keeps it)."""
    tags = tags_of(row.get("label"))
    if tags is None:
        return None
    state, reason = state_of(row)
    gpu = canonical(str(row.get("gpu_name") or ""), float(row.get("gpu_ram") or 0)) or str(row.get("gpu_name"))
    where = region or country(row.get("geolocation")) or "unknown"
    port = row.get("ssh_port")
    return Instance(
        id=str(row["id"]), provider=PROVIDER, region=where, zone=where,
        instance_type=instance_type(gpu, int(row.get("num_gpus") or 0)), spot=bool(row.get("is_bid")),
        state=state, tags=tags, created_at=when(row.get("start_date")),
        host=(row.get("ssh_host") or None) if state.alive else None,
        port=int(port) if state.alive and isinstance(port, int | str) and str(port).isdigit() else None,
        state_reason=reason, failure=failure_of(row),
    )
