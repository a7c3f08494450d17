"""One new spot trial at a time: a sweep naming ``objective.max_step`` does not bet several
trials on spot before the last one started has checkpointed (one reclaim without notice would
take them all, with nothing saved; bench/sweep.py seed 4). FakeProvider, real SQLite, fake clock.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from datetime import timedelta

from gpuorch.reconciler import Reconciler
from gpuorch.store.models import JobStatus
from gpuorch.testing.e2e import attempts
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider
from tests.kit.sweeps import submit, trials


def test_a_second_spot_trial_starts_only_after_the_first_ones_first_checkpoint(store, clock, tmp_path):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=600, checkpoint_every_s=120))
    for zone in ("r1-b", "r2-a"):  # spot capacity in r1-a only
        fake.set_capacity(zone, "gpu.a100", True, False)
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    sweep = submit(store, clock, tmp_path, max_parallel=2, parameters={"LR": [0.003, 0.001]}, budget={"max_cost": 5.0},
                   objective={"metric": "loss", "mode": "min", "max_step": 600})
    seen, said = [], set()
    for _ in range(200):
        rec.run_pass()
        seen.append(len(fake.live_instances()))
        said.add(trials(store, sweep.id)[1].message or "")
        clock.advance(5)
    first, second = trials(store, sweep.id)
    assert (first.status, second.status) == (JobStatus.SUCCEEDED, JobStatus.SUCCEEDED)
    a = next(x for x in attempts(store, first.id) if x.launched_at is not None)
    b = next(x for x in attempts(store, second.id) if x.launched_at is not None)
    assert (a.zone, b.zone) == ("r1-a", "r1-a")
    assert b.requested_at >= a.launched_at + timedelta(seconds=120)  # after the first one's first checkpoint
    assert max(seen) == 2  # then both ran at once
    assert any(f"trial {first.id} of the sweep has no checkpoint yet on spot" in m for m in said)  # why it waited
