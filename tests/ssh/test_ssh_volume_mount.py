"""The job volume's mount step (``gpuorch.runners.volume_mount``) run through the real sshd.

The "instance" is a temp directory standing in for the block-device places: ``dev/disk/by-id``,
``sys/block``, a mounts table, and the device itself, a regular file. ``blkid`` and
``mkfs.ext4`` are the real ones (both work on a file); only ``mount`` (kernel, root) is a stand-in
that appends to the mounts table, and ``sleep`` a stand-in that can make the device appear while
the script waits (the attach completing) without any real waiting.
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

from gpuorch.runner import RunnerUnavailable
from gpuorch.runners.ssh import SshRunner
from gpuorch.runners.volume_mount import (
    EBS_BY_ID_PREFIX,
    MOUNT_POINT_BUSY,
    NO_DEVICE,
    NOT_BLANK,
    MountTools,
    mount_script,
)
from gpuorch.spec import VolumeRequest

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
    calls: Path  # one line per stand-in call: "mkfs <dev>", "mount <dev> <dir>", "sleep"

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
        sleep=(_script(bin_ / "sleep", f"""\
            echo sleep >> {q(str(calls))}
            if [ -e {q(str(root / "attach-on-sleep"))} ]; then
              rm {q(str(root / "attach-on-sleep"))}
              ln -s ../../nvme1n1 {q(str(root / "dev/disk/by-id" / (EBS_BY_ID_PREFIX + SERIAL)))}
            fi
            """),),
    )
    return Machine(root, tools, device, calls)


def run(runner: SshRunner, script: str) -> tuple[int, str]:
    """Run ``script`` under /bin/sh on the "instance", as the runner does."""
    return runner.connection.call("run", lambda client, _sftp: runner.connection.exec(
        client, f"/bin/sh -c {shlex.quote(script)}"))


def test_waits_for_the_device_formats_it_once_and_mounts_it_before_the_agent_starts(
        make_runner: Make, machine: Machine, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (machine.root / "attach-on-sleep").touch()  # the attach completes while the script waits
    mnt = tmp_path / "data"
    runner = make_runner(volume_tools=machine.tools, volume_wait_s=5)
    caplog.set_level("INFO", "gpuorch.runners.ssh")
    runner.start(config(volume_id=VOL, volume_dir=str(mnt)))

    assert machine.log() == ["sleep", f"mkfs -q -E nodiscard -L gpuorch {machine.device}",
                             f"mount {machine.device} {mnt}"]
    assert machine.fs_uuid()  # a real ext4 filesystem now
    assert machine.mounts()[-1][:2] == [str(machine.device), str(mnt)]
    assert mnt.is_dir() and mnt.stat().st_uid == os.getuid()  # the login user owns the new volume's root
    said = caplog.text
    assert "waiting for its device" in said and "is blank: formatting it" in said and f"mounted {machine.device}" in said
    assert (Path(runner.remote_root) / "run" / "agent.json").exists()  # the agent started after it


def test_a_second_run_changes_nothing(make_runner: Make, machine: Machine, tmp_path: Path) -> None:
    machine.attach()
    mnt = tmp_path / "data"
    runner = make_runner()
    script = mount_script(VOL, str(mnt), wait_s=5, tools=machine.tools)
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
    code, out = run(make_runner(), mount_script(VOL, str(mnt), wait_s=5, tools=machine.tools))
    assert code == 0, out
    assert "has a filesystem" in out and machine.fs_uuid() == uuid
    assert machine.log() == [f"mount {machine.device} {mnt}"]  # no mkfs


def test_data_without_a_filesystem_is_never_formatted(make_runner: Make, machine: Machine, tmp_path: Path) -> None:
    with machine.device.open("r+b") as f:
        f.seek(4096)
        f.write(b"precious bytes no filesystem signature knows")
    before = machine.device.read_bytes()
    machine.attach()
    code, out = run(make_runner(), mount_script(VOL, str(tmp_path / "data"), wait_s=5, tools=machine.tools))
    assert code == NOT_BLANK and "holds data but no filesystem" in out and VOL in out
    assert machine.device.read_bytes() == before and machine.log() == []


def test_a_device_that_never_appears_fails_clearly_and_the_agent_is_not_started(make_runner: Make, machine: Machine,
                                                                                tmp_path: Path) -> None:
    runner = make_runner(volume_tools=machine.tools, volume_wait_s=3)
    with pytest.raises(RunnerUnavailable) as e:
        runner.start(config(volume_id=VOL, volume_dir=str(tmp_path / "data")))
    msg = str(e.value)
    assert f"mounting volume {VOL}" in msg and f"(exit {NO_DEVICE})" in msg
    assert "no device appeared within 3s" in msg and f"{EBS_BY_ID_PREFIX}{SERIAL}" in msg
    assert machine.log() == ["sleep"] * 3
    assert not (Path(runner.remote_root) / "run" / "agent.json").exists()


def test_another_device_at_the_mount_point_is_an_error(make_runner: Make, machine: Machine, tmp_path: Path) -> None:
    mnt = tmp_path / "data"
    with (machine.root / "mounts").open("a") as f:
        f.write(f"/dev/nvme7n1 {mnt} xfs rw 0 0\n")
    machine.attach()
    code, out = run(make_runner(), mount_script(VOL, str(mnt), wait_s=5, tools=machine.tools))
    assert code == MOUNT_POINT_BUSY and f"{mnt} has /dev/nvme7n1 mounted" in out
    assert machine.log() == []


def test_paths_reach_the_shell_only_quoted(make_runner: Make, machine: Machine, tmp_path: Path) -> None:
    machine.attach()
    pwned = tmp_path / "pwned"
    mnt = tmp_path / f"da'ta;$(touch${{IFS}}{pwned})`touch${{IFS}}{pwned}2`\"x"
    code, out = run(make_runner(), mount_script(VOL, str(mnt), wait_s=5, tools=machine.tools))
    assert code == 0, out
    assert mnt.is_dir() and machine.mounts()[-1][1] == str(mnt)
    assert not list(tmp_path.glob("pwned*"))


def test_what_the_script_refuses_to_build() -> None:
    with pytest.raises(ValueError, match="not an EBS volume id"):
        mount_script("disk-1; reboot", "/data")
    for bad in ("data", "/", "/my data", "/a\\b", "/a\nb"):
        with pytest.raises(ValueError, match="mount"):
            mount_script(VOL, bad)
    with pytest.raises(ValueError, match="whitespace"):
        VolumeRequest(size=10, mount="/my data")
