"""Warm instances (spec ``keep_warm``): the pure rules. Which finished attempt leaves its instance
warm, which warm instance a launch takes instead of a new one, and when a warm instance goes.

An attempt whose job exited on a healthy, single-node, volume-less instance that its job asked to
keep warm hands the instance to the pool (``KeepWarm``) instead of terminating it. A queued job
that fits it (same provider, instance type, zone, market and image; one node, no volume) runs on
it without a new launch. An idle warm instance is released when its ``keep_warm`` period is over,
when a preemption notice came (listed by its provider, or heard by its idle watcher on the
instance) or the cloud ended it, when its idle time would cross a cap (the caps'
stop, ``gpuorch.money.caps``: its idle cost is a live reservation of the job that left it warm),
and at once when nothing queued could use it. ``apply/warm.py`` carries these out.

Pure: no I/O, no clock; everything arrives as arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpuorch.jobs.spec import JobSpec
from gpuorch.placement import Candidate, candidates
from gpuorch.placement.cost import PlacementOptions
from gpuorch.provider.port import Instance, InstanceState, Offer
from gpuorch.reconciler.decide.actions import End, KeepWarm, Step, Terminate
from gpuorch.reconciler.observe.views import AttemptView, JobView
from gpuorch.store.states import TerminationReason

IDLE, DIRTY, LEASED, RELEASING, RELEASED = "idle", "dirty", "leased", "releasing", "released"
KEEP, RECYCLE, RELEASE = "keep", "recycle", "release"


@dataclass(frozen=True)
class WarmView:
    """One open idle period (``store.models.WarmInstance``) as the rules see it."""

    id: int
    provider: str
    instance_id: str
    zone: str
    instance_type: str
    spot: bool
    image: str
    offer: Offer
    status: str
    keep_until: datetime
    listed: bool = True  # False: its provider could not be listed this pass; conclude nothing
    instance: Instance | None = None  # this pass's listing of it (None: not listed)
    stop: str | None = None  # why the caps want it gone now (the gate's stop message); None: within them
    noticed: float | None = None  # a notice its idle watcher reported (epoch deadline): spot clouds whose
    # listing does not carry the notice (only the instance hears it: ``gpuorch.agent.idle``)


def keep_warm_s(spec: JobSpec) -> float:
    """The job's ``keep_warm`` in seconds (0: its instances are terminated when it ends)."""
    return float(spec.keep_warm)


def image_of(spec: JobSpec) -> str:
    return spec.image or ""


def poolable(view: JobView, a: AttemptView, end: End) -> bool:
    """Whether the attempt's instance goes to the pool: the job asked for ``keep_warm``, runs on
    one node without a volume (a job's volume is its own), its command exited (the instance is
    healthy; a lost, failed-agent or preempted instance is not), and nothing announced its end."""
    spec, inst, agent = view.spec, a.instance, a.agent
    return (keep_warm_s(spec) > 0 and spec.nodes == 1 and spec.volume is None and not view.job.cancel_requested
            and inst is not None and inst.state == InstanceState.RUNNING and inst.preemption_deadline is None
            and (agent is None or agent.notice_at is None) and end.exit_code is not None
            and end.reason in (TerminationReason.SUCCEEDED, TerminationReason.FAILED))


def with_end(view: JobView, a: AttemptView, step: Step, end: End, now: datetime) -> Step:
    """``step`` followed by the attempt's ``end``: with its instance handed to the pool
    (``KeepWarm`` after the End, no Terminate) when ``poolable``. The End comes first: a crash
    between the two leaves an ended attempt's instance, which the orphan sweep terminates."""
    if not poolable(view, a, end):
        return Step(step.actions + (end,), step.requeue_after)
    inst = a.instance
    assert inst is not None
    kept = tuple(x for x in step.actions if not isinstance(x, Terminate))
    until = now + timedelta(seconds=keep_warm_s(view.spec))
    return Step(kept + (end, KeepWarm(a.row.number, inst.id, until)), step.requeue_after)


def _same(c: Candidate, w: WarmView) -> bool:
    o = c.offer
    return (o.provider, o.zone, o.instance_type, c.spot) == (w.provider, w.zone, w.instance_type, w.spot)


def fits(spec: JobSpec, w: WarmView) -> Candidate | None:
    """The job placed on the warm instance's offer, if the job may run there: one node, no volume,
    the same image, and the job's own placement rules (GPU, memory, providers, regions, market,
    price limit) admit the offer in the warm instance's market."""
    if spec.nodes != 1 or spec.volume is not None or image_of(spec) != w.image:
        return None
    return next((c for c in candidates(spec, [w.offer]) if _same(c, w)), None)


