"""Chaos on the assembled daemon, and the money check it cannot fool (issue 31): a seeded night of
spot and on-demand jobs, a sweep under a shared cap, a two-node gang, a container job (podman, on
the local provider), a job with a volume on the sim and a job its cap stops, hit by preemptions
with and without notice, reclaims while the daemon is not looking, cancels, markets running out,
clean restarts and crashes (a daemon that releases nothing). The volume job keeps its checkpoints
in its volume and is reclaimed once (with a notice or in an outage, by the seed): its later
attempt runs in the volume's zone and finds every earlier attempt's mark there, and in the
morning its volume is deleted and none is left. Each attempt's cost must equal what the
providers billed for its instances (from their records, with the billing rule written out in the
test), and no cap may be crossed by that bill. The night is played twice from one seed and must
make the same decisions both times.
"""

from __future__ import annotations

import os
import random

import pytest
from money_night import Night


def play(home, seed: int) -> tuple[list, dict]:  # type: ignore[no-untyped-def]
    night = Night(home, seed)
    try:
        night.submit_all(4)
        for kind in night.blows():
            night.blow(kind)
        night.morning()
        money = night.check_money()
        return night.decisions(), money
    finally:
        night.close()


@pytest.mark.chaos
@pytest.mark.timeout(900)
def test_one_seed_replays_the_same_night_and_every_attempt_costs_what_the_providers_billed(tmp_path):
    seed = int(os.environ.get("GPUORCH_CHAOS_SEED", random.randrange(1 << 20)))
    print(f"money night seed {seed} (rerun with GPUORCH_CHAOS_SEED={seed})")
    first, money = play(tmp_path / "first", seed)
    print(f"money: {money}")
    print("\n".join(map(str, first)))
    assert money["over_minimum"] > 0  # some instances ran past the minimum: their time is billed
    statuses = {name: status for name, status, _ in (d for d in first if isinstance(d, tuple))}
    assert statuses["spender"] == "budget_exhausted", statuses  # its cap never admitted a launch
    again, _ = play(tmp_path / "again", seed)
    assert again == first
