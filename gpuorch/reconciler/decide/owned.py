"""How ``decide`` puts owned capacity first (gpuorch.placement.owned). Pure.

A sub-step of ``_launch``, after the caps' gate and before the deadline policy: a job that owned
capacity (``Settings.owned``) can hold launches there when a slot is free and it finishes by the
deadline; waits for a slot while its ``max_wait`` and deadline allow; else bursts to the cloud
candidates, which then go through the deadline policy as usual. A full owned offer is one whose
class the daemon backed off after a launch found its slots taken; the ledger lifts those
back-offs when a slot is released (``gpuorch.store.slots``), so a waiting job is launched at the
first pass after a job on the pool ends, not after the back-off's length.

A launch on a cluster with a Kueue ``local_queue`` never finds it full: the pod is created and
waits for admission (``Instance.queued``), a live attempt. ``admission_bound`` bounds that wait by
the same ``max_wait``: once the job has waited longer (``waited_s``), ``attempt_steps.live`` ends
the attempt as no capacity (its pod deleted; apply backs the cluster's class off, as for a launch
that found it full) and ``full_now`` makes this pass's launch see that class full, so the job
bursts in the same pass. Without ``max_wait`` an admission wait is not bounded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from gpuorch.placement import Candidate, OfferIndex, candidates
from gpuorch.placement.cost import with_job
from gpuorch.placement.owned import WAITS, OwnedChoice, choose, minutes
from gpuorch.provider.port import Offer
from gpuorch.reconciler.decide.actions import GO_ON, Action, End, Note, SetJob, Step, done
from gpuorch.reconciler.decide.deadline import NEVER_RAN
from gpuorch.store.states import JobStatus, TerminationReason

if TYPE_CHECKING:
    from gpuorch.reconciler.observe.views import AttemptView, JobView, Settings

ADMISSION = "waits for admission"  # how a job's message starts while its attempt waits in a queue

Avoid = Callable[[Candidate], bool] | None


def waited_s(view: JobView, now: datetime) -> float:
    """How long the job has waited for a launch: since it was submitted, or since its last
    attempt that ran ended (launches that found no capacity do not restart the wait)."""
    since = view.job.created_at
    for a in view.attempts:
        r = a.row
        if r.reason not in NEVER_RAN and r.ended_at is not None and r.ended_at > since:
            since = r.ended_at
    return max(0.0, (now - since).total_seconds())


class AdmissionBound(NamedTuple):
    """How long the job's attempt may still wait for admission in its provider's queue."""

    left_s: float  # max_wait less waited_s: at 0 or below, the wait is over
    why: str  # the attempt's End message once it is over
    said: bool  # the job's message says its attempt waits for admission (it did when last seen)


def admission_bound(view: JobView, current: AttemptView, now: datetime, s: Settings,
                    offers: Sequence[Offer] | OfferIndex, avoid: Avoid) -> AdmissionBound | None:
    """The bound ``max_wait`` sets on ``current``'s wait for admission (``Instance.queued``: a
    Kueue LocalQueue) on owned capacity; None without ``max_wait`` (the wait is not bounded),
    when the attempt neither waits for admission nor did when the job was last looked at, or,
    once the wait is over, when no cloud candidate is left to burst to (the pod keeps its place in
    the queue: ending it would only launch another one at the back)."""
    max_wait = view.spec.max_wait
    if max_wait is None or current.row.provider not in s.owned or current.agent is not None:
        return None
    queued = current.instance.queued if current.instance is not None else None
    said = (view.job.message or "").startswith(ADMISSION)
    if queued is None and not said:  # not waiting for admission (cheap: every live attempt asks, every pass)
        return None
    waited = waited_s(view, now)
    if waited >= max_wait and not any(c.offer.provider not in s.owned for c in _all(view, offers, s, avoid)):
        return None
    why = (f"waited {minutes(waited)} for admission" + (f" ({queued})" if queued else "")
           + f"; max_wait is {minutes(max_wait)}: the job bursts")
    return AdmissionBound(max_wait - waited, why, said)


def full_now(avoid: Avoid, current: AttemptView, ended: Sequence[Action]) -> Avoid:
    """``avoid``, and ``current``'s offer class when ``ended`` ends it for no capacity (an admission
    wait past ``max_wait``): apply backs that class off with the End, and this pass's launch
    already sees it full (``owned_first`` bursts), not the next pass's."""
    r = current.row
    if not any(isinstance(x, End) and x.attempt == r.number and x.reason == TerminationReason.NO_CAPACITY
               for x in ended):
        return avoid
    cls = (r.provider, r.region, r.instance_type, r.spot)

    def also(c: Candidate) -> bool:
        o = c.offer
        return (o.provider, o.region, o.instance_type, c.spot) == cls or (avoid is not None and avoid(c))

    return also


