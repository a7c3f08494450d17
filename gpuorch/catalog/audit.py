"""Row-by-row checks of a price catalog: the shipped snapshot, a ``--catalog FILE``, a refresh.

``audit_rows(rows)`` is pure (rows in, findings out) so every path that brings rows in can call
it: the snapshot build (a failing row is dropped, with its reason, into the adapter's
``data/dropped.csv``) and its test (every shipped row, no finding allowed), ``--catalog`` import
(``gpuorch.catalog.load_rows`` skips a row with an error finding and says why, or refuses the
file with ``--strict``), and ``catalog refresh`` for any provider (rows with an error are left
out, each finding's ``line()`` printed).

Checks, each naming the row, the column, the values and the fix (docs/catalog.md, "The audit"):

- ``spot``: the spot price is at most the on-demand price (error);
- ``spot-discount``: spot is at least 10% of on-demand, unless ``SPOT_EXCEPTIONS`` cites a
  source for that offer (warning: placement ranks such a zone at a robust figure anyway);
- ``gpu``: the GPU is the instance family's, the count within the family's, the per-GPU memory
  that variant's (GPU table, ``gpus.variant_for``) (error);
- ``shape``: GPU count, vCPUs and RAM are the instance type's, where the adapter declares the
  type's shape (``AdapterCatalog.shapes``, from the cloud's instance-type pages) (error);
- ``duplicate``: one row per (provider, zone, instance type) (error);
- ``region-spread``: a row's on-demand price is within ``REGION_BAND`` times the median of its
  instance type's regional prices, both ways (error): the clouds' real spreads are far narrower;
- ``part``: for clouds that price a VM as parts (GCP: host machine + GPUs), each part's spot is
  at most its on-demand price (``part_findings``, run by the builder that has the parts) (error).

A provider without an installed adapter, or an instance type its adapter does not list, gets
the price, memory, duplicate and spread checks only.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from gpuorch import gpus
from gpuorch.catalog.adapter import AdapterCatalog, Family, Shape
from gpuorch.catalog.rows import OfferRow, number_text

MIN_SPOT_FRACTION = 0.10  # spot below this share of on-demand is implausible without a source
SHAPE_TOLERANCE = 0.02  # RAM in GiB vs GB rounding (GCP lists 85 GB for a2-highgpu-1g)
# One instance type's on-demand price across a cloud's regions: the widest real spreads in the
# clouds' own price lists are about 1.6x from cheapest to dearest region (AWS g5.xlarge, us-east-1
# against ap-east-1: 1.54; GCP g2-standard-4, us-east4 against me-central2: 1.61; Azure's GPU sizes:
# 1.30), so every real price lies within 1.6x of its type's median region. A row outside 1.75x
# of that median, either way, is a wrong price (docs/catalog.md, "The audit").
REGION_BAND = 1.75

# (provider, zone, instance type) -> the source that shows a spot price below 10% of on-demand.
# Empty: every shipped spot price is at least 10% of its on-demand price.
SPOT_EXCEPTIONS: Mapping[tuple[str, str, str], str] = {}

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    index: int  # position of the row in the rows audited
    check: str  # spot | spot-discount | gpu | shape | duplicate | region-spread | part
    message: str  # what is wrong, with the values, and the fix
    severity: Severity = "error"
    column: str = ""  # the column at fault

    def line(self, source: str, line_of: Callable[[int], int] | None = None) -> str:
        where = f"line {line_of(self.index)}" if line_of else f"row {self.index + 1}"
        return f"{source} {where}{f', column {self.column}' if self.column else ''}: {self.message}"


def _default_catalog(provider: str) -> AdapterCatalog | None:
    from gpuorch.catalog.registry import catalog_of

    return catalog_of(provider)


def audit_rows(rows: Sequence[OfferRow], *,
               catalog_of: Callable[[str], AdapterCatalog | None] = _default_catalog,
               exceptions: Mapping[tuple[str, str, str], str] = SPOT_EXCEPTIONS,
               band: float = REGION_BAND) -> list[Finding]:  # fmt: skip
    """Every finding for ``rows``, in row order. Pure but for ``catalog_of`` (the installed
    adapters' families and shapes, by default)."""
    out: list[Finding] = []
    seen: dict[tuple[str, str, str], int] = {}
    kinds: dict[tuple[str, str], tuple[Family | None, Shape | None]] = {}
    for i, r in enumerate(rows):
        kind = kinds.get((r.provider, r.instance_type))
        if kind is None:
            cat = catalog_of(r.provider)
            kind = kinds[(r.provider, r.instance_type)] = (
                (cat.family_of(r.instance_type), cat.shape_of(r.instance_type)) if cat else (None, None))
        out.extend(Finding(i, check, f"{r.instance_type} in {r.zone}: {msg}", sev, col)
                   for check, col, msg, sev in _price_findings(r, exceptions))
        out.extend(Finding(i, check, f"{r.instance_type} in {r.zone}: {msg}", "error", col)
                   for check, col, msg in _static_findings(r.instance_type, r.gpu, r.gpu_count, r.gpu_memory_gib,
                                                           r.vcpus, r.memory_gib, *kind))
        key = (r.provider, r.zone, r.instance_type)
        if key in seen:
            out.append(Finding(i, "duplicate", f"{r.provider} {r.instance_type} in {r.zone} is listed twice (also row "
                                               f"{seen[key] + 1}); keep one row per provider, zone and instance type"))
        else:
            seen[key] = i
    failed = {f.index for f in out if f.severity == "error"}
    out.extend(_spread_findings(rows, failed, band))
    out.sort(key=lambda f: f.index)
    return out


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def part_findings(parts: Iterable[tuple[str, float, float | None]]) -> list[str]:
    """What is wrong with a price built from parts (name, on-demand, spot), one line each: a part's
    spot above its on-demand price means the source's part prices are not one market's."""
    return [f"{name}: spot {number_text(spot)} is above on-demand {number_text(od)}"
            f" (by {spot - od:.4g})" for name, od, spot in parts if spot is not None and spot > od]


def _price_findings(r: OfferRow, exceptions: Mapping[tuple[str, str, str], str]
                    ) -> Iterable[tuple[str, str, str, Severity]]:
    spot, od = r.spot_price_per_hour, r.price_per_hour
    if spot is not None and spot > od:
        yield ("spot", "spot_price_per_hour", f"spot_price_per_hour {number_text(spot)} is above price_per_hour "
               f"{number_text(od)} (by {spot - od:.4g}); fix the prices, or leave spot_price_per_hour empty",
               "error")
    elif spot is not None and spot < MIN_SPOT_FRACTION * od and (r.provider, r.zone, r.instance_type) not in \
            exceptions:
        yield ("spot-discount", "spot_price_per_hour", f"spot_price_per_hour {number_text(spot)} is "
               f"{spot / od:.1%} of price_per_hour {number_text(od)}, below {MIN_SPOT_FRACTION:.0%}; check the price "
               "(placement may rank it at its siblings' median)", "warning")


@lru_cache(maxsize=4096)
def _static_findings(instance_type: str, gpu: str | None, count: int, memory: float, vcpus: float, ram: float,
                     fam: Family | None, shape: Shape | None) -> tuple[tuple[str, str, str], ...]:
    """The checks that depend on what a row sells, not its price: one answer per kind of row."""
    out: list[tuple[str, str, str]] = []
    if gpu is not None:
        spec = gpus.lookup(gpu)
        if spec is not None and gpus.variant_for(spec.name, memory) is None:
            out.append(("gpu", "gpu_memory_gib", f"gpu_memory_gib {number_text(memory)} is not {spec.name}'s memory "
                        f"({spec.usable:g} GiB usable); fix gpu_memory_gib or name the variant "
                        f"({', '.join(f'{g.name} {g.usable:g}' for g in gpus.variants(spec.name))})"))
    if gpu is not None and fam is not None:
        if fam.gpu != gpu:
            out.append(("gpu", "gpu", f"gpu {gpu}, but {instance_type} carries {fam.gpu} (the {fam.provider} "
                        "adapter's instance families); fix gpu"))
        elif not 1 <= count <= fam.max_gpus:
            out.append(("gpu", "gpu_count", f"gpu_count {count}, but its family has 1 to {fam.max_gpus}; "
                        "fix gpu_count"))
    if shape is not None:
        if count != shape.gpus:
            out.append(("shape", "gpu_count", f"gpu_count {count}, the instance type has {shape.gpus}; fix gpu_count"))
        for col, have, want in (("vcpus", vcpus, shape.vcpus), ("memory_gib", ram, shape.memory_gib)):
            if have and abs(have - want) > SHAPE_TOLERANCE * want:
                out.append(("shape", col, f"{col} {number_text(have)}, the instance type has {want:g}; fix {col}"))
    return tuple(out)


def _spread_findings(rows: Sequence[OfferRow], failed: set[int], band: float) -> list[Finding]:
    """Rows priced outside ``band`` x the median of their type's regions (each region counted once, at
    the median of its zones; rows that failed another check left out of the median)."""
    prices: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i, r in enumerate(rows):
        if i not in failed:
            prices[(r.provider, r.instance_type)][r.region].append(r.price_per_hour)
    medians = {k: (statistics.median([statistics.median(z) for z in regions.values()]), len(regions))
               for k, regions in prices.items() if len(regions) >= 3}  # fewer: no majority to judge by
    out = []
    for i, r in enumerate(rows):
        found = medians.get((r.provider, r.instance_type))
        if found is None or i in failed or found[0] <= 0:
            continue
        median, n = found
        ratio = r.price_per_hour / median
        if ratio > band or ratio < 1 / band:
            out.append(Finding(i, "region-spread", f"{r.instance_type} in {r.zone}: price_per_hour "
                               f"{number_text(r.price_per_hour)} is {ratio:.2f}x the median {median:.6g} of "
                               f"its {n} regions' prices, outside {1 / band:.2f}x-{band:g}x; check the price",
                               "error", "price_per_hour"))
    return out
