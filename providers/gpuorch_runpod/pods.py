"""Pods <-> the port, pure: the launch input for a request, and an ``Instance`` from a pod.

RunPod keeps no tags. A pod carries the attempt's client token as its ``name`` (looked for
before creating another) and the gpuorch tags in its ``env`` (``GPUORCH_JOB``...): both come
back from every pod query. The ``env`` also carries the attempt's SSH host key and the job's
login key, which the pod's start command (``START``) installs before it starts sshd; nothing
else ever reads them from a pod.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gpuorch.provider import TAG_ATTEMPT, TAG_JOB, TAG_MANAGED, TAG_OWNER, Instance, InstanceState, LaunchRequest

from .catalog import PROVIDER, parse_instance_type

# env name -> tag; only these become an Instance's tags (never the keys beside them).
ENV_TAGS = {"GPUORCH_MANAGED": TAG_MANAGED, "GPUORCH_JOB": TAG_JOB, "GPUORCH_ATTEMPT": TAG_ATTEMPT,
            "GPUORCH_OWNER": TAG_OWNER}
ENV_TYPE, ENV_CLOUD = "GPUORCH_INSTANCE_TYPE", "GPUORCH_CLOUD"
ENV_HOST_KEY, ENV_HOST_PUB, ENV_LOGIN_KEY = "GPUORCH_SSH_HOST_KEY", "GPUORCH_SSH_HOST_KEY_PUB", "PUBLIC_KEY"
ENV_USER, ENV_LIFETIME = "GPUORCH_SSH_USER", "GPUORCH_MAX_LIFETIME_S"
# The pod's start command (``dockerArgs``), a constant: every value it uses is an env variable.
# Installs the attempt's host key (only that one is offered: the daemon pinned it) and the login
# key, starts sshd without the host key in its environment (so no session or job sees it), and
# ends the container (the pod stops billing GPUs) after the lifetime backstop, if given.
START = (
    "bash -c 'set -e; umask 077; mkdir -p /run/sshd /etc/ssh/gpuorch; "
    "h=$(getent passwd \"$GPUORCH_SSH_USER\" | cut -d: -f6); mkdir -p \"$h/.ssh\"; "
    "printf \"%s\\n\" \"$GPUORCH_SSH_HOST_KEY\" > /etc/ssh/gpuorch/host_ed25519; "
    "printf \"%s\\n\" \"$PUBLIC_KEY\" >> \"$h/.ssh/authorized_keys\"; "
    "chown -R \"$GPUORCH_SSH_USER\" \"$h/.ssh\"; "
    "command -v sshd >/dev/null || (apt-get update -qq && apt-get install -y -qq openssh-server); "
    "if [ -n \"$GPUORCH_MAX_LIFETIME_S\" ]; then (sleep \"$GPUORCH_MAX_LIFETIME_S\"; kill -TERM 1) & fi; "
    "exec env -u GPUORCH_SSH_HOST_KEY \"$(command -v sshd)\" -D -e -o HostKey=/etc/ssh/gpuorch/host_ed25519 "
    "-o PasswordAuthentication=no -o PermitRootLogin=prohibit-password'"
)
SSH_PORT = 22


def launch_input(request: LaunchRequest, *, image: str, ssh_user: str, host_key: tuple[str, str], login_key: str,
                 data_center: str | None, network_volume_id: str | None = None,
                 registry_auth_id: str | None = None) -> dict[str, Any]:
    """The ``input`` of ``podFindAndDeployOnDemand`` / ``podRentInterruptable`` (``bidPerGpu``:
    the offer's spot price per GPU, the market's price when the catalog was read;
    ``containerRegistryAuthId``: the account's login for a private image, registry.py)."""
    o = request.offer
    parsed = parse_instance_type(o.instance_type)
    if parsed is None:
        raise ValueError(f"{o.instance_type!r} is not a RunPod instance type of gpuorch (like rtx4090.1)")
    gpu_type_id, _, count = parsed
    tags = request.tags
    env = {name: tags[tag] for name, tag in ENV_TAGS.items() if tag in tags}
    env |= {ENV_TYPE: o.instance_type, ENV_CLOUD: o.region, ENV_HOST_KEY: host_key[0], ENV_HOST_PUB: host_key[1],
            ENV_LOGIN_KEY: login_key, ENV_USER: ssh_user}
    if request.max_lifetime_s:
        env[ENV_LIFETIME] = str(max(60, int(request.max_lifetime_s)))
    body: dict[str, Any] = {
        "name": request.client_token, "imageName": image, "gpuTypeId": gpu_type_id, "gpuCount": count,
        "cloudType": o.region.upper(), "supportPublicIp": True, "startSsh": False,
        "containerDiskInGb": max(1, int(request.disk_gib)), "volumeInGb": 0, "ports": f"{SSH_PORT}/tcp",
        "dockerArgs": START, "env": [{"key": k, "value": v} for k, v in env.items()],
        "dataCenterId": data_center, "minVcpuCount": 1, "minMemoryInGb": 1,
    }
    if network_volume_id is not None:
        body["networkVolumeId"] = network_volume_id
        body["volumeMountPath"] = request.volumes[0].mount_path if request.volumes else "/workspace"
    if registry_auth_id is not None:
        body["containerRegistryAuthId"] = registry_auth_id
    if request.spot:
        if o.spot_price_per_hour is None:
            raise ValueError(f"{o.instance_type} in {o.region} has no interruptible price; launch it on-demand")
        body["bidPerGpu"] = round(o.spot_price_per_hour / count, 4)
    return body


def env_of(pod: Mapping[str, Any]) -> dict[str, str]:
    """A pod's env, given as ``["K=V", ...]`` (the official client's query) or ``[{key, value}]``."""
    out: dict[str, str] = {}
    for item in pod.get("env") or ():
        if isinstance(item, str) and "=" in item:
            k, _, v = item.partition("=")
            out[k] = v
        elif isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = str(item.get("value", ""))
    return out


def is_managed(pod: Mapping[str, Any]) -> bool:
    return env_of(pod).get("GPUORCH_MANAGED") == "true"


_DATE = re.compile(r"(\w{3} \w{3} \d{1,2} \d{4} \d{2}:\d{2}:\d{2}) GMT([+-]\d{4})")


def status_time(text: str | None) -> datetime | None:
    """The time in ``lastStatusChange`` ("Exited by Runpod: Tue Jun 04 2024 10:12:33 GMT+0000 (...)")."""
    m = _DATE.search(text or "")
    if m is None:
        return None
    try:
        return datetime.strptime(f"{m.group(1)} {m.group(2)}", "%a %b %d %Y %H:%M:%S %z").astimezone(UTC)
    except ValueError:
        return None


def interruptible(pod: Mapping[str, Any]) -> bool:
    return str(pod.get("podType") or "").upper().startswith("INTERRUPT")


def to_instance(pod: Mapping[str, Any]) -> Instance:
    """The pod as the port's ``Instance``. RUNNING once its runtime maps the SSH port publicly;
    an interruptible pod that exited (we never stop pods, only terminate them) was reclaimed."""
    env = env_of(pod)
    tags = {tag: env[name] for name, tag in ENV_TAGS.items() if name in env}
    status = str(pod.get("desiredStatus") or "").upper()
    spot = interruptible(pod)
    host, port = ssh_endpoint(pod)
    ended_at, reason = None, pod.get("lastStatusChange") or None
    if status in ("EXITED", "TERMINATED", "DEAD"):
        state = InstanceState.PREEMPTED if spot and status == "EXITED" else InstanceState.TERMINATED
        ended_at = status_time(reason)
    elif status == "RUNNING" and host is not None:
        state = InstanceState.RUNNING
    else:  # CREATED, RESTARTING, or RUNNING while the container starts
        state, host, port = InstanceState.PENDING, None, None
    cloud = env.get(ENV_CLOUD, "")
    return Instance(id=str(pod["id"]), provider=PROVIDER, region=cloud, zone=cloud,
                    instance_type=env.get(ENV_TYPE, ""), spot=spot, state=state, tags=tags, host=host, port=port,
                    state_reason=reason if state is not InstanceState.RUNNING else None, ended_at=ended_at)


def ssh_endpoint(pod: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The public IP and port mapped to the container's port 22, once the runtime reports it."""
    runtime = pod.get("runtime") or {}
    for p in runtime.get("ports") or ():
        if p.get("privatePort") == SSH_PORT and p.get("isIpPublic") and p.get("ip") and p.get("publicPort"):
            return str(p["ip"]), int(p["publicPort"])
    return None, None
