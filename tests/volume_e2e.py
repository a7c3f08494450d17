"""The machine side of the volume end-to-end tests (GCP and Azure, each against its local fake).

A fake cloud's VMs run nothing, so ``VolumeMachine`` plays the VM and its agent: on ``start`` it
does what the guest does with an attached disk (the cloud's udev link appears, pointing at the
disk's contents, only while the *cloud's API* says the disk is attached to this VM) and runs the
real mount step (``gpuorch.runners.volume_mount``: real ``/bin/sh``, ``blkid`` and ``mkfs.ext4``;
``mount`` is a stand-in that records, since mounting needs the kernel). Its job then writes, or
reads, a file *inside the ext4 filesystem on the disk* with ``debugfs``, so what the second
attempt finds is what the first left on the volume, not on the VM.

``Disks`` holds each volume's contents (a 16 MiB image file per volume id): what a cloud keeps
of a persistent disk when the VM using it is gone.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuorch.agent.protocol import AgentConfig, AgentStatus
from gpuorch.provider.port import Instance, SupportsVolumes
from gpuorch.runners.port import Runner, VolumeMountFailed, VolumeNotReady
from gpuorch.runners.volume_mount import NOT_YET, MountTools, mount_script

NOTE = "progress.txt"


def need_e2fsprogs() -> None:
    for tool in ("mkfs.ext4", "blkid", "debugfs"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (e2fsprogs, util-linux): the volume end-to-end test formats a disk")


class Disks:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def image(self, volume_id: str) -> Path:
        path = self.root / volume_id.strip("/").replace("/", "_")
        if not path.exists():
            path.write_bytes(b"")
            os.truncate(path, 16 << 20)  # blank, like a new disk
        return path


class VolumeMachine(Runner):
    """One VM and its agent. ``link`` maps a volume id to where the cloud's udev rules put its
    device (relative to the machine's root); ``events`` collects what happened, for the test."""

    def __init__(self, volumes: SupportsVolumes, instance: Instance, disks: Disks, root: Path,
                 link: Callable[[str], str], events: list[dict[str, Any]]) -> None:
        self.volumes, self.instance, self.disks, self.root, self.link = volumes, instance, disks, root, link
        self.events = events
        self.state: AgentStatus | None = None
        for d in ("dev/disk/by-id", "dev/disk/azure", "sys/block", "bin"):
            (root / d).mkdir(parents=True, exist_ok=True)
        (root / "mounts").write_text("/dev/sda1 / ext4 rw 0 0\n")
        mount = root / "bin/mount"
        mount.write_text(f"#!/bin/sh\nmkdir -p \"$2\"\nprintf '%s %s ext4 rw 0 0\\n' \"$1\" \"$2\" >> "
                         f"{shlex.quote(str(root / 'mounts'))}\n")
        mount.chmod(0o755)
        self.tools = MountTools(by_id_dir=str(root / "dev/disk/by-id"), azure_dir=str(root / "dev/disk/azure"),
                                sys_block_dir=str(root / "sys/block"), dev_dir=str(root / "dev"),
                                mounts_file=str(root / "mounts"), sudo=("env",), mount=(str(mount),))

    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        if self.state is not None:
            return
        assert config.volume_id and config.volume_dir
        # The guest sees the device only once the cloud has attached the disk to this VM.
        attached = {v.id: v.attached_to for v in self.volumes.list_volumes()}
        if attached.get(config.volume_id) == self.instance.id:
            link = self.root / self.link(config.volume_id)
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(self.disks.image(config.volume_id))
        out = subprocess.run(["/bin/sh", "-c", mount_script(config.volume_id, config.volume_dir, tools=self.tools)],
                             capture_output=True, text=True, timeout=60)
        if out.returncode == NOT_YET:
            raise VolumeNotReady(config.volume_id, config.volume_dir, out.stderr.strip())
        if out.returncode != 0:
            raise VolumeMountFailed(config.volume_id, config.volume_dir, out.stderr.strip())
        image = self.disks.image(config.volume_id)
        attempt = self.instance.attempt
        found = subprocess.run(["debugfs", "-R", f"cat {NOTE}", str(image)], capture_output=True, text=True)
        note = found.stdout if found.returncode == 0 and "not found" not in found.stderr else None
        self.events.append({"instance": self.instance.id, "zone": self.instance.zone, "attempt": attempt,
                            "mount": out.stdout.strip(), "found": note, "env": config.env.get("GPUORCH_VOLUME_DIR")})
        now = time.time()
        if note is None:  # the first attempt: leave progress on the volume, keep running
            src = self.root / NOTE
            src.write_text(f"step 300 written by attempt {attempt} on {self.instance.id}\n")
            subprocess.run(["debugfs", "-w", "-R", f"write {src} {NOTE}", str(image)], check=True,
                           capture_output=True)
            self.state = AgentStatus(state="running", started_at=now, running_since=now, updated_at=now)
        else:  # a later attempt found it: done
            self.state = AgentStatus(state="exited", exit_code=0, started_at=now, running_since=now, ended_at=now,
                                     updated_at=now)

    def status(self) -> AgentStatus | None:
        return self.state

    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return b"", offset

    def request_stop(self, deadline: float) -> None:
        pass
