"""Catalog rows and their CSV form (the shipped snapshot and ``--catalog FILE`` share it).

Kept free of pydantic so ``gpuorch offers`` starts fast; ``load_offers`` turns rows into the
typed ``Offer`` of the provider port. Every error names the file, the line and the column.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from typing import IO, NamedTuple

from gpuorch import gpus
from gpuorch.catalog.notes import skip_note, strict_refusal
from gpuorch.catalog.registry import billing_rule
from gpuorch.errors import UserInputError
from gpuorch.money import billing

COLUMNS = (
    "provider", "region", "zone", "instance_type", "gpu", "gpu_count", "gpu_memory_gib", "vcpus",
    "memory_gib", "price_per_hour", "spot_price_per_hour", "interconnect", "billing_granularity_s",
)  # fmt: skip
OPTIONAL_COLUMNS = ("min_billing_s", "interruption_bucket")
INTERCONNECTS = {  # accepted spellings -> the canonical name
    "nvlink": "nvlink", "nvswitch": "nvlink", "pcie": "pcie",
    "infinity-fabric": "infinity-fabric", "xgmi": "infinity-fabric",
}  # fmt: skip
BUCKETS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")


class OfferRow(NamedTuple):
    """Field for field the ``gpuorch.provider.port.Offer`` model."""

    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str | None
    gpu_count: int
    gpu_memory_gib: float
    vcpus: float
    memory_gib: float
    price_per_hour: float
    spot_price_per_hour: float | None
    billing_granularity_s: int
    min_billing_s: int
    interconnect: str | None
    interruption_bucket: str | None


class Dropped(NamedTuple):
    """A row a snapshot builder read from its source but does not ship, and why (``check``: the
    audit's check, or the builder's own; ``reason``: the values and what is wrong with them)."""

    row: OfferRow
    check: str
    reason: str


class _BadValue(ValueError):
    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column


def _number(raw: dict[str, str], col: str, *, required: bool = False, integer: bool = False) -> float | None:
    text = (raw.get(col) or "").strip()
    if not text:
        if required:
            raise _BadValue(col, "is empty; give a number")
        return None
    try:
        value = float(text)
    except ValueError:
        raise _BadValue(col, f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise _BadValue(col, f"{text!r} must be a non-negative number")
    if integer and value != int(value):
        raise _BadValue(col, f"{text!r} must be a whole number")
    return value


def number_text(value: float) -> str:
    """A number as short as it reads back exactly: two different prices never print alike
    (``27.433`` and ``27.4331``, not ``27.433`` twice)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


_VARIANTS: dict[tuple[str, float | None, str, str], gpus.GpuSpec | None] = {}


def _variant(name: str, memory: float | None, provider: str, instance_type: str) -> gpus.GpuSpec:
    """The GPU a row means. Price lists name the model and give the memory apart (A100 with 80 GiB
    is A100-80GB); where the instance type's family is known (its adapter's ``families``), a
    family name (``A100``) with that variant's memory is the variant the instance carries (the
    A100 80GB PCIe of Standard_NC24ads_A100_v4), not the table's first of that size. Memoised:
    a 50k-row list has a few dozen kinds of row."""
    key = (name, memory, provider, instance_type)
    if key not in _VARIANTS:
        spec = gpus.variant_for(name, memory)
        if gpus.is_family_name(name):
            from gpuorch.catalog.registry import catalog_of

            cat = catalog_of(provider)
            fam = cat.family_of(instance_type) if cat is not None else None
            carried = gpus.lookup(fam.gpu) if fam is not None else None
            if carried is not None and gpus.family(carried.name) == gpus.family(name) and \
                    gpus.variant_for(carried.name, memory) is not None:
                spec = carried
        _VARIANTS[key] = spec
    found = _VARIANTS[key]
    if found is None:
        assert memory is not None  # a known name without memory is its own spec
        known = ", ".join(f"{g.name} {g.usable:g}" for g in gpus.variants(name))
        raise _BadValue("gpu_memory_gib", f"{name} with {memory:g} GiB per GPU is no variant gpuorch knows "
                                          f"({known} GiB); fix gpu_memory_gib, or name the variant in gpu")
    return found


