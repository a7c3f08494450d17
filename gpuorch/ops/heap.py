"""Keep the daemon's long-lived heap out of the cyclic garbage collector's way (issue 18).

A daemon holding 10,000 jobs keeps a few million objects alive from pass to pass (job and attempt
rows, parsed specs, instances, the offer index). CPython's full collection walks all of them, and
the objects each pass leaves behind set one off every few passes: at 10,000 running jobs, two
full collections in 15 steady passes cost more CPU than the passes' own work (docs/benchmarks.md).

So after each pass the daemon freezes what is alive (``gc.freeze``: the collector ignores those
objects from then on; reference counting still frees them when dropped) and the collector only
walks what later passes allocate. Cyclic garbage among frozen objects would never be found, so
every ``full_every_s`` the heap is thawed and collected in full once before freezing again: a
leak is bounded by what that many seconds of passes leave in cycles. ``close`` (the daemon's
shutdown) thaws everything, so a daemon run inside a longer-lived process (the tests) leaves the
collector as it found it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

FULL_EVERY_S = 600.0


class HeapFreeze:
    def __init__(self, full_every_s: float = FULL_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.full_every_s, self.clock = full_every_s, clock
        self._full_at: float | None = None
        self.full_collections = 0

    def after_pass(self) -> None:
        """Freeze what the pass left alive; first thaw and collect in full when that is due."""
        now = self.clock()
        if self._full_at is None or not 0 <= now - self._full_at < self.full_every_s:
            gc.unfreeze()
            gc.collect()
            self._full_at = now
            self.full_collections += 1
        gc.freeze()

    def close(self) -> None:
        gc.unfreeze()
