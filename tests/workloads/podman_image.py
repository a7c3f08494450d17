"""A real podman for the ``container`` tests (../shared/TESTING.md): the runc runtime, the cgroupfs
cgroup manager and explicit nofile/nproc ulimits, and an image imported from a local root file
system (nothing can be pulled here).

The image holds busybox (its own /bin/sh, its own root file system and process namespace). The
job's Python toolchain (this interpreter and the test venv's packages) is bind-mounted into it
read-only by the local provider's ``container.run_args``, which stands in for an image that has
PyTorch or NumPy installed: copying a 1 GB interpreter into every test image would cost more
than the test.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

from gpuorch.agent.container import ContainerConfig

PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "echo", "sleep", "kill", "cat", "test", "ls", "id", "true")


def unavailable() -> str | None:
    if shutil.which("podman") is None or shutil.which("runc") is None:
        return "podman or runc is not installed (scripts/deps.sh, run by make test, installs them)"
    if not BUSYBOX.exists():
        return "busybox-static is not installed (scripts/deps.sh, run by make test, installs it)"
    return None


def toolchain_mounts() -> list[str]:
    """Read-only mounts that give the container this Python and its site-packages."""
    dirs = {Path(sys.base_prefix).resolve(), Path(sysconfig.get_paths()["purelib"]).resolve(),
            Path(sysconfig.get_paths()["platlib"]).resolve(), Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib64")}
    out = []
    for d in sorted(d for d in dirs if d.is_dir()):
        out += ["--volume", f"{d}:{d}:ro"]
    return out


def python_env() -> dict[str, str]:
    """What a job needs to run this interpreter inside the image."""
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    return {"PY": str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"),
            "PYTHONPATH": os.pathsep.join(site)}


def build_image(tmp: Path) -> str:
    """Import (once per content) ``localhost/gpuorch-test-busybox:<hash>``; returns its name."""
    root = tmp / "rootfs"
    for d in ("bin", "tmp", "usr/lib", "usr/lib64", "etc"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "lib").symlink_to("usr/lib")
    (root / "lib64").symlink_to("usr/lib64")
    shutil.copy2(BUSYBOX, root / "bin" / "busybox")
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    digest = hashlib.sha256(BUSYBOX.read_bytes() + ",".join(APPLETS).encode()).hexdigest()[:12]
    image = f"localhost/gpuorch-test-busybox:{digest}"
    if subprocess.run([*PODMAN, "image", "exists", image], check=False).returncode == 0:
        return image
    tar = tmp / "rootfs.tar"
    with tarfile.open(tar, "w") as t:
        t.add(root, arcname=".")
    done = subprocess.run([*PODMAN, "import", "--quiet", str(tar), image], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        pytest.skip(f"podman cannot import an image here: {done.stderr.strip()[-300:]}")
    return image


def local_container() -> ContainerConfig:
    """The local provider's ``container`` options for this machine."""
    return ContainerConfig(image="", runtime=list(PODMAN), run_args=[*ULIMITS, *toolchain_mounts()], gpus="none")