def _text(raw: dict[str, str], col: str) -> str:
    text = (raw.get(col) or "").strip()
    if not text:
        raise _BadValue(col, "is empty")
    return text


# The columns that say what a row sells (not where, nor at what price): a large list repeats a
# few hundred combinations, so each is parsed once (``_what``) and the rest of a row is prices.
_WHAT_COLUMNS = ("gpu", "gpu_count", "gpu_memory_gib", "vcpus", "memory_gib", "interconnect", "interruption_bucket",
                 "billing_granularity_s", "min_billing_s")
_What = tuple[str | None, int, float, float, float, int, int, str | None, str | None]
_WHATS: dict[tuple[str | None, ...], _What | tuple[str, str]] = {}


def parse_row(raw: dict[str, str]) -> OfferRow:
    provider = _text(raw, "provider").lower()
    region = _text(raw, "region")
    instance_type = _text(raw, "instance_type")
    key = (provider, instance_type, *(raw.get(c) for c in _WHAT_COLUMNS))
    what = _WHATS.get(key)
    if what is None:
        try:
            what = _what(raw, provider, instance_type)
        except _BadValue as e:
            what = (e.column, str(e))
        if len(_WHATS) > 100_000:
            _WHATS.clear()
        _WHATS[key] = what
    if len(what) == 2:
        raise _BadValue(*what)
    gpu, count, memory, vcpus, ram, increment, minimum, link, bucket = what
    return OfferRow(provider, region, (raw.get("zone") or "").strip() or region, instance_type, gpu, count, memory,
                    vcpus, ram, _number(raw, "price_per_hour", required=True) or 0.0,
                    _number(raw, "spot_price_per_hour"), increment, minimum, link, bucket)


def _what(raw: dict[str, str], provider: str, instance_type: str) -> _What:
    gpu_name = (raw.get("gpu") or "").strip()
    spec = gpus.lookup(gpu_name) if gpu_name else None
    if gpu_name and spec is None:
        raise _BadValue("gpu", f"unknown GPU {gpu_name!r}; known: {', '.join(gpus.known_names())}")
    count = int(_number(raw, "gpu_count", integer=True) or 0)
    if spec is not None and count < 1:
        raise _BadValue("gpu_count", f"must be at least 1 for a {spec.name} row")
    memory = _number(raw, "gpu_memory_gib")
    if spec is not None:
        spec = _variant(gpu_name, memory, provider, instance_type)
    link = (raw.get("interconnect") or "").strip().lower()
    if link and link not in INTERCONNECTS:
        raise _BadValue("interconnect", f"{link!r} is not one of {', '.join(sorted(set(INTERCONNECTS.values())))}")
    bucket = (raw.get("interruption_bucket") or "").strip() or None
    if bucket is not None and bucket not in BUCKETS:
        raise _BadValue("interruption_bucket", f"{bucket!r} is not one of {', '.join(BUCKETS)}")
    increment = _number(raw, "billing_granularity_s", integer=True)
    if increment == 0:
        raise _BadValue("billing_granularity_s", "must be at least 1 second")
    minimum = _number(raw, "min_billing_s", integer=True)
    # An empty billing column takes the provider's rule (its adapter's catalog, through the registry).
    rule = billing_rule(provider) if increment is None or minimum is None else billing.DEFAULT_RULE
    return (spec.name if spec else None, count if spec else 0,
            memory if memory is not None else (spec.usable if spec else 0.0),
            _number(raw, "vcpus") or 0.0, _number(raw, "memory_gib") or 0.0,
            int(increment) if increment is not None else rule.increment_s,
            int(minimum) if minimum is not None else rule.minimum_s,
            INTERCONNECTS[link] if link else None, bucket)