def _all(view: JobView, offers: Sequence[Offer] | OfferIndex, s: Settings, avoid: Avoid,
         providers: Sequence[str] | None = None) -> list[Candidate]:
    """Every candidate that holds the job (of ``providers`` only, when given), best first, that the
    job's caps allow."""
    spec, gate = view.spec, view.gate
    options = with_job(spec, None, s.max_nodes, s.storage_rates)  # a gang's nodes, a volume's storage
    if providers is not None:
        spec = spec.model_copy(update={"providers": list(providers)})
    found = candidates(spec, offers, avoid=avoid, volume_zone=view.job.volume_zone, options=options)
    return [c for c in found if gate is None or gate.affords(c)]


def _note(choice: OwnedChoice) -> Note:
    def where(c: Candidate | None) -> str | None:
        return None if c is None else f"{c.offer.provider}/{c.offer.region}/{c.offer.zone}/{c.offer.instance_type}"

    return Note("placement", f"owned capacity first: {choice.kind}: {choice.why}", data={
        "choice": choice.kind, "owned": where(choice.owned), "burst": where(choice.burst),
        "burst_price_per_hour": choice.burst.total_price_per_hour if choice.burst is not None else None})


def owned_first(view: JobView, ranked: list[Candidate], now: datetime, offers: Sequence[Offer] | OfferIndex,
                avoid: Avoid, s: Settings) -> tuple[list[Candidate], Step, bool]:
    """(candidates, step, chosen): the owned candidates to launch on with ``chosen`` True (the
    deadline policy is not asked: they meet the deadline); or the cloud candidates, with a note of
    the burst; or a done step that holds the job queued while it waits for owned capacity.
    Jobs without an owned option get ``ranked`` and GO_ON back unchanged."""
    spec = view.spec
    owned = [p for p in s.owned if not spec.providers or p in spec.providers]
    if not owned:
        return ranked, GO_ON, False
    every = _all(view, offers, s, None, owned)  # back-offs ignored: a backed-off owned class is full
    full = [c for c in every if avoid is not None and avoid(c)]
    # the free ones in the order of ``ranked`` (the recovery strategy's: a zone that just
    # preempted the job comes last), then any that the ranked head left out
    free = [c for c in ranked if c.offer.provider in owned and c not in full]
    free += [c for c in every if c not in full and c not in free]
    clouds = [c for c in ranked if c.offer.provider not in s.owned]
    if not clouds and ranked:  # the ranked head was owned capacity only: rank the clouds in full
        clouds = [c for c in _all(view, offers, s, avoid) if c.offer.provider not in s.owned]
    deadline = spec.deadline
    left = (deadline.resolve(view.job.created_at) - now).total_seconds() if deadline is not None else None
    choice = choose(free, full, clouds, max_wait_s=spec.max_wait, waited_s=waited_s(view, now), time_left_s=left,
                    job_hours=deadline.job_hours if deadline is not None else None)
    if choice is None:
        return ranked, GO_ON, False
    if choice.kind == "owned":
        return list(choice.free), Step((_note(choice),)), True
    if choice.kind == "burst":  # a note with the launch it makes (none to make: the usual no-offer hold)
        return clouds, Step((_note(choice),)) if clouds else GO_ON, False
    message = choice.why
    notes = () if (view.job.message or "").startswith(WAITS) else (_note(choice),)
    requeue = min(choice.wait_s, s.poll_s)
    return [], done(*notes, SetJob(JobStatus.QUEUED, message), requeue_after=requeue), False
