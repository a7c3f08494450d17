"""A gang's money under the assembled default daemon (issue 31, "a gang is billed as one node").

A gang of N instances bills N times the node price for the attempt's whole life, spot price
moves included: the daemon once replaced a 2-node gang's price by one node's spot price at its
first pass (dated at the catalog read, before the job existed), so a 125 s attempt cost $0.0153
instead of $0.0206 and every cap counted half the gang. The expected bills here are computed by
the test from the instances' own records (each node's ``meta.json``) and the market's price
history as the test moved it, one second at a time, not with gpuorch's cost functions.

The local market's spot prices stand still on their own; the test moves them as a spot market
does, through the adapter's offer list (the list ``LocalProvider(offers=...)`` takes), and has the
daemon read its catalog again (``invalidate_offers``: the next pass refreshes it, as after a TTL).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.clock import aware
from gpuorch.money.caps import runway_s
from gpuorch.provider import Offer
from gpuorch.provider.localdir import InstanceDir, Meta
from gpuorch.provider.port import TAG_ATTEMPT, TAG_JOB
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.sweeps import intent
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events

pytestmark = pytest.mark.timeout(420)

GANG = {"nodes": 2, "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot"}


def waits_for(stop: Path) -> str:
    """A run command that ends once the test creates ``stop`` (every node runs it)."""
    return f"while [ ! -e {shlex.quote(str(stop))} ]; do sleep 0.2; done"


def set_market(d: AssembledDaemon, change: Callable[[Offer], Offer]) -> None:
    """Move the local market (every offer through ``change``); the next pass reads it."""
    local = d.adapter("local")
    local._offers = [change(o) for o in local.offers()]
    d.rec.invalidate_offers()


def nodes_of(d: AssembledDaemon, job: int, attempt: int) -> list[Meta]:
    """Every instance the local provider made for the attempt (a gang: one per node)."""
    out = []
    for path in sorted(d.adapter("local").instances_dir.iterdir()):
        if (path / "meta.json").exists():
            meta = InstanceDir(path).read()
            if meta.tags.get(TAG_JOB) == str(job) and meta.tags.get(TAG_ATTEMPT) == str(attempt):
                out.append(meta)
    return out


def billed(start: datetime, end: datetime, minimum_s: int, history: list[tuple[datetime, float]]) -> float:
    """USD a per-second market bills one instance from ``start`` to ``end``: each second at the
    price in force when it begins, the first ``minimum_s`` seconds at launch at the launch price.
    ``history``: (from when, USD/h), oldest first, its first entry the launch price."""
    total = 0.0
    for k in range(max(minimum_s, math.ceil((end - start).total_seconds()))):
        t = start + timedelta(seconds=k)
        price = history[0][1] if k < minimum_s else [p for at, p in history if at <= t or at == history[0][0]][-1]
        total += price / 3600
    return total


def gang_bill(metas: list[Meta], minimum_s: int, launch_price: float,
              moves: list[tuple[datetime, datetime, float]]) -> tuple[float, float]:
    """The least and most the nodes' lives cost, a market move known to lie in [lo, hi] each."""
    bills = []
    for corner in range(2 ** len(moves)):  # the bill is monotone in each move's time: its corners bound it
        when = [(hi if corner >> i & 1 else lo, p) for i, (lo, hi, p) in enumerate(moves)]
        bills.append(sum(billed(m.created_at, m.ended_at, minimum_s, [(m.created_at, launch_price), *when])
                         for m in metas if m.ended_at is not None))
    return min(bills), max(bills)


