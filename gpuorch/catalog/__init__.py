"""The offers catalog: the shipped offline snapshot, or a user's CSV (``--catalog FILE``).

The snapshot is the union of the installed adapters' shipped rows (each adapter's
``data/offers.csv``, named by its ``AdapterCatalog`` in ``gpuorch.catalogs``); the core holds
no cloud's rows. ``load_offers`` is what the daemon calls; results are cached per process (per
path, size and modification time), and each call returns a fresh list of the same frozen
``Offer`` objects. Provenance of the snapshot and the billing rules: docs/catalog.md.
"""

from __future__ import annotations

import contextlib
import io
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


_STRICT = [False]  # a --catalog with a bad row: refused (``--strict``), or the row skipped and named


@contextlib.contextmanager
def strict_rows(strict: bool) -> Iterator[None]:
    """Within: catalog files (ours or gpuhunt's) are read ``strict`` (``offers``/``plan --strict``)."""
    before, _STRICT[0] = _STRICT[0], strict
    try:
        yield
    finally:
        _STRICT[0] = before


def strict_now() -> bool:
    """Whether catalog files are read strict here (within ``strict_rows(True)``)."""
    return _STRICT[0]


def load_rows(path: str | os.PathLike[str] | None = None) -> list[OfferRow]:
    """Catalog rows from ``path``, or the shipped snapshot when None. Raises UserInputError.

    A file other than a shipped one is parsed and audited row by row (``gpuorch.catalog.audit``):
    a row that does not parse or fails a check is left out, with one line naming its line, column,
    values and the fix (``flagged(path)``), and the rest is used; within ``strict_rows(True)`` the
    first such row refuses the file instead. Implausible spot discounts are kept and flagged. The
    audit's result is cached by the file's content hash (``auditcache``). The shipped rows pass the
    audit (the snapshot build drops those that do not; a test holds them to it), so loading them
    skips it."""
    if path is None:
        return [r for f in snapshot_files() for r in load_rows(f)]
    key = catalog_key(path)
    if key not in _ROWS or _STRICT_OF.get(key) != _STRICT[0]:
        if Path(key[0]) in snapshot_files():
            rows, _FLAGGED[key] = read_csv(key[0]), []
        else:
            rows, _FLAGGED[key] = _read_audited(key[0], _STRICT[0])
        _ROWS[key], _STRICT_OF[key] = rows, _STRICT[0]
    return list(_ROWS[key])


_STRICT_OF: dict[tuple[str, int, int], bool] = {}


def _read_audited(path: str, strict: bool) -> tuple[list[OfferRow], list[str]]:
    """A user's catalog: the rows kept and the lines to warn of."""
    from gpuorch.catalog import auditcache
    from gpuorch.catalog.audit import audit_rows, errors
    from gpuorch.catalog.notes import skip_note, strict_refusal
    from gpuorch.catalog.rows import MAX_CATALOG_BYTES
    from gpuorch.userfile import read_text

    text = read_text(path, option=path, what="the catalog (a CSV file)", limit=MAX_CATALOG_BYTES)
    lines: list[int] = []
    notes: list[str] = []
    rows = parse_csv(io.StringIO(text, newline=""), path, lines, strict=strict, skipped=notes)
    content = text.encode()
    cached = auditcache.load(content)
    findings = audit_rows(rows) if cached is None else cached
    bad = errors(findings)
    if bad and strict:
        raise UserInputError(strict_refusal(bad[0].line(path, lines.__getitem__)))
    if cached is None:
        auditcache.store(content, findings)
    dropped = {f.index for f in bad}
    for f in findings:
        text = f.line(path, lines.__getitem__)
        notes.append(skip_note(text) if f.severity == "error" else text)
    return [r for i, r in enumerate(rows) if i not in dropped], notes


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
