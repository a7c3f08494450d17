"""The lines a catalog reader prints for a bad row, in either CSV format (ours or gpuhunt's):
skipped with a warning, or the whole file refused under ``--strict``. Their own module so that
``rows`` and ``gpuhunt``, which read each other's format, need not import each other for them."""

from __future__ import annotations


def skip_note(text: str) -> str:
    """A skipped row's line (``offers``/``plan`` print it as a warning)."""
    return f"{text} (row skipped)"


def strict_refusal(text: str) -> str:
    """The one line that refuses a whole file under ``--strict``."""
    return f"{text}; fix the row, or leave out --strict to skip it"
