"""``gpuorch doctor`` for an SSH pool: each host reachable, its host key verified, its GPUs."""

from __future__ import annotations

from gpuorch.provider import Finding

from .config import Host
from .hosts import HostState


def host_findings(host: Host, state: HostState, free: int | None = None) -> list[Finding]:
    check = f"ssh host {host.zone}"
    if not state.ok:
        why = state.error or "not checked"
        if "host key" in why:
            fix = (f"verify the host's key on its console, then put it in known_hosts or {host.field}.host_key; "
                   "never accept a key from the connection itself")
        elif "authentication" in why:
            fix = f"add the public half of {host.key_path} to {host.address.user}'s authorized_keys on the host"
        else:
            fix = f"make sshd on {host.address.key} reachable from this host ({host.field}.host)"
        return [Finding.fail(check, f"{host.address}: {why}", fix)]
    out = [Finding.ok(check, f"{host.address}: reachable, host key {state.host_key} verified")]
    if not state.gpus:
        why = state.gpus_error or "nvidia-smi found no GPU gpuorch knows"
        out.append(Finding.fail(f"{check} GPUs", f"{host.address}: no GPUs to offer ({why})",
                                f"install the NVIDIA driver there, or declare them in {host.field}.gpus (A100:80GB:4)"))
    else:
        how = "declared" if host.gpus is not None else "detected by nvidia-smi"
        listed = ", ".join(f"{len(g.indexes)} x {g.gpu}" for g in state.gpus)
        leased = "" if free is None else f", {free} free now"
        out.append(Finding.ok(f"{check} GPUs",
                              f"{listed} ({how}){leased}, at {host.price_per_gpu_hour:g} USD per GPU-hour"))
    return out