def cost_cli(home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("GPUORCH_HOME", str(home))
    r = CliRunner().invoke(app, ["cost", "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_a_spot_gang_is_billed_for_every_node_for_its_whole_life(tmp_path, monkeypatch):
    """Two spot moves while a 2-node gang runs: the attempt, the ledger's sum and ``gpuorch cost``
    bill both nodes from launch to end at the prices in force. The market's billing minimum is
    shortened to 5 s so that the moves land after it within a short run."""
    minimum = 5
    with AssembledDaemon.start(tmp_path / "home") as d:
        set_market(d, lambda o: o.model_copy(update={"min_billing_s": minimum}))
        stop = tmp_path / "stop"
        job = d.submit({"name": "gang-bill", "run": waits_for(stop), **GANG})
        submitted = d.job(job).created_at
        a = d.until(lambda: next((x for x in d.attempts(job) if x.started_at is not None), None),
                    what="the gang to start")
        market = (a.zone, a.instance_type)
        [node_price] = [o.spot_price_per_hour for o in d.adapter("local").offers()
                        if (o.zone, o.instance_type) == market]
        assert a.price_per_hour == pytest.approx(2 * node_price)  # the launch price counts both nodes

        moves: list[tuple[datetime, datetime, float]] = []
        for factor in (1.25, 0.8):
            price = round(node_price * factor, 4)  # the market's next price for one node
            lo = d.rec.clock.now()
            set_market(d, lambda o, p=price: o.model_copy(update={"spot_price_per_hour": p})
                       if (o.zone, o.instance_type) == market else o)
            recorded = len(moves) + 1
            d.until(lambda n=recorded: len(json.loads(d.attempts(job)[0].price_changes or "[]")) == n,
                    what="the daemon to record the spot move")
            moves.append((lo, d.rec.clock.now(), price))
            node_price = price
        launched = d.attempts(job)[0].launched_at
        d.until(lambda: d.rec.clock.now() - aware(launched) > timedelta(seconds=minimum + 10),
                what="the gang to run well past its minimum bill")
        stop.touch()
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        metas = d.until(lambda: (ms := nodes_of(d, job, 1)) and all(m.ended_at for m in ms) and ms,
                        what="every node to end")
        assert len(metas) == 2

        (a,) = d.attempts(job)
        changes = json.loads(a.price_changes)
        assert [p for _, p in changes] == pytest.approx([2 * p for _, _, p in moves])  # both nodes, every move
        began = aware(a.launched_at)
        for (at, _), (lo, hi, _) in zip(changes, moves, strict=True):
            assert began.timestamp() <= at and lo.timestamp() - 1e-3 <= at <= hi.timestamp() + 1e-3
        spots = events(d.store, "spot_price", job)
        assert len(spots) == 2 and all(aware(e.ts) >= began >= aware(submitted) for e in spots), spots

        least, most = gang_bill(metas, minimum, a.price_per_hour / 2, moves)
        tolerance = 2 * max(p for *_, p in moves) / 3600  # a second's rounding on each node
        from gpuorch.money.cost import attempt_cost

        for what, usd in (("the attempt", attempt_cost(a, d.rec.clock.now())),
                          ("gpuorch cost", cost_cli(tmp_path / "home", monkeypatch)["total"])):
            assert least - tolerance <= usd <= most + tolerance, (what, usd, least, most)
        one_node = gang_bill(metas[:1], minimum, a.price_per_hour / 2, moves)[1]
        assert least - tolerance > one_node + tolerance  # far from one node's bill


def test_a_running_gang_is_stopped_before_its_budget_counts_two_nodes(tmp_path):
    """A job budget that a 2-node gang's admission fits (its runway and horizon) but its life
    does not: the running check stops the gang before both nodes together cross the cap. Billed
    as one node after its first pass, the gang ran to twice the cap before the fix."""
    with AssembledDaemon.start(tmp_path / "home", {"budget_stop_grace_s": 1}) as d:
        policy = d.rec.money.policy
        cheapest = min(o.spot_price_per_hour for o in d.adapter("local").offers()
                       if o.instance_type == "local.a100-80gb.1" and o.spot_price_per_hour is not None)
        offer = next(o for o in d.adapter("local").offers() if o.spot_price_per_hour == cheapest)
        reach = runway_s(offer.min_billing_s, None, policy) + policy.horizon_s  # what admission reserves
        budget = round(2 * cheapest * reach / 3600 * 1.1, 4)  # admits 2 nodes; their life crosses it
        job = d.submit({"name": "gang-cap", "run": waits_for(tmp_path / "never"), **GANG,
                        "budget": {"max_cost": budget}})
        done = d.until_terminal(job, timeout_s=360)
        assert done.status == JobStatus.BUDGET_EXHAUSTED, done.message
        (a,) = d.attempts(job)
        assert a.reason == TerminationReason.BUDGET_EXHAUSTED
        metas = d.until(lambda: (ms := nodes_of(d, job, 1)) and all(m.ended_at for m in ms) and ms,
                        what="every node to end")
        assert len(metas) == 2
        spent = sum(billed(m.created_at, m.ended_at, a.min_billing_s, [(m.created_at, a.price_per_hour / 2)])
                    for m in metas)
        assert spent <= budget, (spent, budget)
        # it ran past its runway, so the cap (not the admission) is what stopped it
        assert spent > 2 * cheapest * runway_s(offer.min_billing_s, None, policy) / 3600


def write_sweep(path: Path, max_cost: float, nodes: int) -> Path:
    path.write_text(yaml.safe_dump({
        "name": f"gangs-{nodes}", "job": {"run": "sleep 600", **GANG, "nodes": nodes},
        "parameters": {"SEED": [1, 2]}, "max_parallel": 1, "budget": {"max_cost": max_cost}}))
    return path


def one_node_reserve(home: Path) -> float:
    """USD a 1-node launch of ``GANG``'s GPU on its cheapest spot market reserves under the
    default daemon: its price over the runway and the horizon (docs/money.md, admission)."""
    with AssembledDaemon.start(home) as d:
        policy = d.rec.money.policy
        cheapest = min((o for o in d.adapter("local").offers()
                        if o.instance_type == "local.a100-80gb.1" and o.spot_price_per_hour is not None),
                       key=lambda o: o.spot_price_per_hour or 0.0)
        reach = runway_s(cheapest.min_billing_s, None, policy) + policy.horizon_s
        return (cheapest.spot_price_per_hour or 0.0) * reach / 3600


@pytest.mark.parametrize("scope", ["job", "sweep", "daily"])
def test_a_cap_that_fits_one_node_but_not_two_refuses_the_gang(tmp_path, scope):
    """Admission counts every node: with a cap 1.5 times what one node's launch reserves, a
    1-node job launches and a 2-node gang is refused for good (job, sweep) or until tomorrow
    (daily), with no instance made. Before, the pass's gate counted one node and the launch's
    own check refused it every pass: the gang stayed queued, retrying."""
    cap = round(1.5 * one_node_reserve(tmp_path / "probe"), 4)
    with AssembledDaemon.start(tmp_path / "home", {"daily_budget": cap} if scope == "daily" else "") as d:
        def submit(nodes: int) -> list[int]:
            if scope == "sweep":
                sweep = d.submit_sweep(write_sweep(tmp_path / f"sweep-{nodes}.yaml", cap, nodes))
                with d.store.read() as s:
                    return [t.id for t in intent.trials_of(s, sweep["id"]) if t.id is not None]
            spec = {"name": f"n{nodes}", "run": "sleep 600", **GANG, "nodes": nodes}
            return [d.submit({**spec, "budget": {"max_cost": cap}} if scope == "job" else spec)]

        gang = submit(2)
        refused = JobStatus.QUEUED if scope == "daily" else JobStatus.BUDGET_EXHAUSTED
        d.until(lambda: all(d.status(j) == refused and "budget" in (d.job(j).message or "") for j in gang),
                what="the gang to be refused")
        assert not any(d.attempts(j) or nodes_of(d, j, 1) for j in gang)
        if scope == "daily":
            d.until(lambda: d.job(gang[0]).not_before is not None, what="the gang to wait for tomorrow")
        single = submit(1)
        d.until(lambda: any(a.launched_at for a in d.attempts(single[0])), what="one node to launch")
