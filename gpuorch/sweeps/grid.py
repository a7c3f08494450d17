"""The order a grid's trials run in: every parameter's values interleaved, so that the first k
trials cover each parameter as evenly as k trials can. Pure.

A small cap or an early deadline runs only the first few trials of a grid; in the cartesian
product's order (the last parameter fastest) those all share the first values of the other
parameters (issue 35: a 3x3 LR x SEED grid whose first three trials all had one learning rate).

The order: trial ``i`` takes value ``(i + t_j(p)) mod n_j`` of parameter ``j`` (``n_j`` values),
where ``p = i // L`` is its period, ``L`` the least common multiple of the ``n_j``, and ``t(p)``
the period's shift vector. Within any aligned block of ``n_j`` consecutive trials, parameter
``j`` takes each of its values once, whatever the shifts (``L`` is a multiple of ``n_j``, so
the shift is constant over the block): every prefix of the order is balanced within one use per
value, for every parameter at once. Within a period the trials differ (``i -> (i mod n_j)_j`` is
one-to-one on ``[0, L)``); the shifts are representatives of the distinct cosets of the diagonal
``(1, ..., 1)`` in ``Z_n1 x ... x Z_nm`` (``t_1 = 0``, ``t_j < gcd(lcm(n_1..n_j-1), n_j)``), so
different periods never repeat a trial: the order is a permutation of the grid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _shifts(sizes: Sequence[int]) -> list[tuple[int, ...]]:
    """One shift vector per period: the coset representatives, in mixed-radix order."""
    radices, lcm = [1], sizes[0] if sizes else 1
    for n in sizes[1:]:
        radices.append(math.gcd(lcm, n))
        lcm = lcm * n // math.gcd(lcm, n)
    out: list[tuple[int, ...]] = [()]
    for r in radices:
        out = [(*t, d) for d in range(r) for t in out]  # the earlier parameters' shifts change fastest
    return out


def interleaved(sizes: Sequence[int]) -> list[tuple[int, ...]]:
    """The grid of ``sizes`` (values per parameter, each >= 1) as value indices, in the order
    the trials run: a permutation of the cartesian product (module docstring)."""
    if not sizes:
        return [()]
    lcm = math.lcm(*sizes)
    out = []
    for shift in _shifts(sizes):
        for i in range(lcm):
            out.append(tuple((i + t) % n for t, n in zip(shift, sizes, strict=True)))
    return out
