"""Expected total cost of running a job on an offer (README "How gpuorch chooses a GPU" walks through it).

    run      = start-up + work,   start-up = boot + setup + restore (checkpoint GiB / throughput)
    on-demand: cost = price * billed(run) / 3600 + egress(restore)
    spot:      k    = interruptions per hour * run / 3600          (expected preemptions)
               T    = run + k * (restart + lost work)              lost work = interval / 2
               cost = price * billed(T) / 3600 + egress(restore) + k * egress(checkpoint)

``billed`` rounds up to the offer's billing increment and minimum (``gpuorch.money.billing``).
A job without checkpoints loses on average half its progress per preemption. Interruption
rates per AWS advisor bucket are calibrated on the public spot traces (docs/catalog.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuorch.jobs.spec import SpotPolicy
from gpuorch.money.billing import BillingRule

# Interruptions per hour: >20% is the pooled rate of the 9-zone p3 spot traces (0.30/h); the
# other buckets scale with their midpoint (2.5%, 7.5%, ... of a 25% midpoint for >20%).
INTERRUPTIONS_PER_HOUR = {"<5%": 0.03, "5-10%": 0.09, "10-15%": 0.15, "15-20%": 0.21, ">20%": 0.30}


def markets(policy: SpotPolicy) -> tuple[bool, ...]:
    """Markets a spot policy allows, as ``spot`` flags."""
    return {SpotPolicy.SPOT: (True,), SpotPolicy.ON_DEMAND: (False,)}.get(policy, (True, False))


@dataclass(frozen=True)
class PlacementOptions:
    """Assumptions of the cost model; the daemon may pass what it knows better."""

    default_hours: float = 1.0  # work when the job states no model tokens or duration
    boot_s: float = 180.0  # request to SSH-able instance
    boot_s_by_provider: Mapping[str, float] = field(default_factory=dict)
    setup_s: float = 300.0  # image pull, environment, data staging
    restore_gib: float = 0.0  # checkpoint restored before the first step (a relaunch)
    checkpoint_gib: float | None = None  # restored after each preemption; None: from the model
    checkpoint_region: str | None = None  # region of the checkpoint store, when known
    restore_gib_per_s: float = 0.25  # object store -> instance
    egress_same_cloud_usd_per_gib: float = 0.02  # between regions of one cloud
    egress_internet_usd_per_gib: float = 0.09  # out of one cloud into another
    interruptions_per_hour: Mapping[str, float] = field(default_factory=lambda: dict(INTERRUPTIONS_PER_HOUR))
    unknown_interruptions_per_hour: float = 0.15  # no advisor data (GCP, Azure, CSV rows)
    # The most nodes each provider places per job (``Capabilities.max_nodes``; a provider not named: 1).
    # None: not known here (the daemon's submit check refused what no provider can place).
    max_nodes: Mapping[str, int] | None = None

    def boot(self, provider: str) -> float:
        return self.boot_s_by_provider.get(provider, self.boot_s)

    def restore_s(self, gib: float) -> float:
        return gib / self.restore_gib_per_s if gib > 0 else 0.0


@dataclass(frozen=True)
class Scenario:
    """One offer class, one market: everything but the per-offer price, rate and egress."""

    billing: BillingRule
    work_s: float
    startup_s: float
    restart_s: float  # boot + setup + restoring the checkpoint after a preemption
    lost_s: float  # work redone per preemption


def linear(s: Scenario, spot: bool, rate_per_h: float = 0.0, egress_usd: float = 0.0,
           restart_egress_usd: float = 0.0) -> tuple[float, float, float]:  # fmt: skip
    """For offers sharing a scenario, market, interruption rate and egress, the expected cost is
    linear in the hourly price: returns (USD per $/h of price, fixed USD, finish seconds)."""
    run = s.startup_s + s.work_s
    if not spot:
        return s.billing.billed(run) / 3600, egress_usd, run
    k = rate_per_h * run / 3600  # expected preemptions
    total = run + k * (s.restart_s + s.lost_s)
    return s.billing.billed(total) / 3600, egress_usd + k * restart_egress_usd, total


def expected(s: Scenario, price: float, spot: bool, rate_per_h: float = 0.0, egress_usd: float = 0.0,
             restart_egress_usd: float = 0.0) -> tuple[float, float]:  # fmt: skip
    """(expected USD, expected seconds from launch to done) on one offer."""
    per_price, fixed, finish = linear(s, spot, rate_per_h, egress_usd, restart_egress_usd)
    return price * per_price + fixed, finish
