"""Which trials of the active capped sweeps wait for money, read from the store and the money
ledger (the reconciler's ``Money`` loads it once per ledger): finish first for a sweep naming its
trials' last step (``finish.finish_first``), and for one naming neither a last step nor a pruning
rule, fresh trials that a whole trial's cost does not fit (``plain.fund_fresh``) or that wait
their turn (``plain.in_turn``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from sqlmodel import Session, col, select

from gpuorch.clock import aware
from gpuorch.jobs.spec import JobSpec, SpotPolicy
from gpuorch.money.caps import IN_FLIGHT, Ledger, Policy
from gpuorch.money.cost import cost_until, current_price
from gpuorch.money.finishing import end_of
from gpuorch.placement import Candidate, candidates
from gpuorch.provider.port import Offer
from gpuorch.store.models import Attempt, Job, JobStatus, Sweep, WarmInstance
from gpuorch.sweeps.finish import Unfinished, Warm, finish_first, first_rung, progressed
from gpuorch.sweeps.plain import fund_fresh, in_turn
from gpuorch.sweeps.pruning import Point, parse_history

TERMINAL = [s for s in JobStatus if s.terminal]
Avoid = Callable[[Candidate], bool] | None  # the back-offs in force (reconciler.observe.listing.Backoffs)


def _trials(s: Session, sweep_id: int, ledger: Ledger, offers: Sequence[Offer] = (),
            spec: JobSpec | None = None, avoid: Avoid = None) -> tuple[list[Unfinished], list[Unfinished], list[int]]:
    """The sweep's unfinished trials, its finished ones, and its queued trials with progress,
    with the spend and the time when their steps were read (finish first's estimate), from their
    attempts and histories, and the price each pays now or would on its next start
    (the first of ``offers`` placement would take for ``spec``, a trial's; none: not known)."""
    rows = s.exec(select(Job.id, Job.status, Job.metrics, Job.objective_history).where(
        Job.sweep_id == sweep_id, col(Job.status).not_in([t for t in TERMINAL if t != JobStatus.SUCCEEDED]))).all()
    attempts: dict[int, list[Attempt]] = {}
    for a in s.exec(select(Attempt).where(col(Attempt.job_id).in_([r[0] for r in rows]))):
        attempts.setdefault(a.job_id, []).append(a)
    trials: list[Unfinished] = []
    finished: list[Unfinished] = []
    resuming = []
    fresh = _next_price(spec, offers, avoid) if spec is not None else None  # a trial's: the sweep's template
    for jid, status, metrics, history in rows:
        step = json.loads(metrics).get("step") if metrics else None
        step = float(step) if isinstance(step, int | float) and not isinstance(step, bool) else None
        spent = ledger.jobs[jid].spent if jid in ledger.jobs else 0.0
        points, mine = parse_history(history), attempts.get(jid or 0, [])
        span, lag = _span(points, step, mine, ledger.now)
        work, work_s = _work(points, mine, ledger.now)
        live = [a for a in mine if a.ended_at is None and a.launched_at is not None]
        price = current_price(live[-1]) if status in IN_FLIGHT and live else fresh
        t = Unfinished(jid or 0, status in IN_FLIGHT, status == JobStatus.HELD, step, spent, span=span, lag=lag,
                       work=work, work_s=work_s, first_s=_billed_s(points, mine, ledger.now), price=price)
        (finished if status == JobStatus.SUCCEEDED else trials).append(t)
        if status == JobStatus.QUEUED and progressed(t):
            resuming.append(t.job_id)
    return trials, finished, resuming


def _span(points: tuple[Point, ...], step: float | None, attempts: list[Attempt],
          now: datetime) -> tuple[tuple[float, float, float, float] | None, float]:
    """A trial's span (``finish.Unfinished``): its first and furthest steps with the spend of its
    attempts when each was read; and the spend since its latest step (``step``) was read, 0.0
    unless that step is in the history (a resumed trial re-reports steps whose first read counts)."""
    if not points:
        return None, 0.0

    def at(epoch: float) -> float:
        t = datetime.fromtimestamp(epoch, UTC)
        return sum(cost_until(a, t, now) for a in attempts)

    first, last = min(points, key=lambda p: p[0]), max(points, key=lambda p: p[0])
    span = (float(first[0]), at(first[2]), float(last[0]), at(last[2]))
    lag = 0.0
    if step is not None and step == last[0]:
        lag = max(0.0, sum(cost_until(a, now, now) for a in attempts) - span[3])
    return span, lag


def trial_end(s: Session, job: Job, attempt: Attempt, max_step: int | None, upload_s: float | None,
              policy: Policy) -> datetime | None:
    """When a trial's running ``attempt`` should exit (``money.finishing.end_of``), where its last
    step is known: its sweep's ``max_step``, else the highest step a finished trial of the sweep
    reported (a plain sweep's trials run one command); None before one finished. Its exit waits
    for its last checkpoint sync: ``upload_s``, its longest seen (none seen: the stop grace's bound).
    Not the factor a stop's drain allows it (``Policy.for_attempt``): an estimate that proves short
    costs a shorter drain (``money.finishing``), never money."""
    if max_step is None:
        done = s.exec(select(Job.metrics).where(Job.sweep_id == job.sweep_id, Job.status == JobStatus.SUCCEEDED))
        steps = [st for m in done if m and isinstance(st := json.loads(m).get("step"), int | float)
                 and not isinstance(st, bool)]
        if not steps:
            return None
        max_step = int(max(steps))
    exit_s = upload_s if upload_s is not None else policy.stop_grace_s
    return end_of(parse_history(job.objective_history), max_step, attempt.launched_at, exit_s)


def _template(s: Session, sweep_id: int) -> JobSpec | None:
    """A trial's spec: the sweep's template (``_parsed``)."""
    return _parsed(s.exec(select(Job.spec).where(Job.sweep_id == sweep_id).limit(1)).first())


def _parsed(raw: str | None) -> JobSpec | None:
    """A stored spec, parsed; None: none, or a spec this version cannot read (the job itself is the
    reconciler's to quarantine; the sweep's spend per step prices its trials)."""
    try:
        return JobSpec.model_validate_json(raw) if raw else None
    except ValueError:
        return None


def _next_price(spec: JobSpec, offers: Sequence[Offer], avoid: Avoid = None) -> float | None:
    """USD/h a trial of this spec would pay on its next start: the price of the market placement
    ranks first among ``offers``, past the back-offs in force (``avoid``: a market that just had no
    capacity is not where it starts; bench/sweep.py seed 1 priced a start at $0.918/h and ran at
    $0.9731/h). None: no offer or none fits (the sweep's spend per step then)."""
    found = candidates(spec, offers, avoid, limit=1) if offers else []
    return found[0].total_price_per_hour if found else None


def _warm(s: Session, sweep_id: int, spec: JobSpec | None) -> Warm:
    """The sweep's warm capacity (``finish.Warm``): its open warm instances, idle (their prices)
    or being made ready, and whether its trials leave theirs warm (``keep_warm``, one node, no
    volume: ``reconciler/decide/warm.poolable``)."""
    rows = s.exec(select(WarmInstance.status, WarmInstance.price_per_hour).where(
        WarmInstance.sweep_id == sweep_id, col(WarmInstance.ended_at).is_(None))).all()
    # "idle", "dirty": reconciler/decide/warm's IDLE and DIRTY
    keeps = spec is not None and spec.keep_warm > 0 and spec.nodes == 1 and spec.volume is None
    return Warm(tuple(sorted(p for st, p in rows if st == "idle")), tuple(sorted(p for st, p in rows if st == "dirty")),
                keeps)


def _billed_s(points: tuple[Point, ...], attempts: list[Attempt], now: datetime) -> float | None:
    """The seconds its attempts had run when its first step was read (None: nothing read)."""
    if not points:
        return None
    at = datetime.fromtimestamp(min(points, key=lambda p: p[0])[2], UTC)
    return sum(max(0.0, (min(at, aware(a.ended_at) or now) - start).total_seconds())
               for a in attempts if (start := aware(a.launched_at)) is not None)


def _work(points: tuple[Point, ...], attempts: list[Attempt],
          now: datetime) -> tuple[tuple[float, float] | None, float | None]:
    """The steps and the spend between the first and the last step read during one attempt, for
    the attempt with the most such steps (``finish.Unfinished.work``), and the seconds between
    those reads; (None, None) if none has two."""
    best: tuple[float, float] | None = None
    secs: float | None = None
    for a in attempts:
        if a.launched_at is None:
            continue
        end = (a.ended_at or now).timestamp()
        mine = [p for p in points if a.launched_at.timestamp() <= p[2] <= end]
        if len(mine) < 2:
            continue
        first, last = min(mine, key=lambda p: p[0]), max(mine, key=lambda p: p[0])
        steps = float(last[0] - first[0])
        usd = cost_until(a, datetime.fromtimestamp(last[2], UTC), now) - cost_until(
            a, datetime.fromtimestamp(first[2], UTC), now)
        if steps > 0 and (best is None or steps > best[0]):
            best, secs = (steps, usd), last[2] - first[2]
    return best, secs


def waits(s: Session, active: list[Sweep], ledger: Ledger, max_steps: Mapping[int, int],
          min_steps: Mapping[int, int], offers: Sequence[Offer] = (),
          policy: Policy | None = None, graces: Mapping[int, float] | None = None,
          avoid: Avoid = None) -> tuple[dict[int, str], dict[int, set[int]]]:
    """Job id -> why it waits for trials ahead of it; and per sweep naming ``max_step``
    (``max_steps``), its queued trials with progress (they resume, like held ones). A trial that
    waits keeps no warm instance idle (``reconciler/decide/warm.demand``: its gate holds it).
    ``min_steps``: the pruning rule's ``min_steps`` of each sweep naming one; ``offers``: the
    catalog, whose prices a finish's estimate reads (none: the sweep's own spend per step);
    ``policy``: the caps', whose horizon a trial must have left at its end (with the longest stop
    grace the sweep's checkpoint uploads called for, ``graces`` by sweep id, else the bound; None:
    not counted); ``avoid``: the back-offs in force, which a start's price is read past."""
    out: dict[int, str] = {}
    resuming: dict[int, set[int]] = {}
    for w in active:
        sid, max_step = w.id or 0, max_steps.get(w.id or 0)
        plain = max_step is None and sid not in min_steps
        if w.max_cost is None or (max_step is None and not plain):
            continue
        spec = _template(s, sid)
        trials, finished, queued = _trials(s, sid, ledger, offers=offers, spec=spec, avoid=avoid)
        spent = ledger.sweeps[sid].spent if sid in ledger.sweeps else 0.0
        time_left = None if (end := aware(w.deadline)) is None else (end - ledger.now).total_seconds()
        if plain:  # a fresh trial starts only if a whole trial's cost fits, and in turn where the money limits
            costs, scope = [t.cost for t in finished], f"sweep {w.name} budget"
            mine = fund_fresh(w.max_cost, spent, trials, costs, scope)
            turns = in_turn(w.max_cost, spent, trials, costs, _warm(s, sid, spec), time_left, scope)
            mine |= {j: why for j, why in turns.items() if j not in mine}
        else:
            if queued:
                resuming[sid] = set(queued)
            rung = None
            if sid in min_steps:  # with pruning, a trial not judged yet needs the money to the first rung only
                firsts = [pts[0][0] for h in s.exec(select(Job.objective_history).where(Job.sweep_id == sid)).all()
                          if (pts := parse_history(h))]
                rung = first_rung(min_steps[sid], firsts)
            pruned = [ledger.jobs[j].spent for j in s.exec(select(Job.id).where(
                Job.sweep_id == sid, Job.status == JobStatus.PRUNED)).all() if j in ledger.jobs] if rung else []
            horizon = 0.0 if policy is None else (
                2 * policy.decision_interval_s + (graces or {}).get(sid, policy.stop_grace_s))
            mine = finish_first(w.max_cost, spent, max_step or 0, trials, finished, pruning=sid in min_steps,
                                rung=rung, pruned=pruned, warm=_warm(s, sid, spec), horizon_s=horizon,
                                spot=spec is None or spec.spot_policy != SpotPolicy.ON_DEMAND, time_left_s=time_left)
        out.update(mine)
    return out, resuming
