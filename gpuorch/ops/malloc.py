"""The daemon process's allocator setting: one glibc malloc arena.

glibc gives every thread that allocates its own arena (up to eight per core), and a long-lived
process keeps their pages: the launch pool's threads, which record and launch batches of jobs,
cost the daemon ~3.5 MB of RSS at 1,000 jobs in `bench/recovery.py` (docs/benchmarks.md, "The issue-11 regression").
The launches wait on the cloud, not on malloc, and the GIL already serialises most allocations:
the same run's CPU did not move (4.8 % against 4.83-5.10 %).
"""

from __future__ import annotations

import ctypes
import os
import sys

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 1


def limit_arenas(n: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at ``n`` before the daemon starts its threads; whether it did.
    A ``MALLOC_ARENA_MAX`` in the environment (glibc reads it itself) is left to win."""
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, n))
    except (OSError, AttributeError):  # not glibc (musl has no mallopt arenas)
        return False
