"""Grid trials run in an order that covers the space early (issue 35): every prefix of the order
uses each parameter's values as evenly as that many trials can (counts differ by at most one),
the order is a permutation of the grid, and random search is as it was."""

from __future__ import annotations

import itertools
import math
import random
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuorch.sweeps.grid import interleaved
from gpuorch.sweeps.spec import parse_sweep

NOW = datetime(2026, 11, 27, 22, 0, tzinfo=UTC)


@settings(max_examples=80, deadline=None)
@given(sizes=st.lists(st.integers(1, 7), min_size=1, max_size=4).filter(lambda s: len(s) < 4 or max(s) <= 5))
def test_every_prefix_covers_each_parameter_evenly_and_the_order_is_the_whole_grid(sizes):
    order = interleaved(sizes)
    assert sorted(order) == sorted(itertools.product(*(range(n) for n in sizes)))
    for j, n in enumerate(sizes):
        counts = [0] * n
        for t in order:
            counts[t[j]] += 1
            assert max(counts) - min(counts) <= 1, (sizes, j, counts)


def trials(doc: dict) -> list[dict]:
    _, out = parse_sweep({"name": "s", "job": {"run": "true"}, **doc}, "sweep", NOW)
    return [params for params, _ in out]


def test_the_first_three_trials_of_a_3x3_grid_try_every_lr_and_every_seed():
    first = trials({"parameters": {"LR": [0.0003, 0.003, 0.03], "SEED": [0, 1, 2]}})[:3]
    assert {p["LR"] for p in first} == {0.0003, 0.003, 0.03} and {p["SEED"] for p in first} == {0, 1, 2}


def test_random_search_draws_as_before():
    doc = {"parameters": {"LR": {"loguniform": [0.0001, 0.1]}, "SEED": [0, 1, 2]},
           "search": {"method": "random", "count": 4, "seed": 7}}
    rng = random.Random(7)
    expected = []
    for _ in range(4):
        lr = float(f"{math.exp(rng.uniform(math.log(0.0001), math.log(0.1))):.6g}")
        expected.append({"LR": lr, "SEED": rng.choice([0, 1, 2])})
    assert trials(doc) == expected
