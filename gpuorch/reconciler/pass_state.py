"""What one pass carries from stage to stage (``Reconciler.run_pass``).

Claim and observe fills it (the jobs claimed, the listing, the offers and back-offs, the reads
under way); keep or decide reads it and tallies the pass's queued launches in it; flush and sweep
reads what was observed and the earliest requeue. One object a pass, used by the pass's thread only.

How many queued jobs a pass decides is a count, not a time (issue 32, item 5): a pass launches
at most ``Settings.launch_batch`` queued jobs (``LAUNCH_BATCH`` when unset) and, once one is
launched, decides at most twice that many (one launch a pass at least, so a queue drains). A
drain then takes the same passes, and the same CPU a job, whatever the host's load (a bound by
wall time made a loaded host's passes short and many, and each pass walks every held job). 500
launches are ~0.5 CPU-s on the 2-core development machine (~1 ms each: the intent and launched
records, the cloud call), so a quiet pass stays within the 2 s target for the longest pass, and
a notice waits for at most one such pass. ``Settings.launch_budget_s``, when set, adds the old
bound by time (tests; a host that wants short passes at any cost).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gpuorch.placement import KeyedAvoid, OfferIndex
from gpuorch.provider.port import Instance, Offer
from gpuorch.reconciler.observe.listing import Key
from gpuorch.reconciler.observe.views import Settings
from gpuorch.store.models import Job

LAUNCH_BATCH = 500  # queued jobs a pass launches at most when Settings.launch_batch is unset (above)


@dataclass(slots=True, eq=False)
class Pass:
    now: datetime
    ids: list[int]  # the claimed jobs' ids, in claim order
    claimed: list[Job]
    observed: dict[Key, Instance]  # this pass's listing
    ok: set[str]  # the providers listed fine
    live: set[Key]  # the attempts not ended, as listing keys
    busy: set[int]  # jobs whose launch (in flight at the start) or status read is still out: left alone
    offers: list[Offer]
    index: OfferIndex  # one per catalog refresh: placements are memoised on it
    settings: Settings  # this pass's (a catalog missing: no-offer retries at the poll interval)
    avoid: KeyedAvoid | None  # the back-offs in force
    seen_at: datetime | None  # when the catalog was last read (spot price moves)
    renew_at: datetime  # when the leases are renewed (in bulk), once less than RENEW_WHEN_LEFT is left
    requeue: float  # the seconds until the next pass is due, lowered by each job
    budget: float | None  # Settings.launch_budget_s: the time queued jobs' decisions and launches may take
    most: int  # Settings.launch_batch or LAUNCH_BATCH: queued jobs launched a pass at most
    launched: int = 0  # queued jobs launched this pass
    launch_s: float = 0.0  # the time their decisions and launches took
    considered: int = 0  # queued jobs decided
    cut: bool = False  # whether the budget left queued jobs for the next pass
    context: tuple[object, ...] = ()  # (index, avoid key, settings): what a placement is made from
    complete: bool = True  # every provider's catalog is known (else "no offer" may be a blip: memo.py)
    backoff_until: datetime | None = None  # when the first back-off in force ends (Backoffs.until)
    unchanged: bool = False  # the claim holds the last pass's very rows, none taken anew (Leases.unchanged)

    def __post_init__(self) -> None:
        self.context = (self.index, self.avoid_key, self.settings)

    @property
    def avoid_key(self) -> object:
        return None if self.avoid is None else self.avoid.key

    def lower(self, requeue: float) -> None:
        if requeue < self.requeue:
            self.requeue = requeue

    def out_of_budget(self, elapsed_s: float) -> bool:
        """Whether a queued job must wait for the next pass: at least one is launched a pass, so a
        queue always drains; then ``most`` launches or twice that many decisions stop it, or, when
        a launch budget is set, that time spent on them or the pass's age (twice it)."""
        return self.launched > 0 and (self.cut or self.launched >= self.most or self.considered >= 2 * self.most or (
            self.budget is not None and (self.launch_s >= self.budget or elapsed_s >= 2 * self.budget)))
