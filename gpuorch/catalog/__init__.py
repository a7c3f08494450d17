"""The offers catalog: the shipped offline snapshot, or a user's CSV (``--catalog FILE``).

The snapshot is the union of the installed adapters' shipped rows (each adapter's
``data/offers.csv``, named by its ``AdapterCatalog`` in ``gpuorch.catalogs``); the core holds
no cloud's rows. ``load_offers`` is what the daemon calls; results are cached per process (per
path, size and modification time), and each call returns a fresh list of the same frozen
``Offer`` objects. Provenance of the snapshot and the billing rules: docs/catalog.md.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from gpuorch import gpus
from gpuorch.catalog.rows import COLUMNS, OfferRow, parse_csv, read_csv, write_csv
from gpuorch.errors import UserInputError

Market = Literal["any", "spot", "on-demand"]

_ROWS: dict[tuple[str, int, int], list[OfferRow]] = {}
_FLAGGED: dict[tuple[str, int, int], list[str]] = {}

__all__ = ["COLUMNS", "OfferRow", "flagged", "load_rows", "parse_csv", "read_csv", "select", "snapshot_files",
           "write_csv"]


def snapshot_files() -> list[Path]:
    """The shipped catalog: each installed adapter's rows file, in provider order."""
    from gpuorch.catalog.registry import catalogs

    return [c.rows for c in catalogs().values() if c.rows is not None]


def catalog_key(path: str | os.PathLike[str]) -> tuple[str, int, int]:
    p = str(path)
    try:
        st = os.stat(p)
    except OSError as e:
        raise UserInputError(f"{p}: cannot read the catalog ({e.strerror}); check the path") from None
    return p, st.st_size, st.st_mtime_ns


_STRICT = [False]  # gpuhunt price lists: refuse a file with a malformed row (``--strict``), or skip the row


@contextlib.contextmanager
def strict_rows(strict: bool) -> Iterator[None]:
    """Within: price lists in gpuhunt's format are read ``strict`` (``offers``/``plan --strict``)."""
    before, _STRICT[0] = _STRICT[0], strict
    try:
        yield
    finally:
        _STRICT[0] = before


def load_rows(path: str | os.PathLike[str] | None = None) -> list[OfferRow]:
    """Catalog rows from ``path``, or the shipped snapshot when None. Raises UserInputError.

    A file other than a shipped one is audited row by row (``gpuorch.catalog.audit``): a row
    that fails a check is refused with one line naming its line and the fix; implausible spot
    discounts are kept and listed by ``flagged(path)``. The shipped rows pass the audit (a test
    holds them to it), so loading them skips it."""
    if path is None:
        return [r for f in snapshot_files() for r in load_rows(f)]
    key = catalog_key(path)
    if key not in _ROWS or _STRICT_OF.get(key) != _STRICT[0]:
        lines: list[int] = []
        skipped: list[str] = []
        kind: list[str] = []
        rows = read_csv(key[0], lines, strict=_STRICT[0], skipped=skipped, kind=kind)
        if Path(key[0]) in snapshot_files():
            _FLAGGED[key] = []
        else:  # a gpuhunt list read leniently drops the rows the audit refuses, as it drops malformed ones
            rows, audited = _audit(rows, lines, key[0], skip=kind == ["gpuhunt"] and not _STRICT[0])
            _FLAGGED[key] = skipped + audited
        _ROWS[key], _STRICT_OF[key] = rows, _STRICT[0]
    return list(_ROWS[key])


_STRICT_OF: dict[tuple[str, int, int], bool] = {}


def _audit(rows: list[OfferRow], lines: list[int], source: str, skip: bool = False) -> tuple[list[OfferRow], list[str]]:
    """The rows kept and the lines to warn of. An error refuses the file, or with ``skip`` leaves its row out."""
    from gpuorch.catalog.audit import audit_rows, errors

    findings = audit_rows(rows)
    bad = errors(findings)
    if bad and not skip:
        raise UserInputError(bad[0].line(source, lines.__getitem__))
    dropped = {f.index for f in bad}
    kept = [r for i, r in enumerate(rows) if i not in dropped]
    return kept, [f.line(source, lines.__getitem__) + (" (row skipped)" if f.index in dropped else "")
                  for f in findings]


def flagged(path: str | os.PathLike[str]) -> list[str]:
    """The audit's warnings for a catalog ``load_rows(path)`` read (one line each), else []."""
    return list(_FLAGGED.get(catalog_key(path), ()))



def gpu_matcher(name: str) -> set[str]:
    """Canonical GPU names a user's ``--gpu NAME`` selects: a family name (A100, H100, V100)
    selects every memory/form variant, a variant name (A100-80GB, A100-40GB) only itself."""
    spec = gpus.lookup(name)
    if spec is None:
        raise UserInputError(f"unknown GPU {name!r}; known: {', '.join(gpus.known_names())}")
    if not gpus.is_family_name(name):
        return {spec.name}
    return {g.name for g in gpus.variants(spec.name)}


def select(
    rows: list[OfferRow],
    *,
    gpu: str | None = None,
    min_vram_gib: float | None = None,
    market: Market = "any",
    provider: str | None = None,
    region: str | None = None,
) -> list[tuple[OfferRow, float]]:
    """Rows that match, each with the price it is listed at, cheapest first. ``any`` lists an
    offer at its lower price (spot when it has one)."""
    names = gpu_matcher(gpu) if gpu else None
    out: list[tuple[OfferRow, float]] = []
    for r in rows:
        if names is not None and r.gpu not in names:
            continue
        if min_vram_gib is not None and (r.gpu is None or not gpus.memory_matches(r.gpu_memory_gib, min_vram_gib)):
            continue
        if provider and r.provider != provider.lower():
            continue
        if region and r.region != region:
            continue
        if market == "spot" and r.spot_price_per_hour is None:
            continue
        if market == "on-demand" or r.spot_price_per_hour is None:
            price = r.price_per_hour
        elif market == "spot":
            price = r.spot_price_per_hour
        else:
            price = min(r.price_per_hour, r.spot_price_per_hour)
        out.append((r, price))
    out.sort(key=lambda rp: (rp[1], rp[0].provider, rp[0].zone, rp[0].instance_type))
    return out
