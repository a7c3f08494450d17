"""Rank every (offer, market) pair that holds a job by expected total cost. Pure, no I/O.

Per offer class (``index``): does the job fit, how many hours of work (``requirements``).
Per (class, market, interruption bucket, egress) group, the cost scenario (``cost``): within a
group expected cost is linear in the price, and the index keeps each group in price order. The
groups are merged lazily with a heap, so a placement touches only the offers it returns; the
region and volume-zone filters build their price orders once and cache them on the index.
Ties on cost go to the earlier finish, then to catalog order. A job with a volume adds the
volume's storage for its expected run (``cost.storage_usd_per_s``: the provider's rate, by value in
the options) to each group's fixed cost, so a market with dear storage loses to a dearer GPU
where the total says so.

A gang (``nodes: N``) is N instances of one offer (one type, one zone): its expected cost is N
times one instance's (every node bills, restores the checkpoint and is redone after a
preemption), a preemption of any node ends the attempt (N times the interruption rate), and
``max_price_per_hour`` caps the gang's hourly total. ``PlacementOptions.max_nodes`` (each
provider's ``Capabilities.max_nodes``) refuses the classes of providers that cannot place N nodes.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpuorch.checkpoint.store import store_provider
from gpuorch.jobs.spec import JobSpec
from gpuorch.placement.cost import PlacementOptions, Scenario, linear, markets, storage_usd_per_s
from gpuorch.placement.explain import Rejection, Shortfall, rejections, shortfall
from gpuorch.placement.index import BUCKET_CODES, OfferClass, OfferIndex, PriceOrder, index_for, price_orders
from gpuorch.placement.requirements import ClassFit, Needs, Refusal, evaluate_classes
from gpuorch.provider.port import Offer

FILTER_CACHE = 20_000  # filtered price orders kept per index


@dataclass(frozen=True)
class Candidate:
    offer: Offer
    spot: bool
    est_hours: float = 0.0  # hours of work on this offer (without start-up or preemptions)
    est_cost: float = 0.0  # expected total USD, billing rounding and overheads included
    est_finish_hours: float = 0.0  # expected wall-clock hours from launch to done
    per_gpu_gib: float | None = None  # memory estimate per GPU (jobs with a model block)
    sharding: str | None = None  # the strategy assumed on this offer: none, ddp, fsdp, zero2, zero3, tp
    gpus_used: int = 0  # of the offer's GPUs the job uses (0: not known, read as all of them)
    ranked_price_per_hour: float | None = None  # set when ranking used a robust spot figure, not the listed one
    nodes: int = 1  # instances of ``offer`` the job runs on (a gang); prices are per node, est_cost is the total
    est_storage_usd: float = 0.0  # of est_cost: the job volume's storage during the run

    @property
    def larger(self) -> bool:
        """Whether the job runs on fewer GPUs than the instance has (a larger instance it allowed, or
        a model job without a distributed strategy: one GPU)."""
        return 0 < self.gpus_used < self.offer.gpu_count

    @property
    def price_per_hour(self) -> float:
        """One instance's price (per node of a gang)."""
        return self.offer.price(self.spot)

    @property
    def total_price_per_hour(self) -> float:
        """What the job pays per hour: every node."""
        return self.price_per_hour * self.nodes


@dataclass(frozen=True)
class Plan:
    candidates: list[Candidate]
    rejected: list[Rejection]
    shortfall: Shortfall | None


def _allowed_rows(spec: JobSpec, idx: OfferIndex, volume_zone: str | None) -> list[int] | None:
    """Sorted rows in the job's regions and its volume's zone; None when neither restricts."""
    rows: set[int] | None = None
    if spec.regions:
        rows = {r for name in spec.regions if name in idx.regions for r in idx.rows_by_region[idx.regions[name]]}
    if volume_zone:
        zone = set(idx.rows_by_zone.get(idx.zones.get(volume_zone, -1), ()))
        rows = zone if rows is None else rows & zone
    return sorted(rows) if rows is not None else None


def _egress_per_gib(
    store: str | None, opts: PlacementOptions, idx: OfferIndex, provider: str
) -> tuple[float, int | None]:
    """USD per GiB restored from a checkpoint store in cloud ``store`` onto this provider's
    offers, or (0, region code) when only offers outside the checkpoint's region pay the
    same-cloud rate. ``store`` None: no checkpoint, or ``file://`` uploaded from the control
    host (cloud ingress is free)."""
    if store is None:
        return 0.0, None
    if store != provider:
        return opts.egress_internet_usd_per_gib, None
    if opts.checkpoint_region is None:
        return 0.0, None  # region unknown: assume the bucket is near the instance
    return 0.0, idx.regions.get(opts.checkpoint_region, -1)