def parse_csv(lines: Iterable[str], source: str, line_numbers: list[int] | None = None, *, strict: bool = True,
              skipped: list[str] | None = None, kind: list[str] | None = None) -> list[OfferRow]:
    """Rows of a catalog CSV; ``line_numbers``, when given, receives each row's line in the file.

    gpuorch's columns, or gpuhunt's (``gpuorch.catalog.gpuhunt``). A malformed row is refused with
    ``strict`` (one line naming the line, the column and the fix), else left out and its line
    appended to ``skipped``; either format alike. ``kind``, when given, receives the format read:
    ``gpuorch`` or ``gpuhunt``."""
    reader = csv.DictReader(lines)
    header = [h.strip() for h in reader.fieldnames or ()]
    missing = [c for c in COLUMNS if c not in header]
    from gpuorch.catalog import gpuhunt

    found = "gpuhunt" if missing and gpuhunt.is_gpuhunt(header) else "gpuorch"
    if kind is not None:
        kind.append(found)
    if found == "gpuorch" and missing:
        raise UserInputError(
            f"{source} line 1: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
            f"the header needs {','.join(COLUMNS)}, or gpuhunt's (instance_name,location,price,...,provider)"
        )
    reader.fieldnames = header
    notes = skipped if skipped is not None else []
    if found == "gpuhunt":
        got = gpuhunt.convert(reader, source, strict)
        notes.extend(got.skipped)
        return _parse_rows(zip(got.raws, got.lines, strict=True), source, line_numbers, strict, notes,
                           gpuhunt.THEIRS)
    return _parse_rows(((raw, reader.line_num) for raw in reader), source, line_numbers, strict, notes, {})


def _parse_rows(raws: Iterable[tuple[dict[str, str], int]], source: str, line_numbers: list[int] | None,
                strict: bool, notes: list[str], column_names: dict[str, str]) -> list[OfferRow]:
    """Each raw row parsed; a bad one refused with ``strict``, else skipped with a note. ``column_names``
    maps our columns to the file's (gpuhunt's), so a message names the column the user wrote."""
    rows: list[OfferRow] = []
    for raw, line in raws:
        if not (raw.get("provider") or "").strip() and not any((v or "").strip() for v in raw.values()
                                                              if isinstance(v, str)):
            continue  # blank line
        try:
            rows.append(parse_row(raw))
        except _BadValue as e:
            text = f"{source} line {line}, column {column_names.get(e.column, e.column)}: {e}"
            if strict:
                raise UserInputError(strict_refusal(text)) from None
            notes.append(skip_note(text))
            continue
        if line_numbers is not None:
            line_numbers.append(line)
    return rows


MAX_CATALOG_BYTES = 64 << 20  # the shipped catalogs are a few KiB; every cloud's GPU offers, a few MiB


def read_csv(path: str, line_numbers: list[int] | None = None, *, strict: bool = True,
             skipped: list[str] | None = None, kind: list[str] | None = None) -> list[OfferRow]:
    """A catalog file's rows; read bounded (``/dev/zero`` is refused, not read until memory ends)."""
    from gpuorch.userfile import read_text

    text = read_text(path, option=path, what="the catalog (a CSV file)", limit=MAX_CATALOG_BYTES)
    return parse_csv(io.StringIO(text, newline=""), path, line_numbers, strict=strict, skipped=skipped, kind=kind)


def write_csv(rows: Iterable[OfferRow], out: IO[str], extra: tuple[tuple[str, str], ...] = ()) -> None:
    """Rows in our CSV format; ``extra``: (column, value) pairs written after the standard columns on
    every row (the snapshot's ``source``/``as_of``, which the reader ignores)."""
    writer = csv.writer(out, lineterminator="\n")
    fields = OfferRow._fields
    writer.writerow((*fields, *(c for c, _ in extra)))
    for row in rows:
        cells = ["" if v is None else (f"{v:.10g}" if isinstance(v, float) else v) for v in row]
        writer.writerow((*cells, *(v for _, v in extra)))