def match(spec: JobSpec, ranked: Sequence[Candidate], pool: Iterable[WarmView]) -> tuple[WarmView, Candidate] | None:
    """The idle warm instance a launch takes instead of a new one, and the candidate it runs as:
    of the idle ones the job fits, the one whose run costs least, if that is no more than the
    launch's first choice (``ranked[0]``, what a new launch would take) costs with its start-up.
    Unless a deadline chose the launch's market (``decide/deadline.py``): then only the launch's
    own candidates, in their order.

    A warm instance skips the boot and set-up a new one pays for (``PlacementOptions``' start-up
    estimate), but not its own price: one left in a dearer zone than the cheapest on offer now
    costs more over a run than that start-up saves (bench/sweep.py --small-cap, seed 3: trials
    kept on a warm instance at $1.12/h cost $0.21 each where a new one at $0.97/h cost $0.18).
    With nothing to launch (no candidate), any that fits beats waiting."""
    idle = [w for w in pool if w.status == IDLE and w.noticed is None
            and (w.instance is None or w.instance.state.alive)]
    if not idle or spec.nodes != 1 or spec.volume is not None:
        return None
    if spec.deadline is not None:
        for c in ranked:
            for w in idle:
                if _same(c, w) and image_of(spec) == w.image:
                    return w, c
        return None
    best: tuple[float, WarmView, Candidate] | None = None
    for w in idle:
        placed = next((c for c in ranked if _same(c, w)), None) if image_of(spec) == w.image else None
        if placed is None and (placed := fits(spec, w)) is None:
            continue
        cost = warm_cost(placed)
        if best is None or cost < best[0]:
            best = (cost, w, placed)
    if best is None or (ranked and best[0] > ranked[0].est_cost):
        return None
    return best[1], best[2]


def warm_cost(c: Candidate) -> float:
    """The expected cost of the job's run on a warm instance of ``c``'s offer: ``c``'s, less the
    first start-up (boot and set-up) that a running instance does not pay."""
    opts = PlacementOptions()
    ready_h = (opts.boot(c.offer.provider) + opts.setup_s) / 3600
    return max(0.0, c.est_cost - c.total_price_per_hour * ready_h)


NOT_FITTED = "no queued job fits it"


def demand(w: WarmView, waiting: Iterable[tuple[JobSpec, Callable[[Candidate], str | None]]]) -> str | None:
    """Why no waiting job wants ``w`` now (None: one does): ``waiting`` is each queued (or held)
    job's spec and why its caps refuse it a run on a candidate (None: they fund it). A job that
    fits the instance but that its caps refuse (a trial waiting for money, a full sweep, a spent
    daily cap) cannot take it, so it keeps it idle no more than a job that does not fit."""
    refused = None
    for spec, refuses in waiting:
        if (c := fits(spec, w)) is None:
            continue
        why = refuses(c)
        if why is None:
            return None
        refused = refused or why
    if refused is None:
        return NOT_FITTED
    return f"no queued job that fits it can run there now ({refused})"


def release_reason(w: WarmView, now: datetime, unwanted: str | None) -> str | None:
    """Why an open warm instance goes now (None: it stays). ``unwanted``: why no waiting job
    wants it (``demand``; None: one does)."""
    if not w.listed:
        return None  # its provider was not listed: conclude nothing
    inst = w.instance
    if inst is None or not inst.state.alive:
        return "its instance ended" + (f" ({inst.state.value})" if inst is not None else " (not listed)")
    if inst.preemption_deadline is not None or w.noticed is not None:
        return "a preemption notice came while it was idle"
    if now >= w.keep_until:
        return "its keep_warm period is over"
    if w.stop is not None:
        return w.stop
    return unwanted


def step_for(w: WarmView, now: datetime, unwanted: str | None) -> tuple[str, str | None]:
    """What to do with an open warm instance: (KEEP | RECYCLE | RELEASE, why). A row being
    released is released again (its terminate may not have happened); a dirty one (its last
    attempt's run directory still in place) is recycled before any job may lease it."""
    if w.status == RELEASING:
        return RELEASE, "released"
    why = release_reason(w, now, unwanted)
    if why is not None:
        return RELEASE, why
    if w.status == DIRTY:
        return RECYCLE, None
    return KEEP, None
