"""An index of offers grouped into offer classes, so one placement looks at tens of classes
and the few offers it returns instead of every offer in the catalog.

An offer class is everything that decides whether a job fits and how fast it runs (provider,
instance type, GPU model and count, memory, vCPU, RAM, interconnect, billing rule, and an offer's
own storage rate where its market prices storage per host); offers of one class differ only in
region, zone, prices and interruption bucket. A full catalog has tens
of thousands of offers but only tens to hundreds of classes, so fit and runtime are computed
per class.

Within a class, offers of one market and interruption bucket share everything in the cost
model but the price, and expected cost is linear in it (``cost.linear``): so the index keeps
each such group sorted by price, and ranking merges the groups lazily, touching only as many
offers as it returns. Plain Python: no numpy needed on this path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuorch import gpus
from gpuorch.money.billing import BillingRule
from gpuorch.placement.spot_price import robust_spot_prices
from gpuorch.provider.port import Offer

BUCKET_CODES = {"<5%": 0, "5-10%": 1, "10-15%": 2, "15-20%": 3, ">20%": 4}
UNKNOWN_BUCKET = len(BUCKET_CODES)


@dataclass(frozen=True)
class OfferClass:
    provider: str
    instance_type: str
    gpu: str | None
    gpu_count: int
    gpu_memory_gib: float
    vcpus: float
    memory_gib: float
    interconnect: str | None
    billing: BillingRule
    storage_rate: float | None  # the offers' own volume storage rate (Offer.storage_usd_per_gib_month)
    start: int  # rows [start, stop) of the index
    stop: int

    @property
    def spec(self) -> gpus.GpuSpec | None:
        return gpus.lookup(self.gpu) if self.gpu else None

    @property
    def label(self) -> str:
        gpu = f"{self.gpu_count}x{self.gpu}" if self.gpu else "no GPU"
        return f"{self.provider} {self.instance_type} ({gpu})"


# OfferClass's fields before start/stop: what makes offers interchangeable but for place and price.
ClassKey = tuple[str, str, str | None, int, float, float, float, str | None, BillingRule, float | None]


def _class_key(o: Offer) -> ClassKey:
    return (o.provider, o.instance_type, o.gpu, o.gpu_count, o.gpu_memory_gib, o.vcpus, o.memory_gib,
            o.interconnect, BillingRule(o.billing_granularity_s, o.min_billing_s),
            o.storage_usd_per_gib_month)  # fmt: skip


class PriceOrder:
    """Rows of one group sorted by price (ties by row), and their prices: read one by one."""

    __slots__ = ("prices", "rows")

    def __init__(self, rows: list[int], price_of: Sequence[float | None]) -> None:
        self.rows = sorted(rows, key=lambda r: (price_of[r], r))
        self.prices: list[float] = [price_of[r] for r in self.rows]  # type: ignore[misc]


def price_orders(rows: Iterable[int], price_of: Sequence[float | None],
                 key: Callable[[int], int] | None = None) -> list[tuple[int, PriceOrder]]:  # fmt: skip
    """Split ``rows`` by ``key`` (None: one group keyed -1), drop rows without a price (no spot
    offering), and sort each group by price."""
    split: dict[int, list[int]] = {}
    for r in rows:
        if price_of[r] is not None:
            split.setdefault(key(r) if key else -1, []).append(r)
    return [(k, PriceOrder(rs, price_of)) for k, rs in sorted(split.items())]


class _Vocab(dict[str, int]):
    def code(self, value: str) -> int:
        return self.setdefault(value, len(self))


class OfferIndex:
    """Offers grouped by class (rows are positions in ``offers``), with each class's on-demand
    and spot (per interruption bucket) offers in price order, and rows by region and zone."""

    def __init__(self, offers: Sequence[Offer]) -> None:
        groups: dict[ClassKey, list[Offer]] = {}
        for o in offers:
            groups.setdefault(_class_key(o), []).append(o)
        self.offers: list[Offer] = [o for members in groups.values() for o in members]
        self.regions, self.zones = _Vocab(), _Vocab()
        self.price: list[float | None] = [o.price_per_hour for o in self.offers]
        # Spot ranks at the robust figure (``spot_price``); the listed one stays for display and for
        # jobs that ask for ``spot_price: listed``.
        self.listed_spot_price: list[float | None] = [o.spot_price_per_hour for o in self.offers]
        self.spot_price: list[float | None] = robust_spot_prices(self.offers)
        self.region = [self.regions.code(o.region) for o in self.offers]
        self.zone = [self.zones.code(o.zone) for o in self.offers]
        self.bucket = [BUCKET_CODES.get(o.interruption_bucket or "", UNKNOWN_BUCKET) for o in self.offers]
        self.classes: list[OfferClass] = []
        self.on_demand: list[list[tuple[int, PriceOrder]]] = []
        self.spot: list[list[tuple[int, PriceOrder]]] = []  # keyed by bucket code
        start = 0
        for key, members in groups.items():
            stop = start + len(members)
            self.classes.append(OfferClass(*key, start, stop))
            self.on_demand.append(price_orders(range(start, stop), self.price))
            self.spot.append(price_orders(range(start, stop), self.spot_price, self.bucket.__getitem__))
            start = stop
        self._spot_listed: list[list[tuple[int, PriceOrder]]] | None = None
        self.rows_by_region = _rows_by(self.region)
        self.rows_by_zone = _rows_by(self.zone)
        self.fits: dict[Any, list[Any]] = {}  # per job needs: fit of each class (requirements.py)
        self.filtered: dict[tuple[Any, ...], list[Any]] = {}  # price orders under a filter (rank.py)
        self.placed: dict[tuple[Any, ...], list[Any]] = {}  # memoised placements (``placement.candidates``)

    def __len__(self) -> int:
        return len(self.offers)

    def spot_orders(self, listed: bool = False) -> list[list[tuple[int, PriceOrder]]]:
        """Each class's spot price orders by bucket, at the robust price or (``listed``) as listed."""
        if not listed:
            return self.spot
        if self._spot_listed is None:
            self._spot_listed = [price_orders(range(c.start, c.stop), self.listed_spot_price, self.bucket.__getitem__)
                                 for c in self.classes]  # fmt: skip
        return self._spot_listed

    def spot_prices(self, listed: bool = False) -> list[float | None]:
        return self.listed_spot_price if listed else self.spot_price


def _rows_by(codes: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for row, code in enumerate(codes):
        out.setdefault(code, []).append(row)  # ascending: rows are visited in order
    return out


_LAST: tuple[tuple[int, ...], Sequence[Offer], OfferIndex] | None = None


def index_for(offers: Sequence[Offer] | OfferIndex) -> OfferIndex:
    """The index of ``offers``, reusing the last one built when given the same offer objects
    again (``load_offers`` returns the same objects). Up to 4,096 offers every object is
    compared; a larger catalog is recognised by its length and first, middle and last objects,
    so a caller that edits a large list in place should build an ``OfferIndex`` and pass it."""
    global _LAST
    if isinstance(offers, OfferIndex):
        return offers
    if not offers:
        return OfferIndex(())
    n = len(offers)
    sig = tuple(map(id, offers)) if n <= 4096 else (n, id(offers[0]), id(offers[n // 2]), id(offers[-1]))
    if _LAST is None or _LAST[0] != sig:
        _LAST = (sig, offers, OfferIndex(offers))  # keeps ``offers`` alive so ids stay unique
    return _LAST[2]
