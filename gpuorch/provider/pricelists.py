"""The daemon's ``catalog_files:``: price lists a user keeps, in gpuorch's CSV or gpuhunt's.

Each file is read as ``--catalog FILE`` reads one (``gpuorch.catalog.load_rows``: every row parsed
and audited; gpuhunt's format recognised by its header, ``gpuorch.catalog.gpuhunt``). A row that
does not parse or fails the audit is left out with one line naming the file, its line, the column
and the fix; with ``catalog_strict`` the first such row refuses the whole configuration instead
(the daemon does not start; ``gpuorch offers`` exits 2).

What the rows mean: a provider named by any row of the files is priced from the files alone. Its
offers (for placement, ``plan`` and ``offers``) are those rows, and its own live or shipped
offers are not used while the configuration names the files; every other enabled provider keeps
its own. Rows of a provider that is not enabled are not used, and one line says how many.
``submit``'s fit check still reads the providers' shipped catalogs (it runs without the daemon).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from gpuorch.errors import UserInputError
from gpuorch.provider.port import Offer


def price_lists(files: Sequence[Path], enabled: Iterable[str], *,
                strict: bool) -> tuple[dict[str, list[Offer]], list[str]]:
    """Offers by provider from ``files`` (only enabled providers'), and the lines to warn of.

    Raises UserInputError (one line naming ``catalog_files``): a file that cannot be read, a
    malformed row under ``strict``, or files with no usable row of an enabled provider.
    """
    from gpuorch import catalog as cat
    from gpuorch.provider.catalog import load_offers

    on = set(enabled)
    by_provider: dict[str, list[Offer]] = {}
    notes: list[str] = []
    for path in files:
        try:
            with cat.strict_rows(strict):
                offers = load_offers(path)
        except UserInputError as e:  # the daemon's knob named beside the command's flag
            text = str(e).replace("leave out --strict", "set catalog_strict: false (or leave out --strict)")
            raise UserInputError(f"catalog_files: {text}") from None
        notes += [f"catalog_files: {line}" for line in cat.flagged(path)]
        unused: dict[str, int] = {}
        for o in offers:
            if o.provider in on:
                by_provider.setdefault(o.provider, []).append(o)
            else:
                unused[o.provider] = unused.get(o.provider, 0) + 1
        if unused:
            named = ", ".join(f"{n} {p}" for p, n in sorted(unused.items()))
            notes.append(f"catalog_files: {path}: rows of providers that are not enabled are not used ({named}); "
                         "enable them under providers: to use their rows")
    if files and not by_provider:
        raise UserInputError(f"catalog_files: no row of {', '.join(map(str, files))} prices an enabled provider "
                             f"({', '.join(sorted(on)) or 'none'}); name an enabled provider in the rows' provider "
                             "column, or enable theirs")
    return by_provider, notes
