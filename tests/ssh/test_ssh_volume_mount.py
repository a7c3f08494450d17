"""The job volume's mount step (``gpuorch.runners.volume_mount``) run through the real sshd.

The "instance" is a temp directory standing in for the block-device places: ``dev/disk/by-id``,
``sys/block``, a mounts table, and the device itself, a regular file. ``blkid`` and
``mkfs.ext4`` are the real ones (both work on a file); only ``mount`` (kernel, root) is a stand-in
that appends to the mounts table. The script never waits: while the device is absent it says
"not yet" (VolumeNotReady), and the test makes the attach complete between two starts.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from ssh_harness import config

from gpuorch.jobs.spec import VolumeRequest
from gpuorch.runners.port import RunnerUnavailable, VolumeMountFailed, VolumeNotReady
from gpuorch.runners.ssh import SshRunner
from gpuorch.runners.volume_mount import (
    EBS_BY_ID_PREFIX,
    MOUNT_POINT_BUSY,
    NOT_BLANK,
    NOT_YET,
    MountTools,
    mount_script,
)

pytestmark = pytest.mark.aws
Make = Callable[..., SshRunner]
VOL = "vol-0123456789abcdef0"
SERIAL = "vol0123456789abcdef0"


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


@dataclass
class Machine:
    root: Path
    tools: MountTools
    device: Path
    calls: Path  # one line per stand-in call: "mkfs <dev>", "mount <dev> <dir>"

    def attach(self, *, by_id: bool = True) -> None:
        """The volume shows up: its udev by-id link, or only its NVMe serial in sysfs."""
        if by_id:
            link = self.root / "dev/disk/by-id" / f"{EBS_BY_ID_PREFIX}{SERIAL}"
            link.symlink_to(os.path.relpath(self.device, link.parent))
        else:
            sysdev = self.root / "sys/block" / self.device.name / "device"
            sysdev.mkdir(parents=True)
            (sysdev / "serial").write_text(f"{SERIAL}      \n")  # NVMe serials are space-padded

    def log(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def mounts(self) -> list[list[str]]:
        return [line.split() for line in (self.root / "mounts").read_text().splitlines()]

    def fs_uuid(self) -> str:
        return subprocess.run(["blkid", "-p", "-s", "UUID", "-o", "value", str(self.device)],
                              capture_output=True, text=True).stdout.strip()


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    root = tmp_path / "instance"
    for d in ("dev/disk/by-id", "sys/block/nvme0n1/device", "bin"):
        (root / d).mkdir(parents=True)
    (root / "sys/block/nvme0n1/device/serial").write_text("AWS1234567890ABCDEF\n")  # the root volume
    (root / "mounts").write_text("/dev/nvme0n1p1 / ext4 rw,relatime 0 0\n")
    device = root / "dev/nvme1n1"
    device.write_bytes(b"")
    os.truncate(device, 16 << 20)  # a blank 16 MiB "volume" (reads as zeros, like a new EBS one)
    calls = root / "calls.log"
    q = shlex.quote
    bin_ = root / "bin"
    tools = MountTools(
        by_id_dir=str(root / "dev/disk/by-id"), sys_block_dir=str(root / "sys/block"), dev_dir=str(root / "dev"),
        mounts_file=str(root / "mounts"), sudo=(_script(bin_ / "sudo", 'exec "$@"\n'),),
        mkfs=(_script(bin_ / "mkfs", f'echo "mkfs $*" >> {q(str(calls))}\nexec mkfs.ext4 "$@"\n'),
              "-q", "-E", "nodiscard", "-L", "gpuorch"),
        mount=(_script(bin_ / "mount", f"""\
            [ -d "$2" ] || {{ echo "mount: $2: mount point does not exist" >&2; exit 32; }}
            echo "mount $1 $2" >> {q(str(calls))}
            printf '%s %s ext4 rw,noatime 0 0\\n' "$1" "$2" >> {q(str(root / "mounts"))}
            """),),
    )
    return Machine(root, tools, device, calls)


def run(runner: SshRunner, script: str) -> tuple[int, str]:
    """Run ``script`` under /bin/sh on the "instance", as the runner does."""
    return runner.connection.call("run", lambda client, _sftp: runner.connection.exec(
        client, f"/bin/sh -c {shlex.quote(script)}"))


def test_not_yet_while_the_device_is_absent_then_formats_it_once_and_mounts_it_before_the_agent_starts(
        make_runner: Make, machine: Machine, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    mnt = tmp_path / "data"
    runner = make_runner(volume_tools=machine.tools)
    caplog.set_level("INFO", "gpuorch.runners.ssh")
    agent_json = Path(runner.remote_root) / "run" / "agent.json"
    for _ in range(2):  # the attach has not completed: each start looks once and says "not yet"
        with pytest.raises(VolumeNotReady) as e:
            runner.start(config(volume_id=VOL, volume_dir=str(mnt)))
        assert str(e.value).startswith(f"volume {VOL} at {mnt}: no device yet")
        assert f"{EBS_BY_ID_PREFIX}{SERIAL}" in str(e.value) and "\n" not in str(e.value)
        assert machine.log() == [] and not mnt.exists() and not agent_json.exists()

    machine.attach()  # the device shows up; the next pass's start mounts it
    runner.start(config(volume_id=VOL, volume_dir=str(mnt)))
    assert machine.log() == [f"mkfs -q -E nodiscard -L gpuorch {machine.device}", f"mount {machine.device} {mnt}"]
    assert machine.fs_uuid()  # a real ext4 filesystem now
    assert machine.mounts()[-1][:2] == [str(machine.device), str(mnt)]
    assert mnt.is_dir() and mnt.stat().st_uid == os.getuid()  # the login user owns the new volume's root
    said = caplog.text
    assert "is blank: formatting it" in said and f"mounted {machine.device}" in said
    assert agent_json.exists()  # the agent started after it

    runner.start(config(volume_id=VOL, volume_dir=str(mnt)))  # started: nothing runs again
    assert len(machine.log()) == 2


def test_a_second_run_changes_nothing(make_runner: Make, machine: Machine, tmp_path: Path) -> None:
    machine.attach()
    mnt = tmp_path / "data"
    runner = make_runner()
    script = mount_script(VOL, str(mnt), tools=machine.tools)
    assert run(runner, script)[0] == 0
    uuid, calls, mounts = machine.fs_uuid(), machine.log(), machine.mounts()

    code, out = run(runner, script)
    assert code == 0 and "already mounted" in out
    assert (machine.fs_uuid(), machine.log(), machine.mounts()) == (uuid, calls, mounts)


def test_a_volume_with_a_filesystem_is_mounted_never_formatted(make_runner: Make, machine: Machine,
                                                                tmp_path: Path) -> None:
    subprocess.run(["mkfs.ext4", "-q", "-L", "old-data", str(machine.device)], check=True)
    uuid = machine.fs_uuid()
    machine.attach(by_id=False)  # found by its NVMe serial in sysfs (no udev link on this image)
    mnt = tmp_path / "data"
    code, out = run(make_runner(), mount_script(VOL, str(mnt), tools=machine.tools))
    assert code == 0, out
    assert "has a filesystem" in out and machine.fs_uuid() == uuid
    assert machine.log() == [f"mount {machine.device} {mnt}"]  # no mkfs


def test_data_without_a_filesystem_is_never_formatted(make_runner: Make, machine: Machine, tmp_path: Path) -> None:
    with machine.device.open("r+b") as f:
        f.seek(4096)
        f.write(b"precious bytes no filesystem signature knows")
    before = machine.device.read_bytes()
    machine.attach()
    code, out = run(make_runner(), mount_script(VOL, str(tmp_path / "data"), tools=machine.tools))
    assert code == NOT_BLANK and "holds data but no filesystem" in out and VOL in out
    assert machine.device.read_bytes() == before and machine.log() == []


def test_the_script_looks_once_and_never_waits(make_runner: Make, machine: Machine, tmp_path: Path) -> None:
    code, out = run(make_runner(), mount_script(VOL, str(tmp_path / "data"), tools=machine.tools))
    assert code == NOT_YET and f"gpuorch: volume {VOL}: no device yet" in out
    assert "is this a Nitro instance type?" in out and len(out.strip().splitlines()) == 1
    assert machine.log() == [] and not (tmp_path / "data").exists()


def test_final_failures_are_volume_mount_failed_and_the_agent_is_not_started(
        make_runner: Make, machine: Machine, tmp_path: Path) -> None:
    with machine.device.open("r+b") as f:
        f.seek(4096)
        f.write(b"precious bytes no filesystem signature knows")
    machine.attach()
    runner = make_runner(volume_tools=machine.tools)
    with pytest.raises(VolumeMountFailed) as e:
        runner.start(config(volume_id=VOL, volume_dir=str(tmp_path / "data")))
    assert not isinstance(e.value, RunnerUnavailable)  # not "try again next pass"
    msg = str(e.value)
    assert msg.startswith(f"volume {VOL} at {tmp_path / 'data'}: {machine.device} holds data but no filesystem")
    assert msg.endswith(f"(exit {NOT_BLANK})") and "\n" not in msg
    assert not (Path(runner.remote_root) / "run" / "agent.json").exists()

    with pytest.raises(VolumeMountFailed, match="is not a volume id the mount step knows"):  # refused before any remote command
        runner.start(config(volume_id="disk-1", volume_dir=str(tmp_path / "data")))


def test_another_device_at_the_mount_point_is_an_error(make_runner: Make, machine: Machine, tmp_path: Path) -> None:
    mnt = tmp_path / "data"
    with (machine.root / "mounts").open("a") as f:
        f.write(f"/dev/nvme7n1 {mnt} xfs rw 0 0\n")
    machine.attach()
    code, out = run(make_runner(), mount_script(VOL, str(mnt), tools=machine.tools))
    assert code == MOUNT_POINT_BUSY and f"{mnt} has /dev/nvme7n1 mounted" in out
    assert machine.log() == []


def test_paths_reach_the_shell_only_quoted(make_runner: Make, machine: Machine, tmp_path: Path) -> None:
    machine.attach()
    pwned = tmp_path / "pwned"
    mnt = tmp_path / f"da'ta;$(touch${{IFS}}{pwned})`touch${{IFS}}{pwned}2`\"x"
    code, out = run(make_runner(), mount_script(VOL, str(mnt), tools=machine.tools))
    assert code == 0, out
    assert mnt.is_dir() and machine.mounts()[-1][1] == str(mnt)
    assert not list(tmp_path.glob("pwned*"))


def test_what_the_script_refuses_to_build() -> None:
    with pytest.raises(ValueError, match="not a volume id the mount step knows"):
        mount_script("disk-1; reboot", "/data")
    for bad in ("data", "/", "/my data", "/a\\b", "/a\nb"):
        with pytest.raises(ValueError, match="mount"):
            mount_script(VOL, bad)
    with pytest.raises(ValueError, match="whitespace"):
        VolumeRequest(size=10, mount="/my data")
