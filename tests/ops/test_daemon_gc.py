"""The daemon collects young cyclic garbage every ``YOUNG_GC_THRESHOLD`` allocations while it
serves, and leaves the collector's thresholds as it found them when it stops."""

from __future__ import annotations

import gc

from gpuorch.ops import daemon as daemon_mod
from gpuorch.ops.config import DaemonConfig
from gpuorch.ops.daemon import Daemon
from gpuorch.reconciler import Reconciler
from gpuorch.testing.fake_provider import FakeProvider


def test_serving_raises_the_young_threshold_and_stopping_restores_it(store, monkeypatch):
    """Bare Reconciler: what is tested is ``Daemon.serve``'s loop (the harness runs passes without
    it); the reconciler's run_pass is wrapped to read the collector's thresholds inside it."""
    before = gc.get_threshold()
    seen: list[tuple[int, ...]] = []
    rec = Reconciler(store, {"fake": FakeProvider()})
    real = rec.run_pass

    def run_pass(stop=None):  # type: ignore[no-untyped-def]
        seen.append(gc.get_threshold())
        return real(stop)

    monkeypatch.setattr(rec, "run_pass", run_pass)
    Daemon(rec, DaemonConfig()).serve(once=True)
    assert seen and seen[0][0] == max(daemon_mod.YOUNG_GC_THRESHOLD, before[0]) and seen[0][1:] == before[1:]
    assert gc.get_threshold() == before
