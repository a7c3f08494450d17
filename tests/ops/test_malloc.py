"""The daemon's malloc arena cap (gpuorch/ops/malloc.py), on this machine's real glibc."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from gpuorch.ops.malloc import limit_arenas


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_the_cap_is_set_on_glibc_unless_the_environment_sets_one(monkeypatch):
    code = "from gpuorch.ops.malloc import limit_arenas; print(limit_arenas())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"  # glibc's mallopt accepted M_ARENA_MAX
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_arenas() is False  # the operator's setting wins; glibc read it at start
