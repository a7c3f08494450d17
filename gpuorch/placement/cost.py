"""Expected total cost of running a job on an offer (README "How gpuorch chooses a GPU" walks through it).

    run      = start-up + work,   start-up = boot + setup + restore (checkpoint GiB / throughput)
    on-demand: cost = price * billed(run) / 3600 + egress(restore)
    spot:      k    = interruptions per hour * run / 3600          (expected preemptions)
               T    = run + k * (restart + lost work)              lost work = interval / 2
               cost = price * billed(T) / 3600 + egress(restore) + k * egress(checkpoint)

``billed`` rounds up to the offer's billing increment and minimum (``gpuorch.money.billing``).

A job with a ``volume:`` also pays its storage while it runs, at its provider's rate for the
volume's disk type (``PlacementOptions.storage_rates``, read by the caller from each catalog's
``AdapterCatalog.storage_rate``; placement reads no catalog):

    storage = size GiB * USD per GiB-month / 730 h * (finish hours)

(an offer that carries its own rate, a Vast host's, at that rate: ``storage_usd_per_s``)
by the second from the volume's making (before the first launch) to the job's end, as
``gpuorch.money.storage`` bills it (no market here declares a storage minimum). A volume kept after
the job (``volume.keep``) bills on, but that is the user's choice, not this job's cost.
A job without checkpoints loses on average half its progress per preemption. Interruption
rates per AWS advisor bucket are calibrated on the public spot traces (docs/catalog.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gpuorch.jobs.spec import JobSpec, SpotPolicy
from gpuorch.money.billing import BillingRule

# Interruptions per hour: >20% is the pooled rate of the 9-zone p3 spot traces (0.30/h); the
# other buckets scale with their midpoint (2.5%, 7.5%, ... of a 25% midpoint for >20%).
INTERRUPTIONS_PER_HOUR = {"<5%": 0.03, "5-10%": 0.09, "10-15%": 0.15, "15-20%": 0.21, ">20%": 0.30}
HOURS_PER_MONTH = 730.0  # storage rates are per GiB-month of 730 hours, as gpuorch.money.storage bills them
# (provider, disk type or "" for the provider's default type, USD per GiB-month): a volume's storage rate.
StorageRates = tuple[tuple[str, str, float], ...]


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
    # Storage rates of job volumes (``StorageRates``; the daemon's ``Settings.storage_rates``, or the
    # catalogs' for ``gpuorch plan``): a job with a ``volume:`` pays its storage for the run on each
    # provider named. A provider not named: its storage is not counted.
    storage_rates: StorageRates = ()

    def storage_rate(self, provider: str, disk_type: str | None) -> float:
        """USD per GiB-month of a volume of ``disk_type`` (None: the default type) on ``provider``;
        a type not listed costs the provider's default, as ``AdapterCatalog.storage_rate`` says."""
        found = {t: r for p, t, r in self.storage_rates if p == provider}
        return found.get(disk_type or "", found.get("", 0.0))

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


def storage_usd_per_s(spec: JobSpec, opts: PlacementOptions, provider: str, own_rate: float | None = None) -> float:
    """USD per second that the job's volume costs on ``provider`` while the job runs (0 without one).
    ``own_rate``: the offer's own rate where its market prices storage per host (Vast's hosts,
    ``Offer.storage_usd_per_gib_month``), used instead of the provider's for any disk type."""
    if spec.volume is None or not opts.storage_rates:
        return 0.0
    rate = own_rate if own_rate is not None else opts.storage_rate(provider, spec.volume.type)
    return spec.volume.size * rate / (HOURS_PER_MONTH * 3600)


def with_job(spec: JobSpec, base: PlacementOptions | None, max_nodes: Iterable[tuple[str, int]] = (),
             storage_rates: StorageRates = ()) -> PlacementOptions | None:
    """The options a placement of ``spec`` needs beyond ``base`` (the daemon's decide and ``gpuorch
    plan`` both come here): each provider's most nodes for a gang, and the storage rates for a job
    with a volume. ``base`` itself (None: the defaults) when neither applies, so the placements of
    other jobs stay memoised (``placement.candidates``)."""
    limits = dict(max_nodes) if spec.nodes > 1 and max_nodes else None
    rates = storage_rates if spec.volume is not None else ()
    if limits is None and not rates:
        return base
    opts = replace(base or PlacementOptions(), storage_rates=tuple(rates))
    return replace(opts, max_nodes=limits) if limits is not None else opts
