"""What a cloud instance is told at boot (cloud-init's ``#cloud-config`` user data), the same
on every cloud that runs cloud-init (EC2, GCE, Azure): the attempt's SSH host key and the job's
login key (docs/ssh.md: the daemon is the trusted source of the host key), and a lifetime
backstop that shuts the instance down even if the control host is gone. Pure, but for the key
files under ``$GPUORCH_HOME/keys`` that ``launch_cloud_config`` makes on first use."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gpuorch.provider.port import LaunchRequest


def launch_cloud_config(home: Path | None, request: LaunchRequest) -> dict[str, Any]:
    """cloud-config SSH settings for a launch: the attempt's host key and the job's login key
    (plus ``request.ssh_public_key``, if given); only that key without a ``home``."""
    if home is None:
        return login_config(request.ssh_public_key)
    from gpuorch.runners.keys import cloud_config_ssh, ensure_host_key, ensure_job_key

    _, login = ensure_job_key(home, request.job_id)
    private, public = ensure_host_key(home, request.job_id, request.attempt)
    config = cloud_config_ssh(private, public, login)
    if request.ssh_public_key:
        config["ssh_authorized_keys"] = [*config["ssh_authorized_keys"], request.ssh_public_key]
    return config


def login_config(ssh_public_key: str | None) -> dict[str, Any]:
    """cloud-config that authorizes one login key on the image's default user."""
    return {"ssh_authorized_keys": [single_line(ssh_public_key)]} if ssh_public_key else {}


def single_line(public_key: str) -> str:
    key = public_key.strip()
    if "\n" in key or "\r" in key:  # would smuggle a second line into authorized_keys
        raise ValueError("an SSH public key must be one OpenSSH public key line")
    return key


def user_data(cloud_config: Mapping[str, Any], max_lifetime_s: float | None = None) -> str | None:
    """The instance's ``#cloud-config`` (YAML) from ``cloud_config`` settings, plus a lifetime
    backstop: ``shutdown`` after ``max_lifetime_s``, which with shutdown behaviour ``terminate``
    ends the bill even if the control host is gone. None when there is nothing to say."""
    doc = dict(cloud_config)
    if doc.get("ssh_authorized_keys"):
        doc["ssh_authorized_keys"] = [single_line(k) for k in doc["ssh_authorized_keys"]]
    if max_lifetime_s:
        minutes = max(1, math.ceil(max_lifetime_s / 60))
        doc["runcmd"] = [*doc.get("runcmd", ()), ["shutdown", "-h", f"+{minutes}"]]
    if not doc:
        return None
    return "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=False, width=1 << 20)
