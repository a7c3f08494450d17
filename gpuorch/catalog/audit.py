"""Row-by-row checks of a price catalog: the shipped snapshot, a ``--catalog FILE``, a refresh.

``audit_rows(rows)`` is pure (rows in, findings out) so every path that brings rows in can call
it: the snapshot test (every shipped row, no finding allowed), ``--catalog`` import
(``gpuorch.catalog.load_rows`` refuses a file with an error finding and keeps its warnings for
``flagged``), and ``catalog refresh`` for any provider (call it on the rows about to be written;
write them only when ``errors(findings)`` is empty, and print each finding's ``line()``).

Checks, each naming the row and the fix (docs/catalog.md, "The audit"):

- ``spot``: the spot price is at most the on-demand price (error);
- ``spot-discount``: spot is at least 10% of on-demand, unless ``SPOT_EXCEPTIONS`` cites a
  source for that offer (warning: placement ranks such a zone at a robust figure anyway);
- ``gpu``: the GPU is the instance family's, the count within the family's, the per-GPU memory
  that variant's (GPU table, ``gpus.variant_for``) (error);
- ``shape``: GPU count, vCPUs and RAM are the instance type's, where the adapter declares the
  type's shape (``AdapterCatalog.shapes``, from the cloud's instance-type pages) (error);
- ``duplicate``: one row per (provider, zone, instance type) (error).

A provider without an installed adapter, or an instance type its adapter does not list, gets
the price, memory and duplicate checks only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gpuorch import gpus
from gpuorch.catalog.adapter import AdapterCatalog
from gpuorch.catalog.rows import OfferRow

MIN_SPOT_FRACTION = 0.10  # spot below this share of on-demand is implausible without a source
SHAPE_TOLERANCE = 0.02  # RAM in GiB vs GB rounding (GCP lists 85 GB for a2-highgpu-1g)

# (provider, zone, instance type) -> the source that shows a spot price below 10% of on-demand.
# Empty: every shipped spot price is at least 10% of its on-demand price.
SPOT_EXCEPTIONS: Mapping[tuple[str, str, str], str] = {}

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    index: int  # position of the row in the rows audited
    check: str  # spot | spot-discount | gpu | shape | duplicate
    message: str  # what is wrong and the fix
    severity: Severity = "error"

    def line(self, source: str, line_of: Callable[[int], int] | None = None) -> str:
        where = f"line {line_of(self.index)}" if line_of else f"row {self.index + 1}"
        return f"{source} {where}: {self.message}"


def _default_catalog(provider: str) -> AdapterCatalog | None:
    from gpuorch.catalog.registry import catalog_of

    return catalog_of(provider)


def audit_rows(rows: Sequence[OfferRow], *,
               catalog_of: Callable[[str], AdapterCatalog | None] = _default_catalog,
               exceptions: Mapping[tuple[str, str, str], str] = SPOT_EXCEPTIONS) -> list[Finding]:  # fmt: skip
    """Every finding for ``rows``, in row order. Pure but for ``catalog_of`` (the installed
    adapters' families and shapes, by default)."""
    out: list[Finding] = []
    seen: dict[tuple[str, str, str], int] = {}
    for i, r in enumerate(rows):
        out.extend(Finding(i, check, msg, sev) for check, msg, sev in _row_findings(r, catalog_of(r.provider),
                                                                                     exceptions))
        key = (r.provider, r.zone, r.instance_type)
        if key in seen:
            out.append(Finding(i, "duplicate", f"{r.provider} {r.instance_type} in {r.zone} is listed twice (also row "
                                               f"{seen[key] + 1}); keep one row per provider, zone and instance type"))
        else:
            seen[key] = i
    return out


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def _row_findings(r: OfferRow, cat: AdapterCatalog | None,
                  exceptions: Mapping[tuple[str, str, str], str]) -> Iterable[tuple[str, str, Severity]]:
    what = f"{r.instance_type} in {r.zone}"
    spot, od = r.spot_price_per_hour, r.price_per_hour
    if spot is not None and spot > od:
        yield ("spot", f"{what}: spot_price_per_hour {spot:g} is above price_per_hour {od:g}; "
                       "fix the prices, or leave spot_price_per_hour empty", "error")
    elif spot is not None and spot < MIN_SPOT_FRACTION * od and (r.provider, r.zone, r.instance_type) not in \
            exceptions:
        yield ("spot-discount", f"{what}: spot_price_per_hour {spot:g} is {spot / od:.1%} of on-demand {od:g}, "
                                f"below {MIN_SPOT_FRACTION:.0%}; check the price (placement may rank it at its "
                                "siblings' median)", "warning")
    if r.gpu is not None:
        spec = gpus.lookup(r.gpu)
        if spec is not None and gpus.variant_for(spec.name, r.gpu_memory_gib) is None:
            yield ("gpu", f"{what}: {r.gpu_memory_gib:g} GiB per GPU is not {spec.name}'s memory "
                          f"({spec.usable:g} GiB usable); fix gpu_memory_gib or name the variant "
                          f"({', '.join(f'{g.name} {g.usable:g}' for g in gpus.variants(spec.name))})", "error")
    if cat is None:
        return
    fam = cat.family_of(r.instance_type)
    if r.gpu is not None and fam is not None:
        if fam.gpu != r.gpu:
            yield ("gpu", f"{what}: gpu {r.gpu}, but {r.instance_type} carries {fam.gpu} ({r.provider}'s instance "
                          f"families); fix gpu", "error")
        elif not 1 <= r.gpu_count <= fam.max_gpus:
            yield ("gpu", f"{what}: gpu_count {r.gpu_count}, but its family has 1 to {fam.max_gpus}; fix gpu_count",
                   "error")
    shape = cat.shape_of(r.instance_type)
    if shape is not None:
        if r.gpu_count != shape.gpus:
            yield ("shape", f"{what}: gpu_count {r.gpu_count}, the instance type has {shape.gpus}; fix gpu_count",
                   "error")
        for col, have, want in (("vcpus", r.vcpus, shape.vcpus), ("memory_gib", r.memory_gib, shape.memory_gib)):
            if have and abs(have - want) > SHAPE_TOLERANCE * want:
                yield ("shape", f"{what}: {col} {have:g}, the instance type has {want:g}; fix {col}", "error")
