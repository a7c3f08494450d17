"""The mount step finds GCP and Azure volumes where their clouds put them: a GCP disk by its
device name (``/dev/disk/by-id/google-<name>``), an Azure data disk by its LUN
(``/dev/disk/azure/scsi1/lun<N>``, or ``data/by-lun/<N>`` on NVMe VMs).

The script runs under the real ``/bin/sh`` with a temp directory standing in for the
block-device places; ``blkid`` and ``mkfs.ext4`` are the real ones (they work on a file), only
``mount`` is a stand-in that appends to the mounts table.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuorch.runners.volume_mount import AZURE_LUN, NOT_YET, MountTools, mount_script

GCP_ID = "us-central1-a/gpuorch-c0ffee000001-7-vol"
AZURE_ID = ("/subscriptions/00000000-0000-4000-8000-000000000001/resourceGroups/gpuorch-test/providers/"
            "Microsoft.Compute/disks/gpuorch-c0ffee000001-7-vol")


@pytest.fixture
def instance(tmp_path: Path) -> tuple[Path, MountTools, Path]:
    if shutil.which("mkfs.ext4") is None or shutil.which("blkid") is None:
        pytest.skip("mkfs.ext4 or blkid is not installed (e2fsprogs, util-linux)")
    root = tmp_path / "vm"
    for d in ("dev/disk/by-id", "dev/disk/azure/scsi1", "sys/block", "bin"):
        (root / d).mkdir(parents=True)
    (root / "mounts").write_text("/dev/sda1 / ext4 rw 0 0\n")
    device = root / "dev/sdb"
    device.write_bytes(b"")
    os.truncate(device, 16 << 20)
    mount = root / "bin/mount"
    mount.write_text(f"#!/bin/sh\nmkdir -p \"$2\"\nprintf '%s %s ext4 rw 0 0\\n' \"$1\" \"$2\" >> "
                     f"{shlex.quote(str(root / 'mounts'))}\n")
    mount.chmod(0o755)
    sudo = root / "bin/sudo"
    sudo.write_text('#!/bin/sh\nexec "$@"\n')
    sudo.chmod(0o755)
    tools = MountTools(by_id_dir=str(root / "dev/disk/by-id"), azure_dir=str(root / "dev/disk/azure"),
                       sys_block_dir=str(root / "sys/block"), dev_dir=str(root / "dev"),
                       mounts_file=str(root / "mounts"), sudo=(str(sudo),), mount=(str(mount),))
    return root, tools, device


def sh(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("volume_id", "link"), [
    (GCP_ID, "dev/disk/by-id/google-gpuorch-c0ffee000001-7-vol"),
    (AZURE_ID, f"dev/disk/azure/scsi1/lun{AZURE_LUN}"),
])
def test_not_yet_until_the_clouds_link_appears_then_formatted_once_and_mounted(
        instance: tuple[Path, MountTools, Path], tmp_path: Path, volume_id: str, link: str) -> None:
    root, tools, device = instance
    mnt = tmp_path / "data"
    script = mount_script(volume_id, str(mnt), tools=tools)
    first = sh(script)
    assert first.returncode == NOT_YET, first.stderr
    assert "no device yet" in first.stderr and link.rsplit("/", 1)[-1] in first.stderr
    path = root / link
    path.symlink_to(os.path.relpath(device, path.parent))
    done = sh(script)
    assert done.returncode == 0, done.stderr
    assert "is blank: formatting it" in done.stdout
    assert (root / "mounts").read_text().splitlines()[-1].split()[:2] == [str(device), str(mnt)]
    again = sh(script)  # a second run (the next pass, a restarted daemon) changes nothing
    assert again.returncode == 0 and "already mounted" in again.stdout


def test_an_azure_nvme_vm_links_the_disk_by_lun_under_data(instance: tuple[Path, MountTools, Path],
                                                            tmp_path: Path) -> None:
    root, tools, device = instance
    link = root / f"dev/disk/azure/data/by-lun/{AZURE_LUN}"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.relpath(device, link.parent))
    done = sh(mount_script(AZURE_ID, str(tmp_path / "data"), tools=tools))
    assert done.returncode == 0, done.stderr


def test_ids_of_no_known_kind_are_refused_before_any_shell() -> None:
    for bad in ("us-central1-a/Bad_Name", "disk-1; reboot", "/subscriptions/x/disks/y"):
        with pytest.raises(ValueError, match="not a volume id the mount step knows"):
            mount_script(bad, "/data")