def _scenario(spec: JobSpec, opts: PlacementOptions, c: OfferClass, fit: ClassFit) -> tuple[Scenario, float]:
    """The class's cost scenario, and the GiB restored after each preemption."""
    work_s = (fit.hours if fit.hours is not None else opts.default_hours) * 3600
    ready = opts.boot(c.provider) + opts.setup_s
    ckpt = opts.checkpoint_gib if opts.checkpoint_gib is not None else fit.checkpoint_gib
    lost = spec.checkpoint.interval / 2 if spec.checkpoint else work_s / 2
    first, later = ready + opts.restore_s(opts.restore_gib), ready + opts.restore_s(ckpt)
    return Scenario(c.billing, work_s, first, later, lost), ckpt


def _groups(idx: OfferIndex, ci: int, spot: bool, where: tuple[object, ...] | None,
            allowed: Callable[[], list[int] | None], egress: tuple[float, int | None],
            same_cloud: float, listed: bool = False) -> list[tuple[int, float, PriceOrder]]:  # fmt: skip
    """(bucket, USD egress per GiB, offers in price order) for one class and market. Without
    filters the index's own orders serve; filtered ones are built once and cached. ``listed``:
    spot at the listed prices rather than the robust ones."""
    rate, home = egress
    if where is None and home is None:
        return [(b, rate, po) for b, po in (idx.spot_orders(listed)[ci] if spot else idx.on_demand[ci])]
    key = (ci, spot, where, home, listed)
    parts = idx.filtered.get(key)
    if parts is None:
        c, rows = idx.classes[ci], allowed()
        in_class = (range(c.start, c.stop) if rows is None
                    else rows[bisect_left(rows, c.start) : bisect_left(rows, c.stop)])

        def group(r: int) -> int:  # bucket, and whether a restore pays the same-cloud rate
            return (idx.bucket[r] if spot else -1) * 2 + (home is not None and idx.region[r] != home)

        prices = idx.spot_prices(listed) if spot else idx.price
        parts = [(k // 2, bool(k % 2), po) for k, po in price_orders(in_class, prices, group)]
        if len(idx.filtered) > FILTER_CACHE:
            idx.filtered.clear()
        idx.filtered[key] = parts
    return [(b, same_cloud if far else rate, po) for b, far, po in parts]


def plan(
    spec: JobSpec,
    offers: Sequence[Offer] | OfferIndex,
    *,
    avoid: Callable[[Candidate], bool] | None = None,
    volume_zone: str | None = None,
    options: PlacementOptions | None = None,
    limit: int | None = None,
    explain: bool = True,
) -> Plan:
    """Candidates cheapest expected total first (at most ``limit``), and with ``explain`` the
    reason each offer class without a candidate was rejected."""
    idx, opts = index_for(offers), options or PlacementOptions()
    # The cap is on the gang's hourly total; prices in the index are per instance.
    cap = spec.max_price_per_hour / spec.nodes if spec.max_price_per_hour is not None else math.inf
    ranked = _rank_groups(spec, idx, opts, volume_zone, cap)
    chosen, kept = _merge(spec, idx, opts, ranked, cap, avoid, limit)
    if not explain:
        return Plan(chosen, [], None)
    placed = kept | {ranked.groups[entry[3]][3] for entry in ranked.heap}  # classes with offers still unranked
    return Plan(chosen, rejections(spec, idx, volume_zone, ranked.refused, placed, cap),
                shortfall(spec, idx, volume_zone, ranked.refused))


@dataclass
class _Groups:
    """The job's offer classes, refused or fitting, and its (class, market, bucket, egress) groups
    with the heap of each group's cheapest offer under the cap."""

    refused: dict[int, Refusal] = field(default_factory=dict)
    fits: dict[int, ClassFit] = field(default_factory=dict)
    # prices, USD per $/h, fixed USD (storage included), class, spot, storage USD
    groups: list[tuple[PriceOrder, float, float, int, bool, float]] = field(default_factory=list)
    heap: list[tuple[float, float, int, int, int]] = field(default_factory=list)  # cost, finish, row, group, position


def _rank_groups(spec: JobSpec, idx: OfferIndex, opts: PlacementOptions, volume_zone: str | None,
                 cap: float) -> _Groups:
    """Each class that holds the job: its cost scenario, then one group per market, bucket and egress rate."""
    where = (tuple(spec.regions or ()), volume_zone) if spec.regions or volume_zone else None
    allowed_rows: list[list[int] | None] = []

    def allowed() -> list[int] | None:  # computed on the first cache miss only
        if not allowed_rows:
            allowed_rows.append(_allowed_rows(spec, idx, volume_zone))
        return allowed_rows[0]

    unknown = opts.unknown_interruptions_per_hour
    rates = [opts.interruptions_per_hour.get(b, unknown) for b in BUCKET_CODES] + [unknown]
    nodes = spec.nodes
    providers = set(spec.providers) if spec.providers else None
    allowed_markets = markets(spec.spot_policy)
    store = store_provider(spec.checkpoint.url.scheme) if spec.checkpoint else None  # whose cloud holds it
    listed = spec.spot_price == "listed"
    out = _Groups()
    for ci, (c, fit) in enumerate(zip(idx.classes, evaluate_classes(Needs.of(spec), idx), strict=True)):
        if isinstance(fit, Refusal):
            out.refused[ci] = fit
            continue
        if providers is not None and c.provider not in providers:
            continue
        refusal = _nodes_refusal(c.provider, nodes, opts)
        if refusal is not None:
            out.refused[ci] = refusal
            continue
        out.fits[ci] = fit
        scen, ckpt = _scenario(spec, opts, c, fit)
        egress = _egress_per_gib(store, opts, idx, c.provider)
        storage_per_s = storage_usd_per_s(spec, opts, c.provider, c.storage_rate)  # one volume per job, for the run
        for spot in allowed_markets:
            same_cloud = opts.egress_same_cloud_usd_per_gib
            for bucket, per_gib, order in _groups(idx, ci, spot, where, allowed, egress, same_cloud, listed):
                rate = rates[bucket] * nodes if spot else 0.0  # any node's preemption ends a gang's attempt
                a, b, finish = linear(scen, spot, rate, opts.restore_gib * per_gib, ckpt * per_gib)
                storage = finish * storage_per_s
                a, b = a * nodes, b * nodes + storage  # every node bills and restores
                if order.prices[0] <= cap:
                    out.heap.append((order.prices[0] * a + b, finish, order.rows[0], len(out.groups), 0))
                out.groups.append((order, a, b, ci, spot, storage))
    return out


def _nodes_refusal(provider: str, nodes: int, opts: PlacementOptions) -> Refusal | None:
    """Why a provider cannot place the job's gang (``Capabilities.max_nodes``), or None."""
    most = opts.max_nodes.get(provider, 1) if opts.max_nodes is not None else nodes
    if nodes <= most:
        return None
    return Refusal(f"nodes: {nodes}, but provider {provider} places at most {most} per job; use "
                   f"nodes: {most} or a provider that places more (Capabilities.max_nodes)")


def _merge(spec: JobSpec, idx: OfferIndex, opts: PlacementOptions, ranked: _Groups, cap: float,
           avoid: Callable[[Candidate], bool] | None, limit: int | None) -> tuple[list[Candidate], set[int]]:
    """Candidates cheapest expected total first, and the classes they come from. Each group is
    sorted by price, so by cost: merge them lazily; what is left on the heap was not ranked."""
    ranked_spot = idx.spot_prices(spec.spot_price == "listed")
    groups, fits, heap = ranked.groups, ranked.fits, ranked.heap
    heapq.heapify(heap)
    chosen: list[Candidate] = []
    kept: set[int] = set()
    while heap:
        cost, finish, row, g, pos = heapq.heappop(heap)
        order, a, b, ci, spot, storage = groups[g]
        if pos + 1 < len(order.prices) and order.prices[pos + 1] <= cap:
            heapq.heappush(heap, (order.prices[pos + 1] * a + b, finish, order.rows[pos + 1], g, pos + 1))
        fit = fits[ci]
        hours = fit.hours if fit.hours is not None else opts.default_hours
        ranked_price = ranked_spot[row] if spot else None
        robust = ranked_price if ranked_price is not None and ranked_price != idx.listed_spot_price[row] else None
        cand = Candidate(idx.offers[row], spot, hours, cost, finish / 3600, fit.per_gpu_gib, fit.sharding,
                         fit.gpus_used, robust, spec.nodes, storage)
        if avoid is not None and avoid(cand):
            continue
        chosen.append(cand)
        kept.add(ci)
        if limit is not None and len(chosen) >= limit:
            break
    return chosen, kept
