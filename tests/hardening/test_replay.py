"""Issue 16, item 9: GPUORCH_CHAOS_SEED survives tests/conftest.py, so a chaos run can be replayed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__)


def test_probe():
    """Run by the test below in a child pytest: the seed it was given is still there."""
    expected = os.environ.get("HARDENING_EXPECT_SEED")
    if expected is not None:
        assert os.environ.get("GPUORCH_CHAOS_SEED") == expected
        assert "GPUORCH_HOME" in os.environ and os.environ.get("GPUORCH_POLL_S") is None  # the others: cleared


def test_the_chaos_seed_reaches_the_tests():
    env = {**os.environ, "GPUORCH_CHAOS_SEED": "4242", "HARDENING_EXPECT_SEED": "4242", "GPUORCH_POLL_S": "9"}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{HERE}::test_probe"],
                       env=env, capture_output=True, text=True, cwd=HERE.parents[2], timeout=120)
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout + p.stderr
