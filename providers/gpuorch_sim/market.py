"""The simulated spot market: zones replaying traces, its clock, its offers and its reclaims.

Time: the market runs ``time_scale`` times faster than the wall clock, from ``start_s`` seconds
into the traces at the wall time ``origin`` (kept in ``<home>/market.json`` so that every
process - daemons restarted any number of times, the cloud process, tests - sees one timeline).
Durations in the options (boot, changeover, notices) are market seconds; the real processes on
an instance (agent, job) run in wall time. ``min_notice_wall_s`` keeps a compressed notice long
enough for a real agent to act on it: at 600x, AWS's 120 s would otherwise be 0.2 s of wall time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuorch.errors import UserInputError
from gpuorch.provider import Offer

from .traces import PriceSeries, Trace, zone_files

PROVIDER = "sim"
NOTICE_S = {"aws": 120.0, "gcp": 30.0, "azure": 30.0}  # the clouds' preemption notices
Flavour = Literal["aws", "gcp", "azure"]


class ZoneOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    region: str | None = None  # default: from the zone's name
    flavour: Flavour | None = None  # default: the market's
    notice_s: float | None = Field(default=None, ge=0)  # default: the flavour's; 0: no notice


class SimOptions(BaseModel):
    """The ``providers.sim`` options of the daemon config (see docs/recovery.md)."""

    model_config = ConfigDict(extra="forbid")

    traces: str | list[str]  # a directory of <zone>_*.json, or ZONE=FILE pairs
    prices: str | list[str] | None = None  # the same, for spot price series
    time_scale: float = Field(default=60.0, gt=0)  # market seconds per wall second
    start_s: float = Field(default=0.0, ge=0)  # where in the traces the replay starts
    boot_s: float = Field(default=60.0, ge=0)  # market seconds from launch to running
    changeover_s: float = Field(default=0.0, ge=0)  # extra boot of a job's later attempts
    flavour: Flavour = "aws"
    zones: dict[str, ZoneOptions] = Field(default_factory=dict)
    notice_s: dict[str, float] = Field(default_factory=dict)  # per flavour, over NOTICE_S
    min_notice_wall_s: float = Field(default=1.0, ge=0)
    instance_type: str = "p3.2xlarge"
    gpu: str = "V100"
    gpu_count: int = Field(default=1, ge=1)
    gpu_memory_gib: float = Field(default=16.0, gt=0)
    vcpus: float = 8
    memory_gib: float = 61
    on_demand_price: float | None = Field(default=None, gt=0)  # default: the price files', else 3.06
    spot_price: float = Field(default=0.9731, gt=0)  # zones without a price series
    # The billing rule of its offers (wall seconds, as its instance records): AWS's per second with
    # a minute's minimum by default; a test makes time matter in attempts of seconds with a smaller one.
    billing_granularity_s: int = Field(default=1, ge=1, le=3600)
    min_billing_s: int = Field(default=60, ge=0, le=86400)
    notice_poll_s: float = Field(default=0.2, gt=0)  # how often an agent reads its notice (wall s)
    # Reserve the agent keeps before a notice's deadline for the final upload (wall s; a local
    # copy here). The agent's default, 5 s, would swallow a compressed notice whole.
    final_checkpoint_grace_s: float = Field(default=0.25, ge=0)
    agents: Literal["real", "external"] = "real"  # external: nothing is started (benchmarks)
    faults: dict | None = None  # gpuorch.testing.faults.FaultPlan options: rate, seed, kinds, methods
    cloud_idle_exit_s: float = Field(default=30.0, gt=0)  # the cloud process exits this idle
    # A JSON file of more offers (a list of Offer fields; bench/queue_drain.py writes one of ~50,000):
    # sold besides the zones' own, on demand and spot, always with capacity, never reclaimed.
    catalog: str | None = None


@dataclass(frozen=True)
class SimClock:
    origin: float  # wall epoch at which the market stood at start_s
    start_s: float
    scale: float

    def sim(self, wall: float) -> float:
        return self.start_s + (wall - self.origin) * self.scale

    def wall(self, sim: float) -> float:
        return self.origin + (sim - self.start_s) / self.scale


@dataclass(frozen=True)
class Zone:
    name: str
    region: str
    flavour: str
    notice_s: float
    trace: Trace
    prices: PriceSeries | None


@dataclass(frozen=True)
class Reclaim:
    """When the market takes a spot instance back (wall epochs); no notice when ``notice_at`` is None."""

    notice_at: float | None
    kill_at: float


def region_of(zone: str) -> str:
    """``us-east-1a`` -> ``us-east-1``; ``us-central1-a`` -> ``us-central1``; ``eastus-2`` -> ``eastus``."""
    if len(zone) > 2 and zone[-2] == "-":
        return zone[:-2]
    if len(zone) > 1 and zone[-1].isalpha() and zone[-2].isdigit():
        return zone[:-1]
    return zone


class SimMarket:
    def __init__(self, options: SimOptions, clock: SimClock) -> None:
        self.options, self.clock = options, clock
        traces = zone_files(options.traces, "providers.sim.traces")
        prices = zone_files(options.prices, "providers.sim.prices") if options.prices else {}
        unknown = sorted(set(options.zones) - set(traces))
        if unknown:
            raise UserInputError(
                f"providers.sim.zones.{unknown[0]}: no trace for this zone; traces: {', '.join(traces)}"
            )
        notices = {**NOTICE_S, **options.notice_s}
        self.zones: dict[str, Zone] = {}
        for name, path in sorted(traces.items()):
            z = options.zones.get(name, ZoneOptions())
            flavour = z.flavour or options.flavour
            series = PriceSeries.load(name, prices[name]) if name in prices else None
            self.zones[name] = Zone(name, z.region or region_of(name), flavour,
                                    z.notice_s if z.notice_s is not None else notices[flavour],
                                    Trace.load(name, path), series)
        od = options.on_demand_price or next((z.prices.on_demand for z in self.zones.values()
                                              if z.prices and z.prices.on_demand), None)
        self.on_demand_price = od or 3.06

    def spot_available(self, zone: str, wall: float) -> bool:
        return self.zones[zone].trace.available(self.clock.sim(wall))

    def spot_price(self, zone: str, wall: float) -> float:
        z = self.zones[zone]
        return z.prices.at(self.clock.sim(wall)) if z.prices else self.options.spot_price

    def offers(self, wall: float) -> list[Offer]:
        o = self.options
        return [Offer(provider=PROVIDER, region=z.region, zone=z.name, instance_type=o.instance_type, gpu=o.gpu,
                      gpu_count=o.gpu_count, gpu_memory_gib=o.gpu_memory_gib, vcpus=o.vcpus, memory_gib=o.memory_gib,
                      price_per_hour=self.on_demand_price, spot_price_per_hour=round(self.spot_price(z.name, wall), 4),
                      billing_granularity_s=o.billing_granularity_s, min_billing_s=o.min_billing_s)
                for z in self.zones.values()]

    def boot_wall_s(self, attempt: int) -> float:
        o = self.options
        return (o.boot_s + (o.changeover_s if attempt > 1 else 0.0)) / o.time_scale

    def reclaim(self, zone: str, created_wall: float) -> Reclaim | None:
        """When a spot instance created at ``created_wall`` in ``zone`` is reclaimed: at the trace's
        next drop, announced the zone's notice ahead (at least ``min_notice_wall_s``, at most
        since its creation). None if the trace never drops."""
        z = self.zones.get(zone)
        drop = z.trace.next_drop(self.clock.sim(created_wall)) if z else None
        if drop is None:
            return None
        kill = self.clock.wall(drop)
        if z.notice_s <= 0:  # type: ignore[union-attr]
            return Reclaim(None, kill)
        lead = max(z.notice_s / self.options.time_scale, self.options.min_notice_wall_s)  # type: ignore[union-attr]
        return Reclaim(max(created_wall, kill - lead), kill)


def resolve(paths: str | list[str] | None) -> str | list[str] | None:
    """Make the paths in a traces/prices option absolute (other processes read them too)."""
    if paths is None:
        return None
    items = [paths] if isinstance(paths, str) else paths
    out = []
    for item in items:
        zone, sep, file = item.partition("=")
        out.append(f"{zone}={Path(file).expanduser().resolve()}" if sep else str(Path(item).expanduser().resolve()))
    return out
