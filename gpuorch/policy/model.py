"""The vocabulary shared by the simulator, the policies and the optimum.

Time is discrete, as in the Can't Be Late simulator (Wu et al., NSDI 2024): a decision is
taken at the start of every tick of ``gap_s`` seconds and holds for the whole tick. Every
duration is kept in whole seconds (the changeover is rounded to the nearest second) so that
the simulator, the policies and the dynamic programme compare integers and never disagree
on a rounding.

Semantics of one tick:

- The placement chosen for the tick is paid for the whole tick (spot or on-demand price),
  whether or not it makes progress; idle is free.
- Choosing a placement different from the one still running (another kind, another zone, or
  anything after idling or a preemption) starts a changeover of ``changeover_s``: the
  instance is paid but makes no progress until the changeover is used up. A new changeover
  replaces what was left of the previous one.
- A spot placement is preempted at the first tick whose trace value is 0; the tick before
  still counts in full (progress is checkpointed). A policy may only choose spot in a zone
  whose trace is 1 at the current tick.
- On-demand is always available and costs the same in every zone.
- The job is done once ``work_s`` seconds of progress are made; it meets its deadline when
  that happens within ``deadline_ticks = floor(deadline_s / gap_s)`` ticks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

Kind = Literal["spot", "on-demand"]
SPOT: Kind = "spot"
ON_DEMAND: Kind = "on-demand"


class Placement(NamedTuple):
    """Where the job runs for a tick. On-demand placements conventionally use zone 0."""

    kind: Kind
    zone: int = 0


Action = Placement | None
"""What a policy returns for the coming tick; ``None`` means stay idle (and pay nothing)."""

OD = Placement(ON_DEMAND, 0)


@dataclass(frozen=True, slots=True)
class Job:
    """A deadline job and its prices, every duration in whole seconds."""

    work_s: int
    deadline_s: int
    changeover_s: int
    gap_s: int
    on_demand_price: float
    spot_price: float

    @classmethod
    def from_hours(
        cls,
        *,
        work_h: float,
        deadline_h: float,
        changeover_h: float,
        gap_s: int,
        on_demand_price: float,
        spot_price: float,
    ) -> Job:
        if gap_s <= 0 or int(gap_s) != gap_s:
            raise ValueError("gap_seconds must be a positive whole number of seconds")
        if work_h <= 0 or deadline_h <= 0 or changeover_h < 0:
            raise ValueError("job and deadline hours must be positive, changeover not negative")
        return cls(
            work_s=math.ceil(round(work_h * 3600, 6)),
            deadline_s=math.floor(round(deadline_h * 3600, 6)),
            changeover_s=round(changeover_h * 3600),
            gap_s=int(gap_s),
            on_demand_price=float(on_demand_price),
            spot_price=float(spot_price),
        )

    @property
    def deadline_ticks(self) -> int:
        return self.deadline_s // self.gap_s

    def tick_cost(self, kind: Kind) -> float:
        """Dollars for one tick of ``kind``."""
        price = self.spot_price if kind == SPOT else self.on_demand_price
        return price * self.gap_s / 3600

    def feasible(self) -> bool:
        """Whether on-demand from the first tick meets the deadline."""
        return self.ticks_to_cover(self.work_s + self.changeover_s) <= self.deadline_ticks

    def ticks_to_cover(self, seconds: int) -> int:
        """Whole ticks needed to run ``seconds`` (the simulator's ceil to the gap)."""
        return -(-seconds // self.gap_s)


@dataclass(frozen=True, slots=True)
class State:
    """What the job knows about itself at the start of a tick.

    ``placement`` is the instance still alive from the previous tick (``None`` when idle or
    just preempted); ``changeover_left_s`` is what remains of its changeover.
    """

    tick: int
    done_s: int
    placement: Action
    changeover_left_s: int

    def remaining_work_s(self, job: Job) -> int:
        return job.work_s - self.done_s

    def remaining_time_s(self, job: Job) -> int:
        """Time left to the deadline, in whole ticks (as the reference simulator counts it)."""
        return (job.deadline_ticks - self.tick) * job.gap_s

    def elapsed_s(self, job: Job) -> int:
        return self.tick * job.gap_s

    def slack_ticks(self, job: Job, changeovers: int) -> int:
        """Ticks that may still be lost if finishing needs ``changeovers`` more changeovers.

        Negative means the deadline can no longer be met that way.
        """
        need = job.ticks_to_cover(self.remaining_work_s(job) + changeovers * job.changeover_s)
        return job.deadline_ticks - self.tick - need


@dataclass(frozen=True, slots=True)
class Observation:
    """What the market shows at the start of a tick, per zone.

    ``spot``: spot can be started (or kept) now. ``up_ticks``: how many ticks in a row, this
    one included, spot has been available (0 when it is not), counting market history from
    before the job started. ``uptime``: the fraction of the recent past (a day) with spot
    available; ``any_uptime`` the same for "spot in at least one zone". Only the past and
    present: no policy but the omniscient optimum sees the future.
    """

    spot: tuple[bool, ...]
    up_ticks: tuple[int, ...]
    uptime: tuple[float, ...]
    any_uptime: float


class Policy(Protocol):
    """A named online policy: a pure function of the job, its state and the market now."""

    @property
    def name(self) -> str: ...

    def decide(self, job: Job, state: State, obs: Observation) -> Action: ...
