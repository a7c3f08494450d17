"""Price lists in gpuhunt's CSV format (dstack's offer catalog: github.com/dstackai/gpuhunt), read
as gpuorch catalog rows, so ``--catalog FILE`` takes a list a user keeps with gpuhunt's tools.

gpuhunt's columns: ``instance_name, location, price, cpu, memory, gpu_count, gpu_name,
gpu_memory, spot, disk_size, gpu_vendor, flags, provider``; one row per market, so an instance's
on-demand and spot prices are two rows (``spot`` False / True), which become one gpuorch row
(``price_per_hour``, ``spot_price_per_hour``). ``memory`` and ``gpu_memory`` are GB, read as GiB
(the GPU table's variant tolerance covers the difference); ``disk_size`` and ``flags`` have no
gpuorch column; billing comes from the provider's adapter (an empty billing column). gpuhunt's
provider names become gpuorch's (``lambdalabs`` -> ``lambda``, ``vastai`` -> ``vast``).

Each row is parsed by ``rows.parse_row`` and audited by ``audit.py`` like any catalog's, and
handled as a row of ours is (``rows.parse_csv``): a malformed row is reported with its line and
the gpuhunt column at fault; ``strict`` refuses the whole file at the first one (one line),
otherwise the row is skipped and its line kept as a warning. Rows that sell no GPU gpuorch
schedules (TPUs, Gaudi) and spot-only rows (gpuorch's rows need an on-demand price) are skipped
the same way. Stdlib only.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuorch.catalog.notes import skip_note, strict_refusal
from gpuorch.errors import UserInputError

COLUMNS = ("instance_name", "location", "price", "cpu", "memory", "gpu_count", "gpu_name", "gpu_memory", "spot",
           "disk_size", "gpu_vendor", "flags", "provider")
REQUIRED = ("instance_name", "location", "price", "gpu_count", "gpu_name", "spot", "provider")
GPU_VENDORS = ("", "nvidia", "amd")  # gpuhunt's AcceleratorVendor values gpuorch schedules
# Our column -> the gpuhunt column a message names.
THEIRS = {"provider": "provider", "region": "location", "zone": "location", "instance_type": "instance_name",
          "gpu": "gpu_name", "gpu_count": "gpu_count", "gpu_memory_gib": "gpu_memory", "vcpus": "cpu",
          "memory_gib": "memory", "price_per_hour": "price", "spot_price_per_hour": "price"}
_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False, "": False}
# gpuhunt's provider names (its providers' ``NAME``) -> gpuorch's, where they differ; the rest
# (aws, gcp, azure, runpod, ...) are the same words.
PROVIDERS = {"lambdalabs": "lambda", "vastai": "vast"}


def is_gpuhunt(header: Iterable[str]) -> bool:
    return set(REQUIRED) <= {h.strip() for h in header}


@dataclass
class Result:
    raws: list[dict[str, str]] = field(default_factory=list)  # gpuorch-column rows
    lines: list[int] = field(default_factory=list)  # each one's line in the file
    skipped: list[str] = field(default_factory=list)  # one line per row left out, for the user


@dataclass
class _Group:
    line: int
    raw: dict[str, str]
    on_demand: str | None = None
    spot: str | None = None
    spot_line: int = 0


def convert(reader: csv.DictReader[str], source: str, strict: bool) -> Result:
    """gpuhunt rows of ``reader`` (its header already read) as gpuorch-column rows."""
    out = Result()

    def bad(line: int, column: str, message: str) -> None:
        text = f"{source} line {line}, column {column}: {message}"
        if strict:
            raise UserInputError(strict_refusal(text))
        out.skipped.append(skip_note(text))

    groups: dict[tuple[str, str, str], _Group] = {}
    for raw in reader:
        line = reader.line_num
        row = {k.strip(): (v or "").strip() for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}
        if not any(row.values()):
            continue
        vendor = row.get("gpu_vendor", "").lower()
        if vendor not in GPU_VENDORS:
            bad(line, "gpu_vendor", f"{vendor!r} accelerators are not GPUs gpuorch schedules (nvidia, amd)")
            continue
        spot = _BOOL.get(row.get("spot", "").lower())
        if spot is None:
            bad(line, "spot", f"{row.get('spot')!r} is not True or False")
            continue
        key = (row.get("provider", "").lower(), row.get("location", ""), row.get("instance_name", ""))
        g = groups.setdefault(key, _Group(line, row))
        if (g.spot if spot else g.on_demand) is not None:
            bad(line, "spot", f"a second {'spot' if spot else 'on-demand'} row for {key[2]} in {key[1]}; keep one")
            continue
        if spot:
            g.spot, g.spot_line = row.get("price", ""), line
        else:
            g.on_demand, g.line, g.raw = row.get("price", ""), line, row
    for (provider, location, name), g in groups.items():
        if g.on_demand is None:
            bad(g.spot_line, "spot", f"{name} in {location} has a spot price and no on-demand row; gpuorch's rows "
                                     "need the on-demand price (add its spot=False row)")
            continue
        r = g.raw
        out.raws.append({
            "provider": PROVIDERS.get(provider, provider), "region": location, "zone": location, "instance_type": name,
            "gpu": r.get("gpu_name", "") if _count(r) else "", "gpu_count": r.get("gpu_count", ""),
            "gpu_memory_gib": r.get("gpu_memory", "") if _count(r) else "", "vcpus": r.get("cpu", ""),
            "memory_gib": r.get("memory", ""), "price_per_hour": g.on_demand, "spot_price_per_hour": g.spot or "",
            "interconnect": "", "billing_granularity_s": "", "min_billing_s": "",
        })
        out.lines.append(g.line)
    return out


def _count(r: dict[str, str]) -> bool:
    """Whether the row sells GPUs (a count above 0); a CPU-only row keeps no GPU name."""
    try:
        return float(r.get("gpu_count") or 0) > 0
    except ValueError:
        return True  # parse_row names the bad count
