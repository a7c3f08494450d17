"""``gpuorch``: the deadline-aware spot policy gpuorch runs, single- or multi-region.

It reasons in *slack*: ticks that may still be lost (idling, changeovers) before only
on-demand can meet the deadline. Rules, first match wins:

1. Keep a running spot instance until it is preempted: every move costs a changeover.
2. Otherwise take spot where it is now, in the zone whose current run is longest (a zone that
   has stayed up long tends to stay up; ties go to the zone up most over the last day),
   provided the slack still covers this changeover plus one more to fall back to on-demand.
   From on-demand, only once that spot has been up for ``confirm`` changeovers' time: most
   runs that end sooner are blips that would buy two changeovers for almost no spot time.
   When the slack covers fewer changeovers than one per ``scarce_h`` hours of the job's work
   (8 for a 48 h job), that wait grows in proportion (``confirm x that number / changeovers
   left``): a move off on-demand spends two of the few changeovers left (there and, at the
   preemption, back), and once they are gone the job runs on on-demand to the end, so the last
   ones go to runs that have lasted longest.
3. Stay on on-demand (rather than idle) while no spot qualifies: idling from on-demand and
   coming back costs a changeover.
4. With no spot anywhere: idle while the slack left after this tick stays at or above a
   reserve, else on-demand. The reserve is the Uniform Progress line expressed in slack
   (initial slack x fraction of time left), but never more than ``reserve_cap_h``: holding
   back more than a few hours of a loose deadline buys on-demand that long outages rarely
   need. With several zones it is never less than ``multi_zone_floor`` changeovers: the job
   moves on every preemption, and running out of slack for moves late in the job (after an
   outage of every zone) would leave it on on-demand to the end. But never start on-demand
   when that would leave too little slack ever to leave it (fewer than the two changeovers of
   a spot run and its fallback): wait for spot instead while a start from idle stays safe,
   since on-demand now would be on-demand to the end.
5. The shared deadline guard (:func:`gpuorch.policy.baselines.deadline_guard`) has the last
   word, so a feasible deadline is never missed.

Differences from Uniform Progress that matter (measured in docs/policy.md): it leaves
on-demand as soon as a stable spot run appears instead of only once two changeovers ahead of
the line; it caps the reserve; and with several zones it picks where to go.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuorch.policy.baselines import deadline_guard, live_spot
from gpuorch.policy.model import OD, SPOT, Action, Job, Observation, Placement, State


def best_spot_zone(obs: Observation) -> Placement | None:
    """Spot in the zone with the longest current run (then most up lately, then first)."""
    zones = [z for z, up in enumerate(obs.spot) if up]
    if not zones:
        return None
    return Placement(SPOT, max(zones, key=lambda z: (obs.up_ticks[z], obs.uptime[z], -z)))


@dataclass(frozen=True)
class GpuorchPolicy:
    """See the module docstring; the defaults are the measured choice (docs/policy.md)."""

    reserve: float = 1.0
    reserve_cap_h: float = 6.0
    confirm: float = 2.0
    multi_zone_floor: float = 12.0
    scarce_h: float = 6.0
    name: str = "gpuorch"

    def reserve_ticks(self, job: Job, state: State, zones: int = 1) -> float:
        """Slack to keep in hand at this tick, in ticks."""
        initial = job.deadline_ticks - job.ticks_to_cover(job.work_s)
        line = self.reserve * initial * (job.deadline_ticks - state.tick) / job.deadline_ticks
        reserve = min(line, self.reserve_cap_h * 3600 / job.gap_s)
        if zones > 1:  # the job moves on every preemption: keep changeovers in hand for that
            reserve = max(reserve, self.multi_zone_floor * job.changeover_s / job.gap_s)
        return reserve

    def confirm_s(self, job: Job, state: State) -> float:
        """How long a spot run must have lasted before the job leaves on-demand for it, in seconds."""
        left = state.slack_ticks(job, 1) * job.gap_s / max(job.changeover_s, 1)  # changeovers the slack covers
        scarce = job.work_s / (self.scarce_h * 3600)  # one changeover per scarce_h hours of work: 8 for 48 h
        return self.confirm * job.changeover_s * max(1.0, scarce / max(left, 1e-9))

    def decide(self, job: Job, state: State, obs: Observation) -> Action:
        running = live_spot(state)
        spot = running or best_spot_zone(obs)
        on_demand = state.placement == OD
        action: Action
        if running is not None:
            action = running
        elif (
            spot is not None
            and state.slack_ticks(job, 2) > 0
            and (not on_demand or obs.up_ticks[spot.zone] * job.gap_s >= self.confirm_s(job, state))
        ):
            action = spot
        elif on_demand:
            action = OD
        elif spot is None and state.slack_ticks(job, 3) <= 0 and state.slack_ticks(job, 2) - 1 > 0:
            action = None  # on-demand now would be for good: wait while a spot start stays safe
        elif state.slack_ticks(job, 1) - 1 < self.reserve_ticks(job, state, len(obs.spot)):
            action = OD
        else:
            action = None
        return deadline_guard(job, state, action, spot)
